//! Opening one engine per tablet: a view of its disk's shared store.

use parking_lot::Mutex;
use pinax_engine::{CompactionFilterFactory, KvEngine};
use pinax_engine_mem::MemEngine;
use pinax_engine_rocks::{KeySpace, RocksConfig, RocksEngine, RocksStore, SharedResources};
use pinax_raft::shared_log::{self, SharedLog};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub trait EngineFactory: Send + Sync + 'static {
    type Engine: KvEngine;
    /// Open (creating if missing) the engine called `name`.
    fn open(&self, name: &str, gc: Option<Arc<dyn CompactionFilterFactory>>) -> pinax_engine::Result<Self::Engine>;
    /// Delete the engine's data for good (it must be closed).
    fn destroy(&self, name: &str) -> pinax_engine::Result<()>;
    /// Names of every engine that exists.
    fn list(&self) -> pinax_engine::Result<Vec<String>>;
    /// Make the two halves of engine `parent` (open or not) split at stored
    /// regular key `at` (the escaped split key: every stored version of a
    /// smaller key sorts below it, of the key and greater ones at or above it):
    /// `halves` are the halves' names with the entries to give each (their
    /// intents and metadata, [`pinax_engine::Cf::Regular`] excluded: the halves
    /// see the parent's rows of their interval, copied by nothing), and
    /// `parent_writes` are written to the parent with them, atomically and
    /// durably (its applied Raft id). The halves live where the parent does. A
    /// half that exists already (an earlier apply, or a replica made fresh) is
    /// left as it is.
    fn split_engines(&self, parent: &str, at: &[u8], halves: [(&str, &[CfEntry]); 2], parent_writes: &[CfEntry]) -> pinax_engine::Result<()>;
    /// Open the shared Raft log of every directory (once; later calls return the
    /// same logs). None for engines that keep their group's log themselves (in
    /// `Cf::Log`: the in-memory engines of tests).
    fn raft_logs(&self) -> pinax_engine::Result<Vec<Arc<SharedLog>>>;
    /// The shared Raft log of the directory engine `name` (opened) is in; None:
    /// the engine keeps its group's log itself.
    fn raft_log(&self, name: &str) -> pinax_engine::Result<Option<Arc<SharedLog>>>;
}

/// One entry to write: column family, key, value.
pub type CfEntry = (pinax_engine::Cf, Vec<u8>, Vec<u8>);

/// Tablet engines in one RocksDB store per directory (one per disk), all stores
/// sharing a block cache and memtable budget: an engine is a view of its store
/// ([`pinax_engine_rocks::RocksEngine`], keys under a prefix of its own), so opening
/// a new one writes a name into the store's registry, and destroying one deletes
/// its key ranges. The store of a directory is `<dir>/rocksdb`, opened when the
/// directory first holds an engine; `<dir>/scratch` holds engines' owners'
/// temporary files (Raft snapshots being sent and received; emptied when the store
/// opens).
///
/// An engine lives in exactly one of the directories: an existing one is opened
/// where it is; a new one goes to the directory holding the fewest engines (the
/// first of those on a tie), so tablets spread evenly over the disks.
pub struct RocksFactory {
    roots: Vec<PathBuf>,
    shared: SharedResources,
    disable_wal: bool,
    /// RocksDB's table cache of each store (files kept open).
    max_open_files: i32,
    /// Free space each store's disk keeps in reserve (`RocksConfig::min_free_bytes`).
    min_free_bytes: u64,
    /// Stores opened so far, by root; which root and id each name has.
    state: Mutex<FactoryState>,
    /// Each directory's shared Raft log (`<dir>/raft-log`), in the order of `roots`, once opened.
    logs: Mutex<Option<Vec<Arc<SharedLog>>>>,
}

#[derive(Default)]
struct FactoryState {
    stores: HashMap<usize, RocksStore>,
    names: HashMap<String, usize>,
    counts: Vec<usize>,
    opened: bool,
}

/// The store's directory under a data directory.
const STORE_DIR: &str = "rocksdb";
/// Temporary files of the engines' owners under a data directory.
const SCRATCH_DIR: &str = "scratch";

impl RocksFactory {
    pub fn new(root: PathBuf, shared: SharedResources) -> Self {
        Self::with_roots(vec![root], shared)
    }

