//! pinax-engine-mem: [`MemEngine`], the in-memory [`KvEngine`] used as a test double.
//!
//! Purpose: let every layer above the storage engine (MVCC, transactions, tablets) run
//! its tests fast and without RocksDB, with exactly the semantics the conformance suite
//! (`pinax_engine::conformance`, feature `conformance`) pins down for every engine.
//!
//! Design: one `BTreeMap` per column family holding *versions*:
//! `(key, Reverse(seq)) → Option<value>` (`None` = deletion marker). Every written batch
//! gets the next sequence number and is applied under one write lock, so it is atomic.
//! A snapshot is just `(Arc<shared state>, seq)`: it sees, for each key, the newest
//! version with a sequence number `<= seq`. Snapshots are therefore O(1) to take and
//! `'static` (they do not borrow the engine). Iterators hold no lock between calls; each
//! step re-seeks by key under a read lock (O(log n) per distinct key visited).
//!
//! Invariants:
//! - keys compare as unsigned bytes (that is `Vec<u8>`'s `Ord`);
//! - a version with sequence `s` is only removed once no live snapshot and not the latest
//!   state can see it (see [`KvEngine::compact_range`] below), so snapshots never change;
//! - `delete_range` is applied eagerly (a deletion marker per live key in range) at the
//!   batch's sequence number, so later operations of the same batch can re-create keys.
//!
//! Durability: none; `sync` and `flush` are accepted and do nothing. Clones of a
//! [`MemEngine`] share the same data (like reopening the same directory), which lets
//! tests model a restart that lost nothing.
//!
//! Compaction filter: [`MemEngine::with_compaction_filter`] installs a
//! [`CompactionFilterFactory`] for [`Cf::Regular`]; `compact_range` on that CF offers the
//! newest value of each key in range to a filter created with `bottommost = true`, and a
//! rejected value is replaced by a deletion marker (as RocksDB does). Like RocksDB, the
//! filter does not respect snapshots: data a snapshot sees may be filtered away.
//!
//! Must not depend on: any other storage engine, or any crate above `pinax-engine`.

use parking_lot::{Mutex, RwLock};
use pinax_engine::{Cf, CompactionFilterFactory, EngineStats, IterOptions, KvEngine, KvIterator, Result, Snapshot, WriteBatch, WriteOptions, WritePressure};
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::Arc;

/// `(user key, Reverse(sequence))`: all versions of a key are adjacent, newest first.
type VersionKey = (Vec<u8>, Reverse<u64>);
/// `None` is a deletion marker.
type Versions = BTreeMap<VersionKey, Option<Vec<u8>>>;

struct State {
    cfs: [Versions; Cf::ALL.len()],
    /// Sequence number of the last applied batch (0 = nothing written yet).
    seq: u64,
}

struct Shared {
    state: RwLock<State>,
    /// Live snapshots: sequence number → how many snapshots hold it. Registered while
    /// the state read lock is held, so a compaction (write lock) never misses one.
    snapshots: Mutex<BTreeMap<u64, usize>>,
    compaction_filter: Option<Arc<dyn CompactionFilterFactory>>,
    /// What `write_pressure` answers (an in-memory store has no background work;
    /// tests of backpressure set it).
    pressure: Mutex<WritePressure>,
    /// Set: every write fails with this I/O error (tests of storage errors).
    failing: Mutex<Option<String>>,
}

/// The in-memory engine. Cheap to clone; clones share the same data.
#[derive(Clone)]
pub struct MemEngine {
    shared: Arc<Shared>,
}

impl Default for MemEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MemEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state.read();
        f.debug_struct("MemEngine").field("seq", &state.seq).finish_non_exhaustive()
    }
}

impl MemEngine {
    /// An empty engine with all column families.
    pub fn new() -> Self {
        Self::build(None)
    }

    /// An empty engine whose `compact_range(Cf::Regular, ..)` runs `factory`'s filters.
    pub fn with_compaction_filter(factory: Arc<dyn CompactionFilterFactory>) -> Self {
        Self::build(Some(factory))
    }

    fn build(compaction_filter: Option<Arc<dyn CompactionFilterFactory>>) -> Self {
        MemEngine {
            shared: Arc::new(Shared {
                state: RwLock::new(State { cfs: Default::default(), seq: 0 }),
                snapshots: Mutex::new(BTreeMap::new()),
                compaction_filter,
                pressure: Mutex::new(WritePressure::None),
                failing: Mutex::new(None),
            }),
        }
    }

