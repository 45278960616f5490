//! Finishing a transaction's intents on this tablet: applying them as versions
//! at its commit time (committed), removing them (aborted), or removing those of
//! statements rolled back to a savepoint. Three ways, by size: a keyed write of
//! the transaction's rows (`Tablet::finish_txn_keyed`, at most
//! [`FINISH_KEYED_MAX_KEYS`] keys: other rows' reads and writes go on), a walk
//! of its reverse index, or for a large transaction alone in the tablet a walk
//! of the intents column family with range deletions (`Tablet::finish_walking`).
//! Start at `Tablet::finish_txn`.

use super::*;

/// `txn`'s reverse index in `snap` (its entries `'R' ++ txn ++ esc(user key)`),
/// positioned on the first, and the length of the prefix before the key.
pub(super) fn reverse_index<S: Snapshot>(snap: &S, txn: TxnId) -> (S::Iter<'_>, usize) {
    let prefix = keys::reverse_prefix(txn);
    let upper = keys::prefix_upper_bound(&prefix);
    let len = prefix.len();
    let mut it = snap.iter(Cf::Intents, IterOptions { lower: Some(prefix), upper, prefix_same_as_start: true });
    it.seek_to_first();
    (it, len)
}

/// The outcome of rewriting a transaction's intents: a rewrite that failed may have
/// applied part of its batches (the mark of a deletion of every row, say), so what
/// the write lock's state knows about the engine is reloaded ([`Tablet::lead`])
/// before the next decision or read.
pub(super) fn reload_on_error<T>(guard: &mut WriteState, res: Result<T>) -> Result<T> {
    if res.is_err() {
        guard.term = 0;
    }
    res
}

/// Resolving at least this many intents at once compacts the intents CF afterwards:
/// a large transaction leaves as many tombstones, which every later intents
/// iterator over the range would otherwise step over one by one.
pub(super) const COMPACT_AFTER_FINISHING: usize = 20_000;

/// Rewriting a transaction's intents (commit, abort, rollback to a savepoint)
/// replicates a log entry whenever the batch reaches this size.
pub(super) const REWRITE_CHUNK_BYTES: usize = 256 << 10;

/// A keyed resolution of at most this many keys looks each key's intents up
/// through the bloom filters (a seek each); more are stepped through in order.
pub(super) const PROBED_FINISH_KEYS: usize = 64;

/// Resolving a transaction with intents on at most this many keys here (and
/// changes that fit one entry) is a keyed write of those rows: see
/// [`Tablet::finish_txn_keyed`].
pub(super) const FINISH_KEYED_MAX_KEYS: usize = 4096;

impl<E: KvEngine> Tablet<E> {
    /// Turn the intents of committed `txn` into versions at `commit_ht`.
    /// Idempotent: returns the number of keys applied (0 when nothing is left).
    pub fn apply_intents(&self, txn: TxnId, commit_ht: HybridTime) -> Result<usize> {
        self.clock.update(commit_ht);
        self.finish_txn(txn, Some(commit_ht))
    }

    /// Drop the intents of aborted `txn`. Idempotent.
    pub fn remove_intents(&self, txn: TxnId) -> Result<usize> {
        self.finish_txn(txn, None)
    }

    /// Roll `txn` back to statement `from_seq` (ROLLBACK TO SAVEPOINT): drop its
    /// intents (writes and locks) of statements numbered `from_seq` and above; its
    /// earlier intents stay. Returns the number of intents dropped. Idempotent.
    pub fn rollback_intents(&self, txn: TxnId, from_seq: u32) -> Result<usize> {
        let mut guard = self.lock_drained()?;
        let res = self.rewrite_txn_intents(&guard, txn, self.clock.now(), false, false, None, |batch, user_key, rkey, mine, _, _| {
            let mut dropped = 0;
            for r in mine.iter().filter(|r| r.seq >= from_seq) {
                batch.delete(Cf::Intents, &keys::intent_key(user_key, txn, r.seq));
                dropped += 1;
            }
            if dropped == mine.len() {
                batch.delete(Cf::Intents, rkey);
            }
            Ok(dropped)
        });
        let n = reload_on_error(&mut guard, res)?.unwrap_or(0);
        if guard.deletions.pending.is_some_and(|(t, seq)| t == txn && seq >= from_seq) {
            // Its deletion of every row went with the rest (its mark).
            guard.deletions.pending = None;
        }
        Ok(n)
    }

