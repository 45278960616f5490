//! CREATE INDEX CONCURRENTLY on a Pinax table: the index is built while every SQL
//! node goes on writing to the table (F1's online schema change, in three
//! transactions of the statement, as PostgreSQL's own CONCURRENTLY runs).
//!
//! 1. **Write-only everywhere.** The index is created without entries (storage
//!    only: `build::defer_builds`) and marked not valid (`indisready` and not
//!    `indisvalid`: writers maintain it, queries do not use it). Its DDL log
//!    entry ("CREATE INDEX …" without CONCURRENTLY, then
//!    `pinax_index_state(…, 'write-only')`) is applied on every node under the
//!    cluster-wide SHARE lock (`ddl_lock.rs`), which waits for the writers
//!    working then: once this transaction commits, every write on every node
//!    maintains the index. The lock is held only for this catalog change.
//! 2. **Backfill**, in chunks of [`CHUNK_ROWS`] rows in key order, each its own
//!    transaction: the chunk's rows as of its read time get their entries
//!    (`build::backfill_chunk`). A row a writer changed since that time in a
//!    way that touched its entry (deleted, or its key moved) makes the entry's
//!    write a conflict: the chunk runs again at a later time, so an entry never
//!    outlives its row.
//! 3. **Valid everywhere**: `pinax_index_state(…, 'valid')`, logged for the
//!    other nodes (the index has `indcheckxmin` from its first step: transactions
//!    whose snapshots are older than the change on their node do not use it).
//!
//! Throughout, a session lock (SHARE UPDATE EXCLUSIVE) keeps other DDL off the
//! table, as PostgreSQL's does. If a step fails, the index stays, not valid (as
//! PostgreSQL leaves it): DROP INDEX removes it. A unique index's entries are
//! inserted (a locked key, so a writer's later change still conflicts); an insert
//! that meets an entry runs its chunk again reading each entry first: the same
//! row's (a writer's) is left alone, another row's is a duplicate, 23505 "could
//! not create unique index", and the index stays not valid (as PostgreSQL's).

use crate::am::index::build;
use crate::error;
use pgrx::{pg_guard, pg_sys, PgSqlErrorCode};
use std::ffi::{CStr, CString};

/// Rows per backfill transaction.
pub const CHUNK_ROWS: usize = 5000;

/// How many times a chunk runs again after conflicts before the build gives up.
const CHUNK_RETRIES: u32 = 50;

/// `query` (a CREATE INDEX statement's text) without its CONCURRENTLY keyword.
fn without_concurrently(query: &str) -> Option<String> {
    let upper = query.to_ascii_uppercase();
    let at = upper.find("CONCURRENTLY")?;
    let before = upper[..at].trim_end();
    if !before.ends_with("INDEX") {
        return None;
    }
    Some(format!("{}{}", &query[..at], query[at + "CONCURRENTLY".len()..].trim_start()))
}

