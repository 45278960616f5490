//! Row filters pushed down into scans: a `WHERE` clause's conditions on columns,
//! evaluated by the tablet on each visible row before it is shipped.
//!
//! Rows are PostgreSQL heap tuples (see `pg/ext/src/tuple.rs`); the filter carries
//! the layout of the attributes it reads (length and alignment, as `pg_attribute`
//! has them), so the tablet finds their values without the catalog.
//!
//! A filter is a **pre-filter**: the tablet drops a row only when the condition is
//! certainly not true for it (false or NULL, as SQL's `WHERE` drops it). When it
//! cannot tell (a compressed value, a column added after the row was written whose
//! default only the catalog knows, a malformed tuple) it keeps the row. PostgreSQL
//! evaluates the whole `WHERE` clause again on what arrives, so a pushed filter can
//! only save work, never change an answer.
//!
//! The condition is a postfix program ([`FilterOp`]), not a tree: no message type
//! is recursive (see the crate header), and evaluation needs no recursion either.

use serde::{Deserialize, Serialize};

/// Most operations a filter may have; longer ones are refused by the tablet.
pub const MAX_FILTER_OPS: usize = 256;

/// A condition on a row's columns (see the module header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowFilter {
    /// The layout of attributes 1..=n of the table, n the highest one read.
    pub attrs: Vec<AttrLayout>,
    /// The condition in postfix order: operands before their operator. It leaves
    /// one value; a program that does not is treated as "cannot tell".
    pub ops: Vec<FilterOp>,
}

/// How an attribute is stored in a heap tuple (`attlen`, `attalign`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrLayout {
    /// Bytes of a fixed-length value; -1 variable length (varlena), -2 C string.
    pub len: i16,
    /// Alignment in bytes (1, 2, 4 or 8).
    pub align: u8,
}

/// A comparison: `column OP constant`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
    Ne,
}

/// How a column's stored bytes compare with a constant, with PostgreSQL's
/// semantics for the operator class the planner chose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilterValue {
    /// A signed integer of the column's length (int2, int4, int8, and the types
    /// stored and ordered as those: date, time, timestamp, timestamptz).
    Int(i64),
    /// A float4 or float8 column against this float8 (its bits): NaN equals NaN
    /// and sorts above every other value, -0 equals 0 (`float8_cmp_internal`).
    Float(u64),
    /// A bool column.
    Bool(bool),
    /// A variable-length column compared byte-wise, then by length (bytea; text
    /// under the "C" collation; equality of text under any deterministic one).
    Bytes(Vec<u8>),
    /// A fixed-length column compared byte-wise (uuid).
    Fixed(Vec<u8>),
}

/// One step of a filter program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilterOp {
    /// Push `attribute OP value`; NULL when the attribute is NULL. `att` is
    /// 0-based (attribute number - 1).
    Cmp { att: u16, op: CmpOp, value: FilterValue },
    /// Push whether the attribute is NULL (never NULL itself).
    IsNull { att: u16 },
    /// Pop `n` values, push their SQL AND.
    And(u16),
    /// Pop `n` values, push their SQL OR.
    Or(u16),
    /// Pop one value, push its SQL NOT.
    Not,
}

/// An aggregate a scan computes over the rows that match its filter (whose
/// `attrs` give the layout of the aggregated attribute too): `count(*)`,
/// `count(col)`, `sum`, `min`, `max` (and `avg` as sum and count). A row whose
/// aggregated value cannot be read in place is shipped instead of folded, as a row
/// the filter cannot decide is (see `ScanSpec::aggregates`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggSpec {
    pub func: AggFunc,
    /// 0-based attribute (ignored by `CountRows`).
    pub att: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AggFunc {
    /// Rows.
    CountRows,
    /// Rows whose attribute is not NULL.
    CountValues,
    /// Sum of an integer attribute (int2, int4, int8), exact.
    SumInt,
    /// Sum of a float4 attribute in float4 arithmetic (PostgreSQL's `sum(float4)`).
    SumFloat4,
    /// Sum of a float4 or float8 attribute in float8 arithmetic.
    SumFloat8,
    MinInt,
    MaxInt,
    /// Of a float4 or float8 attribute, in PostgreSQL's float order (NaN last).
    MinFloat,
    MaxFloat,
}

/// Aggregates computed per value of one attribute (`GROUP BY col`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupBy {
    /// 0-based attribute.
    pub att: u16,
    /// A float attribute: -0 groups with 0, and every NaN with every other NaN.
    pub float: bool,
}

/// One group's partials: its key (the attribute's stored bytes, floats made
/// canonical; None: NULL), the stored bytes of one of its rows' values (what the
/// group shows: a group of -0 floats shows -0, as PostgreSQL's does), and one
/// partial per aggregate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggGroup {
    pub key: Option<Vec<u8>>,
    pub shown: Vec<u8>,
    pub values: Vec<AggValue>,
}

