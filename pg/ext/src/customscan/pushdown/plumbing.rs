//! Executor plumbing for the scan and the Agg nodes it takes over: helpers
//! PostgreSQL keeps as inline functions (`ExecEvalExprSwitchContext`,
//! `ExecQual`, `ExecProject`), and a plain aggregate node's walk of its child's
//! rows and its one row.

use pgrx::pg_sys;

/// The node tag of `n`.
///
/// # Safety
/// `n` must be a valid node (or null where checked).
pub(super) unsafe fn tag(n: *mut pg_sys::Node) -> pg_sys::NodeTag {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { (*n).type_ }
}

/// Evaluate `state` in `econtext`'s per-tuple memory (`ExecEvalExprSwitchContext`)
/// and hand the result (value, is NULL) to `then`, still in that memory; None if
/// the expression has no evaluation function (nothing to evaluate).
///
/// # Safety
/// `state` must be a valid `ExprState`, and `econtext` a valid `ExprContext`.
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
pub(super) unsafe fn eval_in_tuple_memory<T>(
    state: *mut pg_sys::ExprState,
    econtext: *mut pg_sys::ExprContext,
    then: impl FnOnce(pg_sys::Datum, bool) -> T,
) -> Option<T> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let eval = (*state).evalfunc?;
        let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_tuple_memory);
        let mut isnull = false;
        let d = eval(state, econtext, &mut isnull);
        let v = then(d, isnull);
        pg_sys::MemoryContextSwitchTo(old);
        Some(v)
    }
}

/// Whether `aggref` is an ordinary call of an aggregate: no FILTER, DISTINCT,
/// ORDER BY, direct arguments or VARIADIC, of this query level, not split.
///
/// # Safety
/// `aggref` must be a valid `Aggref`.
pub(super) unsafe fn is_plain_aggref(aggref: *mut pg_sys::Aggref) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        !aggref.is_null()
            && (*aggref).aggfilter.is_null()
            && (*aggref).aggdistinct.is_null()
            && (*aggref).aggorder.is_null()
            && (*aggref).aggdirectargs.is_null()
            && !(*aggref).aggvariadic
            && (*aggref).agglevelsup == 0
            && (*aggref).aggsplit == pg_sys::AggSplit::AGGSPLIT_SIMPLE
            && (*aggref).aggkind as u8 == b'n'
    }
}

/// The child of plain aggregate node `ps`, rescanned first if its parameters
/// changed; None once the node has returned its row.
///
/// # Safety
/// `ps` must be a valid `PlanState`. Calls into PostgreSQL: only in a backend,
/// where its errors can be raised.
pub(super) unsafe fn plain_agg_child(ps: *mut pg_sys::PlanState) -> Option<*mut pg_sys::PlanState> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*(ps as *mut pg_sys::AggState)).agg_done {
            return None;
        }
        let child = (*ps).lefttree;
        if !(*child).chgParam.is_null() {
            pg_sys::ExecReScan(child);
        }
        Some(child)
    }
}

/// Plain aggregate node `ps`'s one row, its aggregates' values set: HAVING, then
/// the target list (`project_aggregates`). The node reads no column of its input
/// outside the aggregates: an all-NULL input row.
///
/// # Safety
/// `ps` must be a valid `PlanState`, and `child` a valid `PlanState`. Calls
/// into PostgreSQL: only in a backend, where its errors can be raised.
pub(super) unsafe fn plain_agg_row(ps: *mut pg_sys::PlanState, child: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        (*(ps as *mut pg_sys::AggState)).agg_done = true;
        let econtext = (*ps).ps_ExprContext;
        let input = if (*child).ps_ProjInfo.is_null() { (*(child as *mut pg_sys::ScanState)).ss_ScanTupleSlot } else { (*child).ps_ResultTupleSlot };
        (*econtext).ecxt_outertuple = pg_sys::ExecStoreAllNullTuple(input);
        if !(*ps).qual.is_null() && !eval_bool((*ps).qual, econtext) {
            return std::ptr::null_mut();
        }
        project((*ps).ps_ProjInfo)
    }
}

/// Run `f` on each row scan node `child` returns (the rows the tablets shipped,
/// through the scan's qual).
///
/// # Safety
/// `child` must be a valid `PlanState`.
pub(super) unsafe fn for_each_shipped_row(child: *mut pg_sys::PlanState, mut f: impl FnMut(*mut pg_sys::TupleTableSlot)) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let exec_child = (*child).ExecProcNode.expect("an initialized plan node");
        loop {
            pg_sys::check_for_interrupts!();
            let slot = exec_child(child);
            if slot.is_null() || (*slot).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0 {
                return;
            }
            f(slot);
        }
    }
}

/// `ExecQual` (an inline function of executor.h).
///
/// # Safety
/// `state` must be a valid `ExprState`, and `econtext` a valid `ExprContext`.
pub(super) unsafe fn eval_bool(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { eval_in_tuple_memory(state, econtext, |d, isnull| !isnull && d.value() != 0).unwrap_or(true) }
}

/// `ExecProject` (an inline function of executor.h).
///
/// # Safety
/// `proj` must be a valid `ProjectionInfo`. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
pub(super) unsafe fn project(proj: *mut pg_sys::ProjectionInfo) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let state = &mut (*proj).pi_state as *mut pg_sys::ExprState;
        let slot = (*state).resultslot;
        pg_sys::ExecClearTuple(slot);
        eval_in_tuple_memory(state, (*proj).pi_exprContext, |_, _| ());
        (*slot).tts_flags &= !(pg_sys::TTS_FLAG_EMPTY as u16);
        (*slot).tts_nvalid = (*(*slot).tts_tupleDescriptor).natts as i16;
        slot
    }
}
