//! Replicas whose Raft group stopped on a storage error are opened again.
//!
//! openraft stops a group's core for good at the first error of its storage (a
//! log append, a state machine write), and the group then fails every call. A
//! transient error (out of descriptors, a full disk that has room again) would
//! otherwise take the replica out until the node restarts: the master's group
//! once stopped this way and every later statement failed with "node 1 does not
//! lead the master". Every second the node looks for stopped groups and reopens
//! their replicas from storage, as at a restart (the log replayed past the
//! applied id: every acknowledged write is in it), backing off exponentially
//! (1 s to 30 s) while opening fails; the replica's other members keep the tablet
//! available meanwhile when it is replicated, and its statements get errors when
//! it is not.

use super::Node;
use crate::factory::EngineFactory;
use pinax_common::TabletId;
use std::time::{Duration, Instant};

/// First wait before a stopped replica is opened again, doubled after each failed try.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between tries.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// When each stopped replica is tried next, and the wait after that.
#[derive(Default)]
pub(super) struct Revivals {
    next: std::collections::HashMap<TabletId, (Instant, Duration)>,
}

/// How often the groups are looked at for stopped ones (a node of many tablets
/// would otherwise spend its idle time looking).
const SCAN_EVERY: Duration = Duration::from_secs(1);

impl<F: EngineFactory> Node<F> {
    /// Reopen the replicas whose group stopped on a storage error (see the module
    /// docs), and those a failed reopen left closed.
    pub(super) fn revive_stopped_replicas(&self) {
        if !super::due(&self.last_revival_scan, SCAN_EVERY) {
            return;
        }
        let mut stopped: Vec<(TabletId, String)> = self.groups.read().iter().filter_map(|(id, g)| g.group.stopped_by().map(|why| (*id, why))).collect();
        // Replicas a failed reopen left closed are still due.
        stopped.extend(self.revivals.lock().next.keys().filter(|id| !self.has_replica(**id)).map(|id| (*id, "its last reopening failed".to_string())));
        let now = Instant::now();
        for (id, why) in stopped {
            let backoff = {
                let mut r = self.revivals.lock();
                let (at, backoff) = *r.next.entry(id).or_insert((now, FIRST_BACKOFF));
                if now < at {
                    continue;
                }
                r.next.insert(id, (now + backoff, (backoff * 2).min(MAX_BACKOFF)));
                backoff
            };
            tracing::error!(tablet_id = id.0, reason = %why, "raft group stopped; opening the replica again");
            match self.reopen_replica(id) {
                Ok(true) => tracing::info!(tablet_id = id.0, "replica opened again"),
                Ok(false) => {
                    // No longer this node's (dropped meanwhile).
                    self.revivals.lock().next.remove(&id);
                }
                Err(e) => tracing::warn!(tablet_id = id.0, error = %e, retry_in_ms = backoff.as_millis() as u64, "could not open the replica again"),
            }
        }
        // Forget replicas that have run well for a while.
        let running = |id: &TabletId| self.groups.read().get(id).is_some_and(|g| g.group.stopped_by().is_none());
        self.revivals.lock().next.retain(|id, (at, _)| !running(id) || now < *at + MAX_BACKOFF);
    }

    /// Close this node's replica of `id` (keeping its data) and open it again
    /// from its record; `false` when this node has no record of it.
    fn reopen_replica(&self, id: TabletId) -> Result<bool, pinax_proto::RpcError> {
        let Some(record) = self.local.replicas().map_err(super::catalog_err)?.into_iter().find(|r| r.tablet.id == id) else {
            return Ok(false);
        };
        self.close_replica(id);
        if id == TabletId::MASTER {
            self.led_master.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        // Requests in flight may hold the engine a moment longer; the new one is
        // another view of the same keys, so opening does not wait for them.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.engine_closed(id) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.open_tablet(&record)?;
        Ok(true)
    }
}
