//! pinax-engine: the storage-engine traits every tablet is written against.
//!
//! Key types: [`KvEngine`] (one ordered key-value store with column families),
//! [`Snapshot`] (a consistent point-in-time view across all column families),
//! [`KvIterator`] (a seekable cursor), [`WriteBatch`] (atomic multi-CF write).
//!
//! Invariants every implementation must keep (checked by the `conformance` suite, compiled for engine crates' tests: feature `conformance`):
//! - keys are compared as unsigned bytes (memcmp order), in every column family;
//! - a batch is applied atomically: a snapshot sees all of it or none of it;
//! - a snapshot never changes, whatever is written after it was taken;
//! - `write` with `sync: true` returns only once the batch survives a process crash.
//!
//! This crate must not depend on any implementation (RocksDB lives in
//! `pinax-engine-rocks`, the in-memory test double in `pinax-engine-mem`).
//! Start reading at [`KvEngine`], then the conformance suite.

#[cfg(feature = "conformance")]
pub mod conformance;
mod owned_batch;

pub use owned_batch::{BatchOp, OwnedBatch};

use std::fmt;

/// Column families. Every engine has all of them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Cf {
    /// Committed MVCC versions: `key + descending hybrid time → value`.
    Regular,
    /// Provisional records of transactions in flight and their reverse index.
    Intents,
    /// Tablet metadata (applied index, schema, ...); tiny.
    Meta,
    /// The tablet's Raft state (`pinax-raft`): vote, purge point, and the log's
    /// entries for engines without a directory (an engine with one has them in
    /// files of their own). The log is the write-ahead log of the other column
    /// families.
    Log,
}