    /// Walk the keys `txn` has intents on (its reverse index in the intents CF),
    /// calling `f(batch, user key, reverse-index key, txn's intents on the key)`,
    /// which adds what to change to the batch and returns how many changes it made;
    /// the batch is replicated (decided at `ht`) if any. Caller holds the write lock
    /// and leads.
    ///
    /// `clear_reverse`: the whole reverse index goes (commit, abort; `f` leaves
    /// it): a chunk of many keys drops its entries with one range deletion (the
    /// entries of a transaction are contiguous), a small one key by key (range
    /// tombstones are cheap to write but each one costs every later read of the
    /// column family until compaction, so small transactions do not leave one).
    ///
    /// `one`: the changes are not replicated but left in the batch, whole
    /// (`Ok(None)` when they would take more than one chunk: nothing is left
    /// there); with the keys the reverse index holds (a keyed resolution read them
    /// already): they are not walked again, and each key's intents are looked up
    /// through a cursor bounded to them (few keys: probing each key's own range).
    /// (The unbounded stepping cursor a walk uses reads past a key's intents to the
    /// next live entry of the column family: on rows written by many short
    /// transactions, every resolved intent's tombstone since the last flush, which
    /// were most of the applier's time under YCSB F.)
    ///
    /// `indexed`: the caller knows the reverse index holds every intent (it found no
    /// [`keys::unindexed_key`] mark: a keyed resolution, which `one` callers are, or
    /// one that looked); else the mark is looked up, and if there the intents are
    /// walked instead.
    ///
    /// `state`: the write lock's state, which says whose intents each key may hold
    /// ([`WriteState::row_intents`]); used for a keyed resolution of a few keys,
    /// each sought anyway (an iterator per key and holder would cost more than a
    /// cursor stepping through many keys in order).
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    pub(super) fn rewrite_txn_intents(
        &self,
        state: &WriteState,
        txn: TxnId,
        ht: HybridTime,
        clear_reverse: bool,
        indexed: bool,
        one: Option<(&mut OwnedBatch, &[Vec<u8>])>,
        mut f: impl FnMut(&mut OwnedBatch, &[u8], &[u8], Vec<IntentRecord>, bool, &mut dyn FnMut(&[u8]) -> Result<Option<HybridTime>>) -> Result<usize>,
    ) -> Result<Option<usize>> {
        if !indexed && self.unindexed(txn)? {
            // Its reverse index is incomplete: walk the intents.
            let n = self.finish_walking_with(txn, ht, false, |batch, user_key, mine, others, latest| {
                f(batch, user_key, &keys::reverse_key(txn, user_key), mine, others, latest)
            })?;
            if clear_reverse {
                let mut batch = OwnedBatch::new();
                clear_reverse_index(&mut batch, txn);
                self.log.replicate(ht, batch, 0)?;
            }
            return Ok(Some(n));
        }
        let snap = self.engine.snapshot();
        let (one, known) = match one {
            Some((batch, keys)) => (Some(batch), Some(keys)),
            None => (None, None),
        };
        // The reverse index's keys: known (in key order), or walked.
        let mut walk = match known {
            Some(_) => None,
            None => Some(reverse_index(&snap, txn)),
        };
        let mut known_keys = known.unwrap_or(&[]).iter();
        // A few keys, each sought: through its holders if known (an iterator each,
        // bounded to their intents). More are stepped through in order, by one cursor.
        let probed = matches!(known, Some(k) if !k.is_empty() && k.len() <= PROBED_FINISH_KEYS);
        // Every intent of a key, through one cursor: made on first use (keys sought
        // through their holders need none; a one-key resolution usually is one).
        let mut ints = None;
        let new_cursor = || match known {
            Some(k @ [first, ..]) => intents_cursor_between(&snap, first, &k[k.len() - 1], probed),
            _ => intents_cursor(&snap),
        };
        // The newest committed version of a key (a cursor made on first use).
        let mut reg = None;
        let mut latest = |k: &[u8]| -> Result<Option<HybridTime>> {
            Ok(reg.get_or_insert_with(|| KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()))).latest_version(k)?.0)
        };
        let mut batch = OwnedBatch::new();
        let mut n = 0;
        let mut in_batch = 0;
        // The reverse-index keys of the chunk being built (clear_reverse).
        let mut reverse: Vec<Vec<u8>> = Vec::new();
        loop {
            let (rkey, user_key) = match walk.as_mut() {
                Some((it, prefix_len)) => {
                    if !it.valid()? {
                        break;
                    }
                    let rkey = it.key().to_vec();
                    let (user_key, _) = keys::unescape_prefix(&rkey[*prefix_len..])?;
                    it.next();
                    (rkey, user_key)
                }
                None => match known_keys.next() {
                    Some(k) => (keys::reverse_key(txn, k), k.clone()),
                    None => break,
                },
            };
            let holders = if probed { state.row_intents(row_hash(&user_key)) } else { RowIntents::All };
            let all = match holders {
                RowIntents::Of(holders) => holders_intents(&snap, &user_key, &holders)?,
                _ => ints.get_or_insert_with(new_cursor).intents(&user_key)?,
            };
            let others = all.iter().any(|r| r.txn != txn && r.kind != IntentKind::Lock);
            let mine: Vec<IntentRecord> = all.into_iter().filter(|r| r.txn == txn).collect();
            in_batch += f(&mut batch, &user_key, &rkey, mine, others, &mut latest)?;
            if clear_reverse {
                reverse.push(rkey);
            }
            // A transaction's intents on a tablet can be megabytes: they are
            // rewritten in several log entries (each key's changes in one). A
            // reader between two finds the rest still intents of the same
            // transaction, whose status decides them the same way.
            if batch.as_bytes().len() >= REWRITE_CHUNK_BYTES {
                if one.is_some() {
                    return Ok(None);
                }
                clear_reverse_keys(&mut batch, &mut reverse);
                self.log.replicate(ht, std::mem::take(&mut batch), 0)?;
                n += std::mem::take(&mut in_batch);
            }
        }
        clear_reverse_keys(&mut batch, &mut reverse);
        drop(walk);
        drop(ints);
        drop(reg);
        drop(snap);
        if let Some(out) = one {
            *out = batch;
            n += in_batch;
        } else if in_batch > 0 {
            self.log.replicate(ht, batch, 0)?;
            n += in_batch;
        }
        Ok(Some(n))
    }

    /// Resolution of a transaction that alone holds intents in this tablet (the
    /// caller holds the write lock drained): the intents column family is walked
    /// in order, one cursor, instead of the transaction's reverse index with a
    /// lookup of each of its keys; `f` writes a key's resolution but not the
    /// deletion of its intents, which go as range deletions, one per chunk of the
    /// walk (a bulk load left a tombstone per row, each one a memtable insert and
    /// a key every later read of the column family steps over until compaction),
    /// and the transaction's reverse index as one more. A chunk holding another
    /// transaction's intent (the lock's record of who holds intents should rule
    /// that out) deletes this one's key by key. Chunks are replicated in order, as
    /// in [`Tablet::rewrite_txn_intents`]: a reader between two finds the rest still
    /// intents of the same transaction, and a resolution cut short resumes through
    /// the reverse index (keys already resolved have no intent left: nothing to do).
    pub(super) fn finish_walking(
        &self,
        txn: TxnId,
        ht: HybridTime,
        f: impl FnMut(&mut OwnedBatch, &[u8], Vec<IntentRecord>, bool, &mut dyn FnMut(&[u8]) -> Result<Option<HybridTime>>) -> Result<usize>,
    ) -> Result<usize> {
        self.finish_walking_with(txn, ht, true, f)
    }

    /// Whether `txn`'s reverse index here is incomplete ([`keys::unindexed_key`]).
    pub(super) fn unindexed(&self, txn: TxnId) -> Result<bool> {
        Ok(self.engine.get(Cf::Intents, &keys::unindexed_key(txn))?.is_some())
    }

    /// [`Tablet::finish_walking`]; `resolve`: the transaction's intents and reverse
    /// index go (else `f` decides what to delete, as a rollback does).
    pub(super) fn finish_walking_with(
        &self,
        txn: TxnId,
        ht: HybridTime,
        resolve: bool,
        mut f: impl FnMut(&mut OwnedBatch, &[u8], Vec<IntentRecord>, bool, &mut dyn FnMut(&[u8]) -> Result<Option<HybridTime>>) -> Result<usize>,
    ) -> Result<usize> {
        let snap = self.engine.snapshot();
        let (lower, upper) = (keys::intents_start(), keys::intents_end());
        let mut it = snap.iter(Cf::Intents, IterOptions::bounded(lower, upper));
        it.seek_to_first();
        let mut reg = None;
        let mut latest = |k: &[u8]| -> Result<Option<HybridTime>> {
            Ok(reg.get_or_insert_with(|| KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()))).latest_version(k)?.0)
        };
        let mut batch = OwnedBatch::new();
        let mut chunk = WalkedIntents::default();
        let mut n = 0;
        let mut in_batch = 0;
        while it.valid()? {
            let esc = keys::split_intent_key(it.key())?.0.to_vec();
            let mut recs = Vec::new();
            while it.valid()? {
                let (k, owner, seq) = keys::split_intent_key(it.key())?;
                if k != esc.as_slice() {
                    break;
                }
                let v = keys::decode_intent_value(it.value())?;
                if resolve {
                    chunk.saw(it.key(), owner == txn);
                }
                recs.push(IntentRecord { txn: owner, seq, kind: v.kind, subtxn: v.subtxn, data: v.data.to_vec() });
                it.next();
            }
            let (user_key, _) = keys::unescape_prefix(&esc)?;
            let others = recs.iter().any(|r| r.txn != txn && r.kind != IntentKind::Lock);
            let mine: Vec<IntentRecord> = recs.into_iter().filter(|r| r.txn == txn).collect();
            if !mine.is_empty() {
                in_batch += f(&mut batch, &user_key, mine, others, &mut latest)?;
            }
            if batch.as_bytes().len() >= REWRITE_CHUNK_BYTES {
                if resolve {
                    chunk.drop_into(&mut batch);
                }
                self.log.replicate(ht, std::mem::take(&mut batch), 0)?;
                n += std::mem::take(&mut in_batch);
            }
        }
        drop(it);
        drop(reg);
        if resolve {
            chunk.drop_into(&mut batch);
            let (rev, _) = reverse_index(&snap, txn);
            if rev.valid()? {
                clear_reverse_index(&mut batch, txn);
            }
        }
        drop(snap);
        if !batch.is_empty() {
            self.log.replicate(ht, batch, 0)?;
        }
        Ok(n + in_batch)
    }

    pub(super) fn finish_txn(&self, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<usize> {
        let n = match self.finish_txn_keyed(txn, commit_ht)? {
            Some(n) => n,
            None => self.finish_txn_locked(txn, commit_ht)?,
        };
        if n >= COMPACT_AFTER_FINISHING {
            if let Err(e) = self.engine.compact_range(Cf::Intents, None, None) {
                tracing::warn!(tablet_id = self.id.0, error = %e, "compacting intents failed");
            }
        }
        Ok(n)
    }

    pub(super) fn finish_txn_locked(&self, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<usize> {
        let mut guard = self.lock_drained()?;
        self.finish_txn_held(&mut guard, txn, commit_ht)
    }

    /// [`Tablet::finish_txn`] of a transaction with few intents here, as a
    /// keyed write of the rows it holds them on: only writes of those rows wait
    /// (a drained resolution holds the write lock, hence every read and write of
    /// the tablet, through its entry's fsync), and the lock is let go once the
    /// entry has its place in the log. The rows are known in advance from the
    /// reverse index: nothing adds to them (a decided transaction writes no
    /// more); writers resolving some of them meanwhile leave a subset, read
    /// again under the lock. `None`: not done here (too many keys, changes
    /// larger than one entry, or its deletion of every row is among them): the
    /// caller resolves it drained.
    pub(super) fn finish_txn_keyed(&self, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<Option<usize>> {
        // Leadership first: a replica that has just become leader may not have
        // applied its predecessors' entries yet (proving leadership catches it up),
        // and the keys are read from its engine: read before, an intent written in
        // an earlier term would be missed and the transaction taken as resolved.
        self.log.leader_term()?;
        let Some(keys) = self.intent_keys(txn, FINISH_KEYED_MAX_KEYS)? else {
            return Ok(None);
        };
        let rows: Vec<u64> = keys.iter().map(|k| row_hash(k)).collect();
        let mut guard = self.lock_rows(&rows)?;
        if guard.deletions.pending.is_some_and(|(t, _)| t == txn) {
            // Its deletion of every row changes the tablet's deletions: drained.
            return Ok(None);
        }
        let mut batch = OwnedBatch::new();
        let Some(n) = self.finish_txn_in(&mut guard, txn, commit_ht, Some((&mut batch, &keys)))? else {
            return Ok(None);
        };
        if n > 0 {
            let ht = commit_ht.unwrap_or_else(|| self.clock.now());
            if let Err(e) = self.replicate_keyed(guard, rows, ht, batch, 0) {
                self.write_lock.lock().term = 0; // reloaded before the next decision
                return Err(e);
            }
            guard = self.write_lock.lock();
        }
        self.forget_finished(&mut guard, txn, None);
        Ok(Some(n))
    }

    /// The keys `txn` holds intents on here (its reverse index), if at most `max`.
    pub(super) fn intent_keys(&self, txn: TxnId, max: usize) -> Result<Option<Vec<Vec<u8>>>> {
        let snap = self.engine.snapshot();
        let (mut it, prefix_len) = reverse_index(&snap, txn);
        let mut out = Vec::new();
        while it.valid()? {
            if out.len() == max || it.key()[prefix_len..] == [keys::ESC, keys::ESC_UNINDEXED] {
                return Ok(None);
            }
            out.push(keys::unescape_prefix(&it.key()[prefix_len..])?.0);
            it.next();
        }
        Ok(Some(out))
    }

    /// [`Tablet::finish_txn_locked`] with the write lock held (drained).
    pub(super) fn finish_txn_held(&self, guard: &mut WriteState, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<usize> {
        Ok(self.finish_txn_in(guard, txn, commit_ht, None)?.unwrap_or(0))
    }

    /// [`Tablet::finish_txn_held`]; with `one` (a batch, and the keys the
    /// transaction's reverse index holds), the changes are left in the batch whole
    /// instead of replicated (`None`: they would not fit one entry), and the
    /// lock's state is left to the caller ([`Tablet::forget_finished`] once they
    /// are applied).
    pub(super) fn finish_txn_in(
        &self,
        guard: &mut WriteState,
        txn: TxnId,
        commit_ht: Option<HybridTime>,
        one: Option<(&mut OwnedBatch, &[Vec<u8>])>,
    ) -> Result<Option<usize>> {
        let leave = one.is_some();
        let untouched = guard.clean.contains(&txn) && !guard.stepped_over.contains(&txn);
        // Its deletion of every row, applied: the times of all of them.
        let mut deletions: Option<Vec<HybridTime>> = None;
        let applied = guard.deletions.committed.clone();
        // Alone: no other transaction holds intents here.
        let alone = guard.intent_txns.len() == 1 && guard.intent_txns.contains(&txn);
        let ht = commit_ht.unwrap_or_else(|| self.clock.now());
        let mut per_key = |batch: &mut OwnedBatch,
                           user_key: &[u8],
                           mine: Vec<IntentRecord>,
                           others: bool,
                           latest: &mut dyn FnMut(&[u8]) -> Result<Option<HybridTime>>,
                           drop_intents: bool|
         -> Result<usize> {
            let recs: Vec<&IntentRecord> = mine.iter().collect();
            if let Some(ht) = commit_ht {
                self.note_predicate_writes(&recs, ht, batch);
                if user_key == &self.partition.start[..] && recs.iter().any(|r| is_deletion_mark(r)) {
                    // Applied with the batch that removes its mark. Of those at or
                    // before the history cutoff, the newest is enough.
                    let cutoff = self.cutoff.get();
                    let newest_old = applied.iter().rev().find(|t| **t <= cutoff).copied();
                    let mut times: Vec<HybridTime> = applied.iter().copied().filter(|t| *t > cutoff || Some(*t) == newest_old).collect();
                    times.push(ht);
                    times.sort_unstable();
                    batch.put(Cf::Meta, META_DELETIONS, &encode_times(&times));
                    deletions = Some(times);
                }
            }
            // Applied whole if no one else has written the row since (known
            // without looking if no one stepped over the transaction's patches).
            let fold = |base: HybridTime| Ok(!others && base != HybridTime::INVALID && (untouched || latest(user_key)? == Some(base)));
            finish_key_intents(batch, user_key, txn, commit_ht, &recs, false, fold, false, drop_intents)?;
            Ok(1)
        };
        // A keyed resolution (`leave`) found no unindexed mark; a drained one looks
        // for it here (once: the reverse-index walk is then told there is none).
        let res = if !leave && (alone || self.unindexed(txn)?) {
            self.finish_walking(txn, ht, |batch, user_key, mine, others, latest| per_key(batch, user_key, mine, others, latest, false)).map(Some)
        } else {
            self.rewrite_txn_intents(guard, txn, ht, true, true, one, |batch, user_key, _, mine, others, latest| {
                per_key(batch, user_key, mine, others, latest, true)
            })
        };
        let Some(n) = reload_on_error(guard, res)? else {
            return Ok(None);
        };
        if leave && deletions.is_some() {
            // A deletion of every row the caller's state did not show: the
            // tablet's deletions change with it (drained, by the caller).
            return Ok(None);
        }
        if !leave {
            self.forget_finished(guard, txn, deletions);
        }
        Ok(Some(n))
    }

    /// The lock's state after `txn`'s intents here were all applied or removed
    /// (`deletions`: the times of the deletions of every row, its own applied).
    pub(super) fn forget_finished(&self, guard: &mut WriteState, txn: TxnId, deletions: Option<Vec<HybridTime>>) {
        guard.intent_txns.remove(&txn);
        guard.clean.remove(&txn);
        guard.own_rows.remove(&txn);
        guard.unindexed.remove(&txn);
        guard.stepped_over.remove(&txn);
        if guard.deletions.pending.is_some_and(|(t, _)| t == txn) {
            guard.deletions.pending = None;
        }
        if let Some(times) = deletions {
            guard.deletions.committed = Arc::new(times);
            self.cutoff.set_deletions(guard.deletions.committed.clone());
        }
    }

    /// A transaction that committed at `commit_ht` with intents `recs` on a key: if it
    /// held a `PredicateWrite` (it was SERIALIZABLE and wrote here), later range
    /// locks with older read times conflict. The batch applying the intents records
    /// the time in `Cf::Meta` for every replica.
    pub(super) fn note_predicate_writes(&self, recs: &[&IntentRecord], commit_ht: HybridTime, batch: &mut OwnedBatch) {
        if recs.iter().any(|r| r.kind == IntentKind::Lock && intent_strength(r) == LockStrength::PredicateWrite) {
            let before = self.predicate_write_ht.fetch_max(commit_ht.0, Ordering::AcqRel);
            if commit_ht.0 > before {
                batch.put(Cf::Meta, META_PREDICATE_WRITE_HT, &commit_ht.0.to_be_bytes());
            }
        }
    }

    /// Transactions that may still have intents here (for the background resolver):
    /// every one that does, and perhaps some whose intents other writers resolved.
    pub fn txns_maybe_with_intents(&self) -> Vec<TxnId> {
        self.write_lock.lock().intent_txns.iter().copied().collect()
    }

    /// Transactions with intents here, exactly, from the intents CF's reverse index.
    pub fn txns_with_intents(&self) -> Result<Vec<TxnId>> {
        let snap = self.engine.snapshot();
        let lower = vec![keys::REVERSE_PREFIX];
        let upper = vec![keys::REVERSE_PREFIX + 1];
        let mut it = snap.iter(Cf::Intents, IterOptions { lower: Some(lower), upper: Some(upper), prefix_same_as_start: false });
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid()? {
            let k = it.key();
            let txn = k.get(1..1 + TxnId::LEN).and_then(TxnId::from_slice).ok_or(keys::KeyError::Truncated)?;
            out.push(txn);
            match keys::prefix_upper_bound(&keys::reverse_prefix(txn)) {
                Some(next) => it.seek(&next),
                None => break,
            }
        }
        Ok(out)
    }
}

/// Resolve one transaction's intents on `key` into `batch`: when it committed, write
/// the version they leave ([`txn_effect`]) at `commit_ht`; then delete its intents
/// and (`reverse`) its reverse-index entry. Returns the version written (`None`
/// when nothing was: aborted, or only locks), with the columns a patch changed if
/// `want_cols`.
///
/// A patch is written as the whole row its writer formed when `fold(base)` (the
/// time of the newest version its writer saw) says no one else wrote the row
/// since or holds intents on it: its row is then the row's whole state, and reads
/// need not merge.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish_key_intents(
    batch: &mut OwnedBatch,
    key: &[u8],
    txn: TxnId,
    commit_ht: Option<HybridTime>,
    recs: &[&IntentRecord],
    reverse: bool,
    fold: impl FnOnce(HybridTime) -> Result<bool>,
    want_cols: bool,
    drop_intents: bool,
) -> Result<Option<Version>> {
    let written = match commit_ht {
        Some(ht) => {
            let vk = keys::version_key(key, ht);
            let mut v = Vec::new();
            let version = match txn_effect(recs.iter().copied())? {
                Some(TxnEffect::Put(row)) => {
                    keys::encode_put(&mut v, &row);
                    Some(Version { ht, cols: None, live: true, patch: false })
                }
                Some(TxnEffect::Patch(p, base)) => {
                    let cols = if want_cols { Some(patch::decode_patch(&p)?.0) } else { None };
                    if fold(base)? {
                        keys::encode_put_cols(&mut v, &p);
                        Some(Version { ht, cols, live: true, patch: false })
                    } else {
                        keys::encode_patch_value(&mut v, &p);
                        Some(Version { ht, cols, live: true, patch: true })
                    }
                }
                Some(TxnEffect::Delete) => {
                    v.extend_from_slice(&keys::encode_tombstone());
                    Some(Version { ht, cols: None, live: false, patch: false })
                }
                None => None,
            };
            if version.is_some() {
                batch.put(Cf::Regular, &vk, &v);
            }
            version
        }
        None => None,
    };
    if drop_intents {
        for r in recs {
            batch.delete(Cf::Intents, &keys::intent_key(key, txn, r.seq));
        }
    }
    if reverse {
        batch.delete(Cf::Intents, &keys::reverse_key(txn, key));
    }
    Ok(written)
}

/// The intent keys of one chunk of [`Tablet::finish_walking`]: the first and the
/// last visited, whether every one between is the transaction's, and its own.
#[derive(Default)]
pub(super) struct WalkedIntents {
    pub(super) first: Option<Vec<u8>>,
    pub(super) last: Vec<u8>,
    pub(super) pure: bool,
    pub(super) mine: Vec<Vec<u8>>,
}

impl WalkedIntents {
    pub(super) fn saw(&mut self, key: &[u8], mine: bool) {
        if self.first.is_none() {
            self.first = Some(key.to_vec());
            self.pure = true;
        }
        self.last.clear();
        self.last.extend_from_slice(key);
        if mine {
            self.mine.push(key.to_vec());
        } else {
            self.pure = false;
        }
    }

    /// Delete the chunk's intents of the transaction into `batch` (one range
    /// deletion if the chunk holds no other one's), and start a new chunk.
    pub(super) fn drop_into(&mut self, batch: &mut OwnedBatch) {
        match self.first.take() {
            Some(first) if self.pure && self.mine.len() >= REVERSE_RANGE_DELETE_MIN => {
                let mut end = std::mem::take(&mut self.last);
                end.push(0); // the key right after the last one
                batch.delete_range(Cf::Intents, &first, &end);
            }
            _ => {
                for k in &self.mine {
                    batch.delete(Cf::Intents, k);
                }
            }
        }
        self.mine.clear();
        self.last.clear();
    }
}

/// A chunk of a transaction's keys with at least this many reverse-index entries
/// drops them with one range deletion.
pub(super) const REVERSE_RANGE_DELETE_MIN: usize = 64;

/// Delete `txn`'s whole reverse index (its entries and its unindexed mark).
pub(super) fn clear_reverse_index(batch: &mut OwnedBatch, txn: TxnId) {
    let prefix = keys::reverse_prefix(txn);
    match keys::prefix_upper_bound(&prefix) {
        Some(upper) => batch.delete_range(Cf::Intents, &prefix, &upper),
        None => unreachable!("a reverse-index prefix ends in a transaction id, not in 0xFF bytes only"),
    }
}

/// Delete the reverse-index entries `keys` (consecutive entries of one
/// transaction, in order) into `batch`, and forget them.
pub(super) fn clear_reverse_keys(batch: &mut OwnedBatch, keys: &mut Vec<Vec<u8>>) {
    if keys.len() >= REVERSE_RANGE_DELETE_MIN {
        let (first, last) = (&keys[0], &keys[keys.len() - 1]);
        let mut end = last.clone();
        end.push(0); // the key right after `last`
        batch.delete_range(Cf::Intents, first, &end);
    } else {
        for k in keys.iter() {
            batch.delete(Cf::Intents, k);
        }
    }
    keys.clear();
}
