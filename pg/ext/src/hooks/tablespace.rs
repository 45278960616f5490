//! Tablespaces of Pinax tables and their indexes (from the utility hook):
//! `ALTER TABLE … SET TABLESPACE`, `ALTER INDEX … SET TABLESPACE` and
//! `ALTER TABLE | INDEX ALL IN TABLESPACE … SET TABLESPACE`.
//!
//! Where a Pinax relation's rows and entries live is Pinax's to decide: in its
//! tablets, spread over the nodes and over each node's data directories
//! (`--data-dirs`), named after the relation's file node. Its PostgreSQL files hold
//! only what PostgreSQL creates for every relation (an empty main fork, an index's
//! metapage). So for a Pinax relation a tablespace is a catalog property that its
//! PostgreSQL files follow, as YugabyteDB treats tablespaces as placement metadata:
//! PostgreSQL's own move (a new file node and a copy of the files) would name new,
//! empty storage and drop the old at commit. A move here keeps the file node:
//! the relation's files are copied into the new tablespace under the same file
//! node, PostgreSQL deletes the old ones at commit (the new ones on abort) as for
//! its own moves, and `pg_class.reltablespace` changes. `xact.rs` does not take
//! those file deletions for the relation's drop ([`super::xact::record_move`]).
//! A tablespace emptied this way can be dropped, as on heap.
//!
//! The checks are PostgreSQL's: ownership, CREATE on the tablespace (but the
//! database's default), no moves into `pg_global`, NOWAIT for `ALL IN TABLESPACE`.
//! Moving a relation back to a tablespace it left means creating its file where
//! PostgreSQL keeps a tombstone of the old one until the next checkpoint: the
//! move asks for a checkpoint first (as `DROP TABLESPACE` does for tombstones).
//! Not done: moving back to a tablespace left in the same transaction (the old
//! file is deleted only at commit; refused, 0A000).

use crate::meta::{check_owner, is_pinax_relid};
use pgrx::pg_sys;
use std::ffi::{CStr, CString};

unsafe extern "C-unwind" {
    /// catalog/storage_xlog.h (not in pgrx's bindings).
    fn log_smgrcreate(rnode: *const pg_sys::RelFileNode, fork: pg_sys::ForkNumber::Type);
    /// postmaster/bgwriter.h (not in pgrx's bindings).
    fn RequestCheckpoint(flags: std::ffi::c_int);
}

/// The moves of a statement, taken out of it before PostgreSQL runs it.
#[derive(Default)]
pub struct Plan {
    /// Relations to move, and where (a tablespace name).
    moves: Vec<(pg_sys::Oid, CString)>,
    /// Whether PostgreSQL has nothing left to do (an `ALL IN TABLESPACE` that
    /// matched only Pinax relations: it would say it found none).
    pub skip_statement: bool,
}

/// Whether `relid` is stored by Pinax: a Pinax table, or an index of one.
///
/// # Safety
/// In a transaction.
unsafe fn stored_by_pinax(relid: pg_sys::Oid) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        match pg_sys::get_rel_relkind(relid) as u8 {
            pg_sys::RELKIND_INDEX => is_pinax_relid(pg_sys::IndexGetRelation(relid, true)),
            pg_sys::RELKIND_RELATION | pg_sys::RELKIND_MATVIEW => is_pinax_relid(relid),
            _ => false,
        }
    }
}

/// Take the tablespace moves of Pinax relations out of utility statement
/// `*pstmt` (copying it first when `*read_only` says it may not be changed), to
/// be done by [`apply`].
///
/// # Safety
/// `*pstmt` must be a valid planned utility statement; in a transaction.
pub unsafe fn plan(pstmt: &mut *mut pg_sys::PlannedStmt, read_only: &mut bool) -> Plan {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let node = (**pstmt).utilityStmt;
        if node.is_null() {
            return Plan::default();
        }
        if (*node).type_ == pg_sys::NodeTag::T_AlterTableMoveAllStmt {
            return plan_move_all(node.cast());
        }
        if (*node).type_ != pg_sys::NodeTag::T_AlterTableStmt {
            return Plan::default();
        }
        let stmt = node as *mut pg_sys::AlterTableStmt;
        let cmds = crate::pg_list::list_ptrs::<pg_sys::AlterTableCmd>((*stmt).cmds);
        let Some(at) = cmds.iter().position(|&c| (*c).subtype == pg_sys::AlterTableType::AT_SetTableSpace) else {
            return Plan::default();
        };
        if (*stmt).relation.is_null() {
            return Plan::default();
        }
        let relid = crate::meta::relid_named((*stmt).relation);
        if relid == pg_sys::InvalidOid || !stored_by_pinax(relid) {
            return Plan::default();
        }
        if *read_only {
            *pstmt = pg_sys::copyObjectImpl((*pstmt).cast()) as *mut pg_sys::PlannedStmt;
            *read_only = false;
        }
        let stmt = (**pstmt).utilityStmt as *mut pg_sys::AlterTableStmt;
        let cmd = crate::pg_list::list_ptrs::<pg_sys::AlterTableCmd>((*stmt).cmds)[at];
        let name = CStr::from_ptr((*cmd).name).to_owned();
        // PostgreSQL runs what else the statement asks (nothing is fine: an ALTER
        // TABLE without commands takes its lock, fires event triggers, and ends).
        (*stmt).cmds = pg_sys::list_delete_nth_cell((*stmt).cmds, at as i32);
        Plan { moves: vec![(relid, name)], skip_statement: false }
    }
}

