//! pinax-engine-rocks: [`RocksEngine`], the production [`KvEngine`] on RocksDB
//! (via `rust-rocksdb` 0.25).
//!
//! A node keeps one [`RocksStore`] (one RocksDB database) per data directory, shared
//! by every tablet on it; a tablet's engine is a [`RocksEngine`], a view of the store
//! whose keys lie under a prefix of its own ([`KeySpace`]: `be64(id)`, ids from a
//! registry of names the store keeps), so creating a tablet writes a few keys and
//! dropping one deletes its ranges (`view.rs`, `store.rs`). Four column families:
//! `default` ([`Cf::Regular`]), `intents`, `meta` and `raft` ([`Cf::Log`]: unused by a
//! node, whose Raft logs are in the data directory's shared log,
//! `pinax_raft::shared_log`; the in-memory test double keeps a group's log there).
//! All stores of a node share one [`SharedResources`] (an LRU block cache and a
//! `WriteBufferManager` that caps the memtable memory of the whole node); create it
//! once per node and put a clone of it in every store's [`RocksConfig`].
//! [`RocksEngine::open`] opens a database of its own used whole (tests, tools).
//!
//! Invariants kept here (the trait-level ones are checked by the conformance suite):
//! - keys use RocksDB's default bytewise comparator: unsigned byte order;
//! - a `WriteBatch` is one RocksDB write: atomic across column families. `atomic_flush`
//!   is on, so even without a WAL no flush persists one CF of a batch but not another;
//! - `write` with `sync: true` fsyncs the WAL before returning; with the WAL disabled it
//!   flushes all memtables instead, so "durable on return" holds either way;
//! - a write with `skip_log` (a Raft state machine's applies) bypasses the WAL: it is
//!   durable only once a flush persists it, and closing the engine does not flush it
//!   (`avoid_flush_during_shutdown`: its writer rebuilds it, as after a crash);
//! - integrity: every SST block carries a checksum (XXH3, set explicitly) and every WAL
//!   record a CRC32c; reads pass `verify_checksums` (on by default), so a damaged block
//!   surfaces as [`Error::Corruption`] instead of wrong data;
//! - a snapshot borrows the engine (`RocksSnapshot<'a>`), so the database cannot be
//!   closed while a snapshot or iterator is alive;
//! - a [`RocksBatch`] holds a reference to its database; writing it to another engine
//!   is an error, and the database directory stays locked while any batch of it lives.
//!
//! Compaction filter: each engine may bring one for its keys of the Regular CF; the
//! store dispatches every entry of a compaction to its engine's (`filter.rs`).
//!
//! Block cache: blocks of the files a flush writes of [`Cf::Regular`] and [`Cf::Intents`]
//! go into the block cache as they are written (`prepopulate_block_cache=kFlushOnly`,
//! set after opening: the Rust binding has no setter): the first scan after a bulk
//! load read every block back from the OS cache (a fifth of a `count(*)`'s CPU).
//!
//! Blocks: rows ([`Cf::Regular`]) in 32 KiB data blocks ([`REGULAR_BLOCK_BYTES`]:
//! scans cross fewer), the other column families in RocksDB's 4 KiB. RocksDB's
//! per-thread perf counters are turned off on every thread that uses an engine.
//!
//! Errors: RocksDB statuses map to [`Error::Corruption`] (corruption),
//! [`Error::Io`] (I/O errors), else [`Error::Other`].
//!
//! Prefix bloom filters: [`Cf::Regular`] and [`Cf::Intents`] have prefix extractors
//! giving [`pinax_engine::probe_prefix`], with bloom filters over those prefixes in SST files
//! (not in memtables: see `cf_options`). Iterators with `prefix_same_as_start` probe one prefix
//! (RocksDB's prefix seek); all others set `total_order_seek`, so no filter changes
//! what they return. Filters and indexes are partitioned (a two-level index whose
//! top level stays pinned in the block cache): a large SST's whole-file filter
//! would not fit a cache shard and be read again for every probe.
//!
//! Must not depend on: anything above `pinax-engine` (MVCC, tablets, servers); no code
//! here knows what the keys mean beyond `probe_prefix`.

