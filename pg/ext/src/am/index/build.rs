//! Index builds (`ambuild`, `ambuildempty`) and vacuum (`ambulkdelete`,
//! `amvacuumcleanup`: nothing to do, storage removes old versions). An index of
//! a Pinax table is built in storage from the table's rows (`build`, reached
//! through btree's own ambuild and the table AM's `index_build_range_scan`):
//! the primary key re-keys the rows, a secondary index gets a storage table of
//! its own. Replaying DDL, the origin node's storage is adopted instead.

use super::{exec_qual, hold_rel, routine, BT_AMBUILD};
use crate::error::{self, OrRaise};
use crate::meta::{self, enforced_unique, index_meta, pk_key, secondary_key};
use crate::scan::Pager;
use crate::state;
use crate::tuple::store_tuple;
use crate::violation::{self, OrRaiseFlush};
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_proto::WriteOp;

/// Rows whose moves to their primary key a build hands over to the write buffer
/// at once.
const MOVES_PER_HAND_OVER: usize = 512;

thread_local! {
    /// (builds are deferred, the oid of the secondary index last built so).
    static DEFERRED: std::cell::Cell<(bool, u32)> = const { std::cell::Cell::new((false, 0)) };
}

/// Build secondary indexes without entries (storage only) while `on`; returns
/// the oid of the last one built so since the previous call.
pub fn defer_builds(on: bool) -> u32 {
    DEFERRED.with(|d| d.replace((on, 0)).1)
}

/// Whether the build of index `oid` writes no entries (CREATE INDEX
/// CONCURRENTLY's first step; `defer_builds`): then it is the one built so.
pub fn deferring(oid: u32) -> bool {
    DEFERRED.with(|d| {
        let on = d.get().0;
        if on {
            d.set((true, oid));
        }
        on
    })
}

/// Write the entries of secondary index `idx` for up to `max` rows of `heap`
/// from row key `start` on, as the rows are at the transaction's read time (a
/// row changed since makes the entry's write a conflict, 40001, when it touched
/// the entry: the caller tries the chunk again at a later time). Returns the
/// rows written and the key the next chunk starts at (None: the table's end).
///
/// A unique index's entry is an insert (a duplicate fails the write, 23505)
/// after a lock of its key (which, unlike the insert, conflicts with a change
/// committed after the read time: a writer's deletion of the entry). A writer
/// maintaining the index may have written the same entry for the same row
/// already: then the insert fails too, and the caller runs the chunk again
/// `careful`: each unique entry is read first and left alone if it names this
/// row; if it names another row, the values are duplicated: 23505, "could not
/// create unique index", and [`real_duplicate`] says so.
///
/// # Safety
/// Valid open relations and index info, inside a transaction; `idx` a secondary
/// index of Pinax table `heap`.
pub unsafe fn backfill_chunk(
    heap: pg_sys::Relation,
    idx: pg_sys::Relation,
    ii: *mut pg_sys::IndexInfo,
    start: Vec<u8>,
    max: usize,
    careful: bool,
) -> (usize, Option<Vec<u8>>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let m = meta::table_meta(heap).or_raise();
        if (*(*idx).rd_rel).relam != pg_sys::BTREE_AM_OID {
            let (_, inv) = super::inverted::meta_for(heap, idx);
            return super::inverted::write_entries(heap, idx, ii, &m, &inv, start, max);
        }
        let im = index_meta(idx, m.hashed);
        let cid = pg_sys::GetCurrentCommandId(true);
        let mut pager = Pager::new(m.storage.clone(), start, None, false, u32::MAX);
        let slot = pg_sys::MakeSingleTupleTableSlot((*heap).rd_att, &raw const pg_sys::TTSOpsHeapTuple);
        let estate = pg_sys::CreateExecutorState();
        let econtext = pg_sys::MakePerTupleExprContext(estate);
        (*econtext).ecxt_scantuple = slot;
        let pred = predicate(ii, estate);
        let mut n = 0;
        let mut next = None;
        let mut mine: std::collections::HashMap<Vec<u8>, Vec<u8>> = std::collections::HashMap::new();
        while let Some((key, value)) = pager.next_row().or_raise() {
            let value = crate::tuple::merged((*heap).rd_att, value);
            store_tuple(slot, &value, pg_sys::ItemPointerData::default(), pg_sys::Oid::from(m.relid), None);
            n += 1;
            if let Some(vals) = entry_values(ii, pred, estate, im.cols.len()) {
                let ik = secondary_key(&im, slot, Some(&vals), &key);
                if !enforced_unique(&im, &vals) {
                    state::with(|b| b.push(cid, &im.storage, WriteOp::put(ik, key.clone()))).or_raise();
                } else {
                    // (Read at the scan's own read point; entries this chunk wrote are not
                    // there yet: remembered.)
                    let existing = match careful {
                        true => mine.insert(ik.clone(), key.clone()).map_or_else(|| pager.get(&im.storage, &ik).or_raise(), Some),
                        false => None,
                    };
                    match existing {
                        Some(row) if row == key => {} // a writer's entry for this row
                        Some(_) => {
                            REAL_DUPLICATE.with(|d| d.set(true));
                            violation::raise_duplicate_build(im.oid, &ik);
                        }
                        None => state::with(|b| {
                            b.push(cid, &im.storage, WriteOp::row_lock(ik.clone(), pinax_proto::LockStrength::Update))?;
                            b.push(cid, &im.storage, WriteOp::insert(ik, key.clone()))
                        })
                        .or_raise(),
                    }
                }
            }
            if n == max {
                let mut k = key;
                k.push(0); // the least key after it
                next = Some(k);
                break;
            }
        }
        pg_sys::FreeExecutorState(estate);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        (n, next)
    }
}