/// The Pinax relations `ALTER … ALL IN TABLESPACE` moves, chosen as PostgreSQL's
/// `AlterTableMoveAll` chooses (not catalogs, shared, temporary or TOAST
/// relations; the kind asked; owned by the roles named), locked as it locks them.
///
/// # Safety
/// `stmt` must be a valid statement; in a transaction.
unsafe fn plan_move_all(stmt: *mut pg_sys::AlterTableMoveAllStmt) -> Plan {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        use pg_sys::ObjectType::*;
        let kinds = match (*stmt).objtype {
            OBJECT_TABLE => "'r', 'p'",
            OBJECT_INDEX => "'i', 'I'",
            OBJECT_MATVIEW => "'m'",
            _ => return Plan::default(), // PostgreSQL refuses it
        };
        let from = pg_sys::get_tablespace_oid((*stmt).orig_tablespacename, false);
        let to = pg_sys::get_tablespace_oid((*stmt).new_tablespacename, false);
        let norm = |t: pg_sys::Oid| if t == pg_sys::MyDatabaseTableSpace { pg_sys::InvalidOid } else { t };
        if from == pg_sys::GLOBALTABLESPACE_OID || to == pg_sys::GLOBALTABLESPACE_OID || norm(from) == norm(to) {
            return Plan::default(); // PostgreSQL's error, or nothing to do
        }
        let roles: Vec<String> =
            crate::pg_list::list_ptrs::<pg_sys::RoleSpec>((*stmt).roles).into_iter().map(|r| pg_sys::get_rolespec_oid(r, false).to_u32().to_string()).collect();
        let owned = if roles.is_empty() { String::new() } else { format!(" AND c.relowner IN ({})", roles.join(", ")) };
        let query = format!(
            "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.reltablespace = {} AND c.relkind IN ({kinds}) AND NOT c.relisshared \
             AND n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_(toast|temp_|toast_temp_)'{owned} ORDER BY c.oid",
            norm(from).to_u32()
        );
        let all: Vec<pg_sys::Oid> = pgrx::spi::Spi::connect(|c| {
            let rows = c.select(&query, None, &[])?;
            let mut out = Vec::new();
            for r in rows {
                if let Some(o) = r.get::<pg_sys::Oid>(1)? {
                    out.push(o);
                }
            }
            Ok::<_, pgrx::spi::SpiError>(out)
        })
        .unwrap_or_else(|e| pgrx::error!("pinax: could not list the relations of tablespace: {e}"));
        let ours: Vec<pg_sys::Oid> = all.iter().copied().filter(|&o| stored_by_pinax(o)).collect();
        if ours.is_empty() {
            return Plan::default();
        }
        // Checked and locked up front, as PostgreSQL does for every relation it moves.
        for &relid in &ours {
            check_owner(relid);
            let lock = pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE;
            if (*stmt).nowait {
                if !pg_sys::ConditionalLockRelationOid(relid, lock) {
                    let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
                    let rel = pg_sys::get_rel_name(relid);
                    let name = |p: *mut std::ffi::c_char| if p.is_null() { String::new() } else { CStr::from_ptr(p).to_string_lossy().into_owned() };
                    pgrx::ereport!(
                        ERROR,
                        pgrx::PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
                        format!("aborting because lock on relation \"{}.{}\" is not available", name(nsp), name(rel))
                    );
                }
            } else {
                pg_sys::LockRelationOid(relid, lock);
            }
        }
        let name = CStr::from_ptr((*stmt).new_tablespacename).to_owned();
        Plan { skip_statement: ours.len() == all.len(), moves: ours.into_iter().map(|o| (o, name.clone())).collect() }
    }
}

