//! READ COMMITTED statement restarts (ExecutorRun/ExecutorFinish hooks).
//!
//! Under READ COMMITTED PostgreSQL never reports a concurrent update as an error: an
//! UPDATE, DELETE or row lock that meets a row changed by a transaction that
//! committed after the statement's snapshot re-reads the newest version and
//! re-checks the WHERE clause (EvalPlanQual). Pinax buffers writes and learns of the
//! conflict when storage refuses them, too late for row-by-row re-checks, so it does
//! what YugabyteDB does: the whole statement is run again at a new read time, as if
//! it had started after the transaction it conflicted with. Nothing is lost: the
//! statement has not returned anything yet.
//!
//! How: a top-level statement that may conflict (UPDATE, DELETE, MERGE, INSERT ... ON
//! CONFLICT, SELECT ... FOR UPDATE/SHARE, writable CTEs) on a Pinax table runs in an
//! internal subtransaction, in a fresh executor (its own `QueryDesc` over the same
//! plan), with its output collected in a tuplestore. When it has ended, still inside
//! the subtransaction, its writes are sent (`Backend::finish_statement`): with the
//! autocommit fast path (one RPC, committed at once) when the statement is its whole
//! transaction, else to the storage transaction. A write conflict (storage's
//! SerializationFailure, there or raised while the statement ran) rolls the
//! subtransaction back (its writes and locks, in storage too), takes a new read time
//! and runs the statement again; any other error is re-thrown unchanged, with its
//! context. On success the output is replayed to the real destination and the
//! row count handed to the original executor, which the portal then finishes and
//! ends without running anything.
//!
//! A plain SELECT (no row locks, no data-modifying WITH) is restarted the same way
//! after a read restart it could not take in place (it met a value in its
//! clock-uncertainty window after it had read rows): it runs again from that
//! value's time, in the same window ([`state::Backend::restart_statement`]). Its
//! output is held back ([`HeldOutput`], up to `pinax.output_buffer_size`, as
//! YugabyteDB's `ysql_output_buffer_size`) and sent once it exceeds that or the
//! statement ends; once rows went out, the 40001 stands. Under REPEATABLE READ and
//! SERIALIZABLE too while the transaction's read time is unused. Only when the node
//! says its reads use an uncertainty window (a lone node's never do), and not for a
//! lookup of one primary key (its single read restarts in place).
//!
//! Statements of DO blocks and procedures (CALL) are restarted one by one. Not
//! restarted: REPEATABLE READ and SERIALIZABLE (40001 is their answer), statements
//! inside functions called by another statement (the top-level statement restarts
//! as a whole, if it is one that is restarted), cursors and partial fetches, EXPLAIN
//! ANALYZE, and INSERT into a table without triggers
//! (its only conflict is a uniqueness race, which waits and then reports 23505 as
//! PostgreSQL does); an INSERT whose triggers read (a foreign-key check locks the
//! parent row) is restarted.

use crate::guc;
use crate::meta;
use crate::state;
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::sync::OnceLock;

static PREV_RUN: OnceLock<pg_sys::ExecutorRun_hook_type> = OnceLock::new();
static PREV_FINISH: OnceLock<pg_sys::ExecutorFinish_hook_type> = OnceLock::new();

