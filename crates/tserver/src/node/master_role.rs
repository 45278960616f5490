//! The master role: whether this node leads the master group, taking over when
//! it begins to, finding and calling the master's leader (`call_master`), node
//! registration (`RegisterNode`) and the heartbeats that carry it, and which
//! nodes are live.

use super::{catalog_err, err, Node};
use crate::factory::EngineFactory;
use crate::replica::RaftReplicator;
use parking_lot::Mutex;
use pinax_common::{ErrorCode, TabletId};
use pinax_master::placement;
use pinax_master::{single_tablet_table, Catalog, CatalogError, MASTER_TABLE_NAME};
use pinax_proto::{Request, Response, RpcError, TabletReport};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a catalog request follows the master's leader changes (an election
/// takes 0.5-1 s) before failing as retryable.
const MASTER_FAILOVER_WAIT: Duration = Duration::from_secs(5);

impl<F: EngineFactory> Node<F> {
    /// Whether this node leads the master group now (it serves catalog requests).
    pub fn is_master(&self) -> bool {
        self.master.read().is_some() && self.groups.read().get(&TabletId::MASTER).is_some_and(|g| g.group.leads_now())
    }

    /// The catalog, when this node has a master replica (its operations fail
    /// with NotLeader unless it leads).
    pub(super) fn catalog(&self) -> Result<Arc<Catalog<F::Engine>>, RpcError> {
        self.master.read().clone().ok_or_else(|| err(ErrorCode::NotLeader, format!("node {} has no replica of the master", self.cfg.node_id)))
    }

    /// Send a catalog request to the master: the leader of the master group,
    /// found through this node's replica of it, where the master was last found,
    /// the master replicas last learnt, or the node this one joined through;
    /// following NotLeader answers and leader changes for up to
    /// `MASTER_FAILOVER_WAIT`.
    pub(super) fn call_master(&self, req: Request) -> Result<Response, RpcError> {
        self.call_master_within(req, MASTER_FAILOVER_WAIT)
    }

    /// [`Node::call_master`] of a request whose answer may take up to `answer`
    /// (a DDL lock waiting for other nodes' writers), not the usual read timeout.
    pub(super) fn call_master_waiting(&self, req: Request, answer: Duration) -> Result<Response, RpcError> {
        self.call_master_answering(req, MASTER_FAILOVER_WAIT, Some(answer))
    }

    fn call_master_within(&self, req: Request, wait: Duration) -> Result<Response, RpcError> {
        self.call_master_answering(req, wait, None)
    }

