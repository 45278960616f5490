//! MVCC reads: point lookups and bounded scans at a hybrid time, merging committed
//! versions (regular CF) with provisional records (intents CF).

use crate::filter::Verdict;

/// Most groups one grouped scan request gathers; rows of further groups are
/// returned as rows (the caller folds them).
pub const MAX_GROUPS: usize = 10_000;

/// Bytes of undecided rows a count or aggregate request ships at most before it
/// stops (with `resume`): its answer stays well under the frame limit.
pub const MAX_SHIPPED_BYTES: usize = 8 << 20;
use pinax_proto::AggValue;
use crate::status::{TxnStatus, TxnStatusResolver};
use crate::Result;
use pinax_codec::keys::{self, IntentKind, StoredValue};
use pinax_codec::patch;
use pinax_common::{HybridTime, TxnId};
use pinax_engine::{Cf, IterOptions, KvIterator, Snapshot};
pub use pinax_proto::{ScanResult, ScanSpec};
use std::cell::RefCell;

/// Who is reading, and as of when.
#[derive(Clone, Copy, Debug)]
pub struct ReadContext {
    pub read_ht: HybridTime,
    /// The reading transaction, whose own intents are visible per `seq`.
    pub txn: Option<TxnId>,
    /// Statement sequence number of the reader: own intents with `seq < self.seq`
    /// are visible.
    pub seq: u32,
    /// Upper end of the read's uncertainty window (`HybridTime::INVALID`: none).
    /// Another transaction's value committed in `(read_ht, limit_ht]` may have been
    /// written before the read began (by a node whose clock runs ahead), so it is
    /// neither shown nor hidden: the read fails with [`crate::Error::ReadRestart`]
    /// and runs again at that value's time. Values above `limit_ht` were written
    /// after the read began, whatever the clocks: invisible.
    pub limit_ht: HybridTime,
}

impl ReadContext {
    pub fn at(read_ht: HybridTime) -> Self {
        ReadContext { read_ht, txn: None, seq: 0, limit_ht: HybridTime::INVALID }
    }
    pub fn in_txn(read_ht: HybridTime, txn: TxnId, seq: u32) -> Self {
        ReadContext { read_ht, txn: Some(txn), seq, limit_ht: HybridTime::INVALID }
    }
    /// The same read with an uncertainty window up to `limit_ht`.
    pub fn uncertain_until(mut self, limit_ht: HybridTime) -> Self {
        self.limit_ht = limit_ht;
        self
    }
    /// Whether a value of another transaction at `ht` (newer than the read time)
    /// lies in the uncertainty window.
    fn uncertain(&self, ht: HybridTime) -> bool {
        ht > self.read_ht && ht <= self.limit_ht
    }
}

/// One intent as found in the intents CF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntentRecord {
    pub txn: TxnId,
    pub seq: u32,
    pub kind: IntentKind,
    pub subtxn: u32,
    pub data: Vec<u8>,
}

/// Outcome of looking at one layer for one key.
enum Found {
    Value(Vec<u8>),
    /// The newest visible version is a patch: the row is a stack (see
    /// [`MvccReader::stack`]).
    Patch,
    Deleted,
    Nothing,
}

/// What one transaction's intents on a key leave when it commits (see
/// [`txn_effect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnEffect {
    Put(Vec<u8>),
    Delete,
    /// A stored patch (`pinax_codec::patch`), and the time of the newest version
    /// its writer saw (of an intent; INVALID for a stored version).
    Patch(Vec<u8>, HybridTime),
}

/// The version a transaction's intents `recs` on one key leave: its newest write;
/// a newest patch takes in the attributes of its earlier patches since its last
/// full write (each statement's patch holds the whole row as that statement saw
/// it, its own earlier changes included), and over its own full write it is a
/// full row. None: only locks.
pub fn txn_effect<'r>(recs: impl IntoIterator<Item = &'r IntentRecord>) -> Result<Option<TxnEffect>> {
    let mut writes: Vec<&IntentRecord> = recs.into_iter().filter(|r| r.kind != IntentKind::Lock).collect();
    writes.sort_by_key(|r| std::cmp::Reverse(r.seq));
    let Some(newest) = writes.first() else {
        return Ok(None);
    };
    Ok(Some(match newest.kind {
        IntentKind::Put => TxnEffect::Put(newest.data.clone()),
        IntentKind::Delete => TxnEffect::Delete,
        IntentKind::Lock => unreachable!("locks were left out"),
        IntentKind::Patch if writes.len() == 1 => {
            let (base, stored) = patch::decode_patch_intent(&newest.data)?;
            patch::patch_row(stored)?;
            TxnEffect::Patch(stored.to_vec(), base)
        }
        IntentKind::Patch => {
            let (base, stored) = patch::decode_patch_intent(&newest.data)?;
            let (mut cols, row) = patch::decode_patch(stored)?;
            for earlier in &writes[1..] {
                match earlier.kind {
                    IntentKind::Patch => cols = patch::union(&cols, &patch::decode_patch(patch::decode_patch_intent(&earlier.data)?.1)?.0),
                    // Over its own full write (or, which an update cannot follow,
                    // a delete) the newest statement's row is the whole row.
                    _ => return Ok(Some(TxnEffect::Put(row.to_vec()))),
                }
            }
            let mut p = Vec::new();
            patch::encode_patch(&mut p, &cols, row);
            TxnEffect::Patch(p, base)
        }
    }))
}

/// Deletions of every row of a tablet (`DELETE FROM t` with no condition, done
/// as one operation per tablet: `Tablet::delete_all`). A row whose newest version
/// at or before a read's time is older than such a deletion, itself at or before
/// that time, is deleted: a *whole-tablet tombstone*. Rows written after it are
/// untouched (their versions are newer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TabletDeletions {
    /// Commit times of applied deletions, oldest first.
    pub committed: std::sync::Arc<Vec<HybridTime>>,
    /// A transaction (and its statement) whose deletion of every row is written
    /// but not applied: its status decides (committed at or before the read
    /// time: the rows are deleted; pending or aborted: they are not).
    pub pending: Option<(TxnId, u32)>,
}

/// A reader's view of its tablet's deletions, decided once per reader.
#[derive(Default)]
struct Deletions {
    /// Times of committed deletions (pending ones whose transaction committed included).
    times: Vec<HybridTime>,
    /// The reader's own transaction deleted every row in an earlier statement.
    own: bool,
}

pub struct MvccReader<'a, S: Snapshot, R: TxnStatusResolver + ?Sized> {
    snap: &'a S,
    resolver: &'a R,
    ctx: ReadContext,
    statuses: RefCell<Vec<(TxnId, TxnStatus)>>,
    /// Whether the snapshot may hold intents (false: the intents CF is not read).
    intents: bool,
    /// For a point read: the only transactions that may hold intents on its row
    /// (see [`MvccReader::with_intent_holders`]).
    holders: Option<Vec<TxnId>>,
    /// Newest time of another transaction's value met in the uncertainty window.
    restart: std::cell::Cell<HybridTime>,
    /// The iterator that collects the versions of rows read as stacks (made at the
    /// first one: an iterator per row would cost more than the row).
    stack_iter: RefCell<Option<S::Iter<'a>>>,
    deletions: Option<&'a TabletDeletions>,
}

