//! Planning of writes by key (`after_planning`, from the one `planner_hook`,
//! `hooks/planner.rs`): the plan PostgreSQL made is replaced by a
//! `PinaxWriteByKey` node over it when it has one of the shapes the module
//! header (`write_by_key/mod.rs`) describes and nothing needs the old row.

use super::{OP_DELETE, OP_DELETE_ALL, OP_UPDATE, SCAN_METHODS};
use crate::guc;
use crate::meta;
use crate::pg_list::{list_ints, list_ptrs};
use pgrx::pg_sys;

/// After planning (`hooks/planner.rs`): `ps` (null when planning failed)
/// rewritten to a write by key when it has that shape and the settings allow it.
///
/// # Safety
/// `ps` must be null or the statement PostgreSQL's planner just made.
pub unsafe fn after_planning(ps: *mut pg_sys::PlannedStmt) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (guc::single_row_writes() || guc::delete_all()) && !ps.is_null() {
            rewrite(ps);
        }
    }
}

/// Replace `ps`'s plan by a write by key when it has that shape (module header).
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn rewrite(ps: *mut pg_sys::PlannedStmt) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        use pg_sys::CmdType::{CMD_DELETE, CMD_UPDATE};
        let op = match (*ps).commandType {
            CMD_UPDATE => OP_UPDATE,
            CMD_DELETE => OP_DELETE,
            _ => return,
        };
        if (*ps).hasReturning || (*ps).hasModifyingCTE || pg_sys::list_length((*ps).subplans) > 0 || pg_sys::list_length((*ps).rowMarks) > 0 {
            return;
        }
        let top = (*ps).planTree;
        if top.is_null() || (*top).type_ != pg_sys::NodeTag::T_ModifyTable || !(*top).initPlan.is_null() {
            return;
        }
        let mt = top as *mut pg_sys::ModifyTable;
        if pg_sys::list_length((*mt).resultRelations) != 1
            || (*mt).rootRelation != 0
            || !(*mt).returningLists.is_null()
            || !(*mt).withCheckOptionLists.is_null()
            || (*mt).onConflictAction != pg_sys::OnConflictAction::ONCONFLICT_NONE
            || !(*mt).mergeActionLists.is_null()
        {
            return;
        }
        let sub = (*top).lefttree;
        if sub.is_null() || !(*sub).qual.is_null() || !(*sub).initPlan.is_null() {
            return;
        }
        if op == OP_DELETE && (*sub).type_ == pg_sys::NodeTag::T_SeqScan && guc::delete_all() {
            let rti = list_ints((*mt).resultRelations)[0];
            if (*(sub as *mut pg_sys::SeqScan)).scan.scanrelid as i32 != rti {
                return;
            }
            if let Some(rel) = result_relation(ps, rti) {
                let built = build_delete_all(mt, rel, rti);
                pg_sys::RelationClose(rel);
                if let Some(cs) = built {
                    (*ps).planTree = cs as *mut pg_sys::Plan;
                }
            }
            return;
        }
        if (*sub).type_ != pg_sys::NodeTag::T_IndexScan || !guc::single_row_writes() {
            return;
        }
        let ix = sub as *mut pg_sys::IndexScan;
        let rti = list_ints((*mt).resultRelations)[0];
        if (*ix).scan.scanrelid as i32 != rti || !(*ix).indexorderby.is_null() {
            return;
        }
        let Some(rel) = result_relation(ps, rti) else { return };
        let built = build(mt, ix, rel, op, rti);
        pg_sys::RelationClose(rel);
        if let Some(cs) = built {
            (*ps).planTree = cs as *mut pg_sys::Plan;
        }
    }
}

/// The result relation `rti` of `ps` (opened: close it), if it is a plain relation
/// without inheritance.
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn result_relation(ps: *mut pg_sys::PlannedStmt, rti: i32) -> Option<pg_sys::Relation> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let rte = pg_sys::list_nth((*ps).rtable, rti - 1) as *mut pg_sys::RangeTblEntry;
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION || (*rte).inh {
            return None;
        }
        let rel = pg_sys::RelationIdGetRelation((*rte).relid);
        (!rel.is_null()).then_some(rel)
    }
}

