//! UPDATE and DELETE of one row by its whole primary key, without reading the row
//! first (issue #6's "single-row UPDATE/DELETE by primary key as one storage
//! operation"; YugabyteDB's single-row modify, CockroachDB's blind puts).
//!
//! PostgreSQL runs `UPDATE t SET c = $1 WHERE pk = $2` as a ModifyTable over an
//! index scan: the row is read (one round trip), the new row formed from it and
//! written (a second one, at commit). When nothing needs the old row, Pinax sends
//! one write that applies only if the row is live (`Request::WriteIfLive`): a
//! *blind patch* holding the assigned columns (the tablets lay it over the row; reads
//! merge it, `pinax_codec::patch`), or a delete. The tablet answers whether a row
//! was there, which is the statement's row count.
//!
//! Planning (`planner_hook`, after PostgreSQL's planner: `hooks/planner.rs`
//! calls `plan::after_planning`): a plan that is exactly ModifyTable(UPDATE |
//! DELETE) over an index scan of a Pinax table's primary key,
//! with one equality per key column against a value that reads no table column, no
//! other condition, and nothing that needs the old row, becomes a Custom Scan
//! (PinaxWriteByKey) holding the key and new-value expressions, with the original
//! plan as its only child. Needing the old row means: RETURNING, triggers of any
//! kind (foreign keys included), row-level security, CHECK constraints, stored
//! generated columns, partitions or inheritance children, a new value reading a
//! column (or calling a volatile function that is not built in: it could write),
//! an assigned column that is indexed (its entries would change), and for DELETE
//! any secondary index (its entries are keyed by the old row's values).
//!
//! Execution: the node writes by key only for a statement that is its whole
//! transaction (autocommit, top level, nothing written before it in the
//! transaction, see `hooks::restart::top_level_whole_transaction`), under READ
//! COMMITTED or REPEATABLE READ, with `pinax.enable_single_row_writes` (and for
//! UPDATE `pinax.column_conflicts`) on. Its write then commits at once, as the
//! autocommit fast path would at the end of the statement. A top-level statement
//! inside a READ COMMITTED transaction (a transaction block, or after earlier
//! writes), with `pinax.enable_single_row_writes_in_transactions` on, writes by
//! key too, as a provisional record of the transaction (`Request::WriteIntentIfLive`):
//! the row is live when the transaction's own earlier writes say so, else when its
//! newest committed version is; a blind patch over a row the transaction wrote
//! itself (its patch must hold the whole row, see `pinax_mvcc::txn_effect`) or
//! over two patches the tablet cannot fold (below) answers `NeedsRow`, and the
//! statement then runs its child.
//! Otherwise (a function, REPEATABLE READ in a block, SERIALIZABLE) it runs its
//! child, the plan PostgreSQL made, unchanged.
//!
//! Semantics: the write reads nothing, so it has no read time to conflict with:
//! it applies to the newest committed version, as PostgreSQL's EvalPlanQual
//! would under READ COMMITTED (and, the statement being its whole transaction,
//! as a REPEATABLE READ transaction whose snapshot was taken then; a READ
//! COMMITTED statement's snapshot could have been taken then too). A pending
//! write of another transaction makes it wait (as for a row lock) and try again.
//! A patch that would be the third over a row is not stored as one (reads, scans
//! above all, merge every layer of a row's stack): the patch carries the table's
//! row layout (`pinax.enable_tablet_folds`), and the tablet folds the stack and the
//! patch into the whole row (`pinax_codec::heap_tuple::fold`). Where it cannot
//! (another transaction's write of the row in the way, a row written before a column
//! was added, no layout sent) it refuses the patch: the node then reads the row,
//! forms it whole and writes it with that read's time (a newer commit makes it
//! read again), which folds the stack.
//! A NULL for a NOT NULL column runs the child plan, which reports it as
//! PostgreSQL does (nothing was written).
//!
//! DELETE of every row (`DELETE FROM t`, no WHERE: ModifyTable over a sequential
//! scan with no condition) of a table whose indexes are all B-trees, under the
//! same conditions (nothing needs the old rows), becomes the same custom scan with
//! `Operation: Delete All`. Run as the first write of a READ COMMITTED
//! transaction (autocommit or in a transaction block; a top-level statement) with
//! `pinax.enable_delete_all` on, each tablet counts its rows live at the
//! statement's read time and writes one intent, applied as a whole-tablet
//! tombstone at the commit (`Request::DeleteAll`); so do the tablets of every
//! secondary index (all its entries go): no row is shipped, and none is written
//! one by one. A commit after the read time in a tablet is a conflict:
//! the deletion is sent again at a new read time (the READ COMMITTED wrapper is
//! not used, as for writes by key), to the tablets that refused it; those that
//! took it hold their rows until the commit (any write there waits), so their
//! count stands at the new time too. The transaction's later statements see no
//! older row of the table (`TabletDeletions`: its own deletion) and may write the
//! table again; their rows outlive the tombstone, applied at the same commit time.
//!
//! Files: `plan.rs` decides at planning what becomes a write by key and builds
//! the node; this file runs it (and its child plan when it cannot) and explains it.

