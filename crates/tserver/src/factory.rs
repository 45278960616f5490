//! Opening one engine per tablet.

use parking_lot::Mutex;
use pinax_engine::{CompactionFilterFactory, KvEngine};
use pinax_engine_mem::MemEngine;
use pinax_engine_rocks::{RocksConfig, RocksEngine, SharedResources};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

pub trait EngineFactory: Send + Sync + 'static {
    type Engine: KvEngine;
    /// Open (creating if missing) the engine called `name`.
    fn open(&self, name: &str, gc: Option<Arc<dyn CompactionFilterFactory>>) -> pinax_engine::Result<Self::Engine>;
    /// Delete the engine's data for good (it must be closed).
    fn destroy(&self, name: &str) -> pinax_engine::Result<()>;
    /// Names of every engine that exists.
    fn list(&self) -> pinax_engine::Result<Vec<String>>;
}

/// RocksDB engines under one directory, sharing a block cache and memtable budget.
pub struct RocksFactory {
    root: PathBuf,
    shared: SharedResources,
    disable_wal: bool,
}

impl RocksFactory {
    pub fn new(root: PathBuf, shared: SharedResources) -> Self {
        RocksFactory { root, shared, disable_wal: false }
    }
}

impl EngineFactory for RocksFactory {
    type Engine = RocksEngine;
    fn open(&self, name: &str, gc: Option<Arc<dyn CompactionFilterFactory>>) -> pinax_engine::Result<RocksEngine> {
        let cfg = RocksConfig { compaction_filter: gc, disable_wal: self.disable_wal, ..RocksConfig::with_shared(self.shared.clone()) };
        RocksEngine::open(self.root.join(name), &cfg)
    }
    fn destroy(&self, name: &str) -> pinax_engine::Result<()> {
        let p = self.root.join(name);
        if p.exists() {
            std::fs::remove_dir_all(&p).map_err(|e| pinax_engine::Error::Io(format!("removing {}: {e}", p.display())))?;
        }
        Ok(())
    }
    fn list(&self) -> pinax_engine::Result<Vec<String>> {
        let mut out = Vec::new();
        let rd = match std::fs::read_dir(&self.root) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(pinax_engine::Error::Io(e.to_string())),
        };
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(out)
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
}
