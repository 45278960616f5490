//! Cluster-wide sequences.
//!
//! PostgreSQL keeps a sequence's state in a node-local relation, so two SQL nodes
//! would hand out the same values. Pinax keeps it in the master
//! (`Request::Sequence`) and every node takes values from there:
//!
//! - **Interception.** The planner hook swaps `nextval`, `currval`, `setval` and
//!   `lastval` calls for `pinax_nextval` & co. (same arguments, same result), and an
//!   identity column's default (`NextValueExpr`, which the rewriter puts in
//!   INSERT/UPDATE target lists and VALUES lists) for `pinax_nextval` cast to the
//!   column's type. So INSERT defaults (serial and identity), SELECT nextval(...),
//!   PL/pgSQL and setval from pg_dump all use the cluster's sequence. Not covered:
//!   COPY FROM computing a sequence default (it plans defaults without the planner
//!   hook) and other paths that evaluate defaults outside the planner.
//! - **Caching.** A backend takes `max(CACHE, pinax.sequence_cache_min)` values
//!   per request (one master round trip per 100 values by default, as YugabyteDB's
//!   `ysql_sequence_cache_minval`), so values are unique across the cluster but,
//!   as with PostgreSQL's CACHE, not in order across sessions.
//! - **Identity.** A sequence is named `{node prefix}q{db}_{oid}` by the node that
//!   created it; other nodes, replaying its CREATE, name theirs another name of it
//!   (the object-access hook, through the DDL log's relation names). Dropping
//!   drops the name at commit. ALTER SEQUENCE ... RESTART and TRUNCATE ... RESTART
//!   IDENTITY reset the cluster's state.
//! - **Local only:** temporary sequences (the built-in functions run).
//! - **The relation** mirrors what this node did: each range of values taken
//!   and each setval is written into the local sequence relation with
//!   PostgreSQL's own setval (see [`mirror`]), so `SELECT last_value, is_called
//!   FROM s`, `pg_sequences` and `pg_sequence_last_value()` show the last value
//!   this node took, as stock PostgreSQL with a CACHE shows the end of the range
//!   its backends took.

use crate::ddl;
use crate::error::{self, OrRaise};
use crate::guc;
use crate::meta::relid_named;
use crate::state;
use pgrx::{pg_guard, pg_sys, PgSqlErrorCode};
use pinax_proto::{Request, Response, SequenceOp};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CStr;

/// Values a backend holds of one sequence: the next, how many are left.
struct Cached {
    next: i64,
    left: u32,
    increment: i64,
}

/// OIDs of the pinax_* functions in this database.
#[derive(Clone, Copy)]
struct Funcs {
    nextval: pg_sys::Oid,
    currval: pg_sys::Oid,
    setval2: pg_sys::Oid,
    setval3: pg_sys::Oid,
    lastval: pg_sys::Oid,
}

thread_local! {
    static FUNCS: Cell<Option<Funcs>> = const { Cell::new(None) };
    static CACHES: RefCell<HashMap<u32, Cached>> = RefCell::new(HashMap::new());
    /// Last value nextval returned per sequence in this session (currval).
    static LAST: RefCell<HashMap<u32, i64>> = RefCell::new(HashMap::new());
    /// The sequence nextval last used (lastval).
    static LAST_USED: Cell<Option<u32>> = const { Cell::new(None) };
    /// Cluster sequence names to drop at commit, with the subtransaction that dropped them.
    static DROPPED: RefCell<Vec<(u32, String)>> = const { RefCell::new(Vec::new()) };
}

/// Cluster-wide name of (non-temporary) sequence `oid` as this node knows it.
fn key(oid: pg_sys::Oid) -> String {
    // SAFETY: reads a backend global.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    format!("{}q{db}_{}", ddl::prefix(), oid.to_u32())
}

fn call(name: String, op: SequenceOp) -> Response {
    let client = state::with(|b| b.client()).or_raise();
    client.call(Request::Sequence { name, op }).or_raise()
}

// ------------------------------------------------- planner (hooks/planner.rs)

static PREV_OBJECT_ACCESS: std::sync::OnceLock<pg_sys::object_access_hook_type> = std::sync::OnceLock::new();

