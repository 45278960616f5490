//! `INSERT ... ON CONFLICT DO NOTHING` of one row as one storage write.
//!
//! PostgreSQL runs a speculative insertion: it first looks the row up in the
//! arbiter index (a dirty-snapshot index scan: one round trip), then inserts it
//! speculatively, and a conflict found at the insert makes it undo and look again.
//! A Pinax insertion that may have to be undone is a storage transaction (its
//! intent, commit record and apply: three Raft entries). For a statement that is
//! its whole transaction and inserts one row into a table whose only index is its
//! primary key, the row's write can instead be committed at once, as the autocommit
//! fast path would at the end of the statement: an insert that fails if the key
//! exists is the conflict check itself. So the look-up before is skipped (it answers
//! "no conflict" without reading), the row written at once, and a duplicate key
//! reported to PostgreSQL as a speculative conflict: it then looks the row up for
//! real and does nothing, as it always would. A pending writer of the key is waited
//! for (as PostgreSQL waits for a speculative inserter) and the write sent again.
//!
//! When (`started`, at ExecutorStart of a top-level statement, and again at the
//! insert): `pinax.enable_insert_at_once`; READ COMMITTED or REPEATABLE READ; the
//! statement is its whole transaction (`hooks::restart::top_level_whole_transaction`:
//! autocommit, not a function, nothing after it before the commit) and nothing was
//! written before it (storage or PostgreSQL WAL); its plan is ModifyTable(INSERT,
//! ON CONFLICT DO NOTHING, no RETURNING, no writable CTE) over a Result (one row)
//! into one Pinax table, not partitioned, without AFTER INSERT triggers (a foreign
//! key's check included) or check options, whose only index is its primary key.
//! Nothing can then run after the write that could fail the statement, so
//! committing it early is committing it at the end: the row count is the one
//! PostgreSQL reports.

use crate::guc;
use crate::meta;
use crate::pg_list::list_oids;
use crate::state;
use pgrx::pg_sys;

/// ExecutorStart of `qd` (after PostgreSQL's): whether its one row is to be
/// written at once; recorded in the backend state for the insert to find.
///
/// # Safety
/// `qd` must be a started query.
pub unsafe fn started(qd: *mut pg_sys::QueryDesc, eflags: i32) {
    if !crate::hooks::restart::top_level() {
        // A statement run by a function or a utility, or the restartable copy of
        // the top-level one (which keeps what the top-level start decided).
        return;
    }
    let relid = if eflags as u32 & pg_sys::EXEC_FLAG_EXPLAIN_ONLY == 0 { eligible(qd) } else { None };
    state::with(|b| b.insert_at_once = relid);
}

/// The relation whose one row statement `qd` may write at once, if it may.
unsafe fn eligible(qd: *mut pg_sys::QueryDesc) -> Option<u32> {
    let ps = (*qd).plannedstmt;
    if !guc::insert_at_once()
        || meta::pinax_am_oid_cached().is_none()
        || (*ps).commandType != pg_sys::CmdType::CMD_INSERT
        || (*ps).hasReturning
        || (*ps).hasModifyingCTE
        || pg_sys::XactIsoLevel >= pg_sys::XACT_SERIALIZABLE as i32
    {
        return None;
    }
    let plan = (*ps).planTree;
    if plan.is_null() || (*plan).type_ != pg_sys::NodeTag::T_ModifyTable {
        return None;
    }
    let mt = plan as *mut pg_sys::ModifyTable;
    let sub = (*plan).lefttree;
    if (*mt).onConflictAction != pg_sys::OnConflictAction::ONCONFLICT_NOTHING
        || (*mt).rootRelation != 0
        || sub.is_null()
        || (*sub).type_ != pg_sys::NodeTag::T_Result
        || !(*sub).lefttree.is_null()
    {
        return None;
    }
    // One result relation.
    let mts = (*qd).planstate as *mut pg_sys::ModifyTableState;
    if mts.is_null() || (*mts).mt_nrels != 1 {
        return None;
    }
    let ri = (*mts).resultRelInfo;
    let rel = (*ri).ri_RelationDesc;
    let td = (*ri).ri_TrigDesc;
    // Triggers that run after the row is written (a foreign key's check among
    // them); BEFORE triggers run before it, those of UPDATE and DELETE never.
    let after = !td.is_null() && ((*td).trig_insert_after_row || (*td).trig_insert_after_statement || (*td).trig_insert_instead_row || (*td).trig_insert_new_table);
    if after || !(*ri).ri_WithCheckOptions.is_null() || !meta::is_pinax_table(rel) {
        return None;
    }
    // (The executor opens the indexes at the first insert.)
    let indexes = pg_sys::RelationGetIndexList(rel);
    let only_pk = list_oids(indexes) == [(*rel).rd_pkindex];
    pg_sys::list_free(indexes);
    if !only_pk {
        return None;
    }
    if !crate::hooks::restart::top_level_whole_transaction(ps) || !state::with(|b| b.wrote_nothing()) {
        return None;
    }
    Some((*rel).rd_id.to_u32())
}

/// Whether the running statement writes its row into `relid` at once and has not
/// yet: the arbiter look-up before the insert answers "no conflict" unread.
pub fn pending(relid: u32) -> bool {
    state::with(|b| b.insert_at_once == Some(relid))
}

/// The insert of the running statement's row into `relid`: whether it is to be
/// written at once (asked once; nothing written since the statement started).
pub fn take(relid: u32) -> bool {
    // SAFETY: reads a backend global.
    let no_wal = unsafe { pg_sys::XactLastRecEnd } == 0;
    state::with(|b| b.insert_at_once.take() == Some(relid) && no_wal && b.wrote_nothing())
}
