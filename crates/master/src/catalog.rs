//! The persisted catalog.
//!
//! It lives in the engine of the master's Raft group (tablet [`TabletId::MASTER`]
//! on each master node): every change is a batch written through a [`CatalogLog`]
//! (the group), which every master replica applies alike; the leader serves, and
//! reloads what it keeps in memory whenever its term changes.
//!
//! Layout (regular CF, not MVCC):
//! - `"t/" ++ name` → blob(kind `'C'`, v3, bincode(`TableInfo`)); v1 entries (before
//!   tablets had replica lists) decode with the leader as the only replica, v1 and
//!   v2 ones (before table options) with the default options
//! - `"next_id"`    → u64 BE: next id for tables and tablets (one sequence)
//! - `"next_node_id"` → u64 BE: next id for a joining node (node 1 is the master)
//! - `"n/" ++ node id (u64 BE)` → the node's RPC address (every node that registered)
//! - `"a/" ++ name` → the table name it is another name of (`AddTableName`)
//! - `"d/" ++ seq (u64 BE)` → blob(kind `'D'`, v1, bincode(`DdlEntry`)): the DDL log
//! - `"s/" ++ name` → last value (i64 BE) ++ is_called (1 byte): a cluster-wide
//!   sequence (other names of it in `"a/"` too)
//! - `"f/" ++ node id (u64 BE) ++ lock id (u128 BE)` → blob(kind `'F'`, v1,
//!   bincode(`Fence`)): a SQL node a DDL lock went on without, which gets no
//!   SQL lease until that lock is let go (see the tablet server's `sql_lease.rs`)
//! - `"x/" ++ parent tablet id (u64 BE)` → blob(kind `'X'`, v1,
//!   bincode(`SplitRecord`)): a tablet split the master started ([`splits`])

use parking_lot::Mutex;
use pinax_codec::blob::{decode_blob, encode_blob};
use pinax_common::{ErrorCode, TableId, TabletId};
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, OwnedBatch, Snapshot, WriteBatch, WriteOptions};
use pinax_proto::{DdlEntry, Sharding, TableInfo, TableOptions, TabletInfo};
use std::collections::BTreeMap;
use std::sync::Arc;

pub mod splits;

pub use splits::{Located, SplitRecord, SplitState};

const TABLE_PREFIX: &[u8] = b"t/";
/// Names of the catalog's own tables (status tablets) start with this; storage
/// names of SQL relations never do.
pub const SYSTEM_TABLE_PREFIX: &str = "$";

/// The master group's own table: one tablet, [`TabletId::MASTER`].
pub const MASTER_TABLE_NAME: &str = "$master";

/// The name of node `node`'s status table.
pub fn status_table_name(node: u64) -> String {
    format!("{SYSTEM_TABLE_PREFIX}status.{node}")
}
const NEXT_ID: &[u8] = b"next_id";
const NEXT_NODE_ID: &[u8] = b"next_node_id";
const ALIAS_PREFIX: &[u8] = b"a/";
const DDL_PREFIX: &[u8] = b"d/";
const DDL_KIND: u8 = b'D';
/// v2 added `DdlEntry::lock`; v1 entries (without it) are still read.
const DDL_VERSION: u8 = 2;
const SEQUENCE_PREFIX: &[u8] = b"s/";
const NODE_PREFIX: &[u8] = b"n/";
const FENCE_PREFIX: &[u8] = b"f/";
const FENCE_KIND: u8 = b'F';
const FENCE_VERSION: u8 = 1;

/// A SQL node fenced for a DDL lock that went on without it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fence {
    /// The lock's origin node (asked whether the lock is still held).
    pub origin_addr: String,
    /// When the fence went up (hybrid time's physical microseconds).
    pub since_micros: u64,
}

const BLOB_KIND: u8 = b'C';
const BLOB_VERSION: u8 = 3;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("relation \"{0}\" already exists")]
    AlreadyExists(String),
    #[error("relation \"{0}\" does not exist")]
    NotFound(String),
    /// No table lists this tablet (and no split names it).
    #[error("tablet {} does not exist", .0.0)]
    TabletNotFound(TabletId),
    #[error("invalid table definition: {0}")]
    Invalid(String),
    #[error(transparent)]
    Engine(#[from] pinax_engine::Error),
    #[error("corrupt catalog entry: {0}")]
    Corrupt(String),
    /// This master replica does not lead (the leader's address, if known).
    #[error("this node does not lead the master group{}", .0.as_ref().map(|l| format!(" (leader: {l})")).unwrap_or_default())]
    NotLeader(Option<String>),
    /// The master group cannot serve now (no quorum, closing).
    #[error("the master is unavailable: {0}")]
    Unavailable(String),
}

impl CatalogError {
    pub fn code(&self) -> ErrorCode {
        match self {
            CatalogError::AlreadyExists(_) => ErrorCode::TableAlreadyExists,
            CatalogError::NotFound(_) => ErrorCode::TableNotFound,
            CatalogError::TabletNotFound(_) => ErrorCode::TabletNotFound,
            CatalogError::Invalid(_) => ErrorCode::InvalidRequest,
            CatalogError::Engine(_) => ErrorCode::Io,
            CatalogError::Corrupt(_) => ErrorCode::Corruption,
            CatalogError::NotLeader(_) => ErrorCode::NotLeader,
            CatalogError::Unavailable(_) => ErrorCode::Unavailable,
        }
    }
}

/// Most bytes one decoded record may claim (what an RPC frame can carry): a
/// damaged length must fail the decode, not make it allocate petabytes and
/// abort the node (as the fuzzer found the Raft decoder doing).
const DECODE_LIMIT: usize = 64 << 20;

pub(crate) fn bincode_cfg() -> bincode::config::Configuration<bincode::config::BigEndian, bincode::config::Fixint, bincode::config::Limit<DECODE_LIMIT>> {
    bincode::config::standard().with_big_endian().with_fixed_int_encoding().with_limit::<DECODE_LIMIT>()
}

/// A value as a versioned blob: bincode of `v` under (`kind`, `version`).
pub(crate) fn encode_record<T: serde::Serialize + ?Sized>(kind: u8, version: u8, v: &T) -> Vec<u8> {
    // Encoding a plain value into a Vec cannot fail.
    let payload = bincode::serde::encode_to_vec(v, bincode_cfg()).unwrap_or_default();
    encode_blob(kind, version, &payload)
}

