//! The client: connections, routing, autocommit operations.

use crate::conn::Conn;
use crate::error::{ClientError, Result};
use crate::txn::Txn;
use parking_lot::Mutex;
use pinax_common::TabletId;
use pinax_common::{ErrorCode, HybridClock, HybridTime, TxnId};
use pinax_proto::{
    LiveWrite, NodeStatus, ReadPoint, Request, RequestEnvelope, Response, Row, RpcError, ScanResult, ScanSpec, Sharding, TableInfo, TableOptions, TabletInfo,
    WriteOp,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How long a TCP connect may take. Nodes are expected on one network: a
    /// node that does not answer a SYN within this is taken as unreachable (see
    /// [`UNREACHABLE_FOR`]) and the request tries another replica.
    pub connect_timeout: Duration,
    /// Retries after `TabletNotFound` (stale locations).
    pub max_location_retries: u32,
    /// How often open transactions are heartbeated (must be well under the node's
    /// transaction timeout).
    pub heartbeat_interval: Duration,
    /// How long a request to a tablet keeps looking for its leader (through
    /// NotLeader answers and, for replicated tablets, unreachable replicas): covers
    /// an election after a leader failed.
    pub leader_wait: Duration,
    /// The node on this machine: its address, and the Unix socket it also listens
    /// on. Connections to that address use the socket (cheaper than loopback TCP),
    /// or TCP when the socket does not answer.
    pub local_socket: Option<(String, std::path::PathBuf)>,
    /// TLS for connections over TCP (a cluster running with certificates; see
    /// `pinax_proto::tls`). None: plaintext (an `--insecure` cluster).
    pub tls: Option<Arc<pinax_proto::tls::TlsConfig>>,
    /// Asked between the requests of a scan (which then visit at most
    /// `SCAN_REQUEST_KEYS` keys each): true stops the scan with
    /// `ClientError::Interrupted` (a canceled SQL statement).
    pub interrupted: Option<fn() -> bool>,
    /// Requests carry the seed node's SQL lease (`RequestEnvelope::fence`, asked
    /// for with `Request::SqlLease`): set by a SQL node's backends, whose
    /// requests must stop when their node lost contact with the master.
    pub fenced: bool,
}

/// How many times one tablet request asks the master where the tablet is after
/// every replica it knew denied having it.
const MAX_LOCATES: u32 = 5;

/// How long a node this client could not connect to is avoided: NotLeader hints
/// naming it are not followed and the tablets' other replicas are tried first (a
/// partitioned leader's followers name it until they elect anew; following them
/// back cost a connect timeout each).
pub const UNREACHABLE_FOR: Duration = Duration::from_secs(2);

/// Keys one scan request visits at most when the client can be interrupted
/// (about 10-50 ms of a tablet's time).
pub const SCAN_REQUEST_KEYS: u64 = 50_000;

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(2),
            max_location_retries: 3,
            heartbeat_interval: Duration::from_secs(1),
            leader_wait: Duration::from_secs(15),
            local_socket: None,
            tls: None,
            interrupted: None,
            fenced: false,
        }
    }
}

/// What [`Client::aggregate_at`] computed.
#[derive(Debug, Default)]
pub struct Aggregated {
    /// The tablets' partials, merged: one per requested aggregate.
    pub partials: Vec<pinax_proto::AggValue>,
    /// The rows the tablets could not decide or fold.
    pub undecided: Vec<Row>,
    /// How many rows the tablets folded.
    pub folded: u64,
    /// With `ScanSpec::group_by`: the partials per group, merged (instead of
    /// `partials`), in no particular order.
    pub groups: Vec<pinax_proto::AggGroup>,
}

pub(crate) struct Inner {
    pub(crate) seed: String,
    opts: ClientOptions,
    pool: Mutex<HashMap<String, Vec<Conn>>>,
    clock: HybridClock,
    tables: Mutex<HashMap<String, Arc<TableInfo>>>,
    /// Tablet leaders learnt from NotLeader answers (over the catalog's `leader`).
    leaders: Mutex<HashMap<TabletId, String>>,
    /// Nodes a connect failed to lately, and until when they are avoided.
    unreachable: Mutex<HashMap<String, Instant>>,
    /// Open transactions with a status record: heartbeated in the background.
    pub(crate) active_txns: Mutex<HashMap<TxnId, String>>,
    heartbeat_started: AtomicBool,
    /// The seed node's id: transaction ids start with it (see `Txn::new`).
    pub(crate) seed_node_id: std::sync::atomic::AtomicU64,
    /// What the latest answer said of uncertainty windows ([`Client::reads_uncertain`]).
    pub(crate) uncertain: AtomicBool,
    /// With `ClientOptions::fenced`: the seed node's SQL lease as last heard.
    fence: Mutex<Fence>,
}

