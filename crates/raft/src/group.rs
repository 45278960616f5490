//! [`RaftGroup`]: one Raft group as the (synchronous) tablet code uses it.
//!
//! The tablet calls from its RPC threads; each call that waits on Raft drives the
//! group's own runtime with `block_on`, running the group's tasks on the calling
//! thread ([`GroupRuntime`]). Leadership:
//! - [`RaftGroup::leader_term`]: this replica leads; on the first call of a term it
//!   first runs a read-index round (`ensure_linearizable`), then waits until every
//!   entry of its log is applied here (a leader holds every committed entry; a
//!   leader restarted in its own term, which openraft resumes without an
//!   election, would otherwise serve before re-applying entries it had
//!   committed before the crash: `apply_whole_log`).
//! - [`RaftGroup::read_barrier`]: a read served now cannot miss an acknowledged
//!   write. A successful read-index round started at `t` proves that a majority
//!   acknowledged this leader after `t`; none of them votes for another candidate
//!   for `election_timeout_max` after that, so the leader may serve reads until
//!   `t + election_timeout_min / 2` (the lease) without another round. A group of one
//!   voter needs no round at all.
//!
//! Leadership moves on request ([`RaftGroup::hand_over`], openraft 0.9 has no
//! transfer): the leader stops its heartbeats and serves nothing (answers
//! NotLeader naming the target) for [`HANDOVER`]; the target, caught up and told
//! to [`RaftGroup::campaign`], starts an election once every follower's lease on
//! the old leader has run out (`election_timeout_max` after the last heartbeat).
//! It then wins before any other follower's own election timer fires (that takes
//! the lease plus `election_timeout_min`), and the old leader steps down when it
//! hears the new term. The lease argument for reads is untouched: the election
//! still needs a majority whose leases ran out. If the target does not win, the old
//! leader resumes when the pause ends (or a new leader emerged by the usual rules).
//!
//! Quiescence (idle groups cost nothing; [`crate::runtime`] has the mechanism,
//! [`crate::quiesce`] the followers' side): the group's own task ([`Beats`])
//! quiesces it once no thread drove its runtime for a request for
//! `quiesce_after_ms` and nothing in it needs a timer. openraft's tick goes off
//! and the ticker stops visiting the runtime; every call that needs the group's
//! tasks (a write, a read-index round, a membership change, a Raft message, a
//! snapshot or a campaign asked for) drives or wakes the runtime first, and the
//! task turns the tick on again. Calls answered from the metrics (`leader_term`
//! once synced, `read_barrier` of a lone voter or within the lease, `leads_now`)
//! leave it quiesced.
//! - A lone voter (the only member) quiesces on its own once it applied its whole
//!   log: it has no follower to keep from campaigning and no election to hold.
//! - A leader of several voters quiesces once every follower has matched and
//!   applied its whole log and agreed to hold its election timer off
//!   ([`MsgKind::Quiesce`]); it then sends no heartbeats. Its next write's
//!   AppendEntries releases the followers. A held follower quiesces at once; it
//!   is released by any Raft message, and by the node's [`PeerWatch`] when the
//!   leader's node is lost (then it campaigns, its timer long expired). Without
//!   a watch (the transport has none) such groups never quiesce.
//!
//! Quiescing never touches the read lease: the lease is a wall-clock deadline
//! from a read-index round, so a leader that slept past it does a round again at
//! its first read, and a round fails once a majority follows a newer leader.
//!
//! A write that is not committed within [`REPLICATE_TIMEOUT`] (the leader lost its
//! quorum) fails with [`GroupError::Timeout`]; its entry may still commit later. Until
//! that is settled (applied here, or the term changed), the leader decides nothing
//! else: a later write checked without the earlier one's effects could conflict
//! with it.

use crate::log_store::{LogPlace, LogStore};
use crate::network::{MsgKind, Network, QuiesceRequest, Transport};
use crate::quiesce::{Hold, PeerWatch};
use crate::runtime::{GroupRuntime, Quiescence};
use crate::state_machine::StateMachine;
use crate::{config, decode, encode, Command, NodeId, Raft, RaftTiming};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ServerState};
use parking_lot::Mutex;
use pinax_common::{HybridClock, HybridTime, RecentRequests};
use pinax_engine::KvEngine;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, thiserror::Error)]
pub enum GroupError {
    #[error("this replica is not the leader")]
    NotLeader { leader: Option<NodeId>, leader_addr: Option<String> },
    #[error("raft group stopped: {0}")]
    Fatal(String),
    #[error("raft storage: {0}")]
    Storage(String),
    #[error("the write was not committed in time (no quorum?); it may still commit")]
    Timeout,
    /// The group was shut down (its replica is being dropped or the node closes).
    #[error("this replica was closed")]
    Stopped,
    /// A leadership or membership change that cannot be made now (the target has
    /// not caught up, is no voter, another change is under way); the group is fine.
    #[error("{0}")]
    Refused(String),
}

/// How often a new group's first candidate stands again while no leader is
/// known ([`RaftGroup::elect_if_leaderless`]), and how many times at most.
const FIRST_ELECTION_RETRY: Duration = Duration::from_millis(100);
const FIRST_ELECTION_TRIES: u32 = 10;
/// How long a write waits to be committed.
pub const REPLICATE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a leader handing over stops serving and sending heartbeats.
pub const HANDOVER: Duration = Duration::from_secs(3);