/// The value of a blob written by [`encode_record`] with `kind` and `version`
/// (another version is corrupt: "unknown `what` version N").
pub(crate) fn decode_record<T: serde::de::DeserializeOwned>(kind: u8, version: u8, b: &[u8], what: &str) -> Result<T, CatalogError> {
    let (found, payload) = decode_blob(kind, b).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
    if found != version {
        return Err(CatalogError::Corrupt(format!("unknown {what} version {found}")));
    }
    let (v, _) = bincode::serde::decode_from_slice(payload, bincode_cfg()).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
    Ok(v)
}

/// A DDL log entry as written before `DdlEntry::lock` (record version 1).
#[derive(serde::Deserialize)]
struct DdlEntryV1 {
    seq: u64,
    origin: u64,
    database: String,
    user: String,
    search_path: String,
    statements: Vec<pinax_proto::DdlStatement>,
}

/// A DDL log entry record, of either version.
fn decode_ddl_entry(b: &[u8]) -> Result<DdlEntry, CatalogError> {
    if b.get(1) == Some(&1) {
        let v: DdlEntryV1 = decode_record(DDL_KIND, 1, b, "DDL log entry")?;
        return Ok(DdlEntry {
            seq: v.seq,
            origin: v.origin,
            database: v.database,
            user: v.user,
            search_path: v.search_path,
            statements: v.statements,
            lock: 0,
        });
    }
    decode_record(DDL_KIND, DDL_VERSION, b, "DDL log entry")
}

pub fn encode_table(t: &TableInfo) -> Vec<u8> {
    encode_record(BLOB_KIND, BLOB_VERSION, t)
}

/// Decode `data` as every catalog record read from the disk, discarding the
/// results: the fuzz target's entry point (`crates/master/fuzz`). Never panics.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    let _ = decode_table(data);
    if let [kind, version, rest @ ..] = data {
        let _ = decode_record::<pinax_proto::DdlEntry>(*kind, *version, rest, "fuzz");
        let _ = decode_ddl_entry(data);
        let _ = decode_record::<TableInfo>(*kind, *version, rest, "fuzz");
        let _ = splits::decode_split(data);
    }
}

pub fn decode_table(b: &[u8]) -> Result<TableInfo, CatalogError> {
    let (version, payload) = decode_blob(BLOB_KIND, b).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
    if version == 1 {
        let (t, _): (TableInfoV1, _) = bincode::serde::decode_from_slice(payload, bincode_cfg()).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
        return Ok(TableInfo {
            id: t.id,
            name: t.name,
            sharding: t.sharding,
            tablets: t
                .tablets
                .into_iter()
                .map(|ti| TabletInfo { id: ti.id, partition: ti.partition, replicas: vec![ti.leader.clone()], leader: ti.leader })
                .collect(),
            options: TableOptions::default(),
        });
    }
    if version == 2 {
        let (t, _): (TableInfoV2, _) = bincode::serde::decode_from_slice(payload, bincode_cfg()).map_err(|e| CatalogError::Corrupt(e.to_string()))?;
        return Ok(TableInfo { id: t.id, name: t.name, sharding: t.sharding, tablets: t.tablets, options: TableOptions::default() });
    }
    decode_record(BLOB_KIND, BLOB_VERSION, b, "catalog entry")
}

/// Catalog entries of version 2 (before table options).
#[derive(serde::Deserialize)]
struct TableInfoV2 {
    id: TableId,
    name: String,
    sharding: Sharding,
    tablets: Vec<TabletInfo>,
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

#[derive(Default)]
struct State {
    tables: BTreeMap<String, TableInfo>,
    /// `tables` as a list, made when first asked for after a change (the master's
    /// placement pass asks each second: cloning 4,000 tables' infos each time was
    /// a share of an idle node's CPU).
    listed: Option<Arc<Vec<TableInfo>>>,
    /// Other names of tables: name → the table's own name.
    aliases: BTreeMap<String, String>,
    next_id: u64,
    /// Sequence number of the DDL log's last entry (0: empty).
    last_ddl: u64,
    /// Sequences that have had a value: name → (last value, returned yet).
    sequences: BTreeMap<String, (i64, bool)>,
    /// Registered nodes: id → RPC address.
    nodes: BTreeMap<u64, String>,
    /// Fenced SQL nodes: (node, DDL lock) → the fence.
    fences: BTreeMap<(u64, u128), Fence>,
    /// Tablet splits the master started, by parent id ([`splits`]).
    splits: BTreeMap<TabletId, SplitRecord>,
    /// A write failed (it may or may not have been applied): reload before use.
    reload: bool,
}

/// Options of a sequence, as its `Next` request gives them.
#[derive(Clone, Copy, Debug)]
pub struct SequenceOptions {
    pub start: i64,
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    pub cycle: bool,
}

/// Up to `count` values after state (`last`, `is_called`), as PostgreSQL's
/// nextval_internal computes them: (first value, how many, new state). A batch
/// stops at the sequence's bound; a cycling sequence wraps at the start of the
/// next batch, so a batch is always `first, first + increment, ...`.
pub fn next_values(state: (i64, bool), o: SequenceOptions, count: u32) -> (i64, u32, (i64, bool)) {
    let (mut last, mut called) = state;
    let mut first = 0;
    let mut n = 0u32;
    while n < count.max(1) {
        let value = if !called {
            last
        } else {
            let next = last as i128 + o.increment as i128;
            if next > o.max as i128 || next < o.min as i128 {
                if !o.cycle || n > 0 {
                    break;
                }
                if o.increment > 0 {
                    o.min
                } else {
                    o.max
                }
            } else {
                next as i64
            }
        };
        if n == 0 {
            first = value;
        }
        last = value;
        called = true;
        n += 1;
    }
    (first, n, (last, called))
}

/// What [`Catalog::drop_table`] dropped.
#[derive(Debug)]
pub enum Dropped {
    /// A table (with every other name it had): its tablets are to be destroyed,
    /// and so are the tablets of its unfinished splits that it does not list
    /// (children not swapped in yet, parents not dropped yet: tablet and the
    /// RPC addresses of its replicas). Its split records went with it.
    Table(TableInfo, Vec<(TabletId, Vec<String>)>),
    /// Only another name of a table.
    Name,
}

/// Where the catalog's changes go: the master's Raft group (every master replica
/// applies the same batches to its engine), or the engine itself.
pub trait CatalogLog: Send + Sync {
    /// Make `batch` durable (on a majority of the masters) and apply it to the
    /// catalog's engine. After an error the batch may or may not be applied.
    fn write(&self, batch: OwnedBatch) -> Result<(), CatalogError>;
    /// The current term when this replica leads and has applied every change
    /// committed before it ([`CatalogError::NotLeader`] otherwise). The catalog
    /// reloads what it keeps in memory when the term changes.
    fn term(&self) -> Result<u64, CatalogError>;
}

/// No replication: batches go straight to the engine, synced (a lone master,
/// tests).
pub struct LocalLog<E: KvEngine> {
    engine: Arc<E>,
}

impl<E: KvEngine> CatalogLog for LocalLog<E> {
    fn write(&self, batch: OwnedBatch) -> Result<(), CatalogError> {
        let mut b = self.engine.new_batch();
        batch.replay(&mut b);
        Ok(self.engine.write(b, WriteOptions { sync: true, ..Default::default() })?)
    }
    fn term(&self) -> Result<u64, CatalogError> {
        Ok(1)
    }
}

/// The in-memory state and the leader term it was loaded in (0: not loaded).
struct Loaded {
    term: u64,
    st: State,
}

type Guard<'a> = parking_lot::MappedMutexGuard<'a, State>;

pub struct Catalog<E: KvEngine> {
    engine: Arc<E>,
    log: Arc<dyn CatalogLog>,
    state: Mutex<Loaded>,
}

impl<E: KvEngine> Catalog<E> {
    /// A catalog kept in `engine`, changed through `log` (which applies to
    /// `engine`). Nothing is read until the first operation (which needs `log`
    /// to lead).
    pub fn new(engine: Arc<E>, log: Arc<dyn CatalogLog>) -> Self {
        Catalog { engine, log, state: Mutex::new(Loaded { term: 0, st: State::default() }) }
    }

