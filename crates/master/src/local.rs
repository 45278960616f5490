//! What a node keeps about itself, in its own engine (not replicated): the
//! replicas it serves, and where the masters were when it last heard.
//!
//! Layout (regular CF):
//! - `"r/" ++ tablet id (u64 BE)` → blob(kind `'R'`, v1, bincode(`ReplicaRecord`)):
//!   a replica this node serves (the master group's own included)
//! - `"masters"` → blob(kind `'M'`, v1, bincode(`Vec<String>`)): the RPC addresses of
//!   the master group's replicas, as last learnt
//! - `"member"` → blob(kind `'J'`, v1, bincode(`u64`)): this node's id, written when it
//!   bootstrapped the cluster or first registered with it. A node that is a member
//!   never bootstraps a master group again (that would split the catalog).

use crate::catalog::{decode_record, encode_record, CatalogError};
use pinax_common::TabletId;
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, Snapshot, WriteBatch, WriteOptions};
use pinax_proto::TabletInfo;

const REPLICA_PREFIX: &[u8] = b"r/";
const REPLICA_KIND: u8 = b'R';
const REPLICA_VERSION: u8 = 1;
const MASTERS: &[u8] = b"masters";
const MASTERS_KIND: u8 = b'M';
const MASTERS_VERSION: u8 = 1;
const MEMBER: &[u8] = b"member";
const MEMBER_KIND: u8 = b'J';
const MEMBER_VERSION: u8 = 1;

/// A tablet replica served by this node: what it needs to reopen it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaRecord {
    pub tablet: TabletInfo,
    /// The group's members at creation (node id, RPC address).
    pub members: Vec<(u64, String)>,
    /// This replica made the members the group's first configuration.
    pub bootstrap: bool,
}

fn replica_key(id: TabletId) -> Vec<u8> {
    let mut k = REPLICA_PREFIX.to_vec();
    k.extend_from_slice(&id.0.to_be_bytes());
    k
}

/// A node's own records.
pub struct LocalRecords<E: KvEngine> {
    engine: E,
}

impl<E: KvEngine> LocalRecords<E> {
    pub fn open(engine: E) -> Self {
        LocalRecords { engine }
    }

    fn write(&self, f: impl FnOnce(&mut E::Batch)) -> Result<(), CatalogError> {
        let mut b = self.engine.new_batch();
        f(&mut b);
        Ok(self.engine.write(b, WriteOptions { sync: true, ..Default::default() })?)
    }

    /// Remember a replica this node serves (synced).
    pub fn put_replica(&self, r: &ReplicaRecord) -> Result<(), CatalogError> {
        self.write(|b| b.put(Cf::Regular, &replica_key(r.tablet.id), &encode_record(REPLICA_KIND, REPLICA_VERSION, r)))
    }

    pub fn delete_replica(&self, id: TabletId) -> Result<(), CatalogError> {
        self.write(|b| b.delete(Cf::Regular, &replica_key(id)))
    }

    /// Every replica this node serves.
    pub fn replicas(&self) -> Result<Vec<ReplicaRecord>, CatalogError> {
        let snap = self.engine.snapshot();
        let mut it = snap.iter(Cf::Regular, IterOptions { lower: Some(REPLICA_PREFIX.to_vec()), upper: Some(b"r0".to_vec()), prefix_same_as_start: false });
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid()? {
            out.push(decode_record(REPLICA_KIND, REPLICA_VERSION, it.value(), "replica record")?);
            it.next();
        }
        Ok(out)
    }

    /// The master replicas' addresses as last recorded (empty: none yet).
    pub fn masters(&self) -> Result<Vec<String>, CatalogError> {
        let Some(v) = self.engine.get(Cf::Regular, MASTERS)? else {
            return Ok(Vec::new());
        };
        decode_record(MASTERS_KIND, MASTERS_VERSION, &v, "masters record")
    }

    pub fn set_masters(&self, masters: &[String]) -> Result<(), CatalogError> {
        self.write(|b| b.put(Cf::Regular, MASTERS, &encode_record(MASTERS_KIND, MASTERS_VERSION, masters)))
    }

    /// Record that this node, `node_id`, belongs to a cluster (synced).
    pub fn set_member(&self, node_id: u64) -> Result<(), CatalogError> {
        self.write(|b| b.put(Cf::Regular, MEMBER, &encode_record(MEMBER_KIND, MEMBER_VERSION, &node_id)))
    }

    /// This node's id if it belongs to a cluster: it bootstrapped one, registered
    /// with one, serves a replica or knows masters (the last two for data
    /// directories from before the record).
    pub fn member(&self) -> Result<Option<u64>, CatalogError> {
        if let Some(v) = self.engine.get(Cf::Regular, MEMBER)? {
            return Ok(Some(decode_record(MEMBER_KIND, MEMBER_VERSION, &v, "member record")?));
        }
        Ok(None)
    }

    /// Whether this node has ever been part of a cluster (see [`Self::member`]).
    pub fn is_member(&self) -> Result<bool, CatalogError> {
        Ok(self.member()?.is_some() || !self.replicas()?.is_empty() || !self.masters()?.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_proto::Partition;

    #[test]
    fn records_survive_a_restart() {
        let engine = pinax_engine_mem::MemEngine::new();
        let l = LocalRecords::open(engine.clone());
        let ti = TabletInfo { id: TabletId(7), partition: Partition { start: vec![], end: None }, leader: "a".into(), replicas: vec!["a".into()] };
        let r = ReplicaRecord { tablet: ti, members: vec![(1, "a".into())], bootstrap: true };
        l.put_replica(&r).unwrap();
        l.set_masters(&["a".into(), "b".into()]).unwrap();
        assert!(l.is_member().unwrap(), "a node that knows masters is a member");
        assert_eq!(l.member().unwrap(), None);
        l.set_member(4).unwrap();
        let l = LocalRecords::open(engine);
        assert_eq!(l.replicas().unwrap(), vec![r]);
        assert_eq!(l.masters().unwrap(), vec!["a".to_string(), "b".to_string()]);
        assert_eq!(l.member().unwrap(), Some(4));
        l.delete_replica(TabletId(7)).unwrap();
        assert!(l.replicas().unwrap().is_empty());
    }
}