/// How long a write waits for an election when the group has no leader.
const ELECTION_WAIT: Duration = Duration::from_secs(5);

pub struct RaftGroup {
    group: u64,
    node_id: NodeId,
    raft: Raft,
    /// openraft's metrics, subscribed once: the checks every tick makes of every
    /// group (leads now, stopped, has a leader) borrow them without a new
    /// subscription each.
    metrics: tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, openraft::BasicNode>>,
    /// The group's own runtime (see [`GroupRuntime`]).
    rt: Arc<GroupRuntime>,
    /// The term whose start this replica has applied through (0: none yet).
    synced_term: AtomicU64,
    /// Reads are served without a round until then (see the module docs).
    lease_until: Mutex<Option<Instant>>,
    lease: Duration,
    /// A write that timed out: its (term, last log index at the time). Settled when
    /// applied here or when the term has changed.
    unsettled: Mutex<Option<(u64, u64)>>,
    /// Request ids the state machine applied lately.
    recent: Arc<Mutex<RecentRequests>>,
    /// Dropping it stops the heartbeat task ([`heartbeats`]).
    _heartbeats: tokio::sync::oneshot::Sender<()>,
    /// Handing leadership over (see the module docs).
    handover: Arc<Mutex<Option<Handover>>>,
    /// Held by a membership change ([`RaftGroup::replace_voter`]) and by a
    /// split ([`RaftGroup::split_tablet`]) while they run: one refuses while
    /// the other is under way (a split's halves start from the membership the
    /// split entry applies with, which must not be one a move is changing).
    reconfiguring: Mutex<()>,
    /// `election_timeout_max`: followers' lease on their leader.
    follower_lease: Duration,
    /// Writes waiting to be proposed (group commit, see [`RaftGroup::replicate_then`]).
    proposals: Mutex<Proposals>,
    /// Entry reads the log store answered from memory (`LogStore::tail_reads`).
    tail_reads: Arc<AtomicU64>,
    /// Follower: the quiesced leader holding its election timer off, if one is.
    hold: Arc<Hold>,
    /// The node's watch of its peers (none: groups of several members never quiesce).
    watch: Option<Arc<PeerWatch>>,
}

/// Most bytes of batches merged into one entry (a larger single write goes alone).
const MERGE_BYTES: usize = 4 << 20;

/// The queue of writes handed to [`RaftGroup::replicate_then`] and not yet
/// proposed, in the order they were handed over.
#[derive(Default)]
struct Proposals {
    queue: Vec<(Command, Arc<Proposal>)>,
    /// Some caller is proposing an entry right now.
    busy: bool,
}

/// One write waiting in [`Proposals`]: told to propose, or its outcome.
#[derive(Default)]
struct Proposal {
    state: Mutex<ProposalState>,
    changed: parking_lot::Condvar,
}

#[derive(Default)]
enum ProposalState {
    #[default]
    Queued,
    /// Its turn to propose what is queued (its own write first).
    Propose,
    Done(Result<(), GroupError>),
}

/// A caller's turn to propose: when it ends (also by a panic), the writes it
/// proposed learn the outcome and the next queued write gets the turn.
struct Turn<'a> {
    group: &'a RaftGroup,
    waiters: Vec<Arc<Proposal>>,
    res: Option<Result<(), GroupError>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let res = self.res.take().unwrap_or_else(|| Err(GroupError::Fatal("proposing the entry failed".into())));
        for w in &self.waiters {
            w.set(ProposalState::Done(res.clone()));
        }
        let mut p = self.group.proposals.lock();
        match p.queue.first() {
            Some((_, next)) => next.set(ProposalState::Propose),
            None => p.busy = false,
        }
    }
}

impl Proposal {
    fn set(&self, state: ProposalState) {
        *self.state.lock() = state;
        self.changed.notify_one();
    }
}

/// A leader handing over: until when, to whom, in which term (it ends early when
/// the term changes).
#[derive(Clone, Copy)]
struct Handover {
    until: Instant,
    to: NodeId,
    term: u64,
}

/// The target of `h` if it is still on: this replica leads in its term.
fn handing_over(h: &Mutex<Option<Handover>>, raft: &Raft) -> Option<NodeId> {
    let mut h = h.lock();
    let on = h.is_some_and(|h| {
        let m = raft.metrics();
        let m = m.borrow();
        Instant::now() < h.until && m.state == ServerState::Leader && m.current_term == h.term
    });
    if !on {
        *h = None;
    }
    h.map(|h| h.to)
}

/// Whether nothing in the group needs a timer (see the module docs on
/// quiescence): this replica leads and is the group's only member (no follower to
/// keep from campaigning, no election to hold, no learner to catch up), and it has
/// applied everything in its log (no write or membership change in flight).
fn needs_no_timers(raft: &Raft) -> bool {
    let m = raft.metrics();
    let m = m.borrow();
    m.state == ServerState::Leader
        && m.running_state.is_ok()
        && m.membership_config.membership().nodes().count() == 1
        && m.last_applied.map(|l| l.index) == m.last_log_index
}