/// Run CREATE INDEX CONCURRENTLY `stmt` (in `pstmt`, text in `query`) on Pinax
/// table `heap_oid`. `run` runs a utility statement (the hook itself).
///
/// # Safety
/// Called from the ProcessUtility hook with its arguments; `stmt` is `pstmt`'s
/// IndexStmt with `concurrent` set.
#[allow(clippy::too_many_arguments)]
pub unsafe fn create(
    pstmt: *mut pg_sys::PlannedStmt,
    query: *const std::ffi::c_char,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
    heap_oid: pg_sys::Oid,
    run: unsafe extern "C-unwind" fn(
        *mut pg_sys::PlannedStmt,
        *const std::ffi::c_char,
        bool,
        pg_sys::ProcessUtilityContext::Type,
        pg_sys::ParamListInfo,
        *mut pg_sys::QueryEnvironment,
        *mut pg_sys::DestReceiver,
        *mut pg_sys::QueryCompletion,
    ),
) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        pg_sys::PreventInTransactionBlock(context == pg_sys::ProcessUtilityContext::PROCESS_UTILITY_TOPLEVEL, c"CREATE INDEX CONCURRENTLY".as_ptr());
        // 1. The index, write-only, on every node: the statement without
        //    CONCURRENTLY, its entries deferred.
        let text = crate::ddl::statement_text(pstmt, query);
        let Some(plain) = without_concurrently(&text) else {
            error::not_supported("CREATE INDEX CONCURRENTLY on a Pinax table needs the statement's text");
        };
        let plain_c = CString::new(plain).unwrap_or_default();
        let p1 = pg_sys::copyObjectImpl(pstmt.cast()) as *mut pg_sys::PlannedStmt;
        (*p1).stmt_location = -1;
        (*p1).stmt_len = 0;
        (*((*p1).utilityStmt as *mut pg_sys::IndexStmt)).concurrent = false;
        build::defer_builds(true);
        let cxt = pg_sys::CurrentMemoryContext;
        let res = crate::pgtry::try_keep_error(cxt, || run(p1, plain_c.as_ptr(), false, context, params, query_env, dest, qc));
        let idx_oid = pg_sys::Oid::from(build::defer_builds(false));
        if let Err(edata) = res {
            crate::pgtry::rethrow(edata);
        }
        if idx_oid == pg_sys::InvalidOid {
            return; // IF NOT EXISTS, and it did
        }
        let name = qualified(idx_oid);
        set_state(idx_oid, false);
        crate::ddl::record_statement(format!("SELECT pg_catalog.pinax_index_state({}::regclass, 'write-only')", quote_literal(&name)));
        let heap_lock = pg_sys::LockRelId { relId: heap_oid, dbId: pg_sys::MyDatabaseId };
        pg_sys::LockRelationIdForSession(&heap_lock as *const _ as *mut _, pg_sys::ShareUpdateExclusiveLock as pg_sys::LOCKMODE);
        next_transaction();

        // 2. Backfill, chunk by chunk, its progress in pg_stat_progress_create_index
        //    (PostgreSQL's own CONCURRENTLY reports there across its transactions too).
        report_backfill(heap_oid, idx_oid, 0);
        let mut start = Vec::new();
        let mut rows = 0usize;
        loop {
            let mut tries = 0;
            // A unique index's chunk runs again reading its entries first once an
            // insert met an existing entry (a writer's for the same row, or a
            // duplicate: backfill_chunk tells them apart).
            let mut careful = false;
            let next = loop {
                let from = start.clone();
                let outcome = pgrx::PgTryBuilder::new(|| {
                    pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
                    let heap = pg_sys::table_open(heap_oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
                    let idx = pg_sys::index_open(idx_oid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
                    let ii = pg_sys::BuildIndexInfo(idx);
                    let (n, next) = build::backfill_chunk(heap, idx, ii, from.clone(), CHUNK_ROWS, careful);
                    pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
                    pg_sys::table_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
                    pg_sys::PopActiveSnapshot();
                    // The chunk's writes go at its commit: conflicts show here.
                    pg_sys::CommitTransactionCommand();
                    pg_sys::StartTransactionCommand();
                    Ok((n, next))
                })
                // Err(careful): run the chunk again (reading a unique index's entries first).
                .catch_when(PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE, |_| Err(false))
                .catch_when(PgSqlErrorCode::ERRCODE_T_R_DEADLOCK_DETECTED, |_| Err(false))
                .catch_when(PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION, |e| if build::real_duplicate() { e.rethrow() } else { Err(true) })
                .execute();
                match outcome {
                    Ok((n, next)) => {
                        rows += n;
                        build::report_progress(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE, rows as i64);
                        break next;
                    }
                    Err(c) => {
                        careful |= c;
                        pg_sys::AbortCurrentTransaction();
                        pg_sys::StartTransactionCommand();
                        // (An abort ends the backend's progress report too.)
                        report_backfill(heap_oid, idx_oid, rows);
                        // (An abort lets session locks go too.)
                        pg_sys::LockRelationIdForSession(&heap_lock as *const _ as *mut _, pg_sys::ShareUpdateExclusiveLock as pg_sys::LOCKMODE);
                        tries += 1;
                        if tries > CHUNK_RETRIES {
                            error::raise_with(
                                PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                                format!("could not build index \"{name}\": its rows kept changing under the build"),
                                Some("The index is left not valid; drop it and try again.".into()),
                            );
                        }
                        std::thread::sleep(std::time::Duration::from_millis(10 * tries as u64));
                    }
                }
            };
            match next {
                Some(k) => start = k,
                None => break,
            }
        }
        pgrx::debug1!("pinax: backfilled {rows} rows into {name}");
        pg_sys::pgstat_progress_end_command();

        // 3. Valid everywhere (the caller commits this transaction).
        set_state(idx_oid, true);
        crate::ddl::record_statement(format!("SELECT pg_catalog.pinax_index_state({}::regclass, 'valid')", quote_literal(&name)));
        pg_sys::UnlockRelationIdForSession(&heap_lock as *const _ as *mut _, pg_sys::ShareUpdateExclusiveLock as pg_sys::LOCKMODE);
    }
}

