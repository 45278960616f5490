//! DDL related functionality (`relation_set_new_filenode`,
//! `relation_nontransactional_truncate`, `relation_copy_*`, `relation_vacuum`,
//! `scan_analyze_*`, `index_build_range_scan`, `index_validate_scan`): a
//! relation file node is a storage table (created, adopted from the origin
//! node when replaying DDL, or emptied); ANALYZE samples in the tablets; index
//! builds happen in storage (`am/index/build.rs`).

use super::meta_of;
use super::scan::{next_into_slot, PinaxScanDesc};
use crate::am::index;
use crate::ddl::table_storage_name;
use crate::error::{self, OrRaise};
use crate::guc;
use crate::meta;
use crate::state::{self, CreateOptions};
use crate::violation::OrRaiseFlush;
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_proto::{Request, Sharding, TableOptions};

/// Table AM callback `relation_set_new_filenode` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_set_new_filenode(
    rel: pg_sys::Relation,
    newrnode: *const pg_sys::RelFileNode,
    persistence: std::ffi::c_char,
    freeze_xid: *mut pg_sys::TransactionId,
    minmulti: *mut pg_sys::MultiXactId,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        // Temporary tables are made heap by the utility hook; a temporary relation of
        // this access method is a rewrite's new relation for a Pinax table (REFRESH
        // MATERIALIZED VIEW CONCURRENTLY builds the new contents in one), which lives
        // in storage like any other for its short life.
        if persistence as u8 == pg_sys::RELPERSISTENCE_TEMP {
            let Some((_, view)) = rewritten_table(rel, true) else {
                error::not_supported("temporary tables cannot use the pinax access method; use USING heap");
            };
            // PostgreSQL joins these rows with themselves on ctid, and deletes the
            // view's rows by the ctids a join read them with (tid.rs).
            state::with(|b| {
                b.tids.keep_stable((*rel).rd_id.to_u32());
                b.tids.keep_stable(view);
            });
        }
        *freeze_xid = pg_sys::InvalidTransactionId;
        *minmulti = pg_sys::InvalidTransactionId;
        let srel = pg_sys::RelationCreateStorage(*newrnode, persistence, true);
        pg_sys::smgrclose(srel);
        let db = pg_sys::MyDatabaseId.to_u32();
        let name = table_storage_name(db, (*newrnode).relNode.to_u32());
        let old_node = (*rel).rd_node.relNode.to_u32();
        let old = (old_node != (*newrnode).relNode.to_u32() && old_node != 0)
            .then(|| table_storage_name(db, old_node))
            .or_else(|| rewritten_table(rel, persistence as u8 == pg_sys::RELPERSISTENCE_TEMP).map(|(node, _)| table_storage_name(db, node)));
        // The AM's OID is needed to free this storage if the transaction aborts, and
        // the old file node's at commit (hooks/xact.rs).
        meta::pinax_am_oid();
        if crate::ddl::adopt_or_record(rel, &name) {
            return; // replayed DDL: the origin node's storage table, under our name
        }
        let client = state::with(|b| b.client()).or_raise();
        // A new file node for an existing table (TRUNCATE, rewrite) keeps its
        // sharding and options.
        let (sharding, options) = match old.as_ref().and_then(|o| client.refresh_table(o).ok()) {
            Some(info) => (info.sharding.clone(), info.options),
            None => {
                let opts: CreateOptions = state::with(|b| b.pending_create.take()).unwrap_or_default();
                let sharding = if opts.range {
                    Sharding::Range { split_points: opts.split_at }
                } else {
                    Sharding::Hash { tablets: opts.tablets.unwrap_or_else(guc::tablets) }
                };
                (sharding, TableOptions { auto_split: opts.auto_split.unwrap_or(true) })
            }
        };
        client.call(Request::CreateTable { name, sharding, if_not_exists: true, options }).or_raise();
    }
}

/// For the new relation a table rewrite creates (ALTER TABLE's rewrite, CLUSTER,
/// VACUUM FULL: `make_new_heap` names it `pg_temp_<OID of the table>`, in the
/// table's namespace, and later swaps the two relations' file nodes; REFRESH
/// MATERIALIZED VIEW CONCURRENTLY: the same name, a temporary relation in this
/// session's temporary namespace, when `temp`): the file node of the Pinax
/// relation it replaces (and its OID), whose storage table's sharding the new one keeps.
///
/// # Safety
/// `rel` must be a valid relation.
unsafe fn rewritten_table(rel: pg_sys::Relation, temp: bool) -> Option<(u32, u32)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let name = std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_str().ok()?;
        let oid: u32 = name.strip_prefix("pg_temp_")?.parse().ok()?;
        let old = pg_sys::RelationIdGetRelation(pg_sys::Oid::from(oid));
        if old.is_null() {
            return None;
        }
        let here = if temp { pg_sys::isTempNamespace((*(*rel).rd_rel).relnamespace) } else { (*(*old).rd_rel).relnamespace == (*(*rel).rd_rel).relnamespace };
        // (A table or a materialized view of this access method.)
        let same = here && (*(*old).rd_rel).relam.to_u32() == meta::pinax_am_oid();
        let node = (*old).rd_node.relNode.to_u32();
        pg_sys::RelationClose(old);
        same.then_some((node, oid))
    }
}

