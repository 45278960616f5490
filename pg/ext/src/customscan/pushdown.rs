//! Filter pushdown: a sequential scan of a Pinax table sends the conditions of its
//! `WHERE` clause that the tablets can check to the tablets, which return only
//! the rows that may satisfy them (YugabyteDB's "remote filter").
//!
//! Planning (`set_rel_pathlist_hook`, `customscan/mod.rs`): for a Pinax table
//! with such conditions, a custom path (`PinaxScan`) is offered next to the
//! sequential scan, at a lower
//! cost (rows dropped in the tablets are never shipped or looked at here). Its plan
//! keeps the whole `WHERE` clause as its qual, which PostgreSQL checks on every row
//! that arrives, and lists the pushed conditions in `custom_exprs`; so the tablets
//! only ever pre-filter, and an answer cannot change (see `pinax_proto::filter`).
//!
//! What is pushed: `column OP value` where the value is a constant or a
//! parameter, for integers, floats, bool, text and varchar (equality under a
//! deterministic collation, order under "C"), bytea, date, timestamp(tz) and uuid
//! with their btree operators (`<`, `<=`, `=`, `>=`, `>`, `<>`); `column IS [NOT]
//! NULL`; `column IN (...)` and `column NOT IN (...)` lists of up to 100 values;
//! a bool column; and AND, OR, NOT of those. Values are taken when the scan
//! starts (again after a rescan: parameters of a nested loop change).
//!
//! Execution: PostgreSQL 15's custom-scan node; this file opens the table scan
//! (`table_beginscan`, which takes the same SERIALIZABLE range locks as a
//! sequential scan), hands the compiled filter to it (`am::table::set_filter`),
//! and returns its rows through `ExecScan`, so EvalPlanQual rechecks, row locks,
//! projections and the qual behave as for a sequential scan. EXPLAIN shows the
//! pushed conditions as "Storage Filter". `pinax.enable_filter_pushdown = off`
//! turns the path off.

use crate::am::table;
use crate::guc;
use crate::meta;
use crate::pg_list::list_ptrs;
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_proto::{canonical_float_key, AggFunc, AggSpec, AggValue, AttrLayout, CmpOp, FilterOp, FilterValue, GroupBy, RowFilter, MAX_FILTER_OPS};
use super::methods::{exec_methods, Methods};
use std::ffi::CStr;

const NAME: &CStr = c"PinaxScan";

static PATH_METHODS: Methods<pg_sys::CustomPathMethods> =
    Methods(pg_sys::CustomPathMethods { CustomName: NAME.as_ptr(), PlanCustomPath: Some(plan_path), ReparameterizeCustomPathByChild: None });

pub(super) static SCAN_METHODS: Methods<pg_sys::CustomScanMethods> = Methods(pg_sys::CustomScanMethods { CustomName: NAME.as_ptr(), CreateCustomScanState: Some(create_state) });

static EXEC_METHODS: Methods<pg_sys::CustomExecMethods> = exec_methods(NAME, begin, exec, end, rescan, explain);

/// Nesting of AND/OR/NOT pushed at most (deeper conditions stay in PostgreSQL).
const MAX_DEPTH: usize = 32;

unsafe fn tag(n: *mut pg_sys::Node) -> pg_sys::NodeTag {
    (*n).type_
}

/// `n` without binary-compatible casts (a varchar column compared as text).
unsafe fn strip_relabel(mut n: *mut pg_sys::Node) -> *mut pg_sys::Node {
    while !n.is_null() && tag(n) == pg_sys::NodeTag::T_RelabelType {
        n = (*(n as *mut pg_sys::RelabelType)).arg as *mut pg_sys::Node;
    }
    n
}

/// What a condition is built against: the scanned relation's range-table index
/// and row type.
struct Target {
    relid: i32,
    desc: pg_sys::TupleDesc,
}

impl Target {
    /// The 0-based attribute `n` (possibly under a relabel) reads, if it is a
    /// live column of the target.
    unsafe fn column(&self, n: *mut pg_sys::Node) -> Option<(u16, pg_sys::Oid)> {
        let n = strip_relabel(n);
        if n.is_null() || tag(n) != pg_sys::NodeTag::T_Var {
            return None;
        }
        let v = n as *mut pg_sys::Var;
        if (*v).varno != self.relid || (*v).varlevelsup != 0 || (*v).varattno <= 0 || (*v).varattno as i32 > (*self.desc).natts {
            return None;
        }
        let att = (*self.desc).attrs.as_ptr().add((*v).varattno as usize - 1);
        if (*att).attisdropped || (*att).atttypid != (*v).vartype {
            return None;
        }
        Some(((*v).varattno as u16 - 1, (*v).vartype))
    }
}

/// How a column's value is compared (see `pinax_proto::FilterValue`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Bool,
    Bytes,
    Uuid,
}

/// A condition ready to be instantiated when the scan starts.
enum Tmpl {
    Cmp { att: u16, op: CmpOp, kind: Kind, value: Value },
    /// `att OP ANY (array)` (`any`) or `att OP ALL (array)`.
    InList { att: u16, op: CmpOp, kind: Kind, array: *mut pg_sys::ExprState, elem_type: pg_sys::Oid, any: bool },
    IsNull { att: u16, negate: bool },
    And(Vec<Tmpl>),
    Or(Vec<Tmpl>),
    Not(Box<Tmpl>),
}

/// A comparison's other operand.
enum Value {
    /// Evaluated when the scan starts (a constant or a parameter), of this type.
    Expr(*mut pg_sys::ExprState, pg_sys::Oid),
    /// `true` (a bool column standing alone).
    True,
}

/// The btree operator family and value types a column of type `t` is compared
/// with, and how.
fn family_of(t: pg_sys::Oid) -> Option<(u32, Kind, &'static [pg_sys::Oid])> {
    use pg_sys::*;
    const INTS: &[Oid] = &[INT2OID, INT4OID, INT8OID];
    const FLOATS: &[Oid] = &[FLOAT4OID, FLOAT8OID];
    Some(match t {
        INT2OID | INT4OID | INT8OID => (1976, Kind::Int, INTS),
        FLOAT4OID | FLOAT8OID => (1970, Kind::Float, FLOATS),
        BOOLOID => (424, Kind::Bool, &[BOOLOID]),
        TEXTOID | VARCHAROID => (1994, Kind::Bytes, &[TEXTOID, VARCHAROID]),
        BYTEAOID => (428, Kind::Bytes, &[BYTEAOID]),
        DATEOID => (434, Kind::Int, &[DATEOID]),
        TIMESTAMPOID => (434, Kind::Int, &[TIMESTAMPOID]),
        TIMESTAMPTZOID => (434, Kind::Int, &[TIMESTAMPTZOID]),
        UUIDOID => (2968, Kind::Uuid, &[UUIDOID]),
        _ => return None,
    })
}

/// Whether text under collation `coll` orders byte-wise ("C").
unsafe fn collation_is_c(coll: pg_sys::Oid) -> bool {
    if coll == pg_sys::C_COLLATION_OID || coll == pg_sys::POSIX_COLLATION_OID {
        return true;
    }
    if coll == pg_sys::DEFAULT_COLLATION_OID {
        let lc = pg_sys::GetConfigOption(c"lc_collate".as_ptr(), true, false);
        return !lc.is_null() && matches!(CStr::from_ptr(lc).to_bytes(), b"C" | b"POSIX");
    }
    false
}

