//! A replica's life and its Raft group: opening, creating (`CreateReplica`) and
//! dropping (`DropReplica`) replicas, membership and leadership changes
//! (`ChangeReplicas`, `TransferLeader`, `Campaign`), Raft messages (`Raft`), and
//! fault injection (`InjectFaults`, tests).

use crate::factory::EngineFactory;
use crate::node::split::ReplicaSplitter;
use crate::node::{catalog_err, err, tablet_engine_name, tablet_err, Node};
use crate::replica::{RaftCatalogLog, RaftReplicator};
use pinax_common::{ErrorCode, TabletId};
use pinax_master::{Catalog, ReplicaRecord};
use pinax_mvcc::gc::HistoryGcFilterFactory;
use pinax_proto::{Request, Response, RpcError};
use pinax_raft::{LogPlace, RaftGroup};
use pinax_tablet::{StatusTablet, Tablet};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl<F: EngineFactory> Node<F> {
    /// Whether this node has a replica of tablet `id` open.
    pub(in crate::node) fn has_replica(&self, id: TabletId) -> bool {
        self.tablets.read().contains_key(&id) || self.status_tablets.read().contains_key(&id) || (id == TabletId::MASTER && self.master.read().is_some())
    }

    /// Open this node's replica of a tablet: its engine, its Raft group (replaying
    /// the log past the applied id) and the tablet over them. The bootstrap replica
    /// makes the members the group's first configuration (again after a restart: a
    /// no-op once the group has one). Idempotent.
    pub(in crate::node) fn open_tablet(&self, r: &ReplicaRecord) -> Result<(), RpcError> {
        let id = r.tablet.id;
        if self.has_replica(id) {
            return Ok(());
        }
        // Status records and the catalog are no MVCC data: no history collection there.
        // The node's cutoff, the tablet's own deletions of every row, and a filter of
        // its own for its keys in the shared store (its compactions dispatch by key
        // range): with one filter and one list of deletions for every tablet, a
        // tablet's DELETE of every row dropped other tablets' versions older than
        // it (their live rows) once the cutoff passed it.
        let cutoff = self.cutoff.for_tablet();
        let gc = (!id.is_status() && id != TabletId::MASTER)
            .then(|| Arc::new(HistoryGcFilterFactory { cutoff: cutoff.clone() }) as Arc<dyn pinax_engine::CompactionFilterFactory>);
        let engine = Arc::new(self.factory.open(&tablet_engine_name(id), gc).map_err(|e| err(ErrorCode::Io, e.to_string()))?);
        self.engines.lock().insert(id, Arc::downgrade(&engine));
        let raft_err = |e: pinax_raft::GroupError| err(ErrorCode::Io, format!("tablet {}: {e}", id.0));
        let place = match self.factory.raft_log(&tablet_engine_name(id)).map_err(|e| err(ErrorCode::Io, e.to_string()))? {
            Some(log) => LogPlace::Shared { log, sync: self.cfg.sync },
            None => LogPlace::Engine,
        };
        // A data tablet's replica applies splits (`split.rs`).
        let splitter = (!id.is_status() && id != TabletId::MASTER).then(|| {
            Arc::new(ReplicaSplitter {
                factory: self.factory.clone(),
                local: self.local.clone(),
                record: r.clone(),
                engine: engine.clone(),
                tablet: std::sync::OnceLock::new(),
                opened_later: self.split_halves.clone(),
            })
        });
        let hook = splitter.clone().map(|s| s as Arc<dyn pinax_raft::SplitHook>);
        let group = RaftGroup::start_with(
            self.rt.handle(),
            id.0,
            self.cfg.node_id,
            engine.clone(),
            &place,
            self.clock.clone(),
            self.transport.clone(),
            self.cfg.raft_timing,
            hook,
        )
        .map_err(raft_err)?;
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
        let t = Arc::new(Tablet::open_replicated(id, engine, repl.clone(), self.clock.clone(), r.tablet.partition.clone(), cutoff).map_err(tablet_err)?);
        if let Some(s) = &splitter {
            let _ = s.tablet.set(Arc::downgrade(&t));
        }
        self.groups.write().insert(id, repl);
        self.tablets.write().insert(id, t);
        Ok(())
    }

    /// `CreateReplica`: remember the replica, then open it.
    ///
    /// A replica already here may be a stale one (moved away while this node was
    /// down, not dropped yet): added back, it could depose the leader (a term
    /// raised by campaigning alone). Or it may be one its group counts as a
    /// member although the catalog lost track of it (a membership change the
    /// master could not record): dropping that one would let the group count a
    /// replica that forgot what it acknowledged. So the group's leader is asked
    /// ([`Node::member_of_group`]): a member is kept (the request is done); a
    /// replica of a group that does not count this node is dropped, and the
    /// request fails as retryable (the next try creates a fresh one); when
    /// nobody can say, nothing is dropped and the request fails as retryable.
    pub(in crate::node) fn create_replica(&self, r: ReplicaRecord) -> Result<Response, RpcError> {
        let id = r.tablet.id;
        let _checks = self.replica_checks.lock();
        if self.destroying.lock().contains(&id) {
            return Err(err(ErrorCode::Unavailable, format!("an earlier replica of tablet {} is still being removed here; try again", id.0)));
        }
        if self.has_replica(id) && !r.bootstrap {
            let mut ti = r.tablet.clone();
            for (_, addr) in &r.members {
                if !ti.replicas.contains(addr) {
                    ti.replicas.push(addr.clone());
                }
            }
            match self.member_of_group(&ti) {
                Some(true) => {}
                Some(false) => {
                    tracing::info!(tablet_id = id.0, "dropping a stale replica (its group does not count it) before it is added again");
                    self.drop_replica(id)?;
                    return Err(err(ErrorCode::Unavailable, format!("a stale replica of tablet {} was here; dropped, try again", id.0)));
                }
                None => {
                    return Err(err(
                        ErrorCode::Unavailable,
                        format!("tablet {} has a replica here and its leader cannot say whether it counts it; try again", id.0),
                    ));
                }
            }
        }
        if !self.has_replica(id) {
            self.local.put_replica(&r).map_err(catalog_err)?;
            self.open_tablet(&r)?;
        }
        // Being added (the catalog names it only once the move is done): a full
        // node timeout before the orphan check looks at it.
        self.leaderless.lock().forget(r.tablet.id);
        Ok(Response::Done)
    }

    /// Whether tablet `ti`'s Raft group counts this node as a member (voter or
    /// learner), as its leader says after confirming its leadership
    /// (`GroupMembers`): `None` when no leader answered. The leader is looked for
    /// among `ti`'s replicas and the members this node's own replica knows of.
    pub(in crate::node) fn member_of_group(&self, ti: &pinax_proto::TabletInfo) -> Option<bool> {
        let mut ti = ti.clone();
        let mine = self.groups.read().get(&ti.id).cloned();
        let answer = match mine {
            Some(g) if g.group.leads_now() => self.group_members(ti.id),
            _ => {
                for addr in mine.map(|g| g.group.member_addrs()).unwrap_or_default() {
                    if !ti.replicas.contains(&addr) {
                        ti.replicas.push(addr);
                    }
                }
                self.call_leader(&ti, None, || Request::GroupMembers { tablet: ti.id }, |_| false)
            }
        };
        match answer {
            Ok(Response::Members(m)) => Some(m.iter().any(|(node, _)| *node == self.cfg.node_id)),
            _ => None,
        }
    }

    /// `TabletStats`, at a node holding a replica.
    pub(in crate::node) fn tablet_stats(&self, tablet: TabletId) -> Result<Response, RpcError> {
        let g = self.replica_group(tablet)?;
        let engine = self.engines.lock().get(&tablet).and_then(|w| w.upgrade());
        let approximate_bytes = engine.map_or(0, |e| pinax_engine::KvEngine::stats(&*e).approximate_bytes);
        Ok(Response::TabletStats { approximate_bytes, leader: g.group.leader(), voters: g.group.voters() })
    }

    /// `GroupMembers`, at the tablet's leader.
    pub(in crate::node) fn group_members(&self, tablet: TabletId) -> Result<Response, RpcError> {
        let g = self.replica_group(tablet)?;
        g.group.confirmed_members().map(Response::Members).map_err(|e| tablet_err(crate::replica::group_err(tablet, e)))
    }

    /// Close this node's replica of `id` (its tablet, status tablet or catalog, and
    /// its Raft group), keeping its data and record.
    pub(in crate::node) fn close_replica(&self, id: TabletId) {
        let removed = self.tablets.write().remove(&id);
        drop(removed);
        let removed = self.status_tablets.write().remove(&id);
        drop(removed);
        if id == TabletId::MASTER {
            let removed = self.master.write().take();
            drop(removed);
        }
        self.close_group(id);
    }

    /// `DropReplica`: close the replica and delete its data.
    pub(in crate::node) fn drop_replica(&self, id: TabletId) -> Result<Response, RpcError> {
        self.close_replica(id);
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

    pub(in crate::node) fn engine_closed(&self, id: TabletId) -> bool {
        self.engines.lock().get(&id).is_none_or(|w| w.strong_count() == 0)
    }

    /// Delete the data of dropped replicas whose engines have closed: the
    /// group's Raft log (its log store must be closed too), then the engine.
    pub(in crate::node) fn finish_destroying(&self) {
        let pending: Vec<TabletId> = self.destroying.lock().iter().copied().collect();
        for id in pending {
            if self.has_replica(id) || !self.engine_closed(id) {
                continue;
            }
            match self.remove_raft_log(id).and_then(|()| self.factory.destroy(&tablet_engine_name(id))) {
                Ok(()) => {
                    self.destroying.lock().remove(&id);
                    self.engines.lock().remove(&id);
                }
                Err(e) => tracing::warn!(tablet_id = id.0, error = %e, "could not remove tablet data; retrying"),
            }
        }
    }

    /// Remove tablet `id`'s group from the shared Raft logs (fails while its log
    /// store is still open).
    fn remove_raft_log(&self, id: TabletId) -> pinax_engine::Result<()> {
        for log in self.factory.raft_logs()? {
            log.remove_group(id.0).map_err(|e| pinax_engine::Error::Io(e.to_string()))?;
        }
        Ok(())
    }

    /// Free the shared Raft logs' files no group needs; ask the groups whose old
    /// entries keep files from being freed to purge their logs (a snapshot).
    pub(in crate::node) fn purge_raft_logs(&self) {
        let logs = match self.factory.raft_logs() {
            Ok(logs) => logs,
            Err(e) => {
                tracing::warn!(error = %e, "could not open the Raft logs to purge them");
                return;
            }
        };
        for log in logs {
            match log.purge_expired_files() {
                Ok(groups) => {
                    for g in groups {
                        let repl = self.groups.read().get(&TabletId(g)).cloned();
                        if let Some(repl) = repl {
                            repl.group.request_snapshot();
                        }
                    }
                }
                Err(e) => tracing::warn!(dir = %log.dir().display(), error = %e, "could not purge the Raft log"),
            }
        }
    }

    pub(in crate::node) fn close_group(&self, id: TabletId) {
        let g = self.groups.write().remove(&id);
        if let Some(g) = g {
            g.group.shutdown();
        }
    }

    /// This node's replica (Raft group) of `tablet`.
    fn replica_group(&self, tablet: TabletId) -> Result<Arc<RaftReplicator>, RpcError> {
        let g = self.groups.read().get(&tablet).cloned();
        g.ok_or_else(|| err(ErrorCode::TabletNotFound, format!("tablet {} has no replica on this node", tablet.0)))
    }

    /// `InjectFaults` (tests; refused unless the node was started with it).
    pub(in crate::node) fn inject_faults(&self, unreachable: Vec<String>) -> Result<Response, RpcError> {
        if !self.cfg.fault_injection {
            return Err(err(ErrorCode::InvalidRequest, "fault injection is off (start the node with --fault-injection)"));
        }
        tracing::warn!(?unreachable, "fault injection: these nodes are unreachable from here");
        self.transport.set_unreachable(unreachable);
        Ok(Response::Done)
    }

    /// `StallTick` (tests; refused unless the node was started with fault injection).
    pub(in crate::node) fn stall_tick(&self, ms: u64) -> Result<Response, RpcError> {
        if !self.cfg.fault_injection {
            return Err(err(ErrorCode::InvalidRequest, "fault injection is off (start the node with --fault-injection)"));
        }
        self.stall_tick.store(ms, std::sync::atomic::Ordering::SeqCst);
        Ok(Response::Done)
    }

    /// `CrashAt` (tests; refused unless the node was started with fault injection).
    pub(in crate::node) fn crash_at(&self, step: Option<String>) -> Result<Response, RpcError> {
        if !self.cfg.fault_injection {
            return Err(err(ErrorCode::InvalidRequest, "fault injection is off (start the node with --fault-injection)"));
        }
        if let Some(s) = step.as_deref().filter(|s| !crate::node::crash::STEPS.contains(s)) {
            return Err(err(ErrorCode::InvalidRequest, format!("no crash point {s:?}; the steps are {:?}", crate::node::crash::STEPS)));
        }
        tracing::warn!(?step, "fault injection: this node crashes at this split step");
        crate::node::crash::set(step);
        Ok(Response::Done)
    }

    /// `ChangeReplicas`, at the tablet's leader.
    pub(in crate::node) fn change_replicas(&self, tablet: TabletId, add: (u64, String), remove: Option<u64>) -> Result<Response, RpcError> {
        let g = self.replica_group(tablet)?;
        g.group.replace_voter(add, remove, Duration::from_secs(60)).map(Response::Members).map_err(|e| tablet_err(crate::replica::group_err(tablet, e)))
    }

    /// `TransferLeader`, at the tablet's leader: hand over, then tell `to` to
    /// campaign.
    pub(in crate::node) fn transfer_leader(&self, tablet: TabletId, to: u64) -> Result<Response, RpcError> {
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

    /// `Campaign`.
    pub(in crate::node) fn campaign(&self, tablet: TabletId) -> Result<Response, RpcError> {
        let g = self.replica_group(tablet)?;
        g.group.campaign();
        Ok(Response::Done)
    }

    /// `Raft`: a message for this node's (node `target`'s) replica of `group`.
    pub(in crate::node) fn raft_message(&self, group: u64, target: u64, kind: u8, body: Vec<u8>) -> Result<Response, RpcError> {
        if target != self.cfg.node_id {
            return Err(err(ErrorCode::Unavailable, format!("node {target} is not at {}", self.cfg.rpc_addr)));
        }
        let kind = pinax_raft::network::MsgKind::from_u8(kind).ok_or_else(|| err(ErrorCode::InvalidRequest, format!("unknown raft message kind {kind}")))?;
        let g = self.replica_group(TabletId(group))?;
        g.group.serve(kind, &body).map(Response::Raft).map_err(|m| err(ErrorCode::InvalidRequest, format!("bad raft message: {m}")))
    }
}
