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
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !planstate.is_null() {
            walker(planstate, std::ptr::null_mut());
        }
    }
}

/// Marks `ioss_PscanLen` as holding the mask of output columns the parent reads.
/// (The field sizes a parallel scan's shared state; Pinax indexes never scan in
/// parallel, so their nodes never use it.)
const OUTPUT_USE_KNOWN: usize = 1 << 63;

/// The walk of `adopt_nodes` over the plan state tree (`planstate_tree_walker`).
///
/// # Safety
/// Called by PostgreSQL's `planstate_tree_walker`, or by `adopt_nodes`, with a
/// node of an initialized plan state tree and the walker's `ctx`.
#[pg_guard]
unsafe extern "C-unwind" fn walker(ps: *mut pg_sys::PlanState, ctx: *mut std::ffi::c_void) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        // A plain aggregate over an index-only scan (count(*), sum(x)) reads only some
        // of the scan's output columns, though the scan outputs all of them.
        if (*ps).type_ == pg_sys::NodeTag::T_AggState {
            let agg = (*ps).plan as *mut pg_sys::Agg;
            let child = (*ps).lefttree;
            if (*agg).aggstrategy == pg_sys::AggStrategy::AGG_PLAIN
                && !child.is_null()
                && (*child).type_ == pg_sys::NodeTag::T_IndexOnlyScanState
                && is_pinax_node(child as *mut pg_sys::IndexOnlyScanState)
            {
                let mask = match var_columns(&[(*agg).plan.targetlist.cast(), (*agg).plan.qual.cast()], pg_sys::OUTER_VAR) {
                    Some(cols) if cols & (1 << 63) == 0 => cols as usize,
                    _ => !OUTPUT_USE_KNOWN, // unknown, or beyond what the mask holds: all
                };
                (*(child as *mut pg_sys::IndexOnlyScanState)).ioss_PscanLen = mask | OUTPUT_USE_KNOWN;
                if mask == 0 {
                    // count(*) alone: the aggregate takes the number (`take_index_count`).
                    crate::customscan::pushdown::count::count_rows_in_storage(ps as *mut pg_sys::AggState);
                }
            }
        }
        if (*ps).type_ == pg_sys::NodeTag::T_IndexOnlyScanState && is_pinax_node(ps as *mut pg_sys::IndexOnlyScanState) {
            pg_sys::ExecSetExecProcNode(ps, Some(exec));
        }
        // A bitmap heap scan of a Pinax table prefetches nothing: its "blocks" are
        // TIDs of the backend's map (am/table/bitmap.rs), not pages of a file.
        if (*ps).type_ == pg_sys::NodeTag::T_BitmapHeapScanState {
            let bhs = ps as *mut pg_sys::BitmapHeapScanState;
            let rel = (*bhs).ss.ss_currentRelation;
            if !rel.is_null() && meta::is_pinax_table(rel) {
                (*bhs).prefetch_maximum = 0;
            }
        }
        // A plain aggregate that reads no column of a sequential scan without a filter
        // (count(*)): the tablets count the rows, none is shipped (`exec_count`).
        if (*ps).type_ == pg_sys::NodeTag::T_AggState {
            let agg = (*ps).plan as *mut pg_sys::Agg;
            let child = (*ps).lefttree;
            if (*agg).aggstrategy == pg_sys::AggStrategy::AGG_PLAIN
                && !child.is_null()
                && (*child).type_ == pg_sys::NodeTag::T_SeqScanState
                && var_columns(&[(*agg).plan.targetlist.cast(), (*agg).plan.qual.cast()], pg_sys::OUTER_VAR) == Some(0)
                && counts_alone(child as *mut pg_sys::SeqScanState)
            {
                pg_sys::ExecSetExecProcNode(child, Some(exec_count));
                // count(*) alone: the aggregate takes the number (no row made per row).
                crate::customscan::pushdown::count::count_rows_in_storage(ps as *mut pg_sys::AggState);
            }
        }
        // The same over a scan with pushed-down conditions (count(*) WHERE ...): the
        // tablets count the rows that match (`pushdown::count::count_in_storage` checks that
        // every condition is pushed).
        if (*ps).type_ == pg_sys::NodeTag::T_AggState {
            let agg = (*ps).plan as *mut pg_sys::Agg;
            let child = (*ps).lefttree;
            if !child.is_null() && (*child).type_ == pg_sys::NodeTag::T_CustomScanState {
                let plain = (*agg).aggstrategy == pg_sys::AggStrategy::AGG_PLAIN;
                if plain && var_columns(&[(*agg).plan.targetlist.cast(), (*agg).plan.qual.cast()], pg_sys::OUTER_VAR) == Some(0) {
                    if crate::customscan::pushdown::count::count_in_storage(child as *mut pg_sys::CustomScanState) {
                        crate::customscan::pushdown::count::count_rows_in_storage(ps as *mut pg_sys::AggState);
                    }
                } else {
                    // sum, min, max, avg, count of columns; also per group.
                    crate::customscan::pushdown::aggregate::aggregate_in_storage(ps as *mut pg_sys::AggState, child as *mut pg_sys::CustomScanState);
                }
            }
        }
        pg_sys::planstate_tree_walker(ps, Some(walker), ctx)
    }
}

