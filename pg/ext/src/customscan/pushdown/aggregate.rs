//! Aggregates computed in the tablets: a plain aggregate, or a hashed one
//! grouped by one column, over a `PinaxScan` whose conditions are all pushed
//! (`aggregate_in_storage`, from the ExecutorStart hook's walk). The tablets
//! return partials (per group); the rows they could not decide or fold are
//! checked by the scan's qual and folded here; the Agg node's ExecProcNode
//! (`exec_agg`, `exec_group`) makes PostgreSQL's result types and overflow
//! errors from them (`finalize`), and HAVING and the target list run as usual.

use super::plumbing::{eval_bool, for_each_shipped_row, is_plain_aggref, plain_agg_child, plain_agg_row, project, tag};
use super::{start, NodeState, EXEC_METHODS};
use crate::am::table;
use crate::pg_list::list_ptrs;
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_proto::{canonical_float_key, AggFunc, AggSpec, AggValue, GroupBy};
use std::ffi::CStr;

/// `GROUP BY col` of an aggregate computed in storage.
pub(super) struct Grouping {
    by: GroupBy,
    /// The column in the scan's output (1-based) and its type.
    out_att: usize,
    col_type: pg_sys::Oid,
    /// A slot of the scan's output type holding a group's key for the target list.
    slot: *mut pg_sys::TupleTableSlot,
}

/// An aggregate of the node above computed in storage.
#[derive(Clone, Copy)]
pub(super) struct PushedAgg {
    pub(super) spec: AggSpec,
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
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
            if !float
                && !matches!(ty, INT2OID | INT4OID | INT8OID | BOOLOID | DATEOID | TIMESTAMPOID | TIMESTAMPTZOID | UUIDOID | TEXTOID | VARCHAROID | BYTEAOID)
            {
                return;
            }
            let coll = *(*plan).grpCollations;
            if matches!(ty, TEXTOID | VARCHAROID) && (coll == InvalidOid || !get_collation_isdeterministic(coll)) {
                return;
            }
            let att = (*col).varattno as u16 - 1;
            let desc = pg_sys::ExecGetResultType(child as *mut pg_sys::PlanState);
            let slot = pg_sys::ExecInitExtraTupleSlot((*agg).ss.ps.state, desc, &pg_sys::TTSOpsVirtual);
            let colname = CStr::from_ptr((*(*(*(*child).ss.ss_currentRelation).rd_att).attrs.as_ptr().add(att as usize)).attname.data.as_ptr())
                .to_string_lossy()
                .into_owned();
            names.push(format!("grouped by {colname}"));
            inner.group = Some(Grouping { by: GroupBy { att, float }, out_att: k, col_type: ty, slot });
            // (A layout for the grouping column: the filter's attributes reach it.)
            pushed.push(PushedAgg { spec: AggSpec { func: AggFunc::CountValues, att }, aggno: usize::MAX, out_att: k, col_type: ty, result: AggResult::Count });
        }
        inner.aggs = pushed;
        inner.agg_names = names;
        pg_sys::ExecSetExecProcNode(agg as *mut pg_sys::PlanState, Some(if hashed { exec_group } else { exec_agg }));
    }
}

/// The group key of value `d` of type `ty` (as the tablets store it, floats made
/// canonical), and its stored bytes.
///
/// # Safety
/// `d` must be a valid datum of its type. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn group_key_of(d: pg_sys::Datum, ty: pg_sys::Oid, float: bool) -> (Vec<u8>, Vec<u8>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// The datum of group key `key` of type `ty` (allocated in the current memory
/// context when by reference).
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn group_datum(key: &[u8], ty: pg_sys::Oid) -> pg_sys::Datum {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
            pg_sys::TEXTOID | pg_sys::VARCHAROID | pg_sys::BYTEAOID => {
                pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(key.as_ptr() as *const std::ffi::c_char, key.len() as i32))
            }
            _ => pg_sys::Datum::from(i64::from_le_bytes(n(8))),
        }
    }
}