thread_local! {
    /// ExecutorRun nesting (statements run by functions and triggers are deeper).
    static RUN_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// RUN_DEPTH when each open subtransaction started: an error jumps over the
    /// decrements of the runs it ends, so aborting a subtransaction restores it.
    static SUBXACT_DEPTHS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    /// DO blocks and procedures running (their statements are never a whole
    /// transaction).
    static IN_STATEMENTS: Cell<u32> = const { Cell::new(0) };
    /// The copy a restarting run is executing: its writes are sent by the wrapper
    /// (`Backend::finish_statement`), not when it ends.
    static COPY: Cell<usize> = const { Cell::new(0) };
    /// Executors whose statement ran in a restarting copy: nothing is left for
    /// their own ExecutorFinish to run.
    static RAN_ELSEWHERE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

// PostgreSQL functions called without pgrx's error boundary: inside `try_keep_error`
// an error must reach our own sigsetjmp with its ErrorData intact, and inside
// `pg_guard_ffi_boundary` only raw calls may be made (a boundary inside a boundary
// would unwind a Rust panic through C and abort).
unsafe extern "C-unwind" {
    #[link_name = "standard_ExecutorRun"]
    fn raw_standard_executor_run(qd: *mut pg_sys::QueryDesc, direction: pg_sys::ScanDirection::Type, count: u64, execute_once: bool);
    #[link_name = "standard_ExecutorFinish"]
    fn raw_standard_executor_finish(qd: *mut pg_sys::QueryDesc);
    #[link_name = "tuplestore_gettupleslot"]
    fn raw_tuplestore_gettupleslot(store: *mut pg_sys::Tuplestorestate, forward: bool, copy: bool, slot: *mut pg_sys::TupleTableSlot) -> bool;
    #[link_name = "ExecutorStart"]
    fn raw_executor_start(qd: *mut pg_sys::QueryDesc, eflags: c_int);
    #[link_name = "ExecutorRun"]
    fn raw_executor_run(qd: *mut pg_sys::QueryDesc, direction: pg_sys::ScanDirection::Type, count: u64, execute_once: bool);
    #[link_name = "ExecutorFinish"]
    fn raw_executor_finish(qd: *mut pg_sys::QueryDesc);
    #[link_name = "ExecutorEnd"]
    fn raw_executor_end(qd: *mut pg_sys::QueryDesc);
    #[link_name = "FreeQueryDesc"]
    fn raw_free_query_desc(qd: *mut pg_sys::QueryDesc);
    #[link_name = "palloc"]
    fn raw_palloc(size: usize) -> *mut std::ffi::c_void;
    #[link_name = "repalloc"]
    fn raw_repalloc(pointer: *mut std::ffi::c_void, size: usize) -> *mut std::ffi::c_void;
    #[link_name = "MakeSingleTupleTableSlot"]
    fn raw_make_single_tuple_table_slot(desc: pg_sys::TupleDesc, ops: *const pg_sys::TupleTableSlotOps) -> *mut pg_sys::TupleTableSlot;
    #[link_name = "ExecStoreMinimalTuple"]
    fn raw_exec_store_minimal_tuple(tuple: pg_sys::MinimalTuple, slot: *mut pg_sys::TupleTableSlot, should_free: bool) -> *mut pg_sys::TupleTableSlot;
    #[link_name = "ExecDropSingleTupleTableSlot"]
    fn raw_exec_drop_single_tuple_table_slot(slot: *mut pg_sys::TupleTableSlot);
    fn SetTuplestoreDestReceiverParams(
        dest: *mut pg_sys::DestReceiver,
        store: *mut pg_sys::Tuplestorestate,
        cxt: pg_sys::MemoryContext,
        detoast: bool,
        target: pg_sys::TupleDesc,
        map_failure_msg: *const std::ffi::c_char,
    );
}

/// Install the hooks (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let _ = PREV_RUN.set(pg_sys::ExecutorRun_hook);
        pg_sys::ExecutorRun_hook = Some(executor_run);
        let _ = PREV_FINISH.set(pg_sys::ExecutorFinish_hook);
        pg_sys::ExecutorFinish_hook = Some(executor_finish);
    }
}

/// Forget per-transaction state (at transaction end).
pub fn end_of_xact() {
    RAN_ELSEWHERE.with(|r| r.borrow_mut().clear());
    // (IN_STATEMENTS is not reset: a procedure's COMMIT ends a transaction while
    // the procedure goes on; its guard undoes the count, errors included.)
    SUBXACT_DEPTHS.with(|s| s.borrow_mut().clear());
    set_depth(0);
}

fn depth() -> u32 {
    RUN_DEPTH.with(|d| d.get())
}

/// Whether the statement starting now is a top-level one: not run by a function,
/// a trigger, a DO block or a procedure (inside a transaction block or not).
pub fn top_level() -> bool {
    depth() == 0 && IN_STATEMENTS.with(|c| c.get()) == 0
}

fn set_depth(v: u32) {
    RUN_DEPTH.with(|d| d.set(v));
}

/// Held while a utility command runs. Statements it runs (FETCH from a cursor,
/// EXPLAIN ANALYZE, CREATE TABLE AS) are not top-level, so never restarted
/// ([`Nested::enter`]); those of DO blocks and procedures are
/// ([`Nested::enter_statements`]).
pub struct Nested(u32, bool);

impl Nested {
    pub fn enter() -> Nested {
        let d = depth();
        set_depth(d + 1);
        Nested(d, false)
    }

    /// A DO block or procedure: its statements are restarted one by one, but none
    /// of them is its whole transaction (see `whole_transaction`).
    pub fn enter_statements() -> Nested {
        IN_STATEMENTS.with(|c| c.set(c.get() + 1));
        Nested(depth(), true)
    }
}

impl Drop for Nested {
    fn drop(&mut self) {
        set_depth(self.0);
        if self.1 {
            IN_STATEMENTS.with(|c| c.set(c.get().saturating_sub(1)));
        }
    }
}

