//! Table scan callbacks (`scan_*`, `parallelscan_*`, `scan_sample_*` of
//! `TableAmRoutine`): a sequential scan pages through the relation's storage
//! table (`crate::scan::Pager`) and hands out each row with a TID from the
//! backend's TID map. What the custom scan (`customscan/pushdown/`) and a
//! counting sequential scan (`am/index_only.rs`) ask of a scan begun here: a
//! filter, a count, aggregates. A scan may step backward (SCROLL cursors):
//! then it walks both ways from where it stands ([`BiWalk`]). TABLESAMPLE
//! samples rows cut into blocks ([`Sample`]). A parallel scan's processes
//! claim tablets one at a time and read them at the leader's read point
//! ([`SharedScan`]).

use super::meta_of;
use crate::error::OrRaise;
use crate::scan::{snapshot_cid, BiWalk, Bound, Pager};
use crate::state;
use crate::tid::Origin;
use crate::tuple::store_tuple;
use crate::violation::OrRaiseFlush;
use pgrx::pg_guard;
use pgrx::pg_sys;

/// Our scan descriptor: PostgreSQL's header first, then the Rust state.
#[repr(C)]
pub(super) struct PinaxScanDesc {
    pub(super) base: pg_sys::TableScanDescData,
    pub(super) state: *mut ScanState,
    cb: pg_sys::MemoryContextCallback,
}

pub(super) struct ScanState {
    pub(super) pager: Pager,
    pub(super) relid: u32,
    /// ANALYZE: the single "block" has been handed out.
    pub(super) analyze_block_done: bool,
    /// ANALYZE: rows the tablets counted but did not ship (sampling), to add to
    /// the live rows once.
    pub(super) analyze_unshipped: u64,
    /// A counting scan ([`next_counted`]): the rows left to hand out, once counted.
    counted: Option<u64>,
    /// The TID of the row the forward walk returned last, and whether it ran off
    /// the end: where a backward step starts.
    last_tid: Option<pg_sys::ItemPointerData>,
    ended: bool,
    /// Once the scan has stepped backward (a SCROLL cursor): the walk both ways.
    walk: Option<BiWalk>,
    /// A TABLESAMPLE scan's blocks, once its first block was asked for.
    sample: Option<Sample>,
    /// A parallel scan's share of the work: tablets claimed one at a time.
    parallel: Option<Parallel>,
    /// A bitmap heap scan: the TIDs of its current page not handed out yet
    /// (`bitmap.rs`).
    pub(super) bitmap: std::collections::VecDeque<pg_sys::ItemPointerData>,
}

/// What the processes of a parallel scan share, in dynamic shared memory after
/// PostgreSQL's header: the tablet to claim next, and the leader's read point
/// (its statement's read time, transaction and command: the workers see what
/// the leader would, its own earlier writes included), written by the leader's
/// `scan_begin`, which runs before any worker starts.
#[repr(C)]
pub(super) struct SharedScan {
    base: pg_sys::ParallelTableScanDescData,
    next_tablet: std::sync::atomic::AtomicU64,
    read_ht: u64,
    uncertain_from: u64,
    txn: [u8; 16],
    seq: u32,
    has_txn: bool,
    /// The leader's list of the table's tablets ([`tablets_fingerprint`]): every
    /// process must claim from the same list.
    tablets_fp: u64,
}

/// A fingerprint of a table's tablet list (their key intervals).
fn tablets_fingerprint(t: &pinax_proto::TableInfo) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    for ti in &t.tablets {
        (&ti.partition.start, &ti.partition.end).hash(&mut h);
    }
    h.finish()
}

/// A process's part in a parallel scan: each claims the next tablet not yet
/// claimed (`SharedScan::next_tablet`) and walks its key interval whole at the
/// shared read point, until none is left. Every process claims from the list the
/// leader had (fresh from the master when the scan began): a worker whose list
/// differs looks again, and fails the scan with 40001 if the table's tablets
/// changed in between. A tablet splitting while the scan runs is walked on its
/// halves (the walk is by key interval, and the client follows splits).)
pub(super) struct Parallel {
    shared: *mut SharedScan,
    tablets: std::sync::Arc<pinax_proto::TableInfo>,
    at: pinax_proto::ReadPoint,
    /// The scan's pager walks a claimed tablet.
    walking: bool,
}

