//! [`RocksStore`]: one RocksDB database holding the data of many engines (tablets):
//! each engine is a [`RocksEngine`] view of it, its keys led by its own prefix (see
//! [`KeySpace`]). One store per data directory: its files, memtables, WAL, fsync
//! stream and background jobs serve every tablet on the disk, so a tablet costs a
//! few keys of metadata, not a database.
//!
//! Names: the store keeps a registry of named engines (the node's tablets) in
//! [`Cf::Meta`] under the reserved prefix `00 * 8` (no engine's prefix: engine ids
//! start at 1), `"n/" ++ name → be64(id)` and `"next" → be64(next id)`, written
//! synced. An engine's prefix is `be64(id)` in every column family; an id is never
//! given out twice, so the data of a destroyed engine that a background compaction
//! has not reclaimed yet can never show through a new one.
//!
//! Views: an engine registered with a [`KeySpace`] of its own (`"s/" ++ name →`
//! [`KeySpace::encode`]) may share a prefix with others in a column family, each
//! bounded to a key interval of it: the halves of a split tablet keep their
//! parent's rows where they are ([`KeySpace::split_at`]), written with their
//! registry entries in one [`StoreBatch`]. Destroying an engine deletes only the
//! keys no other registered engine sees ([`RocksStore::destroy`]): the last one
//! of a shared prefix deletes the whole prefix.

use crate::filter::{FilterDispatch, FilterRegistry};
use crate::view::{KeySpace, RocksEngine};
use crate::{cf_options, db_options, handle, map_error, RocksConfig};
use pinax_engine::{Cf, CompactionFilterFactory, Error, Result};
use rocksdb::{ColumnFamilyDescriptor, FlushOptions, DB};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

/// Prefix of the store's own records in [`Cf::Meta`].
const RESERVED: [u8; 8] = [0; 8];
const NAME_TAG: &[u8] = b"n/";
const NEXT_TAG: &[u8] = b"next";
const SPACE_TAG: &[u8] = b"s/";

/// The database and what every view of it shares.
pub(crate) struct StoreInner {
    pub(crate) db: DB,
    pub(crate) path: PathBuf,
    pub(crate) disable_wal: bool,
    pub(crate) verify_checksums: bool,
    /// `RocksConfig::min_free_bytes`.
    pub(crate) min_free_bytes: u64,
    pub(crate) filters: FilterRegistry,
    /// Serializes the registry's read-modify-writes (ids, names).
    names: Mutex<()>,
}

/// The store's background thread ("rocks-reclaim"), which gets work (ranges of
/// destroyed engines to reclaim, compactions engines asked for) on a channel
/// and holds only a `Weak` of the store, upgraded while it works. When the
/// store's last handle goes, the channel closes and the thread is joined:
/// work under way ends (and the database closes, if the thread held it last)
/// before that handle's drop returns. (Not joined, a compaction running while
/// the process exited aborted it in RocksDB's static destructors: "pthread
/// lock: Invalid argument" after a test had passed.)
struct Reclaimer {
    tx: Mutex<Option<mpsc::Sender<Work>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

/// One RocksDB database shared by many engines (cheap to clone).
#[derive(Clone)]
pub struct RocksStore {
    pub(crate) inner: Arc<StoreInner>,
    /// (After `inner`: dropped last, see [`Reclaimer`].)
    reclaimer: Arc<Reclaimer>,
}

impl fmt::Debug for RocksStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RocksStore").field("path", &self.inner.path).finish_non_exhaustive()
    }
}