/// Whether `rel` is a Pinax table whose rows nothing but the statement itself
/// needs when they change: no partitions or children, row-level security or
/// triggers (foreign keys included).
///
/// # Safety
/// `rel` must be a valid open relation.
unsafe fn plain_pinax_table(rel: pg_sys::Relation) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let form = (*rel).rd_rel;
        meta::is_pinax_table(rel)
            && (*form).relkind == pg_sys::RELKIND_RELATION as std::ffi::c_char
            && !(*form).relispartition
            && !(*form).relhassubclass
            && !(*form).relrowsecurity
            && (*rel).trigdesc.is_null()
    }
}

/// How many indexes `rel` has.
///
/// # Safety
/// `rel` must be a valid open relation. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn index_count(rel: pg_sys::Relation) -> usize {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let indexes = pg_sys::RelationGetIndexList(rel);
        let n = pg_sys::list_length(indexes) as usize;
        pg_sys::list_free(indexes);
        n
    }
}

/// Whether Pinax keeps the entries of every index of `rel` (its primary key and
/// valid B-trees, `m`): not of another kind of index, nor of one being built.
///
/// # Safety
/// `rel` must be a valid open relation.
pub(super) unsafe fn every_index_kept(rel: pg_sys::Relation, m: &meta::TableMeta) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { index_count(rel) == m.secondary.len() + usize::from(m.pk.is_some()) }
}

/// The custom scan for `mt` (a DELETE with no condition) on `rel`, if nothing
/// needs the old rows and Pinax keeps the entries of every index of the table
/// (they go the same way).
///
/// # Safety
/// `mt` must be a valid `ModifyTable`, and `rel` a valid open relation.
unsafe fn build_delete_all(mt: *mut pg_sys::ModifyTable, rel: pg_sys::Relation, rti: i32) -> Option<*mut pg_sys::CustomScan> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !plain_pinax_table(rel) || !meta::table_meta(rel).is_ok_and(|m| every_index_kept(rel, &m)) {
            return None;
        }
        Some(custom_scan(mt, rti, std::ptr::null_mut(), &[OP_DELETE_ALL, (*mt).canSetTag as i32, 0]))
    }
}

/// The custom scan replacing `mt`: its expressions, private list, and `mt` as its
/// only child (the plan PostgreSQL made, run when the statement cannot write so).
///
/// # Safety
/// `mt` must be a valid `ModifyTable`, and `exprs` a valid `List`. Calls into
/// PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn custom_scan(mt: *mut pg_sys::ModifyTable, rti: i32, exprs: *mut pg_sys::List, private: &[i32]) -> *mut pg_sys::CustomScan {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let cs = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
        let plan = &mut (*cs).scan.plan;
        plan.type_ = pg_sys::NodeTag::T_CustomScan;
        let mtp = mt as *mut pg_sys::Plan;
        plan.startup_cost = (*mtp).startup_cost;
        plan.total_cost = (*mtp).total_cost;
        plan.plan_rows = (*mtp).plan_rows;
        plan.plan_width = 0;
        plan.plan_node_id = (*mtp).plan_node_id;
        plan.targetlist = std::ptr::null_mut();
        (*cs).scan.scanrelid = rti as pg_sys::Index;
        (*cs).methods = &SCAN_METHODS.0;
        (*cs).custom_exprs = exprs;
        let mut list: *mut pg_sys::List = std::ptr::null_mut();
        for v in private {
            list = pg_sys::lappend_int(list, *v);
        }
        (*cs).custom_private = list;
        (*cs).custom_plans = pg_sys::lappend(std::ptr::null_mut(), mt as *mut std::ffi::c_void);
        cs
    }
}

