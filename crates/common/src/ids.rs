//! Identifiers. Newtypes, so a table id is never passed where a tablet id belongs.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A table in the storage catalog (for SQL tables: derived from the relfilenode).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct TableId(pub u64);

/// A tablet: a key range of one table, its unit of distribution and replication.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct TabletId(pub u64);

/// A node (one daemon + one PostgreSQL).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct NodeId(pub u64);

/// A distributed transaction: 16 bytes, the first 8 the id of the node keeping its
/// status record (big-endian; 0 in ids made before nodes had ids: "this node"),
/// the other 8 random.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId(pub [u8; 16]);

impl TxnId {
    /// The node keeping this transaction's status record (0: unknown, take the
    /// local node).
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
        write!(f, "txn:")?;
        for b in &self.0[..8] {
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
