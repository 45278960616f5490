//! Filter pushdown: a sequential scan of a Pinax table sends the conditions of its
//! `WHERE` clause that the tablets can check to the tablets, which return only
//! the rows that may satisfy them (YugabyteDB's "remote filter").
//!
//! Planning (`set_rel_pathlist_hook`, `customscan/mod.rs`): for a Pinax table
//! with such conditions, a custom path (`PinaxScan`) is offered next to the
//! sequential scan, at a lower cost (rows dropped in the tablets are never
//! shipped or looked at here). Its plan keeps the whole `WHERE` clause as its
//! qual, which PostgreSQL checks on every row that arrives, and lists the pushed
//! conditions in `custom_exprs`; so the tablets only ever pre-filter, and an
//! answer cannot change (see `pinax_proto::filter`).
//!
//! What is pushed: `column OP value` where the value is a constant or a
//! parameter, for integers, floats, bool, text and varchar (equality under a
//! deterministic collation, order under "C"), bytea, date, timestamp(tz) and uuid
//! with their btree operators (`<`, `<=`, `=`, `>=`, `>`, `<>`); `column IS [NOT]
//! NULL`; `column IN (...)` and `column NOT IN (...)` lists of up to 100 values;
//! a bool column; and AND, OR, NOT of those. Values are taken when the scan
//! starts (again after a rescan: parameters of a nested loop change).
//!
//! Execution: PostgreSQL 15's custom-scan node; this file opens the table scan
//! (`table_beginscan`, which takes the same SERIALIZABLE range locks as a
//! sequential scan), hands the compiled filter to it (`am::table::scan::set_filter`),
//! and returns its rows through `ExecScan`, so EvalPlanQual rechecks, row locks,
//! projections and the qual behave as for a sequential scan. EXPLAIN shows the
//! pushed conditions as "Storage Filter". `pinax.enable_filter_pushdown = off`
//! turns the path off.
//!
//! Files: this one is the scan node (its path, plan, state, execution and
//! EXPLAIN); `filter.rs` turns the conditions into the tablets' filter program;
//! `count.rs` has `count(*)` counted in the tablets and `aggregate.rs` has
//! aggregates and groups computed there, both by taking over the Agg node
//! above (from the ExecutorStart hook's walk, `am/index_only.rs`); `plumbing.rs`
//! holds the executor helpers PostgreSQL keeps inline and a plain Agg node's
//! one row. Start here, then `filter.rs`.

pub mod aggregate;
pub mod count;
mod filter;
mod plumbing;

use self::aggregate::{Grouping, PushedAgg};
use self::count::counted_left;
use self::filter::{build, emit, Target, Tmpl};
use super::methods::{exec_methods, Methods};
use crate::am::table;
use crate::guc;
use crate::meta;
use crate::pg_list::list_ptrs;
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_proto::{AggValue, AttrLayout, FilterOp, RowFilter, MAX_FILTER_OPS};
use std::ffi::CStr;

const NAME: &CStr = c"PinaxScan";

static PATH_METHODS: Methods<pg_sys::CustomPathMethods> =
    Methods(pg_sys::CustomPathMethods { CustomName: NAME.as_ptr(), PlanCustomPath: Some(plan_path), ReparameterizeCustomPathByChild: None });

pub(super) static SCAN_METHODS: Methods<pg_sys::CustomScanMethods> =
    Methods(pg_sys::CustomScanMethods { CustomName: NAME.as_ptr(), CreateCustomScanState: Some(create_state) });

static EXEC_METHODS: Methods<pg_sys::CustomExecMethods> = exec_methods(NAME, begin, exec, end, rescan, explain);

/// The executor state of a `PinaxScan` node.
#[repr(C)]
struct NodeState {
    css: pg_sys::CustomScanState,
    inner: *mut Inner,
    cb: pg_sys::MemoryContextCallback,
}

