//! ExecutorEnd hook: inside a transaction block, send a statement's buffered writes
//! when it ends, so that its errors (unique violations, conflicts) are reported by
//! that statement and not by a later one or by COMMIT.

use crate::state;
use crate::violation::OrRaiseFlush;
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::sync::OnceLock;

static PREV: OnceLock<pg_sys::ExecutorEnd_hook_type> = OnceLock::new();

/// Install the hook (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    let _ = PREV.set(pg_sys::ExecutorEnd_hook);
    pg_sys::ExecutorEnd_hook = Some(executor_end);
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_end(query_desc: *mut pg_sys::QueryDesc) {
    match PREV.get().copied().flatten() {
        Some(prev) => prev(query_desc),
        None => pg_sys::standard_ExecutorEnd(query_desc),
    }
    if pg_sys::IsTransactionBlock() && state::with(|b| b.has_buffered()) {
        state::with(|b| b.flush()).or_raise();
    }
}
