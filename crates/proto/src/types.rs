//! Row-level types shared by the wire and the storage layers.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteOpKind {
    /// Insert or overwrite.
    Put,
    /// Insert only if no live row has the key, else `DuplicateKey`.
    Insert,
    /// Remove the row (a no-op if absent).
    Delete,
    /// Lock the row against other writers and lockers until the transaction ends
    /// (`SELECT … FOR UPDATE`); writes nothing. A no-op outside transactions and on
    /// a key the transaction already wrote.
    Lock,
    /// Like `Lock`, but compatible with other transactions' shared locks
    /// (`FOR SHARE`, `FOR KEY SHARE`, foreign-key checks).
    LockShared,
    /// Overwrite some columns of an existing row (`value`: a patch write op of
    /// `pinax_codec::patch`: the attributes the update depends on, those it
    /// changed, and the whole new row). Another transaction's pending or newer
    /// patch of attributes this one does not depend on is no conflict.
    Patch,
}

impl WriteOpKind {
    /// `Lock` or `LockShared`.
    pub fn is_lock(self) -> bool {
        matches!(self, WriteOpKind::Lock | WriteOpKind::LockShared)
    }
}

/// What a `Request::WriteIfLive` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LiveWrite {
    /// No live row has the key: nothing was written.
    Absent,
    /// The row was live and is now patched or deleted.
    Applied,
    /// A blind patch over a row with too many patches already, which the tablet
    /// could not fold: nothing was written; send the whole row (read it first).
    NeedsRow,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteOp {
    pub kind: WriteOpKind,
    #[serde(with = "crate::wire::bytes")]
    pub key: Vec<u8>,
    /// Row bytes; empty for deletes.
    #[serde(with = "crate::wire::bytes")]
    pub value: Vec<u8>,
}

impl WriteOp {
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        WriteOp { kind: WriteOpKind::Put, key: key.into(), value: value.into() }
    }
    pub fn insert(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        WriteOp { kind: WriteOpKind::Insert, key: key.into(), value: value.into() }
    }
    pub fn delete(key: impl Into<Vec<u8>>) -> Self {
        WriteOp { kind: WriteOpKind::Delete, key: key.into(), value: Vec::new() }
    }
    /// `value`: from `pinax_codec::patch::encode_patch_op`.
    pub fn patch(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        WriteOp { kind: WriteOpKind::Patch, key: key.into(), value: value.into() }
    }
    pub fn lock(key: impl Into<Vec<u8>>) -> Self {
        WriteOp { kind: WriteOpKind::Lock, key: key.into(), value: Vec::new() }
    }
    pub fn lock_shared(key: impl Into<Vec<u8>>) -> Self {
        WriteOp { kind: WriteOpKind::LockShared, key: key.into(), value: Vec::new() }
    }
    /// A row lock of PostgreSQL strength `strength`.
    pub fn row_lock(key: impl Into<Vec<u8>>, strength: LockStrength) -> Self {
        let kind = if strength <= LockStrength::Share { WriteOpKind::LockShared } else { WriteOpKind::Lock };
        WriteOp { kind, key: key.into(), value: vec![strength as u8] }
    }

    /// A SERIALIZABLE range lock (SHARE for a range read, PREDICATE WRITE for a
    /// write) of every tablet overlapping `[start, end)` (no end: to the end of
    /// the table): the client sends one lock per such tablet, on its range-lock
    /// key (its partition start), as the table's tablets are when it sends
    /// (so a tablet that split meanwhile has both its halves locked).
    pub fn range_lock(start: impl Into<Vec<u8>>, end: Option<&[u8]>, strength: LockStrength) -> Self {
        let mut op = WriteOp::row_lock(start, strength);
        match end {
            Some(e) => {
                op.value.push(1);
                op.value.extend_from_slice(e);
            }
            None => op.value.push(0),
        }
        op
    }

    /// For a [`WriteOp::range_lock`]: the end of the range it locks (None: to
    /// the table's end); not a range lock: None.
    pub fn range_lock_end(&self) -> Option<Option<&[u8]>> {
        if !self.kind.is_lock() {
            return None;
        }
        match self.value.as_slice() {
            [_, 0] => Some(None),
            [_, 1, end @ ..] => Some(Some(end)),
            _ => None,
        }
    }

    /// The ops of `ops` that go to the tablet of `partition`: those whose key
    /// it holds, and each range lock overlapping it, on its range-lock key.
    pub fn for_partition(ops: &[WriteOp], partition: &crate::Partition) -> Vec<WriteOp> {
        let mut out = Vec::new();
        for op in ops {
            match op.range_lock_end() {
                Some(end) => {
                    let overlaps =
                        end.is_none_or(|e| partition.start.as_slice() < e) && partition.end.as_ref().is_none_or(|pe| op.key.as_slice() < pe.as_slice());
                    if overlaps {
                        out.push(WriteOp { key: partition.start.clone(), ..op.clone() });
                    }
                }
                None if partition.contains(&op.key) => out.push(op.clone()),
                None => {}
            }
        }
        out
    }

    /// The lock strength this operation takes on its row: a put (an update that
    /// keeps the key) is NO KEY UPDATE, a delete or insert-if-absent is UPDATE, a
    /// lock is what it says (`lock`: UPDATE, `lock_shared`: SHARE).
    pub fn strength(&self) -> LockStrength {
        match self.kind {
            WriteOpKind::Put | WriteOpKind::Patch => LockStrength::NoKeyUpdate,
            WriteOpKind::Insert | WriteOpKind::Delete => LockStrength::Update,
            WriteOpKind::Lock => LockStrength::from_byte(self.value.first().copied()).unwrap_or(LockStrength::Update),
            WriteOpKind::LockShared => LockStrength::from_byte(self.value.first().copied()).unwrap_or(LockStrength::Share),
        }
    }
}

