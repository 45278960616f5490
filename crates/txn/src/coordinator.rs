//! Decisions on status records. Pure: callers persist the records returned.

use crate::record::{TxnRecord, TxnState};
use pinax_common::{ErrorCode, HybridTime, TabletId, TxnId};
use pinax_mvcc::TxnStatus;
use std::collections::{BTreeSet, HashMap, HashSet};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TxnError {
    #[error("transaction {0} was aborted")]
    Aborted(TxnId),
    #[error("transaction {0} is unknown")]
    NotFound(TxnId),
    #[error("transaction {0} already exists")]
    AlreadyExists(TxnId),
    #[error("transaction {0} is already committed")]
    AlreadyCommitted(TxnId),
}

impl TxnError {
    pub fn code(&self) -> ErrorCode {
        match self {
            TxnError::Aborted(_) => ErrorCode::TxnAborted,
            TxnError::NotFound(_) => ErrorCode::TxnNotFound,
            TxnError::AlreadyExists(_) | TxnError::AlreadyCommitted(_) => ErrorCode::InvalidRequest,
        }
    }
}

/// All status records of one status tablet.
///
/// The background work over them (expiry, resolution, garbage collection: every
/// node tick) looks only at the records it concerns, through three indexes kept
/// with the records: the pending ones, the decided and unresolved ones, and the
/// resolved ones by resolution time. A status tablet holds every transaction of
/// the last [`gc`](Coordinator::gc) retention (a minute: ~200k records under a
/// few thousand transactions per second), which a scan per tick would walk
/// three times.
#[derive(Debug)]
pub struct Coordinator {
    records: HashMap<TxnId, TxnRecord>,
    pending: HashSet<TxnId>,
    unresolved: HashSet<TxnId>,
    resolved: BTreeSet<(HybridTime, TxnId)>,
    /// A pending transaction not heard of for this long is aborted.
    heartbeat_timeout_micros: u64,
}

impl Coordinator {
    pub fn new(heartbeat_timeout_micros: u64) -> Self {
        Coordinator { records: HashMap::new(), pending: HashSet::new(), unresolved: HashSet::new(), resolved: BTreeSet::new(), heartbeat_timeout_micros }
    }

    /// File `id` (record `rec`) in the index its state belongs to.
    fn index(&mut self, id: TxnId, rec: &TxnRecord) {
        match (rec.state, rec.resolved_at) {
            (TxnState::Pending, _) => self.pending.insert(id),
            (_, None) => self.unresolved.insert(id),
            (_, Some(t)) => self.resolved.insert((t, id)),
        };
    }

    /// Take `id` (record `rec`) out of its index.
    fn unindex(&mut self, id: TxnId, rec: &TxnRecord) {
        match (rec.state, rec.resolved_at) {
            (TxnState::Pending, _) => self.pending.remove(&id),
            (_, None) => self.unresolved.remove(&id),
            (_, Some(t)) => self.resolved.remove(&(t, id)),
        };
    }

    /// Rebuild from persisted records (after a restart).
    pub fn load(&mut self, id: TxnId, rec: TxnRecord) {
        if let Some(old) = self.records.remove(&id) {
            self.unindex(id, &old);
        }
        self.index(id, &rec);
        self.records.insert(id, rec);
    }

