//! [`RocksEngine`]: one engine (a tablet's [`KvEngine`]) as a view of a
//! [`RocksStore`]: the keys of its [`KeySpace`], with the space's prefix removed.
//!
//! Every key the engine's user writes is stored as `prefix ++ key` (the prefix of
//! its column family); reads and iterators see only keys of the space, bounded in
//! the store to `[prefix ++ lower, prefix ++ upper)` and handed out without the
//! prefix, so the engine's user cannot tell it from a database of its own. The
//! bounds of a space are the store's business (an iterator of the user never
//! reaches a key outside them; a write outside them is a bug, caught by a debug
//! assertion). A space of its own prefix and no bounds costs a copy of the key into
//! a scratch buffer per write and per seek, nothing per step of an iterator.

use crate::filter::Registration;
use crate::store::RocksStore;
use crate::{handle, map_error, perf_counters_off, pressure_from};
use pinax_engine::{Cf, CompactionFilterFactory, EngineStats, Error, IterOptions, KvEngine, KvIterator, Result, Snapshot, WriteBatch, WritePressure};
use rocksdb::{ColumnFamily, DBRawIteratorWithThreadMode, ReadOptions, SnapshotWithThreadMode, DB};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Names of SST files being ingested, unique in the process.
static INGESTS: AtomicU64 = AtomicU64::new(0);

/// Where an engine's keys are in its store, per column family: a prefix every key
/// is stored under, and bounds (`lower` inclusive, `upper` exclusive, `None` =
/// every key with the prefix) of the keys, without the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySpace {
    prefix: [Vec<u8>; 4],
    lower: [Vec<u8>; 4],
    upper: [Option<Vec<u8>>; 4],
}

impl KeySpace {
    /// Every key of the store, unprefixed: a store used as one engine.
    pub fn whole() -> Self {
        KeySpace { prefix: Default::default(), lower: Default::default(), upper: Default::default() }
    }

    /// Every key under `be64(id)` in every column family (ids from 1: the
    /// store's own records are under `00 * 8`).
    pub fn of_id(id: u64) -> Self {
        assert!(id != 0, "invariant: engine id 0 is the store's own");
        let p = id.to_be_bytes().to_vec();
        KeySpace { prefix: [p.clone(), p.clone(), p.clone(), p], lower: Default::default(), upper: Default::default() }
    }

    /// Every key under `prefix` in every column family.
    pub(crate) fn of_prefix(prefix: &[u8]) -> Self {
        let p = prefix.to_vec();
        KeySpace { prefix: [p.clone(), p.clone(), p.clone(), p], lower: Default::default(), upper: Default::default() }
    }

    /// The keys of `cf` in `[lower, upper)` only (within the current bounds).
    pub fn bounded(mut self, cf: Cf, lower: Vec<u8>, upper: Option<Vec<u8>>) -> Self {
        let i = cf.index();
        if lower > self.lower[i] {
            self.lower[i] = lower;
        }
        self.upper[i] = min_upper(self.upper[i].take(), upper);
        self
    }

    /// The prefix of `cf`'s keys in the store.
    pub fn prefix(&self, cf: Cf) -> &[u8] {
        &self.prefix[cf.index()]
    }

    /// `[first, end)` of the space's keys of `cf` in the store (`None`: no end).
    pub fn db_range(&self, cf: Cf) -> (Vec<u8>, Option<Vec<u8>>) {
        let i = cf.index();
        let lower = concat(&self.prefix[i], &self.lower[i]);
        let upper = match &self.upper[i] {
            Some(u) => Some(concat(&self.prefix[i], u)),
            None => successor(&self.prefix[i]),
        };
        (lower, upper)
    }

    /// [`KeySpace::db_range`] with an end always: past every key of the space
    /// when it has none.
    pub(crate) fn db_bounds(&self, cf: Cf) -> (Vec<u8>, Vec<u8>) {
        let (lower, upper) = self.db_range(cf);
        let end = upper.unwrap_or_else(|| past_every_key(&lower));
        (lower, end)
    }

