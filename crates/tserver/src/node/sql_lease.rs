//! SQL leases: fencing a SQL node cut off from the master.
//!
//! A DDL statement has every live SQL node take its table locks first
//! (`HoldDdlLock`, see `handlers/ddl.rs`); a node out of reach is not waited
//! for. Such a node may still reach the tablets (a partial partition), so its
//! backends could go on writing through the catalog they planned with, after the
//! DDL changed it: a row without its entry in a new index, a write into storage
//! a rewrite has copied already. Leases close that gap (F1's schema leases, in
//! the form YugabyteDB and CockroachDB fence stale SQL nodes):
//!
//! - Every node holds a **SQL lease** for [`SQL_LEASE`] from when it asked the
//!   master (`RegisterNode`, once a second; the master's own node renews by
//!   proving it still leads the master group). The master records when it
//!   granted each one.
//! - A backend's requests carry the lease's end (`RequestEnvelope::fence`, the
//!   client asks its node for it with `SqlLease`); every node refuses a request
//!   whose fence its clock has passed (`NodeFenced`, SQLSTATE 40001, never
//!   retried under the same plan).
//! - When a DDL lock goes on without a node, the master first **fences** it in
//!   the catalog (persisted: a new master leader honours it), then waits until
//!   the node's lease has ended by any clock in the cluster (its last grant +
//!   [`SQL_LEASE`] + 4 × the maximum clock skew). A fenced node is granted no
//!   lease until the lock is let go (the DDL committed and was published, or
//!   failed), and after a lapsed lease its backends get none until its
//!   PostgreSQL has applied the DDL log as far as it went at the renewal.
//! - A master leader that begins counts every registered node as granted now.
//! - Fences of a lock whose origin no longer holds it (a backend or node that
//!   died) come down from the master's tick.

use super::Node;
use crate::factory::EngineFactory;
use pinax_common::TabletId;
use pinax_proto::{DdlLock, Request, Response};
use std::collections::HashMap;
use std::time::Duration;

/// How long a SQL lease lasts from when the node asked for it.
pub const SQL_LEASE: Duration = Duration::from_secs(5);

/// How long the fences of a DDL lock whose origin cannot be reached stay up.
const SILENT_ORIGIN_FENCE: Duration = Duration::from_secs(15);

/// A node's SQL lease.
#[derive(Default)]
pub(super) struct SqlLease {
    /// Until when (hybrid time's physical microseconds); 0: never held.
    until: u64,
    /// Renewed after it lapsed: the DDL log's last entry then, which this
    /// node's PostgreSQL must have applied before its backends get the lease.
    needs: Option<u64>,
}

impl<F: EngineFactory> Node<F> {
    fn physical_now(&self) -> u64 {
        self.clock.now().physical_micros()
    }

    /// A renewal of this node's lease asked for at `sent` (physical microseconds),
    /// when the DDL log went to `ddl_seq`.
    pub(super) fn renew_sql_lease(&self, sent: u64, ddl_seq: u64) {
        let mut l = self.sql_lease.lock();
        if l.until < sent {
            l.needs = Some(l.needs.map_or(ddl_seq, |n| n.max(ddl_seq)));
        }
        l.until = l.until.max(sent + SQL_LEASE.as_micros() as u64);
    }

    /// The master's own node: renew its lease if it still leads the master group.
    pub(super) fn renew_own_sql_lease(&self) {
        let sent = self.physical_now();
        let Some(replica) = self.groups.read().get(&TabletId::MASTER).cloned() else {
            return;
        };
        if replica.group.read_barrier().is_err() {
            return;
        }
        match self.catalog().and_then(|c| c.last_ddl().map_err(super::catalog_err)) {
            Ok(seq) => self.renew_sql_lease(sent, seq),
            Err(e) => tracing::debug!(error = %e, "renewing the master's own SQL lease"),
        }
    }

    /// `SqlLease`: until when this node's backends' requests may run (0: not now).
    pub(super) fn sql_lease(&self) -> u64 {
        let mut l = self.sql_lease.lock();
        if let Some(needs) = l.needs {
            let applied = self.ddl.get().map_or(u64::MAX, |a| a.applied());
            if applied < needs {
                return 0;
            }
            l.needs = None;
        }
        l.until
    }

    /// Master: the lease of node `node`, registering now: the DDL log's last
    /// entry, or None while the node is fenced.
    pub(super) fn grant_sql_lease(&self, node: u64) -> Result<Option<u64>, pinax_proto::RpcError> {
        let catalog = self.catalog()?;
        let mut grants = self.lease_grants.lock();
        if catalog.fenced(node).map_err(super::catalog_err)? {
            return Ok(None);
        }
        grants.insert(node, self.physical_now());
        Ok(Some(catalog.last_ddl().map_err(super::catalog_err)?))
    }

