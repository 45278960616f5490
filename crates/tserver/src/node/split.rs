//! Splitting a tablet replica (`SplitReplica`, at the tablet's leader) and
//! applying a split on every replica ([`ReplicaSplitter`], the Raft group's
//! [`SplitHook`]).
//!
//! The leader holds the tablet's writes off (its drained write lock) while one
//! Raft entry carries the split: every replica applies it at that index, after
//! flushing what came before ([`pinax_raft::StateMachine`]), in one durable
//! write that makes the two halves' engines where the parent's is (views of
//! its rows: nothing copied, [`EngineFactory::split_engines`]), with their
//! intents and metadata ([`pinax_tablet::split::half_states`]), their groups'
//! seeds (the parent's members) and the parent's record of the split (which
//! retires it: it refuses every request from then on, `TabletSplit`). The
//! halves' replica records follow (synced); a crash between the two is
//! repaired when the node opens ([`Node::open`] derives them from the
//! parent's record). The halves are opened outside the apply (a group's
//! runtime cannot start another group's): by the leader's handler, and on
//! followers by the node's tick.
//!
//! The master asks for the split and, once it is applied, swaps the parent
//! for its halves in the catalog and drops the parent's replicas
//! (`master_split.rs`). Not here yet (see docs/plans/tablet-splitting.md):
//! clients following a split.

use crate::factory::{CfEntry, EngineFactory};
use crate::node::{catalog_err, err, tablet_engine_name, tablet_err, Node};
use parking_lot::Mutex;
use pinax_codec::keys;
use pinax_common::{ErrorCode, TabletId};
use pinax_engine::{Cf, KvEngine};
use pinax_master::{LocalRecords, ReplicaRecord};
use pinax_proto::{Response, RpcError, TabletInfo};
use pinax_raft::{LogId, SplitHook, StateMachine};
use pinax_tablet::split::{can_split_at, half_states, split_key_of_stored, SplitRecord};
use pinax_tablet::Tablet;
use std::sync::{Arc, OnceLock, Weak};

/// The replica records of the halves of the replica recorded as `parent`
/// split as `split` says: each half's partition, the parent's replicas and
/// members (its group starts from the parent's membership, not from these).
pub(crate) fn half_records(parent: &ReplicaRecord, split: &SplitRecord) -> [ReplicaRecord; 2] {
    let p = &parent.tablet.partition;
    let half = |id: TabletId, start: Vec<u8>, end: Option<Vec<u8>>| ReplicaRecord {
        tablet: TabletInfo {
            id,
            partition: pinax_proto::Partition { start, end },
            leader: parent.tablet.leader.clone(),
            replicas: parent.tablet.replicas.clone(),
        },
        members: parent.members.clone(),
        bootstrap: false,
    };
    [half(split.left, p.start.clone(), Some(split.at.clone())), half(split.right, split.at.clone(), p.end.clone())]
}

/// A tablet replica's [`SplitHook`] (see the module docs).
pub(crate) struct ReplicaSplitter<F: EngineFactory> {
    pub(crate) factory: Arc<F>,
    pub(crate) local: Arc<LocalRecords<F::Engine>>,
    pub(crate) record: ReplicaRecord,
    pub(crate) engine: Arc<F::Engine>,
    /// The replica's tablet, once it is open (the group starts first).
    pub(crate) tablet: OnceLock<Weak<Tablet<F::Engine>>>,
    /// The node's queue of halves to open (by its tick, or the leader's handler).
    pub(crate) opened_later: Arc<Mutex<Vec<ReplicaRecord>>>,
}

impl<F: EngineFactory> SplitHook for ReplicaSplitter<F> {
    fn apply_split(&self, log_id: LogId, payload: &[u8], applied: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        let split = SplitRecord::decode(payload).map_err(|e| e.to_string())?;
        let parent = self.record.tablet.id;
        let (halves, seed) = {
            let snap = self.engine.snapshot();
            let halves = half_states(&snap, &self.record.tablet.partition, &split.at).map_err(|e| e.to_string())?;
            (halves, StateMachine::<F::Engine>::half_seed(&snap)?)
        };
        let entries: Vec<Vec<CfEntry>> = halves
            .iter()
            .map(|h| {
                let mut e: Vec<CfEntry> = h.intents.iter().map(|(k, v)| (Cf::Intents, k.clone(), v.clone())).collect();
                e.extend(h.meta.iter().chain(&seed).map(|(k, v)| (Cf::Meta, k.clone(), v.clone())));
                e
            })
            .collect();
        let mut parent_writes: Vec<CfEntry> = applied.iter().map(|(k, v)| (Cf::Meta, k.clone(), v.clone())).collect();
        let (k, v) = split.meta_entry();
        parent_writes.push((Cf::Meta, k, v));
        let (left, right) = (tablet_engine_name(split.left), tablet_engine_name(split.right));
        self.factory
            .split_engines(&tablet_engine_name(parent), &keys::escape(&split.at), [(&left, &entries[0]), (&right, &entries[1])], &parent_writes)
            .map_err(|e| e.to_string())?;
        super::crash::point("apply.written");
        if let Some(t) = self.tablet.get().and_then(Weak::upgrade) {
            t.retire(split.clone());
        }
        let records = half_records(&self.record, &split);
        for r in &records {
            self.local.put_replica(r).map_err(|e| e.to_string())?;
        }
        super::crash::point("apply.recorded");
        tracing::info!(tablet_id = parent.0, left = split.left.0, right = split.right.0, log_index = log_id.index, "tablet split");
        self.opened_later.lock().extend(records);
        Ok(())
    }
}