/// A hashed aggregate's rows, one per group (`agg_retrieve_hash_table`), from the
/// groups the tablets computed and the rows they shipped (checked by the scan's
/// qual and folded here). Its rescans always rebuild the groups: the node's
/// `hash_ever_spilled` is set, so `ExecReScanAgg` never just re-reads
/// PostgreSQL's (unused) hash table.
///
/// # Safety
/// Called only by PostgreSQL, as the `ExecProcNode` of the plan node it was set
/// on (`ExecSetExecProcNode`), with that node's state.
#[pg_guard]
unsafe extern "C-unwind" fn exec_group(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
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
                let a = table::scan::aggregate(scan, &all_specs, Some(by));
                inner.counted_total += a.folded;
                for grp in a.groups {
                    shown.insert(grp.key.clone(), grp.shown);
                    groups.insert(grp.key, grp.values);
                }
            }
            for_each_shipped_row(child, |slot| {
                let mut isnull = false;
                let d = pg_sys::slot_getattr(slot, out_att as i32, &mut isnull);
                let (key, value) = if isnull {
                    (None, Vec::new())
                } else {
                    let (k, v) = group_key_of(d, col_type, by.float);
                    (Some(k), v)
                };
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
}

/// A plain aggregate's one row (`agg_retrieve_direct`), from the partials the
/// tablets computed and the rows they shipped (checked by the scan's qual and
/// folded here).
///
/// # Safety
/// Called only by PostgreSQL, as the `ExecProcNode` of the plan node it was set
/// on (`ExecSetExecProcNode`), with that node's state.
#[pg_guard]
unsafe extern "C-unwind" fn exec_agg(ps: *mut pg_sys::PlanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let Some(child) = plain_agg_child(ps) else { return std::ptr::null_mut() };
        let ss = child as *mut pg_sys::ScanState;
        let Some(inner) = (*(child as *mut NodeState)).inner.as_mut() else { return std::ptr::null_mut() };
        let pushed = inner.aggs.clone();
        let specs: Vec<AggSpec> = pushed.iter().map(|p| p.spec).collect();
        let scan = start(ss, inner);
        let mut acc = if inner.filter_complete {
            let agg = table::scan::aggregate(scan, &specs, None);
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
}

/// Fold the value of `p`'s column in the scan's output row `slot` into `acc`.
///
/// # Safety
/// `slot` must be a valid slot. Calls into PostgreSQL: only in a backend, where
/// its errors can be raised.
unsafe fn fold_slot(p: &PushedAgg, slot: *mut pg_sys::TupleTableSlot, acc: &mut AggValue) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// A numeric datum of `v`.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn numeric_of(v: i128) -> pg_sys::Datum {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        const NUMERIC_IN: u32 = 1701;
        let text = std::ffi::CString::new(v.to_string()).unwrap_or_default();
        pg_sys::OidInputFunctionCall(pg_sys::Oid::from(NUMERIC_IN), text.as_ptr() as *mut std::ffi::c_char, pg_sys::InvalidOid, -1)
    }
}

/// Raise 22003 (numeric value out of range).
fn out_of_range(what: &'static str) -> ! {
    pgrx::ereport!(ERROR, pgrx::PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, what);
}

/// PostgreSQL's result of aggregate `p` from its partial `a`: (value, is NULL).
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn finalize(p: &PushedAgg, a: &AggValue) -> (pg_sys::Datum, bool) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let null = (pg_sys::Datum::from(0usize), true);
        let float = |f: f64| {
            if p.col_type == pg_sys::FLOAT4OID && p.result != AggResult::AvgFloat {
                pg_sys::Datum::from((f as f32).to_bits() as usize)
            } else {
                pg_sys::Datum::from(f.to_bits() as usize)
            }
        };
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
}
