//! RocksDB-specific tests: durability, compaction filter, shared resources, checksums,
//! error mapping. The generic behaviour is covered by the conformance suite.

use super::*;
use crate::store::COMPACTION_WINDOW;
use pinax_engine::{CompactionFilter, CompactionFilterFactory, Error, IterOptions, KvEngine, KvIterator, Snapshot, WriteBatch, WriteOptions};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

fn small_config() -> RocksConfig {
    let mut cfg = RocksConfig::with_shared(SharedResources::new(8 << 20, 8 << 20));
    cfg.write_buffer_size = 256 << 10;
    cfg
}

fn put(e: &RocksEngine, cf: Cf, k: &[u8], v: &[u8], sync: bool) {
    let mut b = e.new_batch();
    b.put(cf, k, v);
    e.write(b, WriteOptions { sync, ..Default::default() }).unwrap();
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn sync_write_survives_reopen_without_flush() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config();
    {
        let e = RocksEngine::open(dir.path(), &cfg).unwrap();
        for cf in Cf::ALL {
            put(&e, cf, b"durable", cf.name().as_bytes(), true);
        }
        let mut b = e.new_batch();
        b.delete(Cf::Regular, b"durable");
        b.put(Cf::Regular, b"durable2", b"x");
        e.write(b, WriteOptions { sync: true, ..Default::default() }).unwrap();
        assert_eq!(e.stats().l0_files, 0, "nothing flushed: recovery must come from the WAL");
    }
    let e = RocksEngine::open(dir.path(), &cfg).unwrap();
    assert_eq!(e.get(Cf::Regular, b"durable").unwrap(), None);
    assert_eq!(e.get(Cf::Regular, b"durable2").unwrap(), Some(b"x".to_vec()));
    assert_eq!(e.get(Cf::Intents, b"durable").unwrap(), Some(b"intents".to_vec()));
    assert_eq!(e.get(Cf::Meta, b"durable").unwrap(), Some(b"meta".to_vec()));
}

/// Environment variable that turns a run of [`crash_child_entry`] into the crashing child.
const CRASH_ENV: &str = "PINAX_ENGINE_ROCKS_CRASH_CHILD";
const CRASH_KEYS: u32 = 50;

/// In the child process: write synced batches, then abort (no destructor, no flush).
/// In a normal test run: does nothing.
#[test]
fn crash_child_entry() {
    let Ok(spec) = std::env::var(CRASH_ENV) else { return };
    let (mode, dir) = spec.split_once(':').expect("mode:dir");
    let mut cfg = small_config();
    cfg.disable_wal = mode == "nowal";
    let e = RocksEngine::open(dir, &cfg).unwrap();
    if mode == "skiplog" {
        // Raft's pattern: the log entry synced, its apply not logged; the first
        // half of the applies flushed.
        for i in 0..CRASH_KEYS {
            let mut b = e.new_batch();
            b.put(Cf::Log, &key(i), b"l");
            e.write(b, WriteOptions { sync: true, ..Default::default() }).unwrap();
            let mut b = e.new_batch();
            b.put(Cf::Regular, &key(i), b"v");
            b.put(Cf::Meta, b"applied", &key(i));
            e.write(b, WriteOptions { sync: false, skip_log: true }).unwrap();
            if i + 1 == CRASH_KEYS / 2 {
                e.flush().unwrap();
            }
        }
        std::process::abort();
    }
    for i in 0..CRASH_KEYS {
        let mut b = e.new_batch();
        b.put(Cf::Regular, &key(i), b"v");
        b.put(Cf::Intents, &key(i), b"i");
        e.write(b, WriteOptions { sync: true, ..Default::default() }).unwrap();
    }
    std::process::abort();
}