pub mod plan;

use self::plan::every_index_kept;
use super::methods::{exec_methods, Methods};
use crate::error::OrRaise;
use crate::guc;
use crate::meta;
use crate::pg_list::{list_ints, list_ptrs};
use crate::state;
use crate::tuple::{form_tuple_bytes, merged, slot_getallattrs, store_tuple};
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_codec::patch;
use pinax_proto::{LiveWrite, ReadPoint, WriteOp};
use std::ffi::CStr;

const NAME: &CStr = c"PinaxWriteByKey";

pub(super) static SCAN_METHODS: Methods<pg_sys::CustomScanMethods> =
    Methods(pg_sys::CustomScanMethods { CustomName: NAME.as_ptr(), CreateCustomScanState: Some(create_state) });

static EXEC_METHODS: Methods<pg_sys::CustomExecMethods> = exec_methods(NAME, begin, exec, end, rescan, explain);

/// custom_private: [UPDATE = 1 | DELETE = 2, canSetTag, key count, assigned attnums...].
const OP_UPDATE: i32 = 1;

const OP_DELETE: i32 = 2;

/// DELETE with no condition: every row, in the tablets.
const OP_DELETE_ALL: i32 = 3;

/// How many times a whole-row write is formed again after a newer commit before
/// the statement gives up with the conflict (40001).
const MAX_REREADS: u32 = 100;

/// Whether `planstate` is a write by key that runs as one (decided when it
/// started): the statement needs no READ COMMITTED restart wrapper.
///
/// # Safety
/// `planstate` must be null or a valid plan state.
pub unsafe fn writes_by_key(planstate: *mut pg_sys::PlanState) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if planstate.is_null() || (*planstate).type_ != pg_sys::NodeTag::T_CustomScanState {
            return false;
        }
        let css = planstate as *mut pg_sys::CustomScanState;
        (*css).methods == &EXEC_METHODS.0 && (*(css as *mut NodeState)).by_key
    }
}

#[repr(C)]
struct NodeState {
    css: pg_sys::CustomScanState,
    /// Writing by key (else the child runs).
    by_key: bool,
    done: bool,
    op: i32,
    can_set_tag: bool,
    /// Key expressions, then new values (by_key only).
    keys: *mut pg_sys::List,
    values: *mut pg_sys::List,
    assigned: *mut pg_sys::List,
    child: *mut pg_sys::PlanState,
    /// What the write did (EXPLAIN ANALYZE; -1: not run by key).
    outcome: i32,
    /// Writing by key as an intent of the transaction (not committed at once).
    in_txn: bool,
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
        (*s).outcome = -1;
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
        let s = node as *mut NodeState;
        let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
        let private = list_ints((*cscan).custom_private);
        (*s).op = private[0];
        (*s).can_set_tag = private[1] != 0;
        let nkeys = private[2] as usize;
        let explain_only = eflags as u32 & pg_sys::EXEC_FLAG_EXPLAIN_ONLY != 0;
        let allowed = match (*s).op {
            OP_DELETE_ALL => guc::delete_all() && pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as i32,
            OP_DELETE => guc::single_row_writes(),
            _ => guc::single_row_writes() && guc::column_conflicts(),
        };
        let eligible = !explain_only && allowed && pg_sys::XactIsoLevel < pg_sys::XACT_SERIALIZABLE as i32;
        // (by key, as an intent of the transaction)
        ((*s).by_key, (*s).in_txn) = if !eligible {
            (false, false)
        } else if (*s).op == OP_DELETE_ALL {
            // Its transaction commits it, whenever: any top-level statement.
            (crate::hooks::restart::top_level() && state::with(|b| b.wrote_nothing()), false)
        } else if crate::hooks::restart::top_level_whole_transaction((*estate).es_plannedstmt) && state::with(|b| b.wrote_nothing()) {
            (true, false)
        } else {
            // Inside a READ COMMITTED transaction: an intent of the transaction.
            let in_txn =
                guc::single_row_writes_in_transactions() && pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as i32 && crate::hooks::restart::top_level();
            (in_txn, in_txn)
        };
        if (*s).by_key {
            let ps = node as *mut pg_sys::PlanState;
            let exprs = list_ptrs::<pg_sys::Expr>((*cscan).custom_exprs);
            for (i, e) in exprs.iter().enumerate() {
                let st = pg_sys::ExecInitExpr(*e, ps);
                if i < nkeys {
                    (*s).keys = pg_sys::lappend((*s).keys, st as *mut std::ffi::c_void);
                } else {
                    (*s).values = pg_sys::lappend((*s).values, st as *mut std::ffi::c_void);
                }
            }
            for a in &private[3..] {
                (*s).assigned = pg_sys::lappend_int((*s).assigned, *a);
            }
        } else {
            init_child(s, estate, eflags);
        }
    }
}