thread_local! {
    /// A careful backfill found two rows with the same unique values.
    static REAL_DUPLICATE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the last careful backfill failed on a real duplicate (and clear it).
pub fn real_duplicate() -> bool {
    REAL_DUPLICATE.with(|d| d.replace(false))
}

/// btree's build subphase "scanning table" (nbtree.h; not in pgrx's bindings).
const PROGRESS_BTREE_PHASE_INDEXBUILD_TABLESCAN: i64 = 2;

/// Rows between two progress reports of a build.
const PROGRESS_EVERY: u64 = 1024;

/// Report `value` as index build progress parameter `param`
/// (`pg_stat_progress_create_index`; a no-op when no command reports progress).
pub fn report_progress(param: u32, value: i64) {
    // SAFETY: only writes this backend's own status entry.
    unsafe { pg_sys::pgstat_progress_update_param(param as i32, value) }
}

/// A build of `heap`'s rows begins: the table scan, and the rows expected
/// (as of the last ANALYZE; 0: unknown).
///
/// # Safety
/// `heap` must be a valid open relation.
pub unsafe fn report_scan_start(heap: pg_sys::Relation) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    let expected = unsafe { (*(*heap).rd_rel).reltuples };
    report_progress(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PROGRESS_BTREE_PHASE_INDEXBUILD_TABLESCAN);
    report_progress(pg_sys::PROGRESS_CREATEIDX_TUPLES_TOTAL, expected.max(0.0) as i64);
    report_progress(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE, 0);
}

