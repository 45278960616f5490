//! Opening one engine per tablet, and the shared Raft log of each data directory.

use parking_lot::Mutex;
use pinax_engine::{CompactionFilterFactory, KvEngine};
use pinax_engine_mem::MemEngine;
use pinax_engine_rocks::{RocksConfig, RocksEngine, SharedResources};
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
    /// Open the shared Raft log of every directory (once; later calls return the
    /// same logs). None for engines that keep their group's log themselves (in
    /// `Cf::Log`: the in-memory engines of tests).
    fn raft_logs(&self) -> pinax_engine::Result<Vec<Arc<SharedLog>>>;
    /// The shared Raft log of the directory engine `name` (opened) is in; None:
    /// the engine keeps its group's log itself.
    fn raft_log(&self, name: &str) -> pinax_engine::Result<Option<Arc<SharedLog>>>;
}

/// RocksDB engines under one or more directories (one per disk), sharing a block
/// cache and memtable budget, and one shared Raft log per directory
/// (`<directory>/raft-log`, [`SharedLog`]) for the groups of the engines there.
///
/// An engine lives in exactly one of the directories: an existing one is opened
/// where it is; a new one goes to the directory holding the fewest engines (the
/// first of those on a tie), so tablets spread evenly over the disks.
pub struct RocksFactory {
    roots: Vec<PathBuf>,
    shared: SharedResources,
    disable_wal: bool,
    /// Held while choosing a directory for a new engine.
    placing: Mutex<()>,
    /// Each directory's shared Raft log, in the order of `roots`, once opened.
    logs: Mutex<Option<Vec<Arc<SharedLog>>>>,
}

impl RocksFactory {
    pub fn new(root: PathBuf, shared: SharedResources) -> Self {
        Self::with_roots(vec![root], shared)
    }

    /// Engines spread over `roots` (at least one).
    pub fn with_roots(roots: Vec<PathBuf>, shared: SharedResources) -> Self {
        assert!(!roots.is_empty(), "invariant: a RocksFactory has a directory");
        RocksFactory { roots, shared, disable_wal: false, placing: Mutex::new(()), logs: Mutex::new(None) }
    }

    /// Names of the engines in `root` (the shared Raft log's directory is none).
    fn engines_in(root: &Path) -> pinax_engine::Result<Vec<String>> {
        let rd = match std::fs::read_dir(root) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(pinax_engine::Error::Io(format!("listing {}: {e}", root.display()))),
        };
        Ok(rd.flatten().filter(|e| e.path().is_dir() && e.file_name() != shared_log::DIR).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
    }

    /// Refuse a directory written before the shared Raft log: its engines kept
    /// their groups' logs in directories of their own (`<engine>/raft-log`).
    fn refuse_per_engine_logs(root: &Path) -> pinax_engine::Result<()> {
        for name in Self::engines_in(root)? {
            let old = root.join(&name).join(shared_log::DIR);
            if old.is_dir() {
                return Err(pinax_engine::Error::Other(format!(
                    "{} holds a Raft log of one tablet, written by an earlier version of Pinax; this version keeps one Raft log per data directory and cannot open this one (no converter exists): move it away and start with an empty data directory",
                    old.display()
                )));
            }
        }
        Ok(())
    }

    /// Where engine `name` is, or goes: its directory if it exists, else the
    /// directory with the fewest engines.
    fn path_of(&self, name: &str) -> pinax_engine::Result<PathBuf> {
        if let Some(p) = self.roots.iter().map(|r| r.join(name)).find(|p| p.is_dir()) {
            return Ok(p);
        }
        let mut least: Option<(usize, &PathBuf)> = None;
        for root in &self.roots {
            let n = Self::engines_in(root)?.len();
            if least.is_none_or(|(m, _)| n < m) {
                least = Some((n, root));
            }
        }
        let (_, root) = least.unwrap_or_else(|| unreachable!("a RocksFactory has a directory"));
        Ok(root.join(name))
    }

    /// Engines per directory (directory, names), in the order given.
    pub fn placement(&self) -> pinax_engine::Result<Vec<(PathBuf, Vec<String>)>> {
        self.roots.iter().map(|r| Ok((r.clone(), Self::engines_in(r)?))).collect()
    }
}

impl EngineFactory for RocksFactory {
    type Engine = RocksEngine;
    fn open(&self, name: &str, gc: Option<Arc<dyn CompactionFilterFactory>>) -> pinax_engine::Result<RocksEngine> {
        let cfg = RocksConfig { compaction_filter: gc, disable_wal: self.disable_wal, ..RocksConfig::with_shared(self.shared.clone()) };
        let _placing = self.placing.lock();
        RocksEngine::open(self.path_of(name)?, &cfg)
    }
    fn destroy(&self, name: &str) -> pinax_engine::Result<()> {
        for root in &self.roots {
            let p = root.join(name);
            if p.exists() {
                std::fs::remove_dir_all(&p).map_err(|e| pinax_engine::Error::Io(format!("removing {}: {e}", p.display())))?;
            }
        }
        Ok(())
    }
    fn list(&self) -> pinax_engine::Result<Vec<String>> {
        let mut out = Vec::new();
        for root in &self.roots {
            for name in Self::engines_in(root)? {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        Ok(out)
    }
    fn raft_logs(&self) -> pinax_engine::Result<Vec<Arc<SharedLog>>> {
        let mut logs = self.logs.lock();
        if let Some(l) = &*logs {
            return Ok(l.clone());
        }
        for root in &self.roots {
            Self::refuse_per_engine_logs(root)?;
        }
        let mut opened = Vec::with_capacity(self.roots.len());
        for root in &self.roots {
            let dir = root.join(shared_log::DIR);
            opened.push(SharedLog::open(&dir).map_err(|e| pinax_engine::Error::Io(e.to_string()))?);
        }
        *logs = Some(opened.clone());
        Ok(opened)
    }
    fn raft_log(&self, name: &str) -> pinax_engine::Result<Option<Arc<SharedLog>>> {
        let logs = self.raft_logs()?;
        let at = self.roots.iter().position(|r| r.join(name).is_dir());
        let at = at.ok_or_else(|| pinax_engine::Error::Other(format!("engine {name} is in none of the data directories")))?;
        Ok(logs.get(at).cloned())
    }
}

/// In-memory engines that survive "reopen" within one process: for tests.
#[derive(Default, Clone)]
pub struct MemFactory {
    engines: Arc<Mutex<HashMap<String, MemEngine>>>,
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
        // Reopened by another factory over the same directories (a restart):
        // each engine is opened where it is, not created again elsewhere.
        let f = RocksFactory::with_roots(roots.clone(), shared.clone());
        let before = f.placement().unwrap();
        for i in 0..7 {
            drop(f.open(&format!("tablet-{i}"), None).unwrap());
        }
        assert_eq!(f.placement().unwrap(), before);
        assert_eq!(names(&f.list().unwrap()).len(), 7);
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
        assert_eq!(f.placement().unwrap().iter().map(|(_, n)| n.len()).collect::<Vec<_>>(), vec![2, 1]);
        drop((engines, logs, f));
        // A data directory from before (a log directory inside an engine's) is refused.
        std::fs::create_dir_all(roots[1].join("tablet-1").join("raft-log")).unwrap();
        let f = RocksFactory::with_roots(roots, shared);
        let e = f.raft_logs().expect_err("refused");
        assert!(e.to_string().contains("earlier version of Pinax"), "{e}");
        assert!(MemFactory::default().raft_log("tablet-1").unwrap().is_none());
    }
}