/// Table AM callback `relation_nontransactional_truncate` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_nontransactional_truncate(rel: pg_sys::Relation) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if crate::ddl::replaying() {
            return; // the origin node emptied the storage tables
        }
        let m = meta_of(rel);
        let client = state::with(|b| b.client()).or_raise();
        let mut names = vec![m.storage.clone()];
        names.extend(m.secondary.iter().map(|i| i.storage.clone()));
        names.extend(m.inverted.iter().map(|i| i.storage.clone()));
        for name in names {
            let info = client.refresh_table(&name).or_raise();
            let (sharding, options) = (info.sharding.clone(), info.options);
            client.drop_table(&name, true).or_raise();
            client.call(Request::CreateTable { name, sharding, if_not_exists: true, options }).or_raise();
        }
    }
}

/// Table AM callback `relation_copy_data` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_copy_data(_rel: pg_sys::Relation, _newrnode: *const pg_sys::RelFileNode) {
    // The utility hook moves Pinax tables itself, keeping their file node (which
    // names their storage: hooks/tablespace.rs); a path it does not see would give
    // the table new, empty storage.
    error::not_supported("this way of moving a Pinax table to another tablespace is not supported");
}

/// Table AM callback `relation_copy_for_cluster` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_copy_for_cluster(
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

/// Table AM callback `relation_vacuum` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_vacuum(_rel: pg_sys::Relation, _params: *mut pg_sys::VacuumParams, _bstrategy: pg_sys::BufferAccessStrategy) {
    // Old versions are removed by the storage's compaction filter.
}

/// Table AM callback `scan_analyze_next_block` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_analyze_next_block(
    scan: pg_sys::TableScanDesc,
    _blockno: pg_sys::BlockNumber,
    _bstrategy: pg_sys::BufferAccessStrategy,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
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
}

/// Every how many rows ANALYZE's sample takes one, and how many rows it aims at:
/// about twice the rows ANALYZE keeps (300 x the largest statistics target of the
/// table's columns), judged by the row count of the last ANALYZE. 1 (every row)
/// when the table has none yet or is small.
///
/// # Safety
/// `rel` must be a valid open relation.
unsafe fn analyze_sample_every(rel: pg_sys::Relation) -> (u32, u64) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// Table AM callback `scan_analyze_next_tuple` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_analyze_next_tuple(
    scan: pg_sys::TableScanDesc,
    _oldest_xmin: pg_sys::TransactionId,
    liverows: *mut f64,
    _deadrows: *mut f64,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let d = scan as *mut PinaxScanDesc;
        let st = &mut *(*d).state;
        if next_into_slot(&mut st.pager, st.relid, slot) {
            *liverows += 1.0 + std::mem::take(&mut st.analyze_unshipped) as f64;
            true
        } else {
            false
        }
    }
}

/// Table AM callback `index_build_range_scan` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_build_range_scan(
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
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        // Pinax builds the index in storage itself; the btree code calling us (when the
        // index was not yet switched to the Pinax routine) receives no tuples and leaves
        // an empty btree file behind. GIN and hash indexes are stored as inverted
        // indexes (their methods' own builds leave empty files too); indexes of
        // other methods are kept, not built.
        if (*(*index_rel).rd_rel).relam != pg_sys::BTREE_AM_OID {
            return match index::inverted::describe(index_rel) {
                Ok(im) => index::inverted::build(table_rel, index_rel, index_info, im),
                Err(why) => index::other::build(index_rel, index_info, &why),
            };
        }
        index::build::build(table_rel, index_rel, index_info)
    }
}

/// Table AM callback `index_validate_scan` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_validate_scan(
    _table_rel: pg_sys::Relation,
    _index_rel: pg_sys::Relation,
    _index_info: *mut pg_sys::IndexInfo,
    _snapshot: pg_sys::Snapshot,
    _state: *mut pg_sys::ValidateIndexState,
) {
    error::not_supported("CREATE INDEX CONCURRENTLY is not supported on Pinax tables");
}
