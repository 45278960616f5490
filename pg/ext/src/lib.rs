//! Pinax PostgreSQL extension: distributed tables inside stock PostgreSQL 15.
//!
//! - Table access method `pinax` (`am/table/`): rows live in Pinax tablets, keyed
//!   by primary key (or a generated id), valued by PostgreSQL tuple bytes.
//! - Indexes of Pinax tables are btree in the catalog, Pinax in storage
//!   (`am/index/`); the primary key is the row key (a virtual index).
//! - Hooks (`hooks/`): DDL options and temp tables (utility), planner facts
//!   (relation info), the planner hook (planner), statement-end flush
//!   (executor), transaction lifecycle and freeing the storage of deleted file
//!   nodes (xact callbacks).
//! - Custom scans (`customscan/`), registered once: conditions, counts and
//!   aggregates computed in the tablets (`PinaxScan`), and UPDATE/DELETE by key
//!   without reading the row (`PinaxWriteByKey`).
//! - DDL on every SQL node (`ddl.rs`): committed DDL is published to the cluster's
//!   DDL log and replayed by the other nodes' PostgreSQL; storage names per node.
//! - Cluster-wide sequences (`sequence.rs`): nextval & co. take values from the
//!   master, in cached ranges.
//! - Per-backend state (`state.rs`): storage client, write buffer, storage
//!   transaction, read times, TID map (`tid.rs`).
//! - Errors map to SQLSTATE in one place (`error.rs`).
//!
//! Depends only on the `client`, `proto`, `codec` and `common` crates (checked by the
//! layering test of the main workspace). Inside a backend, no Rust thread calls into
//! PostgreSQL: the client's heartbeat thread only talks to the node.
//!
//! Start reading at `am/table/mod.rs`.

// PostgreSQL's callback signatures decide the argument counts.
#![allow(clippy::too_many_arguments)]
#![deny(unsafe_op_in_unsafe_fn)]

use pgrx::prelude::*;

pub mod am;
pub mod concurrent_index;
pub mod customscan;
pub mod ddl;
pub mod ddl_lock;
pub mod error;
pub mod guc;
pub mod hooks;
pub mod insert_at_once;
pub mod keys;
pub mod limit;
pub mod meta;
pub mod pg_list;
pub mod pgtry;
pub mod scan;
pub mod sequence;
pub mod state;
pub mod tablets;
pub mod tid;
pub mod tuple;
pub mod update_deps;
pub mod violation;

pgrx::pg_module_magic!();

pgrx::extension_sql!(
    r#"
CREATE FUNCTION pinax_tableam_handler(internal) RETURNS table_am_handler
    AS 'MODULE_PATHNAME', 'pinax_tableam_handler' LANGUAGE C STRICT;
CREATE ACCESS METHOD pinax TYPE TABLE HANDLER pinax_tableam_handler;
COMMENT ON ACCESS METHOD pinax IS 'Pinax: rows stored in distributed, replicated tablets';
"#,
    name = "pinax_access_method"
);

/// `_PG_init`: only from shared_preload_libraries (hooks and callbacks must be in
/// every backend, including the ones that never ran CREATE EXTENSION).
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // SAFETY: reading a postmaster global during library load.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        error!("pinax must be loaded via shared_preload_libraries (add shared_preload_libraries = 'pinax' to postgresql.conf and restart)");
    }
    guc::init();
    tune_malloc();
    // SAFETY: hooks are installed once, in the postmaster, before any backend starts.
    unsafe {
        hooks::install();
    }
}

/// glibc's malloc, which the backends' Rust allocations go through too: keep
/// freed memory in the process. A scan's answers are tens to hundreds of kB
/// (frame buffers, rows): by default the heap's top is given back to the kernel
/// and taken again, page by page (page faults, TLB flushes), on every request.
/// Allocations below 4 MiB come from the heap, and it is trimmed only beyond 32
/// MiB free. Set in the postmaster, inherited by every backend. YCSB's scans
/// (bench/results/2026-11-27-bench.txt): +6-10% throughput.
/// No fast bins: with them, every request above the thread cache's sizes (a
/// scanned row of 1 KiB) first consolidates the small chunks freed since
/// (`malloc_consolidate`, 2.5-2.9% of a scanning backend's time); small requests
/// are still served by the thread cache.
fn tune_malloc() {
    const M_MXFAST: std::ffi::c_int = 1;
    const M_TRIM_THRESHOLD: std::ffi::c_int = -1;
    const M_MMAP_THRESHOLD: std::ffi::c_int = -3;
    extern "C" {
        fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
    }
    // SAFETY: mallopt only changes malloc's parameters; called once, in the
    // postmaster, during library load (no other thread is allocating).
    unsafe {
        mallopt(M_MMAP_THRESHOLD, 4 << 20);
        mallopt(M_TRIM_THRESHOLD, 32 << 20);
        mallopt(M_MXFAST, 0);
    }
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_tableam_handler() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The table AM handler: returns the (process-wide, never freed) routine.
///
/// # Safety
/// Called only by PostgreSQL, by the function manager, as the C function of its
/// SQL function, with a valid `fcinfo`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn pinax_tableam_handler(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    pg_sys::Datum::from(am::table::routine())
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'pinax'"]
    }
}