    /// Engines spread over `roots` (at least one).
    pub fn with_roots(roots: Vec<PathBuf>, shared: SharedResources) -> Self {
        assert!(!roots.is_empty(), "invariant: a RocksFactory has a directory");
        let counts = vec![0; roots.len()];
        let max_open_files = RocksConfig::with_shared(shared.clone()).max_open_files;
        RocksFactory {
            roots,
            shared,
            disable_wal: false,
            max_open_files,
            min_free_bytes: 0,
            state: Mutex::new(FactoryState { counts, ..Default::default() }),
            logs: Mutex::new(None),
        }
    }

    /// Each store keeps at most `n` files open (part of the node's descriptor budget).
    pub fn with_max_open_files(mut self, n: i32) -> Self {
        self.max_open_files = n;
        self
    }

    /// Client writes are refused while a store's disk has less than `bytes` free
    /// (0: never).
    pub fn with_min_free_bytes(mut self, bytes: u64) -> Self {
        self.min_free_bytes = bytes;
        self
    }

    /// How many data directories (stores) engines spread over.
    pub fn roots(&self) -> usize {
        self.roots.len()
    }

    fn config(&self) -> RocksConfig {
        RocksConfig {
            disable_wal: self.disable_wal,
            max_open_files: self.max_open_files,
            min_free_bytes: self.min_free_bytes,
            ..RocksConfig::with_shared(self.shared.clone())
        }
    }

    /// Opens the stores that exist (once), learning every engine's name; refuses a
    /// directory of the earlier layout (a RocksDB database per tablet).
    fn load(&self, st: &mut FactoryState) -> pinax_engine::Result<()> {
        if st.opened {
            return Ok(());
        }
        for (i, root) in self.roots.iter().enumerate() {
            if let Some(old) = earlier_layout(root)? {
                return Err(pinax_engine::Error::Other(format!(
                    "{} holds a tablet database of an earlier Pinax ({}): this version keeps all tablets of a directory in one \
                     RocksDB store ({}/{STORE_DIR}) and cannot read it; remove the data directory and start again",
                    root.display(),
                    old.display(),
                    root.display()
                )));
            }
            if root.join(STORE_DIR).is_dir() {
                let store = RocksStore::open(root.join(STORE_DIR), &self.config())?;
                for (name, _) in store.names()? {
                    st.names.insert(name, i);
                    st.counts[i] += 1;
                }
                st.stores.insert(i, store);
            }
        }
        st.opened = true;
        Ok(())
    }

    fn store(&self, st: &mut FactoryState, i: usize) -> pinax_engine::Result<RocksStore> {
        if let Some(s) = st.stores.get(&i) {
            return Ok(s.clone());
        }
        let s = RocksStore::open(self.roots[i].join(STORE_DIR), &self.config())?;
        // Left by snapshots cut short (a crash): nobody uses them now.
        let scratch = self.roots[i].join(SCRATCH_DIR);
        if scratch.exists() {
            std::fs::remove_dir_all(&scratch).map_err(|e| pinax_engine::Error::Io(format!("emptying {}: {e}", scratch.display())))?;
        }
        st.stores.insert(i, s.clone());
        Ok(s)
    }

    /// Engines per directory (directory, names), in the order given.
    pub fn placement(&self) -> pinax_engine::Result<Vec<(PathBuf, Vec<String>)>> {
        let mut st = self.state.lock();
        self.load(&mut st)?;
        Ok(self
            .roots
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut names: Vec<String> = st.names.iter().filter(|(_, &at)| at == i).map(|(n, _)| n.clone()).collect();
                names.sort();
                (r.clone(), names)
            })
            .collect())
    }
}

/// A database directory of the layout before shared stores (`<root>/tablet-N/CURRENT`).
fn earlier_layout(root: &Path) -> pinax_engine::Result<Option<PathBuf>> {
    let rd = match std::fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(pinax_engine::Error::Io(format!("listing {}: {e}", root.display()))),
    };
    Ok(rd.flatten().map(|e| e.path()).find(|p| p.file_name().is_some_and(|n| n != STORE_DIR) && p.join("CURRENT").is_file()))
}