impl<'a, S: Snapshot, R: TxnStatusResolver + ?Sized> MvccReader<'a, S, R> {
    pub fn new(snap: &'a S, resolver: &'a R, ctx: ReadContext) -> Self {
        MvccReader { snap, resolver, ctx, statuses: RefCell::new(Vec::new()), intents: true, holders: None, restart: std::cell::Cell::new(HybridTime::INVALID), stack_iter: RefCell::new(None), deletions: None }
    }

    /// The tablet's deletions of every row (see [`TabletDeletions`]), taken with
    /// the snapshot.
    pub fn with_deletions(mut self, d: &'a TabletDeletions) -> Self {
        if d.pending.is_some() || !d.committed.is_empty() {
            self.deletions = Some(d);
        }
        self
    }

    /// What this read makes of the tablet's deletions.
    fn deletions(&self) -> Result<Option<Deletions>> {
        let Some(d) = self.deletions else {
            return Ok(None);
        };
        let mut out = Deletions { times: d.committed.to_vec(), own: false };
        if let Some((txn, seq)) = d.pending {
            if self.ctx.txn == Some(txn) {
                out.own = seq < self.ctx.seq;
            } else if let TxnStatus::Committed { commit_ht } = self.status_of(txn)? {
                out.times.push(commit_ht);
            }
        }
        Ok(Some(out))
    }

    /// Whether a row whose newest visible stored version is at `ht` was deleted
    /// since by a deletion of every row; one in the uncertainty window (that would
    /// delete it) restarts the read.
    fn deleted_since(&self, d: &Deletions, ht: HybridTime) -> bool {
        if d.own || d.times.iter().any(|t| *t > ht && *t <= self.ctx.read_ht) {
            return true;
        }
        for t in d.times.iter().filter(|t| **t > ht && self.ctx.uncertain(**t)) {
            self.restart.set(self.restart.get().max(*t));
        }
        false
    }

    /// The caller knows the snapshot holds no intents at all: read committed
    /// versions only. (Deleted intents stay behind as engine tombstones until
    /// compaction, and an intents iterator must step over every one of them; a
    /// tablet with no live intents skips that cost entirely.)
    pub fn without_intents(mut self) -> Self {
        self.intents = false;
        self
    }

    /// A point read's row has intents of no transaction but `holders` (sorted; the
    /// tablet tracks which rows its transactions wrote): each one's intents are
    /// sought directly ([`holders_intents`]) instead of walking every intent
    /// key of the row, tombstones of resolved ones included. Other reads ignore it.
    pub fn with_intent_holders(mut self, holders: Vec<TxnId>) -> Self {
        self.holders = Some(holders);
        self
    }

    pub fn context(&self) -> ReadContext {
        self.ctx
    }

