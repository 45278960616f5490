//! Memcomparable encoding of SQL datums: the byte order of the encodings is
//! PostgreSQL's sort order of the values.
//!
//! Row keys are built from these encodings (see [`crate::hash`] for the hash prefix), so
//! RocksDB's bytewise comparator serves range scans and `ORDER BY` directly. The layout
//! is persistent: it is pinned byte for byte by `tests/datum_golden.rs` and described in
//! `crates/codec/KEY-ENCODING-DATUMS.md`; changing it needs a new
//! [`crate::FORMAT_VERSION`].
//!
//! # Invariants
//!
//! For every type `T`, every [`ColumnOrder`] `co` and values `a`, `b` of type `T` (or NULL):
//! - **Order**: `enc(a).cmp(enc(b)) == pg_cmp(a, b)` under `co` (ASC/DESC, NULLS
//!   FIRST/LAST), where `pg_cmp` is PostgreSQL's btree comparison (collation "C" for text).
//! - **Equality**: values PostgreSQL considers equal have identical encodings
//!   (`0.0`/`-0.0`, all NaNs, `1.0`/`1.00`).
//! - **Self-delimiting**: no encoding is a proper prefix of another encoding of the same
//!   type, so a key is the plain concatenation of its columns and compares column by
//!   column ([`encode_key`]).
//! - **Canonical**: decoding accepts exactly the byte strings the encoder produces;
//!   anything else is a [`CodecError`] (decoders never panic). `decode(encode(x))` is
//!   the normalized `x` (`-0.0` → `0.0`, NaN → the canonical NaN, numeric text → its
//!   normalized form such as `"1.5"`, `"-0.001"`, `"100"`).
//!
//! # Layout
//!
//! Each datum is one **tag byte**, then for non-NULL values a **body**. The tag is never
//! inverted; for a DESC column every body byte is bitwise inverted (`b ^ 0xFF`).
//!
//! | tag    | meaning                                            |
//! |--------|----------------------------------------------------|
//! | `0x01` | NULL in a NULLS FIRST column (no body)             |
//! | `0x02` | a non-NULL value; the body follows                 |
//! | `0x03` | NULL in a NULLS LAST column (no body)              |
//!
//! Bodies (shown for ASC; `be16/32/64` = big-endian, `^` = XOR):
//!
//! | type          | bytes | body                                                      |
//! |---------------|-------|-----------------------------------------------------------|
//! | `Bool`        | 1     | `0x00` false, `0x01` true                                 |
//! | `Int2`        | 2     | `be16(v as u16 ^ 0x8000)`                                 |
//! | `Int4`, `Date`| 4     | `be32(v as u32 ^ 0x8000_0000)`                            |
//! | `Int8`, `Timestamp`, `TimestampTz` | 8 | `be64(v as u64 ^ 0x8000_0000_0000_0000)` |
//! | `Float4`      | 4     | bits of `v` (`-0.0`→`+0.0`, NaN→`0x7FC0_0000`); sign clear: `bits ^ 0x8000_0000`, sign set: `!bits` |
//! | `Float8`      | 8     | same with 64 bits (NaN → `0x7FF8_0000_0000_0000`)         |
//! | `Text`,`Bytea`| n+2.. | bytes with `0x00` → `0x00 0xFF`, then `0x00 0x01`         |
//! | `Uuid`        | 16    | the 16 bytes as is (PostgreSQL compares uuids with memcmp) |
//! | `Numeric`     | 1..   | see below                                                 |
//!
//! Float NaN encodes as `0xFFC0_0000` / `0xFFF8_0000_0000_0000`, above `+Infinity`
//! (`0xFF80_0000`), as in PostgreSQL where NaN is greater than every other value.
//!
//! ## Numeric
//!
//! A numeric is normalized to `sign`, decimal digits `d1..dn` (`d1 != 0`, `dn != 0`) and an
//! exponent with value `0.d1..dn × 10^e10`, then regrouped in base 100: value
//! `= 0.p1..pk × 100^e` with digit pairs `pi` in `0..=99`, `p1 != 0`, `pk != 0`.
//!
//! | sign byte | value      | followed by                                   |
//! |-----------|------------|-----------------------------------------------|
//! | `0x00`    | -Infinity  | nothing                                       |
//! | `0x01`    | negative   | `!(exponent ++ mantissa)` (every byte inverted) |
//! | `0x02`    | zero       | nothing                                       |
//! | `0x03`    | positive   | `exponent ++ mantissa`                        |
//! | `0x04`    | +Infinity  | nothing                                       |
//! | `0x05`    | NaN        | nothing                                       |
//!
//! Exponent `e` (base 100, in `-16383..=65536` by PostgreSQL's limits):
//!
//! | first byte | when             | total | encoding                               |
//! |------------|------------------|-------|----------------------------------------|
//! | `0x01`     | `e < -120`       | 5     | `0x01 ++ be32(e as u32 ^ 0x8000_0000)`   |
//! | `0x08..=0xF8` | `-120..=120`  | 1     | `0x80 + e`                             |
//! | `0xFF`     | `e > 120`        | 5     | `0xFF ++ be32(e as u32 ^ 0x8000_0000)`   |
//!
//! Mantissa: one byte per pair, `2·p + 1` (odd) for every pair but the last, `2·p`
//! (even, `2..=198`) for the last, which therefore terminates it. A shorter mantissa
//! sorts before a longer one with the same leading pairs, as its value is smaller.
//!
//! Accepted numeric text: optional surrounding ASCII whitespace, optional sign, digits with
//! an optional decimal point, an optional exponent (`1e5`, `-1.5E-3`), or
//! (case-insensitively) `NaN`, `[+-]Infinity`, `[+-]inf`. After normalization the value
//! must fit PostgreSQL's numeric range: at most 131072 digits before the decimal point
//! and 16383 significant digits after it.