/// Initialize the child plan (PostgreSQL's own) of node `s`.
///
/// # Safety
/// `s` must be a valid `NodeState`, and `estate` a valid `EState`. Calls into
/// PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn init_child(s: *mut NodeState, estate: *mut pg_sys::EState, eflags: i32) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let cscan = (*s).css.ss.ps.plan as *mut pg_sys::CustomScan;
        let plan = pg_sys::list_nth((*cscan).custom_plans, 0) as *mut pg_sys::Plan;
        let old = pg_sys::MemoryContextSwitchTo((*estate).es_query_cxt);
        (*s).child = pg_sys::ExecInitNode(plan, estate, eflags);
        (*s).css.custom_ps = pg_sys::lappend(std::ptr::null_mut(), (*s).child as *mut std::ffi::c_void);
        pg_sys::MemoryContextSwitchTo(old);
    }
}

/// The value of `state` in `econtext`'s per-tuple memory: (datum, is NULL).
///
/// # Safety
/// `state` must be a valid `ExprState`, and `econtext` a valid `ExprContext`.
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn eval(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> (pg_sys::Datum, bool) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_tuple_memory);
        let mut isnull = false;
        let v = ((*state).evalfunc.expect("compiled expression"))(state, econtext, &mut isnull);
        pg_sys::MemoryContextSwitchTo(old);
        (v, isnull)
    }
}