/// PostgreSQL's row lock strengths (`LockTupleMode`), weakest first. Two conflict
/// when the sum of their ranks is 3 or more: KEY SHARE only with UPDATE; SHARE with
/// NO KEY UPDATE and UPDATE; NO KEY UPDATE with all but KEY SHARE; UPDATE with all.
///
/// `PredicateWrite` is not a row lock: SERIALIZABLE transactions take it on a
/// tablet's range-lock key (its partition start) when they write in the tablet, and
/// SERIALIZABLE range reads take SHARE there. It conflicts with SHARE only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockStrength {
    KeyShare = 0,
    Share = 1,
    NoKeyUpdate = 2,
    Update = 3,
    PredicateWrite = 4,
}

impl LockStrength {
    /// The strength a lock intent's data byte names (`None`: no byte).
    pub fn from_byte(b: Option<u8>) -> Option<LockStrength> {
        Some(match b? {
            0 => LockStrength::KeyShare,
            1 => LockStrength::Share,
            2 => LockStrength::NoKeyUpdate,
            4 => LockStrength::PredicateWrite,
            _ => LockStrength::Update,
        })
    }

    pub fn conflicts_with(self, other: LockStrength) -> bool {
        use LockStrength::*;
        match (self, other) {
            (PredicateWrite, Share) | (Share, PredicateWrite) => true,
            (PredicateWrite, _) | (_, PredicateWrite) => false,
            _ => self as u8 + other as u8 >= 3,
        }
    }
}

/// The key range a tablet owns: `[start, end)`, `end == None` = unbounded.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Partition {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
}

impl Partition {
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= &self.start[..] && self.end.as_ref().is_none_or(|e| key < &e[..])
    }
}