fn crash_and_check(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args(["--exact", "tests::crash_child_entry", "--test-threads=1", "--nocapture"])
        .env(CRASH_ENV, format!("{mode}:{}", dir.path().display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child must have aborted");
    let mut cfg = small_config();
    cfg.disable_wal = mode == "nowal";
    let e = RocksEngine::open(dir.path(), &cfg).unwrap();
    if mode == "skiplog" {
        // Every logged write survives; unlogged ones only up to the flush, and
        // the flushed state is consistent across column families.
        for i in 0..CRASH_KEYS {
            assert_eq!(e.get(Cf::Log, &key(i)).unwrap(), Some(b"l".to_vec()), "log entry {i}");
            let applied = e.get(Cf::Regular, &key(i)).unwrap();
            assert_eq!(applied.is_some(), i < CRASH_KEYS / 2, "apply {i}: unlogged, flushed or lost");
        }
        assert_eq!(e.get(Cf::Meta, b"applied").unwrap(), Some(key(CRASH_KEYS / 2 - 1)));
        return;
    }
    for i in 0..CRASH_KEYS {
        assert_eq!(e.get(Cf::Regular, &key(i)).unwrap(), Some(b"v".to_vec()), "{mode}: key {i}");
        assert_eq!(e.get(Cf::Intents, &key(i)).unwrap(), Some(b"i".to_vec()), "{mode}: key {i}");
    }
}

#[test]
fn sync_writes_survive_process_abort() {
    crash_and_check("wal");
}

#[test]
fn sync_writes_survive_process_abort_without_wal() {
    crash_and_check("nowal");
}

/// Closing does not flush unlogged writes (their writer rebuilds them, as after a
/// crash): flushing them made every close, a dropped tablet's included, take
/// about a second. Logged writes are kept.
#[test]
fn a_close_does_not_flush_unlogged_writes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config();
    {
        let e = RocksEngine::open(dir.path(), &cfg).unwrap();
        put(&e, Cf::Log, b"logged", b"l", false);
        let mut b = e.new_batch();
        b.put(Cf::Regular, b"unlogged", b"u");
        e.write(b, WriteOptions { sync: false, skip_log: true }).unwrap();
        assert_eq!(e.get(Cf::Regular, b"unlogged").unwrap(), Some(b"u".to_vec()));
    }
    let e = RocksEngine::open(dir.path(), &cfg).unwrap();
    assert_eq!(e.get(Cf::Log, b"logged").unwrap(), Some(b"l".to_vec()));
    assert_eq!(e.get(Cf::Regular, b"unlogged").unwrap(), None);
}

#[test]
fn unlogged_writes_survive_a_crash_only_once_flushed() {
    crash_and_check("skiplog");
}

struct DropPrefix {
    prefix: &'static [u8],
    created: Arc<AtomicUsize>,
    saw_bottommost: Arc<AtomicBool>,
}

struct DropPrefixFilter(&'static [u8]);

impl CompactionFilterFactory for DropPrefix {
    fn create(&self, bottommost: bool) -> Box<dyn CompactionFilter> {
        self.created.fetch_add(1, Ordering::SeqCst);
        if bottommost {
            self.saw_bottommost.store(true, Ordering::SeqCst);
        }
        Box::new(DropPrefixFilter(self.prefix))
    }
}

impl CompactionFilter for DropPrefixFilter {
    fn keep(&mut self, key: &[u8], _value: &[u8]) -> bool {
        !key.starts_with(self.0)
    }
}

#[test]
fn compaction_filter_drops_entries_in_regular_cf() {
    let dir = tempfile::tempdir().unwrap();
    let created = Arc::new(AtomicUsize::new(0));
    let saw_bottommost = Arc::new(AtomicBool::new(false));
    let mut cfg = small_config();
    cfg.compaction_filter = Some(Arc::new(DropPrefix { prefix: b"gc/", created: created.clone(), saw_bottommost: saw_bottommost.clone() }));
    let e = RocksEngine::open(dir.path(), &cfg).unwrap();
    let mut b = e.new_batch();
    for i in 0..100 {
        for cf in [Cf::Regular, Cf::Intents] {
            b.put(cf, &[b"gc/".as_slice(), &key(i)].concat(), b"garbage");
            b.put(cf, &[b"live/".as_slice(), &key(i)].concat(), b"live");
        }
    }
    e.write(b, WriteOptions::default()).unwrap();
    e.flush().unwrap();
    // Flushing does not filter.
    assert_eq!(e.get(Cf::Regular, b"gc/key000007").unwrap(), Some(b"garbage".to_vec()));

    e.compact_range(Cf::Regular, None, None).unwrap();
    e.compact_range(Cf::Intents, None, None).unwrap();
    assert!(created.load(Ordering::SeqCst) > 0, "the factory was used");
    assert!(saw_bottommost.load(Ordering::SeqCst), "a full manual compaction is bottommost");
    let s = e.snapshot();
    let mut it = s.iter(Cf::Regular, IterOptions::default());
    it.seek_to_first();
    let mut n = 0;
    while it.valid().unwrap() {
        assert!(it.key().starts_with(b"live/"), "filtered key left: {:?}", it.key());
        n += 1;
        it.next();
    }
    assert_eq!(n, 100);
    assert_eq!(e.get(Cf::Regular, b"gc/key000007").unwrap(), None);
    // Only the Regular CF is filtered.
    assert_eq!(e.get(Cf::Intents, b"gc/key000007").unwrap(), Some(b"garbage".to_vec()));
}

struct Panicking;
impl CompactionFilterFactory for Panicking {
    fn create(&self, _bottommost: bool) -> Box<dyn CompactionFilter> {
        Box::new(PanickingFilter)
    }
}
struct PanickingFilter;
impl CompactionFilter for PanickingFilter {
    fn keep(&mut self, _key: &[u8], _value: &[u8]) -> bool {
        panic!("filter bug")
    }
}

#[test]
fn panicking_compaction_filter_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config();
    cfg.compaction_filter = Some(Arc::new(Panicking));
    let e = RocksEngine::open(dir.path(), &cfg).unwrap();
    for i in 0..10 {
        put(&e, Cf::Regular, &key(i), b"v", false);
    }
    e.flush().unwrap();
    e.compact_range(Cf::Regular, None, None).unwrap();
    for i in 0..10 {
        assert_eq!(e.get(Cf::Regular, &key(i)).unwrap(), Some(b"v".to_vec()));
    }
}

#[test]
fn engines_share_cache_and_memtable_budget() {
    let shared = SharedResources::new(4 << 20, 4 << 20);
    assert_eq!(shared.block_cache_bytes(), 4 << 20);
    assert_eq!(shared.memtable_budget_bytes(), 4 << 20);
    let cfg = RocksConfig::with_shared(shared.clone());
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let e1 = RocksEngine::open(d1.path(), &cfg).unwrap();
    let e2 = RocksEngine::open(d2.path(), &cfg).unwrap();
    let before = shared.memtable_usage();
    let value = vec![7u8; 1024];
    for i in 0..200 {
        put(&e1, Cf::Regular, &key(i), &value, false);
        put(&e2, Cf::Regular, &key(i), &value, false);
    }
    assert!(shared.memtable_usage() > before, "memtables of both engines are charged to the budget");
    assert!(e1.stats().memtable_bytes > 0);
    e1.flush().unwrap();
    e2.flush().unwrap();
    // Reads go through the shared block cache.
    for i in 0..200 {
        assert_eq!(e1.get(Cf::Regular, &key(i)).unwrap().as_deref(), Some(&value[..]));
        assert_eq!(e2.get(Cf::Regular, &key(i)).unwrap().as_deref(), Some(&value[..]));
    }
    assert!(shared.block_cache_usage() > 0);
    let st = e1.stats();
    assert!(st.l0_files >= 1 || st.approximate_bytes > 0, "flushed data is visible in stats: {st:?}");
}

#[test]
fn batch_of_another_engine_is_rejected() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cfg = small_config();
    let e1 = RocksEngine::open(d1.path(), &cfg).unwrap();
    let e2 = RocksEngine::open(d2.path(), &cfg).unwrap();
    let mut b = e1.new_batch();
    b.put(Cf::Regular, b"k", b"v");
    assert!(matches!(e2.write(b, WriteOptions::default()), Err(Error::Other(_))));
    assert_eq!(e2.get(Cf::Regular, b"k").unwrap(), None);
}