    /// The visible value of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut end = key.to_vec();
        end.push(0);
        let spec = ScanSpec { start: key.to_vec(), end: Some(end), limit: 1, point: true, ..ScanSpec::default() };
        Ok(self.scan(&spec)?.rows.pop().map(|(_, v)| v))
    }

    /// Visible rows in `[spec.start, spec.end)` in key order (or reverse).
    pub fn scan(&self, spec: &ScanSpec) -> Result<ScanResult> {
        let esc_start = keys::escape(&spec.start);
        // A point read (forward) probes the row `start`: its range narrows to it,
        // and the regular CF is read with a probing iterator (bloom filters).
        let point = spec.point && !spec.reverse;
        let end = if point {
            let only = [&spec.start[..], &[0]].concat();
            Some(spec.end.as_ref().map_or(only.clone(), |e| only.min(e.clone())))
        } else {
            spec.end.clone()
        };
        let esc_end = end.as_ref().map(|e| keys::escape(e));
        let reg_opts = IterOptions { lower: Some(esc_start.clone()), upper: esc_end.clone(), prefix_same_as_start: point };
        let int_lower = keys::intent_bound(&esc_start);
        let int_upper = match &esc_end {
            Some(e) => keys::intent_bound(e),
            None => keys::intents_bounds().1,
        };
        let int_opts = IterOptions { lower: Some(int_lower), upper: Some(int_upper), prefix_same_as_start: false };
        let mut reg = self.snap.iter(Cf::Regular, reg_opts);
        // A point read whose row's intent holders are known reads their intents
        // up front (`point_intents`), with no cursor in the loop below.
        let mut point_intents = None;
        let mut int = match &self.holders {
            Some(holders) if point && self.intents => {
                // (An empty range, `end` at or before `start`, holds no intent.)
                let empty = end.as_ref().is_some_and(|e| e[..] <= spec.start[..]);
                let recs = if empty { Vec::new() } else { holders_intents(self.snap, &spec.start, holders)? };
                point_intents = (!recs.is_empty()).then_some(recs);
                None
            }
            _ => self.intents.then(|| self.snap.iter(Cf::Intents, int_opts)),
        };
        if spec.reverse {
            reg.seek_to_last();
            if let Some(i) = int.as_mut() {
                i.seek_to_last();
            }
        } else if point {
            reg.seek(&probe_target(&esc_start, keys::HT_SUFFIX_LEN));
            if let Some(i) = int.as_mut() {
                i.seek_to_first();
            }
        } else {
            reg.seek_to_first();
            if let Some(i) = int.as_mut() {
                i.seek_to_first();
            }
        }
        let mut matcher = spec.filter.as_ref().map(crate::filter::RowMatcher::new).transpose()?;
        let deletions = self.deletions()?;
        let mut out = ScanResult::default();
        let aggs = &spec.aggregates;
        if !aggs.is_empty() {
            match &matcher {
                Some(m) => m.check_aggregates(aggs)?,
                None => return Err(crate::Error::InvalidRequest("aggregates need a filter (for the attributes' layout)".into())),
            }
            out.aggregates = aggs.iter().map(|a| a.func.empty()).collect();
        }
        if let (Some(g), Some(m)) = (&spec.group_by, &matcher) {
            if aggs.is_empty() || g.att as usize >= m.attributes() {
                return Err(crate::Error::InvalidRequest(format!("bad grouping {g:?}")));
            }
        }
        let mut groups: std::collections::BTreeMap<pinax_proto::GroupKey, pinax_proto::GroupState> = std::collections::BTreeMap::new();
        let mut bytes = 0usize;
        // The escaped key of the current row (one buffer for the whole scan: no
        // allocation per row on the way to a count).
        let mut esc: Vec<u8> = Vec::new();
        let mut examined = 0u64;
        loop {
            if spec.max_examined > 0 && examined >= spec.max_examined && !esc.is_empty() {
                // The budget is spent: continue after the last key visited.
                out.resume = resume_after(&esc, spec.reverse, &mut reg, int.as_mut())?;
                break;
            }
            examined += 1;
            let (in_regular, in_intents) = {
                let a = if reg.valid()? { Some(keys::split_version_key(reg.key())?.0) } else { None };
                let b = match int.as_ref() {
                    Some(i) if i.valid()? => Some(keys::split_intent_key(i.key())?.0),
                    _ => point_intents.as_ref().map(|_| &esc_start[..]),
                };
                let next = match (a, b) {
                    (None, None) => break,
                    (Some(x), None) | (None, Some(x)) => x,
                    (Some(x), Some(y)) => {
                        if spec.reverse {
                            x.max(y)
                        } else {
                            x.min(y)
                        }
                    }
                };
                esc.clear();
                esc.extend_from_slice(next);
                (a == Some(next), b == Some(next))
            };
            let recs = match int.as_mut() {
                Some(i) if in_intents => collect_intent_group(i, &esc, spec.reverse)?,
                _ if in_intents => point_intents.take().unwrap_or_default(),
                _ => Vec::new(),
            };
            let from_intents = if in_intents { self.decide_intents(&recs)? } else { Found::Nothing };
            // Whether this key's row, if visible, is returned (its value is read).
            let returned = !spec.count_only && (spec.sample_every <= 1 || (out.count + 1) % spec.sample_every as u64 == 0);
            let from_regular = if in_regular {
                // A filtered row's value is read even when it is only counted.
                let (found, uncertain, found_ht) = read_version_group(&mut reg, &esc, &self.ctx, spec.reverse, point, returned || matcher.is_some())?;
                if let Some(ht) = uncertain {
                    self.restart.set(self.restart.get().max(ht));
                }
                match (found, &deletions) {
                    (Found::Value(_) | Found::Patch, Some(d)) if self.deleted_since(d, found_ht) => Found::Deleted,
                    (f, _) => f,
                }
            } else {
                Found::Nothing
            };
            if self.restart.get() != HybridTime::INVALID {
                return Err(crate::Error::ReadRestart { restart_ht: self.restart.get() });
            }
            let visible = match from_intents {
                Found::Nothing => from_regular,
                decided => decided,
            };
            let visible = match visible {
                Found::Patch if returned || matcher.is_some() => self.stack(&esc, &recs)?,
                Found::Patch => Found::Value(Vec::new()),
                v => v,
            };
            // A filtered count ships the rows the filter cannot decide (the SQL
            // layer decides them) and counts the others that match.
            let visible = match (visible, matcher.as_mut()) {
                // A stack is merged by the SQL layer, which decides it.
                (Found::Value(v), Some(m)) => match if patch::is_stack(&v) { Verdict::Maybe } else { m.verdict(&v) } {
                    Verdict::Yes if !aggs.is_empty() => {
                        let folded = match &spec.group_by {
                            None => m.fold(&v, aggs, &mut out.aggregates),
                            // A row whose key or values cannot be read here is
                            // shipped, and creates no group.
                            Some(g) => match m.group_key(&v, g) {
                                None => false,
                                // Past the cap, a row of a new group is shipped:
                                // a request's memory stays bounded whatever the
                                // number of groups.
                                Some((k, _)) if groups.len() >= MAX_GROUPS && !groups.contains_key(&k) => false,
                                Some((k, shown)) => {
                                    let mut one: Vec<AggValue> = aggs.iter().map(|a| a.func.empty()).collect();
                                    let ok = m.fold(&v, aggs, &mut one);
                                    if ok {
                                        let (_, acc) = groups.entry(k).or_insert_with(|| (shown, aggs.iter().map(|a| a.func.empty()).collect()));
                                        for ((a, acc), p) in aggs.iter().zip(acc.iter_mut()).zip(one) {
                                            a.func.merge(acc, p);
                                        }
                                    }
                                    ok
                                }
                            },
                        };
                        if folded {
                            out.count += 1;
                        } else {
                            let (user_key, _) = keys::unescape_prefix(&esc)?;
                            bytes += user_key.len() + v.len();
                            out.rows.push((user_key, v));
                        }
                        Found::Nothing
                    }
                    Verdict::Yes => Found::Value(v),
                    Verdict::No => Found::Nothing,
                    Verdict::Maybe if spec.count_only || !aggs.is_empty() => {
                        let (user_key, _) = keys::unescape_prefix(&esc)?;
                        bytes += user_key.len() + v.len();
                        out.rows.push((user_key, v));
                        Found::Nothing
                    }
                    Verdict::Maybe => Found::Value(v),
                },
                (v, _) => v,
            };
            let mut full = false;
            if let Found::Value(v) = visible {
                out.count += 1;
                if returned {
                    let (user_key, _) = keys::unescape_prefix(&esc)?;
                    bytes += user_key.len() + v.len();
                    out.rows.push((user_key, v));
                }
                full = (spec.limit > 0 && out.count >= spec.limit as u64) || (spec.max_bytes > 0 && bytes >= spec.max_bytes);
            }
            // Rows shipped by a count or an aggregate (undecided ones) fill the
            // answer: it stays well under the frame limit.
            full |= (spec.count_only || !aggs.is_empty()) && bytes >= MAX_SHIPPED_BYTES;
            if point {
                // The range holds this one key, and nothing follows it (the regular
                // iterator may have stopped inside its older versions).
                break;
            }
            if full {
                // Continue after the last key seen (counted, returned or not).
                out.resume = resume_after(&esc, spec.reverse, &mut reg, int.as_mut())?;
                break;
            }
        }
        out.groups = groups.into_iter().map(|(key, (shown, values))| pinax_proto::AggGroup { key, shown, values }).collect();
        Ok(out)
    }

    fn status_of(&self, txn: TxnId) -> Result<TxnStatus> {
        if let Some((_, s)) = self.statuses.borrow().iter().find(|(t, _)| *t == txn) {
            return Ok(*s);
        }
        let s = self.resolver.status(txn, self.ctx.read_ht)?;
        self.statuses.borrow_mut().push((txn, s));
        Ok(s)
    }

    /// The row of escaped key `esc` whose newest visible version is a patch: the
    /// patches visible to this read, newest first, over the newest full version
    /// under them, as a stack (`pinax_codec::patch`); `recs`: the key's intents.
    /// The reader's own writes are newest; other transactions' committed writes
    /// and the stored versions are ordered by time. (A full write is ordered with
    /// every other write of its row, so only patches of disjoint attributes have
    /// an order that does not show in their times.)
    fn stack(&self, esc: &[u8], recs: &[IntentRecord]) -> Result<Found> {
        let mut patches: Vec<Vec<u8>> = Vec::new();
        if let Some(me) = self.ctx.txn {
            match txn_effect(recs.iter().filter(|r| r.txn == me && r.seq < self.ctx.seq))? {
                Some(TxnEffect::Put(row)) => return Ok(Found::Value(row)),
                Some(TxnEffect::Delete) => return Ok(Found::Deleted),
                Some(TxnEffect::Patch(p, _)) => patches.push(p),
                None => {}
            }
        }
        let mut older: Vec<(HybridTime, TxnEffect)> = Vec::new();
        let mut txns: Vec<TxnId> = recs.iter().map(|r| r.txn).filter(|t| Some(*t) != self.ctx.txn).collect();
        txns.sort_unstable();
        txns.dedup();
        for t in txns {
            if let TxnStatus::Committed { commit_ht } = self.status_of(t)? {
                if commit_ht <= self.ctx.read_ht {
                    if let Some(e) = txn_effect(recs.iter().filter(|r| r.txn == t))? {
                        older.push((commit_ht, e));
                    }
                }
            }
        }
        let mut slot = self.stack_iter.borrow_mut();
        let snap = self.snap;
        let it = slot.get_or_insert_with(|| snap.iter(Cf::Regular, IterOptions { prefix_same_as_start: true, ..IterOptions::default() }));
        // A probe of the row's versions (bloom filters apply; the loop reads none
        // past them).
        it.seek(&probe_target(esc, keys::HT_SUFFIX_LEN));
        while it.valid()? {
            let (k, ht) = keys::split_version_key(it.key())?;
            if k != esc {
                break;
            }
            if ht <= self.ctx.read_ht {
                let (e, last) = match keys::decode_value(it.value())? {
                    StoredValue::Put(v) => (TxnEffect::Put(v.to_vec()), true),
                    StoredValue::PutCols(p) => (TxnEffect::Put(patch::patch_row(p)?.to_vec()), true),
                    StoredValue::Tombstone => (TxnEffect::Delete, true),
                    StoredValue::Patch(p) => (TxnEffect::Patch(p.to_vec(), HybridTime::INVALID), false),
                };
                older.push((ht, e));
                if last {
                    break;
                }
            }
            it.next();
        }
        older.sort_by_key(|(ht, _)| std::cmp::Reverse(*ht));
        for (_, e) in older {
            match e {
                TxnEffect::Patch(p, _) => patches.push(p),
                TxnEffect::Put(row) if patches.is_empty() => return Ok(Found::Value(row)),
                TxnEffect::Put(row) => return Ok(Found::Value(patch::encode_stack(&patches.iter().map(|p| &p[..]).collect::<Vec<_>>(), &row))),
                TxnEffect::Delete => break,
            }
        }
        // No full version under the patches (a patch is never written over a
        // deleted row): the newest patch's row, a whole row as its writer saw it,
        // stands in for one.
        let Some(newest) = patches.first() else {
            return Ok(Found::Deleted);
        };
        let base = patch::decode_patch(newest)?.1.to_vec();
        Ok(Found::Value(patch::encode_stack(&patches.iter().map(|p| &p[..]).collect::<Vec<_>>(), &base)))
    }

    fn decide_intents(&self, recs: &[IntentRecord]) -> Result<Found> {
        // 1. own intents from earlier statements.
        if let Some(me) = self.ctx.txn {
            let own = recs
                .iter()
                .filter(|r| r.txn == me && r.seq < self.ctx.seq && r.kind != IntentKind::Lock)
                .max_by_key(|r| r.seq);
            if let Some(r) = own {
                return Ok(intent_found(r));
            }
        }
        // 2. other transactions' intents committed at or before the read time.
        let mut best: Option<(HybridTime, &IntentRecord)> = None;
        for r in recs.iter().filter(|r| Some(r.txn) != self.ctx.txn && r.kind != IntentKind::Lock) {
            if let TxnStatus::Committed { commit_ht } = self.status_of(r.txn)? {
                if self.ctx.uncertain(commit_ht) {
                    self.restart.set(self.restart.get().max(commit_ht));
                }
                if commit_ht <= self.ctx.read_ht {
                    let better = match best {
                        None => true,
                        Some((ht, b)) => commit_ht > ht || (commit_ht == ht && b.txn == r.txn && r.seq > b.seq),
                    };
                    if better {
                        best = Some((commit_ht, r));
                    }
                }
            }
        }
        Ok(best.map(|(_, r)| intent_found(r)).unwrap_or(Found::Nothing))
    }
}

