//! Catching a PostgreSQL error with its ErrorData intact (PG_TRY/PG_CATCH).
//!
//! pgrx turns an error raised by a function it calls into a Rust panic and raises it
//! again at the next `#[pg_guard]` boundary, keeping only some fields (message,
//! detail, hint, code): the CONTEXT lines, the position and the schema/table/column
//! names are lost. Hooks that must clean up after an error, or decide on it, use
//! [`try_keep_error`] around calls made without pgrx's boundary and then either
//! handle the error or give it back with [`rethrow`], as PostgreSQL's own code does.

use pgrx::pg_sys;

/// Run `f`, catching a PostgreSQL error with its ErrorData, copied into `cxt`.
/// `f` must call PostgreSQL only through functions without pgrx's boundary (a
/// boundary inside would unwind a Rust panic through C and abort), and own nothing
/// that needs dropping: an error jumps straight back here.
///
/// # Safety
/// Main thread only; see above for `f`.
pub unsafe fn try_keep_error(cxt: pg_sys::MemoryContext, f: impl FnOnce()) -> Result<(), *mut pg_sys::ErrorData> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let prev_exception_stack = pg_sys::PG_exception_stack;
        let prev_error_context_stack = pg_sys::error_context_stack;
        let jumped = cee_scape::call_with_sigsetjmp(false, |buf| {
            pg_sys::PG_exception_stack = buf as *const cee_scape::SigJmpBufFields as *mut pg_sys::sigjmp_buf;
            f();
            0
        });
        pg_sys::PG_exception_stack = prev_exception_stack;
        pg_sys::error_context_stack = prev_error_context_stack;
        if jumped == 0 {
            return Ok(());
        }
        pg_sys::MemoryContextSwitchTo(cxt);
        let edata = pg_sys::CopyErrorData();
        pg_sys::FlushErrorState();
        Err(edata)
    }
}

unsafe extern "C-unwind" {
    #[link_name = "ReThrowError"]
    fn raw_rethrow_error(edata: *mut pg_sys::ErrorData) -> !;
}

/// Raise `edata` again, straight to the next handler up, with everything it
/// carried (pgrx's boundary would keep only some fields).
///
/// # Safety
/// `edata` must come from [`try_keep_error`]; nothing on the Rust stack between here
/// and that handler may need dropping.
pub unsafe fn rethrow(edata: *mut pg_sys::ErrorData) -> ! {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { raw_rethrow_error(edata) }
}
