//! Index scans (`ambeginscan`, `amrescan`, `amgettuple`, `amendscan`): the key
//! ranges of the scan keys (`ranges.rs`) walked in storage, each entry's row
//! fetched (secondary index) or read with it (primary key) and handed out with a
//! TID; a dirty snapshot's look-up reads the newest committed rows. Index-only
//! scans (`am/index_only.rs`) take the columns from the entry without TIDs, and
//! those reading no column have the tablets count the entries.

use super::meta_for;
use super::ranges::{ranges, Range, Ranges};
use crate::error;
use crate::keys::decode_key;
use crate::meta::IndexMeta;
use crate::scan::{snapshot_cid, BiWalk, Bound, Pager};
use crate::state;
use crate::tid::{BitmapRead, Origin};
use crate::tuple::store_tuple;
use crate::violation::OrRaiseFlush;
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::rc::Rc;

struct IndexScanState {
    pager: Option<Pager>,
    /// Entries counted in storage not yet returned (count-only index-only scans).
    pending: u64,
    index: Rc<IndexMeta>,
    /// The ranges, in the order of the scan's first direction, and how many of
    /// them the walk has begun.
    ranges: Vec<Range>,
    next_range: usize,
    /// Once the scan has changed direction (a SCROLL cursor): the walk both ways.
    walk: Option<BiWalk>,
    /// The read point the first range's walk settled on: every later one reads
    /// there too (one state for the whole scan, however many statements fetch
    /// from it).
    at: Option<pinax_proto::ReadPoint>,
    started: bool,
    reverse: bool,
    table_storage: String,
    index_storage: String,
    is_pk: bool,
    relid: u32,
    curcid: u32,
    /// Every range is one primary-key row (all key columns equal).
    point: bool,
    /// Several such rows (`pk = ANY (...)`, `pk IN (...)`): read together
    /// ([`POINT_BATCH`] at a time, one request per tablet) into `prefetched`
    /// instead of one read each.
    batch_points: bool,
    /// A dirty snapshot's look-up: the newest committed rows (`Pager::latest`).
    latest: bool,
    /// A dirty snapshot's look-up of exactly one unique key (`Ranges::exact`):
    /// its entries are returned without asking for a recheck.
    exact_conflict_check: bool,
    /// A secondary index's entries read by the current range's walk, each with
    /// its row (None: not seen at the read point), fetched together, not handed
    /// out yet...
    prefetched: std::collections::VecDeque<Prefetched>,
    /// ...and the key of the entry handed out last from them (empty: none in
    /// this range): where a change of direction starts from, the walk being
    /// ahead.
    handed: Vec<u8>,
}

/// An index entry (key, row key) and its row, fetched ahead (None: the read
/// point does not see it). (Primary-key rows read together: key, row, None.)
type Prefetched = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);

/// How many primary-key rows a scan of several reads together.
const POINT_BATCH: usize = 256;

#[repr(C)]
struct Opaque {
    cb: pg_sys::MemoryContextCallback,
    state: *mut IndexScanState,
    /// The memory context the scan lives in.
    scan_cxt: pg_sys::MemoryContext,
    /// Memory of the index tuple handed out (reset for each one); made on first use.
    tuple_cxt: pg_sys::MemoryContext,
    /// Slot to deform table rows in (primary-key index-only scans); made on first use.
    row_slot: *mut pg_sys::TupleTableSlot,
    /// Set by the Pinax index-only scan node (am/index_only.rs): it never uses the
    /// TIDs, so rows are neither fetched nor registered.
    no_tids: bool,
    /// Bit `i`: index column `i` must be returned (the others may be left NULL).
    needed: u64,
    /// The all-NULL tuple returned when no column is needed, made once.
    empty_tuple: pg_sys::HeapTuple,
    /// A bitmap scan (`amgetbitmap`): rows get the TIDs of their read
    /// (`TidMap::add_bitmap`), shared with the statement's other bitmap scans.
    bitmap: bool,
}

/// A memory context reset callback (`MemoryContextCallback`).
///
/// # Safety
/// `arg` must be what the callback was registered with (PostgreSQL calls it
/// so when the memory context is reset; this module also calls it directly):
/// its Rust state is freed once, and the pointer to it nulled.
#[pg_guard]
unsafe extern "C-unwind" fn free_opaque(arg: *mut std::ffi::c_void) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let o = arg as *mut Opaque;
        if !(*o).state.is_null() {
            drop(Box::from_raw((*o).state));
            (*o).state = std::ptr::null_mut();
        }
    }
}

