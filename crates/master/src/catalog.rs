//! The persisted catalog.
//!
//! Layout in the master's engine (regular CF, not MVCC):
//! - `"t/" ++ name` → blob(kind `'C'`, v2, bincode(`TableInfo`)); v1 entries (before
//!   tablets had replica lists) decode with the leader as the only replica
//! - `"next_id"`    → u64 BE: next id for tables and tablets (one sequence)
//! - `"next_node_id"` → u64 BE: next id for a joining node (node 1 is the master)
//! - `"r/" ++ tablet id (u64 BE)` → blob(kind `'R'`, v1, bincode(`ReplicaRecord`)):
//!   a replica this node serves (every node keeps its own, master or not)

use parking_lot::Mutex;
use pinax_codec::blob::{decode_blob, encode_blob};
use pinax_common::{ErrorCode, TableId, TabletId};
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, Snapshot, WriteBatch, WriteOptions};
use pinax_proto::{Sharding, TableInfo, TabletInfo};
use std::collections::BTreeMap;

const TABLE_PREFIX: &[u8] = b"t/";
const NEXT_ID: &[u8] = b"next_id";
const NEXT_NODE_ID: &[u8] = b"next_node_id";
const REPLICA_PREFIX: &[u8] = b"r/";
const REPLICA_KIND: u8 = b'R';
const REPLICA_VERSION: u8 = 1;

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
const BLOB_KIND: u8 = b'C';
const BLOB_VERSION: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("relation \"{0}\" already exists")]
    AlreadyExists(String),
    #[error("relation \"{0}\" does not exist")]
    NotFound(String),
    #[error("invalid table definition: {0}")]
    Invalid(String),
    #[error(transparent)]
    Engine(#[from] pinax_engine::Error),
    #[error("corrupt catalog entry: {0}")]
    Corrupt(String),
}

impl CatalogError {
    pub fn code(&self) -> ErrorCode {
        match self {
            CatalogError::AlreadyExists(_) => ErrorCode::TableAlreadyExists,
            CatalogError::NotFound(_) => ErrorCode::TableNotFound,
            CatalogError::Invalid(_) => ErrorCode::InvalidRequest,
            CatalogError::Engine(_) => ErrorCode::Io,
            CatalogError::Corrupt(_) => ErrorCode::Corruption,
        }
    }
}

fn bincode_cfg() -> bincode::config::Configuration<bincode::config::BigEndian, bincode::config::Fixint> {
    bincode::config::standard().with_big_endian().with_fixed_int_encoding()
}

pub fn encode_table(t: &TableInfo) -> Vec<u8> {
    // Encoding a plain struct into a Vec cannot fail.
    let payload = bincode::serde::encode_to_vec(t, bincode_cfg()).unwrap_or_default();
    encode_blob(BLOB_KIND, BLOB_VERSION, &payload)
}

pub fn decode_table(b: &[u8]) -> Result<TableInfo, CatalogError> {
    let (version, payload) = decode_blob(BLOB_KIND, b).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
    if version == 1 {
        let (t, _): (TableInfoV1, _) = bincode::serde::decode_from_slice(payload, bincode_cfg()).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
        return Ok(TableInfo {
            id: t.id,
            name: t.name,
            sharding: t.sharding,
            tablets: t.tablets.into_iter().map(|ti| TabletInfo { id: ti.id, partition: ti.partition, replicas: vec![ti.leader.clone()], leader: ti.leader }).collect(),
        });
    }
    if version != BLOB_VERSION {
        return Err(CatalogError::Corrupt(format!("unknown catalog entry version {version}")));
    }
    let (t, _) = bincode::serde::decode_from_slice(payload, bincode_cfg()).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
    Ok(t)
}

/// Catalog entries of version 1.
#[derive(serde::Deserialize)]
struct TableInfoV1 {
    id: TableId,
    name: String,
    sharding: Sharding,
    tablets: Vec<TabletInfoV1>,
}

#[derive(serde::Deserialize)]
struct TabletInfoV1 {
    id: TabletId,
    partition: pinax_proto::Partition,
    leader: String,
}

struct State {
    tables: BTreeMap<String, TableInfo>,
    next_id: u64,
}

pub struct Catalog<E: KvEngine> {
    engine: E,
    state: Mutex<State>,
}

