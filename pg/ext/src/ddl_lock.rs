//! Cluster-wide DDL locks: a DDL statement on Pinax tables takes, on every other
//! SQL node, the PostgreSQL table locks it takes here, before it runs.
//!
//! PostgreSQL's own DDL takes a table lock (SHARE for CREATE INDEX, ACCESS
//! EXCLUSIVE for a rewrite or DROP, ...) that keeps this node's writers out while
//! it changes the table; writers on the other nodes' PostgreSQL never see that
//! lock. So before the statement runs, [`before_utility`] asks the node
//! (`Request::LockDdl`, spread by the master) to have every other live SQL node
//! take the same locks in a session of its own: their writers wait (those
//! writing already finish first, as PostgreSQL's DDL waits for its own node's),
//! and the DDL's log entry names the lock ([`current`]), so each node applies the
//! change in that session and the locks go as the change becomes visible there.
//! One lock per transaction: later statements add their locks to it. It goes at
//! the end of the transaction ([`end_of_xact`], `Request::UnlockDdl`), or when
//! this backend dies (the nodes ask its node).
//!
//! Only tables of the `pinax` access method are locked (other tables are each
//! node's own); an index's statement locks its table. A node that cannot take
//! the locks in time (`lock_timeout`, else [`DEFAULT_WAIT_MS`]) makes the
//! statement fail with 55P03 (lock_not_available), its locks let go everywhere.

use crate::error::{self, OrRaise};
use crate::meta;
use crate::pg_list::list_ptrs;
use crate::state;
use pgrx::pg_sys;
use pinax_proto::{DdlLock, Request, Response};
use std::cell::Cell;
use std::ffi::CStr;

thread_local! {
    /// The transaction's DDL lock id (0: none taken).
    static LOCK: Cell<u128> = const { Cell::new(0) };
    /// Locks taken by this backend so far (for unique ids).
    static TAKEN: Cell<u32> = const { Cell::new(0) };
}

/// How long other nodes may wait for their locks when `lock_timeout` is 0.
pub const DEFAULT_WAIT_MS: u64 = 60_000;

/// The transaction's DDL lock id (0: none), for its DDL log entry.
pub fn current() -> u128 {
    LOCK.with(Cell::get)
}

/// Names of PostgreSQL's lock modes as `LOCK TABLE` spells them.
fn mode_name(mode: u32) -> &'static str {
    match mode {
        pg_sys::AccessShareLock => "ACCESS SHARE",
        pg_sys::RowShareLock => "ROW SHARE",
        pg_sys::RowExclusiveLock => "ROW EXCLUSIVE",
        pg_sys::ShareUpdateExclusiveLock => "SHARE UPDATE EXCLUSIVE",
        pg_sys::ShareLock => "SHARE",
        pg_sys::ShareRowExclusiveLock => "SHARE ROW EXCLUSIVE",
        pg_sys::ExclusiveLock => "EXCLUSIVE",
        _ => "ACCESS EXCLUSIVE",
    }
}

/// The relation `rv` names (InvalidOid if none).
///
/// # Safety
/// `rv` must be null or a valid RangeVar; in a transaction.
unsafe fn named(rv: *mut pg_sys::RangeVar) -> pg_sys::Oid {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if rv.is_null() {
            return pg_sys::InvalidOid;
        }
        meta::relid_named(rv)
    }
}

/// The table an index belongs to, or the relation itself.
///
/// # Safety
/// In a transaction.
unsafe fn table_of(relid: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if relid != pg_sys::InvalidOid && pg_sys::get_rel_relkind(relid) as u8 == pg_sys::RELKIND_INDEX {
            return pg_sys::IndexGetRelation(relid, true);
        }
        relid
    }
}

