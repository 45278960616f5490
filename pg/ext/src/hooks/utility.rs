//! ProcessUtility hook: Pinax options in DDL, without forking the grammar.
//!
//! - `CREATE TABLE ... WITH (pinax.sharding = 'hash' | 'range', pinax.tablets = N,
//!   pinax.split_at = 'k1,k2,...', pinax.auto_split = on | off)`: the `pinax.*`
//!   storage parameters are taken out before PostgreSQL validates the options and
//!   used when the table's storage is created. Split points of range-sharded
//!   tables are values of the first primary key column (integers or text).
//!   `ALTER TABLE ... SET | RESET (pinax.auto_split ...)`: `table_options.rs`.
//! - Temporary tables (`CREATE TEMP TABLE`, `CREATE TEMP TABLE AS`) stay heap tables.
//! - CREATE INDEX CONCURRENTLY on a Pinax table runs `concurrent_index.rs`.

use crate::am::index;
use crate::error;
use crate::keys::KeyColumn;
use crate::meta;
use crate::state::{self, CreateOptions};
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::ffi::CStr;
use std::sync::OnceLock;

static PREV: OnceLock<pg_sys::ProcessUtility_hook_type> = OnceLock::new();

/// Install the hook (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let _ = PREV.set(pg_sys::ProcessUtility_hook);
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

/// Whether `node` is non-null and tagged `tag`.
///
/// # Safety
/// `node` must be a valid node (or null where checked).
unsafe fn is_tag(node: *mut pg_sys::Node, tag: pg_sys::NodeTag) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { !node.is_null() && (*node).type_ == tag }
}

/// The C string `p` (empty if null) as a `String`.
///
/// # Safety
/// `p` must be a valid `c_char`.
unsafe fn cstr(p: *const std::ffi::c_char) -> String {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

/// Take the `pinax.*` options out of `list`; returns them (name, value).
///
/// # Safety
/// `list` must be a valid `*mutList`. Calls into PostgreSQL: only in a backend,
/// where its errors can be raised.
unsafe fn take_pinax_options(list: *mut *mut pg_sys::List) -> Vec<(String, String)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut out = Vec::new();
        let l = *list;
        if l.is_null() {
            return out;
        }
        let mut keep: *mut pg_sys::List = std::ptr::null_mut();
        for i in 0..(*l).length as usize {
            let cell = (*(*l).elements.add(i)).ptr_value as *mut pg_sys::DefElem;
            if cstr((*cell).defnamespace) == "pinax" {
                let value = if (*cell).arg.is_null() { String::new() } else { cstr(pg_sys::defGetString(cell)) };
                out.push((cstr((*cell).defname), value));
            } else {
                keep = pg_sys::lappend(keep, cell.cast());
            }
        }
        *list = keep;
        out
    }
}

/// Interpret `pinax.*` table options. `first_key_type`: type of the first primary key
/// column, for split points.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn parse_create_options(opts: &[(String, String)], first_key_type: Option<u32>) -> CreateOptions {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut c = CreateOptions::default();
        let mut split_text: Option<String> = None;
        for (k, v) in opts {
            match k.as_str() {
                "sharding" => match v.to_ascii_lowercase().as_str() {
                    "hash" => c.range = false,
                    "range" => c.range = true,
                    _ => error::raise_with(
                        pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                        format!("invalid value for pinax.sharding: \"{v}\""),
                        Some("Valid values are \"hash\" and \"range\".".into()),
                    ),
                },
                "tablets" => match v.parse::<u32>() {
                    Ok(n) if (1..=4096).contains(&n) => c.tablets = Some(n),
                    _ => error::raise_with(
                        pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                        format!("invalid value for pinax.tablets: \"{v}\""),
                        Some("Expected an integer between 1 and 4096.".into()),
                    ),
                },
                "split_at" => split_text = Some(v.clone()),
                "auto_split" => c.auto_split = Some(super::table_options::parse_bool("auto_split", v)),
                _ => error::raise_with(
                    pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("unrecognized parameter \"pinax.{k}\""),
                    Some("Pinax table parameters are pinax.sharding, pinax.tablets, pinax.split_at and pinax.auto_split.".into()),
                ),
            }
        }
        if let Some(s) = split_text {
            if !c.range {
                error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "pinax.split_at requires pinax.sharding = 'range'", None);
            }
            let Some(typ) = first_key_type else {
                error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "pinax.split_at requires a primary key", None);
            };
            let col = KeyColumn::new(typ, -1, 950, 0);
            let mut in_func = pg_sys::Oid::from(0u32);
            let mut ioparam = pg_sys::Oid::from(0u32);
            pg_sys::getTypeInputInfo(pg_sys::Oid::from(typ), &mut in_func, &mut ioparam);
            let mut points = Vec::new();
            for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let cs = std::ffi::CString::new(part).unwrap_or_default();
                let d = pg_sys::OidInputFunctionCall(in_func, cs.as_ptr() as *mut _, ioparam, -1);
                let mut k = Vec::new();
                col.encode(&mut k, d, false);
                points.push(k);
            }
            points.sort();
            points.dedup();
            c.split_at = points;
        }
        c
    }
}

