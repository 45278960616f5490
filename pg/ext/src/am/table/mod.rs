//! The table access method `pinax`: PostgreSQL's table AM callbacks over storage.
//!
//! Rows live in the relation's storage table (one per relation file node), keyed by
//! the primary key or a generated row id (see `keys`). Every row version handed to
//! PostgreSQL gets a TID from the backend's TID map (see `tid`). Writes go to the
//! backend's write buffer (see `state`); reads page through storage (see
//! `crate::scan`).
//!
//! Callbacks keep PostgreSQL's names. Unsupported operations raise 0A000. They
//! are grouped in files as `TableAmRoutine` groups them (access/tableam.h):
//! - `scan.rs`: table scan and parallel scan callbacks (and the sample scan
//!   ones, refused); what the custom scan and count(*) ask of a scan;
//! - `bitmap.rs`: bitmap heap scan callbacks (the rows behind a bitmap of
//!   TIDs that Pinax index scans built);
//! - `fetch.rs`: index scan callbacks and non-modifying operations on
//!   individual tuples (a row version by TID);
//! - `modify.rs`: manipulations of physical tuples (insert, speculative insert,
//!   delete, update, lock);
//! - `ddl.rs`: DDL related functionality (new file nodes, truncate, vacuum,
//!   ANALYZE, index builds);
//! - this file: the routine, the slot callbacks, and the miscellaneous and
//!   planner callbacks (sizes).
//!
//! Start with `modify.rs::tuple_insert` and `scan.rs::scan_getnextslot`.

mod bitmap;
mod ddl;
mod fetch;
mod modify;
mod rowid;
pub mod scan;

use self::bitmap::{scan_bitmap_next_block, scan_bitmap_next_tuple};
use self::ddl::{
    index_build_range_scan, index_validate_scan, relation_copy_data, relation_copy_for_cluster, relation_nontransactional_truncate, relation_set_new_filenode,
    relation_vacuum, scan_analyze_next_block, scan_analyze_next_tuple,
};
use self::fetch::{
    index_delete_tuples, index_fetch_begin, index_fetch_end, index_fetch_reset, index_fetch_tuple, tuple_fetch_row_version, tuple_get_latest_tid,
    tuple_satisfies_snapshot, tuple_tid_valid,
};
use self::modify::{multi_insert, tuple_complete_speculative, tuple_delete, tuple_insert, tuple_insert_speculative, tuple_lock, tuple_update};
use self::scan::{
    parallelscan_estimate, parallelscan_initialize, parallelscan_reinitialize, scan_begin, scan_end, scan_getnextslot, scan_rescan, scan_sample_next_block,
    scan_sample_next_tuple,
};
use crate::am::index;
use crate::error::OrRaise;
use crate::meta::{self, TableMeta};
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::rc::Rc;

/// `rel`'s metadata, its indexes switched to Pinax for this transaction.
///
/// # Safety
/// `rel` must be a valid open relation.
unsafe fn meta_of(rel: pg_sys::Relation) -> Rc<TableMeta> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let m = meta::table_meta(rel).or_raise();
        index::ensure_patched(rel, &m);
        m
    }
}

/// Table AM callback `slot_callbacks` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
unsafe extern "C-unwind" fn slot_callbacks(rel: pg_sys::Relation) -> *const pg_sys::TupleTableSlotOps {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        // The executor creates a slot for a table before it opens any of its indexes
        // (index scans, ON CONFLICT, COPY): the moment to switch them to Pinax, also
        // for plans cached in an earlier transaction.
        meta_of(rel);
        &raw const pg_sys::TTSOpsHeapTuple
    }
}

/// Table AM callback `relation_size` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
unsafe extern "C-unwind" fn relation_size(_rel: pg_sys::Relation, _fork: pg_sys::ForkNumber::Type) -> u64 {
    pg_sys::BLCKSZ as u64
}

/// Table AM callback `relation_needs_toast_table` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
unsafe extern "C-unwind" fn relation_needs_toast_table(_rel: pg_sys::Relation) -> bool {
    false
}

