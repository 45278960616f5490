//! get_relation_info_hook: planner facts for Pinax tables and their indexes.
//!
//! - parallel sequential scans (tablets shared out among the processes), no
//!   parallel index scans;
//! - GIN and hash indexes Pinax stores (`am/index/inverted/`) are index-scan
//!   capable (no bitmap scans); indexes of other access methods are left out
//!   (kept, not used: `am/index/other.rs`);
//! - Pinax indexes: index-only scans return the columns that decode exactly
//!   (`index::scan::can_return`); bitmap scans (`amgetbitmap`, not in
//!   parallel: `customscan::set_rel_pathlist`); no mark/restore; and no sort order unless the keys are stored in order (the
//!   primary key of a range-sharded table on ordered types): hash-sharded keys come
//!   back in hash order, so the planner must not rely on index order for them,
//!   except in the scans that give the hashed first column by equality (one hash
//!   prefix: the other columns are stored in order under it). Those keep the
//!   order PostgreSQL gives their paths, the others lose it once all paths are
//!   made ([`order_only_under_bound_hash`]): ORDER BY / LIMIT / min / max on
//!   `(a HASH, b ASC)`-style keys with `a = ...` read one ordered range, as
//!   YugabyteDB does.
//! - marks the indexes hypothetical for selectivity estimation, which otherwise
//!   reads a btree's first/last entries directly;
//! - switches the table's indexes to the Pinax routine for this transaction.

use crate::am::index;
use crate::error::OrRaise;
use crate::meta;
use crate::pg_list::list_ptrs;
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
                    if !im.is_some_and(|im| ordered(im) != Order::None) {
                        (*info).sortopfamily = std::ptr::null_mut();
                    }
                    for c in 0..(*info).ncolumns as usize {
                        let att = *(*info).indexkeys.add(c) as i16;
                        *(*info).canreturn.add(c) = im.is_some_and(|im| index::scan::can_return(im, c, att));
                    }
                    (*info).amhasgetbitmap = true;
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

/// Where index `im` stores its entries in the order of its columns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Order {
    None,
    /// Everywhere (the primary key of a range-sharded table, on ordered types).
    Whole,
    /// Under one hash prefix: in scans that give the first column by equality.
    UnderHash,
}

/// How index `im`'s entries are ordered (see [`Order`]).
fn ordered(im: &meta::IndexMeta) -> Order {
    if !im.cols.iter().all(|c| c.ordered) {
        Order::None
    } else if !im.hashed {
        if im.is_pk {
            Order::Whole
        } else {
            Order::None
        }
    } else {
        Order::UnderHash
    }
}

/// After PostgreSQL made base relation `rel`'s paths (`set_rel_pathlist_hook`,
/// customscan/mod.rs): an index path of a Pinax index ordered only under its hash
/// prefix ([`Order::UnderHash`]) keeps its sort order only if its conditions give
/// the index's first column by one equality (not `= ANY`, whose values hash
/// apart); the others lose it (their rows come back in hash order). The paths
/// stay: they are correct, only unordered.
///
/// # Safety
/// The arguments of `set_rel_pathlist_hook`, while planning.
pub unsafe fn order_only_under_bound_hash(rel: *mut pg_sys::RelOptInfo, rte: *mut pg_sys::RangeTblEntry) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
            return;
        }
        let paths: Vec<*mut pg_sys::IndexPath> = list_ptrs::<pg_sys::Path>((*rel).pathlist)
            .into_iter()
            .filter(|&p| matches!((*p).pathtype, pg_sys::NodeTag::T_IndexScan | pg_sys::NodeTag::T_IndexOnlyScan) && !(*p).pathkeys.is_null())
            .map(|p| p as *mut pg_sys::IndexPath)
            .collect();
        if paths.is_empty() {
            return;
        }
        let r = pg_sys::table_open((*rte).relid, pg_sys::NoLock as pg_sys::LOCKMODE);
        let m = meta::is_pinax_table(r).then(|| meta::table_meta(r).or_raise());
        pg_sys::table_close(r, pg_sys::NoLock as pg_sys::LOCKMODE);
        let Some(m) = m else { return };
        for p in paths {
            let info = (*p).indexinfo;
            let oid = (*info).indexoid.to_u32();
            let Some(im) = m.pk.iter().chain(m.secondary.iter()).find(|x| x.oid == oid) else { continue };
            if ordered(im) == Order::UnderHash && !first_column_by_equality(p) {
                (*p).path.pathkeys = std::ptr::null_mut();
            }
        }
    }
}

/// Whether index path `p`'s conditions give its index's first column by an
/// equality of the column's btree operator family (`col = value`, one value).
///
/// # Safety
/// `p` must be a valid index path of a btree index.
unsafe fn first_column_by_equality(p: *mut pg_sys::IndexPath) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let family = *(*(*p).indexinfo).opfamily;
        for ic in list_ptrs::<pg_sys::IndexClause>((*p).indexclauses) {
            if (*ic).indexcol != 0 {
                continue;
            }
            for ri in list_ptrs::<pg_sys::RestrictInfo>((*ic).indexquals) {
                let clause = (*ri).clause as *mut pg_sys::Node;
                if !clause.is_null() && (*clause).type_ == pg_sys::NodeTag::T_OpExpr {
                    let op = (*(clause as *mut pg_sys::OpExpr)).opno;
                    if pg_sys::get_op_opfamily_strategy(op, family) == pg_sys::BTEqualStrategyNumber as i32 {
                        return true;
                    }
                }
            }
        }
        false
    }
}