impl Parallel {
    /// Join the parallel scan `shared` of storage table `storage`: the leader
    /// publishes its read point, a worker takes it.
    ///
    /// # Safety
    /// `shared` must point at the scan's shared state, initialized by
    /// [`parallelscan_initialize`]; `snapshot` is the scan's.
    unsafe fn join(shared: *mut SharedScan, storage: &str, snapshot: pg_sys::Snapshot, worker: bool) -> Parallel {
        // SAFETY: the caller upholds this function's contract (# Safety).
        unsafe {
            if !worker {
                let at = state::with(|b| b.read_point(snapshot_cid(snapshot))).or_raise();
                (*shared).read_ht = at.read_ht.0;
                (*shared).uncertain_from = at.uncertain_from.0;
                (*shared).has_txn = at.txn.is_some();
                if let Some((txn, seq)) = at.txn {
                    (*shared).txn = txn.0;
                    (*shared).seq = seq;
                }
            }
            let at = pinax_proto::ReadPoint {
                read_ht: pinax_common::HybridTime((*shared).read_ht),
                txn: (*shared).has_txn.then(|| (pinax_common::TxnId((*shared).txn), (*shared).seq)),
                uncertain_from: pinax_common::HybridTime((*shared).uncertain_from),
            };
            let client = state::with(|b| b.client()).or_raise();
            let tablets = if worker {
                let mut t = client.table(storage).or_raise();
                if tablets_fingerprint(&t) != (*shared).tablets_fp {
                    t = client.refresh_table(storage).or_raise();
                    if tablets_fingerprint(&t) != (*shared).tablets_fp {
                        crate::error::raise_with(
                            pgrx::PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                            "the table's tablets changed while a parallel scan of it began",
                            Some("Run the statement again.".into()),
                        );
                    }
                }
                t
            } else {
                let t = client.refresh_table(storage).or_raise();
                (*shared).tablets_fp = tablets_fingerprint(&t);
                t
            };
            Parallel { shared, tablets, at, walking: false }
        }
    }
}

/// The next row of a parallel scan: from the tablet this process walks, else
/// from the next one it claims.
///
/// # Safety
/// As for [`next_into_slot`]; `snapshot` is the scan's.
unsafe fn next_parallel(st: &mut ScanState, snapshot: pg_sys::Snapshot, slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        loop {
            let p = st.parallel.as_mut().expect("a parallel scan");
            if !p.walking {
                let i = (*p.shared).next_tablet.fetch_add(1, std::sync::atomic::Ordering::AcqRel) as usize;
                let Some(t) = p.tablets.tablets.get(i) else {
                    pg_sys::ExecClearTuple(slot);
                    return false;
                };
                let mut pager = Pager::new(st.pager.storage.clone(), t.partition.start.clone(), t.partition.end.clone(), false, snapshot_cid(snapshot));
                pager.filter = st.pager.filter.clone();
                pager.settle_at(Some(p.at));
                st.pager = pager;
                p.walking = true;
            }
            if next_into_slot(&mut st.pager, st.relid, slot) {
                return true;
            }
            st.parallel.as_mut().expect("a parallel scan").walking = false;
        }
    }
}

