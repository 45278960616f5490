//! Resolving decided transactions' intents: the applier thread (commits), the
//! background work of status tablets led here (expiry, unresolved records, GC),
//! the periodic sweep of intents, and resolving on other nodes' leaders
//! (`ResolveTxn`). A participant that split is resolved on its halves (the
//! records keep naming it): where it split here from its split record,
//! elsewhere from the master's `LocateTablet` answer.

use super::status_routing::Location;
use super::{err, tablet_err, Node, Resolution};
use crate::factory::EngineFactory;
use pinax_common::{ErrorCode, HybridTime, TabletId, TxnId};
use pinax_mvcc::TxnStatus;
use pinax_proto::{Request, Response, RpcError};
use pinax_tablet::StatusTablet;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How long the sweep leaves a committed transaction to the applier.
const APPLIER_GRACE: Duration = Duration::from_secs(10);

impl<F: EngineFactory> Node<F> {
    /// Resolve `txn`'s intents on tablet `id` held by another node: ask its leader,
    /// following NotLeader answers (a few hops). A tablet that split (the
    /// master lists its halves) resolves on the tablets holding its keys now:
    /// its intents were copied to its halves when it split, and its
    /// transactions' records name the parent. Done only once all of them are.
    fn resolve_remote(&self, id: TabletId, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<(), RpcError> {
        let ti = match self.locate_or_split(id) {
            Ok(Location::Tablet(ti)) => ti,
            Ok(Location::Split(now)) => {
                let halves: Vec<TabletId> = now.iter().map(|ti| ti.id).filter(|h| *h != id).collect();
                if self.resolve_local(txn, commit_ht, &halves) {
                    return Ok(());
                }
                return Err(err(ErrorCode::Unavailable, format!("tablet {} split: not every tablet holding its keys resolved {txn}", id.0)));
            }
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
            Err(e) if e.code == ErrorCode::TabletSplit => {
                // Split since it was located: asked again once the master lists its halves.
                self.locations.lock().remove(&id);
                Err(e)
            }
            res => res.map(|_| ()),
        }
    }

    /// `ResolveTxn`: this node's leader replica of `tablet` applies or removes.
    pub(super) fn resolve_txn_here(&self, tablet: TabletId, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<Response, RpcError> {
        let t = self.get_tablet(tablet)?;
        let res = match commit_ht {
            Some(ht) => t.apply_intents(txn, ht),
            None => t.remove_intents(txn),
        };
        tracing::debug!(target: super::trace::TARGET, node = self.cfg.node_id, "resolved for another node tablet={} {txn} -> {res:?}", tablet.0);
        res.map(|_| Response::Done).map_err(tablet_err)
    }

    /// Committed transactions the applier has had for less than `APPLIER_GRACE`
    /// (older entries are forgotten: the sweeps take those over).
    fn applier_busy(&self) -> Vec<TxnId> {
        let mut applying = self.applying.lock();
        applying.retain(|_, since| since.elapsed() < APPLIER_GRACE);
        applying.keys().copied().collect()
    }

    /// Apply (`commit_ht = Some`) or remove the intents of `txn` on the local
    /// participants. True when every participant is done. A participant
    /// that split here resolves on its halves (here or on other nodes).
    pub(super) fn resolve_local(&self, txn: TxnId, commit_ht: Option<HybridTime>, participants: &[TabletId]) -> bool {
        let mut all = true;
        for p in participants {
            if let Some(split) = self.tablet(*p).and_then(|t| t.split_record().cloned()) {
                all &= self.resolve_local(txn, commit_ht, &[split.left, split.right]);
                continue;
            }
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
            tracing::debug!(target: super::trace::TARGET, node = self.cfg.node_id, "resolved here tablet={} {txn} commit_ht={commit_ht:?} -> {res:?}", p.0);
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

    /// Background work of a status tablet this node leads (nothing otherwise; a
    /// replica that knows no leader is skipped at once, not waited for).
    pub(super) fn tick_status_tablet(&self, st: &StatusTablet<F::Engine>) {
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
            // Tablets without intents first (most, on an idle node: no look at
            // their groups). Not `is_leader` alone: it would wait seconds for each
            // replica whose group has no leader, stalling the node's background loop.
            let txns = t.txns_maybe_with_intents();
            // (A tablet that split keeps its intents' old copies: its halves
            // hold and resolve them.)
            if txns.is_empty() || t.split_record().is_some() || !t.leads_now() || !t.is_leader() {
                continue;
            }
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
                tracing::debug!(target: super::trace::TARGET, node = self.cfg.node_id, "swept tablet={} {txn} -> {res:?}", t.id().0);
                if let Err(e) = res {
                    tracing::warn!(tablet_id = t.id().0, %txn, error = %e, "could not resolve intents");
                }
            }
        }
    }
}