#[test]
fn open_on_a_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    match RocksEngine::open(&file, &small_config()) {
        Err(Error::Io(msg)) => assert!(!msg.is_empty()),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn second_open_of_a_locked_database_fails() {
    let dir = tempfile::tempdir().unwrap();
    let _e = RocksEngine::open(dir.path(), &small_config()).unwrap();
    assert!(RocksEngine::open(dir.path(), &small_config()).is_err());
}

#[test]
fn damaged_sst_block_is_reported_as_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config();
    {
        let e = RocksEngine::open(dir.path(), &cfg).unwrap();
        let mut b = e.new_batch();
        for i in 0..2000u32 {
            // Incompressible-ish values so the data blocks are most of the file.
            let v: Vec<u8> = (0..100u32).map(|j| (i.wrapping_mul(31).wrapping_add(j * 17) % 251) as u8).collect();
            b.put(Cf::Regular, &key(i), &v);
        }
        e.write(b, WriteOptions::default()).unwrap();
        e.flush().unwrap();
    }
    let sst = std::fs::read_dir(dir.path()).unwrap().map(|d| d.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "sst")).expect("an sst file");
    let mut bytes = std::fs::read(&sst).unwrap();
    // Damage the first data blocks (far from the footer and index at the end).
    for b in &mut bytes[100..600] {
        *b ^= 0x5a;
    }
    std::fs::write(&sst, &bytes).unwrap();

    // A fresh block cache: the flush put the blocks it wrote into the first one
    // (prepopulate_block_cache), where reads would find them undamaged.
    let e = match RocksEngine::open(dir.path(), &small_config()) {
        Ok(e) => e,
        Err(err) => {
            assert!(matches!(err, Error::Corruption(_)), "open failed, but not as corruption: {err:?}");
            return;
        }
    };
    let point = e.get(Cf::Regular, &key(0));
    assert!(matches!(point, Err(Error::Corruption(_))), "point read: {point:?}");
    let s = e.snapshot();
    let mut it = s.iter(Cf::Regular, IterOptions::default());
    it.seek_to_first();
    let mut result = it.valid();
    while let Ok(true) = result {
        it.next();
        result = it.valid();
    }
    assert!(matches!(result, Err(Error::Corruption(_))), "scan: {result:?}");
}

#[test]
fn stats_reflect_memtables_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let e = RocksEngine::open(dir.path(), &small_config()).unwrap();
    assert_eq!(e.stats().l0_files, 0);
    for i in 0..100 {
        put(&e, Cf::Intents, &key(i), &[1u8; 100], false);
    }
    assert!(e.stats().memtable_bytes > 0);
    e.flush().unwrap();
    let st = e.stats();
    assert_eq!(st.l0_files, 1, "{st:?}");
    e.compact_range(Cf::Intents, None, None).unwrap();
    let st = e.stats();
    assert_eq!(st.l0_files, 0, "{st:?}");
    assert!(st.approximate_bytes > 0, "{st:?}");
}

#[test]
fn snapshot_and_iterator_cross_threads() {
    let dir = tempfile::tempdir().unwrap();
    let e = RocksEngine::open(dir.path(), &small_config()).unwrap();
    put(&e, Cf::Regular, b"k", b"v", false);
    let s = e.snapshot();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            assert_eq!(s.get(Cf::Regular, b"k").unwrap(), Some(b"v".to_vec()));
            let mut it = s.iter(Cf::Regular, IterOptions::default());
            it.seek_to_first();
            assert!(it.valid().unwrap());
        });
    });
}

#[test]
fn write_pressure_follows_level0_files_and_compaction_debt() {
    use pinax_engine::WritePressure;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let e = RocksEngine::open(dir.path(), &small_config()).unwrap();
    assert_eq!(e.write_pressure(), WritePressure::None, "a fresh engine");
    assert_eq!(pressure_from(11, 0, false), WritePressure::None);
    assert_eq!(pressure_from(12, 0, false), WritePressure::Slow(Duration::from_millis(2)));
    assert_eq!(pressure_from(29, 0, false), WritePressure::Slow(Duration::from_millis(36)));
    assert!(matches!(pressure_from(30, 0, false), WritePressure::Full(_)));
    assert!(matches!(pressure_from(0, 48 << 30, false), WritePressure::Full(_)));
    assert!(matches!(pressure_from(0, 0, true), WritePressure::Full(_)));
}

#[test]
fn a_flush_puts_the_blocks_it_writes_into_the_block_cache() {
    let dir = tempfile::tempdir().unwrap();
    let shared = SharedResources::new(8 << 20, 8 << 20);
    let mut cfg = RocksConfig::with_shared(shared.clone());
    cfg.write_buffer_size = 256 << 10;
    let e = RocksEngine::open(dir.path(), &cfg).unwrap();
    let mut b = e.new_batch();
    for i in 0..2000u32 {
        b.put(Cf::Regular, &key(i), &[7u8; 100]);
    }
    e.write(b, WriteOptions::default()).unwrap();
    let before = shared.block_cache_usage();
    e.flush().unwrap();
    // Nothing was read: the data blocks (~200 KB) are there because the flush wrote them.
    let after = shared.block_cache_usage();
    assert!(after >= before + (100 << 10), "block cache {before} -> {after} bytes");
}

/// The `block_size` RocksDB recorded for column family `name` in the newest
/// OPTIONS file of the database in `dir`.
/// The text of the newest OPTIONS file RocksDB wrote in `dir`.
fn newest_options(dir: &std::path::Path) -> Option<String> {
    let newest = std::fs::read_dir(dir)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("OPTIONS-")))
        .max()?;
    Some(std::fs::read_to_string(newest).unwrap())
}