/// The group's own task (see [`Beats::run`]).
struct Beats {
    raft: Raft,
    me: NodeId,
    every: Duration,
    /// How long without a request before the group may quiesce.
    quiet: Duration,
    paused: Arc<Mutex<Option<Handover>>>,
    quiescence: Arc<Quiescence>,
    hold: Arc<Hold>,
    /// To ask followers to hold quiet ([`MsgKind::Quiesce`]).
    net: Network,
    watch: Option<Arc<PeerWatch>>,
}

impl Beats {
    /// While this replica leads, send a heartbeat every `every` (openraft's own
    /// timer is off; see [`RaftTiming`]), except while it hands over (`paused`) and
    /// while the group has no other member (nobody to keep from campaigning).
    /// Quiesces the group (see the module docs) once it had no request for `quiet`
    /// and needs no timers, or its followers all agreed to hold quiet; and at
    /// once on a follower its leader holds quiet. Ends when `stop` is dropped or
    /// the group shuts down.
    async fn run(self, mut stop: tokio::sync::oneshot::Receiver<()>) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // After followers did not all agree to hold quiet, the next try is a
        // `quiet` later (a follower that keeps refusing costs no extra messages
        // at every heartbeat).
        let mut ask_after = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tick.tick() => {}
            }
            let (seen, idle) = self.quiescence.idle();
            let quiesce = self.hold.leader().is_some()
                || (idle >= self.quiet
                    && (needs_no_timers(&self.raft)
                        || (tokio::time::Instant::now() >= ask_after && {
                            let agreed = self.followers_hold_quiet().await;
                            if !agreed {
                                ask_after = tokio::time::Instant::now() + self.quiet;
                            }
                            agreed
                        })));
            if quiesce {
                // openraft's tick off first: once quiesced, nobody drives its timer.
                self.raft.runtime_config().tick(false);
                if self.quiescence.quiesce(seen) {
                    tokio::select! {
                        _ = &mut stop => return,
                        _ = self.quiescence.woken() => {}
                    }
                }
                self.raft.runtime_config().tick(true);
                tick.reset();
                continue;
            }
            // A group whose only member (voter or learner) is this replica has nobody
            // to keep from campaigning.
            let leads = {
                let m = self.raft.metrics();
                let m = m.borrow();
                m.state == ServerState::Leader && m.membership_config.membership().nodes().nth(1).is_some()
            };
            if leads && handing_over(&self.paused, &self.raft).is_none() && self.raft.trigger().heartbeat().await.is_err() {
                return;
            }
        }
    }

    /// Leader of several voters (and no learner), with a node that watches its
    /// peers: whether every follower has matched and applied its whole log and
    /// agreed to hold its election timer off ([`crate::quiesce`]). A follower that
    /// agreed while another did not is released by the next heartbeat.
    async fn followers_hold_quiet(&self) -> bool {
        if self.watch.is_none() || handing_over(&self.paused, &self.raft).is_some() {
            return false;
        }
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let last = m.last_log_index;
        let voters = membership.voter_ids().count();
        if m.state != ServerState::Leader
            || m.running_state.is_err()
            || !m.vote.is_committed()
            || m.last_applied.map(|l| l.index) != last
            || voters < 2
            || membership.nodes().count() != voters
        {
            return false;
        }
        let Some(matched) = &m.replication else {
            return false;
        };
        let followers: Vec<(NodeId, String)> = membership.nodes().filter(|(id, _)| **id != self.me).map(|(id, n)| (*id, n.addr.clone())).collect();
        if followers.iter().any(|(id, _)| matched.get(id).cloned().flatten().map(|l| l.index) != last) {
            return false;
        }
        // All at once, each given one heartbeat interval: the next heartbeat is not
        // held up by a slow or dead follower.
        let body = encode(&QuiesceRequest { vote: m.vote, last_log_id: m.last_applied });
        let mut asks = tokio::task::JoinSet::new();
        for (id, addr) in followers {
            let (net, body, ttl) = (self.net.clone(), body.clone(), self.every);
            asks.spawn(async move { net.call(id, addr, MsgKind::Quiesce, body, ttl).await.is_ok_and(|reply| decode::<bool>(&reply) == Ok(true)) });
        }
        let mut all = true;
        while let Some(agreed) = asks.join_next().await {
            all &= agreed.unwrap_or(false);
        }
        all
    }
}

fn fatal<E: std::fmt::Display>(e: E) -> GroupError {
    let msg = e.to_string();
    // openraft's Fatal::Stopped: the replica is closing, not broken.
    if msg == "raft stopped" {
        return GroupError::Stopped;
    }
    GroupError::Fatal(msg)
}

impl RaftGroup {
    /// Start the group's Raft over the log and state kept in `engine` (replaying the
    /// log past the applied id), on a runtime of its own. `io` is a runtime the
    /// group's blocking calls to peers run on (the node's). A new group has no
    /// members until [`RaftGroup::initialize`] (or a leader adding this replica).
    /// The log is kept in the engine too ([`LogPlace::Engine`]: tests).
    #[allow(clippy::too_many_arguments)]
    pub fn start<E: KvEngine>(
        io: &tokio::runtime::Handle,
        group: u64,
        node_id: NodeId,
        engine: Arc<E>,
        clock: Arc<HybridClock>,
        transport: Arc<dyn Transport>,
        timing: RaftTiming,
    ) -> Result<Self, GroupError> {
        Self::start_with(io, group, node_id, engine, &LogPlace::Engine, clock, transport, timing, None)
    }

