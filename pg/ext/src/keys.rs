//! Row keys and index keys from PostgreSQL datums.
//!
//! Layout (bytes in `codec`, see docs/key-encoding.md):
//! - hash-sharded table, with primary key: `be16(hash16(enc(c1))) ++ enc(c1) ++ enc(c2)…`
//! - range-sharded table, with primary key: `enc(c1) ++ enc(c2)…`
//! - no primary key: `[tablet prefix] ++ 0x00 ++ be64(µs) ++ random8` (0x00 can never
//!   start an encoded datum, whose tags are 01–03, so generated ids never collide with
//!   primary keys; ids sort in insertion order, see `am/table/rowid.rs`)
//! - secondary index (always hash-sharded on its first column):
//!   `be16(hash16(enc(c1))) ++ enc(c1)… [++ row key when not enforced unique]`,
//!   value = the row key.
//!
//! A column whose type has a known memcomparable encoding is *ordered*: byte order =
//! the btree order (text only under a C collation). Other types are stored by their
//! bytes: equality works, order does not, and such keys are never used for ordered
//! scans or range bounds.

use pgrx::pg_sys;
use pinax_codec::datum::{decode_datum, encode_datum, ColumnOrder, Datum, DatumType, NullsOrder, SortOrder};
use pinax_codec::hash::{encode_hash_prefix, hash16, HASH_PREFIX_LEN};
use std::ffi::{CStr, CString};

// Type OIDs (pg_type.dat).
const BOOLOID: u32 = 16;
const BYTEAOID: u32 = 17;
const CHAROID: u32 = 18;
const NAMEOID: u32 = 19;
const INT8OID: u32 = 20;
const INT2OID: u32 = 21;
const INT4OID: u32 = 23;
const TEXTOID: u32 = 25;
const OIDOID: u32 = 26;
const FLOAT4OID: u32 = 700;
const FLOAT8OID: u32 = 701;
const BPCHAROID: u32 = 1042;
const VARCHAROID: u32 = 1043;
const DATEOID: u32 = 1082;
const TIMEOID: u32 = 1083;
const TIMESTAMPOID: u32 = 1114;
const TIMESTAMPTZOID: u32 = 1184;
const NUMERICOID: u32 = 1700;
const UUIDOID: u32 = 2950;
const INTERVALOID: u32 = 1186;
const C_COLLATION_OID: u32 = 950;
const POSIX_COLLATION_OID: u32 = 951;

/// How one key column's datums become codec datums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Bool,
    Int2,
    Int4,
    Int8,
    Oid,
    Char,
    Float4,
    Float8,
    Numeric,
    Text,
    BpChar,
    Name,
    Bytea,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Uuid,
    /// By its span (btree's order and equality: '1 day' = '24 hours'), which
    /// does not give the value back.
    Interval,
    /// citext: by its lower-case form (citext's equality: `lower(a) = lower(b)`),
    /// which does not give the value back.
    Citext,
    /// Any other type: its bytes (equality only).
    Raw {
        typlen: i16,
        byval: bool,
    },
}

/// One key column: how to encode it and in which order.
#[derive(Clone, Copy, Debug)]
pub struct KeyColumn {
    pub kind: KeyKind,
    /// The column's type (after domains), for cross-type scan keys.
    pub typid: u32,
    pub order: ColumnOrder,
    /// The column's type modifier (char(n) padding when describing keys).
    pub typmod: i32,
    /// Byte order of the encoding equals the btree order of the column.
    pub ordered: bool,
    /// Values the column's btree equality calls equal are the same value (not so
    /// for numeric 1.0 = 1.00, float -0 = 0, bpchar's trailing blanks, text under
    /// a nondeterministic collation, or types stored as raw bytes): a row found by
    /// such a key has exactly the key values it was looked up by.
    pub equal_is_identical: bool,
}

const DEFAULT_COLLATION_OID: u32 = 100;