    /// Make `write_pressure` answer `p` (tests of backpressure).
    pub fn set_write_pressure(&self, p: WritePressure) {
        *self.shared.pressure.lock() = p;
    }

    /// Make every write fail with an I/O error saying `why` until called with
    /// `None` (tests of what a storage error does to the layers above).
    pub fn fail_writes(&self, why: Option<&str>) {
        *self.shared.failing.lock() = why.map(str::to_string);
    }

    /// Number of stored versions (live values, old versions, deletion markers) in `cf`;
    /// for tests of garbage collection.
    pub fn version_count(&self, cf: Cf) -> usize {
        self.shared.state.read().cfs[cf.index()].len()
    }
}

/// The value of `key` visible at `seq`: `None` if no version, `Some(None)` if deleted.
fn visible<'m>(map: &'m Versions, key: &[u8], seq: u64) -> Option<&'m Option<Vec<u8>>> {
    map.range((key.to_vec(), Reverse(seq))..=(key.to_vec(), Reverse(0))).next().map(|(_, v)| v)
}

/// The smallest version key of `key` (its newest possible version).
fn first_version(key: &[u8]) -> VersionKey {
    (key.to_vec(), Reverse(u64::MAX))
}

/// The largest version key of `key` (its oldest possible version).
fn last_version(key: &[u8]) -> VersionKey {
    (key.to_vec(), Reverse(0))
}

/// The first key `>= from` (or `> from`) with a live value at `seq`, below `upper`.
fn live_forward(map: &Versions, seq: u64, from: Bound<&[u8]>, upper: Option<&[u8]>) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut from: Bound<VersionKey> = match from {
        Included(k) => Included(first_version(k)),
        Excluded(k) => Excluded(last_version(k)),
        Unbounded => Unbounded,
    };
    loop {
        let ((k, _), _) = map.range((from, Unbounded)).next()?;
        if upper.is_some_and(|u| k.as_slice() >= u) {
            return None;
        }
        if let Some(Some(v)) = visible(map, k, seq) {
            return Some((k.clone(), v.clone()));
        }
        from = Excluded(last_version(k));
    }
}

/// The last key `<= to` (or `< to`) with a live value at `seq`, at or above `lower`.
fn live_backward(map: &Versions, seq: u64, to: Bound<&[u8]>, lower: Option<&[u8]>) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut to: Bound<VersionKey> = match to {
        Included(k) => Included(last_version(k)),
        Excluded(k) => Excluded(first_version(k)),
        Unbounded => Unbounded,
    };
    loop {
        let ((k, _), _) = map.range((Unbounded, to)).next_back()?;
        if lower.is_some_and(|l| k.as_slice() < l) {
            return None;
        }
        if let Some(Some(v)) = visible(map, k, seq) {
            return Some((k.clone(), v.clone()));
        }
        to = Excluded(first_version(k));
    }
}

/// Distinct keys in `[start, end)` (with any version), in order.
fn keys_in_range(map: &Versions, start: Option<&[u8]>, end: Option<&[u8]>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut from: Bound<VersionKey> = match start {
        Some(s) => Included(first_version(s)),
        None => Unbounded,
    };
    while let Some(((k, _), _)) = map.range((from, Unbounded)).next() {
        if end.is_some_and(|e| k.as_slice() >= e) {
            break;
        }
        out.push(k.clone());
        from = Excluded(last_version(k));
    }
    out
}

// ---------------------------------------------------------------------------
// snapshot

/// A point-in-time view; does not borrow the engine and holds no lock.
pub struct MemSnapshot {
    shared: Arc<Shared>,
    seq: u64,
}

impl MemSnapshot {
    /// The sequence number this snapshot reads at.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

impl Drop for MemSnapshot {
    fn drop(&mut self) {
        let mut snaps = self.shared.snapshots.lock();
        if let Some(n) = snaps.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                snaps.remove(&self.seq);
            }
        }
    }
}

impl Snapshot for MemSnapshot {
    type Iter<'a> = MemIterator<'a>;

    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let state = self.shared.state.read();
        Ok(visible(&state.cfs[cf.index()], key, self.seq).cloned().flatten())
    }

    fn iter(&self, cf: Cf, opts: IterOptions) -> MemIterator<'_> {
        MemIterator { snap: self, cf, lower: opts.lower, upper: opts.upper, cur: None }
    }
}