    /// [`RaftGroup::start`], with the log where `log` says (a node: its data
    /// directory's shared log), split entries applied by `split_hook`.
    #[allow(clippy::too_many_arguments)]
    pub fn start_with<E: KvEngine>(
        io: &tokio::runtime::Handle,
        group: u64,
        node_id: NodeId,
        engine: Arc<E>,
        log: &LogPlace,
        clock: Arc<HybridClock>,
        transport: Arc<dyn Transport>,
        timing: RaftTiming,
        split_hook: Option<Arc<dyn crate::SplitHook>>,
    ) -> Result<Self, GroupError> {
        let log = LogStore::open(engine.clone(), log, group).map_err(|e| GroupError::Storage(e.to_string()))?;
        let tail_reads = log.tail_reads();
        let sm = StateMachine::new(engine, clock).in_group(group).splitting_with(split_hook);
        let recent = sm.recent_requests();
        let watch = transport.peer_watch();
        let net = Network { transport, group, io: io.clone() };
        let rt = GroupRuntime::new().map_err(|e| GroupError::Fatal(format!("starting the group's runtime: {e}")))?;
        let raft = rt.block_on(Raft::new(node_id, config(timing), net.clone(), log, sm)).map_err(fatal)?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let handover = Arc::new(Mutex::new(None));
        let hold = Hold::new(raft.clone(), group, node_id, rt.quiescence().clone());
        let beats = Beats {
            raft: raft.clone(),
            me: node_id,
            every: Duration::from_millis(timing.heartbeat_ms),
            quiet: Duration::from_millis(timing.quiesce_after_ms),
            paused: handover.clone(),
            quiescence: rt.quiescence().clone(),
            hold: hold.clone(),
            net,
            watch: watch.clone(),
        };
        rt.handle().spawn(beats.run(stopped));
        if tracing::enabled!(target: "pinax_raft_trace", tracing::Level::DEBUG) {
            rt.handle().spawn(trace_roles(raft.metrics(), group, node_id));
        }
        Ok(RaftGroup {
            group,
            node_id,
            metrics: raft.metrics(),
            raft,
            rt,
            synced_term: AtomicU64::new(0),
            lease_until: Mutex::new(None),
            lease: Duration::from_millis(timing.election_min_ms / 2),
            unsettled: Mutex::new(None),
            recent,
            _heartbeats: stop,
            handover,
            reconfiguring: Mutex::new(()),
            follower_lease: Duration::from_millis(timing.election_max_ms),
            proposals: Mutex::new(Proposals::default()),
            tail_reads,
            hold,
            watch,
        })
    }

    /// How many reads of log entries (to apply them, to send them to followers)
    /// were answered from the log's in-memory tail rather than the engine.
    pub fn entries_read_from_memory(&self) -> u64 {
        self.tail_reads.load(Ordering::Relaxed)
    }

    /// Run `f` to completion, driving the group's tasks meanwhile (a Raft message
    /// from a peer is served this way: see [`GroupRuntime`]).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Serve a Raft message from a peer (its reply bytes), driving the group's
    /// tasks meanwhile. Any message but a quiesce request (from a leader or a
    /// candidate) releases a follower its leader held quiet, once handled (an
    /// AppendEntries has refreshed the follower's lease on its leader by then, so
    /// the election timer does not fire at once).
    pub fn serve(&self, kind: MsgKind, body: &[u8]) -> Result<Vec<u8>, String> {
        if kind == MsgKind::Quiesce {
            return self.hold_quiet(body);
        }
        let out = self.rt.block_on(crate::network::serve(&self.raft, self.group, kind, body));
        self.hold.release();
        out
    }

    /// A quiescing leader's [`QuiesceRequest`]: hold the election timer off if
    /// this replica follows that leader in that term and has applied the same last
    /// entry (nothing left to do), and the node watches its peers. The reply:
    /// whether it holds.
    fn hold_quiet(&self, body: &[u8]) -> Result<Vec<u8>, String> {
        let req: QuiesceRequest = decode(body)?;
        let leader = req.vote.leader_id().voted_for();
        let ok = {
            let m = self.raft.metrics();
            let m = m.borrow();
            m.state == ServerState::Follower
                && req.vote.is_committed()
                && m.vote.leader_id() == req.vote.leader_id()
                && leader.is_some()
                && m.current_leader == leader
                && m.last_applied == req.last_log_id
                && m.last_log_index == req.last_log_id.map(|l| l.index)
        };
        let addr = leader.and_then(|l| self.metrics.borrow().membership_config.membership().get_node(&l).map(|n| n.addr.clone()));
        let held = match (ok, leader, addr, &self.watch) {
            (true, Some(l), Some(addr), Some(watch)) => {
                self.hold.hold(l, &addr, watch);
                true
            }
            _ => false,
        };
        Ok(encode(&held))
    }

    /// The leader holding this follower's election timer off, if one is.
    pub fn held_by(&self) -> Option<NodeId> {
        self.hold.leader()
    }

