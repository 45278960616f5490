//! Indexes of other access methods on Pinax tables (GiST, SP-GiST, BRIN; GIN
//! and hash indexes Pinax cannot store, `inverted/`): kept, not used.
//!
//! Pinax stores btree, GIN and hash indexes. An index of another method is
//! accepted so that schemas, migrations and dumps that declare one work
//! unchanged, and every query stays correct: the planner never sees it
//! (hooks/relation_info.rs drops it from the table's index list), so queries
//! that it would serve scan the table instead (with the filter pushed to storage
//! where it can be). Its build stores nothing (`index_build_range_scan` hands it
//! no row; the method leaves its empty structure in a local file) and, once the
//! table AM has switched it to the routine below, rows written are not added to
//! it: its local file stays empty. A NOTICE at CREATE INDEX says so. Exclusion
//! constraints need their index to find conflicts, so one backed by such an
//! index is refused (0A000); `EXCLUDE USING btree` and `USING hash` work.

use crate::error;
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;

thread_local! {
    /// The kept-not-used routine of each access method, made on first use.
    static ROUTINES: RefCell<HashMap<u32, *mut pg_sys::IndexAmRoutine>> = RefCell::new(HashMap::new());
}

/// Index AM callback `aminsert` of a kept index: nothing is stored.
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine.
#[pg_guard]
unsafe extern "C-unwind" fn aminsert_none(
    _index: pg_sys::Relation,
    _values: *mut pg_sys::Datum,
    _isnull: *mut bool,
    _heap_tid: pg_sys::ItemPointer,
    _heap: pg_sys::Relation,
    _check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _info: *mut pg_sys::IndexInfo,
) -> bool {
    false
}

/// Index AM callback `amgettuple` of a kept index: never planned; refused if reached.
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine.
#[pg_guard]
unsafe extern "C-unwind" fn amgettuple_none(_scan: pg_sys::IndexScanDesc, _direction: pg_sys::ScanDirection::Type) -> bool {
    error::not_supported("indexes of access methods other than btree are not used for scans of Pinax tables")
}

/// Index AM callback `amgetbitmap` of a kept index: as [`amgettuple_none`].
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine.
#[pg_guard]
unsafe extern "C-unwind" fn amgetbitmap_none(_scan: pg_sys::IndexScanDesc, _tbm: *mut pg_sys::TIDBitmap) -> i64 {
    error::not_supported("indexes of access methods other than btree are not used for scans of Pinax tables")
}

/// The kept-not-used routine for access method `am`: its own, with storing and
/// scanning replaced.
///
/// # Safety
/// `am` must be an index access method's OID.
pub unsafe fn routine(am: pg_sys::Oid) -> *mut pg_sys::IndexAmRoutine {
    if let Some(r) = ROUTINES.with(|r| r.borrow().get(&am.to_u32()).copied()) {
        return r;
    }
    // SAFETY: the caller upholds this function's contract (# Safety).
    let r = unsafe {
        super::derived_routine(am, |mine| {
            mine.aminsert = Some(aminsert_none);
            mine.amgettuple = if mine.amgettuple.is_some() { Some(amgettuple_none) } else { None };
            mine.amgetbitmap = if mine.amgetbitmap.is_some() { Some(amgetbitmap_none) } else { None };
        })
    };
    ROUTINES.with(|c| c.borrow_mut().insert(am.to_u32(), r));
    r
}

/// The build of index `index` (not a btree) of a Pinax table, which Pinax
/// cannot store (`why`): refused for an exclusion constraint, else nothing
/// stored (a NOTICE says the index is kept, not used). Returns the number of
/// rows indexed (none).
///
/// # Safety
/// `index` and `info` must be the index being built and its IndexInfo.
pub unsafe fn build(index: pg_sys::Relation, info: *mut pg_sys::IndexInfo, why: &str) -> f64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let am = pg_sys::get_am_name((*(*index).rd_rel).relam);
        let am = if am.is_null() { String::from("?") } else { std::ffi::CStr::from_ptr(am).to_string_lossy().into_owned() };
        if !(*info).ii_ExclusionOps.is_null() {
            error::not_supported(format!("exclusion constraints using {am} are not supported on Pinax tables (EXCLUDE USING btree or hash is)"));
        }
        if !crate::ddl::replaying() {
            let name = std::ffi::CStr::from_ptr((*(*index).rd_rel).relname.data.as_ptr()).to_string_lossy();
            pgrx::notice!("index \"{name}\" ({am}) on a Pinax table is kept in the catalog but not stored or used by queries: {why}");
        }
        (*index).rd_indam = routine((*(*index).rd_rel).relam);
        0.0
    }
}
