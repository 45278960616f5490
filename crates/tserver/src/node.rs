//! A node: tablets, status tablets, catalog, and the request handler.

use crate::factory::EngineFactory;
use crate::replica::{RaftCatalogLog, RaftReplicator, RpcTransport};
use parking_lot::{Condvar, Mutex, RwLock};
use pinax_common::{Clock, ErrorCode, HybridClock, HybridTime, SystemClock, TabletId, TxnId};
use pinax_engine::CompactionFilterFactory;
use pinax_master::placement::{self, Balance, Heard, LeaderReports, Leaderless, Lookup, Micros, NodeEntry, ReplicaMove};
use pinax_master::{single_tablet_table, status_table_name, Catalog, CatalogError, Dropped, LocalRecords, ReplicaRecord, MASTER_TABLE_NAME, SYSTEM_TABLE_PREFIX};
use pinax_mvcc::gc::{HistoryCutoff, HistoryGcFilterFactory};
use pinax_mvcc::{ReadContext, TxnStatus};
use pinax_proto::{DdlEntry, NodeStatus, ReadPoint, Request, Response, RpcError, SequenceOp, Sharding, TableInfo, TabletInfo};
use pinax_raft::{RaftGroup, RaftTiming};
use pinax_tablet::{StatusTablet, Tablet};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub node_id: u64,
    /// Address clients use to reach this node (`host:port`).
    pub rpc_addr: String,
    pub data_dir: String,
    pub tablets_per_node: u32,
    /// fsync acknowledged writes.
    pub sync: bool,
    /// A transaction not heard of for this long is aborted.
    pub txn_heartbeat_timeout: Duration,
    /// How long resolved status records are kept.
    pub status_retention: Duration,
    /// How much MVCC history is kept for reads in the past.
    pub history_retention: Duration,
    /// Heartbeat and election timeouts of the tablets' Raft groups.
    pub raft_timing: RaftTiming,
    /// The RPC address of a node of the cluster to join; `None`: this node is the
    /// cluster's first (it bootstraps the master group).
    pub join: Option<String>,
    /// Replicas per tablet of new tables (fewer when fewer nodes are alive).
    pub replication_factor: u32,
    /// Master: a node not heard from for this long is gone; its replicas are
    /// re-created on other nodes.
    pub node_timeout: Duration,
    /// Accept `InjectFaults` (tests).
    pub fault_injection: bool,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            node_id: 1,
            rpc_addr: "127.0.0.1:7100".into(),
            data_dir: String::new(),
            tablets_per_node: 8,
            sync: true,
            txn_heartbeat_timeout: Duration::from_secs(5),
            status_retention: Duration::from_secs(60),
            history_retention: Duration::from_secs(900),
            raft_timing: RaftTiming::default(),
            join: None,
            replication_factor: 3,
            node_timeout: Duration::from_secs(60),
            fault_injection: false,
        }
    }
}

/// A clock that never goes back (as [`Instant`]), in microseconds from the
/// system's time when it was made: what placement reads time through.
struct MonotonicClock {
    start_micros: u64,
    start: Instant,
}

impl MonotonicClock {
    fn new() -> Self {
        MonotonicClock { start_micros: SystemClock.now_micros(), start: Instant::now() }
    }
}

impl Clock for MonotonicClock {
    fn now_micros(&self) -> u64 {
        self.start_micros + self.start.elapsed().as_micros() as u64
    }
}

/// The engine of this node's own records ([`LocalRecords`]; named "master" from
/// when it held the catalog too).
const LOCAL_ENGINE: &str = "master";

fn tablet_engine_name(id: TabletId) -> String {
    format!("tablet-{}", id.0)
}

fn err(code: ErrorCode, msg: impl Into<String>) -> RpcError {
    RpcError::new(code, msg)
}

fn tablet_err(e: pinax_tablet::Error) -> RpcError {
    let err = RpcError::new(e.code(), e.to_string());
    match e {
        pinax_tablet::Error::DuplicateKey { key, .. } => err.with_key(key),
        pinax_tablet::Error::WriteConflict { other_txn: Some(t), .. } => err.with_blocker(t),
        pinax_tablet::Error::NotLeader { leader_hint, .. } => err.with_leader(leader_hint),
        pinax_tablet::Error::Mvcc(pinax_mvcc::Error::ReadRestart { restart_ht }) => err.with_restart(restart_ht),
        _ => err,
    }
}

fn catalog_err(e: CatalogError) -> RpcError {
    RpcError::new(e.code(), e.to_string())
}

enum Resolution {
    Apply { txn: TxnId, commit_ht: HybridTime, participants: Vec<TabletId> },
}

pub struct Node<F: EngineFactory> {
    cfg: NodeConfig,
    factory: F,
    clock: Arc<HybridClock>,
    /// This node's own records: its replicas, where the masters are.
    local: LocalRecords<F::Engine>,
    /// This node's replica of the master group's catalog, if it has one (it
    /// serves only while it leads the group).
    master: RwLock<Option<Arc<Catalog<F::Engine>>>>,
    /// RPC addresses of the master group's replicas, as last learnt.
    masters: RwLock<Vec<String>>,
    /// Where the master's leader was last found.
    master_hint: Mutex<Option<String>>,
    /// This node led the master group at the last tick.
    led_master: AtomicBool,
    tablets: RwLock<HashMap<TabletId, Arc<Tablet<F::Engine>>>>,
    /// The Raft group of every tablet replica on this node.
    groups: RwLock<HashMap<TabletId, Arc<RaftReplicator>>>,
    /// Carries the Raft groups' blocking calls to peers (each group's tasks run on
    /// a runtime of its own: `pinax_raft::runtime`).
    rt: tokio::runtime::Runtime,
    transport: Arc<RpcTransport>,
    /// This node's replicas of status tablets (its own and other nodes').
    status_tablets: RwLock<HashMap<TabletId, Arc<StatusTablet<F::Engine>>>>,
    cutoff: HistoryCutoff,
    gc_factory: Arc<dyn CompactionFilterFactory>,
    resolutions: Mutex<mpsc::Sender<Resolution>>,
    resolutions_rx: Mutex<Option<mpsc::Receiver<Resolution>>>,
    shutting_down: AtomicBool,
    last_sweep: Mutex<Instant>,
    requests: AtomicU64,
    /// Bumped (and waiters woken) whenever a transaction commits, aborts or expires.
    txn_ended: (Mutex<u64>, Condvar),
    /// Who waits for whom (waiter → holder), for deadlock detection: the waits of
    /// transactions whose home is this node, while they last.
    waits_for: Mutex<HashMap<TxnId, TxnId>>,
    /// Committed transactions handed to the applier, and when: the periodic sweep
    /// leaves them to it for a while instead of applying the same intents at once.
    applying: Mutex<HashMap<TxnId, Instant>>,
    /// Master: held while a status table is created.
    status_creation: Mutex<()>,
    /// Where placement reads time (`Micros`): monotonic ([`MonotonicClock`]).
    placement_clock: Arc<dyn Clock>,
    /// Master only: the nodes that registered (id → address, last heard from).
    nodes: Mutex<Heard>,
    /// Master only: the user tablets each node leads (as it last said), and when.
    leaders: Mutex<LeaderReports>,
    /// Master only: when it last moved a leader.
    last_leader_move: Mutex<Micros>,
    /// When this node last registered with the master.
    last_register: Mutex<Option<Instant>>,
    /// When replica placement (master) and orphaned replicas were last checked.
    last_placement_check: Mutex<Instant>,
    /// Since when each local replica has known no leader (`drop_orphan_replicas`).
    leaderless: Mutex<Leaderless>,
    /// Every node's RPC address by id (the master's registrations; other nodes
    /// learn them when they register).
    directory: RwLock<BTreeMap<u64, String>>,
    /// Decided outcomes of other nodes' transactions (they never change).
    remote_outcomes: Mutex<HashMap<TxnId, TxnStatus>>,
    /// Where other tablets are (from the master), for resolving intents there.
    locations: Mutex<HashMap<TabletId, TabletInfo>>,
    /// Dropped replicas whose data could not be deleted yet (their engine was
    /// still closing): deleted by `tick`; not created again until then.
    destroying: Mutex<std::collections::HashSet<TabletId>>,
    /// Each open replica's engine, to know when a dropped one is closed (its data
    /// may be deleted only then: RocksDB keeps writing files until it closes).
    engines: Mutex<HashMap<TabletId, std::sync::Weak<F::Engine>>>,
    /// Applies the cluster's DDL log to this node's PostgreSQL (none: no
    /// PostgreSQL here, nothing to apply).
    ddl: std::sync::OnceLock<Arc<dyn DdlApplier>>,
}

/// Applies the cluster's DDL log to a node's PostgreSQL (the node daemon
/// implements it; the tablet server only calls it).
pub trait DdlApplier: Send + Sync {
    /// Apply every log entry through `upto` (entries of this node's own
    /// PostgreSQL excepted), giving up at `deadline`.
    fn apply_upto(&self, upto: u64, deadline: Instant) -> Result<(), String>;
}

/// How long the master waits for each node to apply a published DDL entry.
const DDL_APPLY_WAIT: Duration = Duration::from_secs(5);

/// Decided remote outcomes kept at most (the cache is cleared when full).
const REMOTE_OUTCOMES_MAX: usize = 100_000;


/// The transaction a request on a status record concerns.
fn status_txn(req: &Request) -> Option<TxnId> {
    match req {
        Request::CreateTxn { txn }
        | Request::Heartbeat { txn }
        | Request::CommitTxn { txn, .. }
        | Request::AbortTxn { txn, .. }
        | Request::TxnStatus { txn, .. }
        | Request::WaitTxn { txn, .. } => Some(*txn),
        _ => None,
    }
}