fn intent_found(r: &IntentRecord) -> Found {
    match r.kind {
        IntentKind::Put => Found::Value(r.data.clone()),
        IntentKind::Patch => Found::Patch,
        IntentKind::Delete => Found::Deleted,
        IntentKind::Lock => Found::Nothing,
    }
}

/// Older versions of a key stepped over before seeking past the rest (RocksDB's own
/// iterator switches from stepping to seeking after 8 as well).
const SEQUENTIAL_SKIPS: usize = 8;

/// Where a scan stopped after the key `esc` (escaped) continues: the key just
/// after it (forward, an inclusive start) or the key itself (reverse, an
/// exclusive end); None when neither iterator has more.
fn resume_after<I: KvIterator>(esc: &[u8], reverse: bool, reg: &mut I, int: Option<&mut I>) -> Result<Option<Vec<u8>>> {
    let more_intents = match int {
        Some(i) => i.valid()?,
        None => false,
    };
    if !reg.valid()? && !more_intents {
        return Ok(None);
    }
    let mut last = keys::unescape_prefix(esc)?.0;
    if !reverse {
        last.push(0);
    }
    Ok(Some(last))
}

/// Consume the versions of escaped key `esc` (iterator positioned on its first entry
/// in scan direction) and return the newest one at or before `ctx.read_ht` (its
/// value copied only if `want_value`: a count needs none), with the newest version
/// in the read's uncertainty window, if any (a read restarted at that time sees
/// every version of the key the window held), and the time of the one returned.
fn read_version_group<I: KvIterator>(it: &mut I, esc: &[u8], ctx: &ReadContext, reverse: bool, point: bool, want_value: bool) -> Result<(Found, Option<HybridTime>, HybridTime)> {
    let read_ht = ctx.read_ht;
    let mut found = Found::Nothing;
    let mut found_ht = HybridTime::INVALID;
    let mut uncertain: Option<HybridTime> = None;
    let mut decided = false;
    let mut skipped = 0;
    while it.valid()? {
        let (k, ht) = keys::split_version_key(it.key())?;
        if k != esc {
            break;
        }
        if decided && point {
            // A point read needs nothing after the answer: the older versions can
            // neither be visible nor uncertain (both are newer than the answer).
            break;
        }
        if decided && !reverse {
            // Forward, the answer is known: the rest are older versions. Step over a
            // few; past that, seek beyond them (an often-updated row has thousands
            // until compaction drops those older than the history cutoff, and a
            // point read would walk them all).
            skipped += 1;
            if skipped > SEQUENTIAL_SKIPS {
                // Escaped keys end in ESC ESC_END: never all 0xFF, always a bound.
                if let Some(next) = keys::prefix_upper_bound(esc) {
                    it.seek(&next);
                    break;
                }
            }
        }
        if ctx.uncertain(ht) {
            uncertain = Some(uncertain.map_or(ht, |u| u.max(ht)));
        }
        if ht <= read_ht && !decided {
            found = match keys::decode_value(it.value())? {
                StoredValue::Put(v) if want_value => Found::Value(v.to_vec()),
                StoredValue::PutCols(p) if want_value => Found::Value(patch::patch_row(p)?.to_vec()),
                StoredValue::Patch(_) if want_value => Found::Patch,
                StoredValue::Put(_) | StoredValue::PutCols(_) | StoredValue::Patch(_) => Found::Value(Vec::new()),
                StoredValue::Tombstone => Found::Deleted,
            };
            found_ht = ht;
            // Forward: newest first, so the first match is the answer. Reverse:
            // oldest first, so keep replacing until a version is too new.
            decided = !reverse;
        } else if ht > read_ht && reverse {
            decided = true;
        }
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    Ok((found, uncertain, found_ht))
}

/// An intent record from its key's parts and its stored value.
fn intent_record(txn: TxnId, seq: u32, value: &[u8]) -> Result<IntentRecord> {
    let v = keys::decode_intent_value(value)?;
    Ok(IntentRecord { txn, seq, kind: v.kind, subtxn: v.subtxn, data: v.data.to_vec() })
}

/// Consume and decode the intents of escaped key `esc`.
fn collect_intent_group<I: KvIterator>(it: &mut I, esc: &[u8], reverse: bool) -> Result<Vec<IntentRecord>> {
    let mut out = Vec::new();
    while it.valid()? {
        let (k, txn, seq) = keys::split_intent_key(it.key())?;
        if k != esc {
            break;
        }
        out.push(intent_record(txn, seq, it.value())?);
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    Ok(out)
}

/// A row's stored patches (newest first) and the whole row under them.
pub type Layers = (Vec<Vec<u8>>, Vec<u8>);

/// A committed version of a key, as a writer checks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub ht: HybridTime,
    /// The attributes the update that wrote it changed, when known (a patch, or a
    /// whole row written by an update of some columns).
    pub cols: Option<Vec<u16>>,
    /// Not a tombstone.
    pub live: bool,
    /// A patch: older versions hold the rest of the row.
    pub patch: bool,
}

/// Entries a [`KeyCursor`] steps over before it seeks instead.
const CURSOR_STEPS: usize = 8;

/// After stepping failed to reach a key, a [`KeyCursor`] seeks directly for this
/// many lookups (keys in random order would otherwise pay the steps and the seek).
const CURSOR_BACKOFF: u32 = 16;

// A version key's probe prefix (pinax_engine::probe_prefix) is its escaped key, an
// intent key's is `'I' ++` its escaped key.
const _: () = assert!(
    keys::HT_SUFFIX_LEN == pinax_engine::PROBE_SUFFIX_LEN
        && TxnId::LEN + keys::SEQ_SUFFIX_LEN == pinax_engine::INTENT_PROBE_SUFFIX_LEN
        && keys::ESC == pinax_engine::PROBE_PREFIX_END[0]
        && keys::ESC_END == pinax_engine::PROBE_PREFIX_END[1]
);

/// The first possible key with probe prefix `prefix` (a row's escaped key, or
/// `'I' ++` one), whose keys have `suffix` bytes after it: where a probe seeks.
fn probe_target(prefix: &[u8], suffix: usize) -> Vec<u8> {
    let mut target = Vec::with_capacity(prefix.len() + suffix);
    target.extend_from_slice(prefix);
    target.resize(prefix.len() + suffix, 0);
    target
}

/// Lookups of many keys through one iterator (creating an iterator per key costs
/// more: RocksDB builds a child iterator per memtable and file). When the keys
/// come in ascending order, as a statement's rows usually do, a lookup steps
/// forward from where the previous one stopped instead of seeking: a seek searches
/// every memtable and file level again, and in the intents CF walks the
/// tombstones of resolved intents after its target every time. Keys in any other
/// order are sought, as before.
pub struct KeyCursor<I: KvIterator> {
    it: I,
    /// The iterator is at the first entry at or after this key (None: not
    /// positioned yet).
    from: Option<Vec<u8>>,
    /// Lookups answered without a seek (for tests).
    pub stepped: u64,
    /// Lookups left that seek without trying to step (see [`CURSOR_BACKOFF`]).
    backoff: u32,
    /// Every lookup is a probe of one row's versions (see [`KeyCursor::probing`]).
    probe: bool,
}

impl<I: KvIterator> KeyCursor<I> {
    pub fn new(it: I) -> Self {
        KeyCursor { it, from: None, stepped: 0, backoff: 0, probe: false }
    }

    /// A cursor for keys in no particular order (a batch of random keys): `it`
    /// was made with `prefix_same_as_start`, and every lookup seeks to the key's
    /// first possible version key (or intent key), whose probe prefix is the
    /// row's, so the engine's bloom filters skip the SST files without a version
    /// (intent) of the row. A row that has none (the key an insert adds) then
    /// costs a memtable search and no block read. It never steps from key to key: that is for
    /// ascending keys ([`KeyCursor::new`]).
    pub fn probing(it: I) -> Self {
        KeyCursor { it, from: None, stepped: 0, backoff: 0, probe: true }
    }

    /// Position at the first key with prefix `prefix` (an escaped key in the
    /// regular CF, `'I' ++` one in the intents CF), whose keys have `suffix` bytes
    /// after it.
    fn position_row(&mut self, prefix: &[u8], suffix: usize) -> Result<()> {
        if !self.probe {
            return self.position(prefix);
        }
        self.it.seek(&probe_target(prefix, suffix));
        Ok(())
    }

    /// Position at the first entry at or after `target`.
    fn position(&mut self, target: &[u8]) -> Result<()> {
        if self.backoff > 0 {
            self.backoff -= 1;
        } else if self.from.as_deref().is_some_and(|from| from <= target) {
            // No entry lies between `from` and the current position: step.
            let mut steps = 0;
            loop {
                if !self.it.valid()? || self.it.key() >= target {
                    self.stepped += 1;
                    self.set_from(target);
                    return Ok(());
                }
                if steps == CURSOR_STEPS {
                    self.backoff = CURSOR_BACKOFF;
                    break;
                }
                self.it.next();
                steps += 1;
            }
        }
        self.it.seek(target);
        self.set_from(target);
        Ok(())
    }

    fn set_from(&mut self, k: &[u8]) {
        let from = self.from.get_or_insert_with(Vec::new);
        from.clear();
        from.extend_from_slice(k);
    }

    /// (hybrid time, is-a-live-row) of the newest committed version of `key`
    /// (over the regular column family).
    pub fn latest_version(&mut self, key: &[u8]) -> Result<(Option<HybridTime>, bool)> {
        let esc = keys::escape(key);
        // Version keys start with the escaped key, which no other escaped key
        // starts with: the first entry at or after it is the key's newest version
        // if it has any.
        self.position_row(&esc, keys::HT_SUFFIX_LEN)?;
        if !self.it.valid()? {
            return Ok((None, false));
        }
        let (k, ht) = keys::split_version_key(self.it.key())?;
        if k != &esc[..] {
            return Ok((None, false));
        }
        let live = !matches!(keys::decode_value(self.it.value())?, StoredValue::Tombstone);
        Ok((Some(ht), live))
    }

    /// The newest committed versions of `key` (over the regular column family),
    /// newest first, down to the first full one (not a patch): every one newer
    /// than `newer_than`, and at least `max` if there are as many. A whole row a
    /// patch wrote (`PutCols`) newer than `newer_than` (not INVALID) does not end
    /// them: it records only the attributes its update changed, and a writer
    /// that read at `newer_than` must see the changes under it too.
    pub fn recent_versions(&mut self, key: &[u8], newer_than: HybridTime, max: usize) -> Result<Vec<Version>> {
        let esc = keys::escape(key);
        self.position_row(&esc, keys::HT_SUFFIX_LEN)?;
        let mut out = Vec::new();
        while self.it.valid()? {
            let (k, ht) = keys::split_version_key(self.it.key())?;
            if k != &esc[..] || (out.len() >= max && ht <= newer_than) {
                break;
            }
            let v = match keys::decode_value(self.it.value())? {
                StoredValue::Patch(p) => Version { ht, cols: Some(patch::decode_patch(p)?.0), live: true, patch: true },
                StoredValue::PutCols(p) => Version { ht, cols: Some(patch::decode_patch(p)?.0), live: true, patch: false },
                StoredValue::Put(_) => Version { ht, cols: None, live: true, patch: false },
                StoredValue::Tombstone => Version { ht, cols: None, live: false, patch: false },
            };
            // Under a patch, or a whole row a patch wrote newer than `newer_than`,
            // the next version counts too.
            let more = v.patch || (v.cols.is_some() && newer_than != HybridTime::INVALID && ht > newer_than);
            let last = !more;
            out.push(v);
            if last {
                break;
            }
            self.it.next();
        }
        // The iterator stands on the entry at or after its current key: a later
        // lookup of a greater key steps on from there.
        if self.probe {
            // Past the row, a probing iterator may have skipped keys.
        } else if self.it.valid()? {
            let k = self.it.key().to_vec();
            self.set_from(&k);
        } else {
            self.from = keys::prefix_upper_bound(&esc);
        }
        Ok(out)
    }

    /// The newest committed state of `key` (over the regular column family) when it
    /// is a live row: its patches over the newest whole version (the stored patches,
    /// newest first) and that version's row. None: no live row, or patches with no
    /// whole version under them.
    pub fn committed_layers(&mut self, key: &[u8]) -> Result<Option<Layers>> {
        let esc = keys::escape(key);
        self.position_row(&esc, keys::HT_SUFFIX_LEN)?;
        // Stepping from here would not know where the iterator stopped.
        self.from = None;
        let mut patches = Vec::new();
        while self.it.valid()? {
            let (k, _) = keys::split_version_key(self.it.key())?;
            if k != &esc[..] {
                break;
            }
            match keys::decode_value(self.it.value())? {
                StoredValue::Patch(p) => patches.push(p.to_vec()),
                StoredValue::PutCols(p) => return Ok(Some((patches, patch::patch_row(p)?.to_vec()))),
                StoredValue::Put(v) => return Ok(Some((patches, v.to_vec()))),
                StoredValue::Tombstone => return Ok(None),
            }
            self.it.next();
        }
        Ok(None)
    }

    /// Every intent on `key`, of any transaction (over the intents column family).
    pub fn intents(&mut self, key: &[u8]) -> Result<Vec<IntentRecord>> {
        let prefix = keys::intent_key_prefix(key);
        self.position_row(&prefix, TxnId::LEN + keys::SEQ_SUFFIX_LEN)?;
        let out = collect_intent_group(&mut self.it, &prefix[1..], false)?;
        // The key's intents were consumed: the iterator is now at the first entry
        // past every key with this prefix (a probing one may have skipped some).
        if !out.is_empty() && !self.probe {
            match keys::prefix_upper_bound(&prefix) {
                Some(upper) => self.set_from(&upper),
                None => self.from = None,
            }
        }
        Ok(out)
    }
}

/// The intents on `key` of the transactions `holders` (in key order: by
/// [`TxnId`] bytes), when the caller knows that no other transaction has an intent
/// on it: the same as [`KeyCursor::intents`] then, without walking the row's
/// intent keys. Each resolved intent of a row leaves a tombstone until compaction,
/// and every lookup of a hot row's intents stepped over all of them (under YCSB F,
/// a tenth of the daemon's CPU, rising between flushes). Each holder's intents are
/// read through an iterator bounded to its own intent keys on `key` (probing the
/// row's prefix: bloom filters): a seek or a step there meets no other
/// transaction's tombstone, whether or not the holder has an intent on the row
/// (`holders` may be a superset). (Seeking each holder through one iterator of
/// the row stepped past its intents to the next live entry, over the tombstones
/// behind them; bracketing them with `seek_for_prev` stepped back over those
/// before a holder that had none left, and backward steps cost more.)
pub fn holders_intents<S: Snapshot>(snap: &S, key: &[u8], holders: &[TxnId]) -> Result<Vec<IntentRecord>> {
    let prefix = keys::intent_key_prefix(key);
    let mut out = Vec::new();
    for txn in holders {
        let mut first = Vec::with_capacity(prefix.len() + TxnId::LEN + keys::SEQ_SUFFIX_LEN);
        first.extend_from_slice(&prefix);
        first.extend_from_slice(txn.as_bytes());
        let upper = keys::prefix_upper_bound(&first);
        // A whole key (`!seq` at least zero): its probe prefix is the row's.
        first.resize(prefix.len() + TxnId::LEN + keys::SEQ_SUFFIX_LEN, 0);
        let mut it = snap.iter(Cf::Intents, IterOptions { lower: Some(first.clone()), upper, prefix_same_as_start: true });
        it.seek(&first);
        while it.valid()? {
            let (_, t, seq) = keys::split_intent_key(it.key())?;
            out.push(intent_record(t, seq, it.value())?);
            it.next();
        }
    }
    Ok(out)
}

/// A cursor over the whole intents column family (see [`KeyCursor`]).
pub fn intents_cursor<S: Snapshot>(snap: &S) -> KeyCursor<S::Iter<'_>> {
    let (lower, upper) = keys::intents_bounds();
    KeyCursor::new(snap.iter(Cf::Intents, IterOptions::bounded(lower, upper)))
}

