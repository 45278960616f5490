//! Indexes of Pinax tables: btree in the catalog, Pinax in storage.
//!
//! PostgreSQL 15 hard-codes btree for ON CONFLICT arbiters, foreign keys, unique
//! indexes of partitioned tables and more, so an index on a Pinax table stays a btree
//! index in the catalog (btree operator classes, `relam = btree`). Its *behaviour* is
//! Pinax's: before PostgreSQL uses an index of a Pinax table in a transaction, the
//! table AM (which always runs first: slot creation, insert, fetch, planning) opens
//! the index, holds a reference to its relcache entry until the transaction ends
//! (so the entry cannot be rebuilt under us), and points its `rd_indam` at the Pinax
//! routine below. Heap tables' btree indexes are never touched. The Pinax routine is
//! btree's own with the storage callbacks replaced; flags and cost estimation stay
//! btree's, and the planner hook (hooks/relation_info.rs) corrects what differs
//! (no index-only scans, no mark/restore, no order for hash-sharded keys).
//!
//! The primary key is the row key: its "index" stores nothing, and a lookup through
//! it is one read of the table. Secondary indexes are storage tables of their own,
//! key → row key, hash-sharded on their first column. Uniqueness is enforced by the
//! storage (insert-if-absent of a key without the row key).

use crate::error::{self, OrRaise};
use crate::keys::{build_key, decode_key, prefix_end, KeyColumn, KeyKind};
use crate::meta::{self, enforced_unique, index_meta, pk_key, secondary_key, IndexMeta, TableMeta};
use crate::scan::{snapshot_cid, Pager};
use crate::state;
use crate::tid::Origin;
use crate::tuple::store_tuple;
use crate::violation::{self, OrRaiseFlush};
use crate::guc;
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_proto::{Request, Sharding, WriteOp};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

thread_local! {
    static ROUTINE: RefCell<*mut pg_sys::IndexAmRoutine> = const { RefCell::new(std::ptr::null_mut()) };
    /// Index relcache entries held (and switched) for this transaction.
    static HELD: RefCell<Vec<pg_sys::Relation>> = const { RefCell::new(Vec::new()) };
    /// Tables whose indexes are switched this transaction (by metadata identity).
    static PATCHED: RefCell<HashMap<u32, u64>> = RefCell::new(HashMap::new());
    /// Depth of utility commands running: references are not held meanwhile.
    static UTILITY_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    static BT_AMBUILD: std::cell::Cell<pg_sys::ambuild_function> = const { std::cell::Cell::new(None) };
}

/// While alive, index references are not held (DDL refuses relations open in the
/// session): indexes are switched to Pinax without keeping a reference.
pub struct UtilityMode;
impl UtilityMode {
    pub fn enter() -> UtilityMode {
        UTILITY_DEPTH.with(|d| d.set(d.get() + 1));
        UtilityMode
    }
}
impl Drop for UtilityMode {
    fn drop(&mut self) {
        UTILITY_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        // Indexes switched without a reference may be rebuilt later: check again.
        if !in_utility() {
            PATCHED.with(|p| p.borrow_mut().clear());
        }
    }
}

fn in_utility() -> bool {
    UTILITY_DEPTH.with(|d| d.get() > 0)
}

/// The Pinax index routine (btree's, with storage callbacks replaced).
pub fn routine() -> *mut pg_sys::IndexAmRoutine {
    let r = ROUTINE.with(|r| *r.borrow());
    if !r.is_null() {
        return r;
    }
    // SAFETY: btree's routine is a plain struct; we copy it into memory we own.
    let r = unsafe {
        let bt = pg_sys::GetIndexAmRoutineByAmId(pg_sys::BTREE_AM_OID, false);
        let mut mine: pg_sys::IndexAmRoutine = *bt;
        BT_AMBUILD.with(|c| c.set(mine.ambuild));
        mine.ambuild = Some(ambuild);
        mine.ambuildempty = Some(ambuildempty);
        mine.aminsert = Some(aminsert);
        mine.ambulkdelete = Some(ambulkdelete);
        mine.amvacuumcleanup = Some(amvacuumcleanup);
        mine.amcanreturn = None;
        mine.ambeginscan = Some(ambeginscan);
        mine.amrescan = Some(amrescan);
        mine.amgettuple = Some(amgettuple);
        mine.amgetbitmap = None;
        mine.amendscan = Some(amendscan);
        mine.ammarkpos = None;
        mine.amrestrpos = None;
        mine.amestimateparallelscan = None;
        mine.aminitparallelscan = None;
        mine.amparallelrescan = None;
        mine.amcanparallel = false;
        Box::into_raw(Box::new(mine))
    };
    ROUTINE.with(|c| *c.borrow_mut() = r);
    r
}

/// Restores `CurrentResourceOwner` on drop (also when an error unwinds).
struct OwnerGuard(pg_sys::ResourceOwner);
impl Drop for OwnerGuard {
    fn drop(&mut self) {
        // SAFETY: restoring the value saved in `hold`.
        unsafe { pg_sys::CurrentResourceOwner = self.0 };
    }
}