fn recorded_block_size(dir: &std::path::Path, name: &str) -> Option<usize> {
    let text = newest_options(dir)?;
    let section = format!("[TableOptions/BlockBasedTable \"{name}\"]");
    let body = text.split(&section).nth(1)?;
    let body = body.split("\n[").next()?;
    body.lines().find_map(|l| l.trim().strip_prefix("block_size=")).and_then(|v| v.parse().ok())
}

#[test]
fn rows_are_stored_in_large_blocks_and_the_rest_in_small_ones() {
    let dir = tempfile::tempdir().unwrap();
    let _e = RocksEngine::open(dir.path(), &small_config()).unwrap();
    assert_eq!(recorded_block_size(dir.path(), Cf::Regular.name()), Some(REGULAR_BLOCK_BYTES));
    for cf in [Cf::Intents, Cf::Meta, Cf::Log] {
        assert_eq!(recorded_block_size(dir.path(), cf.name()), Some(4096), "{cf:?}");
    }
}

#[test]
fn engine_threads_do_not_count_rocksdb_perf_metrics() {
    use rocksdb::perf::{PerfContext, PerfMetric, PerfStatsLevel};
    let dir = tempfile::tempdir().unwrap();
    let e = RocksEngine::open(dir.path(), &small_config()).unwrap();
    for i in 0..100 {
        put(&e, Cf::Regular, &key(i), b"v", false);
    }
    let steps = |e: &RocksEngine| {
        let s = e.snapshot();
        let mut ctx = PerfContext::default();
        ctx.reset();
        let mut it = s.iter(Cf::Regular, IterOptions::default());
        it.seek_to_first();
        while it.valid().unwrap() {
            it.next();
        }
        ctx.metric(PerfMetric::UserKeyComparisonCount)
    };
    std::thread::scope(|t| {
        t.spawn(|| {
            assert_eq!(steps(&e), 0, "an engine's thread counts nothing");
            // The counters work when on (the assertion above can fail).
            rocksdb::perf::set_perf_stats(PerfStatsLevel::EnableCount);
            let s = e.snapshot();
            let mut ctx = PerfContext::default();
            ctx.reset();
            let mut it = s.iter(Cf::Regular, IterOptions::default());
            it.seek(&key(50));
            it.next();
            assert!(ctx.metric(PerfMetric::UserKeyComparisonCount) > 0);
        });
    });
}

#[test]
fn memtable_inserts_in_key_order_start_from_the_previous_insert() {
    use rocksdb::perf::{PerfContext, PerfMetric, PerfStatsLevel};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RocksConfig::with_shared(SharedResources::new(8 << 20, 64 << 20));
    cfg.write_buffer_size = 16 << 20;
    // An engine of a node's store: its keys under an 8-byte prefix.
    let store = RocksStore::open(dir.path(), &cfg).unwrap();
    let e = store.engine(KeySpace::of_id(3), None, None).unwrap();
    for cf in [Cf::Regular, Cf::Intents] {
        assert_eq!(
            recorded_cf_option(dir.path(), cf.name(), "memtable_insert_with_hint_prefix_extractor").as_deref(),
            Some("rocksdb.CappedPrefix.9"),
            "{cf:?}"
        );
    }
    // 20000 rows in the memtable, then 2000 more between them, once in key order
    // and once in a scrambled order: user-key comparisons per insert.
    let mut b = e.new_batch();
    for i in 0..20_000 {
        b.put(Cf::Regular, &key(i * 10), b"v");
    }
    e.write(b, WriteOptions::default()).unwrap();
    let comparisons = |keys: Vec<Vec<u8>>| {
        std::thread::scope(|t| {
            t.spawn(|| {
                drop(e.snapshot()); // the engine turns the counters off on first use
                rocksdb::perf::set_perf_stats(PerfStatsLevel::EnableCount);
                let mut b = e.new_batch();
                for k in &keys {
                    b.put(Cf::Regular, k, b"v");
                }
                let mut ctx = PerfContext::default();
                ctx.reset();
                e.write(b, WriteOptions::default()).unwrap();
                ctx.metric(PerfMetric::UserKeyComparisonCount) / keys.len() as u64
            })
            .join()
            .unwrap()
        })
    };
    let ordered = comparisons((0..2000).map(|j| key(j * 100 + 1)).collect());
    let scrambled = comparisons((0..2000u32).map(|j| key((j * 7919 % 2000) * 100 + 2)).collect());
    // (Without the hints: about the same, 28 and 27; with them 17 and 29.)
    assert!(ordered * 3 < scrambled * 2, "{ordered} comparisons per ordered insert, {scrambled} per scrambled one");
}

/// The value of option `name` of column family `cf` in the newest OPTIONS file.
fn recorded_cf_option(dir: &std::path::Path, cf: &str, name: &str) -> Option<String> {
    let text = newest_options(dir)?;
    let body = text.split(&format!("[CFOptions \"{cf}\"]")).nth(1)?.split("\n[").next()?.to_string();
    body.lines().find_map(|l| l.trim().strip_prefix(&format!("{name}=")).map(str::to_string))
}

// ---------------------------------------------------------------------------
// engines of one store

