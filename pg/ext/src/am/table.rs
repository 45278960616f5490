//! The table access method `pinax`: PostgreSQL's table AM callbacks over storage.
//!
//! Rows live in the relation's storage table (one per relation file node), keyed by
//! the primary key or a generated row id (see `keys`). Every row version handed to
//! PostgreSQL gets a TID from the backend's TID map (see `tid`). Writes go to the
//! backend's write buffer (see `state`); reads page through storage (see `scan`).
//!
//! Callbacks keep PostgreSQL's names. Unsupported operations raise 0A000.

use crate::am::index;
use crate::error::{self, OrRaise};
use crate::keys::new_rowid_key;
use crate::meta::{self, pk_key, secondary_key, TableMeta};
use crate::scan::{snapshot_cid, Pager};
use crate::state::{self, table_storage_name, CreateOptions};
use crate::tid::Origin;
use crate::tuple::{form_tuple_bytes, slot_getallattrs, store_tuple};
use crate::violation::{self, OrRaiseFlush};
use crate::guc;
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_codec::patch;
use pinax_proto::{LockStrength, Request, Sharding, WriteOp};
use std::rc::Rc;

/// Our scan descriptor: PostgreSQL's header first, then the Rust state.
#[repr(C)]
struct PinaxScanDesc {
    base: pg_sys::TableScanDescData,
    state: *mut ScanState,
    cb: pg_sys::MemoryContextCallback,
}

struct ScanState {
    pager: Pager,
    relid: u32,
    /// ANALYZE: the single "block" has been handed out.
    analyze_block_done: bool,
    /// ANALYZE: rows the tablets counted but did not ship (sampling), to add to
    /// the live rows once.
    analyze_unshipped: u64,
    /// A counting scan ([`next_counted`]): the rows left to hand out, once counted.
    counted: Option<u64>,
}

#[pg_guard]
unsafe extern "C-unwind" fn free_scan_state(arg: *mut std::ffi::c_void) {
    let d = arg as *mut PinaxScanDesc;
    if !(*d).state.is_null() {
        drop(Box::from_raw((*d).state));
        (*d).state = std::ptr::null_mut();
    }
}

unsafe fn meta_of(rel: pg_sys::Relation) -> Rc<TableMeta> {
    let m = meta::table_meta(rel).or_raise();
    index::ensure_patched(rel, &m);
    m
}

#[pg_guard]
unsafe extern "C-unwind" fn slot_callbacks(rel: pg_sys::Relation) -> *const pg_sys::TupleTableSlotOps {
    // The executor creates a slot for a table before it opens any of its indexes
    // (index scans, ON CONFLICT, COPY): the moment to switch them to Pinax, also
    // for plans cached in an earlier transaction.
    meta_of(rel);
    &raw const pg_sys::TTSOpsHeapTuple
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_begin(
    rel: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: i32,
    key: *mut pg_sys::ScanKeyData,
    pscan: pg_sys::ParallelTableScanDesc,
    flags: u32,
) -> pg_sys::TableScanDesc {
    if !pscan.is_null() {
        error::not_supported("parallel scans of Pinax tables are not supported");
    }
    if flags & pg_sys::ScanOptions::SO_TYPE_SAMPLESCAN != 0 {
        error::not_supported("TABLESAMPLE is not supported on Pinax tables");
    }
    let m = meta_of(rel);
    if flags & pg_sys::ScanOptions::SO_TYPE_SEQSCAN != 0 && state::serializable_locking() {
        // A SERIALIZABLE sequential scan reads every tablet's whole range.
        state::with(|b| b.lock_ranges(&m.storage, &[], None)).or_raise();
    }
    let d = pg_sys::palloc0(std::mem::size_of::<PinaxScanDesc>()) as *mut PinaxScanDesc;
    (*d).base.rs_rd = rel;
    (*d).base.rs_snapshot = snapshot;
    (*d).base.rs_nkeys = nkeys;
    (*d).base.rs_key = key;
    (*d).base.rs_flags = flags;
    let mut pager = Pager::new(m.storage.clone(), Vec::new(), None, false, snapshot_cid(snapshot));
    pager.under_limit_of((*rel).rd_id.to_u32());
    let st = ScanState { pager, relid: m.relid, analyze_block_done: false, analyze_unshipped: 0, counted: None };
    (*d).state = Box::into_raw(Box::new(st));
    (*d).cb.func = Some(free_scan_state);
    (*d).cb.arg = d.cast();
    pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*d).cb);
    pg_sys::RelationIncrementReferenceCount(rel);
    d.cast()
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_end(scan: pg_sys::TableScanDesc) {
    let d = scan as *mut PinaxScanDesc;
    free_scan_state(d.cast());
    pg_sys::RelationDecrementReferenceCount((*scan).rs_rd);
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_rescan(scan: pg_sys::TableScanDesc, _key: *mut pg_sys::ScanKeyData, _set_params: bool, _allow_strat: bool, _allow_sync: bool, _allow_pagemode: bool) {
    let d = scan as *mut PinaxScanDesc;
    let st = &mut *(*d).state;
    st.pager = Pager::new(st.pager.storage.clone(), Vec::new(), None, false, snapshot_cid((*scan).rs_snapshot));
    st.pager.under_limit_of((*(*scan).rs_rd).rd_id.to_u32());
    st.counted = None;
}

/// Have the tablets return only rows that may satisfy `filter` (pushed-down
/// `WHERE` conditions, see `customscan/pushdown/`), from the next page on; set before the
/// first row is read and again after each rescan.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn set_filter(scan: pg_sys::TableScanDesc, filter: Option<pinax_proto::RowFilter>) {
    let d = scan as *mut PinaxScanDesc;
    (*(*d).state).pager.filter = filter;
}