/// The requests the master serves (other nodes forward them to it), as a pattern.
macro_rules! master_request {
    () => {
        Request::CreateTable { .. }
            | Request::DropTable { .. }
            | Request::GetTable { .. }
            | Request::RegisterNode { .. }
            | Request::AddTableName { .. }
            | Request::PublishDdl { .. }
            | Request::ReadDdl { .. }
            | Request::Sequence { .. }
            | Request::EnsureStatusTablet { .. }
            | Request::LocateTablet { .. }
    };
}

fn is_master_request(req: &Request) -> bool {
    matches!(req, master_request!())
}

/// How long a catalog request follows the master's leader changes (an election
/// takes 0.5-1 s) before failing as retryable.
const MASTER_FAILOVER_WAIT: Duration = Duration::from_secs(5);

/// A table to create and place.
#[derive(Clone)]
enum Planned<'a> {
    /// A SQL relation's storage table.
    Sql { name: &'a str, sharding: Sharding, if_not_exists: bool },
    /// Node `n`'s status table: one tablet, its first replica (and leader) on `n`.
    Status(u64),
}

/// How long a request on a status record follows its status tablet's leader
/// changes (an election takes 0.5-1 s) before failing as retryable.
const STATUS_FAILOVER_WAIT: Duration = Duration::from_secs(5);

/// Why creating a table failed: because of one node (place it again without that
/// node), or otherwise.
enum CreateFailed {
    Node(u64, RpcError),
    Other(RpcError),
}

/// How long the sweep leaves a committed transaction to the applier.
const APPLIER_GRACE: Duration = Duration::from_secs(10);

/// Longest single `WaitTxn` (clients wait again to wait longer).
const MAX_WAIT: Duration = Duration::from_secs(5);

/// How often a waiting transaction's node looks for a deadlock again (a cycle can
/// close after the wait began, through a wait on another node).
const DEADLOCK_CHECK: Duration = Duration::from_millis(200);

/// Longest chain of waits followed when looking for a cycle.
const MAX_WAIT_CHAIN: usize = 64;

impl<F: EngineFactory> Node<F> {
    /// Open (or create) a node's state: catalog, status tablet, every tablet.
    pub fn open(cfg: NodeConfig, factory: F, clock: Arc<HybridClock>) -> Result<Arc<Self>, RpcError> {
        let io = |e: pinax_engine::Error| err(ErrorCode::Io, e.to_string());
        let local = LocalRecords::open(factory.open(LOCAL_ENGINE, None).map_err(io)?);
        let masters = local.masters().map_err(catalog_err)?;
        let cutoff = HistoryCutoff::default();
        let gc_factory: Arc<dyn CompactionFilterFactory> = Arc::new(HistoryGcFilterFactory { cutoff: cutoff.clone() });
        let (tx, rx) = mpsc::channel();
        // Each Raft group runs on a runtime of its own, driven by the threads that
        // wait on it (pinax_raft::runtime); this one carries the groups' blocking
        // calls to peers (its blocking pool) and nothing else.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("raft-io")
            .enable_all()
            .build()
            .map_err(|e| err(ErrorCode::Internal, format!("starting the raft runtime: {e}")))?;
        let transport = Arc::new(RpcTransport::new(clock.clone()));
        let placement_clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
        let started = placement_clock.now_micros();
        let node = Node {
            cfg,
            factory,
            clock,
            local,
            master: RwLock::new(None),
            masters: RwLock::new(masters),
            master_hint: Mutex::new(None),
            led_master: AtomicBool::new(false),
            tablets: RwLock::new(HashMap::new()),
            groups: RwLock::new(HashMap::new()),
            rt,
            transport,
            status_tablets: RwLock::new(HashMap::new()),
            cutoff,
            gc_factory,
            resolutions: Mutex::new(tx),
            resolutions_rx: Mutex::new(Some(rx)),
            shutting_down: AtomicBool::new(false),
            last_sweep: Mutex::new(Instant::now()),
            txn_ended: (Mutex::new(0), Condvar::new()),
            waits_for: Mutex::new(HashMap::new()),
            applying: Mutex::new(HashMap::new()),
            requests: AtomicU64::new(0),
            status_creation: Mutex::new(()),
            nodes: Mutex::new(BTreeMap::new()),
            last_register: Mutex::new(None),
            leaders: Mutex::new(HashMap::new()),
            placement_clock,
            last_leader_move: Mutex::new(started),
            last_placement_check: Mutex::new(Instant::now()),
            leaderless: Mutex::new(Leaderless::default()),
            directory: RwLock::new(BTreeMap::new()),
            remote_outcomes: Mutex::new(HashMap::new()),
            locations: Mutex::new(HashMap::new()),
            ddl: std::sync::OnceLock::new(),
            destroying: Mutex::new(std::collections::HashSet::new()),
            engines: Mutex::new(HashMap::new()),
        };
        node.directory.write().insert(node.cfg.node_id, node.cfg.rpc_addr.clone());
        node.nodes.lock().insert(node.cfg.node_id, (node.cfg.rpc_addr.clone(), node.now()));
        let member = node.local.member().map_err(catalog_err)?;
        if let Some(id) = member.filter(|id| *id != node.cfg.node_id) {
            return Err(err(ErrorCode::InvalidRequest, format!("this data directory belongs to node {id}, not to node {}", node.cfg.node_id)));
        }
        // Only a node that never belonged to a cluster bootstraps one: a node
        // that lost its master replica (moved away while it was down) and is
        // restarted without --join finds the masters it recorded instead of
        // starting a second, empty catalog.
        let fresh = !node.local.is_member().map_err(catalog_err)?;
        // Open every replica this node serves; drop engines of tablets it does not
        // (left by a crash between creating tablets and committing their table).
        let mut records = node.local.replicas().map_err(catalog_err)?;
        if node.cfg.join.is_none() && fresh && !records.iter().any(|r| r.tablet.id == TabletId::MASTER) {
            // The cluster's first node bootstraps the master group.
            let me = vec![(node.cfg.node_id, node.cfg.rpc_addr.clone())];
            let t = single_tablet_table(MASTER_TABLE_NAME.to_string(), TabletId::MASTER, vec![node.cfg.rpc_addr.clone()]);
            let r = ReplicaRecord { tablet: t.tablets[0].clone(), members: me, bootstrap: true };
            node.local.put_replica(&r).map_err(catalog_err)?;
            records.push(r);
        }
        if member.is_none() {
            node.local.set_member(node.cfg.node_id).map_err(catalog_err)?;
        }
        let mut wanted = std::collections::HashSet::new();
        for r in &records {
            wanted.insert(tablet_engine_name(r.tablet.id));
            node.open_tablet(r)?;
        }
        for name in node.factory.list().map_err(io)? {
            if name.starts_with("tablet-") && !wanted.contains(&name) {
                node.factory.destroy(&name).map_err(io)?;
            }
        }
        Ok(Arc::new(node))
    }

    /// Now, for placement.
    fn now(&self) -> Micros {
        self.placement_clock.now_micros()
    }

    /// Whether this node leads the master group now (it serves catalog requests).
    pub fn is_master(&self) -> bool {
        self.master.read().is_some() && self.groups.read().get(&TabletId::MASTER).is_some_and(|g| g.group.leads_now())
    }

    /// The catalog, when this node has a master replica (its operations fail
    /// with NotLeader unless it leads).
    fn catalog(&self) -> Result<Arc<Catalog<F::Engine>>, RpcError> {
        self.master.read().clone().ok_or_else(|| err(ErrorCode::NotLeader, format!("node {} has no replica of the master", self.cfg.node_id)))
    }

    /// Whether this node has a replica of tablet `id` open.
    fn has_replica(&self, id: TabletId) -> bool {
        self.tablets.read().contains_key(&id) || self.status_tablets.read().contains_key(&id) || (id == TabletId::MASTER && self.master.read().is_some())
    }

    /// Open this node's replica of a tablet: its engine, its Raft group (replaying
    /// the log past the applied id) and the tablet over them. The bootstrap replica
    /// makes the members the group's first configuration (again after a restart: a
    /// no-op once the group has one). Idempotent.
    fn open_tablet(&self, r: &ReplicaRecord) -> Result<(), RpcError> {
        let id = r.tablet.id;
        if self.has_replica(id) {
            return Ok(());
        }
        // Status records and the catalog are no MVCC data: no history collection there.
        let gc = (!id.is_status() && id != TabletId::MASTER).then(|| self.gc_factory.clone());
        let engine = Arc::new(self.factory.open(&tablet_engine_name(id), gc).map_err(|e| err(ErrorCode::Io, e.to_string()))?);
        self.engines.lock().insert(id, Arc::downgrade(&engine));
        let raft_err = |e: pinax_raft::GroupError| err(ErrorCode::Io, format!("tablet {}: {e}", id.0));
        let group = RaftGroup::start_with(self.rt.handle(), id.0, self.cfg.node_id, engine.clone(), self.clock.clone(), self.transport.clone(), self.cfg.raft_timing, self.cfg.sync).map_err(raft_err)?;
        if r.bootstrap {
            group.initialize(&r.members.iter().cloned().collect()).map_err(raft_err)?;
        }
        let repl = Arc::new(RaftReplicator { tablet_id: id, group });
        if id == TabletId::MASTER {
            let log = Arc::new(RaftCatalogLog { repl: repl.clone(), clock: self.clock.clone() });
            self.groups.write().insert(id, repl);
            *self.master.write() = Some(Arc::new(Catalog::new(engine, log)));
            return Ok(());
        }
        if id.is_status() {
            let st = StatusTablet::open_replicated(id, engine, repl.clone(), self.clock.clone(), self.cfg.txn_heartbeat_timeout.as_micros() as u64);
            self.groups.write().insert(id, repl);
            self.status_tablets.write().insert(id, Arc::new(st));
            return Ok(());
        }
        let t = Tablet::open_replicated(id, engine, repl.clone(), self.clock.clone(), r.tablet.partition.clone(), self.cutoff.clone()).map_err(tablet_err)?;
        self.groups.write().insert(id, repl);
        self.tablets.write().insert(id, Arc::new(t));
        Ok(())
    }