/// A TABLESAMPLE scan (`scan_sample_next_block`, `scan_sample_next_tuple`).
/// Storage has no pages, so the rows, in scan order at one read point, are cut
/// into blocks of as many rows as the planner assumes fill one (the table's
/// average row width, as `relation_estimate_size`): the sampling method picks
/// blocks among those (SYSTEM) and rows within a block (BERNOULLI) as it does
/// on heap. The number of blocks comes from a count in storage at the sample's
/// read point. Blocks are read in the order asked for; a method that goes back
/// (tsm_system_rows) resumes at the first key of that block, noted in passing.
pub(super) struct Sample {
    nblocks: u32,
    per_block: usize,
    /// The block handed out last, and its rows.
    block: Option<u32>,
    rows: Vec<pinax_proto::Row>,
    /// The first key of every block the walk has passed.
    starts: Vec<Vec<u8>>,
    /// The walk, standing at the start of block `next`.
    pager: Pager,
    next: u32,
    at: Option<pinax_proto::ReadPoint>,
    curcid: u32,
}

/// A memory context reset callback (`MemoryContextCallback`).
///
/// # Safety
/// `arg` must be what the callback was registered with (PostgreSQL calls it
/// so when the memory context is reset; this module also calls it directly):
/// its Rust state is freed once, and the pointer to it nulled.
#[pg_guard]
unsafe extern "C-unwind" fn free_scan_state(arg: *mut std::ffi::c_void) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let d = arg as *mut PinaxScanDesc;
        if !(*d).state.is_null() {
            drop(Box::from_raw((*d).state));
            (*d).state = std::ptr::null_mut();
        }
    }
}

/// Table AM callback `scan_begin` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_begin(
    rel: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: i32,
    key: *mut pg_sys::ScanKeyData,
    pscan: pg_sys::ParallelTableScanDesc,
    flags: u32,
) -> pg_sys::TableScanDesc {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let m = meta_of(rel);
        let worker = pg_sys::ParallelWorkerNumber >= 0;
        if flags & (pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_TYPE_SAMPLESCAN) != 0 && state::serializable_locking() && !worker {
            // A SERIALIZABLE sequential (or sampling) scan reads every tablet's whole range.
            state::with(|b| b.lock_ranges(&m.storage, &[], None)).or_raise();
        }
        let d = pg_sys::palloc0(std::mem::size_of::<PinaxScanDesc>()) as *mut PinaxScanDesc;
        (*d).base.rs_rd = rel;
        (*d).base.rs_snapshot = snapshot;
        (*d).base.rs_nkeys = nkeys;
        (*d).base.rs_key = key;
        (*d).base.rs_flags = flags;
        let mut pager = Pager::new(m.storage.clone(), Vec::new(), None, false, snapshot_cid(snapshot));
        pager.under_limit_of((*rel).rd_id.to_u32());
        let parallel = (!pscan.is_null()).then(|| Parallel::join(pscan as *mut SharedScan, &m.storage, snapshot, worker));
        let st = ScanState {
            parallel,
            pager,
            relid: m.relid,
            analyze_block_done: false,
            analyze_unshipped: 0,
            counted: None,
            last_tid: None,
            ended: false,
            walk: None,
            sample: None,
            bitmap: std::collections::VecDeque::new(),
        };
        (*d).state = Box::into_raw(Box::new(st));
        (*d).cb.func = Some(free_scan_state);
        (*d).cb.arg = d.cast();
        pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*d).cb);
        pg_sys::RelationIncrementReferenceCount(rel);
        d.cast()
    }
}

/// Table AM callback `scan_end` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_end(scan: pg_sys::TableScanDesc) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        free_scan_state(d.cast());
        if (*scan).rs_flags & pg_sys::ScanOptions::SO_TEMP_SNAPSHOT != 0 {
            // Registered for this scan (a parallel scan's restored snapshot).
            pg_sys::UnregisterSnapshot((*scan).rs_snapshot);
        }
        pg_sys::RelationDecrementReferenceCount((*scan).rs_rd);
    }
}

/// Table AM callback `scan_rescan` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_rescan(
    scan: pg_sys::TableScanDesc,
    _key: *mut pg_sys::ScanKeyData,
    _set_params: bool,
    _allow_strat: bool,
    _allow_sync: bool,
    _allow_pagemode: bool,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        let st = &mut *(*d).state;
        st.pager = Pager::new(st.pager.storage.clone(), Vec::new(), None, false, snapshot_cid((*scan).rs_snapshot));
        st.pager.under_limit_of((*(*scan).rs_rd).rd_id.to_u32());
        st.counted = None;
        st.last_tid = None;
        st.ended = false;
        st.walk = None;
        st.sample = None;
        st.bitmap.clear();
        if let Some(p) = &mut st.parallel {
            p.walking = false;
        }
    }
}

