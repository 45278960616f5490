//! Raising storage errors from a flush, with PostgreSQL's unique-violation message.
//!
//! A `DuplicateKey` error names the storage table and the key that already holds a
//! live row. The storage table belongs to a unique index (or is the table itself,
//! whose key is the primary key), so the key is decoded back into that index's
//! column values and described exactly as PostgreSQL's btree does:
//! `duplicate key value violates unique constraint "t_pkey"` /
//! `DETAIL: Key (id)=(1) already exists.`

use crate::error;
use crate::keys::decode_key;
use crate::meta::{self, index_meta};
use crate::state::FlushError;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use pinax_common::ErrorCode;
use std::ffi::CStr;

/// `Key (cols)=(vals)` of `key` in unique index `index_oid`, or `None`.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn describe(index_oid: u32, key: &[u8]) -> Option<(String, String)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let idx = pg_sys::index_open(pg_sys::Oid::from(index_oid), pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let table = pg_sys::RelationIdGetRelation((*(*idx).rd_index).indrelid);
        let hashed = if (*(*idx).rd_index).indisprimary { meta::table_meta(table).map(|m| m.hashed).unwrap_or(true) } else { true };
        pg_sys::RelationClose(table);
        let im = index_meta(idx, hashed);
        let name = CStr::from_ptr((*(*idx).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned();
        let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
        let mut isnull = [true; pg_sys::INDEX_MAX_KEYS as usize];
        let decoded = decode_key(&im.cols, key, im.hashed);
        let ok = decoded.is_some();
        for (i, (v, n)) in decoded.unwrap_or_default().into_iter().enumerate() {
            values[i] = v;
            isnull[i] = n;
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

/// Raise "could not create unique index" for entry key `key` of index `index_oid`,
/// which two rows share (a build's own finding, not a flush's).
pub fn raise_duplicate_build(index_oid: u32, key: &[u8]) -> ! {
    // SAFETY: catalog access inside a transaction.
    match unsafe { describe(index_oid, key) } {
        Some((name, detail)) => error::raise_with(
            PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
            format!("could not create unique index \"{name}\""),
            Some(detail.replace(" already exists.", " is duplicated.")),
        ),
        None => error::raise_with(PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION, "could not create unique index: duplicated values".to_string(), None),
    }
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
