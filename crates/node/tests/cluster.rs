//! Three `pinax` daemons on loopback: tablets with three replicas, a node killed
//! with SIGKILL under write load, restarted, and another killed.
//!
//! Also: replicas of a dead node move (on 4 and 5 nodes), a wiped node is
//! rebuilt, a partitioned leader serves nothing stale.
//!
//! Checks: writes resume after the failover (the longest stall is printed: the
//! failover time), no acknowledged write is lost, a restarted node catches up (the
//! cluster keeps every row once a different node dies).

mod common;
use common::{bin, free_port, key};

use pinax_client::{Client, ClientOptions};
use pinax_common::HybridTime;
use pinax_proto::{ReadPoint, Request, Response, ScanSpec, Sharding, WriteOp};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The cluster CA and loopback node certificate every node of these tests
/// presents (nodes on 127.0.0.1 can share one): the clusters here run secure,
/// as a user's do, so their failovers are over mutual TLS.
fn certs() -> &'static Path {
    static CERTS: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    CERTS.get_or_init(|| {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cluster-test-certs-{}", std::process::id()));
        common::make_certs(&d);
        d
    })
}

fn tls_options() -> ClientOptions {
    common::tls_options(certs())
}

fn wait_client(addr: &str) -> Client {
    common::wait_client_with(addr, tls_options())
}

fn spawn(dir: &Path, port: u16, join: Option<u16>, extra: &[String]) -> Child {
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--data-dir"])
        .arg(dir)
        .arg("--certs-dir")
        .arg(certs())
        .args(["--port", &port.to_string(), "--block-cache-mb", "16", "--memtable-mb", "32", "--node-timeout-secs", "3", "--fault-injection"])
        .args(extra);
    if let Some(m) = join {
        cmd.args(["--join", &format!("127.0.0.1:{m}")]);
    }
    let log = std::fs::File::create(dir.join("test.log")).unwrap();
    // The daemon logs to stdout.
    cmd.stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap()
}

struct Cluster {
    dirs: Vec<tempfile::TempDir>,
    ports: Vec<u16>,
    children: Vec<Option<Child>>,
    /// More arguments of each node's daemon.
    extra: Vec<Vec<String>>,
}

impl Cluster {
    fn start(n: usize) -> Cluster {
        Self::start_with(vec![Vec::new(); n])
    }
    /// A cluster of `extra.len()` nodes, node i started with `extra[i]` as well.
    fn start_with(extra: Vec<Vec<String>>) -> Cluster {
        let n = extra.len();
        let dirs: Vec<_> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let mut c = Cluster { dirs, ports, children: Vec::new(), extra };
        for i in 0..n {
            let child = spawn(c.dirs[i].path(), c.ports[i], (i > 0).then_some(c.ports[0]), &c.extra[i]);
            c.children.push(Some(child));
            wait_client(&c.addr(i));
        }
        c
    }
    /// Start one more node, joining through the first.
    fn add_node(&mut self) {
        let d = tempfile::tempdir().unwrap();
        let port = free_port();
        self.children.push(Some(spawn(d.path(), port, Some(self.ports[0]), &[])));
        self.dirs.push(d);
        self.ports.push(port);
        self.extra.push(Vec::new());
        wait_client(&self.addr(self.ports.len() - 1));
    }
    fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.ports[i])
    }
    fn kill(&mut self, i: usize) {
        if let Some(mut ch) = self.children[i].take() {
            ch.kill().unwrap(); // SIGKILL
            ch.wait().unwrap();
        }
    }
    fn restart(&mut self, i: usize) {
        self.kill(i);
        self.children[i] = Some(spawn(self.dirs[i].path(), self.ports[i], (i > 0).then_some(self.ports[0]), &self.extra[i]));
        wait_client(&self.addr(i));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill(i);
        }
        // A failed test's node logs outlive its temporary directories.
        if std::thread::panicking() {
            let keep = std::env::temp_dir().join("pinax-failed-cluster-tests");
            for (i, d) in self.dirs.iter().enumerate() {
                let to = keep.join(format!("{}-node-{}.log", self.ports[0], i + 1));
                if std::fs::create_dir_all(&keep).and_then(|_| std::fs::copy(d.path().join("test.log"), &to)).is_ok() {
                    eprintln!("node {} log kept at {}", i + 1, to.display());
                }
            }
        }
    }
}

/// Write keys `range` one autocommit write each; returns the longest write.
fn write_all(c: &Client, range: std::ops::Range<u32>, acked: &mut Vec<u32>) -> Duration {
    let mut longest = Duration::ZERO;
    for i in range {
        let t = Instant::now();
        c.write("rf3", vec![WriteOp::put(key(i), format!("v{i}").into_bytes())]).unwrap_or_else(|e| panic!("write {i}: {e}"));
        longest = longest.max(t.elapsed());
        acked.push(i);
    }
    longest
}

/// Wait (up to 60 s) until the master group has three replicas. It grows by one
/// replica a tick as nodes register, so a test that kills a node right after the
/// cluster formed could take the master's quorum with it (a dead node's replicas
/// move only while a master leads).
fn wait_for_master_replicas(c: &Client) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(t) = c.refresh_table("$master") {
            if t.tablets[0].replicas.len() == 3 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "the master group never got three replicas");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Create table "rf3" with `tablets` tablets of three replicas each. The master