/// A SQL lease as a client last heard it.
#[derive(Default)]
struct Fence {
    /// Its end (hybrid time's physical microseconds).
    until: u64,
    /// When the client last asked.
    asked: Option<Instant>,
}

/// A client asks its node for the lease again once it ends within this.
const FENCE_RENEW_AHEAD: Duration = Duration::from_secs(3);

/// How often a client without a lease asks for it at most.
const FENCE_ASK_EVERY: Duration = Duration::from_millis(100);

/// How long a request waits for its node's SQL lease before it goes with the
/// lapsed one (and is refused).
const FENCE_WAIT: Duration = Duration::from_secs(2);

/// A handle to a cluster. Cheap to clone; clones share connections and caches.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

/// A fresh write request id (never 0).
pub(crate) fn new_request_id() -> u128 {
    rand::random::<u128>() | 1
}

fn unexpected(r: Response) -> ClientError {
    ClientError::Protocol(format!("unexpected response {r:?}"))
}

impl Client {
    /// Connect to the node at `addr` (`host:port`) and check it answers.
    pub fn connect(addr: &str) -> Result<Client> {
        Self::connect_with(addr, ClientOptions::default())
    }

    pub fn connect_with(addr: &str, opts: ClientOptions) -> Result<Client> {
        let c = Client {
            inner: Arc::new(Inner {
                seed: addr.to_string(),
                opts,
                pool: Mutex::new(HashMap::new()),
                clock: HybridClock::system(),
                tables: Mutex::new(HashMap::new()),
                leaders: Mutex::new(HashMap::new()),
                unreachable: Mutex::new(HashMap::new()),
                active_txns: Mutex::new(HashMap::new()),
                heartbeat_started: AtomicBool::new(false),
                seed_node_id: std::sync::atomic::AtomicU64::new(0),
                uncertain: AtomicBool::new(true),
                fence: Mutex::new(Fence::default()),
            }),
        };
        match c.call(Request::Ping)? {
            Response::Pong { node_id } => {
                c.inner.seed_node_id.store(node_id, Ordering::Relaxed);
                Ok(c)
            }
            r => Err(unexpected(r)),
        }
    }

    /// Id of the node the client connected to (its seed).
    pub fn node_id(&self) -> u64 {
        self.inner.seed_node_id.load(Ordering::Relaxed)
    }

    /// Whether the latest answer said reads use a clock-uncertainty window (so a
    /// read may need a restart); true until an answer says otherwise.
    pub fn reads_uncertain(&self) -> bool {
        self.inner.uncertain.load(Ordering::Relaxed)
    }

    /// The client's hybrid clock (advanced by every response).
    pub fn now(&self) -> HybridTime {
        self.inner.clock.now()
    }

    /// Send `req` to the seed node.
    pub fn call(&self, req: Request) -> Result<Response> {
        let seed = self.inner.seed.clone();
        self.call_at(&seed, req)
    }

    /// Send `req` to the node at `addr`.
    pub fn call_at(&self, addr: &str, req: Request) -> Result<Response> {
        self.call_at_returning(addr, req).0
    }

    /// [`Client::call_at`], handing the request back (to retry it without a copy).
    pub fn call_at_returning(&self, addr: &str, req: Request) -> (Result<Response>, Request) {
        let mut conn = loop {
            let pooled = self.inner.pool.lock().get_mut(addr).and_then(|v| v.pop());
            match pooled {
                Some(c) if c.is_broken() => continue, // the node went away since: drop it
                Some(c) => break c,
                None => match Conn::connect(addr, self.inner.opts.connect_timeout, self.local_socket_for(addr), self.inner.opts.tls.as_deref()) {
                    Ok(c) => {
                        self.inner.unreachable.lock().remove(addr);
                        break c;
                    }
                    Err(e) => {
                        self.inner.unreachable.lock().insert(addr.to_string(), Instant::now() + UNREACHABLE_FOR);
                        return (Err(e), req);
                    }
                },
            }
        };
        let fence = if self.inner.opts.fenced && !matches!(req, Request::SqlLease) { self.fence() } else { 0 };
        let env = RequestEnvelope { ht: self.inner.clock.now(), fence, request: req };
        let resp = match conn.call(&env) {
            Ok(r) => r,
            Err(e) => {
                // A broken connection is dropped, not pooled; when the node is gone
                // (or restarted) its other pooled connections are broken too, so they
                // go as well and the next call connects afresh.
                if matches!(e, ClientError::Unavailable { .. }) {
                    self.inner.pool.lock().remove(addr);
                }
                return (Err(e), env.request);
            }
        };
        {
            let mut pool = self.inner.pool.lock();
            match pool.get_mut(addr) {
                Some(v) => v.push(conn),
                None => {
                    pool.insert(addr.to_string(), vec![conn]);
                }
            }
        }
        self.inner.clock.update(resp.ht);
        self.inner.uncertain.store(resp.uncertain, Ordering::Relaxed);
        if let Err(RpcError { code: ErrorCode::ReadRestart, restart_ht, .. }) = &resp.result {
            // A read to restart later: this client's next read time must be past
            // the value it met.
            self.inner.clock.update(*restart_ht);
        }
        (resp.result.map_err(ClientError::from), env.request)
    }