/// Index AM callback `ambeginscan` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambeginscan(idx: pg_sys::Relation, nkeys: i32, norderbys: i32) -> pg_sys::IndexScanDesc {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(idx, nkeys, norderbys);
        let o = pg_sys::palloc0(std::mem::size_of::<Opaque>()) as *mut Opaque;
        (*o).cb.func = Some(free_opaque);
        (*o).cb.arg = o.cast();
        (*o).scan_cxt = pg_sys::CurrentMemoryContext;
        (*o).needed = u64::MAX;
        pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*o).cb);
        (*scan).opaque = o.cast();
        scan
    }
}

/// Index AM callback `amrescan` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amrescan(scan: pg_sys::IndexScanDesc, keys: pg_sys::ScanKey, nkeys: i32, _orderbys: pg_sys::ScanKey, _norderbys: i32) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if !keys.is_null() && nkeys > 0 {
            std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
        }
        let o = (*scan).opaque as *mut Opaque;
        free_opaque(o.cast());
    }
}

/// Index AM callback `amendscan` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amendscan(scan: pg_sys::IndexScanDesc) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        free_opaque((*scan).opaque);
    }
}

/// The walk of `range` for scan `scan` (state `st`).
///
/// # Safety
/// `scan` must be a valid index scan.
unsafe fn range_pager(scan: pg_sys::IndexScanDesc, st: &IndexScanState, (start, end): Range) -> Pager {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut pager = Pager::new(st.index_storage.clone(), start, end, st.reverse, st.curcid);
        pager.settle_at(st.at);
        // Where a change of direction starts from (`walk_from_here`).
        pager.remember_last = true;
        pager.point = st.point;
        pager.latest = st.latest;
        pager.under_limit_of((*(*scan).indexRelation).rd_id.to_u32());
        pager
    }
}

/// Whether the scan is an index-only scan reading no column (count(*)): the
/// tablets count the entries of each range.
///
/// # Safety
/// `o` must be a valid `Opaque`.
unsafe fn counts_only(o: *const Opaque, st: &IndexScanState) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { (*o).no_tids && (*o).needed == 0 && !st.reverse }
}

/// For an index-only scan reading no column (count(*)), begun and not yet
/// read: how many entries it has, counted in storage, at once (it returns none
/// after this). None (nothing read) for any other scan.
///
/// # Safety
/// `scan` must be a scan of a Pinax index begun by `index_beginscan` and
/// switched to index-only (`set_index_only`), its keys set.
pub unsafe fn take_count(scan: pg_sys::IndexScanDesc) -> Option<u64> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let o = (*scan).opaque as *mut Opaque;
        if !((*o).no_tids && (*o).needed == 0) {
            return None;
        }
        // The first entry sets the scan up (forward, as counting scans are).
        if !amgettuple(scan, pg_sys::ScanDirection::ForwardScanDirection) {
            return Some(0);
        }
        let st = &mut *(*o).state;
        debug_assert!(counts_only(o, st), "a forward index-only scan reading no column counts");
        let mut n = 1 + std::mem::take(&mut st.pending);
        st.pager = None;
        while let Some(range) = st.ranges.get(st.next_range).cloned() {
            st.next_range += 1;
            n += range_pager(scan, st, range).next_count().or_raise().unwrap_or(0);
        }
        Some(n)
    }
}

