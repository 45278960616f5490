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
//!
//! Files, after the index AM's callbacks (access/amapi.h): `build.rs` (ambuild,
//! ambuildempty; the build in storage; ambulkdelete and amvacuumcleanup, which
//! have nothing to do), `insert.rs` (aminsert: entries and uniqueness),
//! `scan.rs` (ambeginscan, amrescan, amgettuple, amendscan; index-only and
//! counting scans), `ranges.rs` (scan keys to key ranges), `inverted/` (GIN and
//! hash indexes: stored as inverted indexes, their methods' own routines with
//! storing and scanning replaced), `other.rs` (indexes of other access methods:
//! kept in the catalog, not stored or used). This file: the routine, and
//! switching indexes of Pinax tables to it (held relcache entries).

pub mod build;
pub mod insert;
pub mod inverted;
pub mod other;
mod ranges;
pub mod scan;

use self::build::{ambuild, ambuildempty, ambulkdelete, amvacuumcleanup};
use self::insert::aminsert;
use self::scan::{ambeginscan, amendscan, amgetbitmap, amgettuple, amrescan};
use crate::error::OrRaise;
use crate::meta::{self, index_meta, IndexMeta, TableMeta};
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;
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
        derived_routine(pg_sys::BTREE_AM_OID, |mine| {
            BT_AMBUILD.with(|c| c.set(mine.ambuild));
            mine.ambuild = Some(ambuild);
            mine.ambuildempty = Some(ambuildempty);
            mine.aminsert = Some(aminsert);
            pinax_scans(mine, Some(ambeginscan), Some(amrescan), Some(amgettuple), Some(amendscan));
            mine.amgetbitmap = Some(amgetbitmap);
        })
    };
    ROUTINE.with(|c| *c.borrow_mut() = r);
    r
}

/// A routine of our own made from access method `am`'s: a copy, with nothing
/// to vacuum (storage removes old versions, as for Pinax's own indexes), no
/// parallel scans, and `edit` applied.
///
/// # Safety
/// `am` must be an index access method's OID.
pub(crate) unsafe fn derived_routine(am: pg_sys::Oid, edit: impl FnOnce(&mut pg_sys::IndexAmRoutine)) -> *mut pg_sys::IndexAmRoutine {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let own = pg_sys::GetIndexAmRoutineByAmId(am, false);
        let mut mine: pg_sys::IndexAmRoutine = *own;
        mine.ambulkdelete = Some(ambulkdelete);
        mine.amvacuumcleanup = Some(amvacuumcleanup);
        mine.amcanparallel = false;
        edit(&mut mine);
        Box::into_raw(Box::new(mine))
    }
}

/// Scan callbacks of a routine whose index Pinax scans: these four, and no
/// index-only, bitmap, mark/restore or parallel scans.
pub(crate) fn pinax_scans(
    r: &mut pg_sys::IndexAmRoutine,
    begin: pg_sys::ambeginscan_function,
    rescan: pg_sys::amrescan_function,
    gettuple: pg_sys::amgettuple_function,
    end: pg_sys::amendscan_function,
) {
    r.amcanreturn = None;
    r.ambeginscan = begin;
    r.amrescan = rescan;
    r.amgettuple = gettuple;
    r.amgetbitmap = None;
    r.amendscan = end;
    r.ammarkpos = None;
    r.amrestrpos = None;
    r.amestimateparallelscan = None;
    r.aminitparallelscan = None;
    r.amparallelrescan = None;
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
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn hold(oid: pg_sys::Oid) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { hold_with(oid, Kind::Btree) }
}

/// Which routine an index of a Pinax table is switched to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A btree index: the Pinax routine.
    Btree,
    /// A GIN or hash index Pinax stores (`inverted/`).
    Inverted,
    /// An index of another method, kept in the catalog, not used (`other.rs`).
    Kept,
}