    /// A key at or past the last key of the space in `cf` that no other space of
    /// another prefix can hold (for RocksDB's end-inclusive file deletion): only
    /// for a space that owns its whole prefix (no upper bound).
    pub fn last_db_key_bound(&self, cf: Cf) -> Option<Vec<u8>> {
        let i = cf.index();
        if self.upper[i].is_some() || self.prefix[i].is_empty() {
            return None;
        }
        Some(past_every_key(&self.prefix[i]))
    }

    /// The two halves of this space split at key `at` of `shared` (a key
    /// strictly inside its bounds): in `shared` both keep this space's prefix,
    /// the left one bounded to `[lower, at)`, the right one to `[at, upper)`, so
    /// together they hold exactly this space's keys of `shared` and no key moves;
    /// in every other column family each has a prefix of its own,
    /// `be64(left_id)` and `be64(right_id)`, and no bounds (what a split gives
    /// each half there is written to it). A tablet splitting in its store: its
    /// rows stay where they are, its intents, metadata and log do not.
    pub fn split_at(&self, shared: Cf, at: &[u8], left_id: u64, right_id: u64) -> Result<(KeySpace, KeySpace)> {
        let i = shared.index();
        if !self.contains(i, at) || at == self.lower[i].as_slice() {
            return Err(Error::Other(format!("split key {at:02x?} is not strictly inside {self:?} in {shared}")));
        }
        if left_id == right_id || self.prefix.iter().any(|p| *p == left_id.to_be_bytes() || *p == right_id.to_be_bytes()) {
            return Err(Error::Other(format!("split halves of {self:?} need two new ids (got {left_id} and {right_id})")));
        }
        let half = |id: u64, lower: Vec<u8>, upper: Option<Vec<u8>>| {
            let mut h = KeySpace::of_id(id);
            h.prefix[i] = self.prefix[i].clone();
            h.lower[i] = lower;
            h.upper[i] = upper;
            h
        };
        Ok((half(left_id, self.lower[i].clone(), Some(at.to_vec())), half(right_id, at.to_vec(), self.upper[i].clone())))
    }

    /// Whether the space is [`KeySpace::of_id`]`(id)` for some id: one prefix of
    /// its own in every column family, no bounds (its `id` then).
    pub fn own_id(&self) -> Option<u64> {
        let p: [u8; 8] = self.prefix[0].as_slice().try_into().ok()?;
        let id = u64::from_be_bytes(p);
        (id != 0 && *self == KeySpace::of_id(id)).then_some(id)
    }

    /// The space in bytes (a store's registry keeps the spaces of views that
    /// are not [`KeySpace::of_id`]): a version byte, then per column family the
    /// prefix, the lower bound and the upper bound (flag byte), each a `be32`
    /// length and its bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![SPACE_FORMAT];
        let mut field = |b: &[u8]| {
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        };
        for i in 0..4 {
            field(&self.prefix[i]);
            field(&self.lower[i]);
            match &self.upper[i] {
                Some(u) => {
                    field(&[1]);
                    field(u);
                }
                None => field(&[0]),
            }
        }
        out
    }

    /// [`KeySpace::encode`] undone.
    pub fn decode(b: &[u8]) -> Result<KeySpace> {
        let bad = || Error::Corruption(format!("key space record of {} bytes", b.len()));
        let (&version, mut rest) = b.split_first().ok_or_else(bad)?;
        if version != SPACE_FORMAT {
            return Err(Error::Corruption(format!("key space record of format {version}")));
        }
        let mut field = || -> Result<Vec<u8>> {
            let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
            let len = u32::from_be_bytes(*len) as usize;
            let (v, tail) = (tail.get(..len).ok_or_else(bad)?, &tail[len..]);
            rest = tail;
            Ok(v.to_vec())
        };
        let mut space = KeySpace::whole();
        for i in 0..4 {
            space.prefix[i] = field()?;
            space.lower[i] = field()?;
            space.upper[i] = match field()?.as_slice() {
                [0] => None,
                [1] => Some(field()?),
                _ => return Err(bad()),
            };
        }
        if !rest.is_empty() {
            return Err(bad());
        }
        Ok(space)
    }

    pub(crate) fn contains(&self, i: usize, key: &[u8]) -> bool {
        key >= self.lower[i].as_slice() && self.upper[i].as_deref().is_none_or(|u| key < u)
    }
}