/// `node` as a condition the tablets can check, or None. With `ps` (executor),
/// value operands get their expression states.
unsafe fn build(node: *mut pg_sys::Node, t: &Target, ps: Option<*mut pg_sys::PlanState>, depth: usize) -> Option<Tmpl> {
    if node.is_null() || depth > MAX_DEPTH {
        return None;
    }
    match tag(node) {
        pg_sys::NodeTag::T_BoolExpr => {
            let b = node as *mut pg_sys::BoolExpr;
            let args: Option<Vec<Tmpl>> = list_ptrs::<pg_sys::Node>((*b).args).into_iter().map(|a| build(a, t, ps, depth + 1)).collect();
            let mut args = args?;
            match (*b).boolop {
                pg_sys::BoolExprType::AND_EXPR if !args.is_empty() => Some(Tmpl::And(args)),
                pg_sys::BoolExprType::OR_EXPR if !args.is_empty() => Some(Tmpl::Or(args)),
                pg_sys::BoolExprType::NOT_EXPR if args.len() == 1 => Some(Tmpl::Not(Box::new(args.pop()?))),
                _ => None,
            }
        }
        pg_sys::NodeTag::T_NullTest => {
            let n = node as *mut pg_sys::NullTest;
            if (*n).argisrow {
                return None;
            }
            let (att, _) = t.column((*n).arg as *mut pg_sys::Node)?;
            Some(Tmpl::IsNull { att, negate: (*n).nulltesttype == pg_sys::NullTestType::IS_NOT_NULL })
        }
        pg_sys::NodeTag::T_Var => {
            let (att, ty) = t.column(node)?;
            (ty == pg_sys::BOOLOID).then_some(Tmpl::Cmp { att, op: CmpOp::Eq, kind: Kind::Bool, value: Value::True })
        }
        pg_sys::NodeTag::T_OpExpr => {
            let op = node as *mut pg_sys::OpExpr;
            let args = list_ptrs::<pg_sys::Node>((*op).args);
            if args.len() != 2 {
                return None;
            }
            let (col, val, commuted) = match (t.column(args[0]), t.column(args[1])) {
                (Some(c), None) => (c, args[1], false),
                (None, Some(c)) => (c, args[0], true),
                _ => return None,
            };
            let val = strip_relabel(val);
            let (cmp, kind, val_type) = comparison((*op).opno, (*op).inputcollid, col.1, value_type(val)?, commuted)?;
            Some(Tmpl::Cmp { att: col.0, op: cmp, kind, value: Value::Expr(expr_state(val, ps), val_type) })
        }
        pg_sys::NodeTag::T_ScalarArrayOpExpr => {
            // column = ANY (array), column <> ALL (array): IN and NOT IN lists.
            let op = node as *mut pg_sys::ScalarArrayOpExpr;
            let args = list_ptrs::<pg_sys::Node>((*op).args);
            if args.len() != 2 {
                return None;
            }
            let (att, ty) = t.column(args[0])?;
            let arr = strip_relabel(args[1]);
            let elem_type = pg_sys::get_element_type(value_type(arr)?);
            if elem_type == pg_sys::InvalidOid {
                return None;
            }
            let (cmp, kind, elem_type) = comparison((*op).opno, (*op).inputcollid, ty, elem_type, false)?;
            Some(Tmpl::InList { att, op: cmp, kind, array: expr_state(arr, ps), elem_type, any: (*op).useOr })
        }
        _ => None,
    }
}

/// The type of a value operand (a constant or a parameter), or None.
unsafe fn value_type(val: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
    match tag(val) {
        pg_sys::NodeTag::T_Const => Some((*(val as *mut pg_sys::Const)).consttype),
        pg_sys::NodeTag::T_Param => Some((*(val as *mut pg_sys::Param)).paramtype),
        _ => None,
    }
}

/// The expression state of a value operand in the executor (`ps`); null when planning.
unsafe fn expr_state(val: *mut pg_sys::Node, ps: Option<*mut pg_sys::PlanState>) -> *mut pg_sys::ExprState {
    match ps {
        Some(ps) => pg_sys::ExecInitExpr(val as *mut pg_sys::Expr, ps),
        None => std::ptr::null_mut(),
    }
}

/// Operator `opno` (input collation `coll`) between a column of type `ty` and a
/// value of type `val_type` (value first when `commuted`), as the tablets compare
/// them: the comparison, how, and the value's type; None if they cannot.
unsafe fn comparison(opno: pg_sys::Oid, coll: pg_sys::Oid, ty: pg_sys::Oid, val_type: pg_sys::Oid, commuted: bool) -> Option<(CmpOp, Kind, pg_sys::Oid)> {
    let (family, kind, value_types) = family_of(ty)?;
    if !value_types.contains(&val_type) {
        return None;
    }
    let fam = pg_sys::Oid::from(family);
    let mut cmp = match pg_sys::get_op_opfamily_strategy(opno, fam) {
        1 => CmpOp::Lt,
        2 => CmpOp::Le,
        3 => CmpOp::Eq,
        4 => CmpOp::Ge,
        5 => CmpOp::Gt,
        _ => {
            let neg = pg_sys::get_negator(opno);
            if neg != pg_sys::InvalidOid && pg_sys::get_op_opfamily_strategy(neg, fam) == 3 {
                CmpOp::Ne
            } else {
                return None;
            }
        }
    };
    if commuted {
        cmp = match cmp {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Gt => CmpOp::Lt,
            c => c,
        };
    }
    if family == 1994 {
        // Text: byte equality is equality under a deterministic collation;
        // byte order is the order only under "C".
        let ok = match cmp {
            CmpOp::Eq | CmpOp::Ne => coll != pg_sys::InvalidOid && pg_sys::get_collation_isdeterministic(coll),
            _ => collation_is_c(coll),
        };
        if !ok {
            return None;
        }
    }
    Some((cmp, kind, val_type))
}

/// Most elements of an IN list pushed (longer lists stay in PostgreSQL).
const MAX_IN_LIST: usize = 100;

/// Append `tmpl`'s program to `out` with its values taken now; false if it cannot
/// be pushed this time (a NULL value: PostgreSQL decides such rows itself).
unsafe fn emit(tmpl: &Tmpl, econtext: *mut pg_sys::ExprContext, out: &mut Vec<FilterOp>, max_att: &mut u16) -> bool {
    match tmpl {
        Tmpl::Cmp { att, op, kind, value } => {
            *max_att = (*max_att).max(*att);
            let v = match value {
                Value::True => FilterValue::Bool(true),
                Value::Expr(state, ty) => match evaluate(*state, econtext, *kind, *ty) {
                    Some(v) => v,
                    None => return false,
                },
            };
            out.push(FilterOp::Cmp { att: *att, op: *op, value: v });
        }
        Tmpl::InList { att, op, kind, array, elem_type, any } => {
            *max_att = (*max_att).max(*att);
            let Some(values) = evaluate_array(*array, econtext, *kind, *elem_type) else { return false };
            let n = values.len();
            for v in values {
                out.push(FilterOp::Cmp { att: *att, op: *op, value: v });
            }
            out.push(if *any { FilterOp::Or(n as u16) } else { FilterOp::And(n as u16) });
        }
        Tmpl::IsNull { att, negate } => {
            *max_att = (*max_att).max(*att);
            out.push(FilterOp::IsNull { att: *att });
            if *negate {
                out.push(FilterOp::Not);
            }
        }
        Tmpl::And(args) | Tmpl::Or(args) => {
            for a in args {
                if !emit(a, econtext, out, max_att) {
                    return false;
                }
            }
            let n = args.len() as u16;
            out.push(if matches!(tmpl, Tmpl::And(_)) { FilterOp::And(n) } else { FilterOp::Or(n) });
        }
        Tmpl::Not(a) => {
            if !emit(a, econtext, out, max_att) {
                return false;
            }
            out.push(FilterOp::Not);
        }
    }
    true
}

/// Evaluate `state` in `econtext`'s per-tuple memory (`ExecEvalExprSwitchContext`)
/// and hand the result (value, is NULL) to `then`, still in that memory; None if
/// the expression has no evaluation function (nothing to evaluate).
unsafe fn eval_in_tuple_memory<T>(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext, then: impl FnOnce(pg_sys::Datum, bool) -> T) -> Option<T> {
    let eval = (*state).evalfunc?;
    let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_tuple_memory);
    let mut isnull = false;
    let d = eval(state, econtext, &mut isnull);
    let v = then(d, isnull);
    pg_sys::MemoryContextSwitchTo(old);
    Some(v)
}