/// A tablet's middle key by size (for a split): between 30% and 70% of its rows
/// below it, for sequential keys and for hash-led ones (of other lengths and
/// values), with neighbours on both sides in the store; none for an engine
/// without rows or with a single key.
#[test]
fn the_approximate_middle_key_halves_an_engines_rows() {
    let (_dir, store, engines) = store_with(&[3, 4, 5]);
    // Values that do not compress (a file's data, not its index, is most of it).
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut value = || {
        (0..300)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (seed >> 56) as u8
            })
            .collect::<Vec<u8>>()
    };
    let hashed = |i: u32| {
        let h = (i.wrapping_mul(2_654_435_761) >> 16) as u16;
        let mut k = h.to_be_bytes().to_vec();
        k.extend_from_slice(&key(i));
        k
    };
    for i in 0..5000 {
        put(&engines[0], Cf::Regular, &key(i), &value(), false);
        put(&engines[1], Cf::Regular, &hashed(i), &value(), false);
        put(&engines[2], Cf::Regular, &key(i), &value(), false);
    }
    store.flush().unwrap();
    let empty = store.engine(KeySpace::of_id(7), None, None).unwrap();
    assert_eq!(empty.approximate_middle_key(), None, "an engine with no rows");
    for e in &engines[..2] {
        let keys = all_keys(e, Cf::Regular, IterOptions::default());
        let mid = e.approximate_middle_key().expect("a middle key");
        assert!(keys.contains(&mid), "the middle is a key of the engine");
        let below = keys.iter().filter(|k| **k < mid).count();
        assert!((1500..=3500).contains(&below), "{below} of 5000 rows below the middle key");
    }
    let (_d, store2, one) = store_with(&[9]);
    put(&one[0], Cf::Regular, b"only", &value(), false);
    store2.flush().unwrap();
    assert_eq!(one[0].approximate_middle_key(), None, "one key cannot be split");
    // Too little for the files' estimates (less than a block), flushed or not:
    // the rows are read.
    let (_d, store3, small) = store_with(&[11]);
    for i in 0..10 {
        put(&small[0], Cf::Regular, &key(i), b"v", false);
    }
    assert_eq!(small[0].approximate_middle_key(), Some(key(5)), "unflushed");
    store3.flush().unwrap();
    assert_eq!(small[0].approximate_middle_key(), Some(key(5)), "flushed");
}

fn store_with(ids: &[u64]) -> (tempfile::TempDir, RocksStore, Vec<RocksEngine>) {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(dir.path(), &small_config()).unwrap();
    let engines = ids.iter().map(|&id| store.engine(KeySpace::of_id(id), None, None).unwrap()).collect();
    (dir, store, engines)
}

fn all_keys(e: &RocksEngine, cf: Cf, opts: IterOptions) -> Vec<Vec<u8>> {
    let s = e.snapshot();
    let mut it = s.iter(cf, opts);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid().unwrap() {
        out.push(it.key().to_vec());
        it.next();
    }
    out
}

