//! Storage errors → PostgreSQL errors, in one table.
//!
//! Every error the storage layer can return carries a stable [`ErrorCode`]; this file
//! decides which SQLSTATE and message style the SQL user sees. The SQLSTATE comes from
//! `ErrorCode::sqlstate()` (common crate, one table for the whole project); messages
//! follow PostgreSQL's style guide: lower case, no trailing period, details apart.

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use pinax_client::ClientError;
use pinax_common::ErrorCode;

/// PostgreSQL's `MAKE_SQLSTATE` for a five-character SQLSTATE.
pub fn sqlstate_code(state: &str) -> PgSqlErrorCode {
    let b = state.as_bytes();
    if b.len() != 5 {
        return PgSqlErrorCode::ERRCODE_INTERNAL_ERROR;
    }
    let mut code: i32 = 0;
    for (i, c) in b.iter().enumerate() {
        code += (((*c as i32) - ('0' as i32)) & 0x3F) << (6 * i);
    }
    PgSqlErrorCode::from(code)
}

/// The SQLSTATE for a storage error code.
pub fn sqlstate_for(code: ErrorCode) -> PgSqlErrorCode {
    sqlstate_code(code.sqlstate())
}

/// The message a SQL user sees for a storage error (the unique-violation message is
/// built by the caller, which knows the index).
pub fn message_for(e: &ClientError) -> String {
    match e.code() {
        // A read that met a value in its clock-uncertainty window after it had
        // returned rows ("could not serialize access: read restart required at ...").
        ErrorCode::ReadRestart => e.to_string(),
        ErrorCode::SerializationFailure | ErrorCode::TxnAborted | ErrorCode::TxnNotFound => {
            const BASE: &str = "could not serialize access due to concurrent update";
            let inner = e.to_string();
            if inner == BASE {
                BASE.to_string()
            } else {
                format!("{BASE} ({inner})")
            }
        }
        ErrorCode::Deadlock => "deadlock detected".to_string(),
        ErrorCode::Cancelled => "canceling statement: the storage scan was interrupted".to_string(),
        ErrorCode::Unavailable => format!("pinax storage is unavailable: {e}"),
        ErrorCode::DiskFull => format!("pinax storage is out of disk space: {e}"),
        ErrorCode::LockNotAvailable | ErrorCode::NodeFenced => e.to_string(),
        _ => format!("pinax storage error: {e}"),
    }
}

thread_local! {
    /// The message of the latest write conflict (or read restart) raised: a READ COMMITTED statement
    /// that fails with it is run again (hooks/restart.rs).
    static RESTARTABLE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Whether a READ COMMITTED statement failing with `code` runs again at a new
/// read time: a write conflict, or a read restart it could not take in place (it
/// had already read at its read time).
pub fn restartable(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::SerializationFailure | ErrorCode::ReadRestart)
}

/// Forget the latest write conflict (a statement attempt starts).
pub fn clear_restartable() {
    RESTARTABLE.with(|r| *r.borrow_mut() = None);
}

/// Whether `edata` is the write conflict raised last (and not some other 40001).
///
/// # Safety
/// `edata` must point to a valid ErrorData.
pub unsafe fn was_restartable(edata: *const pgrx::pg_sys::ErrorData) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let msg = (*edata).message;
        if msg.is_null() {
            return false;
        }
        let msg = std::ffi::CStr::from_ptr(msg).to_string_lossy();
        RESTARTABLE.with(|r| r.borrow().as_deref() == Some(&*msg))
    }
}

/// Raise `e` as a PostgreSQL ERROR (never returns).
pub fn raise(e: &ClientError) -> ! {
    if e.code() == ErrorCode::Cancelled {
        // PostgreSQL's own report of the cancellation (statement timeout, user
        // request, termination), if it makes one now.
        pg_sys::check_for_interrupts!();
    }
    let message = message_for(e);
    RESTARTABLE.with(|r| *r.borrow_mut() = restartable(e.code()).then(|| message.clone()));
    let mut report = ErrorReport::new(sqlstate_for(e.code()), message, "pinax");
    // (A fenced node's request is never retried under its plan; the
    // transaction, planned afresh, is.)
    if e.is_retryable() || e.code() == ErrorCode::NodeFenced {
        report = report.set_hint("The transaction might succeed if retried.");
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}

/// Raise a "feature not supported" error (SQLSTATE 0A000).
pub fn not_supported(msg: impl Into<String>) -> ! {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, msg.into(), "pinax").report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}

/// Raise an error with an explicit SQLSTATE, message and optional detail.
pub fn raise_with(code: PgSqlErrorCode, msg: impl Into<String>, detail: Option<String>) -> ! {
    let mut report = ErrorReport::new(code, msg.into(), "pinax");
    if let Some(d) = detail {
        report = report.set_detail(d);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}

/// Unwrap a storage result or raise it as a PostgreSQL error.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, ClientError> {
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstate_encoding_matches_postgres() {
        assert_eq!(sqlstate_code("23505"), PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION);
        assert_eq!(sqlstate_code("40001"), PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE);
        assert_eq!(sqlstate_code("0A000"), PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED);
    }
}