use crate::error::CodecError;

mod numeric;
pub use numeric::normalize_numeric;
use numeric::{decode_numeric, encode_numeric, parse_numeric};

/// Tag of a NULL in a `NULLS FIRST` column.
pub const TAG_NULL_FIRST: u8 = 0x01;
/// Tag of every non-NULL value.
pub const TAG_VALUE: u8 = 0x02;
/// Tag of a NULL in a `NULLS LAST` column.
pub const TAG_NULL_LAST: u8 = 0x03;

/// Numeric sign bytes (first body byte of a numeric, before DESC inversion).
pub const NUMERIC_NEG_INF: u8 = 0x00;
pub const NUMERIC_NEG: u8 = 0x01;
pub const NUMERIC_ZERO: u8 = 0x02;
pub const NUMERIC_POS: u8 = 0x03;
pub const NUMERIC_POS_INF: u8 = 0x04;
pub const NUMERIC_NAN: u8 = 0x05;

/// PostgreSQL's documented limit on digits before the decimal point.
pub const NUMERIC_MAX_INT_DIGITS: i64 = 131_072;
/// PostgreSQL's documented limit on digits after the decimal point (`NUMERIC_DSCALE_MAX`).
pub const NUMERIC_MAX_FRAC_DIGITS: i64 = 16_383;

const F32_NAN_BITS: u32 = 0x7FC0_0000;
const F64_NAN_BITS: u64 = 0x7FF8_0000_0000_0000;

/// A SQL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    Bool(bool),
    Int2(i16),
    Int4(i32),
    Int8(i64),
    Float4(f32),
    Float8(f64),
    /// PostgreSQL numeric text (`"-12.3400"`, `"0"`, `"NaN"`, `"Infinity"`, `"1e5"`, ...).
    /// Must be valid numeric text (see the module doc); [`Datum::numeric`] checks it.
    Numeric(String),
    /// Collation "C": ordered by the bytes of the UTF-8 encoding.
    Text(String),
    Bytea(Vec<u8>),
    /// Days since 2000-01-01; `i32::MIN`/`i32::MAX` are -infinity/+infinity.
    Date(i32),
    /// Microseconds since 2000-01-01; `i64::MIN`/`i64::MAX` are -infinity/+infinity.
    Timestamp(i64),
    /// Microseconds since 2000-01-01 UTC; `i64::MIN`/`i64::MAX` are -infinity/+infinity.
    TimestampTz(i64),
    Uuid([u8; 16]),
}

/// The type of a column, which decoding needs (encodings carry no type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DatumType {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Numeric,
    Text,
    Bytea,
    Date,
    Timestamp,
    TimestampTz,
    Uuid,
}

