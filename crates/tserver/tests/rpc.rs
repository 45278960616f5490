//! A node served over real TCP, driven by the Rust client (in-memory engines).

use pinax_client::Client;
use pinax_common::{ErrorCode, HybridClock};
use pinax_proto::{frame, Request, RequestEnvelope, ResponseEnvelope, ScanSpec, Sharding, WriteOp};
use pinax_tserver::{MemFactory, Node, NodeConfig, RpcServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

struct TestNode {
    node: Arc<Node<MemFactory>>,
    server: RpcServer,
    addr: String,
}

fn start(mut cfg: NodeConfig) -> TestNode {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    cfg.rpc_addr = addr.clone();
    let node = Node::open(cfg, MemFactory::default(), Arc::new(HybridClock::system())).unwrap();
    let server = RpcServer::serve(node.clone(), listener).unwrap();
    let n = node.clone();
    std::thread::spawn(move || n.run_applier());
    TestNode { node, server, addr }
}

fn hash_key(i: u32) -> Vec<u8> {
    // spread keys over the whole hash space like the SQL layer's hash prefix
    let h = (i.wrapping_mul(2654435761) >> 16) as u16;
    let mut k = h.to_be_bytes().to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

#[test]
fn tables_fast_path_and_transactions() {
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    // A lone node's reads use no uncertainty window, and its answers say so (the
    // SQL layer then skips holding SELECT output back for restarts).
    assert!(!c.reads_uncertain());
    let t = c.create_table("accounts", Sharding::Hash { tablets: 0 }).unwrap();
    assert_eq!(t.tablets.len(), 8, "default tablets per node");
    let e = c.create_table("accounts", Sharding::Hash { tablets: 2 }).unwrap_err();
    assert_eq!(e.code(), ErrorCode::TableAlreadyExists);

    // fast path
    c.write("accounts", vec![WriteOp::put(hash_key(1), b"one".to_vec())]).unwrap();
    assert_eq!(c.get("accounts", &hash_key(1)).unwrap(), Some(b"one".to_vec()));

    // a transaction across all 8 tablets
    let mut txn = c.begin();
    let ops: Vec<WriteOp> = (0..64).map(|i| WriteOp::put(hash_key(i), format!("v{i}").into_bytes())).collect();
    txn.write("accounts", ops).unwrap();
    assert_eq!(txn.get("accounts", &hash_key(5)).unwrap(), Some(b"v5".to_vec()));
    assert_eq!(c.get("accounts", &hash_key(5)).unwrap(), None, "not visible before commit");
    txn.commit().unwrap().unwrap();
    let rows = c.scan("accounts", ScanSpec::default()).unwrap();
    assert_eq!(rows.len(), 64);
    let mut keys: Vec<_> = rows.iter().map(|(k, _)| k.clone()).collect();
    let sorted = {
        let mut s = keys.clone();
        s.sort();
        s
    };
    assert_eq!(keys, sorted, "scan returns key order across tablets");
    keys.dedup();
    assert_eq!(keys.len(), 64);
    let limited = c.scan("accounts", ScanSpec { limit: 10, ..Default::default() }).unwrap();
    assert_eq!(limited.len(), 10);
    let rev = c.scan("accounts", ScanSpec { reverse: true, limit: 3, ..Default::default() }).unwrap();
    assert_eq!(rev.iter().map(|r| r.0.clone()).collect::<Vec<_>>(), sorted.iter().rev().take(3).cloned().collect::<Vec<_>>());

    // multi-tablet autocommit batch runs as a transaction
    c.write("accounts", (100..120).map(|i| WriteOp::put(hash_key(i), b"b".to_vec())).collect()).unwrap();
    assert_eq!(c.scan("accounts", ScanSpec::default()).unwrap().len(), 84);

    // abort: nothing visible, intents removed
    let mut txn = c.begin();
    txn.write("accounts", (200..210).map(|i| WriteOp::put(hash_key(i), b"x".to_vec())).collect()).unwrap();
    txn.abort().unwrap();
    assert_eq!(c.scan("accounts", ScanSpec::default()).unwrap().len(), 84);

    // unique violation through the wire
    let e = c.write("accounts", vec![WriteOp::insert(hash_key(1), b"dup".to_vec())]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::DuplicateKey);
    assert_eq!(e.code().sqlstate(), "23505");

    // conflicting transactions: the later writer gets a retryable 40001
    let mut t1 = c.begin();
    let mut t2 = c.begin();
    t1.write("accounts", vec![WriteOp::put(hash_key(7), b"t1".to_vec())]).unwrap();
    let e = t2.write("accounts", vec![WriteOp::put(hash_key(7), b"t2".to_vec())]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    assert!(e.is_retryable());
    drop(t2);
    t1.commit().unwrap();
    assert_eq!(c.get("accounts", &hash_key(7)).unwrap(), Some(b"t1".to_vec()));

    // status and drop
    let st = c.status().unwrap();
    assert_eq!(st.tables.len(), 1);
    c.drop_table("accounts", false).unwrap();
    assert_eq!(c.get("accounts", &hash_key(1)).unwrap_err().code(), ErrorCode::TableNotFound);
    c.drop_table("accounts", true).unwrap();
    drop(n.server);
}

#[test]
fn range_sharded_table_scans_in_key_order() {
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    let t = c.create_table("r", Sharding::Range { split_points: vec![b"g".to_vec(), b"p".to_vec()] }).unwrap();
    assert_eq!(t.tablets.len(), 3);
    let words = ["apple", "kiwi", "zebra", "grape", "pear", "banana", "melon", "quince"];
    c.write("r", words.iter().map(|w| WriteOp::put(w.as_bytes().to_vec(), b"1".to_vec())).collect()).unwrap();
    let rows = c.scan("r", ScanSpec { start: b"b".to_vec(), end: Some(b"q".to_vec()), ..Default::default() }).unwrap();
    let got: Vec<String> = rows.into_iter().map(|(k, _)| String::from_utf8(k).unwrap()).collect();
    assert_eq!(got, ["banana", "grape", "kiwi", "melon", "pear"]);
    let rev = c.scan("r", ScanSpec { reverse: true, limit: 4, ..Default::default() }).unwrap();
    let got: Vec<String> = rev.into_iter().map(|(k, _)| String::from_utf8(k).unwrap()).collect();
    assert_eq!(got, ["zebra", "quince", "pear", "melon"]);
}

#[test]
fn abandoned_transaction_expires_and_frees_its_keys() {
    let n = start(NodeConfig { sync: false, txn_heartbeat_timeout: Duration::from_millis(300), ..NodeConfig::default() });
    // a client that never heartbeats (interval far above the timeout)
    let opts = pinax_client::ClientOptions { heartbeat_interval: Duration::from_secs(3600), ..Default::default() };
    let c = Client::connect_with(&n.addr, opts).unwrap();
    c.create_table("t", Sharding::Hash { tablets: 2 }).unwrap();
    let mut txn = c.begin();
    txn.write("t", vec![WriteOp::put(hash_key(1), b"x".to_vec())]).unwrap();
    std::mem::forget(txn); // the client "dies" without committing or aborting
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        n.node.tick();
        n.node.sweep_intents();
        if c.write("t", vec![WriteOp::put(hash_key(1), b"y".to_vec())]).is_ok() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "abandoned transaction never expired");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.get("t", &hash_key(1)).unwrap(), Some(b"y".to_vec()));
}

#[test]
fn heartbeats_keep_a_long_transaction_alive() {
    let n = start(NodeConfig { sync: false, txn_heartbeat_timeout: Duration::from_millis(500), ..NodeConfig::default() });
    let opts = pinax_client::ClientOptions { heartbeat_interval: Duration::from_millis(100), ..Default::default() };
    let c = Client::connect_with(&n.addr, opts).unwrap();
    c.create_table("t", Sharding::Hash { tablets: 2 }).unwrap();
    let mut txn = c.begin();
    txn.write("t", vec![WriteOp::put(hash_key(1), b"x".to_vec())]).unwrap();
    let until = std::time::Instant::now() + Duration::from_millis(1500);
    while std::time::Instant::now() < until {
        n.node.tick();
        std::thread::sleep(Duration::from_millis(50));
    }
    txn.commit().unwrap();
    assert_eq!(c.get("t", &hash_key(1)).unwrap(), Some(b"x".to_vec()));
}

#[test]
fn bad_frames_get_errors_and_the_node_survives() {
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    // 1. garbage payload with a valid checksum
    let mut s = TcpStream::connect(&n.addr).unwrap();
    let garbage = vec![0xEEu8; 32];
    let mut f = (garbage.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&crc32c::crc32c(&garbage).to_be_bytes());
    f.extend_from_slice(&garbage);
    s.write_all(&f).unwrap();
    let mut buf = Vec::new();
    let resp: ResponseEnvelope = frame::read_frame(&mut s, &mut buf).unwrap().unwrap();
    assert_eq!(resp.result.unwrap_err().code, ErrorCode::InvalidRequest);
    // 2. bad checksum
    let mut s = TcpStream::connect(&n.addr).unwrap();
    let mut good = Vec::new();
    frame::encode_frame(&RequestEnvelope { ht: Default::default(), fence: 0, request: Request::Ping }, &mut good).unwrap();
    good[5] ^= 0xFF;
    s.write_all(&good).unwrap();
    let resp: ResponseEnvelope = frame::read_frame(&mut s, &mut buf).unwrap().unwrap();
    assert_eq!(resp.result.unwrap_err().code, ErrorCode::Corruption);
    // 3. absurd length: refused, connection closed
    let mut s = TcpStream::connect(&n.addr).unwrap();
    s.write_all(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]).unwrap();
    let resp: ResponseEnvelope = frame::read_frame(&mut s, &mut buf).unwrap().unwrap();
    assert_eq!(resp.result.unwrap_err().code, ErrorCode::InvalidRequest);
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    // 4. requests naming things that do not exist
    let c = Client::connect(&n.addr).unwrap();
    let e = c.call(Request::Write { tablet: pinax_common::TabletId(999), ops: vec![], read_ht: None, txn: None, request: 0 }).unwrap_err();
    assert_eq!(e.code(), ErrorCode::TabletNotFound);
    let e = c.create_table("bad", Sharding::Hash { tablets: 100_000 }).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidRequest);
    let e = c.call(Request::CommitTxn { txn: pinax_common::TxnId([1; 16]), participants: vec![] }).unwrap_err();
    assert_eq!(e.code(), ErrorCode::TxnNotFound);
    // still serving
    assert!(matches!(c.call(Request::Ping).unwrap(), pinax_proto::Response::Pong { .. }));
}