struct Inner {
    /// The pushed conditions (an implicit AND).
    conjuncts: Vec<Tmpl>,
    /// Every condition of the plan's qual is among them.
    all_pushed: bool,
    /// The filter was handed to the current table scan...
    filter_set: bool,
    /// ...and has every condition (none was left out for a NULL value).
    filter_complete: bool,
    /// The rows are only counted (`count_in_storage`).
    count_mode: bool,
    /// Count mode: matching rows counted by the tablets not yet handed out (None:
    /// not counted yet in this scan).
    counted_left: Option<u64>,
    /// Rows counted (count mode) or folded into aggregates by the tablets, in all
    /// scans (EXPLAIN ANALYZE).
    counted_total: u64,
    /// The aggregates the tablets compute for the plain aggregate above
    /// (`aggregate_in_storage`), and their names for EXPLAIN.
    aggs: Vec<PushedAgg>,
    agg_names: Vec<String>,
    /// The aggregate above groups by one column (a hashed aggregate).
    group: Option<Grouping>,
    /// Its groups, computed; and the next to return.
    group_rows: Vec<(Option<Vec<u8>>, Vec<AggValue>)>,
    /// What each group shows (by key): the stored bytes of one of its values.
    group_shown: std::collections::HashMap<Option<Vec<u8>>, Vec<u8>>,
    group_pos: usize,
}

impl Inner {
    /// The filter for a scan starting now, if any condition can be pushed; and
    /// whether all of them were.
    ///
    /// # Safety
    /// `econtext` must be a valid `ExprContext`, and `desc` a valid tuple
    /// descriptor.
    unsafe fn instantiate(&self, econtext: *mut pg_sys::ExprContext, desc: pg_sys::TupleDesc) -> (Option<RowFilter>, bool) {
        // SAFETY: the caller upholds this function's contract (# Safety).
        unsafe {
            let mut ops = Vec::new();
            // Aggregates need the layout of what they read, even with no condition.
            let mut max_att = self.aggs.iter().map(|a| a.spec.att).max().unwrap_or(0);
            let mut n = 0u16;
            for c in &self.conjuncts {
                let mut part = Vec::new();
                let mut part_max = 0u16;
                if emit(c, econtext, &mut part, &mut part_max) && ops.len() + part.len() < MAX_FILTER_OPS {
                    ops.extend(part);
                    max_att = max_att.max(part_max);
                    n += 1;
                }
            }
            let complete = n as usize == self.conjuncts.len();
            if n == 0 && self.aggs.is_empty() {
                return (None, complete);
            }
            if n > 1 {
                ops.push(FilterOp::And(n));
            }
            let attrs = (0..=max_att as usize)
                .map(|i| {
                    let (len, align) = crate::tuple::attr_layout(desc, i);
                    AttrLayout { len, align }
                })
                .collect();
            (Some(RowFilter { attrs, ops }), complete)
        }
    }
}

/// A memory context reset callback (`MemoryContextCallback`).
///
/// # Safety
/// `arg` must be what the callback was registered with (PostgreSQL calls it
/// so when the memory context is reset; this module also calls it directly):
/// its Rust state is freed once, and the pointer to it nulled.
#[pg_guard]
unsafe extern "C-unwind" fn free_inner(arg: *mut std::ffi::c_void) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let s = arg as *mut NodeState;
        if !(*s).inner.is_null() {
            drop(Box::from_raw((*s).inner));
            (*s).inner = std::ptr::null_mut();
        }
    }
}