    /// `CreateReplica`: remember the replica, then open it.
    ///
    /// A replica already here with other members is a stale one (moved away
    /// while this node was down, not dropped yet). Added back, it could depose the
    /// leader (a term raised by campaigning alone): it is dropped now, and this
    /// request fails as retryable; the caller's next try creates a fresh one.
    fn create_replica(&self, r: ReplicaRecord) -> Result<Response, RpcError> {
        let id = r.tablet.id;
        if self.destroying.lock().contains(&id) {
            return Err(err(ErrorCode::Unavailable, format!("an earlier replica of tablet {} is still being removed here; try again", id.0)));
        }
        let here = |id: &TabletId| self.has_replica(*id);
        if here(&id) && !r.bootstrap {
            let stale = self.local.replicas().map_err(catalog_err)?.into_iter().any(|old| old.tablet.id == id && old.members != r.members);
            if stale {
                tracing::info!(tablet_id = id.0, "dropping a stale replica before it is added again");
                self.drop_replica(id)?;
                return Err(err(ErrorCode::Unavailable, format!("a stale replica of tablet {} was here; dropped, try again", id.0)));
            }
        }
        if !here(&id) {
            self.local.put_replica(&r).map_err(catalog_err)?;
            self.open_tablet(&r)?;
        }
        // Being added (the catalog names it only once the move is done): a full
        // node timeout before the orphan check looks at it.
        self.leaderless.lock().forget(r.tablet.id);
        Ok(Response::Done)
    }

    /// `DropReplica`: close the replica and delete its data.
    fn drop_replica(&self, id: TabletId) -> Result<Response, RpcError> {
        let removed = self.tablets.write().remove(&id);
        drop(removed);
        let removed = self.status_tablets.write().remove(&id);
        drop(removed);
        if id == TabletId::MASTER {
            let removed = self.master.write().take();
            drop(removed);
        }
        self.close_group(id);
        self.local.delete_replica(id).map_err(catalog_err)?;
        // Requests in flight and the group's last tasks may hold the engine for
        // a moment; its files are deleted once it is closed.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.engine_closed(id) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.destroying.lock().insert(id);
        self.finish_destroying();
        Ok(Response::Done)
    }

    fn engine_closed(&self, id: TabletId) -> bool {
        self.engines.lock().get(&id).is_none_or(|w| w.strong_count() == 0)
    }

    /// Delete the data of dropped replicas whose engines have closed.
    fn finish_destroying(&self) {
        let pending: Vec<TabletId> = self.destroying.lock().iter().copied().collect();
        for id in pending {
            if self.has_replica(id) || !self.engine_closed(id) {
                continue;
            }
            match self.factory.destroy(&tablet_engine_name(id)) {
                Ok(()) => {
                    self.destroying.lock().remove(&id);
                    self.engines.lock().remove(&id);
                }
                Err(e) => tracing::warn!(tablet_id = id.0, error = %e, "could not remove tablet data; retrying"),
            }
        }
    }

    /// Send `req` to the node at `addr` (this node: handle it here).
    fn call_node(&self, addr: &str, req: Request) -> Result<Response, RpcError> {
        if addr == self.cfg.rpc_addr {
            return self.handle(req);
        }
        self.transport.request(addr, req)
    }

    /// Send a catalog request to the master: the leader of the master group,
    /// found through this node's replica of it, where the master was last found,
    /// the master replicas last learnt, or the node this one joined through;
    /// following NotLeader answers and leader changes for up to
    /// `MASTER_FAILOVER_WAIT`.
    fn call_master(&self, req: Request) -> Result<Response, RpcError> {
        self.call_master_within(req, MASTER_FAILOVER_WAIT)
    }