/// The value of `state` (of type `ty`) as the tablets compare it; None if NULL.
unsafe fn evaluate(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext, kind: Kind, ty: pg_sys::Oid) -> Option<FilterValue> {
    eval_in_tuple_memory(state, econtext, |d, isnull| (!isnull).then(|| filter_value(d, kind, ty))).flatten()
}

/// The elements of the array `state` evaluates to (elements of type `ty`); None
/// if it or an element is NULL, it is empty or longer than `MAX_IN_LIST`.
unsafe fn evaluate_array(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext, kind: Kind, ty: pg_sys::Oid) -> Option<Vec<FilterValue>> {
    eval_in_tuple_memory(state, econtext, |d, isnull| {
        if isnull {
            return None;
        }
        let arr = pg_sys::pg_detoast_datum(d.cast_mut_ptr()) as *mut pg_sys::ArrayType;
        let (mut len, mut byval, mut align) = (0i16, false, 0 as std::ffi::c_char);
        pg_sys::get_typlenbyvalalign(ty, &mut len, &mut byval, &mut align);
        let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
        let mut nulls: *mut bool = std::ptr::null_mut();
        let mut n = 0i32;
        pg_sys::deconstruct_array(arr, ty, len as i32, byval, align, &mut elems, &mut nulls, &mut n);
        let n = n.max(0) as usize;
        (n > 0 && n <= MAX_IN_LIST && !(0..n).any(|i| *nulls.add(i))).then(|| (0..n).map(|i| filter_value(*elems.add(i), kind, ty)).collect())
    })
    .flatten()
}

/// Datum `d` of type `ty` as the tablets compare it.
unsafe fn filter_value(d: pg_sys::Datum, kind: Kind, ty: pg_sys::Oid) -> FilterValue {
    let raw = d.value();
    match kind {
        Kind::Int => FilterValue::Int(match ty {
            pg_sys::INT2OID => raw as i16 as i64,
            pg_sys::INT4OID | pg_sys::DATEOID => raw as i32 as i64,
            _ => raw as i64,
        }),
        Kind::Float => FilterValue::Float(if ty == pg_sys::FLOAT4OID { (f32::from_bits(raw as u32) as f64).to_bits() } else { raw as u64 }),
        Kind::Bool => FilterValue::Bool(raw != 0),
        Kind::Bytes => {
            let p = pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr());
            let bytes = std::slice::from_raw_parts(pgrx::varlena::vardata_any(p) as *const u8, pgrx::varlena::varsize_any_exhdr(p));
            FilterValue::Bytes(bytes.to_vec())
        }
        Kind::Uuid => FilterValue::Fixed(std::slice::from_raw_parts(d.cast_mut_ptr::<u8>(), 16).to_vec()),
    }
}

/// The executor state of a `PinaxScan` node.
#[repr(C)]
struct NodeState {
    css: pg_sys::CustomScanState,
    inner: *mut Inner,
    cb: pg_sys::MemoryContextCallback,
}

struct Inner {
    /// The pushed conditions (an implicit AND).
    conjuncts: Vec<Tmpl>,
    /// Every condition of the plan's qual is among them.
    all_pushed: bool,
    /// The filter was handed to the current table scan...
    filter_set: bool,
    /// ...and has every condition (none was left out for a NULL value).
    filter_complete: bool,
    /// The rows are only counted (`count_in_storage`).
    count_mode: bool,
    /// Count mode: matching rows counted by the tablets not yet handed out (None:
    /// not counted yet in this scan).
    counted_left: Option<u64>,
    /// Rows counted (count mode) or folded into aggregates by the tablets, in all
    /// scans (EXPLAIN ANALYZE).
    counted_total: u64,
    /// The aggregates the tablets compute for the plain aggregate above
    /// (`aggregate_in_storage`), and their names for EXPLAIN.
    aggs: Vec<PushedAgg>,
    agg_names: Vec<String>,
    /// The aggregate above groups by one column (a hashed aggregate).
    group: Option<Grouping>,
    /// Its groups, computed; and the next to return.
    group_rows: Vec<(Option<Vec<u8>>, Vec<AggValue>)>,
    /// What each group shows (by key): the stored bytes of one of its values.
    group_shown: std::collections::HashMap<Option<Vec<u8>>, Vec<u8>>,
    group_pos: usize,
}

/// `GROUP BY col` of an aggregate computed in storage.
struct Grouping {
    by: GroupBy,
    /// The column in the scan's output (1-based) and its type.
    out_att: usize,
    col_type: pg_sys::Oid,
    /// A slot of the scan's output type holding a group's key for the target list.
    slot: *mut pg_sys::TupleTableSlot,
}

/// An aggregate of the node above computed in storage.
#[derive(Clone, Copy)]
struct PushedAgg {
    spec: AggSpec,
    /// Where its value goes (`ecxt_aggvalues[aggno]`).
    aggno: usize,
    /// The column of the scan's output it reads (1-based; 0 for count(*)).
    out_att: usize,
    /// The type of that column.
    col_type: pg_sys::Oid,
    result: AggResult,
}

/// How a partial becomes PostgreSQL's result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AggResult {
    /// count: int8.
    Count,
    /// sum(int2/int4): int8.
    SumBigint,
    /// sum(int8): numeric.
    SumNumeric,
    /// avg(int2/int4/int8): numeric.
    AvgNumeric,
    /// sum(float4): float4; sum(float8): float8.
    SumFloat,
    /// avg(float4/float8): float8.
    AvgFloat,
    /// min, max: the column's type.
    Same,
}

