//! Conflict checking: what a write batch meets on each of its keys before it is
//! decided (`Tablet::check_ops` for a batch, `Tablet::check_key` for one key,
//! `Tablet::check_live` for a write if live): other transactions' intents
//! (pending: wait or fail; committed or aborted: finished in passing), versions
//! committed after the writer's read time (40001), live keys for an insert
//! (23505), a deletion of every row in the way, and for patches the
//! column-level rules (docs/architecture.md, "Column-level conflicts"). It only
//! reads and fills the batch; `tablet/mod.rs` decides and replicates.

use super::*;

/// The strength another transaction's pending intent holds its row with: a put is
/// NO KEY UPDATE (an update keeping the key), a delete UPDATE, a lock intent what its
/// data byte says (no byte: UPDATE).
pub(super) fn intent_strength(r: &IntentRecord) -> LockStrength {
    match r.kind {
        IntentKind::Put | IntentKind::Patch => LockStrength::NoKeyUpdate,
        IntentKind::Delete => LockStrength::Update,
        IntentKind::Lock => LockStrength::from_byte(r.data.first().copied()).unwrap_or(LockStrength::Update),
    }
}

/// Whether `r` holds a pending deletion of every row of the tablet.
pub(super) fn is_deletion_mark(r: &IntentRecord) -> bool {
    r.kind == IntentKind::Lock && r.data == [DELETE_ALL_MARK]
}

/// What a write batch's checks read with: a cursor over the regular column
/// family, and one over the intents of the batch's key range if the tablet holds
/// intents at all.
pub(super) struct Probes<'s, S: Snapshot + 's> {
    pub(super) regular: KeyCursor<S::Iter<'s>>,
    pub(super) intents: IntentProbe<'s, S>,
    /// The newest committed deletion of every row, and whether the writing
    /// transaction deleted every row itself (see [`Tablet::deletion_in_the_way`]).
    pub(super) deleted: Option<HybridTime>,
    pub(super) own_deletion: bool,
}

/// How [`Probes`] look up a key's intents.
pub(super) enum IntentProbe<'s, S: Snapshot + 's> {
    /// No transaction holds intents on the keys probed.
    None,
    /// Any may: every intent of a key is read.
    Cursor(KeyCursor<S::Iter<'s>>),
    /// For probes of one row: only these transactions may hold intents on it
    /// ([`WriteState::row_intents`]), and only theirs are read ([`holders_intents`]).
    Holders(&'s S, Vec<TxnId>),
}

/// The [`IntentProbe`] for keys `[first, last]` (one row if `intents` names its
/// holders); `probe`: the cursor probes keys in no order ([`KeyCursor::probing`]).
pub(super) fn intent_probe<'s, S: Snapshot>(snap: &'s S, intents: RowIntents, first: &[u8], last: &[u8], probe: bool) -> IntentProbe<'s, S> {
    match intents {
        RowIntents::None => IntentProbe::None,
        RowIntents::Of(holders) => IntentProbe::Holders(snap, holders),
        RowIntents::All => IntentProbe::Cursor(intents_cursor_between(snap, first, last, probe)),
    }
}

/// The writer a conflict check is for, and what the check fills in: the same for
/// every key of a batch ([`Tablet::check_ops`], [`Tablet::check_key`],
/// [`Tablet::check_live`]).
pub(super) struct Writer<'w, R: TxnStatusResolver + ?Sized> {
    /// The writing transaction (None: a write outside transactions).
    pub(super) me: Option<TxnId>,
    /// Its read time: a version committed after it conflicts (None: none does).
    pub(super) read_ht: Option<HybridTime>,
    pub(super) resolver: &'w R,
    /// Receives the finishing of other transactions' intents met on the way
    /// (committed ones applied, aborted ones removed).
    pub(super) batch: &'w mut OwnedBatch,
    /// Transactions whose pending patch of a row the writer stepped over.
    pub(super) stepped_over: &'w mut Vec<TxnId>,
}

/// One key's write, as a conflict check sees it ([`Tablet::check_key`]).
#[derive(Clone, Copy)]
pub(super) struct KeyWrite<'a> {
    pub(super) kind: WriteOpKind,
    /// The strength it holds the row with.
    pub(super) strength: LockStrength,
    /// For a patch, the attributes it depends on (reads or writes).
    pub(super) deps: Option<&'a [u16]>,
    /// A blind patch (an UPDATE by key that read nothing).
    pub(super) blind: bool,
}

