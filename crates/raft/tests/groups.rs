//! Three replicas of one group in one process, talking through an in-process
//! transport: election, replication to every engine, NotLeader answers on
//! followers, failover after the leader stops, a replica catching up, and idle
//! groups quiescing.

use parking_lot::Mutex;
use pinax_common::HybridClock;
use pinax_engine::{Cf, KvEngine, KvIterator, OwnedBatch, Snapshot, WriteBatch};
use pinax_engine_mem::MemEngine;
use pinax_raft::network::{MsgKind, Transport, TransportError};
use pinax_raft::quiesce::PeerWatch;
use pinax_raft::{Command, GroupError, NodeId, RaftGroup, RaftTiming};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Router {
    /// Each replica's group.
    groups: Mutex<HashMap<NodeId, Arc<RaftGroup>>>,
    /// Added to every AppendEntries carrying entries (a slow follower disk).
    append_delay: Mutex<Duration>,
    /// Added to the next message to each of these nodes (a slow link, once).
    delay_next: Mutex<HashMap<NodeId, Duration>>,
    /// The "node's" watch of its peers (one for the three replicas here: each
    /// holds its own followers), when groups of several members may quiesce.
    watch: Option<Arc<PeerWatch>>,
}

impl Transport for Router {
    fn call(&self, target: NodeId, _addr: &str, _group: u64, kind: MsgKind, body: Vec<u8>) -> Result<Vec<u8>, TransportError> {
        let g = self.groups.lock().get(&target).cloned().ok_or_else(|| TransportError::Unreachable(format!("node {target} is down")))?;
        let delay = self.delay_next.lock().remove(&target);
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        // Heartbeats are a few dozen bytes; a body this long carries entries.
        if kind == MsgKind::AppendEntries && body.len() > 200 {
            let delay = *self.append_delay.lock();
            std::thread::sleep(delay);
        }
        g.serve(kind, &body).map_err(TransportError::Other)
    }

    fn peer_watch(&self) -> Option<Arc<PeerWatch>> {
        self.watch.clone()
    }
}

/// Groups never quiesce in the tests that do not test it (`quiesce_after_ms`).
const TIMING: RaftTiming = RaftTiming { heartbeat_ms: 50, rpc_timeout_ms: 250, election_min_ms: 300, election_max_ms: 600, quiesce_after_ms: 3_600_000 };
/// Quiescing after 300 ms without a request.
const QUIET: RaftTiming = RaftTiming { quiesce_after_ms: 300, ..TIMING };

struct Replica {
    engine: Arc<MemEngine>,
    group: Arc<RaftGroup>,
}

fn start(rt: &tokio::runtime::Runtime, router: &Arc<Router>, id: NodeId, engine: Arc<MemEngine>) -> Replica {
    start_timed(rt, router, id, engine, TIMING)
}

fn start_timed(rt: &tokio::runtime::Runtime, router: &Arc<Router>, id: NodeId, engine: Arc<MemEngine>, timing: RaftTiming) -> Replica {
    let group = Arc::new(RaftGroup::start(rt.handle(), 7, id, engine.clone(), Arc::new(HybridClock::system()), router.clone(), timing).unwrap());
    router.groups.lock().insert(id, group.clone());
    Replica { engine, group }
}

fn put(key: &str) -> Command {
    put_sized(key, 1)
}

fn put_sized(key: &str, value_len: usize) -> Command {
    let mut b = OwnedBatch::new();
    b.put(Cf::Regular, key.as_bytes(), &vec![b'v'; value_len]);
    Command { ht: 1, batch: b.into_bytes().into(), request: 0 }
}

