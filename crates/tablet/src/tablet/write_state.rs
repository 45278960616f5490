//! What a tablet keeps under its write lock ([`WriteState`]): which transactions
//! may hold intents here and on which rows (so reads and writes of rows no
//! transaction wrote skip the intents column family), the keyed writes in flight
//! (decided, handed to Raft, not yet applied: a write of one of their rows waits),
//! and the deletions of every row. Every change to the intents column family
//! happens under this lock. Start at [`WriteState`], then [`WriteState::row_intents`].

use super::*;

/// State kept under the tablet's write lock.
#[derive(Default)]
pub(super) struct WriteState {
    /// Transactions that may still have intents here: a superset of those that do
    /// (a transaction leaves when `finish_txn` removed all its intents). Every
    /// change to the intents CF happens under the lock, so a snapshot taken under
    /// it with this set empty holds no intents at all.
    pub(super) intent_txns: HashSet<TxnId>,
    /// Transactions whose intents were all written in this leader term, and
    /// those whose pending patch another writer stepped over (both kept for the
    /// term only). A patch of a transaction in the first and not the second was
    /// written over the newest version and nothing was written over it since:
    /// applied, it is the whole row (see `finish_txn_locked`), found without
    /// looking at the stored versions.
    pub(super) clean: HashSet<TxnId>,
    pub(super) stepped_over: HashSet<TxnId>,
    /// Per transaction whose intents were all written in this leader term (a
    /// subset of `clean`, kept as long): the hashes of the rows it holds intents
    /// on (a superset; `None` past [`OWN_ROWS_MAX`]). A write or a point read of
    /// rows no transaction here wrote has no intent to meet: it skips looking for
    /// them (see [`WriteState::needs_intents`]).
    pub(super) own_rows: rustc_hash::FxHashMap<TxnId, Option<rustc_hash::FxHashSet<u64>>>,
    /// Transactions whose writes in this term put no reverse-index entries (see
    /// [`WriteState::unindexed_write`]).
    pub(super) unindexed: HashSet<TxnId>,
    /// The leader term `intent_txns` was loaded in (0: not yet). Followers apply
    /// batches without this lock, so a replica that becomes leader reloads it.
    pub(super) term: u64,
    /// Keyed writes in flight: a client's write (`write_fast`, `write_intents`) is
    /// decided under the lock, handed to the log in decision order, and the lock is
    /// let go while the log makes it durable and applies it (so that writes of
    /// other rows are decided meanwhile and share the log's fsync). Until it is
    /// applied the engine does not show it, so a write of one of its rows waits:
    /// here are the hashes of those rows (with counts; a collision only makes a
    /// write wait longer)...
    pub(super) in_flight: rustc_hash::FxHashMap<u64, u32>,
    /// ...and how many such writes there are. Every other writer (resolving or
    /// rolling back a transaction's intents) reads the engine for rows it does not
    /// know in advance: it waits until none is in flight (`drain`), and holds the
    /// lock until its own batch is applied.
    pub(super) writes_in_flight: usize,
    /// Writers draining: keyed writes wait meanwhile (no starving the drain).
    pub(super) draining: usize,
    /// Deletions of every row: applied ones, and the pending one (whose intent
    /// is on the range-lock key). Reloaded with `intent_txns`.
    pub(super) deletions: TabletDeletions,
}

/// What a lookup of one row's intents reads ([`WriteState::row_intents`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum RowIntents {
    /// No transaction holds intents on the row: the intents CF is not read.
    None,
    /// Only these transactions may (sorted by id).
    Of(Vec<TxnId>),
    /// Any transaction may: every intent of the row is read.
    All,
}

/// Rows a transaction's intents here are tracked on ([`WriteState::own_rows`]), at
/// most: past that (a bulk load of millions of rows into one tablet) its writes look
/// for intents again.
pub(super) const OWN_ROWS_MAX: usize = 1 << 19;