mod filter;
mod store;
mod view;

pub use store::{RocksStore, StoreBatch};
pub use view::{KeySpace, RocksBatch, RocksEngine, RocksIterator, RocksSnapshot};

use pinax_engine::{Cf, CompactionFilterFactory, Error, WritePressure};
use rocksdb::{BlockBasedOptions, Cache, ChecksumType, ColumnFamily, DBCompressionType, ErrorKind, Options, SliceTransform, WriteBufferManager, DB};
use std::fmt;
use std::sync::Arc;

const MIB: usize = 1024 * 1024;

// ---------------------------------------------------------------------------
// configuration

/// Memory shared by every tablet (every [`RocksEngine`]) of a node. Create once per
/// node; clones share the same cache and memtable budget.
#[derive(Clone)]
pub struct SharedResources {
    block_cache: Cache,
    write_buffer_manager: WriteBufferManager,
    block_cache_bytes: usize,
    memtable_budget_bytes: usize,
}

impl SharedResources {
    /// Default block cache size: 256 MiB.
    pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 256 * MIB;
    /// Default memtable budget for the whole node: 256 MiB.
    pub const DEFAULT_MEMTABLE_BUDGET_BYTES: usize = 256 * MIB;

    /// A block cache of `block_cache_bytes` (LRU) and a memtable budget of
    /// `memtable_budget_bytes` across all tablets using these resources. When the
    /// budget is nearly used up RocksDB flushes memtables (writers do not stall).
    pub fn new(block_cache_bytes: usize, memtable_budget_bytes: usize) -> Self {
        SharedResources {
            block_cache: Cache::new_lru_cache(block_cache_bytes),
            write_buffer_manager: WriteBufferManager::new_write_buffer_manager(memtable_budget_bytes, false),
            block_cache_bytes,
            memtable_budget_bytes,
        }
    }

    pub fn block_cache_bytes(&self) -> usize {
        self.block_cache_bytes
    }

    pub fn memtable_budget_bytes(&self) -> usize {
        self.memtable_budget_bytes
    }

    /// Bytes currently held in the shared block cache.
    pub fn block_cache_usage(&self) -> usize {
        self.block_cache.get_usage()
    }

    /// Memtable bytes currently charged to the shared budget (all tablets).
    pub fn memtable_usage(&self) -> usize {
        self.write_buffer_manager.get_usage()
    }
}

impl Default for SharedResources {
    fn default() -> Self {
        Self::new(Self::DEFAULT_BLOCK_CACHE_BYTES, Self::DEFAULT_MEMTABLE_BUDGET_BYTES)
    }
}

impl fmt::Debug for SharedResources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedResources")
            .field("block_cache_bytes", &self.block_cache_bytes)
            .field("memtable_budget_bytes", &self.memtable_budget_bytes)
            .finish()
    }
}

/// Configuration of one tablet's database.
#[derive(Clone)]
pub struct RocksConfig {
    /// Node-wide cache and memtable budget (clone the node's one in here).
    pub shared: SharedResources,
    /// Write without a WAL (default false). Unsynced writes are then lost on a crash
    /// until the next flush; `sync: true` writes flush all memtables before returning.
    pub disable_wal: bool,
    /// RocksDB background flush + compaction threads (default 2).
    pub max_background_jobs: i32,
    /// Bloom filter bits per key on the Regular and Intents CFs (default 10).
    pub bloom_bits_per_key: f64,
    /// Size of one memtable of one CF before it is switched for flushing (default half
    /// the node's memtable budget, at least 4 MiB). One memtable per column family
    /// serves every tablet of a store, so it is sized to the node, not to a tablet:
    /// with atomic flushes, a memtable that fills up flushes every column family, and
    /// a transaction's intents that fit in their memtable until it is resolved are
    /// never written to a file (a 1M-row insert's intents are ~110 MB; at 64 MiB
    /// they were flushed twice and compacted away).
    pub write_buffer_size: usize,
    /// Verify block checksums on every read (default true).
    pub verify_checksums: bool,
    /// MVCC garbage collection: filter for compactions of the Regular CF (of an
    /// engine opened with [`RocksEngine::open`]; a store's engines bring their own).
    pub compaction_filter: Option<Arc<dyn CompactionFilterFactory>>,
    /// Files RocksDB keeps open at most (its table cache; default 4096): what bounds
    /// the descriptors of a store, whatever the number of tablets in it.
    pub max_open_files: i32,
    /// Free bytes the store's filesystem keeps in reserve: below them,
    /// `write_pressure` refuses client writes ([`WritePressure::NoSpace`]), so
    /// RocksDB and the Raft log never run into a full disk themselves (default 0:
    /// no check; a node sets it, `--min-free-mb`).
    pub min_free_bytes: u64,
}