/// A subtransaction starts (subxact callback).
pub fn subxact_started() {
    SUBXACT_DEPTHS.with(|s| s.borrow_mut().push(depth()));
}

/// A subtransaction commits.
pub fn subxact_committed() {
    SUBXACT_DEPTHS.with(|s| s.borrow_mut().pop());
}

/// A subtransaction aborts: runs inside it were ended by the error.
pub fn subxact_aborted() {
    if let Some(d) = SUBXACT_DEPTHS.with(|s| s.borrow_mut().pop()) {
        set_depth(d);
    }
}

// Errors are not caught here: they jump over these frames (which own nothing to
// drop) with their ErrorData intact; the depth is repaired at (sub)transaction abort.
/// The `ExecutorRun_hook`.
///
/// # Safety
/// Called only by PostgreSQL, as `ExecutorRun_hook`, with the arguments that
/// hook gets.
#[pg_guard]
unsafe extern "C-unwind" fn executor_run(qd: *mut pg_sys::QueryDesc, direction: pg_sys::ScanDirection::Type, count: u64, execute_once: bool) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let d = depth();
        if d == 0 && restartable(qd, count, execute_once) {
            set_depth(1);
            run_restarting(qd, direction);
            set_depth(0);
            return;
        }
        set_depth(d + 1);
        match PREV_RUN.get().copied().flatten() {
            Some(prev) => prev(qd, direction, count, execute_once),
            None => raw_standard_executor_run(qd, direction, count, execute_once),
        }
        set_depth(d);
    }
}

/// The `ExecutorFinish_hook`.
///
/// # Safety
/// Called only by PostgreSQL, as `ExecutorFinish_hook`, with the arguments that
/// hook gets.
#[pg_guard]
unsafe extern "C-unwind" fn executor_finish(qd: *mut pg_sys::QueryDesc) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let key = qd as usize;
        if RAN_ELSEWHERE.with(|r| r.borrow().contains(&key)) && !(*qd).estate.is_null() {
            // The writable CTEs ran in the copy: do not run them to completion here.
            (*(*qd).estate).es_auxmodifytables = std::ptr::null_mut();
        }
        match PREV_FINISH.get().copied().flatten() {
            Some(prev) => prev(qd),
            None => raw_standard_executor_finish(qd),
        }
    }
}

/// Whether `qd` is the executor of a restartable statement, whose writes the
/// wrapper sends (ExecutorEnd must not).
pub fn is_copy(qd: *mut pg_sys::QueryDesc) -> bool {
    COPY.with(|c| c.get()) == qd as usize
}

/// Called from ExecutorEnd: the executor is gone.
pub fn forget(qd: *mut pg_sys::QueryDesc) {
    let key = qd as usize;
    RAN_ELSEWHERE.with(|r| r.borrow_mut().retain(|k| *k != key));
}

/// Whether this top-level run may meet a write conflict and can be run again.
///
/// # Safety
/// `qd` must be a valid `QueryDesc`. Calls into PostgreSQL: only in a backend,
/// where its errors can be raised.
unsafe fn restartable(qd: *mut pg_sys::QueryDesc, count: u64, execute_once: bool) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        use pg_sys::CmdType::*;
        if count != 0 || guc::statement_restarts() == 0 || !(execute_once || fetched_once(qd)) {
            return false;
        }
        if pg_sys::ParallelWorkerNumber >= 0 {
            // A parallel worker runs part of its leader's statement, which restarts
            // as a whole (a worker cannot start a subtransaction).
            return false;
        }
        if (*qd).instrument_options != 0 || !(*qd).totaltime.is_null() || (*qd).estate.is_null() {
            return false;
        }
        let ps = (*qd).plannedstmt;
        if plain_select(ps) {
            // Its only conflict is a read restart it could not take in place (none on
            // a lone node: no uncertainty windows there); under REPEATABLE READ and
            // SERIALIZABLE only while the transaction's read time is still free to
            // move (nothing read or written at it yet).
            return guc::output_buffer_size() > 0
                && (state::with(|b| b.reads_uncertain()) || guc::hold_selects_always())
                && !primary_key_lookup(ps)
                && (pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as i32 || state::with(|b| b.read_time_unused()))
                && any_relation(ps, pg_sys::AccessShareLock, |rel| meta::is_pinax_table(rel));
        }
        if pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 {
            return false;
        }
        if crate::customscan::write_by_key::writes_by_key((*qd).planstate) {
            // One storage write that waits for blockers and re-reads on its own.
            return false;
        }
        match (*ps).commandType {
            CMD_UPDATE | CMD_DELETE | CMD_MERGE => pinax_relation(ps, false),
            // A plain INSERT only races on uniqueness (it waits, then reports 23505),
            // unless triggers read: a foreign-key check locks the parent row.
            CMD_INSERT if insert_on_conflict(ps) || (*ps).hasModifyingCTE => pinax_relation(ps, false),
            CMD_INSERT => pinax_relation(ps, true),
            CMD_SELECT if !(*ps).rowMarks.is_null() || (*ps).hasModifyingCTE => pinax_relation(ps, false),
            _ => false,
        }
    }
}