/// The custom scan for `mt` over `ix` on `rel`, if nothing needs the old row.
///
/// # Safety
/// `mt` must be a valid `ModifyTable`, `ix` a valid `IndexScan`, and `rel` a
/// valid open relation. Calls into PostgreSQL: only in a backend, where its
/// errors can be raised.
unsafe fn build(mt: *mut pg_sys::ModifyTable, ix: *mut pg_sys::IndexScan, rel: pg_sys::Relation, op: i32, rti: i32) -> Option<*mut pg_sys::CustomScan> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !plain_pinax_table(rel) {
            return None;
        }
        let desc = (*rel).rd_att;
        let constr = (*desc).constr;
        if !constr.is_null() && ((*constr).num_check > 0 || (*constr).has_generated_stored) {
            return None;
        }
        // The index scanned is the primary key, every key column compared once for
        // equality with a value of the column's type that reads no column.
        let index = pg_sys::RelationIdGetRelation((*ix).indexid);
        if index.is_null() {
            return None;
        }
        let keys = key_exprs(ix, index, rel);
        pg_sys::RelationClose(index);
        let keys = keys?;
        let mut assigned: Vec<i32> = Vec::new();
        let mut values: Vec<*mut pg_sys::Node> = Vec::new();
        let tlist = list_ptrs::<pg_sys::TargetEntry>((*ix).scan.plan.targetlist);
        let real: Vec<_> = tlist.iter().filter(|te| !(***te).resjunk).collect();
        if op == OP_UPDATE {
            let colnos = list_ints(pg_sys::list_nth((*mt).updateColnosLists, 0) as *mut pg_sys::List);
            if colnos.len() != real.len() || colnos.is_empty() {
                return None;
            }
            let indexed = pg_sys::RelationGetIndexAttrBitmap(rel, pg_sys::IndexAttrBitmapKind::INDEX_ATTR_BITMAP_ALL);
            for (te, attno) in real.iter().zip(&colnos) {
                let e = (***te).expr as *mut pg_sys::Node;
                if !computable(e) {
                    return None;
                }
                if *attno <= 0 || *attno > (*desc).natts || pg_sys::bms_is_member(*attno - pg_sys::FirstLowInvalidHeapAttributeNumber, indexed) {
                    return None;
                }
                assigned.push(*attno);
                values.push(e);
            }
            let mut sorted = assigned.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != assigned.len() {
                return None;
            }
        } else {
            if !real.is_empty() {
                return None;
            }
            // Secondary index entries are keyed by the old row's values.
            if index_count(rel) != 1 {
                return None;
            }
        }
        let mut exprs: *mut pg_sys::List = std::ptr::null_mut();
        for e in keys.iter().chain(values.iter()) {
            exprs = pg_sys::lappend(exprs, *e as *mut std::ffi::c_void);
        }
        let private: Vec<i32> = [op, (*mt).canSetTag as i32, keys.len() as i32].into_iter().chain(assigned).collect();
        Some(custom_scan(mt, rti, exprs, &private))
    }
}

/// Whether expression `e` can be computed before the write: it reads no column
/// and no subquery, and calls no volatile function that is not built in (one
/// could write to another table, which would commit with the transaction, after
/// this write committed on its own).
///
/// # Safety
/// `e` must be a valid node (or null where checked). Calls into PostgreSQL:
/// only in a backend, where its errors can be raised.
unsafe fn computable(e: *mut pg_sys::Node) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { !pg_sys::contain_var_clause(e) && !pg_sys::contain_subplans(e) && !user_volatile_walker(e, std::ptr::null_mut()) }
}

/// Whether `func` is volatile and not built in (`check_functions_in_node`
/// callback).
///
/// # Safety
/// Called only by PostgreSQL's `check_functions_in_node`, with a function OID
/// of the node it checks.
unsafe extern "C-unwind" fn user_volatile(func: pg_sys::Oid, _ctx: *mut std::ffi::c_void) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe { func.to_u32() >= pg_sys::FirstNormalObjectId && pg_sys::func_volatile(func) == pg_sys::PROVOLATILE_VOLATILE as std::ffi::c_char }
}