impl RocksConfig {
    /// Defaults, using the node's shared resources.
    pub fn with_shared(shared: SharedResources) -> Self {
        RocksConfig {
            write_buffer_size: (shared.memtable_budget_bytes / 2).max(4 * MIB),
            shared,
            disable_wal: false,
            max_background_jobs: 2,
            bloom_bits_per_key: 10.0,
            verify_checksums: true,
            compaction_filter: None,
            max_open_files: 4096,
            min_free_bytes: 0,
        }
    }
}

impl Default for RocksConfig {
    /// Defaults with private (unshared) resources: fine for tests and tools; a node
    /// should use [`RocksConfig::with_shared`].
    fn default() -> Self {
        Self::with_shared(SharedResources::default())
    }
}

impl fmt::Debug for RocksConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RocksConfig")
            .field("shared", &self.shared)
            .field("disable_wal", &self.disable_wal)
            .field("max_background_jobs", &self.max_background_jobs)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("write_buffer_size", &self.write_buffer_size)
            .field("verify_checksums", &self.verify_checksums)
            .field("compaction_filter", &self.compaction_filter.is_some())
            .field("max_open_files", &self.max_open_files)
            .field("min_free_bytes", &self.min_free_bytes)
            .finish()
    }
}

/// Data block size of [`Cf::Regular`] (the others keep RocksDB's 4 KiB). Scans
/// cross a block every few dozen versions; each crossing is a block-cache lookup,
/// an index step and a new block iterator. With 32 KiB blocks (YugabyteDB's,
/// TiKV's and Pebble's default too) a `count(*)` over 2M rows of two versions took
/// 10-15% less CPU and YCSB E's daemon 16% less per scan; point reads (YCSB C)
/// stayed within their spread (bench/results/2026-11-27-night.txt).
pub const REGULAR_BLOCK_BYTES: usize = 32 << 10;

fn table_options(cfg: &RocksConfig, cf: Cf) -> BlockBasedOptions {
    let bloom = cf != Cf::Meta;
    let mut t = BlockBasedOptions::default();
    t.set_block_cache(&cfg.shared.block_cache);
    if cf == Cf::Regular {
        t.set_block_size(REGULAR_BLOCK_BYTES);
    }
    if bloom {
        t.set_bloom_filter(cfg.bloom_bits_per_key, false);
        t.set_whole_key_filtering(true);
    }
    t.set_cache_index_and_filter_blocks(true);
    t.set_pin_l0_filter_and_index_blocks_in_cache(true);
    // Filters and indexes in partitions of a few KiB under a small top-level
    // index kept in the cache: a whole-file filter of a large SST (megabytes: one
    // bloom for every key and prefix of a 64 MiB file) is larger than a block cache
    // shard, so RocksDB did not keep it, and every probe of a key read it from the
    // file and checked its checksum again (a 1M-row index backfill's 5,000-key
    // write took minutes, all of it in ReadFilterBlock → XXH3).
    t.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    t.set_partition_filters(bloom);
    t.set_pin_top_level_index_and_filter(true);
    t.set_checksum_type(ChecksumType::XXH3);
    t
}

