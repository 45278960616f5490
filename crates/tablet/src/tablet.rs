//! The data tablet.

use crate::error::{Error, Result};
use crate::mvcc_manager::MvccManager;
use crate::replication::{DirectWrite, Replicator};
use crate::ops::{WriteOp, WriteOpKind};
use pinax_proto::{LiveWrite, LockStrength};
use parking_lot::{Condvar, Mutex, MutexGuard};
use pinax_codec::heap_tuple;
use pinax_codec::keys::{self, IntentKind};
use pinax_common::{HybridClock, HybridTime, TabletId, TxnId};
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, OwnedBatch, Snapshot, WriteBatch, WriteOptions, WritePressure};
use pinax_mvcc::gc::HistoryCutoff;
use pinax_codec::patch;
use pinax_mvcc::read::{holders_intents, intents_cursor, intents_cursor_between, txn_effect, IntentRecord, KeyCursor, TxnEffect, Version};
use pinax_mvcc::{MvccReader, ReadContext, ScanResult, ScanSpec, TabletDeletions, TxnStatus, TxnStatusResolver};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const META_FORMAT_VERSION: &[u8] = b"format_version";
/// Newest commit time of a SERIALIZABLE writer applied here (8 bytes, big-endian),
/// written with the batch that applies its intents, so every replica knows it.
const META_PREDICATE_WRITE_HT: &[u8] = b"predicate_write_ht";
/// Commit times of applied deletions of every row ([`Tablet::delete_all`]),
/// oldest first (8 bytes each, big-endian), written with the batch that applies one.
const META_DELETIONS: &[u8] = b"deleted_every_row";
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
}

/// How long a reading of the engine's write pressure is used.
const PRESSURE_REFRESH: Duration = Duration::from_millis(50);
/// How long a write waits while storage is far behind before it is refused, and
/// how often it looks again meanwhile.
const FULL_WAIT: Duration = Duration::from_millis(500);
const FULL_RECHECK: Duration = Duration::from_millis(10);

/// State kept under the tablet's write lock.
#[derive(Default)]
struct WriteState {
    /// Transactions that may still have intents here: a superset of those that do
    /// (a transaction leaves when `resolve_txn` removed all its intents). Every
    /// change to the intents CF happens under the lock, so a snapshot taken under
    /// it with this set empty holds no intents at all.
    intent_txns: HashSet<TxnId>,
    /// Transactions whose intents were all written in this leader term, and
    /// those whose pending patch another writer stepped over (both kept for the
    /// term only). A patch of a transaction in the first and not the second was
    /// written over the newest version and nothing was written over it since:
    /// applied, it is the whole row (see `resolve_txn_locked`), found without
    /// looking at the stored versions.
    clean: HashSet<TxnId>,
    stepped_over: HashSet<TxnId>,
    /// Per transaction whose intents were all written in this leader term (a
    /// subset of `clean`, kept as long): the hashes of the rows it holds intents
    /// on (a superset; `None` past [`OWN_ROWS_MAX`]). A write or a point read of
    /// rows no transaction here wrote has no intent to meet: it skips looking for
    /// them (see [`WriteState::needs_intents`]).
    own_rows: rustc_hash::FxHashMap<TxnId, Option<rustc_hash::FxHashSet<u64>>>,
    /// Transactions whose writes in this term put no reverse-index entries (see
    /// [`WriteState::unindexed_write`]).
    unindexed: HashSet<TxnId>,
    /// The leader term `intent_txns` was loaded in (0: not yet). Followers apply
    /// batches without this lock, so a replica that becomes leader reloads it.
    term: u64,
    /// Keyed writes in flight: a client's write (`write_fast`, `write_intents`) is
    /// decided under the lock, handed to the log in decision order, and the lock is
    /// let go while the log makes it durable and applies it (so that writes of
    /// other rows are decided meanwhile and share the log's fsync). Until it is
    /// applied the engine does not show it, so a write of one of its rows waits:
    /// here are the hashes of those rows (with counts; a collision only makes a
    /// write wait longer)...
    in_flight: rustc_hash::FxHashMap<u64, u32>,
    /// ...and how many such writes there are. Every other writer (resolving or
    /// rolling back a transaction's intents) reads the engine for rows it does not
    /// know in advance: it waits until none is in flight (`drain`), and holds the
    /// lock until its own batch is applied.
    writes_in_flight: usize,
    /// Writers draining: keyed writes wait meanwhile (no starving the drain).
    draining: usize,
    /// Deletions of every row: applied ones, and the pending one (whose intent
    /// is on the range-lock key). Reloaded with `intent_txns`.
    deletions: TabletDeletions,
}

/// What a lookup of one row's intents reads ([`WriteState::row_intents`]).
#[derive(Clone, Debug, PartialEq, Eq)]
enum RowIntents {
    /// No transaction holds intents on the row: the intents CF is not read.
    None,
    /// Only these transactions may (sorted by id).
    Of(Vec<TxnId>),
    /// Any transaction may: every intent of the row is read.
    All,
}

/// Rows a transaction's intents here are tracked on ([`WriteState::own_rows`]), at
/// most: past that (a bulk load of millions of rows into one tablet) its writes look
/// for intents again.
const OWN_ROWS_MAX: usize = 1 << 19;

impl WriteState {
    /// Whether a write (or a read) of rows `rows` (their hashes) may meet intents,
    /// of any transaction, the writer's own included: some transaction holding
    /// intents here either has its rows untracked (reloaded at a term's start, or
    /// past [`OWN_ROWS_MAX`]) or tracked with one of these among them. Another
    /// transaction's intents on other rows are nothing to meet (a pending deletion
    /// of every row is checked apart; a SERIALIZABLE range lock is an intent on the
    /// tablet's first key, a row tracked like any other). A row written by many
    /// short transactions has a tombstone per resolved intent until compaction: a
    /// walk of its intents steps over all of them, a lookup through its holders
    /// ([`WriteState::row_intents`]) over none.
    fn needs_intents(&self, rows: &[u64]) -> bool {
        self.intent_txns.iter().any(|t| match self.own_rows.get(t) {
            Some(Some(own)) => rows.iter().any(|h| own.contains(h)),
            _ => true,
        })
    }

    /// What a lookup of the intents of the one row with hash `row` must read:
    /// [`WriteState::needs_intents`] for one row, and when every transaction holding
    /// intents here has its rows tracked, which of them may hold some on it (sorted
    /// by id, the intent keys' order). Their intents are then sought one by one
    /// ([`holders_intents`]) rather than found by walking every intent key of
    /// the row, tombstones of resolved ones included.
    fn row_intents(&self, row: u64) -> RowIntents {
        let mut holders = Vec::new();
        for t in &self.intent_txns {
            match self.own_rows.get(t) {
                Some(Some(own)) if own.contains(&row) => holders.push(*t),
                Some(Some(_)) => {}
                _ => return RowIntents::All,
            }
        }
        if holders.is_empty() {
            return RowIntents::None;
        }
        holders.sort_unstable();
        RowIntents::Of(holders)
    }

    /// What a write of rows `rows` (their hashes) reads of intents: through their
    /// holders for one row ([`WriteState::row_intents`]), else every intent of its
    /// keys if [`WriteState::needs_intents`].
    fn rows_intents(&self, rows: &[u64]) -> RowIntents {
        match rows {
            [row] => self.row_intents(*row),
            _ if self.needs_intents(rows) => RowIntents::All,
            _ => RowIntents::None,
        }
    }

    /// `txn` wrote intents on `rows` (their hashes): it may hold intents here from
    /// now on; if these are its first, its rows are tracked from here.
    fn note_intents(&mut self, txn: TxnId, rows: &[u64]) {
        if self.intent_txns.insert(txn) {
            self.clean.insert(txn);
            self.own_rows.insert(txn, Some(Default::default()));
        }
        self.note_own_rows(txn, rows);
    }

    /// Whether a write of `txn` leaves its reverse index out (each such batch
    /// carries the [`keys::unindexed_key`] mark instead): once the transaction,
    /// alone in the tablet, holds intents on more rows than a keyed resolution
    /// takes (a bulk load: its resolution walks the intents anyway, see
    /// [`Tablet::resolve_walking`]), and from then on in this term. The entries
    /// were a third of a bulk load's memtable inserts.
    fn unindexed_write(&mut self, txn: TxnId) -> bool {
        if self.unindexed.contains(&txn) {
            return true;
        }
        let alone = self.intent_txns.iter().all(|t| *t == txn);
        let large = match self.own_rows.get(&txn) {
            Some(Some(own)) => own.len() >= RESOLVE_KEYED_MAX_KEYS,
            Some(None) => true,
            None => false,
        };
        if alone && large {
            self.unindexed.insert(txn);
        }
        alone && large
    }