/// Hold index `oid` for the rest of the transaction and switch it to Pinax.
unsafe fn hold(oid: pg_sys::Oid) {
    if HELD.with(|h| h.borrow().iter().any(|r| (**r).rd_id == oid)) {
        return;
    }
    if in_utility() {
        let idx = pg_sys::index_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        (*idx).rd_indam = routine();
        pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
        return;
    }
    let _g = OwnerGuard(pg_sys::CurrentResourceOwner);
    pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
    let idx = pg_sys::index_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    (*idx).rd_indam = routine();
    HELD.with(|h| h.borrow_mut().push(idx));
}

/// Switch an index relation PostgreSQL just handed us (index build) to Pinax.
///
/// # Safety
/// `idx` must be a valid open index relation.
pub unsafe fn hold_rel(idx: pg_sys::Relation) {
    if in_utility() || HELD.with(|h| h.borrow().contains(&idx)) {
        (*idx).rd_indam = routine();
        return;
    }
    let _g = OwnerGuard(pg_sys::CurrentResourceOwner);
    pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
    pg_sys::RelationIncrementReferenceCount(idx);
    (*idx).rd_indam = routine();
    HELD.with(|h| h.borrow_mut().push(idx));
}

/// Make sure every index of Pinax table `rel` uses the Pinax routine in this
/// transaction.
///
/// # Safety
/// `rel` must be a valid open Pinax table; `m` its metadata.
pub unsafe fn ensure_patched(rel: pg_sys::Relation, m: &Rc<TableMeta>) {
    let relid = (*rel).rd_id.to_u32();
    let id = m.generation;
    if PATCHED.with(|p| p.borrow().get(&relid) == Some(&id)) {
        return;
    }
    if let Some(pk) = &m.pk {
        hold(pg_sys::Oid::from(pk.oid));
    }
    for im in &m.secondary {
        hold(pg_sys::Oid::from(im.oid));
    }
    PATCHED.with(|p| p.borrow_mut().insert(relid, id));
}

/// Release the held index entries (PRE_COMMIT / PRE_PREPARE).
pub fn release_held() {
    let held = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
    close_held(held);
}

/// Release the held entries of indexes created in subtransaction `subid`, which is
/// aborting: PostgreSQL then removes their relcache entries, which must not be
/// referenced any more.
pub fn release_created_in(subid: u32) {
    let mut gone = Vec::new();
    HELD.with(|h| {
        h.borrow_mut().retain(|r| {
            // SAFETY: held entries stay valid while referenced.
            let created_here = unsafe { (**r).rd_createSubid == subid };
            if created_here {
                gone.push(*r);
            }
            !created_here
        })
    });
    if !gone.is_empty() {
        close_held(gone);
    }
}

/// Drop references taken by `hold`/`hold_rel` (they belong to the top transaction's
/// resource owner); the tables' indexes are switched again on next use.
fn close_held(entries: Vec<pg_sys::Relation>) {
    // SAFETY: reading and restoring backend globals.
    let _g = OwnerGuard(unsafe { pg_sys::CurrentResourceOwner });
    unsafe {
        if !pg_sys::TopTransactionResourceOwner.is_null() {
            pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
        }
    }
    for idx in entries {
        // SAFETY: each entry was opened or referenced by `hold`/`hold_rel`.
        unsafe { pg_sys::RelationClose(idx) };
    }
    PATCHED.with(|p| p.borrow_mut().clear());
}

/// Forget the held entries without closing them (abort: the resource owner does).
pub fn forget_held() {
    HELD.with(|h| h.borrow_mut().clear());
    PATCHED.with(|p| p.borrow_mut().clear());
}

/// Metadata of index `idx` of Pinax table `heap`.
unsafe fn meta_for(heap: pg_sys::Relation, idx: pg_sys::Relation) -> (Rc<TableMeta>, Rc<IndexMeta>) {
    let m = meta::table_meta(heap).or_raise();
    let oid = (*idx).rd_id.to_u32();
    let im = m.pk.iter().chain(m.secondary.iter()).find(|i| i.oid == oid).cloned();
    let im = match im {
        Some(i) => i,
        None => Rc::new(index_meta(idx, m.hashed)),
    };
    (m, im)
}

/// `ExecQual` (an inline function in C).
///
/// # Safety
/// A valid (or null) expression state and expression context.
pub unsafe fn exec_qual(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
    if state.is_null() {
        return true;
    }
    let old = pg_sys::CurrentMemoryContext;
    pg_sys::CurrentMemoryContext = (*econtext).ecxt_per_tuple_memory;
    let mut isnull = false;
    let d = ((*state).evalfunc.expect("ExprState without evalfunc"))(state, econtext, &mut isnull);
    pg_sys::CurrentMemoryContext = old;
    !isnull && d.value() != 0
}