/// A group's key (see [`AggGroup`]).
pub type GroupKey = Option<Vec<u8>>;
/// What a group shows, and its partials, while groups are gathered.
pub type GroupState = (Vec<u8>, Vec<AggValue>);

/// The canonical group key of a float attribute's stored bytes (4 or 8, little
/// endian): -0 as 0, every NaN as one NaN.
pub fn canonical_float_key(bytes: &[u8]) -> Vec<u8> {
    match bytes.len() {
        4 => {
            let f = f32::from_le_bytes(bytes.try_into().unwrap_or_default());
            let f = if f.is_nan() {
                f32::NAN
            } else if f == 0.0 {
                0.0
            } else {
                f
            };
            f.to_le_bytes().to_vec()
        }
        8 => {
            let f = f64::from_le_bytes(bytes.try_into().unwrap_or_default());
            let f = if f.is_nan() {
                f64::NAN
            } else if f == 0.0 {
                0.0
            } else {
                f
            };
            f.to_le_bytes().to_vec()
        }
        _ => bytes.to_vec(),
    }
}

/// A partial aggregate: one tablet's, or several merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AggValue {
    Count(u64),
    /// Sum of `n` values (NULLs skipped).
    IntSum {
        sum: i128,
        n: u64,
    },
    /// Sum (f64 bits; for `SumFloat4` an f32 widened) of `n` values, and whether
    /// any value was infinite (an infinite sum of finite values overflowed).
    FloatSum {
        bits: u64,
        n: u64,
        inf_input: bool,
    },
    Int(Option<i64>),
    /// f64 bits.
    Float(Option<u64>),
}

impl AggFunc {
    /// The value of this aggregate over no rows.
    pub fn empty(self) -> AggValue {
        match self {
            AggFunc::CountRows | AggFunc::CountValues => AggValue::Count(0),
            AggFunc::SumInt => AggValue::IntSum { sum: 0, n: 0 },
            AggFunc::SumFloat4 | AggFunc::SumFloat8 => AggValue::FloatSum { bits: 0f64.to_bits(), n: 0, inf_input: false },
            AggFunc::MinInt | AggFunc::MaxInt => AggValue::Int(None),
            AggFunc::MinFloat | AggFunc::MaxFloat => AggValue::Float(None),
        }
    }

    /// The partial of this aggregate over one non-NULL value, read as an integer
    /// or as a float, as the aggregate needs.
    pub fn of_value(self, int: impl Fn() -> i64, float: impl Fn() -> f64) -> AggValue {
        match self {
            AggFunc::CountRows | AggFunc::CountValues => AggValue::Count(1),
            AggFunc::SumInt => AggValue::IntSum { sum: int() as i128, n: 1 },
            AggFunc::SumFloat4 | AggFunc::SumFloat8 => {
                let f = float();
                AggValue::FloatSum { bits: f.to_bits(), n: 1, inf_input: f.is_infinite() }
            }
            AggFunc::MinInt | AggFunc::MaxInt => AggValue::Int(Some(int())),
            AggFunc::MinFloat | AggFunc::MaxFloat => AggValue::Float(Some(float().to_bits())),
        }
    }

    /// Fold `other` (a partial of this aggregate) into `acc`.
    pub fn merge(self, acc: &mut AggValue, other: AggValue) {
        use std::cmp::Ordering;
        match (acc, other) {
            (AggValue::Count(a), AggValue::Count(b)) => *a += b,
            (AggValue::IntSum { sum, n }, AggValue::IntSum { sum: s, n: m }) => {
                *sum = sum.saturating_add(s);
                *n += m;
            }
            (AggValue::FloatSum { bits, n, inf_input }, AggValue::FloatSum { bits: b, n: m, inf_input: i }) => {
                *bits = if self == AggFunc::SumFloat4 {
                    ((f64::from_bits(*bits) as f32) + (f64::from_bits(b) as f32)) as f64
                } else {
                    f64::from_bits(*bits) + f64::from_bits(b)
                }
                .to_bits();
                *n += m;
                *inf_input |= i;
            }
            (AggValue::Int(a), AggValue::Int(Some(b))) => {
                *a = Some(match *a {
                    None => b,
                    Some(x) if self == AggFunc::MinInt => x.min(b),
                    Some(x) => x.max(b),
                })
            }
            (AggValue::Float(a), AggValue::Float(Some(b))) => {
                let keep_new = match *a {
                    None => true,
                    Some(x) => {
                        let ord = float_order(f64::from_bits(b), f64::from_bits(x));
                        if self == AggFunc::MinFloat {
                            ord == Ordering::Less
                        } else {
                            ord == Ordering::Greater
                        }
                    }
                };
                if keep_new {
                    *a = Some(b);
                }
            }
            _ => {}
        }
    }
}

/// PostgreSQL's float order (`float8_cmp_internal`): NaNs equal each other and
/// sort above everything else; otherwise numeric order (-0 = 0).
pub fn float_order(a: f64, b: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}