/// Iterator over one CF of a [`MemSnapshot`]; holds a copy of the current entry.
pub struct MemIterator<'a> {
    snap: &'a MemSnapshot,
    cf: Cf,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    cur: Option<(Vec<u8>, Vec<u8>)>,
}

impl MemIterator<'_> {
    fn forward(&mut self, from: Bound<&[u8]>) {
        let state = self.snap.shared.state.read();
        let map = &state.cfs[self.cf.index()];
        self.cur = live_forward(map, self.snap.seq, from, self.upper.as_deref());
    }

    fn backward(&mut self, to: Bound<&[u8]>) {
        let state = self.snap.shared.state.read();
        let map = &state.cfs[self.cf.index()];
        self.cur = live_backward(map, self.snap.seq, to, self.lower.as_deref());
    }
}

impl KvIterator for MemIterator<'_> {
    fn seek(&mut self, key: &[u8]) {
        let target = match &self.lower {
            Some(l) if key < l.as_slice() => l.clone(),
            _ => key.to_vec(),
        };
        self.forward(Included(&target));
    }

    fn seek_for_prev(&mut self, key: &[u8]) {
        match self.upper.clone() {
            Some(u) if key >= u.as_slice() => self.backward(Excluded(&u)),
            _ => self.backward(Included(key)),
        }
    }

    fn seek_to_first(&mut self) {
        let lower = self.lower.clone();
        match lower {
            Some(l) => self.forward(Included(&l)),
            None => self.forward(Unbounded),
        }
    }

    fn seek_to_last(&mut self) {
        let upper = self.upper.clone();
        match upper {
            Some(u) => self.backward(Excluded(&u)),
            None => self.backward(Unbounded),
        }
    }

    fn next(&mut self) {
        if let Some((k, _)) = self.cur.take() {
            self.forward(Excluded(&k));
        }
    }

    fn prev(&mut self) {
        if let Some((k, _)) = self.cur.take() {
            self.backward(Excluded(&k));
        }
    }

    fn valid(&self) -> Result<bool> {
        Ok(self.cur.is_some())
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.cur.is_some(), "key() on an invalid iterator");
        self.cur.as_ref().map_or(&[], |(k, _)| k.as_slice())
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.cur.is_some(), "value() on an invalid iterator");
        self.cur.as_ref().map_or(&[], |(_, v)| v.as_slice())
    }
}

// ---------------------------------------------------------------------------
// batch

enum Op {
    Put(Cf, Vec<u8>, Vec<u8>),
    Delete(Cf, Vec<u8>),
    DeleteRange(Cf, Vec<u8>, Vec<u8>),
}

/// A list of operations, applied in order at one sequence number.
#[derive(Default)]
pub struct MemBatch {
    ops: Vec<Op>,
    bytes: usize,
}

/// Per-operation overhead counted by `data_size` (tag, CF, lengths), roughly RocksDB's.
const OP_OVERHEAD: usize = 8;

impl WriteBatch for MemBatch {
    fn put(&mut self, cf: Cf, key: &[u8], value: &[u8]) {
        self.bytes += OP_OVERHEAD + key.len() + value.len();
        self.ops.push(Op::Put(cf, key.to_vec(), value.to_vec()));
    }

    fn delete(&mut self, cf: Cf, key: &[u8]) {
        self.bytes += OP_OVERHEAD + key.len();
        self.ops.push(Op::Delete(cf, key.to_vec()));
    }

    fn delete_range(&mut self, cf: Cf, start: &[u8], end: &[u8]) {
        self.bytes += OP_OVERHEAD + start.len() + end.len();
        self.ops.push(Op::DeleteRange(cf, start.to_vec(), end.to_vec()));
    }

    fn count(&self) -> usize {
        self.ops.len()
    }

    fn data_size(&self) -> usize {
        // Like RocksDB, an empty batch has a small header.
        12 + self.bytes
    }

    fn clear(&mut self) {
        self.ops.clear();
        self.bytes = 0;
    }
}

// ---------------------------------------------------------------------------
// engine

impl KvEngine for MemEngine {
    type Snapshot<'a> = MemSnapshot;
    type Batch = MemBatch;

    fn snapshot(&self) -> MemSnapshot {
        let state = self.shared.state.read();
        let seq = state.seq;
        *self.shared.snapshots.lock().entry(seq).or_insert(0) += 1;
        drop(state);
        MemSnapshot { shared: self.shared.clone(), seq }
    }

    fn new_batch(&self) -> MemBatch {
        MemBatch::default()
    }

