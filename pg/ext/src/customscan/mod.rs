//! Pinax's custom scans, registered here once.
//!
//! - `PinaxScan` (`pushdown/`): a sequential scan of a Pinax table whose
//!   `WHERE` conditions (and count or aggregates above it) the tablets compute.
//!   Its path is offered from `set_rel_pathlist_hook`, installed here.
//! - `PinaxWriteByKey` (`write_by_key/`): an UPDATE or DELETE of one row by its
//!   primary key (or DELETE of every row) without reading first. Its plan replaces
//!   PostgreSQL's after planning: the one `planner_hook` (`hooks/planner.rs`)
//!   calls `write_by_key::plan::after_planning`.
//!
//! Each scan keeps its method tables (`methods.rs`) next to its callbacks; this
//! module registers their scan methods (so plans copied or read back from a
//! string find them by name) and installs the path hook, once, from `_PG_init`.
//! Scan names and EXPLAIN labels are part of the SQL tests' expected output.

mod methods;
pub mod pushdown;
pub mod write_by_key;

use pgrx::pg_guard;
use pgrx::pg_sys;
use std::sync::OnceLock;

static PREV_REL_PATHLIST: OnceLock<pg_sys::set_rel_pathlist_hook_type> = OnceLock::new();

/// Register the custom scans and install the path hook (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let _ = PREV_REL_PATHLIST.set(pg_sys::set_rel_pathlist_hook);
        pg_sys::set_rel_pathlist_hook = Some(set_rel_pathlist);
        pg_sys::RegisterCustomScanMethods(&pushdown::SCAN_METHODS.0);
        pg_sys::RegisterCustomScanMethods(&write_by_key::SCAN_METHODS.0);
    }
}

/// The `set_rel_pathlist_hook`.
///
/// # Safety
/// Called only by PostgreSQL, as `set_rel_pathlist_hook`, with the arguments
/// that hook gets.
#[pg_guard]
unsafe extern "C-unwind" fn set_rel_pathlist(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rti: pg_sys::Index,
    rte: *mut pg_sys::RangeTblEntry,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if let Some(prev) = PREV_REL_PATHLIST.get().copied().flatten() {
            prev(root, rel, rti, rte);
        }
        pushdown::add_path(root, rel, rte);
    }
}