/// The format of [`KeySpace::encode`].
const SPACE_FORMAT: u8 = 1;

/// A key past every key starting with `prefix` that anyone writes (`prefix ++
/// ff * 64`): the end of a range that has no upper bound of its own.
pub(crate) fn past_every_key(prefix: &[u8]) -> Vec<u8> {
    concat(prefix, &[0xff; 64])
}

fn concat(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(a.len() + b.len());
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    v
}

/// The first key after every key starting with `prefix` (`None`: there is none,
/// for the empty prefix and one of only `ff` bytes).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last != 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

fn min_upper(a: Option<Vec<u8>>, b: Option<Vec<u8>>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// One engine: a view of a [`RocksStore`] (see the module docs).
pub struct RocksEngine {
    store: RocksStore,
    space: Arc<KeySpace>,
    dir: Option<PathBuf>,
    /// Keeps the engine's compaction filter installed while the engine lives.
    _filter: Option<Registration>,
}

impl fmt::Debug for RocksEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RocksEngine").field("store", &self.store.path()).field("space", &self.space).finish_non_exhaustive()
    }
}

impl RocksEngine {
    pub(crate) fn new(store: RocksStore, space: KeySpace, gc: Option<Arc<dyn CompactionFilterFactory>>, dir: Option<PathBuf>) -> Self {
        let space = Arc::new(space);
        let filter = gc.map(|f| store.inner.filters.register(&space, f));
        RocksEngine { store, space, dir, _filter: filter }
    }

    /// A database of its own at `path`, used whole (tests and tools; a node opens a
    /// [`RocksStore`] per disk and an engine per tablet in it). `cfg`'s compaction
    /// filter applies to all of it.
    pub fn open(path: impl AsRef<Path>, cfg: &crate::RocksConfig) -> Result<RocksEngine> {
        let store = RocksStore::open(path.as_ref(), cfg)?;
        let dir = Some(store.path().to_path_buf());
        store.engine(KeySpace::whole(), cfg.compaction_filter.clone(), dir)
    }

    /// The store this engine is a view of.
    pub fn store(&self) -> &RocksStore {
        &self.store
    }

    /// Where this engine's keys are in the store.
    pub fn space(&self) -> &KeySpace {
        &self.space
    }

    /// The store's database directory.
    pub fn path(&self) -> &Path {
        self.store.path()
    }

    fn db(&self) -> &DB {
        &self.store.inner.db
    }

    fn cf(&self, cf: Cf) -> &ColumnFamily {
        handle(self.db(), cf)
    }

    fn read_options(&self) -> ReadOptions {
        let mut ro = ReadOptions::default();
        ro.set_verify_checksums(self.store.inner.verify_checksums);
        ro
    }

    /// An integer RocksDB property summed over all column families (of the whole
    /// store: RocksDB keeps no per-range figures).
    pub fn property_sum(&self, name: &str) -> u64 {
        self.store.property_sum(name)
    }

    /// Finish an SST file of `cf` and move it into the store.
    fn ingest(&self, (cf, mut w, path): (Cf, rocksdb::SstFileWriter<'_>, PathBuf)) -> Result<()> {
        let done = w.finish().map_err(map_error).and_then(|()| {
            let mut o = rocksdb::IngestExternalFileOptions::default();
            o.set_move_files(true);
            self.db().ingest_external_file_cf_opts(self.cf(cf), &o, vec![&path]).map_err(map_error)
        });
        // Moved in (a hard link) or not taken: either way not needed here.
        let _ = std::fs::remove_file(&path);
        done
    }

    /// Approximate bytes of this engine's keys in the store's files (flushed data
    /// only), summed over the column families.
    fn approximate_bytes(&self) -> u64 {
        if self.space.prefix.iter().all(|p| p.is_empty()) {
            return self.store.property_sum("rocksdb.estimate-live-data-size");
        }
        Cf::ALL
            .iter()
            .map(|&cf| {
                let (lower, end) = self.space.db_bounds(cf);
                self.db().get_approximate_sizes_cf(self.cf(cf), &[rocksdb::Range::new(&lower, &end)]).first().copied().unwrap_or(0)
            })
            .sum()
    }
}

/// The most data [`KvEngine::approximate_middle_key`] reads when the files
/// cannot tell the middle.
const SCANNED_MIDDLE_LIMIT: usize = 16 << 20;

impl KvEngine for RocksEngine {
    type Snapshot<'a> = RocksSnapshot<'a>;
    type Batch = RocksBatch;