/// A SELECT that neither locks rows nor writes (through a data-modifying WITH): its
/// output can be held back and the whole statement run again.
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`.
unsafe fn plain_select(ps: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { (*ps).commandType == pg_sys::CmdType::CMD_SELECT && (*ps).rowMarks.is_null() && !(*ps).hasModifyingCTE }
}

/// Whether the statement is one primary-key lookup and nothing else: an index scan
/// of a Pinax table's primary key with one equality per key column, no subplans,
/// and only immutable functions (none that could read another table at the same
/// read time). Its single read restarts in place (nothing was read before it), so
/// it needs no re-run and skips the wrapper's cost (a subtransaction, a second
/// executor start, a copy of its row).
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn primary_key_lookup(ps: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        use pg_sys::NodeTag::{T_IndexOnlyScan, T_IndexScan};
        let plan = (*ps).planTree;
        if plan.is_null() || !(*ps).subplans.is_null() && (*(*ps).subplans).length > 0 || !(*plan).initPlan.is_null() {
            return false;
        }
        let (indexid, quals) = match (*plan).type_ {
            T_IndexScan => {
                let ix = plan as *mut pg_sys::IndexScan;
                ((*ix).indexid, (*ix).indexqual)
            }
            T_IndexOnlyScan => {
                let ix = plan as *mut pg_sys::IndexOnlyScan;
                ((*ix).indexid, (*ix).indexqual)
            }
            _ => return false,
        };
        if quals.is_null()
            || pg_sys::contain_mutable_functions((*plan).targetlist as *mut pg_sys::Node)
            || pg_sys::contain_mutable_functions((*plan).qual as *mut pg_sys::Node)
        {
            return false;
        }
        let index = pg_sys::RelationIdGetRelation(indexid);
        if index.is_null() {
            return false;
        }
        let form = (*index).rd_index;
        let point = !form.is_null() && (*form).indisprimary && {
            let heap = pg_sys::RelationIdGetRelation((*form).indrelid);
            let pinax = !heap.is_null() && meta::is_pinax_table(heap);
            if !heap.is_null() {
                pg_sys::RelationClose(heap);
            }
            pinax
        };
        // Each key column exactly once, by an equality operator of its family.
        let point = point && crate::customscan::write_by_key::plan::primary_key_equalities(quals, index).is_some();
        pg_sys::RelationClose(index);
        point
    }
}

/// Whether `qd` is the query of the active portal, run to completion by its first
/// fetch (PostgreSQL 15 runs SELECTs with `execute_once` false even then): such a
/// portal is at its end afterwards and runs no more. (A DECLAREd cursor is fetched
/// from inside a utility command, see [`Nested`].)
///
/// # Safety
/// `qd` must be a valid `QueryDesc`.
unsafe fn fetched_once(qd: *mut pg_sys::QueryDesc) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let p = pg_sys::ActivePortal;
        !p.is_null() && (*p).queryDesc == qd && (*p).atStart && (*p).cursorOptions & (pg_sys::CURSOR_OPT_SCROLL | pg_sys::CURSOR_OPT_HOLD) as i32 == 0
    }
}

/// Whether `ps` is an INSERT ... ON CONFLICT.
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`.
unsafe fn insert_on_conflict(ps: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let plan = (*ps).planTree;
        if plan.is_null() || (*plan).type_ != pg_sys::NodeTag::T_ModifyTable {
            return false;
        }
        (*(plan as *mut pg_sys::ModifyTable)).onConflictAction != pg_sys::OnConflictAction::ONCONFLICT_NONE
    }
}

