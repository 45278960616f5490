//! `INSERT ... ON CONFLICT DO NOTHING` of one row as one storage write, and the
//! upsert `INSERT ... ON CONFLICT (key) DO UPDATE SET` every other column `=
//! EXCLUDED.`column as one blind write of the row.
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
//! The upsert: when the update sets every column but the key's to the proposed
//! row's value, with no WHERE, the row after the statement is the proposed row
//! whether the key existed or not, provided equal keys are identical values (not
//! numeric 1.0 = 1.00: PostgreSQL keeps the stored key; see
//! `KeyColumn::equal_is_identical`). Under READ COMMITTED PostgreSQL updates the
//! newest version of a conflicting row (waiting for a pending writer), whatever
//! the statement's snapshot saw: one blind put of the row, not checked against the
//! read time, waiting for a pending writer and sent again, is the same. The
//! statement reports one row either way (as PostgreSQL's does), counted as an
//! insert in the statistics. Also required: no trigger of UPDATE (statement
//! triggers included), no row-level security, no stored generated column.
//!
//! When (`started`, at ExecutorStart of a top-level statement, and again at the
//! insert): `pinax.enable_insert_at_once`; READ COMMITTED or REPEATABLE READ (the
//! upsert: READ COMMITTED); the statement is its whole transaction
//! (`hooks::restart::top_level_whole_transaction`: autocommit, not a function,
//! nothing after it before the commit) and nothing was
//! written before it (storage or PostgreSQL WAL); its plan is ModifyTable(INSERT,
//! ON CONFLICT DO NOTHING or the upsert above, no RETURNING, no writable CTE) over a
//! Result (one row) into one Pinax table, not partitioned, without AFTER INSERT
//! triggers (a foreign key's check included) or check options, whose only index is
//! its primary key. Nothing can then run after the write that could fail the
//! statement, so committing it early is committing it at the end: the row count is
//! the one PostgreSQL reports.

use crate::guc;
use crate::meta;
use crate::pg_list::list_oids;
use crate::state;
use pgrx::pg_sys;

/// The running statement's one row written at once: into which relation, and
/// whether as the upsert's blind put (else an insert that fails if the key exists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtOnce {
    pub relid: u32,
    pub upsert: bool,
}

/// ExecutorStart of `qd` (after PostgreSQL's): whether its one row is to be
/// written at once; recorded in the backend state for the insert to find.
///
/// # Safety
/// `qd` must be a started query.
pub unsafe fn started(qd: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !crate::hooks::restart::top_level() {
            // A statement run by a function or a utility, or the restartable copy of
            // the top-level one (which keeps what the top-level start decided).
            return;
        }
        let at_once = if eflags as u32 & pg_sys::EXEC_FLAG_EXPLAIN_ONLY == 0 { eligible(qd) } else { None };
        state::with(|b| b.insert_at_once = at_once);
    }
}

/// The relation whose one row statement `qd` may write at once, and how, if it may.
///
/// # Safety
/// `qd` must be a valid `QueryDesc`. Calls into PostgreSQL: only in a backend,
/// where its errors can be raised.
unsafe fn eligible(qd: *mut pg_sys::QueryDesc) -> Option<AtOnce> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
        let upsert = match (*mt).onConflictAction {
            pg_sys::OnConflictAction::ONCONFLICT_NOTHING => false,
            pg_sys::OnConflictAction::ONCONFLICT_UPDATE if pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as i32 => true,
            _ => return None,
        };
        if (*mt).rootRelation != 0 || sub.is_null() || (*sub).type_ != pg_sys::NodeTag::T_Result || !(*sub).lefttree.is_null() {
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
        let after =
            !td.is_null() && ((*td).trig_insert_after_row || (*td).trig_insert_after_statement || (*td).trig_insert_instead_row || (*td).trig_insert_new_table);
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
        if upsert && !upsert_writes_the_proposed_row(mt, rel, td) {
            return None;
        }
        if !crate::hooks::restart::top_level_whole_transaction(ps) || !state::with(|b| b.wrote_nothing()) {
            return None;
        }
        Some(AtOnce { relid: (*rel).rd_id.to_u32(), upsert })
    }
}

