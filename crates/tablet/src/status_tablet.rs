//! The transaction status tablet: durable, replicated home of status records.
//!
//! Every decision of the [`Coordinator`] goes through the tablet's [`Replicator`]
//! (its Raft group) before it is acknowledged: a commit or an abort is on a
//! majority of the status tablet's replicas before its transaction's client hears
//! of it. A new transaction's pending record is not: it is kept in memory until
//! the transaction's first heartbeat (a second into it) or its decision, whichever
//! comes first, so a short transaction pays no replicated write to begin. A leader
//! change forgets the unpersisted ones: their transactions are unknown to the new
//! leader, hence aborted (intents found are removed; their commit fails with
//! TxnNotFound, 40001), exactly as if they had expired. A
//! becomes visible to status queries only once replicated: queries about a
//! transaction whose decision is being written wait for it, so no reader ever sees
//! a commit that a crash or a leader change could undo.
//!
//! Only the leader decides and answers. Its coordinator is loaded from the engine
//! when its term begins (a follower applied the records without it) and marked
//! stale when a replication fails (the entry may or may not commit: the next term
//! reloads). Heartbeats are kept in memory only: a new leader gives every pending
//! transaction a fresh lease instead. Status queries go through
//! [`Replicator::read_barrier`] (a leader lease): a deposed leader must not answer
//! "pending" for a transaction the new one committed, nor "aborted" (unknown) for
//! one created there.

use crate::error::Result;
use crate::replication::{DirectWrite, Replicator};
use parking_lot::{Condvar, Mutex, MutexGuard};
use pinax_codec::keys;
use pinax_codec::status_record::{self, StatusRecordFields};
use pinax_common::{HybridClock, HybridTime, TabletId, TxnId};
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, OwnedBatch, Snapshot, WriteBatch};
use pinax_mvcc::TxnStatus;
use pinax_txn::{Coordinator, TxnRecord, TxnState};
use std::collections::HashSet;
use std::sync::Arc;

struct Inner {
    coord: Coordinator,
    /// Decided in memory, being replicated: status queries wait.
    persisting: HashSet<TxnId>,
    /// Pending records created in this term and not persisted yet (see the module docs).
    unpersisted: HashSet<TxnId>,
    /// The leader term `coord` was loaded for (0: none, or stale).
    term: u64,
}

pub struct StatusTablet<E: KvEngine> {
    id: TabletId,
    engine: Arc<E>,
    log: Arc<dyn Replicator>,
    clock: Arc<HybridClock>,
    heartbeat_timeout_micros: u64,
    inner: Mutex<Inner>,
    persisted: Condvar,
}

fn to_fields(r: &TxnRecord) -> StatusRecordFields {
    StatusRecordFields {
        state: match r.state {
            TxnState::Pending => 1,
            TxnState::Committed => 2,
            TxnState::Aborted => 3,
        },
        commit_ht: r.commit_ht.as_u64(),
        start_ht: r.start_ht.as_u64(),
        last_heartbeat: r.last_heartbeat.as_u64(),
        resolved_at: r.resolved_at.map_or(0, |h| h.as_u64()),
        participants: r.participants.iter().map(|t| t.0).collect(),
    }
}

fn from_fields(f: StatusRecordFields) -> TxnRecord {
    TxnRecord {
        state: match f.state {
            2 => TxnState::Committed,
            3 => TxnState::Aborted,
            _ => TxnState::Pending,
        },
        commit_ht: HybridTime(f.commit_ht),
        start_ht: HybridTime(f.start_ht),
        last_heartbeat: HybridTime(f.last_heartbeat),
        resolved_at: if f.resolved_at == 0 { None } else { Some(HybridTime(f.resolved_at)) },
        participants: f.participants.into_iter().map(TabletId).collect(),
    }
}

impl<E: KvEngine> StatusTablet<E> {
    /// Open a status tablet with no replication (its engine's log is the
    /// write-ahead log; tests and single-replica tools).
    pub fn open(id: TabletId, engine: E, clock: Arc<HybridClock>, heartbeat_timeout_micros: u64, sync: bool) -> Result<Self> {
        let engine = Arc::new(engine);
        let log = Arc::new(DirectWrite::new(engine.clone(), sync));
        Ok(Self::open_replicated(id, engine, log, clock, heartbeat_timeout_micros))
    }