impl RocksStore {
    /// Opens (creating if missing) the database at `path` with all column families.
    /// `cfg.compaction_filter` is ignored here: each engine brings its own
    /// ([`RocksStore::engine`]).
    pub fn open(path: impl AsRef<Path>, cfg: &RocksConfig) -> Result<RocksStore> {
        let path = path.as_ref().to_path_buf();
        std::fs::create_dir_all(&path).map_err(|e| Error::Io(format!("creating database directory {}: {e}", path.display())))?;
        let filters = FilterRegistry::default();
        let descriptors = Cf::ALL.map(|cf| {
            let mut o = cf_options(cfg, cf);
            if cf == Cf::Regular {
                o.set_compaction_filter_factory(FilterDispatch(filters.clone()));
            }
            ColumnFamilyDescriptor::new(cf.name(), o)
        });
        let mut opts = db_options(cfg);
        if !cfg.disable_wal {
            // Writes that skipped the WAL (`WriteOptions::skip_log`) are rebuilt
            // by their writer after a crash, and a close is no different: flushing
            // them made closing an engine take about a second (a dropped tablet's
            // too). (Not a setter of the Rust binding; the C++ options copy keeps
            // the shared write buffer manager.)
            opts = opts.get_options_from_string("avoid_flush_during_shutdown=true").map_err(map_error)?;
        }
        let db = DB::open_cf_descriptors(&opts, &path, descriptors).map_err(map_error)?;
        for cf in Cf::ALL {
            if db.cf_handle(cf.name()).is_none() {
                return Err(Error::Other(format!("column family {cf} missing after open of {}", path.display())));
            }
        }
        // Flushed blocks of rows and intents are read soon (see the crate docs).
        for cf in [Cf::Regular, Cf::Intents] {
            db.set_options_cf(handle(&db, cf), &[("block_based_table_factory", "{prepopulate_block_cache=kFlushOnly;}")]).map_err(map_error)?;
        }
        tracing::debug!(path = %path.display(), "opened rocksdb store");
        let inner = Arc::new(StoreInner {
            db,
            path,
            disable_wal: cfg.disable_wal,
            verify_checksums: cfg.verify_checksums,
            min_free_bytes: cfg.min_free_bytes,
            filters,
            names: Mutex::new(()),
        });
        let (tx, rx) = mpsc::channel();
        let weak = Arc::downgrade(&inner);
        let thread = std::thread::Builder::new()
            .name("rocks-reclaim".into())
            .spawn(move || reclaim_loop(weak, rx))
            .map_err(|e| Error::Other(format!("starting the reclaiming thread: {e}")))?;
        let reclaimer = Arc::new(Reclaimer { tx: Mutex::new(Some(tx)), thread: Mutex::new(Some(thread)) });
        Ok(RocksStore { inner, reclaimer })
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// A view of `space` (a [`RocksEngine`]); `gc` filters its [`Cf::Regular`]
    /// entries in compactions (while the view lives). `dir`: what the view reports
    /// as [`pinax_engine::KvEngine::dir`] (created if missing).
    pub fn engine(&self, space: KeySpace, gc: Option<Arc<dyn CompactionFilterFactory>>, dir: Option<PathBuf>) -> Result<RocksEngine> {
        if let Some(d) = &dir {
            std::fs::create_dir_all(d).map_err(|e| Error::Io(format!("creating {}: {e}", d.display())))?;
        }
        Ok(RocksEngine::new(self.clone(), space, gc, dir))
    }

    /// The id registered for `name`, if any.
    pub fn id_of(&self, name: &str) -> Result<Option<u64>> {
        let v = self.inner.db.get_cf(handle(&self.inner.db, Cf::Meta), name_key(name)).map_err(map_error)?;
        v.map(|b| decode_id(&b)).transpose()
    }

    /// The id of `name`, registering it (with a new id) if it is not yet.
    pub fn register(&self, name: &str) -> Result<u64> {
        let _g = self.inner.names.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = self.id_of(name)? {
            return Ok(id);
        }
        self.take_ids(1, Some(name))
    }

    /// Caller holds the registry's lock: give out `n` ids from the next one
    /// (the first returned), registering `name` with it if given, synced.
    fn take_ids(&self, n: u64, name: Option<&str>) -> Result<u64> {
        let meta = handle(&self.inner.db, Cf::Meta);
        let next_key = reserved_key(NEXT_TAG);
        let first = match self.inner.db.get_cf(meta, &next_key).map_err(map_error)? {
            Some(b) => decode_id(&b)?,
            None => 1,
        };
        let mut wb = rocksdb::WriteBatch::default();
        if let Some(name) = name {
            wb.put_cf(meta, name_key(name), first.to_be_bytes());
        }
        wb.put_cf(meta, &next_key, (first + n).to_be_bytes());
        self.write_synced(wb)?;
        Ok(first)
    }

    /// Every registered name with its id.
    pub fn names(&self) -> Result<Vec<(String, u64)>> {
        self.registry(NAME_TAG, decode_id)
    }

    /// Every registry entry under `tag` (`tag ++ name`), by name, its value
    /// decoded by `decode`.
    fn registry<T>(&self, tag: &[u8], decode: impl Fn(&[u8]) -> Result<T>) -> Result<Vec<(String, T)>> {
        let prefix = tagged_key(tag, "");
        let mut out = Vec::new();
        let it = self.inner.db.iterator_cf(handle(&self.inner.db, Cf::Meta), rocksdb::IteratorMode::From(&prefix, rocksdb::Direction::Forward));
        for kv in it {
            let (k, v) = kv.map_err(map_error)?;
            let Some(name) = k.strip_prefix(prefix.as_slice()) else { break };
            let name = String::from_utf8(name.to_vec()).map_err(|_| Error::Corruption(format!("engine name {name:?} in {}", self.inner.path.display())))?;
            out.push((name, decode(&v)?));
        }
        Ok(out)
    }

    /// The key space of the engine registered as `name`: its own
    /// ([`KeySpace::encode`]d in the registry) for a view, else
    /// [`KeySpace::of_id`] of its id; `None` if it is not registered.
    pub fn space_of(&self, name: &str) -> Result<Option<KeySpace>> {
        let meta = handle(&self.inner.db, Cf::Meta);
        if let Some(b) = self.inner.db.get_cf(meta, tagged_key(SPACE_TAG, name)).map_err(map_error)? {
            return KeySpace::decode(&b).map(Some);
        }
        Ok(self.id_of(name)?.map(KeySpace::of_id))
    }

    /// `n` new engine ids, never given out before nor after (written synced:
    /// ids taken and not used after a crash are skipped, never reused).
    pub fn new_ids(&self, n: u64) -> Result<Vec<u64>> {
        let _g = self.inner.names.lock().unwrap_or_else(|p| p.into_inner());
        let first = self.take_ids(n, None)?;
        Ok((first..first + n).collect())
    }

    /// An empty batch of writes to any engines' spaces and the registry, written
    /// at once by [`RocksStore::write`].
    pub fn batch(&self) -> StoreBatch {
        StoreBatch { db: self.inner.clone(), wb: rocksdb::WriteBatch::default() }
    }

    /// Write `batch` atomically and durably.
    pub fn write(&self, batch: StoreBatch) -> Result<()> {
        if !Arc::ptr_eq(&batch.db, &self.inner) {
            return Err(Error::Other(format!("a batch of another store written to {self:?}")));
        }
        self.write_synced(batch.wb)
    }

    /// Every engine registered with a key space of its own (a view), by name.
    pub fn views(&self) -> Result<Vec<(String, KeySpace)>> {
        self.registry(SPACE_TAG, KeySpace::decode)
    }

    /// Deletes the keys of `space` that no other registered engine sees and, in
    /// the same synced write, the name `name` (if given) and its key space. In a
    /// column family whose prefix the space shares with other engines' (halves of
    /// a split), only its keys outside theirs go, and the last engine of a prefix
    /// deletes the whole prefix; the others' keys are never touched, whichever
    /// goes first. The files the deleted keys occupy are reclaimed in the
    /// background (files wholly inside a prefix no engine holds any more are
    /// dropped, the rest compacted).
    pub fn destroy(&self, space: &KeySpace, name: Option<&str>) -> Result<()> {
        let _g = self.inner.names.lock().unwrap_or_else(|p| p.into_inner());
        let others = self.sharing(space, name)?;
        let mut wb = rocksdb::WriteBatch::default();
        let mut reclaim = Vec::new();
        for cf in Cf::ALL {
            let prefix = space.prefix(cf);
            let theirs: Vec<(Vec<u8>, Vec<u8>)> = others.iter().filter(|o| o.prefix(cf) == prefix).map(|o| o.db_bounds(cf)).collect();
            if theirs.is_empty() && !prefix.is_empty() {
                // The prefix's last engine: all of it (with its files).
                let whole = KeySpace::of_prefix(prefix);
                let (lower, end) = whole.db_bounds(cf);
                wb.delete_range_cf(handle(&self.inner.db, cf), &lower, &end);
                reclaim.push((cf, lower, end, whole.last_db_key_bound(cf)));
                continue;
            }
            // Shared (or the whole store: no prefix): no file to drop whole.
            for (from, to) in subtract(space.db_bounds(cf), theirs) {
                wb.delete_range_cf(handle(&self.inner.db, cf), &from, &to);
                reclaim.push((cf, from, to, None));
            }
        }
        if let Some(name) = name {
            wb.delete_cf(handle(&self.inner.db, Cf::Meta), name_key(name));
            wb.delete_cf(handle(&self.inner.db, Cf::Meta), tagged_key(SPACE_TAG, name));
        }
        self.write_synced(wb)?;
        self.background(Work::Reclaim(reclaim));
        Ok(())
    }

    /// The key spaces of the registered engines other than `name` that share a
    /// prefix with `space` in some column family.
    fn sharing(&self, space: &KeySpace, name: Option<&str>) -> Result<Vec<KeySpace>> {
        let views = self.views()?;
        let shares = |o: &KeySpace| Cf::ALL.iter().any(|&cf| !space.prefix(cf).is_empty() && o.prefix(cf) == space.prefix(cf));
        let mut out: Vec<KeySpace> = views.iter().filter(|(n, o)| Some(n.as_str()) != name && shares(o)).map(|(_, o)| o.clone()).collect();
        if views.is_empty() {
            return Ok(out);
        }
        // An engine of a prefix of its own shares it with the views on it.
        let prefixes: std::collections::HashSet<&[u8]> = Cf::ALL.iter().map(|&cf| space.prefix(cf)).filter(|p| p.len() == 8).collect();
        for (n, id) in self.names()? {
            if Some(n.as_str()) != name && prefixes.contains(id.to_be_bytes().as_slice()) && !views.iter().any(|(v, _)| *v == n) {
                out.push(KeySpace::of_id(id));
            }
        }
        Ok(out)
    }

    /// Compact `[lower, end]` of `cf` in the background, together with the other
    /// ranges asked for within [`COMPACTION_WINDOW`]: one engine's range shares its
    /// files (and, with atomic flushes, the memtable flush a manual compaction
    /// starts with) with every other engine's, so compacting each range as it is
    /// asked for rewrote the same files again and again (the seed workload's two
    /// inserts: 16 manual compactions of the intents, 905 MB written for 100 MB of
    /// rows).
    pub fn compact_soon(&self, cf: Cf, lower: Vec<u8>, end: Vec<u8>) {
        self.background(Work::Compact(cf, lower, end));
    }

    fn background(&self, work: Work) {
        if let Some(tx) = self.reclaimer.tx.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let _ = tx.send(work);
        }
    }