/// Install the object-access hook (once, from `_PG_init`; the planner hook,
/// `hooks/planner.rs`, calls [`swap_calls`]).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let _ = PREV_OBJECT_ACCESS.set(pg_sys::object_access_hook);
        pg_sys::object_access_hook = Some(object_access);
    }
}

/// The pinax_* functions of this database (none: the extension is not installed).
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn funcs() -> Option<Funcs> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if let Some(f) = FUNCS.with(Cell::get) {
            return Some(f);
        }
        if pg_sys::MyDatabaseId.to_u32() == 0 || !pg_sys::IsTransactionState() {
            return None;
        }
        // The extension creates them in pg_catalog, whatever the search_path.
        let lookup = |name: &CStr, args: &[pg_sys::Oid]| -> pg_sys::Oid {
            let names = pg_sys::lappend(
                pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeString(pg_sys::pstrdup(c"pg_catalog".as_ptr())).cast()),
                pg_sys::makeString(pg_sys::pstrdup(name.as_ptr())).cast(),
            );
            pg_sys::LookupFuncName(names, args.len() as i32, args.as_ptr(), true)
        };
        let regclass = pg_sys::REGCLASSOID;
        let f = Funcs {
            nextval: lookup(c"pinax_nextval", &[regclass]),
            currval: lookup(c"pinax_currval", &[regclass]),
            setval2: lookup(c"pinax_setval", &[regclass, pg_sys::INT8OID]),
            setval3: lookup(c"pinax_setval", &[regclass, pg_sys::INT8OID, pg_sys::BOOLOID]),
            lastval: lookup(c"pinax_lastval", &[]),
        };
        if [f.nextval, f.currval, f.setval2, f.setval3, f.lastval].iter().any(|o| o.to_u32() == 0) {
            return None;
        }
        FUNCS.with(|c| c.set(Some(f)));
        Some(f)
    }
}

/// Before planning `parse`: swap its sequence calls and identity defaults for
/// the pinax_* functions (module header), in place (the planner scribbles on its
/// input anyway). Nothing when the extension is not installed in this database.
///
/// # Safety
/// `parse` must be a valid query tree about to be planned.
pub unsafe fn swap_calls(parse: *mut pg_sys::Query) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if let Some(mut f) = funcs() {
            pg_sys::query_tree_walker(parse, Some(swap_walker), (&raw mut f).cast(), 0);
        }
    }
}

/// Whether `n` is a `NextValueExpr` node.
///
/// # Safety
/// `n` must be what the caller passes as it (valid).
unsafe fn is_next_value(n: *mut std::ffi::c_void) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { !n.is_null() && (*(n as *mut pg_sys::Node)).type_ == pg_sys::NodeTag::T_NextValueExpr }
}

/// `pinax_nextval(seq)` cast to the identity column's type, for a NextValueExpr.
///
/// # Safety
/// `nve` must be a valid `NextValueExpr`. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn next_value_call(f: &Funcs, nve: *mut pg_sys::NextValueExpr) -> *mut pg_sys::Expr {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let seq = pg_sys::makeConst(pg_sys::REGCLASSOID, -1, pg_sys::InvalidOid, 4, pg_sys::Datum::from((*nve).seqid), false, true);
        let args = pg_sys::lappend(std::ptr::null_mut(), seq.cast());
        let call = pg_sys::makeFuncExpr(f.nextval, pg_sys::INT8OID, args, pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::CoercionForm::COERCE_EXPLICIT_CALL);
        let cast = |func: u32, typ: pg_sys::Oid| {
            let args = pg_sys::lappend(std::ptr::null_mut(), call.cast());
            pg_sys::makeFuncExpr(pg_sys::Oid::from(func), typ, args, pg_sys::InvalidOid, pg_sys::InvalidOid, pg_sys::CoercionForm::COERCE_IMPLICIT_CAST)
        };
        match (*nve).typeId {
            t if t == pg_sys::INT4OID => cast(pg_sys::F_INT4_INT8, t).cast(),
            t if t == pg_sys::INT2OID => cast(pg_sys::F_INT2_INT8, t).cast(),
            _ => call.cast(),
        }
    }
}