/// A bounded scan request over user keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanSpec {
    /// Inclusive lower bound.
    pub start: Vec<u8>,
    /// Exclusive upper bound; `None` = to the end of the tablet.
    pub end: Option<Vec<u8>>,
    /// Return rows in descending key order.
    pub reverse: bool,
    /// At most this many rows (0 = no limit).
    pub limit: usize,
    /// Stop after roughly this many key+value bytes (0 = no limit).
    pub max_bytes: usize,
    /// Return no rows, only how many are visible (`ScanResult::count`; `limit` then
    /// bounds the count): `count(*)` through an index-only scan reading no column.
    /// With a `filter`: how many certainly match it, and (in `rows`) the rows it
    /// cannot decide, for the SQL layer to decide.
    pub count_only: bool,
    /// Return only every `sample_every`-th visible row (0 or 1: all), still
    /// counting all of them in `ScanResult::count`: ANALYZE's sample.
    pub sample_every: u32,
    /// Only rows this may match are returned (or counted): a `WHERE` clause's
    /// pushed-down conditions (see [`crate::filter`]).
    pub filter: Option<crate::filter::RowFilter>,
    /// Instead of rows, these aggregates over the rows that match `filter`
    /// (which must be given, for the attributes' layout; `ScanResult::aggregates`);
    /// only rows the tablet cannot decide or fold are returned, for the SQL layer.
    pub aggregates: Vec<crate::filter::AggSpec>,
    /// Stop after visiting this many keys (0 = no limit), with `resume` set, even
    /// if fewer rows than `limit` were found: bounds one request's time when a
    /// filter drops most rows, so the caller can check for cancellation between
    /// requests.
    pub max_examined: u64,
    /// With `aggregates`: compute them per value of this attribute
    /// (`ScanResult::groups`) instead of once.
    pub group_by: Option<crate::filter::GroupBy>,
    /// Read only the row `start` (if `end` does not exclude it): a primary-key
    /// lookup by every key column. Storage probes that row through its bloom
    /// filters (a row absent from a file costs no block read of it). The client
    /// asks only the tablet holding `start`; a tablet not holding it reads its
    /// part of `[start, end)` instead.
    pub point: bool,
}

/// A row as storage returns it: (key, value).
pub type Row = (Vec<u8>, Vec<u8>);

/// Rows found, and where to continue if the scan stopped early: for a forward scan
/// `resume` is the next inclusive start; for a reverse scan, the next exclusive end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanResult {
    #[serde(with = "crate::wire::rows")]
    pub rows: Vec<Row>,
    pub resume: Option<Vec<u8>>,
    /// Rows found: `rows.len()`, or for a `count_only` scan the rows counted.
    pub count: u64,
    /// One partial per `ScanSpec::aggregates` entry.
    pub aggregates: Vec<crate::filter::AggValue>,
    /// With `ScanSpec::group_by`: the partials per group, instead of `aggregates`.
    pub groups: Vec<crate::filter::AggGroup>,
}

/// Fate of a transaction as seen by a reader or writer meeting its intent (defined
/// in `pinax-common`, which `pinax-mvcc` sees; its serde form is part of the wire).
pub use pinax_common::TxnStatus;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    #[test]
    fn a_range_lock_goes_to_every_partition_it_overlaps_on_its_start() {
        let lock = WriteOp::range_lock(b"b".to_vec(), Some(b"m"), LockStrength::Share);
        assert_eq!(lock.range_lock_end(), Some(Some(&b"m"[..])));
        assert_eq!(lock.strength(), LockStrength::Share);
        assert_eq!(WriteOp::range_lock(b"b".to_vec(), None, LockStrength::PredicateWrite).range_lock_end(), Some(None));
        assert_eq!(WriteOp::row_lock(b"b".to_vec(), LockStrength::Share).range_lock_end(), None);
        assert_eq!(WriteOp::put(b"b".to_vec(), vec![1, 0]).range_lock_end(), None, "a put's value is not a range");
        let p = |s: &[u8], e: Option<&[u8]>| Partition { start: s.to_vec(), end: e.map(<[u8]>::to_vec) };
        let row = WriteOp::put(b"c".to_vec(), b"v".to_vec());
        let ops = [lock.clone(), row.clone()];
        // The halves of [b, m) at f, and tablets beside it.
        let keys = |part: Partition| WriteOp::for_partition(&ops, &part).into_iter().map(|o| o.key).collect::<Vec<_>>();
        assert_eq!(keys(p(b"b", Some(b"f"))), vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(keys(p(b"f", Some(b"m"))), vec![b"f".to_vec()]);
        assert_eq!(keys(p(b"m", None)), Vec::<Vec<u8>>::new());
        assert_eq!(keys(p(b"", Some(b"b"))), Vec::<Vec<u8>>::new());
        assert_eq!(keys(p(b"", Some(b"c"))), vec![b"".to_vec()], "a tablet the range starts in");
        // (The copy keeps the range, for a split of that tablet.)
        assert_eq!(WriteOp::for_partition(&ops, &p(b"f", Some(b"m")))[0].range_lock_end(), Some(Some(&b"m"[..])));
    }
}
