//! A node: tablets, status tablets, its replica of the master group, and the
//! request handler.
//!
//! [`Node`] owns everything a node serves; [`Node::handle`] executes one request
//! (`serve.rs`: one match arm per request, delegating to the file of its role);
//! [`Node::tick`] runs the background work. The roles, one file each:
//! - `serve.rs`: the dispatch;
//! - `handlers/`: one file per group of requests (`tablet`: reads and writes of a
//!   tablet; `replica`: a replica's life and its Raft group; `catalog`: the
//!   master's catalog requests and table creation; `ddl`, `sequence`, `status`);
//! - `master_role.rs`: leading the master group, finding and calling it,
//!   registration and heartbeats;
//! - `master_split.rs`: the master's side of tablet splits (`SplitTablet`,
//!   the tick's driver of the catalog's split records);
//! - `split.rs`: a replica's side of a split (`SplitReplica`, applying it);
//! - `sql_lease.rs`: SQL leases, fencing a SQL node cut off from the master
//!   before DDL goes on without it;
//! - `placement.rs`: carrying out `pinax_master::placement`'s decisions;
//! - `status_routing.rs`: finding and calling a transaction's status tablet;
//! - `waits.rs`: `WaitTxn`, the wait-for graph and deadlock detection;
//! - `resolution.rs`: applying and removing decided transactions' intents (the
//!   applier, status tablets' background work, the sweep).
//!
//! Invariants: a request never panics the daemon; only the master group's leader
//! serves catalog requests (others forward them); only a status tablet's leader
//! answers for its records (others forward them).
//! Start at [`Node::handle`], then `serve.rs`.

pub mod crash;
mod handlers;
mod master_role;
mod master_split;
mod peer_watch;
mod placement;
mod resolution;
mod revival;
mod serve;
mod split;
mod sql_lease;
mod status_routing;
mod trace;
mod waits;

use crate::factory::EngineFactory;
use crate::replica::{RaftReplicator, RpcTransport};
use parking_lot::{Condvar, Mutex, RwLock};
use pinax_common::{Clock, ErrorCode, HybridClock, HybridTime, TabletId, TxnId};
use pinax_master::placement::{Heard, LeaderReports, Leaderless, Micros};
use pinax_master::{single_tablet_table, Catalog, CatalogError, LocalRecords, ReplicaRecord, MASTER_TABLE_NAME};
use pinax_mvcc::gc::HistoryCutoff;
use pinax_mvcc::TxnStatus;
use pinax_proto::{Request, Response, RpcError, TabletInfo};
use pinax_raft::RaftTiming;
use pinax_tablet::{StatusTablet, Tablet};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use placement::MonotonicClock;

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
    /// The RPC addresses of nodes of the cluster to join (any live one will do);
    /// empty: this node is the cluster's first (it bootstraps the master group).
    pub join: Vec<String>,
    /// Replicas per tablet of new tables (fewer when fewer nodes are alive).
    pub replication_factor: u32,
    /// Master: a node not heard from for this long is gone; its replicas are
    /// re-created on other nodes.
    pub node_timeout: Duration,
    /// Accept `InjectFaults` (tests).
    pub fault_injection: bool,
    /// Mutual TLS on TCP: the RPC server accepts only peers with a certificate
    /// of the cluster's CA, and this node presents its own to the nodes it calls.
    /// None: plaintext (`pinax run --insecure`, in-process tests).
    pub tls: Option<Arc<pinax_proto::tls::TlsConfig>>,
    /// Issues certificates to nodes joining with a token (None: refused).
    pub join_signer: Option<Arc<dyn JoinSigner>>,
    /// Master: when tablets split by themselves (None: never; `pinax tablet
    /// split` and `pinax_split_tablet` still do).
    pub auto_split: Option<pinax_master::splitting::SplitRules>,
    /// How often this node reports the sizes of the tablets it leads to the
    /// master (with a registration).
    pub size_report_interval: Duration,
    /// Master: how long a group may lead a tablet the catalog does not know
    /// before its replicas are dropped (`drop_unknown_leaders`).
    pub unknown_leader_grace: Duration,
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
            join: Vec::new(),
            replication_factor: 3,
            node_timeout: Duration::from_secs(60),
            fault_injection: false,
            tls: None,
            join_signer: None,
            auto_split: Some(pinax_master::splitting::SplitRules::default()),
            size_report_interval: Duration::from_secs(10),
            unknown_leader_grace: pinax_master::placement::UNKNOWN_LEADER_GRACE,
        }
    }
}

