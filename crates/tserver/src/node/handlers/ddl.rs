//! The cluster's DDL log: `PublishDdl` (the master logs an entry and has the
//! live nodes apply it) and `ApplyDdl` (this node's PostgreSQL applies the log).

use crate::factory::EngineFactory;
use crate::node::{catalog_err, err, DdlApplier, Node};
use pinax_common::ErrorCode;
use pinax_proto::{DdlEntry, DdlLock, Request, Response, RpcError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the master waits for each node to apply a published DDL entry.
const DDL_APPLY_WAIT: Duration = Duration::from_secs(5);

impl<F: EngineFactory> Node<F> {
    /// Master: log `entry`, then have every other live node apply the log through
    /// it (in parallel, each for at most `DDL_APPLY_WAIT`). Nodes that did not are
    /// reported; they catch up from the log on their own.
    pub(in crate::node) fn publish_ddl(&self, entry: DdlEntry) -> Result<Response, RpcError> {
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
        // Registered nodes not heard from lately were not asked: they are behind too.
        let mut lagging = lagging;
        let asked: Vec<u64> = others.iter().map(|(id, _)| *id).collect();
        let mut silent: Vec<(u64, String)> =
            self.nodes.lock().iter().filter(|(id, _)| **id != origin && !asked.contains(id)).map(|(id, (a, _))| (*id, a.clone())).collect();
        silent.sort();
        lagging.extend(silent);
        if !lagging.is_empty() {
            tracing::warn!(seq, ?lagging, "nodes have not applied a DDL log entry yet");
        }
        Ok(Response::DdlPublished { seq, lagging })
    }

    /// Set what applies the DDL log to this node's PostgreSQL (once).
    pub fn set_ddl_applier(&self, a: Arc<dyn DdlApplier>) {
        let _ = self.ddl.set(a);
    }

    /// `ApplyDdl`: have this node's PostgreSQL apply the DDL log through `upto`
    /// (none here: nothing to apply).
    pub(in crate::node) fn apply_ddl(&self, upto: u64) -> Result<Response, RpcError> {
        match self.ddl.get() {
            None => Ok(Response::Done),
            Some(a) => a.apply_upto(upto, Instant::now() + DDL_APPLY_WAIT).map(|_| Response::Done).map_err(|e| err(ErrorCode::Unavailable, e)),
        }
    }
}

/// How long the master waits for a node's answer to `HoldDdlLock` beyond the
/// lock's own timeout.
const DDL_LOCK_GRACE: Duration = Duration::from_secs(5);

/// How long a DDL lock may wait for its tables on each node at most.
const DDL_LOCK_MAX_WAIT: Duration = Duration::from_secs(600);

impl<F: EngineFactory> Node<F> {
    /// `LockDdl` from this node's PostgreSQL: note the lock (and its backend),
    /// then have the master spread it. The answer's time moves this node's clock.
    pub(in crate::node) fn lock_ddl(&self, mut lock: DdlLock) -> Result<Response, RpcError> {
        if lock.lock == 0 {
            return Err(err(ErrorCode::InvalidRequest, "a DDL lock's id is nonzero"));
        }
        if lock.origin == self.cfg.node_id {
            lock.origin_addr = self.cfg.rpc_addr.clone();
            self.ddl_locks.lock().insert(lock.lock, lock.pid);
        }
        let wait = Duration::from_millis(lock.timeout_ms).min(DDL_LOCK_MAX_WAIT) + 2 * DDL_LOCK_GRACE;
        let req = Request::LockDdl { lock };
        let res = self.at_master_answering(req, Some(wait));
        if let Ok(Response::Now(ht)) = &res {
            self.clock.update(*ht);
        }
        res
    }

    /// `UnlockDdl` from this node's PostgreSQL: forget the lock here first (the
    /// nodes holding it then hear it is not held even if the master cannot be
    /// reached now), then have the master tell every node.
    pub(in crate::node) fn unlock_ddl(&self, lock: u128) -> Result<Response, RpcError> {
        self.ddl_locks.lock().remove(&lock);
        self.at_master(Request::UnlockDdl { lock })
    }

    /// `DdlLockHeld`: whether the backend that took `lock` here still runs (it
    /// forgets the lock when its transaction ends).
    pub(in crate::node) fn ddl_lock_held(&self, lock: u128) -> bool {
        let mut locks = self.ddl_locks.lock();
        let Some(pid) = locks.get(&lock).copied() else {
            return false;
        };
        // A backend that died (killed, crashed) never said so.
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        locks.remove(&lock);
        false
    }

    /// Master: have every other live node hold `lock` (nodes without
    /// PostgreSQL answer at once); answers the highest clock reading among
    /// theirs. If a node could not, the lock goes everywhere and the DDL fails.
    pub(in crate::node) fn spread_ddl_lock(&self, lock: DdlLock) -> Result<Response, RpcError> {
        self.spreading(&lock);
        let others: Vec<(u64, String)> = self.live_nodes().into_iter().filter(|(id, _)| *id != lock.origin).collect();
        let wait = Duration::from_millis(lock.timeout_ms).min(DDL_LOCK_MAX_WAIT) + DDL_LOCK_GRACE;
        let answers: Vec<Result<Response, RpcError>> = std::thread::scope(|s| {
            let calls: Vec<_> = others
                .iter()
                .map(|(_, addr)| {
                    let req = Request::HoldDdlLock { lock: lock.clone() };
                    s.spawn(move || if *addr == self.cfg.rpc_addr { self.handle(req) } else { self.transport.request_within(addr, req, Some(wait)) })
                })
                .collect();
            calls.into_iter().map(|c| c.join().unwrap_or_else(|_| Err(err(ErrorCode::Internal, "a lock call panicked")))).collect()
        });
        let mut ht = self.clock.now();
        let mut failed = None;
        let mut answered = Vec::new();
        for ((id, addr), answer) in others.iter().zip(answers) {
            match answer {
                Ok(Response::Now(t)) => {
                    ht = ht.max(t);
                    answered.push(*id);
                }
                Ok(other) => failed = Some(format!("node {id} ({addr}) answered {other:?}")),
                // Out of reach (down, or cut off): not waited for, but fenced
                // below (`sql_lease.rs`). A node that was down applies the log
                // before its sessions run (`DdlReady`).
                Err(e) if e.code == ErrorCode::Unavailable => {
                    tracing::warn!(node = id, %addr, error = %e.message, "a DDL lock goes on without a node out of reach");
                }
                Err(e) => failed = Some(format!("node {id} ({addr}): {}", e.message)),
            }
        }
        if let Some(why) = failed {
            self.spread_ddl_unlock(lock.lock)?;
            return Err(err(ErrorCode::LockNotAvailable, format!("could not lock {} on every SQL node: {why}", describe_relations(&lock))));
        }
        // Every node that did not take the lock (out of reach, or not heard from
        // lately) gets no SQL lease until it goes, and the DDL waits until the
        // leases they may hold have ended.
        if let Err(e) = self.fence_nodes_without(&lock, &answered) {
            self.spread_ddl_unlock(lock.lock)?;
            return Err(e);
        }
        Ok(Response::Now(self.clock.now().max(ht)))
    }

    /// Master: every live node lets DDL lock `lock` go (best effort: a node that
    /// does not hear of it lets it go when its origin says it is not held).
    pub(in crate::node) fn spread_ddl_unlock(&self, lock: u128) -> Result<Response, RpcError> {
        self.unfence(lock)?;
        let nodes = self.live_nodes();
        std::thread::scope(|s| {
            for (id, addr) in &nodes {
                s.spawn(move || {
                    if let Err(e) = self.call_node(addr, Request::ReleaseDdlLock { lock }) {
                        tracing::debug!(node = id, error = %e, "could not release a DDL lock there");
                    }
                });
            }
        });
        Ok(Response::Done)
    }

    /// `HoldDdlLock`: take `lock`'s tables in this node's PostgreSQL (none here:
    /// nothing to lock). Answers this node's clock once they are held.
    pub(in crate::node) fn hold_ddl_lock(&self, lock: DdlLock) -> Result<Response, RpcError> {
        if let Some(a) = self.ddl.get() {
            let deadline = Instant::now() + Duration::from_millis(lock.timeout_ms).min(DDL_LOCK_MAX_WAIT);
            a.hold_lock(&lock, deadline).map_err(|e| err(ErrorCode::LockNotAvailable, e))?;
        }
        Ok(Response::Now(self.clock.now()))
    }

    /// `ReleaseDdlLock`: let `lock` go in this node's PostgreSQL.
    pub(in crate::node) fn release_ddl_lock(&self, lock: u128) -> Result<Response, RpcError> {
        if let Some(a) = self.ddl.get() {
            a.release_lock(lock);
        }
        Ok(Response::Done)
    }
}

/// `lock`'s relations for a message: `"public"."t" (SHARE), ...`.
fn describe_relations(lock: &DdlLock) -> String {
    lock.relations.iter().map(|(r, m)| format!("{r} ({m})")).collect::<Vec<_>>().join(", ")
}