impl Cf {
    pub const ALL: [Cf; 4] = [Cf::Regular, Cf::Intents, Cf::Meta, Cf::Log];
    pub fn name(self) -> &'static str {
        match self {
            Cf::Regular => "default",
            Cf::Intents => "intents",
            Cf::Meta => "meta",
            Cf::Log => "raft",
        }
    }
    pub fn index(self) -> usize {
        match self {
            Cf::Regular => 0,
            Cf::Intents => 1,
            Cf::Meta => 2,
            Cf::Log => 3,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("storage I/O error: {0}")]
    Io(String),
    #[error("storage corruption: {0}")]
    Corruption(String),
    #[error("storage engine error: {0}")]
    Other(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Options of one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Durable on return (fsync of the engine's log).
    pub sync: bool,
    /// Not written to the engine's log: lost in a crash unless a later
    /// [`KvEngine::flush`] made it durable. For data that can be rebuilt after a
    /// crash (a Raft state machine's applies, redone from the Raft log).
    pub skip_log: bool,
}

/// Bounds of an iterator: `lower` inclusive, `upper` exclusive; `None` = unbounded.
#[derive(Clone, Debug, Default)]
pub struct IterOptions {
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
    /// The iterator probes one [`probe_prefix`] at a time (bloom filters apply):
    /// after a seek to a key that has a probe prefix, it returns the same keys as
    /// without the hint for as long as they share that prefix, and then may end
    /// (or skip ahead). Callers read no key past the seek target's prefix and seek
    /// again for the next. Without a probe prefix (or in an engine that ignores
    /// the hint, as the in-memory one does) it changes nothing.
    pub prefix_same_as_start: bool,
}

/// Bytes after a probe prefix in [`Cf::Regular`] (a hybrid time, in a version key).
pub const PROBE_SUFFIX_LEN: usize = 8;
/// Bytes after a probe prefix in [`Cf::Intents`] (a transaction id and a sequence
/// number, in an intent key).
pub const INTENT_PROBE_SUFFIX_LEN: usize = 20;
/// The two bytes that end a probe prefix.
pub const PROBE_PREFIX_END: [u8; 2] = [0x00, 0x01];

/// The probe prefix of a key of `cf` (see [`IterOptions::prefix_same_as_start`]):
/// a key that ends with `00 01` and then the column family's suffix length
/// ([`PROBE_SUFFIX_LEN`] in [`Cf::Regular`], [`INTENT_PROBE_SUFFIX_LEN`] in
/// [`Cf::Intents`]) has as prefix all but the suffix; others, and keys of other
/// column families, have none. This is the engine's only knowledge of a key
/// format: an MVCC version key (an escaped key, which ends `00 01`, and a hybrid
/// time) has the versions of its row as prefix group, an intent key the intents
/// on its row, so an engine can keep per-prefix bloom filters and answer "does
/// this row have any version / intent?" without reading a block.
pub fn probe_prefix(cf: Cf, key: &[u8]) -> Option<&[u8]> {
    let suffix = match cf {
        Cf::Regular => PROBE_SUFFIX_LEN,
        Cf::Intents => INTENT_PROBE_SUFFIX_LEN,
        Cf::Meta | Cf::Log => return None,
    };
    let n = key.len().checked_sub(suffix)?;
    let prefix = &key[..n];
    prefix.ends_with(&PROBE_PREFIX_END).then_some(prefix)
}

impl IterOptions {
    pub fn bounded(lower: Vec<u8>, upper: Vec<u8>) -> Self {
        IterOptions { lower: Some(lower), upper: Some(upper), prefix_same_as_start: false }
    }
}

/// A cursor over one column family of a snapshot. Positioned functions leave the
/// iterator invalid when they run past the bounds or the data.
pub trait KvIterator {
    /// Position at the first key >= `key`.
    fn seek(&mut self, key: &[u8]);
    /// Position at the last key <= `key`.
    fn seek_for_prev(&mut self, key: &[u8]);
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    fn next(&mut self);
    fn prev(&mut self);
    /// Whether positioned on an entry; an underlying error surfaces here.
    fn valid(&self) -> Result<bool>;
    /// Current key; only while `valid()`.
    fn key(&self) -> &[u8];
    /// Current value; only while `valid()`.
    fn value(&self) -> &[u8];
}

/// A consistent read-only view of all column families at one moment.
pub trait Snapshot: Send + Sync {
    type Iter<'a>: KvIterator
    where
        Self: 'a;
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn iter(&self, cf: Cf, opts: IterOptions) -> Self::Iter<'_>;
}

/// An atomic set of writes over any column families.
pub trait WriteBatch: Send {
    fn put(&mut self, cf: Cf, key: &[u8], value: &[u8]);
    fn delete(&mut self, cf: Cf, key: &[u8]);
    /// Delete every key in `[start, end)`.
    fn delete_range(&mut self, cf: Cf, start: &[u8], end: &[u8]);
    fn count(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.count() == 0
    }
    /// Approximate size in bytes.
    fn data_size(&self) -> usize;
    fn clear(&mut self);
}

/// Statistics for status pages and tests (backpressure asks `write_pressure`).
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    pub approximate_bytes: u64,
    pub l0_files: u64,
    pub memtable_bytes: u64,
    pub pending_compaction_bytes: u64,
}

/// How far a store's background work (flushes, compactions) is behind its writes:
/// what write backpressure acts on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum WritePressure {
    /// Keep writing.
    #[default]
    None,
    /// Behind: delay each write by this much, so background work catches up.
    Slow(std::time::Duration),
    /// Too far behind: refuse writes (a retryable error) until it has caught up; why.
    Full(String),
    /// The store's disk has less free space than its reserve: refuse writes (not
    /// retryable: SQLSTATE 53100, disk full) until space is freed; why. The reserve
    /// is kept for what must still be written whatever happens: flushes of the
    /// memtables, compactions, the Raft log's own records, resolutions of
    /// transactions already committed, catalog changes such as DROP TABLE.
    NoSpace(String),
}

/// The key of [`Cf::Regular`] (as stored) where the engine's data is halved by
/// size, found by reading every key: `None` with no key after the first, or
/// when the data holds more than `limit` bytes (too much to read for this).
pub fn scan_middle_key<E: KvEngine + ?Sized>(engine: &E, limit: usize) -> Option<Vec<u8>> {
    let snap = engine.snapshot();
    let mut it = snap.iter(Cf::Regular, IterOptions::default());
    let mut total = 0usize;
    it.seek_to_first();
    while it.valid().ok()? {
        total += it.key().len() + it.value().len();
        if total > limit {
            return None;
        }
        it.next();
    }
    let mut below = 0usize;
    it.seek_to_first();
    let first = it.valid().ok()?.then(|| it.key().to_vec())?;
    while it.valid().ok()? {
        if below * 2 >= total && it.key() > first.as_slice() {
            return Some(it.key().to_vec());
        }
        below += it.key().len() + it.value().len();
        it.next();
    }
    None
}