/// Whether sequential scan `node` of a Pinax table may be replaced by a count: no
/// filter, and its outputs are plain columns (nothing to evaluate, so nothing
/// that could fail or have effects is skipped).
///
/// # Safety
/// `node` must be a valid `SeqScanState`.
unsafe fn counts_alone(node: *mut pg_sys::SeqScanState) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let rel = (*node).ss.ss_currentRelation;
        if rel.is_null() || !meta::is_pinax_table(rel) || !(*node).ss.ps.qual.is_null() {
            return false;
        }
        outputs_plain_columns(&mut (*node).ss)
    }
}

/// Whether scan `ss` outputs plain columns only (nothing to evaluate, so nothing
/// that could fail or have effects is skipped when its rows are only counted).
///
/// # Safety
/// `ss` must be an initialized scan state.
pub unsafe fn outputs_plain_columns(ss: *mut pg_sys::ScanState) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let tlist = (*(*ss).ps.plan).targetlist;
        if tlist.is_null() {
            return true;
        }
        (0..(*tlist).length as usize).all(|j| {
            let entry = (*(*tlist).elements.add(j)).ptr_value as *mut pg_sys::TargetEntry;
            !(*entry).expr.is_null() && (*(*entry).expr).type_ == pg_sys::NodeTag::T_Var
        })
    }
}

/// `ExecSeqScan` for a scan only counted: all-NULL tuples, as many as the
/// tablets count (the aggregate above reads none of their columns).
///
/// # Safety
/// Called only by PostgreSQL, as the `ExecProcNode` of the plan node it was set
/// on (`ExecSetExecProcNode`), with that node's state.
#[pg_guard]
unsafe extern "C-unwind" fn exec_count(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        pg_sys::check_for_interrupts!();
        let node = ps as *mut pg_sys::SeqScanState;
        // The parent reads the node's result: the projection's slot when it projects
        // (its columns, all NULL here, are plain Vars: see `counts_alone`).
        let slot = if (*ps).ps_ProjInfo.is_null() { (*node).ss.ss_ScanTupleSlot } else { (*ps).ps_ResultTupleSlot };
        let mut scan = (*node).ss.ss_currentScanDesc;
        if scan.is_null() {
            scan = pg_sys::table_beginscan((*node).ss.ss_currentRelation, (*(*ps).state).es_snapshot, 0, std::ptr::null_mut());
            (*node).ss.ss_currentScanDesc = scan;
        }
        if crate::am::table::scan::next_counted(scan) {
            pg_sys::ExecStoreAllNullTuple(slot)
        } else {
            pg_sys::ExecClearTuple(slot)
        }
    }
}

/// How many rows sequential scan `node`, only counted ([`exec_count`]), has:
/// taken once per scan (the node then returns none).
///
/// # Safety
/// `node` must be an initialized sequential scan state of a Pinax table that
/// runs [`exec_count`] (`counts_alone`).
pub unsafe fn take_count(node: *mut pg_sys::SeqScanState) -> u64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut scan = (*node).ss.ss_currentScanDesc;
        if scan.is_null() {
            scan = pg_sys::table_beginscan((*node).ss.ss_currentRelation, (*(*node).ss.ps.state).es_snapshot, 0, std::ptr::null_mut());
            (*node).ss.ss_currentScanDesc = scan;
        }
        crate::am::table::scan::take_counted(scan)
    }
}

/// Whether index-only scan `node` scans a Pinax index of a Pinax table.
///
/// # Safety
/// `node` must be a valid `IndexOnlyScanState`.
unsafe fn is_pinax_node(node: *mut pg_sys::IndexOnlyScanState) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let heap = (*node).ss.ss_currentRelation;
        let idx = (*node).ioss_RelationDesc;
        !heap.is_null() && !idx.is_null() && meta::is_pinax_table(heap) && index::is_pinax_index(idx)
    }
}

/// The `ExecProcNode` of an index-only scan node on a Pinax index (set by
/// `adopt_nodes`).
///
/// # Safety
/// Called only by PostgreSQL, as the `ExecProcNode` of the plan node it was set
/// on (`ExecSetExecProcNode`), with that node's state.
#[pg_guard]
unsafe extern "C-unwind" fn exec(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        // As ExecIndexOnlyScan: runtime keys (a generic plan's parameters) not yet
        // evaluated are evaluated first, else the scan would start with no keys and
        // walk the whole index (the rows outside them removed by the recheck).
        let node = ps as *mut pg_sys::IndexOnlyScanState;
        if (*node).ioss_NumRuntimeKeys != 0 && !(*node).ioss_RuntimeKeysReady {
            pg_sys::ExecReScan(ps);
        }
        pg_sys::ExecScan(ps as *mut pg_sys::ScanState, Some(next), Some(recheck))
    }
}

/// `IndexOnlyNext` (nodeIndexonlyscan.c) for an index whose entries are all visible.
///
/// # Safety
/// Called only by PostgreSQL, by `ExecScan` as this node's access method, with
/// its scan state.
#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
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
        let scandesc = scan_desc(node);
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
}

