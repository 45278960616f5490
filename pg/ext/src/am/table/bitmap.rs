//! Bitmap heap scan callbacks (`scan_bitmap_next_block`, `scan_bitmap_next_tuple`
//! of `TableAmRoutine`): the rows behind the TIDs of a bitmap that Pinax index
//! scans built (`am/index/scan.rs`, `amgetbitmap`), from the backend's TID map.
//!
//! A bitmap index scan reads its rows as an index scan does and names each by the
//! TID of its read (`TidMap::add_bitmap`): every bitmap scan of one statement
//! gives a row the same TID, so BitmapAnd and BitmapOr combine them as they
//! combine heap TIDs. A "block" is 256 TIDs of the map. An exact page lists its
//! TIDs; a lossy one (the bitmap outgrew `work_mem`) names the block only: its
//! rows are those the statement's bitmap scans handed out for the relation on
//! that block, and the executor rechecks the conditions on each (bitmap scans
//! ask for a recheck on every page).
//!
//! Planned for Pinax tables (`customscan::drop_bitmap_paths`): BitmapAnd and
//! BitmapOr of index scans (OR conditions, row-value IN lists, ANDs of two
//! indexes); not over one index while index scans are enabled (the index scan
//! is the same work without the bitmap), and never in parallel (the TIDs live in
//! the process that read them).

use super::fetch::fetch_version;
use super::scan::PinaxScanDesc;
use crate::scan::snapshot_cid;
use crate::state;
use crate::tid::BitmapRead;
use crate::violation::OrRaiseFlush;
use pgrx::pg_guard;
use pgrx::pg_sys;

/// Table AM callback `scan_bitmap_next_block` (`TableAmRoutine`,
/// access/tableam.h): queue the TIDs of page `tbmres` of the bitmap; false if
/// none of them names a row of this relation.
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_bitmap_next_block(scan: pg_sys::TableScanDesc, tbmres: *mut pg_sys::TBMIterateResult) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        let st = &mut *(*d).state;
        let relid = st.relid;
        let block = (*tbmres).blockno;
        st.bitmap.clear();
        if (*tbmres).ntuples >= 0 {
            let offsets = (*tbmres).offsets.as_slice((*tbmres).ntuples as usize);
            let blkid = pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: (block & 0xFFFF) as u16 };
            st.bitmap.extend(offsets.iter().map(|&ip_posid| pg_sys::ItemPointerData { ip_blkid: blkid, ip_posid }));
        } else {
            // A lossy page: the rows the statement's bitmap scans read there.
            let curcid = snapshot_cid((*scan).rs_snapshot);
            let at = state::with(|b| b.read_point(curcid)).or_raise();
            let tids = state::with(|b| b.tids.bitmap_block(relid, block, BitmapRead::new(at, curcid)));
            st.bitmap.extend(tids);
        }
        !st.bitmap.is_empty()
    }
}

/// Table AM callback `scan_bitmap_next_tuple` (`TableAmRoutine`,
/// access/tableam.h): the next row of the page `scan_bitmap_next_block` queued
/// that the scan's snapshot sees, into `slot`.
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_bitmap_next_tuple(
    scan: pg_sys::TableScanDesc,
    _tbmres: *mut pg_sys::TBMIterateResult,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        while let Some(mut tid) = (*(*d).state).bitmap.pop_front() {
            if fetch_version((*scan).rs_rd, &mut tid, (*scan).rs_snapshot, slot) {
                return true;
            }
        }
        false
    }
}