    /// Open a status tablet whose records go through `log` (a Raft group applying
    /// them to `engine`). Records are loaded when this replica first leads.
    pub fn open_replicated(id: TabletId, engine: Arc<E>, log: Arc<dyn Replicator>, clock: Arc<HybridClock>, heartbeat_timeout_micros: u64) -> Self {
        let inner = Inner { coord: Coordinator::new(heartbeat_timeout_micros), persisting: HashSet::new(), unpersisted: HashSet::new(), term: 0 };
        StatusTablet { id, engine, log, clock, heartbeat_timeout_micros, inner: Mutex::new(inner), persisted: Condvar::new() }
    }

    /// Every record in the engine. Pending ones get a fresh lease (heartbeats are
    /// not persisted): their clients heartbeat the new leader from now on.
    fn load(&self) -> Result<Coordinator> {
        let mut coord = Coordinator::new(self.heartbeat_timeout_micros);
        let snap = self.engine.snapshot();
        let lower = vec![status_record::STATUS_KEY_PREFIX];
        let upper = vec![status_record::STATUS_KEY_PREFIX + 1];
        let mut it = snap.iter(Cf::Regular, IterOptions { lower: Some(lower), upper: Some(upper), prefix_same_as_start: false });
        it.seek_to_first();
        while it.valid()? {
            let txn = TxnId::from_slice(&it.key()[1..]).ok_or(keys::KeyError::Truncated)?;
            let mut rec = from_fields(status_record::decode(it.value())?);
            self.clock.update(rec.last_heartbeat.max(rec.commit_ht));
            if rec.state == TxnState::Pending {
                rec.last_heartbeat = self.clock.now();
            }
            coord.load(txn, rec);
            it.next();
        }
        Ok(coord)
    }