/// places replicas on nodes it has heard from: until all three registered, drop and
/// create again.
fn create_rf3(c: &Client, tablets: u32) -> std::sync::Arc<pinax_proto::TableInfo> {
    wait_for_master_replicas(c);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = c.create_table("rf3", Sharding::Hash { tablets }).unwrap();
        if t.tablets.iter().all(|ti| ti.replicas.len() == 3) {
            return t;
        }
        c.drop_table("rf3", false).unwrap();
        assert!(Instant::now() < deadline, "the master never saw three nodes");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Wait (up to 60 s) until every tablet of "rf3", as the catalog places it,
/// satisfies `placed`; else fail with `what` and the last placement. (The catalog
/// is the master's: a node killed by the test may have led it, so each read waits
/// out an election as `with_master` does.)
fn wait_for_placement(c: &Client, what: &str, placed: impl Fn(&pinax_proto::TabletInfo) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = with_master("reading the placement", || c.refresh_table("rf3"));
        if t.tablets.iter().all(&placed) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {t:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn check_all(c: &Client, acked: &[u32]) {
    for i in acked {
        assert_eq!(c.get("rf3", &key(*i)).unwrap(), Some(format!("v{i}").into_bytes()), "acknowledged write {i} lost");
    }
    assert_eq!(c.scan("rf3", ScanSpec::default()).unwrap().len(), acked.len());
}

#[test]
fn three_replicas_survive_a_node_kill_and_restart() {
    let mut cluster = Cluster::start(3);
    let c = wait_client(&cluster.addr(0));
    let table = create_rf3(&c, 6);
    let victim = cluster.addr(1);
    let led_by_victim = table.tablets.iter().filter(|ti| ti.leader == victim).count();
    assert!(led_by_victim > 0, "placement gave node 2 no leaders: {table:?}");

    let mut acked = Vec::new();
    write_all(&c, 0..300, &mut acked);
    // A client of another node sees the writes too (routing through that node's
    // catalog forwarding, reads at the tablet leaders).
    let c3 = wait_client(&cluster.addr(2));
    assert_eq!(c3.get("rf3", &key(7)).unwrap(), Some(b"v7".to_vec()));

    // Transactions of a client of node 3 (status records on node 3) across tablets
    // led by all three nodes: committed ones are visible everywhere, aborted ones
    // nowhere, and a pending one holds its keys against writers on other nodes.
    let mut txn = c3.begin();
    txn.write("rf3", (300..320).map(|i| WriteOp::put(key(i), format!("v{i}").into_bytes())).collect()).unwrap();
    txn.commit().unwrap();
    acked.extend(300..320);
    let mut aborted = c3.begin();
    aborted.write("rf3", (5000..5020).map(|i| WriteOp::put(key(i), b"no".to_vec())).collect()).unwrap();
    aborted.abort().unwrap();
    // (a key whose tablet another node leads: that node must ask node 3)
    let k = (10_000..).find(|i| table.tablets[table.tablet_index_for(&key(*i))].leader != cluster.addr(2)).unwrap();
    let mut pending = c3.begin();
    pending.write("rf3", vec![WriteOp::put(key(k), format!("v{k}").into_bytes())]).unwrap();
    let e = c.write("rf3", vec![WriteOp::put(key(k), b"other".to_vec())]).unwrap_err();
    assert_eq!(e.code(), pinax_common::ErrorCode::SerializationFailure, "a pending intent of another node's transaction must conflict: {e}");
    pending.commit().unwrap();
    acked.push(k);
    check_all(&c, &acked);
    for i in 5000..5020 {
        assert_eq!(c.get("rf3", &key(i)).unwrap(), None, "aborted write visible");
    }

    cluster.kill(1);
    let stall = write_all(&c, 321..600, &mut acked);
    eprintln!("failover: longest write stall after killing a leader node: {stall:?}");
    assert!(stall < Duration::from_secs(10), "writes stalled {stall:?} after a leader died");
    check_all(&c, &acked);

    // The killed node comes back and catches up; then another node dies and every
    // acknowledged row is still there (served by the two that remain).
    cluster.restart(1);
    write_all(&c, 600..700, &mut acked);
    std::thread::sleep(Duration::from_secs(2));
    cluster.kill(2);
    write_all(&c, 700..800, &mut acked);
    let mut txn = c.begin();
    txn.write("rf3", (800..830).map(|i| WriteOp::put(key(i), format!("v{i}").into_bytes())).collect()).unwrap();
    txn.commit().unwrap();
    acked.extend(800..830);
    check_all(&c, &acked);

    // A majority down: writes fail with a clear, retryable error (no hang), and
    // everything works again once the nodes are back.
    cluster.kill(1);
    let short = Client::connect_with(&cluster.addr(0), ClientOptions { leader_wait: Duration::from_secs(2), ..tls_options() }).unwrap();
    let t = Instant::now();
    let e = short.write("rf3", vec![WriteOp::put(key(900), b"v900".to_vec())]).unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert!(t.elapsed() < Duration::from_secs(20), "a write without quorum took {:?} to fail", t.elapsed());
    cluster.restart(1);
    cluster.restart(2);
    write_all(&c, 900..950, &mut acked);
    check_all(&c, &acked);
}

#[test]
fn a_dead_nodes_replicas_move_to_live_nodes() {
    let mut cluster = Cluster::start(4);
    let c = wait_client(&cluster.addr(0));
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.status().unwrap().nodes.len() < 4 {
        assert!(Instant::now() < deadline, "the master never saw four nodes");
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for_master_replicas(&c);
    let table = c.create_table("rf3", Sharding::Hash { tablets: 4 }).unwrap();
    let gone = cluster.addr(1);
    assert!(table.tablets.iter().any(|ti| ti.replicas.contains(&gone)));
    let mut acked = Vec::new();
    write_all(&c, 0..200, &mut acked);
    cluster.kill(1);
    write_all(&c, 200..300, &mut acked);
    // After the node timeout (3 s here) the master moves node 2's replicas.
    wait_for_placement(&c, "replicas of the dead node were not moved", |ti| !ti.replicas.contains(&gone) && ti.replicas.len() == 3);
    // Node 2 comes back: the replicas moved away while it was down are dropped
    // (they hear from no leader, and the catalog places them elsewhere).
    // The replicas node 2 holds, as it reports them.
    let held = |c2: &Client| c2.status().map(|s| s.replicas).unwrap_or_default();
    let moved: Vec<pinax_common::TabletId> = table.tablets.iter().filter(|ti| ti.replicas.contains(&gone)).map(|ti| ti.id).collect();
    assert!(!moved.is_empty());
    // Its store (read while it is down) still holds them.
    let on_disk: Vec<String> = {
        let f = pinax_tserver::RocksFactory::new(cluster.dirs[1].path().join("data"), pinax_engine_rocks::SharedResources::new(8 << 20, 8 << 20));
        f.placement().unwrap().into_iter().flat_map(|(_, names)| names).collect()
    };
    assert!(moved.iter().all(|id| on_disk.contains(&format!("tablet-{}", id.0))), "{on_disk:?}");
    cluster.restart(1);
    let c2 = wait_client(&gone);
    let deadline = Instant::now() + Duration::from_secs(60);
    // (Rebalancing may give the emptied node a fresh replica of such a tablet:
    // then the catalog places it there again.)
    let stale = |id: pinax_common::TabletId| {
        held(&c2).contains(&id) && !c.refresh_table("rf3").unwrap().tablets.iter().any(|ti| ti.id == id && ti.replicas.contains(&gone))
    };
    while moved.iter().any(|id| stale(*id)) {
        assert!(Instant::now() < deadline, "node 2 kept replicas moved away: {:?}", held(&c2));
        std::thread::sleep(Duration::from_millis(200));
    }
    write_all(&c, 1000..1010, &mut acked);

    // Every tablet now has three replicas on nodes 1, 3 and 4: losing node 3 too
    // leaves a majority of each.
    cluster.kill(2);
    write_all(&c, 300..400, &mut acked);
    check_all(&c, &acked);
}

#[test]
fn five_nodes_lose_two_one_after_the_other_without_losing_service() {
    // Five nodes, three replicas per tablet: one node dies (writes resume after
    // the failover), its replicas are re-created on the others, then a second one
    // dies: every tablet still has a majority.
    let mut cluster = Cluster::start(5);
    let c = wait_client(&cluster.addr(0));
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.status().unwrap().nodes.len() < 5 {
        assert!(Instant::now() < deadline, "the master never saw five nodes");
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for_master_replicas(&c);
    let table = c.create_table("rf3", Sharding::Hash { tablets: 5 }).unwrap();
    assert!(table.tablets.iter().all(|ti| ti.replicas.len() == 3), "{table:?}");
    let addrs: Vec<String> = (0..5).map(|i| cluster.addr(i)).collect();
    let per_node = |t: &pinax_proto::TableInfo, i: usize| t.tablets.iter().filter(|ti| ti.replicas.contains(&addrs[i])).count();
    assert!((0..5).all(|i| per_node(&table, i) == 3), "15 replicas over 5 nodes: {table:?}");
    let mut acked = Vec::new();
    write_all(&c, 0..200, &mut acked);
    let (first, second) = (cluster.addr(1), cluster.addr(3));
    assert!(table.tablets.iter().any(|ti| ti.leader == first));
    cluster.kill(1);
    let stall = write_all(&c, 200..400, &mut acked);
    assert!(stall < Duration::from_secs(10), "writes stalled {stall:?} after a leader died");
    wait_for_placement(&c, "the first dead node's replicas were not moved", |ti| !ti.replicas.contains(&first) && ti.replicas.len() == 3);
    cluster.kill(3);
    let stall = write_all(&c, 400..600, &mut acked);
    assert!(stall < Duration::from_secs(10), "writes stalled {stall:?} after a second node died");
    check_all(&c, &acked);
    wait_for_placement(&c, "the second dead node's replicas were not moved", |ti| !ti.replicas.contains(&second) && ti.replicas.len() == 3);
    // Both come back; their moved-away replicas are dropped, and every row is
    // still there.
    cluster.restart(1);
    cluster.restart(3);
    write_all(&c, 600..700, &mut acked);
    check_all(&c, &acked);
}

#[test]
fn a_node_whose_data_dir_was_wiped_gets_its_replicas_rebuilt() {
    // A node that lost its disk comes back empty: it joins as a new node (its id
    // was in the wiped directory), and the old id's replicas, dead past the node
    // timeout, are rebuilt on live nodes, the new one among them.
    let mut cluster = Cluster::start(3);
    let c = wait_client(&cluster.addr(0));
    let table = create_rf3(&c, 4);
    let mut acked = Vec::new();
    write_all(&c, 0..200, &mut acked);
    let gone = cluster.addr(2);
    cluster.kill(2);
    for entry in std::fs::read_dir(cluster.dirs[2].path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) }.unwrap();
    }
    // Back at another address (same one works too; another makes the move visible
    // in the catalog, which lists replicas by address).
    cluster.ports[2] = free_port();
    cluster.restart(2);
    write_all(&c, 200..300, &mut acked);
    let rebuilt_on = cluster.addr(2);
    wait_for_placement(&c, "the wiped node's replicas were not rebuilt", |ti| {
        !ti.replicas.contains(&gone) && ti.replicas.contains(&rebuilt_on) && ti.replicas.len() == 3
    });
    assert_eq!(table.tablets.len(), 4);
    // The rebuilt replicas hold the data: with node 2 down, nodes 1 and the new
    // one are each tablet's majority.
    cluster.kill(1);
    write_all(&c, 300..350, &mut acked);
    check_all(&c, &acked);
}

/// The node index leading `tablet` (the one whose replica answers a read).
fn leader_index(cluster: &Cluster, c: &Client, tablet: pinax_common::TabletId, k: &[u8]) -> Option<usize> {
    (0..cluster.ports.len()).find(|i| matches!(c.call_at(&cluster.addr(*i), read_req(tablet, k)), Ok(Response::Value { .. })))
}

fn read_req(tablet: pinax_common::TabletId, key: &[u8]) -> Request {
    Request::Read { tablet, key: key.to_vec(), at: ReadPoint::LATEST }
}

fn partition(c: &Client, cluster: &Cluster, from: usize, others: &[usize]) {
    let unreachable = |ids: &[usize]| Request::InjectFaults { unreachable: ids.iter().map(|i| cluster.addr(*i)).collect() };
    c.call_at(&cluster.addr(from), unreachable(others)).unwrap();
    for o in others {
        c.call_at(&cluster.addr(*o), unreachable(&[from])).unwrap();
    }
}

/// A SQL node whose daemon is cut off from the master (its backends, here the
/// test's fenced client, still reach the tablets) is fenced: a DDL lock goes on
/// without it only once its SQL lease has ended, its backends' requests are
/// refused from then on, and it gets no lease back until that lock is let go.
#[test]
fn a_node_cut_off_from_the_master_is_fenced_before_ddl_goes_on_without_it() {
    let cluster = Cluster::start(3);
    let c = wait_client(&cluster.addr(0));
    create_rf3(&c, 3);
    let backend = Client::connect_with(&cluster.addr(2), ClientOptions { fenced: true, ..tls_options() }).unwrap();
    backend.write("rf3", vec![WriteOp::put(key(1), b"a".to_vec())]).unwrap();
    let node_id = |i: usize| match c.call_at(&cluster.addr(i), Request::Ping).unwrap() {
        Response::Pong { node_id } => node_id,
        r => panic!("{r:?}"),
    };
    let origin = node_id(1);
    partition(&c, &cluster, 2, &[0, 1]);
    let cut = Instant::now();
    let lock = pinax_proto::DdlLock {
        lock: 0x5eed,
        origin,
        origin_addr: String::new(),
        pid: std::process::id(), // held while this test runs
        database: "postgres".into(),
        relations: vec![("\"public\".\"t\"".into(), "SHARE".into())],
        timeout_ms: 5_000,
    };
    let locked = c.call_at(&cluster.addr(1), Request::LockDdl { lock: lock.clone() }).unwrap();
    let waited = cut.elapsed();
    assert!(matches!(locked, Response::Now(_)), "{locked:?}");
    // The cut node's last lease began at most a heartbeat before the cut: the
    // lock waited out most of its 5 s (and the clock-skew margin).
    assert!(waited >= Duration::from_secs(4), "the DDL lock went on after {waited:?}, within the cut node's lease");
    let fenced = |what: &str| {
        let e = backend.write("rf3", vec![WriteOp::put(key(2), b"b".to_vec())]).expect_err(what);
        assert_eq!(e.code(), pinax_common::ErrorCode::NodeFenced, "{what}: {e:?}");
    };
    fenced("a write of the cut node's backend after the DDL lock went on without it");
    c.write("rf3", vec![WriteOp::put(key(3), b"c".to_vec())]).unwrap(); // others write on
                                                                        // Back in contact, the node stays fenced while the lock is held.
    for i in 0..3 {
        c.call_at(&cluster.addr(i), Request::InjectFaults { unreachable: vec![] }).unwrap();
    }
    std::thread::sleep(Duration::from_secs(3));
    fenced("a write of the node back in contact while the DDL lock that skipped it is held");
    // The lock let go, its lease comes back (and its backends' requests run).
    c.call_at(&cluster.addr(1), Request::UnlockDdl { lock: lock.lock }).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match backend.write("rf3", vec![WriteOp::put(key(4), b"d".to_vec())]) {
            Ok(_) => break,
            Err(e) if e.code() == pinax_common::ErrorCode::NodeFenced && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => panic!("the node's lease did not come back after the lock went: {e:?}"),
        }
    }
    assert_eq!(c.get("rf3", &key(2)).unwrap(), None, "a refused write was applied");
    assert_eq!(c.get("rf3", &key(4)).unwrap().as_deref(), Some(&b"d"[..]));
}

/// A node whose background loop is held for seconds (a long intent sweep, a
/// flush before a log purge) keeps its SQL lease and stays live: its heartbeat
/// to the master runs on a thread of its own. Before, a TPC-C load on one node
/// had its backends refused ("this SQL node's lease from the master has
/// lapsed"): the lease (5 s) was renewed only by the tick. Both kinds of node:
/// the master's own (node 0) and another.
#[test]
fn a_node_whose_background_loop_stalls_keeps_its_sql_lease() {
    let cluster = Cluster::start(2);
    let c = wait_client(&cluster.addr(0));
    c.create_table("stall", Sharding::Range { split_points: Vec::new() }).unwrap();
    let backends: Vec<Client> = (0..2).map(|i| Client::connect_with(&cluster.addr(i), ClientOptions { fenced: true, ..tls_options() }).unwrap()).collect();
    for (i, b) in backends.iter().enumerate() {
        b.write("stall", vec![WriteOp::put(key(i as u32), b"a".to_vec())]).unwrap();
    }
    for i in 0..2 {
        c.call_at(&cluster.addr(i), Request::StallTick { ms: 9_000 }).unwrap();
    }
    // Twice the lease, writing through both nodes' backends all along.
    let until = Instant::now() + Duration::from_secs(10);
    let mut n = 0u32;
    while Instant::now() < until {
        for (i, b) in backends.iter().enumerate() {
            b.write("stall", vec![WriteOp::put(key(100 + n), b"b".to_vec())])
                .unwrap_or_else(|e| panic!("node {i}'s backend refused while its background loop stalls: {e:?}"));
            n += 1;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(n >= 40, "{n} writes");
}

#[test]
fn a_partitioned_leader_serves_no_stale_reads_and_takes_no_writes() {
    let cluster = Cluster::start(3);
    let c = wait_client(&cluster.addr(0));
    let table = create_rf3(&c, 3);
    // A key whose tablet a node other than the master leads (the master stays with
    // the majority, so the cluster's catalog stays reachable).
    let (k, tablet, minority) = (0..1000u32)
        .find_map(|i| {
            let k = key(i);
            let ti = &table.tablets[table.tablet_index_for(&k)];
            c.write("rf3", vec![WriteOp::put(k.clone(), b"v1".to_vec())]).unwrap();
            leader_index(&cluster, &c, ti.id, &k).filter(|l| *l != 0).map(|l| (k, ti.id, l))
        })
        .expect("a tablet led by node 2 or 3");
    let majority: Vec<usize> = (0..3).filter(|i| *i != minority).collect();
    partition(&c, &cluster, minority, &majority);

    // Reads at the old leader, all along: none may return v1 once v2 is acknowledged.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (c, addr, k, stop) = (c.clone(), cluster.addr(minority), k.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let sent = Instant::now();
                let r = c.call_at(&addr, read_req(tablet, &k));
                reads.push((sent, r));
                std::thread::sleep(Duration::from_millis(20));
            }
            reads
        })
    };
    // The majority elects a leader and takes the write (the client, which still
    // reaches every node, finds it).
    c.write("rf3", vec![WriteOp::put(k.clone(), b"v2".to_vec())]).unwrap();
    let acked = Instant::now();
    assert_eq!(c.get("rf3", &k).unwrap().as_deref(), Some(&b"v2"[..]));
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let reads = reader.join().unwrap();
    let served_before = reads.iter().filter(|(sent, r)| *sent < acked && r.is_ok()).count();
    assert!(served_before > 0, "the old leader served no read before its lease ran out");
    for (sent, r) in &reads {
        match r {
            Ok(Response::Value { value, .. }) if *sent > acked => assert_eq!(value.as_deref(), Some(&b"v2"[..]), "stale read at the cut-off leader"),
            Ok(Response::Value { .. }) => {}
            Ok(other) => panic!("{other:?}"),
            Err(e) => assert!(matches!(e.code(), pinax_common::ErrorCode::NotLeader | pinax_common::ErrorCode::Unavailable), "{e:?}"),
        }
    }
    // The old leader, cut off, neither serves a read nor takes a write.
    match c.call_at(&cluster.addr(minority), read_req(tablet, &k)) {
        Ok(r) => panic!("the minority served a read: {r:?}"),
        Err(e) => assert!(matches!(e.code(), pinax_common::ErrorCode::NotLeader | pinax_common::ErrorCode::Unavailable), "{e:?}"),
    }
    let w = Request::Write { tablet, ops: vec![WriteOp::put(k.clone(), b"v3".to_vec())], read_ht: None, txn: None, request: 77 };
    match c.call_at(&cluster.addr(minority), w) {
        Ok(r) => panic!("the minority acknowledged a write: {r:?}"),
        Err(e) => assert!(matches!(e.code(), pinax_common::ErrorCode::NotLeader | pinax_common::ErrorCode::Unavailable), "{e:?}"),
    }

    // Healed: the old leader follows the new one; the refused write never appears.
    for i in 0..3 {
        c.call_at(&cluster.addr(i), Request::InjectFaults { unreachable: vec![] }).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Any replica that answers, the old leader included, answers v2.
        let answers: Vec<_> = (0..3)
            .filter_map(|i| match c.call_at(&cluster.addr(i), read_req(tablet, &k)) {
                Ok(Response::Value { value, .. }) => Some(value),
                _ => None,
            })
            .collect();
        assert!(answers.iter().all(|v| v.as_deref() == Some(&b"v2"[..])), "{answers:?}");
        if answers.len() == 1 && c.write("rf3", vec![WriteOp::put(key(5000), b"x".to_vec())]).is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "the cluster did not recover after the partition healed");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(c.get("rf3", &k).unwrap().as_deref(), Some(&b"v2"[..]));
}

