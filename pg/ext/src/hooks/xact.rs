//! Transaction callbacks: PostgreSQL's transaction lifecycle drives the storage
//! transaction.
//!
//! - PRE_COMMIT (after deferred triggers; may still raise, which aborts cleanly):
//!   send buffered writes and commit the storage transaction (or the autocommit fast
//!   path). Held index entries are released.
//! - COMMIT / ABORT: forget transaction state (abort the storage transaction if
//!   open) and drop the storage of every relation file node PostgreSQL deletes
//!   (DROP, TRUNCATE, REINDEX, rewrites; on abort, what the transaction created),
//!   but not for the file deletions of a tablespace move (`tablespace.rs`: the
//!   relation keeps its file node). These never raise.
//! - Subtransactions (SAVEPOINT, exception blocks): START_SUB sends earlier writes
//!   and notes the first command id of the subtransaction; PRE_COMMIT_SUB sends its
//!   writes (errors are raised inside it); ABORT_SUB drops its buffered writes, rolls
//!   the storage transaction back to that command id (writes and row locks), and
//!   drops the storage of relations created in it.
//! - `pinax.*` table option changes (`table_options.rs`) go to the master at
//!   PRE_COMMIT, before the data; undone with an aborted (sub)transaction.

use crate::am::index;
use crate::error;
use crate::state;
use crate::violation;
use pgrx::pg_guard;
use pgrx::pg_sys;

/// Install the hook (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}

/// The relation file nodes PostgreSQL deletes as this transaction ends (`commit`:
/// dropped, truncated, reindexed and rewritten relations' old file nodes; abort: the
/// file nodes created in it). Backend-local relations are not included.
fn pending_file_nodes(commit: bool) -> Vec<pg_sys::RelFileNode> {
    let mut ptr: *mut pg_sys::RelFileNode = std::ptr::null_mut();
    // SAFETY: smgrGetPendingDeletes returns a palloc'd array of `n` file nodes (or
    // NULL when n == 0), copied out before it is freed.
    unsafe {
        let n = pg_sys::smgrGetPendingDeletes(commit, &mut ptr);
        if ptr.is_null() {
            return Vec::new();
        }
        let nodes = std::slice::from_raw_parts(ptr, n.max(0) as usize).to_vec();
        pg_sys::pfree(ptr.cast());
        nodes
    }
}

/// A relation's files copied to another tablespace under the same file node in
/// this transaction (`tablespace.rs`), at subtransaction nesting level `level`.
#[derive(Clone, Copy)]
struct Moved {
    from: pg_sys::RelFileNode,
    to: pg_sys::RelFileNode,
    level: i32,
}