    /// The group's runtime (a transport in tests serves a peer's message on it).
    pub fn runtime(&self) -> Arc<GroupRuntime> {
        self.rt.clone()
    }

    /// Whether the group is quiesced now (see the module docs).
    pub fn is_quiesced(&self) -> bool {
        self.rt.quiescence().is_quiesced()
    }

    /// How many times the group quiesced since it started.
    pub fn times_quiesced(&self) -> u64 {
        self.rt.quiescence().times_quiesced()
    }

    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    pub fn group(&self) -> u64 {
        self.group
    }

    /// Make `members` (node id → RPC address) the group's first configuration. A
    /// group that already has one is left as it is.
    pub fn initialize(&self, members: &BTreeMap<NodeId, String>) -> Result<(), GroupError> {
        let nodes: BTreeMap<NodeId, BasicNode> = members.iter().map(|(id, a)| (*id, BasicNode::new(a))).collect();
        match self.rt.block_on(self.raft.initialize(nodes)) {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(fatal(e)),
        }
    }

    /// The leader as this replica knows it (id, address).
    pub fn leader(&self) -> Option<(NodeId, String)> {
        let m = self.metrics.borrow();
        let id = m.current_leader?;
        let addr = m.membership_config.membership().get_node(&id).map(|n| n.addr.clone()).unwrap_or_default();
        Some((id, addr))
    }

    /// Whether this replica knows a leader of its group (itself included).
    pub fn has_leader(&self) -> bool {
        self.metrics.borrow().current_leader.is_some()
    }

    fn not_leader(&self) -> GroupError {
        match self.leader() {
            Some((id, addr)) if id != self.node_id => GroupError::NotLeader { leader: Some(id), leader_addr: Some(addr) },
            _ => GroupError::NotLeader { leader: None, leader_addr: None },
        }
    }

    /// Wait (up to `timeout`) until the group has a leader; its id.
    pub fn wait_for_leader(&self, timeout: Duration) -> Option<NodeId> {
        let mut rx = self.raft.metrics();
        self.rt.block_on(async {
            tokio::time::timeout(timeout, async {
                loop {
                    if let Some(l) = rx.borrow().current_leader {
                        return Some(l);
                    }
                    if rx.changed().await.is_err() {
                        return None;
                    }
                }
            })
            .await
            .ok()
            .flatten()
        })
    }

    /// Whether this replica is the leader right now, as far as it knows (no
    /// waiting, no check that it applied everything; see `leader_term`).
    pub fn leads_now(&self) -> bool {
        self.is_leader_now().is_some()
    }

    fn is_leader_now(&self) -> Option<u64> {
        let m = self.metrics.borrow();
        (m.state == ServerState::Leader).then_some(m.current_term)
    }

    /// The current term if this replica leads and has applied every entry committed
    /// before it (see the module docs).
    pub fn leader_term(&self) -> Result<u64, GroupError> {
        self.check_not_handing_over()?;
        let term = match self.is_leader_now() {
            Some(t) => t,
            None => {
                // No leader known yet (start-up, an election): wait for one.
                if self.metrics.borrow().current_leader.is_none() {
                    self.wait_for_leader(ELECTION_WAIT);
                }
                self.is_leader_now().ok_or_else(|| self.not_leader())?
            }
        };
        if self.synced_term.load(Ordering::Acquire) != term {
            let started = Instant::now();
            self.linearize()?;
            self.apply_whole_log()?;
            self.settle(term)?;
            self.synced_term.store(term, Ordering::Release);
            *self.lease_until.lock() = Some(started + self.lease);
        }
        Ok(term)
    }