/// Build index `idx` of Pinax table `heap` in storage; returns the number of rows.
///
/// # Safety
/// Valid open relations and index info, inside a transaction.
pub unsafe fn build(heap: pg_sys::Relation, idx: pg_sys::Relation, ii: *mut pg_sys::IndexInfo) -> f64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        hold_rel(idx);
        // The entries carry the build's commit time: a snapshot from before it would
        // miss rows through the new index (all of them; and rows deleted before the
        // build have no entry). PostgreSQL's answer for indexes that older snapshots
        // must not use (broken HOT chains) is `indcheckxmin`, set by index_build when
        // this flag is: transactions whose snapshots are older than the index's pg_index
        // row stay off it -- the creating transaction too. Not needed when the table's
        // storage is new in this transaction: no older snapshot can see its rows.
        if (*heap).rd_createSubid == 0 && (*heap).rd_firstRelfilenodeSubid == 0 {
            (*ii).ii_BrokenHotChain = true;
        }
        let m = meta::table_meta(heap).or_raise();
        let im = index_meta(idx, m.hashed);
        check_key_equality(idx);
        if im.is_pk && !(*(*idx).rd_index).indimmediate {
            // The primary key is the row key: two rows cannot share it even for a moment.
            error::not_supported("deferrable primary keys are not supported on Pinax tables (use a deferrable UNIQUE constraint)");
        }
        let cid = pg_sys::GetCurrentCommandId(true);
        let relid = m.relid;
        if crate::ddl::replaying() {
            // Replayed DDL: the origin node built the index; its storage gets our name.
            if !im.is_pk {
                meta::pinax_am_oid(); // for dropping this name if the transaction aborts (hooks/xact.rs)
                if !crate::ddl::adopt_or_record(idx, &im.storage) {
                    super::create_index_storage(&m.storage, &im.storage);
                }
            }
            if im.is_pk {
                meta::register_owner(&m.storage, im.oid);
            } else if im.unique {
                meta::register_owner(&im.storage, im.oid);
            }
            return 0.0;
        }
        let mut pager = Pager::new(m.storage.clone(), Vec::new(), None, false, u32::MAX);
        let slot = pg_sys::MakeSingleTupleTableSlot((*heap).rd_att, &raw const pg_sys::TTSOpsHeapTuple);
        let mut n = 0.0;
        let mut scanned = 0u64;
        let mut scanned_one = || {
            scanned += 1;
            if scanned.is_multiple_of(PROGRESS_EVERY) {
                report_progress(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE, scanned as i64);
            }
        };
        if !DEFERRED.with(|d| d.get().0) {
            report_scan_start(heap);
        }
        if im.is_pk {
            // Rows stored under generated ids (or another primary key) move to this
            // key, and the entries of the secondary indexes, which name the row by
            // its key, follow them.
            let estate = pg_sys::CreateExecutorState();
            let econtext = pg_sys::MakePerTupleExprContext(estate);
            (*econtext).ecxt_scantuple = slot;
            // (Not those without storage yet: an index ALTER TABLE re-created, which
            // the same rewrite builds after this one, from the rows as they are then.)
            let client = state::with(|b| b.client()).or_raise();
            let secondaries: Vec<(&meta::IndexMeta, *mut pg_sys::IndexInfo, *mut pg_sys::ExprState)> = m
                .secondary
                .iter()
                .filter(|sim| !matches!(client.table(&sim.storage), Err(e) if e.code() == pinax_common::ErrorCode::TableNotFound))
                .map(|sim| {
                    let r = pg_sys::index_open(pg_sys::Oid::from(sim.oid), pg_sys::AccessShareLock as pg_sys::LOCKMODE);
                    let sii = pg_sys::BuildIndexInfo(r);
                    pg_sys::index_close(r, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
                    (&**sim, sii, predicate(sii, estate))
                })
                .collect();
            // Stored GIN and hash indexes: their entries end in the row key too.
            let inverted: Vec<(&super::inverted::InvertedMeta, pg_sys::Relation, *mut pg_sys::IndexInfo, *mut pg_sys::ExprState)> = m
                .inverted
                .iter()
                .filter(|iv| !matches!(client.table(&iv.storage), Err(e) if e.code() == pinax_common::ErrorCode::TableNotFound))
                .map(|iv| {
                    let r = pg_sys::index_open(pg_sys::Oid::from(iv.oid), pg_sys::AccessShareLock as pg_sys::LOCKMODE);
                    let iii = pg_sys::BuildIndexInfo(r);
                    (&**iv, r, iii, predicate(iii, estate))
                })
                .collect();
            // The moves of a batch of rows, by storage table (the table's, then each
            // index's), handed over table by table: pushed row by row, every op
            // would start a chunk of its own (a request each) as the tables alternate.
            let mut moves: Vec<Vec<WriteOp>> = vec![Vec::new(); secondaries.len() + inverted.len() + 1];
            let hand_over = |moves: &mut Vec<Vec<WriteOp>>| {
                let tables = std::iter::once(m.storage.as_str())
                    .chain(secondaries.iter().map(|(sim, _, _)| sim.storage.as_str()))
                    .chain(inverted.iter().map(|(iv, _, _, _)| iv.storage.as_str()));
                for (table, ops) in tables.zip(moves.iter_mut()) {
                    for op in ops.drain(..) {
                        state::with(|b| b.push(cid, table, op)).or_raise();
                    }
                }
            };
            while let Some((key, value)) = pager.next_row().or_raise() {
                let value = crate::tuple::merged((*heap).rd_att, value);
                store_tuple(slot, &value, pg_sys::ItemPointerData::default(), pg_sys::Oid::from(relid), None);
                crate::tuple::slot_getallattrs(slot);
                let nk = pk_key(&im, slot);
                if nk != key {
                    for (i, (sim, sii, pred)) in secondaries.iter().enumerate() {
                        let Some(vals) = entry_values(*sii, *pred, estate, sim.cols.len()) else { continue };
                        let old_ik = secondary_key(sim, slot, Some(&vals), &key);
                        let new_ik = secondary_key(sim, slot, Some(&vals), &nk);
                        if old_ik != new_ik {
                            moves[i + 1].push(WriteOp::delete(old_ik));
                        }
                        // The same entry (a unique one) names the row's new key.
                        moves[i + 1].push(WriteOp::put(new_ik, nk.clone()));
                    }
                    for (j, (iv, r, iii, pred)) in inverted.iter().enumerate() {
                        let Some(vals) = entry_values(*iii, *pred, estate, iv.keys.len()) else { continue };
                        let to = &mut moves[secondaries.len() + 1 + j];
                        for p in super::inverted::value_entries(*r, iv, &vals) {
                            to.push(WriteOp::delete(super::inverted::entry_key(&p, &key)));
                            to.push(WriteOp::put(super::inverted::entry_key(&p, &nk), nk.clone()));
                        }
                    }
                    moves[0].push(WriteOp::delete(key));
                    moves[0].push(WriteOp::insert(nk, value));
                    if moves[0].len() >= 2 * MOVES_PER_HAND_OVER {
                        hand_over(&mut moves);
                    }
                }
                n += 1.0;
                scanned_one();
            }
            hand_over(&mut moves);
            for (_, r, _, _) in inverted {
                pg_sys::index_close(r, pg_sys::NoLock as pg_sys::LOCKMODE);
            }
            pg_sys::FreeExecutorState(estate);
            meta::register_owner(&m.storage, im.oid);
        } else {
            crate::ddl::adopt_or_record(idx, &im.storage);
            super::create_index_storage(&m.storage, &im.storage);
            meta::pinax_am_oid(); // for dropping this storage if the transaction aborts (hooks/xact.rs)
            if im.unique {
                meta::register_owner(&im.storage, im.oid);
            }
            if deferring(im.oid) {
                // CREATE INDEX CONCURRENTLY's first step: storage, no entries
                // (concurrent_index.rs backfills them once every node maintains it).
                pg_sys::ExecDropSingleTupleTableSlot(slot);
                return 0.0;
            }
            let estate = pg_sys::CreateExecutorState();
            let econtext = pg_sys::MakePerTupleExprContext(estate);
            (*econtext).ecxt_scantuple = slot;
            let pred = predicate(ii, estate);
            while let Some((key, value)) = pager.next_row().or_raise() {
                let value = crate::tuple::merged((*heap).rd_att, value);
                store_tuple(slot, &value, pg_sys::ItemPointerData::default(), pg_sys::Oid::from(relid), None);
                scanned_one();
                let Some(vals) = entry_values(ii, pred, estate, im.cols.len()) else { continue };
                let ik = secondary_key(&im, slot, Some(&vals), &key);
                let op = if enforced_unique(&im, &vals) { WriteOp::insert(ik, key) } else { WriteOp::put(ik, key) };
                if let Err(e) = state::with(|b| b.push(cid, &im.storage, op)) {
                    violation::raise_build(e, im.oid);
                }
                n += 1.0;
            }
            pg_sys::FreeExecutorState(estate);
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        if let Err(e) = state::with(|b| b.flush()) {
            violation::raise_build(e, im.oid);
        }
        n
    }
}