/// [`hold`], switching the index to the routine of its `kind`.
///
/// # Safety
/// As for [`hold`].
unsafe fn hold_with(oid: pg_sys::Oid, kind: Kind) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let switch = |idx: pg_sys::Relation| {
            (*idx).rd_indam = match kind {
                Kind::Btree => routine(),
                Kind::Inverted => self::inverted::routine((*(*idx).rd_rel).relam),
                Kind::Kept => self::other::routine((*(*idx).rd_rel).relam),
            };
        };
        if HELD.with(|h| h.borrow().iter().any(|r| (**r).rd_id == oid)) {
            return;
        }
        if in_utility() {
            let idx = pg_sys::index_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            switch(idx);
            pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
            return;
        }
        let _g = OwnerGuard(pg_sys::CurrentResourceOwner);
        pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
        let idx = pg_sys::index_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        switch(idx);
        HELD.with(|h| h.borrow_mut().push(idx));
    }
}

/// Switch an index relation PostgreSQL just handed us (index build) to Pinax.
///
/// # Safety
/// `idx` must be a valid open index relation.
pub unsafe fn hold_rel(idx: pg_sys::Relation) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { hold_rel_with(idx, routine()) }
}

/// [`hold_rel`], switching the index to routine `r`.
///
/// # Safety
/// As for [`hold_rel`]; `r` must be a routine made by this module's files.
pub unsafe fn hold_rel_with(idx: pg_sys::Relation, r: *mut pg_sys::IndexAmRoutine) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if in_utility() || HELD.with(|h| h.borrow().contains(&idx)) {
            (*idx).rd_indam = r;
            return;
        }
        let _g = OwnerGuard(pg_sys::CurrentResourceOwner);
        pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
        pg_sys::RelationIncrementReferenceCount(idx);
        (*idx).rd_indam = r;
        HELD.with(|h| h.borrow_mut().push(idx));
    }
}

/// Make sure every index of Pinax table `rel` uses the Pinax routine in this
/// transaction.
///
/// # Safety
/// `rel` must be a valid open Pinax table; `m` its metadata.
pub unsafe fn ensure_patched(rel: pg_sys::Relation, m: &Rc<TableMeta>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
        for im in &m.inverted {
            hold_with(pg_sys::Oid::from(im.oid), Kind::Inverted);
        }
        for oid in &m.others {
            hold_with(pg_sys::Oid::from(*oid), Kind::Kept);
        }
        PATCHED.with(|p| p.borrow_mut().insert(relid, id));
    }
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
///
/// # Safety
/// `heap` must be a valid open relation, and `idx` a valid open relation.
unsafe fn meta_for(heap: pg_sys::Relation, idx: pg_sys::Relation) -> (Rc<TableMeta>, Rc<IndexMeta>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let m = meta::table_meta(heap).or_raise();
        let oid = (*idx).rd_id.to_u32();
        let im = m.pk.iter().chain(m.secondary.iter()).find(|i| i.oid == oid).cloned();
        let im = match im {
            Some(i) => i,
            None => Rc::new(index_meta(idx, m.hashed)),
        };
        (m, im)
    }
}

/// `ExecQual` (an inline function in C).
///
/// # Safety
/// A valid (or null) expression state and expression context.
pub unsafe fn exec_qual(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// Whether `idx` uses the Pinax index routine.
///
/// # Safety
/// `idx` must be a valid index relation.
pub unsafe fn is_pinax_index(idx: pg_sys::Relation) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { (*idx).rd_indam == routine() }
}

/// Create the storage table of an index of the table stored in `table`:
/// hash-sharded (`pinax.tablets`' default count), with the table's options
/// (a table with `pinax.auto_split = off` keeps its indexes whole too).
/// Nothing if it exists (replayed DDL, a rebuilt index).
pub fn create_index_storage(table: &str, index: &str) {
    let client = crate::state::with(|b| b.client()).or_raise();
    let options = client.refresh_table(table).map(|t| t.options).unwrap_or_default();
    let sharding = pinax_proto::Sharding::Hash { tablets: crate::guc::tablets() };
    client.call(pinax_proto::Request::CreateTable { name: index.to_string(), sharding, if_not_exists: true, options }).or_raise();
}