/// Have the tablets return only rows that may satisfy `filter` (pushed-down
/// `WHERE` conditions, see `customscan/pushdown/`), from the next page on; set before the
/// first row is read and again after each rescan.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn set_filter(scan: pg_sys::TableScanDesc, filter: Option<pinax_proto::RowFilter>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        (*(*d).state).pager.filter = filter;
    }
}

/// For a scan with a filter whose rows nobody reads (`count(*) WHERE ...`, see
/// `customscan/pushdown/count.rs`): how many rows certainly match, counted in the tablets. The
/// rows the filter cannot decide are returned by the scan afterwards.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn count_matching(scan: pg_sys::TableScanDesc) -> u64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        (*(*d).state).pager.next_count().or_raise().unwrap_or(0)
    }
}

/// For a scan with a filter under an aggregate computed in storage (see
/// `customscan/pushdown/aggregate.rs`): the partials of `aggs` over the matching rows, and how many rows
/// they folded. The rows the tablets could not decide or fold are returned by the
/// scan afterwards.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn aggregate(scan: pg_sys::TableScanDesc, aggs: &[pinax_proto::AggSpec], group_by: Option<pinax_proto::GroupBy>) -> pinax_client::Aggregated {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        (*(*d).state).pager.next_aggregate(aggs, group_by).or_raise().unwrap_or_default()
    }
}

/// A scan whose rows nobody reads (a plain `count(*)` over a sequential scan
/// without a filter, see `index_only.rs`): the tablets count the visible rows
/// (none is shipped), and this answers true that many times, false after.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn next_counted(scan: pg_sys::TableScanDesc) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let st = &mut *(*(scan as *mut PinaxScanDesc)).state;
        let left = counted_left(st);
        st.counted = Some(left.saturating_sub(1));
        left > 0
    }
}

/// The rows the tablets counted that `st` has not answered for yet (they are
/// asked once per scan).
fn counted_left(st: &mut ScanState) -> u64 {
    match st.counted {
        Some(n) => n,
        None => st.pager.next_count().or_raise().unwrap_or(0),
    }
}

/// How many rows [`next_counted`] would answer true for, at once: it answers
/// false after this.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn take_counted(scan: pg_sys::TableScanDesc) -> u64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let st = &mut *(*(scan as *mut PinaxScanDesc)).state;
        let left = counted_left(st);
        st.counted = Some(0);
        left
    }
}

/// Hand the next row of `pager` to PostgreSQL in `slot`.
///
/// # Safety
/// `slot` must be a valid slot. Calls into PostgreSQL: only in a backend, where
/// its errors can be raised.
pub(super) unsafe fn next_into_slot(pager: &mut Pager, relid: u32, slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { row_into_slot(pager.next_row().or_raise(), relid, slot) }
}

/// Hand `row` (a row of relation `relid`, or None: the scan's end) to
/// PostgreSQL in `slot`, with a TID; whether there was one.
///
/// # Safety
/// As for [`next_into_slot`].
unsafe fn row_into_slot(row: Option<pinax_proto::Row>, relid: u32, slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        match row {
            Some((key, value)) => {
                let value = crate::tuple::merged((*slot).tts_tupleDescriptor, value);
                let tid = state::with(|b| b.tids.add(relid, &key, &value, Origin::Read));
                store_tuple(slot, &value, tid, pg_sys::Oid::from(relid), None);
                true
            }
            None => {
                pg_sys::ExecClearTuple(slot);
                false
            }
        }
    }
}