    /// Persists every memtable of every column family (all engines' applies).
    pub fn flush(&self) -> Result<()> {
        let cfs = Cf::ALL.map(|cf| handle(&self.inner.db, cf));
        self.inner.db.flush_cfs_opt(&cfs, &FlushOptions::default()).map_err(map_error)
    }

    /// An integer RocksDB property of one column family (absent = 0).
    pub fn property(&self, cf: Cf, name: &str) -> u64 {
        self.inner.db.property_int_value_cf(handle(&self.inner.db, cf), name).ok().flatten().unwrap_or(0)
    }

    /// An integer RocksDB property summed over all column families.
    pub fn property_sum(&self, name: &str) -> u64 {
        Cf::ALL.iter().map(|&cf| self.property(cf, name)).sum()
    }

    fn write_synced(&self, wb: rocksdb::WriteBatch) -> Result<()> {
        let mut wo = rocksdb::WriteOptions::default();
        if self.inner.disable_wal {
            self.inner.db.write_opt(wb, &wo).map_err(map_error)?;
            return self.flush();
        }
        wo.set_sync(true);
        self.inner.db.write_opt(wb, &wo).map_err(map_error)
    }
}

fn reserved_key(tag: &[u8]) -> Vec<u8> {
    let mut k = RESERVED.to_vec();
    k.extend_from_slice(tag);
    k
}