/// Build index `idx` of Pinax table `heap` in storage; returns the number of rows.
///
/// # Safety
/// Valid open relations and index info, inside a transaction.
pub unsafe fn build(heap: pg_sys::Relation, idx: pg_sys::Relation, ii: *mut pg_sys::IndexInfo) -> f64 {
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
                let client = state::with(|b| b.client()).or_raise();
                client.call(Request::CreateTable { name: im.storage.clone(), sharding: Sharding::Hash { tablets: guc::tablets() }, if_not_exists: true }).or_raise();
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
    if im.is_pk {
        // Rows stored under generated ids (or another primary key) move to this key.
        while let Some((key, value)) = pager.next_row().or_raise() {
            let value = crate::tuple::merged((*heap).rd_att, value);
            store_tuple(slot, &value, pg_sys::ItemPointerData::default(), pg_sys::Oid::from(relid), None);
            crate::tuple::slot_getallattrs(slot);
            let nk = pk_key(&im, slot);
            if nk != key {
                if !m.secondary.is_empty() {
                    error::not_supported("adding a primary key to a populated Pinax table that has secondary indexes is not supported");
                }
                state::with(|b| {
                    b.push(cid, &m.storage, WriteOp::delete(key))?;
                    b.push(cid, &m.storage, WriteOp::insert(nk, value))
                })
                .or_raise();
            }
            n += 1.0;
        }
        meta::register_owner(&m.storage, im.oid);
    } else {
        crate::ddl::adopt_or_record(idx, &im.storage);
        let client = state::with(|b| b.client()).or_raise();
        client.call(Request::CreateTable { name: im.storage.clone(), sharding: Sharding::Hash { tablets: guc::tablets() }, if_not_exists: true }).or_raise();
        meta::pinax_am_oid(); // for dropping this storage if the transaction aborts (hooks/xact.rs)
        if im.unique {
            meta::register_owner(&im.storage, im.oid);
        }
        let estate = pg_sys::CreateExecutorState();
        let econtext = pg_sys::MakePerTupleExprContext(estate);
        (*econtext).ecxt_scantuple = slot;
        let pred = if (*ii).ii_Predicate.is_null() { std::ptr::null_mut() } else { pg_sys::ExecPrepareQual((*ii).ii_Predicate, estate) };
        let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
        let mut isnull = [false; pg_sys::INDEX_MAX_KEYS as usize];
        while let Some((key, value)) = pager.next_row().or_raise() {
            pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
            let value = crate::tuple::merged((*heap).rd_att, value);
            store_tuple(slot, &value, pg_sys::ItemPointerData::default(), pg_sys::Oid::from(relid), None);
            if !exec_qual(pred, econtext) {
                continue;
            }
            pg_sys::FormIndexDatum(ii, slot, estate, values.as_mut_ptr(), isnull.as_mut_ptr());
            let vals: Vec<(pg_sys::Datum, bool)> = (0..im.cols.len()).map(|i| (values[i], isnull[i])).collect();
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

#[pg_guard]
unsafe extern "C-unwind" fn ambuild(heap: pg_sys::Relation, idx: pg_sys::Relation, ii: *mut pg_sys::IndexInfo) -> *mut pg_sys::IndexBuildResult {
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

#[pg_guard]
unsafe extern "C-unwind" fn ambuildempty(_idx: pg_sys::Relation) {}

#[pg_guard]
unsafe extern "C-unwind" fn aminsert(
    idx: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    heap_tid: pg_sys::ItemPointer,
    heap: pg_sys::Relation,
    check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _ii: *mut pg_sys::IndexInfo,
) -> bool {
    let (m, im) = meta_for(heap, idx);
    if im.is_pk {
        // The row key: uniqueness was enforced by the row's own insert, except for a
        // speculative insertion, which reports a conflict here.
        let conflict = state::with(|b| b.spec.as_ref().and_then(|s| s.conflict.clone()));
        return match conflict {
            None => true,
            Some(_) if check_unique == pg_sys::IndexUniqueCheck::UNIQUE_CHECK_PARTIAL => false,
            Some(key) => violation::raise(state::FlushError {
                table: m.storage.clone(),
                error: pinax_proto::RpcError::new(pinax_common::ErrorCode::DuplicateKey, "duplicate key").with_key(key).into(),
            }),
        };
    }
    let relid = m.relid;
    let Some(row_key) = state::with(|b| b.tids.get(relid, &*heap_tid).map(|r| r.key.to_vec())) else {
        error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pinax: index insert for a row this transaction did not write", None);
    };
    let vals: Vec<(pg_sys::Datum, bool)> = (0..im.cols.len()).map(|i| (*values.add(i), *isnull.add(i))).collect();
    let key = secondary_key(&im, std::ptr::null_mut(), Some(&vals), &row_key);
    let skip = state::with(|b| b.unchanged.iter().any(|(o, k)| *o == im.oid && *k == key));
    if skip {
        return true;
    }
    let enforced = enforced_unique(&im, &vals);
    let cid = state::with(|b| b.last_cid);
    match check_unique {
        pg_sys::IndexUniqueCheck::UNIQUE_CHECK_PARTIAL if enforced => {
            // ON CONFLICT arbiter or deferrable constraint: report, do not raise.
            let res = state::with(|b| {
                b.flush()?;
                b.push(cid, &im.storage, WriteOp::insert(key.clone(), row_key.clone()))?;
                b.flush()
            });
            match res {
                Ok(()) => {
                    state::with(|b| {
                        if let Some(s) = &mut b.spec {
                            s.written.push((im.storage.clone(), key));
                        }
                    });
                    true
                }
                Err(e) if e.error.code() == pinax_common::ErrorCode::DuplicateKey && e.table == im.storage => {
                    state::with(|b| {
                        if let Some(s) = &mut b.spec {
                            s.index_conflict = Some(key);
                        }
                    });
                    false
                }
                Err(e) => violation::raise(e),
            }
        }
        pg_sys::IndexUniqueCheck::UNIQUE_CHECK_EXISTING => {
            // Deferred recheck: the entry must be ours or absent.
            let mut pager = Pager::new(im.storage.clone(), Vec::new(), None, false, u32::MAX);
            let existing = pager.get(&im.storage, &key).or_raise();
            match existing {
                Some(owner) if owner != row_key => {
                    violation::raise(state::FlushError {
                        table: im.storage.clone(),
                        error: pinax_proto::RpcError::new(pinax_common::ErrorCode::DuplicateKey, "duplicate key").with_key(key).into(),
                    });
                }
                Some(_) => true,
                None => {
                    state::with(|b| b.push(cid, &im.storage, WriteOp::put(key, row_key))).or_raise();
                    true
                }
            }
        }
        _ => {
            let op = if enforced { WriteOp::insert(key.clone(), row_key) } else { WriteOp::put(key.clone(), row_key) };
            state::with(|b| {
                if let Some(s) = &mut b.spec {
                    s.written.push((im.storage.clone(), key));
                }
                b.push(cid, &im.storage, op)
            })
            .or_raise();
            true
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn ambulkdelete(
    _info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    _callback: pg_sys::IndexBulkDeleteCallback,
    _state: *mut std::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    stats
}

#[pg_guard]
unsafe extern "C-unwind" fn amvacuumcleanup(_info: *mut pg_sys::IndexVacuumInfo, stats: *mut pg_sys::IndexBulkDeleteResult) -> *mut pg_sys::IndexBulkDeleteResult {
    stats
}

/// A range of keys to walk.
type Range = (Vec<u8>, Option<Vec<u8>>);

struct IndexScanState {
    pager: Option<Pager>,
    /// Entries counted in storage not yet returned (count-only index-only scans).
    pending: u64,
    index: Rc<IndexMeta>,
    ranges: VecDeque<Range>,
    started: bool,
    reverse: bool,
    table_storage: String,
    index_storage: String,
    is_pk: bool,
    relid: u32,
    curcid: u32,
    /// Every range is one primary-key row (all key columns equal).
    point: bool,
    /// A dirty snapshot's look-up: the newest committed rows (`Pager::latest`).
    latest: bool,
    /// A dirty snapshot's look-up of exactly one unique key (`Ranges::exact`):
    /// its entries are returned without asking for a recheck.
    exact_conflict_check: bool,
}

#[repr(C)]
struct Opaque {
    cb: pg_sys::MemoryContextCallback,
    state: *mut IndexScanState,
    /// The memory context the scan lives in.
    scan_cxt: pg_sys::MemoryContext,
    /// Memory of the index tuple handed out (reset for each one); made on first use.
    tuple_cxt: pg_sys::MemoryContext,
    /// Slot to deform table rows in (primary-key index-only scans); made on first use.
    row_slot: *mut pg_sys::TupleTableSlot,
    /// Set by the Pinax index-only scan node (am/index_only.rs): it never uses the
    /// TIDs, so rows are neither fetched nor registered.
    no_tids: bool,
    /// Bit `i`: index column `i` must be returned (the others may be left NULL).
    needed: u64,
    /// The all-NULL tuple returned when no column is needed, made once.
    empty_tuple: pg_sys::HeapTuple,
}

#[pg_guard]
unsafe extern "C-unwind" fn free_opaque(arg: *mut std::ffi::c_void) {
    let o = arg as *mut Opaque;
    if !(*o).state.is_null() {
        drop(Box::from_raw((*o).state));
        (*o).state = std::ptr::null_mut();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn ambeginscan(idx: pg_sys::Relation, nkeys: i32, norderbys: i32) -> pg_sys::IndexScanDesc {
    let scan = pg_sys::RelationGetIndexScan(idx, nkeys, norderbys);
    let o = pg_sys::palloc0(std::mem::size_of::<Opaque>()) as *mut Opaque;
    (*o).cb.func = Some(free_opaque);
    (*o).cb.arg = o.cast();
    (*o).scan_cxt = pg_sys::CurrentMemoryContext;
    (*o).needed = u64::MAX;
    pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*o).cb);
    (*scan).opaque = o.cast();
    scan
}

#[pg_guard]
unsafe extern "C-unwind" fn amrescan(scan: pg_sys::IndexScanDesc, keys: pg_sys::ScanKey, nkeys: i32, _orderbys: pg_sys::ScanKey, _norderbys: i32) {
    if !keys.is_null() && nkeys > 0 {
        std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
    }
    let o = (*scan).opaque as *mut Opaque;
    free_opaque(o.cast());
}

#[pg_guard]
unsafe extern "C-unwind" fn amendscan(scan: pg_sys::IndexScanDesc) {
    free_opaque((*scan).opaque);
}

const SK_ISNULL: i32 = 0x0001;
const SK_ROW_HEADER: i32 = 0x0004;
const SK_SEARCHARRAY: i32 = 0x0020;
const SK_SEARCHNULL: i32 = 0x0040;
const SK_SEARCHNOTNULL: i32 = 0x0080;
const INT2OID: u32 = 21;
const INT4OID: u32 = 23;
const INT8OID: u32 = 20;
const TEXTOID: u32 = 25;
const VARCHAROID: u32 = 1043;

/// A scan key's argument as a datum of the column's own type, if it can be.
unsafe fn same_type_arg(col: &KeyColumn, sk: &pg_sys::ScanKeyData, arg: pg_sys::Datum) -> Option<pg_sys::Datum> {
    let sub = sk.sk_subtype.to_u32();
    if sub == 0 || sub == col.typid {
        return Some(arg);
    }
    // text and varchar share their representation and btree operators (a varchar
    // key compared with a text value: `varchar_col = 'a' || x`).
    if col.kind == KeyKind::Text && matches!(sub, TEXTOID | VARCHAROID) {
        return Some(arg);
    }
    let int_kind = |k: KeyKind| matches!(k, KeyKind::Int2 | KeyKind::Int4 | KeyKind::Int8);
    if int_kind(col.kind) && matches!(sub, INT2OID | INT4OID | INT8OID) {
        let v: i64 = match sub {
            INT2OID => arg.value() as i16 as i64,
            INT4OID => arg.value() as i32 as i64,
            _ => arg.value() as i64,
        };
        let fits = match col.kind {
            KeyKind::Int2 => i16::try_from(v).is_ok(),
            KeyKind::Int4 => i32::try_from(v).is_ok(),
            _ => true,
        };
        return fits.then(|| pg_sys::Datum::from(v));
    }
    None
}

/// Elements of an array datum (for `col = ANY(array)`).
unsafe fn array_elements(arr: pg_sys::Datum) -> Vec<(pg_sys::Datum, bool)> {
    let a = pg_sys::pg_detoast_datum(arr.cast_mut_ptr()) as *mut pg_sys::ArrayType;
    let elemtype = (*a).elemtype;
    let mut typlen: i16 = 0;
    let mut byval = false;
    let mut align: std::ffi::c_char = 0;
    pg_sys::get_typlenbyvalalign(elemtype, &mut typlen, &mut byval, &mut align);
    let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
    let mut nulls: *mut bool = std::ptr::null_mut();
    let mut n: i32 = 0;
    pg_sys::deconstruct_array(a, elemtype, typlen as i32, byval, align, &mut elems, &mut nulls, &mut n);
    (0..n as usize).map(|i| (*elems.add(i), !nulls.is_null() && *nulls.add(i))).collect()
}

/// The key ranges of a scan (`ranges`).
struct Ranges {
    /// Ranges that cover every entry the scan keys can match (the executor
    /// rechecks the quals, so a superset is correct).
    ranges: Vec<Range>,
    /// Each range is one primary key (every key column of the primary key given
    /// by equality): a point lookup.
    point: bool,
    /// One range, holding exactly the entries Pinax's uniqueness check would
    /// find for these key values: a unique, enforced key (`enforced_unique`)
    /// every column of which is given by one equality or `IS NULL` key, and no
    /// other key. A conflict check (`check_exclusion_or_unique_constraint`)
    /// needs no recheck of such a scan, and must not have one: it treats an
    /// entry holding a NULL as no match (it assumes strict operators), where a
    /// NULLS NOT DISTINCT index holds NULLs to be equal, and the speculative
    /// insertion, finding the conflict its check did not, would retry forever.
    exact: bool,
}

/// The key ranges of index `im` that scan `keys` reads.
unsafe fn ranges(im: &IndexMeta, keys: &[pg_sys::ScanKeyData]) -> Ranges {
    let ncols = im.cols.len();
    // Per column: candidate equality values (several for `= ANY`), each a datum
    // and whether it is NULL (`IS NULL`).
    let mut eq: Vec<Option<Vec<(pg_sys::Datum, bool)>>> = vec![None; ncols];
    // Every key is an equality on a column of its own or an `IS NULL`.
    let mut all_eq = true;
    let mut lower: Vec<Option<(pg_sys::Datum, bool)>> = vec![None; ncols];
    let mut upper: Vec<Option<(pg_sys::Datum, bool)>> = vec![None; ncols];
    for sk in keys {
        let att = sk.sk_attno as usize;
        if att == 0 || att > ncols {
            all_eq = false;
            continue;
        }
        let col = &im.cols[att - 1];
        let flags = sk.sk_flags;
        if flags & (SK_ISNULL | SK_ROW_HEADER | SK_SEARCHNULL | SK_SEARCHNOTNULL) != 0 {
            if flags & SK_ISNULL != 0 && flags & (SK_SEARCHNULL | SK_SEARCHNOTNULL) == 0 {
                // `col op NULL` matches nothing.
                return Ranges { ranges: Vec::new(), point: false, exact: false };
            }
            if flags & SK_SEARCHNULL != 0 && flags & SK_ROW_HEADER == 0 && eq[att - 1].is_none() {
                // `col IS NULL`: NULL's own encoding.
                eq[att - 1] = Some(vec![(pg_sys::Datum::from(0usize), true)]);
            } else {
                all_eq = false;
            }
            continue;
        }
        let strategy = sk.sk_strategy as u32;
        all_eq &= strategy == pg_sys::BTEqualStrategyNumber && flags & SK_SEARCHARRAY == 0 && eq[att - 1].is_none();
        if flags & SK_SEARCHARRAY != 0 {
            if strategy == pg_sys::BTEqualStrategyNumber && eq[att - 1].is_none() {
                let mut vals = Vec::new();
                let mut ok = true;
                for (v, n) in array_elements(sk.sk_argument) {
                    if n {
                        continue;
                    }
                    match same_type_arg(col, sk, v) {
                        Some(d) => vals.push((d, false)),
                        None => ok = false,
                    }
                }
                if ok {
                    eq[att - 1] = Some(vals);
                }
            }
            continue;
        }
        let Some(arg) = same_type_arg(col, sk, sk.sk_argument) else {
            all_eq = false;
            continue;
        };
        match strategy {
            s if s == pg_sys::BTEqualStrategyNumber => eq[att - 1] = Some(vec![(arg, false)]),
            s if s == pg_sys::BTGreaterEqualStrategyNumber => lower[att - 1] = Some((arg, true)),
            s if s == pg_sys::BTGreaterStrategyNumber => lower[att - 1] = Some((arg, false)),
            s if s == pg_sys::BTLessStrategyNumber => upper[att - 1] = Some((arg, false)),
            s if s == pg_sys::BTLessEqualStrategyNumber => upper[att - 1] = Some((arg, true)),
            _ => {}
        }
    }
    // Leading equality columns form prefixes (one per combination of ANY values).
    let mut prefixes: Vec<Vec<(pg_sys::Datum, bool)>> = vec![Vec::new()];
    let mut k = 0;
    while k < ncols {
        let Some(vals) = &eq[k] else { break };
        if prefixes.len() * vals.len() > 10_000 {
            break;
        }
        let mut next = Vec::with_capacity(prefixes.len() * vals.len());
        for p in &prefixes {
            for v in vals {
                let mut q = p.clone();
                q.push(*v);
                next.push(q);
            }
        }
        prefixes = next;
        k += 1;
    }
    if k == 0 {
        if im.hashed {
            return Ranges { ranges: vec![(Vec::new(), None)], point: false, exact: false };
        }
        prefixes = vec![Vec::new()];
    }
    let point = im.is_pk && k == ncols;
    let exact = all_eq && k == ncols && prefixes.len() == 1 && enforced_unique(im, &prefixes[0]);
    let mut out: Vec<Range> = Vec::with_capacity(prefixes.len());
    for p in prefixes {
        let prefix = if p.is_empty() { Vec::new() } else { build_key(&im.cols[..k], &p, im.hashed) };
        let mut start = prefix.clone();
        let mut end = if prefix.is_empty() { None } else { prefix_end(&prefix) };
        // A bound on the next column narrows an ordered, ascending key.
        if !im.hashed && k < ncols {
            let col = &im.cols[k];
            if col.ordered && col.order.order == pinax_codec::datum::SortOrder::Asc {
                if let Some((v, inclusive)) = lower[k] {
                    let mut s = prefix.clone();
                    col.encode(&mut s, v, false);
                    // `> v`: past every key whose column is v (the recheck would
                    // drop them, after a read that may not have been needed). An
                    // ordered column's encoding is prefix-free (fixed width, escaped
                    // bytes ending in a terminator, or numeric digit pairs whose last
                    // one is marked: pinax_codec::datum), so those keys are exactly
                    // the ones starting with `s`, and a key whose column is above
                    // v differs from `s` at a byte inside it: it is at or after
                    // `prefix_end(&s)`.
                    start = if inclusive { s } else { prefix_end(&s).unwrap_or(s) };
                }
                if let Some((v, inclusive)) = upper[k] {
                    let mut e = prefix.clone();
                    col.encode(&mut e, v, false);
                    end = if inclusive { prefix_end(&e) } else { Some(e) };
                }
            }
        }
        out.push((start, end));
    }
    out.sort();
    out.dedup();
    Ranges { ranges: out, point, exact }
}

/// The walk of `range` for scan `scan` (state `st`).
unsafe fn range_pager(scan: pg_sys::IndexScanDesc, st: &IndexScanState, (start, end): Range) -> Pager {
    let mut pager = Pager::new(st.index_storage.clone(), start, end, st.reverse, st.curcid);
    pager.point = st.point;
    pager.latest = st.latest;
    pager.under_limit_of((*(*scan).indexRelation).rd_id.to_u32());
    pager
}

/// Whether the scan is an index-only scan reading no column (count(*)): the
/// tablets count the entries of each range.
unsafe fn counts_only(o: *const Opaque, st: &IndexScanState) -> bool {
    (*o).no_tids && (*o).needed == 0 && !st.reverse
}

/// For an index-only scan reading no column (count(*)), begun and not yet
/// read: how many entries it has, counted in storage, at once (it returns none
/// after this). None (nothing read) for any other scan.
///
/// # Safety
/// `scan` must be a scan of a Pinax index begun by `index_beginscan` and
/// switched to index-only (`set_index_only`), its keys set.
pub unsafe fn take_count(scan: pg_sys::IndexScanDesc) -> Option<u64> {
    let o = (*scan).opaque as *mut Opaque;
    if !((*o).no_tids && (*o).needed == 0) {
        return None;
    }
    // The first entry sets the scan up (forward, as counting scans are).
    if !amgettuple(scan, pg_sys::ScanDirection::ForwardScanDirection) {
        return Some(0);
    }
    let st = &mut *(*o).state;
    debug_assert!(counts_only(o, st), "a forward index-only scan reading no column counts");
    let mut n = 1 + std::mem::take(&mut st.pending);
    st.pager = None;
    while let Some(range) = st.ranges.pop_front() {
        n += range_pager(scan, st, range).next_count().or_raise().unwrap_or(0);
    }
    Some(n)
}

#[pg_guard]
unsafe extern "C-unwind" fn amgettuple(scan: pg_sys::IndexScanDesc, direction: pg_sys::ScanDirection::Type) -> bool {
    let o = (*scan).opaque as *mut Opaque;
    let reverse = direction == pg_sys::ScanDirection::BackwardScanDirection;
    if (*o).state.is_null() {
        let heap = (*scan).heapRelation;
        let (m, im) = meta_for(heap, (*scan).indexRelation);
        let snapshot = (*scan).xs_snapshot;
        let dirty = !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_DIRTY;
        if im.is_pk && dirty && crate::insert_at_once::pending(m.relid) {
            // ON CONFLICT's look-up before a row written at once: its write is the
            // check (a conflict there makes PostgreSQL look again, for real).
            return false;
        }
        let keys: &[pg_sys::ScanKeyData] = if (*scan).keyData.is_null() || (*scan).numberOfKeys <= 0 {
            &[]
        } else {
            std::slice::from_raw_parts((*scan).keyData, (*scan).numberOfKeys as usize)
        };
        let Ranges { ranges: found, point, exact } = ranges(&im, keys);
        let mut rs: VecDeque<Range> = found.into();
        if reverse {
            rs = rs.into_iter().rev().collect();
        }
        if state::serializable_locking() {
            // A SERIALIZABLE read locks what it reads: the rows of a primary-key
            // lookup by every key column (found or not), else the ranges scanned
            // (rows fetched through a secondary index are locked as they come).
            let storage = if im.is_pk { &m.storage } else { &im.storage };
            for (start, end) in &rs {
                let res = if point { state::with(|b| b.lock_read_row(storage, start)) } else { state::with(|b| b.lock_ranges(storage, start, end.as_deref())) };
                res.or_raise();
            }
        }
        let st = IndexScanState {
            pager: None,
            pending: 0,
            index: im.clone(),
            ranges: rs,
            started: false,
            reverse,
            table_storage: m.storage.clone(),
            index_storage: if im.is_pk { m.storage.clone() } else { im.storage.clone() },
            is_pk: im.is_pk,
            relid: m.relid,
            curcid: snapshot_cid((*scan).xs_snapshot),
            latest: dirty,
            point,
            exact_conflict_check: dirty && exact,
        };
        (*o).state = Box::into_raw(Box::new(st));
    }
    let st = &mut *(*o).state;
    if st.started && st.reverse != reverse {
        error::not_supported("changing scan direction in an index scan of a Pinax table is not supported");
    }
    st.started = true;
    loop {
        if st.pager.is_none() {
            let Some(range) = st.ranges.pop_front() else { return false };
            st.pager = Some(range_pager(scan, st, range));
        }
        if counts_only(o, st) {
            // An index-only scan reading no column (count(*)): the tablets count the
            // entries, and as many all-NULL tuples are returned.
            if st.pending == 0 {
                match st.pager.as_mut().expect("pager").next_count().or_raise() {
                    Some(n) => st.pending = n,
                    None => {
                        st.pager = None;
                        continue;
                    }
                }
                if st.pending == 0 {
                    continue;
                }
            }
            st.pending -= 1;
            form_index_tuple(scan, o, &st.index, st.relid, &[], &[]);
            (*scan).xs_heaptid = NO_TID;
            (*scan).xs_recheck = false;
            return true;
        }
        let pager = st.pager.as_mut().expect("pager");
        let Some((key, value)) = pager.next_row().or_raise() else {
            st.pager = None;
            continue;
        };
        if (*scan).xs_want_itup {
            form_index_tuple(scan, o, &st.index, st.relid, &key, &value);
            if (*o).no_tids {
                // An index entry is written and deleted with its row, by the same
                // command: the entry this read point sees names a row it sees.
                (*scan).xs_heaptid = NO_TID;
                (*scan).xs_recheck = true;
                return true;
            }
        }
        let (row_key, row) = if st.is_pk {
            (key, crate::tuple::merged((*(*scan).heapRelation).rd_att, value))
        } else {
            match pager.get(&st.table_storage, &value).or_raise() {
                Some(row) => {
                    let row = crate::tuple::merged((*(*scan).heapRelation).rd_att, row);
                    if state::serializable_locking() {
                        state::with(|b| b.lock_read_row(&st.table_storage, &value)).or_raise();
                    }
                    (value, row)
                }
                None => continue, // entry of a row this read point does not see
            }
        };
        let tid = if st.latest {
            state::with(|b| {
                match b.excl_row_tid(st.relid, &row_key) {
                    Some(own) => own,
                    None => b.tids.add(st.relid, &row_key, &row, Origin::Latest),
                }
            })
        } else {
            state::with(|b| b.tids.add(st.relid, &row_key, &row, Origin::Read))
        };
        (*scan).xs_heaptid = tid;
        (*scan).xs_recheck = !st.exact_conflict_check;
        return true;
    }
}

/// The TID of rows an index-only scan returns without registering them (valid, but
/// names no row).
const NO_TID: pg_sys::ItemPointerData = pg_sys::ItemPointerData { ip_blkid: pg_sys::BlockIdData { bi_hi: 0, bi_lo: 0 }, ip_posid: 1 };

/// Let index-only scan `scan` (its Pinax node, am/index_only.rs) skip TIDs: rows are
/// not fetched or registered, only the index tuple is returned, with the columns in
/// `needed` (bit `i`: column `i`) filled in.
///
/// # Safety
/// `scan` must be a scan of an index using the Pinax routine.
pub unsafe fn set_index_only(scan: pg_sys::IndexScanDesc, needed: u64) {
    (*scan).xs_want_itup = true;
    let o = (*scan).opaque as *mut Opaque;
    (*o).no_tids = true;
    (*o).needed = needed;
}

/// Whether `idx` uses the Pinax index routine.
///
/// # Safety
/// `idx` must be a valid index relation.
pub unsafe fn is_pinax_index(idx: pg_sys::Relation) -> bool {
    (*idx).rd_indam == routine()
}

/// Whether index-only scans may return column `col` (0-based) of index `im`: every
/// column of the primary key (taken from the row), and the key columns of a
/// secondary index whose encoding decodes exactly (INCLUDE columns are not stored).
pub fn can_return(im: &IndexMeta, col: usize, heap_attnum: i16) -> bool {
    if im.is_pk {
        heap_attnum > 0
    } else {
        im.cols.get(col).is_some_and(|c| c.returnable())
    }
}

/// Hand the index columns of entry `key` → `value` to the executor as `xs_hitup`
/// (valid until the next entry): from the row for the primary key (`value` is the
/// row), decoded from the key for a secondary index (columns that cannot be
/// returned are NULL; the planner never asks for them).
unsafe fn form_index_tuple(scan: pg_sys::IndexScanDesc, o: *mut Opaque, im: &IndexMeta, relid: u32, key: &[u8], value: &[u8]) {
    if (*o).needed == 0 && !(*o).empty_tuple.is_null() {
        // Nothing is read (count(*)): the same all-NULL tuple every time.
        (*scan).xs_hitup = (*o).empty_tuple;
        (*scan).xs_hitupdesc = (*(*scan).indexRelation).rd_att;
        return;
    }
    if (*o).tuple_cxt.is_null() {
        (*o).tuple_cxt = pg_sys::AllocSetContextCreateInternal((*o).scan_cxt, c"pinax index tuple".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
    }
    pg_sys::MemoryContextReset((*o).tuple_cxt);
    let old = pg_sys::MemoryContextSwitchTo((*o).tuple_cxt);
    let idx = (*scan).indexRelation;
    let desc = (*idx).rd_att;
    let natts = (*desc).natts as usize;
    let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
    let mut isnull = [true; pg_sys::INDEX_MAX_KEYS as usize];
    let needed = (*o).needed;
    let wanted = |i: usize| i < 64 && needed & (1 << i) != 0;
    if needed == 0 {
        // Nothing is read (count(*)): an all-NULL tuple.
    } else if im.is_pk {
        if (*o).row_slot.is_null() {
            // A descriptor copy: not reference-counted, so the slot needs no release.
            pg_sys::MemoryContextSwitchTo((*o).scan_cxt);
            let tdesc = pg_sys::CreateTupleDescCopyConstr((*(*scan).heapRelation).rd_att);
            (*o).row_slot = pg_sys::MakeSingleTupleTableSlot(tdesc, &raw const pg_sys::TTSOpsHeapTuple);
            pg_sys::MemoryContextSwitchTo((*o).tuple_cxt);
        }
        let slot = (*o).row_slot;
        let value = crate::tuple::merged((*slot).tts_tupleDescriptor, value.to_vec());
        store_tuple(slot, &value, NO_TID, pg_sys::Oid::from(relid), None);
        let indkey = (*(*idx).rd_index).indkey.values.as_slice(natts);
        for (i, &att) in indkey.iter().enumerate() {
            if att > 0 && wanted(i) {
                values[i] = pg_sys::slot_getattr(slot, att as i32, &mut isnull[i]);
            }
        }
    } else if let Some(cols) = decode_key(&im.cols[..im.cols.len().min(64 - needed.leading_zeros() as usize)], key, im.hashed) {
        for (i, (v, n)) in cols.into_iter().enumerate() {
            if im.cols[i].returnable() && wanted(i) {
                values[i] = v;
                isnull[i] = n;
            }
        }
    } else {
        pg_sys::MemoryContextSwitchTo(old);
        error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "pinax: index entry key does not decode", None);
    }
    if needed == 0 {
        pg_sys::MemoryContextSwitchTo((*o).scan_cxt);
        (*o).empty_tuple = pg_sys::heap_form_tuple(desc, values.as_mut_ptr(), isnull.as_mut_ptr());
        (*scan).xs_hitup = (*o).empty_tuple;
    } else {
        (*scan).xs_hitup = pg_sys::heap_form_tuple(desc, values.as_mut_ptr(), isnull.as_mut_ptr());
    }
    (*scan).xs_hitupdesc = desc;
    pg_sys::MemoryContextSwitchTo(old);
}
