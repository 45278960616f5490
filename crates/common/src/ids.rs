//! Identifiers. Newtypes, so a table id is never passed where a tablet id belongs.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A table in the storage catalog (for SQL tables: derived from the relfilenode).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct TableId(pub u64);

/// A tablet: a key range of one table, its unit of distribution and replication.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct TabletId(pub u64);

impl TabletId {
    /// Status tablets have ids from here up: node `n`'s is `STATUS_BASE + n`.
    /// Table and tablet ids of the catalog's sequence stay far below.
    pub const STATUS_BASE: u64 = 1 << 62;

    /// The master's Raft group (the catalog), just below the status tablets.
    pub const MASTER: TabletId = TabletId(Self::STATUS_BASE - 1);

    /// The status tablet keeping the records of the transactions begun through
    /// node `node` (the first 8 bytes of their [`TxnId`]).
    pub fn status_of_node(node: u64) -> TabletId {
        TabletId(Self::STATUS_BASE + node)
    }

    /// Whether this is a status tablet.
    pub fn is_status(&self) -> bool {
        self.0 >= Self::STATUS_BASE
    }
}

/// A node (one daemon + one PostgreSQL).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct NodeId(pub u64);

/// A distributed transaction: 16 bytes, the first 8 the id of its home node (the
/// node its client is connected to; big-endian; 0 in ids made before nodes had
/// ids: "this node"), the other 8 random. Its status record is in the home node's
/// status tablet ([`TabletId::status_of_node`]), replicated like any tablet and led
/// by whichever node leads that tablet.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId(pub [u8; 16]);

impl TxnId {
    /// The transaction's home node: its client's node, whose status tablet keeps
    /// its record and which keeps what it waits for (0: unknown, take the local
    /// node).
    pub fn status_node(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(b)
    }

    pub const LEN: usize = 16;
    pub fn from_slice(b: &[u8]) -> Option<TxnId> {
        let arr: [u8; 16] = b.try_into().ok()?;
        Some(TxnId(arr))
    }
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Debug for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The home node, then the random half (which tells transactions apart).
        write!(f, "txn:{}:", self.status_node())?;
        for b in &self.0[8..] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}
impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
impl fmt::Display for TabletId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tablet-{}", self.0)
    }
}
impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "table-{}", self.0)
    }
}
impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node-{}", self.0)
    }
}
