//! Followers on this node held quiet by a quiesced leader elsewhere
//! (`pinax_raft::quiesce`) are released when that leader's node is lost. At each
//! tick the node pings the nodes of such leaders, one `Ping` per node however
//! many groups it holds (nothing at all when no follower here is held), and
//! reports to the transport's [`pinax_raft::quiesce::PeerWatch`] a node that has
//! not answered for an election timeout: its held followers campaign as after
//! any leader failure.

use super::Node;
use crate::factory::EngineFactory;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Since when each watched node has not answered (cleared when it answers).
#[derive(Default)]
pub(super) struct PeersDown {
    since: HashMap<u64, Instant>,
}

impl<F: EngineFactory> Node<F> {
    /// Ping the nodes whose quiesced leaders hold followers here (see the module
    /// docs); report those unanswered for longer than an election timeout.
    pub(super) fn watch_peers(&self) {
        let watch = self.transport.watch();
        let leaders = watch.leaders();
        let lost_after = Duration::from_millis(self.cfg.raft_timing.election_max_ms);
        let mut answered = Vec::new();
        let mut silent = Vec::new();
        // Each ping is bounded (a partitioned node answers nothing: without a
        // bound the tick waited for TCP to give up) and they go out together.
        let within = lost_after / 2;
        let answers: Vec<(u64, bool)> = std::thread::scope(|s| {
            let pings: Vec<_> = leaders
                .iter()
                .map(|(id, addr)| {
                    let t = &self.transport;
                    // Another node at the address (it moved) is as good as lost.
                    (*id, s.spawn(move || t.ping(addr, within) == Some(*id)))
                })
                .collect();
            pings.into_iter().map(|(id, h)| (id, h.join().unwrap_or(false))).collect()
        });
        for (id, ok) in answers {
            if ok {
                answered.push(id);
            } else {
                silent.push(id);
            }
        }
        let now = Instant::now();
        let lost: Vec<u64> = {
            let mut down = self.peers_down.lock();
            down.since.retain(|id, _| leaders.iter().any(|(l, _)| l == id) && !answered.contains(id));
            silent.into_iter().filter(|id| now.duration_since(*down.since.entry(*id).or_insert(now)) >= lost_after).collect()
        };
        for id in lost {
            tracing::warn!(node = id, "a node holding followers here quiet has not answered for an election timeout: releasing them");
            watch.node_lost(id);
            self.peers_down.lock().since.remove(&id);
        }
    }
}