/// The tables a foreign key constraint `c` (if it is one) references.
///
/// # Safety
/// `c` must be a valid Constraint node; in a transaction.
unsafe fn referenced(c: *mut pg_sys::Constraint, out: &mut Vec<(pg_sys::Oid, u32)>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*c).contype == pg_sys::ConstrType::CONSTR_FOREIGN {
            out.push((named((*c).pktable), pg_sys::ShareRowExclusiveLock));
        }
    }
}

/// The (relation, lock mode) pairs statement `node` takes on existing
/// relations, as PostgreSQL takes them (indexes mapped to their tables).
///
/// # Safety
/// `node` must be a valid parse node; in a transaction.
unsafe fn locks_of(node: *mut pg_sys::Node) -> Vec<(pg_sys::Oid, u32)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        use pg_sys::NodeTag::*;
        let mut out = Vec::new();
        match (*node).type_ {
            T_IndexStmt => {
                let s = node as *mut pg_sys::IndexStmt;
                let mode = if (*s).concurrent { pg_sys::ShareUpdateExclusiveLock } else { pg_sys::ShareLock };
                out.push((named((*s).relation), mode));
            }
            T_AlterTableStmt => {
                let s = node as *mut pg_sys::AlterTableStmt;
                let mode = pg_sys::AlterTableGetLockLevel((*s).cmds) as u32;
                out.push((table_of(named((*s).relation)), mode));
                for cmd in list_ptrs::<pg_sys::AlterTableCmd>((*s).cmds) {
                    let def = (*cmd).def;
                    if !def.is_null() && (*def).type_ == T_Constraint {
                        referenced(def.cast(), &mut out);
                    }
                }
            }
            T_CreateStmt => {
                let s = node as *mut pg_sys::CreateStmt;
                for parent in list_ptrs::<pg_sys::RangeVar>((*s).inhRelations) {
                    out.push((named(parent), pg_sys::AccessExclusiveLock));
                }
                for elt in list_ptrs::<pg_sys::Node>((*s).tableElts) {
                    if (*elt).type_ == T_Constraint {
                        referenced(elt.cast(), &mut out);
                    } else if (*elt).type_ == T_ColumnDef {
                        for c in list_ptrs::<pg_sys::Constraint>((*(elt as *mut pg_sys::ColumnDef)).constraints) {
                            referenced(c, &mut out);
                        }
                    }
                }
            }
            T_DropStmt => {
                let s = node as *mut pg_sys::DropStmt;
                use pg_sys::ObjectType::*;
                if matches!((*s).removeType, OBJECT_TABLE | OBJECT_INDEX | OBJECT_MATVIEW) {
                    for name in list_ptrs::<pg_sys::List>((*s).objects) {
                        let rv = pg_sys::makeRangeVarFromNameList(name);
                        let mode = if (*s).concurrent { pg_sys::ShareUpdateExclusiveLock } else { pg_sys::AccessExclusiveLock };
                        out.push((table_of(named(rv)), mode));
                    }
                }
            }
            T_TruncateStmt => {
                for rv in list_ptrs::<pg_sys::RangeVar>((*(node as *mut pg_sys::TruncateStmt)).relations) {
                    out.push((named(rv), pg_sys::AccessExclusiveLock));
                }
            }
            T_RenameStmt => {
                let s = node as *mut pg_sys::RenameStmt;
                out.push((table_of(named((*s).relation)), pg_sys::AccessExclusiveLock));
            }
            T_ReindexStmt => {
                let s = node as *mut pg_sys::ReindexStmt;
                if !(*s).relation.is_null() {
                    out.push((table_of(named((*s).relation)), pg_sys::ShareLock));
                }
            }
            T_CreateTrigStmt => out.push((named((*(node as *mut pg_sys::CreateTrigStmt)).relation), pg_sys::ShareRowExclusiveLock)),
            T_CreatePolicyStmt => out.push((named((*(node as *mut pg_sys::CreatePolicyStmt)).table), pg_sys::AccessExclusiveLock)),
            T_AlterPolicyStmt => out.push((named((*(node as *mut pg_sys::AlterPolicyStmt)).table), pg_sys::AccessExclusiveLock)),
            T_RuleStmt => out.push((named((*(node as *mut pg_sys::RuleStmt)).relation), pg_sys::AccessExclusiveLock)),
            _ => {}
        }
        out.retain(|(oid, _)| *oid != pg_sys::InvalidOid && meta::is_pinax_relid(*oid) && !created_here(*oid));
        out.sort_by_key(|(oid, mode)| (oid.to_u32(), std::cmp::Reverse(*mode)));
        out.dedup_by_key(|(oid, _)| *oid); // the strongest mode of each
        out
    }
}