/// The engine of this node's own records ([`LocalRecords`]; named "master" from
/// when it held the catalog too).
const LOCAL_ENGINE: &str = "master";

/// How often the shared Raft logs' files are purged (as TiKV does).
const RAFT_LOG_PURGE_EVERY: Duration = Duration::from_secs(10);

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
    factory: Arc<F>,
    clock: Arc<HybridClock>,
    /// This node's own records: its replicas, where the masters are.
    local: Arc<LocalRecords<F::Engine>>,
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
    resolutions: Mutex<mpsc::Sender<Resolution>>,
    resolutions_rx: Mutex<Option<mpsc::Receiver<Resolution>>>,
    shutting_down: AtomicBool,
    last_sweep: Mutex<Instant>,
    /// When the shared Raft logs' files were last purged (`purge_raft_logs`).
    last_log_purge: Mutex<Instant>,
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
    /// Master only: each tablet's size and load as its leader last reported
    /// them (automatic splitting, `master_split.rs`).
    tablet_reports: Mutex<HashMap<TabletId, master_split::SeenTablet>>,
    /// Master only: tablets whose leader refused a split, and when (not split
    /// automatically again for a while).
    split_refused: Mutex<HashMap<TabletId, Micros>>,
    /// When this node last sent the master its tablets' sizes.
    last_size_report: Mutex<master_role::SizeReports>,
    /// Master only: when it last moved a leader.
    last_leader_move: Mutex<Micros>,
    /// Master only: since when each group leading a tablet the catalog does
    /// not know was first seen so (`drop_unknown_leaders`).
    unknown_leaders: Mutex<HashMap<TabletId, Micros>>,
    /// When this node last registered with the master.
    last_register: Mutex<Option<Instant>>,
    /// Fault injection: how long the next tick sleeps (`Request::StallTick`).
    stall_tick: AtomicU64,
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
    /// Held while a replica that may be stale is checked and dropped
    /// (`CreateReplica` of a replica already here, the orphan check): one at a
    /// time, so a replica is never dropped between the check that says its group
    /// does not count it and a `CreateReplica` that keeps it.
    replica_checks: Mutex<()>,
    /// Each open replica's engine, to know when a dropped one is closed (its data
    /// may be deleted only then: RocksDB keeps writing files until it closes).
    engines: Mutex<HashMap<TabletId, std::sync::Weak<F::Engine>>>,
    /// Halves of splits applied here, to open (`split.rs`).
    split_halves: Arc<Mutex<Vec<ReplicaRecord>>>,
    /// Master: the splits a thread drives now (`master_split.rs`).
    splits_in_flight: master_split::SplitsInFlight,
    /// Replicas whose Raft group stopped, and when each is opened again (`revival.rs`).
    revivals: Mutex<revival::Revivals>,
    /// When the groups were last looked at for stopped ones (`revival.rs`).
    last_revival_scan: Mutex<Instant>,
    /// Nodes of quiesced leaders that stopped answering, and since when (`peer_watch.rs`).
    peers_down: Mutex<peer_watch::PeersDown>,
    /// Applies the cluster's DDL log to this node's PostgreSQL (none: no
    /// PostgreSQL here, nothing to apply).
    ddl: std::sync::OnceLock<Arc<dyn DdlApplier>>,
    /// DDL locks this node's PostgreSQL backends took and have not let go yet:
    /// lock id → backend process id (`Request::DdlLockHeld` is answered here).
    ddl_locks: Mutex<HashMap<u128, u32>>,
    /// This node's SQL lease (`sql_lease.rs`).
    sql_lease: Mutex<sql_lease::SqlLease>,
    /// Master only: when each node's SQL lease was last granted.
    lease_grants: Mutex<sql_lease::LeaseGrants>,
    /// Master only: DDL locks being spread or held (lock → origin address, and
    /// since when, physical microseconds).
    locks_in_flight: Mutex<HashMap<u128, (String, u64)>>,
}