/// The walk of `swap_calls` (`query_tree_walker` and `expression_tree_walker`
/// callback): sequence calls swapped in place; `ctx` is the `Funcs`.
///
/// # Safety
/// Called only by PostgreSQL, by PostgreSQL's tree walker it was passed to,
/// with a node of that tree (or null) and the walker's `ctx`.
#[pg_guard]
unsafe extern "C-unwind" fn swap_walker(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        use pg_sys::NodeTag::*;
        if node.is_null() {
            return false;
        }
        let f = &*(ctx as *const Funcs);
        match (*node).type_ {
            T_Query => return pg_sys::query_tree_walker(node.cast(), Some(swap_walker), ctx, 0),
            T_FuncExpr => {
                let fe = node as *mut pg_sys::FuncExpr;
                let to = match (*fe).funcid.to_u32() {
                    pg_sys::F_NEXTVAL => Some(f.nextval),
                    pg_sys::F_CURRVAL => Some(f.currval),
                    pg_sys::F_SETVAL_REGCLASS_INT8 => Some(f.setval2),
                    pg_sys::F_SETVAL_REGCLASS_INT8_BOOL => Some(f.setval3),
                    pg_sys::F_LASTVAL => Some(f.lastval),
                    _ => None,
                };
                if let Some(to) = to {
                    (*fe).funcid = to;
                }
            }
            T_TargetEntry => {
                let te = node as *mut pg_sys::TargetEntry;
                if is_next_value((*te).expr.cast()) {
                    (*te).expr = next_value_call(f, (*te).expr.cast());
                }
            }
            T_List => {
                // An identity default in a VALUES list.
                let l = node as *mut pg_sys::List;
                for i in 0..(*l).length as usize {
                    let cell = (*l).elements.add(i);
                    if is_next_value((*cell).ptr_value) {
                        (*cell).ptr_value = next_value_call(f, (*cell).ptr_value.cast()).cast();
                    }
                }
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(swap_walker), ctx)
    }
}

// ---------------------------------------------------------------- names

/// Object-access hook: a new sequence is recorded for the DDL log (or, replaying,
/// named another name of the origin's); a dropped one is forgotten at commit.
///
/// # Safety
/// Called only by PostgreSQL, as `object_access_hook`, with the arguments that
/// hook gets.
#[pg_guard]
unsafe extern "C-unwind" fn object_access(
    access: pg_sys::ObjectAccessType::Type,
    class: pg_sys::Oid,
    oid: pg_sys::Oid,
    sub: std::ffi::c_int,
    arg: *mut std::ffi::c_void,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if let Some(prev) = PREV_OBJECT_ACCESS.get().copied().flatten() {
            prev(access, class, oid, sub, arg);
        }
        let created = access == pg_sys::ObjectAccessType::OAT_POST_CREATE;
        let dropped = access == pg_sys::ObjectAccessType::OAT_DROP;
        if !(created || dropped) || class != pg_sys::RelationRelationId || sub != 0 || funcs().is_none() {
            return;
        }
        let rel = pg_sys::RelationIdGetRelation(oid);
        if rel.is_null() {
            return;
        }
        let r = (*rel).rd_rel;
        let sequence = (*r).relkind as u8 == pg_sys::RELKIND_SEQUENCE && (*r).relpersistence as u8 != pg_sys::RELPERSISTENCE_TEMP;
        let name = if sequence { Some(ddl::qualified_name(rel)) } else { None };
        pg_sys::RelationClose(rel);
        let Some(qualified) = name else {
            return;
        };
        let me = key(oid);
        if dropped {
            let subid = pg_sys::GetCurrentSubTransactionId();
            DROPPED.with(|d| d.borrow_mut().push((subid, me)));
        } else if let Some(existing) = ddl::record_or_replay(&qualified, &me) {
            call(me, SequenceOp::Alias { existing });
        }
    }
}

/// COMMIT: drop the cluster names of the sequences this transaction dropped.
pub fn commit() {
    let names: Vec<String> = DROPPED.with(|d| std::mem::take(&mut *d.borrow_mut())).into_iter().map(|(_, n)| n).collect();
    if names.is_empty() {
        return;
    }
    let Ok(client) = state::with(|b| b.client()) else {
        pgrx::warning!("pinax: could not reach the node to drop {} sequence(s)", names.len());
        return;
    };
    for n in names {
        if let Err(e) = client.call(Request::Sequence { name: n.clone(), op: SequenceOp::Drop }) {
            pgrx::warning!("pinax: could not drop cluster sequence {n}: {e}");
        }
    }
}