/// Type of the first primary-key column declared in a CreateStmt, if any.
///
/// # Safety
/// `stmt` must be a valid `CreateStmt`. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn first_pk_type(stmt: *mut pg_sys::CreateStmt) -> Option<u32> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let elts = (*stmt).tableElts;
        if elts.is_null() {
            return None;
        }
        let mut cols: Vec<(String, *mut pg_sys::TypeName)> = Vec::new();
        let mut pk_col: Option<String> = None;
        for i in 0..(*elts).length as usize {
            let n = (*(*elts).elements.add(i)).ptr_value as *mut pg_sys::Node;
            if is_tag(n, pg_sys::NodeTag::T_ColumnDef) {
                let cd = n as *mut pg_sys::ColumnDef;
                let name = cstr((*cd).colname);
                cols.push((name.clone(), (*cd).typeName));
                let cons = (*cd).constraints;
                if !cons.is_null() {
                    for j in 0..(*cons).length as usize {
                        let c = (*(*cons).elements.add(j)).ptr_value as *mut pg_sys::Constraint;
                        if (*c).contype == pg_sys::ConstrType::CONSTR_PRIMARY && pk_col.is_none() {
                            pk_col = Some(name.clone());
                        }
                    }
                }
            } else if is_tag(n, pg_sys::NodeTag::T_Constraint) {
                let c = n as *mut pg_sys::Constraint;
                if (*c).contype == pg_sys::ConstrType::CONSTR_PRIMARY && pk_col.is_none() && !(*c).keys.is_null() && (*(*c).keys).length > 0 {
                    let s = (*(*(*c).keys).elements).ptr_value as *mut pg_sys::String;
                    pk_col = Some(cstr((*s).sval));
                }
            }
        }
        let pk = pk_col?;
        let (_, tn) = cols.into_iter().find(|(n, _)| *n == pk)?;
        Some(pg_sys::typenameTypeId(std::ptr::null_mut(), tn).to_u32())
    }
}

