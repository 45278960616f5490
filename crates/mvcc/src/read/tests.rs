//! Tests of the lookups (cursors, intents by holder) and of point reads through
//! them, on both engines.

use super::*;
use pinax_engine::{KvEngine, WriteBatch, WriteOptions};
use pinax_engine_mem::MemEngine;

/// The rows a scan of `range` returns (every visible one, with its value), as
/// (user key, value).
fn scan_rows<S: Snapshot, R: TxnStatusResolver + ?Sized>(reader: &MvccReader<'_, S, R>, range: ScanRange<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut scanner = reader.scanner(range)?;
    let mut rows = Vec::new();
    loop {
        match scanner.next(Want::Value)? {
            Step::End => break,
            Step::Hidden => {}
            Step::Visible(v) => rows.push((scanner.user_key()?, v)),
        }
        if scanner.is_point() {
            break;
        }
    }
    Ok(rows)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// Keys 0..200: every third has versions (the newest a tombstone when also
/// divisible by 5), every fourth has intents of two transactions, every
/// seventh had intents that were deleted (tombstones in the intents CF).
fn engine() -> MemEngine {
    let e = MemEngine::new();
    fill(&e);
    e
}

fn fill<E: KvEngine>(e: &E) {
    let mut b = e.new_batch();
    let (t1, t2) = (TxnId([1; 16]), TxnId([2; 16]));
    for i in 0..200u32 {
        let k = key(i);
        if i.is_multiple_of(3) {
            let mut v = Vec::new();
            keys::encode_put(&mut v, b"old");
            b.put(Cf::Regular, &keys::version_key(&k, HybridTime(10)), &v);
            if i.is_multiple_of(5) {
                b.put(Cf::Regular, &keys::version_key(&k, HybridTime(20)), &keys::encode_tombstone());
            } else {
                b.put(Cf::Regular, &keys::version_key(&k, HybridTime(20)), &v);
            }
        }
        let mut v = Vec::new();
        keys::encode_intent_value(&mut v, IntentKind::Put, 0, b"x");
        if i.is_multiple_of(4) {
            b.put(Cf::Intents, &keys::intent_key(&k, t1, 1), &v);
            b.put(Cf::Intents, &keys::intent_key(&k, t2, 3), &v);
        }
        if i.is_multiple_of(7) {
            b.put(Cf::Intents, &keys::intent_key(&k, TxnId([9; 16]), 1), &v);
        }
    }
    e.write(b, WriteOptions::default()).unwrap();
    let mut b = e.new_batch();
    for i in (0..200u32).filter(|i| i.is_multiple_of(7)) {
        b.delete(Cf::Intents, &keys::intent_key(&key(i), TxnId([9; 16]), 1));
    }
    e.write(b, WriteOptions::default()).unwrap();
}

fn expected(i: u32) -> ((Option<HybridTime>, bool), usize) {
    let version = if i.is_multiple_of(3) { (Some(HybridTime(20)), !i.is_multiple_of(5)) } else { (None, false) };
    (version, if i.is_multiple_of(4) { 2 } else { 0 })
}

#[test]
fn lookups_in_any_order_match_and_ascending_ones_step() {
    let e = engine();
    let snap = e.snapshot();
    let orders: Vec<(&str, Vec<u32>)> = vec![
        ("ascending", (0..200).collect()),
        ("ascending with gaps", (0..200).step_by(13).collect()),
        ("descending", (0..200).rev().collect()),
        ("repeats and jumps", vec![5, 5, 4, 8, 8, 9, 150, 3, 199, 199, 0, 12, 12, 13]),
        ("scattered", (0..200).map(|i| (i * 37) % 200).collect()),
    ];
    for (name, order) in orders {
        let mut reg = KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()));
        let mut ints = intents_cursor_between(&snap, &key(*order.iter().min().unwrap()), &key(*order.iter().max().unwrap()), false);
        let mut whole = intents_cursor(&snap);
        for i in &order {
            let (version, n) = expected(*i);
            assert_eq!(reg.latest_version(&key(*i)).unwrap(), version, "{name}: version of {i}");
            assert_eq!(ints.intents(&key(*i)).unwrap().len(), n, "{name}: intents on {i}");
            assert_eq!(whole.intents(&key(*i)).unwrap().len(), n, "{name}: intents on {i} (unbounded)");
        }
        if name == "ascending" {
            assert!(reg.stepped >= 190 && ints.stepped >= 190, "{name}: stepped {} and {} of 200", reg.stepped, ints.stepped);
        }
    }
    // Version lists and newest versions asked of one cursor, in any order:
    // each answer as if asked alone (a version list leaves the cursor where a
    // later lookup can step from, or seek).
    for (name, order) in [("ascending", (0..200).collect::<Vec<u32>>()), ("repeats and jumps", vec![3, 3, 6, 5, 9, 150, 3, 198, 198, 0, 12, 12])] {
        let mut reg = KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()));
        for (n, i) in order.iter().enumerate() {
            let (version, _) = expected(*i);
            if n % 2 == 0 {
                let got = reg.recent_versions(&key(*i), HybridTime::INVALID, 4).unwrap();
                let want: Vec<(HybridTime, bool)> = version.0.map(|ht| (ht, version.1)).into_iter().collect();
                assert_eq!(got.iter().map(|v| (v.ht, v.live)).collect::<Vec<_>>(), want, "{name}: versions of {i}");
            } else {
                assert_eq!(reg.latest_version(&key(*i)).unwrap(), version, "{name}: version of {i}");
            }
        }
    }
    // Keys outside the data.
    let mut reg = KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()));
    assert_eq!(reg.latest_version(b"a").unwrap(), (None, false));
    assert_eq!(reg.latest_version(b"z").unwrap(), (None, false));
    assert_eq!(reg.latest_version(&key(3)).unwrap(), (Some(HybridTime(20)), true));
}