/// After PostgreSQL's paths for base relation `rel` (`set_rel_pathlist_hook`,
/// `customscan/mod.rs`): the `PinaxScan` path, when it applies (module header).
///
/// # Safety
/// The arguments of `set_rel_pathlist_hook`, while planning.
pub(super) unsafe fn add_path(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, rte: *mut pg_sys::RangeTblEntry) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !guc::enable_filter_pushdown() || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION || (*rte).inh || (*rte).relkind as u8 != pg_sys::RELKIND_RELATION {
            return;
        }
        // A plain aggregate, or one grouped by one column, over this table alone may
        // be computed in the tablets (`aggregate_in_storage`): offered even without
        // conditions to push.
        let parse = (*root).parse;
        let lone_aggregate = (*parse).hasAggs
            && pg_sys::list_length((*parse).groupClause) <= 1
            && (*parse).groupingSets.is_null()
            && !(*parse).hasWindowFuncs
            && pg_sys::bms_num_members((*root).all_baserels) == 1;
        if (*rel).baserestrictinfo.is_null() && !lone_aggregate {
            return;
        }
        // The sequential scan this path competes with (none: not a plain table scan).
        let Some(seq) =
            list_ptrs::<pg_sys::Path>((*rel).pathlist).into_iter().find(|p| (**p).pathtype == pg_sys::NodeTag::T_SeqScan && (**p).param_info.is_null())
        else {
            return;
        };
        let r = pg_sys::table_open((*rte).relid, pg_sys::NoLock as pg_sys::LOCKMODE);
        let mut pushed: *mut pg_sys::List = std::ptr::null_mut();
        let pinax = meta::is_pinax_table(r);
        if pinax {
            let t = Target { relid: (*rel).relid as i32, desc: (*r).rd_att };
            for ri in list_ptrs::<pg_sys::RestrictInfo>((*rel).baserestrictinfo) {
                let clause = (*ri).clause as *mut pg_sys::Node;
                if !(*ri).pseudoconstant && build(clause, &t, None, 0).is_some() {
                    pushed = pg_sys::lappend(pushed, pg_sys::copyObjectImpl(clause.cast()));
                }
            }
        }
        pg_sys::table_close(r, pg_sys::NoLock as pg_sys::LOCKMODE);
        if !pinax || (pushed.is_null() && !lone_aggregate) {
            return;
        }
        let cp = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
        (*cp).path.type_ = pg_sys::NodeTag::T_CustomPath;
        (*cp).path.pathtype = pg_sys::NodeTag::T_CustomScan;
        (*cp).path.parent = rel;
        (*cp).path.pathtarget = (*rel).reltarget;
        (*cp).path.rows = (*seq).rows;
        (*cp).path.startup_cost = (*seq).startup_cost;
        // Rows the tablets drop are neither shipped nor looked at here; and the path
        // is never worse than the plain scan (it reads the same), so it is also made
        // cheaper by more than add_path's fuzz when the conditions drop little.
        let dropped = ((*rel).tuples - (*seq).rows).max(0.0);
        (*cp).path.total_cost = ((*seq).total_cost * 0.98 - dropped * pg_sys::cpu_tuple_cost).max((*seq).startup_cost);
        (*cp).custom_private = pushed;
        (*cp).methods = &PATH_METHODS.0;
        pg_sys::add_path(rel, cp as *mut pg_sys::Path);
    }
}

/// Custom scan method `CustomPathMethods.PlanCustomPath`.
///
/// # Safety
/// Called only by PostgreSQL, as `CustomPathMethods.PlanCustomPath` of this
/// node, with the arguments that method gets.
#[pg_guard]
unsafe extern "C-unwind" fn plan_path(
    _root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    best: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    clauses: *mut pg_sys::List,
    _custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let cs = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
        (*cs).scan.plan.type_ = pg_sys::NodeTag::T_CustomScan;
        (*cs).scan.plan.targetlist = tlist;
        // Every condition stays PostgreSQL's to check: the tablets only pre-filter.
        (*cs).scan.plan.qual = pg_sys::extract_actual_clauses(clauses, false);
        (*cs).scan.scanrelid = (*rel).relid;
        (*cs).flags = (*best).flags;
        (*cs).custom_exprs = (*best).custom_private;
        (*cs).methods = &SCAN_METHODS.0;
        cs as *mut pg_sys::Plan
    }
}

/// Custom scan method `CustomScanMethods.CreateCustomScanState`.
///
/// # Safety
/// Called only by PostgreSQL, as `CustomScanMethods.CreateCustomScanState` of
/// this node, with the arguments that method gets.
#[pg_guard]
unsafe extern "C-unwind" fn create_state(_cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let s = pg_sys::palloc0(std::mem::size_of::<NodeState>()) as *mut NodeState;
        (*s).css.ss.ps.type_ = pg_sys::NodeTag::T_CustomScanState;
        (*s).css.methods = &EXEC_METHODS.0;
        s as *mut pg_sys::Node
    }
}