    fn write(&self, batch: MemBatch, _opts: WriteOptions) -> Result<()> {
        if let Some(why) = self.shared.failing.lock().as_ref() {
            return Err(pinax_engine::Error::Io(why.clone()));
        }
        if batch.ops.is_empty() {
            return Ok(());
        }
        let mut state = self.shared.state.write();
        let seq = state.seq + 1;
        for op in batch.ops {
            match op {
                Op::Put(cf, k, v) => {
                    state.cfs[cf.index()].insert((k, Reverse(seq)), Some(v));
                }
                Op::Delete(cf, k) => {
                    state.cfs[cf.index()].insert((k, Reverse(seq)), None);
                }
                Op::DeleteRange(cf, start, end) => {
                    if start >= end {
                        continue;
                    }
                    let map = &mut state.cfs[cf.index()];
                    for k in keys_in_range(map, Some(&start), Some(&end)) {
                        if matches!(visible(map, &k, seq), Some(Some(_))) {
                            map.insert((k, Reverse(seq)), None);
                        }
                    }
                }
            }
        }
        state.seq = seq;
        Ok(())
    }

    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let state = self.shared.state.read();
        Ok(visible(&state.cfs[cf.index()], key, state.seq).cloned().flatten())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    /// Runs the compaction filter (Regular CF, if installed), then drops every version in
    /// `[start, end)` that neither the latest state nor any live snapshot can see, and
    /// deletion markers with nothing older left to hide.
    fn compact_range(&self, cf: Cf, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let mut state = self.shared.state.write();
        let latest = state.seq;
        // Read points that must keep seeing what they see now (ascending, deduplicated).
        let mut read_points: Vec<u64> = self.shared.snapshots.lock().keys().copied().collect();
        read_points.push(latest);
        let map = &mut state.cfs[cf.index()];
        let keys = keys_in_range(map, start, end);

        if cf == Cf::Regular {
            if let Some(factory) = &self.shared.compaction_filter {
                let mut filter = factory.create(true);
                for k in &keys {
                    let newest = map.range(first_version(k)..=last_version(k)).next();
                    if let Some(((_, Reverse(s)), Some(v))) = newest {
                        if !filter.keep(k, v) {
                            let s = *s;
                            map.insert((k.clone(), Reverse(s)), None);
                        }
                    }
                }
            }
        }

        for k in keys {
            // Versions newest first.
            let versions: Vec<(u64, bool)> = map.range(first_version(&k)..=last_version(&k)).map(|((_, Reverse(s)), v)| (*s, v.is_some())).collect();
            let mut keep = vec![false; versions.len()];
            for (i, &(s, _)) in versions.iter().enumerate() {
                // Version i is seen by read points in [s, newer version's seq).
                let newer = if i == 0 { u64::MAX } else { versions[i - 1].0 };
                keep[i] = read_points.iter().any(|&p| p >= s && p < newer);
            }
            // Oldest kept deletion markers hide nothing: drop them.
            for i in (0..versions.len()).rev() {
                if !keep[i] {
                    continue;
                }
                if versions[i].1 {
                    break;
                }
                keep[i] = false;
            }
            for (i, &(s, _)) in versions.iter().enumerate() {
                if !keep[i] {
                    map.remove(&(k.clone(), Reverse(s)));
                }
            }
        }
        Ok(())
    }

    fn write_pressure(&self) -> WritePressure {
        self.shared.pressure.lock().clone()
    }

    fn stats(&self) -> EngineStats {
        let state = self.shared.state.read();
        let bytes: usize = state.cfs.iter().flat_map(|m| m.iter()).map(|((k, _), v)| k.len() + 8 + v.as_ref().map_or(0, Vec::len)).sum();
        EngineStats { approximate_bytes: bytes as u64, l0_files: 0, memtable_bytes: bytes as u64, pending_compaction_bytes: 0 }
    }
}

#[cfg(test)]
mod conformance {
    pinax_engine::conformance_tests!(crate::MemEngine::new);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_engine::CompactionFilter;

    fn put(e: &MemEngine, cf: Cf, k: &[u8], v: &[u8]) {
        let mut b = e.new_batch();
        b.put(cf, k, v);
        e.write(b, WriteOptions::default()).unwrap();
    }

    fn del(e: &MemEngine, cf: Cf, k: &[u8]) {
        let mut b = e.new_batch();
        b.delete(cf, k);
        e.write(b, WriteOptions::default()).unwrap();
    }