/// The next row of the child plan (initialized on first use).
///
/// # Safety
/// `s` must be a valid `NodeState`.
unsafe fn run_child(s: *mut NodeState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*s).child.is_null() {
            init_child(s, (*s).css.ss.ps.state, (*(*s).css.ss.ps.state).es_top_eflags);
        }
        let child = (*s).child;
        ((*child).ExecProcNode.expect("initialized plan node"))(child)
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
        let s = node as *mut NodeState;
        if !(*s).by_key {
            return run_child(s);
        }
        if (*s).done {
            return std::ptr::null_mut();
        }
        (*s).done = true;
        if (*s).op == OP_DELETE_ALL {
            return delete_all(s);
        }
        let rel = (*node).ss.ss_currentRelation;
        let desc = (*rel).rd_att;
        let natts = (*desc).natts as usize;
        let econtext = (*node).ss.ps.ps_ExprContext;
        let m = meta::table_meta(rel).or_raise();
        let Some(pk) = m.pk.clone() else {
            (*s).by_key = false;
            return run_child(s);
        };
        // The row as far as the statement knows it: its key, and what it assigns.
        let slot = (*node).ss.ss_ScanTupleSlot;
        ((*(*slot).tts_ops).clear.expect("slot ops"))(slot);
        let values = std::slice::from_raw_parts_mut((*slot).tts_values, natts);
        let isnull = std::slice::from_raw_parts_mut((*slot).tts_isnull, natts);
        isnull.fill(true);
        for (st, att) in list_ptrs::<pg_sys::ExprState>((*s).keys).into_iter().zip(&pk.heap_attnums) {
            let (v, null) = eval(st, econtext);
            if null {
                // `pk = NULL` matches no row.
                (*s).outcome = LiveWrite::Absent as i32;
                return std::ptr::null_mut();
            }
            values[*att as usize - 1] = v;
            isnull[*att as usize - 1] = false;
        }
        let assigned: Vec<u16> = list_ints((*s).assigned).iter().map(|a| *a as u16).collect();
        for (st, att) in list_ptrs::<pg_sys::ExprState>((*s).values).into_iter().zip(&assigned) {
            let (v, null) = eval(st, econtext);
            let i = *att as usize - 1;
            if null && (*(*desc).attrs.as_ptr().add(i)).attnotnull {
                // PostgreSQL's own plan reports it, with the row (nothing is written).
                (*s).by_key = false;
                return run_child(s);
            }
            values[i] = v;
            isnull[i] = null;
        }
        pg_sys::ExecStoreVirtualTuple(slot);
        let key = meta::pk_key(&pk, slot);
        let mut sorted = assigned.clone();
        sorted.sort_unstable();
        // With the table's layout, the tablet folds a row's patches into the whole row
        // itself rather than answer `NeedsRow` (`pinax_codec::heap_tuple::fold`).
        let blind = if (*s).op == OP_UPDATE {
            let layout = if guc::tablet_folds() { crate::tuple::row_layout(desc) } else { Vec::new() };
            WriteOp::patch(key.clone(), patch::encode_patch_op_with_layout(&sorted, &sorted, &layout, &form_tuple_bytes(slot)))
        } else {
            WriteOp::delete(key.clone())
        };
        if (*s).in_txn {
            let seq = pg_sys::GetCurrentCommandId(true);
            let outcome = state::with(|b| b.write_if_live(seq, &m.storage, blind)).unwrap_or_else(|e| crate::violation::raise(e));
            if outcome == LiveWrite::NeedsRow {
                // The transaction wrote the row, or it carries patches: PostgreSQL's plan
                // reads it and writes it whole (nothing was written).
                (*s).by_key = false;
                pgrx::debug1!("pinax: UPDATE by key in a transaction needs the row: read, then written");
                return run_child(s);
            }
            return finish(s, rel, outcome, false);
        }
        let client = state::with(|b| b.client()).or_raise();
        let mut whole: Option<(WriteOp, pinax_common::HybridTime)> = None;
        let mut written_whole = false;
        let mut rereads = 0;
        let mut started = None;
        let outcome = loop {
            let res = match &whole {
                None => client.write_if_live(&m.storage, &blind, None, false),
                Some((op, read_ht)) => client.write_if_live(&m.storage, op, Some(*read_ht), true),
            };
            match res {
                Ok((_, LiveWrite::NeedsRow)) => {
                    // Too many patches over the row: write it whole (read it first).
                    let (row, read_ht) = client.read_at(&m.storage, &key, ReadPoint::LATEST).or_raise();
                    let Some(row) = row else { break LiveWrite::Absent };
                    // It depends on every column (it holds them as read): any
                    // commit after the read is a conflict, and then it is read again.
                    let every: Vec<u16> = (1..=natts as u16).collect();
                    whole = Some((WriteOp::patch(key.clone(), patch::encode_patch_op(&sorted, &every, &whole_row(rel, slot, &assigned, row))), read_ht));
                }
                Ok((_, outcome)) => {
                    written_whole = whole.is_some();
                    break outcome;
                }
                Err(e) => match e.blocker() {
                    // A pending write of the row: wait for its transaction, then
                    // write again (over whatever it left).
                    Some(b) => {
                        state::wait_for(&client, b, None, &mut started).or_raise();
                        whole = None;
                    }
                    // A commit after the whole row's read: read it again.
                    None if whole.is_some() && e.code() == pinax_common::ErrorCode::SerializationFailure && rereads < MAX_REREADS => {
                        rereads += 1;
                        whole = None;
                    }
                    None => crate::error::raise(&e),
                },
            }
        };
        finish(s, rel, outcome, written_whole)
    }
}