/// RocksDB's memtable skip list starts an insert from the previous one's place
/// (its "splice") only if the key falls right next to it, and otherwise searches
/// from the top. With a hint prefix extractor it walks up from the previous place
/// until a level brackets the key: a batch in key order (Tablet::write_intents and
/// write_fast sort theirs; the applied rows of a resolution come in key order)
/// then costs a few comparisons per record rather than a whole search. One hint
/// per engine prefix (8 bytes) and first byte of its keys: the reverse index's
/// records (tagged) keep their own.
/// A 1M-row insert..select: daemon CPU -3-4% beyond sorting the batches (4 runs).
const MEMTABLE_HINTS: &str = "memtable_insert_with_hint_prefix_extractor=rocksdb.CappedPrefix.9";

/// A file of the bottommost level holding keys a snapshot protected when it was
/// written is compacted again ("BottommostFiles") as soon as that snapshot is gone.
/// In a store whose column family has only level 0 (every store at first, and the
/// intents always) that is every flushed file: the seed workload's 107 MB of
/// intents per 1M-row insert were rewritten unchanged (same records, sequence
/// numbers zeroed) right after their flush, 0.35-0.52 s of CPU each. An hour's
/// delay leaves the work to the compactions that come anyway (the history GC
/// drops old versions through the compaction filter, not through this).
const BOTTOMMOST_DELAY: &str = "bottommost_file_compaction_delay=3600";

pub(crate) fn cf_options(cfg: &RocksConfig, cf: Cf) -> Options {
    // (Not in RocksDB's C API: set through an options string.)
    let mut o = Options::default().get_options_from_string(format!("{MEMTABLE_HINTS};{BOTTOMMOST_DELAY}")).expect("valid RocksDB options");
    o.set_block_based_table_factory(&table_options(cfg, cf));
    match cf {
        // Rows: uncompressed in L0 and L1 (flushes and the first compactions are
        // on the write path, and their data is rewritten soon), LZ4 below and at
        // the bottom. Not ZSTD at the bottom (TiKV's choice): with dynamic level
        // sizes the bottom level is where level 0 is compacted to until a store
        // holds gigabytes, so every early compaction paid ZSTD's CPU (the seed
        // workload: 1.16 s of CPU to compact 179 MB of level 0); YugabyteDB and
        // CockroachDB use a fast codec at every level too.
        Cf::Regular => {
            use DBCompressionType::{Lz4, None as Plain};
            o.set_compression_per_level(&[Plain, Plain, Lz4, Lz4, Lz4, Lz4, Lz4]);
            o.set_bottommost_compression_type(Lz4);
        }
        // Intents and the Raft log are short-lived (resolved, purged): compressing
        // them only costs CPU. Meta is a few keys.
        _ => {
            o.set_compression_type(DBCompressionType::None);
            o.set_bottommost_compression_type(DBCompressionType::None);
        }
    }
    // The intents' memtable may take the whole budget (the node's write buffer
    // manager still flushes when all memtables together near it): a large
    // transaction's intents then stay in it until they are resolved, and the
    // flush drops them under their range deletions instead of writing them to a
    // file (the seed workload's 1M-row inserts: -0.1 to -0.2 s of flush CPU each,
    // its 2M-row update -0.5 s against half the budget; 2 rounds).
    o.set_write_buffer_size(if cf == Cf::Intents { cfg.write_buffer_size.max(cfg.shared.memtable_budget_bytes) } else { cfg.write_buffer_size });
    if cf == Cf::Intents {
        // Intents are written once and deleted once (resolved): files that are
        // mostly tombstones are compacted by RocksDB on its own, so iterators over
        // intents do not step over a large transaction's tombstones for long.
        o.add_compact_on_deletion_collector_factory(16 * 1024, 8 * 1024, 0.5);
    }
    // Bloom filters in SST files over probe prefixes, so a probe for a row with no
    // version or intent (the checks of an insert) or with versions in few files
    // reads no block of the others (`IterOptions`).
    let extractor = match cf {
        Cf::Regular => Some(SliceTransform::create("pinax.probe_prefix", probe_prefix_of::<0>, Some(has_probe_prefix::<0>))),
        Cf::Intents => Some(SliceTransform::create("pinax.intent_probe_prefix", probe_prefix_of::<1>, Some(has_probe_prefix::<1>))),
        Cf::Meta | Cf::Log => None,
    };
    if let Some(x) = extractor {
        // No memtable bloom filter (`memtable_prefix_bloom_size_ratio`): it is
        // allocated with every memtable, idle or not, and counts against the node's
        // memtable budget; a node of a dozen tablets with a 32 MiB budget flushed
        // memtables until RocksDB stopped writes (even at 320 KiB per memtable). A
        // probe of an absent row searches the memtables' skip lists, and skips
        // every SST file.
        o.set_prefix_extractor(x);
    }
    o
}

