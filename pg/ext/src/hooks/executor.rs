//! Executor hooks.
//! - ExecutorStart: index-only scans of Pinax indexes run Pinax's node code, which
//!   skips the visibility map (am/index_only.rs); Limit nodes over scans of Pinax
//!   relations pass their bound to the scan's first read (limit.rs).
//! - ExecutorStart/End: which UPDATE runs, for column-level conflicts
//!   (update_deps.rs).
//! - ExecutorStart: whether an INSERT ... ON CONFLICT DO NOTHING writes its row at
//!   once (insert_at_once.rs).
//! - ExecutorEnd: inside a transaction block or a subtransaction (an exception
//!   block), send a statement's buffered writes when it ends, so that its errors
//!   (unique violations, conflicts) are reported by that statement and not by a
//!   later one or by COMMIT. (A restartable READ COMMITTED statement's writes are
//!   sent by hooks/restart.rs instead.)

use crate::am::index_only;
use crate::error::OrRaise;
use crate::guc;
use crate::meta;
use crate::state;
use crate::violation::OrRaiseFlush;
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::sync::OnceLock;

static PREV: OnceLock<pg_sys::ExecutorEnd_hook_type> = OnceLock::new();
static PREV_START: OnceLock<pg_sys::ExecutorStart_hook_type> = OnceLock::new();

/// Install the hook (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let _ = PREV.set(pg_sys::ExecutorEnd_hook);
        pg_sys::ExecutorEnd_hook = Some(executor_end);
        let _ = PREV_START.set(pg_sys::ExecutorStart_hook);
        pg_sys::ExecutorStart_hook = Some(executor_start);
    }
}

/// The `ExecutorStart_hook`.
///
/// # Safety
/// Called only by PostgreSQL, as `ExecutorStart_hook`, with the arguments that
/// hook gets.
#[pg_guard]
unsafe extern "C-unwind" fn executor_start(query_desc: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        // A session's first statement in a Pinax database waits until its node has
        // applied the DDL other nodes ran while it was down (state.rs,
        // `wait_for_ddl`), then takes in the catalog changes: the executor opens
        // the indexes to maintain from them.
        if !state::with(|b| b.connected()) && !guc::replaying() && meta::pinax_am_oid() != 0 {
            state::with(|b| b.client()).or_raise();
            pg_sys::AcceptInvalidationMessages();
        }
        match PREV_START.get().copied().flatten() {
            Some(prev) => prev(query_desc, eflags),
            None => pg_sys::standard_ExecutorStart(query_desc, eflags),
        }
        if meta::pinax_am_oid_cached().is_some() {
            if !guc::index_only_fetch_rows() {
                index_only::adopt_nodes((*query_desc).planstate);
            }
            crate::limit::adopt_nodes((*query_desc).planstate);
        }
        crate::update_deps::started(query_desc);
        crate::insert_at_once::started(query_desc, eflags);
        if upserts((*query_desc).plannedstmt) {
            state::with(|b| b.begin_upsert((*(*query_desc).estate).es_output_cid));
        }
    }
}

/// Whether statement `ps` runs an INSERT ... ON CONFLICT DO UPDATE (its own, or a
/// data-modifying WITH query's).
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`.
unsafe fn upserts(ps: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let is_upsert = |plan: *mut pg_sys::Plan| {
            !plan.is_null()
                && (*plan).type_ == pg_sys::NodeTag::T_ModifyTable
                && (*(plan as *mut pg_sys::ModifyTable)).onConflictAction == pg_sys::OnConflictAction::ONCONFLICT_UPDATE
        };
        (*ps).commandType == pg_sys::CmdType::CMD_INSERT && is_upsert((*ps).planTree)
            || (*ps).hasModifyingCTE && crate::pg_list::list_ptrs::<pg_sys::Plan>((*ps).subplans).into_iter().any(is_upsert)
    }
}

/// The `ExecutorEnd_hook`.
///
/// # Safety
/// Called only by PostgreSQL, as `ExecutorEnd_hook`, with the arguments that
/// hook gets.
#[pg_guard]
unsafe extern "C-unwind" fn executor_end(query_desc: *mut pg_sys::QueryDesc) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        super::restart::forget(query_desc);
        crate::update_deps::ended(query_desc);
        match PREV.get().copied().flatten() {
            Some(prev) => prev(query_desc),
            None => pg_sys::standard_ExecutorEnd(query_desc),
        }
        if (pg_sys::IsTransactionBlock() || pg_sys::IsSubTransaction()) && !super::restart::is_copy(query_desc) && state::with(|b| b.has_buffered()) {
            state::with(|b| b.flush()).or_raise();
        }
    }
}