impl WriteState {
    /// Whether a write (or a read) of rows `rows` (their hashes) may meet intents,
    /// of any transaction, the writer's own included: some transaction holding
    /// intents here either has its rows untracked (reloaded at a term's start, or
    /// past [`OWN_ROWS_MAX`]) or tracked with one of these among them. Another
    /// transaction's intents on other rows are nothing to meet (a pending deletion
    /// of every row is checked apart; a SERIALIZABLE range lock is an intent on the
    /// tablet's first key, a row tracked like any other). A row written by many
    /// short transactions has a tombstone per resolved intent until compaction: a
    /// walk of its intents steps over all of them, a lookup through its holders
    /// ([`WriteState::row_intents`]) over none.
    pub(super) fn needs_intents(&self, rows: &[u64]) -> bool {
        self.intent_txns.iter().any(|t| match self.own_rows.get(t) {
            Some(Some(own)) => rows.iter().any(|h| own.contains(h)),
            _ => true,
        })
    }

    /// What a lookup of the intents of the one row with hash `row` must read:
    /// [`WriteState::needs_intents`] for one row, and when every transaction holding
    /// intents here has its rows tracked, which of them may hold some on it (sorted
    /// by id, the intent keys' order). Their intents are then sought one by one
    /// ([`holders_intents`]) rather than found by walking every intent key of
    /// the row, tombstones of resolved ones included.
    pub(super) fn row_intents(&self, row: u64) -> RowIntents {
        let mut holders = Vec::new();
        for t in &self.intent_txns {
            match self.own_rows.get(t) {
                Some(Some(own)) if own.contains(&row) => holders.push(*t),
                Some(Some(_)) => {}
                _ => return RowIntents::All,
            }
        }
        if holders.is_empty() {
            return RowIntents::None;
        }
        holders.sort_unstable();
        RowIntents::Of(holders)
    }

    /// What a write of rows `rows` (their hashes) reads of intents: through their
    /// holders for one row ([`WriteState::row_intents`]), else every intent of its
    /// keys if [`WriteState::needs_intents`].
    pub(super) fn rows_intents(&self, rows: &[u64]) -> RowIntents {
        match rows {
            [row] => self.row_intents(*row),
            _ if self.needs_intents(rows) => RowIntents::All,
            _ => RowIntents::None,
        }
    }

    /// `txn` wrote intents on `rows` (their hashes): it may hold intents here from
    /// now on; if these are its first, its rows are tracked from here.
    pub(super) fn note_intents(&mut self, txn: TxnId, rows: &[u64]) {
        if self.intent_txns.insert(txn) {
            self.clean.insert(txn);
            self.own_rows.insert(txn, Some(Default::default()));
        }
        self.note_own_rows(txn, rows);
    }

    /// Whether a write of `txn` leaves its reverse index out (each such batch
    /// carries the [`keys::unindexed_key`] mark instead): once the transaction,
    /// alone in the tablet, holds intents on more rows than a keyed resolution
    /// takes (a bulk load: its resolution walks the intents anyway, see
    /// [`Tablet::finish_walking`]), and from then on in this term. The entries
    /// were a third of a bulk load's memtable inserts.
    pub(super) fn unindexed_write(&mut self, txn: TxnId) -> bool {
        if self.unindexed.contains(&txn) {
            return true;
        }
        let alone = self.intent_txns.iter().all(|t| *t == txn);
        let large = match self.own_rows.get(&txn) {
            Some(Some(own)) => own.len() >= FINISH_KEYED_MAX_KEYS,
            Some(None) => true,
            None => false,
        };
        if alone && large {
            self.unindexed.insert(txn);
        }
        alone && large
    }

    pub(super) fn note_own_rows(&mut self, txn: TxnId, rows: &[u64]) {
        if let Some(slot) = self.own_rows.get_mut(&txn) {
            if let Some(own) = slot {
                own.extend(rows.iter().copied());
                if own.len() > OWN_ROWS_MAX {
                    *slot = None;
                }
            }
        }
    }
}

/// The hashes of the rows a keyed write touches (its ops' keys).
pub(super) fn row_hashes(ops: &[WriteOp]) -> Vec<u64> {
    ops.iter().map(|op| row_hash(&op.key)).collect()
}

/// The positions of `ops` in key order (a stable sort: ops on one key keep their
/// order, and the later one still wins). A batch's records are inserted into the
/// memtable in the order they are put; RocksDB's skip list starts each insert
/// from where the previous one went, so records in key order (an insert's random
/// keys sorted) cost a few steps each rather than a search from the top.
pub(super) fn key_order(ops: &[WriteOp]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    if ops.windows(2).any(|w| w[0].key > w[1].key) {
        order.sort_by(|a, b| ops[*a].key.cmp(&ops[*b].key));
    }
    order
}