/// A cursor over the intents of keys in `[first, last]` (bounded, so a seek walks
/// no tombstones past them).
/// `probe`: a [`KeyCursor::probing`] one (for keys in no order).
pub fn intents_cursor_between<'s, S: Snapshot>(snap: &'s S, first: &[u8], last: &[u8], probe: bool) -> KeyCursor<S::Iter<'s>> {
    let lower = keys::intent_key_prefix(first);
    let upper = keys::prefix_upper_bound(&keys::intent_key_prefix(last)).unwrap_or_else(|| keys::intents_bounds().1);
    let it = snap.iter(Cf::Intents, IterOptions { lower: Some(lower), upper: Some(upper), prefix_same_as_start: probe });
    if probe {
        KeyCursor::probing(it)
    } else {
        KeyCursor::new(it)
    }
}

#[cfg(test)]
mod cursor_tests {
    use super::*;
    use pinax_engine::{KvEngine, WriteBatch, WriteOptions};
    use pinax_engine_mem::MemEngine;

    fn key(i: u32) -> Vec<u8> {
        format!("k{i:04}").into_bytes()
    }

    /// Keys 0..200: every third has versions (the newest a tombstone when also
    /// divisible by 5), every fourth has intents of two transactions, every
    /// seventh had intents that were deleted (tombstones in the intents CF).
    fn engine() -> MemEngine {
        let e = MemEngine::new();
        fill(&e);
        e
    }

