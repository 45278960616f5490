//! MVCC reads: point lookups and bounded scans at a hybrid time, merging committed
//! versions (regular CF) with provisional records (intents CF).
//!
//! [`MvccReader`] (here) holds what one read is: its snapshot, its [`ReadContext`],
//! the tablet's deletions of every row, and the transaction statuses it learned; it
//! decides the visibility of one key (`decide_intents`, the version read by the
//! scanner, `stack` for a row of patches). By role:
//! - `scanner.rs`: [`Scanner`], the rows of a key range visible to the read, one
//!   key at a time (a point read is a scan of one row: [`MvccReader::get`]);
//! - `intents.rs`: intent records, what a transaction's intents on a key leave
//!   ([`txn_effect`]), and lookups of the intents of one key ([`holders_intents`]);
//! - `cursor.rs`: [`KeyCursor`], lookups of many keys' newest versions or intents
//!   through one iterator (writers' conflict checks).
//!
//! What to do with the visible rows (filters, limits, counts, aggregates) is not
//! decided here: see `pinax-pushdown`.

mod cursor;
mod intents;
mod scanner;
#[cfg(test)]
mod tests;

pub use cursor::{KeyCursor, Layers, Version};
pub use intents::{holders_intents, intents_cursor, intents_cursor_between, txn_effect, IntentRecord, TxnEffect};
pub use scanner::{ScanRange, Scanner, Step, Want};

use crate::status::{TxnStatus, TxnStatusResolver};
use crate::Result;
use pinax_codec::keys::{self, IntentKind, StoredValue};
use pinax_codec::patch;
use pinax_common::{HybridTime, TxnId};
use pinax_engine::{Cf, IterOptions, KvIterator, Snapshot};
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

/// Outcome of looking at one layer for one key.
enum Found {
    Value(Vec<u8>),
    /// The newest visible version is a patch: the row is a stack (see
    /// [`MvccReader::stack`]).
    Patch,
    Deleted,
    Nothing,
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
        MvccReader {
            snap,
            resolver,
            ctx,
            statuses: RefCell::new(Vec::new()),
            intents: true,
            holders: None,
            restart: std::cell::Cell::new(HybridTime::INVALID),
            stack_iter: RefCell::new(None),
            deletions: None,
        }
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
    /// The visible value of `key`, if any (a point read: [`ScanRange::point`]).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut end = key.to_vec();
        end.push(0);
        let range = ScanRange { start: key, end: Some(&end), reverse: false, point: true };
        Ok(match self.scanner(range)?.next(Want::Value)? {
            Step::Visible(v) => Some(v),
            Step::End | Step::Hidden => None,
        })
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
        it.seek(&keys::first_version_key(esc));
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
            let own = recs.iter().filter(|r| r.txn == me && r.seq < self.ctx.seq && r.kind != IntentKind::Lock).max_by_key(|r| r.seq);
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