/// Applies the cluster's DDL log to a node's PostgreSQL (the node daemon
/// implements it; the tablet server only calls it).
pub trait DdlApplier: Send + Sync {
    /// Apply every log entry through `upto` (entries of this node's own
    /// PostgreSQL excepted), giving up at `deadline`.
    fn apply_upto(&self, upto: u64, deadline: Instant) -> Result<(), String>;

    /// Take `lock`'s table locks in a session of this node's PostgreSQL (added
    /// to the session if it holds the lock already), waiting until `deadline`.
    fn hold_lock(&self, lock: &pinax_proto::DdlLock, deadline: Instant) -> Result<(), String>;

    /// Let DDL lock `lock` go (its session's transaction rolls back). Idempotent.
    fn release_lock(&self, lock: u128);

    /// Whether the log has been applied through its end once since the node
    /// started (PostgreSQL sessions wait for it before they start).
    fn caught_up(&self) -> bool;

    /// The sequence number of the last log entry applied here (or skipped as
    /// this node's own).
    fn applied(&self) -> u64;
}

/// Issues certificates to nodes that join with a token (`Request::JoinCluster`;
/// the node daemon implements it over its certs directory).
pub trait JoinSigner: Send + Sync + std::fmt::Debug {
    /// Check `token` and sign the certificate request `csr` (PEM): the CA's
    /// certificate and the new node's, PEM.
    fn sign(&self, token: &str, csr: &str) -> Result<(String, String), JoinRefusal>;
}

/// Why a [`JoinSigner`] issued nothing.
#[derive(Debug)]
pub enum JoinRefusal {
    /// This node does not hold the CA key (another node may).
    NoCaKey,
    /// The token or the request is not acceptable (why).
    Refused(String),
}

