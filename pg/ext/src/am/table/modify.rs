//! Manipulations of physical tuples (`tuple_insert`, `tuple_insert_speculative`,
//! `tuple_complete_speculative`, `multi_insert`, `tuple_delete`, `tuple_update`,
//! `tuple_lock`): writes of rows and their secondary index entries to the
//! backend's write buffer, by command id; an update keeping its key may write
//! a patch (`patch_value`, `update_deps.rs`); row locks are lock intents with
//! PostgreSQL's strength.

use super::fetch::fetch_version;
use super::meta_of;
use crate::am::index::insert::entry_deletes;
use crate::am::index::inverted;
use crate::error;
use crate::guc;
use crate::meta::{self, pk_key, secondary_entry, secondary_key, TableMeta};
use crate::state;
use crate::tid::Origin;
use crate::tuple::{form_tuple_bytes, slot_getallattrs, store_tuple};
use crate::violation::{self, OrRaiseFlush};
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_codec::patch;
use pinax_proto::{LockStrength, WriteOp};

/// Insert the row in `slot` as command `cid`; returns its row key.
///
/// # Safety
/// `rel` must be a valid open relation, and `slot` a valid slot. Calls into
/// PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn insert_row(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, cid: u32) -> Vec<u8> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
                let k = super::rowid::new_row_key(&m.storage, m.hashed);
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
}

/// Table AM callback `tuple_insert` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_insert(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        insert_row(rel, slot, cid);
    }
}

/// Table AM callback `tuple_insert_speculative` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_insert_speculative(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
    _spec_token: u32,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if let Some(a) = crate::insert_at_once::take((*rel).rd_id.to_u32()) {
            insert_at_once(rel, slot, cid, a.upsert);
            return;
        }
        // Earlier writes first, so that a conflict is about this row alone.
        state::with(|b| b.flush()).or_raise();
        let key = insert_row(rel, slot, cid);
        let storage = meta_of(rel).storage.clone();
        let res = state::with(|b| {
            b.begin_speculative(
                cid,
                state::Speculative { conflict: None, index_conflict: None, written: vec![(storage.clone(), key.clone())], committed: false },
            );
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
}

/// The speculative insertion of a statement's one row, committed at once
/// (`insert_at_once`): a duplicate key is reported as the speculative conflict
/// (PostgreSQL then looks the row up and does nothing). `upsert`: the row is put
/// whether its key exists or not (no conflict to report).
///
/// # Safety
/// `rel` must be a valid open relation, and `slot` a valid slot. Calls into
/// PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn insert_at_once(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, cid: u32, upsert: bool) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// Table AM callback `tuple_complete_speculative` (`TableAmRoutine`,
/// access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_complete_speculative(
    rel: pg_sys::Relation,
    _slot: *mut pg_sys::TupleTableSlot,
    _spec_token: u32,
    succeeded: bool,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
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
}

/// Table AM callback `multi_insert` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn multi_insert(
    rel: pg_sys::Relation,
    slots: *mut *mut pg_sys::TupleTableSlot,
    nslots: i32,
    cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        for i in 0..nslots as usize {
            insert_row(rel, *slots.add(i), cid);
        }
    }
}

/// A temporary slot holding the stored row `bytes` of `rel`.
///
/// # Safety
/// `rel` must be a valid open relation. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn temp_slot(rel: pg_sys::Relation, bytes: &[u8]) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let slot = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, &raw const pg_sys::TTSOpsHeapTuple);
        store_tuple(slot, bytes, pg_sys::ItemPointerData::default(), (*rel).rd_id, None);
        slot_getallattrs(slot);
        slot
    }
}

/// The version behind `tid` for a write by command `cid`: its key and bytes, or the
/// TM result when it was already replaced.
///
/// # Safety
/// `rel` must be a valid open relation, `tid` a valid item pointer, and `tmfd`
/// a valid `TM_FailureData`. Calls into PostgreSQL: only in a backend, where
/// its errors can be raised.
unsafe fn target(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    cid: u32,
    tmfd: *mut pg_sys::TM_FailureData,
) -> Result<(Vec<u8>, Vec<u8>), pg_sys::TM_Result::Type> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let relid = (*rel).rd_id.to_u32();
        let found = state::with(|b| b.tids.get(relid, &*tid).map(|r| (r.key.to_vec(), r.tuple.to_vec(), r.superseded_by)));
        match found {
            None => error::raise_with(
                pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                "pinax: row version to modify is unknown (TID not handed out in this transaction)",
                None,
            ),
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
}