    /// Master, beginning to lead: every node may hold a lease the previous
    /// leader granted up to now.
    pub(super) fn grant_all_sql_leases(&self, nodes: impl Iterator<Item = u64>) {
        let now = self.physical_now();
        let mut grants = self.lease_grants.lock();
        for n in nodes {
            grants.insert(n, now);
        }
    }

    /// Master: DDL lock `lock` goes on without the registered nodes not in
    /// `answered` (other than its origin). Fence them, then wait until every
    /// lease they may hold has ended.
    pub(super) fn fence_nodes_without(&self, lock: &DdlLock, answered: &[u64]) -> Result<(), pinax_proto::RpcError> {
        let skipped: Vec<u64> = self.nodes.lock().keys().copied().filter(|n| *n != lock.origin && !answered.contains(n)).collect();
        if skipped.is_empty() {
            return Ok(());
        }
        let catalog = self.catalog()?;
        let last_grant = {
            let grants = self.lease_grants.lock();
            catalog.fence(&skipped, lock.lock, &lock.origin_addr, self.physical_now()).map_err(super::catalog_err)?;
            skipped.iter().filter_map(|n| grants.get(n)).copied().max()
        };
        let Some(granted) = last_grant else {
            return Ok(());
        };
        let ends = granted + SQL_LEASE.as_micros() as u64 + 4 * self.clock.max_skew_micros();
        let now = self.physical_now();
        if ends > now {
            tracing::info!(nodes = ?skipped, wait_ms = (ends - now) / 1000, "a DDL lock waits for the SQL leases of nodes out of reach to end");
            std::thread::sleep(Duration::from_micros(ends - now));
        }
        Ok(())
    }

    /// Master: DDL lock `lock` was let go (or its origin no longer holds it):
    /// it is forgotten and its fences come down.
    pub(super) fn unfence(&self, lock: u128) -> Result<(), pinax_proto::RpcError> {
        self.locks_in_flight.lock().remove(&lock);
        self.catalog()?.unfence(lock).map_err(super::catalog_err)
    }

    /// Master: DDL lock `lock` is being spread (until [`Node::unfence`]).
    pub(super) fn spreading(&self, lock: &DdlLock) {
        self.locks_in_flight.lock().insert(lock.lock, (lock.origin_addr.clone(), self.physical_now()));
    }

    /// Master: node `node` registered for the first time: fence it for the DDL
    /// locks being spread now (it was not asked to hold them).
    pub(super) fn fence_new_node(&self, node: u64) -> Result<(), pinax_proto::RpcError> {
        let locks: Vec<(u128, String)> = self.locks_in_flight.lock().iter().map(|(l, (a, _))| (*l, a.clone())).collect();
        if locks.is_empty() {
            return Ok(());
        }
        let catalog = self.catalog()?;
        let _grants = self.lease_grants.lock();
        for (lock, origin) in locks {
            catalog.fence(&[node], lock, &origin, self.physical_now()).map_err(super::catalog_err)?;
        }
        Ok(())
    }

    /// Master, every second: forget the DDL locks their origin no longer holds
    /// (or that could not be asked for [`SILENT_ORIGIN_FENCE`]), and take their
    /// fences down.
    pub(super) fn drop_stale_fences(&self) {
        let Ok(fences) = self.catalog().and_then(|c| c.fences().map_err(super::catalog_err)) else {
            return;
        };
        let mut locks: HashMap<u128, (String, u64)> = self.locks_in_flight.lock().clone();
        for ((_, lock), f) in fences {
            locks.entry(lock).or_insert((f.origin_addr, f.since_micros));
        }
        let now = self.physical_now();
        for (lock, (origin, since)) in locks {
            let held = match origin == self.cfg.rpc_addr {
                true => Ok(Response::Held(self.ddl_lock_held(lock))),
                false => self.transport.request_within(&origin, Request::DdlLockHeld { lock }, Some(Duration::from_secs(2))),
            };
            let gone = match held {
                Ok(Response::Held(held)) => !held,
                Ok(_) | Err(_) => now.saturating_sub(since) > SILENT_ORIGIN_FENCE.as_micros() as u64,
            };
            if gone {
                tracing::info!(lock = %format!("{lock:032x}"), %origin, "a DDL lock's origin no longer holds it: its fences come down");
                if let Err(e) = self.unfence(lock) {
                    tracing::warn!(error = %e, "taking down a DDL lock's fences");
                }
            }
        }
    }
}

/// Grants by node: when the master last granted each one a lease (physical
/// microseconds).
pub(super) type LeaseGrants = HashMap<u64, u64>;