impl DatumType {
    /// Every type, for exhaustive tests.
    pub const ALL: [DatumType; 13] = [
        DatumType::Bool,
        DatumType::Int2,
        DatumType::Int4,
        DatumType::Int8,
        DatumType::Float4,
        DatumType::Float8,
        DatumType::Numeric,
        DatumType::Text,
        DatumType::Bytea,
        DatumType::Date,
        DatumType::Timestamp,
        DatumType::TimestampTz,
        DatumType::Uuid,
    ];
}

/// Direction of a key column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SortOrder {
    #[default]
    Asc,
    Desc,
}

/// Where NULLs of a key column sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NullsOrder {
    First,
    #[default]
    Last,
}

/// How one key column is ordered. `Default` is `ASC NULLS LAST`, PostgreSQL's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ColumnOrder {
    pub order: SortOrder,
    pub nulls: NullsOrder,
}

impl ColumnOrder {
    pub const ASC_NULLS_LAST: ColumnOrder = ColumnOrder { order: SortOrder::Asc, nulls: NullsOrder::Last };
    pub const ASC_NULLS_FIRST: ColumnOrder = ColumnOrder { order: SortOrder::Asc, nulls: NullsOrder::First };
    pub const DESC_NULLS_LAST: ColumnOrder = ColumnOrder { order: SortOrder::Desc, nulls: NullsOrder::Last };
    pub const DESC_NULLS_FIRST: ColumnOrder = ColumnOrder { order: SortOrder::Desc, nulls: NullsOrder::First };
    /// All four combinations, for exhaustive tests.
    pub const ALL: [ColumnOrder; 4] = [Self::ASC_NULLS_LAST, Self::ASC_NULLS_FIRST, Self::DESC_NULLS_LAST, Self::DESC_NULLS_FIRST];

    pub const fn new(order: SortOrder, nulls: NullsOrder) -> Self {
        ColumnOrder { order, nulls }
    }

    /// PostgreSQL's default for a direction: `ASC` → NULLS LAST, `DESC` → NULLS FIRST.
    pub const fn pg_default(order: SortOrder) -> Self {
        match order {
            SortOrder::Asc => Self::ASC_NULLS_LAST,
            SortOrder::Desc => Self::DESC_NULLS_FIRST,
        }
    }

    const fn null_tag(self) -> u8 {
        match self.nulls {
            NullsOrder::First => TAG_NULL_FIRST,
            NullsOrder::Last => TAG_NULL_LAST,
        }
    }

    /// XOR mask applied to every body byte.
    const fn mask(self) -> u8 {
        match self.order {
            SortOrder::Asc => 0x00,
            SortOrder::Desc => 0xFF,
        }
    }
}

impl Datum {
    /// The type of the value, `None` for `Null`.
    pub fn datum_type(&self) -> Option<DatumType> {
        Some(match self {
            Datum::Null => return None,
            Datum::Bool(_) => DatumType::Bool,
            Datum::Int2(_) => DatumType::Int2,
            Datum::Int4(_) => DatumType::Int4,
            Datum::Int8(_) => DatumType::Int8,
            Datum::Float4(_) => DatumType::Float4,
            Datum::Float8(_) => DatumType::Float8,
            Datum::Numeric(_) => DatumType::Numeric,
            Datum::Text(_) => DatumType::Text,
            Datum::Bytea(_) => DatumType::Bytea,
            Datum::Date(_) => DatumType::Date,
            Datum::Timestamp(_) => DatumType::Timestamp,
            Datum::TimestampTz(_) => DatumType::TimestampTz,
            Datum::Uuid(_) => DatumType::Uuid,
        })
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }

    /// A numeric datum from PostgreSQL numeric text, normalized (`"1.50"` → `"1.5"`).
    pub fn numeric(text: &str) -> Result<Datum, CodecError> {
        normalize_numeric(text).map(Datum::Numeric)
    }