/// ABORT: keep every sequence.
pub fn abort() {
    DROPPED.with(|d| d.borrow_mut().clear());
}

/// Subtransaction `subid` rolled back: its drops did not happen.
pub fn subxact_aborted(subid: u32) {
    DROPPED.with(|d| d.borrow_mut().retain(|(id, _)| *id < subid));
}

/// Relcache invalidation of `relid` (0: all): held values of an altered or
/// dropped sequence are let go.
pub fn forget(relid: u32) {
    CACHES.with(|c| {
        let mut c = c.borrow_mut();
        if relid == 0 {
            c.clear();
        } else {
            c.remove(&relid);
        }
    });
}

/// Columns a COPY fills from a sequence: (attribute index, sequence, type).
type SequenceColumns = Vec<(usize, pg_sys::Oid, pg_sys::Oid)>;

thread_local! {
    /// COPY FROM into a Pinax table: its relation and the columns it fills from a
    /// sequence (serial or identity, not in its column list). COPY computes
    /// defaults without the planner, so with the node's own sequences; the table
    /// AM replaces those values (`fill_copy_defaults`).
    static COPY_DEFAULTS: RefCell<Option<(u32, SequenceColumns)>> = const { RefCell::new(None) };
}

/// The sequence a column default `expr` takes its value from: `nextval('s')`,
/// maybe under an implicit cast.
///
/// # Safety
/// `expr` must be a valid node (or null where checked).
unsafe fn default_sequence(expr: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut e = expr;
        for _ in 0..2 {
            if e.is_null() || (*e).type_ != pg_sys::NodeTag::T_FuncExpr {
                return None;
            }
            let fe = e as *mut pg_sys::FuncExpr;
            let args = (*fe).args;
            if (*fe).funcid.to_u32() == pg_sys::F_NEXTVAL {
                let a = if args.is_null() || (*args).length != 1 { return None } else { (*(*args).elements).ptr_value as *mut pg_sys::Node };
                if a.is_null() || (*a).type_ != pg_sys::NodeTag::T_Const || (*(a as *mut pg_sys::Const)).constisnull {
                    return None;
                }
                return Some(pg_sys::Oid::from((*(a as *mut pg_sys::Const)).constvalue.value() as u32));
            }
            if (*fe).funcformat != pg_sys::CoercionForm::COERCE_IMPLICIT_CAST || args.is_null() || (*args).length != 1 {
                return None;
            }
            e = (*(*args).elements).ptr_value as *mut pg_sys::Node;
        }
        None
    }
}

/// Before a utility statement: COPY FROM into a Pinax table notes its sequence
/// defaults (see `COPY_DEFAULTS`).
///
/// # Safety
/// `node` must be the statement's valid parse node.
pub unsafe fn before_utility(node: *mut pg_sys::Node) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        COPY_DEFAULTS.with(|c| *c.borrow_mut() = None);
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_CopyStmt || ddl::replaying() || funcs().is_none() {
            return;
        }
        let stmt = node as *mut pg_sys::CopyStmt;
        if !(*stmt).is_from || (*stmt).relation.is_null() {
            return;
        }
        let relid = relid_named((*stmt).relation);
        if relid.to_u32() == 0 {
            return;
        }
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return;
        }
        let mut listed: Vec<String> = Vec::new();
        let attlist = (*stmt).attlist;
        if !attlist.is_null() {
            for i in 0..(*attlist).length as usize {
                let s = (*(*attlist).elements.add(i)).ptr_value as *mut pg_sys::String;
                listed.push(CStr::from_ptr((*s).sval).to_string_lossy().into_owned());
            }
        }
        let mut cols = Vec::new();
        if crate::meta::is_pinax_table(rel) && !listed.is_empty() {
            let desc = (*rel).rd_att;
            for i in 0..(*desc).natts as usize {
                let att = (*desc).attrs.as_ptr().add(i);
                if (*att).attisdropped || (*att).attgenerated != 0 {
                    continue;
                }
                let name = CStr::from_ptr((*att).attname.data.as_ptr()).to_string_lossy();
                if listed.iter().any(|l| *l == name) {
                    continue;
                }
                let attnum = (i + 1) as pg_sys::AttrNumber;
                let seq = if (*att).attidentity != 0 {
                    Some(pg_sys::getIdentitySequence(relid, attnum, true))
                } else {
                    default_sequence(pg_sys::build_column_default(rel, attnum as i32))
                };
                if let Some(seq) = seq.filter(|s| s.to_u32() != 0 && cluster_sequence(*s)) {
                    cols.push((i, seq, (*att).atttypid));
                }
            }
        }
        pg_sys::RelationClose(rel);
        if !cols.is_empty() {
            COPY_DEFAULTS.with(|c| *c.borrow_mut() = Some((relid.to_u32(), cols)));
        }
    }
}