impl Inner {
    /// The filter for a scan starting now, if any condition can be pushed; and
    /// whether all of them were.
    unsafe fn instantiate(&self, econtext: *mut pg_sys::ExprContext, desc: pg_sys::TupleDesc) -> (Option<RowFilter>, bool) {
        let mut ops = Vec::new();
        // Aggregates need the layout of what they read, even with no condition.
        let mut max_att = self.aggs.iter().map(|a| a.spec.att).max().unwrap_or(0);
        let mut n = 0u16;
        for c in &self.conjuncts {
            let mut part = Vec::new();
            let mut part_max = 0u16;
            if emit(c, econtext, &mut part, &mut part_max) && ops.len() + part.len() < MAX_FILTER_OPS {
                ops.extend(part);
                max_att = max_att.max(part_max);
                n += 1;
            }
        }
        let complete = n as usize == self.conjuncts.len();
        if n == 0 && self.aggs.is_empty() {
            return (None, complete);
        }
        if n > 1 {
            ops.push(FilterOp::And(n));
        }
        let attrs = (0..=max_att as usize)
            .map(|i| {
                let (len, align) = crate::tuple::attr_layout(desc, i);
                AttrLayout { len, align }
            })
            .collect();
        (Some(RowFilter { attrs, ops }), complete)
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn free_inner(arg: *mut std::ffi::c_void) {
    let s = arg as *mut NodeState;
    if !(*s).inner.is_null() {
        drop(Box::from_raw((*s).inner));
        (*s).inner = std::ptr::null_mut();
    }
}

/// After PostgreSQL's paths for base relation `rel` (`set_rel_pathlist_hook`,
/// `customscan/mod.rs`): the `PinaxScan` path, when it applies (module header).
///
/// # Safety
/// The arguments of `set_rel_pathlist_hook`, while planning.
pub(super) unsafe fn add_path(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, rte: *mut pg_sys::RangeTblEntry) {
    if !guc::enable_filter_pushdown() || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION || (*rte).inh || (*rte).relkind as u8 != pg_sys::RELKIND_RELATION {
        return;
    }
    // A plain aggregate, or one grouped by one column, over this table alone may
    // be computed in the tablets (`aggregate_in_storage`): offered even without
    // conditions to push.
    let parse = (*root).parse;
    let lone_aggregate = (*parse).hasAggs
        && pg_sys::list_length((*parse).groupClause) <= 1
        && (*parse).groupingSets.is_null()
        && !(*parse).hasWindowFuncs
        && pg_sys::bms_num_members((*root).all_baserels) == 1;
    if (*rel).baserestrictinfo.is_null() && !lone_aggregate {
        return;
    }
    // The sequential scan this path competes with (none: not a plain table scan).
    let Some(seq) = list_ptrs::<pg_sys::Path>((*rel).pathlist).into_iter().find(|p| (**p).pathtype == pg_sys::NodeTag::T_SeqScan && (**p).param_info.is_null()) else {
        return;
    };
    let r = pg_sys::table_open((*rte).relid, pg_sys::NoLock as pg_sys::LOCKMODE);
    let mut pushed: *mut pg_sys::List = std::ptr::null_mut();
    let pinax = meta::is_pinax_table(r);
    if pinax {
        let t = Target { relid: (*rel).relid as i32, desc: (*r).rd_att };
        for ri in list_ptrs::<pg_sys::RestrictInfo>((*rel).baserestrictinfo) {
            let clause = (*ri).clause as *mut pg_sys::Node;
            if !(*ri).pseudoconstant && build(clause, &t, None, 0).is_some() {
                pushed = pg_sys::lappend(pushed, pg_sys::copyObjectImpl(clause.cast()));
            }
        }
    }
    pg_sys::table_close(r, pg_sys::NoLock as pg_sys::LOCKMODE);
    if !pinax || (pushed.is_null() && !lone_aggregate) {
        return;
    }
    let cp = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
    (*cp).path.type_ = pg_sys::NodeTag::T_CustomPath;
    (*cp).path.pathtype = pg_sys::NodeTag::T_CustomScan;
    (*cp).path.parent = rel;
    (*cp).path.pathtarget = (*rel).reltarget;
    (*cp).path.rows = (*seq).rows;
    (*cp).path.startup_cost = (*seq).startup_cost;
    // Rows the tablets drop are neither shipped nor looked at here; and the path
    // is never worse than the plain scan (it reads the same), so it is also made
    // cheaper by more than add_path's fuzz when the conditions drop little.
    let dropped = ((*rel).tuples - (*seq).rows).max(0.0);
    (*cp).path.total_cost = ((*seq).total_cost * 0.98 - dropped * pg_sys::cpu_tuple_cost).max((*seq).startup_cost);
    (*cp).custom_private = pushed;
    (*cp).methods = &PATH_METHODS.0;
    pg_sys::add_path(rel, cp as *mut pg_sys::Path);
}

#[pg_guard]
unsafe extern "C-unwind" fn plan_path(
    _root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    best: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    clauses: *mut pg_sys::List,
    _custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    let cs = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
    (*cs).scan.plan.type_ = pg_sys::NodeTag::T_CustomScan;
    (*cs).scan.plan.targetlist = tlist;
    // Every condition stays PostgreSQL's to check: the tablets only pre-filter.
    (*cs).scan.plan.qual = pg_sys::extract_actual_clauses(clauses, false);
    (*cs).scan.scanrelid = (*rel).relid;
    (*cs).flags = (*best).flags;
    (*cs).custom_exprs = (*best).custom_private;
    (*cs).methods = &SCAN_METHODS.0;
    cs as *mut pg_sys::Plan
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(_cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    let s = pg_sys::palloc0(std::mem::size_of::<NodeState>()) as *mut NodeState;
    (*s).css.ss.ps.type_ = pg_sys::NodeTag::T_CustomScanState;
    (*s).css.methods = &EXEC_METHODS.0;
    s as *mut pg_sys::Node
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, eflags: i32) {
    let rel = (*node).ss.ss_currentRelation;
    let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
    // PostgreSQL 15 gives a custom scan a virtual scan slot; rows of the table come
    // as heap tuples, as to a sequential scan: use that slot kind, and build the
    // projection and the qual again for it.
    pg_sys::ExecInitScanTupleSlot(estate, &mut (*node).ss, (*rel).rd_att, pg_sys::table_slot_callbacks(rel));
    pg_sys::ExecAssignScanProjectionInfoWithVarno(&mut (*node).ss, (*cscan).scan.scanrelid as i32);
    (*node).ss.ps.qual = pg_sys::ExecInitQual((*cscan).scan.plan.qual, node as *mut pg_sys::PlanState);
    // EXPLAIN alone: the conditions' values are never taken (no expression states).
    let ps = (eflags as u32 & pg_sys::EXEC_FLAG_EXPLAIN_ONLY == 0).then_some(node as *mut pg_sys::PlanState);
    let t = Target { relid: (*cscan).scan.scanrelid as i32, desc: (*rel).rd_att };
    let exprs = list_ptrs::<pg_sys::Node>((*cscan).custom_exprs);
    let conjuncts: Vec<Tmpl> = exprs.iter().filter_map(|e| build(*e, &t, ps, 0)).collect();
    let all_pushed = conjuncts.len() == exprs.len() && exprs.len() == pg_sys::list_length((*cscan).scan.plan.qual) as usize;
    let s = node as *mut NodeState;
    let inner = Inner {
        conjuncts,
        all_pushed,
        filter_set: false,
        filter_complete: false,
        count_mode: false,
        counted_left: None,
        counted_total: 0,
        aggs: Vec::new(),
        agg_names: Vec::new(),
        group: None,
        group_rows: Vec::new(),
        group_shown: std::collections::HashMap::new(),
        group_pos: 0,
    };
    (*s).inner = Box::into_raw(Box::new(inner));
    (*s).cb.func = Some(free_inner);
    (*s).cb.arg = s.cast();
    pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*s).cb);
}

/// Have the rows of scan node `node` (under a plain aggregate that reads none of
/// its columns: `count(*) WHERE ...`) counted by the tablets, when every condition
/// of its qual is pushed and it outputs plain columns: then a matching row needs
/// nothing evaluated here. Rows the filter cannot decide still come and go
/// through the qual. Called from the ExecutorStart hook's walk (`index_only.rs`).
/// Returns whether the node counts.
///
/// # Safety
/// `node` must be an initialized custom scan state.
pub unsafe fn count_in_storage(node: *mut pg_sys::CustomScanState) -> bool {
    if (*node).methods != &EXEC_METHODS.0 {
        return false;
    }
    match (*(node as *mut NodeState)).inner.as_mut() {
        Some(inner) => {
            inner.count_mode = inner.all_pushed && crate::am::index_only::outputs_plain_columns(&mut (*node).ss);
            inner.count_mode
        }
        None => false,
    }
}

/// The aggregate function `fnoid` over a column of type `ty`, if the tablets can
/// compute it: what they compute, and how its result is made.
fn pushable_aggregate(fnoid: u32, ty: pg_sys::Oid) -> Option<(AggFunc, AggResult)> {
    use pg_sys::{DATEOID, FLOAT4OID, FLOAT8OID, INT2OID, INT4OID, INT8OID, TIMESTAMPOID, TIMESTAMPTZOID};
    let is_int = matches!(ty, INT2OID | INT4OID | INT8OID);
    let is_float = matches!(ty, FLOAT4OID | FLOAT8OID);
    // Stored and ordered as integers (min and max only).
    let is_time = matches!(ty, DATEOID | TIMESTAMPOID | TIMESTAMPTZOID);
    Some(match fnoid {
        2803 => (AggFunc::CountRows, AggResult::Count),   // count(*)
        2147 => (AggFunc::CountValues, AggResult::Count), // count(any)
        2108 | 2109 if is_int => (AggFunc::SumInt, AggResult::SumBigint),
        2107 if is_int => (AggFunc::SumInt, AggResult::SumNumeric),
        2100..=2102 if is_int => (AggFunc::SumInt, AggResult::AvgNumeric),
        2110 if ty == FLOAT4OID => (AggFunc::SumFloat4, AggResult::SumFloat),
        2111 if is_float => (AggFunc::SumFloat8, AggResult::SumFloat),
        2104 | 2105 if is_float => (AggFunc::SumFloat8, AggResult::AvgFloat),
        2115..=2117 if is_int => (AggFunc::MaxInt, AggResult::Same),
        2131..=2133 if is_int => (AggFunc::MinInt, AggResult::Same),
        2119 | 2120 if is_float => (AggFunc::MaxFloat, AggResult::Same),
        2122 | 2126 | 2127 if is_time => (AggFunc::MaxInt, AggResult::Same),
        2138 | 2142 | 2143 if is_time => (AggFunc::MinInt, AggResult::Same),
        2135 | 2136 if is_float => (AggFunc::MinFloat, AggResult::Same),
        _ => return None,
    })
}

/// Whether `aggref` is an ordinary call of an aggregate: no FILTER, DISTINCT,
/// ORDER BY, direct arguments or VARIADIC, of this query level, not split.
unsafe fn is_plain_aggref(aggref: *mut pg_sys::Aggref) -> bool {
    !aggref.is_null()
        && (*aggref).aggfilter.is_null()
        && (*aggref).aggdistinct.is_null()
        && (*aggref).aggorder.is_null()
        && (*aggref).aggdirectargs.is_null()
        && !(*aggref).aggvariadic
        && (*aggref).agglevelsup == 0
        && (*aggref).aggsplit == pg_sys::AggSplit::AGGSPLIT_SIMPLE
        && (*aggref).aggkind as u8 == b'n'
}

/// `count(*)`'s function.
const COUNT_STAR: u32 = 2803;

/// Have plain aggregate node `agg`, whose aggregates are all `count(*)` and which
/// reads no column of its input, return its one row from the number of rows its
/// child has ([`exec_count_agg`]) rather than run its transition on every row:
/// the child counts in the tablets (`count_in_storage`, or a sequential or
/// index-only scan only counted, see `index_only.rs`) and hands over just that
/// number, and the rows the tablets could not decide are still read from it
/// (through its qual) and counted one by one. Returns whether it did. Called from the ExecutorStart
/// hook's walk (`index_only.rs`), after the child was put in count mode.
///
/// # Safety
/// `agg` must be an initialized aggregate state whose child is a Pinax scan
/// node (this file's custom scan, a sequential scan only counted, or an
/// index-only scan of a Pinax index).
pub unsafe fn count_rows_in_storage(agg: *mut pg_sys::AggState) -> bool {
    let plan = (*agg).ss.ps.plan as *mut pg_sys::Agg;
    if (*plan).aggstrategy != pg_sys::AggStrategy::AGG_PLAIN || (*plan).numCols != 0 || !(*plan).groupingSets.is_null() || (*agg).numaggs < 1 {
        return false;
    }
    let count_star = |i: usize| {
        let aggref = (*(*agg).peragg.add(i)).aggref;
        is_plain_aggref(aggref) && (*aggref).aggfnoid.to_u32() == COUNT_STAR
    };
    if !(0..(*agg).numaggs as usize).all(count_star) {
        return false;
    }
    pg_sys::ExecSetExecProcNode(agg as *mut pg_sys::PlanState, Some(exec_count_agg));
    true
}

/// How many rows of custom scan node `node` its tablets counted (in count mode,
/// with every condition pushed; else 0), taken once per scan: the node then
/// returns only the rows the tablets could not decide.
unsafe fn take_count(node: *mut pg_sys::CustomScanState) -> u64 {
    if (*node).methods != &EXEC_METHODS.0 {
        return 0;
    }
    let ss = &mut (*node).ss as *mut pg_sys::ScanState;
    let Some(inner) = (*(node as *mut NodeState)).inner.as_mut() else { return 0 };
    match counted_left(ss, inner) {
        Some(n) => {
            inner.counted_left = Some(0);
            n
        }
        None => 0,
    }
}

/// In count mode with every condition pushed: the matching rows the tablets
/// counted that the node has not handed out yet (counted once per scan). None
/// when the node does not count: its rows all come through the qual.
unsafe fn counted_left(ss: *mut pg_sys::ScanState, inner: &mut Inner) -> Option<u64> {
    if !inner.count_mode {
        return None;
    }
    let scan = start(ss, inner);
    if !inner.filter_complete {
        return None;
    }
    Some(match inner.counted_left {
        Some(n) => n,
        None => {
            let n = table::count_matching(scan);
            inner.counted_total += n;
            n
        }
    })
}

/// A plain aggregate of `count(*)` only ([`count_rows_in_storage`]): its one row.
#[pg_guard]
unsafe extern "C-unwind" fn exec_count_agg(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    let agg = ps as *mut pg_sys::AggState;
    let Some(child) = plain_agg_child(ps) else { return std::ptr::null_mut() };
    let mut n = match (*child).type_ {
        pg_sys::NodeTag::T_CustomScanState => take_count(child as *mut pg_sys::CustomScanState),
        pg_sys::NodeTag::T_SeqScanState => crate::am::index_only::take_count(child as *mut pg_sys::SeqScanState),
        pg_sys::NodeTag::T_IndexOnlyScanState => crate::am::index_only::take_index_count(child as *mut pg_sys::IndexOnlyScanState),
        _ => 0,
    };
    for_each_shipped_row(child, |_| n += 1);
    let econtext = (*ps).ps_ExprContext;
    for i in 0..(*agg).numaggs as usize {
        let aggno = (*(*(*agg).peragg.add(i)).aggref).aggno as usize;
        *(*econtext).ecxt_aggvalues.add(aggno) = pg_sys::Datum::from(n as i64);
        *(*econtext).ecxt_aggnulls.add(aggno) = false;
    }
    plain_agg_row(ps, child)
}

/// The child of plain aggregate node `ps`, rescanned first if its parameters
/// changed; None once the node has returned its row.
unsafe fn plain_agg_child(ps: *mut pg_sys::PlanState) -> Option<*mut pg_sys::PlanState> {
    if (*(ps as *mut pg_sys::AggState)).agg_done {
        return None;
    }
    let child = (*ps).lefttree;
    if !(*child).chgParam.is_null() {
        pg_sys::ExecReScan(child);
    }
    Some(child)
}

/// Plain aggregate node `ps`'s one row, its aggregates' values set: HAVING, then
/// the target list (`project_aggregates`). The node reads no column of its input
/// outside the aggregates: an all-NULL input row.
unsafe fn plain_agg_row(ps: *mut pg_sys::PlanState, child: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    (*(ps as *mut pg_sys::AggState)).agg_done = true;
    let econtext = (*ps).ps_ExprContext;
    let input = if (*child).ps_ProjInfo.is_null() { (*(child as *mut pg_sys::ScanState)).ss_ScanTupleSlot } else { (*child).ps_ResultTupleSlot };
    (*econtext).ecxt_outertuple = pg_sys::ExecStoreAllNullTuple(input);
    if !(*ps).qual.is_null() && !eval_bool((*ps).qual, econtext) {
        return std::ptr::null_mut();
    }
    project((*ps).ps_ProjInfo)
}

/// Have the tablets compute the aggregates of plain aggregate node `agg` over
/// scan node `child`, when every condition of the scan is pushed, it outputs
/// plain columns, and every aggregate is `count`, or `sum`, `avg`, `min`, `max` of
/// an integer or float column (`min`, `max` also of date and time stamps), with no
/// FILTER, DISTINCT or ORDER BY. The node
/// then returns its one row from the partials (`exec_agg`) and the scan ships
/// only rows the tablets could not decide or fold. Called from the ExecutorStart
/// hook's walk (`index_only.rs`).
///
/// # Safety
/// `agg` must be an initialized plain aggregate state whose child is `child`.
pub unsafe fn aggregate_in_storage(agg: *mut pg_sys::AggState, child: *mut pg_sys::CustomScanState) {
    let plan = (*agg).ss.ps.plan as *mut pg_sys::Agg;
    if (*child).methods != &EXEC_METHODS.0 || !(*plan).groupingSets.is_null() {
        return;
    }
    let hashed = (*plan).aggstrategy == pg_sys::AggStrategy::AGG_HASHED;
    if !hashed && ((*plan).aggstrategy != pg_sys::AggStrategy::AGG_PLAIN || (*plan).numCols != 0) {
        return;
    }
    if hashed && (*plan).numCols != 1 {
        return;
    }
    let Some(inner) = (*(child as *mut NodeState)).inner.as_mut() else { return };
    if !inner.all_pushed || !crate::am::index_only::outputs_plain_columns(&mut (*child).ss) {
        return;
    }
    let tlist = list_ptrs::<pg_sys::TargetEntry>((*(*child).ss.ps.plan).targetlist);
    let desc = (*(*child).ss.ss_currentRelation).rd_att;
    let mut pushed = Vec::new();
    let mut names = Vec::new();
    for i in 0..(*agg).numaggs as usize {
        let aggref = (*(*agg).peragg.add(i)).aggref;
        if !is_plain_aggref(aggref) {
            return;
        }
        let args = list_ptrs::<pg_sys::TargetEntry>((*aggref).args);
        let fname = CStr::from_ptr(pg_sys::get_func_name((*aggref).aggfnoid)).to_string_lossy().into_owned();
        let (out_att, att, ty) = match args.as_slice() {
            [] => (0, 0u16, pg_sys::InvalidOid),
            [te] => {
                // An output column of the scan that is a column of the table.
                let v = (**te).expr as *mut pg_sys::Node;
                if v.is_null() || tag(v) != pg_sys::NodeTag::T_Var || (*(v as *mut pg_sys::Var)).varno != pg_sys::OUTER_VAR {
                    return;
                }
                let k = (*(v as *mut pg_sys::Var)).varattno as usize;
                let Some(out) = k.checked_sub(1).and_then(|j| tlist.get(j)) else { return };
                let col = (**out).expr as *mut pg_sys::Var;
                if col.is_null() || tag(col as *mut pg_sys::Node) != pg_sys::NodeTag::T_Var || (*col).varattno <= 0 {
                    return;
                }
                (k, (*col).varattno as u16 - 1, (*col).vartype)
            }
            _ => return,
        };
        let Some((func, result)) = pushable_aggregate((*aggref).aggfnoid.to_u32(), ty) else { return };
        let col = if out_att == 0 {
            "*".to_string()
        } else {
            CStr::from_ptr((*(*desc).attrs.as_ptr().add(att as usize)).attname.data.as_ptr()).to_string_lossy().into_owned()
        };
        names.push(format!("{fname}({col})"));
        pushed.push(PushedAgg { spec: AggSpec { func, att }, aggno: (*aggref).aggno as usize, out_att, col_type: ty, result });
    }
    if pushed.is_empty() {
        return;
    }
    if hashed {
        // One grouping column: a column of the table, of a type whose equal
        // values have equal stored bytes (floats made canonical), under a
        // deterministic collation.
        let k = *(*plan).grpColIdx as usize;
        let Some(out) = k.checked_sub(1).and_then(|j| tlist.get(j)) else { return };
        let col = (**out).expr as *mut pg_sys::Var;
        if col.is_null() || tag(col as *mut pg_sys::Node) != pg_sys::NodeTag::T_Var || (*col).varattno <= 0 {
            return;
        }
        let ty = (*col).vartype;
        use pg_sys::*;
        let float = matches!(ty, FLOAT4OID | FLOAT8OID);
        if !float && !matches!(ty, INT2OID | INT4OID | INT8OID | BOOLOID | DATEOID | TIMESTAMPOID | TIMESTAMPTZOID | UUIDOID | TEXTOID | VARCHAROID | BYTEAOID) {
            return;
        }
        let coll = *(*plan).grpCollations;
        if matches!(ty, TEXTOID | VARCHAROID) && (coll == InvalidOid || !get_collation_isdeterministic(coll)) {
            return;
        }
        let att = (*col).varattno as u16 - 1;
        let desc = pg_sys::ExecGetResultType(child as *mut pg_sys::PlanState);
        let slot = pg_sys::ExecInitExtraTupleSlot((*agg).ss.ps.state, desc, &pg_sys::TTSOpsVirtual);
        let colname = CStr::from_ptr((*(*(*(*child).ss.ss_currentRelation).rd_att).attrs.as_ptr().add(att as usize)).attname.data.as_ptr()).to_string_lossy().into_owned();
        names.push(format!("grouped by {colname}"));
        inner.group = Some(Grouping { by: GroupBy { att, float }, out_att: k, col_type: ty, slot });
        // (A layout for the grouping column: the filter's attributes reach it.)
        pushed.push(PushedAgg { spec: AggSpec { func: AggFunc::CountValues, att }, aggno: usize::MAX, out_att: k, col_type: ty, result: AggResult::Count });
    }
    inner.aggs = pushed;
    inner.agg_names = names;
    pg_sys::ExecSetExecProcNode(agg as *mut pg_sys::PlanState, Some(if hashed { exec_group } else { exec_agg }));
}

/// The group key of value `d` of type `ty` (as the tablets store it, floats made
/// canonical), and its stored bytes.
unsafe fn group_key_of(d: pg_sys::Datum, ty: pg_sys::Oid, float: bool) -> (Vec<u8>, Vec<u8>) {
    let raw = d.value();
    let b = match ty {
        pg_sys::INT2OID => (raw as i16).to_le_bytes().to_vec(),
        pg_sys::INT4OID | pg_sys::DATEOID => (raw as i32).to_le_bytes().to_vec(),
        pg_sys::FLOAT4OID => (raw as u32).to_le_bytes().to_vec(),
        pg_sys::BOOLOID => vec![(raw != 0) as u8],
        pg_sys::UUIDOID => std::slice::from_raw_parts(d.cast_mut_ptr::<u8>(), 16).to_vec(),
        pg_sys::TEXTOID | pg_sys::VARCHAROID | pg_sys::BYTEAOID => {
            let p = pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr());
            std::slice::from_raw_parts(pgrx::varlena::vardata_any(p) as *const u8, pgrx::varlena::varsize_any_exhdr(p)).to_vec()
        }
        _ => (raw as i64).to_le_bytes().to_vec(),
    };
    if float {
        (canonical_float_key(&b), b)
    } else {
        (b.clone(), b)
    }
}

