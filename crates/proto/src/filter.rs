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