    fn fill<E: KvEngine>(e: &E) {
        let mut b = e.new_batch();
        let (t1, t2) = (TxnId([1; 16]), TxnId([2; 16]));
        for i in 0..200u32 {
            let k = key(i);
            if i.is_multiple_of(3) {
                let mut v = Vec::new();
                keys::encode_put(&mut v, b"old");
                b.put(Cf::Regular, &keys::version_key(&k, HybridTime(10)), &v);
                if i.is_multiple_of(5) {
                    b.put(Cf::Regular, &keys::version_key(&k, HybridTime(20)), &keys::encode_tombstone());
                } else {
                    b.put(Cf::Regular, &keys::version_key(&k, HybridTime(20)), &v);
                }
            }
            let mut v = Vec::new();
            keys::encode_intent_value(&mut v, IntentKind::Put, 0, b"x");
            if i.is_multiple_of(4) {
                b.put(Cf::Intents, &keys::intent_key(&k, t1, 1), &v);
                b.put(Cf::Intents, &keys::intent_key(&k, t2, 3), &v);
            }
            if i.is_multiple_of(7) {
                b.put(Cf::Intents, &keys::intent_key(&k, TxnId([9; 16]), 1), &v);
            }
        }
        e.write(b, WriteOptions::default()).unwrap();
        let mut b = e.new_batch();
        for i in (0..200u32).filter(|i| i.is_multiple_of(7)) {
            b.delete(Cf::Intents, &keys::intent_key(&key(i), TxnId([9; 16]), 1));
        }
        e.write(b, WriteOptions::default()).unwrap();
    }

