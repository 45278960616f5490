//! The planner hook (`planner_hook`), installed once: sequence calls are swapped
//! before PostgreSQL plans (`sequence::swap_calls`), and a plan that writes one
//! row by key is rewritten after (`customscan::write_by_key::plan::after_planning`).

use pgrx::pg_guard;
use pgrx::pg_sys;
use std::sync::OnceLock;

static PREV: OnceLock<pg_sys::planner_hook_type> = OnceLock::new();

/// Install the planner hook (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let _ = PREV.set(pg_sys::planner_hook);
        pg_sys::planner_hook = Some(planner);
    }
}

/// The `planner_hook`.
///
/// # Safety
/// Called only by PostgreSQL, as `planner_hook`, with the arguments that hook
/// gets.
#[pg_guard]
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: i32,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        crate::sequence::swap_calls(parse);
        let ps = match PREV.get().copied().flatten() {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => pg_sys::standard_planner(parse, query_string, cursor_options, bound_params),
        };
        crate::customscan::write_by_key::plan::after_planning(ps);
        ps
    }
}