/// Whether text under collation `coll` sorts by its bytes (C, POSIX, or a database
/// whose default collation is C / C.UTF-8, which orders by code point = UTF-8 bytes).
fn is_c_collation(coll: u32) -> bool {
    match coll {
        0 | C_COLLATION_OID | POSIX_COLLATION_OID => true,
        DEFAULT_COLLATION_OID => {
            // SAFETY: reads a GUC's current value.
            let v = unsafe { pg_sys::GetConfigOption(c"lc_collate".as_ptr(), true, false) };
            if v.is_null() {
                return false;
            }
            // SAFETY: GUC values are NUL-terminated strings.
            let s = unsafe { CStr::from_ptr(v) }.to_string_lossy().to_ascii_lowercase();
            matches!(s.as_str(), "c" | "posix" | "c.utf-8" | "c.utf8")
        }
        _ => false,
    }
}

impl KeyColumn {
    /// Describe a column of type `typid` (a domain is resolved to its base type),
    /// collation `coll`, with index option bits `indoption` (DESC, NULLS FIRST).
    pub fn new(typid: u32, typmod: i32, coll: u32, indoption: i16) -> KeyColumn {
        // SAFETY: catalog lookups with valid type OIDs from the relcache.
        let base = unsafe { pg_sys::getBaseType(pg_sys::Oid::from(typid)) }.to_u32();
        let kind = match base {
            BOOLOID => KeyKind::Bool,
            INT2OID => KeyKind::Int2,
            INT4OID => KeyKind::Int4,
            INT8OID => KeyKind::Int8,
            OIDOID => KeyKind::Oid,
            CHAROID => KeyKind::Char,
            FLOAT4OID => KeyKind::Float4,
            FLOAT8OID => KeyKind::Float8,
            NUMERICOID => KeyKind::Numeric,
            TEXTOID | VARCHAROID => KeyKind::Text,
            BPCHAROID => KeyKind::BpChar,
            NAMEOID => KeyKind::Name,
            BYTEAOID => KeyKind::Bytea,
            DATEOID => KeyKind::Date,
            TIMEOID => KeyKind::Time,
            TIMESTAMPOID => KeyKind::Timestamp,
            TIMESTAMPTZOID => KeyKind::TimestampTz,
            UUIDOID => KeyKind::Uuid,
            INTERVALOID => KeyKind::Interval,
            // SAFETY: a catalog lookup of a valid type OID.
            _ if unsafe { is_citext(base) } => KeyKind::Citext,
            _ => {
                let mut typlen: i16 = 0;
                let mut byval = false;
                // SAFETY: out-parameters are valid locals.
                unsafe { pg_sys::get_typlenbyval(pg_sys::Oid::from(base), &mut typlen, &mut byval) };
                KeyKind::Raw { typlen, byval }
            }
        };
        let ordered = match kind {
            KeyKind::Raw { .. } => false,
            KeyKind::Text | KeyKind::BpChar | KeyKind::Name | KeyKind::Citext => is_c_collation(coll),
            _ => true,
        };
        let equal_is_identical = match kind {
            KeyKind::Bool | KeyKind::Int2 | KeyKind::Int4 | KeyKind::Int8 | KeyKind::Oid | KeyKind::Char => true,
            KeyKind::Bytea | KeyKind::Date | KeyKind::Time | KeyKind::Timestamp | KeyKind::TimestampTz | KeyKind::Uuid => true,
            // SAFETY: a catalog lookup of the index column's collation.
            KeyKind::Text => coll == 0 || coll == DEFAULT_COLLATION_OID || unsafe { pg_sys::get_collation_isdeterministic(pg_sys::Oid::from(coll)) },
            KeyKind::Float4
            | KeyKind::Float8
            | KeyKind::Numeric
            | KeyKind::BpChar
            | KeyKind::Name
            | KeyKind::Interval
            | KeyKind::Citext
            | KeyKind::Raw { .. } => false,
        };
        let desc = indoption & 0x0001 != 0; // INDOPTION_DESC
        let nulls_first = indoption & 0x0002 != 0; // INDOPTION_NULLS_FIRST
        let order = ColumnOrder::new(if desc { SortOrder::Desc } else { SortOrder::Asc }, if nulls_first { NullsOrder::First } else { NullsOrder::Last });
        KeyColumn { kind, typid: base, order, typmod, ordered, equal_is_identical }
    }