    fn snapshot(&self) -> RocksSnapshot<'_> {
        perf_counters_off();
        RocksSnapshot { engine: self, snap: self.db().snapshot() }
    }

    fn new_batch(&self) -> RocksBatch {
        RocksBatch { store: self.store.clone(), space: self.space.clone(), wb: rocksdb::WriteBatch::default(), key: Vec::new() }
    }

    fn write(&self, batch: RocksBatch, opts: pinax_engine::WriteOptions) -> Result<()> {
        if !Arc::ptr_eq(&batch.space, &self.space) || !Arc::ptr_eq(&batch.store.inner, &self.store.inner) {
            return Err(Error::Other(format!("write batch of another engine written to {self:?}")));
        }
        perf_counters_off();
        let mut wo = rocksdb::WriteOptions::default();
        let no_wal = self.store.inner.disable_wal || opts.skip_log;
        if no_wal {
            wo.disable_wal(true);
        } else {
            wo.set_sync(opts.sync);
        }
        self.db().write_opt(batch.wb, &wo).map_err(map_error)?;
        if no_wal && opts.sync {
            self.flush()?;
        }
        Ok(())
    }

    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        perf_counters_off();
        let i = cf.index();
        if !self.space.contains(i, key) {
            return Ok(None);
        }
        self.db().get_cf_opt(self.cf(cf), concat(&self.space.prefix[i], key), &self.read_options()).map_err(map_error)
    }

    /// Flushes the whole store (RocksDB flushes column families, not ranges).
    fn flush(&self) -> Result<()> {
        self.store.flush()
    }

    /// RocksDB compacts `[start, end]` (end inclusive): one key more than asked, which
    /// changes nothing visible. An engine of a shared store (a prefix of its own)
    /// has it done in the background, gathered with other engines' requests
    /// ([`RocksStore::compact_soon`]); a database of its own compacts at once.
    fn compact_range(&self, cf: Cf, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let i = cf.index();
        let (lower, upper) = self.space.db_range(cf);
        let start = match start {
            Some(s) => lower.clone().max(concat(&self.space.prefix[i], s)),
            None => lower,
        };
        let end = match (end.map(|e| concat(&self.space.prefix[i], e)), upper) {
            (Some(e), Some(u)) => Some(e.min(u)),
            (e, u) => e.or(u),
        };
        if self.space.prefix[i].is_empty() {
            self.db().compact_range_cf(self.cf(cf), Some(start), end);
        } else {
            let end = end.unwrap_or_else(|| past_every_key(&self.space.prefix[i]));
            self.store.compact_soon(cf, start, end);
        }
        Ok(())
    }

    /// The directory given when the engine was opened: the store's for a database
    /// of its own, the disk's scratch directory for an engine of a node's store.
    fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// A range deletion of the engine's keys in each of `cfs` (synced), then one
    /// SST file per column family, written under the engine's prefix in the scratch
    /// directory and ingested (moved in: no copy, no memtable, no WAL). An
    /// ingested file that overlaps the memtable's keys (the tombstones just
    /// written) makes RocksDB flush first; its entries get sequence numbers above
    /// the tombstones. A database of its own (no prefix to delete a range of)
    /// writes batches.
    fn replace_contents(&self, cfs: &[Cf], entries: &mut dyn Iterator<Item = Result<(Cf, Vec<u8>, Vec<u8>)>>) -> Result<()> {
        let Some(dir) = self.dir.clone().filter(|_| cfs.iter().all(|&cf| !self.space.prefix(cf).is_empty())) else {
            return pinax_engine::replace_by_batches(self, cfs, entries);
        };
        std::fs::create_dir_all(&dir).map_err(|e| Error::Io(format!("creating {}: {e}", dir.display())))?;
        let mut wb = rocksdb::WriteBatch::default();
        for &cf in cfs {
            let (lower, upper) = self.space.db_range(cf);
            let end = upper.unwrap_or_else(|| past_every_key(self.space.prefix(cf)));
            wb.delete_range_cf(self.cf(cf), lower, end);
        }
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(true);
        self.db().write_opt(wb, &wo).map_err(map_error)?;
        let opts = rocksdb::Options::default();
        let mut current: Option<(Cf, rocksdb::SstFileWriter<'_>, PathBuf)> = None;
        for entry in entries {
            let (cf, key, value) = entry?;
            let i = cf.index();
            if !cfs.contains(&cf) || !self.space.contains(i, &key) {
                return Err(Error::Other(format!("a key of {cf} outside what {self:?} replaces")));
            }
            if current.as_ref().map(|c| c.0) != Some(cf) {
                if let Some(done) = current.take() {
                    self.ingest(done)?;
                }
                let path = dir.join(format!("ingest-{}-{}.sst", std::process::id(), INGESTS.fetch_add(1, Ordering::Relaxed)));
                let w = rocksdb::SstFileWriter::create(&opts);
                w.open(&path).map_err(map_error)?;
                current = Some((cf, w, path));
            }
            if let Some((_, w, _)) = current.as_mut() {
                w.put(concat(&self.space.prefix[i], &key), &value).map_err(map_error)?;
            }
        }
        match current {
            Some(done) => self.ingest(done),
            None => Ok(()),
        }
    }

    /// A row key near the middle of this engine's rows by bytes on disk: where a
    /// tablet splits into two halves of about equal size without reading its rows.
    /// Bisects RocksDB's approximate sizes (flushed files of [`Cf::Regular`],
    /// index look-ups, no data read) between the engine's first and last keys,
    /// then takes the first key at or after the point found. `None` when the
    /// files hold nothing of the engine, or no key follows its first one.
    fn approximate_middle_key(&self) -> Option<Vec<u8>> {
        const CF: Cf = Cf::Regular;
        let prefix = self.space.prefix(CF);
        let snap = self.snapshot();
        let mut it = snap.iter(CF, IterOptions::default());
        it.seek_to_first();
        let first = it.valid().ok()?.then(|| it.key().to_vec())?;
        it.seek_to_last();
        let last = it.valid().ok()?.then(|| it.key().to_vec())?;
        // Up to the last key, not the interval's end: a file's index and filter
        // blocks sit past its last key and would count as the top's.
        let (lower, end) = (concat(prefix, &first), concat(prefix, &last));
        let size = |a: &[u8], b: &[u8]| self.db().get_approximate_sizes_cf(self.cf(CF), &[rocksdb::Range::new(a, b)]).first().copied().unwrap_or(0);
        let total = size(&lower, &end);
        if total == 0 {
            // Too little in the files to estimate (less than a block, or not
            // flushed): small enough to read.
            return pinax_engine::scan_middle_key(self, SCANNED_MIDDLE_LIMIT);
        }
        // Keys as numbers: the 8 bytes after the interval's common prefix.
        let common = lower.iter().zip(&end).take_while(|(a, b)| a == b).count();
        let number = |k: &[u8]| {
            let mut b = [0u8; 8];
            for (i, x) in k.iter().skip(common).take(8).enumerate() {
                b[i] = *x;
            }
            u64::from_be_bytes(b)
        };
        let key_at = |n: u64| concat(&lower[..common], &n.to_be_bytes());
        let (mut lo, mut hi) = (number(&lower), number(&end));
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if size(&lower, &key_at(mid)) * 2 < total {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let point = key_at(hi);
        let from = point.strip_prefix(prefix)?;
        it.seek(from);
        let found = it.valid().ok()?.then(|| it.key().to_vec())?;
        (found > first).then_some(found)
    }

    /// The store's (every engine of a store shares its flushes and compactions);
    /// the worst column family decides (RocksDB's triggers are per column family).
    fn write_pressure(&self) -> WritePressure {
        let reserve = self.store.inner.min_free_bytes;
        if reserve > 0 {
            let path = &self.store.inner.path;
            if let Some(p) = crate::free_bytes(path).and_then(|free| crate::space_pressure(path, free, reserve)) {
                return p;
            }
        }
        let (mut l0, mut pending, mut stopped) = (0, 0, false);
        for cf in Cf::ALL {
            l0 = l0.max(self.store.property(cf, "rocksdb.num-files-at-level0"));
            pending = pending.max(self.store.property(cf, "rocksdb.estimate-pending-compaction-bytes"));
            stopped |= self.store.property(cf, "rocksdb.is-write-stopped") != 0;
        }
        pressure_from(l0, pending, stopped)
    }

    /// `approximate_bytes` is this engine's; the other figures are the store's.
    fn stats(&self) -> EngineStats {
        EngineStats {
            approximate_bytes: self.approximate_bytes(),
            l0_files: self.store.property_sum("rocksdb.num-files-at-level0"),
            memtable_bytes: self.store.property_sum("rocksdb.cur-size-all-mem-tables"),
            pending_compaction_bytes: self.store.property_sum("rocksdb.estimate-pending-compaction-bytes"),
        }
    }
}

// ---------------------------------------------------------------------------
// snapshot and iterator

/// A RocksDB snapshot; released when dropped. Borrows the engine.
pub struct RocksSnapshot<'a> {
    engine: &'a RocksEngine,
    snap: SnapshotWithThreadMode<'a, DB>,
}