fn name_key(name: &str) -> Vec<u8> {
    tagged_key(NAME_TAG, name)
}

fn tagged_key(tag: &[u8], name: &str) -> Vec<u8> {
    let mut k = reserved_key(tag);
    k.extend_from_slice(name.as_bytes());
    k
}

/// `[from, to)` without the intervals `holes` (any order, may overlap or reach
/// outside it): what is left, in order.
fn subtract((from, to): (Vec<u8>, Vec<u8>), mut holes: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    holes.sort();
    let mut out = Vec::new();
    let mut at = from;
    for (lo, hi) in holes {
        if hi <= at || lo >= to {
            continue;
        }
        if lo > at {
            out.push((at.clone(), lo.clone()));
        }
        if hi > at {
            at = hi;
        }
        if at >= to {
            return out;
        }
    }
    if at < to {
        out.push((at, to));
    }
    out
}

/// Writes to several engines' spaces of one store and its registry, written
/// atomically by [`RocksStore::write`] (a split: the halves' registry entries,
/// their metadata and intents, the parent's record of the split).
pub struct StoreBatch {
    db: Arc<StoreInner>,
    wb: rocksdb::WriteBatch,
}

impl StoreBatch {
    /// Put `key` (of `space`'s keys in `cf`, which must hold it) to `value`.
    pub fn put(&mut self, space: &KeySpace, cf: Cf, key: &[u8], value: &[u8]) -> Result<()> {
        if !space.contains(cf.index(), key) {
            return Err(Error::Other(format!("key {key:02x?} of {cf} outside {space:?}")));
        }
        let mut k = space.prefix(cf).to_vec();
        k.extend_from_slice(key);
        self.wb.put_cf(handle(&self.db.db, cf), k, value);
        Ok(())
    }