    /// The seed node's SQL lease end for a request now, asked for again when it
    /// ends soon. Without a valid lease, asks again for up to [`FENCE_WAIT`] (a
    /// node just started, a renewal late), then answers the lapsed one: never 0
    /// (which would be unfenced), 1 when there was none.
    fn fence(&self) -> u64 {
        let started = Instant::now();
        loop {
            let now = self.inner.clock.now().physical_micros();
            let ask = {
                let f = self.inner.fence.lock();
                if f.until > now + FENCE_RENEW_AHEAD.as_micros() as u64 {
                    return f.until;
                }
                f.asked.is_none_or(|t| t.elapsed() >= FENCE_ASK_EVERY)
            };
            if ask {
                let seed = self.inner.seed.clone();
                let heard = match self.call_at_returning(&seed, Request::SqlLease).0 {
                    Ok(Response::Lease(until)) => Some(until),
                    _ => None,
                };
                let mut f = self.inner.fence.lock();
                f.asked = Some(Instant::now());
                // (0: none now; a lease heard before still ends when it ends.)
                if let Some(until) = heard {
                    f.until = f.until.max(until);
                }
            }
            let until = self.inner.fence.lock().until;
            if until > now || started.elapsed() >= FENCE_WAIT {
                return until.max(1);
            }
            std::thread::sleep(FENCE_ASK_EVERY);
        }
    }

    /// Whether a connect to `addr` failed within [`UNREACHABLE_FOR`].
    fn avoided(&self, addr: &str) -> bool {
        let mut u = self.inner.unreachable.lock();
        match u.get(addr) {
            Some(until) if Instant::now() < *until => true,
            Some(_) => {
                u.remove(addr);
                false
            }
            None => false,
        }
    }

    /// The replica of `ti` after `addr` (in its replica list) that is not
    /// avoided, else simply the next one.
    fn next_replica(&self, ti: &TabletInfo, addr: &str) -> String {
        let n = ti.replicas.len();
        if n == 0 {
            return addr.to_string();
        }
        let at = ti.replicas.iter().position(|r| r == addr).map_or(0, |i| i + 1);
        let next = |k: usize| &ti.replicas[(at + k) % n];
        (0..n).map(next).find(|r| !self.avoided(r)).unwrap_or_else(|| next(0)).clone()
    }

    /// The Unix socket to reach the node at `addr` through, if it is the local one.
    fn local_socket_for(&self, addr: &str) -> Option<&std::path::Path> {
        self.inner.opts.local_socket.as_ref().filter(|(a, _)| a == addr).map(|(_, p)| p.as_path())
    }

    /// Whether a pooled connection to `addr` is a Unix-domain socket (tests).
    pub fn uses_local_socket(&self, addr: &str) -> bool {
        self.inner.pool.lock().get(addr).is_some_and(|v| v.iter().any(|c| c.is_local()))
    }

    /// The address this client sends tablet `ti`'s requests to.
    pub fn leader_of(&self, ti: &TabletInfo) -> String {
        self.inner.leaders.lock().get(&ti.id).cloned().unwrap_or_else(|| ti.leader.clone())
    }

    /// Send `req` to tablet `ti`'s leader.
    pub fn call_tablet(&self, ti: &TabletInfo, req: Request) -> Result<Response> {
        self.call_tablet_returning(ti, req).0
    }

