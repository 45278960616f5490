//! A node on RocksDB engines: every group's log is in the data directory's shared
//! Raft log, none in the engines' directories, and a dropped table's groups leave
//! the shared log.

use pinax_client::Client;
use pinax_common::HybridClock;
use pinax_engine_rocks::SharedResources;
use pinax_proto::{Sharding, TableInfo, WriteOp};
use pinax_tserver::{EngineFactory, Node, NodeConfig, RocksFactory, RpcServer};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn hash_key(i: u32) -> Vec<u8> {
    let h = (i.wrapping_mul(2654435761) >> 16) as u16;
    let mut k = h.to_be_bytes().to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

fn ids(t: &TableInfo) -> Vec<u64> {
    t.tablets.iter().map(|ti| ti.id.0).collect()
}

#[test]
fn a_dropped_tables_groups_leave_the_shared_raft_log() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cfg = NodeConfig { rpc_addr: addr.clone(), data_dir: tmp.path().display().to_string(), ..NodeConfig::default() };
    let factory = RocksFactory::new(data.clone(), SharedResources::new(8 << 20, 32 << 20));
    let node = Node::open(cfg, factory, Arc::new(HybridClock::system())).unwrap();
    let mut server = RpcServer::serve(node.clone(), listener).unwrap();
    let ticker = {
        let n = node.clone();
        std::thread::spawn(move || {
            while !n.is_shutting_down() {
                n.tick();
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let logs = node.factory().raft_logs().unwrap();
    assert_eq!(logs.len(), 1);
    let log = &logs[0];
    assert_eq!(log.dir(), data.join("raft-log"));
    let c = Client::connect(&addr).unwrap();
    let kept = c.create_table("kept", Sharding::Hash { tablets: 2 }).unwrap();
    let gone = c.create_table("gone", Sharding::Hash { tablets: 2 }).unwrap();
    for t in ["kept", "gone"] {
        for i in 0..20 {
            c.write(t, vec![WriteOp::put(hash_key(i), b"v".to_vec())]).unwrap();
        }
    }
    let groups = log.groups();
    for id in ids(&kept).into_iter().chain(ids(&gone)) {
        assert!(groups.contains(&id), "tablet {id}'s group is in the shared log: {groups:?}");
    }
    c.drop_table("gone", false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while ids(&gone).iter().any(|id| log.groups().contains(id)) {
        assert!(Instant::now() < deadline, "the dropped table's groups stayed: {:?}", log.groups());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!data.join("tablets").exists(), "tablets keep no directories of their own");
    let groups = log.groups();
    assert!(ids(&kept).iter().all(|id| groups.contains(id)), "{groups:?}");
    for i in 0..20 {
        assert_eq!(c.get("kept", &hash_key(i)).unwrap(), Some(b"v".to_vec()));
    }
    node.shutdown();
    server.stop();
    ticker.join().unwrap();
}
