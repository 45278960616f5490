//! The data tablet: a key range of one table, its engine and its Raft group.
//! This file holds the tablet, its write paths (decide under the write lock, then
//! replicate) and its reads; the parts are in modules by role:
//! - `write_state`: what the write lock guards (intent holders, writes in flight);
//! - `conflicts`: conflict checking of a write's keys (`check_ops`, `check_key`);
//! - `apply`: finishing a transaction's intents (apply if committed, remove if
//!   aborted, roll back to a savepoint).
//!
//! Three words that were all "resolve" once: *check* (a write's conflicts),
//! *finish* (a transaction's intents here), and request *routing* (tserver).

mod apply;
mod conflicts;
mod write_state;

use apply::*;
use conflicts::*;
use write_state::*;

use crate::error::{Error, Result};
use crate::mvcc_manager::MvccManager;
use crate::ops::{WriteOp, WriteOpKind};
use crate::replication::{DirectWrite, Replicator};
use parking_lot::{Condvar, Mutex, MutexGuard};
use pinax_codec::heap_tuple;
use pinax_codec::keys::{self, IntentKind};
use pinax_codec::patch;
use pinax_common::{HybridClock, HybridTime, TabletId, TxnId};
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, OwnedBatch, Snapshot, WriteBatch, WriteOptions, WritePressure};
use pinax_mvcc::gc::HistoryCutoff;
use pinax_mvcc::read::{holders_intents, intents_cursor, intents_cursor_between, txn_effect, IntentRecord, KeyCursor, TxnEffect, Version};
use pinax_mvcc::{MvccReader, ReadContext, TabletDeletions, TxnStatus, TxnStatusResolver};
use pinax_proto::{LiveWrite, LockStrength};
use pinax_pushdown::{ScanResult, ScanSpec};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) const META_FORMAT_VERSION: &[u8] = b"format_version";
/// Newest commit time of a SERIALIZABLE writer applied here (8 bytes, big-endian),
/// written with the batch that applies its intents, so every replica knows it.
pub(crate) const META_PREDICATE_WRITE_HT: &[u8] = b"predicate_write_ht";
/// Commit times of applied deletions of every row ([`Tablet::delete_all`]),
/// oldest first (8 bytes each, big-endian), written with the batch that applies one.
pub(crate) const META_DELETIONS: &[u8] = b"deleted_every_row";
/// The data byte of the lock intent that holds a pending deletion of every row, on
/// the tablet's range-lock key (its partition start).
const DELETE_ALL_MARK: u8 = b'D';

pub use pinax_proto::Partition;

#[derive(Clone, Copy, Debug)]
pub struct TabletOptions {
    /// fsync every acknowledged write.
    pub sync: bool,
}

impl Default for TabletOptions {
    fn default() -> Self {
        TabletOptions { sync: true }
    }
}

pub struct Tablet<E: KvEngine> {
    id: TabletId,
    engine: Arc<E>,
    /// Where decided batches go (the Raft group, or the engine itself).
    log: Arc<dyn Replicator>,
    clock: Arc<HybridClock>,
    partition: Partition,
    mvcc: MvccManager,
    /// Serialises write decisions; guards what they know about the intents CF.
    write_lock: Mutex<WriteState>,
    /// Signalled when a keyed write in flight has been applied (see
    /// [`WriteState::in_flight`]) and when a drain ends.
    settled: Condvar,
    cutoff: HistoryCutoff,
    /// Newest commit time of a SERIALIZABLE transaction that wrote here (applied
    /// `PredicateWrite` intents; kept in `Cf::Meta` too, and reloaded from there at
    /// opening and when this replica becomes leader). A SERIALIZABLE range read at
    /// an older read time may have missed rows such a transaction wrote: its range
    /// lock conflicts.
    predicate_write_ht: AtomicU64,
    /// The engine's write pressure and when it was read (refreshed every
    /// `PRESSURE_REFRESH`): writes are delayed or refused while storage is behind.
    pressure: Mutex<(Option<Instant>, WritePressure)>,
    /// Set once the tablet has split (recorded in `Cf::Meta`, read at opening):
    /// it serves nothing more, its halves do.
    split: std::sync::OnceLock<crate::split::SplitRecord>,
    /// Requests served (counted by the server: [`Tablet::note_request`]), for
    /// splitting by load.
    requests: AtomicU64,
}

/// How long a reading of the engine's write pressure is used.
const PRESSURE_REFRESH: Duration = Duration::from_millis(50);
/// How long a write waits while storage is far behind before it is refused, and
/// how often it looks again meanwhile.
const FULL_WAIT: Duration = Duration::from_millis(500);
const FULL_RECHECK: Duration = Duration::from_millis(10);

