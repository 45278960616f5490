//! Quiescing groups of several members: followers held quiet by their leader,
//! and the node-level watch that wakes them when that leader's node is lost.
//!
//! A leader quiesces its group (see `group.rs`) only when every follower has
//! matched and applied its whole log, and each has agreed ([`MsgKind::Quiesce`])
//! to hold its election timer off ([`Hold`]): with no heartbeats coming, it would
//! otherwise campaign after an election timeout. A held follower goes back to
//! normal (its election timer on) when:
//! - any Raft message reaches it (an AppendEntries from a leader refreshes its
//!   leader lease first; a vote request means an election is on anyway);
//! - the node's [`PeerWatch`] reports the leader's node lost (down, or
//!   unreachable for longer than an election timeout): the follower's timer is
//!   then long expired and it campaigns at its next tick, as after any leader
//!   failure.
//!
//! Why it is safe: holding a timer off only delays elections, never makes one
//! happen that Raft would not allow; the leader's read lease is a wall-clock
//! deadline from a read-index round (`group.rs`), so a leader woken after any
//! quiet spell does a round again before serving a read, and a round cannot
//! succeed once a majority follows a newer leader. Liveness rests on the watch:
//! without one ([`crate::network::Transport::peer_watch`] answering `None`), groups
//! of several members never quiesce.
//!
//! [`MsgKind::Quiesce`]: crate::network::MsgKind::Quiesce

use crate::runtime::Quiescence;
use crate::{NodeId, Raft};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// A follower's hold: the leader whose word keeps its election timer off.
pub(crate) struct Hold {
    raft: Raft,
    /// (group, this node): the key of this hold in a [`PeerWatch`].
    key: (u64, NodeId),
    quiescence: Arc<Quiescence>,
    leader: Mutex<Option<NodeId>>,
}

impl Hold {
    pub(crate) fn new(raft: Raft, group: u64, node: NodeId, quiescence: Arc<Quiescence>) -> Arc<Hold> {
        Arc::new(Hold { raft, key: (group, node), quiescence, leader: Mutex::new(None) })
    }

    /// The leader holding this follower, if one is.
    pub(crate) fn leader(&self) -> Option<NodeId> {
        *self.leader.lock()
    }

    /// Hold the election timer off on `leader`'s word, until released; `watch`
    /// releases it if `leader`'s node is lost.
    pub(crate) fn hold(self: &Arc<Self>, leader: NodeId, addr: &str, watch: &PeerWatch) {
        {
            // Under the lock: a concurrent release cannot leave the timer off unheld.
            let mut l = self.leader.lock();
            *l = Some(leader);
            self.raft.runtime_config().elect(false);
        }
        let mut held = watch.held.lock();
        let (at, holds) = held.entry(leader).or_default();
        addr.clone_into(at);
        holds.insert(self.key, Arc::downgrade(self));
    }

    /// Election timer on again (if it was held); the group's runtime is woken.
    pub(crate) fn release(&self) {
        let mut l = self.leader.lock();
        if l.take().is_some() {
            self.raft.runtime_config().elect(true);
            drop(l);
            self.quiescence.wake();
        }
    }
}

/// The followers on this node held by each leader node (see the module docs);
/// one per node, shared by its groups through the transport.
#[derive(Default)]
pub struct PeerWatch {
    /// By leader node: its address, and its holds by (group, follower node).
    held: Mutex<HashMap<NodeId, (String, Holds)>>,
}

type Holds = HashMap<(u64, NodeId), Weak<Hold>>;

impl PeerWatch {
    /// The leader nodes that hold followers here, with their addresses: the
    /// nodes worth watching.
    pub fn leaders(&self) -> Vec<(NodeId, String)> {
        let mut held = self.held.lock();
        held.retain(|leader, (_, holds)| {
            holds.retain(|_, h| h.upgrade().is_some_and(|h| h.leader() == Some(*leader)));
            !holds.is_empty()
        });
        held.iter().map(|(id, (addr, _))| (*id, addr.clone())).collect()
    }

    /// Node `node` is lost (down, or unreachable for longer than an election
    /// timeout): every follower it held goes back to normal and campaigns if no
    /// leader shows up. Returns how many were released.
    pub fn node_lost(&self, node: NodeId) -> usize {
        let (_, holds) = self.held.lock().remove(&node).unwrap_or_default();
        let mut n = 0;
        for h in holds.values().filter_map(Weak::upgrade) {
            if h.leader() == Some(node) {
                h.release();
                n += 1;
            }
        }
        if n > 0 {
            tracing::info!(node, followers = n, "a quiesced leader's node is lost; its followers' election timers are on again");
        }
        n
    }
}
