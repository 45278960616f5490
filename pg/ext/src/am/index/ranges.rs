//! Scan keys to key ranges (`ranges`): equalities (and `= ANY`, `IS NULL`) on
//! leading columns form key prefixes, a bound on the next ordered column
//! narrows them; a superset of the matching entries (the executor rechecks,
//! except for an exact look-up of one unique key, see `Ranges::exact`).

use crate::keys::{build_key, prefix_end, KeyColumn, KeyKind};
use crate::meta::{enforced_unique, IndexMeta};
use pgrx::pg_sys;

/// A range of keys to walk.
pub(super) type Range = (Vec<u8>, Option<Vec<u8>>);

const SK_ISNULL: i32 = 0x0001;

const SK_ROW_HEADER: i32 = 0x0004;

const SK_SEARCHARRAY: i32 = 0x0020;

const SK_SEARCHNULL: i32 = 0x0040;

const SK_SEARCHNOTNULL: i32 = 0x0080;

const INT2OID: u32 = 21;

const INT4OID: u32 = 23;

const INT8OID: u32 = 20;

const TEXTOID: u32 = 25;

const VARCHAROID: u32 = 1043;

/// A scan key's argument as a datum of the column's own type, if it can be.
///
/// # Safety
/// `arg` must be a valid datum of its type.
unsafe fn same_type_arg(col: &KeyColumn, sk: &pg_sys::ScanKeyData, arg: pg_sys::Datum) -> Option<pg_sys::Datum> {
    let sub = sk.sk_subtype.to_u32();
    if sub == 0 || sub == col.typid {
        return Some(arg);
    }
    // text and varchar share their representation and btree operators (a varchar
    // key compared with a text value: `varchar_col = 'a' || x`).
    if col.kind == KeyKind::Text && matches!(sub, TEXTOID | VARCHAROID) {
        return Some(arg);
    }
    let int_kind = |k: KeyKind| matches!(k, KeyKind::Int2 | KeyKind::Int4 | KeyKind::Int8);
    if int_kind(col.kind) && matches!(sub, INT2OID | INT4OID | INT8OID) {
        let v: i64 = match sub {
            INT2OID => arg.value() as i16 as i64,
            INT4OID => arg.value() as i32 as i64,
            _ => arg.value() as i64,
        };
        let fits = match col.kind {
            KeyKind::Int2 => i16::try_from(v).is_ok(),
            KeyKind::Int4 => i32::try_from(v).is_ok(),
            _ => true,
        };
        return fits.then(|| pg_sys::Datum::from(v));
    }
    None
}

/// Elements of an array datum (for `col = ANY(array)`).
///
/// # Safety
/// `arr` must be a valid datum of its type. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn array_elements(arr: pg_sys::Datum) -> Vec<(pg_sys::Datum, bool)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let a = pg_sys::pg_detoast_datum(arr.cast_mut_ptr()) as *mut pg_sys::ArrayType;
        let elemtype = (*a).elemtype;
        let mut typlen: i16 = 0;
        let mut byval = false;
        let mut align: std::ffi::c_char = 0;
        pg_sys::get_typlenbyvalalign(elemtype, &mut typlen, &mut byval, &mut align);
        let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
        let mut nulls: *mut bool = std::ptr::null_mut();
        let mut n: i32 = 0;
        pg_sys::deconstruct_array(a, elemtype, typlen as i32, byval, align, &mut elems, &mut nulls, &mut n);
        (0..n as usize).map(|i| (*elems.add(i), !nulls.is_null() && *nulls.add(i))).collect()
    }
}

/// The key ranges of a scan (`ranges`).
pub(super) struct Ranges {
    /// Ranges that cover every entry the scan keys can match (the executor
    /// rechecks the quals, so a superset is correct).
    pub(super) ranges: Vec<Range>,
    /// Each range is one primary key (every key column of the primary key given
    /// by equality): a point lookup.
    pub(super) point: bool,
    /// One range, holding exactly the entries Pinax's uniqueness check would
    /// find for these key values: a unique, enforced key (`enforced_unique`)
    /// every column of which is given by one equality or `IS NULL` key, and no
    /// other key. A conflict check (`check_exclusion_or_unique_constraint`)
    /// needs no recheck of such a scan, and must not have one: it treats an
    /// entry holding a NULL as no match (it assumes strict operators), where a
    /// NULLS NOT DISTINCT index holds NULLs to be equal, and the speculative
    /// insertion, finding the conflict its check did not, would retry forever.
    pub(super) exact: bool,
}

