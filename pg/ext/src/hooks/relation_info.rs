//! get_relation_info_hook: planner facts for Pinax tables and their indexes.
//!
//! - parallel sequential scans (tablets shared out among the processes), no
//!   parallel index scans;
//! - GIN and hash indexes Pinax stores (`am/index/inverted/`) are index-scan
//!   capable (no bitmap scans); indexes of other access methods are left out
//!   (kept, not used: `am/index/other.rs`);
//! - Pinax indexes: index-only scans return the columns that decode exactly
//!   (`index::scan::can_return`); no bitmap scans, no mark/restore; and no sort order unless the keys are stored in order (the
//!   primary key of a range-sharded table on ordered types): hash-sharded keys come
//!   back in hash order, so the planner must not rely on index order for them.
//! - marks the indexes hypothetical for selectivity estimation, which otherwise
//!   reads a btree's first/last entries directly;
//! - switches the table's indexes to the Pinax routine for this transaction.

use crate::am::index;
use crate::error::OrRaise;
use crate::meta;
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::sync::OnceLock;

static PREV: OnceLock<pg_sys::get_relation_info_hook_type> = OnceLock::new();

/// Install the hook (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let _ = PREV.set(pg_sys::get_relation_info_hook);
        pg_sys::get_relation_info_hook = Some(get_relation_info);
    }
}

/// The `get_relation_info_hook`.
///
/// # Safety
/// Called only by PostgreSQL, as `get_relation_info_hook`, with the arguments
/// that hook gets.
#[pg_guard]
unsafe extern "C-unwind" fn get_relation_info(root: *mut pg_sys::PlannerInfo, relid: pg_sys::Oid, inhparent: bool, rel: *mut pg_sys::RelOptInfo) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if let Some(prev) = PREV.get().copied().flatten() {
            prev(root, relid, inhparent, rel);
        }
        if inhparent {
            return;
        }
        let r = pg_sys::table_open(relid, pg_sys::NoLock as pg_sys::LOCKMODE);
        if meta::is_pinax_table(r) {
            let m = meta::table_meta(r).or_raise();
            index::ensure_patched(r, &m);
            // Indexes of other access methods are kept, not used (am/index/other.rs).
            let mut list = (*rel).indexlist;
            if !m.others.is_empty() && !list.is_null() {
                let mut kept = std::ptr::null_mut();
                for i in 0..(*list).length as usize {
                    let info = (*(*list).elements.add(i)).ptr_value as *mut pg_sys::IndexOptInfo;
                    if !m.others.contains(&(*info).indexoid.to_u32()) {
                        kept = pg_sys::lappend(kept, info.cast());
                    }
                }
                (*rel).indexlist = kept;
                list = kept;
            }
            if !list.is_null() {
                for i in 0..(*list).length as usize {
                    let info = (*(*list).elements.add(i)).ptr_value as *mut pg_sys::IndexOptInfo;
                    let oid = (*info).indexoid.to_u32();
                    if m.inverted.iter().any(|iv| iv.oid == oid) {
                        // A stored GIN or hash index (am/index/inverted/): index scans,
                        // whose rows are rechecked; no bitmap, index-only or parallel
                        // scans. (The entry may have been made before the index was
                        // switched to the Pinax routine: the method's own flags.)
                        (*info).amhasgettuple = true;
                        (*info).amhasgetbitmap = false;
                        (*info).amcanparallel = false;
                        (*info).amcanmarkpos = false;
                        for c in 0..(*info).ncolumns as usize {
                            *(*info).canreturn.add(c) = false;
                        }
                        continue;
                    }
                    let im = m.pk.iter().chain(m.secondary.iter()).find(|x| x.oid == oid);
                    let ordered = im.is_some_and(|im| im.is_pk && !im.hashed && im.cols.iter().all(|c| c.ordered));
                    if !ordered {
                        (*info).sortopfamily = std::ptr::null_mut();
                    }
                    for c in 0..(*info).ncolumns as usize {
                        let att = *(*info).indexkeys.add(c) as i16;
                        *(*info).canreturn.add(c) = im.is_some_and(|im| index::scan::can_return(im, c, att));
                    }
                    (*info).amhasgetbitmap = false;
                    (*info).amcanparallel = false;
                    (*info).amcanmarkpos = false;
                    // Keeps get_actual_variable_range (selectivity) from running an
                    // index-only btree scan of it (it would also read sortopfamily).
                    (*info).hypothetical = true;
                }
            }
        }
        pg_sys::table_close(r, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
}
