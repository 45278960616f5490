//! The conditions of a `PinaxScan` that the tablets can check (what is pushed:
//! `pushdown/mod.rs`): built from the plan's expressions as templates, when
//! planning (to decide whether the path is offered) and when the node starts
//! (with expression states for the values), and emitted as a `RowFilter`
//! program with the values taken when the scan starts (`emit`). A condition
//! that cannot be pushed stays PostgreSQL's alone; one whose value is NULL this
//! time is left out of the program (`Inner::instantiate`).

use super::plumbing::{eval_in_tuple_memory, tag};
use crate::pg_list::list_ptrs;
use pgrx::pg_sys;
use pinax_proto::{CmpOp, FilterOp, FilterValue};
use std::ffi::CStr;

/// Nesting of AND/OR/NOT pushed at most (deeper conditions stay in PostgreSQL).
const MAX_DEPTH: usize = 32;

/// `n` without binary-compatible casts (a varchar column compared as text).
///
/// # Safety
/// `n` must be a valid node (or null where checked).
unsafe fn strip_relabel(mut n: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        while !n.is_null() && tag(n) == pg_sys::NodeTag::T_RelabelType {
            n = (*(n as *mut pg_sys::RelabelType)).arg as *mut pg_sys::Node;
        }
        n
    }
}

/// What a condition is built against: the scanned relation's range-table index
/// and row type.
pub(super) struct Target {
    pub(super) relid: i32,
    pub(super) desc: pg_sys::TupleDesc,
}

impl Target {
    /// The 0-based attribute `n` (possibly under a relabel) reads, if it is a
    /// live column of the target.
    ///
    /// # Safety
    /// `n` must be a valid node (or null where checked).
    unsafe fn column(&self, n: *mut pg_sys::Node) -> Option<(u16, pg_sys::Oid)> {
        // SAFETY: the caller upholds this function's contract (# Safety).
        unsafe {
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
}

/// How a column's value is compared (see `pinax_proto::FilterValue`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Int,
    Float,
    Bool,
    Bytes,
    Uuid,
}

/// A condition ready to be instantiated when the scan starts.
pub(super) enum Tmpl {
    Cmp {
        att: u16,
        op: CmpOp,
        kind: Kind,
        value: Value,
    },
    /// `att OP ANY (array)` (`any`) or `att OP ALL (array)`.
    InList {
        att: u16,
        op: CmpOp,
        kind: Kind,
        array: *mut pg_sys::ExprState,
        elem_type: pg_sys::Oid,
        any: bool,
    },
    IsNull {
        att: u16,
        negate: bool,
    },
    And(Vec<Tmpl>),
    Or(Vec<Tmpl>),
    Not(Box<Tmpl>),
}

/// A comparison's other operand.
pub(super) enum Value {
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
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn collation_is_c(coll: pg_sys::Oid) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if coll == pg_sys::C_COLLATION_OID || coll == pg_sys::POSIX_COLLATION_OID {
            return true;
        }
        if coll == pg_sys::DEFAULT_COLLATION_OID {
            let lc = pg_sys::GetConfigOption(c"lc_collate".as_ptr(), true, false);
            return !lc.is_null() && matches!(CStr::from_ptr(lc).to_bytes(), b"C" | b"POSIX");
        }
        false
    }
}

/// `node` as a condition the tablets can check, or None. With `ps` (executor),
/// value operands get their expression states.
///
/// # Safety
/// `node` must be a valid node (or null where checked). Calls into PostgreSQL:
/// only in a backend, where its errors can be raised.
pub(super) unsafe fn build(node: *mut pg_sys::Node, t: &Target, ps: Option<*mut pg_sys::PlanState>, depth: usize) -> Option<Tmpl> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// The type of a value operand (a constant or a parameter), or None.
///
/// # Safety
/// `val` must be a valid node (or null where checked).
unsafe fn value_type(val: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        match tag(val) {
            pg_sys::NodeTag::T_Const => Some((*(val as *mut pg_sys::Const)).consttype),
            pg_sys::NodeTag::T_Param => Some((*(val as *mut pg_sys::Param)).paramtype),
            _ => None,
        }
    }
}

/// The expression state of a value operand in the executor (`ps`); null when planning.
///
/// # Safety
/// `val` must be a valid node (or null where checked). Calls into PostgreSQL:
/// only in a backend, where its errors can be raised.
unsafe fn expr_state(val: *mut pg_sys::Node, ps: Option<*mut pg_sys::PlanState>) -> *mut pg_sys::ExprState {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        match ps {
            Some(ps) => pg_sys::ExecInitExpr(val as *mut pg_sys::Expr, ps),
            None => std::ptr::null_mut(),
        }
    }
}

/// Operator `opno` (input collation `coll`) between a column of type `ty` and a
/// value of type `val_type` (value first when `commuted`), as the tablets compare
/// them: the comparison, how, and the value's type; None if they cannot.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn comparison(opno: pg_sys::Oid, coll: pg_sys::Oid, ty: pg_sys::Oid, val_type: pg_sys::Oid, commuted: bool) -> Option<(CmpOp, Kind, pg_sys::Oid)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// Most elements of an IN list pushed (longer lists stay in PostgreSQL).
const MAX_IN_LIST: usize = 100;

/// Append `tmpl`'s program to `out` with its values taken now; false if it cannot
/// be pushed this time (a NULL value: PostgreSQL decides such rows itself).
///
/// # Safety
/// `econtext` must be a valid `ExprContext`.
pub(super) unsafe fn emit(tmpl: &Tmpl, econtext: *mut pg_sys::ExprContext, out: &mut Vec<FilterOp>, max_att: &mut u16) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// The value of `state` (of type `ty`) as the tablets compare it; None if NULL.
///
/// # Safety
/// `state` must be a valid `ExprState`, and `econtext` a valid `ExprContext`.
unsafe fn evaluate(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext, kind: Kind, ty: pg_sys::Oid) -> Option<FilterValue> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { eval_in_tuple_memory(state, econtext, |d, isnull| (!isnull).then(|| filter_value(d, kind, ty))).flatten() }
}

/// The elements of the array `state` evaluates to (elements of type `ty`); None
/// if it or an element is NULL, it is empty or longer than `MAX_IN_LIST`.
///
/// # Safety
/// `state` must be a valid `ExprState`, and `econtext` a valid `ExprContext`.
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn evaluate_array(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext, kind: Kind, ty: pg_sys::Oid) -> Option<Vec<FilterValue>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// Datum `d` of type `ty` as the tablets compare it.
///
/// # Safety
/// `d` must be a valid datum of its type. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn filter_value(d: pg_sys::Datum, kind: Kind, ty: pg_sys::Oid) -> FilterValue {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}