/// `Cf` by index (a const generic: RocksDB takes plain function pointers).
const fn cf_at(i: usize) -> Cf {
    Cf::ALL[i]
}

fn probe_prefix_of<const CF: usize>(key: &[u8]) -> &[u8] {
    pinax_engine::probe_prefix(cf_at(CF), key).unwrap_or(key)
}

fn has_probe_prefix<const CF: usize>(key: &[u8]) -> bool {
    pinax_engine::probe_prefix(cf_at(CF), key).is_some()
}

pub(crate) fn db_options(cfg: &RocksConfig) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.create_missing_column_families(true);
    o.set_max_background_jobs(cfg.max_background_jobs);
    o.set_write_buffer_manager(&cfg.shared.write_buffer_manager);
    o.set_atomic_flush(true);
    o.set_max_open_files(cfg.max_open_files);
    o
}

// ---------------------------------------------------------------------------
// errors

/// Maps a RocksDB status to the engine error kinds.
pub fn map_error(e: rocksdb::Error) -> Error {
    let kind = e.kind();
    let msg = e.into_string();
    match kind {
        ErrorKind::Corruption => Error::Corruption(msg),
        ErrorKind::IOError => Error::Io(msg),
        _ if msg.contains("Corruption") || msg.contains("checksum mismatch") => Error::Corruption(msg),
        _ => Error::Other(msg),
    }
}

/// The handle of `cf`. All column families are opened (and checked) in
/// [`RocksStore::open`], so the lookup cannot fail for a database opened there.
pub(crate) fn handle(db: &DB, cf: Cf) -> &ColumnFamily {
    match db.cf_handle(cf.name()) {
        Some(h) => h,
        None => unreachable!("column family {cf} is opened with the database"),
    }
}

/// Level-0 files of one column family from which writes are delayed (RocksDB's own
/// slowdown starts at 20, with its default options)...
const L0_SLOW: u64 = 12;
/// ...and from which they are refused: RocksDB stops all writes at 36, and a stopped
/// write would wait inside RocksDB holding its tablet's write lock.
const L0_FULL: u64 = 30;
/// Compaction debt from which writes are refused (RocksDB slows at 64 GiB).
const PENDING_FULL: u64 = 48 << 30;

/// Backpressure from a column family's level-0 file count, compaction debt, and
/// whether RocksDB has stopped writes. Between `L0_SLOW` and `L0_FULL` the delay
/// grows by 2 ms per file.
pub fn pressure_from(l0_files: u64, pending_compaction_bytes: u64, stopped: bool) -> WritePressure {
    if stopped {
        WritePressure::Full("RocksDB stopped writes".into())
    } else if l0_files >= L0_FULL {
        WritePressure::Full(format!("{l0_files} files at level 0 wait for compaction"))
    } else if pending_compaction_bytes >= PENDING_FULL {
        WritePressure::Full(format!("{} GiB wait for compaction", pending_compaction_bytes >> 30))
    } else if l0_files >= L0_SLOW {
        WritePressure::Slow(std::time::Duration::from_millis(2 * (l0_files - L0_SLOW + 1)))
    } else {
        WritePressure::None
    }
}