    /// A catalog written to `engine` directly (no replication), loaded now.
    pub fn open(engine: E) -> Result<Self, CatalogError> {
        let engine = Arc::new(engine);
        let c = Self::new(engine.clone(), Arc::new(LocalLog { engine }));
        drop(c.lock()?);
        Ok(c)
    }

    /// The state, reloaded from the engine when the leader term changed (another
    /// leader may have changed the catalog meanwhile).
    fn lock(&self) -> Result<Guard<'_>, CatalogError> {
        let mut g = self.state.lock();
        let term = self.log.term()?;
        if g.term != term || g.st.reload {
            g.st = load(&*self.engine)?;
            g.term = term;
        }
        Ok(parking_lot::MutexGuard::map(g, |l| &mut l.st))
    }

    /// Write `batch` through the log; on failure the in-memory state is reloaded
    /// before its next use (the batch may or may not have been applied).
    fn write(&self, st: &mut State, batch: OwnedBatch) -> Result<(), CatalogError> {
        let res = self.log.write(batch);
        if res.is_err() {
            st.reload = true;
        }
        res
    }

    /// Allocate ids and partitions for a new table (not yet persisted: the caller
    /// creates the tablets, then calls [`Catalog::commit_table`]).
    pub fn plan_table(&self, name: &str, sharding: Sharding, leader: &str) -> Result<TableInfo, CatalogError> {
        if name.is_empty() {
            return Err(CatalogError::Invalid("empty table name".into()));
        }
        let parts = crate::plan_partitions(&sharding).map_err(CatalogError::Invalid)?;
        let mut st = self.lock()?;
        if st.tables.contains_key(name) {
            return Err(CatalogError::AlreadyExists(name.to_string()));
        }
        let first = st.next_id;
        let next = first + 1 + parts.len() as u64;
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, NEXT_ID, &next.to_be_bytes());
        self.write(&mut st, b)?;
        st.next_id = next;
        let tablets = parts
            .into_iter()
            .enumerate()
            .map(|(i, partition)| TabletInfo { id: TabletId(first + 1 + i as u64), partition, leader: leader.to_string(), replicas: vec![leader.to_string()] })
            .collect();
        Ok(TableInfo { id: TableId(first), name: name.to_string(), sharding, tablets, options: TableOptions::default() })
    }

    /// Plan node `node`'s status tablet: the table [`status_table_name`] with one
    /// tablet over the whole key space, id [`TabletId::status_of_node`] (commit it
    /// with [`Catalog::commit_table`] like any other).
    pub fn plan_status_table(&self, node: u64, leader: &str) -> Result<TableInfo, CatalogError> {
        let name = status_table_name(node);
        if self.lock()?.tables.contains_key(&name) {
            return Err(CatalogError::AlreadyExists(name));
        }
        Ok(single_tablet_table(name, TabletId::status_of_node(node), vec![leader.to_string()]))
    }

    /// Persist a planned table. Fails if the name was taken meanwhile.
    pub fn commit_table(&self, t: &TableInfo) -> Result<(), CatalogError> {
        let mut st = self.lock()?;
        if st.tables.contains_key(&t.name) {
            return Err(CatalogError::AlreadyExists(t.name.clone()));
        }
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, &table_key(&t.name), &encode_table(t));
        self.write(&mut st, b)?;
        st.tables.insert(t.name.clone(), t.clone());
        st.listed = None;
        Ok(())
    }

    /// Replace replica `old` of tablet `tablet` of table `name` by `new` (its
    /// replica moved off a dead node; the leader becomes `new` if it was `old`), or
    /// without `old` add `new` (an under-replicated tablet got a replica).
    pub fn move_replica(&self, name: &str, tablet: TabletId, old: Option<&str>, new: &str) -> Result<TableInfo, CatalogError> {
        self.change_tablet(name, tablet, |ti| {
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
            true
        })
    }

    /// Record tablet `tablet` of table `name` as replicated on `replicas` (RPC
    /// addresses): what its Raft group's voters are, as its leader answered a
    /// membership change. The leader stays if it is one of them, else the first
    /// is named until the group reports.
    pub fn set_replicas(&self, name: &str, tablet: TabletId, replicas: &[String]) -> Result<TableInfo, CatalogError> {
        if replicas.is_empty() {
            return Err(CatalogError::Invalid(format!("tablet {} of table {name} cannot have no replicas", tablet.0)));
        }
        self.change_tablet(name, tablet, |ti| {
            if ti.replicas == replicas {
                return false;
            }
            ti.replicas = replicas.to_vec();
            if !replicas.contains(&ti.leader) {
                ti.leader = replicas[0].clone();
            }
            true
        })
    }

    /// Change tablet `tablet` of table `name` with `change` and persist the table
    /// if it says it changed something; the table as it is after.
    fn change_tablet(&self, name: &str, tablet: TabletId, change: impl FnOnce(&mut TabletInfo) -> bool) -> Result<TableInfo, CatalogError> {
        let mut st = self.lock()?;
        let mut t = st.tables.get(name).cloned().ok_or_else(|| CatalogError::NotFound(name.to_string()))?;
        let ti = t.tablets.iter_mut().find(|ti| ti.id == tablet).ok_or_else(|| CatalogError::Invalid(format!("table {name} has no tablet {}", tablet.0)))?;
        if !change(ti) {
            return Ok(t);
        }
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, &table_key(name), &encode_table(&t));
        self.write(&mut st, b)?;
        st.tables.insert(name.to_string(), t.clone());
        st.listed = None;
        Ok(t)
    }

    /// Set the options of table `name` (its own name or another); the table
    /// as it is after.
    pub fn set_options(&self, name: &str, options: TableOptions) -> Result<TableInfo, CatalogError> {
        let mut st = self.lock()?;
        let own = st.aliases.get(name).cloned().unwrap_or_else(|| name.to_string());
        let mut t = st.tables.get(&own).cloned().ok_or_else(|| CatalogError::NotFound(name.to_string()))?;
        if t.options == options {
            return Ok(t);
        }
        t.options = options;
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, &table_key(&own), &encode_table(&t));
        self.write(&mut st, b)?;
        st.tables.insert(own, t.clone());
        st.listed = None;
        Ok(t)
    }

    /// Drop name `name`: another name of a table goes alone; a table's own name
    /// takes the table and all its other names with it.
    pub fn drop_table(&self, name: &str) -> Result<Dropped, CatalogError> {
        let mut st = self.lock()?;
        if st.aliases.contains_key(name) {
            let mut b = OwnedBatch::new();
            b.delete(Cf::Regular, &prefixed(ALIAS_PREFIX, name));
            self.write(&mut st, b)?;
            st.aliases.remove(name);
            return Ok(Dropped::Name);
        }
        let t = st.tables.get(name).cloned().ok_or_else(|| CatalogError::NotFound(name.to_string()))?;
        let others: Vec<String> = st.aliases.iter().filter(|(_, target)| *target == name).map(|(a, _)| a.clone()).collect();
        let mut b = OwnedBatch::new();
        b.delete(Cf::Regular, &table_key(name));
        for a in &others {
            b.delete(Cf::Regular, &prefixed(ALIAS_PREFIX, a));
        }
        let (records, leftovers) = splits::drop_with_table(&st, &t, &mut b);
        self.write(&mut st, b)?;
        st.tables.remove(name);
        st.listed = None;
        for a in &others {
            st.aliases.remove(a);
        }
        for r in records {
            st.splits.remove(&r);
        }
        Ok(Dropped::Table(t, leftovers))
    }

    /// Make `name` another name of table `existing` (itself maybe another name).
    /// Idempotent; fails if `name` is taken by another table.
    pub fn add_name(&self, name: &str, existing: &str) -> Result<TableInfo, CatalogError> {
        if name.is_empty() {
            return Err(CatalogError::Invalid("empty table name".into()));
        }
        let mut st = self.lock()?;
        let target = st.aliases.get(existing).cloned().unwrap_or_else(|| existing.to_string());
        let t = st.tables.get(&target).cloned().ok_or_else(|| CatalogError::NotFound(existing.to_string()))?;
        if name == target || st.aliases.get(name) == Some(&target) {
            return Ok(t);
        }
        if st.tables.contains_key(name) || st.aliases.contains_key(name) {
            return Err(CatalogError::AlreadyExists(name.to_string()));
        }
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, &prefixed(ALIAS_PREFIX, name), target.as_bytes());
        self.write(&mut st, b)?;
        st.aliases.insert(name.to_string(), target);
        Ok(t)
    }

    /// Append `entry` to the DDL log (synced); returns its sequence number.
    pub fn append_ddl(&self, mut entry: DdlEntry) -> Result<u64, CatalogError> {
        let mut st = self.lock()?;
        entry.seq = st.last_ddl + 1;
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, &prefixed(DDL_PREFIX, entry.seq.to_be_bytes()), &encode_record(DDL_KIND, DDL_VERSION, &entry));
        self.write(&mut st, b)?;
        st.last_ddl = entry.seq;
        Ok(entry.seq)
    }

    /// Make `name` another name of sequence `existing` (which may not have had a
    /// value yet). Idempotent; fails if `name` is taken.
    pub fn sequence_alias(&self, name: &str, existing: &str) -> Result<(), CatalogError> {
        let mut st = self.lock()?;
        let target = st.aliases.get(existing).cloned().unwrap_or_else(|| existing.to_string());
        if name == target || st.aliases.get(name) == Some(&target) {
            return Ok(());
        }
        if st.sequences.contains_key(name) || st.tables.contains_key(name) || st.aliases.contains_key(name) {
            return Err(CatalogError::AlreadyExists(name.to_string()));
        }
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, &prefixed(ALIAS_PREFIX, name), target.as_bytes());
        self.write(&mut st, b)?;
        st.aliases.insert(name.to_string(), target);
        Ok(())
    }

    fn put_sequence(&self, st: &mut State, name: String, state: (i64, bool)) -> Result<(), CatalogError> {
        let mut v = state.0.to_be_bytes().to_vec();
        v.push(state.1 as u8);
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, &prefixed(SEQUENCE_PREFIX, &name), &v);
        self.write(st, b)?;
        st.sequences.insert(name, state);
        Ok(())
    }

    /// Take up to `count` values of sequence `name` (see [`next_values`]): the
    /// first and how many (0: it reached its bound).
    pub fn sequence_next(&self, name: &str, o: SequenceOptions, count: u32) -> Result<(i64, u32), CatalogError> {
        let mut st = self.lock()?;
        let own = st.aliases.get(name).cloned().unwrap_or_else(|| name.to_string());
        let state = st.sequences.get(&own).copied().unwrap_or((o.start, false));
        let (first, n, new) = next_values(state, o, count);
        if n == 0 {
            return Ok((0, 0));
        }
        self.put_sequence(&mut st, own, new)?;
        Ok((first, n))
    }

    /// setval of sequence `name`.
    pub fn sequence_set(&self, name: &str, value: i64, is_called: bool) -> Result<(), CatalogError> {
        let mut st = self.lock()?;
        let own = st.aliases.get(name).cloned().unwrap_or_else(|| name.to_string());
        self.put_sequence(&mut st, own, (value, is_called))
    }

    /// Drop sequence name `name`: another name alone, a sequence's own name with
    /// the sequence and its other names. Dropping an unknown name does nothing.
    pub fn sequence_drop(&self, name: &str) -> Result<(), CatalogError> {
        let mut st = self.lock()?;
        let mut b = OwnedBatch::new();
        let mut gone = Vec::new();
        let alias = st.aliases.contains_key(name);
        if alias {
            b.delete(Cf::Regular, &prefixed(ALIAS_PREFIX, name));
            gone.push(name.to_string());
        } else {
            for (a, _) in st.aliases.iter().filter(|(_, t)| *t == name) {
                b.delete(Cf::Regular, &prefixed(ALIAS_PREFIX, a));
                gone.push(a.clone());
            }
            b.delete(Cf::Regular, &prefixed(SEQUENCE_PREFIX, name));
        }
        self.write(&mut st, b)?;
        for a in gone {
            st.aliases.remove(&a);
        }
        if !alias {
            st.sequences.remove(name);
        }
        Ok(())
    }

    /// Up to `max` DDL log entries after sequence number `after`, in order.
    pub fn read_ddl(&self, after: u64, max: usize) -> Result<Vec<DdlEntry>, CatalogError> {
        let _st = self.lock()?;
        let snap = self.engine.snapshot();
        let lower = prefixed(DDL_PREFIX, (after + 1).to_be_bytes());
        let mut it = snap.iter(Cf::Regular, IterOptions { lower: Some(lower), upper: Some(b"d0".to_vec()), prefix_same_as_start: false });
        it.seek_to_first();
        let mut out = Vec::new();
        while out.len() < max && it.valid()? {
            out.push(decode_ddl_entry(it.value())?);
            it.next();
        }
        Ok(out)
    }

    /// A new node id (ids start at 2: the first node, the master, is 1).
    pub fn allocate_node_id(&self) -> Result<u64, CatalogError> {
        let mut st = self.lock()?;
        let next = match self.engine.get(Cf::Regular, NEXT_NODE_ID)? {
            Some(v) => u64::from_be_bytes(v.as_slice().try_into().map_err(|_| CatalogError::Corrupt("next_node_id".into()))?),
            None => 2,
        };
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, NEXT_NODE_ID, &(next + 1).to_be_bytes());
        self.write(&mut st, b)?;
        Ok(next)
    }

    /// Record node `id`'s RPC address (a node at an address another node had
    /// replaces it). Writes only when something changed.
    pub fn put_node(&self, id: u64, addr: &str) -> Result<(), CatalogError> {
        let mut st = self.lock()?;
        if st.nodes.get(&id).map(String::as_str) == Some(addr) {
            return Ok(());
        }
        let stale: Vec<u64> = st.nodes.iter().filter(|(n, a)| **n != id && *a == addr).map(|(n, _)| *n).collect();
        let mut b = OwnedBatch::new();
        for n in &stale {
            b.delete(Cf::Regular, &prefixed(NODE_PREFIX, n.to_be_bytes()));
        }
        b.put(Cf::Regular, &prefixed(NODE_PREFIX, id.to_be_bytes()), addr.as_bytes());
        self.write(&mut st, b)?;
        for n in stale {
            st.nodes.remove(&n);
        }
        st.nodes.insert(id, addr.to_string());
        Ok(())
    }

    /// Every node that registered (id → RPC address).
    pub fn nodes(&self) -> Result<BTreeMap<u64, String>, CatalogError> {
        Ok(self.lock()?.nodes.clone())
    }

    /// The table named `name` (its own name or another).
    pub fn get(&self, name: &str) -> Result<TableInfo, CatalogError> {
        let st = self.lock()?;
        let own = st.aliases.get(name).map(String::as_str).unwrap_or(name);
        st.tables.get(own).cloned().ok_or_else(|| CatalogError::NotFound(name.to_string()))
    }

    pub fn tables(&self) -> Result<Vec<TableInfo>, CatalogError> {
        Ok(self.lock()?.tables.values().cloned().collect())
    }

    /// Every table, as [`Catalog::tables`], shared: the same list until the
    /// tables change (no copy for a reader that only looks).
    pub fn tables_shared(&self) -> Result<Arc<Vec<TableInfo>>, CatalogError> {
        let mut st = self.lock()?;
        if st.listed.is_none() {
            st.listed = Some(Arc::new(st.tables.values().cloned().collect()));
        }
        Ok(st.listed.clone().unwrap_or_default())
    }

    /// Sequence number of the DDL log's last entry (0: none yet).
    pub fn last_ddl(&self) -> Result<u64, CatalogError> {
        Ok(self.lock()?.last_ddl)
    }

    /// Fence `nodes` for DDL lock `lock` (taken at `origin_addr`), as of `now`.
    pub fn fence(&self, nodes: &[u64], lock: u128, origin_addr: &str, now: u64) -> Result<(), CatalogError> {
        let mut st = self.lock()?;
        let new: Vec<u64> = nodes.iter().copied().filter(|n| !st.fences.contains_key(&(*n, lock))).collect();
        if new.is_empty() {
            return Ok(());
        }
        let fence = Fence { origin_addr: origin_addr.to_string(), since_micros: now };
        let mut b = OwnedBatch::new();
        for n in &new {
            b.put(Cf::Regular, &fence_key(*n, lock), &encode_record(FENCE_KIND, FENCE_VERSION, &fence));
        }
        self.write(&mut st, b)?;
        for n in new {
            st.fences.insert((n, lock), fence.clone());
        }
        Ok(())
    }

    /// Whether node `node` is fenced for some DDL lock.
    pub fn fenced(&self, node: u64) -> Result<bool, CatalogError> {
        Ok(self.lock()?.fences.range((node, 0)..=(node, u128::MAX)).next().is_some())
    }

    /// Take down the fences of DDL lock `lock` (it was let go).
    pub fn unfence(&self, lock: u128) -> Result<(), CatalogError> {
        let mut st = self.lock()?;
        let gone: Vec<(u64, u128)> = st.fences.keys().filter(|(_, l)| *l == lock).copied().collect();
        if gone.is_empty() {
            return Ok(());
        }
        let mut b = OwnedBatch::new();
        for (n, l) in &gone {
            b.delete(Cf::Regular, &fence_key(*n, *l));
        }
        self.write(&mut st, b)?;
        for k in gone {
            st.fences.remove(&k);
        }
        Ok(())
    }

    /// Every fence: (node, DDL lock) → the fence.
    pub fn fences(&self) -> Result<BTreeMap<(u64, u128), Fence>, CatalogError> {
        Ok(self.lock()?.fences.clone())
    }
}

