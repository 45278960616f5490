//! Closing a store (its own process: it counts the store's threads). When the
//! last handle of a store goes, its background thread has ended and the
//! database is closed by the time the drop returns: a thread still compacting
//! while the process exited aborted it in RocksDB's static destructors
//! ("pthread lock: Invalid argument", a test binary after its tests passed).

use pinax_engine::{Cf, KvEngine, WriteBatch, WriteOptions};
use pinax_engine_rocks::{KeySpace, RocksConfig, RocksStore};
use std::time::{Duration, Instant};

/// Threads of this process named `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|t| t.as_ref().ok().and_then(|t| std::fs::read_to_string(t.path().join("comm")).ok()).is_some_and(|c| c.trim() == name))
        .count()
}

#[test]
fn the_last_handle_of_a_store_ends_its_background_work_and_closes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = RocksStore::open(tmp.path(), &RocksConfig::default()).unwrap();
    // (A new thread names itself once it runs.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while threads_named("rocks-reclaim") != 1 {
        assert!(Instant::now() < deadline, "no background thread");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Files enough for a compaction that takes a while (values that do not compress).
    let e = store.engine(KeySpace::of_id(1), None, None).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for file in 0..6u32 {
        let mut b = e.new_batch();
        for i in 0..4000u32 {
            let v: Vec<u8> = (0..128)
                .flat_map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x.to_le_bytes()
                })
                .collect();
            b.put(Cf::Regular, &(i * 7 + file).to_be_bytes(), &v);
        }
        e.write(b, WriteOptions::default()).unwrap();
        e.flush().unwrap();
    }
    // The compaction asked for starts once the requests of a window are
    // gathered; the handles go while it runs.
    store.compact_soon(Cf::Regular, Vec::new(), vec![0xff; 16]);
    std::thread::sleep(Duration::from_millis(2_050));
    drop(e);
    drop(store);
    assert_eq!(threads_named("rocks-reclaim"), 0, "the background thread outlived the store");
    // Closed: it opens again at once (its lock file is free).
    RocksStore::open(tmp.path(), &RocksConfig::default()).expect("the store is still open");
}