/// Whether relation `oid` was created by this transaction (no other node has
/// it yet: nothing there to lock; CREATE TABLE's own indexes and constraints).
///
/// # Safety
/// In a transaction; `oid` names a relation.
unsafe fn created_here(oid: pg_sys::Oid) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(oid);
        if rel.is_null() {
            return false;
        }
        let created = (*rel).rd_createSubid != 0;
        pg_sys::RelationClose(rel);
        created
    }
}

/// `schema.name` of relation `oid`, each part quoted as needed.
///
/// # Safety
/// In a transaction; `oid` names a relation.
unsafe fn quoted_name(oid: pg_sys::Oid) -> String {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(oid));
        let rel = pg_sys::get_rel_name(oid);
        let q = pg_sys::quote_qualified_identifier(nsp, rel);
        CStr::from_ptr(q).to_string_lossy().into_owned()
    }
}

/// Before DDL statement `node` runs (not replaying another node's DDL): take
/// its locks on Pinax tables on every other SQL node (raises 55P03 if one
/// cannot in time).
///
/// # Safety
/// `node` must be a valid parse node; in a transaction, where errors can be raised.
pub unsafe fn before_utility(node: *mut pg_sys::Node) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !crate::ddl::is_replicated_ddl(node) {
            return;
        }
        let locks = locks_of(node);
        if locks.is_empty() {
            return;
        }
        let relations: Vec<(String, String)> = locks.iter().map(|(oid, mode)| (quoted_name(*oid), mode_name(*mode).to_string())).collect();
        let database = {
            let p = pg_sys::get_database_name(pg_sys::MyDatabaseId);
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        let timeout = match pg_sys::LockTimeout {
            t if t > 0 => t as u64,
            _ => DEFAULT_WAIT_MS,
        };
        let client = state::with(|b| b.client()).or_raise();
        let origin = client.node_id();
        let mut id = current();
        if id == 0 {
            let n = TAKEN.with(|t| {
                t.set(t.get().wrapping_add(1));
                t.get()
            });
            id = ((origin as u128) << 64) | ((pg_sys::MyProcPid as u32 as u128) << 32) | n as u128;
            LOCK.with(|l| l.set(id));
        }
        let lock = DdlLock { lock: id, origin, origin_addr: String::new(), pid: pg_sys::MyProcPid as u32, database, relations, timeout_ms: timeout };
        match client.call(Request::LockDdl { lock }) {
            Ok(Response::Now(_)) => {}
            Ok(other) => pgrx::error!("pinax: unexpected answer to a DDL lock: {other:?}"),
            Err(e) => error::raise(&e),
        }
    }
}

/// The transaction ended: let its DDL lock go, if it took one (the nodes apply
/// the log first, so a lock whose entry was published goes as it applies).
/// Never raises (called at commit and abort).
pub fn end_of_xact() {
    let id = LOCK.with(|l| l.replace(0));
    if id == 0 {
        return;
    }
    let Ok(client) = state::with(|b| b.client()) else {
        return; // the nodes let it go when they hear it is not held
    };
    if let Err(e) = client.call(Request::UnlockDdl { lock: id }) {
        pgrx::log!("pinax: could not let a DDL lock go now (the nodes will): {e}");
    }
}