/// Table AM callback `scan_getnextslot` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_getnextslot(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        let st = &mut *(*d).state;
        let backward = direction == pg_sys::ScanDirection::BackwardScanDirection;
        if st.parallel.is_some() {
            return next_parallel(st, (*scan).rs_snapshot, slot);
        }
        if !backward && st.walk.is_none() {
            let found = next_into_slot(&mut st.pager, st.relid, slot);
            if found {
                st.last_tid = Some((*slot).tts_tid);
            } else {
                st.ended = true;
            }
            return found;
        }
        next_both_ways(st, backward, (*scan).rs_snapshot, slot)
    }
}

/// A step of a scan that has gone backward (a SCROLL cursor's FETCH BACKWARD,
/// PRIOR, LAST): through a [`BiWalk`] that starts where the forward walk
/// stands, at its read point (so both directions see one state).
///
/// # Safety
/// `slot` must be a valid slot, `snapshot` the scan's. Calls into PostgreSQL:
/// only in a backend, where its errors can be raised.
unsafe fn next_both_ways(st: &mut ScanState, backward: bool, snapshot: pg_sys::Snapshot, slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let relid = st.relid;
        if st.walk.is_none() {
            let pos = if st.ended {
                Some((0, Bound::End))
            } else {
                st.last_tid.and_then(|tid| state::with(|b| b.tids.get(relid, &tid).map(|r| (0, Bound::Key(r.key.to_vec())))))
            };
            st.walk = Some(BiWalk::resume(vec![(Vec::new(), None)], pos, st.pager.settled_at()));
        }
        let (storage, filter, curcid) = (st.pager.storage.clone(), st.pager.filter.clone(), snapshot_cid(snapshot));
        let mut make = |start, end, reverse, _whole| {
            let mut p = Pager::new(storage.clone(), start, end, reverse, curcid);
            p.filter = filter.clone();
            p
        };
        row_into_slot(st.walk.as_mut().expect("made above").next(backward, &mut make).or_raise(), relid, slot)
    }
}

/// Table AM callback `parallelscan_estimate` (`TableAmRoutine`,
/// access/tableam.h): the size of [`SharedScan`].
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn parallelscan_estimate(_rel: pg_sys::Relation) -> pg_sys::Size {
    std::mem::size_of::<SharedScan>()
}

/// Table AM callback `parallelscan_initialize` (`TableAmRoutine`,
/// access/tableam.h): no tablet claimed yet (the leader's `scan_begin` writes
/// the read point). Returns where PostgreSQL puts the snapshot after it.
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn parallelscan_initialize(rel: pg_sys::Relation, pscan: pg_sys::ParallelTableScanDesc) -> pg_sys::Size {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let shared = pscan as *mut SharedScan;
        std::ptr::write_bytes(shared, 0, 1);
        (*shared).base.phs_relid = (*rel).rd_id;
        (*shared).base.phs_syncscan = false;
        std::mem::size_of::<SharedScan>()
    }
}

/// Table AM callback `parallelscan_reinitialize` (`TableAmRoutine`,
/// access/tableam.h): a rescan claims the tablets again from the first.
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn parallelscan_reinitialize(_rel: pg_sys::Relation, pscan: pg_sys::ParallelTableScanDesc) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        (*(pscan as *mut SharedScan)).next_tablet.store(0, std::sync::atomic::Ordering::Release);
    }
}

/// Rows of `rel` the planner assumes one block holds (its average row width,
/// as `relation_estimate_size`).
///
/// # Safety
/// `rel` must be a valid relation.
unsafe fn rows_per_block(rel: pg_sys::Relation) -> usize {
    // SAFETY: the caller upholds this function's contract (# Safety).
    let width = unsafe { pg_sys::get_rel_data_width(rel, std::ptr::null_mut()) } as usize + 24;
    (pg_sys::BLCKSZ as usize / width).max(1)
}