fn fence_key(node: u64, lock: u128) -> Vec<u8> {
    let mut k = FENCE_PREFIX.to_vec();
    k.extend_from_slice(&node.to_be_bytes());
    k.extend_from_slice(&lock.to_be_bytes());
    k
}

/// A table of one tablet over the whole key space, with tablet id `id` (table id
/// the same): the catalog's own tables.
pub fn single_tablet_table(name: String, id: TabletId, replicas: Vec<String>) -> TableInfo {
    let sharding = Sharding::Range { split_points: Vec::new() };
    let partition = pinax_proto::Partition { start: Vec::new(), end: None };
    let leader = replicas.first().cloned().unwrap_or_default();
    TableInfo { id: TableId(id.0), name, sharding, tablets: vec![TabletInfo { id, partition, leader, replicas }], options: TableOptions::default() }
}

/// Called per entry of a prefix (key without the prefix, value).
type EntryFn<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> Result<(), CatalogError>;

/// Read the catalog's state from its engine.
fn load<E: KvEngine>(engine: &E) -> Result<State, CatalogError> {
    let next_id = match engine.get(Cf::Regular, NEXT_ID)? {
        Some(v) => u64::from_be_bytes(v.as_slice().try_into().map_err(|_| CatalogError::Corrupt("next_id".into()))?),
        None => 1,
    };
    let snap = engine.snapshot();
    let scan = |prefix: &[u8], f: EntryFn<'_>| -> Result<(), CatalogError> {
        let upper = pinax_codec::keys::prefix_upper_bound(prefix);
        let mut it = snap.iter(Cf::Regular, IterOptions { lower: Some(prefix.to_vec()), upper, prefix_same_as_start: false });
        it.seek_to_first();
        while it.valid()? {
            f(&it.key()[prefix.len()..], it.value())?;
            it.next();
        }
        Ok(())
    };
    let mut st = State { next_id, ..State::default() };
    scan(TABLE_PREFIX, &mut |_, v| {
        let t = decode_table(v)?;
        st.tables.insert(t.name.clone(), t);
        Ok(())
    })?;
    scan(ALIAS_PREFIX, &mut |k, v| {
        st.aliases.insert(String::from_utf8_lossy(k).into_owned(), String::from_utf8_lossy(v).into_owned());
        Ok(())
    })?;
    let mut it = snap.iter(Cf::Regular, IterOptions { lower: Some(DDL_PREFIX.to_vec()), upper: Some(b"d0".to_vec()), prefix_same_as_start: false });
    it.seek_to_last();
    if it.valid()? {
        st.last_ddl = u64::from_be_bytes(it.key()[DDL_PREFIX.len()..].try_into().map_err(|_| CatalogError::Corrupt("DDL log key".into()))?);
    }
    drop(it);
    scan(SEQUENCE_PREFIX, &mut |k, v| {
        let name = String::from_utf8_lossy(k).into_owned();
        if v.len() != 9 {
            return Err(CatalogError::Corrupt(format!("sequence {name}")));
        }
        st.sequences.insert(name, (i64::from_be_bytes(v[..8].try_into().unwrap_or_default()), v[8] != 0));
        Ok(())
    })?;
    scan(NODE_PREFIX, &mut |k, v| {
        let id = u64::from_be_bytes(k.try_into().map_err(|_| CatalogError::Corrupt("node key".into()))?);
        st.nodes.insert(id, String::from_utf8_lossy(v).into_owned());
        Ok(())
    })?;
    scan(FENCE_PREFIX, &mut |k, v| {
        let (node, lock) = k.split_at_checked(8).ok_or_else(|| CatalogError::Corrupt("fence key".into()))?;
        let node = u64::from_be_bytes(node.try_into().map_err(|_| CatalogError::Corrupt("fence key".into()))?);
        let lock = u128::from_be_bytes(lock.try_into().map_err(|_| CatalogError::Corrupt("fence key".into()))?);
        st.fences.insert((node, lock), decode_record(FENCE_KIND, FENCE_VERSION, v, "fence")?);
        Ok(())
    })?;
    scan(splits::SPLIT_PREFIX, &mut |_, v| {
        let r = splits::decode_split(v)?;
        st.splits.insert(r.parent.id, r);
        Ok(())
    })?;
    Ok(st)
}