/// A reader of `snap` that reads what `intents` says of the intents CF.
fn reader_for<'a, S: Snapshot, R: TxnStatusResolver + ?Sized>(snap: &'a S, resolver: &'a R, ctx: ReadContext, intents: RowIntents) -> MvccReader<'a, S, R> {
    let reader = MvccReader::new(snap, resolver, ctx);
    match intents {
        RowIntents::None => reader.without_intents(),
        RowIntents::Of(holders) => reader.with_intent_holders(holders),
        RowIntents::All => reader,
    }
}

fn encode_times(times: &[HybridTime]) -> Vec<u8> {
    times.iter().flat_map(|t| t.0.to_be_bytes()).collect()
}

fn decode_times(v: &[u8]) -> Result<Vec<HybridTime>> {
    if !v.len().is_multiple_of(8) {
        return Err(keys::KeyError::Truncated.into());
    }
    Ok(v.chunks_exact(8).map(|c| HybridTime(u64::from_be_bytes(c.try_into().unwrap_or([0; 8])))).collect())
}

/// Blind patches ([`Tablet::write_if_live`]) a row may carry over its newest whole
/// version: reads (scans above all) merge every layer of a stack, which costs more
/// than the round trip a blind write saves, so the next one is folded with them
/// into the whole row (when it carries the table's layout), or refused: the
/// writer then reads the row and writes it whole.
pub const BLIND_CHAIN: usize = 2;

/// While storage is behind, a write waits the engine's delay per this many bytes.
const SLOW_UNIT_BYTES: usize = 64 << 10;
/// ...and at most this long (a client's request must not time out on it).
const MAX_SLOW: Duration = Duration::from_secs(2);

impl<E: KvEngine> Tablet<E> {
    /// Open an unreplicated tablet over `engine` (its writes go straight to it),
    /// stamping or checking the format version.
    pub fn open(id: TabletId, engine: E, clock: Arc<HybridClock>, partition: Partition, opts: TabletOptions, cutoff: HistoryCutoff) -> Result<Self> {
        let engine = Arc::new(engine);
        let log = Arc::new(DirectWrite::new(engine.clone(), opts.sync));
        Self::open_replicated(id, engine, log, clock, partition, cutoff)
    }

    /// Open a tablet over `engine` whose decided writes go to `log`, which applies
    /// them to `engine` (a Raft group's state machine).
    pub fn open_replicated(
        id: TabletId,
        engine: Arc<E>,
        log: Arc<dyn Replicator>,
        clock: Arc<HybridClock>,
        partition: Partition,
        cutoff: HistoryCutoff,
    ) -> Result<Self> {
        let expected = pinax_codec::FORMAT_VERSION;
        match engine.get(Cf::Meta, META_FORMAT_VERSION)? {
            Some(v) => {
                let found = <[u8; 4]>::try_from(&v[..]).map(u32::from_be_bytes).unwrap_or(0);
                if found != expected {
                    return Err(Error::FormatVersion { tablet_id: id, found, expected });
                }
            }
            None => {
                let mut b = engine.new_batch();
                b.put(Cf::Meta, META_FORMAT_VERSION, &expected.to_be_bytes());
                engine.write(b, WriteOptions { sync: true, ..Default::default() })?;
            }
        }
        let t = Tablet {
            id,
            engine,
            log,
            clock,
            partition,
            mvcc: MvccManager::default(),
            write_lock: Mutex::new(WriteState::default()),
            settled: Condvar::new(),
            cutoff,
            predicate_write_ht: AtomicU64::new(0),
            pressure: Mutex::new((None, WritePressure::None)),
            split: std::sync::OnceLock::new(),
            requests: AtomicU64::new(0),
        };
        if let Some(v) = t.engine.get(Cf::Meta, crate::split::META_SPLIT)? {
            t.retire(crate::split::SplitRecord::decode(&v)?);
        }
        t.load_predicate_write_ht()?;
        let txns = t.txns_with_intents()?;
        let deletions = t.load_deletions(&t.engine.snapshot())?;
        t.cutoff.set_deletions(deletions.committed.clone());
        let mut state = t.write_lock.lock();
        state.intent_txns.extend(txns);
        state.deletions = deletions;
        drop(state);
        Ok(t)
    }