impl RocksSnapshot<'_> {
    /// RocksDB's sequence number of this snapshot.
    pub fn sequence_number(&self) -> u64 {
        self.snap.sequence_number()
    }
}

impl Snapshot for RocksSnapshot<'_> {
    type Iter<'b>
        = RocksIterator<'b>
    where
        Self: 'b;

    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let space = &self.engine.space;
        let i = cf.index();
        if !space.contains(i, key) {
            return Ok(None);
        }
        let ro = self.engine.read_options();
        if space.prefix[i].is_empty() {
            return self.snap.get_cf_opt(self.engine.cf(cf), key, ro).map_err(map_error);
        }
        self.snap.get_cf_opt(self.engine.cf(cf), concat(&space.prefix[i], key), ro).map_err(map_error)
    }

    fn iter(&self, cf: Cf, opts: IterOptions) -> RocksIterator<'_> {
        let space = &self.engine.space;
        let i = cf.index();
        let prefix = &space.prefix[i];
        let mut ro = self.engine.read_options();
        // The asked bounds within the space's, then in the store.
        let lower = match opts.lower {
            Some(l) if l > space.lower[i] => l,
            _ => space.lower[i].clone(),
        };
        let upper = min_upper(opts.upper, space.upper[i].clone());
        // lower > upper means empty: normalize to [lower, lower).
        let upper = match upper {
            Some(u) if u < lower => Some(lower.clone()),
            u => u,
        };
        let db_lower = concat(prefix, &lower);
        let db_upper = match &upper {
            Some(u) => Some(concat(prefix, u)),
            None => successor(prefix),
        };
        if !db_lower.is_empty() {
            ro.set_iterate_lower_bound(db_lower.clone());
        }
        if let Some(u) = &db_upper {
            ro.set_iterate_upper_bound(u.clone());
        }
        // Probes use the prefix extractors of Cf::Regular and Cf::Intents; every
        // other iterator is a plain ordered one (total order: no prefix bloom
        // filter may skip a file).
        if opts.prefix_same_as_start && matches!(cf, Cf::Regular | Cf::Intents) {
            ro.set_prefix_same_as_start(true);
        } else {
            ro.set_total_order_seek(true);
        }
        RocksIterator {
            raw: self.snap.raw_iterator_cf_opt(self.engine.cf(cf), ro),
            prefix_len: prefix.len(),
            prefix: prefix.clone(),
            lower: db_lower,
            upper: db_upper,
            target: Vec::new(),
        }
    }
}