/// Index AM callback `amgettuple` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents; or by `take_count`, with a scan begun here.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amgettuple(scan: pg_sys::IndexScanDesc, direction: pg_sys::ScanDirection::Type) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let o = (*scan).opaque as *mut Opaque;
        let reverse = direction == pg_sys::ScanDirection::BackwardScanDirection;
        if (*o).state.is_null() {
            let heap = (*scan).heapRelation;
            let (m, im) = meta_for(heap, (*scan).indexRelation);
            let snapshot = (*scan).xs_snapshot;
            let dirty = !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_DIRTY;
            if im.is_pk && dirty && crate::insert_at_once::pending(m.relid) {
                // ON CONFLICT's look-up before a row written at once: its write is the
                // check (a conflict there makes PostgreSQL look again, for real).
                return false;
            }
            let keys: &[pg_sys::ScanKeyData] = if (*scan).keyData.is_null() || (*scan).numberOfKeys <= 0 {
                &[]
            } else {
                std::slice::from_raw_parts((*scan).keyData, (*scan).numberOfKeys as usize)
            };
            let Ranges { ranges: found, point, exact } = ranges(&im, keys);
            let mut rs: Vec<Range> = found;
            if reverse {
                rs.reverse();
            }
            if state::serializable_locking() {
                // A SERIALIZABLE read locks what it reads: the rows of a primary-key
                // lookup by every key column (found or not), else the ranges scanned
                // (rows fetched through a secondary index are locked as they come).
                let storage = if im.is_pk { &m.storage } else { &im.storage };
                for (start, end) in &rs {
                    let res =
                        if point { state::with(|b| b.lock_read_row(storage, start)) } else { state::with(|b| b.lock_ranges(storage, start, end.as_deref())) };
                    res.or_raise();
                }
            }
            let batch_points = im.is_pk && point && !dirty && rs.len() > 1;
            let st = IndexScanState {
                pager: None,
                pending: 0,
                index: im.clone(),
                ranges: rs,
                next_range: 0,
                walk: None,
                at: None,
                started: false,
                reverse,
                table_storage: m.storage.clone(),
                index_storage: if im.is_pk { m.storage.clone() } else { im.storage.clone() },
                is_pk: im.is_pk,
                relid: m.relid,
                curcid: snapshot_cid((*scan).xs_snapshot),
                latest: dirty,
                point,
                batch_points,
                exact_conflict_check: dirty && exact,
                prefetched: std::collections::VecDeque::new(),
                handed: Vec::new(),
            };
            (*o).state = Box::into_raw(Box::new(st));
        }
        let st = &mut *(*o).state;
        if st.started && st.reverse != reverse && st.walk.is_none() {
            if counts_only(o, st) {
                error::not_supported("changing scan direction in a counting index scan of a Pinax table is not supported");
            }
            st.walk = Some(walk_from_here(st));
            st.prefetched.clear();
        }
        st.started = true;
        loop {
            if st.walk.is_some() {
                let (storage, curcid, point, latest) = (st.index_storage.clone(), st.curcid, st.point, st.latest);
                let mut make = |start, end, reverse, whole| {
                    let mut p = Pager::new(storage.clone(), start, end, reverse, curcid);
                    p.point = point && whole;
                    p.latest = latest;
                    p
                };
                let walk = st.walk.as_mut().expect("checked above");
                let Some((key, value)) = walk.next(reverse, &mut make).or_raise() else { return false };
                if hand_out(scan, o, st, key, value, None) {
                    return true;
                }
                continue;
            }
            if st.batch_points && !counts_only(o, st) {
                // Primary-key rows named one by one: read together, handed out
                // in the order of the ranges (those the read point does not see
                // skipped).
                if st.prefetched.is_empty() {
                    let Some(first) = st.ranges.get(st.next_range).cloned() else { return false };
                    let end = (st.next_range + POINT_BATCH).min(st.ranges.len());
                    let keys: Vec<Vec<u8>> = st.ranges[st.next_range..end].iter().map(|(start, _)| start.clone()).collect();
                    st.next_range = end;
                    let mut pager = range_pager(scan, st, first);
                    let rows = pager.get_many(&st.table_storage, &keys).or_raise();
                    st.at = st.at.or(pager.settled_at());
                    st.prefetched.extend(keys.into_iter().zip(rows).filter_map(|(key, row)| row.map(|row| (key, row, None))));
                    continue;
                }
                let (key, row, _) = st.prefetched.pop_front().expect("checked above");
                st.handed.clear();
                st.handed.extend_from_slice(&key);
                if hand_out(scan, o, st, key, row, None) {
                    return true;
                }
                continue;
            }
            if st.pager.is_none() {
                let Some(range) = st.ranges.get(st.next_range).cloned() else { return false };
                st.next_range += 1;
                st.pager = Some(range_pager(scan, st, range));
            }
            if counts_only(o, st) {
                // An index-only scan reading no column (count(*)): the tablets count the
                // entries, and as many all-NULL tuples are returned.
                if st.pending == 0 {
                    match st.pager.as_mut().expect("pager").next_count().or_raise() {
                        Some(n) => st.pending = n,
                        None => {
                            st.pager = None;
                            continue;
                        }
                    }
                    if st.pending == 0 {
                        continue;
                    }
                }
                st.pending -= 1;
                form_index_tuple(scan, o, &st.index, st.relid, &[], &[]);
                (*scan).xs_heaptid = NO_TID;
                (*scan).xs_recheck = false;
                return true;
            }
            if !st.is_pk && !(*o).no_tids {
                // A secondary index's entries name rows: the rows of the entries the
                // walk has read so far are fetched together (one request per tablet).
                if st.prefetched.is_empty() {
                    let pager = st.pager.as_mut().expect("pager");
                    let first = pager.next_row().or_raise();
                    st.at = st.at.or(pager.settled_at());
                    let Some(first) = first else {
                        st.pager = None;
                        st.handed.clear();
                        continue;
                    };
                    let mut entries = vec![first];
                    while pager.queued() > 0 {
                        entries.extend(pager.next_row().or_raise());
                    }
                    let keys: Vec<Vec<u8>> = entries.iter().map(|(_, row_key)| row_key.clone()).collect();
                    let rows = pager.get_many(&st.table_storage, &keys).or_raise();
                    st.prefetched.extend(entries.into_iter().zip(rows).map(|((k, v), row)| (k, v, row)));
                }
                let (key, value, row) = st.prefetched.pop_front().expect("refilled above");
                st.handed.clear();
                st.handed.extend_from_slice(&key);
                if hand_out(scan, o, st, key, value, Some(row)) {
                    return true;
                }
                continue;
            }
            let pager = st.pager.as_mut().expect("pager");
            let row = pager.next_row().or_raise();
            st.at = st.at.or(pager.settled_at());
            let Some((key, value)) = row else {
                st.pager = None;
                continue;
            };
            if hand_out(scan, o, st, key, value, None) {
                return true;
            }
        }
    }
}

