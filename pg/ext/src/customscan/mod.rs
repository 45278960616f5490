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

use crate::pg_list::list_ptrs;
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
        drop_bitmap_paths(root, rel, rte);
        pushdown::add_path(root, rel, rte);
        crate::hooks::relation_info::order_only_under_bound_hash(rel, rte);
    }
}

/// A Pinax table's bitmap heap scan paths that PostgreSQL offers and Pinax has
/// no use for: parallel ones (the bitmap's TIDs name rows in the TID map of the
/// process whose index scans read them, `am/table/bitmap.rs`, which the other
/// processes cannot see), and those over one index scan while index scans are
/// enabled: the same index scan, fetching the same rows, then a walk of the
/// bitmap, never cheaper whatever heap-page costs say, and with no order and no
/// early stop under a LIMIT. BitmapAnd and BitmapOr paths, which no index scan
/// can replace, stay. A dropped path's index scan (its `bitmapqual`, a complete
/// index scan path) is offered instead, and a sequential scan again: a cheaper
/// bitmap path may have pruned both (`add_path`).
///
/// # Safety
/// The arguments of `set_rel_pathlist_hook`, while planning.
unsafe fn drop_bitmap_paths(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, rte: *mut pg_sys::RangeTblEntry) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION || (*rte).inh || (*rte).relkind as u8 != pg_sys::RELKIND_RELATION {
            return;
        }
        let paths = |list| list_ptrs::<pg_sys::Path>(list);
        let bitmap = |p: *mut pg_sys::Path| (*p).pathtype == pg_sys::NodeTag::T_BitmapHeapScan;
        let one_index = |p: *mut pg_sys::Path| {
            let qual = (*(p as *mut pg_sys::BitmapHeapPath)).bitmapqual;
            !qual.is_null() && (*qual).type_ == pg_sys::NodeTag::T_IndexPath
        };
        let drop_one_index = pg_sys::enable_indexscan;
        let (full, partial) = (paths((*rel).pathlist), paths((*rel).partial_pathlist));
        let droppable = partial.iter().any(|&p| bitmap(p)) || drop_one_index && full.iter().any(|&p| bitmap(p) && one_index(p));
        if !droppable {
            return;
        }
        let r = pg_sys::table_open((*rte).relid, pg_sys::NoLock as pg_sys::LOCKMODE);
        let pinax = crate::meta::is_pinax_table(r);
        pg_sys::table_close(r, pg_sys::NoLock as pg_sys::LOCKMODE);
        if !pinax {
            return;
        }
        let keep = |list: &[*mut pg_sys::Path], drop: &dyn Fn(*mut pg_sys::Path) -> bool| {
            let mut kept = std::ptr::null_mut();
            for &p in list.iter().filter(|&&p| !drop(p)) {
                kept = pg_sys::lappend(kept, p.cast());
            }
            kept
        };
        (*rel).partial_pathlist = keep(&partial, &|p| bitmap(p));
        if !drop_one_index {
            return;
        }
        (*rel).pathlist = keep(&full, &|p| bitmap(p) && one_index(p));
        for &p in full.iter().filter(|&&p| bitmap(p) && one_index(p)) {
            pg_sys::add_path(rel, (*(p as *mut pg_sys::BitmapHeapPath)).bitmapqual);
        }
        let seq = |p: *mut pg_sys::Path| (*p).pathtype == pg_sys::NodeTag::T_SeqScan && (*p).param_info.is_null();
        if !paths((*rel).pathlist).into_iter().any(seq) {
            pg_sys::add_path(rel, pg_sys::create_seqscan_path(root, rel, std::ptr::null_mut(), 0));
        }
    }
}