    fn call_master_answering(&self, req: Request, wait: Duration, answer: Option<Duration>) -> Result<Response, RpcError> {
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
                let fwd = Request::Forwarded(Box::new(req.clone()));
                let res = if addr == self.cfg.rpc_addr { self.handle(fwd) } else { self.transport.request_within(&addr, fwd, answer) };
                match res {
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
    pub(super) fn not_master(&self) -> RpcError {
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
    pub(super) fn register_node(&self, node_id: u64, addr: String, leading: Vec<TabletId>, reports: Vec<TabletReport>) -> Result<Response, RpcError> {
        let catalog = self.catalog()?;
        // Replica lists and Raft memberships name a node by its address: a known
        // node may not come back at another one.
        if let Some(known) = self.directory.read().get(&node_id).filter(|a| node_id != 0 && **a != addr) {
            tracing::warn!(node_id, %known, %addr, "refused a node's registration at a new address");
            return Err(err(ErrorCode::InvalidRequest, format!("node {node_id} is registered at {known}, not {addr}: a node's address cannot change")));
        }
        let node_id = if node_id == 0 { catalog.allocate_node_id().map_err(catalog_err)? } else { node_id };
        self.leaders.lock().insert(node_id, (leading, self.now()));
        self.record_tablet_reports(reports);
        catalog.put_node(node_id, &addr).map_err(catalog_err)?;
        let mut nodes = self.nodes.lock();
        // A node that moved to another address is one node, at its new address.
        nodes.retain(|id, (a, _)| *id == node_id || *a != addr);
        let new = nodes.insert(node_id, (addr.clone(), self.now())).is_none();
        drop(nodes);
        if new {
            // Not asked to hold the DDL locks being spread now: fenced for them.
            self.fence_new_node(node_id)?;
        }
        let mut dir = self.directory.write();
        dir.insert(node_id, addr);
        let nodes = dir.iter().map(|(id, a)| (*id, a.clone())).collect();
        drop(dir);
        let lease = self.grant_sql_lease(node_id)?;
        Ok(Response::Registered { node_id, nodes, masters: self.master_addrs(), lease })
    }

    /// Master, when it begins to lead: every registered node counts as heard from
    /// now (the previous leader knew when they were; a node gone for good is
    /// found gone a node timeout later, as it would have been). Splits under
    /// way are resumed by the placement passes (`drive_splits`).
    pub(super) fn take_over_as_master(&self) {
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
        // Every one of them, also those a previous stint as master heard from
        // long ago: keeping those times left live nodes out of `live_nodes` (a
        // DDL statement then did not wait for them, nor name them as behind).
        for (id, addr) in &known {
            nodes.insert(*id, (addr.clone(), now));
        }
        drop(nodes);
        self.grant_all_sql_leases(known.keys().copied());
        self.directory.write().extend(known);
        self.led_master.store(true, Ordering::SeqCst);
        tracing::info!(node_id = self.cfg.node_id, "leading the master");
        // Splits an earlier master left under way: the placement pass resumes
        // them (`master_split.rs`).
        if let Ok(splits) = self.catalog().and_then(|c| c.splits().map_err(catalog_err)) {
            let pending = splits.iter().filter(|r| !matches!(r.state, pinax_master::SplitState::Retired { .. })).count();
            if pending > 0 {
                tracing::info!(pending, "resuming tablet splits under way");
            }
        }
    }

    /// Master: the master group's own table exists (placing and moving its
    /// replicas like any tablet's).
    pub(super) fn ensure_master_table(&self) -> Result<(), RpcError> {
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
    pub(super) fn live_nodes(&self) -> Vec<(u64, String)> {
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
    pub(super) fn heartbeat_master(&self) {
        {
            let mut last = self.last_register.lock();
            if last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
                return;
            }
            *last = Some(Instant::now());
        }
        let reports = match due_report(&self.last_size_report, self.cfg.size_report_interval) {
            Some(all) => self.led_tablet_reports(all),
            None => Vec::new(),
        };
        if self.is_master() {
            self.record_tablet_reports(reports);
            self.renew_own_sql_lease();
            return;
        }
        let leading = self.leading();
        let sent = self.clock.now().physical_micros();
        let req = Request::RegisterNode { node_id: self.cfg.node_id, addr: self.cfg.rpc_addr.clone(), leading, reports };
        match self.call_master_within(req, Duration::ZERO) {
            Ok(Response::Registered { nodes, masters, lease, .. }) => {
                match lease {
                    Some(ddl_seq) => self.renew_sql_lease(sent, ddl_seq),
                    None => tracing::info!("no SQL lease from the master: a DDL statement went on without this node"),
                }
                self.directory.write().extend(nodes);
                if !masters.is_empty() && *self.masters.read() != masters {
                    if let Err(e) = self.local.set_masters(&masters) {
                        tracing::warn!(error = %e, "recording where the masters are");
                    }
                    *self.masters.write() = masters;
                }
            }
            Ok(other) => tracing::warn!(?other, "unexpected answer to RegisterNode"),
            Err(e) if e.code == ErrorCode::InvalidRequest => tracing::error!(error = %e, "the master refuses this node"),
            Err(e) => tracing::debug!(error = %e, "registering with the master"),
        }
    }

    /// The approximate size on disk of each tablet this node leads now
    /// (flushed data; `KvEngine::stats`) and the requests it served a second
    /// since it was last reported: all of them, or only those whose group is
    /// not quiesced and those not reported yet (idle tablets change little;
    /// thousands of them are measured only in the rarer full reports; a split's
    /// new halves, idle after a load, are measured at once, so that they split
    /// again within a report rather than a full report's interval).
    fn led_tablet_reports(&self, all: bool) -> Vec<TabletReport> {
        let reported: std::collections::HashSet<TabletId> =
            if all { Default::default() } else { self.last_size_report.lock().counts.keys().copied().collect() };
        let led = self.led_user_tablets(|g| all || !g.group.is_quiesced() || !reported.contains(&g.tablet_id));
        let now = Instant::now();
        let counted: Vec<(TabletId, u64)> = led.into_iter().filter_map(|id| self.tablet(id).map(|t| (id, t.requests()))).collect();
        let out: Vec<(TabletReport, u64)> = {
            let engines = self.engines.lock();
            counted
                .into_iter()
                .filter_map(|(id, count)| {
                    let bytes = pinax_engine::KvEngine::stats(&*engines.get(&id)?.upgrade()?).approximate_bytes;
                    Some((TabletReport { tablet: id, bytes, requests_per_sec: 0 }, count))
                })
                .collect()
        };
        let mut reports = self.last_size_report.lock();
        let counts = &mut reports.counts;
        // (Tablets no longer led here are forgotten at the next full report.)
        if all {
            counts.retain(|id, _| out.iter().any(|(r, _)| r.tablet == *id));
        }
        out.into_iter()
            .map(|(mut r, count)| {
                if let Some((before, at)) = counts.insert(r.tablet, (count, now)) {
                    let secs = now.duration_since(at).as_secs_f64();
                    if secs > 0.0 && count >= before {
                        r.requests_per_sec = ((count - before) as f64 / secs) as u64;
                    }
                }
                r
            })
            .collect()
    }

    /// Master: tablet sizes and loads a node reported (its leader's figures
    /// win: only leaders report); a tablet hot in this report
    /// ([`pinax_master::splitting::is_hot`]) counts one more hot report in a
    /// row, else none.
    fn record_tablet_reports(&self, reports: Vec<TabletReport>) {
        if reports.is_empty() {
            return;
        }
        let now = self.now();
        let node_rate: u64 = reports.iter().map(|r| r.requests_per_sec).sum();
        let rules = self.cfg.auto_split.unwrap_or_default();
        let mut seen = self.tablet_reports.lock();
        for r in reports {
            let hot = pinax_master::splitting::is_hot(&rules, r.requests_per_sec, node_rate);
            let e = seen.entry(r.tablet).or_default();
            e.hot = if hot { e.hot.saturating_add(1) } else { 0 };
            e.bytes = r.bytes;
            e.rate = r.requests_per_sec;
            e.at = now;
        }
    }

    /// The tablets (not status tablets, not the master's) whose group this node
    /// leads now.
    pub(super) fn leading(&self) -> Vec<TabletId> {
        self.led_user_tablets(|_| true)
    }

    /// [`Node::leading`]'s tablets whose group also passes `keep`.
    fn led_user_tablets(&self, keep: impl Fn(&RaftReplicator) -> bool) -> Vec<TabletId> {
        self.groups.read().iter().filter(|(id, g)| !id.is_status() && **id != TabletId::MASTER && g.group.leads_now() && keep(g)).map(|(id, _)| *id).collect()
    }

    /// The address of node `id`, asking the master (by registering) if unknown.
    pub(super) fn node_addr(&self, id: u64) -> Result<String, RpcError> {
        if let Some(a) = self.directory.read().get(&id) {
            return Ok(a.clone());
        }
        *self.last_register.lock() = None;
        self.heartbeat_master();
        self.directory.read().get(&id).cloned().ok_or_else(|| err(ErrorCode::Unavailable, format!("node {id} is unknown to this node")))
    }
}

/// When this node last reported its tablets' sizes: any, and all of them;
/// each reported tablet's request count then.
#[derive(Default)]
pub(super) struct SizeReports {
    last: Option<Instant>,
    last_full: Option<Instant>,
    counts: HashMap<TabletId, (u64, Instant)>,
}

/// A full size report (every tablet led) comes once per this many reports.
pub(super) const FULL_SIZE_REPORT_EVERY: u32 = 6;

/// Whether a size report is due (`every` since the last one, or none yet):
/// None if not, else whether it is a full one. The report is taken as made.
fn due_report(reports: &Mutex<SizeReports>, every: Duration) -> Option<bool> {
    let mut r = reports.lock();
    if r.last.is_some_and(|t| t.elapsed() < every) {
        return None;
    }
    let now = Instant::now();
    r.last = Some(now);
    let full = r.last_full.is_none_or(|t| t.elapsed() >= every * FULL_SIZE_REPORT_EVERY);
    if full {
        r.last_full = Some(now);
    }
    Some(full)
}