/// Failover times: kill -9 the leader of one tablet (any node, the master too: the
/// client has the locations cached and fast-path writes need no status record),
/// time until a write to that tablet succeeds again, restart the node; 10 rounds.
/// `cargo test --test cluster -- --ignored --nocapture` (bench/failover.sh).
#[test]
#[ignore]
fn failover_times() {
    let mut cluster = Cluster::start(3);
    let c = wait_client(&cluster.addr(0));
    let table = create_rf3(&c, 3);
    let mut acked = Vec::new();
    write_all(&c, 0..100, &mut acked);
    let mut times = Vec::new();
    let mut next = 100u32;
    for round in 0..10 {
        let k = (next..).find(|i| table.tablet_index_for(&key(*i)) == round % 3).unwrap();
        c.write("rf3", vec![WriteOp::put(key(k), format!("v{k}").into_bytes())]).unwrap();
        acked.push(k);
        let ti = &table.tablets[round % 3];
        let leader = c.leader_of(ti);
        let victim = (0..3).find(|i| cluster.addr(*i) == leader).unwrap();
        cluster.kill(victim);
        let t = Instant::now();
        let k2 = (k + 1..).find(|i| table.tablet_index_for(&key(*i)) == round % 3).unwrap();
        c.write("rf3", vec![WriteOp::put(key(k2), format!("v{k2}").into_bytes())]).unwrap();
        acked.push(k2);
        let took = t.elapsed();
        eprintln!("round {round}: killed node {} (leader of tablet {}), writes resumed after {took:?}", victim + 1, ti.id.0);
        times.push(took);
        cluster.restart(victim);
        std::thread::sleep(Duration::from_secs(2));
        next = k2 + 1;
    }
    check_all(&c, &acked);
    times.sort();
    eprintln!("failover over {} kills: median {:?}, worst {:?}", times.len(), times[times.len() / 2], times[times.len() - 1]);
}