impl Sample {
    /// Count the scan's rows at a read point, and stand before the first.
    fn begin(storage: &str, curcid: u32, per_block: usize) -> Sample {
        let mut counter = Pager::new(storage.to_string(), Vec::new(), None, false, curcid);
        let n = counter.next_count().or_raise().unwrap_or(0);
        let at = counter.settled_at();
        let mut pager = Pager::new(storage.to_string(), Vec::new(), None, false, curcid);
        pager.settle_at(at);
        let nblocks = n.div_ceil(per_block as u64).min(u64::from(pg_sys::InvalidBlockNumber - 1)) as u32;
        Sample { nblocks, per_block, block: None, rows: Vec::new(), starts: Vec::new(), pager, next: 0, at, curcid }
    }

    /// Read block `b` (< `nblocks`) into `rows`.
    fn load(&mut self, b: u32) {
        if b < self.next {
            // Back to a block passed: from its first key.
            let mut pager = Pager::new(self.pager.storage.clone(), self.starts[b as usize].clone(), None, false, self.curcid);
            pager.settle_at(self.at);
            self.pager = pager;
            self.next = b;
        }
        self.rows.clear();
        while self.next <= b {
            let keep = self.next == b;
            for i in 0..self.per_block {
                let Some(row) = self.pager.next_row().or_raise() else { break };
                if i == 0 && self.starts.len() == self.next as usize {
                    self.starts.push(row.0.clone());
                }
                if keep {
                    self.rows.push(row);
                }
            }
            self.next += 1;
        }
        self.block = Some(b);
    }
}

/// Table AM callback `scan_sample_next_block` (`TableAmRoutine`,
/// access/tableam.h): the next block the sampling method picks (its own
/// `NextSampleBlock`, else every block in turn), read; false when there is none.
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_sample_next_block(scan: pg_sys::TableScanDesc, scanstate: *mut pg_sys::SampleScanState) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let st = &mut *(*(scan as *mut PinaxScanDesc)).state;
        if st.sample.is_none() {
            let per_block = rows_per_block((*scan).rs_rd);
            st.sample = Some(Sample::begin(&st.pager.storage, snapshot_cid((*scan).rs_snapshot), per_block));
        }
        let s = st.sample.as_mut().expect("begun above");
        if s.nblocks == 0 {
            return false;
        }
        let tsm = (*scanstate).tsmroutine;
        let blockno = match (*tsm).NextSampleBlock {
            Some(next) => pg_sys::ffi::pg_guard_ffi_boundary(|| next(scanstate, s.nblocks)),
            None => s.block.map_or(0, |b| b + 1),
        };
        if blockno == pg_sys::InvalidBlockNumber || blockno >= s.nblocks {
            s.block = None;
            s.rows.clear();
            return false;
        }
        s.load(blockno);
        true
    }
}

/// Table AM callback `scan_sample_next_tuple` (`TableAmRoutine`,
/// access/tableam.h): the next row of the current block the sampling method
/// picks (`NextSampleTuple`, offsets from 1), or false when it is done with the
/// block.
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_sample_next_tuple(
    scan: pg_sys::TableScanDesc,
    scanstate: *mut pg_sys::SampleScanState,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let st = &mut *(*(scan as *mut PinaxScanDesc)).state;
        let relid = st.relid;
        let Some(s) = st.sample.as_mut() else {
            pg_sys::ExecClearTuple(slot);
            return false;
        };
        let Some(blockno) = s.block else {
            pg_sys::ExecClearTuple(slot);
            return false;
        };
        let next = (*(*scanstate).tsmroutine).NextSampleTuple.expect("every sampling method has NextSampleTuple");
        let maxoffset = s.rows.len() as pg_sys::OffsetNumber;
        loop {
            pg_sys::check_for_interrupts!();
            let off = pg_sys::ffi::pg_guard_ffi_boundary(|| next(scanstate, blockno, maxoffset));
            if off == pg_sys::InvalidOffsetNumber {
                pg_sys::ExecClearTuple(slot);
                return false;
            }
            let Some(row) = s.rows.get(off as usize - 1) else { continue };
            return row_into_slot(Some(row.clone()), relid, slot);
        }
    }
}