/// The key ranges of index `im` that scan `keys` reads.
///
/// # Safety
/// `keys` must be the scan keys of a scan of index `im` (their arguments valid
/// datums of the types they say). Calls into PostgreSQL: only in a backend.
pub(super) unsafe fn ranges(im: &IndexMeta, keys: &[pg_sys::ScanKeyData]) -> Ranges {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let ncols = im.cols.len();
        // Per column: candidate equality values (several for `= ANY`), each a datum
        // and whether it is NULL (`IS NULL`).
        let mut eq: Vec<Option<Vec<(pg_sys::Datum, bool)>>> = vec![None; ncols];
        // Every key is an equality on a column of its own or an `IS NULL`.
        let mut all_eq = true;
        let mut lower: Vec<Option<(pg_sys::Datum, bool)>> = vec![None; ncols];
        let mut upper: Vec<Option<(pg_sys::Datum, bool)>> = vec![None; ncols];
        for sk in keys {
            let att = sk.sk_attno as usize;
            if att == 0 || att > ncols {
                all_eq = false;
                continue;
            }
            let col = &im.cols[att - 1];
            let flags = sk.sk_flags;
            if flags & (SK_ISNULL | SK_ROW_HEADER | SK_SEARCHNULL | SK_SEARCHNOTNULL) != 0 {
                if flags & SK_ISNULL != 0 && flags & (SK_SEARCHNULL | SK_SEARCHNOTNULL) == 0 {
                    // `col op NULL` matches nothing.
                    return Ranges { ranges: Vec::new(), point: false, exact: false };
                }
                if flags & SK_SEARCHNULL != 0 && flags & SK_ROW_HEADER == 0 && eq[att - 1].is_none() {
                    // `col IS NULL`: NULL's own encoding.
                    eq[att - 1] = Some(vec![(pg_sys::Datum::from(0usize), true)]);
                } else {
                    all_eq = false;
                }
                continue;
            }
            let strategy = sk.sk_strategy as u32;
            all_eq &= strategy == pg_sys::BTEqualStrategyNumber && flags & SK_SEARCHARRAY == 0 && eq[att - 1].is_none();
            if flags & SK_SEARCHARRAY != 0 {
                if strategy == pg_sys::BTEqualStrategyNumber && eq[att - 1].is_none() {
                    let mut vals = Vec::new();
                    let mut ok = true;
                    for (v, n) in array_elements(sk.sk_argument) {
                        if n {
                            continue;
                        }
                        match same_type_arg(col, sk, v) {
                            Some(d) => vals.push((d, false)),
                            None => ok = false,
                        }
                    }
                    if ok {
                        eq[att - 1] = Some(vals);
                    }
                }
                continue;
            }
            let Some(arg) = same_type_arg(col, sk, sk.sk_argument) else {
                all_eq = false;
                continue;
            };
            match strategy {
                s if s == pg_sys::BTEqualStrategyNumber => eq[att - 1] = Some(vec![(arg, false)]),
                s if s == pg_sys::BTGreaterEqualStrategyNumber => lower[att - 1] = Some((arg, true)),
                s if s == pg_sys::BTGreaterStrategyNumber => lower[att - 1] = Some((arg, false)),
                s if s == pg_sys::BTLessStrategyNumber => upper[att - 1] = Some((arg, false)),
                s if s == pg_sys::BTLessEqualStrategyNumber => upper[att - 1] = Some((arg, true)),
                _ => {}
            }
        }
        // Leading equality columns form prefixes (one per combination of ANY values).
        let mut prefixes: Vec<Vec<(pg_sys::Datum, bool)>> = vec![Vec::new()];
        let mut k = 0;
        while k < ncols {
            let Some(vals) = &eq[k] else { break };
            if prefixes.len() * vals.len() > 10_000 {
                break;
            }
            let mut next = Vec::with_capacity(prefixes.len() * vals.len());
            for p in &prefixes {
                for v in vals {
                    let mut q = p.clone();
                    q.push(*v);
                    next.push(q);
                }
            }
            prefixes = next;
            k += 1;
        }
        if k == 0 {
            if im.hashed {
                return Ranges { ranges: vec![(Vec::new(), None)], point: false, exact: false };
            }
            prefixes = vec![Vec::new()];
        }
        let point = im.is_pk && k == ncols;
        let exact = all_eq && k == ncols && prefixes.len() == 1 && enforced_unique(im, &prefixes[0]);
        let mut out: Vec<Range> = Vec::with_capacity(prefixes.len());
        for p in prefixes {
            let prefix = if p.is_empty() { Vec::new() } else { build_key(&im.cols[..k], &p, im.hashed) };
            let mut start = prefix.clone();
            let mut end = if prefix.is_empty() { None } else { prefix_end(&prefix) };
            // A bound on the next column narrows an ordered, ascending key (under a
            // hash prefix once the hashed first column is given: the columns after
            // it are stored in order).
            if (!im.hashed || k >= 1) && k < ncols {
                let col = &im.cols[k];
                if col.ordered && col.order.order == pinax_codec::datum::SortOrder::Asc {
                    if let Some((v, inclusive)) = lower[k] {
                        let mut s = prefix.clone();
                        col.encode(&mut s, v, false);
                        // `> v`: past every key whose column is v (the recheck would
                        // drop them, after a read that may not have been needed). An
                        // ordered column's encoding is prefix-free (fixed width, escaped
                        // bytes ending in a terminator, or numeric digit pairs whose last
                        // one is marked: pinax_codec::datum), so those keys are exactly
                        // the ones starting with `s`, and a key whose column is above
                        // v differs from `s` at a byte inside it: it is at or after
                        // `prefix_end(&s)`.
                        start = if inclusive { s } else { prefix_end(&s).unwrap_or(s) };
                    }
                    if let Some((v, inclusive)) = upper[k] {
                        let mut e = prefix.clone();
                        col.encode(&mut e, v, false);
                        end = if inclusive { prefix_end(&e) } else { Some(e) };
                    }
                }
            }
            out.push((start, end));
        }
        out.sort();
        out.dedup();
        Ranges { ranges: out, point, exact }
    }
}