/// Report the backfill of index `idx_oid` of `heap_oid` in
/// pg_stat_progress_create_index, `rows` done (PostgreSQL's own CONCURRENTLY
/// reports there across its transactions too; an aborted chunk ends the report,
/// so it starts again after each).
///
/// # Safety
/// Inside a transaction; the relations exist.
unsafe fn report_backfill(heap_oid: pg_sys::Oid, idx_oid: pg_sys::Oid, rows: usize) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        pg_sys::pgstat_progress_start_command(pg_sys::ProgressCommandType::PROGRESS_COMMAND_CREATE_INDEX, heap_oid);
        build::report_progress(pg_sys::PROGRESS_CREATEIDX_COMMAND, pg_sys::PROGRESS_CREATEIDX_COMMAND_CREATE_CONCURRENTLY as i64);
        build::report_progress(pg_sys::PROGRESS_CREATEIDX_INDEX_OID.to_u32(), u32::from(idx_oid) as i64);
        build::report_progress(pg_sys::PROGRESS_CREATEIDX_PHASE, pg_sys::PROGRESS_CREATEIDX_PHASE_BUILD as i64);
        let heap = pg_sys::table_open(heap_oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let idx = pg_sys::index_open(idx_oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        build::report_progress(pg_sys::PROGRESS_CREATEIDX_ACCESS_METHOD_OID.to_u32(), u32::from((*(*idx).rd_rel).relam) as i64);
        build::report_scan_start(heap);
        build::report_progress(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE, rows as i64);
        pg_sys::index_close(idx, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        pg_sys::table_close(heap, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    }
}

/// Commit the statement's transaction and start the next, as PostgreSQL's
/// CONCURRENTLY does (its DDL is published at the commit).
unsafe fn next_transaction() {
    // SAFETY: in the utility statement's transaction, outside a block.
    unsafe {
        if pg_sys::ActiveSnapshotSet() {
            pg_sys::PopActiveSnapshot();
        }
        pg_sys::CommitTransactionCommand();
        pg_sys::StartTransactionCommand();
    }
}

/// `schema.name` of relation `oid`, quoted as needed.
unsafe fn qualified(oid: pg_sys::Oid) -> String {
    // SAFETY: in a transaction.
    unsafe {
        let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(oid));
        let q = pg_sys::quote_qualified_identifier(nsp, pg_sys::get_rel_name(oid));
        CStr::from_ptr(q).to_string_lossy().into_owned()
    }
}

fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Mark index `idx` write-only (maintained, not used: `valid` false) or valid.
unsafe fn set_state(idx: pg_sys::Oid, valid: bool) {
    // SAFETY: in a transaction; `idx` names an index.
    unsafe {
        // The index's creation (and its build's update of its row) first.
        pg_sys::CommandCounterIncrement();
        let table = pg_sys::IndexGetRelation(idx, false);
        // (`indcheckxmin` was set by the index's first step, its build: transactions
        // whose snapshots are older than the row marking it valid keep off it.)
        let action = if valid { pg_sys::IndexStateFlagsAction::INDEX_CREATE_SET_VALID } else { pg_sys::IndexStateFlagsAction::INDEX_DROP_CLEAR_VALID };
        pg_sys::index_set_state_flags(idx, action);
        pg_sys::CacheInvalidateRelcacheByRelid(table);
        pg_sys::CommandCounterIncrement();
    }
}

/// `pinax_index_state(index regclass, state text)`: mark an index of a Pinax
/// table 'write-only' or 'valid' (the steps of CREATE INDEX CONCURRENTLY, as the
/// other nodes replay them). Only the table's owner may.
///
/// # Safety
/// Called only by PostgreSQL, by the function manager, as the C function of its
/// SQL function, with a valid `fcinfo`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn pinax_index_state(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let args = (*fcinfo).args.as_slice(2);
        let idx = pg_sys::Oid::from(args[0].value.value() as u32);
        let state = CStr::from_ptr(pg_sys::text_to_cstring(args[1].value.cast_mut_ptr())).to_string_lossy().into_owned();
        if pg_sys::get_rel_relkind(idx) as u8 != pg_sys::RELKIND_INDEX {
            error::raise_with(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, "pinax_index_state: not an index".to_string(), None);
        }
        let table = pg_sys::IndexGetRelation(idx, false);
        if !pg_sys::pg_class_ownercheck(table, pg_sys::GetUserId()) {
            error::raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, "must be owner of the index's table".to_string(), None);
        }
        pg_sys::LockRelationOid(table, pg_sys::ShareUpdateExclusiveLock as pg_sys::LOCKMODE);
        match state.as_str() {
            "write-only" => set_state(idx, false),
            "valid" => set_state(idx, true),
            other => error::raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("pinax_index_state: unknown state \"{other}\""), None),
        }
        pg_sys::Datum::from(0usize)
    }
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_index_state() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

pgrx::extension_sql!(
    r#"
CREATE FUNCTION pg_catalog.pinax_index_state(regclass, text) RETURNS void
    AS 'MODULE_PATHNAME', 'pinax_index_state' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pg_catalog.pinax_index_state(regclass, text) IS 'Pinax: mark an index write-only or valid (steps of CREATE INDEX CONCURRENTLY, replayed on every SQL node)';
"#,
    name = "pinax_index_state",
    requires = ["pinax_access_method"]
);

#[cfg(test)]
mod tests {
    use super::without_concurrently;

    #[test]
    fn the_keyword_goes_and_nothing_else() {
        assert_eq!(without_concurrently("CREATE INDEX CONCURRENTLY i ON t (k)").as_deref(), Some("CREATE INDEX i ON t (k)"));
        assert_eq!(without_concurrently("create index\n  concurrently if not exists i on t(k)").as_deref(), Some("create index\n  if not exists i on t(k)"));
        assert_eq!(without_concurrently("CREATE INDEX ON t (concurrently)"), None);
    }
}