impl<F: EngineFactory> Node<F> {
    /// `SplitReplica`, at the tablet's leader (see the module docs).
    pub(in crate::node) fn split_replica(&self, tablet: TabletId, children: [TabletId; 2], at: Option<Vec<u8>>) -> Result<Response, RpcError> {
        let t = self.tablet(tablet).ok_or_else(|| err(ErrorCode::TabletNotFound, format!("tablet {} is not here", tablet.0)))?;
        let done = |t: &Tablet<F::Engine>, r: &SplitRecord| -> Result<Response, RpcError> {
            if [r.left, r.right] != children {
                return Err(err(ErrorCode::InvalidRequest, format!("tablet {} split into tablets {} and {} already", tablet.0, r.left.0, r.right.0)));
            }
            self.open_split_halves()?;
            super::crash::point("leader.answered");
            let parent = ReplicaRecord { tablet: self.tablet_info(t), members: Vec::new(), bootstrap: false };
            Ok(Response::SplitDone { at: r.at.clone(), children: half_records(&parent, r).map(|h| h.tablet).to_vec() })
        };
        if let Some(r) = t.split_record() {
            return done(&t, r);
        }
        if children[0] == children[1] || children.contains(&tablet) {
            return Err(err(ErrorCode::InvalidRequest, "a split needs two new tablet ids"));
        }
        let group = self.groups.read().get(&tablet).cloned().ok_or_else(|| err(ErrorCode::TabletNotFound, format!("tablet {} is not here", tablet.0)))?;
        if at.is_none() {
            // The middle key is found in the files: what the memtable holds
            // goes there first (also shortening the flush under the drain).
            pinax_engine::KvEngine::flush(t.engine())
                .map_err(|e| err(ErrorCode::Unavailable, format!("flushing tablet {} before its split: {e}", tablet.0)))?;
        }
        super::crash::point("leader.flushed");
        // (Split meanwhile by another request: the drain's lead() refuses, TabletSplit.)
        t.split_drained(|t| {
            let at = match &at {
                Some(at) => at.clone(),
                None => t
                    .engine()
                    .approximate_middle_key()
                    .and_then(|k| split_key_of_stored(t.partition(), &k))
                    .ok_or_else(|| pinax_tablet::Error::InvalidRequest(format!("tablet {} has too little data to split without a split key", tablet.0)))?,
            };
            if !can_split_at(t.partition(), &at) {
                return Err(pinax_tablet::Error::InvalidRequest(format!("split key {at:02x?} is not strictly inside tablet {}", tablet.0)));
            }
            let record = SplitRecord { at, left: children[0], right: children[1] };
            group.group.split_tablet(record.meta_entry().1).map_err(|e| crate::replica::group_err(tablet, e))?;
            super::crash::point("leader.proposed");
            Ok(record)
        })
        .map_err(tablet_err)?;
        let r = t.split_record().cloned().ok_or_else(|| err(ErrorCode::Internal, format!("tablet {} applied no split", tablet.0)))?;
        let answer = done(&t, &r)?;
        // The parent's leader stands first in its halves' elections: no wait
        // for an election timeout with their writes held up.
        for half in [r.left, r.right] {
            if let Some(g) = self.groups.read().get(&half) {
                g.group.elect_if_leaderless();
            }
        }
        Ok(answer)
    }

    /// This replica's tablet as the catalog would describe it (this node its leader).
    fn tablet_info(&self, t: &Tablet<F::Engine>) -> TabletInfo {
        let replicas = self.local.replicas().ok().and_then(|rs| rs.into_iter().find(|r| r.tablet.id == t.id())).map(|r| r.tablet.replicas).unwrap_or_default();
        TabletInfo { id: t.id(), partition: t.partition().clone(), leader: self.cfg.rpc_addr.clone(), replicas }
    }

    /// Open the halves of splits applied here (never inside the apply: see the
    /// module docs).
    pub(in crate::node) fn open_split_halves(&self) -> Result<(), RpcError> {
        let pending: Vec<ReplicaRecord> = std::mem::take(&mut *self.split_halves.lock());
        for (i, r) in pending.iter().enumerate() {
            if let Err(e) = self.open_tablet(r) {
                self.split_halves.lock().extend(pending[i..].iter().cloned());
                return Err(e);
            }
        }
        Ok(())
    }

    /// At opening: the replica records of the halves of `r`'s tablet if it
    /// split here and they are missing (a crash between the split's write and
    /// theirs), written now.
    pub(in crate::node) fn missing_half_records(&self, r: &ReplicaRecord, known: &[ReplicaRecord]) -> Result<Vec<ReplicaRecord>, RpcError> {
        let Some(split) = self.tablet(r.tablet.id).and_then(|t| t.split_record().cloned()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for h in half_records(r, &split) {
            if !known.iter().any(|k| k.tablet.id == h.tablet.id) {
                self.local.put_replica(&h).map_err(catalog_err)?;
                out.push(h);
            }
        }
        Ok(out)
    }
}