    #[test]
    fn compaction_drops_invisible_versions_only() {
        let e = MemEngine::new();
        for i in 0..5u8 {
            put(&e, Cf::Regular, b"k", &[i]);
        }
        assert_eq!(e.version_count(Cf::Regular), 5);
        let s = e.snapshot(); // sees version 4
        put(&e, Cf::Regular, b"k", b"new");
        del(&e, Cf::Regular, b"gone");
        e.compact_range(Cf::Regular, None, None).unwrap();
        // "k": the snapshot's version and the latest; "gone": marker hiding nothing.
        assert_eq!(e.version_count(Cf::Regular), 2);
        assert_eq!(s.get(Cf::Regular, b"k").unwrap(), Some(vec![4]));
        drop(s);
        e.compact_range(Cf::Regular, None, None).unwrap();
        assert_eq!(e.version_count(Cf::Regular), 1);
        del(&e, Cf::Regular, b"k");
        e.compact_range(Cf::Regular, None, None).unwrap();
        assert_eq!(e.version_count(Cf::Regular), 0);
    }

    #[test]
    fn compaction_respects_range() {
        let e = MemEngine::new();
        put(&e, Cf::Meta, b"a", b"1");
        put(&e, Cf::Meta, b"a", b"2");
        put(&e, Cf::Meta, b"b", b"1");
        put(&e, Cf::Meta, b"b", b"2");
        e.compact_range(Cf::Meta, Some(b"b"), None).unwrap();
        assert_eq!(e.version_count(Cf::Meta), 3);
        e.compact_range(Cf::Regular, None, None).unwrap();
        assert_eq!(e.version_count(Cf::Meta), 3);
    }

    struct DropPrefix(&'static [u8]);
    struct DropPrefixFilter(&'static [u8]);
    impl CompactionFilterFactory for DropPrefix {
        fn create(&self, bottommost: bool) -> Box<dyn CompactionFilter> {
            assert!(bottommost);
            Box::new(DropPrefixFilter(self.0))
        }
    }
    impl CompactionFilter for DropPrefixFilter {
        fn keep(&mut self, key: &[u8], _value: &[u8]) -> bool {
            !key.starts_with(self.0)
        }
    }

    #[test]
    fn compaction_filter_runs_on_regular_only() {
        let e = MemEngine::with_compaction_filter(Arc::new(DropPrefix(b"gc/")));
        for cf in Cf::ALL {
            put(&e, cf, b"gc/1", b"x");
            put(&e, cf, b"keep", b"x");
        }
        for cf in Cf::ALL {
            e.compact_range(cf, None, None).unwrap();
        }
        assert_eq!(e.get(Cf::Regular, b"gc/1").unwrap(), None);
        assert_eq!(e.get(Cf::Regular, b"keep").unwrap(), Some(b"x".to_vec()));
        assert_eq!(e.get(Cf::Intents, b"gc/1").unwrap(), Some(b"x".to_vec()));
        assert_eq!(e.version_count(Cf::Regular), 1);
    }

    #[test]
    fn snapshots_are_static_and_clones_share_data() {
        let e = MemEngine::new();
        put(&e, Cf::Regular, b"k", b"v");
        let s: MemSnapshot = e.snapshot();
        let e2 = e.clone();
        drop(e);
        assert_eq!(e2.get(Cf::Regular, b"k").unwrap(), Some(b"v".to_vec()));
        std::thread::spawn(move || assert_eq!(s.get(Cf::Regular, b"k").unwrap(), Some(b"v".to_vec()))).join().unwrap();
    }

    /// The in-memory engine's middle key (the trait's default, by bytes read):
    /// half the rows below it; none with fewer than two keys.
    #[test]
    fn the_middle_key_halves_the_rows() {
        let e = MemEngine::new();
        assert_eq!(e.approximate_middle_key(), None);
        let mut b = e.new_batch();
        b.put(Cf::Regular, b"only", b"v");
        e.write(b, WriteOptions::default()).unwrap();
        assert_eq!(e.approximate_middle_key(), None, "one key cannot be split");
        let mut b = e.new_batch();
        for i in 0..1000u32 {
            b.put(Cf::Regular, format!("k{i:05}").as_bytes(), b"value");
        }
        e.write(b, WriteOptions::default()).unwrap();
        let mid = e.approximate_middle_key().unwrap();
        let below = (0..1000u32).filter(|i| format!("k{i:05}").into_bytes() < mid).count();
        assert!((490..=510).contains(&below), "{below} of 1000 below {mid:?}");
    }
}