impl<F: EngineFactory> Node<F> {
    /// Open (or create) a node's state: catalog, status tablet, every tablet.
    pub fn open(cfg: NodeConfig, factory: F, clock: Arc<HybridClock>) -> Result<Arc<Self>, RpcError> {
        let io = |e: pinax_engine::Error| err(ErrorCode::Io, e.to_string());
        // The shared Raft logs first: a data directory from before them is
        // refused before anything in it is opened.
        factory.raft_logs().map_err(io)?;
        let local = Arc::new(LocalRecords::open(factory.open(LOCAL_ENGINE, None).map_err(io)?));
        let factory = Arc::new(factory);
        let masters = local.masters().map_err(catalog_err)?;
        let cutoff = HistoryCutoff::default();
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
        let transport = Arc::new(RpcTransport::new(clock.clone(), cfg.tls.clone()));
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
            resolutions: Mutex::new(tx),
            resolutions_rx: Mutex::new(Some(rx)),
            shutting_down: AtomicBool::new(false),
            last_sweep: Mutex::new(Instant::now()),
            last_log_purge: Mutex::new(Instant::now()),
            txn_ended: (Mutex::new(0), Condvar::new()),
            waits_for: Mutex::new(HashMap::new()),
            applying: Mutex::new(HashMap::new()),
            requests: AtomicU64::new(0),
            status_creation: Mutex::new(()),
            nodes: Mutex::new(BTreeMap::new()),
            last_register: Mutex::new(None),
            stall_tick: AtomicU64::new(0),
            leaders: Mutex::new(HashMap::new()),
            tablet_reports: Mutex::new(HashMap::new()),
            split_refused: Mutex::new(HashMap::new()),
            last_size_report: Mutex::default(),
            placement_clock,
            last_leader_move: Mutex::new(started),
            unknown_leaders: Mutex::new(HashMap::new()),
            last_placement_check: Mutex::new(Instant::now()),
            leaderless: Mutex::new(Leaderless::default()),
            directory: RwLock::new(BTreeMap::new()),
            remote_outcomes: Mutex::new(HashMap::new()),
            locations: Mutex::new(HashMap::new()),
            ddl: std::sync::OnceLock::new(),
            ddl_locks: Mutex::new(HashMap::new()),
            sql_lease: Mutex::new(sql_lease::SqlLease::default()),
            lease_grants: Mutex::new(HashMap::new()),
            locks_in_flight: Mutex::new(HashMap::new()),
            destroying: Mutex::new(std::collections::HashSet::new()),
            replica_checks: Mutex::new(()),
            engines: Mutex::new(HashMap::new()),
            split_halves: Arc::default(),
            splits_in_flight: Default::default(),
            revivals: Mutex::new(revival::Revivals::default()),
            last_revival_scan: Mutex::new(Instant::now()),
            peers_down: Mutex::new(peer_watch::PeersDown::default()),
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
        if node.cfg.join.is_empty() && fresh && !records.iter().any(|r| r.tablet.id == TabletId::MASTER) {
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
        let mut i = 0;
        while i < records.len() {
            let r = records[i].clone();
            wanted.insert(tablet_engine_name(r.tablet.id));
            node.open_tablet(&r)?;
            // A tablet that split here: its halves' records, if a crash lost them.
            let halves = node.missing_half_records(&r, &records)?;
            records.extend(halves);
            i += 1;
        }
        // (Halves opened above, not again by the tick.)
        node.split_halves.lock().clear();
        for name in node.factory.list().map_err(io)? {
            if name.starts_with("tablet-") && !wanted.contains(&name) {
                node.factory.destroy(&name).map_err(io)?;
            }
        }
        // And the logs of groups it has no replica of (a crash after their log's
        // removal started, or before it).
        let groups: std::collections::HashSet<u64> = records.iter().map(|r| r.tablet.id.0).collect();
        for log in node.factory.raft_logs().map_err(io)? {
            for g in log.groups().into_iter().filter(|g| !groups.contains(g)) {
                log.remove_group(g).map_err(|e| err(ErrorCode::Io, e.to_string()))?;
            }
        }
        Ok(Arc::new(node))
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

    /// The engine factory (its shared Raft logs: tests, status).
    pub fn factory(&self) -> &F {
        &self.factory
    }

    pub fn clock(&self) -> &Arc<HybridClock> {
        &self.clock
    }

    /// This node's replica of node `home`'s status tablet, if it has one.
    pub fn status_tablet(&self, home: u64) -> Option<Arc<StatusTablet<F::Engine>>> {
        self.status_tablets.read().get(&TabletId::status_of_node(home)).cloned()
    }

    /// The replicas here whose Raft group is quiesced now (idle; see
    /// `pinax_raft::runtime`).
    pub fn quiesced_replicas(&self) -> Vec<TabletId> {
        self.groups.read().iter().filter(|(_, g)| g.group.is_quiesced()).map(|(id, _)| *id).collect()
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

    /// Execute one request.
    pub fn handle(&self, req: Request) -> Result<Response, RpcError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if self.is_shutting_down() {
            return Err(err(ErrorCode::ShuttingDown, "the node is shutting down"));
        }
        let traced = if trace::enabled() { trace::describe(&req) } else { None };
        let res = self.serve(req);
        if let Some(what) = traced {
            tracing::debug!(target: trace::TARGET, node = self.cfg.node_id, "{what} -> {}", trace::outcome(&res));
        }
        res
    }

    /// Send `req` to the node at `addr` (this node: handle it here).
    fn call_node(&self, addr: &str, req: Request) -> Result<Response, RpcError> {
        if addr == self.cfg.rpc_addr {
            return self.handle(req);
        }
        self.transport.request(addr, req)
    }

    /// Tell the master this node is alive and renew its SQL lease (at most once
    /// a second); call every few hundred milliseconds from a thread of its own
    /// (the node's binary does): the tick can be held for seconds by its other
    /// work (an intent sweep applying a large transaction, a flush before a log
    /// purge), and a node that renews late loses its SQL lease (its backends'
    /// requests are refused) and is taken for dead. [`Node::tick`] heartbeats
    /// too (tests drive nodes by ticks alone).
    pub fn heartbeat(&self) {
        self.heartbeat_master();
    }

    /// Periodic background work; call every few hundred milliseconds.
    pub fn tick(&self) {
        let stall = self.stall_tick.swap(0, Ordering::SeqCst);
        if stall > 0 {
            tracing::warn!(ms = stall, "fault injection: the background loop stalls");
            std::thread::sleep(Duration::from_millis(stall));
        }
        let mut t = TickTimer::new();
        t.run("peers", || self.watch_peers());
        t.run("split halves", || {
            if let Err(e) = self.open_split_halves() {
                tracing::warn!(error = %e, "could not open the halves of a split tablet; retrying");
            }
        });
        t.run("revival", || self.revive_stopped_replicas());
        t.run("heartbeat", || self.heartbeat_master());
        t.run("destroying", || self.finish_destroying());
        let placement_due = due(&self.last_placement_check, Duration::from_secs(1));
        let master = self.is_master();
        if !master {
            self.led_master.store(false, Ordering::SeqCst);
        } else if !self.led_master.load(Ordering::SeqCst) {
            t.run("taking over the master", || self.take_over_as_master());
        }
        if placement_due {
            if master {
                t.run("master table", || {
                    if let Err(e) = self.ensure_master_table() {
                        tracing::warn!(error = %e, "could not record the master group's table");
                    }
                });
                t.run("re-replication", || self.re_replicate());
                t.run("auto splits", || self.request_auto_splits());
                t.run("splits", || self.drive_splits());
                t.run("unknown leaders", || self.drop_unknown_leaders());
                t.run("fences", || self.drop_stale_fences());
            }
            t.run("orphans", || self.drop_orphan_replicas());
        }
        let status_tablets: Vec<_> = self.status_tablets.read().values().cloned().collect();
        if master && placement_due {
            t.run("status tablets", || self.ensure_status_tablets());
        }
        t.run("transaction records", || {
            for st in status_tablets {
                self.tick_status_tablet(&st);
            }
        });
        // Every few seconds: intents whose transaction is decided (covers
        // participants the status record never heard of).
        if due(&self.last_sweep, Duration::from_secs(2)) {
            t.run("intent sweep", || self.sweep_intents());
        }
        if due(&self.last_log_purge, RAFT_LOG_PURGE_EVERY) {
            t.run("log purge", || self.purge_raft_logs());
        }
        // Move the history cutoff.
        self.cutoff.advance_to(self.clock.now().sub_micros(self.cfg.history_retention.as_micros() as u64));
        t.report();
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

/// A tick's parts, timed: a tick that took long names its slowest part.
struct TickTimer {
    started: Instant,
    slowest: (&'static str, Duration),
}

/// A tick this long is logged (the node heartbeats apart from it, but its other
/// work waits: failovers, splits, intent resolution).
const SLOW_TICK: Duration = Duration::from_secs(2);

impl TickTimer {
    fn new() -> Self {
        TickTimer { started: Instant::now(), slowest: ("", Duration::ZERO) }
    }

    fn run(&mut self, part: &'static str, f: impl FnOnce()) {
        let t = Instant::now();
        f();
        let took = t.elapsed();
        if took > self.slowest.1 {
            self.slowest = (part, took);
        }
    }

    fn report(&self) {
        let took = self.started.elapsed();
        if took >= SLOW_TICK {
            tracing::warn!(
                took_ms = took.as_millis() as u64,
                slowest = self.slowest.0,
                slowest_ms = self.slowest.1.as_millis() as u64,
                "a slow tick of the background loop"
            );
        }
    }
}

/// Whether `every` has passed since `last` (a periodic job of the tick is due);
/// if so, `last` becomes now.
fn due(last: &Mutex<Instant>, every: Duration) -> bool {
    let mut last = last.lock();
    let due = last.elapsed() >= every;
    if due {
        *last = Instant::now();
    }
    due
}