/// Free bytes of the filesystem holding `path` (for unprivileged writers, as
/// `df` shows them), or `None` if it cannot be asked.
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    Some((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
}

/// Size in bytes of the filesystem holding `path`, or `None` if it cannot be
/// asked.
pub fn disk_bytes(path: &std::path::Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    Some((st.blocks() as u64).saturating_mul(st.fragment_size() as u64))
}

/// [`WritePressure::NoSpace`] if `free` is below `reserve`.
pub fn space_pressure(path: &std::path::Path, free: u64, reserve: u64) -> Option<WritePressure> {
    (free < reserve).then(|| {
        WritePressure::NoSpace(format!(
            "the disk of {} has {} MiB free, below the reserve of {} MiB; free space on it (or drop data) to write again",
            path.display(),
            free >> 20,
            reserve >> 20
        ))
    })
}

/// Turn RocksDB's per-thread perf counters off on this thread (once per thread).
/// They are on by default (`kEnableCount`): every key an iterator steps over
/// adds to the thread's `perf_context`, reached through a thread-local
/// initialisation check: 2.5-3% of a `count(*)`'s profile (its time moved within
/// its spread). Nothing here reads them.
pub(crate) fn perf_counters_off() {
    thread_local!(static OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    OFF.with(|off| {
        if !off.replace(true) {
            rocksdb::perf::set_perf_stats(rocksdb::perf::PerfStatsLevel::Disable);
        }
    });
}

#[cfg(test)]
mod conformance {
    pub struct TempRocks {
        // Field order: the engine closes before its directory is removed.
        engine: crate::RocksEngine,
        _dir: tempfile::TempDir,
    }

    impl pinax_engine::conformance::Fixture for TempRocks {
        type Engine = crate::RocksEngine;
        fn engine(&self) -> &crate::RocksEngine {
            &self.engine
        }
    }

    fn open() -> TempRocks {
        let dir = tempfile::tempdir().expect("tempdir");
        // Small memtables so that tests also exercise SST files.
        let mut cfg = crate::RocksConfig::with_shared(crate::SharedResources::new(8 << 20, 8 << 20));
        cfg.write_buffer_size = 256 << 10;
        let engine = crate::RocksEngine::open(dir.path(), &cfg).expect("open");
        TempRocks { engine, _dir: dir }
    }

    pinax_engine::conformance_tests!(open);
}

/// The same suite on an engine of a node's store: its keys under a prefix, between
/// two neighbours holding keys in every column family (at both ends of the key
/// space) that it must neither see nor touch.
#[cfg(test)]
mod conformance_of_a_store {
    use pinax_engine::{Cf, KvEngine, WriteBatch, WriteOptions};

    pub struct InStore {
        // Field order: the engines close before the store's directory is removed.
        engine: crate::RocksEngine,
        neighbours: Vec<crate::RocksEngine>,
        _dir: tempfile::TempDir,
    }

    impl Drop for InStore {
        fn drop(&mut self) {
            // The neighbours' keys are as they were written.
            for n in &self.neighbours {
                for cf in Cf::ALL {
                    for k in [&b""[..], b"\x00", b"m", b"\xff\xff\xff"] {
                        assert_eq!(n.get(cf, k).ok().flatten().as_deref(), Some(k), "a neighbour's key {k:?} in {cf:?} was changed");
                    }
                }
            }
        }
    }

    impl pinax_engine::conformance::Fixture for InStore {
        type Engine = crate::RocksEngine;
        fn engine(&self) -> &crate::RocksEngine {
            &self.engine
        }
    }

    fn open() -> InStore {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = crate::RocksConfig::with_shared(crate::SharedResources::new(8 << 20, 8 << 20));
        cfg.write_buffer_size = 256 << 10;
        let store = crate::RocksStore::open(dir.path(), &cfg).expect("open");
        let neighbours: Vec<_> = [6, 8].map(|id| store.engine(crate::KeySpace::of_id(id), None, None).expect("engine")).into();
        for n in &neighbours {
            let mut b = n.new_batch();
            for cf in Cf::ALL {
                for k in [&b""[..], b"\x00", b"m", b"\xff\xff\xff"] {
                    b.put(cf, k, k);
                }
            }
            n.write(b, WriteOptions::default()).expect("write");
        }
        // With a scratch directory: `replace_contents` ingests files.
        let engine = store.engine(crate::KeySpace::of_id(7), None, Some(dir.path().join("scratch"))).expect("engine");
        InStore { engine, neighbours, _dir: dir }
    }

    pinax_engine::conformance_tests!(open);
}

#[cfg(test)]
mod tests;
