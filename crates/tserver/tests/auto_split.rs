//! Automatic tablet splitting (docs/plans/tablet-splitting.md step 9): three
//! nodes on RocksDB with a low split threshold. A range-sharded table loaded
//! through one tablet splits by itself, one split after another, into at least
//! eight tablets (the low phase ends at 4 per live node, then nothing splits
//! below the high threshold); every row stays readable exactly once, and the
//! tablets keep covering the key space. A table created with `auto_split`
//! off stays one tablet under the same load until the option is turned on.
//! A small table that is read hard splits by load.

use pinax_client::Client;
use pinax_common::HybridClock;
use pinax_engine_rocks::SharedResources;
use pinax_master::splitting::SplitRules;
use pinax_proto::{ScanSpec, Sharding, TableOptions, WriteOp};
use pinax_tserver::{Node, NodeConfig, RocksFactory, RpcServer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct TestNode {
    node: Arc<Node<RocksFactory>>,
    _server: RpcServer,
    addr: String,
    _dir: tempfile::TempDir,
}

fn start(id: u64, join: Option<String>, rules: SplitRules) -> TestNode {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cfg = NodeConfig {
        node_id: id,
        rpc_addr: addr.clone(),
        data_dir: dir.path().display().to_string(),
        join: join.into_iter().collect(),
        sync: false,
        auto_split: Some(rules),
        size_report_interval: Duration::from_millis(500),
        ..NodeConfig::default()
    };
    let factory = RocksFactory::new(dir.path().join("data"), SharedResources::new(8 << 20, 32 << 20));
    let node = Node::open(cfg, factory, Arc::new(HybridClock::system())).unwrap();
    let server = RpcServer::serve(node.clone(), listener).unwrap();
    let n = node.clone();
    std::thread::spawn(move || n.run_applier());
    TestNode { node, _server: server, addr, _dir: dir }
}

fn key(i: u32) -> Vec<u8> {
    format!("row{i:07}").into_bytes()
}

/// A value that does not compress (sizes on disk must grow with the rows).
fn value(i: u32) -> Vec<u8> {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..200)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_growing_range_table_splits_by_itself_and_every_row_stays_unless_told_not_to_and_a_hot_one_splits_by_load() {
    let rules = SplitRules {
        low_bytes: 256 << 10,
        low_tablets_per_node: 4,
        high_bytes: 1 << 40,
        high_tablets_per_node: 8,
        force_bytes: 1 << 50,
        max_outstanding: 2,
        max_per_node: 2,
        load_requests_per_sec: 100,
        load_share_percent: 50,
        load_reports: 2,
    };
    let first = start(1, None, rules);
    let join = Some(first.addr.clone());
    let nodes = [first, start(2, join.clone(), rules), start(3, join, rules)];
    let ticking = Arc::new(AtomicBool::new(true));
    let tickers: Vec<_> = nodes
        .iter()
        .map(|n| {
            let (node, on) = (n.node.clone(), ticking.clone());
            std::thread::spawn(move || {
                while on.load(Ordering::SeqCst) {
                    node.tick();
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    let c = Client::connect(&nodes[0].addr).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = c.create_table("grows", Sharding::Range { split_points: Vec::new() }).unwrap();
        if t.tablets[0].replicas.len() == 3 {
            break;
        }
        c.drop_table("grows", false).unwrap();
        assert!(Instant::now() < deadline, "the master never placed three replicas");
        std::thread::sleep(Duration::from_millis(300));
    }
    let flush = || nodes.iter().for_each(|n| n.node.flush_all());
    let tablets_of = |name: &str| c.refresh_table(name).unwrap().tablets.len();
    let tablets = || tablets_of("grows");
    // The same rows in a table that must not split by itself.
    let off = c.create_table_with("stays", Sharding::Range { split_points: Vec::new() }, TableOptions { auto_split: false }).unwrap();
    assert!(!off.options.auto_split);

    // About 4.4 MB in batches, flushed as they go (sizes count flushed data):
    // over 16 times the threshold.
    const ROWS: u32 = 20_000;
    for batch in 0..(ROWS / 500) {
        let ops: Vec<WriteOp> = (batch * 500..(batch + 1) * 500).map(|i| WriteOp::put(key(i), value(i))).collect();
        c.write("grows", ops.clone()).unwrap();
        c.write("stays", ops).unwrap();
        if batch % 4 == 3 {
            flush();
        }
    }
    flush();
    let deadline = Instant::now() + Duration::from_secs(180);
    while tablets() < 8 {
        assert!(Instant::now() < deadline, "the table has {} tablets, not 8, after {:?}", tablets(), Duration::from_secs(180));
        std::thread::sleep(Duration::from_millis(500));
        flush();
    }
    let t = c.refresh_table("grows").unwrap();
    eprintln!("the table split into {} tablets", t.tablets.len());
    // The low phase ends at 4 per node (12): nothing splits past it below the
    // high threshold.
    assert!(t.tablets.len() <= 12, "{} tablets", t.tablets.len());
    // Sorted, no gaps, no overlaps, from the start to the end.
    assert!(t.tablets[0].partition.start.is_empty() && t.tablets.last().unwrap().partition.end.is_none());
    for w in t.tablets.windows(2) {
        assert_eq!(w[0].partition.end.as_ref(), Some(&w[1].partition.start));
    }
    // Each split at a key inside the data: every tablet holds rows.
    let rows = c.scan("grows", ScanSpec::default()).unwrap();
    assert_eq!(rows.len(), ROWS as usize);
    for (i, (k, v)) in rows.iter().enumerate() {
        assert_eq!((k, v), (&key(i as u32), &value(i as u32)));
    }
    for ti in &t.tablets {
        assert!(rows.iter().any(|(k, _)| ti.partition.contains(k)), "tablet {:?} holds no row", ti.id);
    }
    // Writes and reads go on through the new tablets.
    c.write("grows", vec![WriteOp::put(key(0), b"first".to_vec()), WriteOp::put(key(ROWS - 1), b"last".to_vec())]).unwrap();
    assert_eq!(c.get("grows", &key(ROWS - 1)).unwrap(), Some(b"last".to_vec()));
    assert_eq!(c.get("grows", &key(ROWS / 2)).unwrap(), Some(value(ROWS / 2)));

    // The table with auto_split off stayed whole; turned on, it splits too.
    assert_eq!(tablets_of("stays"), 1, "a table with auto_split off split by itself");
    assert!(c.set_table_options("stays", TableOptions { auto_split: true }).unwrap().options.auto_split);
    let deadline = Instant::now() + Duration::from_secs(120);
    while tablets_of("stays") < 2 {
        assert!(Instant::now() < deadline, "auto_split turned on, but the table did not split");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(c.scan("stays", ScanSpec::default()).unwrap().len(), ROWS as usize);

    // By load: a small table (far below the size threshold) read hard splits.
    c.create_table("hot", Sharding::Range { split_points: Vec::new() }).unwrap();
    const HOT_ROWS: u32 = 500;
    c.write("hot", (0..HOT_ROWS).map(|i| WriteOp::put(key(i), value(i))).collect()).unwrap();
    flush();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut reads = 0u32;
    while tablets_of("hot") < 2 {
        for _ in 0..200 {
            let i = reads % HOT_ROWS;
            assert_eq!(c.get("hot", &key(i)).unwrap(), Some(value(i)));
            reads += 1;
        }
        assert!(Instant::now() < deadline, "a hot tablet did not split after {reads} reads");
    }
    eprintln!("the hot table split after {reads} reads");
    let rows = c.scan("hot", ScanSpec::default()).unwrap();
    assert_eq!(rows.len(), HOT_ROWS as usize);
    assert!(rows.iter().enumerate().all(|(i, (k, v))| (k, v) == (&key(i as u32), &value(i as u32))));
    ticking.store(false, Ordering::SeqCst);
    for t in tickers {
        t.join().unwrap();
    }
    for n in &nodes {
        n.node.close();
    }
}