/// Whether any relation of the statement locked at least `lockmode` (ROW SHARE:
/// locked rows; ROW EXCLUSIVE: written) satisfies `test`.
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn any_relation(ps: *mut pg_sys::PlannedStmt, lockmode: u32, test: impl Fn(pg_sys::Relation) -> bool) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let rtable = (*ps).rtable;
        if rtable.is_null() {
            return false;
        }
        for i in 0..(*rtable).length as usize {
            let rte = (*(*rtable).elements.add(i)).ptr_value as *mut pg_sys::RangeTblEntry;
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION || (*rte).rellockmode < lockmode as i32 {
                continue;
            }
            let rel = pg_sys::RelationIdGetRelation((*rte).relid);
            if rel.is_null() {
                continue;
            }
            let found = test(rel);
            pg_sys::RelationClose(rel);
            if found {
                return true;
            }
        }
        false
    }
}

/// Whether a relation the statement writes or locks is a Pinax table
/// (`with_triggers`: one that has triggers).
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`.
unsafe fn pinax_relation(ps: *mut pg_sys::PlannedStmt, with_triggers: bool) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { any_relation(ps, pg_sys::RowShareLock, |rel| meta::is_pinax_table(rel) && (!with_triggers || (*(*rel).rd_rel).relhastriggers)) }
}

/// How an attempt failed: an error raised while it ran, or its writes refused.
enum Failure {
    Error(*mut pg_sys::ErrorData),
    Flush(state::FlushError),
}

unsafe extern "C-unwind" {
    fn pq_buffer_has_data() -> bool;
    fn pq_peekbyte() -> c_int;
    fn pq_startmsgread();
    fn pq_endmsgread();
}

/// Whether the next protocol message, already received, is Sync. Never waits for
/// the client. (pq_peekbyte expects to be inside a message read, as the main loop
/// is when it reads one; between messages nothing else is.)
///
/// # Safety
/// Only in a backend's main loop, between protocol messages (calls libpq's
/// message-reading functions).
unsafe fn sync_is_next() -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !pq_buffer_has_data() {
            return false;
        }
        pq_startmsgread();
        let next = pq_peekbyte();
        pq_endmsgread();
        next == b'S' as c_int
    }
}

/// Whether the restartable statement that just ran (inside its subtransaction) is
/// its whole transaction, so that its writes may be committed at once by the
/// autocommit fast path: not a statement of a DO block or procedure, no transaction
/// block (the caller checks, outside the
/// subtransaction, which is a block of its own), nothing written before it (no
/// PostgreSQL WAL either: no heap writes), no deferrable trigger on a
/// table it writes, and nothing can run before the commit: a simple-protocol
/// query (one statement, committed when it ends; several make an implicit block),
/// or an extended-protocol Execute whose Sync is already waiting in the input
/// buffer (libpq sends Bind/Execute/Sync together). A pipeline that sends more
/// before its Sync gets the storage transaction instead, so that a later failure
/// still rolls this statement back.
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`.
unsafe fn whole_transaction(ps: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { whole_transaction_at(ps, 2) }
}

/// Whether the top-level statement of `ps`, starting now (no subtransaction of
/// ours around it), is its whole transaction, as for [`whole_transaction`]: an
/// autocommit statement, not in a transaction block, a DO block, a procedure or a
/// function. (`customscan::write_by_key` writes such a statement's row at once.)
///
/// # Safety
/// `ps` must be the running statement's plan; call from its executor.
pub unsafe fn top_level_whole_transaction(ps: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { depth() == 0 && !pg_sys::IsTransactionBlock() && whole_transaction_at(ps, 1) }
}

/// Whether `ps`, run at transaction nesting level `nest_level`, is its whole
/// transaction (see `whole_transaction`).
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn whole_transaction_at(ps: *mut pg_sys::PlannedStmt, nest_level: i32) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if pg_sys::GetCurrentTransactionNestLevel() != nest_level || IN_STATEMENTS.with(|c| c.get()) > 0 {
            return false;
        }
        if pg_sys::XactLastRecEnd != 0 {
            // It wrote PostgreSQL WAL (heap tables, through a trigger): let PostgreSQL's
            // commit and the storage transaction's go together. (A transaction id alone
            // is fine: INSERT ... ON CONFLICT takes one for its speculative insertion.)
            return false;
        }
        let p = pg_sys::ActivePortal;
        if p.is_null() {
            return false;
        }
        // exec_simple_query hides its portals; Bind's are visible (pg_cursors).
        let simple = !(*p).visible;
        (simple || sync_is_next()) && !deferrable_triggers(ps)
    }
}

/// Whether a table the statement writes has a deferrable trigger (a DEFERRABLE
/// constraint's check may run at commit, after an early write).
///
/// # Safety
/// `ps` must be a valid `PlannedStmt`.
unsafe fn deferrable_triggers(ps: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        any_relation(ps, pg_sys::RowExclusiveLock, |rel| {
            let td = (*rel).trigdesc;
            !td.is_null() && (0..(*td).numtriggers as usize).any(|t| (*(*td).triggers.add(t)).tgdeferrable)
        })
    }
}