/// For a scan with a filter whose rows nobody reads (`count(*) WHERE ...`, see
/// `customscan/pushdown/count.rs`): how many rows certainly match, counted in the tablets. The
/// rows the filter cannot decide are returned by the scan afterwards.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn count_matching(scan: pg_sys::TableScanDesc) -> u64 {
    let d = scan as *mut PinaxScanDesc;
    (*(*d).state).pager.next_count().or_raise().unwrap_or(0)
}

/// For a scan with a filter under an aggregate computed in storage (see
/// `customscan/pushdown/aggregate.rs`): the partials of `aggs` over the matching rows, and how many rows
/// they folded. The rows the tablets could not decide or fold are returned by the
/// scan afterwards.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn aggregate(scan: pg_sys::TableScanDesc, aggs: &[pinax_proto::AggSpec], group_by: Option<pinax_proto::GroupBy>) -> pinax_client::Aggregated {
    let d = scan as *mut PinaxScanDesc;
    (*(*d).state).pager.next_aggregate(aggs, group_by).or_raise().unwrap_or_default()
}

/// A scan whose rows nobody reads (a plain `count(*)` over a sequential scan
/// without a filter, see `index_only.rs`): the tablets count the visible rows
/// (none is shipped), and this answers true that many times, false after.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn next_counted(scan: pg_sys::TableScanDesc) -> bool {
    let st = &mut *(*(scan as *mut PinaxScanDesc)).state;
    let left = counted_left(st);
    st.counted = Some(left.saturating_sub(1));
    left > 0
}

/// The rows the tablets counted that `st` has not answered for yet (they are
/// asked once per scan).
fn counted_left(st: &mut ScanState) -> u64 {
    match st.counted {
        Some(n) => n,
        None => st.pager.next_count().or_raise().unwrap_or(0),
    }
}

/// How many rows [`next_counted`] would answer true for, at once: it answers
/// false after this.
///
/// # Safety
/// `scan` must be a scan of a Pinax table begun by [`scan_begin`].
pub unsafe fn take_counted(scan: pg_sys::TableScanDesc) -> u64 {
    let st = &mut *(*(scan as *mut PinaxScanDesc)).state;
    let left = counted_left(st);
    st.counted = Some(0);
    left
}