    fn expected(i: u32) -> ((Option<HybridTime>, bool), usize) {
        let version = if i.is_multiple_of(3) { (Some(HybridTime(20)), !i.is_multiple_of(5)) } else { (None, false) };
        (version, if i.is_multiple_of(4) { 2 } else { 0 })
    }

    #[test]
    fn lookups_in_any_order_match_and_ascending_ones_step() {
        let e = engine();
        let snap = e.snapshot();
        let orders: Vec<(&str, Vec<u32>)> = vec![
            ("ascending", (0..200).collect()),
            ("ascending with gaps", (0..200).step_by(13).collect()),
            ("descending", (0..200).rev().collect()),
            ("repeats and jumps", vec![5, 5, 4, 8, 8, 9, 150, 3, 199, 199, 0, 12, 12, 13]),
            ("scattered", (0..200).map(|i| (i * 37) % 200).collect()),
        ];
        for (name, order) in orders {
            let mut reg = KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()));
            let mut ints = intents_cursor_between(&snap, &key(*order.iter().min().unwrap()), &key(*order.iter().max().unwrap()), false);
            let mut whole = intents_cursor(&snap);
            for i in &order {
                let (version, n) = expected(*i);
                assert_eq!(reg.latest_version(&key(*i)).unwrap(), version, "{name}: version of {i}");
                assert_eq!(ints.intents(&key(*i)).unwrap().len(), n, "{name}: intents on {i}");
                assert_eq!(whole.intents(&key(*i)).unwrap().len(), n, "{name}: intents on {i} (unbounded)");
            }
            if name == "ascending" {
                assert!(reg.stepped >= 190 && ints.stepped >= 190, "{name}: stepped {} and {} of 200", reg.stepped, ints.stepped);
            }
        }
        // Version lists and newest versions asked of one cursor, in any order:
        // each answer as if asked alone (a version list leaves the cursor where a
        // later lookup can step from, or seek).
        for (name, order) in [("ascending", (0..200).collect::<Vec<u32>>()), ("repeats and jumps", vec![3, 3, 6, 5, 9, 150, 3, 198, 198, 0, 12, 12])] {
            let mut reg = KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()));
            for (n, i) in order.iter().enumerate() {
                let (version, _) = expected(*i);
                if n % 2 == 0 {
                    let got = reg.recent_versions(&key(*i), HybridTime::INVALID, 4).unwrap();
                    let want: Vec<(HybridTime, bool)> = version.0.map(|ht| (ht, version.1)).into_iter().collect();
                    assert_eq!(got.iter().map(|v| (v.ht, v.live)).collect::<Vec<_>>(), want, "{name}: versions of {i}");
                } else {
                    assert_eq!(reg.latest_version(&key(*i)).unwrap(), version, "{name}: version of {i}");
                }
            }
        }
        // Keys outside the data.
        let mut reg = KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()));
        assert_eq!(reg.latest_version(b"a").unwrap(), (None, false));
        assert_eq!(reg.latest_version(b"z").unwrap(), (None, false));
        assert_eq!(reg.latest_version(&key(3)).unwrap(), (Some(HybridTime(20)), true));
    }

    /// A hot row: 3000 short transactions wrote an intent on it and were resolved
    /// (their tombstones in the memtable, or in an SST file; their ids on both
    /// sides of the holder's), one holds intents on it now (a lock and a write),
    /// another holds intents on other rows only. Through the holder the lookup
    /// finds what walking the row's intents finds, and steps over none of the
    /// tombstones the walk steps over (RocksDB's perf counters); through a superset
    /// of holders (the other one too) it finds the same. A point read through the
    /// holders reads what one walking the intents reads, likewise.
    #[test]
    fn a_hot_rows_intents_sought_through_their_holders_skip_its_tombstones() {
        use rocksdb::perf::{PerfContext, PerfMetric, PerfStatsLevel};
        let dir = tempfile::tempdir().unwrap();
        let rocks = pinax_engine_rocks::RocksEngine::open(dir.path(), &pinax_engine_rocks::RocksConfig::default()).unwrap();
        let hot = b"hot".to_vec();
        let txn = |i: u32| {
            let mut id = [if i.is_multiple_of(2) { 0x10 } else { 0xf8 }; 16];
            id[1..5].copy_from_slice(&i.to_be_bytes());
            TxnId(id)
        };
        let (holder, elsewhere) = (TxnId([0xf0; 16]), TxnId([0xe0; 16]));
        let put = |v: &[u8]| {
            let mut out = Vec::new();
            keys::encode_intent_value(&mut out, IntentKind::Put, 0, v);
            out
        };
        let mut v0 = Vec::new();
        keys::encode_put(&mut v0, b"v0");
        for flush in [true, false] {
            let mut b = rocks.new_batch();
            b.put(Cf::Regular, &keys::version_key(&hot, HybridTime(10)), &v0);
            for i in 0..3000 {
                b.put(Cf::Intents, &keys::intent_key(&hot, txn(i), 1), &put(b"old"));
            }
            rocks.write(b, WriteOptions::default()).unwrap();
            let mut b = rocks.new_batch();
            for i in 0..3000 {
                b.delete(Cf::Intents, &keys::intent_key(&hot, txn(i), 1));
            }
            let mut lock = Vec::new();
            keys::encode_intent_value(&mut lock, IntentKind::Lock, 0, &[]);
            b.put(Cf::Intents, &keys::intent_key(&hot, holder, 1), &lock);
            b.put(Cf::Intents, &keys::intent_key(&hot, holder, 2), &put(b"new"));
            b.put(Cf::Intents, &keys::intent_key(b"hou", elsewhere, 1), &put(b"x"));
            rocks.write(b, WriteOptions::default()).unwrap();
            if flush {
                rocks.flush().unwrap();
            }
            std::thread::scope(|t| {
                t.spawn(|| {
                    let snap = rocks.snapshot(); // (the engine turns the counters off on first use)
                    rocksdb::perf::set_perf_stats(PerfStatsLevel::EnableCount);
                    let mut ctx = PerfContext::default();
                    let mut skipped = |f: &mut dyn FnMut()| {
                        ctx.reset();
                        f();
                        ctx.metric(PerfMetric::InternalDeleteSkippedCount)
                    };
                    for probe in [true, false] {
                        let (mut walked, mut sought) = (Vec::new(), Vec::new());
                        let walk = skipped(&mut || walked = intents_cursor_between(&snap, &hot, &hot, probe).intents(&hot).unwrap());
                        let seek = skipped(&mut || sought = holders_intents(&snap, &hot, &[holder]).unwrap());
                        assert_eq!(walked, sought, "flushed {flush}, probing {probe}");
                        assert_eq!(sought.iter().map(|r| (r.txn, r.seq)).collect::<Vec<_>>(), [(holder, 2), (holder, 1)]);
                        assert!(walk >= 3000 && seek < 10, "tombstones stepped over: {walk} walking, {seek} seeking (flushed {flush})");
                        let mut superset = Vec::new();
                        let seek = skipped(&mut || superset = holders_intents(&snap, &hot, &[elsewhere, holder]).unwrap());
                        assert_eq!(walked, superset);
                        assert!(seek < 10, "{seek} tombstones stepped over through a superset of the holders");
                        assert!(holders_intents(&snap, &hot, &[elsewhere]).unwrap().is_empty());
                    }
                    // A point read of the row, by another transaction and by the holder.
                    for ctx_ in [ReadContext::at(HybridTime(20)), ReadContext::in_txn(HybridTime(20), holder, 3)] {
                        let resolver = |_: TxnId, _: HybridTime| Ok(TxnStatus::Pending);
                        let spec = ScanSpec { start: hot.clone(), end: Some(b"hou".to_vec()), limit: 10, point: true, ..ScanSpec::default() };
                        let (mut walked, mut sought) = (None, None);
                        let walk = skipped(&mut || walked = Some(MvccReader::new(&snap, &resolver, ctx_).scan(&spec).unwrap().rows));
                        let seek = skipped(&mut || sought = Some(MvccReader::new(&snap, &resolver, ctx_).with_intent_holders(vec![holder]).scan(&spec).unwrap().rows));
                        assert_eq!(walked, sought);
                        assert_eq!(walked.as_ref().unwrap(), &MvccReader::new(&snap, &resolver, ctx_).with_intent_holders(vec![elsewhere, holder]).scan(&spec).unwrap().rows);
                        let want: &[u8] = if ctx_.txn.is_some() { b"new" } else { b"v0" };
                        assert_eq!(sought.unwrap(), vec![(hot.clone(), want.to_vec())]);
                        assert!(walk >= 3000 && seek < 10, "a point read stepped over {walk} tombstones walking, {seek} seeking");
                    }
                });
            });
        }
    }

    /// Probing cursors (bloom filters; no stepping) answer every lookup as the
    /// stepping ones do, in any order, on RocksDB (with the data half in SST files,
    /// half in the memtable) and on the in-memory engine (which ignores the hint).
    #[test]
    fn probing_cursors_answer_as_stepping_ones() {
        let dir = tempfile::tempdir().unwrap();
        let rocks = pinax_engine_rocks::RocksEngine::open(dir.path(), &pinax_engine_rocks::RocksConfig::default()).unwrap();
        fill(&rocks);
        rocks.flush().unwrap();
        // Newer versions of some keys, in the memtable.
        let mut b = rocks.new_batch();
        for i in (0..200u32).filter(|i| i.is_multiple_of(9)) {
            let mut v = Vec::new();
            keys::encode_put(&mut v, b"new");
            b.put(Cf::Regular, &keys::version_key(&key(i), HybridTime(30)), &v);
        }
        rocks.write(b, WriteOptions::default()).unwrap();
        let expected_now = |i: u32| {
            let ((v, live), n) = expected(i);
            if i.is_multiple_of(9) { ((Some(HybridTime(30)), true), n) } else { ((v, live), n) }
        };
        check_probing(&rocks, expected_now);
        check_probing(&engine(), expected);
    }

    fn check_probing<E: KvEngine>(e: &E, expected: impl Fn(u32) -> ((Option<HybridTime>, bool), usize)) {
        let snap = e.snapshot();
        let probe = IterOptions { prefix_same_as_start: true, ..IterOptions::default() };
        for order in [(0..200).collect::<Vec<u32>>(), (0..200).map(|i| (i * 37) % 200).collect(), vec![5, 5, 4, 199, 0, 12, 12, 13]] {
            let mut reg = KeyCursor::probing(snap.iter(Cf::Regular, probe.clone()));
            let mut ints = intents_cursor_between(&snap, &key(*order.iter().min().unwrap()), &key(*order.iter().max().unwrap()), true);
            for (n, i) in order.iter().enumerate() {
                let (version, intents) = expected(*i);
                if n % 2 == 0 {
                    let got = reg.recent_versions(&key(*i), HybridTime::INVALID, 4).unwrap();
                    assert_eq!(got.first().map(|v| (Some(v.ht), v.live)).unwrap_or((None, false)), version, "versions of {i}");
                } else {
                    assert_eq!(reg.latest_version(&key(*i)).unwrap(), version, "version of {i}");
                }
                assert_eq!(ints.intents(&key(*i)).unwrap().len(), intents, "intents on {i}");
            }
            assert_eq!(reg.stepped, 0);
        }
        let mut reg = KeyCursor::probing(snap.iter(Cf::Regular, probe));
        assert_eq!(reg.latest_version(b"a").unwrap(), (None, false));
        assert_eq!(reg.latest_version(b"z").unwrap(), (None, false));
    }
}
