//! The method tables of Pinax's custom scans: what PostgreSQL reads through a
//! pointer to plan and run a custom scan node (`CustomPathMethods`,
//! `CustomScanMethods`, `CustomExecMethods`), as process-wide statics.
//!
//! Each custom scan (`pushdown`, `write_by_key`) declares its own tables with
//! these helpers; `customscan/mod.rs` registers the scan methods once.

use pgrx::pg_sys;
use std::ffi::CStr;

/// A method table PostgreSQL reads through a pointer (raw pointers are not `Sync`).
pub(super) struct Methods<T>(pub(super) T);
unsafe impl<T> Sync for Methods<T> {}

type Begin = unsafe extern "C-unwind" fn(*mut pg_sys::CustomScanState, *mut pg_sys::EState, i32);
type Exec = unsafe extern "C-unwind" fn(*mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot;
type Node = unsafe extern "C-unwind" fn(*mut pg_sys::CustomScanState);
type Explain = unsafe extern "C-unwind" fn(*mut pg_sys::CustomScanState, *mut pg_sys::List, *mut pg_sys::ExplainState);

/// The execution methods of a custom scan node that runs in one backend (no
/// mark/restore, no parallel workers).
pub(super) const fn exec_methods(
    name: &'static CStr,
    begin: Begin,
    exec: Exec,
    end: Node,
    rescan: Node,
    explain: Explain,
) -> Methods<pg_sys::CustomExecMethods> {
    Methods(pg_sys::CustomExecMethods {
        CustomName: name.as_ptr(),
        BeginCustomScan: Some(begin),
        ExecCustomScan: Some(exec),
        EndCustomScan: Some(end),
        ReScanCustomScan: Some(rescan),
        MarkPosCustomScan: None,
        RestrPosCustomScan: None,
        EstimateDSMCustomScan: None,
        InitializeDSMCustomScan: None,
        ReInitializeDSMCustomScan: None,
        InitializeWorkerCustomScan: None,
        ShutdownCustomScan: None,
        ExplainCustomScan: Some(explain),
    })
}
