//! `count(*)` counted in the tablets: a `PinaxScan` under a plain aggregate
//! that reads none of its columns hands over the number of matching rows the
//! tablets counted (`count_in_storage`), and an aggregate whose functions are
//! all `count(*)` takes that number at once (`count_rows_in_storage`, also over
//! a sequential or index-only scan only counted, `am/index_only.rs`). Rows the
//! filter cannot decide still come through the scan's qual and are counted one
//! by one. Both are set up by the ExecutorStart hook's walk (`am/index_only.rs`).

use super::plumbing::{for_each_shipped_row, is_plain_aggref, plain_agg_child, plain_agg_row};
use super::{start, Inner, NodeState, EXEC_METHODS};
use crate::am::table;
use pgrx::pg_guard;
use pgrx::pg_sys;

/// Have the rows of scan node `node` (under a plain aggregate that reads none of
/// its columns: `count(*) WHERE ...`) counted by the tablets, when every condition
/// of its qual is pushed and it outputs plain columns: then a matching row needs
/// nothing evaluated here. Rows the filter cannot decide still come and go
/// through the qual. Called from the ExecutorStart hook's walk (`index_only.rs`).
/// Returns whether the node counts.
///
/// # Safety
/// `node` must be an initialized custom scan state.
pub unsafe fn count_in_storage(node: *mut pg_sys::CustomScanState) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*node).methods != &EXEC_METHODS.0 {
            return false;
        }
        match (*(node as *mut NodeState)).inner.as_mut() {
            Some(inner) => {
                inner.count_mode = inner.all_pushed && crate::am::index_only::outputs_plain_columns(&mut (*node).ss);
                inner.count_mode
            }
            None => false,
        }
    }
}

/// `count(*)`'s function.
const COUNT_STAR: u32 = 2803;

/// Have plain aggregate node `agg`, whose aggregates are all `count(*)` and which
/// reads no column of its input, return its one row from the number of rows its
/// child has ([`exec_count_agg`]) rather than run its transition on every row:
/// the child counts in the tablets (`count_in_storage`, or a sequential or
/// index-only scan only counted, see `index_only.rs`) and hands over just that
/// number, and the rows the tablets could not decide are still read from it
/// (through its qual) and counted one by one. Returns whether it did. Called from the ExecutorStart
/// hook's walk (`index_only.rs`), after the child was put in count mode.
///
/// # Safety
/// `agg` must be an initialized aggregate state whose child is a Pinax scan
/// node (`PinaxScan`, a sequential scan only counted, or an
/// index-only scan of a Pinax index).
pub unsafe fn count_rows_in_storage(agg: *mut pg_sys::AggState) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let plan = (*agg).ss.ps.plan as *mut pg_sys::Agg;
        if (*plan).aggstrategy != pg_sys::AggStrategy::AGG_PLAIN || (*plan).numCols != 0 || !(*plan).groupingSets.is_null() || (*agg).numaggs < 1 {
            return false;
        }
        let count_star = |i: usize| {
            let aggref = (*(*agg).peragg.add(i)).aggref;
            is_plain_aggref(aggref) && (*aggref).aggfnoid.to_u32() == COUNT_STAR
        };
        if !(0..(*agg).numaggs as usize).all(count_star) {
            return false;
        }
        pg_sys::ExecSetExecProcNode(agg as *mut pg_sys::PlanState, Some(exec_count_agg));
        true
    }
}

/// How many rows of custom scan node `node` its tablets counted (in count mode,
/// with every condition pushed; else 0), taken once per scan: the node then
/// returns only the rows the tablets could not decide.
///
/// # Safety
/// `node` must be a valid `CustomScanState`.
unsafe fn take_count(node: *mut pg_sys::CustomScanState) -> u64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*node).methods != &EXEC_METHODS.0 {
            return 0;
        }
        let ss = &mut (*node).ss as *mut pg_sys::ScanState;
        let Some(inner) = (*(node as *mut NodeState)).inner.as_mut() else { return 0 };
        match counted_left(ss, inner) {
            Some(n) => {
                inner.counted_left = Some(0);
                n
            }
            None => 0,
        }
    }
}

/// In count mode with every condition pushed: the matching rows the tablets
/// counted that the node has not handed out yet (counted once per scan). None
/// when the node does not count: its rows all come through the qual.
///
/// # Safety
/// `ss` must be a valid `ScanState`.
pub(super) unsafe fn counted_left(ss: *mut pg_sys::ScanState, inner: &mut Inner) -> Option<u64> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !inner.count_mode {
            return None;
        }
        let scan = start(ss, inner);
        if !inner.filter_complete {
            return None;
        }
        Some(match inner.counted_left {
            Some(n) => n,
            None => {
                let n = table::scan::count_matching(scan);
                inner.counted_total += n;
                n
            }
        })
    }
}

/// A plain aggregate of `count(*)` only ([`count_rows_in_storage`]): its one row.
///
/// # Safety
/// Called only by PostgreSQL, as the `ExecProcNode` of the plan node it was set
/// on (`ExecSetExecProcNode`), with that node's state.
#[pg_guard]
unsafe extern "C-unwind" fn exec_count_agg(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let agg = ps as *mut pg_sys::AggState;
        let Some(child) = plain_agg_child(ps) else { return std::ptr::null_mut() };
        let mut n = match (*child).type_ {
            pg_sys::NodeTag::T_CustomScanState => take_count(child as *mut pg_sys::CustomScanState),
            pg_sys::NodeTag::T_SeqScanState => crate::am::index_only::take_count(child as *mut pg_sys::SeqScanState),
            pg_sys::NodeTag::T_IndexOnlyScanState => crate::am::index_only::take_index_count(child as *mut pg_sys::IndexOnlyScanState),
            _ => 0,
        };
        for_each_shipped_row(child, |_| n += 1);
        let econtext = (*ps).ps_ExprContext;
        for i in 0..(*agg).numaggs as usize {
            let aggno = (*(*(*agg).peragg.add(i)).aggref).aggno as usize;
            *(*econtext).ecxt_aggvalues.add(aggno) = pg_sys::Datum::from(n as i64);
            *(*econtext).ecxt_aggnulls.add(aggno) = false;
        }
        plain_agg_row(ps, child)
    }
}