    fn note_own_rows(&mut self, txn: TxnId, rows: &[u64]) {
        if let Some(slot) = self.own_rows.get_mut(&txn) {
            if let Some(own) = slot {
                own.extend(rows.iter().copied());
                if own.len() > OWN_ROWS_MAX {
                    *slot = None;
                }
            }
        }
    }
}

/// `txn`'s reverse index in `snap` (its entries `'R' ++ txn ++ esc(user key)`),
/// positioned on the first, and the length of the prefix before the key.
fn reverse_index<S: Snapshot>(snap: &S, txn: TxnId) -> (S::Iter<'_>, usize) {
    let prefix = keys::reverse_prefix(txn);
    let upper = keys::prefix_upper_bound(&prefix);
    let len = prefix.len();
    let mut it = snap.iter(Cf::Intents, IterOptions { lower: Some(prefix), upper, prefix_same_as_start: true });
    it.seek_to_first();
    (it, len)
}

/// A reader of `snap` that reads what `intents` says of the intents CF.
fn reader_for<'a, S: Snapshot, R: TxnStatusResolver + ?Sized>(snap: &'a S, resolver: &'a R, ctx: ReadContext, intents: RowIntents) -> MvccReader<'a, S, R> {
    let reader = MvccReader::new(snap, resolver, ctx);
    match intents {
        RowIntents::None => reader.without_intents(),
        RowIntents::Of(holders) => reader.with_intent_holders(holders),
        RowIntents::All => reader,
    }
}

/// The hashes of the rows a keyed write touches (its ops' keys).
fn row_hashes(ops: &[WriteOp]) -> Vec<u64> {
    ops.iter().map(|op| row_hash(&op.key)).collect()
}

/// The positions of `ops` in key order (a stable sort: ops on one key keep their
/// order, and the later one still wins). A batch's records are inserted into the
/// memtable in the order they are put; RocksDB's skip list starts each insert
/// from where the previous one went, so records in key order (an insert's random
/// keys sorted) cost a few steps each rather than a search from the top.
fn key_order(ops: &[WriteOp]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    if ops.windows(2).any(|w| w[0].key > w[1].key) {
        order.sort_by(|a, b| ops[*a].key.cmp(&ops[*b].key));
    }
    order
}

/// The hash of a row's user key in [`WriteState::in_flight`].
fn row_hash(key: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(key)
}

/// A keyed write in flight (see [`WriteState::in_flight`]): its rows are released
/// when it is dropped, once the log has applied the write or failed.
struct InFlight<'t, E: KvEngine> {
    tablet: &'t Tablet<E>,
    rows: Vec<u64>,
}

impl<E: KvEngine> Drop for InFlight<'_, E> {
    fn drop(&mut self) {
        let mut g = self.tablet.write_lock.lock();
        for h in &self.rows {
            if let std::collections::hash_map::Entry::Occupied(mut e) = g.in_flight.entry(*h) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
        }
        g.writes_in_flight -= 1;
        drop(g);
        self.tablet.settled.notify_all();
    }
}

/// The strength another transaction's pending intent holds its row with: a put is
/// NO KEY UPDATE (an update keeping the key), a delete UPDATE, a lock intent what its
/// data byte says (no byte: UPDATE).
fn intent_strength(r: &IntentRecord) -> LockStrength {
    match r.kind {
        IntentKind::Put | IntentKind::Patch => LockStrength::NoKeyUpdate,
        IntentKind::Delete => LockStrength::Update,
        IntentKind::Lock => LockStrength::from_byte(r.data.first().copied()).unwrap_or(LockStrength::Update),
    }
}

/// Whether `r` holds a pending deletion of every row of the tablet.
fn is_deletion_mark(r: &IntentRecord) -> bool {
    r.kind == IntentKind::Lock && r.data == [DELETE_ALL_MARK]
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

/// The outcome of rewriting a transaction's intents: a rewrite that failed may have
/// applied part of its batches (the mark of a deletion of every row, say), so what
/// the write lock's state knows about the engine is reloaded ([`Tablet::lead`])
/// before the next decision or read.
fn reload_on_error<T>(guard: &mut WriteState, res: Result<T>) -> Result<T> {
    if res.is_err() {
        guard.term = 0;
    }
    res
}

/// Resolving at least this many intents at once compacts the intents CF afterwards:
/// a large transaction leaves as many tombstones, which every later intents
/// iterator over the range would otherwise step over one by one.
const COMPACT_AFTER_RESOLVING: usize = 20_000;

/// Rewriting a transaction's intents (commit, abort, rollback to a savepoint)
/// replicates a log entry whenever the batch reaches this size.
const REWRITE_CHUNK_BYTES: usize = 256 << 10;

/// A keyed resolution of at most this many keys looks each key's intents up
/// through the bloom filters (a seek each); more are stepped through in order.
const PROBED_RESOLUTION_KEYS: usize = 64;

/// Resolving a transaction with intents on at most this many keys here (and
/// changes that fit one entry) is a keyed write of those rows: see
/// [`Tablet::resolve_txn_keyed`].
const RESOLVE_KEYED_MAX_KEYS: usize = 4096;

/// What a write batch's checks read with: a cursor over the regular column
/// family, and one over the intents of the batch's key range if the tablet holds
/// intents at all.
struct Probes<'s, S: Snapshot + 's> {
    regular: KeyCursor<S::Iter<'s>>,
    intents: IntentProbe<'s, S>,
    /// The newest committed deletion of every row, and whether the writing
    /// transaction deleted every row itself (see [`Tablet::deletion_in_the_way`]).
    deleted: Option<HybridTime>,
    own_deletion: bool,
}

/// How [`Probes`] look up a key's intents.
enum IntentProbe<'s, S: Snapshot + 's> {
    /// No transaction holds intents on the keys probed.
    None,
    /// Any may: every intent of a key is read.
    Cursor(KeyCursor<S::Iter<'s>>),
    /// For probes of one row: only these transactions may hold intents on it
    /// ([`WriteState::row_intents`]), and only theirs are read ([`holders_intents`]).
    Holders(&'s S, Vec<TxnId>),
}

/// The [`IntentProbe`] for keys `[first, last]` (one row if `intents` names its
/// holders); `probe`: the cursor probes keys in no order ([`KeyCursor::probing`]).
fn intent_probe<'s, S: Snapshot>(snap: &'s S, intents: RowIntents, first: &[u8], last: &[u8], probe: bool) -> IntentProbe<'s, S> {
    match intents {
        RowIntents::None => IntentProbe::None,
        RowIntents::Of(holders) => IntentProbe::Holders(snap, holders),
        RowIntents::All => IntentProbe::Cursor(intents_cursor_between(snap, first, last, probe)),
    }
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

/// What the tablet knows about one key while deciding a write batch.
#[derive(Clone, Copy)]
struct KeyState {
    live: bool,
    /// The writing transaction (or an earlier op of this batch) already wrote it,
    /// holding the row with this strength.
    own: Option<LockStrength>,
    /// A patch of this row is stored as the whole row (see [`Tablet::resolve_key`]).
    whole: bool,
    /// Time of the newest committed version, if the writer's row holds all of it
    /// (INVALID: none, or it does not: concurrent patches were stepped over).
    latest: HybridTime,
    /// Committed patches over the newest whole version (counted for patches only,
    /// up to `patch::MAX_CHAIN + 1`).
    chain: usize,
}

/// What a write batch does with one of its ops.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    Skip,
    Write,
    /// A patch stored as the whole row its writer formed.
    WriteWhole,
    /// A patch, over the newest version at this time.
    WritePatch(HybridTime),
}

/// A patch op, parsed: the attributes it depends on (written ones included) and
/// the patch to store.
struct PatchOp<'a> {
    deps: Vec<u16>,
    stored: &'a [u8],
    /// The table's row layout, if the writer sent it (empty: not sent): the
    /// tablet may then fold the row's patches ([`heap_tuple::fold`]).
    layout: Vec<(i16, u8)>,
}