impl EngineFactory for RocksFactory {
    type Engine = RocksEngine;
    fn open(&self, name: &str, gc: Option<Arc<dyn CompactionFilterFactory>>) -> pinax_engine::Result<RocksEngine> {
        let mut st = self.state.lock();
        self.load(&mut st)?;
        let (i, new) = match st.names.get(name) {
            Some(&i) => (i, false),
            // The directory with the fewest engines (the first on a tie).
            None => ((0..self.roots.len()).min_by_key(|&i| (st.counts[i], i)).unwrap_or(0), true),
        };
        let store = self.store(&mut st, i)?;
        let id = store.register(name)?;
        if new {
            st.names.insert(name.to_string(), i);
            st.counts[i] += 1;
        }
        // (A split tablet's half has a space of its own in the registry.)
        let space = store.space_of(name)?.unwrap_or_else(|| KeySpace::of_id(id));
        store.engine(space, gc, Some(self.roots[i].join(SCRATCH_DIR)))
    }
    fn destroy(&self, name: &str) -> pinax_engine::Result<()> {
        let mut st = self.state.lock();
        self.load(&mut st)?;
        let Some(i) = st.names.get(name).copied() else { return Ok(()) };
        let store = self.store(&mut st, i)?;
        if let Some(space) = store.space_of(name)? {
            store.destroy(&space, Some(name))?;
        }
        st.names.remove(name);
        st.counts[i] -= 1;
        Ok(())
    }
    fn list(&self) -> pinax_engine::Result<Vec<String>> {
        let mut st = self.state.lock();
        self.load(&mut st)?;
        Ok(st.names.keys().cloned().collect())
    }
    /// The halves are views of the parent's store ([`KeySpace::split_at`]): their
    /// registry entries, entries and the parent's writes go in one synced write.
    fn split_engines(&self, parent: &str, at: &[u8], halves: [(&str, &[CfEntry]); 2], parent_writes: &[CfEntry]) -> pinax_engine::Result<()> {
        let mut st = self.state.lock();
        self.load(&mut st)?;
        let i = *st.names.get(parent).ok_or_else(|| pinax_engine::Error::Other(format!("splitting engine {parent}, which does not exist")))?;
        let store = self.store(&mut st, i)?;
        let parent_space = store.space_of(parent)?.ok_or_else(|| pinax_engine::Error::Other(format!("engine {parent} is not registered")))?;
        // (Two new ids even when a half exists: an unused id costs nothing.)
        let ids = store.new_ids(2)?;
        let (left, right) = parent_space.split_at(pinax_engine::Cf::Regular, at, ids[0], ids[1])?;
        let new: Vec<(&str, &[CfEntry], KeySpace, u64)> = halves
            .into_iter()
            .zip([left, right])
            .zip(ids)
            .filter(|(((name, _), _), _)| !st.names.contains_key(*name))
            .map(|(((name, entries), space), id)| (name, entries, space, id))
            .collect();
        let mut batch = store.batch();
        for (name, entries, space, id) in &new {
            batch.register(name, *id, space);
            for (cf, k, v) in entries.iter() {
                batch.put(space, *cf, k, v)?;
            }
        }
        for (cf, k, v) in parent_writes {
            batch.put(&parent_space, *cf, k, v)?;
        }
        store.write(batch)?;
        for (name, ..) in new {
            st.names.insert(name.to_string(), i);
            st.counts[i] += 1;
        }
        Ok(())
    }
    fn raft_logs(&self) -> pinax_engine::Result<Vec<Arc<SharedLog>>> {
        let mut logs = self.logs.lock();
        if let Some(l) = &*logs {
            return Ok(l.clone());
        }
        let mut opened = Vec::with_capacity(self.roots.len());
        for root in &self.roots {
            let dir = root.join(shared_log::DIR);
            // The log's share of a small disk is bounded by its size.
            let opts = pinax_engine_rocks::disk_bytes(root).map(shared_log::LogOptions::for_disk).unwrap_or_default();
            opened.push(SharedLog::open_with(&dir, opts).map_err(|e| pinax_engine::Error::Io(e.to_string()))?);
        }
        *logs = Some(opened.clone());
        Ok(opened)
    }
    fn raft_log(&self, name: &str) -> pinax_engine::Result<Option<Arc<SharedLog>>> {
        let logs = self.raft_logs()?;
        let mut st = self.state.lock();
        self.load(&mut st)?;
        Ok(st.names.get(name).and_then(|&i| logs.get(i).cloned()))
    }
}

/// In-memory engines that survive "reopen" within one process: for tests.
#[derive(Default, Clone)]
pub struct MemFactory {
    engines: Arc<Mutex<HashMap<String, MemEngine>>>,
}

impl MemFactory {
    /// Make every write of every engine opened so far fail with an I/O error
    /// saying `why`, until called with `None` (tests of storage errors).
    pub fn fail_writes(&self, why: Option<&str>) {
        for e in self.engines.lock().values() {
            e.fail_writes(why);
        }
    }
}

