//! The transaction status tablet: durable home of status records.
//!
//! Every decision of the [`Coordinator`] is persisted (synced) before it is
//! acknowledged. A commit becomes visible to status queries only once persisted:
//! queries about a transaction whose commit is being written wait for it, so no
//! reader ever sees a commit that a crash could undo.

use crate::error::Result;
use parking_lot::{Condvar, Mutex};
use pinax_codec::keys;
use pinax_codec::status_record::{self, StatusRecordFields};
use pinax_common::{HybridClock, HybridTime, TabletId, TxnId};
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, Snapshot, WriteBatch, WriteOptions};
use pinax_mvcc::TxnStatus;
use pinax_txn::{Coordinator, TxnRecord, TxnState};
use std::collections::HashSet;
use std::sync::Arc;

struct Inner {
    coord: Coordinator,
    /// Decided in memory, being persisted: status queries wait.
    persisting: HashSet<TxnId>,
}

pub struct StatusTablet<E: KvEngine> {
    id: TabletId,
    engine: E,
    clock: Arc<HybridClock>,
    inner: Mutex<Inner>,
    persisted: Condvar,
    sync: bool,
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
    /// Open and load every persisted record.
    pub fn open(id: TabletId, engine: E, clock: Arc<HybridClock>, heartbeat_timeout_micros: u64, sync: bool) -> Result<Self> {
        let mut coord = Coordinator::new(heartbeat_timeout_micros);
        {
            let snap = engine.snapshot();
            let lower = vec![status_record::STATUS_KEY_PREFIX];
            let upper = vec![status_record::STATUS_KEY_PREFIX + 1];
            let mut it = snap.iter(Cf::Regular, IterOptions { lower: Some(lower), upper: Some(upper), prefix_same_as_start: false });
            it.seek_to_first();
            while it.valid()? {
                let txn = TxnId::from_slice(&it.key()[1..]).ok_or(keys::KeyError::Truncated)?;
                let rec = from_fields(status_record::decode(it.value())?);
                clock.update(rec.last_heartbeat.max(rec.commit_ht));
                coord.load(txn, rec);
                it.next();
            }
        }
        Ok(StatusTablet { id, engine, clock, inner: Mutex::new(Inner { coord, persisting: HashSet::new() }), persisted: Condvar::new(), sync })
    }

    pub fn id(&self) -> TabletId {
        self.id
    }

    fn persist(&self, recs: &[(TxnId, TxnRecord)]) -> Result<()> {
        if recs.is_empty() {
            return Ok(());
        }
        let mut b = self.engine.new_batch();
        for (id, r) in recs {
            b.put(Cf::Regular, &status_record::status_key(id.as_bytes()), &status_record::encode(&to_fields(r)));
        }
        self.engine.write(b, WriteOptions { sync: self.sync })?;
        Ok(())
    }

    fn forget(&self, ids: &[TxnId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut b = self.engine.new_batch();
        for id in ids {
            b.delete(Cf::Regular, &status_record::status_key(id.as_bytes()));
        }
        self.engine.write(b, WriteOptions { sync: false })?;
        Ok(())
    }

    /// Run `decide` on the coordinator, persist what it returns, then publish.
    fn decide(&self, id: TxnId, decide: impl FnOnce(&mut Coordinator, HybridTime) -> std::result::Result<TxnRecord, pinax_txn::TxnError>) -> Result<TxnRecord> {
        let rec = {
            let mut g = self.inner.lock();
            while g.persisting.contains(&id) {
                self.persisted.wait(&mut g);
            }
            let now = self.clock.now();
            let rec = decide(&mut g.coord, now)?;
            g.persisting.insert(id);
            rec
        };
        let res = self.persist(&[(id, rec.clone())]);
        let mut g = self.inner.lock();
        g.persisting.remove(&id);
        if res.is_err() {
            // Not durable: do not let anyone act on it. Abort in memory; the
            // transaction's client sees the error and the record stays undecided on disk.
            let _ = g.coord.abort(id, Vec::new());
        }
        drop(g);
        self.persisted.notify_all();
        res?;
        Ok(rec)
    }

    pub fn create(&self, id: TxnId) -> Result<TxnRecord> {
        self.decide(id, |c, now| c.create(id, now))
    }

    pub fn heartbeat(&self, id: TxnId) -> Result<TxnRecord> {
        // Heartbeats are not synced individually: losing one only shortens a lease.
        let mut g = self.inner.lock();
        let now = self.clock.now();
        let rec = g.coord.heartbeat(id, now)?;
        drop(g);
        let mut b = self.engine.new_batch();
        b.put(Cf::Regular, &status_record::status_key(id.as_bytes()), &status_record::encode(&to_fields(&rec)));
        self.engine.write(b, WriteOptions { sync: false })?;
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
    pub fn status(&self, id: TxnId, read_ht: HybridTime) -> TxnStatus {
        self.clock.update(read_ht);
        let mut g = self.inner.lock();
        while g.persisting.contains(&id) {
            self.persisted.wait(&mut g);
        }
        g.coord.status(id)
    }

    pub fn record(&self, id: TxnId) -> Option<TxnRecord> {
        self.inner.lock().coord.get(id).cloned()
    }

    /// Abort expired transactions; returns them (with participants, for cleanup).
    pub fn expire(&self) -> Result<Vec<(TxnId, TxnRecord)>> {
        let expired = {
            let mut g = self.inner.lock();
            let now = self.clock.now();
            g.coord.expire(now)
        };
        self.persist(&expired)?;
        Ok(expired)
    }

    /// Every participant applied/removed the intents of `id`.
    pub fn mark_resolved(&self, id: TxnId) -> Result<()> {
        let rec = {
            let mut g = self.inner.lock();
            let now = self.clock.now();
            g.coord.mark_resolved(id, now)
        };
        if let Some(r) = rec {
            self.persist(&[(id, r)])?;
        }
        Ok(())
    }

    /// Decided but unresolved transactions.
    pub fn unresolved(&self) -> Vec<(TxnId, TxnRecord)> {
        self.inner.lock().coord.unresolved()
    }

    /// Drop records resolved more than `retention_micros` ago.
    pub fn gc(&self, retention_micros: u64) -> Result<usize> {
        let ids = {
            let mut g = self.inner.lock();
            let now = self.clock.now();
            g.coord.gc(now, retention_micros)
        };
        self.forget(&ids)?;
        Ok(ids.len())
    }

    pub fn len(&self) -> usize {
        self.inner.lock().coord.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

