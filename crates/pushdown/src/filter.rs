//! Evaluating a pushed-down [`RowFilter`] on a stored row (a heap tuple).
//!
//! SQL's three-valued logic, plus "cannot tell" ([`V::Unknown`]: a value that
//! cannot be read in place, see `pinax_codec::heap_tuple`). A row is dropped only
//! when the filter is certainly false or NULL for it; PostgreSQL re-checks the
//! whole `WHERE` clause on every row that is kept.

use crate::{Error, Result};
use pinax_codec::heap_tuple::{deform, Attr};
use pinax_proto::{canonical_float_key, float_order, AggFunc, AggSpec, AggValue, CmpOp, FilterOp, FilterValue, GroupBy, RowFilter, MAX_FILTER_OPS};
use std::cmp::Ordering;

/// The value of a (sub)condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum V {
    True,
    False,
    Null,
    Unknown,
}

/// What a filter says of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Yes,
    No,
    /// Cannot tell here (see the module header): the SQL layer decides.
    Maybe,
}

/// A filter checked once, with buffers reused for every row.
pub struct RowMatcher {
    layouts: Vec<(i16, u8)>,
    ops: Vec<FilterOp>,
    attrs: Vec<Attr>,
    stack: Vec<V>,
}

impl RowMatcher {
    /// Check `f`: its size, attribute numbers and layouts, and that its program
    /// leaves exactly one value. A bad filter is the caller's error.
    pub fn new(f: &RowFilter) -> Result<RowMatcher> {
        let bad = |what: String| Err(Error::InvalidRequest(format!("bad row filter: {what}")));
        if f.ops.len() > MAX_FILTER_OPS || f.attrs.len() > 1664 {
            return bad(format!("{} operations over {} attributes", f.ops.len(), f.attrs.len()));
        }
        for a in &f.attrs {
            if !(a.len > 0 || a.len == -1 || a.len == -2) || !matches!(a.align, 1 | 2 | 4 | 8) {
                return bad(format!("attribute layout {a:?}"));
            }
        }
        let mut depth: usize = 0;
        for op in &f.ops {
            let (pops, att) = match op {
                FilterOp::Cmp { att, .. } | FilterOp::IsNull { att } => (0, Some(*att)),
                FilterOp::And(n) | FilterOp::Or(n) => (*n as usize, None),
                FilterOp::Not => (1, None),
            };
            if att.is_some_and(|a| a as usize >= f.attrs.len()) {
                return bad(format!("attribute {} of {}", att.unwrap_or_default() + 1, f.attrs.len()));
            }
            if depth < pops || (pops == 0 && att.is_none()) {
                return bad(format!("{op:?} lacks operands"));
            }
            depth = depth - pops + 1;
        }
        // An empty program is no condition (a scan that only aggregates).
        if depth != 1 && !f.ops.is_empty() {
            return bad(format!("the program leaves {depth} values"));
        }
        Ok(RowMatcher { layouts: f.attrs.iter().map(|a| (a.len, a.align)).collect(), ops: f.ops.clone(), attrs: Vec::new(), stack: Vec::new() })
    }

    /// Whether the row whose stored value is `tuple` may satisfy the filter (false
    /// only when it certainly does not).
    pub fn may_match(&mut self, tuple: &[u8]) -> bool {
        self.verdict(tuple) != Verdict::No
    }

    /// Whether the row whose stored value is `tuple` satisfies the filter: certainly
    /// (true), certainly not (false or NULL), or cannot tell.
    pub fn verdict(&mut self, tuple: &[u8]) -> Verdict {
        deform(tuple, &self.layouts, &mut self.attrs);
        self.stack.clear();
        for op in &self.ops {
            let v = match op {
                FilterOp::Cmp { att, op, value } => compare(tuple, &self.attrs[*att as usize], *op, value, self.layouts[*att as usize].0),
                FilterOp::IsNull { att } => match self.attrs[*att as usize] {
                    Attr::Null => V::True,
                    Attr::Value(..) => V::False,
                    Attr::Unknown => V::Unknown,
                },
                FilterOp::And(n) => {
                    let args = self.stack.split_off(self.stack.len() - *n as usize);
                    if args.contains(&V::False) {
                        V::False
                    } else if args.contains(&V::Unknown) {
                        V::Unknown
                    } else if args.contains(&V::Null) {
                        V::Null
                    } else {
                        V::True
                    }
                }
                FilterOp::Or(n) => {
                    let args = self.stack.split_off(self.stack.len() - *n as usize);
                    if args.contains(&V::True) {
                        V::True
                    } else if args.contains(&V::Unknown) {
                        V::Unknown
                    } else if args.contains(&V::Null) {
                        V::Null
                    } else {
                        V::False
                    }
                }
                FilterOp::Not => match self.stack.pop().unwrap_or(V::Unknown) {
                    V::True => V::False,
                    V::False => V::True,
                    other => other,
                },
            };
            self.stack.push(v);
        }
        match self.stack.as_slice() {
            [] | [V::True] => Verdict::Yes,
            [V::False] | [V::Null] => Verdict::No,
            _ => Verdict::Maybe,
        }
    }
}