    /// Whether decoding this column's encoding gives back the exact datum stored
    /// (index-only scans may return it): not for floats (`-0` and NaN payloads are
    /// normalized), numeric (display scale), char(n) (padding) or cstring.
    pub fn returnable(&self) -> bool {
        !matches!(
            self.kind,
            KeyKind::Float4 | KeyKind::Float8 | KeyKind::Numeric | KeyKind::BpChar | KeyKind::Interval | KeyKind::Citext | KeyKind::Raw { typlen: -2, .. }
        )
    }

    /// Append the encoding of `(value, isnull)` to `out`.
    ///
    /// # Safety
    /// `value` must be a valid datum of this column's type.
    pub unsafe fn encode(&self, out: &mut Vec<u8>, value: pg_sys::Datum, isnull: bool) {
        // SAFETY: the caller upholds this function's contract (# Safety).
        unsafe {
            let d = if isnull { Datum::Null } else { to_codec(self.kind, value) };
            encode_datum(out, &d, self.order);
        }
    }
}

/// The bytes of a varlena datum, detoasted.
///
/// # Safety
/// `value` must be a varlena datum.
unsafe fn varlena_bytes(value: pg_sys::Datum) -> Vec<u8> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let p = pg_sys::pg_detoast_datum_packed(value.cast_mut_ptr());
        let len = pgrx::varlena::varsize_any_exhdr(p);
        let data = pgrx::varlena::vardata_any(p) as *const u8;
        std::slice::from_raw_parts(data, len).to_vec()
    }
}

unsafe extern "C-unwind" {
    /// formatting.c (not in pgrx's bindings): `buff` lower-cased under collation
    /// `collid`, palloc'd and NUL-terminated.
    fn str_tolower(buff: *const std::ffi::c_char, nbytes: usize, collid: pg_sys::Oid) -> *mut std::ffi::c_char;
}

/// Whether type `typid` is contrib's citext (an extension type: by its name).
///
/// # Safety
/// A catalog lookup: in a transaction.
unsafe fn is_citext(typid: u32) -> bool {
    thread_local! {
        static KNOWN: std::cell::RefCell<std::collections::HashMap<u32, bool>> = std::cell::RefCell::new(std::collections::HashMap::new());
    }
    if typid < pg_sys::FirstNormalObjectId {
        return false; // a built-in type
    }
    if let Some(k) = KNOWN.with(|k| k.borrow().get(&typid).copied()) {
        return k;
    }
    // SAFETY: the caller upholds this function's contract (# Safety).
    let name = unsafe { pg_sys::format_type_be(pg_sys::Oid::from(typid)) };
    // SAFETY: format_type_be returns a palloc'd C string.
    let c = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let citext = c.rsplit('.').next() == Some("citext");
    KNOWN.with(|k| k.borrow_mut().insert(typid, citext));
    citext
}