/// Count what the write by key did (`outcome`) as PostgreSQL counts an UPDATE or
/// DELETE's rows.
///
/// # Safety
/// `s` must be a valid `NodeState`, and `rel` a valid open relation. Calls into
/// PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn finish(s: *mut NodeState, rel: pg_sys::Relation, outcome: LiveWrite, written_whole: bool) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        (*s).outcome = outcome as i32;
        if outcome == LiveWrite::Applied {
            if (*s).can_set_tag {
                (*(*s).css.ss.ps.state).es_processed += 1;
            }
            if (*s).op == OP_UPDATE {
                pg_sys::pgstat_count_heap_update(rel, false);
            } else {
                pg_sys::pgstat_count_heap_delete(rel);
            }
        }
        if pg_sys::message_level_is_interesting(pg_sys::DEBUG1 as i32) {
            let what = if (*s).op == OP_UPDATE { "UPDATE" } else { "DELETE" };
            let how = match outcome {
                LiveWrite::Applied if written_whole => "1 row (read, then written whole: it carried many patches)",
                LiveWrite::Applied if (*s).in_txn => "1 row (in the transaction)",
                LiveWrite::Applied => "1 row",
                _ if (*s).in_txn => "no row (in the transaction)",
                _ => "no row",
            };
            pgrx::debug1!("pinax: {what} by key without reading the row: {how}");
        }
        std::ptr::null_mut()
    }
}

/// DELETE of every row, in the tablets (module header).
///
/// # Safety
/// `s` must be a valid `NodeState`. Calls into PostgreSQL: only in a backend,
/// where its errors can be raised.
unsafe fn delete_all(s: *mut NodeState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let rel = (*s).css.ss.ss_currentRelation;
        let m = meta::table_meta(rel).or_raise();
        if !every_index_kept(rel, &m) {
            // An index Pinax does not keep entries of yet (being built): row by row.
            (*s).by_key = false;
            return run_child(s);
        }
        let seq = pg_sys::GetCurrentCommandId(true);
        let mut conflicts = 0;
        let n = loop {
            // The rows, then every secondary index's entries, in one transaction.
            let res: Result<u64, state::FlushError> = state::with(|b| {
                let n = b.delete_all(seq, &m.storage)?;
                for im in &m.secondary {
                    b.delete_all(seq, &im.storage)?;
                }
                Ok(n)
            });
            match res {
                Ok(n) => break n,
                // A commit after the read time: again at a new one.
                Err(e) if e.error.code() == pinax_common::ErrorCode::SerializationFailure && conflicts < MAX_REREADS => {
                    conflicts += 1;
                    state::with(|b| b.restart_statement());
                }
                Err(e) => crate::violation::raise(e),
            }
        };
        (*s).outcome = n.min(i32::MAX as u64) as i32;
        if (*s).can_set_tag {
            (*(*s).css.ss.ps.state).es_processed += n;
        }
        // The table's statistics count the rows as a row-by-row DELETE would
        // (pg_stat_user_tables.n_tup_del, n_live_tup/n_dead_tup at commit);
        // PostgreSQL 15 counts deletions one at a time.
        for _ in 0..n {
            pg_sys::pgstat_count_heap_delete(rel);
        }
        pgrx::debug1!("pinax: DELETE of every row in the tablets: {n} rows");
        std::ptr::null_mut()
    }
}