    pub fn get(&self, id: TxnId) -> Option<&TxnRecord> {
        self.records.get(&id)
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn create(&mut self, id: TxnId, now: HybridTime) -> Result<TxnRecord, TxnError> {
        if self.records.contains_key(&id) {
            return Err(TxnError::AlreadyExists(id));
        }
        let rec = TxnRecord::new(now);
        self.records.insert(id, rec.clone());
        self.pending.insert(id);
        Ok(rec)
    }

    pub fn heartbeat(&mut self, id: TxnId, now: HybridTime) -> Result<TxnRecord, TxnError> {
        let rec = self.records.get_mut(&id).ok_or(TxnError::NotFound(id))?;
        match rec.state {
            TxnState::Pending => {
                rec.last_heartbeat = rec.last_heartbeat.max(now);
                Ok(rec.clone())
            }
            TxnState::Aborted => Err(TxnError::Aborted(id)),
            TxnState::Committed => Err(TxnError::AlreadyCommitted(id)),
        }
    }

    /// Decide COMMITTED at `commit_ht` (the caller's clock now). Committing twice
    /// returns the first decision (idempotent for client retries).
    pub fn commit(&mut self, id: TxnId, commit_ht: HybridTime, participants: Vec<TabletId>) -> Result<TxnRecord, TxnError> {
        let timeout = self.heartbeat_timeout_micros;
        let rec = self.records.get_mut(&id).ok_or(TxnError::NotFound(id))?;
        match rec.state {
            TxnState::Committed => Ok(rec.clone()),
            TxnState::Aborted => Err(TxnError::Aborted(id)),
            TxnState::Pending => {
                self.pending.remove(&id);
                self.unresolved.insert(id);
                if rec.last_heartbeat.add_micros(timeout) < commit_ht {
                    rec.state = TxnState::Aborted;
                    rec.participants = participants;
                    return Err(TxnError::Aborted(id));
                }
                rec.state = TxnState::Committed;
                rec.commit_ht = commit_ht;
                rec.participants = participants;
                Ok(rec.clone())
            }
        }
    }

    /// Decide ABORTED. Aborting an aborted transaction is a no-op; a committed one
    /// cannot be aborted.
    pub fn abort(&mut self, id: TxnId, participants: Vec<TabletId>) -> Result<TxnRecord, TxnError> {
        let rec = self.records.get_mut(&id).ok_or(TxnError::NotFound(id))?;
        match rec.state {
            TxnState::Committed => Err(TxnError::AlreadyCommitted(id)),
            TxnState::Aborted | TxnState::Pending => {
                if rec.state == TxnState::Pending {
                    self.pending.remove(&id);
                    self.unresolved.insert(id);
                }
                rec.state = TxnState::Aborted;
                for p in participants {
                    if !rec.participants.contains(&p) {
                        rec.participants.push(p);
                    }
                }
                Ok(rec.clone())
            }
        }
    }

    /// Status as seen by a reader; unknown transactions are aborted.
    pub fn status(&self, id: TxnId) -> TxnStatus {
        self.records.get(&id).map(|r| r.status()).unwrap_or(TxnStatus::Aborted)
    }

    /// Abort every pending transaction whose heartbeat is older than the timeout.
    pub fn expire(&mut self, now: HybridTime) -> Vec<(TxnId, TxnRecord)> {
        let timeout = self.heartbeat_timeout_micros;
        let mut out = Vec::new();
        for id in &self.pending {
            if let Some(rec) = self.records.get_mut(id) {
                if rec.last_heartbeat.add_micros(timeout) < now {
                    rec.state = TxnState::Aborted;
                    out.push((*id, rec.clone()));
                }
            }
        }
        for (id, _) in &out {
            self.pending.remove(id);
            self.unresolved.insert(*id);
        }
        out
    }

    /// Record that every participant applied (committed) or removed (aborted) the
    /// transaction's intents.
    pub fn mark_resolved(&mut self, id: TxnId, now: HybridTime) -> Option<TxnRecord> {
        let rec = self.records.get_mut(&id)?;
        if rec.state == TxnState::Pending {
            return None;
        }
        if rec.resolved_at.is_none() {
            rec.resolved_at = Some(now);
            self.unresolved.remove(&id);
            self.resolved.insert((now, id));
        }
        Some(rec.clone())
    }

    /// Decided, not yet resolved transactions (to drive apply/cleanup after restart).
    pub fn unresolved(&self) -> Vec<(TxnId, TxnRecord)> {
        self.unresolved.iter().filter_map(|id| self.records.get(id).map(|r| (*id, r.clone()))).collect()
    }

    /// Forget records resolved more than `retention_micros` ago. A reader holding an
    /// older snapshot that still shows intents would ask about them, so retention
    /// must exceed the longest snapshot-to-resolution delay.
    pub fn gc(&mut self, now: HybridTime, retention_micros: u64) -> Vec<TxnId> {
        let mut old = Vec::new();
        while let Some(&(t, id)) = self.resolved.first() {
            if t.add_micros(retention_micros) >= now {
                break;
            }
            self.resolved.pop_first();
            self.records.remove(&id);
            old.push(id);
        }
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u8) -> TxnId {
        TxnId([n; 16])
    }
    fn ht(us: u64) -> HybridTime {
        HybridTime::from_micros(us)
    }

    #[test]
    fn commit_flow() {
        let mut c = Coordinator::new(1_000);
        c.create(t(1), ht(10)).unwrap();
        assert_eq!(c.status(t(1)), TxnStatus::Pending);
        let r = c.commit(t(1), ht(20), vec![TabletId(3)]).unwrap();
        assert_eq!(r.state, TxnState::Committed);
        assert_eq!(c.status(t(1)), TxnStatus::Committed { commit_ht: ht(20) });
        // idempotent
        assert_eq!(c.commit(t(1), ht(30), vec![]).unwrap().commit_ht, ht(20));
        assert_eq!(c.abort(t(1), vec![]), Err(TxnError::AlreadyCommitted(t(1))));
        assert_eq!(c.unresolved().len(), 1);
        c.mark_resolved(t(1), ht(40));
        assert!(c.unresolved().is_empty());
        assert!(c.gc(ht(100), 100).is_empty());
        assert_eq!(c.gc(ht(200), 100), vec![t(1)]);
        assert_eq!(c.status(t(1)), TxnStatus::Aborted); // unknown = aborted
    }

    #[test]
    fn expiry_aborts_and_commit_after_expiry_fails() {
        let mut c = Coordinator::new(1_000);
        c.create(t(1), ht(0)).unwrap();
        c.create(t(2), ht(0)).unwrap();
        c.heartbeat(t(2), ht(900)).unwrap();
        let expired = c.expire(ht(1500));
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].0, t(1));
        assert_eq!(c.status(t(1)), TxnStatus::Aborted);
        assert_eq!(c.commit(t(1), ht(1600), vec![]), Err(TxnError::Aborted(t(1))));
        assert_eq!(c.heartbeat(t(1), ht(1600)), Err(TxnError::Aborted(t(1))));
        // t2 is late to commit too: its heartbeat is older than the timeout
        assert_eq!(c.commit(t(2), ht(2000), vec![]), Err(TxnError::Aborted(t(2))));
    }

    #[test]
    fn duplicates_and_unknowns() {
        let mut c = Coordinator::new(1_000);
        c.create(t(1), ht(0)).unwrap();
        assert_eq!(c.create(t(1), ht(1)), Err(TxnError::AlreadyExists(t(1))));
        assert_eq!(c.commit(t(9), ht(1), vec![]), Err(TxnError::NotFound(t(9))));
        assert!(c.abort(t(1), vec![TabletId(1)]).is_ok());
        assert!(c.abort(t(1), vec![TabletId(2)]).is_ok());
        assert_eq!(c.get(t(1)).unwrap().participants, vec![TabletId(1), TabletId(2)]);
    }

    /// The indexes hold exactly what a scan of the records finds.
    fn check_indexes(c: &Coordinator) {
        let pending: HashSet<TxnId> = c.records.iter().filter(|(_, r)| r.state == TxnState::Pending).map(|(id, _)| *id).collect();
        let unresolved: HashSet<TxnId> = c.records.iter().filter(|(_, r)| r.state != TxnState::Pending && r.resolved_at.is_none()).map(|(id, _)| *id).collect();
        let resolved: BTreeSet<(HybridTime, TxnId)> =
            c.records.iter().filter(|(_, r)| r.state != TxnState::Pending).filter_map(|(id, r)| r.resolved_at.map(|t| (t, *id))).collect();
        assert_eq!((&c.pending, &c.unresolved, &c.resolved), (&pending, &unresolved, &resolved));
    }

    #[test]
    fn the_indexes_follow_every_change() {
        // Many transactions through every path, in a scrambled order; the
        // indexes checked against the records after each step, and what
        // expire, unresolved and gc answer against a scan.
        let mut c = Coordinator::new(1_000);
        let mut now = 0u64;
        let mut x = 12345u64;
        let mut rand = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        for _ in 0..3000 {
            now += 7;
            let id = TxnId([(rand() % 64) as u8; 16]);
            match rand() % 9 {
                0 | 1 => {
                    let _ = c.create(id, ht(now));
                }
                2 => {
                    let _ = c.heartbeat(id, ht(now));
                }
                3 => {
                    let _ = c.commit(id, ht(now), vec![TabletId(1)]);
                }
                4 => {
                    let _ = c.abort(id, vec![TabletId(2)]);
                }
                5 => {
                    let want: Vec<TxnId> = c
                        .records
                        .iter()
                        .filter(|(_, r)| r.state == TxnState::Pending && r.last_heartbeat.add_micros(1_000) < ht(now))
                        .map(|(id, _)| *id)
                        .collect();
                    let mut got: Vec<TxnId> = c.expire(ht(now)).into_iter().map(|(id, _)| id).collect();
                    got.sort();
                    let mut want = want;
                    want.sort();
                    assert_eq!(got, want);
                }
                6 | 7 => {
                    let _ = c.mark_resolved(id, ht(now));
                }
                _ => {
                    let want: Vec<TxnId> =
                        c.records.iter().filter(|(_, r)| matches!(r.resolved_at, Some(t) if t.add_micros(500) < ht(now))).map(|(id, _)| *id).collect();
                    let mut got = c.gc(ht(now), 500);
                    got.sort();
                    let mut want = want;
                    want.sort();
                    assert_eq!(got, want);
                }
            }
            check_indexes(&c);
            let mut u: Vec<TxnId> = c.unresolved().into_iter().map(|(id, _)| id).collect();
            u.sort();
            let mut w: Vec<TxnId> = c.unresolved.iter().copied().collect();
            w.sort();
            assert_eq!(u, w);
        }
        assert!(
            c.records.len() > 10 && !c.resolved.is_empty() && !c.pending.is_empty() && !c.unresolved.is_empty(),
            "every index was used: {} {} {} {}",
            c.records.len(),
            c.pending.len(),
            c.unresolved.len(),
            c.resolved.len()
        );
        // Loaded records (a restart) are filed too, a reload replacing one as well.
        let mut d = Coordinator::new(1_000);
        for (id, r) in &c.records {
            d.load(*id, r.clone());
        }
        let (id, r) = c.records.iter().find(|(_, r)| r.state == TxnState::Pending).map(|(i, r)| (*i, r.clone())).unwrap();
        let mut decided = r.clone();
        decided.state = TxnState::Committed;
        d.load(id, decided);
        check_indexes(&d);
        d.load(id, r);
        check_indexes(&d);
    }
}
