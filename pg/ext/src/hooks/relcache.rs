//! The relcache invalidation callback: what backends cache about relations
//! (Pinax table metadata, `meta.rs`; sequence values held, `sequence.rs`) is
//! dropped when PostgreSQL invalidates the relation, so DDL is seen at once.

use pgrx::pg_guard;
use pgrx::pg_sys;

/// Register the callback (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_callback), pg_sys::Datum::from(0usize));
    }
}

/// Relcache invalidation of `relid` (0: every relation).
///
/// # Safety
/// Called only by PostgreSQL, as the relcache invalidation callback
/// (`CacheRegisterRelcacheCallback`).
#[pg_guard]
unsafe extern "C-unwind" fn relcache_callback(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let relid = relid.to_u32();
    crate::sequence::forget(relid);
    crate::meta::forget(relid);
}
