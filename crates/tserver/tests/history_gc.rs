//! History GC of tablets sharing one store (a data directory's RocksDB), wired as
//! `Node::open_tablet` wires it: the node's cutoff, and for each tablet a
//! `for_tablet` clone (its own deletions of every row) behind a filter of its own,
//! which the store applies to that tablet's keys only. A tablet's deletion of every
//! row drops its own old versions and never another tablet's rows. (With one filter
//! and one list of deletions for every tablet, another tablet's live rows older
//! than the deletion went at the next compaction once the cutoff passed it.)

use pinax_codec::keys;
use pinax_common::HybridTime;
use pinax_engine::{Cf, CompactionFilterFactory, KvEngine, WriteBatch, WriteOptions};
use pinax_engine_rocks::SharedResources;
use pinax_mvcc::gc::{HistoryCutoff, HistoryGcFilterFactory};
use pinax_tserver::{EngineFactory, RocksFactory};
use std::sync::Arc;

fn put(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    keys::encode_put(&mut out, v);
    out
}

#[test]
fn a_tablets_deletion_of_every_row_drops_only_its_own_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let factory = RocksFactory::new(tmp.path().join("data"), SharedResources::new(8 << 20, 32 << 20));
    let node = HistoryCutoff::default();
    let open = |name: &str| {
        let cutoff = node.for_tablet();
        let gc: Arc<dyn CompactionFilterFactory> = Arc::new(HistoryGcFilterFactory { cutoff: cutoff.clone() });
        (cutoff, factory.open(name, Some(gc)).unwrap())
    };
    let (deleting, a) = open("tablet-a");
    let (_other, b) = open("tablet-b");
    for e in [&a, &b] {
        let mut batch = e.new_batch();
        batch.put(Cf::Regular, &keys::version_key(b"row", HybridTime(5)), &put(b"v5"));
        e.write(batch, WriteOptions::default()).unwrap();
    }
    // Tablet a deleted every row at 9; the cutoff passes it.
    deleting.set_deletions(Arc::new(vec![HybridTime(9)]));
    node.advance_to(HybridTime(20));
    // An engine's compaction is scheduled in the background (the store gathers
    // the ranges asked for): wait until tablet a's row has gone.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        for e in [&a, &b] {
            e.flush().unwrap();
            e.compact_range(Cf::Regular, None, None).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        if a.get(Cf::Regular, &keys::version_key(b"row", HybridTime(5))).unwrap().is_none() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "tablet a's deleted row was never dropped");
    }
    assert_eq!(
        b.get(Cf::Regular, &keys::version_key(b"row", HybridTime(5))).unwrap(),
        Some(put(b"v5")),
        "tablet b's live row (its only version, older than a's deletion) was dropped"
    );
}