/// The datum of group key `key` of type `ty` (allocated in the current memory
/// context when by reference).
unsafe fn group_datum(key: &[u8], ty: pg_sys::Oid) -> pg_sys::Datum {
    let n = |k: usize| -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..k.min(key.len())].copy_from_slice(&key[..k.min(key.len())]);
        b
    };
    match ty {
        pg_sys::INT2OID => pg_sys::Datum::from(i16::from_le_bytes([n(2)[0], n(2)[1]])),
        pg_sys::INT4OID | pg_sys::DATEOID => pg_sys::Datum::from(i32::from_le_bytes(n(4)[..4].try_into().unwrap_or_default())),
        pg_sys::FLOAT4OID => pg_sys::Datum::from(u32::from_le_bytes(n(4)[..4].try_into().unwrap_or_default()) as usize),
        pg_sys::BOOLOID => pg_sys::Datum::from(key.first().is_some_and(|b| *b != 0)),
        pg_sys::UUIDOID => {
            let p = pg_sys::palloc(16) as *mut u8;
            std::ptr::copy_nonoverlapping(key.as_ptr(), p, key.len().min(16));
            pg_sys::Datum::from(p)
        }
        pg_sys::TEXTOID | pg_sys::VARCHAROID | pg_sys::BYTEAOID => pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(key.as_ptr() as *const std::ffi::c_char, key.len() as i32)),
        _ => pg_sys::Datum::from(i64::from_le_bytes(n(8))),
    }
}