/// The index scan of `node`, begun (as `IndexOnlyNext` begins it) if it was not.
///
/// # Safety
/// `node` must be a valid `IndexOnlyScanState`. Calls into PostgreSQL: only in
/// a backend, where its errors can be raised.
unsafe fn scan_desc(node: *mut pg_sys::IndexOnlyScanState) -> pg_sys::IndexScanDesc {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut scandesc = (*node).ioss_ScanDesc;
        if scandesc.is_null() {
            let plan = (*node).ss.ps.plan as *mut pg_sys::IndexOnlyScan;
            scandesc = pg_sys::index_beginscan(
                (*node).ss.ss_currentRelation,
                (*node).ioss_RelationDesc,
                (*(*node).ss.ps.state).es_snapshot,
                (*node).ioss_NumScanKeys,
                (*node).ioss_NumOrderByKeys,
            );
            (*node).ioss_ScanDesc = scandesc;
            let known = (*node).ioss_PscanLen;
            let outputs = if known & OUTPUT_USE_KNOWN != 0 { Some((known & !OUTPUT_USE_KNOWN) as u64) } else { None };
            index::scan::set_index_only(scandesc, needed_columns(plan, outputs));
            (*node).ioss_VMBuffer = pg_sys::InvalidBuffer as pg_sys::Buffer;
            if (*node).ioss_NumRuntimeKeys == 0 || (*node).ioss_RuntimeKeysReady {
                pg_sys::index_rescan(scandesc, (*node).ioss_ScanKeys, (*node).ioss_NumScanKeys, (*node).ioss_OrderByKeys, (*node).ioss_NumOrderByKeys);
            }
        }
        scandesc
    }
}

/// How many rows index-only scan `node` (on a Pinax index, under an aggregate
/// reading none of its columns) has, counted in storage and taken at once when
/// its index scan only counts and it has no qual of its own (which runs on each
/// row); else 0, and its rows come one by one as before.
///
/// # Safety
/// `node` must be an initialized index-only scan state running [`exec`], not yet read.
pub unsafe fn take_index_count(node: *mut pg_sys::IndexOnlyScanState) -> u64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !(*node).ss.ps.qual.is_null() {
            return 0;
        }
        // As `exec`: runtime keys (a generic plan's parameters) first.
        if (*node).ioss_NumRuntimeKeys != 0 && !(*node).ioss_RuntimeKeysReady {
            pg_sys::ExecReScan(node as *mut pg_sys::PlanState);
        }
        index::scan::take_count(scan_desc(node)).unwrap_or(0)
    }
}

/// Bit `i` set: the plan reads index column `i` (0-based) of the scan's tuples: in
/// its quals, and in the output columns the parent reads (`outputs`, bit `j` for
/// target list entry `j + 1`; `None`: all of them).
///
/// # Safety
/// `plan` must be a valid `IndexOnlyScan`.
unsafe fn needed_columns(plan: *mut pg_sys::IndexOnlyScan, outputs: Option<u64>) -> u64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let quals = [(*plan).scan.plan.qual.cast(), (*plan).recheckqual.cast(), (*plan).indexorderby.cast()];
        let Some(mut mask) = var_columns(&quals, pg_sys::INDEX_VAR) else { return u64::MAX };
        let tlist = (*plan).scan.plan.targetlist;
        if !tlist.is_null() {
            for j in 0..(*tlist).length as usize {
                if outputs.is_some_and(|o| j >= 63 || o & (1 << j) == 0) {
                    continue;
                }
                let entry = (*(*tlist).elements.add(j)).ptr_value as *mut pg_sys::TargetEntry;
                match var_columns(&[(*entry).expr.cast()], pg_sys::INDEX_VAR) {
                    Some(m) => mask |= m,
                    None => return u64::MAX,
                }
            }
        }
        mask
    }
}

/// Bit `i` set: attribute `i + 1` of `varno` is referenced in `nodes`; `None` for a
/// system column or whole-row reference.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn var_columns(nodes: &[*mut pg_sys::Node], varno: i32) -> Option<u64> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut attnos: *mut pg_sys::Bitmapset = std::ptr::null_mut();
        for n in nodes {
            pg_sys::pull_varattnos(*n, varno as pg_sys::Index, &mut attnos);
        }
        let mut mask = 0u64;
        let mut m = -1;
        loop {
            m = pg_sys::bms_next_member(attnos, m);
            if m < 0 {
                return Some(mask);
            }
            let attno = m + pg_sys::FirstLowInvalidHeapAttributeNumber;
            if attno <= 0 {
                return None;
            }
            mask |= if attno <= 64 { 1 << (attno - 1) } else { 1 << 63 };
        }
    }
}

/// `IndexOnlyRecheck`: EvalPlanQual never re-runs an index-only scan.
///
/// # Safety
/// Called only by PostgreSQL, by `ExecScan` as this node's recheck method, with
/// its scan state.
#[pg_guard]
unsafe extern "C-unwind" fn recheck(_node: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    pgrx::error!("EvalPlanQual recheck is not supported in index-only scans")
}