/// One ordered, multi-column-family key-value store (one per tablet; in RocksDB a
/// view of the store its disk's tablets share).
pub trait KvEngine: Send + Sync + 'static {
    type Snapshot<'a>: Snapshot
    where
        Self: 'a;
    type Batch: WriteBatch;

    fn snapshot(&self) -> Self::Snapshot<'_>;
    fn new_batch(&self) -> Self::Batch;
    fn write(&self, batch: Self::Batch, opts: WriteOptions) -> Result<()>;
    /// Read the latest value (no snapshot).
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Persist memtables (after this, a restart needs no log replay).
    fn flush(&self) -> Result<()>;
    /// Compact `[start, end)` (None = unbounded) of column family `cf`.
    fn compact_range(&self, cf: Cf, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()>;
    fn stats(&self) -> EngineStats;
    /// Backpressure for writers (cheap: called every few milliseconds).
    fn write_pressure(&self) -> WritePressure {
        WritePressure::None
    }
    /// A key of [`Cf::Regular`] (as stored) near the middle of the engine's data by
    /// size: where a tablet splits into two halves of about equal size. `None`
    /// when there is too little to split (no key, or no key after the first).
    /// This default reads every key; RocksDB's answers from its files' indexes.
    fn approximate_middle_key(&self) -> Option<Vec<u8>> {
        scan_middle_key(self, usize::MAX)
    }
    /// A directory on the engine's disk for its owner's temporary files (a Raft
    /// snapshot being sent or received), shared with other engines of the disk:
    /// names must be unique. None: an in-memory engine (use the system's).
    fn dir(&self) -> Option<&std::path::Path> {
        None
    }
    /// Replace everything in the column families `cfs` with `entries` (ordered by
    /// column family as in `cfs`, then by key), durably: a Raft snapshot's install.
    /// Not atomic across column families (RocksDB takes in one file per column
    /// family); each is replaced whole. This default writes batches; RocksDB
    /// writes files for the ranges and ingests them.
    fn replace_contents(&self, cfs: &[Cf], entries: &mut dyn Iterator<Item = Result<(Cf, Vec<u8>, Vec<u8>)>>) -> Result<()> {
        replace_by_batches(self, cfs, entries)
    }
}

/// [`KvEngine::replace_contents`] by write batches: one that deletes every key of
/// `cfs`, then batches of about 4 MiB of the new entries, the last one synced.
pub fn replace_by_batches<E: KvEngine + ?Sized>(e: &E, cfs: &[Cf], entries: &mut dyn Iterator<Item = Result<(Cf, Vec<u8>, Vec<u8>)>>) -> Result<()> {
    let mut b = e.new_batch();
    {
        let snap = e.snapshot();
        for &cf in cfs {
            let mut it = snap.iter(cf, IterOptions::default());
            it.seek_to_first();
            while it.valid()? {
                b.delete(cf, it.key());
                it.next();
            }
        }
    }
    for entry in entries {
        let (cf, k, v) = entry?;
        if !cfs.contains(&cf) {
            return Err(Error::Other(format!("an entry of {cf} replacing the contents of {cfs:?}")));
        }
        b.put(cf, &k, &v);
        if b.data_size() >= 4 << 20 {
            e.write(std::mem::replace(&mut b, e.new_batch()), WriteOptions::default())?;
        }
    }
    e.write(b, WriteOptions { sync: true, ..Default::default() })
}

impl fmt::Display for Cf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Decides, during compaction of [`Cf::Regular`], which entries to drop (MVCC garbage
/// collection). Implemented by the MVCC layer; engines without compaction may ignore it.
pub trait CompactionFilterFactory: Send + Sync + 'static {
    /// A new filter for one compaction. `bottommost` is true when the compaction's
    /// output is the bottom of the tree (no older data exists below it), so deletion
    /// markers may be dropped for good.
    fn create(&self, bottommost: bool) -> Box<dyn CompactionFilter>;
}

/// One compaction's filter. Sees that compaction's entries in key order.
pub trait CompactionFilter: Send {
    /// Return false to drop the entry.
    fn keep(&mut self, key: &[u8], value: &[u8]) -> bool;
}