/// A hot row: 3000 short transactions wrote an intent on it and were resolved
/// (their tombstones in the memtable, or in an SST file; their ids on both
/// sides of the holder's), one holds intents on it now (a lock and a write),
/// another holds intents on other rows only. Through the holder the lookup
/// finds what walking the row's intents finds, and steps over none of the
/// tombstones the walk steps over (RocksDB's perf counters); through a superset
/// of holders (the other one too) it finds the same. A point read through the
/// holders reads what one walking the intents reads, likewise.
#[test]
fn a_hot_rows_intents_sought_through_their_holders_skip_its_tombstones() {
    use rocksdb::perf::{PerfContext, PerfMetric, PerfStatsLevel};
    let dir = tempfile::tempdir().unwrap();
    let rocks = pinax_engine_rocks::RocksEngine::open(dir.path(), &pinax_engine_rocks::RocksConfig::default()).unwrap();
    let hot = b"hot".to_vec();
    let txn = |i: u32| {
        let mut id = [if i.is_multiple_of(2) { 0x10 } else { 0xf8 }; 16];
        id[1..5].copy_from_slice(&i.to_be_bytes());
        TxnId(id)
    };
    let (holder, elsewhere) = (TxnId([0xf0; 16]), TxnId([0xe0; 16]));
    let put = |v: &[u8]| {
        let mut out = Vec::new();
        keys::encode_intent_value(&mut out, IntentKind::Put, 0, v);
        out
    };
    let mut v0 = Vec::new();
    keys::encode_put(&mut v0, b"v0");
    for flush in [true, false] {
        let mut b = rocks.new_batch();
        b.put(Cf::Regular, &keys::version_key(&hot, HybridTime(10)), &v0);
        for i in 0..3000 {
            b.put(Cf::Intents, &keys::intent_key(&hot, txn(i), 1), &put(b"old"));
        }
        rocks.write(b, WriteOptions::default()).unwrap();
        let mut b = rocks.new_batch();
        for i in 0..3000 {
            b.delete(Cf::Intents, &keys::intent_key(&hot, txn(i), 1));
        }
        let mut lock = Vec::new();
        keys::encode_intent_value(&mut lock, IntentKind::Lock, 0, &[]);
        b.put(Cf::Intents, &keys::intent_key(&hot, holder, 1), &lock);
        b.put(Cf::Intents, &keys::intent_key(&hot, holder, 2), &put(b"new"));
        b.put(Cf::Intents, &keys::intent_key(b"hou", elsewhere, 1), &put(b"x"));
        rocks.write(b, WriteOptions::default()).unwrap();
        if flush {
            rocks.flush().unwrap();
        }
        std::thread::scope(|t| {
            t.spawn(|| {
                let snap = rocks.snapshot(); // (the engine turns the counters off on first use)
                rocksdb::perf::set_perf_stats(PerfStatsLevel::EnableCount);
                let mut ctx = PerfContext::default();
                let mut skipped = |f: &mut dyn FnMut()| {
                    ctx.reset();
                    f();
                    ctx.metric(PerfMetric::InternalDeleteSkippedCount)
                };
                for probe in [true, false] {
                    let (mut walked, mut sought) = (Vec::new(), Vec::new());
                    let walk = skipped(&mut || walked = intents_cursor_between(&snap, &hot, &hot, probe).intents(&hot).unwrap());
                    let seek = skipped(&mut || sought = holders_intents(&snap, &hot, &[holder]).unwrap());
                    assert_eq!(walked, sought, "flushed {flush}, probing {probe}");
                    assert_eq!(sought.iter().map(|r| (r.txn, r.seq)).collect::<Vec<_>>(), [(holder, 2), (holder, 1)]);
                    assert!(walk >= 3000 && seek < 10, "tombstones stepped over: {walk} walking, {seek} seeking (flushed {flush})");
                    let mut superset = Vec::new();
                    let seek = skipped(&mut || superset = holders_intents(&snap, &hot, &[elsewhere, holder]).unwrap());
                    assert_eq!(walked, superset);
                    assert!(seek < 10, "{seek} tombstones stepped over through a superset of the holders");
                    assert!(holders_intents(&snap, &hot, &[elsewhere]).unwrap().is_empty());
                }
                // A point read of the row, by another transaction and by the holder.
                for ctx_ in [ReadContext::at(HybridTime(20)), ReadContext::in_txn(HybridTime(20), holder, 3)] {
                    let resolver = |_: TxnId, _: HybridTime| Ok(TxnStatus::Pending);
                    let range = ScanRange { start: &hot, end: Some(b"hou"), reverse: false, point: true };
                    let (mut walked, mut sought) = (None, None);
                    let walk = skipped(&mut || walked = Some(scan_rows(&MvccReader::new(&snap, &resolver, ctx_), range).unwrap()));
                    let seek =
                        skipped(&mut || sought = Some(scan_rows(&MvccReader::new(&snap, &resolver, ctx_).with_intent_holders(vec![holder]), range).unwrap()));
                    assert_eq!(walked, sought);
                    assert_eq!(
                        walked.as_ref().unwrap(),
                        &scan_rows(&MvccReader::new(&snap, &resolver, ctx_).with_intent_holders(vec![elsewhere, holder]), range).unwrap()
                    );
                    let want: &[u8] = if ctx_.txn.is_some() { b"new" } else { b"v0" };
                    assert_eq!(sought.unwrap(), vec![(hot.clone(), want.to_vec())]);
                    assert!(walk >= 3000 && seek < 10, "a point read stepped over {walk} tombstones walking, {seek} seeking");
                }
            });
        });
    }
}