    /// [`Client::call_tablet`], handing the request back. A `NotLeader` answer sends
    /// it to the leader it names at once; one naming none (an election is on), or an
    /// unreachable or unavailable (no quorum) replica of a replicated tablet, tries
    /// the next replica after a short backoff; for up to `leader_wait`. (A request
    /// whose connection broke after it was sent may have been applied; retrying it
    /// is safe for reads and intents, and for plain writes of whole rows.)
    pub fn call_tablet_returning(&self, ti: &TabletInfo, mut req: Request) -> (Result<Response>, Request) {
        // The tablet's locations: refreshed from the master when every replica
        // known denies having it (a replica moved meanwhile; see below).
        let mut ti = std::borrow::Cow::Borrowed(ti);
        let mut located = 0;
        let deadline = Instant::now() + self.inner.opts.leader_wait;
        let mut addr = self.leader_of(&ti);
        if ti.replicas.len() > 1 && self.avoided(&addr) {
            // Any other replica answers at once, with the leader it knows.
            addr = self.next_replica(&ti, &addr);
        }
        // Short steps: the wait is an election (about a second), and sleeping
        // past its end is pure unavailability (steps up to 500 ms made every
        // failover take 2.6 or 3.1 s).
        let mut backoff = Duration::from_millis(10);
        let mut moved = false;
        let mut not_found = 0;
        let mut followed_unknown = false;
        loop {
            let (res, back) = self.call_at_returning(&addr, req);
            req = back;
            // Whether to wait before following the hint (there is always a wait
            // before trying the next replica).
            let mut pause = false;
            let hint = match &res {
                // A hint outside the replicas this client knows may be a replica
                // added since (even the leader now: leaders move to even out the
                // load), or the old leader whose replica was just removed (its
                // followers name it until they elect anew). It is followed at once
                // the first time, after a backoff later: a removed replica answers
                // TabletNotFound, which ends in fresh locations.
                Err(ClientError::Rpc(e)) if e.code == ErrorCode::NotLeader => {
                    let hint = e.leader.clone().filter(|l| *l != addr && !self.avoided(l));
                    if hint.as_ref().is_some_and(|l| !ti.replicas.contains(l)) {
                        pause = std::mem::replace(&mut followed_unknown, true);
                    }
                    hint
                }
                Err(ClientError::Unavailable { .. }) if ti.replicas.len() > 1 => None,
                // A leader that could not reach a quorum in time (cut off from
                // the others, which may have elected a new leader). Sending the
                // request again is safe: a write carries its request id, which a
                // leader checks once its predecessors' entries are settled.
                Err(ClientError::Rpc(e)) if e.code == ErrorCode::Unavailable && ti.replicas.len() > 1 => None,
                Ok(_) => {
                    if moved {
                        self.inner.leaders.lock().insert(ti.id, addr);
                    }
                    return (res, req);
                }
                // Not (or no longer) on that node: a replica moved away
                // (rebalancing, re-replication) or one not created yet. The
                // other replicas are asked once each; if none has it, the caller
                // refreshes the table's locations. The leader learned before
                // must not send the next request back there.
                Err(ClientError::Rpc(e)) if e.code == ErrorCode::TabletNotFound => {
                    self.inner.leaders.lock().remove(&ti.id);
                    not_found += 1;
                    if not_found >= ti.replicas.len() {
                        // Every replica known denies it: ask the master where it
                        // is now (a move finished, or is finishing, while these
                        // locations were cached), a few times, until `leader_wait`.
                        // A tablet the master does not know (a dropped table) ends here.
                        if located >= MAX_LOCATES || Instant::now() >= deadline {
                            return (res, req);
                        }
                        located += 1;
                        match self.call(Request::LocateTablet { tablet: ti.id }) {
                            Ok(Response::Tablet(fresh)) => {
                                std::thread::sleep(backoff);
                                backoff = (backoff * 2).min(Duration::from_millis(100));
                                not_found = 0;
                                ti = std::borrow::Cow::Owned(fresh);
                                addr = self.leader_of(&ti);
                                continue;
                            }
                            // It split, and its replicas are gone: the caller goes
                            // where its keys are now, as for a tablet answering so.
                            Ok(Response::Tablets(_)) => {
                                let e = RpcError::new(ErrorCode::TabletSplit, format!("tablet {} split", ti.id.0));
                                return (Err(e.into()), req);
                            }
                            _ => return (res, req),
                        }
                    }
                    None
                }
                _ => return (res, req),
            };
            if Instant::now() >= deadline {
                return (res, req);
            }
            moved = true;
            if pause || hint.is_none() {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(100));
            }
            addr = match hint {
                Some(l) => l,
                None => self.next_replica(&ti, &addr),
            };
        }
    }

    pub fn status(&self) -> Result<NodeStatus> {
        match self.call(Request::Status)? {
            Response::Status(s) => Ok(s),
            r => Err(unexpected(r)),
        }
    }

    pub fn create_table(&self, name: &str, sharding: Sharding) -> Result<Arc<TableInfo>> {
        self.create_table_with(name, sharding, TableOptions::default())
    }

    /// [`Client::create_table`] with `options`.
    pub fn create_table_with(&self, name: &str, sharding: Sharding, options: TableOptions) -> Result<Arc<TableInfo>> {
        match self.call(Request::CreateTable { name: name.to_string(), sharding, if_not_exists: false, options })? {
            Response::Table(t) => {
                let t = Arc::new(t);
                self.inner.tables.lock().insert(name.to_string(), t.clone());
                Ok(t)
            }
            r => Err(unexpected(r)),
        }
    }

    /// Set the options of table `name` (`Request::SetTableOptions`).
    pub fn set_table_options(&self, name: &str, options: TableOptions) -> Result<Arc<TableInfo>> {
        match self.call(Request::SetTableOptions { name: name.to_string(), options })? {
            Response::Table(t) => {
                let t = Arc::new(t);
                self.inner.tables.lock().insert(name.to_string(), t.clone());
                Ok(t)
            }
            r => Err(unexpected(r)),
        }
    }

    pub fn drop_table(&self, name: &str, if_exists: bool) -> Result<()> {
        self.inner.tables.lock().remove(name);
        match self.call(Request::DropTable { name: name.to_string(), if_exists })? {
            Response::Dropped => Ok(()),
            r => Err(unexpected(r)),
        }
    }

    /// Locations of table `name` (cached).
    pub fn table(&self, name: &str) -> Result<Arc<TableInfo>> {
        if let Some(t) = self.inner.tables.lock().get(name) {
            return Ok(t.clone());
        }
        self.refresh_table(name)
    }

    pub fn refresh_table(&self, name: &str) -> Result<Arc<TableInfo>> {
        match self.call(Request::GetTable { name: name.to_string() })? {
            Response::Table(t) => {
                let t = Arc::new(t);
                self.inner.tables.lock().insert(name.to_string(), t.clone());
                Ok(t)
            }
            r => Err(unexpected(r)),
        }
    }

    /// Run `f` with the table's locations, refreshing them and retrying when a
    /// tablet is not where the cache says (moved, or split): at once `max_location_retries` times,
    /// then with a pause, until `leader_wait` has passed. (A replica moving while
    /// a node fails leaves the catalog behind the replicas for a moment: refreshing
    /// three times in a row failed statements with "not served by this node". A
    /// dropped table ends at the refresh, which does not find it.)
    pub(crate) fn with_locations<T>(&self, table: &str, mut f: impl FnMut(&TableInfo) -> Result<T>) -> Result<T> {
        let mut t = self.table(table)?;
        let mut tries = 0;
        let deadline = Instant::now() + self.inner.opts.leader_wait;
        let mut pause = Duration::from_millis(20);
        loop {
            match f(&t) {
                // (A tablet that split answers TabletSplit until the catalog lists its
                // halves, then, once dropped, TabletNotFound: both end in fresh locations.)
                Err(e)
                    if matches!(e.code(), ErrorCode::TabletNotFound | ErrorCode::TabletSplit)
                        && (tries < self.inner.opts.max_location_retries || Instant::now() < deadline) =>
                {
                    if tries >= self.inner.opts.max_location_retries {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(200));
                    }
                    tries += 1;
                    t = self.refresh_table(table)?;
                }
                other => return other,
            }
        }
    }

    /// Group `ops` by the tablet owning each key, keeping their order per
    /// tablet; a range lock ([`WriteOp::range_lock`]) goes to every tablet its
    /// range overlaps, on that tablet's range-lock key.
    pub(crate) fn group_by_tablet(t: &TableInfo, ops: Vec<WriteOp>) -> BTreeMap<usize, Vec<WriteOp>> {
        let mut groups: BTreeMap<usize, Vec<WriteOp>> = BTreeMap::new();
        for op in ops {
            match op.range_lock_end() {
                None => groups.entry(t.tablet_index_for(&op.key)).or_default().push(op),
                Some(_) => {
                    for (i, ti) in t.tablets.iter().enumerate() {
                        groups.entry(i).or_default().extend(WriteOp::for_partition(std::slice::from_ref(&op), &ti.partition));
                    }
                }
            }
        }
        groups.retain(|_, ops| !ops.is_empty());
        groups
    }

    /// Autocommit write. One tablet: the fast path (one RPC, no intents). Several:
    /// a distributed transaction. Returns the commit hybrid time.
    pub fn write(&self, table: &str, ops: Vec<WriteOp>) -> Result<HybridTime> {
        self.write_at(table, &ops, None)
    }

    /// [`Client::write`] of values computed from reads at `read_ht`: a commit to any
    /// of the keys after it is a conflict (40001), so no update is lost.
    /// Takes the ops by reference, so a caller may retry them (after a wait) without
    /// keeping a copy; the request holds the only one.
    pub fn write_at(&self, table: &str, ops: &[WriteOp], read_ht: Option<HybridTime>) -> Result<HybridTime> {
        if ops.is_empty() {
            return Ok(self.now());
        }
        let info = self.table(table)?;
        let first = info.tablet_index_for(&ops[0].key);
        if ops.iter().all(|op| info.tablet_index_for(&op.key) == first) {
            // One id for every send of this write: a replica that applied it
            // answers a resend without applying it again.
            let request = new_request_id();
            // The tablet split since: its halves may hold the keys apart, then
            // the write is a transaction after all (nothing was written).
            let mut spans = false;
            let fast = self.with_locations(table, |t| {
                let idx = t.tablet_index_for(&ops[0].key);
                if ops.iter().any(|op| t.tablet_index_for(&op.key) != idx) {
                    spans = true;
                    return Err(RpcError::new(ErrorCode::InvalidRequest, "the write's keys are on several tablets now").into());
                }
                let ti = &t.tablets[idx];
                match self.call_tablet(ti, Request::Write { tablet: ti.id, ops: ops.to_vec(), read_ht, txn: None, request })? {
                    Response::Written { ht } => Ok(ht),
                    r => Err(unexpected(r)),
                }
            });
            if !spans {
                return fast;
            }
        }
        let mut txn = self.begin();
        if let Some(ht) = read_ht {
            txn.set_read_ht(ht);
        }
        txn.write(table, ops.to_vec())?;
        Ok(txn.commit()?.unwrap_or_else(|| self.now()))
    }

    /// A single-row write that takes effect only if the row is live, committed at
    /// once (`Request::WriteIfLive`): `op` a delete or a patch, `full` whether the
    /// patch's row is the whole row as read at `read_ht`. Returns its time and what
    /// it did. One id for every send: a resend after it was applied answers
    /// `Applied` without writing again.
    pub fn write_if_live(&self, table: &str, op: &WriteOp, read_ht: Option<HybridTime>, full: bool) -> Result<(HybridTime, LiveWrite)> {
        let request = new_request_id();
        self.with_locations(table, |t| {
            let ti = &t.tablets[t.tablet_index_for(&op.key)];
            match self.call_tablet(ti, Request::WriteIfLive { tablet: ti.id, op: op.clone(), read_ht, full, request })? {
                Response::WrittenIfLive { ht, outcome } => Ok((ht, outcome)),
                r => Err(unexpected(r)),
            }
        })
    }

    /// Read the latest committed value of `key`.
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read_at(table, key, ReadPoint::LATEST).map(|(v, _)| v)
    }

    /// Point read at `at` (a transaction's read point or a plain read time; an
    /// invalid read time lets the node pick now). Returns the value and the read time used.
    pub fn read_at(&self, table: &str, key: &[u8], at: ReadPoint) -> Result<(Option<Vec<u8>>, HybridTime)> {
        self.with_locations(table, |t| {
            let ti = &t.tablets[t.tablet_index_for(key)];
            match self.call_tablet(ti, Request::Read { tablet: ti.id, key: key.to_vec(), at })? {
                Response::Value { value, read_ht } => Ok((value, read_ht)),
                r => Err(unexpected(r)),
            }
        })
    }

    /// Point reads of `keys` of `table` at one read point: one request per tablet
    /// holding some of them (`Request::ReadMany`), the values in the order of
    /// `keys`. A read point of "now" becomes the first tablet's read time for the
    /// others. Returns the read time used.
    pub fn read_many_at(&self, table: &str, keys: &[Vec<u8>], mut at: ReadPoint) -> Result<(Vec<Option<Vec<u8>>>, HybridTime)> {
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        if keys.is_empty() {
            return Ok((values, at.read_ht));
        }
        self.with_locations(table, |t| {
            let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for (i, key) in keys.iter().enumerate() {
                groups.entry(t.tablet_index_for(key)).or_default().push(i);
            }
            for (tablet, idx) in groups {
                let ti = &t.tablets[tablet];
                let req = Request::ReadMany { tablet: ti.id, keys: idx.iter().map(|&i| keys[i].clone()).collect(), at };
                match self.call_tablet(ti, req)? {
                    Response::Values { values: got, read_ht } if got.len() == idx.len() => {
                        at.read_ht = read_ht;
                        for (i, v) in idx.into_iter().zip(got) {
                            values[i] = v;
                        }
                    }
                    r => return Err(unexpected(r)),
                }
            }
            Ok(())
        })?;
        Ok((values, at.read_ht))
    }

    /// Scan rows of `table` in `[spec.start, spec.end)` at one consistent read time,
    /// tablet by tablet in partition order (reverse: backwards). `spec.limit` applies
    /// to the whole scan.
    pub fn scan(&self, table: &str, spec: ScanSpec) -> Result<Vec<Row>> {
        self.scan_at(table, spec, ReadPoint::LATEST).map(|(rows, _)| rows)
    }

    /// [`Client::scan`] at a given read point; returns the read time used, so that
    /// later pages of the same scan can read at the same time.
    pub fn scan_at(&self, table: &str, spec: ScanSpec, at: ReadPoint) -> Result<(Vec<Row>, HybridTime)> {
        let mut rows = Vec::new();
        let ht = self.scan_each(table, spec, at, |r| rows.extend(r.rows))?;
        Ok((rows, ht))
    }

    /// How many rows [`Client::scan_at`] would return (counted in the tablets, no
    /// rows shipped); `spec.limit` bounds the count. With a `spec.filter`: how many
    /// certainly match it, and the rows it cannot decide (shipped, not counted).
    pub fn count_at(&self, table: &str, mut spec: ScanSpec, at: ReadPoint) -> Result<((u64, Vec<Row>), HybridTime)> {
        spec.count_only = true;
        let (mut n, mut rows) = (0, Vec::new());
        let ht = self.scan_each(table, spec, at, |r| {
            n += r.count;
            rows.extend(r.rows)
        })?;
        Ok(((n, rows), ht))
    }

    /// `spec.aggregates` over the rows of [`Client::scan_at`] that match
    /// `spec.filter`, computed in the tablets: the merged partials, and the rows the
    /// tablets could not decide or fold (for the caller to check and fold).
    pub fn aggregate_at(&self, table: &str, mut spec: ScanSpec, at: ReadPoint) -> Result<(Aggregated, HybridTime)> {
        spec.count_only = true;
        spec.limit = 0;
        let funcs: Vec<pinax_proto::AggFunc> = spec.aggregates.iter().map(|a| a.func).collect();
        let mut out = Aggregated { partials: funcs.iter().map(|f| f.empty()).collect(), ..Default::default() };
        let mut groups: HashMap<pinax_proto::GroupKey, pinax_proto::GroupState> = HashMap::new();
        let ht = self.scan_each(table, spec, at, |r| {
            for ((f, a), p) in funcs.iter().zip(out.partials.iter_mut()).zip(r.aggregates) {
                f.merge(a, p);
            }
            for g in r.groups {
                let (_, acc) = groups.entry(g.key).or_insert_with(|| (g.shown, funcs.iter().map(|f| f.empty()).collect()));
                for ((f, a), p) in funcs.iter().zip(acc.iter_mut()).zip(g.values) {
                    f.merge(a, p);
                }
            }
            out.folded += r.count;
            out.undecided.extend(r.rows)
        })?;
        out.groups = groups.into_iter().map(|(key, (shown, values))| pinax_proto::AggGroup { key, shown, values }).collect();
        Ok((out, ht))
    }

    /// ANALYZE's sample: every `every`-th row of [`Client::scan_at`] (all when
    /// `every <= 1`), and how many rows it would return in all.
    pub fn sample_at(&self, table: &str, mut spec: ScanSpec, at: ReadPoint, every: u32) -> Result<(Vec<Row>, u64, HybridTime)> {
        spec.sample_every = every;
        let (mut rows, mut n) = (Vec::new(), 0);
        let ht = self.scan_each(table, spec, at, |r| {
            n += r.count;
            rows.extend(r.rows)
        })?;
        Ok((rows, n, ht))
    }

    /// The scan behind [`Client::scan_at`]: each tablet's result pages go to `f`.
    /// A tablet that split (or moved) under the scan is looked up again and the
    /// scan goes on from where it stood, on the tablets holding those keys now, at
    /// the same read time.
    fn scan_each(&self, table: &str, spec: ScanSpec, mut at: ReadPoint, mut f: impl FnMut(ScanResult)) -> Result<HybridTime> {
        if spec.end.as_ref().is_some_and(|e| e.as_slice() <= spec.start.as_slice()) {
            return Ok(at.read_ht);
        }
        let mut t = self.table(table)?;
        // Where the scan stands: `s.start` (forward) or `s.end` (reverse) moves on
        // with each page and each tablet done.
        let mut s = spec.clone();
        let interrupted = self.inner.opts.interrupted;
        if interrupted.is_some() && s.max_examined == 0 {
            s.max_examined = SCAN_REQUEST_KEYS;
        }
        let mut found = 0usize;
        let mut first = true;
        let (mut relocated, deadline) = (0u32, Instant::now() + self.inner.opts.leader_wait);
        loop {
            // The tablet holding the next key the scan reads (reverse: the largest
            // key below its end).
            let idx = match (&s.end, spec.reverse) {
                (_, false) => t.tablet_index_for(&s.start),
                (Some(e), true) => {
                    let i = t.tablet_index_for(e);
                    if t.tablets[i].partition.start.as_slice() == e.as_slice() && i > 0 {
                        i - 1
                    } else {
                        i
                    }
                }
                (None, true) => t.tablets.len() - 1,
            };
            let ti = t.tablets[idx].clone();
            let finished = loop {
                if !std::mem::take(&mut first) && interrupted.is_some_and(|stop| stop()) {
                    return Err(ClientError::Interrupted);
                }
                if spec.limit > 0 {
                    s.limit = spec.limit - found;
                }
                let (result, read_ht) = match self.call_tablet(&ti, Request::Scan { tablet: ti.id, spec: s.clone(), at }) {
                    Ok(Response::Rows { result, read_ht }) => (result, read_ht),
                    Ok(r) => return Err(unexpected(r)),
                    Err(e)
                        if matches!(e.code(), ErrorCode::TabletSplit | ErrorCode::TabletNotFound)
                            && (relocated < self.inner.opts.max_location_retries || Instant::now() < deadline) =>
                    {
                        // Split (or moved) since the locations were cached: the same
                        // position, on fresh locations (a dropped table ends there).
                        if relocated >= self.inner.opts.max_location_retries {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        relocated += 1;
                        t = self.refresh_table(table)?;
                        break false;
                    }
                    Err(e) => return Err(e),
                };
                at.read_ht = read_ht; // every later tablet reads at the same time
                found += result.count as usize;
                let mut result = result;
                let resume = result.resume.take();
                f(result);
                if spec.limit > 0 && found >= spec.limit {
                    return Ok(at.read_ht);
                }
                match resume {
                    Some(r) if spec.reverse => s.end = Some(r),
                    Some(r) => s.start = r,
                    None => break true,
                }
            };
            if !finished {
                continue;
            }
            // The next tablet, if the scan's range goes on past this one. (A forward
            // point read needs only the tablet holding its row.)
            if spec.reverse {
                let start = &ti.partition.start;
                if start.is_empty() || start.as_slice() <= spec.start.as_slice() {
                    return Ok(at.read_ht);
                }
                s.end = Some(start.clone());
            } else {
                match &ti.partition.end {
                    Some(end) if !spec.point && spec.end.as_ref().is_none_or(|e| end.as_slice() < e.as_slice()) => s.start = end.clone(),
                    _ => return Ok(at.read_ht),
                }
            }
        }
    }

    /// The tablets holding the keys of tablet `id`, which answered that it split
    /// (`TabletSplit`): where `LocateTablet` says they went. Until the master has
    /// swapped the tablet for its halves (a moment after the split) it still
    /// names the tablet itself: asked again, for up to `leader_wait`.
    pub fn covering(&self, id: TabletId) -> Result<Vec<TabletInfo>> {
        let deadline = Instant::now() + self.inner.opts.leader_wait;
        let mut pause = Duration::from_millis(10);
        loop {
            match self.call(Request::LocateTablet { tablet: id })? {
                Response::Tablets(tis) => return Ok(tis),
                Response::Tablet(_) if Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Response::Tablet(_) => {
                    return Err(RpcError::new(ErrorCode::TabletSplit, format!("tablet {} split; its halves are not listed yet", id.0)).into())
                }
                r => return Err(unexpected(r)),
            }
        }
    }

    /// Wait up to `timeout_ms` for transaction `txn` to end (commit, abort or
    /// expiry); `waiter`, the waiting transaction, takes part in deadlock detection
    /// (`ErrorCode::Deadlock` when the wait would close a cycle). Returns `None` if it
    /// is still running, else whether it committed.
    pub fn wait_txn(&self, txn: TxnId, waiter: Option<TxnId>, timeout_ms: u32) -> Result<Option<bool>> {
        // The seed node keeps the waiter's deadlock-detection edge and waits at
        // the leader of `txn`'s status tablet.
        match self.call(Request::WaitTxn { txn, waiter, timeout_ms })? {
            Response::Waited { ended, committed } => Ok(ended.then_some(committed)),
            r => Err(unexpected(r)),
        }
    }

    /// Start a transaction reading at the client's current hybrid time.
    pub fn begin(&self) -> Txn {
        Txn::new(self.clone())
    }

    pub(crate) fn register_txn(&self, id: TxnId, status_addr: String) {
        self.inner.active_txns.lock().insert(id, status_addr);
        if !self.inner.heartbeat_started.swap(true, Ordering::SeqCst) {
            let weak = Arc::downgrade(&self.inner);
            let interval = self.inner.opts.heartbeat_interval;
            // The thread must never take the process's signals (inside a PostgreSQL
            // backend they belong to the main thread): it starts with all blocked.
            use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow};
            let mut old = SigSet::empty();
            let blocked = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&SigSet::all()), Some(&mut old)).is_ok();
            let _ = std::thread::Builder::new().name("pinax-txn-heartbeat".into()).spawn(move || heartbeat_loop(weak, interval));
            if blocked {
                let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
            }
        }
    }

    pub(crate) fn unregister_txn(&self, id: TxnId) {
        self.inner.active_txns.lock().remove(&id);
    }
}

/// Keep open transactions alive until the client is dropped.
fn heartbeat_loop(inner: Weak<Inner>, interval: Duration) {
    loop {
        std::thread::sleep(interval);
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let client = Client { inner };
        let txns: Vec<(TxnId, String)> = client.inner.active_txns.lock().iter().map(|(k, v)| (*k, v.clone())).collect();
        for (txn, addr) in txns {
            if let Err(e) = client.call_at(&addr, Request::Heartbeat { txn }) {
                tracing::debug!(%txn, error = %e, "transaction heartbeat failed");
            }
        }
    }
}