/// Custom scan method `CustomExecMethods.BeginCustomScan`.
///
/// # Safety
/// Called only by PostgreSQL, as `CustomExecMethods.BeginCustomScan` of this
/// node, with the arguments that method gets.
#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, eflags: i32) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let rel = (*node).ss.ss_currentRelation;
        let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
        // PostgreSQL 15 gives a custom scan a virtual scan slot; rows of the table come
        // as heap tuples, as to a sequential scan: use that slot kind, and build the
        // projection and the qual again for it.
        pg_sys::ExecInitScanTupleSlot(estate, &mut (*node).ss, (*rel).rd_att, pg_sys::table_slot_callbacks(rel));
        pg_sys::ExecAssignScanProjectionInfoWithVarno(&mut (*node).ss, (*cscan).scan.scanrelid as i32);
        (*node).ss.ps.qual = pg_sys::ExecInitQual((*cscan).scan.plan.qual, node as *mut pg_sys::PlanState);
        // EXPLAIN alone: the conditions' values are never taken (no expression states).
        let ps = (eflags as u32 & pg_sys::EXEC_FLAG_EXPLAIN_ONLY == 0).then_some(node as *mut pg_sys::PlanState);
        let t = Target { relid: (*cscan).scan.scanrelid as i32, desc: (*rel).rd_att };
        let exprs = list_ptrs::<pg_sys::Node>((*cscan).custom_exprs);
        let conjuncts: Vec<Tmpl> = exprs.iter().filter_map(|e| build(*e, &t, ps, 0)).collect();
        let all_pushed = conjuncts.len() == exprs.len() && exprs.len() == pg_sys::list_length((*cscan).scan.plan.qual) as usize;
        let s = node as *mut NodeState;
        let inner = Inner {
            conjuncts,
            all_pushed,
            filter_set: false,
            filter_complete: false,
            count_mode: false,
            counted_left: None,
            counted_total: 0,
            aggs: Vec::new(),
            agg_names: Vec::new(),
            group: None,
            group_rows: Vec::new(),
            group_shown: std::collections::HashMap::new(),
            group_pos: 0,
        };
        (*s).inner = Box::into_raw(Box::new(inner));
        (*s).cb.func = Some(free_inner);
        (*s).cb.arg = s.cast();
        pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*s).cb);
    }
}

/// Custom scan method `CustomExecMethods.ExecCustomScan`.
///
/// # Safety
/// Called only by PostgreSQL, as `CustomExecMethods.ExecCustomScan` of this
/// node, with the arguments that method gets.
#[pg_guard]
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let ss = &mut (*node).ss as *mut pg_sys::ScanState;
        if let Some(inner) = (*(node as *mut NodeState)).inner.as_mut() {
            if let Some(left) = counted_left(ss, inner) {
                if left > 0 {
                    inner.counted_left = Some(left - 1);
                    pg_sys::check_for_interrupts!();
                    // The parent reads none of the columns (see count_in_storage).
                    let slot = if (*ss).ps.ps_ProjInfo.is_null() { (*ss).ss_ScanTupleSlot } else { (*ss).ps.ps_ResultTupleSlot };
                    return pg_sys::ExecStoreAllNullTuple(slot);
                }
                inner.counted_left = Some(0);
                // Then the rows the filter could not decide, through the qual.
            }
        }
        pg_sys::ExecScan(ss, Some(next), Some(recheck))
    }
}

/// The node's table scan, begun (with its filter) if it was not.
///
/// # Safety
/// `ss` must be a valid `ScanState`. Calls into PostgreSQL: only in a backend,
/// where its errors can be raised.
unsafe fn start(ss: *mut pg_sys::ScanState, inner: &mut Inner) -> pg_sys::TableScanDesc {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let rel = (*ss).ss_currentRelation;
        let mut scan = (*ss).ss_currentScanDesc;
        if scan.is_null() {
            scan = pg_sys::table_beginscan(rel, (*(*ss).ps.state).es_snapshot, 0, std::ptr::null_mut());
            (*ss).ss_currentScanDesc = scan;
        }
        if !inner.filter_set {
            let (filter, complete) = inner.instantiate((*ss).ps.ps_ExprContext, (*rel).rd_att);
            table::scan::set_filter(scan, filter);
            inner.filter_set = true;
            inner.filter_complete = complete;
        }
        scan
    }
}