/// The partial-index predicate of `ii`, prepared in `estate` (null: none).
///
/// # Safety
/// `ii` and `estate` must be valid.
pub(super) unsafe fn predicate(ii: *mut pg_sys::IndexInfo, estate: *mut pg_sys::EState) -> *mut pg_sys::ExprState {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*ii).ii_Predicate.is_null() {
            std::ptr::null_mut()
        } else {
            pg_sys::ExecPrepareQual((*ii).ii_Predicate, estate)
        }
    }
}

/// The `ncols` key values index `ii` has for the row in the scan slot of
/// `estate`'s per-tuple context, or None when its predicate `pred` (see
/// [`predicate`]) leaves the row out. The values live until the next call.
///
/// # Safety
/// `estate`'s per-tuple expression context must have the row in its scan slot.
pub(super) unsafe fn entry_values(
    ii: *mut pg_sys::IndexInfo,
    pred: *mut pg_sys::ExprState,
    estate: *mut pg_sys::EState,
    ncols: usize,
) -> Option<Vec<(pg_sys::Datum, bool)>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let econtext = pg_sys::MakePerTupleExprContext(estate);
        pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
        if !exec_qual(pred, econtext) {
            return None;
        }
        let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
        let mut isnull = [false; pg_sys::INDEX_MAX_KEYS as usize];
        pg_sys::FormIndexDatum(ii, (*econtext).ecxt_scantuple, estate, values.as_mut_ptr(), isnull.as_mut_ptr());
        Some((0..ncols).map(|i| (values[i], isnull[i])).collect())
    }
}