#[test]
fn concurrent_transfers_keep_the_total() {
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    c.create_table("bank", Sharding::Hash { tablets: 0 }).unwrap();
    const ACCOUNTS: u32 = 20;
    c.write("bank", (0..ACCOUNTS).map(|i| WriteOp::put(hash_key(i), 100u64.to_be_bytes().to_vec())).collect()).unwrap();
    let bal = |v: Option<Vec<u8>>| u64::from_be_bytes(v.unwrap().try_into().unwrap());
    let mut handles = Vec::new();
    for th in 0..4u32 {
        let c = c.clone();
        handles.push(std::thread::spawn(move || {
            let mut done = 0;
            let mut rng = th as u64 * 7919 + 1;
            while done < 25 {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let (a, b) = ((rng >> 33) as u32 % ACCOUNTS, (rng >> 17) as u32 % ACCOUNTS);
                if a == b {
                    continue;
                }
                let mut txn = c.begin();
                let res = (|| {
                    let va = bal(txn.get("bank", &hash_key(a))?);
                    let vb = bal(txn.get("bank", &hash_key(b))?);
                    let amt = (rng % 10).min(va);
                    txn.write(
                        "bank",
                        vec![WriteOp::put(hash_key(a), (va - amt).to_be_bytes().to_vec()), WriteOp::put(hash_key(b), (vb + amt).to_be_bytes().to_vec())],
                    )?;
                    Ok::<_, pinax_client::ClientError>(())
                })();
                match res {
                    Ok(()) => match txn.commit() {
                        Ok(_) => done += 1,
                        Err(e) => assert!(e.is_retryable(), "{e}"),
                    },
                    Err(e) => assert!(e.is_retryable(), "{e}"),
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let rows = c.scan("bank", ScanSpec::default()).unwrap();
    assert_eq!(rows.len(), ACCOUNTS as usize);
    let total: u64 = rows.into_iter().map(|(_, v)| u64::from_be_bytes(v.try_into().unwrap())).sum();
    assert_eq!(total, 100 * ACCOUNTS as u64);
}

#[test]
fn conflicts_name_the_blocker_who_can_be_waited_for_and_deadlocks_are_refused() {
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    c.create_table("w", Sharding::Hash { tablets: 2 }).unwrap();
    let mut t1 = c.begin();
    let mut t2 = c.begin();
    t1.write("w", vec![WriteOp::lock(hash_key(1))]).unwrap();
    t2.write("w", vec![WriteOp::put(hash_key(2), b"t2".to_vec())]).unwrap();
    // t2 meets t1's lock: the error names t1
    let e = t2.write("w", vec![WriteOp::put(hash_key(1), b"t2".to_vec())]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    assert_eq!(e.blocker(), Some(t1.id()));
    // t1 is still running: a wait times out
    assert_eq!(c.wait_txn(t1.id(), Some(t2.id()), 50).unwrap(), None);
    // t1 waits for t2 (in the background); t2 waiting for t1 would close the cycle
    let (c2, id1, id2) = (c.clone(), t1.id(), t2.id());
    let waiter = std::thread::spawn(move || c2.wait_txn(id2, Some(id1), 5000));
    std::thread::sleep(Duration::from_millis(200));
    let e = c.wait_txn(t1.id(), Some(t2.id()), 1000).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Deadlock);
    // the victim aborts: the waiter wakes at once and learns it did not commit
    let started = std::time::Instant::now();
    t2.abort().unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), Some(false));
    assert!(started.elapsed() < Duration::from_secs(2));
    // a blocked write retried after its blocker ends goes through
    let mut t3 = c.begin();
    let mut waits = 0;
    let waiter = std::thread::spawn({
        let c = c.clone();
        move || {
            std::thread::sleep(Duration::from_millis(200));
            let committed = t1.commit().unwrap().is_some();
            (c, committed)
        }
    });
    t3.write_waiting("w", vec![WriteOp::put(hash_key(1), b"t3".to_vec())], &mut |client, blocker| {
        waits += 1;
        loop {
            if let Some(committed) = client.wait_txn(blocker, None, 1000)? {
                // a lock-only holder that committed leaves nothing behind
                return Ok(committed);
            }
        }
    })
    .unwrap();
    assert_eq!(waits, 1);
    assert!(waiter.join().unwrap().1);
    t3.commit().unwrap();
    assert_eq!(c.get("w", &hash_key(1)).unwrap().as_deref(), Some(&b"t3"[..]));
}

/// A DDL lock as a test applier holds it: (lock id, relations with their modes).
type HeldLock = (u128, Vec<(String, String)>);

/// Records the log positions it is asked to apply through, and the DDL locks it
/// holds; fails when told to.
#[derive(Default)]
struct RecordingApplier {
    asked: parking_lot::Mutex<Vec<u64>>,
    fail: std::sync::atomic::AtomicBool,
    /// (lock id, relations) held.
    locks: parking_lot::Mutex<Vec<HeldLock>>,
}

impl pinax_tserver::DdlApplier for RecordingApplier {
    fn apply_upto(&self, upto: u64, _deadline: std::time::Instant) -> Result<(), String> {
        self.asked.lock().push(upto);
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("PostgreSQL is down".into());
        }
        Ok(())
    }
    fn hold_lock(&self, lock: &pinax_proto::DdlLock, _deadline: std::time::Instant) -> Result<(), String> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("canceling statement due to lock timeout".into());
        }
        self.locks.lock().push((lock.lock, lock.relations.clone()));
        Ok(())
    }
    fn release_lock(&self, lock: u128) {
        self.locks.lock().retain(|(id, _)| *id != lock);
    }
    fn caught_up(&self) -> bool {
        !self.fail.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn applied(&self) -> u64 {
        self.asked.lock().iter().copied().max().unwrap_or(0)
    }
}

#[test]
fn ddl_locks_are_held_on_the_other_nodes_until_let_go() {
    use pinax_proto::{DdlLock, Response};
    let master = start(NodeConfig { node_id: 1, ..NodeConfig::default() });
    let second = start(NodeConfig { node_id: 2, join: vec![master.addr.clone()], ..NodeConfig::default() });
    let third = start(NodeConfig { node_id: 3, join: vec![master.addr.clone()], ..NodeConfig::default() });
    let appliers: Vec<Arc<RecordingApplier>> = (0..3).map(|_| Arc::new(RecordingApplier::default())).collect();
    for (n, a) in [&master, &second, &third].iter().zip(&appliers) {
        n.node.set_ddl_applier(a.clone());
    }
    let c2 = Client::connect(&second.addr).unwrap();
    for (id, n) in [(2, &second), (3, &third)] {
        Client::connect(&n.addr).unwrap().call(Request::RegisterNode { node_id: id, addr: n.addr.clone(), leading: Vec::new(), reports: Vec::new() }).unwrap();
    }
    let lock = |id: u128, pid: u32| DdlLock {
        lock: id,
        origin: 2,
        origin_addr: String::new(),
        pid,
        database: "db".into(),
        relations: vec![("\"public\".\"t\"".into(), "SHARE".into())],
        timeout_ms: 1000,
    };
    // Taken through node 2 (the origin): held on nodes 1 and 3, not on node 2
    // (its PostgreSQL takes its own); the answer is a clock reading.
    let me = std::process::id();
    match c2.call(Request::LockDdl { lock: lock(7, me) }).unwrap() {
        Response::Now(ht) => assert!(ht > pinax_common::HybridTime::INVALID),
        other => panic!("{other:?}"),
    }
    let held = |a: &RecordingApplier| a.locks.lock().iter().map(|(id, _)| *id).collect::<Vec<_>>();
    assert_eq!((held(&appliers[0]), held(&appliers[1]), held(&appliers[2])), (vec![7], vec![], vec![7]));
    assert_eq!(appliers[0].locks.lock()[0].1, vec![("\"public\".\"t\"".to_string(), "SHARE".to_string())]);
    // The origin says it is held while its backend lives, then not once let go.
    let c3 = Client::connect(&third.addr).unwrap();
    let asked = |c: &Client, id: u128| c.call(Request::DdlLockHeld { lock: id }).unwrap();
    assert_eq!(asked(&c2, 7), Response::Held(true));
    assert_eq!(asked(&c3, 7), Response::Held(false), "only the origin knows its locks");
    c2.call(Request::UnlockDdl { lock: 7 }).unwrap();
    assert_eq!((held(&appliers[0]), held(&appliers[2])), (vec![], vec![]));
    assert_eq!(asked(&c2, 7), Response::Held(false));
    // A backend that died holds nothing (a pid no process has).
    c2.call(Request::LockDdl { lock: lock(8, u32::MAX - 1) }).unwrap();
    assert_eq!(asked(&c2, 8), Response::Held(false));
    c2.call(Request::UnlockDdl { lock: 8 }).unwrap();
    // A node out of reach (down) is not waited for but fenced: the lock goes on
    // once the SQL lease it may hold has ended (granted as it registered: 5 s +
    // 4 × 0.5 s of clock skew later), and it gets no lease while the lock is held.
    let register = |id: u64, addr: &str| c2.call(Request::RegisterNode { node_id: id, addr: addr.into(), leading: Vec::new(), reports: Vec::new() }).unwrap();
    register(4, "127.0.0.1:1");
    let asked_at = std::time::Instant::now();
    c2.call(Request::LockDdl { lock: lock(10, me) }).unwrap();
    assert!(asked_at.elapsed() >= Duration::from_millis(6900), "the lock went on after {:?}, within the lease", asked_at.elapsed());
    assert_eq!((held(&appliers[0]), held(&appliers[2])), (vec![10], vec![10]));
    assert!(matches!(register(4, "127.0.0.1:1"), Response::Registered { lease: None, .. }), "a fenced node got a lease");
    // A node new to the master while the lock is held was not asked to hold it either.
    assert!(matches!(register(5, "127.0.0.1:2"), Response::Registered { lease: None, .. }), "a node new during the lock got a lease");
    // (Nodes 2 and 3 do not heartbeat in this test: registered again, they are live.)
    register(2, &second.addr);
    register(3, &third.addr);
    c2.call(Request::UnlockDdl { lock: 10 }).unwrap();
    assert_eq!((held(&appliers[0]), held(&appliers[2])), (vec![], vec![]));
    assert!(matches!(register(4, "127.0.0.1:1"), Response::Registered { lease: Some(_), .. }), "the fence outlived its lock");
    assert!(matches!(register(5, "127.0.0.1:2"), Response::Registered { lease: Some(_), .. }), "the fence outlived its lock");
    // A node that cannot take it: the DDL fails (55P03) and nobody keeps it.
    appliers[2].fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let e = c2.call(Request::LockDdl { lock: lock(9, me) }).unwrap_err();
    assert_eq!(e.code(), ErrorCode::LockNotAvailable, "{e}");
    assert!(e.to_string().contains("lock timeout"), "{e}");
    assert_eq!((held(&appliers[0]), held(&appliers[2])), (vec![], vec![]));
    // Lock modes are checked where they are used (nodes refuse unknown ones).
    assert!(c2.call(Request::LockDdl { lock: DdlLock { lock: 0, ..lock(1, me) } }).is_err(), "lock id 0");
}

#[test]
fn published_ddl_is_logged_and_applied_by_the_other_nodes_and_names_share_a_table_or_sequence() {
    use pinax_proto::{DdlEntry, DdlStatement, Response};
    let master = start(NodeConfig { node_id: 1, ..NodeConfig::default() });
    let second = start(NodeConfig { node_id: 2, join: vec![master.addr.clone()], ..NodeConfig::default() });
    let on_master = Arc::new(RecordingApplier::default());
    let on_second = Arc::new(RecordingApplier::default());
    master.node.set_ddl_applier(on_master.clone());
    second.node.set_ddl_applier(on_second.clone());
    let c2 = Client::connect(&second.addr).unwrap();
    c2.call(Request::RegisterNode { node_id: 2, addr: second.addr.clone(), leading: Vec::new(), reports: Vec::new() }).unwrap();
    let entry = |sql: &str| DdlEntry {
        seq: 0,
        origin: 2,
        database: "db".into(),
        user: "u".into(),
        search_path: "public".into(),
        statements: vec![DdlStatement { sql: sql.into(), names: vec![("public.t".into(), "n2_t5_100".into())] }],
        lock: 0,
    };
    // Published through node 2 (its origin): node 1 applies it, node 2 is not asked.
    match c2.call(Request::PublishDdl { entry: entry("CREATE TABLE t ()") }).unwrap() {
        Response::DdlPublished { seq, lagging } => {
            assert_eq!(seq, 1);
            assert!(lagging.is_empty(), "{lagging:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(*on_master.asked.lock(), vec![1]);
    assert!(on_second.asked.lock().is_empty());
    // A node that cannot apply it is reported; the entry is logged all the same.
    on_master.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    match c2.call(Request::PublishDdl { entry: entry("DROP TABLE t") }).unwrap() {
        Response::DdlPublished { seq, lagging } => {
            assert_eq!(seq, 2);
            assert_eq!(lagging, vec![(1, master.addr.clone())]);
        }
        other => panic!("{other:?}"),
    }
    match c2.call(Request::ReadDdl { after: 0, max: 10 }).unwrap() {
        Response::Ddl(entries) => {
            assert_eq!(entries.iter().map(|e| (e.seq, e.statements[0].sql.as_str())).collect::<Vec<_>>(), vec![(1, "CREATE TABLE t ()"), (2, "DROP TABLE t")]);
        }
        other => panic!("{other:?}"),
    }
    // Another name of a table reads and writes the same tablets; dropping it
    // leaves the table, dropping the table takes the name.
    c2.create_table("n2_t5_100", Sharding::Hash { tablets: 2 }).unwrap();
    c2.write("n2_t5_100", vec![WriteOp::put(hash_key(1), b"one".to_vec())]).unwrap();
    c2.call(Request::AddTableName { name: "t7_200".into(), existing: "n2_t5_100".into() }).unwrap();
    let c1 = Client::connect(&master.addr).unwrap();
    assert_eq!(c1.get("t7_200", &hash_key(1)).unwrap(), Some(b"one".to_vec()));
    c1.drop_table("t7_200", false).unwrap();
    assert_eq!(c2.get("n2_t5_100", &hash_key(1)).unwrap(), Some(b"one".to_vec()));
    c1.call(Request::AddTableName { name: "t7_201".into(), existing: "n2_t5_100".into() }).unwrap();
    c2.drop_table("n2_t5_100", false).unwrap();
    let gone = c1.call(Request::GetTable { name: "t7_201".into() }).unwrap_err();
    assert_eq!(gone.code(), ErrorCode::TableNotFound);
    // Sequences are the master's, whichever node is asked.
    use pinax_proto::SequenceOp;
    let next = |c: &Client, name: &str| match c
        .call(Request::Sequence { name: name.into(), op: SequenceOp::Next { start: 1, increment: 1, min: 1, max: 1000, cycle: false, count: 100 } })
        .unwrap()
    {
        Response::SequenceValues { first, count } => (first, count),
        other => panic!("{other:?}"),
    };
    assert_eq!(next(&c2, "n2_q5_9"), (1, 100));
    c1.call(Request::Sequence { name: "q7_3".into(), op: SequenceOp::Alias { existing: "n2_q5_9".into() } }).unwrap();
    assert_eq!(next(&c1, "q7_3"), (101, 100));
    c1.call(Request::Sequence { name: "q7_3".into(), op: SequenceOp::Set { value: 995, is_called: true } }).unwrap();
    assert_eq!(next(&c2, "n2_q5_9"), (996, 5));
    assert_eq!(next(&c2, "n2_q5_9"), (0, 0));
    let bad =
        c2.call(Request::Sequence { name: "x".into(), op: SequenceOp::Next { start: 1, increment: 0, min: 1, max: 10, cycle: false, count: 1 } }).unwrap_err();
    assert_eq!(bad.code(), ErrorCode::InvalidRequest);
    drop(second);
    drop(master);
}

#[test]
fn local_clients_reach_the_node_over_its_unix_socket() {
    // A client told the node's Unix socket uses it for that node's address (the
    // SQL layer on the node's machine); a bad frame there is refused as over TCP;
    // a socket that does not answer falls back to TCP.
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("pinax.sock");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cfg = NodeConfig { sync: false, rpc_addr: addr.clone(), ..NodeConfig::default() };
    let node = Node::open(cfg, MemFactory::default(), Arc::new(HybridClock::system())).unwrap();
    let unix = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let mut server = RpcServer::serve_with(node.clone(), listener, Some(unix)).unwrap();
    let n = node.clone();
    std::thread::spawn(move || n.run_applier());

    let local = pinax_client::ClientOptions { local_socket: Some((addr.clone(), sock.clone())), ..Default::default() };
    let c = Client::connect_with(&addr, local).unwrap();
    assert!(c.uses_local_socket(&addr));
    c.create_table("u", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("u", (0..50).map(|i| WriteOp::put(hash_key(i), vec![i as u8])).collect()).unwrap();
    assert_eq!(c.scan("u", ScanSpec::default()).unwrap().len(), 50);
    let mut txn = c.begin();
    txn.write("u", vec![WriteOp::put(hash_key(1), b"t".to_vec())]).unwrap();
    txn.commit().unwrap();
    assert!(c.uses_local_socket(&addr));

    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let garbage = vec![0xEEu8; 32];
    let mut f = (garbage.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&crc32c::crc32c(&garbage).to_be_bytes());
    f.extend_from_slice(&garbage);
    s.write_all(&f).unwrap();
    let resp: ResponseEnvelope = frame::read_frame(&mut s, &mut Vec::new()).unwrap().unwrap();
    assert_eq!(resp.result.unwrap_err().code, ErrorCode::InvalidRequest);

    let elsewhere = pinax_client::ClientOptions { local_socket: Some((addr.clone(), dir.path().join("none.sock"))), ..Default::default() };
    let tcp = Client::connect_with(&addr, elsewhere).unwrap();
    assert!(!tcp.uses_local_socket(&addr));
    assert_eq!(tcp.scan("u", ScanSpec::default()).unwrap().len(), 50);
    server.stop();
}

#[test]
fn an_interrupted_client_stops_a_scan_between_requests() {
    // The SQL layer's cancel check: asked before every request of a scan but
    // the first; true ends the scan with Interrupted (SQLSTATE 57014).
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    c.create_table("s", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("s", (0..100).map(|i| WriteOp::put(hash_key(i), vec![1])).collect()).unwrap();
    let stop = pinax_client::ClientOptions { interrupted: Some(|| true), ..Default::default() };
    let e = Client::connect_with(&n.addr, stop).unwrap().scan("s", ScanSpec::default()).unwrap_err();
    assert!(matches!(e, pinax_client::ClientError::Interrupted), "{e}");
    assert_eq!(e.code().sqlstate(), "57014");
    assert!(!e.is_retryable());
    let go_on = pinax_client::ClientOptions { interrupted: Some(|| false), ..Default::default() };
    assert_eq!(Client::connect_with(&n.addr, go_on).unwrap().scan("s", ScanSpec::default()).unwrap().len(), 100);
}

/// A transaction's first write to a tablet its home node leads creates the status
/// record in the same round trip (`CreateTxnAndWrite`); a first write that fails
/// after the record was created leaves a transaction that goes on normally.
#[test]
fn a_transactions_first_write_creates_its_record_in_the_same_round_trip() {
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    c.create_table("t", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("t", vec![WriteOp::put(hash_key(0), b"warm".to_vec())]).unwrap();
    // Requests the node served for a transaction's first and second write (the
    // least of three tries: a heartbeat may fall in between).
    let mut counts = Vec::new();
    for i in 0..3u32 {
        let mut txn = c.begin();
        let before = n.node.requests_served();
        txn.write("t", vec![WriteOp::put(hash_key(10 + i), b"first".to_vec())]).unwrap();
        let first = n.node.requests_served() - before;
        let before = n.node.requests_served();
        txn.write("t", vec![WriteOp::put(hash_key(20 + i), b"second".to_vec())]).unwrap();
        let second = n.node.requests_served() - before;
        txn.commit().unwrap().unwrap();
        counts.push((first, second));
    }
    assert_eq!(counts.iter().min().copied(), Some((1, 1)), "one request per write, the record created with the first: {counts:?}");
    for i in 0..3 {
        assert_eq!(c.get("t", &hash_key(10 + i)).unwrap(), Some(b"first".to_vec()));
        assert_eq!(c.get("t", &hash_key(20 + i)).unwrap(), Some(b"second".to_vec()));
    }

    // The first write conflicts with a pending intent: it fails, but the record
    // was created with it, and the transaction writes and commits afterwards.
    let mut t1 = c.begin();
    t1.write("t", vec![WriteOp::put(hash_key(5), b"t1".to_vec())]).unwrap();
    let mut t2 = c.begin();
    let e = t2.write("t", vec![WriteOp::put(hash_key(5), b"t2".to_vec())]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    t2.write("t", vec![WriteOp::put(hash_key(6), b"t2".to_vec())]).unwrap();
    assert!(t2.commit().unwrap().is_some(), "t2's record exists: its commit is a real one");
    t1.commit().unwrap().unwrap();
    assert_eq!(c.get("t", &hash_key(5)).unwrap(), Some(b"t1".to_vec()));
    assert_eq!(c.get("t", &hash_key(6)).unwrap(), Some(b"t2".to_vec()));

    // A malformed request (a write of another transaction, or none) is refused.
    let t3 = c.begin();
    let other = c.begin();
    let tablet = c.table("t").unwrap().tablets[0].id;
    let write =
        Request::Write { tablet, ops: vec![WriteOp::put(hash_key(7), b"x".to_vec())], read_ht: Some(t3.read_ht()), txn: Some((other.id(), 0)), request: 3 };
    let e = c.call_at(&n.addr, Request::CreateTxnAndWrite { txn: t3.id(), write: Box::new(write) }).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidRequest);
    let e = c.call_at(&n.addr, Request::CreateTxnAndWrite { txn: t3.id(), write: Box::new(Request::Ping) }).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidRequest);
    drop(n.server);
}

#[test]
fn a_write_if_live_is_one_request_that_reports_whether_the_row_was_there() {
    use pinax_proto::LiveWrite;
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    c.create_table("t", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("t", vec![WriteOp::put(hash_key(1), b"row".to_vec())]).unwrap();
    let patch = |k: u32, cols: &[u16], row: &[u8]| WriteOp::patch(hash_key(k), pinax_codec::patch::encode_patch_op(cols, cols, row));
    let before = n.node.requests_served();
    let (_, o) = c.write_if_live("t", &patch(1, &[2], b"new"), None, false).unwrap();
    assert_eq!((o, n.node.requests_served() - before), (LiveWrite::Applied, 1));
    let v = c.get("t", &hash_key(1)).unwrap().unwrap();
    let stack = pinax_codec::patch::decode_stack(&v).unwrap();
    assert_eq!((stack.patches.len(), stack.base), (1, &b"row"[..]));
    assert_eq!(c.write_if_live("t", &patch(2, &[2], b"new"), None, false).unwrap().1, LiveWrite::Absent);
    assert_eq!(c.get("t", &hash_key(2)).unwrap(), None);
    assert_eq!(c.write_if_live("t", &WriteOp::delete(hash_key(1)), None, false).unwrap().1, LiveWrite::Applied);
    assert_eq!(c.get("t", &hash_key(1)).unwrap(), None);
    assert_eq!(c.write_if_live("t", &WriteOp::delete(hash_key(1)), None, false).unwrap().1, LiveWrite::Absent);
    // Anything but a delete or a patch is refused, and the node goes on.
    let e = c.write_if_live("t", &WriteOp::put(hash_key(1), b"x".to_vec()), None, false).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidRequest);
    let e = c.write_if_live("t", &WriteOp::patch(hash_key(1), b"\xff".to_vec()), None, false).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidRequest);
    c.write("t", vec![WriteOp::put(hash_key(1), b"again".to_vec())]).unwrap();
    assert_eq!(c.get("t", &hash_key(1)).unwrap(), Some(b"again".to_vec()));
}

/// A storage error stops a Raft group for good in openraft (the master's
/// included): the node opens the replica again once storage works, and every
/// acknowledged write is there (issue #41: no single resource error kills a node).
#[test]
fn replicas_stopped_by_a_storage_error_are_opened_again() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let factory = MemFactory::default();
    let cfg = NodeConfig { sync: false, rpc_addr: addr.clone(), ..NodeConfig::default() };
    let node = Node::open(cfg, factory.clone(), Arc::new(HybridClock::system())).unwrap();
    let _server = RpcServer::serve(node.clone(), listener).unwrap();
    let n = node.clone();
    std::thread::spawn(move || n.run_applier());
    let c = Client::connect(&addr).unwrap();
    c.create_table("t", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("t", vec![WriteOp::put(hash_key(1), b"one".to_vec())]).unwrap();

    factory.fail_writes(Some("injected: Too many open files"));
    assert!(c.write("t", vec![WriteOp::put(hash_key(2), b"two".to_vec())]).is_err(), "a write fails while storage does");
    assert!(c.create_table("u", Sharding::Hash { tablets: 2 }).is_err(), "so does the master");
    factory.fail_writes(None);

    // Ticks reopen the stopped replicas (the first try comes a second after the stop).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        node.tick();
        let created = |r: Result<_, pinax_client::ClientError>| r.is_ok() || r.is_err_and(|e| e.code() == ErrorCode::TableAlreadyExists);
        let ok = c.write("t", vec![WriteOp::put(hash_key(3), b"three".to_vec())]).is_ok() && created(c.create_table("u", Sharding::Hash { tablets: 2 }));
        if ok {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the replicas were not opened again");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(c.get("t", &hash_key(1)).unwrap(), Some(b"one".to_vec()));
    assert_eq!(c.get("t", &hash_key(3)).unwrap(), Some(b"three".to_vec()));
    c.write("u", vec![WriteOp::put(hash_key(4), b"four".to_vec())]).unwrap();
}

/// Three nodes: a replicated tablet left idle quiesces on every node (its
/// followers held quiet by the leader), and when the leader's node goes (its RPC
/// server and groups stopped), the other nodes' ticks find it silent, release
/// the followers, and one of them takes over: the next write succeeds.
#[test]
fn an_idle_replicated_tablet_quiesces_and_fails_over_when_its_leaders_node_goes() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    let timing = pinax_raft::RaftTiming { quiesce_after_ms: 500, ..Default::default() };
    let cfg =
        |id: u64, join: Option<String>| NodeConfig { node_id: id, join: join.into_iter().collect(), sync: false, raft_timing: timing, ..NodeConfig::default() };
    let first = start(cfg(1, None));
    let join = Some(first.addr.clone());
    let mut nodes = vec![first, start(cfg(2, join.clone())), start(cfg(3, join))];
    let ticking: Vec<Arc<AtomicBool>> = nodes
        .iter()
        .map(|n| {
            let (node, on) = (n.node.clone(), Arc::new(AtomicBool::new(true)));
            let go = on.clone();
            std::thread::spawn(move || {
                while go.load(Ordering::SeqCst) {
                    node.tick();
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
            on
        })
        .collect();
    let c = Client::connect(&nodes[0].addr).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let table = loop {
        let t = c.create_table("rf3", Sharding::Hash { tablets: 4 }).unwrap();
        if t.tablets.iter().all(|ti| ti.replicas.len() == 3) {
            break t;
        }
        c.drop_table("rf3", false).unwrap();
        assert!(Instant::now() < deadline, "the master never placed three replicas");
        std::thread::sleep(Duration::from_millis(300));
    };
    // A tablet node 2 or 3 leads (node 1 keeps the catalog and the client's
    // connection), written once, then idle.
    let leads = |n: &TestNode, id| n.node.tablet(id).is_some_and(|t| t.leads_now());
    let (tablet, leader, k) = (0..1000u32)
        .find_map(|i| {
            let k = hash_key(i);
            c.write("rf3", vec![WriteOp::put(k.clone(), b"v1".to_vec())]).unwrap();
            let ti = &table.tablets[table.tablet_index_for(&k)];
            (1..3).find(|n| leads(&nodes[*n], ti.id)).map(|n| (ti.id, n, k))
        })
        .expect("a tablet led by node 2 or 3");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !nodes.iter().all(|n| n.node.quiesced_replicas().contains(&tablet)) {
        assert!(Instant::now() < deadline, "the idle tablet never quiesced on every node");
        std::thread::sleep(Duration::from_millis(50));
    }

    // The leader's node goes.
    ticking[leader].store(false, Ordering::SeqCst);
    let mut gone = nodes.remove(leader);
    gone.server.stop();
    gone.node.close();
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(20);
    while c.write("rf3", vec![WriteOp::put(k.clone(), b"v2".to_vec())]).is_err() {
        assert!(Instant::now() < deadline, "no replica of the quiesced tablet took over");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(nodes.iter().any(|n| leads(n, tablet)), "the write succeeded without a new leader");
    assert_eq!(c.get("rf3", &k).unwrap(), Some(b"v2".to_vec()));
    eprintln!("a quiesced tablet's fail-over took {:?}", t0.elapsed());
    for on in &ticking {
        on.store(false, Ordering::SeqCst);
    }
}

#[test]
fn the_master_refuses_a_known_node_at_a_new_address() {
    use pinax_proto::Response;
    let master = start(NodeConfig { node_id: 1, ..NodeConfig::default() });
    let c = Client::connect(&master.addr).unwrap();
    let register = |addr: &str| c.call(Request::RegisterNode { node_id: 0, addr: addr.into(), leading: Vec::new(), reports: Vec::new() });
    let Response::Registered { node_id, .. } = register("10.0.0.2:7100").unwrap() else { panic!("not registered") };
    let again = |id: u64, addr: &str| c.call(Request::RegisterNode { node_id: id, addr: addr.into(), leading: Vec::new(), reports: Vec::new() });
    again(node_id, "10.0.0.2:7100").unwrap();
    let e = again(node_id, "10.0.0.9:7100").unwrap_err().to_string();
    assert!(e.contains("cannot change") && e.contains("10.0.0.2:7100"), "{e}");
    // A new node (id 0) may take over an address a wiped node left.
    let Response::Registered { node_id: other, .. } = register("10.0.0.2:7100").unwrap() else { panic!("not registered") };
    assert_ne!(other, node_id);
}

/// A request whose hybrid time is an hour ahead (a node with a broken clock, or
/// a forged frame) is refused and its time not adopted: the node's clock stays
/// put, and well-formed requests on the same connection are served.
#[test]
fn a_request_an_hour_ahead_is_refused_and_the_clock_stays_put() {
    use pinax_common::HybridTime;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cfg = NodeConfig { rpc_addr: addr.clone(), sync: false, ..NodeConfig::default() };
    let node = Node::open(cfg, MemFactory::default(), Arc::new(HybridClock::system().with_max_skew(500_000))).unwrap();
    let _server = RpcServer::serve(node.clone(), listener).unwrap();
    let mut s = TcpStream::connect(&addr).unwrap();
    let (mut rbuf, mut wbuf) = (Vec::new(), Vec::new());
    let mut send = |ht: HybridTime| {
        frame::write_frame(&mut s, &RequestEnvelope { ht, fence: 0, request: Request::Now }, &mut wbuf).unwrap();
        s.flush().unwrap();
        frame::read_frame::<ResponseEnvelope, _>(&mut s, &mut rbuf).unwrap().unwrap()
    };
    let now = HybridClock::system().now();
    let resp = send(now.add_micros(3_600_000_000));
    let e = resp.result.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    assert!(e.message.contains("ahead of this node's clock"), "{e:?}");
    assert!(node.clock().peek() < now.add_micros(2_000_000), "the node adopted the time: {:?}", node.clock().peek());
    // Within the max skew: taken in, and answered.
    let resp = send(now.add_micros(200_000));
    assert!(resp.result.is_ok(), "{:?}", resp.result);
    assert!(node.clock().peek() >= now.add_micros(200_000));
}

/// This process's resident memory, in bytes (Linux).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches("kB").trim().parse().unwrap();
    kb * 1024
}

/// A frame around `payload` (length and checksum).
fn raw_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Hostile frames from many connections at once: requests nested a million
/// deep (decoded recursively, they overflowed the serving thread's stack and
/// killed the node), frames whose header claims 64 MiB and that send a few
/// bytes (the reader allocated the claim), slow-drip frames and idle
/// connections (each held a thread forever). The node stays up, its memory
/// stays bounded, well-formed clients are served throughout, and one address
/// cannot take every connection.
#[test]
fn hostile_frames_from_many_connections_leave_the_node_serving() {
    use pinax_tserver::ServerLimits;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cfg = NodeConfig { rpc_addr: addr.clone(), sync: false, ..NodeConfig::default() };
    let node = Node::open(cfg, MemFactory::default(), Arc::new(HybridClock::system())).unwrap();
    let limits = ServerLimits { max_connections: 500, max_per_peer: 200, idle_timeout: Duration::from_secs(2), frame_timeout: Duration::from_secs(1) };
    let _server = RpcServer::serve_limited(node.clone(), listener, None, limits).unwrap();
    let c = Client::connect(&addr).unwrap();
    c.create_table("kept", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("kept", vec![WriteOp::put(hash_key(1), b"one".to_vec())]).unwrap();

    // A request nested a million deep: built by hand (encoding it would recurse).
    let mut one = Vec::new();
    frame::encode_frame(&RequestEnvelope { ht: Default::default(), fence: 0, request: Request::Forwarded(Box::new(Request::Ping)) }, &mut one).unwrap();
    let payload = &one[frame::HEADER_LEN..];
    // [ht = 0][fence = 0][Forwarded's variant][Ping's variant = 0]
    let (ht, forwarded) = (&payload[..2], &payload[2..payload.len() - 1]);
    let mut deep = ht.to_vec();
    for _ in 0..1_000_000 {
        deep.extend_from_slice(forwarded);
    }
    deep.push(0);
    let deep = raw_frame(&deep);
    let rss_before = rss_bytes();
    let attackers: Vec<_> = (0..40)
        .map(|i| {
            let (addr, deep) = (addr.clone(), deep.clone());
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                match i % 4 {
                    // nested: an error answer, then the connection is closed
                    0 => {
                        s.write_all(&deep).unwrap();
                        let mut buf = Vec::new();
                        let resp: ResponseEnvelope = frame::read_frame(&mut s, &mut buf).unwrap().unwrap();
                        let e = resp.result.unwrap_err();
                        assert_eq!(e.code, ErrorCode::InvalidRequest);
                        assert!(e.message.contains("nested"), "{e:?}");
                    }
                    // 64 MiB claimed, 16 bytes sent, then nothing
                    1 => {
                        let mut f = ((frame::MAX_FRAME) as u32).to_be_bytes().to_vec();
                        f.extend_from_slice(&[0; 4]);
                        f.extend_from_slice(&[7; 16]);
                        s.write_all(&f).unwrap();
                    }
                    // a frame dripped a byte every 300 ms
                    2 => {
                        let mut f = Vec::new();
                        frame::encode_frame(&RequestEnvelope { ht: Default::default(), fence: 0, request: Request::Ping }, &mut f).unwrap();
                        for b in f.iter().take(f.len() - 1) {
                            if s.write_all(&[*b]).is_err() {
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(300));
                        }
                    }
                    // connected, never a byte
                    _ => {}
                }
                // Every such connection is closed by the node within its bounds.
                let started = std::time::Instant::now();
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest);
                started.elapsed()
            })
        })
        .collect();
    // Meanwhile, a well-formed client is served.
    for i in 0..20 {
        assert_eq!(c.get("kept", &hash_key(1)).unwrap(), Some(b"one".to_vec()), "round {i}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let grown = rss_bytes().saturating_sub(rss_before);
    assert!(grown < 256 << 20, "memory grew by {} MiB with 10 connections claiming 64 MiB frames", grown >> 20);
    for a in attackers {
        let waited = a.join().unwrap();
        assert!(waited < Duration::from_secs(10), "a hostile connection was kept {waited:?}");
    }
    assert!(matches!(c.call(Request::Ping).unwrap(), pinax_proto::Response::Pong { .. }));

    // One address cannot take every connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr2 = listener.local_addr().unwrap().to_string();
    let limits = ServerLimits { max_per_peer: 2, ..ServerLimits::default() };
    let _server2 = RpcServer::serve_limited(node.clone(), listener, None, limits).unwrap();
    let _held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&addr2).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(100));
    let e = Client::connect(&addr2).and_then(|c| c.call(Request::Ping)).unwrap_err();
    assert!(e.to_string().contains("from one address"), "{e}");
}

/// A tablet split in place (`SplitReplica` at its leader, here a lone replica):
/// at its middle key by size, into the two tablets asked for; the parent then
/// refuses requests (`TabletSplit`, retryable), its halves serve its rows and
/// the intents of a transaction pending across the split, which commits
/// atomically (both halves show its writes); asked again, the split answers as
/// before.
#[test]
fn a_tablet_splits_in_place_and_its_halves_serve() {
    use pinax_common::{HybridTime, TabletId};
    use pinax_proto::{ReadPoint, Response};
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    let t = c.create_table("s", Sharding::Range { split_points: Vec::new() }).unwrap();
    assert_eq!(t.tablets.len(), 1);
    let parent = t.tablets[0].id;
    let key = |i: u32| format!("k{i:03}").into_bytes();
    c.write("s", (0..100).map(|i| WriteOp::put(key(i), b"v".to_vec())).collect()).unwrap();
    let mut txn = c.begin();
    txn.write("s", vec![WriteOp::put(key(10), b"txn".to_vec()), WriteOp::put(key(70), b"txn".to_vec())]).unwrap();

    let children = [TabletId(1 << 40), TabletId((1 << 40) + 1)];
    let split = |children: [TabletId; 2]| n.node.handle(Request::SplitReplica { tablet: parent, children, at: None });
    let (at, halves) = match split(children).unwrap() {
        Response::SplitDone { at, children } => (at, children),
        other => panic!("{other:?}"),
    };
    assert!(at > key(20) && at < key(80), "the middle by size: {at:?}");
    assert_eq!(halves.iter().map(|h| h.id).collect::<Vec<_>>(), children.to_vec());
    assert_eq!((halves[0].partition.end.clone(), halves[1].partition.start.clone()), (Some(at.clone()), at.clone()));
    // Again: the same answer; other children: refused.
    assert!(matches!(split(children).unwrap(), Response::SplitDone { at: a, .. } if a == at));
    assert_eq!(split([TabletId(7 << 40), TabletId((7 << 40) + 1)]).unwrap_err().code, ErrorCode::InvalidRequest);

    let now = ReadPoint { read_ht: HybridTime::INVALID, txn: None, uncertain_from: HybridTime::INVALID };
    let e = n.node.handle(Request::Read { tablet: parent, key: key(1), at: now }).unwrap_err();
    assert_eq!(e.code, ErrorCode::TabletSplit, "{e:?}");
    assert!(e.code.is_retryable());
    let scan = |tablet: TabletId| match n.node.handle(Request::Scan { tablet, spec: ScanSpec::default(), at: now }).unwrap() {
        Response::Rows { result, .. } => result.rows,
        other => panic!("{other:?}"),
    };
    let (left, right) = (scan(children[0]), scan(children[1]));
    assert!(left.iter().all(|(k, _)| *k < at) && right.iter().all(|(k, _)| *k >= at));
    let mut all: Vec<Vec<u8>> = left.iter().chain(&right).map(|(k, _)| k.clone()).collect();
    assert_eq!(all.len(), 100);
    all.dedup();
    assert_eq!(all, (0..100).map(key).collect::<Vec<_>>(), "every row once, in key order");
    assert!(left.iter().chain(&right).all(|(_, v)| v == b"v"), "the pending transaction's writes are not visible yet");

    // The transaction pending across the split commits: both halves show its writes.
    txn.commit().unwrap();
    let value = |tablet: TabletId, k: Vec<u8>| match n.node.handle(Request::Read { tablet, key: k, at: now }).unwrap() {
        Response::Value { value, .. } => value,
        other => panic!("{other:?}"),
    };
    assert_eq!(value(children[0], key(10)), Some(b"txn".to_vec()));
    assert_eq!(value(children[1], key(70)), Some(b"txn".to_vec()));
    // The halves take writes of their own.
    n.node.handle(Request::Write { tablet: children[1], ops: vec![WriteOp::put(key(150), b"new".to_vec())], read_ht: None, txn: None, request: 0 }).unwrap();
    assert_eq!(value(children[1], key(150)), Some(b"new".to_vec()));
    let e = n
        .node
        .handle(Request::Write { tablet: children[0], ops: vec![WriteOp::put(key(150), b"x".to_vec())], read_ht: None, txn: None, request: 0 })
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TabletNotFound, "a key of the other half: {e:?}");
}

/// Tick `n` until `done` holds (at most `within`).
fn tick_until(n: &TestNode, within: Duration, what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}: not within {within:?}");
        n.node.tick();
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A group leading a tablet the catalog does not know (as the halves of a
/// split applied after their table was dropped) loses its replicas once the
/// master has seen it so for `unknown_leader_grace`; the catalog's own tablets
/// (a table's, a new table's) stay.
#[test]
fn a_group_leading_a_tablet_the_catalog_does_not_know_is_dropped() {
    use pinax_proto::{Partition, TabletInfo};
    let n = start(NodeConfig { sync: false, unknown_leader_grace: Duration::from_secs(1), ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    c.create_table("kept", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("kept", vec![WriteOp::put(hash_key(1), b"v".to_vec())]).unwrap();
    let ghost = pinax_common::TabletId(9_999_999);
    let tablet = TabletInfo { id: ghost, partition: Partition { start: Vec::new(), end: None }, leader: n.addr.clone(), replicas: vec![n.addr.clone()] };
    c.call(Request::CreateReplica { tablet, members: vec![(1, n.addr.clone())], bootstrap: true }).unwrap();
    tick_until(&n, Duration::from_secs(10), "the unknown tablet opened", || n.node.tablet(ghost).is_some());
    tick_until(&n, Duration::from_secs(30), "the unknown tablet's replica dropped", || n.node.tablet(ghost).is_none());
    // A table created now (its tablets lead before the catalog lists them) and the old one serve.
    c.create_table("new", Sharding::Hash { tablets: 2 }).unwrap();
    for _ in 0..30 {
        n.node.tick();
        std::thread::sleep(Duration::from_millis(50));
    }
    c.write("new", vec![WriteOp::put(hash_key(2), b"w".to_vec())]).unwrap();
    assert_eq!(c.get("kept", &hash_key(1)).unwrap(), Some(b"v".to_vec()));
    assert_eq!(c.get("new", &hash_key(2)).unwrap(), Some(b"w".to_vec()));
}

#[test]
fn a_split_requested_through_the_master_lists_the_halves_in_the_catalog_and_they_serve() {
    use pinax_common::TabletId;
    use pinax_proto::Response;
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    let t = c.create_table("ms", Sharding::Range { split_points: Vec::new() }).unwrap();
    let parent = t.tablets[0].id;
    let code = |r: Result<Response, pinax_client::ClientError>| r.unwrap_err().code();

    // Refused: an empty tablet has no middle (its leader says so: the split is
    // cancelled), a key must lie strictly inside, the catalog's tablets stay.
    assert_eq!(code(c.call(Request::SplitTablet { tablet: parent, at: None })), ErrorCode::InvalidRequest);
    assert_eq!(code(c.call(Request::SplitTablet { tablet: parent, at: Some(Vec::new()) })), ErrorCode::InvalidRequest);
    assert_eq!(code(c.call(Request::SplitTablet { tablet: TabletId(1 << 50), at: None })), ErrorCode::TabletNotFound);
    assert_eq!(c.refresh_table("ms").unwrap().tablets, t.tablets, "nothing changed");

    let key = |i: u32| format!("k{i:03}").into_bytes();
    c.write("ms", (0..100).map(|i| WriteOp::put(key(i), b"v".to_vec())).collect()).unwrap();
    let mut txn = c.begin();
    txn.write("ms", vec![WriteOp::put(key(20), b"txn".to_vec()), WriteOp::put(key(80), b"txn".to_vec())]).unwrap();
    let txn_id = txn.id();
    // (Its status tablet exists now: the catalog's own tablets do not split.)
    assert_eq!(code(c.call(Request::SplitTablet { tablet: TabletId::status_of_node(1), at: None })), ErrorCode::InvalidRequest);
    let split = || match c.call(Request::SplitTablet { tablet: parent, at: Some(key(50)) }).unwrap() {
        Response::Split { parent: p, at, children } => {
            assert_eq!(p, parent);
            (at, children)
        }
        other => panic!("{other:?}"),
    };
    let (at, children) = split();
    assert_eq!(at, key(50));
    let ids: Vec<TabletId> = children.iter().map(|ti| ti.id).collect();
    assert!(ids.iter().all(|id| id.0 > parent.0), "fresh ids: {ids:?}");
    // The catalog lists the halves in the parent's place.
    let now = c.refresh_table("ms").unwrap();
    assert_eq!(now.tablets, children);
    assert_eq!((now.tablets[0].partition.end.clone(), now.tablets[1].partition.start.clone()), (Some(key(50)), key(50)));
    // Again: the same answer; the parent's location names its halves.
    assert_eq!(split(), (at.clone(), children.clone()));
    assert!(matches!(c.call(Request::LocateTablet { tablet: parent }).unwrap(), Response::Tablets(tis) if tis == children));

    // A client that never saw the parent reads every row through the halves.
    let fresh = Client::connect(&n.addr).unwrap();
    let all = |c: &Client| c.scan("ms", ScanSpec::default()).unwrap().into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    assert_eq!(all(&fresh), (0..100).map(key).collect::<Vec<_>>());
    fresh.write("ms", vec![WriteOp::put(key(10), b"w".to_vec()), WriteOp::put(key(90), b"w".to_vec())]).unwrap();

    // The transaction pending across the split commits. Its record names the
    // parent; it is marked resolved only once both halves applied its intents.
    txn.commit().unwrap();
    let st = n.node.status_tablet(1).unwrap();
    tick_until(&n, Duration::from_secs(30), "the transaction's record resolved", || !st.unresolved().iter().any(|(id, _)| *id == txn_id));
    for id in &ids {
        assert!(!n.node.tablet(*id).unwrap().txns_with_intents().unwrap().contains(&txn_id), "tablet {id:?} still holds the intents");
    }
    assert_eq!((fresh.get("ms", &key(20)).unwrap(), fresh.get("ms", &key(80)).unwrap()), (Some(b"txn".to_vec()), Some(b"txn".to_vec())));

    // The master's tick retires the parent: its replica goes, the halves'
    // rows (shared with it) stay.
    tick_until(&n, Duration::from_secs(30), "the split parent's replica dropped", || n.node.tablet(parent).is_none());
    assert!(ids.iter().all(|id| n.node.tablet(*id).is_some()));
    assert_eq!(all(&fresh), (0..100).map(key).collect::<Vec<_>>());
    assert_eq!(fresh.get("ms", &key(90)).unwrap(), Some(b"w".to_vec()));
    assert_eq!(fresh.get("ms", &key(49)).unwrap(), Some(b"v".to_vec()));
    assert!(matches!(c.call(Request::LocateTablet { tablet: parent }).unwrap(), Response::Tablets(_)), "retired, still looked up");
    // A half splits in turn.
    let (_, grandchildren) = match c.call(Request::SplitTablet { tablet: ids[1], at: Some(key(75)) }).unwrap() {
        Response::Split { at, children, .. } => (at, children),
        other => panic!("{other:?}"),
    };
    let now = fresh.refresh_table("ms").unwrap();
    assert_eq!(now.tablets.iter().map(|ti| ti.id).collect::<Vec<_>>(), vec![ids[0], grandchildren[0].id, grandchildren[1].id]);
    assert!(matches!(c.call(Request::LocateTablet { tablet: parent }).unwrap(), Response::Tablets(tis) if tis == now.tablets));
    assert_eq!(all(&fresh), (0..100).map(key).collect::<Vec<_>>());
    // Dropping the table takes the halves (and a parent not dropped yet).
    c.drop_table("ms", false).unwrap();
    tick_until(&n, Duration::from_secs(10), "the table's replicas dropped", || {
        [ids[0], ids[1], grandchildren[0].id, grandchildren[1].id].iter().all(|id| n.node.tablet(*id).is_none())
    });
    assert_eq!(code(c.call(Request::LocateTablet { tablet: parent })), ErrorCode::TabletNotFound);
}

/// A client whose cached locations still name a tablet that split goes on with
/// no error (plan step 7): point reads and writes, scans (forward, reverse,
/// with a limit, counted) and a transaction's writes, savepoint rollback and
/// delete-all land on the halves, before and after the master dropped the
/// parent; a scan that began on the parent finishes on the halves.
/// A SERIALIZABLE range lock sent through locations cached before a split
/// (`WriteOp::range_lock` on the parent's range) locks both halves: a writer's
/// PREDICATE WRITE on the right half conflicts with it. (Sent as a row lock on
/// the parent's start, it landed in the left half alone: a phantom under
/// SERIALIZABLE.) The same before the split (the split copies it).
#[test]
fn a_range_lock_through_stale_locations_locks_both_halves_of_a_split() {
    use pinax_proto::{LockStrength, Response};
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    let key = |i: u32| format!("k{i:03}").into_bytes();
    let split = |tablet, at: u32| match c.call(Request::SplitTablet { tablet, at: Some(key(at)) }).unwrap() {
        Response::Split { children, .. } => children,
        other => panic!("{other:?}"),
    };
    for (table, lock_before_split) in [("rl_after", false), ("rl_before", true)] {
        c.create_table(table, Sharding::Range { split_points: Vec::new() }).unwrap();
        c.write(table, (0..100).map(|i| WriteOp::put(key(i), b"v".to_vec())).collect()).unwrap();
        let stale = Client::connect(&n.addr).unwrap();
        let parent = stale.table(table).unwrap().tablets[0].clone();
        let lock = || WriteOp::range_lock(parent.partition.start.clone(), parent.partition.end.as_deref(), LockStrength::Share);
        let mut reader = stale.begin();
        if lock_before_split {
            reader.write(table, vec![lock()]).unwrap();
        }
        let halves = split(parent.id, 50);
        if !lock_before_split {
            assert_eq!(stale.table(table).unwrap().tablets[0].id, parent.id, "still cached");
            reader.write(table, vec![lock()]).unwrap();
        }
        // A writer of each half (fresh locations), as a SERIALIZABLE one writes.
        for (half, k) in [(&halves[0], 10), (&halves[1], 90)] {
            let mut writer = c.begin();
            let ops = vec![
                WriteOp::range_lock(half.partition.start.clone(), half.partition.end.as_deref(), LockStrength::PredicateWrite),
                WriteOp::put(key(k), b"w".to_vec()),
            ];
            let r = writer.write(table, ops);
            assert!(r.is_err(), "{table}: a PREDICATE WRITE in half {:?} met no range lock", half.id);
            writer.abort().unwrap();
        }
        reader.commit().unwrap();
    }
}

#[test]
fn a_client_with_stale_locations_follows_a_split() {
    use pinax_proto::Response;
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    let key = |i: u32| format!("k{i:03}").into_bytes();
    let keys = |r: std::ops::Range<u32>| r.map(key).collect::<Vec<_>>();
    for table in ["fs", "fs2"] {
        c.create_table(table, Sharding::Range { split_points: Vec::new() }).unwrap();
        c.write(table, (0..100).map(|i| WriteOp::put(key(i), b"v".to_vec())).collect()).unwrap();
    }
    let stale = Client::connect(&n.addr).unwrap();
    let parent = stale.table("fs").unwrap().tablets[0].id; // cached from here on
    let old = Client::connect(&n.addr).unwrap();
    assert_eq!(old.table("fs").unwrap().tablets[0].id, parent); // used only after the parent is dropped
    let parent2 = stale.table("fs2").unwrap().tablets[0].id;
    // A transaction wrote to the parent before the split and writes on after it.
    let mut txn = stale.begin();
    txn.write("fs", vec![WriteOp::put(key(10), b"t".to_vec()), WriteOp::put(key(90), b"t".to_vec())]).unwrap();
    let savepoint = txn.seq();
    txn.write("fs", vec![WriteOp::put(key(11), b"gone".to_vec())]).unwrap();
    let split = |tablet, at: u32| match c.call(Request::SplitTablet { tablet, at: Some(key(at)) }).unwrap() {
        Response::Split { children, .. } => children,
        other => panic!("{other:?}"),
    };
    let halves = split(parent, 50);
    split(parent2, 50);
    assert_eq!(stale.table("fs").unwrap().tablets[0].id, parent, "the stale client's cache still names the parent");

    // Between the swap and the parent's drop (the parent answers TabletSplit).
    txn.rollback_to(savepoint).unwrap();
    txn.write("fs", vec![WriteOp::put(key(20), b"t".to_vec()), WriteOp::put(key(80), b"t".to_vec())]).unwrap();
    let scan = |c: &Client, spec: ScanSpec| c.scan("fs", spec).unwrap().into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    assert_eq!(scan(&stale, ScanSpec::default()), keys(0..100));
    assert_eq!(stale.get("fs", &key(75)).unwrap(), Some(b"v".to_vec()));
    stale.write("fs", vec![WriteOp::put(key(60), b"w".to_vec())]).unwrap();
    // A second transaction empties the other table (a delete-all on the parent's halves).
    let mut t2 = stale.begin();
    assert_eq!(t2.delete_all("fs2", &mut |_, _| Ok(false)).unwrap(), 100);
    t2.commit().unwrap();
    txn.commit().unwrap();
    let got = |k| stale.get("fs", &key(k)).unwrap();
    assert_eq!(
        (got(10), got(11), got(20), got(80), got(90)),
        (Some(b"t".to_vec()), Some(b"v".to_vec()), Some(b"t".to_vec()), Some(b"t".to_vec()), Some(b"t".to_vec()))
    );
    assert_eq!(c.scan("fs2", ScanSpec::default()).unwrap().len(), 0);

    // After the master dropped the parent (it answers TabletNotFound), a client
    // that cached it before the split: reverse, limited and counted scans, a
    // write across both halves.
    tick_until(&n, Duration::from_secs(30), "the split parent's replica dropped", || n.node.tablet(parent).is_none());
    assert_eq!(old.table("fs").unwrap().tablets[0].id, parent, "still cached");
    assert_eq!(scan(&old, ScanSpec { reverse: true, limit: 60, ..ScanSpec::default() }), keys(40..100).into_iter().rev().collect::<Vec<_>>());
    assert_eq!(scan(&old, ScanSpec { limit: 10, ..ScanSpec::default() }), keys(0..10));
    assert_eq!(old.count_at("fs", ScanSpec::default(), pinax_proto::ReadPoint::LATEST).unwrap().0 .0, 100);
    old.write("fs", vec![WriteOp::put(key(5), b"x".to_vec()), WriteOp::put(key(95), b"x".to_vec())]).unwrap();
    assert_eq!(c.get("fs", &key(95)).unwrap(), Some(b"x".to_vec()));
    assert!(halves.iter().all(|h| n.node.tablet(h.id).is_some()));

    // A one-tablet write (the fast path) whose tablet split under the cache in
    // between its keys: it becomes a transaction over both halves.
    let late = Client::connect(&n.addr).unwrap();
    assert_eq!(late.table("fs").unwrap().tablets.len(), 2);
    split(halves[0].id, 25);
    late.write("fs", vec![WriteOp::put(key(20), b"y".to_vec()), WriteOp::put(key(30), b"y".to_vec())]).unwrap();
    assert_eq!((c.get("fs", &key(20)).unwrap(), c.get("fs", &key(30)).unwrap()), (Some(b"y".to_vec()), Some(b"y".to_vec())));
}

#[test]
fn read_many_reads_keys_of_several_tablets_in_order_at_one_time_and_follows_a_split() {
    use pinax_proto::{ReadPoint, Response};
    let n = start(NodeConfig { sync: false, ..NodeConfig::default() });
    let c = Client::connect(&n.addr).unwrap();
    let key = |i: u32| format!("k{i:03}").into_bytes();
    c.create_table("rm", Sharding::Range { split_points: vec![key(30), key(60)] }).unwrap();
    c.write("rm", (0..100).filter(|i| i % 10 != 7).map(|i| WriteOp::put(key(i), format!("v{i}").into_bytes())).collect()).unwrap();
    // Keys of three tablets, out of order, one twice, some without a row.
    let asked: Vec<u32> = vec![95, 3, 47, 17, 3, 61, 77, 29];
    let want = |i: u32| (i % 10 != 7).then(|| format!("v{i}").into_bytes());
    let keys: Vec<Vec<u8>> = asked.iter().map(|&i| key(i)).collect();
    let (got, read_ht) = c.read_many_at("rm", &keys, ReadPoint::LATEST).unwrap();
    assert_eq!(got, asked.iter().map(|&i| want(i)).collect::<Vec<_>>());
    assert_ne!(read_ht, pinax_common::HybridTime::INVALID, "the first tablet's read time");
    // At that read time, a later write is not seen.
    c.write("rm", vec![WriteOp::put(key(3), b"later".to_vec())]).unwrap();
    let (again, _) = c.read_many_at("rm", &keys, ReadPoint { read_ht, txn: None, uncertain_from: pinax_common::HybridTime::INVALID }).unwrap();
    assert_eq!(again, got);
    assert!(c.read_many_at("rm", &[], ReadPoint::LATEST).unwrap().0.is_empty());
    // A client whose cache names a tablet that split since.
    let stale = Client::connect(&n.addr).unwrap();
    let parent = stale.table("rm").unwrap().tablets[2].id;
    match c.call(Request::SplitTablet { tablet: parent, at: Some(key(80)) }).unwrap() {
        Response::Split { .. } => {}
        other => panic!("{other:?}"),
    }
    let (after, _) = stale.read_many_at("rm", &[key(95), key(61), key(3)], ReadPoint::LATEST).unwrap();
    assert_eq!(after, vec![want(95), want(61), Some(b"later".to_vec())]);
}