/// Whether the ON CONFLICT DO UPDATE of `mt` into `rel` (triggers `td`) leaves the
/// proposed row as it is, whether its key existed or not, and runs nothing else
/// that would see or check the row it replaces (see the module docs).
///
/// # Safety
/// `mt` must be a valid `ModifyTable`, `rel` a valid open relation, and `td` a
/// valid `TriggerDesc`.
unsafe fn upsert_writes_the_proposed_row(mt: *mut pg_sys::ModifyTable, rel: pg_sys::Relation, td: *mut pg_sys::TriggerDesc) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !(*mt).onConflictWhere.is_null() || (*(*rel).rd_rel).relrowsecurity {
            return false;
        }
        if !td.is_null()
            && ((*td).trig_update_before_row
                || (*td).trig_update_after_row
                || (*td).trig_update_instead_row
                || (*td).trig_update_before_statement
                || (*td).trig_update_after_statement
                || (*td).trig_update_old_table
                || (*td).trig_update_new_table)
        {
            return false;
        }
        let desc = (*rel).rd_att;
        if !(*desc).constr.is_null() && (*(*desc).constr).has_generated_stored {
            return false;
        }
        let Ok(m) = meta::table_meta(rel) else { return false };
        let Some(pk) = &m.pk else { return false };
        if !pk.simple || !pk.cols.iter().all(|c| c.equal_is_identical) {
            return false;
        }
        let result_rti = match crate::pg_list::list_ints((*mt).resultRelations).as_slice() {
            [rti] => *rti,
            _ => return false,
        };
        // The SET list's expressions, and the attributes they set (`onConflictCols`;
        // an attribute not set keeps the stored value). EXCLUDED's attributes are Vars
        // of INNER_VAR by attribute number.
        let set: Vec<*mut pg_sys::TargetEntry> = crate::pg_list::list_ptrs((*mt).onConflictSet);
        let cols = crate::pg_list::list_ints((*mt).onConflictCols);
        if set.len() != cols.len() {
            return false;
        }
        let natts = (*desc).natts as usize;
        // Attributes the row after the statement takes from the proposed row: the key's
        // (equal in both rows) and dropped ones from the start.
        let mut covered: Vec<bool> = (1..=natts).map(|a| pk.heap_attnums.contains(&(a as i16)) || (*(*desc).attrs.as_ptr().add(a - 1)).attisdropped).collect();
        for (te, attno) in set.into_iter().zip(cols) {
            let e = (*te).expr as *mut pg_sys::Node;
            if attno <= 0 || attno as usize > natts || e.is_null() || (*e).type_ != pg_sys::NodeTag::T_Var {
                return false;
            }
            let v = e as *mut pg_sys::Var;
            let key = pk.heap_attnums.contains(&(attno as i16));
            // EXCLUDED's value of the attribute set; a key attribute may be set to the
            // stored value too (equal).
            let same_att = (*v).varattno as i32 == attno && (*v).varlevelsup == 0;
            if !same_att || !((*v).varno == pg_sys::INNER_VAR || (key && (*v).varno == result_rti)) {
                return false;
            }
            covered[attno as usize - 1] = true;
        }
        covered.iter().all(|c| *c)
    }
}

/// Whether the running statement writes its row into `relid` at once and has not
/// yet: the arbiter look-up before the insert answers "no conflict" unread.
pub fn pending(relid: u32) -> bool {
    state::with(|b| b.insert_at_once.is_some_and(|a| a.relid == relid))
}

/// The insert of the running statement's row into `relid`: whether it is to be
/// written at once, and how (asked once; nothing written since the statement started).
pub fn take(relid: u32) -> Option<AtOnce> {
    // SAFETY: reads a backend global.
    let no_wal = unsafe { pg_sys::XactLastRecEnd } == 0;
    state::with(|b| b.insert_at_once.take().filter(|a| a.relid == relid && no_wal && b.wrote_nothing()))
}