thread_local! {
    /// This transaction's moves: the deletions PostgreSQL schedules for them (the old
    /// files at commit, the new ones on abort) are not the relation's drop.
    static MOVED: std::cell::RefCell<Vec<Moved>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Record that the files of file node `from` were copied to `to` (another
/// tablespace, same file node) in the current (sub)transaction.
pub fn record_move(from: pg_sys::RelFileNode, to: pg_sys::RelFileNode) {
    // SAFETY: reads the current transaction's nesting level.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    MOVED.with(|m| m.borrow_mut().push(Moved { from, to, level }));
}

/// Whether this transaction moved a relation's files away from file node `n`
/// (they are deleted only at commit).
pub fn moved_from(n: &pg_sys::RelFileNode) -> bool {
    MOVED.with(|m| m.borrow().iter().any(|mv| same_file(n, &mv.from)))
}

fn same_file(a: &pg_sys::RelFileNode, b: &pg_sys::RelFileNode) -> bool {
    a.spcNode == b.spcNode && a.dbNode == b.dbNode && a.relNode == b.relNode
}

/// Whether the deletion of file node `n` as the (sub)transaction ends (`commit`
/// or abort) only completes a move: the old files at commit, the new on abort.
fn completes_move(n: &pg_sys::RelFileNode, commit: bool) -> bool {
    MOVED.with(|m| m.borrow().iter().any(|mv| same_file(n, if commit { &mv.from } else { &mv.to })))
}

/// Storage named after every file node of `pending_file_nodes` in this database.
/// Which of them were Pinax tables or indexes is not known any more, so both names
/// are returned; dropping a storage table that does not exist is a no-op. Called at
/// COMMIT/ABORT (and subtransaction abort: the file nodes created in it), before
/// PostgreSQL performs those deletions.
fn deleted_file_nodes(commit: bool) -> Vec<String> {
    if crate::meta::pinax_am_oid_cached().is_none() {
        return Vec::new();
    }
    // SAFETY: reads a backend-global variable.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let nodes: Vec<u32> =
        pending_file_nodes(commit).into_iter().filter(|n| n.dbNode.to_u32() == db && !completes_move(n, commit)).map(|n| n.relNode.to_u32()).collect();
    if nodes.is_empty() {
        return Vec::new();
    }
    // Called at COMMIT/ABORT, where raising an error is not allowed.
    let Some(prefix) = crate::ddl::try_prefix() else {
        pgrx::warning!("pinax: could not reach the node to free the storage of {} dropped relation(s)", nodes.len());
        return Vec::new();
    };
    nodes.into_iter().flat_map(|n| crate::ddl::storage_names(&prefix, db, n)).collect()
}

fn drop_storage(names: Vec<String>) {
    if names.is_empty() {
        return;
    }
    let Ok(client) = state::with(|b| b.client()) else {
        pgrx::warning!("pinax: could not reach the node to free the storage of {} dropped relation(s)", names.len());
        return;
    };
    for n in names {
        if let Err(e) = client.drop_table(&n, true) {
            pgrx::warning!("pinax: could not free storage table {n}: {e}");
        }
    }
}

/// The transaction callback registered with `RegisterXactCallback`.
///
/// # Safety
/// Called only by PostgreSQL, as the callback registered with
/// `RegisterXactCallback`.
#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        use pg_sys::XactEvent::*;
        match event {
            XACT_EVENT_PRE_COMMIT | XACT_EVENT_PARALLEL_PRE_COMMIT => {
                index::release_held();
                // Look the access method up while catalog access is still allowed, for
                // `deleted_file_nodes` at COMMIT (only in a database, and only when there
                // is something to look at).
                if pg_sys::MyDatabaseId.to_u32() != 0 && crate::meta::pinax_am_oid_cached().is_none() && !pending_file_nodes(true).is_empty() {
                    crate::meta::pinax_am_oid();
                }
                // Before the data: a failure aborts the transaction with nothing
                // committed (once the data is, the transaction commits).
                super::table_options::at_commit();
                if let Err(e) = state::with(|b| b.pre_commit()) {
                    violation::raise(e);
                }
                // After the data: DDL is logged only if the rest can commit.
                crate::ddl::publish();
            }
            XACT_EVENT_PRE_PREPARE if state::with(|b| b.has_buffered() || b.writes > 0) => {
                error::not_supported("PREPARE TRANSACTION is not supported for transactions that wrote to Pinax tables");
            }
            XACT_EVENT_PRE_PREPARE if super::table_options::any_pending() => {
                error::not_supported("PREPARE TRANSACTION is not supported for transactions that change pinax.* table options");
            }
            XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE => {
                index::release_held();
                super::restart::end_of_xact();
                crate::update_deps::clear();
                crate::ddl::end_of_xact();
                crate::ddl_lock::end_of_xact();
                state::with(|b| b.end_of_xact());
                if event != XACT_EVENT_PREPARE {
                    drop_storage(deleted_file_nodes(true));
                    crate::sequence::commit();
                }
                MOVED.with(|m| m.borrow_mut().clear());
            }
            XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
                crate::limit::clear();
                index::forget_held();
                super::restart::end_of_xact();
                crate::update_deps::clear();
                crate::ddl::end_of_xact();
                crate::ddl_lock::end_of_xact();
                crate::am::index::build::defer_builds(false);
                super::table_options::at_abort();
                state::with(|b| b.end_of_xact());
                drop_storage(deleted_file_nodes(false));
                MOVED.with(|m| m.borrow_mut().clear());
                crate::sequence::abort();
            }
            _ => {}
        }
    }
}

/// The transaction callback registered with `RegisterSubXactCallback`.
///
/// # Safety
/// Called only by PostgreSQL, as the callback registered with
/// `RegisterSubXactCallback`.
#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    my_subid: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        use pg_sys::SubXactEvent::*;
        match event {
            SUBXACT_EVENT_START_SUB => {
                super::restart::subxact_started();
                let cid = pg_sys::GetCurrentCommandId(false);
                if let Err(e) = state::with(|b| b.start_subxact(my_subid, cid)) {
                    violation::raise(e);
                }
            }
            SUBXACT_EVENT_PRE_COMMIT_SUB => {
                // Errors of the subtransaction's writes are raised inside it (an
                // exception block catches them).
                if let Err(e) = state::with(|b| b.flush()) {
                    violation::raise(e);
                }
            }
            SUBXACT_EVENT_COMMIT_SUB => {
                // The subtransaction's moves are its parent's now.
                let level = pg_sys::GetCurrentTransactionNestLevel();
                MOVED.with(|m| m.borrow_mut().iter_mut().filter(|mv| mv.level >= level).for_each(|mv| mv.level = level - 1));
                super::table_options::subxact_committed(level);
                super::restart::subxact_committed();
                state::with(|b| b.commit_subxact(my_subid));
            }
            SUBXACT_EVENT_ABORT_SUB => {
                crate::limit::clear();
                super::restart::subxact_aborted();
                state::with(|b| b.abort_subxact(my_subid));
                crate::ddl::subxact_aborted(my_subid);
                crate::sequence::subxact_aborted(my_subid);
                crate::update_deps::subxact_aborted(my_subid);
                index::release_created_in(my_subid);
                drop_storage(deleted_file_nodes(false));
                // Undone with it: PostgreSQL forgets the old files' deletion too.
                let level = pg_sys::GetCurrentTransactionNestLevel();
                MOVED.with(|m| m.borrow_mut().retain(|mv| mv.level < level));
                super::table_options::subxact_aborted(level);
            }
            _ => {}
        }
    }
}