/// A hashed aggregate's rows, one per group (`agg_retrieve_hash_table`), from the
/// groups the tablets computed and the rows they shipped (checked by the scan's
/// qual and folded here). Its rescans always rebuild the groups: the node's
/// `hash_ever_spilled` is set, so `ExecReScanAgg` never just re-reads
/// PostgreSQL's (unused) hash table.
#[pg_guard]
unsafe extern "C-unwind" fn exec_group(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    let agg = ps as *mut pg_sys::AggState;
    if (*agg).agg_done {
        return std::ptr::null_mut();
    }
    let child = (*ps).lefttree;
    let ss = child as *mut pg_sys::ScanState;
    let Some(inner) = (*(child as *mut NodeState)).inner.as_mut() else { return std::ptr::null_mut() };
    let Some(g) = inner.group.as_ref() else { return std::ptr::null_mut() };
    let (by, out_att, col_type, key_slot) = (g.by, g.out_att, g.col_type, g.slot);
    // The aggregates proper (the last entry only gives the grouping column a layout).
    let pushed: Vec<PushedAgg> = inner.aggs.iter().filter(|p| p.aggno != usize::MAX).copied().collect();
    if !(*agg).table_filled {
        if !(*child).chgParam.is_null() {
            pg_sys::ExecReScan(child);
        }
        let all_specs: Vec<AggSpec> = inner.aggs.iter().map(|p| p.spec).collect();
        let scan = start(ss, inner);
        let mut groups: std::collections::HashMap<Option<Vec<u8>>, Vec<AggValue>> = std::collections::HashMap::new();
        let mut shown = std::collections::HashMap::new();
        if inner.filter_complete {
            let a = table::aggregate(scan, &all_specs, Some(by));
            inner.counted_total += a.folded;
            for grp in a.groups {
                shown.insert(grp.key.clone(), grp.shown);
                groups.insert(grp.key, grp.values);
            }
        }
        for_each_shipped_row(child, |slot| {
            let mut isnull = false;
            let d = pg_sys::slot_getattr(slot, out_att as i32, &mut isnull);
            let (key, value) = if isnull { (None, Vec::new()) } else { let (k, v) = group_key_of(d, col_type, by.float); (Some(k), v) };
            shown.entry(key.clone()).or_insert(value);
            let acc = groups.entry(key).or_insert_with(|| inner.aggs.iter().map(|p| p.spec.func.empty()).collect());
            for (p, a) in inner.aggs.iter().zip(acc.iter_mut()) {
                fold_slot(p, slot, a);
            }
        });
        inner.group_rows = groups.into_iter().collect();
        inner.group_shown = shown;
        inner.group_pos = 0;
        (*agg).table_filled = true;
        (*agg).hash_ever_spilled = true;
    }
    let econtext = (*ps).ps_ExprContext;
    while inner.group_pos < inner.group_rows.len() {
        let (key, acc) = &inner.group_rows[inner.group_pos];
        inner.group_pos += 1;
        for (p, a) in pushed.iter().zip(acc.iter()) {
            let (d, isnull) = finalize(p, a);
            *(*econtext).ecxt_aggvalues.add(p.aggno) = d;
            *(*econtext).ecxt_aggnulls.add(p.aggno) = isnull;
        }
        // The group's key in the column the target list reads; the others NULL.
        pg_sys::ExecClearTuple(key_slot);
        let natts = (*(*key_slot).tts_tupleDescriptor).natts as usize;
        for i in 0..natts {
            *(*key_slot).tts_isnull.add(i) = true;
        }
        if key.is_some() {
            let value = inner.group_shown.get(key).map(|v| v.as_slice()).unwrap_or_default();
            *(*key_slot).tts_values.add(out_att - 1) = group_datum(value, col_type);
            *(*key_slot).tts_isnull.add(out_att - 1) = false;
        }
        pg_sys::ExecStoreVirtualTuple(key_slot);
        (*econtext).ecxt_outertuple = key_slot;
        if !(*ps).qual.is_null() && !eval_bool((*ps).qual, econtext) {
            continue;
        }
        return project((*ps).ps_ProjInfo);
    }
    (*agg).agg_done = true;
    std::ptr::null_mut()
}