/// Probing cursors (bloom filters; no stepping) answer every lookup as the
/// stepping ones do, in any order, on RocksDB (with the data half in SST files,
/// half in the memtable) and on the in-memory engine (which ignores the hint).
#[test]
fn probing_cursors_answer_as_stepping_ones() {
    let dir = tempfile::tempdir().unwrap();
    let rocks = pinax_engine_rocks::RocksEngine::open(dir.path(), &pinax_engine_rocks::RocksConfig::default()).unwrap();
    fill(&rocks);
    rocks.flush().unwrap();
    // Newer versions of some keys, in the memtable.
    let mut b = rocks.new_batch();
    for i in (0..200u32).filter(|i| i.is_multiple_of(9)) {
        let mut v = Vec::new();
        keys::encode_put(&mut v, b"new");
        b.put(Cf::Regular, &keys::version_key(&key(i), HybridTime(30)), &v);
    }
    rocks.write(b, WriteOptions::default()).unwrap();
    let expected_now = |i: u32| {
        let ((v, live), n) = expected(i);
        if i.is_multiple_of(9) {
            ((Some(HybridTime(30)), true), n)
        } else {
            ((v, live), n)
        }
    };
    check_probing(&rocks, expected_now);
    check_probing(&engine(), expected);
}

fn check_probing<E: KvEngine>(e: &E, expected: impl Fn(u32) -> ((Option<HybridTime>, bool), usize)) {
    let snap = e.snapshot();
    let probe = IterOptions { prefix_same_as_start: true, ..IterOptions::default() };
    for order in [(0..200).collect::<Vec<u32>>(), (0..200).map(|i| (i * 37) % 200).collect(), vec![5, 5, 4, 199, 0, 12, 12, 13]] {
        let mut reg = KeyCursor::probing(snap.iter(Cf::Regular, probe.clone()));
        let mut ints = intents_cursor_between(&snap, &key(*order.iter().min().unwrap()), &key(*order.iter().max().unwrap()), true);
        for (n, i) in order.iter().enumerate() {
            let (version, intents) = expected(*i);
            if n % 2 == 0 {
                let got = reg.recent_versions(&key(*i), HybridTime::INVALID, 4).unwrap();
                assert_eq!(got.first().map(|v| (Some(v.ht), v.live)).unwrap_or((None, false)), version, "versions of {i}");
            } else {
                assert_eq!(reg.latest_version(&key(*i)).unwrap(), version, "version of {i}");
            }
            assert_eq!(ints.intents(&key(*i)).unwrap().len(), intents, "intents on {i}");
        }
        assert_eq!(reg.stepped, 0);
    }
    let mut reg = KeyCursor::probing(snap.iter(Cf::Regular, probe));
    assert_eq!(reg.latest_version(b"a").unwrap(), (None, false));
    assert_eq!(reg.latest_version(b"z").unwrap(), (None, false));
}