/// What the tablet knows about one key while deciding a write batch.
#[derive(Clone, Copy)]
pub(super) struct KeyState {
    pub(super) live: bool,
    /// The writing transaction (or an earlier op of this batch) already wrote it,
    /// holding the row with this strength.
    pub(super) own: Option<LockStrength>,
    /// A patch of this row is stored as the whole row (see [`Tablet::check_key`]).
    pub(super) whole: bool,
    /// Time of the newest committed version, if the writer's row holds all of it
    /// (INVALID: none, or it does not: concurrent patches were stepped over).
    pub(super) latest: HybridTime,
    /// Committed patches over the newest whole version (counted for patches only,
    /// up to `patch::MAX_CHAIN + 1`).
    pub(super) chain: usize,
}

/// What a write batch does with one of its ops.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Skip,
    Write,
    /// A patch stored as the whole row its writer formed.
    WriteWhole,
    /// A patch, over the newest version at this time.
    WritePatch(HybridTime),
}

/// A patch op, parsed: the attributes it depends on (written ones included) and
/// the patch to store.
pub(super) struct PatchOp<'a> {
    pub(super) deps: Vec<u16>,
    pub(super) stored: &'a [u8],
    /// The table's row layout, if the writer sent it (empty: not sent): the
    /// tablet may then fold the row's patches ([`heap_tuple::fold`]).
    pub(super) layout: Vec<(i16, u8)>,
}

/// Per op of a batch, its patch if it is a patch op (parsed once per batch).
pub(super) fn patches_of(ops: &[WriteOp]) -> Result<Vec<Option<PatchOp<'_>>>> {
    ops.iter()
        .map(|op| {
            if op.kind != WriteOpKind::Patch {
                return Ok(None);
            }
            let d = patch::decode_patch_op(&op.value).map_err(|e| Error::InvalidRequest(format!("bad patch: {e}")))?;
            Ok(Some(PatchOp { deps: patch::union(&d.deps, &patch::decode_patch(d.patch)?.0), stored: d.patch, layout: d.layout }))
        })
        .collect()
}

/// The row of a stored patch (the whole row its writer formed).
pub(super) fn patch_row(stored: &[u8]) -> Result<&[u8]> {
    Ok(patch::patch_row(stored)?)
}

impl<E: KvEngine> Tablet<E> {
    /// [`Tablet::check_key`] for the one row of a write if live (`intents`:
    /// what to read of its intents). With it, for a blind patch over a row
    /// already carrying [`BLIND_CHAIN`] patches, the whole row the patch makes of
    /// the newest committed version, as a stored patch (its attributes, the row),
    /// when the writer sent the table's layout and nothing else is in the way
    /// (no other transaction's write, resolved here or pending; not the
    /// transaction's own row). None: the patch is refused (`NeedsRow`).
    pub(super) fn check_live<R: TxnStatusResolver + ?Sized>(
        &self,
        guard: &WriteState,
        op: &WriteOp,
        patch: Option<&PatchOp<'_>>,
        blind: bool,
        intents: RowIntents,
        w: &mut Writer<'_, R>,
    ) -> Result<(KeyState, Option<Vec<u8>>)> {
        let snap = self.engine.snapshot();
        let regular = KeyCursor::probing(snap.iter(Cf::Regular, IterOptions { prefix_same_as_start: true, ..IterOptions::default() }));
        let intents = intent_probe(&snap, intents, &op.key, &op.key, true);
        let (deleted, own_deletion) = self.deletion_in_the_way(w.me, &guard.deletions, w.resolver)?;
        let mut probes: Probes<E::Snapshot<'_>> = Probes { regular, intents, deleted, own_deletion };
        let write = KeyWrite { kind: op.kind, strength: op.strength(), deps: patch.map(|p| &p.deps[..]), blind };
        let state = self.check_key(&mut probes, &op.key, write, w)?;
        let Some(p) = patch.filter(|p| blind && !p.layout.is_empty()) else { return Ok((state, None)) };
        if !state.live
            || state.own.is_some()
            || state.chain < BLIND_CHAIN
            || state.latest == HybridTime::INVALID
            || !w.batch.is_empty()
            || !w.stepped_over.is_empty()
        {
            return Ok((state, None));
        }
        let Some((patches, base)) = probes.regular.committed_layers(&op.key)? else { return Ok((state, None)) };
        let (cols, row) = patch::decode_patch(p.stored)?;
        let mut layers: Vec<(Vec<u16>, &[u8])> = vec![(cols, row)];
        for stored in &patches {
            layers.push(patch::decode_patch(stored)?);
        }
        let refs: Vec<(&[u16], &[u8])> = layers.iter().map(|(c, r)| (&c[..], *r)).collect();
        let Some(whole) = heap_tuple::fold(&p.layout, &refs, &base) else { return Ok((state, None)) };
        let mut stored = Vec::with_capacity(whole.len() + 2 + 2 * layers[0].0.len());
        patch::encode_patch(&mut stored, &layers[0].0, &whole);
        Ok((state, Some(stored)))
    }