/// Index AM callback `amgetbitmap` (`IndexAmRoutine`, access/amapi.h): the
/// scan's rows (fetched as an index scan fetches them) added to `tbm` by the
/// TIDs of their read (`TidMap::add_bitmap`), so that the bitmaps of one
/// statement's scans of a table name each row alike and BitmapAnd / BitmapOr
/// combine them; the bitmap heap scan hands out the rows behind the TIDs
/// (am/table/bitmap.rs). Every TID asks for the quals to be rechecked.
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amgetbitmap(scan: pg_sys::IndexScanDesc, tbm: *mut pg_sys::TIDBitmap) -> i64 {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let o = (*scan).opaque as *mut Opaque;
        (*o).bitmap = true;
        // A bitmap index scan is begun without its table (index_beginscan_bitmap);
        // the executor holds a lock on it. (An error ends the transaction, which
        // releases the reference.)
        let opened = (*scan).heapRelation.is_null();
        if opened {
            (*scan).heapRelation = pg_sys::relation_open((*(*(*scan).indexRelation).rd_index).indrelid, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
        let mut n = 0i64;
        let mut tids: Vec<pg_sys::ItemPointerData> = Vec::with_capacity(256);
        while amgettuple(scan, pg_sys::ScanDirection::ForwardScanDirection) {
            tids.push((*scan).xs_heaptid);
            n += 1;
            if tids.len() == tids.capacity() {
                pg_sys::tbm_add_tuples(tbm, tids.as_mut_ptr(), tids.len() as i32, true);
                tids.clear();
            }
        }
        if !tids.is_empty() {
            pg_sys::tbm_add_tuples(tbm, tids.as_mut_ptr(), tids.len() as i32, true);
        }
        if opened {
            pg_sys::relation_close((*scan).heapRelation, pg_sys::NoLock as pg_sys::LOCKMODE);
            (*scan).heapRelation = std::ptr::null_mut();
        }
        n
    }
}

/// Hand index entry `key` → `value`, just read by the scan's current pager, to
/// the executor: the index tuple (index-only scans), the row's TID (the row
/// fetched for a secondary index, unless `fetched` already holds it). False: the
/// entry names a row the read point does not see (the scan goes on).
///
/// # Safety
/// As for [`amgettuple`]; `o` is the scan's `Opaque` and `st` its state.
unsafe fn hand_out(
    scan: pg_sys::IndexScanDesc,
    o: *mut Opaque,
    st: &mut IndexScanState,
    key: Vec<u8>,
    value: Vec<u8>,
    fetched: Option<Option<Vec<u8>>>,
) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*scan).xs_want_itup {
            form_index_tuple(scan, o, &st.index, st.relid, &key, &value);
            if (*o).no_tids {
                // An index entry is written and deleted with its row, by the same
                // command: the entry this read point sees names a row it sees.
                (*scan).xs_heaptid = NO_TID;
                (*scan).xs_recheck = true;
                return true;
            }
        }
        let (row_key, row) = if st.is_pk {
            (key, crate::tuple::merged((*(*scan).heapRelation).rd_att, value))
        } else {
            let got = match fetched {
                Some(row) => row,
                None => {
                    let pager = match st.walk.as_mut() {
                        Some(w) => w.pager(),
                        None => st.pager.as_mut(),
                    }
                    .expect("the pager of the entry");
                    pager.get(&st.table_storage, &value).or_raise()
                }
            };
            match got {
                Some(row) => {
                    let row = crate::tuple::merged((*(*scan).heapRelation).rd_att, row);
                    if state::serializable_locking() {
                        state::with(|b| b.lock_read_row(&st.table_storage, &value)).or_raise();
                    }
                    (value, row)
                }
                None => return false, // entry of a row this read point does not see
            }
        };
        let tid = if st.latest {
            state::with(|b| match b.excl_row_tid(st.relid, &row_key) {
                Some(own) => own,
                None => b.tids.add(st.relid, &row_key, &row, Origin::Latest),
            })
        } else if (*o).bitmap {
            let at = st.at.expect("a bitmap scan's rows come from a settled walk");
            state::with(|b| b.tids.add_bitmap(BitmapRead::new(at, st.curcid), st.relid, &row_key, &row))
        } else {
            state::with(|b| b.tids.add(st.relid, &row_key, &row, Origin::Read))
        };
        (*scan).xs_heaptid = tid;
        (*scan).xs_recheck = !st.exact_conflict_check;
        true
    }
}