/// Table AM callback `relation_estimate_size` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
unsafe extern "C-unwind" fn relation_estimate_size(
    rel: pg_sys::Relation,
    attr_widths: *mut i32,
    pages: *mut pg_sys::BlockNumber,
    tuples: *mut f64,
    allvisfrac: *mut f64,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let reltuples = (*(*rel).rd_rel).reltuples as f64;
        // Never analyzed: assume a middling table so selective predicates use indexes.
        let ntuples = if reltuples < 0.0 { 1000.0 } else { reltuples.max(1.0) };
        let width = pg_sys::get_rel_data_width(rel, attr_widths) as f64 + 24.0;
        *tuples = ntuples;
        *pages = ((ntuples * width) / pg_sys::BLCKSZ as f64).ceil().max(1.0) as pg_sys::BlockNumber;
        // Index-only scans never visit the table (am/index_only.rs).
        *allvisfrac = 1.0;
    }
}

/// The routine, built once per process.
pub fn routine() -> *const pg_sys::TableAmRoutine {
    thread_local! {
        static ROUTINE: *const pg_sys::TableAmRoutine = build_routine();
    }
    ROUTINE.with(|r| *r)
}

fn build_routine() -> *const pg_sys::TableAmRoutine {
    let r = pg_sys::TableAmRoutine {
        type_: pg_sys::NodeTag::T_TableAmRoutine,
        slot_callbacks: Some(slot_callbacks),
        scan_begin: Some(scan_begin),
        scan_end: Some(scan_end),
        scan_rescan: Some(scan_rescan),
        scan_getnextslot: Some(scan_getnextslot),
        scan_set_tidrange: None,
        scan_getnextslot_tidrange: None,
        parallelscan_estimate: Some(parallelscan_estimate),
        parallelscan_initialize: Some(parallelscan_initialize),
        parallelscan_reinitialize: Some(parallelscan_reinitialize),
        index_fetch_begin: Some(index_fetch_begin),
        index_fetch_reset: Some(index_fetch_reset),
        index_fetch_end: Some(index_fetch_end),
        index_fetch_tuple: Some(index_fetch_tuple),
        tuple_fetch_row_version: Some(tuple_fetch_row_version),
        tuple_tid_valid: Some(tuple_tid_valid),
        tuple_get_latest_tid: Some(tuple_get_latest_tid),
        tuple_satisfies_snapshot: Some(tuple_satisfies_snapshot),
        index_delete_tuples: Some(index_delete_tuples),
        tuple_insert: Some(tuple_insert),
        tuple_insert_speculative: Some(tuple_insert_speculative),
        tuple_complete_speculative: Some(tuple_complete_speculative),
        multi_insert: Some(multi_insert),
        tuple_delete: Some(tuple_delete),
        tuple_update: Some(tuple_update),
        tuple_lock: Some(tuple_lock),
        finish_bulk_insert: None,
        relation_set_new_filenode: Some(relation_set_new_filenode),
        relation_nontransactional_truncate: Some(relation_nontransactional_truncate),
        relation_copy_data: Some(relation_copy_data),
        relation_copy_for_cluster: Some(relation_copy_for_cluster),
        relation_vacuum: Some(relation_vacuum),
        scan_analyze_next_block: Some(scan_analyze_next_block),
        scan_analyze_next_tuple: Some(scan_analyze_next_tuple),
        index_build_range_scan: Some(index_build_range_scan),
        index_validate_scan: Some(index_validate_scan),
        relation_size: Some(relation_size),
        relation_needs_toast_table: Some(relation_needs_toast_table),
        relation_toast_am: None,
        relation_fetch_toast_slice: None,
        relation_estimate_size: Some(relation_estimate_size),
        scan_bitmap_next_block: Some(scan_bitmap_next_block),
        scan_bitmap_next_tuple: Some(scan_bitmap_next_tuple),
        scan_sample_next_block: Some(scan_sample_next_block),
        scan_sample_next_tuple: Some(scan_sample_next_tuple),
    };
    Box::into_raw(Box::new(r))
}