/// Run the statement of `qd` in a restartable copy (see the module header).
///
/// # Safety
/// `qd` must be a valid `QueryDesc`. Calls into PostgreSQL: only in a backend,
/// where its errors can be raised.
unsafe fn run_restarting(qd: *mut pg_sys::QueryDesc, direction: pg_sys::ScanDirection::Type) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let ps = (*qd).plannedstmt;
        // A plain SELECT holds its output back only up to pinax.output_buffer_size
        // (then sends it, and can no longer run again); statements that write collect
        // all of it (sending any before their writes are accepted would be wrong).
        let held = plain_select(ps);
        let send = !held && ((*ps).commandType == pg_sys::CmdType::CMD_SELECT || (*ps).hasReturning);
        if held && pg_sys::message_level_is_interesting(pg_sys::DEBUG2 as i32) {
            pgrx::debug2!("pinax: the SELECT's rows are held back, so that it can run again after a read restart");
        }
        let eflags = (*(*qd).estate).es_top_eflags;
        let outer = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        let max = guc::statement_restarts();
        let mut restarts = 0;
        let in_block = pg_sys::IsTransactionBlock();
        loop {
            // Everything of one attempt lives in its own context (the tuplestore too:
            // a file it spilled to belongs to the subtransaction and is closed when that
            // aborts).
            let cxt = pg_sys::AllocSetContextCreateInternal(outer, c"pinax statement attempt".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
            pg_sys::BeginInternalSubTransaction(std::ptr::null());
            pg_sys::MemoryContextSwitchTo(cxt);
            let store = if send { pg_sys::tuplestore_begin_heap(false, false, pg_sys::work_mem) } else { std::ptr::null_mut() };
            let holder = if held { HeldOutput::create(cxt, qd) } else { std::ptr::null_mut() };
            let dest = if send {
                let d = pg_sys::CreateDestReceiver(pg_sys::CommandDest::DestTuplestore);
                SetTuplestoreDestReceiverParams(d, store, cxt, false, std::ptr::null_mut(), std::ptr::null());
                d
            } else if held {
                holder as *mut pg_sys::DestReceiver
            } else {
                (*qd).dest
            };
            let copy = pg_sys::CreateQueryDesc(ps, (*qd).sourceText, (*qd).snapshot, (*qd).crosscheck_snapshot, dest, (*qd).params, (*qd).queryEnv, 0);
            crate::error::clear_restartable();
            COPY.with(|c| c.set(copy as usize));
            let mut processed: u64 = 0;
            let processed_ptr: *mut u64 = &mut processed;
            let res = crate::pgtry::try_keep_error(outer, || {
                raw_executor_start(copy, eflags);
                raw_executor_run(copy, direction, 0, true);
                *processed_ptr = (*(*copy).estate).es_processed;
                raw_executor_finish(copy);
                raw_executor_end(copy);
                // Unregisters its snapshots (on an error, the subtransaction's abort does).
                raw_free_query_desc(copy);
            });
            COPY.with(|c| c.set(0));
            // The statement's writes, sent while it can still run again.
            let res = match res {
                Ok(()) => {
                    // Waiting for another transaction may end in an error raised right
                    // here (lock_timeout, cancel): the internal subtransaction must be
                    // gone before it reaches PostgreSQL, which would otherwise take it
                    // for a user's savepoint and leave the transaction aborted.
                    let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let whole = !in_block && whole_transaction(ps);
                        state::with(|b| b.finish_statement(whole))
                    }));
                    match sent {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err(Failure::Flush(e)),
                        Err(raised) => {
                            abort_attempt(outer, owner, cxt);
                            set_depth(0);
                            std::panic::resume_unwind(raised);
                        }
                    }
                }
                Err(edata) => Err(Failure::Error(edata)),
            };
            match res {
                Ok(()) => {
                    pg_sys::ReleaseCurrentSubTransaction();
                    pg_sys::MemoryContextSwitchTo(outer);
                    pg_sys::CurrentResourceOwner = owner;
                    if send {
                        replay(store, qd);
                        pg_sys::tuplestore_end(store);
                    }
                    if held {
                        HeldOutput::finish(holder);
                    }
                    pg_sys::MemoryContextDelete(cxt);
                    (*(*qd).estate).es_processed = processed;
                    RAN_ELSEWHERE.with(|r| r.borrow_mut().push(qd as usize));
                    return;
                }
                Err(failure) => {
                    // Rows already sent: the client would see them twice.
                    let sent_rows = held && (*holder).sent;
                    abort_attempt(outer, owner, cxt);
                    let conflict = !sent_rows
                        && match &failure {
                            Failure::Error(edata) => {
                                (**edata).sqlerrcode == crate::error::sqlstate_code("40001") as i32 && crate::error::was_restartable(*edata)
                            }
                            Failure::Flush(e) => crate::error::restartable(e.error.code()),
                        };
                    if conflict && restarts < max {
                        restarts += 1;
                        if let Failure::Error(edata) = failure {
                            pg_sys::FreeErrorData(edata);
                        }
                        pgrx::debug1!("pinax: write conflict or read restart; running the statement again (restart {restarts})");
                        state::with(|b| b.restart_statement());
                        pg_sys::check_for_interrupts!();
                        continue;
                    }
                    set_depth(0);
                    match failure {
                        // Straight to the next handler up, ErrorData intact (pgrx's
                        // boundary would keep only some fields).
                        Failure::Error(edata) => crate::pgtry::rethrow(edata),
                        Failure::Flush(e) => crate::violation::raise(e),
                    }
                }
            }
        }
    }
}