    /// Register engine `name` with id `id` (from [`RocksStore::new_ids`]) and
    /// key space `space` (recorded when it is not [`KeySpace::of_id`]`(id)`).
    /// The caller makes sure `name` is not registered already.
    pub fn register(&mut self, name: &str, id: u64, space: &KeySpace) {
        let meta = handle(&self.db.db, Cf::Meta);
        self.wb.put_cf(meta, name_key(name), id.to_be_bytes());
        if space.own_id() != Some(id) {
            self.wb.put_cf(meta, tagged_key(SPACE_TAG, name), space.encode());
        }
    }

    /// How many writes the batch holds.
    pub fn len(&self) -> usize {
        self.wb.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.wb.is_empty()
    }
}

fn decode_id(b: &[u8]) -> Result<u64> {
    let a: [u8; 8] = b.try_into().map_err(|_| Error::Corruption(format!("engine id of {} bytes", b.len())))?;
    Ok(u64::from_be_bytes(a))
}

/// Ranges of a destroyed engine to reclaim: column family, first key, end
/// (exclusive), and where the space's prefix is its own, a key at or past its last
/// one that no other engine can hold ([`KeySpace::last_db_key_bound`]).
type Reclaim = Vec<(Cf, Vec<u8>, Vec<u8>, Option<Vec<u8>>)>;

/// Work of the store's background thread.
enum Work {
    Reclaim(Reclaim),
    /// Column family, first key, last key (inclusive).
    Compact(Cf, Vec<u8>, Vec<u8>),
}

/// How long compaction requests are gathered before the union of their ranges is
/// compacted once.
pub(crate) const COMPACTION_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

/// Reclaims the files of destroyed engines' ranges: drops the SST files wholly
/// inside them, then compacts what is left of them (the deleted keys' tombstone
/// and the files that straddle a bound). Ends when the store is dropped.
fn reclaim_loop(store: std::sync::Weak<StoreInner>, rx: mpsc::Receiver<Work>) {
    while let Ok(first) = rx.recv() {
        // Gather what comes within the window: every range to compact is then
        // compacted once, as part of one range per column family.
        let mut compact: std::collections::BTreeMap<usize, (Cf, Vec<u8>, Vec<u8>)> = std::collections::BTreeMap::new();
        let mut drop_files: Vec<(Cf, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut gather = |w: Work| {
            let mut add = |cf: Cf, lower: Vec<u8>, end: Vec<u8>| {
                let e = compact.entry(cf.index()).or_insert_with(|| (cf, lower.clone(), end.clone()));
                if lower < e.1 {
                    e.1 = lower;
                }
                if end > e.2 {
                    e.2 = end;
                }
            };
            match w {
                Work::Reclaim(ranges) => {
                    for (cf, lower, end, last) in ranges {
                        if let Some(last) = last {
                            drop_files.push((cf, lower.clone(), last));
                        }
                        add(cf, lower, end);
                    }
                }
                Work::Compact(cf, lower, end) => add(cf, lower, end),
            }
        };
        gather(first);
        let until = std::time::Instant::now() + COMPACTION_WINDOW;
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(w) => gather(w),
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
        let Some(inner) = store.upgrade() else { return };
        // Files wholly inside a destroyed engine's ranges go first (no rewrite);
        // RocksDB's C API drops files up to and including `last`: a bound no other
        // engine's key can equal.
        for (cf, lower, last) in coalesce(drop_files) {
            if let Err(e) = inner.db.delete_file_in_range_cf(handle(&inner.db, cf), &lower, &last) {
                tracing::warn!(error = %e, path = %inner.path.display(), "dropping files of a destroyed engine");
            }
        }
        for (_, (cf, lower, end)) in compact {
            // A range no file holds is only in the memtables, where its tombstones
            // drop what they cover when the memtable is flushed. Compacting it would
            // only flush the memtables early (every column family: atomic flushes)
            // and write a large transaction's resolved intents to a file and read
            // them back (the seed workload's inserts: two 53 MB intent files per 1M
            // rows, then a compaction of them to nothing). The files are listed
            // afresh for each column family: the compaction of the one before may
            // have flushed tombstones of this one into a file.
            match inner.db.live_files() {
                Ok(files) if !files_overlap(&files, cf, &lower, &end) => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, path = %inner.path.display(), "listing the store's files"),
            }
            // The bottom level's files in the range are compacted too: a file of
            // tombstones moved down whole (nothing under it to merge with) would
            // otherwise stay there until a "BottommostFiles" compaction, which the
            // column families put off (`BOTTOMMOST_DELAY`).
            let mut opts = rocksdb::CompactOptions::default();
            opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
            inner.db.compact_range_cf_opt(handle(&inner.db, cf), Some(&lower), Some(&end), &opts);
        }
    }
}