/// After a utility statement (whatever its outcome).
pub fn end_utility() {
    COPY_DEFAULTS.with(|c| *c.borrow_mut() = None);
}

/// A row COPY is inserting into `rel` (its values in `slot`, not yet a tuple):
/// its sequence-filled columns get the cluster sequence's values.
///
/// # Safety
/// `rel` and `slot` must be valid; `slot`'s attributes deformed.
pub unsafe fn fill_copy_defaults(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let cols = COPY_DEFAULTS.with(|c| match &*c.borrow() {
            Some((relid, cols)) if *relid == (*rel).rd_id.to_u32() => Some(cols.clone()),
            _ => None,
        });
        let Some(cols) = cols else {
            return;
        };
        if (*slot).tts_ops != &raw const pg_sys::TTSOpsHeapTuple {
            return;
        }
        for (i, seq, typ) in cols {
            let v = next_value(seq);
            let d = match typ {
                t if t == pg_sys::INT2OID => pg_sys::Datum::from(v as i16),
                t if t == pg_sys::INT4OID => pg_sys::Datum::from(v as i32),
                _ => pg_sys::Datum::from(v),
            };
            *(*slot).tts_values.add(i) = d;
            *(*slot).tts_isnull.add(i) = false;
        }
        // COPY materializes the slot for its batch: the tuple, which AFTER triggers
        // read, is formed again from the values.
        if !(*(slot as *mut pg_sys::HeapTupleTableSlot)).tuple.is_null() {
            let old = pg_sys::CurrentMemoryContext;
            pg_sys::CurrentMemoryContext = (*slot).tts_mcxt;
            let t = pg_sys::heap_form_tuple((*slot).tts_tupleDescriptor, (*slot).tts_values, (*slot).tts_isnull);
            pg_sys::CurrentMemoryContext = old;
            pg_sys::ExecForceStoreHeapTuple(t, slot, true);
            crate::tuple::slot_getallattrs(slot);
        }
    }
}