/// Whether `node`'s tree calls a volatile function that is not built in
/// (`expression_tree_walker` callback).
///
/// # Safety
/// Called by PostgreSQL's `expression_tree_walker`, or by `computable`, with a
/// node of a valid expression tree (or null) and the walker's `ctx`.
unsafe extern "C-unwind" fn user_volatile_walker(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if node.is_null() {
            return false;
        }
        if pg_sys::check_functions_in_node(node, Some(user_volatile), ctx) {
            return true;
        }
        pg_sys::expression_tree_walker(node, Some(user_volatile_walker), ctx)
    }
}

/// The value each primary-key column is compared with, in key order, if index
/// conditions `quals` (an index scan's `indexqual`) are exactly one equality per
/// key column of `index` and `index` is a primary key. (Also what makes a SELECT a
/// primary-key lookup, `hooks::restart`.)
///
/// # Safety
/// `quals` must be null or a list of planned index conditions on `index`.
pub unsafe fn primary_key_equalities(quals: *mut pg_sys::List, index: pg_sys::Relation) -> Option<Vec<*mut pg_sys::Node>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let form = (*index).rd_index;
        if form.is_null() || !(*form).indisprimary {
            return None;
        }
        let nkeys = (*form).indnkeyatts as usize;
        let mut out: Vec<*mut pg_sys::Node> = vec![std::ptr::null_mut(); nkeys];
        let quals = list_ptrs::<pg_sys::Node>(quals);
        if quals.len() != nkeys {
            return None;
        }
        for q in quals {
            if (*q).type_ != pg_sys::NodeTag::T_OpExpr {
                return None;
            }
            let op = q as *mut pg_sys::OpExpr;
            let args = list_ptrs::<pg_sys::Node>((*op).args);
            if args.len() != 2 || (*args[0]).type_ != pg_sys::NodeTag::T_Var {
                return None;
            }
            let col = (*(args[0] as *mut pg_sys::Var)).varattno as usize;
            if col == 0 || col > nkeys || !out[col - 1].is_null() {
                return None;
            }
            if pg_sys::get_op_opfamily_strategy((*op).opno, *(*index).rd_opfamily.add(col - 1)) != pg_sys::BTEqualStrategyNumber as i32 {
                return None;
            }
            out[col - 1] = args[1];
        }
        Some(out)
    }
}

/// The value compared with each primary-key column (in key order), if the index
/// scan's conditions are exactly one equality per key column of `index` (`rel`'s
/// primary key) with a value of the column's type that can be computed before the
/// write, under a deterministic collation.
///
/// # Safety
/// `ix` must be a valid `IndexScan`, `index` a valid open relation, and `rel` a
/// valid open relation. Calls into PostgreSQL: only in a backend, where its
/// errors can be raised.
unsafe fn key_exprs(ix: *mut pg_sys::IndexScan, index: pg_sys::Relation, rel: pg_sys::Relation) -> Option<Vec<*mut pg_sys::Node>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let values = primary_key_equalities((*ix).indexqual, index)?;
        let form = (*index).rd_index;
        if (*form).indrelid != (*rel).rd_id {
            return None;
        }
        for (col, value) in values.iter().enumerate() {
            // Equal under a nondeterministic collation is not equal bytes.
            let coll = *(*index).rd_indcollation.add(col);
            if coll != pg_sys::InvalidOid && !pg_sys::get_collation_isdeterministic(coll) {
                return None;
            }
            if !computable(*value) {
                return None;
            }
            let heap_att = *(*form).indkey.values.as_ptr().add(col) as usize;
            if heap_att == 0 {
                return None;
            }
            let att = (*(*rel).rd_att).attrs.as_ptr().add(heap_att - 1);
            let (vt, ct) = (pg_sys::exprType(*value), (*att).atttypid);
            let text_like = |t: pg_sys::Oid| t == pg_sys::TEXTOID || t == pg_sys::VARCHAROID;
            if vt != ct && !(text_like(vt) && text_like(ct)) {
                return None;
            }
        }
        Some(values)
    }
}
