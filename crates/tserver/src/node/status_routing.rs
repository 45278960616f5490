//! Status-tablet routing: finding a transaction's status tablet (its home
//! node's, [`pinax_common::TabletId::status_of_node`]) and calling its leader,
//! here or on another node (`Forwarded`, following leader changes); serving
//! requests on status records at this node's replica; finding where tablets are
//! and calling their leaders. An unreachable record is an error, never "aborted".

use super::waits::MAX_WAIT;
use super::{err, tablet_err, Node, Resolution};
use crate::factory::EngineFactory;
use pinax_common::{ErrorCode, HybridTime, TabletId, TxnId};
use pinax_mvcc::TxnStatus;
use pinax_proto::{Request, Response, RpcError, TabletInfo};
use pinax_tablet::StatusTablet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a tablet is, as the master says ([`Node::locate_or_split`]).
pub(super) enum Location {
    /// The tablet, listed in its table.
    Tablet(TabletInfo),
    /// It split: the tablets holding its keys now, in key order.
    Split(Vec<TabletInfo>),
}

/// Decided remote outcomes kept at most (the cache is cleared when full).
const REMOTE_OUTCOMES_MAX: usize = 100_000;

/// How long a request on a status record follows its status tablet's leader
/// changes (an election takes 0.5-1 s) before failing as retryable.
const STATUS_FAILOVER_WAIT: Duration = Duration::from_secs(5);

impl<F: EngineFactory> Node<F> {
    /// `txn`'s home node: its client's node (whose status tablet keeps its record,
    /// and which keeps what it waits for).
    pub(super) fn home_of(&self, txn: TxnId) -> u64 {
        match txn.status_node() {
            0 => self.cfg.node_id,
            n => n,
        }
    }

    /// This node's replica of the status tablet keeping `txn`'s record, if any.
    pub(super) fn local_status_of(&self, txn: TxnId) -> Option<Arc<StatusTablet<F::Engine>>> {
        self.status_tablets.read().get(&TabletId::status_of_node(self.home_of(txn))).cloned()
    }

    /// The status of any transaction, from the leader of its status tablet (here
    /// or elsewhere; decided outcomes learnt from other nodes are cached). An
    /// unreachable record is an error, never "aborted".
    pub(super) fn txn_status(&self, txn: TxnId, read_ht: HybridTime) -> Result<TxnStatus, RpcError> {
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
    pub(super) fn on_status_tablet(&self, txn: TxnId, req: Request, forward: bool) -> Result<Response, RpcError> {
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
            Request::TxnStatus { txn, read_ht } => {
                let res = st.status(txn, read_ht);
                if matches!(res, Ok(TxnStatus::Aborted)) && super::trace::enabled() {
                    let known = st.record(txn).is_some();
                    tracing::debug!(target: super::trace::TARGET, node = self.cfg.node_id, "TxnStatus {txn} -> Aborted (record known: {known})");
                }
                res.map(Response::TxnStatus).map_err(tablet_err)
            }
            Request::WaitTxn { txn, timeout_ms, .. } => {
                let ended = self.wait_local(st, txn, Duration::from_millis(timeout_ms as u64).min(MAX_WAIT))?;
                Ok(Response::Waited { ended: ended.is_some(), committed: ended == Some(true) })
            }
            other => Err(err(ErrorCode::InvalidRequest, format!("not a request on a transaction status record: {other:?}"))),
        }
    }

    /// Where tablet `id` is (cached; from the master). A tablet that split
    /// fails with `TabletSplit` ([`Node::locate_or_split`] says where its keys are).
    pub(super) fn locate(&self, id: TabletId) -> Result<TabletInfo, RpcError> {
        match self.locate_or_split(id)? {
            Location::Tablet(ti) => Ok(ti),
            Location::Split(_) => Err(err(ErrorCode::TabletSplit, format!("tablet {} split", id.0))),
        }
    }

    /// Where tablet `id` is (cached; from the master), or, if it split, the
    /// tablets holding its keys now (not cached: they may split again).
    pub(super) fn locate_or_split(&self, id: TabletId) -> Result<Location, RpcError> {
        if let Some(ti) = self.locations.lock().get(&id) {
            return Ok(Location::Tablet(ti.clone()));
        }
        match self.call_master(Request::LocateTablet { tablet: id })? {
            Response::Tablet(ti) => {
                self.locations.lock().insert(id, ti.clone());
                Ok(Location::Tablet(ti))
            }
            Response::Tablets(now) => Ok(Location::Split(now)),
            other => Err(err(ErrorCode::Internal, format!("unexpected answer to LocateTablet: {other:?}"))),
        }
    }

    /// Send `req()` to tablet `ti`'s leader: start at the catalog's leader, follow
    /// NotLeader answers, else try the next replica, never calling `skip` (a dead
    /// node); a few hops at most. An error for which `give_up` holds ends it.
    pub(super) fn call_leader(
        &self,
        ti: &TabletInfo,
        skip: Option<&str>,
        req: impl Fn() -> Request,
        give_up: impl Fn(&RpcError) -> bool,
    ) -> Result<Response, RpcError> {
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
    pub(super) fn catalog_lookup_fails(&self, id: TabletId) -> bool {
        self.locations.lock().remove(&id);
        matches!(self.call_master(Request::LocateTablet { tablet: id }), Err(e) if e.code == ErrorCode::TabletNotFound)
    }
}