    /// After a write timed out in term `term`: wait (briefly) until its entry is
    /// applied here; an entry of an earlier term was settled by `linearize` (the
    /// new term's first entry commits or a new leader discarded it).
    fn settle(&self, term: u64) -> Result<(), GroupError> {
        let Some((t, index)) = *self.unsettled.lock() else {
            return Ok(());
        };
        if t == term {
            let mut rx = self.raft.metrics();
            let applied = self.rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(1), async {
                    loop {
                        if rx.borrow().last_applied.is_some_and(|l| l.index >= index) {
                            return true;
                        }
                        if rx.changed().await.is_err() {
                            return false;
                        }
                    }
                })
                .await
                .unwrap_or(false)
            });
            if !applied {
                return Err(GroupError::Timeout);
            }
        }
        *self.unsettled.lock() = None;
        Ok(())
    }

    /// Wait (bounded like a write) until this leader has applied every entry of
    /// its log. A leader holds every committed entry, and every entry in its log
    /// commits under it; `linearize` alone is not enough after a restart: a
    /// leader that crashed and came back before anyone else stood leads again in
    /// its term (openraft resumes a committed vote of its own without an
    /// election) and takes the first entry of its term, or its stored committed
    /// id (written at most every 100 ms), for what its reads must wait for. Its
    /// state machine lost the applies that were not flushed, so entries
    /// committed (and acknowledged) before the crash would be missing from the
    /// reads it serves until its first round to the followers commits them
    /// again. An elected leader's log ends with the blank entry `linearize`
    /// waits for anyway.
    fn apply_whole_log(&self) -> Result<(), GroupError> {
        let mut rx = self.raft.metrics();
        let caught_up = self.rt.block_on(async {
            tokio::time::timeout(REPLICATE_TIMEOUT, async {
                loop {
                    {
                        let m = rx.borrow_and_update();
                        if m.state != ServerState::Leader {
                            return false;
                        }
                        if m.last_applied.map(|l| l.index) >= m.last_log_index {
                            return true;
                        }
                    }
                    if rx.changed().await.is_err() {
                        return false;
                    }
                }
            })
            .await
        });
        match caught_up {
            Err(_) => Err(GroupError::Timeout),
            Ok(true) => Ok(()),
            Ok(false) => Err(self.not_leader()),
        }
    }

    fn linearize(&self) -> Result<(), GroupError> {
        // Bounded like a write: without a quorum the round may never end.
        match self.rt.block_on(async { tokio::time::timeout(REPLICATE_TIMEOUT, self.raft.ensure_linearizable()).await }) {
            Err(_) => Err(GroupError::Timeout),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(_))) => Err(self.not_leader()),
            Ok(Err(RaftError::Fatal(f))) => Err(fatal(f)),
        }
    }

    /// The current term if a read served now cannot miss an acknowledged write.
    pub fn read_barrier(&self) -> Result<u64, GroupError> {
        let term = self.leader_term()?;
        let single_voter = self.metrics.borrow().membership_config.membership().voter_ids().count() <= 1;
        if single_voter {
            return Ok(term);
        }
        let now = Instant::now();
        if self.lease_until.lock().is_some_and(|until| now < until) {
            return Ok(term);
        }
        self.linearize()?;
        let mut lease = self.lease_until.lock();
        let until = now + self.lease;
        if lease.is_none_or(|l| l < until) {
            *lease = Some(until);
        }
        Ok(term)
    }

    /// When write request `id` was applied here, if it was lately. Meaningful to a
    /// leader after [`RaftGroup::leader_term`] (everything committed is applied).
    pub fn applied_request(&self, id: u128) -> Option<HybridTime> {
        self.recent.lock().get(id)
    }

    /// Replicate `cmd` and return once it is committed and applied here.
    pub fn replicate(&self, cmd: Command) -> Result<(), GroupError> {
        self.replicate_then(cmd, &mut || {})
    }

    /// [`RaftGroup::replicate`], calling `queued` once `cmd` has its place in the
    /// log order (every write handed over after that call is applied after `cmd`),
    /// before waiting for it to be durable and applied. A tablet decides writes
    /// under its lock and lets the next writer in from `queued`, so writes of
    /// different rows are in flight together.
    ///
    /// Group commit: openraft 0.9 makes each entry durable (one fsync) before it
    /// takes the next one, so one entry per write would cap a tablet at one write
    /// per fsync. Writes handed over while an entry is being proposed wait in a
    /// queue; when it is done, the first of them proposes everything queued as one
    /// entry ([`Command::merge`], up to [`MERGE_BYTES`]) and hands the turn on.
    /// A merged entry succeeds or fails as a whole: every write in it gets the
    /// same outcome.
    pub fn replicate_then(&self, cmd: Command, queued: &mut dyn FnMut()) -> Result<(), GroupError> {
        if let Err(e) = self.check_not_handing_over() {
            queued();
            return Err(e);
        }
        let me = Arc::new(Proposal::default());
        let lead = {
            let mut p = self.proposals.lock();
            p.queue.push((cmd, me.clone()));
            !std::mem::replace(&mut p.busy, true)
        };
        queued();
        if !lead {
            let mut st = me.state.lock();
            loop {
                match &*st {
                    ProposalState::Done(res) => return res.clone(),
                    ProposalState::Propose => break,
                    ProposalState::Queued => me.changed.wait(&mut st),
                }
            }
        }
        // This caller's turn: its write is first in the queue.
        let (cmds, waiters) = {
            let mut p = self.proposals.lock();
            let n = Command::mergeable(p.queue.iter().map(|(c, _)| c), MERGE_BYTES);
            p.queue.drain(..n).unzip::<_, _, Vec<Command>, Vec<Arc<Proposal>>>()
        };
        let mut turn = Turn { group: self, waiters, res: None };
        let res = self.propose(Command::merge(cmds));
        turn.res = Some(res.clone());
        res
    }

    /// Leader: replicate the entry that splits the group's tablet
    /// ([`Command::split`], alone in its entry) and return once it is committed
    /// and applied here (by the group's [`crate::SplitHook`]).
    /// Refused while a membership change is under way here (a move of one of
    /// its replicas: [`RaftGroup::replace_voter`], a new member catching up
    /// first) or the membership is joint: a split's halves start from the
    /// members the entry applies with.
    pub fn split_tablet(&self, payload: Vec<u8>) -> Result<(), GroupError> {
        let Some(_one) = self.reconfiguring.try_lock() else {
            return Err(GroupError::Refused("a replica of this tablet is moving; split it afterwards".into()));
        };
        let m = self.metrics.borrow().clone();
        let membership = m.membership_config.membership();
        if membership.get_joint_config().len() > 1 {
            return Err(GroupError::Refused("this tablet's group is changing its members; split it afterwards".into()));
        }
        self.replicate(Command::split(payload))
    }

    /// Propose one entry and wait until it is committed and applied here.
    fn propose(&self, cmd: Command) -> Result<(), GroupError> {
        let res = self.rt.block_on(async { tokio::time::timeout(REPLICATE_TIMEOUT, self.raft.client_write(cmd)).await });
        let Ok(res) = res else {
            let m = self.metrics.borrow().clone();
            *self.unsettled.lock() = Some((m.current_term, m.last_log_index.unwrap_or(0)));
            self.synced_term.store(0, Ordering::Release);
            return Err(GroupError::Timeout);
        };
        match res {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(GroupError::NotLeader { leader: f.leader_id.filter(|l| *l != self.node_id), leader_addr: f.leader_node.map(|n| n.addr) })
            }
            Err(RaftError::APIError(e)) => Err(fatal(e)),
            Err(RaftError::Fatal(f)) => Err(fatal(f)),
        }
    }

    /// Leader: make `add` (node id, address) a voter, in place of `remove` if set:
    /// it first joins as a learner and catches up (from the log, or a snapshot),
    /// then one membership change makes the new voter set. Returns the group's
    /// voters (id, address) after it, for the caller to record.
    ///
    /// When `add` is a voter already, nothing changes, whatever `remove` says: the
    /// caller decided from a record that lags the group (an earlier change that
    /// it could not record), and removing `remove` now would leave the group a
    /// voter short. The answer (the voters as they are) corrects the record.
    pub fn replace_voter(&self, add: (NodeId, String), remove: Option<NodeId>, timeout: Duration) -> Result<Vec<(NodeId, String)>, GroupError> {
        let m = self.metrics.borrow().clone();
        if m.state != ServerState::Leader {
            return Err(self.not_leader());
        }
        let membership = m.membership_config.membership();
        let mut voters: std::collections::BTreeSet<NodeId> = membership.voter_ids().collect();
        if voters.contains(&add.0) {
            return Ok(voter_nodes(membership)); // done before
        }
        let Some(_one) = self.reconfiguring.try_lock() else {
            return Err(GroupError::Refused("the tablet is splitting or another of its replicas is moving".into()));
        };
        let res = self.rt.block_on(async {
            tokio::time::timeout(timeout, async {
                self.raft.add_learner(add.0, BasicNode::new(&add.1), true).await?;
                if let Some(r) = remove {
                    voters.remove(&r);
                }
                voters.insert(add.0);
                self.raft.change_membership(voters, false).await
            })
            .await
        });
        match res {
            Err(_) => Err(GroupError::Timeout),
            Ok(Ok(r)) => Ok(match &r.membership {
                Some(m) => voter_nodes(m),
                None => voter_nodes(self.metrics.borrow().membership_config.membership()),
            }),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Err(self.not_leader()),
            Ok(Err(RaftError::APIError(e))) => Err(GroupError::Refused(e.to_string())),
            Ok(Err(e)) => Err(fatal(e)),
        }
    }

    /// Leader, its leadership confirmed by a round with a quorum: every node of
    /// the group's membership (the voters of each configuration of a joint one,
    /// and the learners). A node not among them holds no replica the group can
    /// count on, so its replica may be dropped: whatever adds that node back
    /// adds it as a new learner that catches up first. (A node's own view cannot
    /// say this: a replica cut off or down while a change made it a voter does
    /// not know it is one.)
    pub fn confirmed_members(&self) -> Result<Vec<(NodeId, String)>, GroupError> {
        if self.metrics.borrow().state != ServerState::Leader {
            return Err(self.not_leader());
        }
        self.linearize()?;
        Ok(self.metrics.borrow().membership_config.membership().nodes().map(|(id, n)| (*id, n.addr.clone())).collect())
    }

    /// The addresses of every member of the group as this replica knows them.
    pub fn member_addrs(&self) -> Vec<String> {
        self.metrics.borrow().membership_config.membership().nodes().map(|(_, n)| n.addr.clone()).collect()
    }

    /// NotLeader naming the target while this leader hands over.
    fn check_not_handing_over(&self) -> Result<(), GroupError> {
        match self.handing_over_to() {
            Some(to) => {
                let addr = self.metrics.borrow().membership_config.membership().get_node(&to).map(|n| n.addr.clone());
                Err(GroupError::NotLeader { leader: Some(to), leader_addr: addr })
            }
            None => Ok(()),
        }
    }

    fn handing_over_to(&self) -> Option<NodeId> {
        handing_over(&self.handover, &self.raft)
    }

    /// Leader: stop serving and sending heartbeats for [`HANDOVER`] so that voter
    /// `to`, which has every entry of this leader's log, can win an election
    /// (the caller then tells it to [`RaftGroup::campaign`]). Returns `to`'s address.
    pub fn hand_over(&self, to: NodeId) -> Result<String, GroupError> {
        let m = self.metrics.borrow().clone();
        if m.state != ServerState::Leader || self.handing_over_to().is_some() {
            return Err(self.not_leader());
        }
        let membership = m.membership_config.membership();
        let addr = match membership.get_node(&to) {
            Some(n) if to != self.node_id && membership.voter_ids().any(|v| v == to) => n.addr.clone(),
            _ => return Err(GroupError::Refused(format!("node {to} is not another voter of group {}", self.group))),
        };
        let matched = m.replication.as_ref().and_then(|r| r.get(&to).cloned().flatten()).map(|l| l.index);
        if matched != m.last_log_index {
            return Err(GroupError::Refused(format!("node {to} has not caught up ({matched:?} of {:?})", m.last_log_index)));
        }
        *self.handover.lock() = Some(Handover { until: Instant::now() + HANDOVER, to, term: m.current_term });
        Ok(addr)
    }

    /// Leader: serve again (a hand-over that could not start).
    pub fn cancel_hand_over(&self) {
        *self.handover.lock() = None;
    }

    /// A new group (a split's half, seeded with its parent's members, none of
    /// them its leader yet): stand for election now rather than after an
    /// election timeout, and again every [`FIRST_ELECTION_RETRY`] while no
    /// leader is known (the other members open their replicas of the group a
    /// moment later: a vote asked before is lost), at most
    /// [`FIRST_ELECTION_TRIES`] times.
    pub fn elect_if_leaderless(&self) {
        let raft = self.raft.clone();
        let group = self.group;
        self.hold.release();
        self.rt.quiescence().wake();
        self.rt.handle().spawn(async move {
            for attempt in 0..FIRST_ELECTION_TRIES {
                if attempt > 0 {
                    tokio::time::sleep(FIRST_ELECTION_RETRY).await;
                }
                if raft.metrics().borrow().current_leader.is_some() {
                    return;
                }
                if let Err(e) = raft.trigger().elect().await {
                    tracing::warn!(group, error = %e, "starting the first election of a new group");
                    return;
                }
            }
        });
    }

    /// Follower asked to take over: start an election once the followers' lease
    /// on the current leader (which stopped its heartbeats) has run out.
    pub fn campaign(&self) {
        let raft = self.raft.clone();
        let wait = self.follower_lease + Duration::from_millis(100);
        let group = self.group;
        // Its timers run again (the task below sleeps on one), and a leader
        // holding it quiet is not waited for.
        self.hold.release();
        self.rt.quiescence().wake();
        self.rt.handle().spawn(async move {
            tokio::time::sleep(wait).await;
            if raft.metrics().borrow().state != ServerState::Leader {
                if let Err(e) = raft.trigger().elect().await {
                    tracing::warn!(group, error = %e, "starting an election to take over");
                }
            }
        });
    }

    /// Ask the group to build a snapshot now (which lets it purge its log behind
    /// the applied id): the shared log names groups whose old entries keep its
    /// files from being freed ([`crate::SharedLog::purge_expired_files`]).
    pub fn request_snapshot(&self) {
        let raft = self.raft.clone();
        let group = self.group;
        self.rt.quiescence().wake();
        self.rt.handle().spawn(async move {
            if let Err(e) = raft.trigger().snapshot().await {
                tracing::debug!(group, error = %e, "asking for a snapshot");
            }
        });
    }

    /// The group's voters (this replica's view).
    pub fn voters(&self) -> Vec<NodeId> {
        self.metrics.borrow().membership_config.membership().voter_ids().collect()
    }

    /// Why the group's Raft core stopped on its own (openraft stops it for good at
    /// a storage error), if it did; `None` while it runs or after a
    /// [`RaftGroup::shutdown`]. The group then answers every call with
    /// [`GroupError::Fatal`] until its owner opens the replica again.
    pub fn stopped_by(&self) -> Option<String> {
        match &self.metrics.borrow().running_state {
            Ok(()) | Err(openraft::error::Fatal::Stopped) => None,
            Err(f) => Some(f.to_string()),
        }
    }

    /// Stop the group's tasks (the node is closing the tablet).
    pub fn shutdown(&self) {
        if let Err(e) = self.rt.block_on(self.raft.shutdown()) {
            tracing::warn!(group = self.group, error = %e, "raft shutdown");
        }
    }
}

