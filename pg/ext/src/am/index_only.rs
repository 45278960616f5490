//! Index-only scans of Pinax indexes, without PostgreSQL's visibility-map check.
//!
//! PostgreSQL's index-only scan node asks the heap's visibility map whether each
//! entry's row is visible to everybody and fetches the row when it cannot tell. A
//! Pinax table has no visibility map, and needs none: storage is multi-version and
//! an index entry is written and deleted together with its row, by the same command,
//! so the entries a read point sees are exactly those of the rows it sees. The
//! ExecutorStart hook (hooks/executor.rs) therefore points each index-only scan node
//! on a Pinax index at [`exec`], which is PostgreSQL 15's `IndexOnlyNext` minus the
//! visibility check and the table fetch: the index AM returns the index columns as
//! `xs_hitup` (decoded from the entry's key, or the primary key's row) and no TIDs.
//!
//! A node the hook does not see (none today: EvalPlanQual never re-runs index-only
//! scans, parallel scans are off) still runs correctly through PostgreSQL's code:
//! without a visibility map every entry's row is fetched by TID, as for index scans.

use crate::am::index;
use crate::meta;
use pgrx::pg_guard;
use pgrx::pg_sys;

/// Point index-only scan nodes on Pinax indexes in `planstate`'s tree at [`exec`].
///
/// # Safety
/// `planstate` must be an initialized plan state tree (after `standard_ExecutorStart`).
pub unsafe fn adopt_nodes(planstate: *mut pg_sys::PlanState) {
    if !planstate.is_null() {
        walker(planstate, std::ptr::null_mut());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn walker(ps: *mut pg_sys::PlanState, ctx: *mut std::ffi::c_void) -> bool {
    if (*ps).type_ == pg_sys::NodeTag::T_IndexOnlyScanState {
        let node = ps as *mut pg_sys::IndexOnlyScanState;
        let heap = (*node).ss.ss_currentRelation;
        let idx = (*node).ioss_RelationDesc;
        if !heap.is_null() && !idx.is_null() && meta::is_pinax_table(heap) && index::is_pinax_index(idx) {
            pg_sys::ExecSetExecProcNode(ps, Some(exec));
        }
    }
    pg_sys::planstate_tree_walker(ps, Some(walker), ctx)
}

#[pg_guard]
unsafe extern "C-unwind" fn exec(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    pg_sys::ExecScan(ps as *mut pg_sys::ScanState, Some(next), Some(recheck))
}

/// `IndexOnlyNext` (nodeIndexonlyscan.c) for an index whose entries are all visible.
#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    let node = ss as *mut pg_sys::IndexOnlyScanState;
    let estate = (*node).ss.ps.state;
    let mut direction = (*estate).es_direction;
    let plan = (*node).ss.ps.plan as *mut pg_sys::IndexOnlyScan;
    if (*plan).indexorderdir == pg_sys::ScanDirection::BackwardScanDirection {
        direction = match direction {
            pg_sys::ScanDirection::ForwardScanDirection => pg_sys::ScanDirection::BackwardScanDirection,
            pg_sys::ScanDirection::BackwardScanDirection => pg_sys::ScanDirection::ForwardScanDirection,
            d => d,
        };
    }
    let econtext = (*node).ss.ps.ps_ExprContext;
    let slot = (*node).ss.ss_ScanTupleSlot;
    let mut scandesc = (*node).ioss_ScanDesc;
    if scandesc.is_null() {
        scandesc = pg_sys::index_beginscan(
            (*node).ss.ss_currentRelation,
            (*node).ioss_RelationDesc,
            (*estate).es_snapshot,
            (*node).ioss_NumScanKeys,
            (*node).ioss_NumOrderByKeys,
        );
        (*node).ioss_ScanDesc = scandesc;
        index::set_index_only(scandesc, needed_columns(plan));
        (*node).ioss_VMBuffer = pg_sys::InvalidBuffer as pg_sys::Buffer;
        if (*node).ioss_NumRuntimeKeys == 0 || (*node).ioss_RuntimeKeysReady {
            pg_sys::index_rescan(scandesc, (*node).ioss_ScanKeys, (*node).ioss_NumScanKeys, (*node).ioss_OrderByKeys, (*node).ioss_NumOrderByKeys);
        }
    }
    while !pg_sys::index_getnext_tid(scandesc, direction).is_null() {
        pg_sys::check_for_interrupts!();
        if (*scandesc).xs_hitup.is_null() {
            pgrx::error!("pinax: no data returned for index-only scan");
        }
        pg_sys::ExecForceStoreHeapTuple((*scandesc).xs_hitup, slot, false);
        if (*scandesc).xs_recheck {
            (*econtext).ecxt_scantuple = slot;
            let ok = index::exec_qual((*node).recheckqual, econtext);
            pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
            if !ok {
                let instr = (*node).ss.ps.instrument;
                if !instr.is_null() {
                    (*instr).nfiltered2 += 1.0;
                }
                continue;
            }
        }
        return slot;
    }
    pg_sys::ExecClearTuple(slot)
}

/// Bit `i` set: the plan reads index column `i` (0-based) of the scan's tuples.
unsafe fn needed_columns(plan: *mut pg_sys::IndexOnlyScan) -> u64 {
    let mut attnos: *mut pg_sys::Bitmapset = std::ptr::null_mut();
    let varno = pg_sys::INDEX_VAR as pg_sys::Index;
    for list in [(*plan).scan.plan.targetlist, (*plan).scan.plan.qual, (*plan).recheckqual, (*plan).indexorderby] {
        pg_sys::pull_varattnos(list.cast(), varno, &mut attnos);
    }
    let mut mask = 0u64;
    let mut m = -1;
    loop {
        m = pg_sys::bms_next_member(attnos, m);
        if m < 0 {
            break;
        }
        let attno = m + pg_sys::FirstLowInvalidHeapAttributeNumber;
        if attno <= 0 {
            // A system column or whole-row reference: build every column.
            return u64::MAX;
        }
        if attno <= 64 {
            mask |= 1 << (attno - 1);
        }
    }
    mask
}

/// `IndexOnlyRecheck`: EvalPlanQual never re-runs an index-only scan.
#[pg_guard]
unsafe extern "C-unwind" fn recheck(_node: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    pgrx::error!("EvalPlanQual recheck is not supported in index-only scans")
}