/// Index AM callback `ambuild` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambuild(heap: pg_sys::Relation, idx: pg_sys::Relation, ii: *mut pg_sys::IndexInfo) -> *mut pg_sys::IndexBuildResult {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        // btree's own build writes the (empty) btree file the planner reads the metapage
        // of; its table scan is ours and builds the index in storage.
        routine();
        if let Some(bt) = BT_AMBUILD.with(|c| c.get()) {
            return bt(heap, idx, ii);
        }
        let n = build(heap, idx, ii);
        let r = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBuildResult>()) as *mut pg_sys::IndexBuildResult;
        (*r).heap_tuples = n;
        (*r).index_tuples = n;
        r
    }
}

/// Index AM callback `ambuildempty` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambuildempty(_idx: pg_sys::Relation) {}

/// Index AM callback `ambulkdelete` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambulkdelete(
    _info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    _callback: pg_sys::IndexBulkDeleteCallback,
    _state: *mut std::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    stats
}

/// Index AM callback `amvacuumcleanup` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amvacuumcleanup(
    _info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    stats
}

/// Refuse (0A000) an index of a Pinax table on a column whose equality is not
/// equality of what Pinax stores for it: Pinax index keys compare encoded bytes,
/// so under a nondeterministic collation ('Hello' = 'HELLO' case-insensitively)
/// a unique key would let equal values in twice and a lookup would miss equal
/// rows. Other types are either encoded by value (numbers, text under
/// deterministic collations, times, intervals by their span, uuid, bytea,
/// citext by its lower-case form) or compared by their bytes.
///
/// # Safety
/// `idx` must be a valid open index relation.
unsafe fn check_key_equality(idx: pg_sys::Relation) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let nkey = (*(*idx).rd_index).indnkeyatts as usize;
        for i in 0..nkey {
            let att = (*(*idx).rd_att).attrs.as_ptr().add(i);
            let coll = *(*idx).rd_indcollation.add(i);
            let name = std::ffi::CStr::from_ptr((*att).attname.data.as_ptr()).to_string_lossy().into_owned();
            if coll != pg_sys::InvalidOid && !pg_sys::get_collation_isdeterministic(coll) {
                error::not_supported(format!(
                    "column \"{name}\" of a Pinax index uses a nondeterministic collation: Pinax index keys compare bytes (use a deterministic collation, or compare with the collation without an index)"
                ));
            }
        }
    }
}