/// A raw RocksDB iterator reading at its snapshot, with bounds pushed down to
/// RocksDB, handing out keys without the space's prefix.
pub struct RocksIterator<'a> {
    raw: DBRawIteratorWithThreadMode<'a, DB>,
    prefix_len: usize,
    prefix: Vec<u8>,
    /// Bounds in the store (prefixed).
    lower: Vec<u8>,
    upper: Option<Vec<u8>>,
    /// Scratch for a seek target in the store.
    target: Vec<u8>,
}

impl RocksIterator<'_> {
    /// `prefix ++ key` in the scratch buffer.
    fn target(&mut self, key: &[u8]) {
        self.target.clear();
        self.target.extend_from_slice(&self.prefix);
        self.target.extend_from_slice(key);
    }
}

impl KvIterator for RocksIterator<'_> {
    fn seek(&mut self, key: &[u8]) {
        self.target(key);
        if self.target < self.lower {
            self.raw.seek(&self.lower);
        } else {
            self.raw.seek(&self.target);
        }
    }

    fn seek_for_prev(&mut self, key: &[u8]) {
        self.target(key);
        match &self.upper {
            // The upper bound is exclusive: the last key below it.
            Some(u) if self.target >= *u => self.raw.seek_to_last(),
            _ => self.raw.seek_for_prev(&self.target),
        }
    }

    fn seek_to_first(&mut self) {
        self.raw.seek_to_first();
    }

    fn seek_to_last(&mut self) {
        self.raw.seek_to_last();
    }

    fn next(&mut self) {
        self.raw.next();
    }

    fn prev(&mut self) {
        self.raw.prev();
    }

    fn valid(&self) -> Result<bool> {
        if self.raw.valid() {
            return Ok(true);
        }
        self.raw.status().map_err(map_error)?;
        Ok(false)
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.raw.valid(), "key() on an invalid iterator");
        self.raw.key().map_or(&[], |k| &k[self.prefix_len..])
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.raw.valid(), "value() on an invalid iterator");
        self.raw.value().unwrap_or(&[])
    }
}