fn prefixed(prefix: &[u8], rest: impl AsRef<[u8]>) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(rest.as_ref());
    k
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
            tablets: vec![TabletInfo {
                id: TabletId(2),
                partition: Partition { start: vec![], end: None },
                leader: "a".into(),
                replicas: vec!["a".into(), "b".into()],
            }],
            options: TableOptions { auto_split: false },
        };
        let b = encode_table(&t);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(
            &hex[..hex.len() - 8],
            // kind 'C', v3 | id | name "t" | Hash (variant 0) tablets=1 | 1 tablet: id 2,
            // start "", end None, leader "a", replicas ["a", "b"] | auto_split false
            "4303\
             0000000000000001\
             000000000000000174\
             0000000000000001\
             0000000000000001\
             0000000000000002\
             000000000000000000\
             000000000000000161\
             0000000000000002\
             000000000000000161\
             000000000000000162\
             00"
        );
        assert_eq!(decode_table(&b).unwrap(), t);
    }

    #[test]
    fn version_2_entries_decode_with_the_default_options() {
        // The v2 golden entry: the v3 one without its options.
        let hex = "0000000000000001000000000000000174000000000000000100000000000000010000000000000002000000000000000000\
                   0000000000000001610000000000000002000000000000000161000000000000000162";
        let hex: String = hex.chars().filter(|c| c.is_ascii_hexdigit()).collect();
        let payload: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let t = decode_table(&encode_blob(BLOB_KIND, 2, &payload)).unwrap();
        assert_eq!(t.options, TableOptions { auto_split: true });
        assert_eq!(t.tablets[0].replicas, vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn options_are_set_through_any_name_and_survive_a_reload() {
        let engine = pinax_engine_mem::MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        let t = table(&c, "t");
        assert!(t.options.auto_split);
        c.add_name("other", "t").unwrap();
        let changed = c.set_options("other", TableOptions { auto_split: false }).unwrap();
        assert_eq!(changed.name, "t");
        assert!(!changed.options.auto_split);
        assert!(!c.get("t").unwrap().options.auto_split);
        assert!(matches!(c.set_options("nope", TableOptions::default()), Err(CatalogError::NotFound(_))));
        let again = Catalog::open(engine).unwrap();
        assert!(!again.get("t").unwrap().options.auto_split);
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

    fn table(c: &Catalog<pinax_engine_mem::MemEngine>, name: &str) -> TableInfo {
        let t = c.plan_table(name, Sharding::Hash { tablets: 2 }, "a").unwrap();
        c.commit_table(&t).unwrap();
        t
    }

    #[test]
    fn a_tablets_replicas_are_recorded_as_its_group_has_them() {
        let engine = pinax_engine_mem::MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        let t = table(&c, "t1");
        let id = t.tablets[1].id;
        let got = c.set_replicas("t1", id, &["b".into(), "c".into(), "d".into()]).unwrap();
        assert_eq!(got.tablets[1].replicas, vec!["b", "c", "d"]);
        assert_eq!(got.tablets[1].leader, "b", "the leader left the group: the first replica is named");
        assert_eq!(got.tablets[0], t.tablets[0], "another tablet changed");
        let got = c.set_replicas("t1", id, &["d".into(), "b".into()]).unwrap();
        assert_eq!(got.tablets[1].leader, "b", "a leader still in the group stays");
        assert!(matches!(c.set_replicas("t1", id, &[]), Err(CatalogError::Invalid(_))));
        assert!(matches!(c.set_replicas("t1", TabletId(999), &["a".into()]), Err(CatalogError::Invalid(_))));
        assert!(matches!(c.set_replicas("missing", id, &["a".into()]), Err(CatalogError::NotFound(_))));
        // Durable.
        let c = Catalog::open(engine.clone()).unwrap();
        assert_eq!(c.get("t1").unwrap().tablets[1].replicas, vec!["d", "b"]);
    }

    #[test]
    fn the_shared_list_of_tables_is_made_again_only_after_a_change() {
        let engine = pinax_engine_mem::MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        assert!(c.tables_shared().unwrap().is_empty());
        let t = table(&c, "t1");
        let a = c.tables_shared().unwrap();
        assert_eq!(*a, c.tables().unwrap());
        assert!(Arc::ptr_eq(&a, &c.tables_shared().unwrap()), "made again without a change");
        // Each change is seen: a replica set, a new table, a drop.
        c.set_replicas("t1", t.tablets[0].id, &["z".into()]).unwrap();
        let b = c.tables_shared().unwrap();
        assert_eq!(b[0].tablets[0].replicas, vec!["z"]);
        assert_eq!(a[0].tablets[0].replicas, t.tablets[0].replicas, "a list handed out does not change");
        table(&c, "t2");
        assert_eq!(c.tables_shared().unwrap().len(), 2);
        c.drop_table("t1").unwrap();
        let names: Vec<String> = c.tables_shared().unwrap().iter().map(|t| t.name.clone()).collect();
        assert_eq!(names, vec!["t2"]);
        assert_eq!(*c.tables_shared().unwrap(), c.tables().unwrap());
    }

    #[test]
    fn other_names_resolve_and_drop_alone_or_with_their_table() {
        let engine = pinax_engine_mem::MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        let t = table(&c, "t1");
        assert_eq!(c.add_name("n2_t1", "t1").unwrap().id, t.id);
        // Idempotent, also through another name; a taken name is refused.
        assert_eq!(c.add_name("n2_t1", "t1").unwrap().id, t.id);
        assert_eq!(c.add_name("n3_t1", "n2_t1").unwrap().id, t.id);
        table(&c, "t2");
        assert!(matches!(c.add_name("t2", "t1"), Err(CatalogError::AlreadyExists(_))));
        assert!(matches!(c.add_name("x", "missing"), Err(CatalogError::NotFound(_))));
        assert_eq!(c.get("n3_t1").unwrap().id, t.id);
        // Names survive a restart.
        let c = Catalog::open(engine.clone()).unwrap();
        assert_eq!(c.get("n2_t1").unwrap().id, t.id);
        // Dropping another name leaves the table.
        assert!(matches!(c.drop_table("n2_t1").unwrap(), Dropped::Name));
        assert!(c.get("n2_t1").is_err());
        assert_eq!(c.get("t1").unwrap().id, t.id);
        // Dropping the table takes its other names.
        assert!(matches!(c.drop_table("t1").unwrap(), Dropped::Table(d, _) if d.id == t.id));
        assert!(c.get("n3_t1").is_err());
        let c = Catalog::open(engine).unwrap();
        assert!(c.get("n3_t1").is_err());
        assert!(c.get("t2").is_ok());
    }

    #[test]
    fn ddl_log_entries_written_before_the_lock_field_are_read() {
        #[derive(serde::Serialize)]
        struct V1<'a>(u64, u64, &'a str, &'a str, &'a str, Vec<pinax_proto::DdlStatement>);
        let st = pinax_proto::DdlStatement { sql: "create table a()".into(), names: vec![] };
        let old = encode_record(DDL_KIND, 1, &V1(7, 2, "db", "u", "public", vec![st.clone()]));
        let e = decode_ddl_entry(&old).unwrap();
        assert_eq!((e.seq, e.origin, e.database.as_str(), e.statements, e.lock), (7, 2, "db", vec![st], 0));
        let new = DdlEntry { seq: 8, origin: 3, database: "d".into(), user: "u".into(), search_path: "p".into(), statements: vec![], lock: 99 };
        assert_eq!(decode_ddl_entry(&encode_record(DDL_KIND, DDL_VERSION, &new)).unwrap(), new);
    }

    #[test]
    fn the_ddl_log_numbers_entries_in_order_and_survives_a_restart() {
        let engine = pinax_engine_mem::MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        let entry = |sql: &str| DdlEntry {
            seq: 0,
            origin: 2,
            database: "db".into(),
            user: "u".into(),
            search_path: "public".into(),
            statements: vec![pinax_proto::DdlStatement { sql: sql.into(), names: vec![("public.t".into(), "n2_t1_2".into())] }],
            lock: 0,
        };
        assert_eq!(c.append_ddl(entry("create table a()")).unwrap(), 1);
        assert_eq!(c.append_ddl(entry("create table b()")).unwrap(), 2);
        let c = Catalog::open(engine).unwrap();
        assert_eq!(c.append_ddl(entry("create table c()")).unwrap(), 3);
        let all = c.read_ddl(0, 100).unwrap();
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(all[1].statements[0].sql, "create table b()");
        assert_eq!(all[1].statements[0].names, entry("").statements[0].names);
        assert_eq!(c.read_ddl(1, 1).unwrap().iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
        assert!(c.read_ddl(3, 100).unwrap().is_empty());
    }

    #[test]
    fn fences_go_up_per_lock_survive_a_restart_and_come_down_with_their_lock() {
        let engine = pinax_engine_mem::MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        c.fence(&[3, 4], 7, "n2:1", 100).unwrap();
        c.fence(&[3], 8, "n5:1", 200).unwrap();
        c.fence(&[3], 8, "n5:1", 300).unwrap(); // again: unchanged
        let c = Catalog::open(engine.clone()).unwrap();
        assert!(c.fenced(3).unwrap() && c.fenced(4).unwrap() && !c.fenced(2).unwrap());
        assert_eq!(c.fences().unwrap()[&(3, 8)], Fence { origin_addr: "n5:1".into(), since_micros: 200 });
        c.unfence(7).unwrap();
        assert!(c.fenced(3).unwrap() && !c.fenced(4).unwrap());
        c.unfence(8).unwrap();
        let c = Catalog::open(engine).unwrap();
        assert!(c.fences().unwrap().is_empty() && !c.fenced(3).unwrap());
    }

    /// A log over a shared engine whose leader term the test sets (0: not leader).
    struct Term(Arc<pinax_engine_mem::MemEngine>, std::sync::atomic::AtomicU64);

    impl CatalogLog for Term {
        fn write(&self, batch: OwnedBatch) -> Result<(), CatalogError> {
            self.term()?;
            LocalLog { engine: self.0.clone() }.write(batch)
        }
        fn term(&self) -> Result<u64, CatalogError> {
            match self.1.load(std::sync::atomic::Ordering::SeqCst) {
                0 => Err(CatalogError::NotLeader(Some("elsewhere".into()))),
                t => Ok(t),
            }
        }
    }

    #[test]
    fn a_replica_serves_only_while_it_leads_and_reloads_when_the_term_changes() {
        // Two replicas' catalogs over one engine (as if both applied the same
        // log): a change made by the other leader is seen once the term changes,
        // not from the stale in-memory state.
        let engine = Arc::new(pinax_engine_mem::MemEngine::new());
        let log_a = Arc::new(Term(engine.clone(), 1.into()));
        let log_b = Arc::new(Term(engine.clone(), 0.into()));
        let a = Catalog::new(engine.clone(), log_a.clone());
        let b = Catalog::new(engine.clone(), log_b.clone());
        let t1 = a.plan_table("t1", Sharding::Hash { tablets: 2 }, "a").unwrap();
        a.commit_table(&t1).unwrap();
        a.put_node(2, "x:1").unwrap();
        assert!(matches!(b.get("t1"), Err(CatalogError::NotLeader(Some(_)))));
        // b leads (term 2) and finds a's changes; a is deposed.
        log_a.1.store(0, std::sync::atomic::Ordering::SeqCst);
        log_b.1.store(2, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(b.get("t1").unwrap().id, t1.id);
        assert_eq!(b.nodes().unwrap().get(&2).map(String::as_str), Some("x:1"));
        let t2 = b.plan_table("t2", Sharding::Hash { tablets: 1 }, "b").unwrap();
        assert!(t2.id.0 > t1.tablets.last().unwrap().id.0, "ids are never reused across leaders");
        b.commit_table(&t2).unwrap();
        b.drop_table("t1").unwrap();
        assert!(matches!(a.tables(), Err(CatalogError::NotLeader(_))));
        // a leads again (term 3): its memory still had t1 and not t2.
        log_b.1.store(0, std::sync::atomic::Ordering::SeqCst);
        log_a.1.store(3, std::sync::atomic::Ordering::SeqCst);
        assert!(matches!(a.get("t1"), Err(CatalogError::NotFound(_))));
        assert_eq!(a.get("t2").unwrap().id, t2.id);
        // A node at another node's address replaces it.
        a.put_node(3, "x:1").unwrap();
        assert_eq!(a.nodes().unwrap().into_iter().collect::<Vec<_>>(), vec![(3, "x:1".to_string())]);
    }

    fn opts(start: i64, increment: i64, min: i64, max: i64, cycle: bool) -> SequenceOptions {
        SequenceOptions { start, increment, min, max, cycle }
    }

    #[test]
    fn sequence_values_follow_postgres_nextval() {
        let o = opts(1, 1, 1, i64::MAX, false);
        // A new sequence returns its start first.
        assert_eq!(next_values((1, false), o, 1), (1, 1, (1, true)));
        assert_eq!(next_values((1, false), o, 100), (1, 100, (100, true)));
        assert_eq!(next_values((100, true), o, 3), (101, 3, (103, true)));
        // setval(s, 10, false) returns 10 next; setval(s, 10) returns 11.
        assert_eq!(next_values((10, false), o, 2), (10, 2, (11, true)));
        assert_eq!(next_values((10, true), o, 1), (11, 1, (11, true)));
        // A batch stops at the bound; the next one finds nothing.
        let small = opts(1, 1, 1, 3, false);
        assert_eq!(next_values((1, true), small, 10), (2, 2, (3, true)));
        assert_eq!(next_values((3, true), small, 10).1, 0);
        // A cycling sequence wraps at the start of a batch only.
        let cyc = opts(1, 1, 1, 3, true);
        assert_eq!(next_values((2, true), cyc, 10), (3, 1, (3, true)));
        assert_eq!(next_values((3, true), cyc, 10), (1, 3, (3, true)));
        // Descending, and no overflow at the type's edge.
        let down = opts(-1, -2, i64::MIN, -1, false);
        assert_eq!(next_values((-1, false), down, 3), (-1, 3, (-5, true)));
        assert_eq!(next_values((i64::MIN + 1, true), down, 1).1, 0);
        assert_eq!(next_values((i64::MAX, true), o, 1).1, 0);
    }

    #[test]
    fn sequences_keep_their_state_and_share_it_with_their_other_names() {
        let engine = pinax_engine_mem::MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        let o = opts(1, 1, 1, i64::MAX, false);
        c.sequence_alias("n2_q5_7", "q5_7").unwrap(); // before the sequence's first value
        assert_eq!(c.sequence_next("q5_7", o, 100).unwrap(), (1, 100));
        assert_eq!(c.sequence_next("n2_q5_7", o, 100).unwrap(), (101, 100));
        let c = Catalog::open(engine.clone()).unwrap();
        assert_eq!(c.sequence_next("n2_q5_7", o, 1).unwrap(), (201, 1));
        c.sequence_set("n2_q5_7", 1000, true).unwrap();
        assert_eq!(c.sequence_next("q5_7", o, 1).unwrap(), (1001, 1));
        c.sequence_drop("n2_q5_7").unwrap();
        assert_eq!(c.sequence_next("q5_7", o, 1).unwrap(), (1002, 1));
        c.sequence_alias("n3_q5_7", "q5_7").unwrap();
        c.sequence_drop("q5_7").unwrap();
        // Gone with its names: a sequence of that name starts over.
        let c = Catalog::open(engine).unwrap();
        assert_eq!(c.sequence_next("n3_q5_7", o, 1).unwrap(), (1, 1));
    }
}