    /// The value `decode_datum(encode_datum(self))` returns: `-0.0` → `0.0`, every NaN
    /// → the canonical NaN, numeric text normalized. Errors on invalid numeric text.
    pub fn normalized(&self) -> Result<Datum, CodecError> {
        Ok(match self {
            Datum::Float4(v) => Datum::Float4(f32::from_bits(canonical_f32_bits(*v))),
            Datum::Float8(v) => Datum::Float8(f64::from_bits(canonical_f64_bits(*v))),
            Datum::Numeric(s) => Datum::Numeric(normalize_numeric(s)?),
            other => other.clone(),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------

/// Append the encoding of `d` for a column ordered by `co`.
///
/// # Panics
/// If `d` is a `Datum::Numeric` whose text is not a valid numeric (a bug in the caller,
/// which must validate numerics on input, e.g. with [`Datum::numeric`]). Use
/// [`try_encode_datum`] to get an error instead.
pub fn encode_datum(out: &mut Vec<u8>, d: &Datum, co: ColumnOrder) {
    if let Err(e) = try_encode_datum(out, d, co) {
        panic!("encode_datum: {e}");
    }
}

/// Like [`encode_datum`] but returns an error for invalid numeric text; `out` is left
/// unchanged on error.
pub fn try_encode_datum(out: &mut Vec<u8>, d: &Datum, co: ColumnOrder) -> Result<(), CodecError> {
    if d.is_null() {
        out.push(co.null_tag());
        return Ok(());
    }
    let start = out.len();
    out.push(TAG_VALUE);
    if let Err(e) = encode_body(out, d) {
        out.truncate(start);
        return Err(e);
    }
    let mask = co.mask();
    if mask != 0 {
        for b in &mut out[start + 1..] {
            *b ^= mask;
        }
    }
    Ok(())
}

/// Decode one datum of type `ty` from the front of `input` and advance `input` past it.
/// On error `input` is left unchanged.
pub fn decode_datum(input: &mut &[u8], ty: DatumType, co: ColumnOrder) -> Result<Datum, CodecError> {
    let mut r = Reader { input, mask: co.mask() };
    let tag = r.raw_byte()?;
    let d = match tag {
        TAG_VALUE => decode_body(&mut r, ty)?,
        t if t == co.null_tag() => Datum::Null,
        TAG_NULL_FIRST => return Err(CodecError::InvalidTag { tag, context: "NULLS FIRST null tag in a NULLS LAST column" }),
        TAG_NULL_LAST => return Err(CodecError::InvalidTag { tag, context: "NULLS LAST null tag in a NULLS FIRST column" }),
        _ => return Err(CodecError::InvalidTag { tag, context: "datum tag" }),
    };
    *input = r.input;
    Ok(d)
}

/// Append the key made of `cols`: the concatenation of their encodings.
///
/// # Panics
/// Like [`encode_datum`], on invalid numeric text; see [`try_encode_key`].
pub fn encode_key(out: &mut Vec<u8>, cols: &[(&Datum, ColumnOrder)]) {
    if let Err(e) = try_encode_key(out, cols) {
        panic!("encode_key: {e}");
    }
}

/// Like [`encode_key`] but returns an error for invalid numeric text; `out` is left
/// unchanged on error.
pub fn try_encode_key(out: &mut Vec<u8>, cols: &[(&Datum, ColumnOrder)]) -> Result<(), CodecError> {
    let start = out.len();
    for (d, co) in cols {
        if let Err(e) = try_encode_datum(out, d, *co) {
            out.truncate(start);
            return Err(e);
        }
    }
    Ok(())
}

/// Decode a key made of columns `cols`; `input` must be consumed exactly.
pub fn decode_key(input: &[u8], cols: &[(DatumType, ColumnOrder)]) -> Result<Vec<Datum>, CodecError> {
    let mut rest = input;
    let mut out = Vec::with_capacity(cols.len());
    for (ty, co) in cols {
        out.push(decode_datum(&mut rest, *ty, *co)?);
    }
    if rest.is_empty() {
        Ok(out)
    } else {
        Err(CodecError::TrailingBytes(rest.len()))
    }
}

// ---------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------

fn encode_body(out: &mut Vec<u8>, d: &Datum) -> Result<(), CodecError> {
    match d {
        Datum::Null => {} // written by the caller: a NULL is its tag alone
        Datum::Bool(v) => out.push(u8::from(*v)),
        Datum::Int2(v) => out.extend_from_slice(&((*v as u16) ^ 0x8000).to_be_bytes()),
        Datum::Int4(v) | Datum::Date(v) => out.extend_from_slice(&((*v as u32) ^ 0x8000_0000).to_be_bytes()),
        Datum::Int8(v) | Datum::Timestamp(v) | Datum::TimestampTz(v) => out.extend_from_slice(&((*v as u64) ^ (1 << 63)).to_be_bytes()),
        Datum::Float4(v) => out.extend_from_slice(&f32_key(canonical_f32_bits(*v)).to_be_bytes()),
        Datum::Float8(v) => out.extend_from_slice(&f64_key(canonical_f64_bits(*v)).to_be_bytes()),
        Datum::Numeric(s) => encode_numeric(out, &parse_numeric(s)?),
        Datum::Text(s) => encode_escaped(out, s.as_bytes()),
        Datum::Bytea(b) => encode_escaped(out, b),
        Datum::Uuid(u) => out.extend_from_slice(u),
    }
    Ok(())
}

fn decode_body(r: &mut Reader<'_>, ty: DatumType) -> Result<Datum, CodecError> {
    Ok(match ty {
        DatumType::Bool => match r.byte()? {
            0 => Datum::Bool(false),
            1 => Datum::Bool(true),
            b => return Err(CodecError::InvalidBool(b)),
        },
        DatumType::Int2 => Datum::Int2((u16::from_be_bytes(r.array()?) ^ 0x8000) as i16),
        DatumType::Int4 => Datum::Int4(decode_i32(r)?),
        DatumType::Date => Datum::Date(decode_i32(r)?),
        DatumType::Int8 => Datum::Int8(decode_i64(r)?),
        DatumType::Timestamp => Datum::Timestamp(decode_i64(r)?),
        DatumType::TimestampTz => Datum::TimestampTz(decode_i64(r)?),
        DatumType::Float4 => {
            let key = u32::from_be_bytes(r.array()?);
            let bits = if key & (1 << 31) != 0 { key ^ (1 << 31) } else { !key };
            if bits != canonical_f32_bits(f32::from_bits(bits)) {
                return Err(CodecError::NonCanonical("float4 -0 or non-canonical NaN"));
            }
            Datum::Float4(f32::from_bits(bits))
        }
        DatumType::Float8 => {
            let key = u64::from_be_bytes(r.array()?);
            let bits = if key & (1 << 63) != 0 { key ^ (1 << 63) } else { !key };
            if bits != canonical_f64_bits(f64::from_bits(bits)) {
                return Err(CodecError::NonCanonical("float8 -0 or non-canonical NaN"));
            }
            Datum::Float8(f64::from_bits(bits))
        }
        DatumType::Numeric => Datum::Numeric(decode_numeric(r)?),
        DatumType::Text => {
            let bytes = decode_escaped(r)?;
            Datum::Text(String::from_utf8(bytes).map_err(|_| CodecError::InvalidUtf8)?)
        }
        DatumType::Bytea => Datum::Bytea(decode_escaped(r)?),
        DatumType::Uuid => Datum::Uuid(r.array()?),
    })
}

fn decode_i32(r: &mut Reader<'_>) -> Result<i32, CodecError> {
    Ok((u32::from_be_bytes(r.array()?) ^ 0x8000_0000) as i32)
}

fn decode_i64(r: &mut Reader<'_>) -> Result<i64, CodecError> {
    Ok((u64::from_be_bytes(r.array()?) ^ (1 << 63)) as i64)
}

/// Reads body bytes, undoing the DESC inversion.
struct Reader<'a> {
    input: &'a [u8],
    mask: u8,
}

impl<'a> Reader<'a> {
    /// The next byte as stored (for the tag).
    fn raw_byte(&mut self) -> Result<u8, CodecError> {
        let (&b, rest) = self.input.split_first().ok_or(CodecError::Truncated)?;
        self.input = rest;
        Ok(b)
    }

    /// The next body byte, un-inverted.
    fn byte(&mut self) -> Result<u8, CodecError> {
        Ok(self.raw_byte()? ^ self.mask)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let (head, rest) = self.input.split_at_checked(N).ok_or(CodecError::Truncated)?;
        let mut a = [0u8; N];
        for (dst, src) in a.iter_mut().zip(head) {
            *dst = src ^ self.mask;
        }
        self.input = rest;
        Ok(a)
    }
}

// ---------------------------------------------------------------------------------------
// Floats
// ---------------------------------------------------------------------------------------

/// Bits of `v` with `-0.0` → `+0.0` and every NaN → `0x7FC0_0000`.
fn canonical_f32_bits(v: f32) -> u32 {
    if v.is_nan() {
        F32_NAN_BITS
    } else if v == 0.0 {
        0
    } else {
        v.to_bits()
    }
}

fn canonical_f64_bits(v: f64) -> u64 {
    if v.is_nan() {
        F64_NAN_BITS
    } else if v == 0.0 {
        0
    } else {
        v.to_bits()
    }
}

fn f32_key(bits: u32) -> u32 {
    if bits & (1 << 31) == 0 {
        bits ^ (1 << 31)
    } else {
        !bits
    }
}

fn f64_key(bits: u64) -> u64 {
    if bits & (1 << 63) == 0 {
        bits ^ (1 << 63)
    } else {
        !bits
    }
}

// ---------------------------------------------------------------------------------------
// Text / bytea
// ---------------------------------------------------------------------------------------

// Text and bytea bodies are escaped as stored keys are (`keys::escape_into`: `0x00`
// as `0x00 0xFF`, ended by `0x00 0x01`): one escaping, one implementation.
use crate::keys::{escape_into as encode_escaped, ESC, ESC_END, ESC_ZERO};

fn decode_escaped(r: &mut Reader<'_>) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    let stored_esc = ESC ^ r.mask;
    loop {
        let pos = r.input.iter().position(|&b| b == stored_esc).ok_or(CodecError::Truncated)?;
        let (run, rest) = r.input.split_at(pos);
        out.extend(run.iter().map(|b| b ^ r.mask));
        r.input = rest;
        r.byte()?; // the escape byte itself
        match r.byte()? {
            ESC_ZERO => out.push(0),
            ESC_END => return Ok(out),
            b => return Err(CodecError::InvalidEscape(b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_parse_and_format() {
        let cases = [
            ("0", "0"),
            ("-0", "0"),
            ("+0.000", "0"),
            ("0e99", "0"),
            ("1", "1"),
            ("1.0", "1"),
            ("1.00", "1"),
            ("001.500", "1.5"),
            ("-12.3400", "-12.34"),
            ("-0.001", "-0.001"),
            (".5", "0.5"),
            ("5.", "5"),
            ("100", "100"),
            ("1e5", "100000"),
            ("1.5E-3", "0.0015"),
            ("-2.5e+2", "-250"),
            ("  42  ", "42"),
            ("NaN", "NaN"),
            ("nan", "NaN"),
            ("Infinity", "Infinity"),
            ("+inf", "Infinity"),
            ("-Infinity", "-Infinity"),
            ("-INF", "-Infinity"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_numeric(input).as_deref(), Ok(want), "{input:?}");
        }
        for bad in ["", " ", "-", "+", ".", "e5", "1e", "1e+", "1.2.3", "abc", "1x", "--1", "-NaN", "1 2", "0x10", "1e1000000001", "\u{661}"] {
            assert!(matches!(normalize_numeric(bad), Err(CodecError::InvalidNumeric(_))), "{bad:?}");
        }
    }

    #[test]
    fn numeric_range_limits() {
        let max_int = format!("9{}", "0".repeat(131_071));
        assert_eq!(normalize_numeric(&max_int).as_deref(), Ok(max_int.as_str()));
        assert_eq!(normalize_numeric("1e131071").map(|s| s.len()), Ok(131_072));
        assert!(normalize_numeric("1e131072").is_err());
        let min_frac = format!("0.{}1", "0".repeat(16_382));
        assert_eq!(normalize_numeric("1e-16383").as_deref(), Ok(min_frac.as_str()));
        assert!(normalize_numeric("1e-16384").is_err());
        assert!(normalize_numeric(&format!("0.{}1", "0".repeat(16_383))).is_err());
        // Trailing zeros are not significant.
        assert_eq!(normalize_numeric(&format!("1.{}", "0".repeat(20_000))).as_deref(), Ok("1"));
    }
}