    pub fn id(&self) -> TabletId {
        self.id
    }
    /// Count a request served by this tablet.
    pub fn note_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
    /// Requests counted since the tablet was opened here.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    pub fn engine(&self) -> &E {
        &self.engine
    }
    pub fn partition(&self) -> &Partition {
        &self.partition
    }
    pub fn clock(&self) -> &Arc<HybridClock> {
        &self.clock
    }
    pub fn history_cutoff(&self) -> &HistoryCutoff {
        &self.cutoff
    }

    fn check_keys(&self, ops: &[WriteOp]) -> Result<()> {
        for op in ops {
            if !self.partition.contains(&op.key) {
                return Err(Error::WrongTablet { tablet_id: self.id });
            }
        }
        Ok(())
    }

    /// Whether this replica leads the tablet (background work runs on leaders only).
    pub fn is_leader(&self) -> bool {
        self.log.leader_term().is_ok()
    }

    /// Whether this replica is the leader right now as far as it knows, without
    /// waiting for an election: [`Tablet::is_leader`] may wait seconds for one.
    pub fn leads_now(&self) -> bool {
        self.log.leads_now()
    }

    /// Retire the tablet: it split as `record` says (written to its engine with
    /// the split). Every later request fails with `TabletSplit`.
    pub fn retire(&self, record: crate::split::SplitRecord) {
        let _ = self.split.set(record);
    }

    /// How the tablet split, once it has.
    pub fn split_record(&self) -> Option<&crate::split::SplitRecord> {
        self.split.get()
    }

    /// Split the tablet: with every write held off (none in flight, none
    /// decided until this returns), `propose` replicates the split (its apply
    /// retires the tablet: [`Tablet::retire`]) and says where it split.
    pub fn split_drained(&self, propose: impl FnOnce(&Self) -> Result<crate::split::SplitRecord>) -> Result<crate::split::SplitRecord> {
        let guard = self.lock_drained()?;
        let res = propose(self);
        drop(guard);
        res
    }

    fn live(&self) -> Result<()> {
        match self.split.get() {
            Some(r) => Err(Error::Split { tablet_id: self.id, split: r.clone() }),
            None => Ok(()),
        }
    }

    /// Caller holds the write lock: fail unless this replica leads (and the
    /// tablet has not split); on the first write of a new term, reload what the
    /// lock's state knows about the engine (batches applied as a follower
    /// bypassed it).
    fn lead(&self, state: &mut WriteState) -> Result<()> {
        self.live()?;
        let term = self.log.leader_term()?;
        if state.term != term {
            state.intent_txns = self.txns_with_intents()?.into_iter().collect();
            state.clean.clear();
            state.stepped_over.clear();
            state.own_rows.clear();
            state.unindexed.clear();
            self.load_predicate_write_ht()?;
            state.deletions = self.load_deletions(&self.engine.snapshot())?;
            self.cutoff.set_deletions(state.deletions.committed.clone());
            state.term = term;
        }
        Ok(())
    }

    /// Take the write lock for a keyed write of `rows` (see
    /// [`WriteState::in_flight`]): wait until no write in flight touches them and
    /// no drain is on, then [`Tablet::lead`].
    fn lock_rows(&self, rows: &[u64]) -> Result<MutexGuard<'_, WriteState>> {
        let mut guard = self.write_lock.lock();
        while guard.draining > 0 || rows.iter().any(|h| guard.in_flight.contains_key(h)) {
            self.settled.wait(&mut guard);
        }
        self.lead(&mut guard)?;
        Ok(guard)
    }

    /// Take the write lock for a write that reads rows it does not know in
    /// advance: wait until no keyed write is in flight (the engine then shows every
    /// decided write), then [`Tablet::lead`]. Hold the guard until the write is applied.
    fn lock_drained(&self) -> Result<MutexGuard<'_, WriteState>> {
        let mut guard = self.write_lock.lock();
        guard.draining += 1;
        while guard.writes_in_flight > 0 {
            self.settled.wait(&mut guard);
        }
        guard.draining -= 1;
        // Keyed writers that waited for the drain try again once this guard is gone.
        self.settled.notify_all();
        self.lead(&mut guard)?;
        Ok(guard)
    }

    /// Replicate a keyed write's batch: its rows are in flight from here until the
    /// log has applied it; the write lock is let go as soon as the batch has its
    /// place in the log order.
    fn replicate_keyed(&self, mut guard: MutexGuard<'_, WriteState>, rows: Vec<u64>, ht: HybridTime, batch: OwnedBatch, request: u128) -> Result<()> {
        for h in &rows {
            *guard.in_flight.entry(*h).or_insert(0) += 1;
        }
        guard.writes_in_flight += 1;
        let _in_flight = InFlight { tablet: self, rows };
        let mut guard = Some(guard);
        self.log.replicate_then(ht, batch, request, &mut || drop(guard.take()))
    }

    /// The deletions of every row `snap` holds: applied ones (`Cf::Meta`) and a
    /// pending one (its intent on the range-lock key).
    fn load_deletions<S: Snapshot>(&self, snap: &S) -> Result<TabletDeletions> {
        let committed = match snap.get(Cf::Meta, META_DELETIONS)? {
            Some(v) => decode_times(&v)?,
            None => Vec::new(),
        };
        // (A cursor bounded to the key: an unbounded one reads on past its intents.)
        let start = &self.partition.start;
        let pending = intents_cursor_between(snap, start, start, true).intents(start)?.iter().find(|r| is_deletion_mark(r)).map(|r| (r.txn, r.seq));
        Ok(TabletDeletions { committed: Arc::new(committed), pending })
    }

    fn load_predicate_write_ht(&self) -> Result<()> {
        if let Some(v) = self.engine.get(Cf::Meta, META_PREDICATE_WRITE_HT)? {
            let ht = <[u8; 8]>::try_from(&v[..]).map(u64::from_be_bytes).map_err(|_| keys::KeyError::Truncated)?;
            self.predicate_write_ht.fetch_max(ht, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Single-tablet, non-transactional write: one batch, no intents, committed at a
    /// fresh hybrid time that is returned. With `read_ht`, any committed change to a
    /// written key after `read_ht` is a conflict (read-modify-write safety).
    /// `request`: the client's id of this write (0: none); the same request sent
    /// again after it was applied returns its time without writing anything.
    pub fn write_fast<R: TxnStatusResolver + ?Sized>(&self, request: u128, ops: &[WriteOp], read_ht: Option<HybridTime>, resolver: &R) -> Result<HybridTime> {
        self.check_keys(ops)?;
        self.admit_write(ops)?;
        let rows = row_hashes(ops);
        let mut guard = self.lock_rows(&rows)?;
        if let Some(ht) = self.log.applied_request(request) {
            return Ok(ht);
        }
        let mut batch = OwnedBatch::new();
        let patches = patches_of(ops)?;
        let mut stepped = Vec::new();
        let mut w = Writer { me: None, read_ht, resolver, batch: &mut batch, stepped_over: &mut stepped };
        let actions = self.check_ops(ops, &patches, guard.rows_intents(&rows), &guard.deletions, &mut w)?;
        guard.stepped_over.extend(stepped);
        let ht = self.mvcc.register_write(&self.clock);
        let mut vbuf = Vec::new();
        for i in key_order(ops) {
            let (op, action, p) = (&ops[i], actions[i], &patches[i]);
            let k = keys::version_key(&op.key, ht);
            match op.kind {
                WriteOpKind::Put | WriteOpKind::Insert => {
                    vbuf.clear();
                    keys::encode_put(&mut vbuf, &op.value);
                    batch.put(Cf::Regular, &k, &vbuf);
                }
                WriteOpKind::Patch => {
                    let stored = p.as_ref().map_or(&[][..], |p| p.stored);
                    vbuf.clear();
                    if action == Action::WriteWhole {
                        keys::encode_put_cols(&mut vbuf, stored);
                    } else {
                        keys::encode_patch_value(&mut vbuf, stored);
                    }
                    batch.put(Cf::Regular, &k, &vbuf);
                }
                WriteOpKind::Delete => batch.put(Cf::Regular, &k, &keys::encode_tombstone()),
                WriteOpKind::Lock | WriteOpKind::LockShared => {} // checked above; nothing to hold
            }
        }
        let res = self.replicate_keyed(guard, rows, ht, batch, request);
        self.mvcc.finish_write(ht);
        res?;
        Ok(ht)
    }

    /// A single-row write outside transactions (committed at once, as
    /// [`Tablet::write_fast`]) that takes effect only if the row is live: `op` a
    /// `Delete`, or a `Patch` whose row holds only the columns it assigns (`full`
    /// false: a blind patch; stored as one, except over a row already carrying
    /// [`BLIND_CHAIN`] patches: then folded with them into the whole row if it
    /// carries the table's layout and nothing else is in the way (see
    /// `check_live`), else refused with `NeedsRow`) or the whole row as
    /// read at `read_ht` (`full`). Another transaction's pending write of the row
    /// (a patch of columns this one depends on, for a patch) is a conflict, as is a
    /// commit after `read_ht`. Nothing is written unless `Applied` (the request
    /// id is then remembered, so a resend answers `Applied` without writing again).
    pub fn write_if_live<R: TxnStatusResolver + ?Sized>(
        &self,
        request: u128,
        op: &WriteOp,
        read_ht: Option<HybridTime>,
        full: bool,
        resolver: &R,
    ) -> Result<(HybridTime, LiveWrite)> {
        let (rows, mut guard) = self.lock_live_write(op)?;
        if let Some(ht) = self.log.applied_request(request) {
            return Ok((ht, LiveWrite::Applied));
        }
        let mut batch = OwnedBatch::new();
        let patches = patches_of(std::slice::from_ref(op))?;
        let patch = patches[0].as_ref();
        let mut stepped = Vec::new();
        let mut w = Writer { me: None, read_ht, resolver, batch: &mut batch, stepped_over: &mut stepped };
        let (state, folded) = self.check_live(&guard, op, patch, !full, guard.rows_intents(&rows), &mut w)?;
        guard.stepped_over.extend(stepped);
        let outcome = if !state.live {
            LiveWrite::Absent
        } else if patch.is_some() && !full && state.chain >= BLIND_CHAIN && folded.is_none() {
            LiveWrite::NeedsRow
        } else {
            LiveWrite::Applied
        };
        if outcome != LiveWrite::Applied && batch.is_empty() {
            return Ok((self.clock.now(), outcome));
        }
        let ht = self.mvcc.register_write(&self.clock);
        if outcome == LiveWrite::Applied {
            let mut v = Vec::new();
            match patch {
                Some(_) if folded.is_some() => keys::encode_put_cols(&mut v, folded.as_deref().unwrap_or_default()),
                Some(p) if state.whole => keys::encode_put_cols(&mut v, p.stored),
                Some(p) => keys::encode_patch_value(&mut v, p.stored),
                None => v.extend_from_slice(&keys::encode_tombstone()),
            }
            batch.put(Cf::Regular, &keys::version_key(&op.key, ht), &v);
        }
        // Only a write remembers its request id (a resend of one that wrote
        // nothing decides again).
        let res = self.replicate_keyed(guard, rows, ht, batch, if outcome == LiveWrite::Applied { request } else { 0 });
        self.mvcc.finish_write(ht);
        res?;
        Ok((ht, outcome))
    }

    /// [`Tablet::write_if_live`] as transaction `txn`'s statement `seq`: a blind
    /// `Patch` (holding only the columns it assigns) or a `Delete` of one row, written
    /// as an intent only if the row is live for the transaction (its own earlier
    /// writes decide; else the newest committed version, whatever the statement's
    /// read time: READ COMMITTED's EvalPlanQual, the write reading nothing). Another
    /// transaction's pending write of the row (a patch of a column this one assigns,
    /// for a patch) is a conflict naming it. A patch is refused with `NeedsRow` over a
    /// row the transaction wrote itself (its row would have to hold the whole row,
    /// see `txn_effect`) or one already carrying [`BLIND_CHAIN`] patches that it
    /// cannot fold (`check_live`; folded, its intent holds the whole row and the
    /// newest version's time, applied whole at the commit if nothing else wrote the
    /// row); the caller then reads the row and writes it the ordinary way. Nothing is written unless
    /// `Applied` (the request id is then remembered: a resend answers `Applied`).
    /// A patch intent names no base version, so it is never applied as a whole row.
    pub fn write_intent_if_live<R: TxnStatusResolver + ?Sized>(&self, request: u128, txn: TxnId, seq: u32, op: &WriteOp, resolver: &R) -> Result<LiveWrite> {
        let (rows, mut guard) = self.lock_live_write(op)?;
        if self.log.applied_request(request).is_some() {
            return Ok(LiveWrite::Applied);
        }
        let mut batch = OwnedBatch::new();
        let patches = patches_of(std::slice::from_ref(op))?;
        let patch = patches[0].as_ref();
        let mut stepped = Vec::new();
        let mut w = Writer { me: Some(txn), read_ht: None, resolver, batch: &mut batch, stepped_over: &mut stepped };
        let (state, folded) = self.check_live(&guard, op, patch, true, guard.rows_intents(&rows), &mut w)?;
        guard.stepped_over.extend(stepped);
        let outcome = if !state.live {
            LiveWrite::Absent
        } else if patch.is_some() && (state.own.is_some() || (state.chain >= BLIND_CHAIN && folded.is_none())) {
            LiveWrite::NeedsRow
        } else {
            LiveWrite::Applied
        };
        if outcome != LiveWrite::Applied && batch.is_empty() {
            return Ok(outcome);
        }
        if outcome == LiveWrite::Applied {
            let mut v = Vec::new();
            match patch {
                // Folded: the whole row as of the newest version (applied whole
                // if nothing else wrote the row before the commit).
                Some(_) if folded.is_some() => {
                    keys::encode_intent_value(&mut v, IntentKind::Patch, 0, &patch::encode_patch_intent(state.latest, folded.as_deref().unwrap_or_default()))
                }
                Some(p) => keys::encode_intent_value(&mut v, IntentKind::Patch, 0, &patch::encode_patch_intent(HybridTime::INVALID, p.stored)),
                None => keys::encode_intent_value(&mut v, IntentKind::Delete, 0, &[]),
            }
            batch.put(Cf::Intents, &keys::intent_key(&op.key, txn, seq), &v);
            batch.put(Cf::Intents, &keys::reverse_key(txn, &op.key), &[]);
            guard.note_intents(txn, &rows);
        }
        let request = if outcome == LiveWrite::Applied { request } else { 0 };
        self.replicate_keyed(guard, rows, self.clock.now(), batch, request)?;
        Ok(outcome)
    }

    /// The start of a write if live of `op` (a delete or a patch): checked, admitted,
    /// its row locked at the leader (its answer may be that nothing is there: only
    /// the leader may say so). Returns the row's hash and the write lock.
    fn lock_live_write(&self, op: &WriteOp) -> Result<(Vec<u64>, MutexGuard<'_, WriteState>)> {
        if !matches!(op.kind, WriteOpKind::Delete | WriteOpKind::Patch) {
            return Err(Error::InvalidRequest(format!("a write if live is a delete or a patch, not {:?}", op.kind)));
        }
        let ops = std::slice::from_ref(op);
        self.check_keys(ops)?;
        self.log.read_barrier()?;
        self.admit_write(ops)?;
        let rows = row_hashes(ops);
        let guard = self.lock_rows(&rows)?;
        Ok((rows, guard))
    }

    /// Write backpressure, before a client's write takes the write lock: while the
    /// engine's background work is behind, each write waits (so the writers slow
    /// down to what storage absorbs): the engine's delay per [`SLOW_UNIT_BYTES`]
    /// of `ops`, at least once and at most [`MAX_SLOW`]. A bulk load's large batches
    /// are held back by their size, not by their count, which a delay per write
    /// would hardly slow. When it is far behind, a write waits up to [`FULL_WAIT`]
    /// for that to pass (RocksDB stops writes for moments, while memtables wait
    /// for a flush), then is refused with a retryable error rather than queued.
    /// (Applying and removing intents, which reduce the work, are never held back.)
    fn admit_write(&self, ops: &[WriteOp]) -> Result<()> {
        let read = |fresh: bool| {
            let mut p = self.pressure.lock();
            if fresh || p.0.is_none_or(|at| at.elapsed() >= PRESSURE_REFRESH) {
                *p = (Some(Instant::now()), self.engine.write_pressure());
            }
            p.1.clone()
        };
        let mut pressure = read(false);
        let deadline = Instant::now() + FULL_WAIT;
        // (A full disk is not waited for: space comes back only when someone frees it.)
        while matches!(pressure, WritePressure::Full(_)) && Instant::now() < deadline {
            std::thread::sleep(FULL_RECHECK);
            pressure = read(true);
        }
        match pressure {
            WritePressure::None => Ok(()),
            WritePressure::Slow(d) => {
                let bytes: usize = ops.iter().map(|o| o.key.len() + o.value.len()).sum();
                let units = (bytes / SLOW_UNIT_BYTES).max(1) as u32;
                std::thread::sleep(d.saturating_mul(units).min(MAX_SLOW));
                Ok(())
            }
            WritePressure::Full(why) => {
                Err(Error::Unavailable { tablet_id: self.id, message: format!("storage is behind ({why}); writes are refused until it catches up") })
            }
            WritePressure::NoSpace(why) => Err(Error::DiskFull { tablet_id: self.id, message: why }),
        }
    }

    /// Write provisional records for transaction `txn`, statement `seq`. Conflicts
    /// with other transactions' intents, or with commits after `read_ht`, fail.
    /// `request` as for [`Tablet::write_fast`].
    pub fn write_intents<R: TxnStatusResolver + ?Sized>(
        &self,
        request: u128,
        txn: TxnId,
        seq: u32,
        read_ht: HybridTime,
        ops: &[WriteOp],
        resolver: &R,
    ) -> Result<()> {
        self.check_keys(ops)?;
        self.admit_write(ops)?;
        let rows = row_hashes(ops);
        let mut guard = self.lock_rows(&rows)?;
        if self.log.applied_request(request).is_some() {
            return Ok(());
        }
        let mut batch = OwnedBatch::new();
        let patches = patches_of(ops)?;
        let mut stepped = Vec::new();
        let mut w = Writer { me: Some(txn), read_ht: Some(read_ht), resolver, batch: &mut batch, stepped_over: &mut stepped };
        let actions = self.check_ops(ops, &patches, guard.rows_intents(&rows), &guard.deletions, &mut w)?;
        guard.stepped_over.extend(stepped);
        let mut vbuf = Vec::new();
        // In key order (see `key_order`): the intents, then the reverse index.
        let order = key_order(ops);
        let written: Vec<usize> = order.iter().copied().filter(|i| actions[*i] != Action::Skip).collect();
        for &i in &written {
            let (op, action, p) = (&ops[i], actions[i], &patches[i]);
            let strength = [op.strength() as u8];
            let stored = p.as_ref().map_or(&[][..], |p| p.stored);
            let intent;
            let (kind, data): (IntentKind, &[u8]) = match (op.kind, action) {
                (WriteOpKind::Put | WriteOpKind::Insert, _) => (IntentKind::Put, &op.value),
                (WriteOpKind::Patch, Action::WritePatch(base)) => {
                    intent = patch::encode_patch_intent(base, stored);
                    (IntentKind::Patch, &intent)
                }
                (WriteOpKind::Patch, _) => (IntentKind::Put, patch_row(stored)?),
                (WriteOpKind::Delete, _) => (IntentKind::Delete, &[]),
                (WriteOpKind::Lock | WriteOpKind::LockShared, _) => (IntentKind::Lock, &strength),
            };
            vbuf.clear();
            keys::encode_intent_value(&mut vbuf, kind, 0, data);
            batch.put(Cf::Intents, &keys::intent_key(&op.key, txn, seq), &vbuf);
        }
        if guard.unindexed_write(txn) {
            batch.put(Cf::Intents, &keys::unindexed_key(txn), &[]);
        } else {
            for &i in &written {
                batch.put(Cf::Intents, &keys::reverse_key(txn, &ops[i].key), &[]);
            }
        }
        guard.note_intents(txn, &rows);
        self.replicate_keyed(guard, rows, self.clock.now(), batch, request)
    }

    /// Point read. It waits for the writes in flight on its own row only, not
    /// for the tablet's safe time ([`Tablet::row_snapshot`]).
    pub fn read<R: TxnStatusResolver + ?Sized>(&self, ctx: ReadContext, key: &[u8], resolver: &R) -> Result<Option<Vec<u8>>> {
        let term = self.log.read_barrier()?;
        let (snap, intents, deletions) = self.row_snapshot(term, ctx.read_ht, key)?;
        let value = reader_for(&snap, resolver, ctx, intents).with_deletions(&deletions).get(key)?;
        Ok(value)
    }

    /// Bounded scan; bounds are clipped to the tablet's partition.
    pub fn scan<R: TxnStatusResolver + ?Sized>(&self, ctx: ReadContext, spec: &ScanSpec, resolver: &R) -> Result<ScanResult> {
        let mut spec = spec.clone();
        if spec.start < self.partition.start {
            spec.start = self.partition.start.clone();
            spec.point = false;
        }
        if let Some(pend) = &self.partition.end {
            if spec.end.as_ref().is_none_or(|e| e > pend) {
                spec.end = Some(pend.clone());
            }
        }
        let term = self.log.read_barrier()?;
        let (snap, intents, deletions) = if spec.point && !spec.reverse {
            self.row_snapshot(term, ctx.read_ht, &spec.start)?
        } else {
            self.mvcc.wait_for_safe_time(&self.clock, ctx.read_ht);
            self.snapshot(term)?
        };
        let result = pinax_pushdown::scan(&reader_for(&snap, resolver, ctx, intents).with_deletions(&deletions), &spec)?;
        Ok(result)
    }

    /// [`Tablet::snapshot`] for a read of the row `key` at `read_ht`: once no
    /// write of that row is in flight. A write committed at or before `read_ht`
    /// is a keyed write (the only ones that take a commit time on the spot), and
    /// its rows are in flight from its decision, under the write lock, until the
    /// engine shows it; a write decided after the clock moves past `read_ht`
    /// commits above it. So the snapshot shows every version of the row at or
    /// before `read_ht`, without waiting for writes of other rows (the tablet's
    /// safe time: on a busy tablet, every read would wait for an fsync).
    fn row_snapshot(&self, term: u64, read_ht: HybridTime, key: &[u8]) -> Result<(E::Snapshot<'_>, RowIntents, TabletDeletions)> {
        self.clock.update(read_ht);
        let row = row_hash(key);
        let mut guard = self.write_lock.lock();
        while guard.in_flight.contains_key(&row) {
            self.settled.wait(&mut guard);
        }
        self.snapshot_locked(guard, term, Some(row))
    }

    /// A snapshot, whether it may hold intents, and the deletions of every row it
    /// holds (decided atomically with it). The first read of a leader term that
    /// comes before any write reloads what the write lock's state knows about the
    /// engine ([`Tablet::lead`]: batches applied as a follower bypassed it).
    fn snapshot(&self, term: u64) -> Result<(E::Snapshot<'_>, RowIntents, TabletDeletions)> {
        self.snapshot_locked(self.write_lock.lock(), term, None)
    }

    /// [`Tablet::snapshot`] with the write lock taken; for a read of the one row
    /// with hash `row` if given (what to read of intents is then about that row:
    /// [`WriteState::row_intents`]).
    fn snapshot_locked(&self, mut guard: MutexGuard<'_, WriteState>, term: u64, row: Option<u64>) -> Result<(E::Snapshot<'_>, RowIntents, TabletDeletions)> {
        self.live()?;
        if guard.term != term {
            self.lead(&mut guard)?;
        }
        let intents = match row {
            Some(row) => guard.row_intents(row),
            None if guard.intent_txns.is_empty() => RowIntents::None,
            None => RowIntents::All,
        };
        Ok((self.engine.snapshot(), intents, guard.deletions.clone()))
    }

    /// Delete every row of the tablet as transaction `txn`'s statement `seq`, for a
    /// statement reading at `read_ht` (`DELETE FROM t` with no condition, done in
    /// the tablet: no row is shipped or written one by one). Returns how many rows
    /// it deletes: those live at `read_ht`.
    ///
    /// Writes one intent, on the tablet's range-lock key; applied, it is a
    /// whole-tablet tombstone at the commit time (`TabletDeletions`): reads at or
    /// after it find every older row deleted, history below it stays for older
    /// reads until the history cutoff passes it (compactions then drop those
    /// rows). Before writing, every other transaction's intents here are
    /// resolved: a pending one is a conflict (the caller waits for it), as is
    /// anything committed after `read_ht` (a row written or deleted since, or
    /// another such deletion: the statement runs again at a newer time). While it
    /// is pending, every other transaction's write here conflicts with it. The
    /// transaction must have written nothing here before (refused); its later
    /// statements find no row here but those they write. Sent again (its answer
    /// lost), it counts again and writes nothing.
    pub fn delete_all<R: TxnStatusResolver + ?Sized>(&self, txn: TxnId, seq: u32, read_ht: HybridTime, resolver: &R) -> Result<u64> {
        let mut guard = self.lock_drained()?;
        let again = guard.deletions.pending.is_some_and(|(t, _)| t == txn);
        if !again {
            let mut others: Vec<TxnId> = guard.intent_txns.iter().copied().collect();
            others.sort_unstable();
            for other in others {
                if other == txn {
                    return Err(Error::InvalidRequest("a transaction deletes every row of a tablet only before writing anything to it".into()));
                }
                match resolver.status(other, self.clock.now())? {
                    TxnStatus::Pending => return Err(Error::WriteConflict { tablet_id: self.id, other_txn: Some(other), committed_at: None }),
                    TxnStatus::Committed { commit_ht } => {
                        self.clock.update(commit_ht);
                        self.finish_txn_held(&mut guard, other, Some(commit_ht))?;
                    }
                    TxnStatus::Aborted => {
                        self.finish_txn_held(&mut guard, other, None)?;
                    }
                }
            }
        }
        if let Some(t) = guard.deletions.committed.last().filter(|t| **t > read_ht) {
            return Err(Error::WriteConflict { tablet_id: self.id, other_txn: None, committed_at: Some(*t) });
        }
        // Count the rows live at read_ht: each row's newest version (all are at or
        // before read_ht, else a conflict) not a tombstone nor older than the
        // newest deletion of every row.
        let hidden_below = guard.deletions.committed.last().copied().unwrap_or(HybridTime::INVALID);
        let count = {
            let snap = self.engine.snapshot();
            let mut it = snap.iter(Cf::Regular, IterOptions::default());
            it.seek_to_first();
            let mut count = 0u64;
            let mut row: Vec<u8> = Vec::new();
            while it.valid()? {
                let (esc, ht) = keys::split_version_key(it.key())?;
                if ht > read_ht {
                    return Err(Error::WriteConflict { tablet_id: self.id, other_txn: None, committed_at: Some(ht) });
                }
                if row.is_empty() || esc != &row[..] {
                    row.clear();
                    row.extend_from_slice(esc);
                    if ht >= hidden_below && !matches!(keys::decode_value(it.value())?, keys::StoredValue::Tombstone) {
                        count += 1;
                    }
                }
                it.next();
            }
            count
        };
        if again {
            return Ok(count);
        }
        let mut v = Vec::new();
        keys::encode_intent_value(&mut v, IntentKind::Lock, 0, &[DELETE_ALL_MARK]);
        let mut batch = OwnedBatch::new();
        batch.put(Cf::Intents, &keys::intent_key(&self.partition.start, txn, seq), &v);
        batch.put(Cf::Intents, &keys::reverse_key(txn, &self.partition.start), &[]);
        self.log.replicate(self.clock.now(), batch, 0)?;
        if !guard.intent_txns.insert(txn) {
            guard.note_own_rows(txn, &[row_hash(&self.partition.start)]);
        }
        guard.deletions.pending = Some((txn, seq));
        Ok(count)
    }
}