    /// Check every op of a batch (conflicts, uniqueness), adding the resolution of
    /// other transactions' intents to `batch`. Caller holds the write lock.
    /// `intents`: what to read of intents ([`WriteState::rows_intents`] of the ops' rows).
    /// Returns, per op, what to write: nothing (a lock on a key the transaction
    /// already wrote: its write intent excludes others already, and a lock
    /// intent of the same statement would replace it), the op, or for a patch
    /// perhaps the whole row.
    pub(super) fn check_ops<R: TxnStatusResolver + ?Sized>(
        &self,
        ops: &[WriteOp],
        patches: &[Option<PatchOp<'_>>],
        intents: RowIntents,
        deletions: &TabletDeletions,
        writer: &mut Writer<'_, R>,
    ) -> Result<Vec<Action>> {
        let snap = self.engine.snapshot();
        // One cursor per column family for the whole batch (a large batch has
        // thousands of keys, usually in ascending order: the cursors step from key
        // to key). The intents cursor is bounded to the batch's keys: resolved
        // intents leave tombstones until compaction, and a seek past the last key
        // would walk all of them.
        let (Some(first), Some(last)) = (ops.iter().map(|o| &o.key).min(), ops.iter().map(|o| &o.key).max()) else {
            return Ok(Vec::new());
        };
        // Per key: its state after this batch's earlier ops, the strength other
        // transactions' intents were checked against, and whether this batch wrote it.
        // Keys in strictly ascending order are each met once: nothing to remember.
        let ascending = ops.windows(2).all(|w| w[0].key < w[1].key);
        // Keys in no order (an insert's random keys) or a single one are probed
        // row by row through the bloom filters; ascending ones (a scan's) stepped to.
        let probe = !ascending || ops.len() == 1;
        let regular = if probe {
            KeyCursor::probing(snap.iter(Cf::Regular, IterOptions { prefix_same_as_start: true, ..IterOptions::default() }))
        } else {
            KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()))
        };
        let (deleted, own_deletion) = self.deletion_in_the_way(writer.me, deletions, writer.resolver)?;
        let mut probes: Probes<E::Snapshot<'_>> = Probes { regular, intents: intent_probe(&snap, intents, first, last, probe), deleted, own_deletion };
        // (FxHash: SipHash of every key showed in profiles of random-key inserts.)
        let mut seen: rustc_hash::FxHashMap<&[u8], (KeyState, LockStrength, bool)> = Default::default();
        let mut write = Vec::with_capacity(ops.len());
        for (op, p) in ops.iter().zip(patches) {
            let strength = op.strength();
            let key_write = KeyWrite { kind: op.kind, strength, deps: p.as_ref().map(|p| &p.deps[..]), blind: false };
            let earlier = if ascending { None } else { seen.get(&op.key[..]).copied() };
            let (state, checked, written_here) = match earlier {
                Some((s, checked, w)) if strength <= checked => (s, checked, w),
                Some((s, _, w)) => {
                    // A stronger op on a key this batch touched: check the others again.
                    self.check_key(&mut probes, &op.key, key_write, writer)?;
                    (s, strength, w)
                }
                None => (self.check_key(&mut probes, &op.key, key_write, writer)?, strength, false),
            };
            if op.kind == WriteOpKind::Insert && state.live {
                return Err(Error::DuplicateKey { tablet_id: self.id, key: op.key.clone() });
            }
            // A lock no stronger than what the transaction's own write holds adds
            // nothing; nor does one after a write of the same batch (same statement),
            // whose intent it would replace.
            write.push(if op.kind.is_lock() {
                if !written_here && state.own.is_none_or(|own| own < strength) {
                    Action::Write
                } else {
                    Action::Skip
                }
            } else if op.kind == WriteOpKind::Patch && state.whole {
                Action::WriteWhole
            } else if op.kind == WriteOpKind::Patch {
                Action::WritePatch(state.latest)
            } else {
                Action::Write
            });
            let after = match op.kind {
                WriteOpKind::Lock | WriteOpKind::LockShared => (state, checked, written_here),
                kind => (
                    KeyState {
                        live: kind != WriteOpKind::Delete,
                        own: Some(state.own.map_or(strength, |o| o.max(strength))),
                        whole: false,
                        latest: state.latest,
                        chain: 0,
                    },
                    checked,
                    true,
                ),
            };
            if !ascending {
                seen.insert(&op.key, after);
            }
        }
        Ok(write)
    }

    /// What the deletions of every row mean for a write of transaction `me` (None:
    /// outside transactions): the newest committed one (applied, or whose
    /// transaction committed), which deleted every row written before it, and
    /// whether the pending one is `me`'s own (every row it has not written since
    /// is gone for it; its writes are applied at the deletion's time, and so stay).
    /// Another transaction's pending one is a conflict with any write here (it
    /// deletes every row the write could touch, and counted the rows it deletes).
    pub(super) fn deletion_in_the_way<R: TxnStatusResolver + ?Sized>(
        &self,
        me: Option<TxnId>,
        d: &TabletDeletions,
        resolver: &R,
    ) -> Result<(Option<HybridTime>, bool)> {
        let mut newest = d.committed.last().copied();
        if let Some((txn, _)) = d.pending {
            if Some(txn) == me {
                return Ok((newest, true));
            }
            match resolver.status(txn, self.clock.now())? {
                TxnStatus::Pending => return Err(Error::WriteConflict { tablet_id: self.id, other_txn: Some(txn), committed_at: None }),
                TxnStatus::Committed { commit_ht } => {
                    self.clock.update(commit_ht);
                    newest = newest.max(Some(commit_ht));
                }
                TxnStatus::Aborted => {}
            }
        }
        Ok((newest, false))
    }

    /// Decide what writing `key` meets: resolve other transactions' intents (apply
    /// committed, drop aborted, conflict on pending), check for commits after
    /// `read_ht`, and report whether the key holds a live row.
    ///
    /// `deps`: for a patch, the attributes it depends on (reads or writes). Another
    /// transaction's pending patch, or a patch committed after `read_ht`, of none
    /// of them is no conflict: both patches stand, and reads lay one over the
    /// other. When nothing concurrent is in the way (its row is then the latest
    /// state with its changes), a non-transactional patch is stored whole (it is
    /// committed at once: any later writer commits after it), and a transaction's
    /// patch over a row already carrying [`patch::MAX_CHAIN`] patches is written
    /// as a whole-row intent: reads merge a bounded number of patches. (A
    /// transaction's other patches become whole rows when they are applied, if
    /// nothing else wrote the row meanwhile: see [`finish_key_intents`].)
    pub(super) fn check_key<S: Snapshot, R: TxnStatusResolver + ?Sized>(
        &self,
        probes: &mut Probes<'_, S>,
        key: &[u8],
        write: KeyWrite<'_>,
        w: &mut Writer<'_, R>,
    ) -> Result<KeyState> {
        let KeyWrite { kind, strength, deps, blind } = write;
        let (me, read_ht, resolver) = (w.me, w.read_ht, w.resolver);
        let batch = &mut *w.batch;
        let stepped_over = &mut *w.stepped_over;
        let mut intents = match &mut probes.intents {
            IntentProbe::None => Vec::new(),
            IntentProbe::Cursor(c) => c.intents(key)?,
            IntentProbe::Holders(snap, holders) => holders_intents(*snap, key, holders)?,
        };
        // A pending deletion of every row was decided for the whole tablet (see
        // `Tablet::deletion_in_the_way`); its own commit or abort resolves its mark.
        intents.retain(|r| !is_deletion_mark(r));
        let mut own_newest: Option<&IntentRecord> = None;
        // Committed versions of the key: (time, a patch's attributes, live).
        let mut versions: Vec<Version> = Vec::new();
        let mut others: Vec<TxnId> = Vec::new();
        for r in &intents {
            if Some(r.txn) == me {
                if r.kind != IntentKind::Lock && own_newest.is_none_or(|o| r.seq > o.seq) {
                    own_newest = Some(r);
                }
            } else if !others.contains(&r.txn) {
                others.push(r.txn);
            }
        }
        // Something this patch does not depend on changes the row concurrently.
        let mut concurrent = false;
        for other in others {
            let recs: Vec<&IntentRecord> = intents.iter().filter(|r| r.txn == other).collect();
            match resolver.status(other, self.clock.now())? {
                TxnStatus::Pending => {
                    for r in &recs {
                        if !strength.conflicts_with(intent_strength(r)) {
                            // compatible strengths (KEY SHARE with a non-key update,
                            // shared locks with each other): both hold the row
                            continue;
                        }
                        match deps {
                            Some(d)
                                if r.kind == IntentKind::Patch && !patch::intersects(&patch::decode_patch(patch::decode_patch_intent(&r.data)?.1)?.0, d) =>
                            {
                                concurrent = true;
                                stepped_over.push(other);
                            }
                            _ => return Err(Error::WriteConflict { tablet_id: self.id, other_txn: Some(other), committed_at: None }),
                        }
                    }
                }
                TxnStatus::Committed { commit_ht } => {
                    self.clock.update(commit_ht);
                    self.note_predicate_writes(&recs, commit_ht, batch);
                    // Applied whole if no one else has written the row since.
                    let alone = intents.iter().all(|r| r.txn == other || r.kind == IntentKind::Lock);
                    let regular = &mut probes.regular;
                    let fold = |base| Ok(alone && regular.latest_version(key)?.0 == Some(base));
                    if let Some(v) = finish_key_intents(batch, key, other, Some(commit_ht), &recs, true, fold, true, true)? {
                        versions.push(v);
                    }
                }
                TxnStatus::Aborted => {
                    tracing::debug!(target: "pinax_trace", tablet = self.id.0, "a writer removes intents of aborted {other} on key {key:02x?}");
                    finish_key_intents(batch, key, other, None, &recs, true, |_| Ok(false), false, true)?;
                }
            }
        }
        // Latest committed state of the key. (Patches of disjoint attributes may
        // commit in any order, so an intent resolved here can be older than a
        // stored version.)
        match deps {
            Some(_) => {
                let newer_than = read_ht.unwrap_or(HybridTime::INVALID);
                versions.extend(probes.regular.recent_versions(key, newer_than, patch::MAX_CHAIN + 1)?);
            }
            None => {
                if let (Some(ht), live) = probes.regular.latest_version(key)? {
                    versions.push(Version { ht, cols: None, live, patch: false });
                }
            }
        }
        versions.sort_by_key(|v| std::cmp::Reverse(v.ht));
        // A deletion of every row after the newest version of a live row deleted
        // it then, as a tombstone of its own would have.
        if let Some(t) = probes.deleted {
            if versions.first().is_some_and(|v| v.live && v.ht < t) {
                versions.insert(0, Version { ht: t, cols: None, live: false, patch: false });
            }
        }
        let (latest_ht, latest_live) = versions.first().map_or((None, false), |v| (Some(v.ht), v.live));
        let latest = latest_ht.unwrap_or(HybridTime::INVALID);
        if strength == LockStrength::Share && kind.is_lock() && key == &self.partition.start[..] {
            // A SERIALIZABLE range read's lock: a SERIALIZABLE writer here that
            // committed after the read time wrote what the read may have missed.
            if let Some(read_ht) = read_ht {
                let newest = HybridTime(self.predicate_write_ht.load(Ordering::Acquire));
                if newest > read_ht {
                    return Err(Error::WriteConflict { tablet_id: self.id, other_txn: None, committed_at: Some(newest) });
                }
            }
        }
        // Commits after the read time: a conflict, except patches this one does
        // not depend on. (Uniqueness is about the latest committed state, whatever
        // the snapshot.)
        if let (Some(read_ht), true) = (read_ht, kind != WriteOpKind::Insert) {
            for v in versions.iter().filter(|v| v.ht > read_ht) {
                match (&v.cols, deps) {
                    (Some(c), Some(d)) if !patch::intersects(c, d) => {
                        self.clock.update(v.ht);
                        concurrent = true;
                    }
                    _ => return Err(Error::WriteConflict { tablet_id: self.id, other_txn: None, committed_at: Some(v.ht) }),
                }
            }
        }
        // A patch written over something it did not see cannot become the whole
        // row when applied (`latest` INVALID: never folded).
        let latest = if concurrent { HybridTime::INVALID } else { latest };
        if let Some(own) = own_newest {
            // Our own earlier write decides liveness; conflicts were checked then.
            return Ok(KeyState { live: own.kind != IntentKind::Delete, own: Some(intent_strength(own)), whole: false, latest, chain: 0 });
        }
        if probes.own_deletion {
            // Deleted by the transaction's own deletion of every row, as by a
            // delete intent of its own (nothing else was written here since).
            return Ok(KeyState { live: false, own: Some(LockStrength::Update), whole: false, latest, chain: 0 });
        }
        if deps.is_some() && !latest_live && !blind {
            // A patch needs a row under it (the read that found one is outdated).
            return Err(Error::WriteConflict { tablet_id: self.id, other_txn: None, committed_at: latest_ht });
        }
        let chain = versions.iter().take_while(|v| v.patch).count();
        // A blind patch holds only the columns it assigns: never the whole row.
        let whole = deps.is_some() && !blind && !concurrent && (me.is_none() || chain >= patch::MAX_CHAIN);
        Ok(KeyState { live: latest_live, own: None, whole, latest, chain })
    }
}