/// After a utility statement succeeded: ALTER SEQUENCE ... RESTART and TRUNCATE
/// ... RESTART IDENTITY restart the cluster's sequence too.
///
/// # Safety
/// `node` must be the statement's valid parse node.
pub unsafe fn after_utility(node: *mut pg_sys::Node) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if node.is_null() || ddl::replaying() || funcs().is_none() {
            return;
        }
        match (*node).type_ {
            pg_sys::NodeTag::T_AlterSeqStmt => {
                let stmt = node as *mut pg_sys::AlterSeqStmt;
                let opts = (*stmt).options;
                let mut restart: Option<Option<i64>> = None;
                if !opts.is_null() {
                    for i in 0..(*opts).length as usize {
                        let d = (*(*opts).elements.add(i)).ptr_value as *mut pg_sys::DefElem;
                        if CStr::from_ptr((*d).defname).to_bytes() == b"restart" {
                            restart = Some(if (*d).arg.is_null() { None } else { Some(pg_sys::defGetInt64(d)) });
                        }
                    }
                }
                let Some(value) = restart else {
                    return;
                };
                let relid = relid_named((*stmt).sequence);
                if relid.to_u32() != 0 {
                    restart_sequence(relid, value);
                }
            }
            pg_sys::NodeTag::T_TruncateStmt => {
                let stmt = node as *mut pg_sys::TruncateStmt;
                let rels = (*stmt).relations;
                if !(*stmt).restart_seqs || rels.is_null() {
                    return;
                }
                for i in 0..(*rels).length as usize {
                    let rv = (*(*rels).elements.add(i)).ptr_value as *mut pg_sys::RangeVar;
                    let relid = relid_named(rv);
                    if relid.to_u32() == 0 {
                        continue;
                    }
                    let seqs = pg_sys::getOwnedSequences(relid);
                    if seqs.is_null() {
                        continue;
                    }
                    for seq in crate::pg_list::list_oids(seqs) {
                        restart_sequence(seq, None);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Restart sequence `relid` at `value` (its START when `None`).
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn restart_sequence(relid: pg_sys::Oid, value: Option<i64>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if pg_sys::get_rel_persistence(relid) as u8 == pg_sys::RELPERSISTENCE_TEMP {
            return;
        }
        let Some(o) = options(relid) else {
            return;
        };
        call(key(relid), SequenceOp::Set { value: value.unwrap_or(o.start), is_called: false });
        forget(relid.to_u32());
    }
}

// ---------------------------------------------------------------- SQL functions

/// A pg_sequence row (FormData_pg_sequence, which pgrx does not bind).
#[repr(C)]
struct PgSequence {
    seqrelid: pg_sys::Oid,
    seqtypid: pg_sys::Oid,
    seqstart: i64,
    seqincrement: i64,
    seqmax: i64,
    seqmin: i64,
    seqcache: i64,
    seqcycle: bool,
}

struct Options {
    start: i64,
    increment: i64,
    max: i64,
    min: i64,
    cache: i64,
    cycle: bool,
}

/// A sequence's options (pg_sequence).
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn options(relid: pg_sys::Oid) -> Option<Options> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::SEQRELID as i32, pg_sys::Datum::from(relid));
        if tup.is_null() {
            return None;
        }
        let data = (*tup).t_data;
        let s = (data as *mut u8).add((*data).t_hoff as usize) as *const PgSequence;
        let o = Options { start: (*s).seqstart, increment: (*s).seqincrement, max: (*s).seqmax, min: (*s).seqmin, cache: (*s).seqcache, cycle: (*s).seqcycle };
        pg_sys::ReleaseSysCache(tup);
        Some(o)
    }
}

/// Argument `i` of the call `fcinfo`.
///
/// # Safety
/// `fcinfo` must be a valid function call.
unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> pg_sys::Datum {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { (*fcinfo).args.as_slice((*fcinfo).nargs as usize)[i].value }
}

/// The name of relation `relid` (its OID if it has none).
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
pub(crate) unsafe fn rel_name(relid: pg_sys::Oid) -> String {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let n = pg_sys::get_rel_name(relid);
        if n.is_null() {
            relid.to_u32().to_string()
        } else {
            CStr::from_ptr(n).to_string_lossy().into_owned()
        }
    }
}

/// Whether `relid` is a sequence this module serves (not temporary); anything
/// else goes to PostgreSQL's own function, which also reports "not a sequence".
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn cluster_sequence(relid: pg_sys::Oid) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { pg_sys::get_rel_relkind(relid) as u8 == pg_sys::RELKIND_SEQUENCE && pg_sys::get_rel_persistence(relid) as u8 != pg_sys::RELPERSISTENCE_TEMP }
}

/// Lock the sequence as PostgreSQL's functions do (against a concurrent DROP or
/// ALTER) and check the current user's privileges.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn open_checked(relid: pg_sys::Oid, mode: pg_sys::AclMode) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        pg_sys::LockRelationOid(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        if pg_sys::pg_class_aclcheck(relid, pg_sys::GetUserId(), mode) != pg_sys::AclResult::ACLCHECK_OK {
            error::raise_with(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, format!("permission denied for sequence {}", rel_name(relid)), None);
        }
    }
}

