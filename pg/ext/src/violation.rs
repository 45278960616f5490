//! Raising storage errors from a flush, with PostgreSQL's unique-violation message.
//!
//! A `DuplicateKey` error names the storage table and the key that already holds a
//! live row. The storage table belongs to a unique index (or is the table itself,
//! whose key is the primary key), so the key is decoded back into that index's
//! column values and described exactly as PostgreSQL's btree does:
//! `duplicate key value violates unique constraint "t_pkey"` /
//! `DETAIL: Key (id)=(1) already exists.`

use crate::error;
use crate::keys::{KeyColumn, KeyKind};
use crate::meta::{self, index_meta};
use crate::state::FlushError;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use pinax_codec::datum::{decode_datum, Datum, DatumType};
use pinax_codec::hash::HASH_PREFIX_LEN;
use pinax_common::ErrorCode;
use std::ffi::{CStr, CString};

fn datum_type(kind: KeyKind) -> DatumType {
    match kind {
        KeyKind::Bool => DatumType::Bool,
        KeyKind::Int2 | KeyKind::Char => DatumType::Int2,
        KeyKind::Int4 => DatumType::Int4,
        KeyKind::Int8 | KeyKind::Oid | KeyKind::Time => DatumType::Int8,
        KeyKind::Float4 => DatumType::Float4,
        KeyKind::Float8 => DatumType::Float8,
        KeyKind::Numeric => DatumType::Numeric,
        KeyKind::Text | KeyKind::BpChar | KeyKind::Name | KeyKind::Bytea => DatumType::Bytea,
        KeyKind::Date => DatumType::Date,
        KeyKind::Timestamp => DatumType::Timestamp,
        KeyKind::TimestampTz => DatumType::TimestampTz,
        KeyKind::Uuid => DatumType::Uuid,
        KeyKind::Raw { byval: true, .. } => DatumType::Int8,
        KeyKind::Raw { .. } => DatumType::Bytea,
    }
}

/// Turn a decoded key column back into a PostgreSQL datum of the column's type.
unsafe fn to_pg(col: &KeyColumn, d: &Datum) -> Option<pg_sys::Datum> {
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

/// `Key (cols)=(vals)` of `key` in unique index `index_oid`, or `None`.
unsafe fn describe(index_oid: u32, key: &[u8]) -> Option<(String, String)> {
    let idx = pg_sys::index_open(pg_sys::Oid::from(index_oid), pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    let table = pg_sys::RelationIdGetRelation((*(*idx).rd_index).indrelid);
    let hashed = if (*(*idx).rd_index).indisprimary { meta::table_meta(table).map(|m| m.hashed).unwrap_or(true) } else { true };
    pg_sys::RelationClose(table);
    let im = index_meta(idx, hashed);
    let name = CStr::from_ptr((*(*idx).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned();
    let mut rest = if im.hashed && key.len() >= HASH_PREFIX_LEN { &key[HASH_PREFIX_LEN..] } else { key };
    let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
    let mut isnull = [true; pg_sys::INDEX_MAX_KEYS as usize];
    let mut ok = true;
    for (i, c) in im.cols.iter().enumerate() {
        match decode_datum(&mut rest, datum_type(c.kind), c.order) {
            Ok(d) => match to_pg(c, &d) {
                Some(v) => {
                    values[i] = v;
                    isnull[i] = false;
                }
                None => isnull[i] = matches!(d, Datum::Null),
            },
            Err(_) => ok = false,
        }
    }
    let detail = if ok {
        let s = pg_sys::BuildIndexValueDescription(idx, values.as_mut_ptr(), isnull.as_mut_ptr());
        if s.is_null() {
            None
        } else {
            Some(format!("Key {} already exists.", CStr::from_ptr(s).to_string_lossy()))
        }
    } else {
        None
    };
    pg_sys::index_close(idx, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    Some((name, detail.unwrap_or_default()))
}

/// Raise the error of a failed flush during a unique index build, worded as
/// PostgreSQL's btree does (never returns).
pub fn raise_build(e: FlushError, index_oid: u32) -> ! {
    if e.error.code() == ErrorCode::DuplicateKey {
        if let pinax_client::ClientError::Rpc(r) = &e.error {
            if let Some(key) = &r.key {
                // SAFETY: catalog access inside a transaction.
                if let Some((name, detail)) = unsafe { describe(index_oid, key) } {
                    error::raise_with(
                        PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
                        format!("could not create unique index \"{name}\""),
                        Some(detail.replace(" already exists.", " is duplicated.")),
                    );
                }
            }
        }
    }
    raise(e)
}

/// Raise the error of a failed flush (never returns).
pub fn raise(e: FlushError) -> ! {
    if e.error.code() == ErrorCode::DuplicateKey {
        let key = match &e.error {
            pinax_client::ClientError::Rpc(r) => r.key.clone(),
            _ => None,
        };
        if let (Some(oid), Some(key)) = (meta::owner_of(&e.table), key) {
            // SAFETY: catalog access inside a transaction.
            if let Some((name, detail)) = unsafe { describe(oid, &key) } {
                error::raise_with(
                    PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
                    format!("duplicate key value violates unique constraint \"{name}\""),
                    if detail.is_empty() { None } else { Some(detail) },
                );
            }
        }
        error::raise_with(PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION, "duplicate key value violates unique constraint", None);
    }
    error::raise(&e.error)
}

/// Unwrap or raise.
pub trait OrRaiseFlush<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaiseFlush<T> for Result<T, FlushError> {
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(e),
        }
    }
}