/// A plain aggregate's one row (`agg_retrieve_direct`), from the partials the
/// tablets computed and the rows they shipped (checked by the scan's qual and
/// folded here).
#[pg_guard]
unsafe extern "C-unwind" fn exec_agg(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    let Some(child) = plain_agg_child(ps) else { return std::ptr::null_mut() };
    let ss = child as *mut pg_sys::ScanState;
    let Some(inner) = (*(child as *mut NodeState)).inner.as_mut() else { return std::ptr::null_mut() };
    let pushed = inner.aggs.clone();
    let specs: Vec<AggSpec> = pushed.iter().map(|p| p.spec).collect();
    let scan = start(ss, inner);
    let mut acc = if inner.filter_complete {
        let agg = table::aggregate(scan, &specs, None);
        inner.counted_total += agg.folded;
        agg.partials
    } else {
        Vec::new()
    };
    if acc.len() != specs.len() {
        // Not every condition could be pushed this time (a NULL value): every row
        // comes here and is checked and folded.
        acc = specs.iter().map(|s| s.func.empty()).collect();
    }
    for_each_shipped_row(child, |slot| {
        for (p, a) in pushed.iter().zip(acc.iter_mut()) {
            fold_slot(p, slot, a);
        }
    });
    let econtext = (*ps).ps_ExprContext;
    for (p, a) in pushed.iter().zip(acc.iter()) {
        let (d, isnull) = finalize(p, a);
        *(*econtext).ecxt_aggvalues.add(p.aggno) = d;
        *(*econtext).ecxt_aggnulls.add(p.aggno) = isnull;
    }
    plain_agg_row(ps, child)
}

/// Run `f` on each row scan node `child` returns (the rows the tablets shipped,
/// through the scan's qual).
unsafe fn for_each_shipped_row(child: *mut pg_sys::PlanState, mut f: impl FnMut(*mut pg_sys::TupleTableSlot)) {
    let exec_child = (*child).ExecProcNode.expect("an initialized plan node");
    loop {
        pg_sys::check_for_interrupts!();
        let slot = exec_child(child);
        if slot.is_null() || (*slot).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0 {
            return;
        }
        f(slot);
    }
}

/// Fold the value of `p`'s column in the scan's output row `slot` into `acc`.
unsafe fn fold_slot(p: &PushedAgg, slot: *mut pg_sys::TupleTableSlot, acc: &mut AggValue) {
    let one = if p.out_att == 0 {
        AggValue::Count(1)
    } else {
        let mut isnull = false;
        let d = pg_sys::slot_getattr(slot, p.out_att as i32, &mut isnull);
        if isnull {
            return;
        }
        let raw = d.value();
        let int = || match p.col_type {
            pg_sys::INT2OID => raw as i16 as i64,
            pg_sys::INT4OID | pg_sys::DATEOID => raw as i32 as i64,
            _ => raw as i64,
        };
        let float = || if p.col_type == pg_sys::FLOAT4OID { f32::from_bits(raw as u32) as f64 } else { f64::from_bits(raw as u64) };
        p.spec.func.of_value(int, float)
    };
    p.spec.func.merge(acc, one);
}

/// A numeric datum of `v`.
unsafe fn numeric_of(v: i128) -> pg_sys::Datum {
    const NUMERIC_IN: u32 = 1701;
    let text = std::ffi::CString::new(v.to_string()).unwrap_or_default();
    pg_sys::OidInputFunctionCall(pg_sys::Oid::from(NUMERIC_IN), text.as_ptr() as *mut std::ffi::c_char, pg_sys::InvalidOid, -1)
}