    fn call_master_within(&self, req: Request, wait: Duration) -> Result<Response, RpcError> {
        let deadline = Instant::now() + wait;
        let retryable = |e: &RpcError| matches!(e.code, ErrorCode::NotLeader | ErrorCode::Unavailable);
        loop {
            let mut tried: Vec<String> = Vec::new();
            let mut queue = self.master_candidates();
            let mut last = None;
            while let Some(addr) = queue.pop() {
                if tried.contains(&addr) || tried.len() >= 8 {
                    continue;
                }
                tried.push(addr.clone());
                match self.call_node(&addr, Request::Forwarded(Box::new(req.clone()))) {
                    Ok(r) => {
                        *self.master_hint.lock() = Some(addr);
                        return Ok(r);
                    }
                    Err(e) if retryable(&e) => {
                        if let Some(l) = e.leader.clone().filter(|l| !tried.contains(l)) {
                            queue.push(l);
                        }
                        last = Some(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            *self.master_hint.lock() = None;
            if Instant::now() >= deadline {
                return Err(last.unwrap_or_else(|| err(ErrorCode::Unavailable, "no master is known to this node")));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Where to look for the master's leader, the likeliest last (popped first).
    fn master_candidates(&self) -> Vec<String> {
        let mut c: Vec<String> = Vec::new();
        c.extend(self.cfg.join.clone());
        c.extend(self.masters.read().iter().rev().cloned());
        if let Some(g) = self.groups.read().get(&TabletId::MASTER) {
            c.push(self.cfg.rpc_addr.clone());
            c.extend(g.group.leader().map(|(_, a)| a));
        }
        c.extend(self.master_hint.lock().clone());
        c
    }

    /// The error a master request meets at a node that does not lead the master
    /// group (with the leader's address when this node knows it).
    fn not_master(&self) -> RpcError {
        let leader = self.groups.read().get(&TabletId::MASTER).and_then(|g| g.group.leader()).map(|(_, a)| a).filter(|a| *a != self.cfg.rpc_addr);
        err(ErrorCode::NotLeader, format!("node {} does not lead the master", self.cfg.node_id)).with_leader(leader)
    }

    /// The master replicas' addresses (from the catalog's `$master` table).
    fn master_addrs(&self) -> Vec<String> {
        match self.catalog().and_then(|c| c.get(MASTER_TABLE_NAME).map_err(catalog_err)) {
            Ok(t) => t.tablets[0].replicas.clone(),
            Err(_) => vec![self.cfg.rpc_addr.clone()],
        }
    }

    /// Master: `RegisterNode`.
    fn register_node(&self, node_id: u64, addr: String, leading: Vec<TabletId>) -> Result<Response, RpcError> {
        let catalog = self.catalog()?;
        let node_id = if node_id == 0 { catalog.allocate_node_id().map_err(catalog_err)? } else { node_id };
        self.leaders.lock().insert(node_id, (leading, self.now()));
        catalog.put_node(node_id, &addr).map_err(catalog_err)?;
        let mut nodes = self.nodes.lock();
        // A node that moved to another address is one node, at its new address.
        nodes.retain(|id, (a, _)| *id == node_id || *a != addr);
        nodes.insert(node_id, (addr.clone(), self.now()));
        drop(nodes);
        let mut dir = self.directory.write();
        dir.insert(node_id, addr);
        let nodes = dir.iter().map(|(id, a)| (*id, a.clone())).collect();
        drop(dir);
        Ok(Response::Registered { node_id, nodes, masters: self.master_addrs() })
    }

    /// Master, when it begins to lead: every registered node counts as heard from
    /// now (the previous leader knew when they were; a node gone for good is
    /// found gone a node timeout later, as it would have been).
    fn take_over_as_master(&self) {
        // The master registers itself (it never sends itself RegisterNode).
        let known = self.catalog().and_then(|c| {
            c.put_node(self.cfg.node_id, &self.cfg.rpc_addr).map_err(catalog_err)?;
            c.nodes().map_err(catalog_err)
        });
        let known = match known {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "reading the registered nodes");
                return;
            }
        };
        let now = self.now();
        let mut nodes = self.nodes.lock();
        for (id, addr) in &known {
            nodes.entry(*id).or_insert_with(|| (addr.clone(), now));
        }
        drop(nodes);
        self.directory.write().extend(known);
        self.led_master.store(true, Ordering::SeqCst);
        tracing::info!(node_id = self.cfg.node_id, "leading the master");
    }

    /// Master: the master group's own table exists (placing and moving its
    /// replicas like any tablet's).
    fn ensure_master_table(&self) -> Result<(), RpcError> {
        let catalog = self.catalog()?;
        match catalog.get(MASTER_TABLE_NAME) {
            Err(CatalogError::NotFound(_)) => {}
            other => return other.map(|_| ()).map_err(catalog_err),
        }
        let voters = self.groups.read().get(&TabletId::MASTER).map(|g| g.group.voters()).unwrap_or_default();
        let dir = self.directory.read().clone();
        let mut replicas: Vec<String> = voters.iter().filter_map(|id| dir.get(id).cloned()).collect();
        replicas.retain(|a| *a != self.cfg.rpc_addr);
        replicas.insert(0, self.cfg.rpc_addr.clone());
        catalog.commit_table(&single_tablet_table(MASTER_TABLE_NAME.to_string(), TabletId::MASTER, replicas)).map_err(catalog_err)
    }

    /// Master: nodes heard from recently (id, address), by id.
    fn live_nodes(&self) -> Vec<(u64, String)> {
        if !self.led_master.load(Ordering::SeqCst) {
            // Led since before the tick noticed: know the registered nodes first.
            self.take_over_as_master();
        }
        let now = self.now();
        let mut nodes = self.nodes.lock();
        nodes.insert(self.cfg.node_id, (self.cfg.rpc_addr.clone(), now));
        placement::live_nodes(&nodes, now)
    }

    /// Tell the master this node is alive (about once a second), and learn the
    /// other nodes and where the master replicas are.
    fn heartbeat_master(&self) {
        if self.is_master() {
            return;
        }
        {
            let mut last = self.last_register.lock();
            if last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
                return;
            }
            *last = Some(Instant::now());
        }
        let leading = self.leading();
        match self.call_master_within(Request::RegisterNode { node_id: self.cfg.node_id, addr: self.cfg.rpc_addr.clone(), leading }, Duration::ZERO) {
            Ok(Response::Registered { nodes, masters, .. }) => {
                self.directory.write().extend(nodes);
                if !masters.is_empty() && *self.masters.read() != masters {
                    if let Err(e) = self.local.set_masters(&masters) {
                        tracing::warn!(error = %e, "recording where the masters are");
                    }
                    *self.masters.write() = masters;
                }
            }
            Ok(other) => tracing::warn!(?other, "unexpected answer to RegisterNode"),
            Err(e) => tracing::debug!(error = %e, "registering with the master"),
        }
    }

    /// The tablets (not status tablets, not the master's) whose group this node
    /// leads now.
    fn leading(&self) -> Vec<TabletId> {
        self.groups.read().iter().filter(|(id, g)| !id.is_status() && **id != TabletId::MASTER && g.group.leads_now()).map(|(id, _)| *id).collect()
    }

    /// `txn`'s home node: its client's node (whose status tablet keeps its record,
    /// and which keeps what it waits for).
    fn home_of(&self, txn: TxnId) -> u64 {
        match txn.status_node() {
            0 => self.cfg.node_id,
            n => n,
        }
    }

    /// This node's replica of the status tablet keeping `txn`'s record, if any.
    fn local_status_of(&self, txn: TxnId) -> Option<Arc<StatusTablet<F::Engine>>> {
        self.status_tablets.read().get(&TabletId::status_of_node(self.home_of(txn))).cloned()
    }

    /// The address of node `id`, asking the master (by registering) if unknown.
    fn node_addr(&self, id: u64) -> Result<String, RpcError> {
        if let Some(a) = self.directory.read().get(&id) {
            return Ok(a.clone());
        }
        *self.last_register.lock() = None;
        self.heartbeat_master();
        self.directory.read().get(&id).cloned().ok_or_else(|| err(ErrorCode::Unavailable, format!("node {id} is unknown to this node")))
    }

    /// The status of any transaction, from the leader of its status tablet (here
    /// or elsewhere; decided outcomes learnt from other nodes are cached). An
    /// unreachable record is an error, never "aborted".
    fn txn_status(&self, txn: TxnId, read_ht: HybridTime) -> Result<TxnStatus, RpcError> {
        if let Some(s) = self.remote_outcomes.lock().get(&txn) {
            return Ok(*s);
        }
        match self.on_status_tablet(txn, Request::TxnStatus { txn, read_ht }, true)? {
            Response::TxnStatus(s) => {
                if !matches!(s, TxnStatus::Pending) {
                    let mut cache = self.remote_outcomes.lock();
                    if cache.len() >= REMOTE_OUTCOMES_MAX {
                        cache.clear();
                    }
                    cache.insert(txn, s);
                }
                Ok(s)
            }
            other => Err(err(ErrorCode::Internal, format!("unexpected answer to TxnStatus: {other:?}"))),
        }
    }

    /// Handle `req`, a request on `txn`'s status record: here if this node leads
    /// the record's status tablet; otherwise, when `forward`, at its leader
    /// (`Forwarded`), following leader changes for up to `STATUS_FAILOVER_WAIT`.
    fn on_status_tablet(&self, txn: TxnId, req: Request, forward: bool) -> Result<Response, RpcError> {
        let home = self.home_of(txn);
        let id = TabletId::status_of_node(home);
        let deadline = Instant::now() + STATUS_FAILOVER_WAIT;
        let retryable = |e: &RpcError| matches!(e.code, ErrorCode::NotLeader | ErrorCode::Unavailable | ErrorCode::TabletNotFound);
        loop {
            let local = self.status_tablets.read().get(&id).cloned();
            let res = match &local {
                Some(st) => self.status_here(st, req.clone()),
                None => Err(err(ErrorCode::NotLeader, format!("status tablet {} has no replica on node {}", id.0, self.cfg.node_id))),
            };
            let e = match res {
                Err(e) if e.code == ErrorCode::NotLeader && forward => e,
                other => return other,
            };
            let res = self.status_location(home).and_then(|ti| {
                let skip = local.is_some().then_some(self.cfg.rpc_addr.as_str());
                self.call_leader(&ti, skip, || Request::Forwarded(Box::new(req.clone())), |e| !retryable(e))
            });
            match res {
                Ok(r) => return Ok(r),
                Err(e2) if retryable(&e2) && Instant::now() < deadline => {
                    tracing::debug!(tablet_id = id.0, here = %e, there = %e2, "status tablet leader not found yet");
                    self.locations.lock().remove(&id);
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e2) => return Err(e2),
            }
        }
    }

    /// Where node `home`'s status tablet is: cached, from the master, created by
    /// the master if it does not exist yet.
    fn status_location(&self, home: u64) -> Result<TabletInfo, RpcError> {
        let id = TabletId::status_of_node(home);
        match self.locate(id) {
            Err(e) if e.code == ErrorCode::TabletNotFound => match self.call_master(Request::EnsureStatusTablet { node: home })? {
                Response::Tablet(ti) => {
                    self.locations.lock().insert(id, ti.clone());
                    Ok(ti)
                }
                other => Err(err(ErrorCode::Internal, format!("unexpected answer to EnsureStatusTablet: {other:?}"))),
            },
            res => res,
        }
    }

    /// A request on a status record, at this node's replica of its status tablet
    /// (`NotLeader` unless it leads).
    fn status_here(&self, st: &StatusTablet<F::Engine>, req: Request) -> Result<Response, RpcError> {
        match req {
            Request::CreateTxn { txn } => st.create(txn).map(|rec| Response::TxnCreated { start_ht: rec.start_ht }).map_err(tablet_err),
            Request::Heartbeat { txn } => st.heartbeat(txn).map(|_| Response::Done).map_err(tablet_err),
            Request::CommitTxn { txn, participants } => {
                let commit_ht = st.commit(txn, participants.clone()).map_err(tablet_err)?;
                self.notify_txn_ended();
                self.applying.lock().insert(txn, Instant::now());
                let _ = self.resolutions.lock().send(Resolution::Apply { txn, commit_ht, participants });
                Ok(Response::Committed { commit_ht })
            }
            Request::AbortTxn { txn, participants } => {
                st.abort(txn, participants.clone()).map_err(tablet_err)?;
                self.notify_txn_ended();
                // Remove intents right away; the background sweep covers failures.
                if self.resolve_local(txn, None, &participants) {
                    let _ = st.mark_resolved(txn);
                }
                Ok(Response::Done)
            }
            Request::TxnStatus { txn, read_ht } => st.status(txn, read_ht).map(Response::TxnStatus).map_err(tablet_err),
            Request::WaitTxn { txn, timeout_ms, .. } => {
                let ended = self.wait_local(st, txn, Duration::from_millis(timeout_ms as u64).min(MAX_WAIT))?;
                Ok(Response::Waited { ended: ended.is_some(), committed: ended == Some(true) })
            }
            other => Err(err(ErrorCode::InvalidRequest, format!("not a request on a transaction status record: {other:?}"))),
        }
    }

    /// Master: `EnsureStatusTablet`.
    fn ensure_status_tablet(&self, node: u64) -> Result<Response, RpcError> {
        if let Ok(t) = self.catalog()?.get(&status_table_name(node)) {
            return Ok(Response::Tablet(t.tablets[0].clone()));
        }
        let t = self.create_table_placed(Planned::Status(node))?;
        tracing::info!(node_id = node, replicas = ?t.tablets[0].replicas, "status tablet created");
        Ok(Response::Tablet(t.tablets[0].clone()))
    }

    /// Where tablet `id` is (cached; from the master).
    fn locate(&self, id: TabletId) -> Result<TabletInfo, RpcError> {
        if let Some(ti) = self.locations.lock().get(&id) {
            return Ok(ti.clone());
        }
        match self.call_master(Request::LocateTablet { tablet: id })? {
            Response::Tablet(ti) => {
                self.locations.lock().insert(id, ti.clone());
                Ok(ti)
            }
            other => Err(err(ErrorCode::Internal, format!("unexpected answer to LocateTablet: {other:?}"))),
        }
    }

    /// Master: `LocateTablet`.
    fn locate_tablet(&self, id: TabletId) -> Result<Response, RpcError> {
        for t in self.catalog()?.tables().map_err(catalog_err)? {
            if let Some(ti) = t.tablets.into_iter().find(|ti| ti.id == id) {
                return Ok(Response::Tablet(ti));
            }
        }
        Err(err(ErrorCode::TabletNotFound, format!("tablet {} does not exist", id.0)))
    }

    /// Resolve `txn`'s intents on tablet `id` held by another node: ask its leader,
    /// following NotLeader answers (a few hops).
    fn resolve_remote(&self, id: TabletId, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<(), RpcError> {
        let ti = match self.locate(id) {
            Ok(ti) => ti,
            Err(e) if e.code == ErrorCode::TabletNotFound => return Ok(()), // dropped table
            Err(e) => return Err(e),
        };
        let dropped = std::cell::Cell::new(false);
        let gone = |e: &RpcError| {
            dropped.set(e.code == ErrorCode::TabletNotFound && self.catalog_lookup_fails(id));
            dropped.get()
        };
        match self.call_leader(&ti, None, || Request::ResolveTxn { tablet: id, txn, commit_ht }, gone) {
            Err(_) if dropped.get() => Ok(()), // dropped table: nothing left to resolve
            res => res.map(|_| ()),
        }
    }

    /// Send `req()` to tablet `ti`'s leader: start at the catalog's leader, follow
    /// NotLeader answers, else try the next replica, never calling `skip` (a dead
    /// node); a few hops at most. An error for which `give_up` holds ends it.
    fn call_leader(&self, ti: &TabletInfo, skip: Option<&str>, req: impl Fn() -> Request, give_up: impl Fn(&RpcError) -> bool) -> Result<Response, RpcError> {
        let next = |attempt: usize, addr: String| ti.replicas.get((attempt + 1) % ti.replicas.len().max(1)).cloned().unwrap_or(addr);
        let mut addr = ti.leader.clone();
        let mut last = None;
        for attempt in 0..(ti.replicas.len() + 3) {
            if Some(addr.as_str()) == skip {
                addr = next(attempt, addr);
                continue;
            }
            match self.call_node(&addr, req()) {
                Ok(r) => return Ok(r),
                Err(e) if give_up(&e) => return Err(e),
                Err(e) => {
                    addr = match &e.leader {
                        Some(l) if e.code == ErrorCode::NotLeader => l.clone(),
                        _ => next(attempt, addr),
                    };
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| err(ErrorCode::Unavailable, "no replica answered")))
    }

    /// Whether the master no longer knows tablet `id` (its table was dropped).
    fn catalog_lookup_fails(&self, id: TabletId) -> bool {
        self.locations.lock().remove(&id);
        matches!(self.call_master(Request::LocateTablet { tablet: id }), Err(e) if e.code == ErrorCode::TabletNotFound)
    }

    /// `ResolveTxn`: this node's leader replica of `tablet` applies or removes.
    fn resolve_txn_here(&self, tablet: TabletId, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        match commit_ht {
            Some(ht) => t.apply_intents(txn, ht),
            None => t.remove_intents(txn),
        }
        .map(|_| Response::Done)
        .map_err(tablet_err)
    }

    fn close_group(&self, id: TabletId) {
        let g = self.groups.write().remove(&id);
        if let Some(g) = g {
            g.group.shutdown();
        }
    }

    /// Stop every Raft group (clean shutdown, after `flush_all`).
    pub fn close(&self) {
        let ids: Vec<TabletId> = self.groups.read().keys().copied().collect();
        for id in ids {
            self.close_group(id);
        }
    }

    pub fn config(&self) -> &NodeConfig {
        &self.cfg
    }
    pub fn clock(&self) -> &Arc<HybridClock> {
        &self.clock
    }
    /// This node's replica of node `home`'s status tablet, if it has one.
    pub fn status_tablet(&self, home: u64) -> Option<Arc<StatusTablet<F::Engine>>> {
        self.status_tablets.read().get(&TabletId::status_of_node(home)).cloned()
    }
    pub fn tablet(&self, id: TabletId) -> Option<Arc<Tablet<F::Engine>>> {
        self.tablets.read().get(&id).cloned()
    }
    pub fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    fn get_tablet(&self, id: TabletId) -> Result<Arc<Tablet<F::Engine>>, RpcError> {
        self.tablet(id).ok_or_else(|| err(ErrorCode::TabletNotFound, format!("tablet {} is not served by this node", id.0)))
    }

    fn resolver(&self) -> impl Fn(TxnId, HybridTime) -> pinax_mvcc::Result<TxnStatus> + '_ {
        move |txn, read_ht| self.txn_status(txn, read_ht).map_err(|e| pinax_mvcc::Error::StatusUnavailable { code: e.code, message: e.message })
    }

    fn read_ctx(&self, at: ReadPoint) -> ReadContext {
        let read_ht = if at.read_ht == HybridTime::INVALID { self.clock.now() } else { at.read_ht };
        let ctx = match at.txn {
            Some((txn, seq)) => ReadContext::in_txn(read_ht, txn, seq),
            None => ReadContext::at(read_ht),
        };
        if at.uncertain_from == HybridTime::INVALID {
            return ctx;
        }
        match self.max_clock_skew_micros() {
            0 => ctx,
            skew => ctx.uncertain_until(at.uncertain_from.add_micros(skew)),
        }
    }

    /// The bound on clock skew between this node and any other that reads use
    /// (`--max-clock-skew-ms`): 0 while this node knows no other node (a lone
    /// node's tablets, status records and SQL clients share one clock, so no read
    /// is uncertain).
    fn max_clock_skew_micros(&self) -> u64 {
        if self.directory.read().len() > 1 || self.cfg.join.is_some() {
            self.clock.max_skew_micros()
        } else {
            0
        }
    }

    /// Whether reads served here use an uncertainty window (told to clients with
    /// every answer: a SQL node holds back a SELECT's output only when one may
    /// have to run again).
    pub fn reads_uncertain(&self) -> bool {
        self.max_clock_skew_micros() > 0
    }

    /// Execute one request.
    pub fn handle(&self, req: Request) -> Result<Response, RpcError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if self.is_shutting_down() {
            return Err(err(ErrorCode::ShuttingDown, "the node is shutting down"));
        }
        self.serve(req)
    }

    /// [`Node::handle`] without counting the request (parts of one request).
    fn serve(&self, req: Request) -> Result<Response, RpcError> {
        match req {
            Request::Ping => Ok(Response::Pong { node_id: self.cfg.node_id }),
            Request::Now => Ok(Response::Now(self.clock.now())),
            Request::Status => {
                // Tables and live nodes are the master's.
                let (tables, nodes) = if self.is_master() {
                    (self.catalog()?.tables().map_err(catalog_err)?, self.live_nodes())
                } else {
                    match self.call_master(Request::Status)? {
                        Response::Status(m) => (m.tables, m.nodes),
                        other => return Err(err(ErrorCode::Internal, format!("unexpected answer to Status: {other:?}"))),
                    }
                };
                Ok(Response::Status(NodeStatus {
                    node_id: self.cfg.node_id,
                    rpc_addr: self.cfg.rpc_addr.clone(),
                    data_dir: self.cfg.data_dir.clone(),
                    tables: tables.into_iter().filter(|t| !t.name.starts_with(SYSTEM_TABLE_PREFIX)).collect(),
                    status_tablet_records: self.status_tablets.read().values().map(|st| st.len() as u64).sum(),
                    hybrid_time: self.clock.now(),
                    nodes,
                }))
            }
            // Here when this node leads the master (a leader change may cut in:
            // then at the new leader), else at the master's leader.
            req @ (master_request!()) => {
                if self.is_master() {
                    match self.handle_master(req.clone()) {
                        Err(e) if e.code == ErrorCode::NotLeader => self.call_master(req),
                        res => res,
                    }
                } else {
                    self.call_master(req)
                }
            }
            Request::ApplyDdl { upto } => match self.ddl.get() {
                None => Ok(Response::Done),
                Some(a) => a.apply_upto(upto, Instant::now() + DDL_APPLY_WAIT).map(|_| Response::Done).map_err(|e| err(ErrorCode::Unavailable, e)),
            },
            Request::CreateReplica { tablet, members, bootstrap } => self.create_replica(ReplicaRecord { tablet, members, bootstrap }),
            Request::DropReplica { tablet } => self.drop_replica(tablet),
            Request::Write { tablet, ops, read_ht, txn, request } => {
                let t = self.get_tablet(tablet)?;
                let r = self.resolver();
                match txn {
                    None => t.write_fast(request, &ops, read_ht, &r).map(|ht| Response::Written { ht }).map_err(tablet_err),
                    Some((txn, seq)) => {
                        let read_ht = read_ht.ok_or_else(|| err(ErrorCode::InvalidRequest, "a transactional write needs a read time"))?;
                        t.write_intents(request, txn, seq, read_ht, &ops, &r).map(|_| Response::Written { ht: read_ht }).map_err(tablet_err)
                    }
                }
            }
            Request::WriteIfLive { tablet, op, read_ht, full, request } => {
                let t = self.get_tablet(tablet)?;
                let (ht, outcome) = t.write_if_live(request, &op, read_ht, full, &self.resolver()).map_err(tablet_err)?;
                Ok(Response::WrittenIfLive { ht, outcome })
            }
            Request::WriteIntentIfLive { tablet, op, txn, seq, request } => {
                let t = self.get_tablet(tablet)?;
                let outcome = t.write_intent_if_live(request, txn, seq, &op, &self.resolver()).map_err(tablet_err)?;
                Ok(Response::WrittenIfLive { ht: self.clock.now(), outcome })
            }
            Request::DeleteAll { tablet, txn, seq, read_ht } => {
                let t = self.get_tablet(tablet)?;
                t.delete_all(txn, seq, read_ht, &self.resolver()).map(|count| Response::DeletedAll { count }).map_err(tablet_err)
            }
            Request::CreateTxnAndWrite { txn, write } => {
                if !matches!(&*write, Request::Write { txn: Some((t, _)), .. } | Request::WriteIntentIfLive { txn: t, .. } if *t == txn) {
                    return Err(err(ErrorCode::InvalidRequest, "CreateTxnAndWrite carries a write of its own transaction"));
                }
                match self.on_status_tablet(txn, Request::CreateTxn { txn }, true)? {
                    Response::TxnCreated { .. } => Ok(Response::TxnWritten { write: self.serve(*write).map(Box::new) }),
                    r => Err(err(ErrorCode::Internal, format!("unexpected answer to CreateTxn: {r:?}"))),
                }
            }
            Request::Read { tablet, key, at } => {
                let t = self.get_tablet(tablet)?;
                let ctx = self.read_ctx(at);
                let value = t.read(ctx, &key, &self.resolver()).map_err(tablet_err)?;
                Ok(Response::Value { value, read_ht: ctx.read_ht })
            }
            Request::Scan { tablet, spec, at } => {
                let t = self.get_tablet(tablet)?;
                let ctx = self.read_ctx(at);
                let result = t.scan(ctx, &spec, &self.resolver()).map_err(tablet_err)?;
                Ok(Response::Rows { result, read_ht: ctx.read_ht })
            }
            req @ (Request::CreateTxn { .. } | Request::Heartbeat { .. } | Request::CommitTxn { .. } | Request::AbortTxn { .. }) => {
                let txn = status_txn(&req).unwrap_or_else(|| unreachable!("a status request names its transaction"));
                self.on_status_tablet(txn, req, true)
            }
            Request::Forwarded(req) => match status_txn(&req) {
                Some(txn) => self.on_status_tablet(txn, *req, false),
                // At the master's leader, or NotLeader (never forwarded again).
                None if matches!(*req, Request::Status) && self.is_master() => self.handle(*req),
                None if is_master_request(&req) && self.is_master() => self.handle_master(*req).map_err(|e| if e.code == ErrorCode::NotLeader { self.not_master() } else { e }),
                None if is_master_request(&req) || matches!(*req, Request::Status) => Err(self.not_master()),
                None => Err(err(ErrorCode::InvalidRequest, "only requests on status records or the catalog are forwarded")),
            },
            Request::WaitTxn { txn, waiter, timeout_ms } => self.wait_txn(txn, waiter, Duration::from_millis(timeout_ms as u64).min(MAX_WAIT)),
            Request::WaitsFor { txn } if self.home_of(txn) == self.cfg.node_id => Ok(Response::WaitingFor { holder: self.waits_for.lock().get(&txn).copied() }),
            Request::WaitsFor { .. } => Err(err(ErrorCode::InvalidRequest, "WaitsFor sent to a node that is not the transaction's home")),
            Request::RollbackTxn { tablet, txn, from_seq } => {
                let t = self.get_tablet(tablet)?;
                t.rollback_intents(txn, from_seq).map(|_| Response::Done).map_err(tablet_err)
            }
            Request::TxnStatus { txn, read_ht } => self.txn_status(txn, read_ht).map(Response::TxnStatus),
            Request::ResolveTxn { tablet, txn, commit_ht } => self.resolve_txn_here(tablet, txn, commit_ht),
            Request::InjectFaults { .. } if !self.cfg.fault_injection => Err(err(ErrorCode::InvalidRequest, "fault injection is off (start the node with --fault-injection)")),
            Request::InjectFaults { unreachable } => {
                tracing::warn!(?unreachable, "fault injection: these nodes are unreachable from here");
                self.transport.set_unreachable(unreachable);
                Ok(Response::Done)
            }
            Request::ChangeReplicas { tablet, add, remove } => {
                let g = self.replica_group(tablet)?;
                g.group.replace_voter(add, remove, Duration::from_secs(60)).map(|_| Response::Done).map_err(|e| tablet_err(crate::replica::group_err(tablet, e)))
            }
            Request::TransferLeader { tablet, to } => {
                let g = self.replica_group(tablet)?;
                let addr = g.group.hand_over(to).map_err(|e| tablet_err(crate::replica::group_err(tablet, e)))?;
                match self.call_node(&addr, Request::Campaign { tablet }) {
                    Ok(_) => Ok(Response::Done),
                    Err(e) => {
                        g.group.cancel_hand_over();
                        Err(e)
                    }
                }
            }
            Request::Campaign { tablet } => {
                let g = self.replica_group(tablet)?;
                g.group.campaign();
                Ok(Response::Done)
            }
            Request::Raft { target, .. } if target != self.cfg.node_id => Err(err(ErrorCode::Unavailable, format!("node {target} is not at {}", self.cfg.rpc_addr))),
            Request::Raft { group, kind, body, .. } => {
                let kind = pinax_raft::network::MsgKind::from_u8(kind).ok_or_else(|| err(ErrorCode::InvalidRequest, format!("unknown raft message kind {kind}")))?;
                let g = self.replica_group(TabletId(group))?;
                g.group.block_on(pinax_raft::network::serve(g.group.raft(), kind, &body)).map(Response::Raft).map_err(|m| err(ErrorCode::InvalidRequest, format!("bad raft message: {m}")))
            }
        }
    }

    /// This node's replica (Raft group) of `tablet`.
    fn replica_group(&self, tablet: TabletId) -> Result<Arc<RaftReplicator>, RpcError> {
        let g = self.groups.read().get(&tablet).cloned();
        g.ok_or_else(|| err(ErrorCode::TabletNotFound, format!("tablet {} has no replica on this node", tablet.0)))
    }

    /// A catalog request at the master (NotLeader unless this node leads it).
    fn handle_master(&self, req: Request) -> Result<Response, RpcError> {
        match req {
            Request::AddTableName { name, existing } => self.catalog()?.add_name(&name, &existing).map(Response::Table).map_err(catalog_err),
            Request::PublishDdl { entry } => self.publish_ddl(entry),
            Request::ReadDdl { after, max } => self.catalog()?.read_ddl(after, max.clamp(1, 10_000) as usize).map(Response::Ddl).map_err(catalog_err),
            Request::Sequence { name, op } => self.sequence(&name, op),
            Request::CreateTable { name, sharding, if_not_exists } => self.create_table(&name, sharding, if_not_exists).map(Response::Table),
            Request::DropTable { name, if_exists } => self.drop_table(&name, if_exists),
            Request::GetTable { name } => self.catalog()?.get(&name).map(Response::Table).map_err(catalog_err),
            Request::RegisterNode { node_id, addr, leading } => self.register_node(node_id, addr, leading),
            Request::EnsureStatusTablet { node } => self.ensure_status_tablet(node),
            Request::LocateTablet { tablet } => self.locate_tablet(tablet),
            other => Err(err(ErrorCode::InvalidRequest, format!("not a catalog request: {other:?}"))),
        }
    }

    /// Master: create a table. Each tablet gets `replication_factor` replicas (at
    /// most one per live node) on consecutive nodes starting at a different node for
    /// each tablet, so replicas and first leaders spread evenly; the first member
    /// bootstraps the group and is its expected leader.
    fn create_table(&self, name: &str, sharding: Sharding, if_not_exists: bool) -> Result<TableInfo, RpcError> {
        self.create_table_placed(Planned::Sql { name, sharding, if_not_exists })
    }

    /// Master: create and place a table (a SQL table, or a node's status table,
    /// whose first replica and first leader is that node).
    fn create_table_placed(&self, planned: Planned<'_>) -> Result<TableInfo, RpcError> {
        // One status table at a time: two creations of the same one would share
        // tablet ids, and the loser would drop the winner's replicas.
        let _one = matches!(planned, Planned::Status(_)).then(|| self.status_creation.lock());
        // A node that fails to create its replica is left out and the table placed
        // again on the others (it may have died since it last registered).
        let mut down: Vec<u64> = Vec::new();
        loop {
            match self.try_create_table(planned.clone(), &down) {
                Err(CreateFailed::Node(id, e)) => {
                    tracing::warn!(node_id = id, error = %e, "a node could not create its replicas; placing the table without it");
                    // Not live from now on (until it registers again); still
                    // known, so that its replicas move once it is gone for good.
                    if let Some((_, seen)) = self.nodes.lock().get_mut(&id) {
                        *seen = placement::missed(*seen, self.now());
                    }
                    down.push(id);
                    if down.len() >= 3 {
                        return Err(e);
                    }
                }
                Err(CreateFailed::Other(e)) => return Err(e),
                Ok(t) => return Ok(t),
            }
        }
    }

    fn try_create_table(&self, planned: Planned<'_>, down: &[u64]) -> Result<TableInfo, CreateFailed> {
        let catalog = self.catalog().map_err(CreateFailed::Other)?;
        let mut live = self.live_nodes();
        live.retain(|(id, _)| !down.contains(id) || *id == self.cfg.node_id);
        let rf = placement::replicas_per_tablet(self.cfg.replication_factor, live.len());
        let existing = |name: &str| catalog.get(name).map_err(|e| CreateFailed::Other(catalog_err(e)));
        let (mut plan, home) = match planned {
            Planned::Sql { name, sharding, if_not_exists } => {
                let sharding = placement::new_table_sharding(sharding, self.cfg.tablets_per_node, live.len(), rf);
                match catalog.plan_table(name, sharding, &self.cfg.rpc_addr) {
                    Ok(p) => (p, None),
                    Err(CatalogError::AlreadyExists(_)) if if_not_exists => return existing(name),
                    Err(e) => return Err(CreateFailed::Other(catalog_err(e))),
                }
            }
            Planned::Status(node) => match catalog.plan_status_table(node, &self.cfg.rpc_addr) {
                Ok(p) => (p, Some(node)),
                Err(CatalogError::AlreadyExists(name)) => return existing(&name),
                Err(e) => return Err(CreateFailed::Other(catalog_err(e))),
            },
        };
        let placed = placement::place_new_table(&mut plan, &live, rf, home);
        // Followers first, so the bootstrap replica's first messages find them.
        let mut done: Vec<(String, TabletId)> = Vec::new();
        for bootstrap in [false, true] {
            for (ti, members) in &placed {
                for (k, (node_id, addr)) in members.iter().enumerate() {
                    if (k == 0) != bootstrap {
                        continue;
                    }
                    let req = Request::CreateReplica { tablet: ti.clone(), members: members.clone(), bootstrap };
                    if let Err(e) = self.call_node(addr, req) {
                        self.drop_replicas(&done);
                        let e = err(e.code, format!("creating a replica of tablet {} on {addr}: {}", ti.id.0, e.message));
                        return Err(if *node_id == self.cfg.node_id { CreateFailed::Other(e) } else { CreateFailed::Node(*node_id, e) });
                    }
                    done.push((addr.clone(), ti.id));
                }
            }
        }
        if let Err(e) = catalog.commit_table(&plan) {
            self.drop_replicas(&done);
            return Err(CreateFailed::Other(catalog_err(e)));
        }
        Ok(plan)
    }

    /// Master: keep every tablet at its replication factor, then even out the
    /// load ([`placement::Pass`] decides; this carries the moves out). A move
    /// creates the replica there, has the tablet's leader change the voters, and
    /// records it in the catalog.
    fn re_replicate(&self) {
        let now = self.now();
        let heard = {
            let mut nodes = self.nodes.lock();
            nodes.insert(self.cfg.node_id, (self.cfg.rpc_addr.clone(), now));
            nodes.clone()
        };
        let Ok(tables) = self.catalog().and_then(|c| c.tables().map_err(catalog_err)) else {
            return;
        };
        let rules = placement::Rules { replication_factor: self.cfg.replication_factor, node_timeout: self.cfg.node_timeout };
        let mut pass = placement::Pass::new(&tables, &heard, now, rules);
        while let Some(m) = pass.next_move() {
            let (id, from, to) = (m.tablet.id.0, m.from.as_ref().map(|f| f.0), m.to.0);
            match self.move_replica(&m) {
                Ok(()) => {
                    pass.moved(&m);
                    tracing::info!(tablet_id = id, ?from, to, "tablet replica placed");
                }
                Err(e) => tracing::warn!(tablet_id = id, ?from, to, error = %e, "could not place a tablet replica"),
            }
        }
        match pass.balance() {
            Balance::Wait => {}
            Balance::MoveReplica(m) => {
                let (id, from, to) = (m.tablet.id.0, m.from.as_ref().map_or(0, |f| f.0), m.to.0);
                match self.move_replica(&m) {
                    Ok(()) => tracing::info!(tablet_id = id, from, to, "tablet replica moved to even out the load"),
                    Err(e) => tracing::warn!(tablet_id = id, from, to, error = %e, "could not move a tablet replica"),
                }
            }
            Balance::EvenLeaders => self.rebalance_leaders(&tables, pass.live(), now),
        }
    }

    /// Master, replicas being even: move one tablet leader if
    /// [`placement::leader_move`] says so (leaders as the nodes last said, this
    /// node's as it leads now).
    fn rebalance_leaders(&self, tables: &[TableInfo], live: &[NodeEntry], now: Micros) {
        let last_move = *self.last_leader_move.lock();
        let mine = self.leading();
        let decided = placement::leader_move(tables, live, self.cfg.node_id, &mine, &self.leaders.lock(), now, last_move);
        let Some(placement::LeaderMove { tablet, from: (heavy, heavy_addr), to: (light, _) }) = decided else {
            return;
        };
        *self.last_leader_move.lock() = now;
        match self.call_node(&heavy_addr, Request::TransferLeader { tablet, to: light }) {
            Ok(_) => tracing::info!(tablet_id = tablet.0, from = heavy, to = light, "tablet leader moved to even out the load"),
            Err(e) => tracing::warn!(tablet_id = tablet.0, from = heavy, to = light, error = %e, "could not move a tablet leader"),
        }
    }

    /// Drop this node's replicas that were moved away or whose table was dropped
    /// while it was down (nobody could tell it then): those without a leader for
    /// the node timeout ([`placement::Leaderless`]) that the catalog does not
    /// place here ([`placement::is_orphan`]).
    fn drop_orphan_replicas(&self) {
        let groups: Vec<(TabletId, bool)> = self.groups.read().iter().map(|(id, g)| (*id, g.group.leader().is_some())).collect();
        let check = self.leaderless.lock().due(&groups, self.now(), self.cfg.node_timeout);
        for id in check {
            let answer = self.call_master(Request::LocateTablet { tablet: id });
            let lookup = match &answer {
                Ok(Response::Tablet(ti)) => Lookup::Found(ti),
                Err(e) if e.code == ErrorCode::TabletNotFound => Lookup::NotFound,
                _ => Lookup::Unknown, // the master cannot say now: decide nothing
            };
            if placement::is_orphan(lookup, &self.cfg.rpc_addr) {
                tracing::info!(tablet_id = id.0, "dropping a replica the catalog no longer places here");
                if let Err(e) = self.drop_replica(id) {
                    tracing::warn!(tablet_id = id.0, error = %e, "could not drop an orphaned replica");
                }
            }
        }
    }

    /// Carry out replica move `m` ([`placement::move_steps`]): create the
    /// replica on the new node, have the tablet's leader change the voters,
    /// record the move in the catalog, and drop the old replica of a live node.
    fn move_replica(&self, m: &ReplicaMove) -> Result<(), RpcError> {
        let ti = &m.tablet;
        let steps = placement::move_steps(m, &self.directory.read());
        let new_addr = steps.add.1.clone();
        self.call_node(&new_addr, Request::CreateReplica { tablet: steps.tablet, members: steps.members, bootstrap: false })?;
        let req = || Request::ChangeReplicas { tablet: ti.id, add: steps.add.clone(), remove: steps.remove };
        self.call_leader(ti, steps.skip.as_deref(), req, |_| false)?;
        self.catalog()?.move_replica(&m.table, ti.id, m.from.as_ref().map(|f| f.1.as_str()), &new_addr).map_err(catalog_err)?;
        self.locations.lock().remove(&ti.id);
        if let Some(from) = steps.drop_after {
            self.drop_replicas(&[(from, ti.id)]);
        }
        Ok(())
    }

    /// Best effort: drop replicas (a node that is down keeps its replica until it
    /// learns otherwise).
    fn drop_replicas(&self, replicas: &[(String, TabletId)]) {
        for (addr, id) in replicas {
            if let Err(e) = self.call_node(addr, Request::DropReplica { tablet: *id }) {
                tracing::warn!(tablet_id = id.0, %addr, error = %e, "could not drop a replica");
            }
        }
    }

    fn destroy_tablets(&self, t: &TableInfo) {
        let all: Vec<(String, TabletId)> = t.tablets.iter().flat_map(|ti| ti.replicas.iter().map(|a| (a.clone(), ti.id))).collect();
        self.drop_replicas(&all);
    }

    fn drop_table(&self, name: &str, if_exists: bool) -> Result<Response, RpcError> {
        match self.catalog()?.drop_table(name) {
            Ok(Dropped::Table(t)) => {
                self.destroy_tablets(&t);
                Ok(Response::Dropped)
            }
            Ok(Dropped::Name) => Ok(Response::Dropped),
            Err(CatalogError::NotFound(_)) if if_exists => Ok(Response::Dropped),
            Err(e) => Err(catalog_err(e)),
        }
    }

    /// Master: log `entry`, then have every other live node apply the log through
    /// it (in parallel, each for at most `DDL_APPLY_WAIT`). Nodes that did not are
    /// reported; they catch up from the log on their own.
    fn publish_ddl(&self, entry: DdlEntry) -> Result<Response, RpcError> {
        let origin = entry.origin;
        let seq = self.catalog()?.append_ddl(entry).map_err(catalog_err)?;
        let others: Vec<(u64, String)> = self.live_nodes().into_iter().filter(|(id, _)| *id != origin).collect();
        let lagging = std::thread::scope(|s| {
            let calls: Vec<_> = others
                .iter()
                .map(|(id, addr)| {
                    s.spawn(move || {
                        let done = if *id == self.cfg.node_id {
                            self.handle(Request::ApplyDdl { upto: seq }).is_ok()
                        } else {
                            self.call_node(addr, Request::ApplyDdl { upto: seq }).is_ok()
                        };
                        (!done).then(|| (*id, addr.clone()))
                    })
                })
                .collect();
            calls.into_iter().filter_map(|c| c.join().ok().flatten()).collect::<Vec<_>>()
        });
        if !lagging.is_empty() {
            tracing::warn!(seq, ?lagging, "nodes have not applied a DDL log entry yet");
        }
        Ok(Response::DdlPublished { seq, lagging })
    }

    /// Master: an operation on a cluster-wide sequence.
    fn sequence(&self, name: &str, op: SequenceOp) -> Result<Response, RpcError> {
        let catalog = self.catalog()?;
        let r = match op {
            SequenceOp::Alias { existing } => catalog.sequence_alias(name, &existing).map(|_| Response::Done),
            SequenceOp::Next { start, increment, min, max, cycle, count } => {
                if increment == 0 || min > max {
                    return Err(err(ErrorCode::InvalidRequest, format!("invalid options for sequence {name}")));
                }
                let o = pinax_master::catalog::SequenceOptions { start, increment, min, max, cycle };
                catalog.sequence_next(name, o, count.clamp(1, 1_000_000)).map(|(first, count)| Response::SequenceValues { first, count })
            }
            SequenceOp::Set { value, is_called } => catalog.sequence_set(name, value, is_called).map(|_| Response::Done),
            SequenceOp::Drop => catalog.sequence_drop(name).map(|_| Response::Done),
        };
        r.map_err(catalog_err)
    }

    /// Set what applies the DDL log to this node's PostgreSQL (once).
    pub fn set_ddl_applier(&self, a: Arc<dyn DdlApplier>) {
        let _ = self.ddl.set(a);
    }

    /// Apply (`commit_ht = Some`) or remove the intents of `txn` on the local
    /// participants. True when every participant is done.
    /// Committed transactions the applier has had for less than `APPLIER_GRACE`
    /// (older entries are forgotten: the sweeps take those over).
    fn applier_busy(&self) -> Vec<TxnId> {
        let mut applying = self.applying.lock();
        applying.retain(|_, since| since.elapsed() < APPLIER_GRACE);
        applying.keys().copied().collect()
    }

    fn notify_txn_ended(&self) {
        let (lock, cv) = &self.txn_ended;
        *lock.lock() += 1;
        cv.notify_all();
    }

    /// `WaitTxn`: block until `txn` ends or `timeout` passes (the wait itself is
    /// at the leader of `txn`'s status tablet).
    ///
    /// Deadlock detection (distributed, by edge chasing): the home node of the
    /// waiter `W` (the node its client is connected to, which every `WaitTxn` of
    /// `W` passes through) keeps the edge `W → txn` while the wait lasts. Before
    /// waiting, and again every `DEADLOCK_CHECK` while it waits, it follows the
    /// edges from `txn` (asking each transaction's home node with `WaitsFor`); a
    /// path back to `W` is a cycle and `W`, the waiter that found
    /// it, is the victim (`Deadlock`, 40P01). Its own edge is left out while it
    /// looks, so that two members checking at once rarely both see the cycle.
    fn wait_txn(&self, txn: TxnId, waiter: Option<TxnId>, timeout: Duration) -> Result<Response, RpcError> {
        // Only the waiter's home node detects.
        let detect = waiter.filter(|w| self.home_of(*w) == self.cfg.node_id);
        let deadline = Instant::now() + timeout;
        let result = loop {
            if let Some(w) = detect {
                self.waits_for.lock().remove(&w);
                if self.wait_closes_cycle(w, txn) {
                    break Err(err(ErrorCode::Deadlock, "deadlock detected: the transactions wait for each other"));
                }
                self.waits_for.lock().insert(w, txn);
            }
            let slice = deadline.saturating_duration_since(Instant::now()).min(DEADLOCK_CHECK);
            let ended = match self.on_status_tablet(txn, Request::WaitTxn { txn, waiter: None, timeout_ms: slice.as_millis() as u32 }, true) {
                Ok(Response::Waited { ended, committed }) => ended.then_some(committed),
                Ok(other) => break Err(err(ErrorCode::Internal, format!("unexpected answer to WaitTxn: {other:?}"))),
                Err(e) => break Err(e),
            };
            if ended.is_some() || Instant::now() >= deadline {
                break Ok(Response::Waited { ended: ended.is_some(), committed: ended == Some(true) });
            }
        };
        if let Some(w) = detect {
            let mut waits = self.waits_for.lock();
            if waits.get(&w) == Some(&txn) {
                waits.remove(&w);
            }
        }
        result
    }

    /// Wait up to `timeout` for `txn` (whose record is in `st`, led here) to end:
    /// `Some(committed)` once it has, `None` if it is still running.
    fn wait_local(&self, st: &StatusTablet<F::Engine>, txn: TxnId, timeout: Duration) -> Result<Option<bool>, RpcError> {
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &self.txn_ended;
        let status = |st: &StatusTablet<F::Engine>| st.status(txn, self.clock.now()).map_err(tablet_err);
        let status = loop {
            let seen = *lock.lock();
            let s = status(st)?;
            if !matches!(s, TxnStatus::Pending) {
                break s;
            }
            let mut g = lock.lock();
            if *g == seen && cv.wait_until(&mut g, deadline).timed_out() {
                drop(g);
                break status(st)?;
            }
        };
        Ok(match status {
            TxnStatus::Pending => None,
            TxnStatus::Committed { .. } => Some(true),
            _ => Some(false),
        })
    }

    /// Whether `waiter` waiting for `holder` closes a cycle of waits: following
    /// who waits for whom from `holder` (across nodes) leads back to `waiter`. An
    /// edge that cannot be read (its node is unreachable) ends the search: no cycle
    /// is claimed without seeing it whole.
    fn wait_closes_cycle(&self, waiter: TxnId, holder: TxnId) -> bool {
        let mut at = holder;
        for _ in 0..MAX_WAIT_CHAIN {
            if at == waiter {
                return true;
            }
            match self.waits_for_of(at) {
                Ok(Some(next)) => at = next,
                Ok(None) => return false,
                Err(e) => {
                    tracing::debug!(txn = %at, error = %e, "deadlock detection: could not learn what a transaction waits for");
                    return false;
                }
            }
        }
        false
    }

    /// `WaitsFor`: the transaction `txn` waits for now, asked of its home node if
    /// that is not this one.
    fn waits_for_of(&self, txn: TxnId) -> Result<Option<TxnId>, RpcError> {
        let home = self.home_of(txn);
        if home == self.cfg.node_id {
            return Ok(self.waits_for.lock().get(&txn).copied());
        }
        let addr = self.node_addr(home)?;
        match self.transport.request(&addr, Request::WaitsFor { txn })? {
            Response::WaitingFor { holder } => Ok(holder),
            other => Err(err(ErrorCode::Internal, format!("unexpected answer to WaitsFor: {other:?}"))),
        }
    }

    fn resolve_local(&self, txn: TxnId, commit_ht: Option<HybridTime>, participants: &[TabletId]) -> bool {
        let mut all = true;
        for p in participants {
            let local = self.tablet(*p).filter(|t| t.is_leader());
            let Some(t) = local else {
                // Another node leads it (or its table was dropped).
                if let Err(e) = self.resolve_remote(*p, txn, commit_ht) {
                    tracing::debug!(tablet_id = p.0, %txn, error = %e, "could not resolve intents on another node");
                    all = false;
                }
                continue;
            };
            let res = match commit_ht {
                Some(ht) => t.apply_intents(txn, ht),
                None => t.remove_intents(txn),
            };
            if let Err(e) = res {
                tracing::warn!(tablet_id = p.0, %txn, error = %e, "could not resolve intents");
                all = false;
            }
        }
        all
    }

    /// Drain commit notifications and apply intents. Runs on the applier thread.
    pub fn run_applier(self: &Arc<Self>) {
        let Some(rx) = self.resolutions_rx.lock().take() else {
            return;
        };
        while !self.is_shutting_down() {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(Resolution::Apply { txn, commit_ht, participants }) => {
                    if self.resolve_local(txn, Some(commit_ht), &participants) {
                        if let Some(Err(e)) = self.local_status_of(txn).map(|st| st.mark_resolved(txn)) {
                            // The next leader resolves it again (idempotent).
                            tracing::debug!(%txn, error = %e, "could not mark transaction resolved");
                        }
                    }
                    self.applying.lock().remove(&txn);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Periodic background work; call every few hundred milliseconds.
    pub fn tick(&self) {
        self.heartbeat_master();
        self.finish_destroying();
        let due = {
            let mut last = self.last_placement_check.lock();
            let due = last.elapsed() >= Duration::from_secs(1);
            if due {
                *last = Instant::now();
            }
            due
        };
        let master = self.is_master();
        if !master {
            self.led_master.store(false, Ordering::SeqCst);
        } else if !self.led_master.load(Ordering::SeqCst) {
            self.take_over_as_master();
        }
        if due {
            if master {
                if let Err(e) = self.ensure_master_table() {
                    tracing::warn!(error = %e, "could not record the master group's table");
                }
                self.re_replicate();
            }
            self.drop_orphan_replicas();
        }
        let status_tablets: Vec<_> = self.status_tablets.read().values().cloned().collect();
        if master && due {
            self.ensure_status_tablets();
        }
        for st in status_tablets {
            self.tick_status_tablet(&st);
        }
        // Every few seconds: intents whose transaction is decided (covers
        // participants the status record never heard of).
        let sweep = {
            let mut last = self.last_sweep.lock();
            if last.elapsed() >= Duration::from_secs(2) {
                *last = Instant::now();
                true
            } else {
                false
            }
        };
        if sweep {
            self.sweep_intents();
        }
        // Move the history cutoff.
        self.cutoff.advance_to(self.clock.now().sub_micros(self.cfg.history_retention.as_micros() as u64));
    }

    /// Master: every live node has a status tablet (created before its first
    /// transaction needs it, so that does not wait).
    fn ensure_status_tablets(&self) {
        for (node, _) in self.live_nodes() {
            if let Err(e) = self.ensure_status_tablet(node) {
                tracing::warn!(node_id = node, error = %e, "could not create a status tablet");
            }
        }
    }

    /// Background work of a status tablet this node leads (nothing otherwise; a
    /// replica that knows no leader is skipped at once, not waited for).
    fn tick_status_tablet(&self, st: &StatusTablet<F::Engine>) {
        if !st.leads_now() {
            return;
        }
        // 1. Abort transactions whose client went silent.
        match st.expire() {
            Ok(expired) => {
                if !expired.is_empty() {
                    self.notify_txn_ended();
                }
                for (txn, rec) in expired {
                    tracing::info!(%txn, "transaction expired: no heartbeat");
                    if self.resolve_local(txn, None, &rec.participants) {
                        let _ = st.mark_resolved(txn);
                    }
                }
            }
            Err(e) => tracing::warn!(tablet_id = st.id().0, error = %e, "transaction expiry failed"),
        }
        // 2. Decided but unresolved (e.g. after a restart or a leader change),
        //    unless the applier has it.
        let busy = self.applier_busy();
        for (txn, rec) in st.unresolved() {
            if busy.contains(&txn) {
                continue;
            }
            let commit = (rec.state == pinax_txn::TxnState::Committed).then_some(rec.commit_ht);
            if self.resolve_local(txn, commit, &rec.participants) {
                let _ = st.mark_resolved(txn);
            }
        }
        // 3. Forget old records.
        if let Err(e) = st.gc(self.cfg.status_retention.as_micros() as u64) {
            tracing::warn!(tablet_id = st.id().0, error = %e, "status record gc failed");
        }
    }

    /// Resolve every intent on this node whose transaction is decided.
    pub fn sweep_intents(&self) {
        let tablets: Vec<_> = self.tablets.read().values().cloned().collect();
        let busy = self.applier_busy();
        for t in tablets {
            // Not `is_leader`: it would wait seconds for each replica whose
            // group has no leader, stalling the node's background loop.
            if !t.leads_now() || !t.is_leader() {
                continue;
            }
            let txns = t.txns_maybe_with_intents();
            for txn in txns {
                if busy.contains(&txn) {
                    continue; // the applier has it
                }
                let res = match self.txn_status(txn, self.clock.now()) {
                    Ok(TxnStatus::Committed { commit_ht }) => t.apply_intents(txn, commit_ht),
                    Ok(TxnStatus::Aborted) => t.remove_intents(txn),
                    Ok(TxnStatus::Pending) => continue,
                    Err(e) => {
                        tracing::debug!(%txn, error = %e, "status of a transaction with intents here is unknown");
                        continue;
                    }
                };
                if let Err(e) = res {
                    tracing::warn!(tablet_id = t.id().0, %txn, error = %e, "could not resolve intents");
                }
            }
        }
    }

    /// Flush every engine (clean shutdown).
    pub fn flush_all(&self) {
        use pinax_engine::KvEngine;
        for t in self.tablets.read().values() {
            if let Err(e) = t.engine().flush() {
                tracing::warn!(tablet_id = t.id().0, error = %e, "flush failed");
            }
        }
    }

    pub fn requests_served(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}