/// Table AM callback `tuple_delete` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_delete(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    _crosscheck: pg_sys::Snapshot,
    _wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    _changing_part: bool,
) -> pg_sys::TM_Result::Type {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let m = meta_of(rel);
        let (key, old) = match target(rel, tid, cid, tmfd) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let mut ops = vec![(m.storage.clone(), WriteOp::delete(key.clone()))];
        if !m.secondary.is_empty() || !m.inverted.is_empty() {
            let slot = temp_slot(rel, &old);
            for im in &m.secondary {
                for op in entry_deletes(im, secondary_entry(im, slot, None, &key), &key) {
                    ops.push((im.storage.clone(), op));
                }
            }
            for iv in &m.inverted {
                for k in inverted::row_entries(iv, slot, &key) {
                    ops.push((iv.storage.clone(), WriteOp::delete(k)));
                }
            }
            pg_sys::ExecDropSingleTupleTableSlot(slot);
        }
        state::with(|b| {
            b.last_cid = cid;
            b.unchanged.clear();
            if m.deferrable_unique {
                b.tids.track_rows(m.relid);
            }
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
///
/// # Safety
/// `rel` must be a valid open relation. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn patch_value(rel: pg_sys::Relation, m: &TableMeta, bytes: &[u8]) -> Option<Vec<u8>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !guc::column_conflicts() || pg_sys::XactIsoLevel >= pg_sys::XACT_SERIALIZABLE as i32 || !(*rel).trigdesc.is_null() || (*(*rel).rd_rel).relrowsecurity
        {
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
}

/// `rel`'s [`meta::PatchRules`]; None if an index or a CHECK constraint uses the
/// whole row.
///
/// # Safety
/// `rel` must be a valid open relation. Calls into PostgreSQL: only in a
/// backend, where its errors can be raised.
unsafe fn patch_rules(rel: pg_sys::Relation, m: &TableMeta) -> Option<meta::PatchRules> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
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
}

/// Table AM callback `tuple_update` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_update(
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
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
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
        let mut unchanged = std::collections::HashSet::new();
        if !m.secondary.is_empty() || !m.inverted.is_empty() {
            let oslot = temp_slot(rel, &old);
            for im in &m.secondary {
                // A partial index holds the rows its predicate holds on: the old row
                // may have no entry to delete or keep (`aminsert` writes the new one
                // if the new row is in).
                if !meta::row_in_index(im, oslot) {
                    continue;
                }
                let ok = secondary_entry(im, oslot, None, &old_key);
                let nk = secondary_key(im, slot, None, &new_key);
                // Entries hold the row key: when it changes, every entry is rewritten.
                if ok.0 == nk && !key_changed && meta::row_in_index(im, slot) {
                    unchanged.insert((im.oid, nk));
                } else {
                    for op in entry_deletes(im, ok, &old_key) {
                        ops.push((im.storage.clone(), op));
                    }
                }
            }
            for iv in &m.inverted {
                // The old row's entries that the new row has too stay (`aminsert`
                // skips them); the others go.
                let new_entries = if key_changed { Default::default() } else { inverted::row_entries(iv, slot, &new_key) };
                for k in inverted::row_entries(iv, oslot, &old_key) {
                    if new_entries.contains(&k) {
                        unchanged.insert((iv.oid, k));
                    } else {
                        ops.push((iv.storage.clone(), WriteOp::delete(k)));
                    }
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
            if m.deferrable_unique {
                b.tids.track_rows(m.relid);
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
        *update_indexes = !m.secondary.is_empty() || !m.inverted.is_empty();
        pg_sys::pgstat_count_heap_update(rel, false);
        pg_sys::TM_Result::TM_Ok
    }
}

/// Table AM callback `tuple_lock` (`TableAmRoutine`, access/tableam.h).
///
/// # Safety
/// Called only by PostgreSQL, through the table AM routine, with the arguments
/// `TableAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_lock(
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
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
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
}