/// Hand the next row of `pager` to PostgreSQL in `slot`.
unsafe fn next_into_slot(pager: &mut Pager, relid: u32, slot: *mut pg_sys::TupleTableSlot) -> bool {
    match pager.next_row().or_raise() {
        Some((key, value)) => {
            let value = crate::tuple::merged((*slot).tts_tupleDescriptor, value);
            let tid = state::with(|b| b.tids.add(relid, &key, &value, Origin::Read));
            store_tuple(slot, &value, tid, pg_sys::Oid::from(relid), None);
            true
        }
        None => {
            pg_sys::ExecClearTuple(slot);
            false
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_getnextslot(scan: pg_sys::TableScanDesc, direction: pg_sys::ScanDirection::Type, slot: *mut pg_sys::TupleTableSlot) -> bool {
    if direction == pg_sys::ScanDirection::BackwardScanDirection {
        error::not_supported("backward scans of Pinax tables are not supported");
    }
    let d = scan as *mut PinaxScanDesc;
    let st = &mut *(*d).state;
    next_into_slot(&mut st.pager, st.relid, slot)
}

#[pg_guard]
unsafe extern "C-unwind" fn parallelscan_estimate(_rel: pg_sys::Relation) -> pg_sys::Size {
    error::not_supported("parallel scans of Pinax tables are not supported")
}

#[pg_guard]
unsafe extern "C-unwind" fn parallelscan_initialize(_rel: pg_sys::Relation, _pscan: pg_sys::ParallelTableScanDesc) -> pg_sys::Size {
    error::not_supported("parallel scans of Pinax tables are not supported")
}

#[pg_guard]
unsafe extern "C-unwind" fn parallelscan_reinitialize(_rel: pg_sys::Relation, _pscan: pg_sys::ParallelTableScanDesc) {
    error::not_supported("parallel scans of Pinax tables are not supported")
}

#[pg_guard]
unsafe extern "C-unwind" fn index_fetch_begin(rel: pg_sys::Relation) -> *mut pg_sys::IndexFetchTableData {
    let m = meta_of(rel);
    let _ = m;
    let f = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexFetchTableData>()) as *mut pg_sys::IndexFetchTableData;
    (*f).rel = rel;
    f
}

#[pg_guard]
unsafe extern "C-unwind" fn index_fetch_reset(_data: *mut pg_sys::IndexFetchTableData) {}

#[pg_guard]
unsafe extern "C-unwind" fn index_fetch_end(data: *mut pg_sys::IndexFetchTableData) {
    pg_sys::pfree(data.cast());
}

/// Put the row version behind `tid` into `slot`, if it exists and `snapshot` sees it.
unsafe fn fetch_version(rel: pg_sys::Relation, tid: pg_sys::ItemPointer, snapshot: pg_sys::Snapshot, slot: *mut pg_sys::TupleTableSlot) -> bool {
    let relid = (*rel).rd_id;
    if !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_DIRTY {
        // A dirty snapshot reports in-progress writers to wait for; storage resolves
        // those itself, so there is never one (callers read these fields).
        (*snapshot).xmin = pg_sys::InvalidTransactionId;
        (*snapshot).xmax = pg_sys::InvalidTransactionId;
        (*snapshot).speculativeToken = 0;
    }
    let cid = snapshot_cid(snapshot);
    // The row goes into the slot straight from the map (no copy of it first);
    // nothing store_tuple calls comes back to the backend state.
    state::with(|b| {
        let Some(r) = b.tids.get(relid.to_u32(), &*tid) else { return false };
        // A version replaced by a command the snapshot already sees is gone.
        if cid != u32::MAX && r.superseded_by.is_some_and(|c| c < cid) {
            return false;
        }
        let own = (r.origin == Origin::Written).then(|| pg_sys::GetCurrentTransactionId());
        store_tuple(slot, r.tuple, *tid, relid, own);
        true
    })
}

#[pg_guard]
unsafe extern "C-unwind" fn index_fetch_tuple(
    data: *mut pg_sys::IndexFetchTableData,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    call_again: *mut bool,
    all_dead: *mut bool,
) -> bool {
    *call_again = false;
    if !all_dead.is_null() {
        *all_dead = false;
    }
    fetch_version((*data).rel, tid, snapshot, slot)
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_fetch_row_version(rel: pg_sys::Relation, tid: pg_sys::ItemPointer, snapshot: pg_sys::Snapshot, slot: *mut pg_sys::TupleTableSlot) -> bool {
    fetch_version(rel, tid, snapshot, slot)
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_tid_valid(scan: pg_sys::TableScanDesc, tid: pg_sys::ItemPointer) -> bool {
    let relid = (*(*scan).rs_rd).rd_id.to_u32();
    state::with(|b| b.tids.get(relid, &*tid).is_some())
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_get_latest_tid(_scan: pg_sys::TableScanDesc, _tid: pg_sys::ItemPointer) {}

/// Whether the row version in `slot` is visible to `snapshot`. Versions read at the
/// statement's read time or written by the transaction are; one found by a dirty
/// snapshot's look-up at the present time (`Origin::Latest`) is if an MVCC
/// snapshot's read of its key finds that same version. (ON CONFLICT under
/// REPEATABLE READ and SERIALIZABLE asks this of the conflicting row: PostgreSQL
/// raises 40001 when the transaction's snapshot cannot see it.)
#[pg_guard]
unsafe extern "C-unwind" fn tuple_satisfies_snapshot(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, snapshot: pg_sys::Snapshot) -> bool {
    if snapshot.is_null() || (*snapshot).snapshot_type != pg_sys::SnapshotType::SNAPSHOT_MVCC {
        return true;
    }
    let tid = (*slot).tts_tid;
    let latest = state::with(|b| b.tids.get((*rel).rd_id.to_u32(), &tid).filter(|r| r.origin == Origin::Latest).map(|r| (r.key.to_vec(), r.tuple.to_vec())));
    let Some((key, tuple)) = latest else { return true };
    let m = meta_of(rel);
    let mut pager = Pager::new(m.storage.clone(), Vec::new(), None, false, snapshot_cid(snapshot));
    match pager.get(&m.storage, &key).or_raise() {
        Some(v) => crate::tuple::merged((*rel).rd_att, v) == tuple,
        None => false,
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn index_delete_tuples(_rel: pg_sys::Relation, _delstate: *mut pg_sys::TM_IndexDeleteOp) -> pg_sys::TransactionId {
    pg_sys::InvalidTransactionId
}

/// Insert the row in `slot` as command `cid`; returns its row key.
unsafe fn insert_row(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, cid: u32) -> Vec<u8> {
    let m = meta_of(rel);
    slot_getallattrs(slot);
    crate::sequence::fill_copy_defaults(rel, slot);
    let bytes = form_tuple_bytes(slot);
    let (key, op) = match &m.pk {
        Some(pk) => {
            let k = pk_key(pk, slot);
            (k.clone(), WriteOp::insert(k, bytes.clone()))
        }
        None => {
            let k = new_rowid_key(m.hashed);
            (k.clone(), WriteOp::put(k, bytes.clone()))
        }
    };
    let tid = state::with(|b| {
        b.last_cid = cid;
        b.unchanged.clear();
        let tid = b.tids.add(m.relid, &key, &bytes, Origin::Written);
        if m.exclusion {
            b.note_excl_row(cid, m.relid, &key, tid);
        }
        b.push(cid, &m.storage, op).map(|_| tid)
    })
    .or_raise();
    (*slot).tts_tid = tid;
    (*slot).tts_tableOid = (*rel).rd_id;
    pg_sys::pgstat_count_heap_insert(rel, 1);
    key
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_insert(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, cid: pg_sys::CommandId, _options: i32, _bistate: *mut pg_sys::BulkInsertStateData) {
    insert_row(rel, slot, cid);
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_insert_speculative(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
    _spec_token: u32,
) {
    if let Some(a) = crate::insert_at_once::take((*rel).rd_id.to_u32()) {
        insert_at_once(rel, slot, cid, a.upsert);
        return;
    }
    // Earlier writes first, so that a conflict is about this row alone.
    state::with(|b| b.flush()).or_raise();
    let key = insert_row(rel, slot, cid);
    let storage = meta_of(rel).storage.clone();
    let res = state::with(|b| {
        b.begin_speculative(cid, state::Speculative { conflict: None, index_conflict: None, written: vec![(storage.clone(), key.clone())], committed: false });
        b.flush()
    });
    if let Err(e) = res {
        if e.error.code() == pinax_common::ErrorCode::DuplicateKey && e.table == storage {
            state::with(|b| {
                if let Some(s) = &mut b.spec {
                    s.conflict = Some(key.clone());
                    s.written.clear();
                }
            });
        } else {
            violation::raise(e);
        }
    }
}

/// The speculative insertion of a statement's one row, committed at once
/// (`insert_at_once`): a duplicate key is reported as the speculative conflict
/// (PostgreSQL then looks the row up and does nothing). `upsert`: the row is put
/// whether its key exists or not (no conflict to report).
unsafe fn insert_at_once(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, cid: u32, upsert: bool) {
    let m = meta_of(rel);
    let Some(pk) = &m.pk else {
        error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pinax: an insert at once into a table without a primary key", None);
    };
    slot_getallattrs(slot);
    let (key, row) = (pk_key(pk, slot), form_tuple_bytes(slot));
    let op = if upsert { WriteOp::put(key, row) } else { WriteOp::insert(key, row) };
    let res = state::with(|b| b.write_now(&m.storage, std::slice::from_ref(&op), upsert));
    let conflict = match res {
        Ok(()) => false,
        Err(e) if e.error.code() == pinax_common::ErrorCode::DuplicateKey && e.table == m.storage => true,
        Err(e) => violation::raise(e),
    };
    if pg_sys::message_level_is_interesting(pg_sys::DEBUG1 as i32) {
        if upsert {
            pgrx::debug1!("pinax: INSERT ... ON CONFLICT DO UPDATE written at once: the row put");
        } else {
            pgrx::debug1!("pinax: INSERT ... ON CONFLICT DO NOTHING written at once: {}", if conflict { "the key exists" } else { "inserted" });
        }
    }
    let tid = state::with(|b| {
        b.last_cid = cid;
        b.unchanged.clear();
        let written = if conflict { vec![] } else { vec![(m.storage.clone(), op.key.clone())] };
        b.begin_speculative(cid, state::Speculative { conflict: conflict.then(|| op.key.clone()), index_conflict: None, written, committed: true });
        b.tids.add(m.relid, &op.key, &op.value, Origin::Written)
    });
    (*slot).tts_tid = tid;
    (*slot).tts_tableOid = (*rel).rd_id;
    if !conflict {
        pg_sys::pgstat_count_heap_insert(rel, 1);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_complete_speculative(rel: pg_sys::Relation, _slot: *mut pg_sys::TupleTableSlot, _spec_token: u32, succeeded: bool) {
    let spec = state::with(|b| b.spec.take());
    if succeeded {
        state::with(|b| b.speculation_settled());
        if let Some((_, key)) = spec.as_ref().and_then(|s| s.written.first()) {
            let relid = (*rel).rd_id.to_u32();
            state::with(|b| {
                let cid = b.last_cid;
                b.spec_rows.insert((relid, key.clone()), cid);
            });
        }
        return;
    }
    let lost_on = spec.as_ref().and_then(|s| s.conflict.clone().or_else(|| s.index_conflict.clone()));
    if let Err(n) = state::with(|b| b.lost_speculation(lost_on)) {
        let name = std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned();
        error::raise_with(
            pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("pinax: speculative insertion into \"{name}\" lost {n} times in a row to a conflict its arbiter look-up does not find"),
            None,
        );
    }
    // Undo what was written for the row that lost: the row and its index entries
    // (a row committed at once was written only if nothing conflicted).
    if let Some(s) = spec.filter(|s| !s.committed) {
        let _ = rel;
        state::with(|b| {
            let cid = b.last_cid;
            for (storage, key) in s.written {
                b.push(cid, &storage, WriteOp::delete(key))?;
            }
            b.flush()
        })
        .or_raise();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn multi_insert(rel: pg_sys::Relation, slots: *mut *mut pg_sys::TupleTableSlot, nslots: i32, cid: pg_sys::CommandId, _options: i32, _bistate: *mut pg_sys::BulkInsertStateData) {
    for i in 0..nslots as usize {
        insert_row(rel, *slots.add(i), cid);
    }
}

/// A temporary slot holding the stored row `bytes` of `rel`.
unsafe fn temp_slot(rel: pg_sys::Relation, bytes: &[u8]) -> *mut pg_sys::TupleTableSlot {
    let slot = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, &raw const pg_sys::TTSOpsHeapTuple);
    store_tuple(slot, bytes, pg_sys::ItemPointerData::default(), (*rel).rd_id, None);
    slot_getallattrs(slot);
    slot
}

/// The version behind `tid` for a write by command `cid`: its key and bytes, or the
/// TM result when it was already replaced.
unsafe fn target(rel: pg_sys::Relation, tid: pg_sys::ItemPointer, cid: u32, tmfd: *mut pg_sys::TM_FailureData) -> Result<(Vec<u8>, Vec<u8>), pg_sys::TM_Result::Type> {
    let relid = (*rel).rd_id.to_u32();
    let found = state::with(|b| b.tids.get(relid, &*tid).map(|r| (r.key.to_vec(), r.tuple.to_vec(), r.superseded_by)));
    match found {
        None => error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pinax: row version to modify is unknown (TID not handed out in this transaction)", None),
        Some((_, _, Some(by))) => {
            if !tmfd.is_null() {
                (*tmfd).ctid = *tid;
                (*tmfd).xmax = pg_sys::GetCurrentTransactionId();
                (*tmfd).cmax = by;
                (*tmfd).traversed = false;
            }
            let _ = cid;
            Err(pg_sys::TM_Result::TM_SelfModified)
        }
        Some((k, t, None)) => Ok((k, t)),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_delete(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    _crosscheck: pg_sys::Snapshot,
    _wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    _changing_part: bool,
) -> pg_sys::TM_Result::Type {
    let m = meta_of(rel);
    let (key, old) = match target(rel, tid, cid, tmfd) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let mut ops = vec![(m.storage.clone(), WriteOp::delete(key.clone()))];
    if !m.secondary.is_empty() {
        let slot = temp_slot(rel, &old);
        for im in &m.secondary {
            ops.push((im.storage.clone(), WriteOp::delete(secondary_key(im, slot, None, &key))));
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
    }
    state::with(|b| {
        b.last_cid = cid;
        b.unchanged.clear();
        b.tids.supersede(&*tid, cid);
        for (s, op) in ops {
            b.push(cid, &s, op)?;
        }
        Ok::<(), state::FlushError>(())
    })
    .or_raise();
    pg_sys::pgstat_count_heap_delete(rel);
    pg_sys::TM_Result::TM_Ok
}

/// The write of an update of `rel`'s row to the row formed as `bytes`, keeping its
/// key, as a patch (`pinax_codec::patch`): the columns it assigns, and those it
/// depends on, which another transaction's concurrent update must not change
/// (see update_deps.rs). None: the update holds the whole row, as in PostgreSQL
/// (column-level conflicts are off; SERIALIZABLE; row triggers or row-level
/// security, which see or check the whole row; stored generated columns; not a
/// plain UPDATE: ON CONFLICT, MERGE; a whole-row reference). The columns it does
/// not assign are the old row's in `bytes`: a patch leaves them to whatever
/// another update writes.
unsafe fn patch_value(rel: pg_sys::Relation, m: &TableMeta, bytes: &[u8]) -> Option<Vec<u8>> {
    if !guc::column_conflicts() || pg_sys::XactIsoLevel >= pg_sys::XACT_SERIALIZABLE as i32 || !(*rel).trigdesc.is_null() || (*(*rel).rd_rel).relrowsecurity {
        return None;
    }
    let constr = (*(*rel).rd_att).constr;
    if !constr.is_null() && (*constr).has_generated_stored {
        return None;
    }
    let of = crate::update_deps::of((*rel).rd_id)?;
    let assigned = &of.assigned;
    let rules = m.patch_rules.get_or_init(|| patch_rules(rel, m)).as_ref()?;
    // An index entry, or a CHECK constraint, over a column it assigns was made
    // from, or checked on, the row as this update saw it: all their columns.
    let mut deps: std::borrow::Cow<[u16]> = std::borrow::Cow::Borrowed(&of.used);
    if patch::intersects(assigned, &rules.indexed) {
        deps = patch::union(&deps, &rules.indexed).into();
    }
    for check in rules.checks.iter().filter(|c| patch::intersects(assigned, c)) {
        deps = patch::union(&deps, check).into();
    }
    if rules.non_key.iter().all(|c| deps.binary_search(c).is_ok()) {
        // It depends on every column another update could change: it conflicts
        // with all of them, as a whole-row write does, which costs less.
        return None;
    }
    Some(patch::encode_patch_op(assigned, &deps, bytes))
}

/// `rel`'s [`meta::PatchRules`]; None if an index or a CHECK constraint uses the
/// whole row.
unsafe fn patch_rules(rel: pg_sys::Relation, m: &TableMeta) -> Option<meta::PatchRules> {
    let mut indexed = Vec::new();
    crate::update_deps::attnums(pg_sys::RelationGetIndexAttrBitmap(rel, pg_sys::IndexAttrBitmapKind::INDEX_ATTR_BITMAP_ALL), &mut indexed)?;
    indexed.sort_unstable();
    let mut checks = Vec::new();
    let constr = (*(*rel).rd_att).constr;
    if !constr.is_null() {
        for i in 0..(*constr).num_check as usize {
            let check = (*constr).check.add(i);
            let mut set: *mut pg_sys::Bitmapset = std::ptr::null_mut();
            pg_sys::pull_varattnos(pg_sys::stringToNode((*check).ccbin) as *mut pg_sys::Node, 1, &mut set);
            let mut cols = Vec::new();
            crate::update_deps::attnums(set, &mut cols)?;
            cols.sort_unstable();
            checks.push(cols);
        }
    }
    let desc = (*rel).rd_att;
    let key: &[i16] = m.pk.as_ref().map_or(&[], |pk| &pk.heap_attnums);
    let non_key = (0..(*desc).natts as usize)
        .filter(|&i| !(*(*desc).attrs.as_ptr().add(i)).attisdropped && !key.contains(&(i as i16 + 1)))
        .map(|i| i as u16 + 1)
        .collect();
    Some(meta::PatchRules { indexed, checks, non_key })
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_update(
    rel: pg_sys::Relation,
    otid: pg_sys::ItemPointer,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    _crosscheck: pg_sys::Snapshot,
    _wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    lockmode: *mut pg_sys::LockTupleMode::Type,
    update_indexes: *mut bool,
) -> pg_sys::TM_Result::Type {
    let m = meta_of(rel);
    let (old_key, old) = match target(rel, otid, cid, tmfd) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let bytes = form_tuple_bytes(slot);
    let new_key = match &m.pk {
        Some(pk) => pk_key(pk, slot),
        None => old_key.clone(),
    };
    let mut ops = Vec::new();
    let key_changed = new_key != old_key;
    if key_changed {
        ops.push((m.storage.clone(), WriteOp::delete(old_key.clone())));
        ops.push((m.storage.clone(), WriteOp::insert(new_key.clone(), bytes.clone())));
    } else {
        let op = match patch_value(rel, &m, &bytes) {
            Some(v) => WriteOp::patch(new_key.clone(), v),
            None => WriteOp::put(new_key.clone(), bytes.clone()),
        };
        ops.push((m.storage.clone(), op));
    }
    let mut unchanged = Vec::new();
    if !m.secondary.is_empty() {
        let oslot = temp_slot(rel, &old);
        for im in &m.secondary {
            let ok = secondary_key(im, oslot, None, &old_key);
            let nk = secondary_key(im, slot, None, &new_key);
            // Entries hold the row key: when it changes, every entry is rewritten.
            if ok == nk && !key_changed {
                unchanged.push((im.oid, nk));
            } else {
                ops.push((im.storage.clone(), WriteOp::delete(ok)));
            }
        }
        pg_sys::ExecDropSingleTupleTableSlot(oslot);
    }
    let new_tid = state::with(|b| {
        b.last_cid = cid;
        b.unchanged = unchanged;
        if b.spec_cid == Some(cid) {
            b.spec_rows.insert((m.relid, new_key.clone()), cid);
        }
        b.tids.supersede(&*otid, cid);
        let t = b.tids.add(m.relid, &new_key, &bytes, Origin::Written);
        if m.exclusion {
            b.note_excl_row(cid, m.relid, &new_key, t);
        }
        for (s, op) in ops {
            b.push(cid, &s, op)?;
        }
        Ok::<_, state::FlushError>(t)
    })
    .or_raise();
    (*slot).tts_tid = new_tid;
    (*slot).tts_tableOid = (*rel).rd_id;
    *lockmode = if key_changed { pg_sys::LockTupleMode::LockTupleExclusive } else { pg_sys::LockTupleMode::LockTupleNoKeyExclusive };
    *update_indexes = !m.secondary.is_empty();
    pg_sys::pgstat_count_heap_update(rel, false);
    pg_sys::TM_Result::TM_Ok
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_lock(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    mode: pg_sys::LockTupleMode::Type,
    wait_policy: pg_sys::LockWaitPolicy::Type,
    _flags: u8,
    tmfd: *mut pg_sys::TM_FailureData,
) -> pg_sys::TM_Result::Type {
    let _ = snapshot;
    let key = match target(rel, tid, cid, tmfd) {
        Ok((k, _)) => k,
        Err(r) => return r,
    };
    if !tmfd.is_null() {
        (*tmfd).traversed = false;
    }
    // A row this very command wrote (INSERT ... ON CONFLICT meeting its own row).
    let own_cmd = state::with(|b| b.spec_cid == Some(cid) && b.spec_rows.get(&((*rel).rd_id.to_u32(), key.clone())) == Some(&cid));
    if own_cmd {
        let found = state::with(|b| b.tids.get((*rel).rd_id.to_u32(), &*tid).map(|r| r.tuple.to_vec()));
        if let Some(bytes) = found {
            store_tuple(slot, &bytes, *tid, (*rel).rd_id, Some(pg_sys::GetCurrentTransactionId()));
        }
        return pg_sys::TM_Result::TM_Invisible;
    }
    if !fetch_version(rel, tid, std::ptr::null_mut(), slot) {
        return pg_sys::TM_Result::TM_Deleted;
    }
    // A lock intent on the row with PostgreSQL's strength: FOR KEY SHARE (foreign-key
    // checks) conflicts only with FOR UPDATE, deletes and key updates, so a non-key
    // update passes it; FOR SHARE also with non-key updates; and so on (storage applies
    // PostgreSQL's conflict table, `LockStrength`). Locks are sent with the
    // statement's writes; one meeting another transaction's conflicting lock or write
    // waits for it to end (state.rs), then fails with 40001 if that one committed.
    let strength = match mode {
        pg_sys::LockTupleMode::LockTupleKeyShare => LockStrength::KeyShare,
        pg_sys::LockTupleMode::LockTupleShare => LockStrength::Share,
        pg_sys::LockTupleMode::LockTupleNoKeyExclusive => LockStrength::NoKeyUpdate,
        _ => LockStrength::Update,
    };
    let op = WriteOp::row_lock(key, strength);
    let m = meta_of(rel);
    if wait_policy == pg_sys::LockWaitPolicy::LockWaitBlock {
        state::with(|b| b.push(cid, &m.storage, op)).or_raise();
        return pg_sys::TM_Result::TM_Ok;
    }
    // NOWAIT / SKIP LOCKED: the answer is needed now. Earlier writes go first (they
    // may wait), then this lock alone, failing at once if the row is locked (one
    // tablet write: nothing of it is written then).
    state::with(|b| b.flush()).or_raise();
    let res = state::with(|b| {
        b.push(cid, &m.storage, op)?;
        b.flush_nowait()
    });
    match res {
        Ok(()) => pg_sys::TM_Result::TM_Ok,
        Err(e) if e.error.blocker().is_some() => {
            if wait_policy == pg_sys::LockWaitPolicy::LockWaitSkip {
                return pg_sys::TM_Result::TM_WouldBlock;
            }
            let name = std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned();
            error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, format!("could not obtain lock on row in relation \"{name}\""), None)
        }
        Err(e) => violation::raise(e),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_set_new_filenode(
    rel: pg_sys::Relation,
    newrnode: *const pg_sys::RelFileNode,
    persistence: std::ffi::c_char,
    freeze_xid: *mut pg_sys::TransactionId,
    minmulti: *mut pg_sys::MultiXactId,
) {
    if persistence as u8 == pg_sys::RELPERSISTENCE_TEMP {
        error::not_supported("temporary tables cannot use the pinax access method; use USING heap");
    }
    *freeze_xid = pg_sys::InvalidTransactionId;
    *minmulti = pg_sys::InvalidTransactionId;
    let srel = pg_sys::RelationCreateStorage(*newrnode, persistence, true);
    pg_sys::smgrclose(srel);
    let db = pg_sys::MyDatabaseId.to_u32();
    let name = table_storage_name(db, (*newrnode).relNode.to_u32());
    let old_node = (*rel).rd_node.relNode.to_u32();
    let old = (old_node != (*newrnode).relNode.to_u32() && old_node != 0).then(|| table_storage_name(db, old_node));
    // The AM's OID is needed to free this storage if the transaction aborts, and
    // the old file node's at commit (hooks/xact.rs).
    meta::pinax_am_oid();
    if crate::ddl::adopt_or_record(rel, &name) {
        return; // replayed DDL: the origin node's storage table, under our name
    }
    let client = state::with(|b| b.client()).or_raise();
    // A new file node for an existing table (TRUNCATE, rewrite) keeps its sharding.
    let sharding = match old.as_ref().and_then(|o| client.table(o).ok()) {
        Some(info) => match &info.sharding {
            Sharding::Hash { tablets } => Sharding::Hash { tablets: *tablets },
            Sharding::Range { split_points } => Sharding::Range { split_points: split_points.clone() },
        },
        None => {
            let opts: CreateOptions = state::with(|b| b.pending_create.take()).unwrap_or_default();
            if opts.range {
                Sharding::Range { split_points: opts.split_at }
            } else {
                Sharding::Hash { tablets: opts.tablets.unwrap_or_else(guc::tablets) }
            }
        }
    };
    client.call(Request::CreateTable { name, sharding, if_not_exists: true }).or_raise();
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_nontransactional_truncate(rel: pg_sys::Relation) {
    if crate::ddl::replaying() {
        return; // the origin node emptied the storage tables
    }
    let m = meta_of(rel);
    let client = state::with(|b| b.client()).or_raise();
    let mut names = vec![m.storage.clone()];
    names.extend(m.secondary.iter().map(|i| i.storage.clone()));
    for name in names {
        let info = client.table(&name).or_raise();
        let sharding = info.sharding.clone();
        client.drop_table(&name, true).or_raise();
        client.call(Request::CreateTable { name, sharding, if_not_exists: true }).or_raise();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_copy_data(_rel: pg_sys::Relation, _newrnode: *const pg_sys::RelFileNode) {
    error::not_supported("ALTER TABLE SET TABLESPACE is not supported on Pinax tables");
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_copy_for_cluster(
    _old: pg_sys::Relation,
    _new: pg_sys::Relation,
    _old_index: pg_sys::Relation,
    _use_sort: bool,
    _oldest_xmin: pg_sys::TransactionId,
    _xid_cutoff: *mut pg_sys::TransactionId,
    _multi_cutoff: *mut pg_sys::MultiXactId,
    _num_tuples: *mut f64,
    _tups_vacuumed: *mut f64,
    _tups_recently_dead: *mut f64,
) {
    error::not_supported("CLUSTER and VACUUM FULL are not supported on Pinax tables");
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_vacuum(_rel: pg_sys::Relation, _params: *mut pg_sys::VacuumParams, _bstrategy: pg_sys::BufferAccessStrategy) {
    // Old versions are removed by the storage's compaction filter.
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_analyze_next_block(scan: pg_sys::TableScanDesc, _blockno: pg_sys::BlockNumber, _bstrategy: pg_sys::BufferAccessStrategy) -> bool {
    // The table reports one block (relation_size), which yields the rows the
    // tablets sample (every k-th, k from the last row count: about twice the rows
    // ANALYZE keeps; all of them for a table never analyzed or small). ANALYZE's
    // reservoir then samples those uniformly; the row count is exact (the tablets
    // count what they do not ship).
    let d = scan as *mut PinaxScanDesc;
    let st = &mut *(*d).state;
    if st.analyze_block_done {
        return false;
    }
    st.analyze_block_done = true;
    let (every, keep) = analyze_sample_every((*d).base.rs_rd);
    let total = st.pager.sample(every, keep).or_raise();
    let shipped = st.pager.queued() as u64;
    st.analyze_unshipped = total.saturating_sub(shipped);
    pgrx::debug1!("pinax: ANALYZE read {shipped} of {total} rows (sampled in the tablets)");
    true
}

/// Every how many rows ANALYZE's sample takes one, and how many rows it aims at:
/// about twice the rows ANALYZE keeps (300 x the largest statistics target of the
/// table's columns), judged by the row count of the last ANALYZE. 1 (every row)
/// when the table has none yet or is small.
unsafe fn analyze_sample_every(rel: pg_sys::Relation) -> (u32, u64) {
    let reltuples = (*(*rel).rd_rel).reltuples as f64;
    let desc = (*rel).rd_att;
    let mut target = pg_sys::default_statistics_target.max(1);
    for i in 0..(*desc).natts as usize {
        let attr = (*desc).attrs.as_ptr().add(i);
        if !(*attr).attisdropped && (*attr).attstattarget > target {
            target = (*attr).attstattarget;
        }
    }
    let keep = 2.0 * 300.0 * target as f64;
    if reltuples <= keep {
        return (1, keep as u64);
    }
    ((reltuples / keep).min(u32::MAX as f64) as u32, keep as u64)
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_analyze_next_tuple(scan: pg_sys::TableScanDesc, _oldest_xmin: pg_sys::TransactionId, liverows: *mut f64, _deadrows: *mut f64, slot: *mut pg_sys::TupleTableSlot) -> bool {
    let d = scan as *mut PinaxScanDesc;
    let st = &mut *(*d).state;
    if next_into_slot(&mut st.pager, st.relid, slot) {
        *liverows += 1.0 + std::mem::take(&mut st.analyze_unshipped) as f64;
        true
    } else {
        false
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn index_build_range_scan(
    table_rel: pg_sys::Relation,
    index_rel: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
    _allow_sync: bool,
    _anyvisible: bool,
    _progress: bool,
    _start_blockno: pg_sys::BlockNumber,
    _numblocks: pg_sys::BlockNumber,
    _callback: pg_sys::IndexBuildCallback,
    _callback_state: *mut std::ffi::c_void,
    _scan: pg_sys::TableScanDesc,
) -> f64 {
    // Pinax builds the index in storage itself; the btree code calling us (when the
    // index was not yet switched to the Pinax routine) receives no tuples and leaves
    // an empty btree file behind.
    index::build(table_rel, index_rel, index_info)
}

#[pg_guard]
unsafe extern "C-unwind" fn index_validate_scan(
    _table_rel: pg_sys::Relation,
    _index_rel: pg_sys::Relation,
    _index_info: *mut pg_sys::IndexInfo,
    _snapshot: pg_sys::Snapshot,
    _state: *mut pg_sys::ValidateIndexState,
) {
    error::not_supported("CREATE INDEX CONCURRENTLY is not supported on Pinax tables");
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_size(_rel: pg_sys::Relation, _fork: pg_sys::ForkNumber::Type) -> u64 {
    pg_sys::BLCKSZ as u64
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_needs_toast_table(_rel: pg_sys::Relation) -> bool {
    false
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_estimate_size(rel: pg_sys::Relation, attr_widths: *mut i32, pages: *mut pg_sys::BlockNumber, tuples: *mut f64, allvisfrac: *mut f64) {
    let reltuples = (*(*rel).rd_rel).reltuples as f64;
    // Never analyzed: assume a middling table so selective predicates use indexes.
    let ntuples = if reltuples < 0.0 { 1000.0 } else { reltuples.max(1.0) };
    let width = pg_sys::get_rel_data_width(rel, attr_widths) as f64 + 24.0;
    *tuples = ntuples;
    *pages = ((ntuples * width) / pg_sys::BLCKSZ as f64).ceil().max(1.0) as pg_sys::BlockNumber;
    // Index-only scans never visit the table (am/index_only.rs).
    *allvisfrac = 1.0;
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_sample_next_block(_scan: pg_sys::TableScanDesc, _scanstate: *mut pg_sys::SampleScanState) -> bool {
    error::not_supported("TABLESAMPLE is not supported on Pinax tables")
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_sample_next_tuple(_scan: pg_sys::TableScanDesc, _scanstate: *mut pg_sys::SampleScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    error::not_supported("TABLESAMPLE is not supported on Pinax tables")
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
        scan_bitmap_next_block: None,
        scan_bitmap_next_tuple: None,
        scan_sample_next_block: Some(scan_sample_next_block),
        scan_sample_next_tuple: Some(scan_sample_next_tuple),
    };
    Box::into_raw(Box::new(r))
}
