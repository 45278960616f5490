//! Index scan callbacks (`index_fetch_*`) and non-modifying operations on
//! individual tuples (`tuple_fetch_row_version`, `tuple_tid_valid`,
//! `tuple_get_latest_tid`, `tuple_satisfies_snapshot`, `index_delete_tuples`):
//! a row version by TID, from the backend's TID map (every version handed out
//! keeps its TID for the whole transaction), as the snapshot sees it.

use super::meta_of;
use crate::scan::{snapshot_cid, Pager};
use crate::state;
use crate::tid::Origin;
use crate::tuple::store_tuple;
use crate::violation::OrRaiseFlush;
use pgrx::pg_guard;
use pgrx::pg_sys;

/// Table AM callback `index_fetch_begin` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_fetch_begin(rel: pg_sys::Relation) -> *mut pg_sys::IndexFetchTableData {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let m = meta_of(rel);
        let _ = m;
        let f = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexFetchTableData>()) as *mut pg_sys::IndexFetchTableData;
        (*f).rel = rel;
        f
    }
}

/// Table AM callback `index_fetch_reset` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_fetch_reset(_data: *mut pg_sys::IndexFetchTableData) {}

/// Table AM callback `index_fetch_end` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_fetch_end(data: *mut pg_sys::IndexFetchTableData) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        pg_sys::pfree(data.cast());
    }
}

/// Put the row version behind `tid` into `slot`, if it exists and `snapshot` sees it.
///
/// # Safety
/// `rel` must be a valid open relation, `tid` a valid item pointer, `snapshot`
/// a valid snapshot, and `slot` a valid slot. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
pub(super) unsafe fn fetch_version(rel: pg_sys::Relation, tid: pg_sys::ItemPointer, snapshot: pg_sys::Snapshot, slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let relid = (*rel).rd_id;
        if !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_DIRTY {
            // A dirty snapshot reports in-progress writers to wait for; storage resolves
            // those itself, so there is never one (callers read these fields).
            (*snapshot).xmin = pg_sys::InvalidTransactionId;
            (*snapshot).xmax = pg_sys::InvalidTransactionId;
            (*snapshot).speculativeToken = 0;
        }
        let cid = snapshot_cid(snapshot);
        // SnapshotSelf (a deferred unique constraint's recheck) sees every change
        // of this transaction: a version any of its commands replaced is gone.
        let self_snapshot = !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_SELF;
        // The row goes into the slot straight from the map (no copy of it first);
        // nothing store_tuple calls comes back to the backend state.
        state::with(|b| {
            let Some(r) = b.tids.get(relid.to_u32(), &*tid) else { return false };
            // A version replaced by a command the snapshot already sees is gone.
            if cid != u32::MAX && r.superseded_by.is_some_and(|c| c < cid) {
                return false;
            }
            if self_snapshot && b.tids.replaced_since(relid.to_u32(), &*tid) {
                return false;
            }
            let own = (r.origin == Origin::Written).then(|| pg_sys::GetCurrentTransactionId());
            store_tuple(slot, r.tuple, *tid, relid, own);
            true
        })
    }
}

/// Table AM callback `index_fetch_tuple` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_fetch_tuple(
    data: *mut pg_sys::IndexFetchTableData,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    call_again: *mut bool,
    all_dead: *mut bool,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        *call_again = false;
        if !all_dead.is_null() {
            *all_dead = false;
        }
        fetch_version((*data).rel, tid, snapshot, slot)
    }
}

/// Table AM callback `tuple_fetch_row_version` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_fetch_row_version(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe { fetch_version(rel, tid, snapshot, slot) }
}

/// Table AM callback `tuple_tid_valid` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_tid_valid(scan: pg_sys::TableScanDesc, tid: pg_sys::ItemPointer) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let relid = (*(*scan).rs_rd).rd_id.to_u32();
        state::with(|b| b.tids.get(relid, &*tid).is_some())
    }
}

/// Table AM callback `tuple_get_latest_tid` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_get_latest_tid(_scan: pg_sys::TableScanDesc, _tid: pg_sys::ItemPointer) {}

/// Whether the row version in `slot` is visible to `snapshot`. Versions read at the
/// statement's read time or written by the transaction are; one found by a dirty
/// snapshot's look-up at the present time (`Origin::Latest`) is if an MVCC
/// snapshot's read of its key finds that same version. (ON CONFLICT under
/// REPEATABLE READ and SERIALIZABLE asks this of the conflicting row: PostgreSQL
/// raises 40001 when the transaction's snapshot cannot see it.)
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_satisfies_snapshot(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, snapshot: pg_sys::Snapshot) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if snapshot.is_null() || (*snapshot).snapshot_type != pg_sys::SnapshotType::SNAPSHOT_MVCC {
            return true;
        }
        let tid = (*slot).tts_tid;
        let latest =
            state::with(|b| b.tids.get((*rel).rd_id.to_u32(), &tid).filter(|r| r.origin == Origin::Latest).map(|r| (r.key.to_vec(), r.tuple.to_vec())));
        let Some((key, tuple)) = latest else { return true };
        let m = meta_of(rel);
        let mut pager = Pager::new(m.storage.clone(), Vec::new(), None, false, snapshot_cid(snapshot));
        match pager.get(&m.storage, &key).or_raise() {
            Some(v) => crate::tuple::merged((*rel).rd_att, v) == tuple,
            None => false,
        }
    }
}

/// Table AM callback `index_delete_tuples` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_delete_tuples(_rel: pg_sys::Relation, _delstate: *mut pg_sys::TM_IndexDeleteOp) -> pg_sys::TransactionId {
    pg_sys::InvalidTransactionId
}