/// The hash of a row's user key in [`WriteState::in_flight`].
pub(super) fn row_hash(key: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(key)
}

/// A keyed write in flight (see [`WriteState::in_flight`]): its rows are released
/// when it is dropped, once the log has applied the write or failed.
pub(super) struct InFlight<'t, E: KvEngine> {
    pub(super) tablet: &'t Tablet<E>,
    pub(super) rows: Vec<u64>,
}

impl<E: KvEngine> Drop for InFlight<'_, E> {
    fn drop(&mut self) {
        let mut g = self.tablet.write_lock.lock();
        for h in &self.rows {
            if let std::collections::hash_map::Entry::Occupied(mut e) = g.in_flight.entry(*h) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
        }
        g.writes_in_flight -= 1;
        drop(g);
        self.tablet.settled.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn txn(n: u8) -> TxnId {
        TxnId([n; 16])
    }

    #[test]
    pub(super) fn writes_and_reads_look_for_intents_only_on_rows_some_transaction_may_hold() {
        let mut s = WriteState::default();
        let (a, b) = (txn(1), txn(2));
        // Nothing here: nothing to meet.
        assert!(!s.needs_intents(&[1, 2]));
        s.note_intents(a, &[1, 2]);
        assert!(s.needs_intents(&[3, 2]), "a's row 2");
        assert!(!s.needs_intents(&[3, 4]), "rows nobody wrote");
        // Another transaction's intents: only its rows.
        s.note_intents(b, &[9]);
        assert!(s.needs_intents(&[9]) && s.needs_intents(&[1]));
        assert!(!s.needs_intents(&[3]), "no transaction wrote row 3");
        // Resolved: its rows are free again.
        s.intent_txns.remove(&b);
        s.own_rows.remove(&b);
        assert!(!s.needs_intents(&[9]));
        // Past the bound, it is not tracked any more: always look.
        let many: Vec<u64> = (100..100 + OWN_ROWS_MAX as u64 + 1).collect();
        s.note_intents(a, &many);
        assert!(s.needs_intents(&[5]));
        s.note_intents(a, &[6]);
        assert!(s.needs_intents(&[7]), "stays untracked");
        // Holding intents from before the term (reloaded, untracked): look.
        let mut s = WriteState::default();
        s.intent_txns.insert(a);
        assert!(s.needs_intents(&[1]));
        s.note_intents(a, &[1]);
        assert!(s.needs_intents(&[2]), "its earlier intents are not tracked");
    }

    #[test]
    pub(super) fn one_rows_intents_are_sought_through_the_transactions_that_wrote_it() {
        let mut s = WriteState::default();
        let (a, b, c) = (txn(5), txn(9), txn(2));
        let agrees = |s: &WriteState| (0..12).all(|r| (s.row_intents(r) != RowIntents::None) == s.needs_intents(&[r]));
        assert_eq!(s.row_intents(1), RowIntents::None);
        s.note_intents(a, &[1, 2]);
        s.note_intents(b, &[2, 9]);
        s.note_intents(c, &[2]);
        assert_eq!(s.row_intents(2), RowIntents::Of(vec![c, a, b]), "the writers of row 2, in the intent keys' order");
        assert_eq!(s.row_intents(1), RowIntents::Of(vec![a]));
        assert_eq!(s.row_intents(3), RowIntents::None);
        assert!(agrees(&s));
        // Resolved: gone from its rows.
        s.intent_txns.remove(&b);
        s.own_rows.remove(&b);
        assert_eq!(s.row_intents(9), RowIntents::None);
        assert_eq!(s.row_intents(2), RowIntents::Of(vec![c, a]));
        // One transaction untracked (past the bound, or holding intents from before
        // the term): every row's intents are walked.
        let many: Vec<u64> = (100..100 + OWN_ROWS_MAX as u64 + 1).collect();
        s.note_intents(c, &many);
        assert_eq!(s.row_intents(3), RowIntents::All);
        assert_eq!(s.row_intents(1), RowIntents::All);
        assert!(agrees(&s));
        let mut s = WriteState::default();
        s.intent_txns.insert(a);
        s.note_intents(b, &[1]);
        assert_eq!(s.row_intents(1), RowIntents::All);
        assert!(agrees(&s));
    }
}