/// `SeqNext` with the filter handed to the scan when it starts.
///
/// # Safety
/// Called only by PostgreSQL, by `ExecScan` as this node's access method, with
/// its scan state.
#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let s = ss as *mut NodeState;
        let scan = match (*s).inner.as_mut() {
            Some(inner) => start(ss, inner),
            None => std::ptr::null_mut(),
        };
        let slot = (*ss).ss_ScanTupleSlot;
        if pg_sys::table_scan_getnextslot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
            slot
        } else {
            std::ptr::null_mut()
        }
    }
}

/// Rows handed back for an EvalPlanQual recheck: the plan's qual decides, as for
/// a sequential scan.
///
/// # Safety
/// Called only by PostgreSQL, by `ExecScan` as this node's recheck method, with
/// its scan state.
#[pg_guard]
unsafe extern "C-unwind" fn recheck(_ss: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    true
}

/// Custom scan method `CustomExecMethods.EndCustomScan`.
///
/// # Safety
/// Called only by PostgreSQL, as `CustomExecMethods.EndCustomScan` of this
/// node, with the arguments that method gets.
#[pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let scan = (*node).ss.ss_currentScanDesc;
        if !scan.is_null() {
            pg_sys::table_endscan(scan);
            (*node).ss.ss_currentScanDesc = std::ptr::null_mut();
        }
    }
}

/// Custom scan method `CustomExecMethods.ReScanCustomScan`.
///
/// # Safety
/// Called only by PostgreSQL, as `CustomExecMethods.ReScanCustomScan` of this
/// node, with the arguments that method gets.
#[pg_guard]
unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let scan = (*node).ss.ss_currentScanDesc;
        if !scan.is_null() {
            pg_sys::table_rescan(scan, std::ptr::null_mut());
        }
        // Parameters may have changed: values are taken again.
        if let Some(inner) = (*(node as *mut NodeState)).inner.as_mut() {
            inner.filter_set = false;
            inner.counted_left = None;
        }
        pg_sys::ExecScanReScan(&mut (*node).ss);
    }
}

/// Custom scan method `CustomExecMethods.ExplainCustomScan`.
///
/// # Safety
/// Called only by PostgreSQL, as `CustomExecMethods.ExplainCustomScan` of this
/// node, with the arguments that method gets.
#[pg_guard]
unsafe extern "C-unwind" fn explain(node: *mut pg_sys::CustomScanState, ancestors: *mut pg_sys::List, es: *mut pg_sys::ExplainState) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let plan = (*node).ss.ps.plan;
        let exprs = (*(plan as *mut pg_sys::CustomScan)).custom_exprs;
        if !exprs.is_null() {
            let ctx = pg_sys::set_deparse_context_plan((*es).deparse_cxt, plan, ancestors);
            let prefix = pg_sys::list_length((*es).rtable) > 1 || (*es).verbose;
            let text = pg_sys::deparse_expression(pg_sys::make_ands_explicit(exprs) as *mut pg_sys::Node, ctx, prefix, false);
            pg_sys::ExplainPropertyText(c"Storage Filter".as_ptr(), text, es);
        }
        if let Some(inner) = (*(node as *mut NodeState)).inner.as_ref() {
            if !inner.agg_names.is_empty() {
                let names = std::ffi::CString::new(inner.agg_names.join(", ")).unwrap_or_default();
                pg_sys::ExplainPropertyText(c"Storage Aggregates".as_ptr(), names.as_ptr(), es);
            }
            if (*es).analyze && inner.count_mode {
                pg_sys::ExplainPropertyInteger(c"Rows Counted in Storage".as_ptr(), std::ptr::null(), inner.counted_total as i64, es);
            }
            if (*es).analyze && !inner.aggs.is_empty() {
                pg_sys::ExplainPropertyInteger(c"Rows Aggregated in Storage".as_ptr(), std::ptr::null(), inner.counted_total as i64, es);
            }
        }
    }
}