/// The `ProcessUtility_hook`.
///
/// # Safety
/// Called only by PostgreSQL, as `ProcessUtility_hook`, with the arguments that
/// hook gets.
#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let mut pstmt = pstmt;
        let mut read_only_tree = read_only_tree;
        let node = (*pstmt).utilityStmt;
        let interesting =
            is_tag(node, pg_sys::NodeTag::T_CreateStmt) || is_tag(node, pg_sys::NodeTag::T_CreateTableAsStmt) || is_tag(node, pg_sys::NodeTag::T_IndexStmt);
        if interesting && meta::pinax_am_oid() != 0 {
            if read_only_tree {
                pstmt = pg_sys::copyObjectImpl(pstmt.cast()) as *mut pg_sys::PlannedStmt;
                read_only_tree = false;
            }
            let node = (*pstmt).utilityStmt;
            if is_tag(node, pg_sys::NodeTag::T_CreateStmt) {
                let stmt = node as *mut pg_sys::CreateStmt;
                let opts = take_pinax_options(&mut (*stmt).options);
                let temp = (*(*stmt).relation).relpersistence as u8 == pg_sys::RELPERSISTENCE_TEMP;
                // A partitioned table has no access method (PostgreSQL refuses one):
                // its temporary partitions get heap here when they are created.
                let partitioned = !(*stmt).partspec.is_null();
                if temp && !partitioned && (*stmt).accessMethod.is_null() {
                    (*stmt).accessMethod = pg_sys::pstrdup(c"heap".as_ptr());
                }
                let parsed = parse_create_options(&opts, if opts.is_empty() { None } else { first_pk_type(stmt) });
                state::with(|b| b.pending_create = if opts.is_empty() { None } else { Some(parsed) });
            } else if is_tag(node, pg_sys::NodeTag::T_CreateTableAsStmt) {
                let stmt = node as *mut pg_sys::CreateTableAsStmt;
                let into = (*stmt).into;
                if !into.is_null() {
                    let opts = take_pinax_options(&mut (*into).options);
                    let temp = (*(*into).rel).relpersistence as u8 == pg_sys::RELPERSISTENCE_TEMP;
                    if temp && (*into).accessMethod.is_null() {
                        (*into).accessMethod = pg_sys::pstrdup(c"heap".as_ptr());
                    }
                    let parsed = parse_create_options(&opts, None);
                    state::with(|b| b.pending_create = if opts.is_empty() { None } else { Some(parsed) });
                }
            } else {
                let stmt = node as *mut pg_sys::IndexStmt;
                let opts = take_pinax_options(&mut (*stmt).options);
                if !opts.is_empty() {
                    error::not_supported("pinax.* options are not supported on indexes yet");
                }
                let heap = meta::relid_named((*stmt).relation);
                if (*stmt).concurrent && !crate::ddl::replaying() && meta::is_pinax_relid(heap) {
                    // Built while every node writes (concurrent_index.rs).
                    crate::concurrent_index::create(pstmt, query_string, context, params, query_env, dest, qc, heap, process_utility);
                    return;
                }
            }
        }
        // Tablespace moves of Pinax relations are catalog changes (tablespace.rs),
        // taken out of the statement here and made as it runs.
        let moves = if meta::pinax_am_oid() != 0 { super::tablespace::plan(&mut pstmt, &mut read_only_tree) } else { Default::default() };
        // Here, not in the guarded call below (which allows no pgrx boundary).
        super::tablespace::apply(&moves);
        // So are `pinax.*` option changes (recorded once the statement ran).
        let options = if meta::pinax_am_oid() != 0 { super::table_options::plan(&mut pstmt, &mut read_only_tree) } else { Default::default() };
        if is_tag(node, pg_sys::NodeTag::T_ClusterStmt) && meta::pinax_am_oid() != 0 && super::maintenance::cluster(node.cast()) {
            return;
        }
        if is_tag(node, pg_sys::NodeTag::T_VacuumStmt) && meta::pinax_am_oid() != 0 {
            // VACUUM FULL: the other tables first, then the Pinax ones as a plain VACUUM.
            pstmt = pg_sys::copyObjectImpl(pstmt.cast()) as *mut pg_sys::PlannedStmt;
            read_only_tree = false;
            if let Some(first) = super::maintenance::vacuum_full((*pstmt).utilityStmt.cast()) {
                let full = pg_sys::copyObjectImpl(pstmt.cast()) as *mut pg_sys::PlannedStmt;
                (*full).utilityStmt = first.cast();
                // VACUUM commits and starts transactions: come back to this
                // statement's memory (the portal's, which outlives them), not the
                // new transaction's, which the second VACUUM ends.
                let cxt = pg_sys::CurrentMemoryContext;
                process_utility(full, query_string, false, context, params, query_env, dest, qc);
                pg_sys::CurrentMemoryContext = cxt;
            }
        }
        let node = (*pstmt).utilityStmt;
        if meta::pinax_am_oid() != 0 && builds_indexes(node) {
            // An index of a Pinax table is built in storage by one process, the
            // one scanning for btree's build: each parallel worker of a parallel
            // build would build it all again (for this transaction, as SET LOCAL).
            pg_sys::set_config_option(
                c"max_parallel_maintenance_workers".as_ptr(),
                c"0".as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_LOCAL,
                true,
                0,
                false,
            );
        }
        // DDL checks that no relation it changes is open in this session (REINDEX, DROP
        // INDEX, ALTER TABLE): give back the index references held since earlier
        // statements, and hold none while the utility command runs.
        index::release_held();
        let mode = index::UtilityMode::enter();
        // Statements a utility command runs are not restarted (a cursor's FETCH, EXPLAIN
        // ANALYZE, CREATE TABLE AS), except those of DO blocks and procedures: each of
        // theirs is a statement of its own, with no outer statement reading meanwhile.
        let runs_statements = is_tag(node, pg_sys::NodeTag::T_DoStmt) || is_tag(node, pg_sys::NodeTag::T_CallStmt);
        let nested = if runs_statements { super::restart::Nested::enter_statements() } else { super::restart::Nested::enter() };
        // The command's error, if any, goes on with its CONTEXT and position (pgrx's
        // boundary would drop them) once the guards above are undone.
        let cxt = pg_sys::CurrentMemoryContext;
        // DDL is kept for the other SQL nodes (ddl.rs) once it succeeded: top-level
        // statements, and those of DO blocks, functions and procedures (not those a
        // kept statement runs: CREATE EXTENSION's script, a serial's sequence, ...,
        // which its replay runs again).
        use pg_sys::ProcessUtilityContext::*;
        let own_statement = match context {
            PROCESS_UTILITY_TOPLEVEL => true,
            PROCESS_UTILITY_QUERY | PROCESS_UTILITY_QUERY_NONATOMIC => !crate::ddl::capturing(),
            _ => false,
        };
        let replicate = own_statement && crate::ddl::is_replicated_ddl(node);
        if replicate {
            crate::ddl::begin_statement();
        }
        crate::sequence::before_utility(node);
        // Its table locks on the other SQL nodes first (ddl_lock.rs).
        if own_statement && meta::pinax_am_oid() != 0 {
            crate::ddl_lock::before_utility(node);
        }
        let res = crate::pgtry::try_keep_error(cxt, || {
            if moves.skip_statement {
                return;
            }
            match PREV.get().copied().flatten() {
                Some(prev) => prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
                None => raw_standard_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
            }
        });
        if replicate {
            crate::ddl::end_statement(res.is_ok().then(|| crate::ddl::loggable_text(node, pstmt, query_string)));
        }
        crate::sequence::end_utility();
        if res.is_ok() {
            crate::sequence::after_utility(node);
        }
        drop(nested);
        drop(mode);
        if let Err(edata) = res {
            crate::pgtry::rethrow(edata);
        }
        super::table_options::apply(&options);
    }
}

/// Whether utility statement `node` may build indexes (and so plan a parallel
/// build): CREATE INDEX, REINDEX, ALTER TABLE (rewrites, added constraints),
/// CLUSTER, VACUUM FULL.
///
/// # Safety
/// `node` must be a valid node or null.
unsafe fn builds_indexes(node: *mut pg_sys::Node) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        use pg_sys::NodeTag::*;
        !node.is_null() && matches!((*node).type_, T_IndexStmt | T_ReindexStmt | T_AlterTableStmt | T_ClusterStmt | T_VacuumStmt)
    }
}

unsafe extern "C-unwind" {
    #[link_name = "standard_ProcessUtility"]
    #[allow(clippy::too_many_arguments)]
    fn raw_standard_process_utility(
        pstmt: *mut pg_sys::PlannedStmt,
        query_string: *const std::ffi::c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
}