impl EngineFactory for MemFactory {
    type Engine = MemEngine;
    fn open(&self, name: &str, gc: Option<Arc<dyn CompactionFilterFactory>>) -> pinax_engine::Result<MemEngine> {
        let mut g = self.engines.lock();
        Ok(g.entry(name.to_string())
            .or_insert_with(|| match gc {
                Some(f) => MemEngine::with_compaction_filter(f),
                None => MemEngine::new(),
            })
            .clone())
    }
    fn destroy(&self, name: &str) -> pinax_engine::Result<()> {
        self.engines.lock().remove(name);
        Ok(())
    }
    fn list(&self) -> pinax_engine::Result<Vec<String>> {
        Ok(self.engines.lock().keys().cloned().collect())
    }
    /// The halves are new engines given copies of the parent's rows of their
    /// interval (in memory nothing is shared).
    fn split_engines(&self, parent: &str, at: &[u8], halves: [(&str, &[CfEntry]); 2], parent_writes: &[CfEntry]) -> pinax_engine::Result<()> {
        use pinax_engine::{Cf, IterOptions, KvIterator, Snapshot, WriteBatch, WriteOptions};
        let mut g = self.engines.lock();
        let p = g.get(parent).cloned().ok_or_else(|| pinax_engine::Error::Other(format!("splitting engine {parent}, which does not exist")))?;
        let snap = p.snapshot();
        for (i, (name, entries)) in halves.iter().enumerate() {
            if g.contains_key(*name) {
                continue;
            }
            let e = MemEngine::new();
            let mut b = e.new_batch();
            let mut it = snap.iter(Cf::Regular, IterOptions::default());
            it.seek_to_first();
            while it.valid()? {
                if (it.key() < at) == (i == 0) {
                    b.put(Cf::Regular, it.key(), it.value());
                }
                it.next();
            }
            for (cf, k, v) in entries.iter() {
                b.put(*cf, k, v);
            }
            e.write(b, WriteOptions { sync: true, ..Default::default() })?;
            g.insert(name.to_string(), e);
        }
        let mut b = p.new_batch();
        for (cf, k, v) in parent_writes {
            b.put(*cf, k, v);
        }
        p.write(b, WriteOptions { sync: true, ..Default::default() })
    }
    fn raft_logs(&self) -> pinax_engine::Result<Vec<Arc<SharedLog>>> {
        Ok(Vec::new())
    }
    fn raft_log(&self, _name: &str) -> pinax_engine::Result<Option<Arc<SharedLog>>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[String]) -> Vec<&str> {
        let mut v: Vec<&str> = v.iter().map(|s| s.as_str()).collect();
        v.sort();
        v
    }

    #[test]
    fn engines_spread_evenly_over_directories_and_are_found_again() {
        let tmp = tempfile::tempdir().unwrap();
        let roots: Vec<PathBuf> = (0..3).map(|i| tmp.path().join(format!("disk{i}"))).collect();
        let shared = SharedResources::new(8 << 20, 8 << 20);
        let f = RocksFactory::with_roots(roots.clone(), shared.clone());
        let engines: Vec<_> = (0..7).map(|i| f.open(&format!("tablet-{i}"), None).unwrap()).collect();
        let counts: Vec<usize> = f.placement().unwrap().iter().map(|(_, n)| n.len()).collect();
        assert_eq!(counts, vec![3, 2, 2], "new engines go to the emptiest directory, the first on a tie");
        drop(engines);
        drop(f);
        // Reopened by another factory over the same directories (a restart):
        // each engine is opened where it is, not created again elsewhere.
        let f = RocksFactory::with_roots(roots.clone(), shared.clone());
        let before = f.placement().unwrap();
        for i in 0..7 {
            drop(f.open(&format!("tablet-{i}"), None).unwrap());
        }
        assert_eq!(f.placement().unwrap(), before);
        assert_eq!(names(&f.list().unwrap()).len(), 7);
        drop(f);
        // A disk added later takes the next new engines.
        let mut more = roots.clone();
        more.push(tmp.path().join("disk3"));
        let f = RocksFactory::with_roots(more, shared);
        drop(f.open("tablet-7", None).unwrap());
        drop(f.open("tablet-8", None).unwrap());
        let counts: Vec<usize> = f.placement().unwrap().iter().map(|(_, n)| n.len()).collect();
        assert_eq!(counts, vec![3, 2, 2, 2]);
        f.destroy("tablet-0").unwrap();
        assert!(!names(&f.list().unwrap()).contains(&"tablet-0"));
        assert_eq!(f.placement().unwrap()[0].1.len(), 2);
    }

    fn put(e: &RocksEngine, k: &[u8], v: &[u8]) {
        use pinax_engine::WriteBatch;
        let mut b = e.new_batch();
        for cf in pinax_engine::Cf::ALL {
            b.put(cf, k, v);
        }
        e.write(b, pinax_engine::WriteOptions { sync: true, ..Default::default() }).unwrap();
    }

    fn keys(e: &RocksEngine, cf: pinax_engine::Cf) -> Vec<Vec<u8>> {
        use pinax_engine::{KvIterator, Snapshot};
        let snap = e.snapshot();
        let mut it = snap.iter(cf, Default::default());
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid().unwrap() {
            out.push(it.key().to_vec());
            it.next();
        }
        out
    }

    /// Engines of one store see only their own keys, keep them across a restart,
    /// and a destroyed engine's name opens empty (a new id: its old keys, deleted,
    /// cannot show through).
    #[test]
    fn engines_of_one_store_are_apart_and_destroy_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let shared = SharedResources::new(8 << 20, 8 << 20);
        let f = RocksFactory::new(tmp.path().join("data"), shared.clone());
        let (a, b) = (f.open("tablet-1", None).unwrap(), f.open("tablet-2", None).unwrap());
        put(&a, b"k", b"a");
        put(&a, b"z", b"a");
        put(&b, b"k", b"b");
        for cf in pinax_engine::Cf::ALL {
            assert_eq!(keys(&a, cf), vec![b"k".to_vec(), b"z".to_vec()]);
            assert_eq!(keys(&b, cf), vec![b"k".to_vec()]);
            assert_eq!(b.get(cf, b"z").unwrap(), None);
            assert_eq!(b.get(cf, b"k").unwrap().as_deref(), Some(&b"b"[..]));
        }
        assert_eq!(a.dir(), Some(tmp.path().join("data/scratch").as_path()), "the directory's scratch space");
        assert!(tmp.path().join("data/scratch").is_dir());
        drop((a, b));
        drop(f);
        let f = RocksFactory::new(tmp.path().join("data"), shared.clone());
        let a = f.open("tablet-1", None).unwrap();
        assert_eq!(a.get(pinax_engine::Cf::Meta, b"z").unwrap().as_deref(), Some(&b"a"[..]), "kept across a restart");
        drop(a);
        f.destroy("tablet-1").unwrap();
        let a = f.open("tablet-1", None).unwrap();
        for cf in pinax_engine::Cf::ALL {
            assert!(keys(&a, cf).is_empty(), "a destroyed engine's name opens empty");
        }
        let b = f.open("tablet-2", None).unwrap();
        assert_eq!(keys(&b, pinax_engine::Cf::Regular), vec![b"k".to_vec()], "another engine's keys stay");
    }

    /// Split halves made by the factory: in the parent's directory, each seeing
    /// the parent's rows of its interval and its own entries, found again by a
    /// new factory, kept when the parent is destroyed; made once (a second call
    /// writes only the parent's entries). The in-memory factory does the same.
    #[test]
    fn split_halves_live_with_their_parent() {
        use pinax_engine::Cf;
        let tmp = tempfile::tempdir().unwrap();
        let roots: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("disk{i}"))).collect();
        let shared = SharedResources::new(8 << 20, 8 << 20);
        let f = RocksFactory::with_roots(roots.clone(), shared.clone());
        let parent = f.open("tablet-1", None).unwrap();
        drop(f.open("tablet-2", None).unwrap());
        for k in [&b"a"[..], b"b", b"m", b"z"] {
            put(&parent, k, b"p");
        }
        let left_entries = vec![(Cf::Intents, b"left".to_vec(), b"l".to_vec())];
        let right_entries = vec![(Cf::Meta, b"right".to_vec(), b"r".to_vec())];
        let applied = vec![(Cf::Meta, b"applied".to_vec(), b"split".to_vec())];
        f.split_engines("tablet-1", b"m", [("tablet-3", &left_entries), ("tablet-4", &right_entries)], &applied).unwrap();
        let placement = f.placement().unwrap();
        assert_eq!(placement[0].1, vec!["tablet-1", "tablet-3", "tablet-4"], "{placement:?}");
        let (l, r) = (f.open("tablet-3", None).unwrap(), f.open("tablet-4", None).unwrap());
        assert_eq!(keys(&l, Cf::Regular), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(keys(&r, Cf::Regular), vec![b"m".to_vec(), b"z".to_vec()]);
        assert_eq!(keys(&l, Cf::Intents), vec![b"left".to_vec()]);
        assert_eq!(keys(&r, Cf::Meta), vec![b"right".to_vec()]);
        assert_eq!(parent.get(Cf::Meta, b"applied").unwrap().as_deref(), Some(&b"split"[..]));
        // Again (a replayed apply): the halves are left as they are.
        put(&l, b"c", b"l");
        let other = vec![(Cf::Intents, b"other".to_vec(), Vec::new())];
        f.split_engines("tablet-1", b"m", [("tablet-3", &other), ("tablet-4", &other)], &applied).unwrap();
        assert_eq!(keys(&l, Cf::Intents), vec![b"c".to_vec(), b"left".to_vec()]);
        drop((l, r, parent));
        drop(f);
        let f = RocksFactory::with_roots(roots, shared);
        assert_eq!(names(&f.list().unwrap()), vec!["tablet-1", "tablet-2", "tablet-3", "tablet-4"]);
        f.destroy("tablet-1").unwrap();
        let (l, r) = (f.open("tablet-3", None).unwrap(), f.open("tablet-4", None).unwrap());
        assert_eq!(keys(&l, Cf::Regular), vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()], "the parent's rows outlive it");
        assert_eq!(keys(&r, Cf::Regular), vec![b"m".to_vec(), b"z".to_vec()]);
        assert!(f.split_engines("tablet-9", b"m", [("x", &[]), ("y", &[])], &[]).is_err(), "no such parent");

        let m = MemFactory::default();
        let p = m.open("p", None).unwrap();
        for k in [&b"a"[..], b"m", b"z"] {
            let mut b = p.new_batch();
            pinax_engine::WriteBatch::put(&mut b, Cf::Regular, k, b"v");
            p.write(b, Default::default()).unwrap();
        }
        m.split_engines("p", b"m", [("l", &left_entries), ("r", &right_entries)], &applied).unwrap();
        let (ml, mr) = (m.open("l", None).unwrap(), m.open("r", None).unwrap());
        assert_eq!(ml.get(Cf::Regular, b"a").unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(ml.get(Cf::Regular, b"m").unwrap(), None);
        assert_eq!(mr.get(Cf::Regular, b"z").unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(ml.get(Cf::Intents, b"left").unwrap().as_deref(), Some(&b"l"[..]));
        assert_eq!(p.get(Cf::Meta, b"applied").unwrap().as_deref(), Some(&b"split"[..]));
    }

    #[test]
    fn a_directory_of_the_earlier_layout_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join("data/tablet-3");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("CURRENT"), b"MANIFEST-000001\n").unwrap();
        let f = RocksFactory::new(tmp.path().join("data"), SharedResources::new(8 << 20, 8 << 20));
        let err = f.open("tablet-1", None).unwrap_err().to_string();
        assert!(err.contains("earlier Pinax") && err.contains("tablet-3"), "{err}");
    }

    #[test]
    fn each_directory_has_one_shared_raft_log_which_is_no_engine() {
        let tmp = tempfile::tempdir().unwrap();
        let roots: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("disk{i}"))).collect();
        let shared = SharedResources::new(8 << 20, 8 << 20);
        let f = RocksFactory::with_roots(roots.clone(), shared.clone());
        let engines: Vec<_> = (0..3).map(|i| f.open(&format!("tablet-{i}"), None).unwrap()).collect();
        let logs = f.raft_logs().unwrap();
        assert_eq!(logs.iter().map(|l| l.dir().to_path_buf()).collect::<Vec<_>>(), roots.iter().map(|r| r.join("raft-log")).collect::<Vec<_>>());
        assert!(Arc::ptr_eq(&f.raft_logs().unwrap()[1], &logs[1]), "opened once");
        assert!(Arc::ptr_eq(&f.raft_log("tablet-1").unwrap().unwrap(), &logs[1]), "the log of the engine's directory");
        assert!(Arc::ptr_eq(&f.raft_log("tablet-2").unwrap().unwrap(), &logs[0]));
        assert_eq!(names(&f.list().unwrap()), vec!["tablet-0", "tablet-1", "tablet-2"], "the logs' directories are no engines");
        drop((engines, logs, f));
        assert!(MemFactory::default().raft_log("tablet-1").unwrap().is_none());
    }
}