/// The walk both ways of a scan that changes direction, from where its walk in
/// its first direction stands: the ranges in ascending order, the range it is
/// in, and its last entry there (or the edge of a range it finished), at the
/// read point it settled on.
fn walk_from_here(st: &IndexScanState) -> BiWalk {
    let n = st.ranges.len();
    let asc: Vec<Range> = if st.reverse { st.ranges.iter().rev().cloned().collect() } else { st.ranges.clone() };
    // Index `i` of the first direction's order, in ascending order.
    let ascending = |i: usize| if st.reverse { n - 1 - i } else { i };
    // The edge a walk in the first direction leaves a range by, and enters one by.
    let (exit, entry) = if st.reverse { (Bound::Start, Bound::End) } else { (Bound::End, Bound::Start) };
    if st.batch_points {
        // Rows read together: the walk stands on the row handed out last (the
        // rows of the ranges between it and the next one handed out are not
        // there at the read point), or before every range.
        let pos = (!st.handed.is_empty()).then(|| {
            let i = st.ranges.iter().position(|(start, _)| *start == st.handed).expect("a handed-out row is one of the ranges'");
            (ascending(i), Bound::Key(st.handed.clone()))
        });
        return BiWalk::resume(asc, pos, st.at);
    }
    // Rows fetched ahead: the walk stands past the entry handed out last.
    let prefetching = !st.is_pk && !st.prefetched.is_empty() || !st.handed.is_empty();
    let pos = match (st.next_range, &st.pager) {
        (0, _) => None,
        (k, Some(_)) if prefetching => Some((ascending(k - 1), if st.handed.is_empty() { entry } else { Bound::Key(st.handed.clone()) })),
        (k, Some(p)) => Some((ascending(k - 1), p.last_key().map_or(entry, |key| Bound::Key(key.to_vec())))),
        (k, None) => Some((ascending(k - 1), exit)),
    };
    BiWalk::resume(asc, pos, st.at)
}

/// The TID of rows an index-only scan returns without registering them (valid, but
/// names no row).
const NO_TID: pg_sys::ItemPointerData = pg_sys::ItemPointerData { ip_blkid: pg_sys::BlockIdData { bi_hi: 0, bi_lo: 0 }, ip_posid: 1 };

/// Let index-only scan `scan` (its Pinax node, am/index_only.rs) skip TIDs: rows are
/// not fetched or registered, only the index tuple is returned, with the columns in
/// `needed` (bit `i`: column `i`) filled in.
///
/// # Safety
/// `scan` must be a scan of an index using the Pinax routine.
pub unsafe fn set_index_only(scan: pg_sys::IndexScanDesc, needed: u64) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        (*scan).xs_want_itup = true;
        let o = (*scan).opaque as *mut Opaque;
        (*o).no_tids = true;
        (*o).needed = needed;
    }
}

