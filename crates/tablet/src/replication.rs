//! Where a tablet's decided writes go: the [`Replicator`].
//!
//! A tablet leader decides every write under its write lock (conflict checks,
//! intent resolution) into an [`OwnedBatch`], then hands it to its replicator, which
//! returns once the batch is durable on a majority of the tablet's replicas and
//! applied to the local engine. In production that is the tablet's Raft group
//! (`pinax-raft`, glued in `pinax-tserver`): the Raft log is the write-ahead log and
//! every replica applies the same batches in log order. [`DirectWrite`] writes to the
//! engine itself (its own log is the write-ahead log): a tablet with no replication,
//! used by unit tests and single-replica tools.
//!
//! Before deciding a write or serving a read, the tablet asks [`Replicator::leader_term`]:
//! only the leader decides, and a replica that has just become leader first applies
//! everything committed before its term (the tablet then reloads what it keeps in
//! memory about the engine: which transactions hold intents).

use crate::error::{Error, Result};
use parking_lot::Mutex;
use pinax_common::{HybridTime, RecentRequests, TabletId};
use pinax_engine::{KvEngine, OwnedBatch, WriteOptions};
use std::sync::Arc;

/// Replicates and applies a tablet's decided writes.
pub trait Replicator: Send + Sync + 'static {
    /// Make `batch` durable on a majority and apply it to the local engine; `ht` is
    /// the hybrid time the batch was decided at (followers move their clocks to it).
    /// Fails with [`Error::NotLeader`] when this replica is not (or no longer) the
    /// leader: the batch may or may not be applied then, and the caller's request
    /// is answered with a retryable error.
    fn replicate(&self, ht: HybridTime, batch: OwnedBatch, request: u128) -> Result<()>;

    /// [`Replicator::replicate`], calling `queued` (exactly once) as soon as the
    /// batch has its place in the log order: batches handed over after that are
    /// applied after it. The tablet lets the next writer decide from there, while
    /// this batch is made durable. The default places and applies the batch before
    /// calling `queued` (nothing overlaps).
    fn replicate_then(&self, ht: HybridTime, batch: OwnedBatch, request: u128, queued: &mut dyn FnMut()) -> Result<()> {
        let res = self.replicate(ht, batch, request);
        queued();
        res
    }

    /// When write request `request` (the client's id; 0: none) was applied, if it
    /// was lately: a request sent again after its answer was lost is answered, not
    /// applied twice. Meaningful after [`Replicator::leader_term`].
    fn applied_request(&self, request: u128) -> Option<HybridTime>;

    /// The current leader term when this replica leads and has applied every entry
    /// committed before that term; [`Error::NotLeader`] otherwise. Called before
    /// every write decision.
    fn leader_term(&self) -> Result<u64>;

    /// Whether this replica is the leader right now as far as it knows, without
    /// waiting for an election (background work skips replicas that do not).
    fn leads_now(&self) -> bool;

    /// The current leader term, or [`Error::NotLeader`] unless a read served now by
    /// this replica cannot miss a write acknowledged by any leader (a leader lease
    /// or a read-index round).
    fn read_barrier(&self) -> Result<u64>;
}

/// No replication: batches go straight to the engine, synced when `sync`.
pub struct DirectWrite<E: KvEngine> {
    engine: Arc<E>,
    sync: bool,
    recent: Mutex<RecentRequests>,
}

impl<E: KvEngine> DirectWrite<E> {
    pub fn new(engine: Arc<E>, sync: bool) -> Self {
        DirectWrite { engine, sync, recent: Mutex::default() }
    }
}

impl<E: KvEngine> Replicator for DirectWrite<E> {
    fn replicate(&self, ht: HybridTime, batch: OwnedBatch, request: u128) -> Result<()> {
        let mut b = self.engine.new_batch();
        batch.replay(&mut b);
        self.engine.write(b, WriteOptions { sync: self.sync, ..Default::default() })?;
        self.recent.lock().insert(request, ht);
        Ok(())
    }
    fn applied_request(&self, request: u128) -> Option<HybridTime> {
        self.recent.lock().get(request)
    }
    fn leader_term(&self) -> Result<u64> {
        Ok(1)
    }
    fn leads_now(&self) -> bool {
        true
    }
    fn read_barrier(&self) -> Result<u64> {
        Ok(1)
    }
}

/// The error a replicator returns when it does not lead `tablet_id`.
pub fn not_leader(tablet_id: TabletId, leader_hint: Option<String>) -> Error {
    Error::NotLeader { tablet_id, leader_hint }
}