impl RowMatcher {
    /// How many attributes the filter's layouts describe.
    pub fn attributes(&self) -> usize {
        self.layouts.len()
    }

    /// Check `aggs` against the filter's layouts.
    pub fn check_aggregates(&self, aggs: &[AggSpec]) -> Result<()> {
        for a in aggs {
            let len = self.layouts.get(a.att as usize).map(|l| l.0);
            let ok = match a.func {
                AggFunc::CountRows => true,
                AggFunc::CountValues => len.is_some(),
                AggFunc::SumInt | AggFunc::MinInt | AggFunc::MaxInt => matches!(len, Some(2 | 4 | 8)),
                AggFunc::SumFloat4 => len == Some(4),
                AggFunc::SumFloat8 | AggFunc::MinFloat | AggFunc::MaxFloat => matches!(len, Some(4 | 8)),
            };
            if !ok {
                return Err(Error::InvalidRequest(format!("bad aggregate {a:?} over attributes {:?}", self.layouts)));
            }
        }
        Ok(())
    }

    /// The group key of the row `tuple` under `g`, and its value's stored bytes
    /// (see `pinax_proto::AggGroup`); None if the attribute cannot be read here.
    /// Reads the attributes [`RowMatcher::verdict`] found: call it on `tuple` first.
    pub fn group_key(&self, tuple: &[u8], g: &GroupBy) -> Option<(Option<Vec<u8>>, Vec<u8>)> {
        match self.attrs.get(g.att as usize)? {
            Attr::Null => Some((None, Vec::new())),
            Attr::Unknown => None,
            a => {
                let b = a.bytes(tuple)?;
                Some((Some(if g.float { canonical_float_key(b) } else { b.to_vec() }), b.to_vec()))
            }
        }
    }

    /// Fold the row `tuple` (which the filter certainly matches) into `acc`, one
    /// partial per `aggs` entry; false, and nothing folded, if an aggregated value
    /// cannot be read here (the SQL layer folds that row). Reads the attributes
    /// [`RowMatcher::verdict`] found: call it on `tuple` first.
    pub fn fold(&self, tuple: &[u8], aggs: &[AggSpec], acc: &mut [AggValue]) -> bool {
        let attrs = &self.attrs;
        let value = |att: u16| -> Option<Option<&[u8]>> {
            match attrs.get(att as usize)? {
                Attr::Null => Some(None),
                Attr::Unknown => None,
                a => a.bytes(tuple).map(Some),
            }
        };
        if aggs.iter().any(|a| a.func != AggFunc::CountRows && value(a.att).is_none()) {
            return false;
        }
        for (a, acc) in aggs.iter().zip(acc.iter_mut()) {
            let v = match a.func {
                AggFunc::CountRows => {
                    a.func.merge(acc, AggValue::Count(1));
                    continue;
                }
                _ => match value(a.att).flatten() {
                    Some(v) => v,
                    None => continue, // NULL: skipped by every aggregate but count(*)
                },
            };
            let int = || match v.len() {
                2 => i16::from_le_bytes([v[0], v[1]]) as i64,
                4 => i32::from_le_bytes(v.try_into().unwrap_or_default()) as i64,
                _ => i64::from_le_bytes(v.try_into().unwrap_or_default()),
            };
            let float = || match v.len() {
                4 => f32::from_le_bytes(v.try_into().unwrap_or_default()) as f64,
                _ => f64::from_le_bytes(v.try_into().unwrap_or_default()),
            };
            a.func.merge(acc, a.func.of_value(int, float));
        }
        true
    }
}