/// Convert a datum to the codec's datum.
///
/// # Safety
/// `value` must be a valid, non-null datum of a type of kind `kind`.
unsafe fn to_codec(kind: KeyKind, value: pg_sys::Datum) -> Datum {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let raw = value.value();
        match kind {
            KeyKind::Bool => Datum::Bool(raw != 0),
            KeyKind::Int2 => Datum::Int2(raw as i16),
            KeyKind::Int4 => Datum::Int4(raw as i32),
            KeyKind::Int8 => Datum::Int8(raw as i64),
            KeyKind::Oid => Datum::Int8(raw as u32 as i64),
            KeyKind::Char => Datum::Int2(raw as u8 as i16),
            KeyKind::Float4 => Datum::Float4(f32::from_bits(raw as u32)),
            KeyKind::Float8 => Datum::Float8(f64::from_bits(raw as u64)),
            KeyKind::Numeric => {
                // Numeric functions need a plain 4-byte header (tuples may hold short ones).
                let n = pg_sys::pg_detoast_datum(value.cast_mut_ptr());
                let s = pg_sys::numeric_normalize(n.cast());
                let text = CStr::from_ptr(s).to_string_lossy().into_owned();
                pg_sys::pfree(s.cast());
                match Datum::numeric(&text) {
                    Ok(d) => d,
                    Err(_) => Datum::Bytea(text.into_bytes()),
                }
            }
            KeyKind::Text | KeyKind::Bytea => Datum::Bytea(varlena_bytes(value)),
            KeyKind::Citext => {
                // citext_eq: both sides lowered under the database's default collation,
                // then compared byte by byte.
                let p = pg_sys::pg_detoast_datum_packed(value.cast_mut_ptr());
                let len = pgrx::varlena::varsize_any_exhdr(p);
                let data = pgrx::varlena::vardata_any(p) as *const std::ffi::c_char;
                let lower = pg_sys::ffi::pg_guard_ffi_boundary(|| str_tolower(data, len, pg_sys::Oid::from(DEFAULT_COLLATION_OID)));
                let b = CStr::from_ptr(lower).to_bytes().to_vec();
                pg_sys::pfree(lower.cast());
                Datum::Bytea(b)
            }
            KeyKind::BpChar => {
                let mut b = varlena_bytes(value);
                while b.last() == Some(&b' ') {
                    b.pop();
                }
                Datum::Bytea(b)
            }
            KeyKind::Name => Datum::Bytea(CStr::from_ptr(value.cast_mut_ptr::<std::ffi::c_char>()).to_bytes().to_vec()),
            KeyKind::Date => Datum::Date(raw as i32),
            KeyKind::Time => Datum::Int8(raw as i64),
            KeyKind::Timestamp => Datum::Timestamp(raw as i64),
            KeyKind::TimestampTz => Datum::TimestampTz(raw as i64),
            KeyKind::Uuid => {
                let mut u = [0u8; 16];
                std::ptr::copy_nonoverlapping(value.cast_mut_ptr::<u8>(), u.as_mut_ptr(), 16);
                Datum::Uuid(u)
            }
            KeyKind::Interval => {
                // interval_cmp_value: (months * 30 + days) days plus the time, in µs.
                let iv = value.cast_mut_ptr::<pg_sys::Interval>();
                let span = i128::from((*iv).time) + (i128::from((*iv).month) * 30 + i128::from((*iv).day)) * 86_400_000_000;
                Datum::Bytea(((span as u128) ^ (1u128 << 127)).to_be_bytes().to_vec())
            }
            KeyKind::Raw { typlen, byval } => {
                if byval {
                    Datum::Int8(raw as i64)
                } else if typlen > 0 {
                    Datum::Bytea(std::slice::from_raw_parts(value.cast_mut_ptr::<u8>(), typlen as usize).to_vec())
                } else if typlen == -1 {
                    Datum::Bytea(varlena_bytes(value))
                } else {
                    Datum::Bytea(CStr::from_ptr(value.cast_mut_ptr::<std::ffi::c_char>()).to_bytes().to_vec())
                }
            }
        }
    }
}