/// The destination of a plain SELECT's attempt: holds rows back (copies in the
/// attempt's memory context) until they exceed `pinax.output_buffer_size`, then
/// sends them and every later row to the statement's real destination. Until then
/// the attempt can be thrown away unseen.
#[repr(C)]
struct HeldOutput {
    /// First, so that a pointer to it is a `DestReceiver` pointer.
    base: pg_sys::DestReceiver,
    real: *mut pg_sys::DestReceiver,
    /// The statement's result shape (the original executor's: it outlives the
    /// attempt's).
    tupdesc: pg_sys::TupleDesc,
    operation: c_int,
    cxt: pg_sys::MemoryContext,
    rows: *mut pg_sys::MinimalTuple,
    len: usize,
    cap: usize,
    bytes: usize,
    limit: usize,
    /// The real destination was started (rows went, or may have gone, out).
    sent: bool,
}

impl HeldOutput {
    /// A receiver for `qd`'s statement, allocated in `cxt` (gone with it).
    ///
    /// # Safety
    /// `cxt` must be a valid memory context, and `qd` a valid `QueryDesc`.
    /// Calls into PostgreSQL: only in a backend, where its errors can be
    /// raised.
    unsafe fn create(cxt: pg_sys::MemoryContext, qd: *mut pg_sys::QueryDesc) -> *mut HeldOutput {
        // SAFETY: the caller upholds this function's contract (# Safety).
        unsafe {
            let h = pg_sys::MemoryContextAllocZero(cxt, std::mem::size_of::<HeldOutput>()) as *mut HeldOutput;
            (*h).base.receiveSlot = Some(held_receive);
            (*h).base.rStartup = Some(held_startup);
            (*h).base.rShutdown = Some(held_shutdown);
            (*h).base.rDestroy = Some(held_shutdown);
            (*h).base.mydest = pg_sys::CommandDest::DestNone;
            (*h).real = (*qd).dest;
            (*h).tupdesc = (*qd).tupDesc;
            (*h).operation = (*(*qd).plannedstmt).commandType as c_int;
            (*h).cxt = cxt;
            (*h).limit = guc::output_buffer_size();
            h
        }
    }

    /// Start the real destination (once) and send it the rows held.
    /// Called from inside the executor (no Rust values owned here: an error
    /// jumps over this frame).
    ///
    /// # Safety
    /// `h` must be a valid `HeldOutput`.
    unsafe fn release(h: *mut HeldOutput) {
        // SAFETY: the caller upholds this function's contract (# Safety).
        unsafe {
            let real = (*h).real;
            if !(*h).sent {
                (*h).sent = true;
                if let Some(startup) = (*real).rStartup {
                    startup(real, (*h).operation, (*h).tupdesc);
                }
            }
            if (*h).len == 0 {
                return;
            }
            let slot = raw_make_single_tuple_table_slot((*h).tupdesc, &pg_sys::TTSOpsMinimalTuple);
            for i in 0..(*h).len {
                // The slot frees each copy when cleared.
                raw_exec_store_minimal_tuple(*(*h).rows.add(i), slot, true);
                if let Some(receive) = (*real).receiveSlot {
                    receive(slot, real);
                }
                if let Some(clear) = (*(*slot).tts_ops).clear {
                    clear(slot);
                }
            }
            raw_exec_drop_single_tuple_table_slot(slot);
            (*h).len = 0;
            (*h).bytes = 0;
        }
    }

