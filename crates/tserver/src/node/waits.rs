//! Waits and deadlock detection: `WaitTxn` (block until a transaction ends, at
//! its status tablet's leader), the wait-for edges of the transactions whose home
//! is this node (`WaitsFor`), and distributed edge chasing over them (a wait that
//! closes a cycle fails with `Deadlock`, 40P01). See docs/architecture.md,
//! "Deadlock detection".

use super::{err, tablet_err, Node};
use crate::factory::EngineFactory;
use pinax_common::{ErrorCode, TxnId};
use pinax_mvcc::TxnStatus;
use pinax_proto::{Request, Response, RpcError};
use pinax_tablet::StatusTablet;
use std::time::{Duration, Instant};

/// Longest single `WaitTxn` (clients wait again to wait longer).
pub(super) const MAX_WAIT: Duration = Duration::from_secs(5);

/// How often a waiting transaction's node looks for a deadlock again (a cycle can
/// close after the wait began, through a wait on another node).
const DEADLOCK_CHECK: Duration = Duration::from_millis(200);

/// Longest chain of waits followed when looking for a cycle.
const MAX_WAIT_CHAIN: usize = 64;

impl<F: EngineFactory> Node<F> {
    pub(super) fn notify_txn_ended(&self) {
        let (lock, cv) = &self.txn_ended;
        *lock.lock() += 1;
        cv.notify_all();
    }

    /// `WaitTxn`: block until `txn` ends or `timeout` passes (the wait itself is
    /// at the leader of `txn`'s status tablet).
    ///
    /// Deadlock detection (distributed, by edge chasing): the home node of the
    /// waiter `W` (the node its client is connected to, which every `WaitTxn` of
    /// `W` passes through) keeps the edge `W → txn` while the wait lasts. Before
    /// waiting, and again every `DEADLOCK_CHECK` while it waits, it follows the
    /// edges from `txn` (asking each transaction's home node with `WaitsFor`); a
    /// path back to `W` is a cycle and `W`, the waiter that found
    /// it, is the victim (`Deadlock`, 40P01). Its own edge is left out while it
    /// looks, so that two members checking at once rarely both see the cycle.
    pub(super) fn wait_txn(&self, txn: TxnId, waiter: Option<TxnId>, timeout: Duration) -> Result<Response, RpcError> {
        // Only the waiter's home node detects.
        let detect = waiter.filter(|w| self.home_of(*w) == self.cfg.node_id);
        let deadline = Instant::now() + timeout;
        let result = loop {
            if let Some(w) = detect {
                self.waits_for.lock().remove(&w);
                if self.wait_closes_cycle(w, txn) {
                    break Err(err(ErrorCode::Deadlock, "deadlock detected: the transactions wait for each other"));
                }
                self.waits_for.lock().insert(w, txn);
            }
            let slice = deadline.saturating_duration_since(Instant::now()).min(DEADLOCK_CHECK);
            let ended = match self.on_status_tablet(txn, Request::WaitTxn { txn, waiter: None, timeout_ms: slice.as_millis() as u32 }, true) {
                Ok(Response::Waited { ended, committed }) => ended.then_some(committed),
                Ok(other) => break Err(err(ErrorCode::Internal, format!("unexpected answer to WaitTxn: {other:?}"))),
                Err(e) => break Err(e),
            };
            if ended.is_some() || Instant::now() >= deadline {
                break Ok(Response::Waited { ended: ended.is_some(), committed: ended == Some(true) });
            }
        };
        if let Some(w) = detect {
            let mut waits = self.waits_for.lock();
            if waits.get(&w) == Some(&txn) {
                waits.remove(&w);
            }
        }
        result
    }

    /// Wait up to `timeout` for `txn` (whose record is in `st`, led here) to end:
    /// `Some(committed)` once it has, `None` if it is still running.
    pub(super) fn wait_local(&self, st: &StatusTablet<F::Engine>, txn: TxnId, timeout: Duration) -> Result<Option<bool>, RpcError> {
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &self.txn_ended;
        let status = |st: &StatusTablet<F::Engine>| st.status(txn, self.clock.now()).map_err(tablet_err);
        let status = loop {
            let seen = *lock.lock();
            let s = status(st)?;
            if !matches!(s, TxnStatus::Pending) {
                break s;
            }
            let mut g = lock.lock();
            if *g == seen && cv.wait_until(&mut g, deadline).timed_out() {
                drop(g);
                break status(st)?;
            }
        };
        Ok(match status {
            TxnStatus::Pending => None,
            TxnStatus::Committed { .. } => Some(true),
            _ => Some(false),
        })
    }

    /// Whether `waiter` waiting for `holder` closes a cycle of waits: following
    /// who waits for whom from `holder` (across nodes) leads back to `waiter`. An
    /// edge that cannot be read (its node is unreachable) ends the search: no cycle
    /// is claimed without seeing it whole.
    fn wait_closes_cycle(&self, waiter: TxnId, holder: TxnId) -> bool {
        let mut at = holder;
        for _ in 0..MAX_WAIT_CHAIN {
            if at == waiter {
                return true;
            }
            match self.waits_for_of(at) {
                Ok(Some(next)) => at = next,
                Ok(None) => return false,
                Err(e) => {
                    tracing::debug!(txn = %at, error = %e, "deadlock detection: could not learn what a transaction waits for");
                    return false;
                }
            }
        }
        false
    }

    /// `WaitsFor`: the transaction `txn` waits for now, asked of its home node if
    /// that is not this one.
    fn waits_for_of(&self, txn: TxnId) -> Result<Option<TxnId>, RpcError> {
        let home = self.home_of(txn);
        if home == self.cfg.node_id {
            return Ok(self.waits_for.lock().get(&txn).copied());
        }
        let addr = self.node_addr(home)?;
        match self.transport.request(&addr, Request::WaitsFor { txn })? {
            Response::WaitingFor { holder } => Ok(holder),
            other => Err(err(ErrorCode::Internal, format!("unexpected answer to WaitsFor: {other:?}"))),
        }
    }

    /// `WaitsFor`, at `txn`'s home node: what it waits for now.
    pub(super) fn serve_waits_for(&self, txn: TxnId) -> Result<Response, RpcError> {
        if self.home_of(txn) == self.cfg.node_id {
            return Ok(Response::WaitingFor { holder: self.waits_for.lock().get(&txn).copied() });
        }
        Err(err(ErrorCode::InvalidRequest, "WaitsFor sent to a node that is not the transaction's home"))
    }
}
