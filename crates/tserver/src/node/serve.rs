//! The request dispatch: one match arm per [`Request`], each delegating to the
//! handler of its role (`handlers/`, `status_routing.rs`, `waits.rs`, ...), and
//! which requests are the master's or a status record's.

use super::waits::MAX_WAIT;
use super::{err, Node};
use crate::factory::EngineFactory;
use pinax_common::{ErrorCode, TxnId};
use pinax_master::ReplicaRecord;
use pinax_proto::{Request, Response, RpcError};
use std::time::Duration;

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
            | Request::SetTableOptions { .. }
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
    // (DDL locks: first at the origin's node, which keeps track of them;
    // splits: awaited longer.)
    matches!(req, master_request!() | Request::LockDdl { .. } | Request::UnlockDdl { .. } | Request::SplitTablet { .. })
}

/// How long a node waits for the master's answer to `SplitTablet` (the
/// parent's leader flushes and replicates the split first).
const SPLIT_TABLET_ANSWER: Duration = Duration::from_secs(60);

impl<F: EngineFactory> Node<F> {
    /// [`Node::handle`] without counting the request (parts of one request):
    /// one arm per request, each handled in `handlers/` or the file of its role.
    pub(super) fn serve(&self, req: Request) -> Result<Response, RpcError> {
        match req {
            Request::Ping => Ok(Response::Pong { node_id: self.cfg.node_id }),
            Request::Now => Ok(Response::Now(self.clock.now())),
            Request::Status => self.node_status(),
            // Here when this node leads the master (a leader change may cut in:
            // then at the new leader), else at the master's leader.
            req @ (master_request!()) => self.at_master(req),
            req @ Request::SplitTablet { .. } => self.at_master_answering(req, Some(SPLIT_TABLET_ANSWER)),
            Request::ApplyDdl { upto } => self.apply_ddl(upto),
            Request::LockDdl { lock } => self.lock_ddl(lock),
            Request::UnlockDdl { lock } => self.unlock_ddl(lock),
            Request::HoldDdlLock { lock } => self.hold_ddl_lock(lock),
            Request::ReleaseDdlLock { lock } => self.release_ddl_lock(lock),
            Request::DdlLockHeld { lock } => Ok(Response::Held(self.ddl_lock_held(lock))),
            Request::SqlLease => Ok(Response::Lease(self.sql_lease())),
            Request::SplitReplica { tablet, children, at } => self.split_replica(tablet, children, at),
            Request::DdlReady => Ok(Response::Ready(self.ddl.get().is_none_or(|a| a.caught_up()))),
            Request::CreateReplica { tablet, members, bootstrap } => self.create_replica(ReplicaRecord { tablet, members, bootstrap }),
            Request::DropReplica { tablet } => self.drop_replica(tablet),
            Request::GroupMembers { tablet } => self.group_members(tablet),
            Request::TabletStats { tablet } => self.tablet_stats(tablet),
            Request::Write { tablet, ops, read_ht, txn, request } => self.write(tablet, ops, read_ht, txn, request),
            Request::WriteIfLive { tablet, op, read_ht, full, request } => self.write_if_live(tablet, op, read_ht, full, request),
            Request::WriteIntentIfLive { tablet, op, txn, seq, request } => self.write_intent_if_live(tablet, op, txn, seq, request),
            Request::DeleteAll { tablet, txn, seq, read_ht } => self.delete_all(tablet, txn, seq, read_ht),
            Request::CreateTxnAndWrite { txn, write } => self.create_txn_and_write(txn, write),
            Request::Read { tablet, key, at } => self.read(tablet, key, at),
            Request::ReadMany { tablet, keys, at } => self.read_many(tablet, keys, at),
            Request::Scan { tablet, spec, at } => self.scan(tablet, spec, at),
            req @ (Request::CreateTxn { .. } | Request::Heartbeat { .. } | Request::CommitTxn { .. } | Request::AbortTxn { .. }) => {
                let txn = status_txn(&req).unwrap_or_else(|| unreachable!("a status request names its transaction"));
                self.on_status_tablet(txn, req, true)
            }
            Request::Forwarded(req) => self.forwarded(req),
            Request::WaitTxn { txn, waiter, timeout_ms } => self.wait_txn(txn, waiter, Duration::from_millis(timeout_ms as u64).min(MAX_WAIT)),
            Request::WaitsFor { txn } => self.serve_waits_for(txn),
            Request::RollbackTxn { tablet, txn, from_seq } => self.rollback_txn(tablet, txn, from_seq),
            Request::TxnStatus { txn, read_ht } => self.txn_status(txn, read_ht).map(Response::TxnStatus),
            Request::ResolveTxn { tablet, txn, commit_ht } => self.resolve_txn_here(tablet, txn, commit_ht),
            Request::InjectFaults { unreachable } => self.inject_faults(unreachable),
            Request::CrashAt { step } => self.crash_at(step),
            Request::StallTick { ms } => self.stall_tick(ms),
            Request::ChangeReplicas { tablet, add, remove } => self.change_replicas(tablet, add, remove),
            Request::TransferLeader { tablet, to } => self.transfer_leader(tablet, to),
            Request::Campaign { tablet } => self.campaign(tablet),
            Request::Raft { group, target, kind, body } => self.raft_message(group, target, kind, body),
            Request::JoinCluster { token, csr, forwarded } => self.join_cluster(token, csr, forwarded),
        }
    }

    /// A catalog request: here when this node leads the master (a leader change
    /// may cut in: then at the new leader), else at the master's leader.
    pub(super) fn at_master(&self, req: Request) -> Result<Response, RpcError> {
        self.at_master_answering(req, None)
    }

    /// [`Node::at_master`], the master's answer awaited up to `answer` (None: the
    /// usual read timeout) when it is another node.
    pub(super) fn at_master_answering(&self, req: Request, answer: Option<Duration>) -> Result<Response, RpcError> {
        let remote = |req| match answer {
            Some(a) => self.call_master_waiting(req, a),
            None => self.call_master(req),
        };
        if self.is_master() {
            match self.handle_master(req.clone()) {
                Err(e) if e.code == ErrorCode::NotLeader => remote(req),
                res => res,
            }
        } else {
            remote(req)
        }
    }

    /// `Forwarded`: a request on a status record, at this node's replica of its
    /// status tablet; a catalog request (or `Status`) at the master's leader, or
    /// NotLeader (never forwarded again).
    fn forwarded(&self, req: Box<Request>) -> Result<Response, RpcError> {
        match status_txn(&req) {
            Some(txn) => self.on_status_tablet(txn, *req, false),
            // At the master's leader, or NotLeader (never forwarded again).
            None if matches!(*req, Request::Status) && self.is_master() => self.handle(*req),
            None if is_master_request(&req) && self.is_master() => {
                self.handle_master(*req).map_err(|e| if e.code == ErrorCode::NotLeader { self.not_master() } else { e })
            }
            None if is_master_request(&req) || matches!(*req, Request::Status) => Err(self.not_master()),
            None => Err(err(ErrorCode::InvalidRequest, "only requests on status records or the catalog are forwarded")),
        }
    }
}