/// Per op of a batch, its patch if it is a patch op (parsed once per batch).
fn patches_of(ops: &[WriteOp]) -> Result<Vec<Option<PatchOp<'_>>>> {
    ops.iter()
        .map(|op| {
            if op.kind != WriteOpKind::Patch {
                return Ok(None);
            }
            let d = patch::decode_patch_op(&op.value).map_err(|e| Error::InvalidRequest(format!("bad patch: {e}")))?;
            Ok(Some(PatchOp { deps: patch::union(&d.deps, &patch::decode_patch(d.patch)?.0), stored: d.patch, layout: d.layout }))
        })
        .collect()
}

/// The row of a stored patch (the whole row its writer formed).
fn patch_row(stored: &[u8]) -> Result<&[u8]> {
    Ok(patch::patch_row(stored)?)
}

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
    pub fn open_replicated(id: TabletId, engine: Arc<E>, log: Arc<dyn Replicator>, clock: Arc<HybridClock>, partition: Partition, cutoff: HistoryCutoff) -> Result<Self> {
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
        let t = Tablet { id, engine, log, clock, partition, mvcc: MvccManager::default(), write_lock: Mutex::new(WriteState::default()), settled: Condvar::new(), cutoff, predicate_write_ht: AtomicU64::new(0), pressure: Mutex::new((None, WritePressure::None)) };
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

    /// Caller holds the write lock: fail unless this replica leads; on the first
    /// write of a new term, reload what the lock's state knows about the engine
    /// (batches applied as a follower bypassed it).
    fn lead(&self, state: &mut WriteState) -> Result<()> {
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
        let actions = self.check_ops(ops, &patches, None, read_ht, resolver, &mut batch, guard.rows_intents(&rows), &guard.deletions, &mut stepped)?;
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
    /// `resolve_live`), else refused with `NeedsRow`) or the whole row as
    /// read at `read_ht` (`full`). Another transaction's pending write of the row
    /// (a patch of columns this one depends on, for a patch) is a conflict, as is a
    /// commit after `read_ht`. Nothing is written unless `Applied` (the request
    /// id is then remembered, so a resend answers `Applied` without writing again).
    pub fn write_if_live<R: TxnStatusResolver + ?Sized>(&self, request: u128, op: &WriteOp, read_ht: Option<HybridTime>, full: bool, resolver: &R) -> Result<(HybridTime, LiveWrite)> {
        let (rows, mut guard) = self.lock_live_write(op)?;
        if let Some(ht) = self.log.applied_request(request) {
            return Ok((ht, LiveWrite::Applied));
        }
        let mut batch = OwnedBatch::new();
        let patches = patches_of(std::slice::from_ref(op))?;
        let patch = patches[0].as_ref();
        let mut stepped = Vec::new();
        let (state, folded) = self.resolve_live(&guard, op, None, read_ht, patch, !full, guard.rows_intents(&rows), resolver, &mut batch, &mut stepped)?;
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
    /// cannot fold (`resolve_live`; folded, its intent holds the whole row and the
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
        let (state, folded) = self.resolve_live(&guard, op, Some(txn), None, patch, true, guard.rows_intents(&rows), resolver, &mut batch, &mut stepped)?;
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
                Some(_) if folded.is_some() => keys::encode_intent_value(&mut v, IntentKind::Patch, 0, &patch::encode_patch_intent(state.latest, folded.as_deref().unwrap_or_default())),
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

    /// [`Tablet::resolve_key`] for the one row of a write if live (`intents`:
    /// what to read of its intents). With it, for a blind patch over a row
    /// already carrying [`BLIND_CHAIN`] patches, the whole row the patch makes of
    /// the newest committed version, as a stored patch (its attributes, the row),
    /// when the writer sent the table's layout and nothing else is in the way
    /// (no other transaction's write, resolved here or pending; not the
    /// transaction's own row). None: the patch is refused (`NeedsRow`).
    #[allow(clippy::too_many_arguments)]
    fn resolve_live<R: TxnStatusResolver + ?Sized>(&self, guard: &WriteState, op: &WriteOp, me: Option<TxnId>, read_ht: Option<HybridTime>, patch: Option<&PatchOp<'_>>, blind: bool, intents: RowIntents, resolver: &R, batch: &mut OwnedBatch, stepped: &mut Vec<TxnId>) -> Result<(KeyState, Option<Vec<u8>>)> {
        let snap = self.engine.snapshot();
        let regular = KeyCursor::probing(snap.iter(Cf::Regular, IterOptions { prefix_same_as_start: true, ..IterOptions::default() }));
        let intents = intent_probe(&snap, intents, &op.key, &op.key, true);
        let (deleted, own_deletion) = self.deletion_in_the_way(me, &guard.deletions, resolver)?;
        let mut probes: Probes<E::Snapshot<'_>> = Probes { regular, intents, deleted, own_deletion };
        let state = self.resolve_key(&mut probes, &op.key, me, read_ht, op.kind, op.strength(), patch.map(|p| &p.deps[..]), blind, resolver, batch, stepped)?;
        let Some(p) = patch.filter(|p| blind && !p.layout.is_empty()) else { return Ok((state, None)) };
        if !state.live || state.own.is_some() || state.chain < BLIND_CHAIN || state.latest == HybridTime::INVALID || !batch.is_empty() || !stepped.is_empty() {
            return Ok((state, None));
        }
        let Some((patches, base)) = probes.regular.committed_layers(&op.key)? else { return Ok((state, None)) };
        let (cols, row) = patch::decode_patch(p.stored)?;
        let mut layers: Vec<(Vec<u16>, &[u8])> = vec![(cols, row)];
        for stored in &patches {
            layers.push(patch::decode_patch(stored)?);
        }
        let refs: Vec<(&[u16], &[u8])> = layers.iter().map(|(c, r)| (&c[..], *r)).collect();
        let Some(whole) = heap_tuple::fold(&p.layout, &refs, &base) else { return Ok((state, None)) };
        let mut stored = Vec::with_capacity(whole.len() + 2 + 2 * layers[0].0.len());
        patch::encode_patch(&mut stored, &layers[0].0, &whole);
        Ok((state, Some(stored)))
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
            WritePressure::Full(why) => Err(Error::Unavailable { tablet_id: self.id, message: format!("storage is behind ({why}); writes are refused until it catches up") }),
        }
    }

    /// Write provisional records for transaction `txn`, statement `seq`. Conflicts
    /// with other transactions' intents, or with commits after `read_ht`, fail.
    /// `request` as for [`Tablet::write_fast`].
    pub fn write_intents<R: TxnStatusResolver + ?Sized>(&self, request: u128, txn: TxnId, seq: u32, read_ht: HybridTime, ops: &[WriteOp], resolver: &R) -> Result<()> {
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
        let actions = self.check_ops(ops, &patches, Some(txn), Some(read_ht), resolver, &mut batch, guard.rows_intents(&rows), &guard.deletions, &mut stepped)?;
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

    /// Check every op of a batch (conflicts, uniqueness), adding the resolution of
    /// other transactions' intents to `batch`. Caller holds the write lock.
    /// `intents`: what to read of intents ([`WriteState::rows_intents`] of the ops' rows).
    /// Returns, per op, what to write: nothing (a lock on a key the transaction
    /// already wrote: its write intent excludes others already, and a lock
    /// intent of the same statement would replace it), the op, or for a patch
    /// perhaps the whole row.
    #[allow(clippy::too_many_arguments)]
    fn check_ops<R: TxnStatusResolver + ?Sized>(&self, ops: &[WriteOp], patches: &[Option<PatchOp<'_>>], me: Option<TxnId>, read_ht: Option<HybridTime>, resolver: &R, batch: &mut OwnedBatch, intents: RowIntents, deletions: &TabletDeletions, stepped_over: &mut Vec<TxnId>) -> Result<Vec<Action>> {
        let snap = self.engine.snapshot();
        // One cursor per column family for the whole batch (a large batch has
        // thousands of keys, usually in ascending order: the cursors step from key
        // to key). The intents cursor is bounded to the batch's keys: resolved
        // intents leave tombstones until compaction, and a seek past the last key
        // would walk all of them.
        let (Some(first), Some(last)) = (ops.iter().map(|o| &o.key).min(), ops.iter().map(|o| &o.key).max()) else {
            return Ok(Vec::new());
        };
        // Per key: its state after this batch's earlier ops, the strength other
        // transactions' intents were checked against, and whether this batch wrote it.
        // Keys in strictly ascending order are each met once: nothing to remember.
        let ascending = ops.windows(2).all(|w| w[0].key < w[1].key);
        // Keys in no order (an insert's random keys) or a single one are probed
        // row by row through the bloom filters; ascending ones (a scan's) stepped to.
        let probe = !ascending || ops.len() == 1;
        let regular = if probe {
            KeyCursor::probing(snap.iter(Cf::Regular, IterOptions { prefix_same_as_start: true, ..IterOptions::default() }))
        } else {
            KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()))
        };
        let (deleted, own_deletion) = self.deletion_in_the_way(me, deletions, resolver)?;
        let mut probes: Probes<E::Snapshot<'_>> = Probes { regular, intents: intent_probe(&snap, intents, first, last, probe), deleted, own_deletion };
        // (FxHash: SipHash of every key showed in profiles of random-key inserts.)
        let mut seen: rustc_hash::FxHashMap<&[u8], (KeyState, LockStrength, bool)> = Default::default();
        let mut write = Vec::with_capacity(ops.len());
        for (op, p) in ops.iter().zip(patches) {
            let strength = op.strength();
            let deps = p.as_ref().map(|p| &p.deps[..]);
            let earlier = if ascending { None } else { seen.get(&op.key[..]).copied() };
            let (state, checked, written_here) = match earlier {
                Some((s, checked, w)) if strength <= checked => (s, checked, w),
                Some((s, _, w)) => {
                    // A stronger op on a key this batch touched: check the others again.
                    self.resolve_key(&mut probes, &op.key, me, read_ht, op.kind, strength, deps, false, resolver, batch, stepped_over)?;
                    (s, strength, w)
                }
                None => (self.resolve_key(&mut probes, &op.key, me, read_ht, op.kind, strength, deps, false, resolver, batch, stepped_over)?, strength, false),
            };
            if op.kind == WriteOpKind::Insert && state.live {
                return Err(Error::DuplicateKey { tablet_id: self.id, key: op.key.clone() });
            }
            // A lock no stronger than what the transaction's own write holds adds
            // nothing; nor does one after a write of the same batch (same statement),
            // whose intent it would replace.
            write.push(if op.kind.is_lock() {
                if !written_here && state.own.is_none_or(|own| own < strength) {
                    Action::Write
                } else {
                    Action::Skip
                }
            } else if op.kind == WriteOpKind::Patch && state.whole {
                Action::WriteWhole
            } else if op.kind == WriteOpKind::Patch {
                Action::WritePatch(state.latest)
            } else {
                Action::Write
            });
            let after = match op.kind {
                WriteOpKind::Lock | WriteOpKind::LockShared => (state, checked, written_here),
                kind => (KeyState { live: kind != WriteOpKind::Delete, own: Some(state.own.map_or(strength, |o| o.max(strength))), whole: false, latest: state.latest, chain: 0 }, checked, true),
            };
            if !ascending {
                seen.insert(&op.key, after);
            }
        }
        Ok(write)
    }

    /// What the deletions of every row mean for a write of transaction `me` (None:
    /// outside transactions): the newest committed one (applied, or whose
    /// transaction committed), which deleted every row written before it, and
    /// whether the pending one is `me`'s own (every row it has not written since
    /// is gone for it; its writes are applied at the deletion's time, and so stay).
    /// Another transaction's pending one is a conflict with any write here (it
    /// deletes every row the write could touch, and counted the rows it deletes).
    fn deletion_in_the_way<R: TxnStatusResolver + ?Sized>(&self, me: Option<TxnId>, d: &TabletDeletions, resolver: &R) -> Result<(Option<HybridTime>, bool)> {
        let mut newest = d.committed.last().copied();
        if let Some((txn, _)) = d.pending {
            if Some(txn) == me {
                return Ok((newest, true));
            }
            match resolver.status(txn, self.clock.now())? {
                TxnStatus::Pending => return Err(Error::WriteConflict { tablet_id: self.id, other_txn: Some(txn), committed_at: None }),
                TxnStatus::Committed { commit_ht } => {
                    self.clock.update(commit_ht);
                    newest = newest.max(Some(commit_ht));
                }
                TxnStatus::Aborted => {}
            }
        }
        Ok((newest, false))
    }

    /// Decide what writing `key` meets: resolve other transactions' intents (apply
    /// committed, drop aborted, conflict on pending), check for commits after
    /// `read_ht`, and report whether the key holds a live row.
    ///
    /// `deps`: for a patch, the attributes it depends on (reads or writes). Another
    /// transaction's pending patch, or a patch committed after `read_ht`, of none
    /// of them is no conflict: both patches stand, and reads lay one over the
    /// other. When nothing concurrent is in the way (its row is then the latest
    /// state with its changes), a non-transactional patch is stored whole (it is
    /// committed at once: any later writer commits after it), and a transaction's
    /// patch over a row already carrying [`patch::MAX_CHAIN`] patches is written
    /// as a whole-row intent: reads merge a bounded number of patches. (A
    /// transaction's other patches become whole rows when they are applied, if
    /// nothing else wrote the row meanwhile: see [`resolve_key_intents`].)
    #[allow(clippy::too_many_arguments)]
    fn resolve_key<S: Snapshot, R: TxnStatusResolver + ?Sized>(
        &self,
        probes: &mut Probes<'_, S>,
        key: &[u8],
        me: Option<TxnId>,
        read_ht: Option<HybridTime>,
        kind: WriteOpKind,
        strength: LockStrength,
        deps: Option<&[u16]>,
        blind: bool,
        resolver: &R,
        batch: &mut OwnedBatch,
        stepped_over: &mut Vec<TxnId>,
    ) -> Result<KeyState> {
        let mut intents = match &mut probes.intents {
            IntentProbe::None => Vec::new(),
            IntentProbe::Cursor(c) => c.intents(key)?,
            IntentProbe::Holders(snap, holders) => holders_intents(*snap, key, holders)?,
        };
        // A pending deletion of every row was decided for the whole tablet (see
        // `Tablet::deletion_in_the_way`); its own commit or abort resolves its mark.
        intents.retain(|r| !is_deletion_mark(r));
        let mut own_newest: Option<&IntentRecord> = None;
        // Committed versions of the key: (time, a patch's attributes, live).
        let mut versions: Vec<Version> = Vec::new();
        let mut others: Vec<TxnId> = Vec::new();
        for r in &intents {
            if Some(r.txn) == me {
                if r.kind != IntentKind::Lock && own_newest.is_none_or(|o| r.seq > o.seq) {
                    own_newest = Some(r);
                }
            } else if !others.contains(&r.txn) {
                others.push(r.txn);
            }
        }
        // Something this patch does not depend on changes the row concurrently.
        let mut concurrent = false;
        for other in others {
            let recs: Vec<&IntentRecord> = intents.iter().filter(|r| r.txn == other).collect();
            match resolver.status(other, self.clock.now())? {
                TxnStatus::Pending => {
                    for r in &recs {
                        if !strength.conflicts_with(intent_strength(r)) {
                            // compatible strengths (KEY SHARE with a non-key update,
                            // shared locks with each other): both hold the row
                            continue;
                        }
                        match deps {
                            Some(d) if r.kind == IntentKind::Patch && !patch::intersects(&patch::decode_patch(patch::decode_patch_intent(&r.data)?.1)?.0, d) => {
                                concurrent = true;
                                stepped_over.push(other);
                            }
                            _ => return Err(Error::WriteConflict { tablet_id: self.id, other_txn: Some(other), committed_at: None }),
                        }
                    }
                }
                TxnStatus::Committed { commit_ht } => {
                    self.clock.update(commit_ht);
                    self.note_predicate_writes(&recs, commit_ht, batch);
                    // Applied whole if no one else has written the row since.
                    let alone = intents.iter().all(|r| r.txn == other || r.kind == IntentKind::Lock);
                    let regular = &mut probes.regular;
                    let fold = |base| Ok(alone && regular.latest_version(key)?.0 == Some(base));
                    if let Some(v) = resolve_key_intents(batch, key, other, Some(commit_ht), &recs, true, fold, true, true)? {
                        versions.push(v);
                    }
                }
                TxnStatus::Aborted => {
                    resolve_key_intents(batch, key, other, None, &recs, true, |_| Ok(false), false, true)?;
                }
            }
        }
        // Latest committed state of the key. (Patches of disjoint attributes may
        // commit in any order, so an intent resolved here can be older than a
        // stored version.)
        match deps {
            Some(_) => {
                let newer_than = read_ht.unwrap_or(HybridTime::INVALID);
                versions.extend(probes.regular.recent_versions(key, newer_than, patch::MAX_CHAIN + 1)?);
            }
            None => {
                if let (Some(ht), live) = probes.regular.latest_version(key)? {
                    versions.push(Version { ht, cols: None, live, patch: false });
                }
            }
        }
        versions.sort_by_key(|v| std::cmp::Reverse(v.ht));
        // A deletion of every row after the newest version of a live row deleted
        // it then, as a tombstone of its own would have.
        if let Some(t) = probes.deleted {
            if versions.first().is_some_and(|v| v.live && v.ht < t) {
                versions.insert(0, Version { ht: t, cols: None, live: false, patch: false });
            }
        }
        let (latest_ht, latest_live) = versions.first().map_or((None, false), |v| (Some(v.ht), v.live));
        let latest = latest_ht.unwrap_or(HybridTime::INVALID);
        if strength == LockStrength::Share && kind.is_lock() && key == &self.partition.start[..] {
            // A SERIALIZABLE range read's lock: a SERIALIZABLE writer here that
            // committed after the read time wrote what the read may have missed.
            if let Some(read_ht) = read_ht {
                let newest = HybridTime(self.predicate_write_ht.load(Ordering::Acquire));
                if newest > read_ht {
                    return Err(Error::WriteConflict { tablet_id: self.id, other_txn: None, committed_at: Some(newest) });
                }
            }
        }
        // Commits after the read time: a conflict, except patches this one does
        // not depend on. (Uniqueness is about the latest committed state, whatever
        // the snapshot.)
        if let (Some(read_ht), true) = (read_ht, kind != WriteOpKind::Insert) {
            for v in versions.iter().filter(|v| v.ht > read_ht) {
                match (&v.cols, deps) {
                    (Some(c), Some(d)) if !patch::intersects(c, d) => {
                        self.clock.update(v.ht);
                        concurrent = true;
                    }
                    _ => return Err(Error::WriteConflict { tablet_id: self.id, other_txn: None, committed_at: Some(v.ht) }),
                }
            }
        }
        // A patch written over something it did not see cannot become the whole
        // row when applied (`latest` INVALID: never folded).
        let latest = if concurrent { HybridTime::INVALID } else { latest };
        if let Some(own) = own_newest {
            // Our own earlier write decides liveness; conflicts were checked then.
            return Ok(KeyState { live: own.kind != IntentKind::Delete, own: Some(intent_strength(own)), whole: false, latest, chain: 0 });
        }
        if probes.own_deletion {
            // Deleted by the transaction's own deletion of every row, as by a
            // delete intent of its own (nothing else was written here since).
            return Ok(KeyState { live: false, own: Some(LockStrength::Update), whole: false, latest, chain: 0 });
        }
        if deps.is_some() && !latest_live && !blind {
            // A patch needs a row under it (the read that found one is outdated).
            return Err(Error::WriteConflict { tablet_id: self.id, other_txn: None, committed_at: latest_ht });
        }
        let chain = versions.iter().take_while(|v| v.patch).count();
        // A blind patch holds only the columns it assigns: never the whole row.
        let whole = deps.is_some() && !blind && !concurrent && (me.is_none() || chain >= patch::MAX_CHAIN);
        Ok(KeyState { live: latest_live, own: None, whole, latest, chain })
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
        let result = reader_for(&snap, resolver, ctx, intents).with_deletions(&deletions).scan(&spec)?;
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

    /// Turn the intents of committed `txn` into versions at `commit_ht`.
    /// Idempotent: returns the number of keys applied (0 when nothing is left).
    pub fn apply_intents(&self, txn: TxnId, commit_ht: HybridTime) -> Result<usize> {
        self.clock.update(commit_ht);
        self.resolve_txn(txn, Some(commit_ht))
    }

    /// Drop the intents of aborted `txn`. Idempotent.
    pub fn remove_intents(&self, txn: TxnId) -> Result<usize> {
        self.resolve_txn(txn, None)
    }

    /// Roll `txn` back to statement `from_seq` (ROLLBACK TO SAVEPOINT): drop its
    /// intents (writes and locks) of statements numbered `from_seq` and above; its
    /// earlier intents stay. Returns the number of intents dropped. Idempotent.
    pub fn rollback_intents(&self, txn: TxnId, from_seq: u32) -> Result<usize> {
        let mut guard = self.lock_drained()?;
        let res = self.rewrite_txn_intents(&guard, txn, self.clock.now(), false, false, None, |batch, user_key, rkey, mine, _, _| {
            let mut dropped = 0;
            for r in mine.iter().filter(|r| r.seq >= from_seq) {
                batch.delete(Cf::Intents, &keys::intent_key(user_key, txn, r.seq));
                dropped += 1;
            }
            if dropped == mine.len() {
                batch.delete(Cf::Intents, rkey);
            }
            Ok(dropped)
        });
        let n = reload_on_error(&mut guard, res)?.unwrap_or(0);
        if guard.deletions.pending.is_some_and(|(t, seq)| t == txn && seq >= from_seq) {
            // Its deletion of every row went with the rest (its mark).
            guard.deletions.pending = None;
        }
        Ok(n)
    }

    /// Walk the keys `txn` has intents on (its reverse index in the intents CF),
    /// calling `f(batch, user key, reverse-index key, txn's intents on the key)`,
    /// which adds what to change to the batch and returns how many changes it made;
    /// the batch is replicated (decided at `ht`) if any. Caller holds the write lock
    /// and leads.
    ///
    /// `clear_reverse`: the whole reverse index goes (commit, abort; `f` leaves
    /// it): a chunk of many keys drops its entries with one range deletion (the
    /// entries of a transaction are contiguous), a small one key by key (range
    /// tombstones are cheap to write but each one costs every later read of the
    /// column family until compaction, so small transactions do not leave one).
    ///
    /// `one`: the changes are not replicated but left in the batch, whole
    /// (`Ok(None)` when they would take more than one chunk: nothing is left
    /// there); with the keys the reverse index holds (a keyed resolution read them
    /// already): they are not walked again, and each key's intents are looked up
    /// through a cursor bounded to them (few keys: probing each key's own range).
    /// (The unbounded stepping cursor a walk uses reads past a key's intents to the
    /// next live entry of the column family: on rows written by many short
    /// transactions, every resolved intent's tombstone since the last flush, which
    /// were most of the applier's time under YCSB F.)
    ///
    /// `indexed`: the caller knows the reverse index holds every intent (it found no
    /// [`keys::unindexed_key`] mark: a keyed resolution, which `one` callers are, or
    /// one that looked); else the mark is looked up, and if there the intents are
    /// walked instead.
    ///
    /// `state`: the write lock's state, which says whose intents each key may hold
    /// ([`WriteState::row_intents`]); used for a keyed resolution of a few keys,
    /// each sought anyway (an iterator per key and holder would cost more than a
    /// cursor stepping through many keys in order).
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn rewrite_txn_intents(&self, state: &WriteState, txn: TxnId, ht: HybridTime, clear_reverse: bool, indexed: bool, one: Option<(&mut OwnedBatch, &[Vec<u8>])>, mut f: impl FnMut(&mut OwnedBatch, &[u8], &[u8], Vec<IntentRecord>, bool, &mut dyn FnMut(&[u8]) -> Result<Option<HybridTime>>) -> Result<usize>) -> Result<Option<usize>> {
        if !indexed && self.unindexed(txn)? {
            // Its reverse index is incomplete: walk the intents.
            let n = self.resolve_walking_with(txn, ht, false, |batch, user_key, mine, others, latest| f(batch, user_key, &keys::reverse_key(txn, user_key), mine, others, latest))?;
            if clear_reverse {
                let mut batch = OwnedBatch::new();
                clear_reverse_index(&mut batch, txn);
                self.log.replicate(ht, batch, 0)?;
            }
            return Ok(Some(n));
        }
        let snap = self.engine.snapshot();
        let (one, known) = match one {
            Some((batch, keys)) => (Some(batch), Some(keys)),
            None => (None, None),
        };
        // The reverse index's keys: known (in key order), or walked.
        let mut walk = match known {
            Some(_) => None,
            None => Some(reverse_index(&snap, txn)),
        };
        let mut known_keys = known.unwrap_or(&[]).iter();
        // A few keys, each sought: through its holders if known (an iterator each,
        // bounded to their intents). More are stepped through in order, by one cursor.
        let probed = matches!(known, Some(k) if !k.is_empty() && k.len() <= PROBED_RESOLUTION_KEYS);
        // Every intent of a key, through one cursor: made on first use (keys sought
        // through their holders need none; a one-key resolution usually is one).
        let mut ints = None;
        let new_cursor = || match known {
            Some(k @ [first, ..]) => intents_cursor_between(&snap, first, &k[k.len() - 1], probed),
            _ => intents_cursor(&snap),
        };
        // The newest committed version of a key (a cursor made on first use).
        let mut reg = None;
        let mut latest = |k: &[u8]| -> Result<Option<HybridTime>> { Ok(reg.get_or_insert_with(|| KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()))).latest_version(k)?.0) };
        let mut batch = OwnedBatch::new();
        let mut n = 0;
        let mut in_batch = 0;
        // The reverse-index keys of the chunk being built (clear_reverse).
        let mut reverse: Vec<Vec<u8>> = Vec::new();
        loop {
            let (rkey, user_key) = match walk.as_mut() {
                Some((it, prefix_len)) => {
                    if !it.valid()? {
                        break;
                    }
                    let rkey = it.key().to_vec();
                    let (user_key, _) = keys::unescape_prefix(&rkey[*prefix_len..])?;
                    it.next();
                    (rkey, user_key)
                }
                None => match known_keys.next() {
                    Some(k) => (keys::reverse_key(txn, k), k.clone()),
                    None => break,
                },
            };
            let holders = if probed { state.row_intents(row_hash(&user_key)) } else { RowIntents::All };
            let all = match holders {
                RowIntents::Of(holders) => holders_intents(&snap, &user_key, &holders)?,
                _ => ints.get_or_insert_with(new_cursor).intents(&user_key)?,
            };
            let others = all.iter().any(|r| r.txn != txn && r.kind != IntentKind::Lock);
            let mine: Vec<IntentRecord> = all.into_iter().filter(|r| r.txn == txn).collect();
            in_batch += f(&mut batch, &user_key, &rkey, mine, others, &mut latest)?;
            if clear_reverse {
                reverse.push(rkey);
            }
            // A transaction's intents on a tablet can be megabytes: they are
            // rewritten in several log entries (each key's changes in one). A
            // reader between two finds the rest still intents of the same
            // transaction, whose status decides them the same way.
            if batch.as_bytes().len() >= REWRITE_CHUNK_BYTES {
                if one.is_some() {
                    return Ok(None);
                }
                clear_reverse_keys(&mut batch, &mut reverse);
                self.log.replicate(ht, std::mem::take(&mut batch), 0)?;
                n += std::mem::take(&mut in_batch);
            }
        }
        clear_reverse_keys(&mut batch, &mut reverse);
        drop(walk);
        drop(ints);
        drop(reg);
        drop(snap);
        if let Some(out) = one {
            *out = batch;
            n += in_batch;
        } else if in_batch > 0 {
            self.log.replicate(ht, batch, 0)?;
            n += in_batch;
        }
        Ok(Some(n))
    }

    /// Resolution of a transaction that alone holds intents in this tablet (the
    /// caller holds the write lock drained): the intents column family is walked
    /// in order, one cursor, instead of the transaction's reverse index with a
    /// lookup of each of its keys; `f` writes a key's resolution but not the
    /// deletion of its intents, which go as range deletions, one per chunk of the
    /// walk (a bulk load left a tombstone per row, each one a memtable insert and
    /// a key every later read of the column family steps over until compaction),
    /// and the transaction's reverse index as one more. A chunk holding another
    /// transaction's intent (the lock's record of who holds intents should rule
    /// that out) deletes this one's key by key. Chunks are replicated in order, as
    /// in [`Tablet::rewrite_txn_intents`]: a reader between two finds the rest still
    /// intents of the same transaction, and a resolution cut short resumes through
    /// the reverse index (keys already resolved have no intent left: nothing to do).
    fn resolve_walking(&self, txn: TxnId, ht: HybridTime, f: impl FnMut(&mut OwnedBatch, &[u8], Vec<IntentRecord>, bool, &mut dyn FnMut(&[u8]) -> Result<Option<HybridTime>>) -> Result<usize>) -> Result<usize> {
        self.resolve_walking_with(txn, ht, true, f)
    }

    /// Whether `txn`'s reverse index here is incomplete ([`keys::unindexed_key`]).
    fn unindexed(&self, txn: TxnId) -> Result<bool> {
        Ok(self.engine.get(Cf::Intents, &keys::unindexed_key(txn))?.is_some())
    }

    /// [`Tablet::resolve_walking`]; `resolve`: the transaction's intents and reverse
    /// index go (else `f` decides what to delete, as a rollback does).
    fn resolve_walking_with(&self, txn: TxnId, ht: HybridTime, resolve: bool, mut f: impl FnMut(&mut OwnedBatch, &[u8], Vec<IntentRecord>, bool, &mut dyn FnMut(&[u8]) -> Result<Option<HybridTime>>) -> Result<usize>) -> Result<usize> {
        let snap = self.engine.snapshot();
        let mut it = snap.iter(Cf::Intents, IterOptions { lower: Some(vec![keys::INTENT_PREFIX]), upper: Some(vec![keys::INTENT_PREFIX + 1]), prefix_same_as_start: false });
        it.seek_to_first();
        let mut reg = None;
        let mut latest = |k: &[u8]| -> Result<Option<HybridTime>> { Ok(reg.get_or_insert_with(|| KeyCursor::new(snap.iter(Cf::Regular, IterOptions::default()))).latest_version(k)?.0) };
        let mut batch = OwnedBatch::new();
        let mut chunk = WalkedIntents::default();
        let mut n = 0;
        let mut in_batch = 0;
        while it.valid()? {
            let esc = keys::split_intent_key(it.key())?.0.to_vec();
            let mut recs = Vec::new();
            while it.valid()? {
                let (k, owner, seq) = keys::split_intent_key(it.key())?;
                if k != esc.as_slice() {
                    break;
                }
                let v = keys::decode_intent_value(it.value())?;
                if resolve {
                    chunk.saw(it.key(), owner == txn);
                }
                recs.push(IntentRecord { txn: owner, seq, kind: v.kind, subtxn: v.subtxn, data: v.data.to_vec() });
                it.next();
            }
            let (user_key, _) = keys::unescape_prefix(&esc)?;
            let others = recs.iter().any(|r| r.txn != txn && r.kind != IntentKind::Lock);
            let mine: Vec<IntentRecord> = recs.into_iter().filter(|r| r.txn == txn).collect();
            if !mine.is_empty() {
                in_batch += f(&mut batch, &user_key, mine, others, &mut latest)?;
            }
            if batch.as_bytes().len() >= REWRITE_CHUNK_BYTES {
                if resolve {
                    chunk.drop_into(&mut batch);
                }
                self.log.replicate(ht, std::mem::take(&mut batch), 0)?;
                n += std::mem::take(&mut in_batch);
            }
        }
        drop(it);
        drop(reg);
        if resolve {
            chunk.drop_into(&mut batch);
            let (rev, _) = reverse_index(&snap, txn);
            if rev.valid()? {
                clear_reverse_index(&mut batch, txn);
            }
        }
        drop(snap);
        if !batch.is_empty() {
            self.log.replicate(ht, batch, 0)?;
        }
        Ok(n + in_batch)
    }

    fn resolve_txn(&self, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<usize> {
        let n = match self.resolve_txn_keyed(txn, commit_ht)? {
            Some(n) => n,
            None => self.resolve_txn_locked(txn, commit_ht)?,
        };
        if n >= COMPACT_AFTER_RESOLVING {
            if let Err(e) = self.engine.compact_range(Cf::Intents, None, None) {
                tracing::warn!(tablet_id = self.id.0, error = %e, "compacting intents failed");
            }
        }
        Ok(n)
    }

    fn resolve_txn_locked(&self, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<usize> {
        let mut guard = self.lock_drained()?;
        self.resolve_txn_held(&mut guard, txn, commit_ht)
    }

    /// [`Tablet::resolve_txn`] of a transaction with few intents here, as a
    /// keyed write of the rows it holds them on: only writes of those rows wait
    /// (a drained resolution holds the write lock, hence every read and write of
    /// the tablet, through its entry's fsync), and the lock is let go once the
    /// entry has its place in the log. The rows are known in advance from the
    /// reverse index: nothing adds to them (a decided transaction writes no
    /// more); writers resolving some of them meanwhile leave a subset, read
    /// again under the lock. `None`: not done here (too many keys, changes
    /// larger than one entry, or its deletion of every row is among them): the
    /// caller resolves it drained.
    fn resolve_txn_keyed(&self, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<Option<usize>> {
        let Some(keys) = self.intent_keys(txn, RESOLVE_KEYED_MAX_KEYS)? else {
            return Ok(None);
        };
        let rows: Vec<u64> = keys.iter().map(|k| row_hash(k)).collect();
        let mut guard = self.lock_rows(&rows)?;
        if guard.deletions.pending.is_some_and(|(t, _)| t == txn) {
            // Its deletion of every row changes the tablet's deletions: drained.
            return Ok(None);
        }
        let mut batch = OwnedBatch::new();
        let Some(n) = self.resolve_txn_in(&mut guard, txn, commit_ht, Some((&mut batch, &keys)))? else {
            return Ok(None);
        };
        if n > 0 {
            let ht = commit_ht.unwrap_or_else(|| self.clock.now());
            if let Err(e) = self.replicate_keyed(guard, rows, ht, batch, 0) {
                self.write_lock.lock().term = 0; // reloaded before the next decision
                return Err(e);
            }
            guard = self.write_lock.lock();
        }
        self.forget_resolved(&mut guard, txn, None);
        Ok(Some(n))
    }

    /// The keys `txn` holds intents on here (its reverse index), if at most `max`.
    fn intent_keys(&self, txn: TxnId, max: usize) -> Result<Option<Vec<Vec<u8>>>> {
        let snap = self.engine.snapshot();
        let (mut it, prefix_len) = reverse_index(&snap, txn);
        let mut out = Vec::new();
        while it.valid()? {
            if out.len() == max || it.key()[prefix_len..] == [keys::ESC, keys::ESC_UNINDEXED] {
                return Ok(None);
            }
            out.push(keys::unescape_prefix(&it.key()[prefix_len..])?.0);
            it.next();
        }
        Ok(Some(out))
    }

    /// [`Tablet::resolve_txn_locked`] with the write lock held (drained).
    fn resolve_txn_held(&self, guard: &mut WriteState, txn: TxnId, commit_ht: Option<HybridTime>) -> Result<usize> {
        Ok(self.resolve_txn_in(guard, txn, commit_ht, None)?.unwrap_or(0))
    }

    /// [`Tablet::resolve_txn_held`]; with `one` (a batch, and the keys the
    /// transaction's reverse index holds), the changes are left in the batch whole
    /// instead of replicated (`None`: they would not fit one entry), and the
    /// lock's state is left to the caller ([`Tablet::forget_resolved`] once they
    /// are applied).
    fn resolve_txn_in(&self, guard: &mut WriteState, txn: TxnId, commit_ht: Option<HybridTime>, one: Option<(&mut OwnedBatch, &[Vec<u8>])>) -> Result<Option<usize>> {
        let leave = one.is_some();
        let untouched = guard.clean.contains(&txn) && !guard.stepped_over.contains(&txn);
        // Its deletion of every row, applied: the times of all of them.
        let mut deletions: Option<Vec<HybridTime>> = None;
        let applied = guard.deletions.committed.clone();
        // Alone: no other transaction holds intents here.
        let alone = guard.intent_txns.len() == 1 && guard.intent_txns.contains(&txn);
        let ht = commit_ht.unwrap_or_else(|| self.clock.now());
        let mut per_key = |batch: &mut OwnedBatch, user_key: &[u8], mine: Vec<IntentRecord>, others: bool, latest: &mut dyn FnMut(&[u8]) -> Result<Option<HybridTime>>, drop_intents: bool| -> Result<usize> {
            let recs: Vec<&IntentRecord> = mine.iter().collect();
            if let Some(ht) = commit_ht {
                self.note_predicate_writes(&recs, ht, batch);
                if user_key == &self.partition.start[..] && recs.iter().any(|r| is_deletion_mark(r)) {
                    // Applied with the batch that removes its mark. Of those at or
                    // before the history cutoff, the newest is enough.
                    let cutoff = self.cutoff.get();
                    let newest_old = applied.iter().rev().find(|t| **t <= cutoff).copied();
                    let mut times: Vec<HybridTime> = applied.iter().copied().filter(|t| *t > cutoff || Some(*t) == newest_old).collect();
                    times.push(ht);
                    times.sort_unstable();
                    batch.put(Cf::Meta, META_DELETIONS, &encode_times(&times));
                    deletions = Some(times);
                }
            }
            // Applied whole if no one else has written the row since (known
            // without looking if no one stepped over the transaction's patches).
            let fold = |base: HybridTime| Ok(!others && base != HybridTime::INVALID && (untouched || latest(user_key)? == Some(base)));
            resolve_key_intents(batch, user_key, txn, commit_ht, &recs, false, fold, false, drop_intents)?;
            Ok(1)
        };
        // A keyed resolution (`leave`) found no unindexed mark; a drained one looks
        // for it here (once: the reverse-index walk is then told there is none).
        let res = if !leave && (alone || self.unindexed(txn)?) {
            self.resolve_walking(txn, ht, |batch, user_key, mine, others, latest| per_key(batch, user_key, mine, others, latest, false)).map(Some)
        } else {
            self.rewrite_txn_intents(guard, txn, ht, true, true, one, |batch, user_key, _, mine, others, latest| per_key(batch, user_key, mine, others, latest, true))
        };
        let Some(n) = reload_on_error(guard, res)? else {
            return Ok(None);
        };
        if leave && deletions.is_some() {
            // A deletion of every row the caller's state did not show: the
            // tablet's deletions change with it (drained, by the caller).
            return Ok(None);
        }
        if !leave {
            self.forget_resolved(guard, txn, deletions);
        }
        Ok(Some(n))
    }

    /// The lock's state after `txn`'s intents here were all applied or removed
    /// (`deletions`: the times of the deletions of every row, its own applied).
    fn forget_resolved(&self, guard: &mut WriteState, txn: TxnId, deletions: Option<Vec<HybridTime>>) {
        guard.intent_txns.remove(&txn);
        guard.clean.remove(&txn);
        guard.own_rows.remove(&txn);
        guard.unindexed.remove(&txn);
        guard.stepped_over.remove(&txn);
        if guard.deletions.pending.is_some_and(|(t, _)| t == txn) {
            guard.deletions.pending = None;
        }
        if let Some(times) = deletions {
            guard.deletions.committed = Arc::new(times);
            self.cutoff.set_deletions(guard.deletions.committed.clone());
        }
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
                        self.resolve_txn_held(&mut guard, other, Some(commit_ht))?;
                    }
                    TxnStatus::Aborted => {
                        self.resolve_txn_held(&mut guard, other, None)?;
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

    /// A transaction that committed at `commit_ht` with intents `recs` on a key: if it
    /// held a `PredicateWrite` (it was SERIALIZABLE and wrote here), later range
    /// locks with older read times conflict. The batch applying the intents records
    /// the time in `Cf::Meta` for every replica.
    fn note_predicate_writes(&self, recs: &[&IntentRecord], commit_ht: HybridTime, batch: &mut OwnedBatch) {
        if recs.iter().any(|r| r.kind == IntentKind::Lock && intent_strength(r) == LockStrength::PredicateWrite) {
            let before = self.predicate_write_ht.fetch_max(commit_ht.0, Ordering::AcqRel);
            if commit_ht.0 > before {
                batch.put(Cf::Meta, META_PREDICATE_WRITE_HT, &commit_ht.0.to_be_bytes());
            }
        }
    }

    /// Transactions that may still have intents here (for the background resolver):
    /// every one that does, and perhaps some whose intents other writers resolved.
    pub fn txns_maybe_with_intents(&self) -> Vec<TxnId> {
        self.write_lock.lock().intent_txns.iter().copied().collect()
    }

    /// Transactions with intents here, exactly, from the intents CF's reverse index.
    pub fn txns_with_intents(&self) -> Result<Vec<TxnId>> {
        let snap = self.engine.snapshot();
        let lower = vec![keys::REVERSE_PREFIX];
        let upper = vec![keys::REVERSE_PREFIX + 1];
        let mut it = snap.iter(Cf::Intents, IterOptions { lower: Some(lower), upper: Some(upper), prefix_same_as_start: false });
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid()? {
            let k = it.key();
            let txn = k.get(1..1 + TxnId::LEN).and_then(TxnId::from_slice).ok_or(keys::KeyError::Truncated)?;
            out.push(txn);
            match keys::prefix_upper_bound(&keys::reverse_prefix(txn)) {
                Some(next) => it.seek(&next),
                None => break,
            }
        }
        Ok(out)
    }
}

/// Resolve one transaction's intents on `key` into `batch`: when it committed, write
/// the version they leave ([`txn_effect`]) at `commit_ht`; then delete its intents
/// and (`reverse`) its reverse-index entry. Returns the version written (`None`
/// when nothing was: aborted, or only locks), with the columns a patch changed if
/// `want_cols`.
///
/// A patch is written as the whole row its writer formed when `fold(base)` (the
/// time of the newest version its writer saw) says no one else wrote the row
/// since or holds intents on it: its row is then the row's whole state, and reads
/// need not merge.
#[allow(clippy::too_many_arguments)]
fn resolve_key_intents(batch: &mut OwnedBatch, key: &[u8], txn: TxnId, commit_ht: Option<HybridTime>, recs: &[&IntentRecord], reverse: bool, fold: impl FnOnce(HybridTime) -> Result<bool>, want_cols: bool, drop_intents: bool) -> Result<Option<Version>> {
    let written = match commit_ht {
        Some(ht) => {
            let vk = keys::version_key(key, ht);
            let mut v = Vec::new();
            let version = match txn_effect(recs.iter().copied())? {
                Some(TxnEffect::Put(row)) => {
                    keys::encode_put(&mut v, &row);
                    Some(Version { ht, cols: None, live: true, patch: false })
                }
                Some(TxnEffect::Patch(p, base)) => {
                    let cols = if want_cols { Some(patch::decode_patch(&p)?.0) } else { None };
                    if fold(base)? {
                        keys::encode_put_cols(&mut v, &p);
                        Some(Version { ht, cols, live: true, patch: false })
                    } else {
                        keys::encode_patch_value(&mut v, &p);
                        Some(Version { ht, cols, live: true, patch: true })
                    }
                }
                Some(TxnEffect::Delete) => {
                    v.extend_from_slice(&keys::encode_tombstone());
                    Some(Version { ht, cols: None, live: false, patch: false })
                }
                None => None,
            };
            if version.is_some() {
                batch.put(Cf::Regular, &vk, &v);
            }
            version
        }
        None => None,
    };
    if drop_intents {
        for r in recs {
            batch.delete(Cf::Intents, &keys::intent_key(key, txn, r.seq));
        }
    }
    if reverse {
        batch.delete(Cf::Intents, &keys::reverse_key(txn, key));
    }
    Ok(written)
}

/// The intent keys of one chunk of [`Tablet::resolve_walking`]: the first and the
/// last visited, whether every one between is the transaction's, and its own.
#[derive(Default)]
struct WalkedIntents {
    first: Option<Vec<u8>>,
    last: Vec<u8>,
    pure: bool,
    mine: Vec<Vec<u8>>,
}

impl WalkedIntents {
    fn saw(&mut self, key: &[u8], mine: bool) {
        if self.first.is_none() {
            self.first = Some(key.to_vec());
            self.pure = true;
        }
        self.last.clear();
        self.last.extend_from_slice(key);
        if mine {
            self.mine.push(key.to_vec());
        } else {
            self.pure = false;
        }
    }

    /// Delete the chunk's intents of the transaction into `batch` (one range
    /// deletion if the chunk holds no other one's), and start a new chunk.
    fn drop_into(&mut self, batch: &mut OwnedBatch) {
        match self.first.take() {
            Some(first) if self.pure && self.mine.len() >= REVERSE_RANGE_DELETE_MIN => {
                let mut end = std::mem::take(&mut self.last);
                end.push(0); // the key right after the last one
                batch.delete_range(Cf::Intents, &first, &end);
            }
            _ => {
                for k in &self.mine {
                    batch.delete(Cf::Intents, k);
                }
            }
        }
        self.mine.clear();
        self.last.clear();
    }
}

/// A chunk of a transaction's keys with at least this many reverse-index entries
/// drops them with one range deletion.
const REVERSE_RANGE_DELETE_MIN: usize = 64;

/// Delete `txn`'s whole reverse index (its entries and its unindexed mark).
fn clear_reverse_index(batch: &mut OwnedBatch, txn: TxnId) {
    let prefix = keys::reverse_prefix(txn);
    match keys::prefix_upper_bound(&prefix) {
        Some(upper) => batch.delete_range(Cf::Intents, &prefix, &upper),
        None => unreachable!("a reverse-index prefix ends in a transaction id, not in 0xFF bytes only"),
    }
}

/// Delete the reverse-index entries `keys` (consecutive entries of one
/// transaction, in order) into `batch`, and forget them.
fn clear_reverse_keys(batch: &mut OwnedBatch, keys: &mut Vec<Vec<u8>>) {
    if keys.len() >= REVERSE_RANGE_DELETE_MIN {
        let (first, last) = (&keys[0], &keys[keys.len() - 1]);
        let mut end = last.clone();
        end.push(0); // the key right after `last`
        batch.delete_range(Cf::Intents, first, &end);
    } else {
        for k in keys.iter() {
            batch.delete(Cf::Intents, k);
        }
    }
    keys.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(n: u8) -> TxnId {
        TxnId([n; 16])
    }

    #[test]
    fn writes_and_reads_look_for_intents_only_on_rows_some_transaction_may_hold() {
        let mut s = WriteState::default();
        let (a, b) = (txn(1), txn(2));
        // Nothing here: nothing to meet.
        assert!(!s.needs_intents(&[1, 2]));
        s.note_intents(a, &[1, 2]);
        assert!(s.needs_intents(&[3, 2]), "a's row 2");
        assert!(!s.needs_intents(&[3, 4]), "rows nobody wrote");
        // Another transaction's intents: only its rows.
        s.note_intents(b, &[9]);
        assert!(s.needs_intents(&[9]) && s.needs_intents(&[1]));
        assert!(!s.needs_intents(&[3]), "no transaction wrote row 3");
        // Resolved: its rows are free again.
        s.intent_txns.remove(&b);
        s.own_rows.remove(&b);
        assert!(!s.needs_intents(&[9]));
        // Past the bound, it is not tracked any more: always look.
        let many: Vec<u64> = (100..100 + OWN_ROWS_MAX as u64 + 1).collect();
        s.note_intents(a, &many);
        assert!(s.needs_intents(&[5]));
        s.note_intents(a, &[6]);
        assert!(s.needs_intents(&[7]), "stays untracked");
        // Holding intents from before the term (reloaded, untracked): look.
        let mut s = WriteState::default();
        s.intent_txns.insert(a);
        assert!(s.needs_intents(&[1]));
        s.note_intents(a, &[1]);
        assert!(s.needs_intents(&[2]), "its earlier intents are not tracked");
    }

    #[test]
    fn one_rows_intents_are_sought_through_the_transactions_that_wrote_it() {
        let mut s = WriteState::default();
        let (a, b, c) = (txn(5), txn(9), txn(2));
        let agrees = |s: &WriteState| (0..12).all(|r| (s.row_intents(r) != RowIntents::None) == s.needs_intents(&[r]));
        assert_eq!(s.row_intents(1), RowIntents::None);
        s.note_intents(a, &[1, 2]);
        s.note_intents(b, &[2, 9]);
        s.note_intents(c, &[2]);
        assert_eq!(s.row_intents(2), RowIntents::Of(vec![c, a, b]), "the writers of row 2, in the intent keys' order");
        assert_eq!(s.row_intents(1), RowIntents::Of(vec![a]));
        assert_eq!(s.row_intents(3), RowIntents::None);
        assert!(agrees(&s));
        // Resolved: gone from its rows.
        s.intent_txns.remove(&b);
        s.own_rows.remove(&b);
        assert_eq!(s.row_intents(9), RowIntents::None);
        assert_eq!(s.row_intents(2), RowIntents::Of(vec![c, a]));
        // One transaction untracked (past the bound, or holding intents from before
        // the term): every row's intents are walked.
        let many: Vec<u64> = (100..100 + OWN_ROWS_MAX as u64 + 1).collect();
        s.note_intents(c, &many);
        assert_eq!(s.row_intents(3), RowIntents::All);
        assert_eq!(s.row_intents(1), RowIntents::All);
        assert!(agrees(&s));
        let mut s = WriteState::default();
        s.intent_txns.insert(a);
        s.note_intents(b, &[1]);
        assert_eq!(s.row_intents(1), RowIntents::All);
        assert!(agrees(&s));
    }
}