/// Write `k` in `txn`, waiting (in 250 ms slices, as the PostgreSQL extension
/// does) for whoever holds it; returns the write's outcome and how long it took.
fn write_waiting(txn: &mut pinax_client::Txn, k: &[u8]) -> (Result<(), pinax_client::ClientError>, Duration) {
    let me = txn.id();
    let t = Instant::now();
    let res = txn.write_waiting("rf3", vec![WriteOp::put(k.to_vec(), b"w".to_vec())], &mut |client, blocker| loop {
        if let Some(committed) = client.wait_txn(blocker, Some(me), 250)? {
            return Ok(!committed);
        }
        assert!(t.elapsed() < Duration::from_secs(20), "a wait never ended: the deadlock was not detected");
    });
    (res, t.elapsed())
}

/// [`write_waiting`], then commit, or abort after a deadlock (any other error
/// fails the test): whether it committed, and how long the write took.
fn write_then_end(mut txn: pinax_client::Txn, k: &[u8]) -> (bool, Duration) {
    let (res, took) = write_waiting(&mut txn, k);
    match res {
        Ok(()) => {
            txn.commit().unwrap();
            (true, took)
        }
        Err(e) => {
            assert_eq!(e.code(), pinax_common::ErrorCode::Deadlock, "{e}");
            txn.abort().unwrap();
            (false, took)
        }
    }
}