fn datum_type(kind: KeyKind) -> DatumType {
    match kind {
        KeyKind::Bool => DatumType::Bool,
        KeyKind::Int2 | KeyKind::Char => DatumType::Int2,
        KeyKind::Int4 => DatumType::Int4,
        KeyKind::Int8 | KeyKind::Oid | KeyKind::Time => DatumType::Int8,
        KeyKind::Float4 => DatumType::Float4,
        KeyKind::Float8 => DatumType::Float8,
        KeyKind::Numeric => DatumType::Numeric,
        KeyKind::Text | KeyKind::BpChar | KeyKind::Name | KeyKind::Bytea | KeyKind::Interval | KeyKind::Citext => DatumType::Bytea,
        KeyKind::Date => DatumType::Date,
        KeyKind::Timestamp => DatumType::Timestamp,
        KeyKind::TimestampTz => DatumType::TimestampTz,
        KeyKind::Uuid => DatumType::Uuid,
        KeyKind::Raw { byval: true, .. } => DatumType::Int8,
        KeyKind::Raw { .. } => DatumType::Bytea,
    }
}

/// Turn a decoded key column back into a PostgreSQL datum of the column's type.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn to_pg(col: &KeyColumn, d: &Datum) -> Option<pg_sys::Datum> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        Some(match (col.kind, d) {
            (_, Datum::Null) => return None,
            (_, Datum::Bool(b)) => pg_sys::Datum::from(*b),
            (_, Datum::Int2(v)) => pg_sys::Datum::from(*v as i64),
            (_, Datum::Int4(v)) => pg_sys::Datum::from(*v as i64),
            (_, Datum::Int8(v)) => pg_sys::Datum::from(*v),
            (_, Datum::Float4(v)) => pg_sys::Datum::from(v.to_bits() as u64),
            (_, Datum::Float8(v)) => pg_sys::Datum::from(v.to_bits()),
            (_, Datum::Date(v)) => pg_sys::Datum::from(*v as i64),
            (_, Datum::Timestamp(v)) | (_, Datum::TimestampTz(v)) => pg_sys::Datum::from(*v),
            (_, Datum::Numeric(s)) => {
                let c = CString::new(s.as_str()).ok()?;
                pg_sys::OidInputFunctionCall(pg_sys::Oid::from(1701u32), c.as_ptr() as *mut _, pg_sys::Oid::from(1700u32), -1)
            }
            (_, Datum::Uuid(u)) => {
                let p = pg_sys::palloc(16) as *mut u8;
                std::ptr::copy_nonoverlapping(u.as_ptr(), p, 16);
                pg_sys::Datum::from(p)
            }
            (KeyKind::Name, Datum::Bytea(b)) => {
                let p = pg_sys::palloc0(pg_sys::NAMEDATALEN as usize) as *mut u8;
                std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len().min(pg_sys::NAMEDATALEN as usize - 1));
                pg_sys::Datum::from(p)
            }
            (KeyKind::Raw { typlen, .. }, Datum::Bytea(b)) if typlen > 0 => {
                let p = pg_sys::palloc(b.len()) as *mut u8;
                std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len());
                pg_sys::Datum::from(p)
            }
            (KeyKind::Raw { typlen: -2, .. }, Datum::Bytea(b)) => {
                let c = CString::new(b.clone()).ok()?;
                pg_sys::Datum::from(pg_sys::pstrdup(c.as_ptr()))
            }
            (KeyKind::Interval, Datum::Bytea(b)) => {
                // An equal interval (the span as days and time; months are not kept).
                let span = (u128::from_be_bytes(<[u8; 16]>::try_from(&b[..]).ok()?) ^ (1u128 << 127)) as i128;
                let p = pg_sys::palloc(std::mem::size_of::<pg_sys::Interval>()) as *mut pg_sys::Interval;
                (*p).month = 0;
                (*p).day = i32::try_from(span / 86_400_000_000).ok()?;
                (*p).time = (span % 86_400_000_000) as i64;
                pg_sys::Datum::from(p)
            }
            (KeyKind::BpChar, Datum::Bytea(b)) => {
                // char(n) keys are stored without their padding; show them padded.
                let mut b = b.clone();
                if col.typmod >= 4 {
                    let n = (col.typmod - 4) as usize;
                    let chars = String::from_utf8_lossy(&b).chars().count();
                    b.extend(std::iter::repeat_n(b' ', n.saturating_sub(chars)));
                }
                pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(b.as_ptr() as *const _, b.len() as i32))
            }
            (_, Datum::Bytea(b)) => pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(b.as_ptr() as *const _, b.len() as i32)),
            _ => return None,
        })
    }
}