impl<E: KvEngine> Catalog<E> {
    pub fn open(engine: E) -> Result<Self, CatalogError> {
        let mut tables = BTreeMap::new();
        let next_id = match engine.get(Cf::Regular, NEXT_ID)? {
            Some(v) => u64::from_be_bytes(v.as_slice().try_into().map_err(|_| CatalogError::Corrupt("next_id".into()))?),
            None => 1,
        };
        {
            let snap = engine.snapshot();
            let mut it = snap.iter(Cf::Regular, IterOptions { lower: Some(TABLE_PREFIX.to_vec()), upper: Some(b"t0".to_vec()), prefix_same_as_start: false });
            it.seek_to_first();
            while it.valid()? {
                let t = decode_table(it.value())?;
                tables.insert(t.name.clone(), t);
                it.next();
            }
        }
        Ok(Catalog { engine, state: Mutex::new(State { tables, next_id }) })
    }

    /// Allocate ids and partitions for a new table (not yet persisted: the caller
    /// creates the tablets, then calls [`Catalog::commit_table`]).
    pub fn plan_table(&self, name: &str, sharding: Sharding, leader: &str) -> Result<TableInfo, CatalogError> {
        if name.is_empty() {
            return Err(CatalogError::Invalid("empty table name".into()));
        }
        let parts = crate::plan_partitions(&sharding).map_err(CatalogError::Invalid)?;
        let mut st = self.state.lock();
        if st.tables.contains_key(name) {
            return Err(CatalogError::AlreadyExists(name.to_string()));
        }
        let first = st.next_id;
        st.next_id += 1 + parts.len() as u64;
        let mut b = self.engine.new_batch();
        b.put(Cf::Regular, NEXT_ID, &st.next_id.to_be_bytes());
        self.engine.write(b, WriteOptions { sync: true })?;
        let tablets = parts
            .into_iter()
            .enumerate()
            .map(|(i, partition)| TabletInfo { id: TabletId(first + 1 + i as u64), partition, leader: leader.to_string(), replicas: vec![leader.to_string()] })
            .collect();
        Ok(TableInfo { id: TableId(first), name: name.to_string(), sharding, tablets })
    }

    /// Persist a planned table. Fails if the name was taken meanwhile.
    pub fn commit_table(&self, t: &TableInfo) -> Result<(), CatalogError> {
        let mut st = self.state.lock();
        if st.tables.contains_key(&t.name) {
            return Err(CatalogError::AlreadyExists(t.name.clone()));
        }
        let mut b = self.engine.new_batch();
        b.put(Cf::Regular, &table_key(&t.name), &encode_table(t));
        self.engine.write(b, WriteOptions { sync: true })?;
        st.tables.insert(t.name.clone(), t.clone());
        Ok(())
    }

    /// Replace replica `old` of tablet `tablet` of table `name` by `new` (its
    /// replica moved off a dead node; the leader becomes `new` if it was `old`), or
    /// without `old` add `new` (an under-replicated tablet got a replica).
    pub fn move_replica(&self, name: &str, tablet: TabletId, old: Option<&str>, new: &str) -> Result<TableInfo, CatalogError> {
        let mut st = self.state.lock();
        let mut t = st.tables.get(name).cloned().ok_or_else(|| CatalogError::NotFound(name.to_string()))?;
        let ti = t.tablets.iter_mut().find(|ti| ti.id == tablet).ok_or_else(|| CatalogError::Invalid(format!("table {name} has no tablet {}", tablet.0)))?;
        match old {
            Some(old) => {
                for r in ti.replicas.iter_mut().filter(|r| *r == old) {
                    *r = new.to_string();
                }
                if ti.leader == old {
                    ti.leader = new.to_string();
                }
            }
            None if !ti.replicas.iter().any(|r| r == new) => ti.replicas.push(new.to_string()),
            None => {}
        }
        let mut b = self.engine.new_batch();
        b.put(Cf::Regular, &table_key(name), &encode_table(&t));
        self.engine.write(b, WriteOptions { sync: true })?;
        st.tables.insert(name.to_string(), t.clone());
        Ok(t)
    }

    pub fn drop_table(&self, name: &str) -> Result<TableInfo, CatalogError> {
        let mut st = self.state.lock();
        let t = st.tables.get(name).cloned().ok_or_else(|| CatalogError::NotFound(name.to_string()))?;
        let mut b = self.engine.new_batch();
        b.delete(Cf::Regular, &table_key(name));
        self.engine.write(b, WriteOptions { sync: true })?;
        st.tables.remove(name);
        Ok(t)
    }