/// Raise 22003 (numeric value out of range).
fn out_of_range(what: &'static str) -> ! {
    pgrx::ereport!(ERROR, pgrx::PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, what);
}

/// PostgreSQL's result of aggregate `p` from its partial `a`: (value, is NULL).
unsafe fn finalize(p: &PushedAgg, a: &AggValue) -> (pg_sys::Datum, bool) {
    let null = (pg_sys::Datum::from(0usize), true);
    let float = |f: f64| if p.col_type == pg_sys::FLOAT4OID && p.result != AggResult::AvgFloat { pg_sys::Datum::from((f as f32).to_bits() as usize) } else { pg_sys::Datum::from(f.to_bits() as usize) };
    match (*a, p.result) {
        (AggValue::Count(n), _) => (pg_sys::Datum::from(n as i64), false),
        (AggValue::IntSum { n: 0, .. }, _) | (AggValue::FloatSum { n: 0, .. }, _) => null,
        (AggValue::IntSum { sum, .. }, AggResult::SumBigint) => match i64::try_from(sum) {
            Ok(v) => (pg_sys::Datum::from(v), false),
            Err(_) => out_of_range("bigint out of range"),
        },
        (AggValue::IntSum { sum, .. }, AggResult::SumNumeric) => (numeric_of(sum), false),
        (AggValue::IntSum { sum, n }, _) => {
            const NUMERIC_DIV: u32 = 1727;
            (pg_sys::OidFunctionCall2Coll(pg_sys::Oid::from(NUMERIC_DIV), pg_sys::InvalidOid, numeric_of(sum), numeric_of(n as i128)), false)
        }
        (AggValue::FloatSum { bits, n, inf_input }, result) => {
            let sum = f64::from_bits(bits);
            if sum.is_infinite() && !inf_input {
                out_of_range("value out of range: overflow");
            }
            if result == AggResult::AvgFloat {
                (float(sum / n as f64), false)
            } else {
                (float(sum), false)
            }
        }
        (AggValue::Int(None), _) | (AggValue::Float(None), _) => null,
        (AggValue::Int(Some(v)), _) => (
            match p.col_type {
                pg_sys::INT2OID => pg_sys::Datum::from(v as i16),
                pg_sys::INT4OID | pg_sys::DATEOID => pg_sys::Datum::from(v as i32),
                _ => pg_sys::Datum::from(v),
            },
            false,
        ),
        (AggValue::Float(Some(bits)), _) => (float(f64::from_bits(bits)), false),
    }
}

/// `ExecQual` (an inline function of executor.h).
unsafe fn eval_bool(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
    eval_in_tuple_memory(state, econtext, |d, isnull| !isnull && d.value() != 0).unwrap_or(true)
}

/// `ExecProject` (an inline function of executor.h).
unsafe fn project(proj: *mut pg_sys::ProjectionInfo) -> *mut pg_sys::TupleTableSlot {
    let state = &mut (*proj).pi_state as *mut pg_sys::ExprState;
    let slot = (*state).resultslot;
    pg_sys::ExecClearTuple(slot);
    eval_in_tuple_memory(state, (*proj).pi_exprContext, |_, _| ());
    (*slot).tts_flags &= !(pg_sys::TTS_FLAG_EMPTY as u16);
    (*slot).tts_nvalid = (*(*slot).tts_tupleDescriptor).natts as i16;
    slot
}

#[pg_guard]
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    let ss = &mut (*node).ss as *mut pg_sys::ScanState;
    if let Some(inner) = (*(node as *mut NodeState)).inner.as_mut() {
        if let Some(left) = counted_left(ss, inner) {
            if left > 0 {
                inner.counted_left = Some(left - 1);
                pg_sys::check_for_interrupts!();
                // The parent reads none of the columns (see count_in_storage).
                let slot = if (*ss).ps.ps_ProjInfo.is_null() { (*ss).ss_ScanTupleSlot } else { (*ss).ps.ps_ResultTupleSlot };
                return pg_sys::ExecStoreAllNullTuple(slot);
            }
            inner.counted_left = Some(0);
            // Then the rows the filter could not decide, through the qual.
        }
    }
    pg_sys::ExecScan(ss, Some(next), Some(recheck))
}

/// The node's table scan, begun (with its filter) if it was not.
unsafe fn start(ss: *mut pg_sys::ScanState, inner: &mut Inner) -> pg_sys::TableScanDesc {
    let rel = (*ss).ss_currentRelation;
    let mut scan = (*ss).ss_currentScanDesc;
    if scan.is_null() {
        scan = pg_sys::table_beginscan(rel, (*(*ss).ps.state).es_snapshot, 0, std::ptr::null_mut());
        (*ss).ss_currentScanDesc = scan;
    }
    if !inner.filter_set {
        let (filter, complete) = inner.instantiate((*ss).ps.ps_ExprContext, (*rel).rd_att);
        table::set_filter(scan, filter);
        inner.filter_set = true;
        inner.filter_complete = complete;
    }
    scan
}

/// `SeqNext` with the filter handed to the scan when it starts.
#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    let s = ss as *mut NodeState;
    let scan = match (*s).inner.as_mut() {
        Some(inner) => start(ss, inner),
        None => std::ptr::null_mut(),
    };
    let slot = (*ss).ss_ScanTupleSlot;
    if pg_sys::table_scan_getnextslot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
        slot
    } else {
        std::ptr::null_mut()
    }
}

/// Rows handed back for an EvalPlanQual recheck: the plan's qual decides, as for
/// a sequential scan.
#[pg_guard]
unsafe extern "C-unwind" fn recheck(_ss: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    true
}

#[pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    let scan = (*node).ss.ss_currentScanDesc;
    if !scan.is_null() {
        pg_sys::table_endscan(scan);
        (*node).ss.ss_currentScanDesc = std::ptr::null_mut();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    let scan = (*node).ss.ss_currentScanDesc;
    if !scan.is_null() {
        pg_sys::table_rescan(scan, std::ptr::null_mut());
    }
    // Parameters may have changed: values are taken again.
    if let Some(inner) = (*(node as *mut NodeState)).inner.as_mut() {
        inner.filter_set = false;
        inner.counted_left = None;
    }
    pg_sys::ExecScanReScan(&mut (*node).ss);
}

#[pg_guard]
unsafe extern "C-unwind" fn explain(node: *mut pg_sys::CustomScanState, ancestors: *mut pg_sys::List, es: *mut pg_sys::ExplainState) {
    let plan = (*node).ss.ps.plan;
    let exprs = (*(plan as *mut pg_sys::CustomScan)).custom_exprs;
    if !exprs.is_null() {
        let ctx = pg_sys::set_deparse_context_plan((*es).deparse_cxt, plan, ancestors);
        let prefix = pg_sys::list_length((*es).rtable) > 1 || (*es).verbose;
        let text = pg_sys::deparse_expression(pg_sys::make_ands_explicit(exprs) as *mut pg_sys::Node, ctx, prefix, false);
        pg_sys::ExplainPropertyText(c"Storage Filter".as_ptr(), text, es);
    }
    if let Some(inner) = (*(node as *mut NodeState)).inner.as_ref() {
        if !inner.agg_names.is_empty() {
            let names = std::ffi::CString::new(inner.agg_names.join(", ")).unwrap_or_default();
            pg_sys::ExplainPropertyText(c"Storage Aggregates".as_ptr(), names.as_ptr(), es);
        }
        if (*es).analyze && inner.count_mode {
            pg_sys::ExplainPropertyInteger(c"Rows Counted in Storage".as_ptr(), std::ptr::null(), inner.counted_total as i64, es);
        }
        if (*es).analyze && !inner.aggs.is_empty() {
            pg_sys::ExplainPropertyInteger(c"Rows Aggregated in Storage".as_ptr(), std::ptr::null(), inner.counted_total as i64, es);
        }
    }
}
