//! LIMIT pushdown: a scan of a Pinax table or index right under a Limit node asks
//! storage for the rows the LIMIT needs (count + offset) in its first read.
//!
//! A scan cannot know how many rows its parent will pull, so its pages grow from
//! 16 rows fourfold (`scan::Pager`): YCSB E's `... ORDER BY key LIMIT n` (n up to
//! 100) took 2 round trips and 121 rows on average for 50 used. PostgreSQL 15 passes a
//! Limit's bound down with `ExecSetTupleBound`, to sorts and appends only. So the
//! ExecutorStart hook ([`adopt_nodes`]) points every Limit node whose child is a scan
//! of a Pinax relation (index scan, index-only scan, sequential scan, custom scan)
//! at [`exec_limit`], which calls PostgreSQL's own `ExecLimit` with the node noted in
//! [`HINT`] for that relation. By the time the child reads its first page, `ExecLimit`
//! has computed the bound (`recompute_limits`, before it pulls a row); the pager
//! takes it as its first page size ([`first_page`]), then grows as before. Only page
//! sizes change: a filter that rejects rows, WITH TIES or a wrong guess cost more
//! reads, never other answers.
//!
//! The hint holds a raw pointer to the Limit node, read only while that node's
//! `ExecLimit` runs: it is put back when the call returns, and cleared when an
//! executor starts and when a (sub)transaction aborts (an error jumps over the
//! restore). `pinax.enable_limit_pushdown = off` turns it off; `pinax.trace_scans`
//! shows each read's size.

use crate::am::index;
use crate::guc;
use crate::meta;
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::cell::Cell;
use std::sync::OnceLock;

thread_local! {
    /// The Limit node running now over a scan of relation `.0` (an index's or a
    /// table's OID), if any.
    static HINT: Cell<(u32, *mut pg_sys::LimitState)> = const { Cell::new((0, std::ptr::null_mut())) };
}

/// PostgreSQL's `ExecLimit` (static in nodeLimit.c), taken from the first Limit node
/// adopted: every Limit node runs the same function.
static EXEC_LIMIT: OnceLock<usize> = OnceLock::new();

/// Forget the hint (an executor starts, a transaction or subtransaction aborts).
pub fn clear() {
    HINT.with(|h| h.set((0, std::ptr::null_mut())));
}

/// The first page size for a scan of relation `relid` starting now: the rows the
/// Limit node above it needs, if one is running and has computed its bound.
pub fn first_page(relid: u32) -> Option<usize> {
    let (rel, node) = HINT.with(|h| h.get());
    if rel != relid || node.is_null() {
        return None;
    }
    // SAFETY: the node is the Limit whose ExecLimit is running (see the module docs).
    unsafe {
        let l = &*node;
        if l.lstate == pg_sys::LimitStateCond::LIMIT_INITIAL || l.noCount || l.count < 0 || l.offset < 0 {
            return None;
        }
        Some(l.count.saturating_add(l.offset).clamp(1, i64::from(u32::MAX)) as usize)
    }
}

/// The relation `child` scans, if it is a scan node, and whether that is an index
/// (index and index-only scans) rather than a table.
///
/// # Safety
/// `child` must be a valid `PlanState`.
unsafe fn scanned_relation(child: *mut pg_sys::PlanState) -> Option<(pg_sys::Relation, bool)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if child.is_null() {
            return None;
        }
        let (rel, index) = match (*child).type_ {
            pg_sys::NodeTag::T_IndexScanState => ((*(child as *mut pg_sys::IndexScanState)).iss_RelationDesc, true),
            pg_sys::NodeTag::T_IndexOnlyScanState => ((*(child as *mut pg_sys::IndexOnlyScanState)).ioss_RelationDesc, true),
            pg_sys::NodeTag::T_SeqScanState | pg_sys::NodeTag::T_CustomScanState => ((*(child as *mut pg_sys::ScanState)).ss_currentRelation, false),
            _ => return None,
        };
        (!rel.is_null()).then_some((rel, index))
    }
}

/// Whether `child` scans a Pinax table or index.
///
/// # Safety
/// `child` must be a valid `PlanState`.
unsafe fn scans_pinax_relation(child: *mut pg_sys::PlanState) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { scanned_relation(child).is_some_and(|(rel, index)| if index { index::is_pinax_index(rel) } else { meta::is_pinax_table(rel) }) }
}

/// Point the Limit nodes over scans of Pinax relations in `planstate`'s tree at
/// [`exec_limit`].
///
/// # Safety
/// `planstate` must be an initialized plan state tree (after `standard_ExecutorStart`).
pub unsafe fn adopt_nodes(planstate: *mut pg_sys::PlanState) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        clear();
        if !planstate.is_null() && guc::enable_limit_pushdown() {
            walker(planstate, std::ptr::null_mut());
        }
    }
}

/// The walk of `adopt_nodes` over the plan state tree (`planstate_tree_walker`).
///
/// # Safety
/// Called by PostgreSQL's `planstate_tree_walker`, or by `adopt_nodes`, with a
/// node of an initialized plan state tree and the walker's `ctx`.
#[pg_guard]
unsafe extern "C-unwind" fn walker(ps: *mut pg_sys::PlanState, ctx: *mut std::ffi::c_void) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if (*ps).type_ == pg_sys::NodeTag::T_LimitState && scans_pinax_relation((*ps).lefttree) {
            if let Some(real) = (*ps).ExecProcNodeReal {
                let real = real as usize;
                // Another extension's node function is left alone.
                if *EXEC_LIMIT.get_or_init(|| real) == real {
                    pg_sys::ExecSetExecProcNode(ps, Some(exec_limit));
                }
            }
        }
        pg_sys::planstate_tree_walker(ps, Some(walker), ctx)
    }
}

/// `ExecLimit` with this node noted for the scan below it.
///
/// # Safety
/// Called only by PostgreSQL, as the `ExecProcNode` of the plan node it was set
/// on (`ExecSetExecProcNode`), with that node's state.
#[pg_guard]
unsafe extern "C-unwind" fn exec_limit(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let Some(&real) = EXEC_LIMIT.get() else { unreachable!("a Limit node is adopted only once ExecLimit is known") };
        // SAFETY: the pointer was ExecLimit's, an `ExecProcNodeMtd`.
        let real: unsafe extern "C-unwind" fn(*mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot = std::mem::transmute(real);
        // The child was found to scan a Pinax relation when the node was adopted.
        let relid = scanned_relation((*ps).lefttree).map_or(0, |(rel, _)| (*rel).rd_id.to_u32());
        let _restore = Restore(HINT.with(|h| h.replace((relid, ps as *mut pg_sys::LimitState))));
        pg_sys::ffi::pg_guard_ffi_boundary(|| real(ps))
    }
}

/// Puts the hint back as it was when dropped (also when an error unwinds).
struct Restore((u32, *mut pg_sys::LimitState));

impl Drop for Restore {
    fn drop(&mut self) {
        HINT.with(|h| h.set(self.0));
    }
}