/// The Raft side of the transaction trace (`RUST_LOG=…,pinax_raft_trace=debug`,
/// apart from `pinax_trace`: a task per group, which may change when groups
/// quiesce):
/// every change of this replica's role, term, known leader, vote or
/// membership, with its log's last index and applied id then, so that an
/// election can be followed across nodes (who voted for whom, with which log).
async fn trace_roles(mut rx: tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, openraft::BasicNode>>, group: u64, node: NodeId) {
    let mut last = None;
    loop {
        let now = {
            let m = rx.borrow_and_update();
            let voters: Vec<NodeId> = m.membership_config.membership().voter_ids().collect();
            let key = (format!("{:?}", m.state), m.current_term, m.current_leader, m.vote.to_string(), voters);
            if last.as_ref() != Some(&key) {
                tracing::debug!(
                    target: "pinax_raft_trace",
                    node,
                    "raft group={group} state={} term={} leader={:?} vote={} voters={:?} last_log={:?} applied={:?}",
                    key.0,
                    key.1,
                    key.2,
                    key.3,
                    key.4,
                    m.last_log_index,
                    m.last_applied.map(|l| l.index)
                );
            }
            key
        };
        last = Some(now);
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// The voters of `membership` with their addresses.
fn voter_nodes(membership: &openraft::Membership<NodeId, BasicNode>) -> Vec<(NodeId, String)> {
    membership.voter_ids().map(|id| (id, membership.get_node(&id).map(|n| n.addr.clone()).unwrap_or_default())).collect()
}