/// `attr OP value` for an attribute of length `len`.
fn compare(tuple: &[u8], attr: &Attr, op: CmpOp, value: &FilterValue, len: i16) -> V {
    let bytes = match attr {
        Attr::Null => return V::Null,
        Attr::Unknown => return V::Unknown,
        a => match a.bytes(tuple) {
            Some(b) => b,
            None => return V::Unknown,
        },
    };
    let ord = match value {
        FilterValue::Int(c) => {
            let v = match (len, bytes.len()) {
                (2, 2) => i16::from_le_bytes([bytes[0], bytes[1]]) as i64,
                (4, 4) => i32::from_le_bytes(bytes.try_into().unwrap_or_default()) as i64,
                (8, 8) => i64::from_le_bytes(bytes.try_into().unwrap_or_default()),
                _ => return V::Unknown,
            };
            v.cmp(c)
        }
        FilterValue::Float(bits) => {
            let v = match (len, bytes.len()) {
                (4, 4) => f32::from_le_bytes(bytes.try_into().unwrap_or_default()) as f64,
                (8, 8) => f64::from_le_bytes(bytes.try_into().unwrap_or_default()),
                _ => return V::Unknown,
            };
            float_order(v, f64::from_bits(*bits))
        }
        FilterValue::Bool(c) => match (len, bytes) {
            (1, [b]) => (*b != 0).cmp(c),
            _ => return V::Unknown,
        },
        FilterValue::Bytes(c) => {
            if len != -1 {
                return V::Unknown;
            }
            // memcmp of the common length, then the shorter first (`varstr_cmp`
            // under "C", `byteacmp`).
            bytes.cmp(&c[..])
        }
        FilterValue::Fixed(c) => {
            if len <= 0 || bytes.len() != c.len() {
                return V::Unknown;
            }
            bytes.cmp(&c[..])
        }
    };
    let holds = match op {
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Le => ord != Ordering::Greater,
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Ge => ord != Ordering::Less,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Ne => ord != Ordering::Equal,
    };
    if holds {
        V::True
    } else {
        V::False
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_proto::AttrLayout;

    /// A heap tuple of an int4, a float8 and a text column (None: NULL), as
    /// `heap_form_tuple` lays it out.
    fn row(i: Option<i32>, f: Option<f64>, t: Option<&str>) -> Vec<u8> {
        let mut h = vec![0u8; 23];
        h[18] = 3; // natts
        h[20] = 1; // HEAP_HASNULL
        h.push(i.is_some() as u8 | (f.is_some() as u8) << 1 | (t.is_some() as u8) << 2);
        h.resize(24, 0);
        h[22] = 24; // t_hoff
        let mut d = Vec::new();
        if let Some(i) = i {
            d.extend_from_slice(&i.to_le_bytes());
        }
        if let Some(f) = f {
            d.resize(d.len().div_ceil(8) * 8, 0);
            d.extend_from_slice(&f.to_le_bytes());
        }
        if let Some(t) = t {
            d.push(((t.len() + 1) << 1) as u8 | 1);
            d.extend_from_slice(t.as_bytes());
        }
        h.extend_from_slice(&d);
        h
    }

    fn layout() -> Vec<AttrLayout> {
        vec![AttrLayout { len: 4, align: 4 }, AttrLayout { len: 8, align: 8 }, AttrLayout { len: -1, align: 4 }]
    }

    fn matcher(ops: Vec<FilterOp>) -> RowMatcher {
        RowMatcher::new(&RowFilter { attrs: layout(), ops }).unwrap()
    }

    fn cmp(att: u16, op: CmpOp, value: FilterValue) -> FilterOp {
        FilterOp::Cmp { att, op, value }
    }

    #[test]
    fn comparisons_follow_sql() {
        let mut gt5 = matcher(vec![cmp(0, CmpOp::Gt, FilterValue::Int(5))]);
        assert!(gt5.may_match(&row(Some(6), None, None)));
        assert!(!gt5.may_match(&row(Some(5), None, None)));
        assert!(!gt5.may_match(&row(None, Some(1.0), Some("x"))), "NULL > 5 is NULL: dropped");
        let mut ne = matcher(vec![cmp(2, CmpOp::Ne, FilterValue::Bytes(b"ab".to_vec()))]);
        assert!(!ne.may_match(&row(Some(1), None, Some("ab"))));
        assert!(ne.may_match(&row(Some(1), None, Some("abc"))));
        let mut lt = matcher(vec![cmp(2, CmpOp::Lt, FilterValue::Bytes(b"ab".to_vec()))]);
        assert!(lt.may_match(&row(None, None, Some("a"))), "a prefix sorts first");
        assert!(lt.may_match(&row(None, None, Some("aa"))));
        assert!(!lt.may_match(&row(None, None, Some("ab"))));
        assert!(!lt.may_match(&row(None, None, Some("b"))));
    }

    #[test]
    fn floats_order_nan_last_and_zeroes_equal() {
        let nan = FilterValue::Float(f64::NAN.to_bits());
        let mut eq_nan = matcher(vec![cmp(1, CmpOp::Eq, nan.clone())]);
        assert!(eq_nan.may_match(&row(None, Some(f64::NAN), None)));
        assert!(!eq_nan.may_match(&row(None, Some(f64::INFINITY), None)));
        let mut lt_nan = matcher(vec![cmp(1, CmpOp::Lt, nan)]);
        assert!(lt_nan.may_match(&row(None, Some(f64::INFINITY), None)));
        assert!(!lt_nan.may_match(&row(None, Some(f64::NAN), None)));
        let mut eq_zero = matcher(vec![cmp(1, CmpOp::Eq, FilterValue::Float(0.0f64.to_bits()))]);
        assert!(eq_zero.may_match(&row(None, Some(-0.0), None)));
    }

    #[test]
    fn three_valued_logic_and_unknowns() {
        let is_null = |a| FilterOp::IsNull { att: a };
        // i IS NULL OR i > 5
        let mut m = matcher(vec![is_null(0), cmp(0, CmpOp::Gt, FilterValue::Int(5)), FilterOp::Or(2)]);
        assert!(m.may_match(&row(None, None, None)));
        assert!(m.may_match(&row(Some(7), None, None)));
        assert!(!m.may_match(&row(Some(3), None, None)));
        // NOT (i > 5): NULL for a NULL i (dropped); true for 3.
        let mut not = matcher(vec![cmp(0, CmpOp::Gt, FilterValue::Int(5)), FilterOp::Not]);
        assert!(!not.may_match(&row(None, None, None)));
        assert!(not.may_match(&row(Some(3), None, None)));
        // f = 1 AND t = 'x' with t unreadable (a row written before column 3 was
        // added: natts 2): kept unless f already decides it.
        let mut and =
            matcher(vec![cmp(1, CmpOp::Eq, FilterValue::Float(1.0f64.to_bits())), cmp(2, CmpOp::Eq, FilterValue::Bytes(b"x".to_vec())), FilterOp::And(2)]);
        let mut short = row(Some(1), Some(1.0), None);
        short[18] = 2;
        short[20] = 0;
        short[23] = 0;
        assert!(and.may_match(&short));
        let mut short2 = row(Some(1), Some(2.0), None);
        short2[18] = 2;
        short2[20] = 0;
        assert!(!and.may_match(&short2), "false AND unknown is false");
        // NOT of an unknown stays unknown: kept.
        let mut not_unknown = matcher(vec![cmp(2, CmpOp::Eq, FilterValue::Bytes(b"x".to_vec())), FilterOp::Not]);
        assert!(not_unknown.may_match(&short));
        // A malformed tuple: kept, undecided.
        assert!(m.may_match(&[1, 2, 3]));
        assert_eq!(m.verdict(&[1, 2, 3]), Verdict::Maybe);
        assert_eq!(and.verdict(&short), Verdict::Maybe);
        assert_eq!(m.verdict(&row(Some(7), None, None)), Verdict::Yes);
        assert_eq!(not.verdict(&row(None, None, None)), Verdict::No);
    }

    #[test]
    fn bad_filters_are_refused() {
        let f = |ops: Vec<FilterOp>| RowMatcher::new(&RowFilter { attrs: layout(), ops }).is_err();
        assert!(!f(vec![]), "no condition: every row matches");
        assert!(f(vec![FilterOp::And(2)]));
        assert!(f(vec![FilterOp::IsNull { att: 0 }, FilterOp::IsNull { att: 1 }]));
        assert!(f(vec![FilterOp::IsNull { att: 3 }]));
        assert!(f(vec![FilterOp::And(0)]));
        assert!(f(vec![FilterOp::IsNull { att: 0 }, FilterOp::Or(0)]));
        assert!(RowMatcher::new(&RowFilter { attrs: vec![AttrLayout { len: 0, align: 4 }], ops: vec![FilterOp::IsNull { att: 0 }] }).is_err());
        assert!(!f(vec![FilterOp::IsNull { att: 0 }, FilterOp::Not]));
    }
}