// ---------------------------------------------------------------------------
// write batch

/// A RocksDB write batch bound to the engine it was created for.
pub struct RocksBatch {
    store: RocksStore,
    space: Arc<KeySpace>,
    wb: rocksdb::WriteBatch,
    /// Scratch for a key in the store.
    key: Vec<u8>,
}

impl RocksBatch {
    /// `prefix ++ key` of `cf` in the scratch buffer.
    fn stored(&mut self, i: usize, key: &[u8]) {
        debug_assert!(self.space.contains(i, key), "a write outside the engine's key space: {key:?} in {:?}", self.space);
        self.key.clear();
        self.key.extend_from_slice(&self.space.prefix[i]);
        self.key.extend_from_slice(key);
    }
}

impl WriteBatch for RocksBatch {
    fn put(&mut self, cf: Cf, key: &[u8], value: &[u8]) {
        self.stored(cf.index(), key);
        self.wb.put_cf(handle(&self.store.inner.db, cf), &self.key, value);
    }

    fn delete(&mut self, cf: Cf, key: &[u8]) {
        self.stored(cf.index(), key);
        self.wb.delete_cf(handle(&self.store.inner.db, cf), &self.key);
    }

    /// Clamped to the engine's bounds.
    fn delete_range(&mut self, cf: Cf, start: &[u8], end: &[u8]) {
        let i = cf.index();
        let space = &self.space;
        let start = start.max(space.lower[i].as_slice());
        let end = match &space.upper[i] {
            Some(u) => end.min(u.as_slice()),
            None => end,
        };
        // An empty range is a no-op (RocksDB rejects start > end).
        if start < end {
            let (s, e) = (concat(&space.prefix[i], start), concat(&space.prefix[i], end));
            self.wb.delete_range_cf(handle(&self.store.inner.db, cf), s, e);
        }
    }

    fn count(&self) -> usize {
        self.wb.len()
    }

    fn data_size(&self) -> usize {
        self.wb.size_in_bytes()
    }

    fn clear(&mut self) {
        self.wb.clear();
    }
}