/// The row `stored` (as read, patches merged) with the attributes `assigned` taken
/// from `slot`: the whole new row.
///
/// # Safety
/// `rel` must be a valid open relation, and `slot` a valid slot. Calls into
/// PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn whole_row(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, assigned: &[u16], stored: Vec<u8>) -> Vec<u8> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let desc = (*rel).rd_att;
        let natts = (*desc).natts as usize;
        let bytes = merged(desc, stored);
        let old = pg_sys::MakeSingleTupleTableSlot(desc, pg_sys::table_slot_callbacks(rel));
        store_tuple(old, &bytes, pg_sys::ItemPointerData::default(), (*rel).rd_id, None);
        slot_getallattrs(old);
        let new = pg_sys::MakeSingleTupleTableSlot(desc, &pg_sys::TTSOpsVirtual);
        let (ov, on) = (std::slice::from_raw_parts((*old).tts_values, natts), std::slice::from_raw_parts((*old).tts_isnull, natts));
        let (sv, sn) = (std::slice::from_raw_parts((*slot).tts_values, natts), std::slice::from_raw_parts((*slot).tts_isnull, natts));
        let (nv, nn) = (std::slice::from_raw_parts_mut((*new).tts_values, natts), std::slice::from_raw_parts_mut((*new).tts_isnull, natts));
        for i in 0..natts {
            let from_slot = assigned.contains(&(i as u16 + 1));
            nv[i] = if from_slot { sv[i] } else { ov[i] };
            nn[i] = if from_slot { sn[i] } else { on[i] };
        }
        pg_sys::ExecStoreVirtualTuple(new);
        let out = form_tuple_bytes(new);
        pg_sys::ExecDropSingleTupleTableSlot(new);
        pg_sys::ExecDropSingleTupleTableSlot(old);
        out
    }
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
        let s = node as *mut NodeState;
        if !(*s).child.is_null() {
            pg_sys::ExecEndNode((*s).child);
            (*s).child = std::ptr::null_mut();
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
        let s = node as *mut NodeState;
        (*s).done = false;
        if !(*s).child.is_null() {
            pg_sys::ExecReScan((*s).child);
        }
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
        let s = node as *mut NodeState;
        let plan = (*node).ss.ps.plan;
        let cscan = plan as *mut pg_sys::CustomScan;
        let private = list_ints((*cscan).custom_private);
        let op = match private[0] {
            OP_UPDATE => c"Update",
            OP_DELETE => c"Delete",
            _ => c"Delete All",
        };
        pg_sys::ExplainPropertyText(c"Operation".as_ptr(), op.as_ptr(), es);
        if private[0] == OP_DELETE_ALL {
            if (*es).analyze && (*s).outcome >= 0 {
                pg_sys::ExplainPropertyInteger(c"Rows Deleted in Tablets".as_ptr(), std::ptr::null(), (*s).outcome as i64, es);
            }
            return;
        }
        let nkeys = private[2] as usize;
        let exprs = list_ptrs::<pg_sys::Node>((*cscan).custom_exprs);
        let ctx = pg_sys::set_deparse_context_plan((*es).deparse_cxt, plan, ancestors);
        let rel = (*node).ss.ss_currentRelation;
        let mut keys = Vec::new();
        let index_attnums = meta::table_meta(rel).ok().and_then(|m| m.pk.clone()).map(|pk| pk.heap_attnums.clone()).unwrap_or_default();
        for (i, e) in exprs.iter().take(nkeys).enumerate() {
            let col = index_attnums.get(i).map(|a| attname(rel, *a as i32)).unwrap_or_default();
            keys.push(format!("{col} = {}", deparse(*e, ctx)));
        }
        let keys = std::ffi::CString::new(keys.join(" AND ")).unwrap_or_default();
        pg_sys::ExplainPropertyText(c"Key".as_ptr(), keys.as_ptr(), es);
        if private[0] == OP_UPDATE {
            let sets: Vec<String> = exprs.iter().skip(nkeys).zip(&private[3..]).map(|(e, a)| format!("{} = {}", attname(rel, *a), deparse(*e, ctx))).collect();
            let sets = std::ffi::CString::new(sets.join(", ")).unwrap_or_default();
            pg_sys::ExplainPropertyText(c"Set".as_ptr(), sets.as_ptr(), es);
        }
        if (*es).analyze && (*s).outcome >= 0 {
            let what = if (*s).outcome == LiveWrite::Applied as i32 { c"1 row" } else { c"no row" };
            pg_sys::ExplainPropertyText(c"Written by Key".as_ptr(), what.as_ptr(), es);
        }
    }
}

/// Expression `e` as SQL text (deparse context `ctx`).
///
/// # Safety
/// `e` must be a valid node (or null where checked), and `ctx` a valid `List`.
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn deparse(e: *mut pg_sys::Node, ctx: *mut pg_sys::List) -> String {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let p = pg_sys::deparse_expression(e, ctx, false, false);
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// The name of attribute `attno` of `rel` (empty if out of range).
///
/// # Safety
/// `rel` must be a valid open relation.
unsafe fn attname(rel: pg_sys::Relation, attno: i32) -> String {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if attno <= 0 || attno > (*(*rel).rd_att).natts {
            return String::new();
        }
        let att = (*(*rel).rd_att).attrs.as_ptr().add(attno as usize - 1);
        CStr::from_ptr((*att).attname.data.as_ptr()).to_string_lossy().into_owned()
    }
}