    /// The records, locked, if this replica leads (loaded for its term: decisions
    /// of an earlier term still being replicated are waited for first).
    fn lead(&self) -> Result<MutexGuard<'_, Inner>> {
        let term = self.log.leader_term()?;
        let mut g = self.inner.lock();
        if g.term != term {
            while !g.persisting.is_empty() {
                self.persisted.wait(&mut g);
            }
            g.coord = self.load()?;
            g.unpersisted.clear();
            g.term = term;
        }
        Ok(g)
    }

    /// Whether this replica is the leader right now as far as it knows, without
    /// waiting for an election (background work skips the others).
    pub fn leads_now(&self) -> bool {
        self.log.leads_now()
    }

    pub fn id(&self) -> TabletId {
        self.id
    }

    fn replicate(&self, b: OwnedBatch) -> Result<()> {
        self.log.replicate(self.clock.now(), b, 0)
    }

    fn persist(&self, recs: &[(TxnId, TxnRecord)]) -> Result<()> {
        if recs.is_empty() {
            return Ok(());
        }
        let mut b = OwnedBatch::default();
        for (id, r) in recs {
            b.put(Cf::Regular, &status_record::status_key(id.as_bytes()), &status_record::encode(&to_fields(r)));
        }
        self.replicate(b)
    }

    fn forget(&self, ids: &[TxnId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut b = OwnedBatch::default();
        for id in ids {
            b.delete(Cf::Regular, &status_record::status_key(id.as_bytes()));
        }
        self.replicate(b)
    }

    /// Replicate `recs`, decided in memory with their ids put in `persisting`
    /// (status queries about them wait), then let the waiters go. After a failed
    /// replication the entries may still commit (or not): the records in memory
    /// are not to be trusted, and the next leader term reloads what was
    /// replicated.
    fn publish(&self, recs: &[(TxnId, TxnRecord)]) -> Result<()> {
        let res = self.persist(recs);
        let mut g = self.inner.lock();
        for (id, _) in recs {
            g.persisting.remove(id);
        }
        if res.is_err() {
            g.term = 0;
        }
        drop(g);
        self.persisted.notify_all();
        res
    }

    /// [`StatusTablet::lead`], once no decision about `id` is being replicated.
    fn lead_settled(&self, id: TxnId) -> Result<MutexGuard<'_, Inner>> {
        let mut g = self.lead()?;
        while g.persisting.contains(&id) {
            self.persisted.wait(&mut g);
        }
        Ok(g)
    }

    /// Run `decide` on the coordinator, replicate what it returns, then publish.
    fn decide(&self, id: TxnId, decide: impl FnOnce(&mut Coordinator, HybridTime) -> std::result::Result<TxnRecord, pinax_txn::TxnError>) -> Result<TxnRecord> {
        let rec = {
            let mut g = self.lead_settled(id)?;
            let now = self.clock.now();
            let rec = decide(&mut g.coord, now)?;
            g.unpersisted.remove(&id);
            g.persisting.insert(id);
            rec
        };
        self.publish(&[(id, rec.clone())])?;
        Ok(rec)
    }

    /// A new pending record, in memory only (see the module docs).
    pub fn create(&self, id: TxnId) -> Result<TxnRecord> {
        let mut g = self.lead_settled(id)?;
        let now = self.clock.now();
        let rec = g.coord.create(id, now)?;
        g.unpersisted.insert(id);
        Ok(rec)
    }

    /// Extend a pending transaction's lease. The lease is kept in memory only (a
    /// new leader gives every pending transaction a fresh lease); the first
    /// heartbeat persists a record created in memory.
    pub fn heartbeat(&self, id: TxnId) -> Result<TxnRecord> {
        let mut g = self.lead_settled(id)?;
        let now = self.clock.now();
        let rec = g.coord.heartbeat(id, now)?;
        if g.unpersisted.remove(&id) {
            g.persisting.insert(id);
            drop(g);
            self.publish(&[(id, rec.clone())])?;
        }
        Ok(rec)
    }

    /// Decide COMMITTED; returns the commit hybrid time.
    pub fn commit(&self, id: TxnId, participants: Vec<TabletId>) -> Result<HybridTime> {
        let rec = self.decide(id, |c, now| c.commit(id, now, participants))?;
        Ok(rec.commit_ht)
    }

    pub fn abort(&self, id: TxnId, participants: Vec<TabletId>) -> Result<()> {
        self.decide(id, |c, _| c.abort(id, participants))?;
        Ok(())
    }

    /// Fate of `id` for a reader at `read_ht`. Moves the clock past `read_ht` first.
    /// Fails unless this replica leads and holds its lease.
    pub fn status(&self, id: TxnId, read_ht: HybridTime) -> Result<TxnStatus> {
        self.clock.update(read_ht);
        self.log.read_barrier()?;
        loop {
            let g = self.lead_settled(id)?;
            // Zero: a replication failed meanwhile; the records are reloaded.
            if g.term != 0 {
                return Ok(g.coord.status(id));
            }
        }
    }

    /// The record of `id` as this replica knows it (tests, diagnostics).
    pub fn record(&self, id: TxnId) -> Option<TxnRecord> {
        self.lead().ok()?.coord.get(id).cloned()
    }

    /// Abort expired transactions; returns them (with participants, for cleanup).
    /// Nothing on a replica that does not lead.
    pub fn expire(&self) -> Result<Vec<(TxnId, TxnRecord)>> {
        let Ok(mut g) = self.lead() else {
            return Ok(Vec::new());
        };
        let now = self.clock.now();
        let expired = g.coord.expire(now);
        for (id, _) in &expired {
            g.unpersisted.remove(id);
            g.persisting.insert(*id);
        }
        drop(g);
        self.publish(&expired)?;
        Ok(expired)
    }

    /// Every participant applied/removed the intents of `id`. Kept in memory
    /// only (a replicated write per transaction otherwise): a leader that loads
    /// the record resolves it again, which finds nothing left to do, and the
    /// record goes with the next collection after that ([`StatusTablet::gc`]).
    pub fn mark_resolved(&self, id: TxnId) -> Result<()> {
        let mut g = self.lead()?;
        let now = self.clock.now();
        g.coord.mark_resolved(id, now);
        Ok(())
    }

    /// Decided but unresolved transactions (none on a replica that does not lead).
    pub fn unresolved(&self) -> Vec<(TxnId, TxnRecord)> {
        self.lead().map(|g| g.coord.unresolved()).unwrap_or_default()
    }

    /// Drop records resolved more than `retention_micros` ago.
    pub fn gc(&self, retention_micros: u64) -> Result<usize> {
        let ids = {
            let Ok(mut g) = self.lead() else {
                return Ok(0);
            };
            let now = self.clock.now();
            g.coord.gc(now, retention_micros)
        };
        self.forget(&ids)?;
        Ok(ids.len())
    }

    /// Records in memory (0 on a replica that does not lead now).
    pub fn len(&self) -> usize {
        if !self.leads_now() {
            return 0;
        }
        self.lead().map(|g| g.coord.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