/// Write the cluster sequence's state as this node knows it into its local
/// relation (PostgreSQL's own setval: WAL-logged, not transactional), so that
/// `SELECT last_value, is_called FROM s`, `pg_sequences` and
/// `pg_sequence_last_value` show what nextval and setval did, as on stock
/// PostgreSQL. `as_owner`: with the bootstrap superuser's privileges (nextval
/// needs only USAGE, PostgreSQL's setval wants UPDATE); otherwise the caller's
/// were checked. Each SQL node's relation shows the values that node took.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn mirror(relid: pg_sys::Oid, value: i64, is_called: bool, as_owner: bool) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let (mut user, mut context) = (pg_sys::Oid::INVALID, 0);
        if as_owner {
            pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
            pg_sys::SetUserIdAndSecContext(pg_sys::Oid::from(pg_sys::BOOTSTRAP_SUPERUSERID), context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
        }
        // An error (raised through) ends the transaction, which restores the
        // user (AbortTransaction); on success it is restored here.
        let args = [Some(pg_sys::Datum::from(relid)), Some(pg_sys::Datum::from(value)), Some(pg_sys::Datum::from(is_called))];
        pgrx::fcinfo::direct_function_call_as_datum(pg_sys::setval3_oid, &args);
        if as_owner {
            pg_sys::SetUserIdAndSecContext(user, context);
        }
    }
}

fn remember(relid: u32, value: i64) {
    LAST.with(|l| l.borrow_mut().insert(relid, value));
    LAST_USED.with(|l| l.set(Some(relid)));
}

/// `pinax_nextval(regclass)`: nextval on the cluster's sequence.
///
/// # Safety
/// Called only by PostgreSQL, by the function manager, as the C function of its
/// SQL function, with a valid `fcinfo`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn pinax_nextval(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let relid = pg_sys::Oid::from(arg(fcinfo, 0).value() as u32);
        if !cluster_sequence(relid) {
            let d = pg_sys::nextval_oid(fcinfo);
            remember(relid.to_u32(), d.value() as i64);
            return d;
        }
        let value = next_value(relid);
        pg_sys::Datum::from(value)
    }
}

/// nextval of cluster sequence `relid`, with PostgreSQL's checks.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn next_value(relid: pg_sys::Oid) -> i64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        open_checked(relid, (pg_sys::ACL_USAGE | pg_sys::ACL_UPDATE) as pg_sys::AclMode);
        pg_sys::PreventCommandIfReadOnly(c"nextval()".as_ptr());
        pg_sys::PreventCommandIfParallelMode(c"nextval()".as_ptr());
        let id = relid.to_u32();
        let held = CACHES.with(|c| {
            let mut c = c.borrow_mut();
            let e = c.get_mut(&id).filter(|e| e.left > 0)?;
            let v = e.next;
            e.left -= 1;
            e.next = e.next.wrapping_add(e.increment);
            Some(v)
        });
        let value = match held {
            Some(v) => v,
            None => {
                let Some(o) = options(relid) else {
                    error::raise_with(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("cache lookup failed for sequence {id}"), None);
                };
                let count = o.cache.max(guc::sequence_cache_min() as i64).clamp(1, 1_000_000) as u32;
                let op = SequenceOp::Next { start: o.start, increment: o.increment, min: o.min, max: o.max, cycle: o.cycle, count };
                let (first, got) = match call(key(relid), op) {
                    Response::SequenceValues { first, count } => (first, count),
                    other => error::raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("unexpected answer to a sequence request: {other:?}"), None),
                };
                if got == 0 {
                    let (what, bound) = if o.increment > 0 { ("maximum", o.max) } else { ("minimum", o.min) };
                    error::raise_with(
                        PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                        format!("nextval: reached {what} value of sequence \"{}\" ({bound})", rel_name(relid)),
                        None,
                    );
                }
                CACHES.with(|c| c.borrow_mut().insert(id, Cached { next: first.wrapping_add(o.increment), left: got - 1, increment: o.increment }));
                // As PostgreSQL's nextval with a cache: the relation shows the
                // last value taken (this node's), called.
                mirror(relid, first.wrapping_add((got as i64 - 1).wrapping_mul(o.increment)), true, true);
                first
            }
        };
        remember(id, value);
        value
    }
}