    /// The attempt succeeded: send what is held and end the real destination.
    ///
    /// # Safety
    /// `h` must be a valid `HeldOutput`.
    unsafe fn finish(h: *mut HeldOutput) {
        // SAFETY: the caller upholds this function's contract (# Safety).
        unsafe {
            pg_sys::ffi::pg_guard_ffi_boundary(|| {
                HeldOutput::release(h);
                if let Some(shutdown) = (*(*h).real).rShutdown {
                    shutdown((*h).real);
                }
            });
        }
    }
}

/// `DestReceiver.rStartup` of the receiver holding a statement's output.
///
/// # Safety
/// Called only by PostgreSQL, as `rStartup` of the `DestReceiver` this file
/// made, with that receiver.
unsafe extern "C-unwind" fn held_startup(_dest: *mut pg_sys::DestReceiver, _operation: c_int, _typeinfo: pg_sys::TupleDesc) {}

/// `DestReceiver.rShutdown` of the receiver holding a statement's output.
///
/// # Safety
/// Called only by PostgreSQL, as `rShutdown` of the `DestReceiver` this file
/// made, with that receiver.
unsafe extern "C-unwind" fn held_shutdown(_dest: *mut pg_sys::DestReceiver) {}

/// `DestReceiver.receiveSlot` of the receiver holding a statement's output.
///
/// # Safety
/// Called by PostgreSQL, as `receiveSlot` of the `DestReceiver` this file made,
/// with that receiver; or directly by this module with arguments of the same
/// kind.
unsafe extern "C-unwind" fn held_receive(slot: *mut pg_sys::TupleTableSlot, dest: *mut pg_sys::DestReceiver) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let h = dest as *mut HeldOutput;
        if (*h).sent {
            let real = (*h).real;
            return match (*real).receiveSlot {
                Some(receive) => receive(slot, real),
                None => true,
            };
        }
        let Some(copy) = (*(*slot).tts_ops).copy_minimal_tuple else {
            // (Every slot type has it.)
            HeldOutput::release(h);
            return held_receive(slot, dest);
        };
        let old = pg_sys::MemoryContextSwitchTo((*h).cxt);
        if (*h).len == (*h).cap {
            let cap = ((*h).cap * 2).max(64);
            let size = cap * std::mem::size_of::<pg_sys::MinimalTuple>();
            (*h).rows =
                if (*h).rows.is_null() { raw_palloc(size) } else { raw_repalloc((*h).rows as *mut std::ffi::c_void, size) } as *mut pg_sys::MinimalTuple;
            (*h).cap = cap;
        }
        let row = copy(slot);
        pg_sys::MemoryContextSwitchTo(old);
        *(*h).rows.add((*h).len) = row;
        (*h).len += 1;
        (*h).bytes += (*row).t_len as usize;
        if (*h).bytes > (*h).limit {
            HeldOutput::release(h);
        }
        true
    }
}

/// Roll an attempt's internal subtransaction back and free its memory context,
/// back in the caller's memory context and resource owner.
///
/// # Safety
/// `outer` must be a valid memory context, and `cxt` a valid memory context.
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn abort_attempt(outer: pg_sys::MemoryContext, owner: pg_sys::ResourceOwner, cxt: pg_sys::MemoryContext) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        pg_sys::RollbackAndReleaseCurrentSubTransaction();
        pg_sys::MemoryContextSwitchTo(outer);
        pg_sys::CurrentResourceOwner = owner;
        pg_sys::MemoryContextDelete(cxt);
    }
}

/// Send the collected output to the statement's real destination.
///
/// # Safety
/// `store` must be a valid `Tuplestorestate`, and `qd` a valid `QueryDesc`.
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn replay(store: *mut pg_sys::Tuplestorestate, qd: *mut pg_sys::QueryDesc) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let dest = (*qd).dest;
        let tupdesc = (*qd).tupDesc;
        let slot = pg_sys::MakeSingleTupleTableSlot(tupdesc, &pg_sys::TTSOpsMinimalTuple);
        let op = (*(*qd).plannedstmt).commandType as c_int;
        pg_sys::ffi::pg_guard_ffi_boundary(|| {
            if let Some(startup) = (*dest).rStartup {
                startup(dest, op, tupdesc);
            }
            while raw_tuplestore_gettupleslot(store, true, false, slot) {
                if let Some(receive) = (*dest).receiveSlot {
                    if !receive(slot, dest) {
                        break;
                    }
                }
            }
            if let Some(shutdown) = (*dest).rShutdown {
                shutdown(dest);
            }
        });
        pg_sys::ExecDropSingleTupleTableSlot(slot);
    }
}
