//! openraft's storage conformance suite on Pinax's log store and state machine:
//! the in-memory double (log in `Cf::Log`), and RocksDB with the log in a shared
//! Raft log (as a node runs them).

use openraft::testing::{StoreBuilder, Suite};
use pinax_common::HybridClock;
use pinax_engine_mem::MemEngine;
use pinax_engine_rocks::{RocksConfig, RocksEngine};
use pinax_raft::{LogPlace, LogStore, SharedLog, StateMachine, StorageError, TypeConfig};
use std::sync::Arc;

struct Mem;

impl StoreBuilder<TypeConfig, LogStore<MemEngine>, StateMachine<MemEngine>, ()> for Mem {
    async fn build(&self) -> Result<((), LogStore<MemEngine>, StateMachine<MemEngine>), StorageError> {
        let engine = Arc::new(MemEngine::new());
        Ok(((), LogStore::open(engine.clone(), &LogPlace::Engine, 1)?, StateMachine::new(engine, Arc::new(HybridClock::system()))))
    }
}

struct Rocks;

impl StoreBuilder<TypeConfig, LogStore<RocksEngine>, StateMachine<RocksEngine>, tempfile::TempDir> for Rocks {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore<RocksEngine>, StateMachine<RocksEngine>), StorageError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = Arc::new(RocksEngine::open(dir.path().join("db"), &RocksConfig::default()).expect("open rocksdb"));
        let log = SharedLog::open(&dir.path().join("raft-log")).expect("open the shared log");
        let place = LogPlace::Shared { log, sync: true };
        Ok((dir, LogStore::open(engine.clone(), &place, 1)?, StateMachine::new(engine, Arc::new(HybridClock::system()))))
    }
}

#[test]
fn suite_on_mem_engine() {
    Suite::test_all(Mem).expect("storage suite on the in-memory engine");
}

#[test]
fn suite_on_rocksdb() {
    Suite::test_all(Rocks).expect("storage suite on RocksDB");
}
