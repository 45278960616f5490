//! What a running UPDATE's rows depend on, for column-level conflicts.
//!
//! An UPDATE that keeps a row's key sends only the columns it changed (a patch,
//! `pinax_codec::patch`), with the columns it depends on: another transaction's
//! concurrent patch of none of them is no conflict (as in YugabyteDB). It depends
//! on every column the statement reads or writes of its target table: the range
//! table's `selectedCols` and `updatedCols` of every reference to the table (its
//! WHERE, SET, RETURNING, a self-join, a subquery over it); a whole-row reference
//! means every column. It writes every column it assigns, changed or not (so
//! `SET v = v` still conflicts with another update of `v`, and locks the row
//! against it, as in PostgreSQL). `am/table/modify.rs` adds the columns of indexes and
//! CHECK constraints the change touches.
//!
//! The table AM's `tuple_update` is not told which statement calls it: the
//! ExecutorStart hook registers every started query (innermost last), and
//! ExecutorEnd, or the end of its (sub)transaction, forgets it. The caller of
//! `tuple_update` is the innermost started query: those its expressions ran
//! (functions) have ended. If that is not an UPDATE of the table (an INSERT ...
//! ON CONFLICT DO UPDATE, a MERGE, or a cursor a function left open), the update
//! holds the whole row.

use crate::pg_list::{list_ints, list_ptrs};
use pgrx::pg_sys;
use std::cell::RefCell;
use std::rc::Rc;

/// What an UPDATE's rows depend on (attribute numbers, ascending).
#[derive(Clone, Debug)]
pub struct Deps {
    /// Read or written.
    pub used: Vec<u16>,
    /// Assigned (SET), changed or not: the update writes them.
    pub assigned: Vec<u16>,
}

struct Running {
    query: *mut pg_sys::QueryDesc,
    subid: pg_sys::SubTransactionId,
    /// Per target relation: what its rows depend on; None: all of them.
    rels: Vec<(pg_sys::Oid, Option<Rc<Deps>>)>,
}

thread_local! {
    static RUNNING: RefCell<Vec<Running>> = const { RefCell::new(Vec::new()) };
}

/// Members of a column bitmap (offset by `FirstLowInvalidHeapAttributeNumber`,
/// as in the range table), added to `out` as attribute numbers; None if it holds
/// a whole-row reference.
///
/// # Safety
/// `set` must be a valid bitmap or null.
pub unsafe fn attnums(set: *const pg_sys::Bitmapset, out: &mut Vec<u16>) -> Option<()> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut m = -1;
        loop {
            m = pg_sys::bms_next_member(set, m);
            if m < 0 {
                return Some(());
            }
            let att = m + pg_sys::FirstLowInvalidHeapAttributeNumber;
            match att {
                0 => return None,
                a if a > 0 => out.push(a as u16),
                _ => {} // system columns (ctid, tableoid) hold no user data
            }
        }
    }
}

/// Register `query` (from the ExecutorStart hook).
///
/// # Safety
/// `query` must be a started query.
pub unsafe fn started(query: *mut pg_sys::QueryDesc) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let rels = update_targets((*query).plannedstmt);
        RUNNING.with(|r| r.borrow_mut().push(Running { query, subid: pg_sys::GetCurrentSubTransactionId(), rels }));
    }
}

/// The target relations of an UPDATE plan, and what their rows depend on; none
/// for any other plan.
///
/// # Safety
/// `stmt` must be a valid `PlannedStmt`.
unsafe fn update_targets(stmt: *mut pg_sys::PlannedStmt) -> Vec<(pg_sys::Oid, Option<Rc<Deps>>)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if stmt.is_null() || (*stmt).commandType != pg_sys::CmdType::CMD_UPDATE || (*stmt).resultRelations.is_null() {
            return Vec::new();
        }
        let rtes = list_ptrs::<pg_sys::RangeTblEntry>((*stmt).rtable);
        let mut rels = Vec::new();
        for rti in list_ints((*stmt).resultRelations) {
            let Some(&target) = rtes.get((rti as usize).wrapping_sub(1)) else { continue };
            let relid = (*target).relid;
            let mut cols = Vec::new();
            let mut assigned = Vec::new();
            let mut all = false;
            let mut checked = false;
            for &rte in rtes.iter().filter(|&&r| (*r).rtekind == pg_sys::RTEKind::RTE_RELATION && (*r).relid == relid) {
                all |= attnums((*rte).selectedCols, &mut cols).is_none() || attnums((*rte).updatedCols, &mut assigned).is_none();
                checked |= (*rte).requiredPerms & pg_sys::ACL_UPDATE != 0;
            }
            // Column sets are those the permission check uses: trusted only on an
            // entry it checks (a partition's entry, checked through its parent's,
            // holds the whole row).
            all |= !checked;
            assigned.sort_unstable();
            assigned.dedup();
            cols.extend_from_slice(&assigned);
            cols.sort_unstable();
            cols.dedup();
            rels.push((relid, (!all).then(|| Rc::new(Deps { used: cols, assigned }))));
        }
        rels
    }
}

/// Forget `query` (from the ExecutorEnd hook).
pub fn ended(query: *mut pg_sys::QueryDesc) {
    RUNNING.with(|r| {
        let mut r = r.borrow_mut();
        if let Some(i) = r.iter().rposition(|q| q.query == query) {
            r.truncate(i);
        }
    });
}

/// A subtransaction aborted: the UPDATEs it started are gone.
pub fn subxact_aborted(subid: pg_sys::SubTransactionId) {
    RUNNING.with(|r| r.borrow_mut().retain(|q| q.subid < subid));
}

/// The transaction ended.
pub fn clear() {
    RUNNING.with(|r| r.borrow_mut().clear());
}

/// What rows of `relid` the innermost running query depends on, if it is an
/// UPDATE of `relid` that does not depend on every column.
pub fn of(relid: pg_sys::Oid) -> Option<Rc<Deps>> {
    RUNNING.with(|r| r.borrow().last().and_then(|q| q.rels.iter().find(|(id, _)| *id == relid).and_then(|(_, d)| d.clone())))
}