/// Make the moves `plan` took out of its statement.
///
/// # Safety
/// In the transaction of the statement [`plan`] was given.
pub unsafe fn apply(plan: &Plan) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        for (relid, name) in &plan.moves {
            move_relation(*relid, name);
        }
    }
}

/// Move relation `relid` (a Pinax table, or an index of one) to tablespace `name`.
///
/// # Safety
/// In a transaction; `relid` a relation stored by Pinax.
unsafe fn move_relation(relid: pg_sys::Oid, name: &CStr) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let rel = pg_sys::relation_open(relid, pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE);
        check_owner(relid);
        let ts = pg_sys::get_tablespace_oid(name.as_ptr(), false);
        if ts != pg_sys::MyDatabaseTableSpace {
            let ok = pg_sys::pg_tablespace_aclcheck(ts, pg_sys::GetUserId(), pg_sys::ACL_CREATE as pg_sys::AclMode);
            if ok != pg_sys::AclResult::ACLCHECK_OK {
                pg_sys::aclcheck_error(ok, pg_sys::ObjectType::OBJECT_TABLESPACE, name.as_ptr());
            }
        }
        // Refuses pg_global and other sessions' temporary tables; false: already there.
        // (No TOAST table to move with it: the table AM's relation_needs_toast_table
        // says no to every Pinax table.)
        if pg_sys::CheckRelationTableSpaceMove(rel, ts) {
            move_files(rel, ts);
            pg_sys::SetRelationTableSpace(rel, ts, pg_sys::InvalidOid);
            if std::ptr::addr_of!(pg_sys::object_access_hook).read().is_some() {
                pg_sys::RunObjectPostAlterHook(pg_sys::RelationRelationId, relid, 0, pg_sys::InvalidOid, false);
            }
            pg_sys::CommandCounterIncrement();
        }
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
}

/// Copy every fork of `rel`'s files into tablespace `ts` under the same file node
/// (created now, deleted if the transaction aborts), and have the old files
/// deleted at commit — what PostgreSQL's `index_copy_data` does, without a new
/// file node.
///
/// # Safety
/// `rel` must be open with AccessExclusiveLock.
unsafe fn move_files(rel: pg_sys::Relation, ts: pg_sys::Oid) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let persistence = (*(*rel).rd_rel).relpersistence;
        let from = (*rel).rd_node;
        let mut to = from;
        to.spcNode = ts;
        let there = pg_sys::smgropen(to, (*rel).rd_backend);
        if pg_sys::smgrexists(there, pg_sys::ForkNumber::MAIN_FORKNUM) {
            if super::xact::moved_from(&to) {
                crate::error::not_supported("a Pinax table or index cannot move back to the tablespace it left in the same transaction");
            }
            // The file node's file there is the tombstone PostgreSQL leaves of a
            // deleted relation file until the next checkpoint (md.c: it keeps the
            // file node from being reused): the relation left that tablespace
            // earlier. A checkpoint removes it, as DROP TABLESPACE has one do.
            RequestCheckpoint((pg_sys::CHECKPOINT_IMMEDIATE | pg_sys::CHECKPOINT_FORCE | pg_sys::CHECKPOINT_WAIT) as std::ffi::c_int);
        }
        super::xact::record_move(from, to);
        pg_sys::FlushRelationBuffers(rel);
        let dst = pg_sys::RelationCreateStorage(to, persistence, true);
        let src = pg_sys::smgropen(from, (*rel).rd_backend);
        pg_sys::RelationCopyStorage(src, dst, pg_sys::ForkNumber::MAIN_FORKNUM, persistence);
        let permanent = persistence as u8 == pg_sys::RELPERSISTENCE_PERMANENT;
        let unlogged = persistence as u8 == pg_sys::RELPERSISTENCE_UNLOGGED;
        for fork in [pg_sys::ForkNumber::FSM_FORKNUM, pg_sys::ForkNumber::VISIBILITYMAP_FORKNUM, pg_sys::ForkNumber::INIT_FORKNUM] {
            if pg_sys::smgrexists(src, fork) {
                pg_sys::smgrcreate(dst, fork, false);
                if permanent || (unlogged && fork == pg_sys::ForkNumber::INIT_FORKNUM) {
                    log_smgrcreate(&to, fork);
                }
                pg_sys::RelationCopyStorage(src, dst, fork, persistence);
            }
        }
        pg_sys::RelationDropStorage(rel);
        pg_sys::smgrclose(dst);
    }
}