/// Ranges of destroyed engines to drop files in, with those of consecutive
/// engine ids (in the same column family: no live engine's keys lie between
/// them) joined: a table's tablets are engines with consecutive ids, and the
/// files of a store's bottom level (64 MiB) mostly straddle two of them, so file
/// by file few were wholly inside one tablet's range and the rest were compacted
/// (the seed workload's DROP TABLE: 0.7-0.8 s of compaction) where the joined
/// range holds them whole. Input: column family, first key (an engine's prefix),
/// last-key bound; output: column family, first key, last-key bound.
fn coalesce(mut ranges: Vec<(Cf, Vec<u8>, Vec<u8>)>) -> Vec<(Cf, Vec<u8>, Vec<u8>)> {
    ranges.sort_by(|a, b| (a.0.index(), &a.1).cmp(&(b.0.index(), &b.1)));
    let next_id = |prefix: &[u8]| -> Option<Vec<u8>> {
        let id = u64::from_be_bytes(prefix.try_into().ok()?);
        Some(id.checked_add(1)?.to_be_bytes().to_vec())
    };
    struct Joined {
        cf: Cf,
        first: Vec<u8>,
        /// The prefix of the last range joined.
        newest: Vec<u8>,
        last: Vec<u8>,
    }
    let mut out: Vec<Joined> = Vec::new();
    for (cf, lower, last) in ranges {
        match out.last_mut() {
            Some(prev) if prev.cf == cf && next_id(&prev.newest).as_deref() == Some(lower.as_slice()) => {
                prev.newest = lower;
                prev.last = last;
            }
            _ => out.push(Joined { cf, first: lower.clone(), newest: lower, last }),
        }
    }
    out.into_iter().map(|j| (j.cf, j.first, j.last)).collect()
}

#[cfg(test)]
#[test]
fn ranges_of_consecutive_engines_are_joined() {
    let p = |id: u64| id.to_be_bytes().to_vec();
    let bound = |id: u64| crate::view::past_every_key(&p(id));
    let got = coalesce(vec![
        (Cf::Regular, p(3), bound(3)),
        (Cf::Intents, p(2), bound(2)),
        (Cf::Regular, p(2), bound(2)),
        (Cf::Regular, p(5), bound(5)),
        (Cf::Intents, p(3), bound(3)),
        (Cf::Regular, p(4), bound(4)),
        (Cf::Regular, p(7), bound(7)),
    ]);
    assert_eq!(got, vec![(Cf::Regular, p(2), bound(5)), (Cf::Regular, p(7), bound(7)), (Cf::Intents, p(2), bound(3))]);
}

/// Whether an SST file of `cf` holds a key of `[lower, last]`.
fn files_overlap(files: &[rocksdb::LiveFile], cf: Cf, lower: &[u8], last: &[u8]) -> bool {
    files
        .iter()
        .any(|f| f.column_family_name == cf.name() && f.start_key.as_deref().is_none_or(|s| s <= last) && f.end_key.as_deref().is_none_or(|e| e >= lower))
}