/// Wait (up to 30 s) until node `n`'s status tablet has three replicas.
fn wait_for_status_replicas(c: &Client, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(t) = c.refresh_table(&format!("$status.{n}")) {
            if t.tablets[0].replicas.len() == 3 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "node {n}'s status tablet never got three replicas");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn transaction_records_outlive_their_home_node() {
    // A transaction's status record is in its home node's status tablet, which is
    // replicated: when the home node dies, another replica leads it. What the
    // transaction committed is seen whole (whether its intents were applied yet
    // or not); what it left pending hides nothing and blocks nobody past its
    // expiry. (Before, records lived on the home node only: a reader meeting such
    // an intent failed until the node came back.)
    let mut cluster = Cluster::start_with(vec![vec!["--txn-timeout-secs".to_string(), "2".to_string()]; 3]);
    let c1 = wait_client(&cluster.addr(0));
    let c3 = wait_client(&cluster.addr(2));
    create_rf3(&c1, 8);
    wait_for_status_replicas(&c1, 3);
    for i in 0..40 {
        c1.write("rf3", vec![WriteOp::put(key(i), b"before".to_vec())]).unwrap();
    }
    // Committed through node 3, which dies at once (its applier may or may not
    // have applied the intents on every tablet).
    let mut t = c3.begin();
    assert_eq!(t.id().status_node(), 3);
    t.write("rf3", (0..40).map(|i| WriteOp::put(key(i), b"committed".to_vec())).collect()).unwrap();
    t.commit().unwrap();
    cluster.kill(2);
    let started = Instant::now();
    for i in 0..40 {
        assert_eq!(c1.get("rf3", &key(i)).unwrap(), Some(b"committed".to_vec()), "key {i} after the home node died");
    }
    eprintln!("committed writes read after the home node died: {:?}", started.elapsed());

    // Pending through node 3, which dies: its intent is invisible, and once the
    // transaction expires (2 s) a writer on node 1 goes ahead.
    cluster.restart(2);
    let c3 = wait_client(&cluster.addr(2));
    let mut t = c3.begin();
    t.write("rf3", vec![WriteOp::put(key(7), b"pending".to_vec())]).unwrap();
    cluster.kill(2);
    drop(t); // its abort cannot reach the dead node
    assert_eq!(c1.get("rf3", &key(7)).unwrap(), Some(b"committed".to_vec()));
    let started = Instant::now();
    let mut w = c1.begin();
    let (res, _) = write_waiting(&mut w, &key(7));
    res.unwrap();
    w.commit().unwrap();
    eprintln!("a writer behind the dead node's pending intent went ahead after {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(c1.get("rf3", &key(7)).unwrap(), Some(b"w".to_vec()));
}

/// Two transactions whose records live on different nodes (clients of nodes 1 and
/// 3) each hold a key and then ask for the other's: neither node sees the whole
/// cycle of waits, so detection follows the waits from node to node. Exactly one
/// of them fails with 40P01, soon; the other then gets its key and commits.
#[test]
fn a_deadlock_across_status_nodes_has_one_victim() {
    let cluster = Cluster::start(3);
    let c1 = wait_client(&cluster.addr(0));
    let c3 = wait_client(&cluster.addr(2));
    create_rf3(&c1, 4);
    for round in 0..3 {
        let (k1, k2) = (key(100 + 2 * round), key(101 + 2 * round));
        let mut t1 = c1.begin();
        let mut t2 = c3.begin();
        assert_ne!(t1.id().status_node(), t2.id().status_node(), "the two records must be on different nodes");
        t1.write("rf3", vec![WriteOp::put(k1.clone(), b"t1".to_vec())]).unwrap();
        t2.write("rf3", vec![WriteOp::put(k2.clone(), b"t2".to_vec())]).unwrap();
        let (a, b) = std::thread::scope(|s| {
            let (k1b, k2b) = (k1.clone(), k2.clone());
            let a = s.spawn(move || write_then_end(t1, &k2b));
            // The second wait closes the cycle (after the first has begun).
            std::thread::sleep(Duration::from_millis(300));
            let b = s.spawn(move || write_then_end(t2, &k1b));
            (a.join().unwrap(), b.join().unwrap())
        });
        eprintln!("round {round}: t1 committed {} after {:?}, t2 committed {} after {:?}", a.0, a.1, b.0, b.1);
        assert!(a.0 != b.0, "exactly one victim: t1 committed {}, t2 committed {}", a.0, b.0);
        let victim_took = if a.0 { b.1 } else { a.1 };
        assert!(victim_took < Duration::from_secs(3), "the deadlock took {victim_took:?} to detect");
        // The survivor's writes are both there.
        let (w1, w2) = if a.0 { (b"t1".to_vec(), b"w".to_vec()) } else { (b"w".to_vec(), b"t2".to_vec()) };
        assert_eq!(c1.get("rf3", &k1).unwrap(), Some(w1));
        assert_eq!(c1.get("rf3", &k2).unwrap(), Some(w2));
    }
}

/// Node 3's clock runs 300 ms ahead (the default bound on skew is 500 ms). A value
/// it writes, acknowledged before a read begins, carries a time after that read's
/// time on a clock that is not ahead: read plainly it is missed (a stale read);
/// with an uncertainty window the read fails with `ReadRestart` at the value's
/// time, and read again there it sees the value. A committed transaction whose
/// record is on node 3 (commit time from its clock) is met the same way.
#[test]
fn reads_restart_past_values_written_by_a_clock_that_runs_ahead() {
    let ahead = vec!["--clock-offset-ms=300".to_string()];
    let cluster = Cluster::start_with(vec![Vec::new(), Vec::new(), ahead]);
    let c = wait_client(&cluster.addr(0));
    let c3 = wait_client(&cluster.addr(2));
    let table = create_rf3(&c, 6);
    assert!(c.reads_uncertain(), "a node of a cluster says its reads use an uncertainty window");
    let real_now = || HybridTime::from_micros(pinax_common::Clock::now_micros(&pinax_common::SystemClock));
    let plain = |read_ht| ReadPoint { read_ht, txn: None, uncertain_from: HybridTime::INVALID };
    let window = |read_ht| ReadPoint { read_ht, txn: None, uncertain_from: read_ht };
    let restart_of = |k: &[u8], at: ReadPoint| match c.read_at("rf3", k, at) {
        Ok((v, _)) => Err(v),
        Err(e) => {
            assert_eq!(e.code(), pinax_common::ErrorCode::ReadRestart, "{e}");
            Ok(e.restart_ht().expect("a read restart names its time"))
        }
    };

    // A fast-path write decided by a leader on node 3.
    let led_by_3 = (0..).find(|i| c.leader_of(&table.tablets[table.tablet_index_for(&key(*i))]) == cluster.addr(2)).unwrap();
    let k = key(led_by_3);
    let write_ht = c.write("rf3", vec![WriteOp::put(k.clone(), b"ahead".to_vec())]).unwrap();
    let read_ht = real_now();
    assert!(write_ht > read_ht, "node 3's clock is not ahead: wrote at {write_ht}, read at {read_ht}");
    assert_eq!(restart_of(&k, plain(read_ht)), Err(None), "without a window the acknowledged write is missed");
    let restart = restart_of(&k, window(read_ht)).expect("the value is in the read's uncertainty window");
    assert!(restart >= write_ht, "restart at {restart}, value written at {write_ht}");
    let again = ReadPoint { read_ht: restart, ..window(read_ht) };
    assert_eq!(c.read_at("rf3", &k, again).unwrap().0, Some(b"ahead".to_vec()));
    // A read whose window ends before the value (its time is more than the bound
    // ahead): the value was written after the read began, whatever the clocks.
    let early = read_ht.sub_micros(1_000_000);
    assert_eq!(restart_of(&k, window(early)), Err(None));

    // A transaction of a client of node 3 commits at node 3's time, on a tablet led
    // by another node.
    let other = (0..).map(|i| 10_000 + i).find(|i| c.leader_of(&table.tablets[table.tablet_index_for(&key(*i))]) != cluster.addr(2)).unwrap();
    let k2 = key(other);
    let mut txn = c3.begin();
    txn.write("rf3", vec![WriteOp::put(k2.clone(), b"txn".to_vec())]).unwrap();
    let commit_ht = txn.commit().unwrap().unwrap();
    let read_ht = real_now();
    assert!(commit_ht > read_ht, "committed at {commit_ht}, read at {read_ht}");
    let restart = restart_of(&k2, window(read_ht)).expect("the committed write is in the window");
    assert_eq!(restart, commit_ht);
    assert_eq!(c.read_at("rf3", &k2, ReadPoint { read_ht: restart, ..window(read_ht) }).unwrap().0, Some(b"txn".to_vec()));
    // Scans meet it too (any tablet order).
    let e = c.scan_at("rf3", ScanSpec::default(), window(read_ht)).unwrap_err();
    assert_eq!(e.code(), pinax_common::ErrorCode::ReadRestart, "{e}");
}

/// Retry `f` (a catalog request) for up to 20 s while it fails retryably (the
/// master's leader is being elected); its last result.
fn with_master<T>(what: &str, mut f: impl FnMut() -> Result<T, pinax_client::ClientError>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                eprintln!("{what}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

#[test]
fn the_master_is_replicated_and_survives_its_first_node() {
    // The catalog is a Raft group: the first node bootstraps it, the next two
    // join it. Killing the first node leaves the other two to elect a master
    // that still knows every table and sequence, creates tables, and places and
    // moves replicas; the first node comes back as a follower. (Before, the
    // master was the first node alone: without it no DDL, no sequence values,
    // no new nodes and no re-replication.)
    let mut cluster = Cluster::start(4);
    let c1 = wait_client(&cluster.addr(0));
    wait_for_master_replicas(&c1);
    let masters = c1.refresh_table("$master").unwrap().tablets[0].replicas.clone();
    assert!(masters.contains(&cluster.addr(0)), "{masters:?}");
    create_rf3(&c1, 4);
    let mut acked = Vec::new();
    write_all(&c1, 0..50, &mut acked);
    let seq = |c: &Client, count: u32| match c
        .call(Request::Sequence { name: "s1".into(), op: pinax_proto::SequenceOp::Next { start: 1, increment: 1, min: 1, max: i64::MAX, cycle: false, count } })
    {
        Ok(Response::SequenceValues { first, count }) => Ok((first, count)),
        Ok(other) => panic!("unexpected answer: {other:?}"),
        Err(e) => Err(e),
    };
    assert_eq!(seq(&c1, 10).unwrap(), (1, 10));

    // The first node dies: another master replica leads the catalog.
    cluster.kill(0);
    let other = (1..4).find(|i| masters.contains(&cluster.addr(*i))).unwrap();
    let c = wait_client(&cluster.addr(other));
    let started = Instant::now();
    let t = with_master("create table after the first node died", || c.create_table("after", Sharding::Hash { tablets: 2 }));
    eprintln!("a table was created {:?} after the first node (the master) died", started.elapsed());
    assert_eq!(t.tablets.len(), 2);
    assert_eq!(with_master("a sequence after the first node died", || seq(&c, 5)), (11, 5));
    let status = with_master("status", || c.status());
    assert!(status.tables.iter().any(|t| t.name == "rf3") && status.tables.iter().any(|t| t.name == "after"), "{:?}", status.tables);
    assert!(!status.nodes.is_empty());
    c.write("after", vec![WriteOp::put(key(1), b"a".to_vec())]).unwrap();
    write_all(&c, 50..100, &mut acked);
    check_all(&c, &acked);
    // The new master moves the dead node's replicas (node timeout 3 s), the
    // master group's own among them.
    wait_for_placement(&c, "replicas off the dead first node", |ti| !ti.replicas.contains(&cluster.addr(0)) && ti.replicas.len() == 3);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = with_master("the master's table", || c.refresh_table("$master"));
        if !t.tablets[0].replicas.contains(&cluster.addr(0)) && t.tablets[0].replicas.len() == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "the master group kept its dead member: {t:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A node restarted while the first node is down finds the master where it
    // last learnt it was.
    let restarted = (1..4).find(|i| *i != other).unwrap();
    cluster.restart(restarted);
    let cr = wait_client(&cluster.addr(restarted));
    assert_eq!(with_master("a table through a restarted node", || cr.refresh_table("after")).tablets.len(), 2);
    // The first node returns: it serves catalog requests through the master.
    cluster.restart(0);
    let c1 = wait_client(&cluster.addr(0));
    assert_eq!(with_master("the first node back", || c1.refresh_table("after")).tablets.len(), 2);
    assert_eq!(with_master("a sequence through the first node", || seq(&c1, 1)), (16, 1));
    assert_eq!(c1.get("after", &key(1)).unwrap(), Some(b"a".to_vec()));
    check_all(&c1, &acked);
    // Its master replica was moved away while it was down: it drops it (an
    // orphan, after the node timeout). Restarted again without --join, it must
    // find the masters, not bootstrap a second, empty catalog of its own (it
    // did: the first node bootstrapped whenever it had no master replica).
    // (Asked of the node itself: its replicas as it holds them. A wait for the
    // replica's directory, from before tablets shared one engine, waited for
    // nothing: the node was sometimes restarted with its orphan still there.)
    let deadline = Instant::now() + Duration::from_secs(60);
    while c1.status().map_or(true, |s| s.replicas.contains(&pinax_common::TabletId::MASTER)) {
        if Instant::now() >= deadline {
            // (Seen once in CI under load, never here: what the node said of its
            // master replica, for the next time.)
            let log = std::fs::read_to_string(cluster.dirs[0].path().join("test.log")).unwrap_or_default();
            let id = pinax_common::TabletId::MASTER.0.to_string();
            let said: Vec<&str> = log.lines().filter(|l| l.contains(&id) || l.contains("master") || l.contains("replica")).collect();
            eprintln!("the first node's log on its master replica (last 80 lines):\n{}", said[said.len().saturating_sub(80)..].join("\n"));
            panic!("the first node kept its moved master replica: {:?}", c1.status().map(|s| s.replicas));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.restart(0);
    let c1 = wait_client(&cluster.addr(0));
    assert_eq!(with_master("the first node without its master replica", || c1.refresh_table("after")).tablets.len(), 2);
    assert_eq!(with_master("a sequence through it", || seq(&c1, 1)), (17, 1));
    let t = c1.refresh_table("$master").unwrap();
    assert!(!t.tablets[0].replicas.contains(&cluster.addr(0)), "{t:?}");
}

#[test]
fn a_joining_node_gets_its_share_of_replicas() {
    // Three nodes hold every replica; a fourth joins. The master moves replicas
    // from the most loaded nodes to it, one at a time (learner, catch-up, one
    // membership change, the old replica dropped), until no node holds two more
    // than another; the data stays whole and writable throughout.
    let mut cluster = Cluster::start(3);
    let c = wait_client(&cluster.addr(0));
    create_rf3(&c, 6);
    let mut acked = Vec::new();
    write_all(&c, 0..200, &mut acked);
    cluster.add_node();
    let new = cluster.addr(3);
    let load = |c: &Client| -> std::collections::BTreeMap<String, usize> {
        let mut tables = vec![c.refresh_table("rf3").unwrap()];
        tables.extend((1..=4).filter_map(|n| c.refresh_table(&format!("$status.{n}")).ok()));
        let mut load: std::collections::BTreeMap<String, usize> = (0..4).map(|i| (cluster.addr(i), 0)).collect();
        for r in tables.iter().flat_map(|t| t.tablets.iter()).flat_map(|ti| ti.replicas.iter()) {
            *load.entry(r.clone()).or_default() += 1;
        }
        load
    };
    let started = Instant::now();
    let mut next = 200;
    loop {
        // Writes go on while replicas move.
        write_all(&c, next..next + 20, &mut acked);
        next += 20;
        let l = load(&c);
        let (max, min) = (*l.values().max().unwrap(), *l.values().min().unwrap());
        if l[&new] > 0 && max <= min + 1 {
            eprintln!("replicas balanced {:?} after the fourth node joined: {l:?}", started.elapsed());
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "replicas never balanced: {l:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    wait_for_placement(&c, "three replicas each", |ti| ti.replicas.len() == 3);
    check_all(&c, &acked);
    // The moved replicas serve: with the first node gone, every row is there.
    cluster.kill(0);
    let c2 = wait_client(&cluster.addr(1));
    check_all(&c2, &acked);
}

#[test]
fn a_replica_is_dropped_as_stale_only_when_its_group_does_not_count_it() {
    // A node's replica of a tablet is asked for again (`CreateReplica` with other
    // members, as a master does that planned from a catalog lagging the group):
    // a replica the group counts as a voter is kept with what it acknowledged
    // (dropping it would let the group count a replica that forgot its writes);
    // one the group does not count is dropped and the request fails as
    // retryable, and the next request creates a fresh one.
    let cluster = Cluster::start(4);
    let c = wait_client(&cluster.addr(0));
    create_rf3(&c, 1);
    let mut acked = Vec::new();
    write_all(&c, 0..50, &mut acked);
    // Replicas stop moving once no node holds two more than another.
    let started = Instant::now();
    loop {
        let mut load: std::collections::BTreeMap<String, usize> = (0..4).map(|i| (cluster.addr(i), 0)).collect();
        let mut tables = vec![with_master("reading the placement", || c.refresh_table("rf3"))];
        tables.extend((1..=4).filter_map(|n| c.refresh_table(&format!("$status.{n}")).ok()));
        for r in tables.iter().flat_map(|t| t.tablets.iter()).flat_map(|ti| ti.replicas.iter()) {
            *load.entry(r.clone()).or_default() += 1;
        }
        if load.values().max() <= load.values().min().map(|m| m + 1).as_ref() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "replicas never balanced: {load:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let ti = with_master("locating the tablet", || c.refresh_table("rf3")).tablets[0].clone();
    let ids: std::collections::BTreeMap<String, u64> = (0..4).map(|i| (cluster.addr(i), wait_client(&cluster.addr(i)).node_id())).collect();
    let four = (0..4).map(|i| cluster.addr(i)).find(|a| !ti.replicas.contains(a)).unwrap();
    let other_members = |ti: &pinax_proto::TabletInfo| -> Vec<(u64, String)> {
        ti.replicas.iter().skip(1).map(|a| (ids[a], a.clone())).chain([(ids[&four], four.clone())]).collect()
    };
    let create = |addr: &str| c.call_at(addr, Request::CreateReplica { tablet: ti.clone(), members: other_members(&ti), bootstrap: false });
    let members = || match c.call_tablet(&ti, Request::GroupMembers { tablet: ti.id }) {
        Ok(Response::Members(m)) => m.into_iter().map(|(id, _)| id).collect::<Vec<_>>(),
        other => panic!("GroupMembers: {other:?}"),
    };
    // Every replica of the group is kept, its data whole.
    for r in &ti.replicas {
        assert!(matches!(create(r), Ok(Response::Done)), "a voter of the group was not kept at {r}");
        assert!(members().contains(&ids[r]));
    }
    check_all(&c, &acked);
    // The fourth node gets a replica the group does not count (no membership change).
    assert!(matches!(create(&four), Ok(Response::Done)));
    assert!(!members().contains(&ids[&four]));
    match create(&four) {
        Err(e) => assert!(e.to_string().contains("stale replica"), "{e}"),
        Ok(r) => panic!("a replica its group does not count was kept: {r:?}"),
    }
    assert!(matches!(create(&four), Ok(Response::Done)), "no fresh replica after the stale one was dropped");
    // The group still has its three voters and every acknowledged write.
    assert_eq!(members().len(), 3);
    write_all(&c, 50..60, &mut acked);
    check_all(&c, &acked);
}

#[test]
fn leaders_even_out_after_a_node_comes_back() {
    // Three nodes lead two of six tablets each. One restarts: the others take
    // its leaderships (4/4/0... as elections fall). The master hands leaderships
    // back (the leader pauses, the chosen follower campaigns once leases ran
    // out) until no node leads two more than another; writes go on throughout.
    let mut cluster = Cluster::start(3);
    let c = wait_client(&cluster.addr(0));
    let table = create_rf3(&c, 6);
    let mut acked = Vec::new();
    write_all(&c, 0..60, &mut acked);
    let leaders = |cluster: &Cluster, c: &Client| -> Vec<usize> {
        let mut n = vec![0; 3];
        for ti in &table.tablets {
            if let Some(i) = leader_index(cluster, c, ti.id, b"x") {
                n[i] += 1;
            }
        }
        n
    };
    cluster.kill(2);
    write_all(&c, 60..120, &mut acked); // the dead node's tablets elect leaders elsewhere
    cluster.restart(2);
    let after_restart = leaders(&cluster, &c);
    let started = Instant::now();
    let mut next = 120;
    loop {
        write_all(&c, next..next + 10, &mut acked);
        next += 10;
        let n = leaders(&cluster, &c);
        if n.iter().sum::<usize>() == 6 && n.iter().max().unwrap() - n.iter().min().unwrap() <= 1 {
            eprintln!("leaders {after_restart:?} after the restart, balanced to {n:?} in {:?}", started.elapsed());
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "leaders never balanced: {n:?} (after the restart {after_restart:?})");
        std::thread::sleep(Duration::from_millis(300));
    }
    check_all(&c, &acked);
}

/// Secure by default: a node serves only peers presenting a certificate of its
/// cluster's CA. A process without one cannot call a data RPC or send a Raft
/// vote; one with another cluster's certificate cannot call either, nor join;
/// every refusal is logged and the node goes on serving its own cluster.
#[test]
fn a_node_refuses_peers_without_its_clusters_certificate() {
    use pinax_proto::{frame, RequestEnvelope};
    use std::io::{Read, Write};
    let cluster = Cluster::start(1);
    let addr = cluster.addr(0);
    let c = wait_client(&addr);
    c.create_table("guarded", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("guarded", vec![WriteOp::put(key(1), b"secret".to_vec())]).unwrap();
    let table = c.refresh_table("guarded").unwrap();
    let read = read_req(table.tablets[0].id, &key(1));

    // No certificate: neither a client nor a raw frame gets an answer.
    let plain = Client::connect_with(&addr, ClientOptions { leader_wait: Duration::from_secs(1), ..Default::default() });
    assert!(plain.and_then(|p| p.call(read.clone())).is_err(), "a client without a certificate was served");
    let vote = Request::Raft { group: table.tablets[0].id.0, target: 1, kind: 2, body: vec![0; 64] };
    let mut frame_bytes = Vec::new();
    frame::encode_frame(&RequestEnvelope { ht: HybridTime(1), fence: 0, request: vote.clone() }, &mut frame_bytes).unwrap();
    let mut raw = std::net::TcpStream::connect(&addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(&frame_bytes).unwrap();
    let mut answer = Vec::new();
    let _ = raw.read_to_end(&mut answer);
    assert!(frame::decode_frame::<pinax_proto::ResponseEnvelope>(&answer).is_err(), "a plaintext vote got an answer");

    // Another cluster's certificate: refused the same way, and it cannot join.
    let other = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("other-cluster-certs-{}", std::process::id()));
    common::make_certs(&other);
    let stranger = Client::connect_with(&addr, ClientOptions { leader_wait: Duration::from_secs(1), ..common::tls_options(&other) });
    assert!(stranger.and_then(|s| s.call(vote)).is_err(), "a vote with another cluster's certificate was served");
    let joiner_dir = tempfile::tempdir().unwrap();
    let mut joiner = Command::new(bin())
        .args(["run", "--data-dir"])
        .arg(joiner_dir.path())
        .args(["--port", &free_port().to_string(), "--block-cache-mb", "16", "--memtable-mb", "32", "--join", &addr, "--certs-dir"])
        .arg(&other)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let _ = joiner.kill();
    let out = joiner.wait_with_output().unwrap();
    let joiner_log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!joiner_dir.path().join("node_id").exists(), "a node with another cluster's certificate got a node id: {joiner_log}");
    assert!(joiner_log.contains("waiting for the cluster"), "{joiner_log}");
    let _ = std::fs::remove_dir_all(&other);

    // The cluster's own clients are served throughout, and it has one node.
    assert_eq!(c.get("guarded", &key(1)).unwrap(), Some(b"secret".to_vec()));
    assert_eq!(c.status().unwrap().nodes.len(), 1);
    let log = std::fs::read_to_string(cluster.dirs[0].path().join("test.log")).unwrap();
    assert!(log.contains("refused a connection: TLS handshake failed"), "no refusal logged:\n{log}");
}

/// Kill -9 at each step of a split (docs/plans/tablet-splitting.md §7): the
/// nodes that reach the step end there (`Request::CrashAt`: the master for
/// `master.*` and `cleanup.*`, the parent's leader for `leader.*`, every
/// replica that applies the split for `apply.*`), are restarted, and the
/// cluster comes back to the parent or its halves: every row is there once,
/// read through the catalog, the tablets cover the keys without overlap, a
/// split parent serves no read, and the split can be asked again and ends
/// with the halves listed.
#[test]
fn a_node_killed_at_each_step_of_a_split_comes_back_to_the_parent_or_its_halves() {
    let mut cluster = Cluster::start(3);
    let c = wait_client(&cluster.addr(0));
    wait_for_master_replicas(&c);
    const ROWS: u32 = 400;
    // (Keys in order: a range table's rows come back in key order.)
    let key = |i: u32| format!("row{i:06}").into_bytes();
    let value = |i: u32| format!("value {i}").into_bytes();
    for (n, step) in pinax_tserver::node::crash::STEPS.iter().enumerate() {
        let name = format!("crash{n}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let table = loop {
            let t = with_master("create table", || c.create_table(&name, Sharding::Range { split_points: Vec::new() }));
            if t.tablets[0].replicas.len() == 3 {
                break t;
            }
            with_master("drop table", || c.drop_table(&name, false));
            assert!(Instant::now() < deadline, "no three replicas for {name}");
            std::thread::sleep(Duration::from_millis(300));
        };
        let parent = table.tablets[0].id;
        with_master("load", || c.write(&name, (0..ROWS).map(|i| WriteOp::put(key(i), value(i))).collect()));
        // (apply.* on every replica: any of them may apply first.)
        for i in 0..3 {
            c.call_at(&cluster.addr(i), Request::CrashAt { step: Some(step.to_string()) }).unwrap();
        }
        let at = key(ROWS / 2);
        let splitter = {
            let (addr, at) = (cluster.addr(2), at.clone());
            std::thread::spawn(move || wait_client(&addr).call(Request::SplitTablet { tablet: parent, at: Some(at) }))
        };
        // Some node reaches the step and ends; the others are told to go on.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut dead: Vec<usize> = Vec::new();
        while dead.is_empty() {
            assert!(Instant::now() < deadline, "no node crashed at {step}");
            std::thread::sleep(Duration::from_millis(10));
            dead = (0..3).filter(|&i| cluster.children[i].as_mut().is_some_and(|ch| ch.try_wait().unwrap().is_some())).collect();
        }
        for i in (0..3).filter(|i| !dead.contains(i)) {
            let _ = c.call_at(&cluster.addr(i), Request::CrashAt { step: None });
        }
        std::thread::sleep(Duration::from_millis(300));
        let dead: Vec<usize> = (0..3).filter(|&i| cluster.children[i].as_mut().is_some_and(|ch| ch.try_wait().unwrap().is_some())).collect();
        eprintln!("{step}: node(s) {dead:?} crashed");
        for &i in &dead {
            cluster.restart(i);
        }
        let _ = splitter.join();

        // Every row, once, through whatever the catalog lists now (a fresh client).
        let fresh = wait_client(&cluster.addr(0));
        let deadline = Instant::now() + Duration::from_secs(90);
        let rows = loop {
            match fresh.refresh_table(&name).and_then(|_| fresh.scan(&name, ScanSpec::default())) {
                Ok(rows) if rows.len() == ROWS as usize => break rows,
                Ok(rows) => panic!("{step}: {} rows, not {ROWS}", rows.len()),
                Err(e) => {
                    assert!(Instant::now() < deadline, "{step}: the table is not readable: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        };
        assert!(rows.iter().enumerate().all(|(i, (k, v))| (k, v) == (&key(i as u32), &value(i as u32))), "{step}: rows changed");
        // The split asked again ends with the halves listed (or was done).
        let halves = match with_master("split again", || fresh.call(Request::SplitTablet { tablet: parent, at: Some(at.clone()) })) {
            Response::Split { children, .. } => children,
            other => panic!("{step}: {other:?}"),
        };
        assert_eq!(halves.len(), 2);
        let t = with_master("the table", || fresh.refresh_table(&name));
        assert!(t.tablets.iter().all(|ti| ti.id != parent), "{step}: the parent is still listed: {t:?}");
        assert!(t.tablets[0].partition.start.is_empty() && t.tablets.last().unwrap().partition.end.is_none(), "{step}: {t:?}");
        for w in t.tablets.windows(2) {
            assert_eq!(w[0].partition.end.as_ref(), Some(&w[1].partition.start), "{step}: a gap or an overlap: {t:?}");
        }
        // Never two tablets serving one key: the parent's replicas serve no read.
        for i in 0..3 {
            let r = fresh.call_at(&cluster.addr(i), read_req(parent, &key(1)));
            assert!(r.is_err(), "{step}: node {i}'s replica of the split parent served a read: {r:?}");
        }
        let rows = fresh.scan(&name, ScanSpec::default()).unwrap();
        assert_eq!(rows.len(), ROWS as usize, "{step}: rows after the split");
        fresh.write(&name, vec![WriteOp::put(key(ROWS), b"more".to_vec())]).unwrap();
        assert_eq!(fresh.get(&name, &key(ROWS)).unwrap(), Some(b"more".to_vec()));
        assert_eq!(fresh.get(&name, &key(0)).unwrap(), Some(value(0)));
    }
}