/// `pinax_currval(regclass)`.
///
/// # Safety
/// Called only by PostgreSQL, by the function manager, as the C function of its
/// SQL function, with a valid `fcinfo`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn pinax_currval(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let relid = pg_sys::Oid::from(arg(fcinfo, 0).value() as u32);
        if !cluster_sequence(relid) {
            return pg_sys::currval_oid(fcinfo);
        }
        open_checked(relid, (pg_sys::ACL_SELECT | pg_sys::ACL_USAGE) as pg_sys::AclMode);
        match LAST.with(|l| l.borrow().get(&relid.to_u32()).copied()) {
            Some(v) => pg_sys::Datum::from(v),
            None => error::raise_with(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("currval of sequence \"{}\" is not yet defined in this session", rel_name(relid)),
                None,
            ),
        }
    }
}

/// `pinax_lastval()`.
///
/// # Safety
/// Called only by PostgreSQL, by the function manager, as the C function of its
/// SQL function, with a valid `fcinfo`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn pinax_lastval(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let not_yet =
            || -> ! { error::raise_with(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "lastval is not yet defined in this session", None) };
        let Some(id) = LAST_USED.with(Cell::get) else { not_yet() };
        let relid = pg_sys::Oid::from(id);
        if pg_sys::get_rel_relkind(relid) as u8 != pg_sys::RELKIND_SEQUENCE {
            not_yet(); // dropped since
        }
        open_checked(relid, (pg_sys::ACL_SELECT | pg_sys::ACL_USAGE) as pg_sys::AclMode);
        match LAST.with(|l| l.borrow().get(&id).copied()) {
            Some(v) => pg_sys::Datum::from(v),
            None => not_yet(),
        }
    }
}

/// `pinax_setval(regclass, bigint [, boolean])`.
///
/// # Safety
/// Called only by PostgreSQL, by the function manager, as the C function of its
/// SQL function, with a valid `fcinfo`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn pinax_setval(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let nargs = (*fcinfo).nargs;
        let relid = pg_sys::Oid::from(arg(fcinfo, 0).value() as u32);
        if !cluster_sequence(relid) {
            return if nargs == 3 { pg_sys::setval3_oid(fcinfo) } else { pg_sys::setval_oid(fcinfo) };
        }
        let value = arg(fcinfo, 1).value() as i64;
        let is_called = nargs < 3 || arg(fcinfo, 2).value() != 0;
        open_checked(relid, pg_sys::ACL_UPDATE as pg_sys::AclMode);
        pg_sys::PreventCommandIfReadOnly(c"setval()".as_ptr());
        pg_sys::PreventCommandIfParallelMode(c"setval()".as_ptr());
        let Some(o) = options(relid) else {
            error::raise_with(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("cache lookup failed for sequence {}", relid.to_u32()), None);
        };
        if value < o.min || value > o.max {
            error::raise_with(
                PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("setval: value {value} is out of bounds for sequence \"{}\" ({}..{})", rel_name(relid), o.min, o.max),
                None,
            );
        }
        call(key(relid), SequenceOp::Set { value, is_called });
        mirror(relid, value, is_called, false);
        forget(relid.to_u32());
        if is_called {
            LAST.with(|l| l.borrow_mut().insert(relid.to_u32(), value));
        }
        pg_sys::Datum::from(value)
    }
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_nextval() -> &'static pg_sys::Pg_finfo_record {
    &V1
}
#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_currval() -> &'static pg_sys::Pg_finfo_record {
    &V1
}
#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_lastval() -> &'static pg_sys::Pg_finfo_record {
    &V1
}
#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_setval() -> &'static pg_sys::Pg_finfo_record {
    &V1
}
const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };

pgrx::extension_sql!(
    r#"
CREATE FUNCTION pg_catalog.pinax_nextval(regclass) RETURNS bigint
    AS 'MODULE_PATHNAME', 'pinax_nextval' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION pg_catalog.pinax_currval(regclass) RETURNS bigint
    AS 'MODULE_PATHNAME', 'pinax_currval' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION pg_catalog.pinax_setval(regclass, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'pinax_setval' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION pg_catalog.pinax_setval(regclass, bigint, boolean) RETURNS bigint
    AS 'MODULE_PATHNAME', 'pinax_setval' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION pg_catalog.pinax_lastval() RETURNS bigint
    AS 'MODULE_PATHNAME', 'pinax_lastval' LANGUAGE C VOLATILE PARALLEL UNSAFE;
"#,
    name = "pinax_sequences"
);
