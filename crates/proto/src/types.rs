//! Row-level types shared by the wire and the storage layers.

use pinax_common::HybridTime;
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
}

impl WriteOpKind {
    /// `Lock` or `LockShared`.
    pub fn is_lock(self) -> bool {
        matches!(self, WriteOpKind::Lock | WriteOpKind::LockShared)
    }
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
    pub fn lock(key: impl Into<Vec<u8>>) -> Self {
        WriteOp { kind: WriteOpKind::Lock, key: key.into(), value: Vec::new() }
    }
    pub fn lock_shared(key: impl Into<Vec<u8>>) -> Self {
        WriteOp { kind: WriteOpKind::LockShared, key: key.into(), value: Vec::new() }
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
    pub count_only: bool,
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
}

/// Fate of a transaction as seen by a reader or writer meeting its intent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnStatus {
    /// Still running (or its status tablet has not decided yet).
    Pending,
    Committed { commit_ht: HybridTime },
    /// Aborted, expired, or unknown to its status tablet.
    Aborted,
}