/// A space bounded within its prefix (what a split child will be): it reads,
/// iterates, deletes and compacts only its interval, whatever the caller asks.
#[test]
fn a_bounded_space_sees_and_deletes_only_its_interval() {
    let (_dir, store, engines) = store_with(&[4]);
    let whole = &engines[0];
    let mut b = whole.new_batch();
    for k in [&b"a"[..], b"b", b"c", b"d", b"e"] {
        b.put(Cf::Regular, k, k);
    }
    whole.write(b, WriteOptions::default()).unwrap();
    let mid = store.engine(KeySpace::of_id(4).bounded(Cf::Regular, b"b".to_vec(), Some(b"d".to_vec())), None, None).unwrap();
    assert_eq!(all_keys(&mid, Cf::Regular, IterOptions::default()), vec![b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(all_keys(&mid, Cf::Regular, IterOptions::bounded(b"a".to_vec(), b"z".to_vec())), vec![b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(all_keys(&mid, Cf::Regular, IterOptions::bounded(b"c".to_vec(), b"z".to_vec())), vec![b"c".to_vec()]);
    assert_eq!(mid.get(Cf::Regular, b"a").unwrap(), None);
    assert_eq!(mid.get(Cf::Regular, b"d").unwrap(), None);
    assert_eq!(mid.snapshot().get(Cf::Regular, b"e").unwrap(), None);
    assert_eq!(mid.get(Cf::Regular, b"c").unwrap().as_deref(), Some(&b"c"[..]));
    {
        let s = mid.snapshot();
        let mut it = s.iter(Cf::Regular, IterOptions::default());
        it.seek_for_prev(b"z");
        assert_eq!(it.key(), b"c", "the last key of the interval");
        it.seek(b"a");
        assert_eq!(it.key(), b"b", "the first key of the interval");
        it.seek_to_last();
        assert_eq!(it.key(), b"c");
    }
    let mut b = mid.new_batch();
    b.delete_range(Cf::Regular, b"", b"zzz");
    mid.write(b, WriteOptions::default()).unwrap();
    assert_eq!(all_keys(whole, Cf::Regular, IterOptions::default()), vec![b"a".to_vec(), b"d".to_vec(), b"e".to_vec()], "only the interval is deleted");
}

/// Each engine's compaction filter sees its own keys, as it wrote them, and
/// nothing of another engine's; an engine without a filter keeps everything.
#[test]
fn compaction_filters_of_engines_of_one_store_see_their_own_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(dir.path(), &small_config()).unwrap();
    let made = || DropPrefix { prefix: b"gc/", created: Arc::new(AtomicUsize::new(0)), saw_bottommost: Arc::new(AtomicBool::new(false)) };
    let f1 = Arc::new(made());
    let e1 = store.engine(KeySpace::of_id(1), Some(f1.clone()), None).unwrap();
    let e2 = store.engine(KeySpace::of_id(2), None, None).unwrap();
    let e3 = store.engine(KeySpace::of_id(3), Some(Arc::new(made())), None).unwrap();
    for e in [&e1, &e2, &e3] {
        let mut b = e.new_batch();
        for i in 0..50 {
            b.put(Cf::Regular, &[b"gc/".as_slice(), &key(i)].concat(), b"garbage");
            b.put(Cf::Regular, &[b"live/".as_slice(), &key(i)].concat(), b"live");
        }
        e.write(b, WriteOptions::default()).unwrap();
    }
    store.flush().unwrap();
    store.inner.db.compact_range_cf(crate::handle(&store.inner.db, Cf::Regular), None::<&[u8]>, None::<&[u8]>);
    assert!(f1.created.load(Ordering::SeqCst) > 0);
    assert_eq!(all_keys(&e1, Cf::Regular, IterOptions::default()).len(), 50, "engine 1's garbage filtered");
    assert_eq!(all_keys(&e2, Cf::Regular, IterOptions::default()).len(), 100, "engine 2 has no filter");
    assert_eq!(all_keys(&e3, Cf::Regular, IterOptions::default()).len(), 50, "engine 3's garbage filtered");
    // A closed engine's filter no longer applies.
    drop(e3);
    let e3 = store.engine(KeySpace::of_id(3), None, None).unwrap();
    let mut b = e3.new_batch();
    b.put(Cf::Regular, b"gc/again", b"garbage");
    e3.write(b, WriteOptions::default()).unwrap();
    store.flush().unwrap();
    store.inner.db.compact_range_cf(crate::handle(&store.inner.db, Cf::Regular), None::<&[u8]>, None::<&[u8]>);
    assert_eq!(e3.get(Cf::Regular, b"gc/again").unwrap().as_deref(), Some(&b"garbage"[..]));
}

/// A destroyed engine's keys are gone at once and its files' space comes back
/// (in the background); its name is free; other engines keep theirs.
#[test]
fn destroying_an_engine_deletes_its_keys_and_reclaims_its_space() {
    let (_dir, store, engines) = store_with(&[]);
    assert!(engines.is_empty());
    let (id1, id2) = (store.register("tablet-1").unwrap(), store.register("tablet-2").unwrap());
    assert_eq!(store.register("tablet-1").unwrap(), id1, "a name keeps its id");
    let e1 = store.engine(KeySpace::of_id(id1), None, None).unwrap();
    let e2 = store.engine(KeySpace::of_id(id2), None, None).unwrap();
    let value = vec![9u8; 1000];
    for e in [&e1, &e2] {
        for i in 0..2000 {
            put(e, Cf::Regular, &key(i), &value, false);
        }
    }
    store.flush().unwrap();
    assert!(e1.stats().approximate_bytes > 100_000, "{:?}", e1.stats());
    drop(e1);
    store.destroy(&KeySpace::of_id(id1), Some("tablet-1")).unwrap();
    assert_eq!(store.id_of("tablet-1").unwrap(), None);
    assert_eq!(store.names().unwrap(), vec![("tablet-2".to_string(), id2)]);
    let e1 = store.engine(KeySpace::of_id(id1), None, None).unwrap();
    assert!(all_keys(&e1, Cf::Regular, IterOptions::default()).is_empty());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while e1.stats().approximate_bytes > 0 {
        assert!(std::time::Instant::now() < deadline, "space not reclaimed: {:?}", e1.stats());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(all_keys(&e2, Cf::Regular, IterOptions::default()).len(), 2000);
    let id3 = store.register("tablet-1").unwrap();
    assert!(id3 > id2, "an id is never given out twice");
}

/// A compaction asked for a range that only the memtables hold (a large
/// transaction's intents, written and resolved before a flush) is skipped: it
/// would flush every column family early and write the resolved intents to a file
/// only to compact them away. A range in a file is compacted.
#[test]
fn compacting_a_range_only_the_memtables_hold_flushes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RocksConfig::with_shared(SharedResources::new(8 << 20, 64 << 20));
    cfg.write_buffer_size = 32 << 20;
    let store = RocksStore::open(dir.path(), &cfg).unwrap();
    let e = store.engine(KeySpace::of_id(1), None, None).unwrap();
    let intents = |e: &RocksEngine| {
        for i in 0..2000 {
            put(e, Cf::Intents, &key(i), b"intent", false);
        }
        let mut b = e.new_batch();
        b.delete_range(Cf::Intents, &key(0), &key(2000));
        e.write(b, WriteOptions::default()).unwrap();
        e.compact_range(Cf::Intents, None, None).unwrap();
        // The store gathers requests for COMPACTION_WINDOW before compacting.
        std::thread::sleep(COMPACTION_WINDOW + std::time::Duration::from_millis(1500));
    };
    let files = |cf: Cf| store.inner.db.live_files().unwrap().iter().filter(|f| f.column_family_name == cf.name()).count();
    intents(&e);
    assert_eq!(files(Cf::Intents), 0, "nothing flushed");
    assert!(store.property(Cf::Intents, "rocksdb.num-entries-active-mem-table") >= 2000, "still in the memtable");
    assert!(all_keys(&e, Cf::Intents, IterOptions::default()).is_empty());
    // Once flushed, the same request compacts the file away.
    for i in 0..2000 {
        put(&e, Cf::Intents, &key(i), b"intent", false);
    }
    store.flush().unwrap();
    assert_eq!(files(Cf::Intents), 1);
    intents(&e);
    assert_eq!(files(Cf::Intents), 0, "the flushed intents compacted away");
    assert_eq!(store.property(Cf::Intents, "rocksdb.num-entries-active-mem-table"), 0, "the compaction flushed the memtable");
}

/// A store whose disk has less free space than its reserve answers
/// `WritePressure::NoSpace`, naming the directory and both figures.
#[test]
fn a_store_below_its_free_space_reserve_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let free = free_bytes(dir.path()).expect("statvfs of a temporary directory");
    assert!(free > 0);
    let mut cfg = small_config();
    cfg.min_free_bytes = free.saturating_mul(4).max(1 << 40);
    let store = RocksStore::open(dir.path(), &cfg).unwrap();
    let e = store.engine(KeySpace::of_id(1), None, None).unwrap();
    match e.write_pressure() {
        WritePressure::NoSpace(why) => {
            assert!(why.contains(&dir.path().display().to_string()) && why.contains("below the reserve"), "{why}");
        }
        p => panic!("expected NoSpace, got {p:?}"),
    }
    drop(e);
    drop(store);
    cfg.min_free_bytes = 1;
    let store = RocksStore::open(dir.path(), &cfg).unwrap();
    let e = store.engine(KeySpace::of_id(1), None, None).unwrap();
    assert_eq!(e.write_pressure(), WritePressure::None);
    assert_eq!(space_pressure(dir.path(), 5 << 20, 4 << 20), None);
    assert!(matches!(space_pressure(dir.path(), 3 << 20, 4 << 20), Some(WritePressure::NoSpace(_))));
}

// ---------------------------------------------------------------------------
// split halves: views sharing their parent's rows

/// A parent engine with rows `key(0..100)` in the regular column family and a
/// record in each other one, split at `key(50)` into registered views `left`
/// and `right` (each given an intent of its own in the same write).
fn split_store() -> (tempfile::TempDir, RocksStore, RocksEngine, [KeySpace; 2]) {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(dir.path(), &small_config()).unwrap();
    let pid = store.register("parent").unwrap();
    let parent = store.engine(KeySpace::of_id(pid), None, None).unwrap();
    for i in 0..100 {
        put(&parent, Cf::Regular, &key(i), b"row", false);
    }
    for cf in [Cf::Intents, Cf::Meta, Cf::Log] {
        put(&parent, cf, b"parent's", b"p", false);
    }
    let ids = store.new_ids(2).unwrap();
    assert!(ids.iter().all(|&id| id > pid), "{ids:?}");
    let (l, r) = parent.space().split_at(Cf::Regular, &key(50), ids[0], ids[1]).unwrap();
    let mut b = store.batch();
    b.register("left", ids[0], &l);
    b.register("right", ids[1], &r);
    b.put(&l, Cf::Intents, b"left's", b"l").unwrap();
    b.put(&r, Cf::Intents, b"right's", b"r").unwrap();
    assert!(b.put(&l, Cf::Regular, &key(60), b"x").is_err(), "a key outside the left half");
    store.write(b).unwrap();
    (dir, store, parent, [l, r])
}

fn open_named(store: &RocksStore, name: &str) -> RocksEngine {
    let space = store.space_of(name).unwrap().unwrap_or_else(|| panic!("{name} is registered"));
    store.engine(space, None, None).unwrap()
}

#[test]
fn split_halves_see_their_parents_rows_and_their_own_records() {
    let (_dir, store, parent, [l, r]) = split_store();
    let (left, right) = (open_named(&store, "left"), open_named(&store, "right"));
    assert_eq!(left.space(), &l);
    assert_eq!(right.space(), &r);
    assert_eq!(all_keys(&left, Cf::Regular, IterOptions::default()), (0..50).map(key).collect::<Vec<_>>());
    assert_eq!(all_keys(&right, Cf::Regular, IterOptions::default()), (50..100).map(key).collect::<Vec<_>>());
    assert_eq!(left.get(Cf::Regular, &key(70)).unwrap(), None, "the right half's row");
    assert_eq!(all_keys(&left, Cf::Intents, IterOptions::default()), vec![b"left's".to_vec()]);
    assert_eq!(all_keys(&right, Cf::Intents, IterOptions::default()), vec![b"right's".to_vec()]);
    for cf in [Cf::Meta, Cf::Log] {
        assert!(all_keys(&left, cf, IterOptions::default()).is_empty() && all_keys(&right, cf, IterOptions::default()).is_empty());
    }
    // A row written through a half is one of the parent's keys, where the
    // parent (still open until it is dropped) sees it too.
    put(&right, Cf::Regular, &key(150), b"new", true);
    assert_eq!(parent.get(Cf::Regular, &key(150)).unwrap(), Some(b"new".to_vec()));
    let reverse: Vec<Vec<u8>> = {
        let s = right.snapshot();
        let mut it = s.iter(Cf::Regular, IterOptions::default());
        it.seek_to_last();
        let mut out = Vec::new();
        while it.valid().unwrap() {
            out.push(it.key().to_vec());
            it.prev();
        }
        out
    };
    assert_eq!(reverse.len(), 51);
    assert_eq!(reverse.last().unwrap(), &key(50), "a reverse walk of the right half stops at its first key");
    let mid = left.approximate_middle_key();
    assert!(mid.as_ref().is_none_or(|m| *m > key(0) && *m < key(50)), "{mid:?}");
}

#[test]
fn destroying_split_engines_keeps_what_the_others_see_until_the_last_goes() {
    let (_dir, store, parent, [l, r]) = split_store();
    let pid = parent.space().own_id().unwrap();
    store.flush().unwrap();
    let peek = || store.engine(KeySpace::of_id(pid), None, None).unwrap();
    drop(parent);
    store.destroy(&KeySpace::of_id(pid), Some("parent")).unwrap();
    assert_eq!(store.space_of("parent").unwrap(), None);
    let (left, right) = (open_named(&store, "left"), open_named(&store, "right"));
    assert_eq!(all_keys(&left, Cf::Regular, IterOptions::default()).len(), 50, "the parent's rows stay for its halves");
    assert_eq!(all_keys(&right, Cf::Regular, IterOptions::default()).len(), 50);
    for cf in [Cf::Intents, Cf::Meta, Cf::Log] {
        assert!(all_keys(&peek(), cf, IterOptions::default()).is_empty(), "the parent's own {cf} records go");
    }
    drop(left);
    store.destroy(&l, Some("left")).unwrap();
    assert_eq!(all_keys(&right, Cf::Regular, IterOptions::default()).len(), 50, "the sibling keeps its rows");
    assert_eq!(all_keys(&peek(), Cf::Regular, IterOptions::default()), (50..100).map(key).collect::<Vec<_>>(), "only the left half's rows went");
    assert_eq!(all_keys(&right, Cf::Intents, IterOptions::default()), vec![b"right's".to_vec()]);
    drop(right);
    store.destroy(&r, Some("right")).unwrap();
    for cf in Cf::ALL {
        assert!(all_keys(&peek(), cf, IterOptions::default()).is_empty(), "nothing left of the prefix in {cf}");
    }
    assert!(store.views().unwrap().is_empty());
    assert!(store.names().unwrap().is_empty());
}

#[test]
fn a_half_destroyed_first_leaves_its_parent_and_sibling_whole() {
    let (_dir, store, parent, [l, _]) = split_store();
    store.destroy(&l, Some("left")).unwrap();
    assert_eq!(all_keys(&parent, Cf::Regular, IterOptions::default()).len(), 100, "the parent still sees every row");
    assert_eq!(all_keys(&open_named(&store, "right"), Cf::Regular, IterOptions::default()).len(), 50);
    assert_eq!(all_keys(&parent, Cf::Intents, IterOptions::default()), vec![b"parent's".to_vec()]);
}

#[test]
fn split_views_are_found_again_after_a_restart() {
    let (dir, store, parent, [l, r]) = split_store();
    drop((parent, store));
    let store = RocksStore::open(dir.path(), &small_config()).unwrap();
    assert_eq!(store.space_of("left").unwrap(), Some(l));
    assert_eq!(store.space_of("right").unwrap(), Some(r.clone()));
    let mut views: Vec<String> = store.views().unwrap().into_iter().map(|(n, _)| n).collect();
    views.sort();
    assert_eq!(views, ["left", "right"]);
    assert_eq!(all_keys(&open_named(&store, "right"), Cf::Regular, IterOptions::default()).len(), 50);
    assert_eq!(store.space_of("parent").unwrap().and_then(|s| s.own_id()), Some(1));
    let ids = store.new_ids(1).unwrap();
    assert!(ids[0] > 3, "ids are never given out twice: {ids:?}");
}

#[test]
fn a_snapshot_installed_into_a_half_leaves_its_sibling_alone() {
    let (dir, store, _parent, _) = split_store();
    let scratch = dir.path().join("scratch");
    let left = store.engine(store.space_of("left").unwrap().unwrap(), None, Some(scratch)).unwrap();
    let right = open_named(&store, "right");
    let mut entries = (0..10).map(|i| Ok((Cf::Regular, key(i), b"installed".to_vec())));
    left.replace_contents(&[Cf::Regular], &mut entries).unwrap();
    assert_eq!(all_keys(&left, Cf::Regular, IterOptions::default()), (0..10).map(key).collect::<Vec<_>>());
    assert_eq!(left.get(Cf::Regular, &key(5)).unwrap(), Some(b"installed".to_vec()));
    assert_eq!(all_keys(&right, Cf::Regular, IterOptions::default()), (50..100).map(key).collect::<Vec<_>>());
    let mut outside = std::iter::once(Ok((Cf::Regular, key(70), b"x".to_vec())));
    assert!(left.replace_contents(&[Cf::Regular], &mut outside).is_err(), "a key of the sibling's");
}

#[test]
fn split_keys_and_space_records_are_checked() {
    let space = KeySpace::of_id(5);
    assert!(space.split_at(Cf::Regular, b"", 6, 7).is_err(), "at the first key: an empty half");
    assert!(space.split_at(Cf::Regular, b"m", 6, 6).is_err(), "one id for both halves");
    assert!(space.split_at(Cf::Regular, b"m", 5, 7).is_err(), "the parent's own id");
    let (l, r) = space.split_at(Cf::Regular, b"m", 6, 7).unwrap();
    assert!(l.split_at(Cf::Regular, b"n", 8, 9).is_err(), "outside the left half");
    let (ll, lr) = l.split_at(Cf::Regular, b"f", 8, 9).unwrap();
    assert_eq!(lr.db_range(Cf::Regular), ([&5u64.to_be_bytes()[..], b"f"].concat(), Some([&5u64.to_be_bytes()[..], b"m"].concat())));
    assert_eq!(ll.prefix(Cf::Intents), 8u64.to_be_bytes());
    for s in [&space, &l, &r, &ll, &lr, &KeySpace::whole()] {
        assert_eq!(&KeySpace::decode(&s.encode()).unwrap(), s);
    }
    assert_eq!(space.own_id(), Some(5));
    assert_eq!(l.own_id(), None);
    let bytes = l.encode();
    assert!(KeySpace::decode(&bytes[..bytes.len() - 1]).is_err());
    assert!(KeySpace::decode(&[bytes.as_slice(), b"x"].concat()).is_err());
    assert!(KeySpace::decode(&[2]).is_err());
}

/// Compaction filters of a split parent and its halves, registered together:
/// each entry goes to the narrowest range holding it, whichever registered
/// first, and a key of no engine is kept.
#[test]
fn filters_of_overlapping_halves_go_to_the_narrowest() {
    let dir = tempfile::tempdir().unwrap();
    let store = RocksStore::open(dir.path(), &small_config()).unwrap();
    let counter =
        |prefix: &'static [u8]| Arc::new(DropPrefix { prefix, created: Arc::new(AtomicUsize::new(0)), saw_bottommost: Arc::new(AtomicBool::new(false)) });
    let parent_space = KeySpace::of_id(1);
    let (l, r) = parent_space.split_at(Cf::Regular, b"m", 2, 3).unwrap();
    let (fl, fp, fr) = (counter(b"a"), counter(b"b"), counter(b"n"));
    let left = store.engine(l, Some(fl.clone()), None).unwrap();
    let parent = store.engine(parent_space, Some(fp.clone()), None).unwrap();
    let right = store.engine(r, Some(fr.clone()), None).unwrap();
    for k in [&b"a1"[..], b"b1", b"c1", b"n1", b"o1"] {
        put(&parent, Cf::Regular, k, b"v", false);
    }
    store.flush().unwrap();
    parent.compact_range(Cf::Regular, None, None).unwrap();
    std::thread::sleep(COMPACTION_WINDOW + std::time::Duration::from_millis(500));
    store.inner.db.compact_range_cf(handle(&store.inner.db, Cf::Regular), None::<&[u8]>, None::<&[u8]>);
    // The left half drops "a…" (its filter), keeps "b…" (the parent's filter
    // would drop it: not asked); the right half drops "n…".
    assert_eq!(all_keys(&parent, Cf::Regular, IterOptions::default()), vec![b"b1".to_vec(), b"c1".to_vec(), b"o1".to_vec()]);
    assert_eq!(fp.created.load(Ordering::SeqCst), 0, "the parent's filter saw nothing its halves hold");
    drop((left, right));
}