fn has(e: &MemEngine, key: &str) -> bool {
    e.get(Cf::Regular, key.as_bytes()).unwrap().is_some()
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Three replicas of one group (nodes 1-3, fresh engines), its first leader elected.
struct Group3 {
    rt: tokio::runtime::Runtime,
    router: Arc<Router>,
    replicas: BTreeMap<NodeId, Replica>,
    leader: NodeId,
}

fn three_replicas() -> Group3 {
    three_replicas_with(Router::default(), TIMING)
}

fn three_replicas_with(router: Router, timing: RaftTiming) -> Group3 {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(8).enable_all().build().unwrap();
    let router = Arc::new(router);
    let replicas: BTreeMap<NodeId, Replica> = (1..=3).map(|id| (id, start_timed(&rt, &router, id, Arc::new(MemEngine::new()), timing))).collect();
    let members: BTreeMap<NodeId, String> = (1..=3).map(|id| (id, format!("node-{id}"))).collect();
    replicas[&1].group.initialize(&members).unwrap();
    let leader = replicas[&1].group.wait_for_leader(Duration::from_secs(10)).expect("a leader");
    Group3 { rt, router, replicas, leader }
}

#[test]
fn replicate_fail_over_and_catch_up() {
    let Group3 { rt, router, mut replicas, leader } = three_replicas();
    replicas[&leader].group.leader_term().unwrap();
    replicas[&leader].group.replicate(put("a")).unwrap();
    for r in replicas.values() {
        eventually("'a' on every replica", || has(&r.engine, "a"));
    }

    // A follower refuses writes and names the leader.
    let follower = *replicas.keys().find(|id| **id != leader).unwrap();
    match replicas[&follower].group.replicate(put("x")) {
        Err(GroupError::NotLeader { leader: Some(l), .. }) => assert_eq!(l, leader),
        other => panic!("expected NotLeader naming {leader}, got {other:?}"),
    }
    assert!(matches!(replicas[&follower].group.read_barrier(), Err(GroupError::NotLeader { .. })));

    // The leader stops: the other two elect one of themselves and go on.
    let old = replicas.remove(&leader).unwrap();
    router.groups.lock().remove(&leader);
    old.group.shutdown();
    let t0 = Instant::now();
    let new_leader = loop {
        let l = replicas.values().find_map(|r| r.group.leader_term().ok().map(|_| r.group.raft().metrics().borrow().id));
        if let Some(l) = l {
            break l;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no new leader");
    };
    assert_ne!(new_leader, leader);
    replicas[&new_leader].group.replicate(put("b")).unwrap();
    replicas[&new_leader].group.read_barrier().unwrap();
    for r in replicas.values() {
        eventually("'b' on the survivors", || has(&r.engine, "b"));
    }

    // The old leader comes back over its own engine: it replays its log, learns
    // the new term and catches up.
    let back = start(&rt, &router, leader, old.engine.clone());
    eventually("the old leader catching up", || has(&back.engine, "b"));
    assert!(has(&back.engine, "a"));
    assert!(matches!(back.group.replicate(put("y")), Err(GroupError::NotLeader { .. })));
    for r in replicas.values() {
        r.group.shutdown();
    }
    back.group.shutdown();
}

/// A membership change asked for from a record that lags the group (the node
/// to add is a voter already) changes nothing and answers the voters as they
/// are; the leader names every member (learners too) once confirmed; a
/// follower names none.
#[test]
fn replacing_a_voter_that_is_one_already_changes_nothing() {
    let Group3 { rt, router, replicas, leader } = three_replicas();
    let lg = &replicas[&leader].group;
    lg.leader_term().unwrap();
    lg.replicate(put("a")).unwrap();
    let other = *replicas.keys().find(|id| **id != leader).unwrap();
    let third = *replicas.keys().find(|id| **id != leader && **id != other).unwrap();
    let voters = lg.replace_voter((other, format!("node-{other}")), Some(third), Duration::from_secs(10)).unwrap();
    assert_eq!(voters.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(voters[0].1, "node-1");
    assert_eq!(lg.voters(), vec![1, 2, 3], "a voter was removed on a stale request");
    // Node 4 joins as a learner, then replaces the third voter.
    let four = start(&rt, &router, 4, Arc::new(MemEngine::new()));
    let voters = lg.replace_voter((4, "node-4".into()), Some(third), Duration::from_secs(10)).unwrap();
    let mut expect: Vec<NodeId> = vec![1, 2, 3, 4].into_iter().filter(|id| *id != third).collect();
    expect.sort();
    assert_eq!(voters.iter().map(|(id, _)| *id).collect::<Vec<_>>(), expect);
    let members: Vec<NodeId> = lg.confirmed_members().unwrap().into_iter().map(|(id, _)| id).collect();
    assert_eq!(members, expect, "the removed voter is no member");
    eventually("'a' on the new voter", || has(&four.engine, "a"));
    assert!(matches!(replicas[&other].group.confirmed_members(), Err(GroupError::NotLeader { .. })));
    // A learner is a member.
    let five = start(&rt, &router, 5, Arc::new(MemEngine::new()));
    lg.block_on(lg.raft().add_learner(5, openraft::BasicNode::new("node-5"), true)).unwrap();
    assert!(lg.confirmed_members().unwrap().iter().any(|(id, a)| *id == 5 && a == "node-5"));
    for g in replicas.values().map(|r| &r.group).chain([&four.group, &five.group]) {
        g.shutdown();
    }
}

/// Appends slower than the heartbeat interval still commit, and heartbeats keep
/// the leader in place. (openraft 0.9 gives each AppendEntries its heartbeat
/// interval; when that was the 100 ms heartbeat, megabyte appends at RF 3 timed
/// out, were sent again and timed out again, and a 200k-row INSERT never committed.)
#[test]
fn appends_slower_than_a_heartbeat_commit() {
    let Group3 { rt: _rt, router, replicas, leader } = three_replicas();
    let term = replicas[&leader].group.leader_term().unwrap();

    *router.append_delay.lock() = Duration::from_millis(3 * TIMING.heartbeat_ms);
    for i in 0..5 {
        replicas[&leader].group.replicate(put_sized(&format!("k{i}"), 64 << 10)).unwrap();
    }
    for r in replicas.values() {
        eventually("every write on every replica", || (0..5).all(|i| has(&r.engine, &format!("k{i}"))));
    }
    // Idle for several election timeouts: the leader's heartbeats hold its term.
    std::thread::sleep(Duration::from_millis(3 * TIMING.election_max_ms));
    assert_eq!(replicas[&leader].group.leader_term().unwrap(), term, "the leader was deposed");
    for r in replicas.values() {
        r.group.shutdown();
    }
}

#[test]
fn concurrent_writes_share_entries_and_keep_their_request_ids() {
    let Group3 { rt: _rt, router, replicas, leader } = three_replicas();
    let g = &replicas[&leader].group;
    g.leader_term().unwrap();
    // Each entry takes a while to reach the followers (a slow disk): writes handed
    // over meanwhile wait and go together in the next entry.
    *router.append_delay.lock() = Duration::from_millis(20);
    let before = g.raft().metrics().borrow().last_log_index.unwrap_or(0);
    const WRITERS: u128 = 12;
    std::thread::scope(|s| {
        for i in 0..WRITERS {
            s.spawn(move || {
                // Odd ids, as clients' are (2 would be the merged marker).
                let cmd = Command { ht: 100 + i as u64, request: 2 * i + 1, ..put_sized(&format!("w{i:02}"), 10) };
                g.replicate(cmd).unwrap();
            });
        }
    });
    let entries = g.raft().metrics().borrow().last_log_index.unwrap_or(0) - before;
    assert!(entries < WRITERS as u64, "{WRITERS} concurrent writes took {entries} entries");
    for i in 0..WRITERS {
        assert_eq!(g.applied_request(2 * i + 1).map(|ht| ht.0), Some(100 + i as u64), "request {i}");
    }
    for r in replicas.values() {
        eventually("every write on every replica", || (0..WRITERS).all(|i| has(&r.engine, &format!("w{i:02}"))));
    }
    // Entries just appended were applied and sent from the log's in-memory tail.
    for r in replicas.values() {
        assert!(r.group.entries_read_from_memory() > 0, "a replica read every entry from the engine");
    }
    for r in replicas.values() {
        r.group.shutdown();
    }
}

/// Leadership moves to a chosen follower on request (openraft 0.9 has no transfer:
/// the leader pauses, the target campaigns once the others' leases ran out), and
/// writes go on there; a target that has not caught up, or is not a voter, is
/// refused without pausing the leader. Repeated, each time to a chosen node, so a
/// win by luck (another follower's timer) would show.
#[test]
fn leadership_is_handed_over_to_a_chosen_follower() {
    let Group3 { rt: _rt, router: _router, replicas, mut leader } = three_replicas();
    assert!(matches!(replicas[&leader].group.hand_over(9), Err(GroupError::Refused(_))), "not a voter");
    replicas[&leader].group.leader_term().unwrap();
    for round in 0..4 {
        replicas[&leader].group.replicate(put(&format!("k{round}"))).unwrap();
        let to = (1..=3).find(|id| *id != leader && (id + round) % 2 == 0).unwrap_or_else(|| (1..=3).find(|id| *id != leader).unwrap());
        eventually("the target caught up", || has(&replicas[&to].engine, &format!("k{round}")) && replicas[&leader].group.hand_over(to).is_ok());
        // Paused: the old leader serves nothing and names the target.
        match replicas[&leader].group.replicate(put("paused")) {
            Err(GroupError::NotLeader { leader: Some(l), .. }) => assert_eq!(l, to),
            other => panic!("expected NotLeader naming {to}, got {other:?}"),
        }
        let t0 = Instant::now();
        replicas[&to].group.campaign();
        eventually("the target leading", || replicas[&to].group.leader_term().is_ok());
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(2), "hand-over took {took:?}");
        eventually("the old leader stepping down", || !replicas[&leader].group.leads_now());
        leader = to;
        replicas[&leader].group.replicate(put(&format!("after{round}"))).unwrap();
    }
    for (id, r) in &replicas {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(0..4).all(|i| has(&r.engine, &format!("after{i}"))) {
            if Instant::now() > deadline {
                let m: Vec<String> = replicas.iter().map(|(id, r)| format!("{id}: {:?}", r.group.raft().metrics().borrow())).collect();
                panic!("replica {id} lacks a write: {m:#?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!has(&r.engine, "paused"));
    }
    // Only now: a replica that has the last entry but not yet its commit index
    // learns it from the others' next heartbeat (shutting each down once checked
    // left the last one waiting forever).
    for r in replicas.values() {
        r.group.shutdown();
    }
}

/// A replica too far behind for the leader's log (purged past it) is sent a
/// snapshot: a file of the tablet's entries, written from the leader's key ranges
/// and ingested by the receiver into its own store under its own prefix (engines
/// are views of three RocksDB stores, each with a different id, and the receiver's
/// store holds a neighbour that must stay as it was). The log then goes on from it.
#[test]
fn a_replica_behind_the_purged_log_is_sent_a_snapshot_file_and_ingests_it() {
    use pinax_engine_rocks::{KeySpace, RocksConfig, RocksEngine, RocksStore, SharedResources};
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let router = Arc::new(Router::default());
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let cfg = RocksConfig::with_shared(SharedResources::new(8 << 20, 8 << 20));
    let stores: Vec<RocksStore> = dirs.iter().map(|d| RocksStore::open(d.path().join("rocksdb"), &cfg).unwrap()).collect();
    let engine = |i: usize| Arc::new(stores[i].engine(KeySpace::of_id(5 + 4 * i as u64), None, Some(dirs[i].path().join("scratch"))).unwrap());
    let neighbour = stores[2].engine(KeySpace::of_id(4), None, None).unwrap();
    let mut b = neighbour.new_batch();
    for cf in Cf::ALL {
        b.put(cf, b"", b"n");
        b.put(cf, b"\xff\xff", b"n");
    }
    neighbour.write(b, pinax_engine::WriteOptions::default()).unwrap();
    let start_rocks = |id: NodeId, e: Arc<RocksEngine>| {
        let g = Arc::new(RaftGroup::start(rt.handle(), 7, id, e, Arc::new(HybridClock::system()), router.clone(), TIMING).unwrap());
        router.groups.lock().insert(id, g.clone());
        g
    };
    let (e1, e2, e3) = (engine(0), engine(1), engine(2));
    let g1 = start_rocks(1, e1.clone());
    let g2 = start_rocks(2, e2.clone());
    let members: BTreeMap<NodeId, String> = (1..=3).map(|id| (id, format!("node-{id}"))).collect();
    g1.initialize(&members).unwrap();
    let leader = g1.wait_for_leader(Duration::from_secs(10)).expect("a leader");
    let lg = if leader == 1 { &g1 } else { &g2 };
    lg.leader_term().unwrap();
    // More entries than the log keeps behind a snapshot (2,000), node 3 absent.
    const N: usize = 2_600;
    for i in 0..N {
        lg.replicate(put_sized(&format!("k{i:05}"), 40)).unwrap();
    }
    lg.request_snapshot();
    eventually("the leader's log purged behind its snapshot", || lg.raft().metrics().borrow().purged.is_some());

    let g3 = start_rocks(3, e3.clone());
    let count = |e: &RocksEngine| {
        let s = e.snapshot();
        let mut it = pinax_engine::Snapshot::iter(&s, Cf::Regular, pinax_engine::IterOptions::default());
        pinax_engine::KvIterator::seek_to_first(&mut it);
        let mut n = 0;
        while pinax_engine::KvIterator::valid(&it).unwrap() {
            n += 1;
            pinax_engine::KvIterator::next(&mut it);
        }
        n
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&e3) < N {
        assert!(Instant::now() < deadline, "node 3 has {} of {N} rows", count(&e3));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(count(&e3), N);
    // (The rows show as the snapshot is ingested; openraft's metrics name it a
    // moment later: read once, right away, they failed this test in CI.)
    eventually("node 3 caught up through a snapshot", || g3.raft().metrics().borrow().snapshot.is_some());
    assert_eq!(e3.get(Cf::Regular, format!("k{:05}", N - 1).as_bytes()).unwrap(), Some(vec![b'v'; 40]));
    for cf in Cf::ALL {
        assert_eq!(neighbour.get(cf, b"").unwrap().as_deref(), Some(&b"n"[..]), "the neighbour's first key in {cf}");
        assert_eq!(neighbour.get(cf, b"\xff\xff").unwrap().as_deref(), Some(&b"n"[..]), "the neighbour's last key in {cf}");
    }
    // The log goes on past the snapshot.
    lg.replicate(put("after")).unwrap();
    eventually("a write after the snapshot on node 3", || e3.get(Cf::Regular, b"after").unwrap().is_some());
    // Nothing left in the scratch directories (files are unlinked when opened).
    for d in &dirs {
        let left = std::fs::read_dir(d.path().join("scratch")).map(|rd| rd.count()).unwrap_or(0);
        assert_eq!(left, 0, "files left in {}", d.path().display());
    }
    for g in [&g1, &g2, &g3] {
        g.shutdown();
    }
}
/// A group of one replica that has no requests quiesces: the ticker stops
/// visiting its runtime. Reads (a single voter needs no read-index round) leave it
/// quiesced; a write wakes it and commits promptly, and once idle again it
/// quiesces again.
#[test]
fn an_idle_single_replica_group_quiesces_and_a_write_wakes_it() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let router = Arc::new(Router::default());
    let r = start_timed(&rt, &router, 1, Arc::new(MemEngine::new()), QUIET);
    r.group.initialize(&BTreeMap::from([(1, "node-1".to_string())])).unwrap();
    let term = r.group.leader_term().unwrap();
    r.group.replicate(put("a")).unwrap();
    eventually("the idle group quiescing", || r.group.is_quiesced());
    let runtime = r.group.runtime();
    let t0 = runtime.ticks();
    std::thread::sleep(Duration::from_millis(10 * QUIET.heartbeat_ms));
    // One visit may be the one that was running as the group quiesced.
    assert!(runtime.ticks() - t0 <= 1, "the ticker visited a quiesced group {} times", runtime.ticks() - t0);

    assert_eq!(r.group.read_barrier().unwrap(), term);
    assert!(r.group.is_quiesced(), "a read woke a single-voter group");

    let t = Instant::now();
    r.group.replicate(put("b")).unwrap();
    assert!(t.elapsed() < Duration::from_millis(500), "a write to a quiesced group took {:?}", t.elapsed());
    assert!(has(&r.engine, "b"));
    assert!(!r.group.is_quiesced(), "the write did not wake the group");
    assert_eq!(r.group.leader_term().unwrap(), term);
    eventually("quiescing again", || r.group.is_quiesced() && r.group.times_quiesced() >= 2);
    r.group.replicate(put("c")).unwrap();
    assert!(has(&r.engine, "c"));
    r.group.shutdown();
}

/// Three replicas, idle: the leader quiesces the group once every follower has
/// its whole log and agreed to hold quiet; nobody is visited by the ticker and no
/// election happens for many election timeouts. A write wakes the leader and, by
/// its AppendEntries, the followers; a read after that does a read-index round
/// and sees the write. Quiet again, the leader's node is lost: the watch
/// releases the followers and one of them leads within a bounded time, with
/// every acknowledged write.
#[test]
fn a_quiesced_three_replica_group_wakes_on_a_write_and_fails_over_when_its_leader_is_lost() {
    let watch = Arc::new(PeerWatch::default());
    let Group3 { rt: _rt, router, mut replicas, leader } = three_replicas_with(Router { watch: Some(watch.clone()), ..Router::default() }, QUIET);
    let term = replicas[&leader].group.leader_term().unwrap();
    replicas[&leader].group.replicate(put("a")).unwrap();
    let all_quiet = |replicas: &BTreeMap<NodeId, Replica>| replicas.values().all(|r| r.group.is_quiesced());
    eventually("every replica quiesced", || all_quiet(&replicas));
    for (id, r) in &replicas {
        assert_eq!(r.group.held_by(), (*id != leader).then_some(leader), "replica {id}");
    }
    assert_eq!(watch.leaders(), vec![(leader, format!("node-{leader}"))]);
    let ticks: Vec<u64> = replicas.values().map(|r| r.group.runtime().ticks()).collect();
    std::thread::sleep(Duration::from_millis(3 * QUIET.election_max_ms));
    let after: Vec<u64> = replicas.values().map(|r| r.group.runtime().ticks()).collect();
    assert!(ticks.iter().zip(&after).all(|(a, b)| b - a <= 1), "the ticker visited quiesced groups: {ticks:?} -> {after:?}");
    assert!(all_quiet(&replicas), "a replica woke without a request");
    for r in replicas.values() {
        assert_eq!(r.group.raft().metrics().borrow().current_term, term, "an election while quiet");
    }

    // A write wakes the group and commits promptly; a read after it (a round:
    // the lease ran out while quiet) is served by the same leader.
    let t = Instant::now();
    replicas[&leader].group.replicate(put("b")).unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "a write to a quiesced group took {:?}", t.elapsed());
    assert_eq!(replicas[&leader].group.read_barrier().unwrap(), term);
    assert!(has(&replicas[&leader].engine, "b"));
    for r in replicas.values() {
        eventually("'b' on every replica", || has(&r.engine, "b"));
    }
    eventually("every replica quiesced again", || all_quiet(&replicas) && replicas[&leader].group.times_quiesced() >= 2);

    // The leader's node is lost: its followers are released and elect a leader.
    let old = replicas.remove(&leader).unwrap();
    router.groups.lock().remove(&leader);
    old.group.shutdown();
    let t0 = Instant::now();
    assert_eq!(watch.node_lost(leader), 2);
    let new_leader = loop {
        if let Some(r) = replicas.values().find(|r| r.group.leader_term().is_ok()) {
            break r.group.raft().metrics().borrow().id;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "no new leader");
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(3), "fail-over of a quiesced group took {took:?}");
    assert_ne!(new_leader, leader);
    let g = &replicas[&new_leader].group;
    assert!(g.read_barrier().unwrap() > term);
    assert!(has(&replicas[&new_leader].engine, "a") && has(&replicas[&new_leader].engine, "b"), "the new leader lacks an acknowledged write");
    g.replicate(put("c")).unwrap();
    for r in replicas.values() {
        eventually("'c' on the survivors", || has(&r.engine, "c"));
        r.group.shutdown();
    }
}

/// Without a watch of the peers, a group of several members never quiesces
/// (its followers could wait forever on a dead leader).
#[test]
fn without_a_peer_watch_a_replicated_group_stays_awake() {
    let Group3 { rt: _rt, router: _router, replicas, leader } = three_replicas_with(Router::default(), QUIET);
    replicas[&leader].group.replicate(put("a")).unwrap();
    std::thread::sleep(Duration::from_millis(2 * QUIET.election_max_ms));
    for r in replicas.values() {
        assert!(!r.group.is_quiesced() && r.group.held_by().is_none());
        assert_eq!(r.group.times_quiesced(), 0);
    }
    for r in replicas.values() {
        r.group.shutdown();
    }
}

/// A split half's group starts from [`StateMachine::half_seed`] of its parent
/// (the parent's voters, an applied id at index 0 of term 0, no log): on its
/// replicas' engines it elects a leader of term 1 without `initialize`, takes
/// writes on every replica, survives a replica restarting over its engine, and
/// a lagging replica catches up by the log. (Openraft purges the empty log up to
/// the seed and builds a snapshot of the engine, as after an install.)
#[test]
fn a_split_halfs_group_starts_from_its_parents_membership() {
    use pinax_engine::WriteOptions;
    use pinax_raft::StateMachine;
    let Group3 { rt, replicas, leader, .. } = three_replicas();
    replicas[&leader].group.replicate(put("parent")).unwrap();
    for r in replicas.values() {
        eventually("the parent's write everywhere", || has(&r.engine, "parent"));
    }
    let seed = StateMachine::<MemEngine>::half_seed(&replicas[&leader].engine.snapshot()).unwrap();
    // The half's engines: its share of the parent's rows (here: all) and the seed.
    let halves = Arc::new(Router::default());
    let mut half: BTreeMap<NodeId, Replica> = BTreeMap::new();
    for id in 1..=3 {
        let e = Arc::new(MemEngine::new());
        let mut b = e.new_batch();
        b.put(Cf::Regular, b"parent", b"v");
        for (k, v) in &seed {
            b.put(Cf::Meta, k, v);
        }
        e.write(b, WriteOptions { sync: true, ..Default::default() }).unwrap();
        let g = Arc::new(RaftGroup::start(rt.handle(), 8, id, e.clone(), Arc::new(HybridClock::system()), halves.clone(), TIMING).unwrap());
        halves.groups.lock().insert(id, g.clone());
        half.insert(id, Replica { engine: e, group: g });
    }
    let l = half[&1].group.wait_for_leader(Duration::from_secs(10)).expect("the half elects a leader");
    let term = half[&l].group.leader_term().unwrap();
    assert_eq!(term, 1, "the first term after the seed");
    let mut voters: Vec<NodeId> = half[&l].group.voters();
    voters.sort();
    assert_eq!(voters, vec![1, 2, 3], "the parent's voters");
    half[&l].group.replicate(put("child")).unwrap();
    for r in half.values() {
        eventually("the half's write everywhere", || has(&r.engine, "child"));
    }
    // A follower restarts over its engine; another write reaches it.
    let f = *half.keys().find(|id| **id != l).unwrap();
    let old = half.remove(&f).unwrap();
    halves.groups.lock().remove(&f);
    old.group.shutdown();
    half[&l].group.replicate(put("while-down")).unwrap();
    let back = Arc::new(RaftGroup::start(rt.handle(), 8, f, old.engine.clone(), Arc::new(HybridClock::system()), halves.clone(), TIMING).unwrap());
    halves.groups.lock().insert(f, back.clone());
    eventually("the restarted replica catching up", || has(&old.engine, "while-down"));
    back.shutdown();
    for r in half.values() {
        r.group.shutdown();
    }
    for r in replicas.values() {
        r.group.shutdown();
    }
}

/// A split half's first election: the replica told to stand
/// (`elect_if_leaderless`, the parent's leader) wins it, even though the other
/// members open their replicas of the new group only after its first request
/// for votes (it stands again), before any election timer fires.
#[test]
fn a_new_groups_first_candidate_stands_again_until_the_others_are_there() {
    use pinax_engine::WriteOptions;
    use pinax_raft::StateMachine;
    let Group3 { rt, replicas, leader, .. } = three_replicas();
    // (A write applied: the group's first membership is committed and applied on
    // the leader, whose engine the seed is read from; before that half_seed may
    // find it still joint.)
    replicas[&leader].group.replicate(put("parent")).unwrap();
    eventually("the parent's write on its leader", || has(&replicas[&leader].engine, "parent"));
    let seed = StateMachine::<MemEngine>::half_seed(&replicas[&leader].engine.snapshot()).unwrap();
    let halves = Arc::new(Router::default());
    let start = |id: NodeId, timing: RaftTiming| {
        let e = Arc::new(MemEngine::new());
        let mut b = e.new_batch();
        for (k, v) in &seed {
            b.put(Cf::Meta, k, v);
        }
        e.write(b, WriteOptions { sync: true, ..Default::default() }).unwrap();
        let g = Arc::new(RaftGroup::start(rt.handle(), 9, id, e, Arc::new(HybridClock::system()), halves.clone(), timing).unwrap());
        halves.groups.lock().insert(id, g.clone());
        g
    };
    // No election timer fires for 20 s: only standing makes a candidate.
    let slow = RaftTiming { election_min_ms: 20_000, election_max_ms: 30_000, ..TIMING };
    let first = start(1, slow);
    first.elect_if_leaderless();
    std::thread::sleep(Duration::from_millis(150));
    let others: Vec<Arc<RaftGroup>> = [2, 3].into_iter().map(|id| start(id, slow)).collect();
    let l = first.wait_for_leader(Duration::from_secs(10)).expect("the half elects a leader");
    assert_eq!(l, 1, "the replica that stood first leads");
    for g in others.iter().chain([&first]) {
        g.shutdown();
    }
    for r in replicas.values() {
        r.group.shutdown();
    }
}

/// A split is refused while a replica of the group is moving (here: its
/// membership change cannot commit while the followers are cut off), as a
/// retryable refusal.
#[test]
fn a_split_waits_for_a_membership_change_to_end() {
    // (The runtime and router bound: dropping them stops the groups.)
    let Group3 { rt: _rt, router, replicas, leader } = three_replicas();
    replicas[&leader].group.leader_term().unwrap();
    replicas[&leader].group.replicate(put("a")).unwrap(); // (the first membership committed)
    let followers: Vec<(NodeId, Arc<RaftGroup>)> = replicas.iter().filter(|(id, _)| **id != leader).map(|(id, r)| (*id, r.group.clone())).collect();
    for (id, _) in &followers {
        router.groups.lock().remove(id);
    }
    let g = replicas[&leader].group.clone();
    let moving = std::thread::spawn(move || g.replace_voter((9, "node-9".into()), None, Duration::from_secs(2)));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!moving.is_finished(), "the move ended at once: {:?}", moving.join());
    match replicas[&leader].group.split_tablet(b"k".to_vec()) {
        Err(GroupError::Refused(m)) => assert!(m.contains("moving"), "{m}"),
        other => panic!("a split during a move: {other:?}"),
    }
    for (id, g) in followers {
        router.groups.lock().insert(id, g);
    }
    let _ = moving.join().unwrap();
    for r in replicas.values() {
        r.group.shutdown();
    }
}

/// One replica's split hook (what the tablet layer will do, reduced to rows):
/// the halves of its parent engine at the split key (the payload), each given
/// the parent's rows of its interval and its group's seed, then the parent's
/// applied id, synced.
struct Halves {
    parent: Arc<MemEngine>,
    halves: [Arc<MemEngine>; 2],
    calls: Mutex<Vec<pinax_raft::LogId>>,
}

impl pinax_raft::SplitHook for Halves {
    fn apply_split(&self, log_id: pinax_raft::LogId, payload: &[u8], applied: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        use pinax_engine::{IterOptions, KvIterator, Snapshot, WriteOptions};
        let snap = self.parent.snapshot();
        let seed = pinax_raft::StateMachine::<MemEngine>::half_seed(&snap)?;
        for (i, half) in self.halves.iter().enumerate() {
            let mut b = half.new_batch();
            let mut it = snap.iter(Cf::Regular, IterOptions::default());
            it.seek_to_first();
            while it.valid().map_err(|e| e.to_string())? {
                if (it.key() < payload) == (i == 0) {
                    b.put(Cf::Regular, it.key(), it.value());
                }
                it.next();
            }
            for (k, v) in &seed {
                b.put(Cf::Meta, k, v);
            }
            half.write(b, WriteOptions { sync: true, ..Default::default() }).map_err(|e| e.to_string())?;
        }
        let mut b = self.parent.new_batch();
        for (k, v) in applied {
            b.put(Cf::Meta, k, v);
        }
        self.parent.write(b, WriteOptions { sync: true, ..Default::default() }).map_err(|e| e.to_string())?;
        self.calls.lock().push(log_id);
        Ok(())
    }
}

fn start_splitting(rt: &tokio::runtime::Runtime, router: &Arc<Router>, id: NodeId, hook: &Arc<Halves>) -> Arc<RaftGroup> {
    let h: Arc<dyn pinax_raft::SplitHook> = hook.clone();
    let g = RaftGroup::start_with(
        rt.handle(),
        7,
        id,
        hook.parent.clone(),
        &pinax_raft::LogPlace::Engine,
        Arc::new(HybridClock::system()),
        router.clone(),
        TIMING,
        Some(h),
    )
    .unwrap();
    let g = Arc::new(g);
    router.groups.lock().insert(id, g.clone());
    g
}

/// A group splits: its split entry is applied once on every replica, after
/// every write before it and with none merged into it, at the same log index;
/// a replica restarted after it does not apply it again; each half's groups
/// then elect and take writes on the halves' engines.
#[test]
fn a_group_splits_at_one_log_index_on_every_replica_and_its_halves_serve() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let router = Arc::new(Router::default());
    let hooks: BTreeMap<NodeId, Arc<Halves>> = (1..=3)
        .map(|id| {
            let e = || Arc::new(MemEngine::new());
            (id, Arc::new(Halves { parent: e(), halves: [e(), e()], calls: Mutex::new(Vec::new()) }))
        })
        .collect();
    let mut groups: BTreeMap<NodeId, Arc<RaftGroup>> = hooks.iter().map(|(id, h)| (*id, start_splitting(&rt, &router, *id, h))).collect();
    let members: BTreeMap<NodeId, String> = (1..=3).map(|id| (id, format!("node-{id}"))).collect();
    groups[&1].initialize(&members).unwrap();
    let leader = groups[&1].wait_for_leader(Duration::from_secs(10)).unwrap();
    // Writes racing the split: each lands wholly before it or is refused.
    let writer = {
        let g = groups[&leader].clone();
        std::thread::spawn(move || (0..200).filter(|i| g.replicate(put(&format!("k{i:03}"))).is_ok()).count())
    };
    std::thread::sleep(Duration::from_millis(20));
    groups[&leader].split_tablet(b"k100".to_vec()).unwrap();
    let written = writer.join().unwrap();
    assert!(written > 0);
    for h in hooks.values() {
        eventually("the split applied on every replica", || h.calls.lock().len() == 1);
    }
    let at: Vec<_> = hooks.values().map(|h| h.calls.lock()[0]).collect();
    assert!(at.iter().all(|l| *l == at[0]), "one log index everywhere: {at:?}");
    // Every replica's halves hold the same rows: the parent's writes before the split.
    let rows = |e: &MemEngine| {
        use pinax_engine::{IterOptions, KvIterator, Snapshot};
        let s = e.snapshot();
        let mut it = s.iter(Cf::Regular, IterOptions::default());
        it.seek_to_first();
        let mut n = Vec::new();
        while it.valid().unwrap() {
            n.push(it.key().to_vec());
            it.next();
        }
        n
    };
    let first = &hooks[&1];
    for h in hooks.values() {
        assert_eq!(rows(&h.halves[0]), rows(&first.halves[0]));
        assert_eq!(rows(&h.halves[1]), rows(&first.halves[1]));
        assert!(rows(&h.halves[0]).iter().all(|k| k.as_slice() < b"k100".as_slice()));
        assert!(rows(&h.halves[1]).iter().all(|k| k.as_slice() >= b"k100".as_slice()));
    }
    // A parent replica restarting replays nothing of the split.
    let f = *groups.keys().find(|id| **id != leader).unwrap();
    groups.remove(&f).unwrap().shutdown();
    router.groups.lock().remove(&f);
    let g = start_splitting(&rt, &router, f, &hooks[&f]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(hooks[&f].calls.lock().len(), 1, "applied once, durably");
    groups.insert(f, g);
    // The halves' groups elect and take writes.
    for (i, group) in [(0usize, 8u64), (1, 9)] {
        let r = Arc::new(Router::default());
        let mut hs = Vec::new();
        for (id, h) in &hooks {
            let g = Arc::new(RaftGroup::start(rt.handle(), group, *id, h.halves[i].clone(), Arc::new(HybridClock::system()), r.clone(), TIMING).unwrap());
            r.groups.lock().insert(*id, g.clone());
            hs.push(g);
        }
        let l = hs[0].wait_for_leader(Duration::from_secs(10)).expect("a half elects");
        let lg = hs.iter().find(|g| g.raft().metrics().borrow().id == l).unwrap();
        lg.replicate(put(if i == 0 { "a-new" } else { "z-new" })).unwrap();
        for h in hooks.values() {
            eventually("the half's write on every replica", || has(&h.halves[i], if i == 0 { "a-new" } else { "z-new" }));
        }
        for g in hs {
            g.shutdown();
        }
    }
    for g in groups.values() {
        g.shutdown();
    }
}

/// A [`MemEngine`] whose state machine applies (the writes that skip the log)
/// take `delay`: they lag what the group has committed.
struct SlowEngine {
    inner: MemEngine,
    delay: Mutex<Duration>,
}

impl KvEngine for SlowEngine {
    type Snapshot<'a> = pinax_engine_mem::MemSnapshot;
    type Batch = pinax_engine_mem::MemBatch;
    fn snapshot(&self) -> Self::Snapshot<'_> {
        self.inner.snapshot()
    }
    fn new_batch(&self) -> Self::Batch {
        self.inner.new_batch()
    }
    fn write(&self, batch: Self::Batch, opts: pinax_engine::WriteOptions) -> pinax_engine::Result<()> {
        if opts.skip_log {
            let delay = *self.delay.lock();
            std::thread::sleep(delay);
        }
        self.inner.write(batch, opts)
    }
    fn get(&self, cf: Cf, key: &[u8]) -> pinax_engine::Result<Option<Vec<u8>>> {
        self.inner.get(cf, key)
    }
    fn flush(&self) -> pinax_engine::Result<()> {
        self.inner.flush()
    }
    fn compact_range(&self, cf: Cf, start: Option<&[u8]>, end: Option<&[u8]>) -> pinax_engine::Result<()> {
        self.inner.compact_range(cf, start, end)
    }
    fn stats(&self) -> pinax_engine::EngineStats {
        self.inner.stats()
    }
}

/// A leader that crashes and comes back before anyone else stands is leader
/// again at once, in the same term (openraft resumes a committed vote of its
/// own without an election, and takes the first entry of its term for the
/// index its reads must wait for). Its state machine lost the applies that were
/// not flushed and its stored committed id lags (written at most every 100 ms),
/// so it holds committed entries it has not applied yet: its first read must
/// wait for them (a master resumed this way once loaded a catalog without the
/// table it had just created, and kept it for the whole term).
#[test]
fn a_leader_back_in_its_own_term_applies_its_whole_log_before_it_serves() {
    // Followers slow to stand: the leader is back long before they would.
    let timing = RaftTiming { election_min_ms: 3_000, election_max_ms: 4_000, ..TIMING };
    let Group3 { rt, router, mut replicas, leader } = three_replicas_with(Router::default(), timing);
    replicas[&leader].group.leader_term().unwrap();
    let term = replicas[&leader].group.raft().metrics().borrow().current_term;
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    for k in &keys {
        replicas[&leader].group.replicate(put(k)).unwrap();
    }
    // The crash: the log (and vote) survive, the state machine's applies do not.
    let old = replicas.remove(&leader).unwrap();
    router.groups.lock().remove(&leader);
    old.group.shutdown();
    let engine = Arc::new(SlowEngine { inner: MemEngine::new(), delay: Mutex::new(Duration::ZERO) });
    let mut b = engine.new_batch();
    let snap = old.engine.snapshot();
    let mut it = snap.iter(Cf::Log, pinax_engine::IterOptions::default());
    it.seek_to_first();
    while it.valid().unwrap() {
        b.put(Cf::Log, it.key(), it.value());
        it.next();
    }
    drop(it);
    engine.write(b, pinax_engine::WriteOptions::default()).unwrap();
    // Its first round to the followers is slow to be answered, and its applies
    // are slow from then on: it is leader again, with a stale committed id,
    // before it learns what is committed.
    *engine.delay.lock() = Duration::from_millis(2000);
    router.delay_next.lock().extend(replicas.keys().map(|&id| (id, Duration::from_millis(200))));
    let group = Arc::new(RaftGroup::start(rt.handle(), 7, leader, engine.clone(), Arc::new(HybridClock::system()), router.clone(), timing).unwrap());
    router.groups.lock().insert(leader, group.clone());
    assert_eq!(group.leader_term().unwrap(), term, "back as leader in its own term");
    for k in &keys {
        assert!(has(&engine.inner, k), "{k}, committed before the crash, is not applied when the leader serves");
    }
    *engine.delay.lock() = Duration::ZERO;
    group.replicate(put("after")).unwrap();
    for r in replicas.values() {
        eventually("'after' on the followers", || has(&r.engine, "after"));
        r.group.shutdown();
    }
    group.shutdown();
}