    /// A new node id (ids start at 2: the first node, the master, is 1).
    pub fn allocate_node_id(&self) -> Result<u64, CatalogError> {
        let _st = self.state.lock();
        let next = match self.engine.get(Cf::Regular, NEXT_NODE_ID)? {
            Some(v) => u64::from_be_bytes(v.as_slice().try_into().map_err(|_| CatalogError::Corrupt("next_node_id".into()))?),
            None => 2,
        };
        let mut b = self.engine.new_batch();
        b.put(Cf::Regular, NEXT_NODE_ID, &(next + 1).to_be_bytes());
        self.engine.write(b, WriteOptions { sync: true })?;
        Ok(next)
    }

    /// Remember a replica this node serves (synced).
    pub fn put_replica(&self, r: &ReplicaRecord) -> Result<(), CatalogError> {
        let payload = bincode::serde::encode_to_vec(r, bincode_cfg()).unwrap_or_default();
        let mut b = self.engine.new_batch();
        b.put(Cf::Regular, &replica_key(r.tablet.id), &encode_blob(REPLICA_KIND, REPLICA_VERSION, &payload));
        self.engine.write(b, WriteOptions { sync: true })?;
        Ok(())
    }

    pub fn delete_replica(&self, id: TabletId) -> Result<(), CatalogError> {
        let mut b = self.engine.new_batch();
        b.delete(Cf::Regular, &replica_key(id));
        self.engine.write(b, WriteOptions { sync: true })?;
        Ok(())
    }

    /// Every replica this node serves.
    pub fn replicas(&self) -> Result<Vec<ReplicaRecord>, CatalogError> {
        let snap = self.engine.snapshot();
        let mut it = snap.iter(Cf::Regular, IterOptions { lower: Some(REPLICA_PREFIX.to_vec()), upper: Some(b"r0".to_vec()), prefix_same_as_start: false });
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid()? {
            let (version, payload) = decode_blob(REPLICA_KIND, it.value()).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
            if version != REPLICA_VERSION {
                return Err(CatalogError::Corrupt(format!("unknown replica record version {version}")));
            }
            let (r, _) = bincode::serde::decode_from_slice(payload, bincode_cfg()).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
            out.push(r);
            it.next();
        }
        Ok(out)
    }

    pub fn get(&self, name: &str) -> Result<TableInfo, CatalogError> {
        self.state.lock().tables.get(name).cloned().ok_or_else(|| CatalogError::NotFound(name.to_string()))
    }

    pub fn tables(&self) -> Vec<TableInfo> {
        self.state.lock().tables.values().cloned().collect()
    }
}

fn table_key(name: &str) -> Vec<u8> {
    let mut k = TABLE_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_proto::Partition;

    #[test]
    fn golden_table_entry() {
        let t = TableInfo {
            id: TableId(1),
            name: "t".into(),
            sharding: Sharding::Hash { tablets: 1 },
            tablets: vec![TabletInfo { id: TabletId(2), partition: Partition { start: vec![], end: None }, leader: "a".into(), replicas: vec!["a".into(), "b".into()] }],
        };
        let b = encode_table(&t);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(
            &hex[..hex.len() - 8],
            // kind 'C', v2 | id | name "t" | Hash (variant 0) tablets=1 | 1 tablet: id 2,
            // start "", end None, leader "a", replicas ["a", "b"]
            "4302\
             0000000000000001\
             000000000000000174\
             0000000000000001\
             0000000000000001\
             0000000000000002\
             000000000000000000\
             000000000000000161\
             0000000000000002\
             000000000000000161\
             000000000000000162"
        );
        assert_eq!(decode_table(&b).unwrap(), t);
    }

    #[test]
    fn version_1_entries_still_decode() {
        // A v1 entry as written before replica lists: tablet 2 led by "a".
        let hex = "0000000000000001000000000000000174000000000000000100000000000000010000000000000002000000000000000000000000000000000161";
        let payload: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let t = decode_table(&encode_blob(BLOB_KIND, 1, &payload)).unwrap();
        assert_eq!(t.tablets[0].leader, "a");
        assert_eq!(t.tablets[0].replicas, vec!["a".to_string()]);
        assert_eq!(t.tablets[0].id, TabletId(2));
    }
}