/// Whether index-only scans may return column `col` (0-based) of index `im`: every
/// column of the primary key (taken from the row), and the key columns of a
/// secondary index whose encoding decodes exactly (INCLUDE columns are not stored).
pub fn can_return(im: &IndexMeta, col: usize, heap_attnum: i16) -> bool {
    if im.is_pk {
        heap_attnum > 0
    } else {
        im.cols.get(col).is_some_and(|c| c.returnable())
    }
}

/// Hand the index columns of entry `key` → `value` to the executor as `xs_hitup`
/// (valid until the next entry): from the row for the primary key (`value` is the
/// row), decoded from the key for a secondary index (columns that cannot be
/// returned are NULL; the planner never asks for them).
///
/// # Safety
/// `scan` must be a valid index scan, and `o` a valid `Opaque`. Calls into
/// PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn form_index_tuple(scan: pg_sys::IndexScanDesc, o: *mut Opaque, im: &IndexMeta, relid: u32, key: &[u8], value: &[u8]) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*o).needed == 0 && !(*o).empty_tuple.is_null() {
            // Nothing is read (count(*)): the same all-NULL tuple every time.
            (*scan).xs_hitup = (*o).empty_tuple;
            (*scan).xs_hitupdesc = (*(*scan).indexRelation).rd_att;
            return;
        }
        if (*o).tuple_cxt.is_null() {
            (*o).tuple_cxt = pg_sys::AllocSetContextCreateInternal((*o).scan_cxt, c"pinax index tuple".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
        }
        pg_sys::MemoryContextReset((*o).tuple_cxt);
        let old = pg_sys::MemoryContextSwitchTo((*o).tuple_cxt);
        let idx = (*scan).indexRelation;
        let desc = (*idx).rd_att;
        let natts = (*desc).natts as usize;
        let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
        let mut isnull = [true; pg_sys::INDEX_MAX_KEYS as usize];
        let needed = (*o).needed;
        let wanted = |i: usize| i < 64 && needed & (1 << i) != 0;
        if needed == 0 {
            // Nothing is read (count(*)): an all-NULL tuple.
        } else if im.is_pk {
            if (*o).row_slot.is_null() {
                // A descriptor copy: not reference-counted, so the slot needs no release.
                pg_sys::MemoryContextSwitchTo((*o).scan_cxt);
                let tdesc = pg_sys::CreateTupleDescCopyConstr((*(*scan).heapRelation).rd_att);
                (*o).row_slot = pg_sys::MakeSingleTupleTableSlot(tdesc, &raw const pg_sys::TTSOpsHeapTuple);
                pg_sys::MemoryContextSwitchTo((*o).tuple_cxt);
            }
            let slot = (*o).row_slot;
            let value = crate::tuple::merged((*slot).tts_tupleDescriptor, value.to_vec());
            store_tuple(slot, &value, NO_TID, pg_sys::Oid::from(relid), None);
            let indkey = (*(*idx).rd_index).indkey.values.as_slice(natts);
            for (i, &att) in indkey.iter().enumerate() {
                if att > 0 && wanted(i) {
                    values[i] = pg_sys::slot_getattr(slot, att as i32, &mut isnull[i]);
                }
            }
        } else if let Some(cols) = decode_key(&im.cols[..im.cols.len().min(64 - needed.leading_zeros() as usize)], key, im.hashed) {
            for (i, (v, n)) in cols.into_iter().enumerate() {
                if im.cols[i].returnable() && wanted(i) {
                    values[i] = v;
                    isnull[i] = n;
                }
            }
        } else {
            pg_sys::MemoryContextSwitchTo(old);
            error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "pinax: index entry key does not decode", None);
        }
        if needed == 0 {
            pg_sys::MemoryContextSwitchTo((*o).scan_cxt);
            (*o).empty_tuple = pg_sys::heap_form_tuple(desc, values.as_mut_ptr(), isnull.as_mut_ptr());
            (*scan).xs_hitup = (*o).empty_tuple;
        } else {
            (*scan).xs_hitup = pg_sys::heap_form_tuple(desc, values.as_mut_ptr(), isnull.as_mut_ptr());
        }
        (*scan).xs_hitupdesc = desc;
        pg_sys::MemoryContextSwitchTo(old);
    }
}