/// Decode the key columns `cols` from the start of `key` (after the hash prefix when
/// `hashed`) into PostgreSQL datums (palloc'd in the current memory context), or
/// `None` when the key does not decode. Values are exact only for columns whose
/// [`KeyColumn::returnable`] is true (others are normalized or unpadded).
///
/// # Safety
/// Inside a PostgreSQL backend (allocates, may call type input functions).
pub unsafe fn decode_key(cols: &[KeyColumn], key: &[u8], hashed: bool) -> Option<Vec<(pg_sys::Datum, bool)>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut rest = if hashed { key.get(HASH_PREFIX_LEN..)? } else { key };
        let mut out = Vec::with_capacity(cols.len());
        for c in cols {
            let d = decode_datum(&mut rest, datum_type(c.kind), c.order).ok()?;
            match to_pg(c, &d) {
                Some(v) => out.push((v, false)),
                None if matches!(d, Datum::Null) => out.push((pg_sys::Datum::from(0usize), true)),
                None => return None,
            }
        }
        Some(out)
    }
}

/// Byte that starts a generated row id key (after the hash prefix, if any).
pub const ROWID_MARKER: u8 = 0x00;

/// A fresh generated row key for a table without a primary key: `prefix` (a
/// hash-sharded table's: the start of the tablet the row goes to), the marker,
/// then an id that sorts in insertion order: 8 bytes of microseconds since the
/// epoch (strictly increasing within this backend), 8 random bytes.
pub fn new_rowid_key(prefix: Option<[u8; HASH_PREFIX_LEN]>) -> Vec<u8> {
    thread_local! {
        static LAST: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
    let t = LAST.with(|l| {
        let t = now.max(l.get() + 1);
        l.set(t);
        t
    });
    let mut k = Vec::with_capacity(HASH_PREFIX_LEN + 17);
    if let Some(p) = prefix {
        k.extend_from_slice(&p);
    }
    k.push(ROWID_MARKER);
    k.extend_from_slice(&t.to_be_bytes());
    k.extend_from_slice(&rand::random::<[u8; 8]>());
    k
}

/// Build a key from `(value, isnull)` per column: with `hashed`, prefixed by the hash
/// of the first column's encoding.
///
/// # Safety
/// Each value must be a valid datum of its column's type.
pub unsafe fn build_key(cols: &[KeyColumn], values: &[(pg_sys::Datum, bool)], hashed: bool) -> Vec<u8> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut body = Vec::with_capacity(16 * cols.len() + 2);
        let mut first_len = 0;
        for (i, (c, (v, n))) in cols.iter().zip(values).enumerate() {
            c.encode(&mut body, *v, *n);
            if i == 0 {
                first_len = body.len();
            }
        }
        if !hashed {
            return body;
        }
        let mut k = Vec::with_capacity(body.len() + 2);
        encode_hash_prefix(&mut k, hash16(&body[..first_len]));
        k.extend_from_slice(&body);
        k
    }
}

/// The smallest key greater than every key starting with `prefix` (`None`: no bound).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_skips_ff() {
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
    }

    #[test]
    fn rowid_keys_never_look_like_datums() {
        let k = new_rowid_key(Some([0x40, 0]));
        assert_eq!(k.len(), 19);
        assert_eq!(k[2], ROWID_MARKER);
        let k = new_rowid_key(None);
        assert_eq!(k[0], ROWID_MARKER);
    }

    #[test]
    fn rowid_keys_sort_in_insertion_order() {
        let keys: Vec<Vec<u8>> = (0..1000).map(|_| new_rowid_key(Some([0x40, 0]))).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }
}
