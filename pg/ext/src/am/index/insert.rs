//! `aminsert`: a secondary index entry (key → row key) written with its row, by
//! the same command; uniqueness is the storage's insert-if-absent, checked as
//! PostgreSQL asks (`UNIQUE_CHECK_YES`, `_PARTIAL` for ON CONFLICT arbiters and
//! deferrable constraints, `_EXISTING` for their recheck). The primary key's
//! "entries" are the rows themselves.
//!
//! A deferrable unique constraint's index while the constraint is deferred: a
//! row whose key is taken gets a *deferred duplicate* entry, the key followed by
//! its row key (the layout of a non-unique entry), so an equality scan (a range
//! over the key) finds every row holding the key, as heap's index does. The
//! recheck at COMMIT (`_EXISTING`) moves it to the key itself if the key is free
//! by then, else raises the violation. A row leaving the key removes its
//! deferred entry and the key's own entry only if that one is its
//! ([`entry_deletes`]).

use super::meta_for;
use crate::error;
#[cfg(doc)]
use crate::meta::secondary_entry;
use crate::meta::{enforced_unique, secondary_key, IndexMeta};
use crate::scan::Pager;
use crate::state;
use crate::violation::{self, OrRaiseFlush};
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_proto::WriteOp;

/// Index AM callback `aminsert` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn aminsert(
    idx: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    heap_tid: pg_sys::ItemPointer,
    heap: pg_sys::Relation,
    check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _ii: *mut pg_sys::IndexInfo,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
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
        let skip = state::with(|b| b.unchanged.contains(&(im.oid, key.clone())));
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
                        let speculative = state::with(|b| {
                            let Some(s) = &mut b.spec else { return false };
                            s.index_conflict = Some(key.clone());
                            true
                        });
                        if !speculative && im.deferrable {
                            // A deferred constraint's duplicate: found by scans now,
                            // checked at COMMIT (see the module docs).
                            state::with(|b| b.push(cid, &im.storage, WriteOp::put(deferred_entry(&key, &row_key), row_key))).or_raise();
                        }
                        false
                    }
                    Err(e) => violation::raise(e),
                }
            }
            pg_sys::IndexUniqueCheck::UNIQUE_CHECK_EXISTING => {
                // Deferred recheck: the entry must be ours or absent.
                match entry_owner(&im, &key) {
                    Some(owner) if owner != row_key => {
                        violation::raise(state::FlushError {
                            table: im.storage.clone(),
                            error: pinax_proto::RpcError::new(pinax_common::ErrorCode::DuplicateKey, "duplicate key").with_key(key).into(),
                        });
                    }
                    Some(_) => true,
                    None => {
                        // The key is free: this row's entry moves to it (from its
                        // deferred duplicate entry, if it has one). Insert-if-absent:
                        // a key another transaction took meanwhile is a violation.
                        state::with(|b| {
                            b.push(cid, &im.storage, WriteOp::delete(deferred_entry(&key, &row_key)))?;
                            b.push(cid, &im.storage, WriteOp::insert(key, row_key))?;
                            b.flush()
                        })
                        .or_raise();
                        true
                    }
                }
            }
            _ => {
                let op = if enforced { WriteOp::insert(key.clone(), row_key) } else { WriteOp::put(key.clone(), row_key) };
                // An exclusion constraint's check (PostgreSQL's look-up after this
                // insert) must see a concurrent inserter of the same values: each
                // locks the values' key until it ends, so the second waits for the
                // first and then finds its row (`exclusion_lock`).
                let lock = exclusion_lock(im.exclusion, &vals, || secondary_key(&im, std::ptr::null_mut(), Some(&vals), &[]));
                state::with(|b| {
                    if let Some(s) = &mut b.spec {
                        s.written.push((im.storage.clone(), key));
                    }
                    if let Some(l) = lock {
                        b.push(cid, &im.storage, l)?;
                    }
                    b.push(cid, &im.storage, op)
                })
                .or_raise();
                true
            }
        }
    }
}

/// The lock an exclusion constraint's index entry for values `vals` takes
/// (None for other indexes, and for values with a NULL, which conflict with
/// nothing): UPDATE strength on `key()`, the values' key without a row key,
/// which no entry has. Held until the transaction ends, it makes concurrent
/// inserters of equal values (btree and hash exclusion constraints are all
/// `=`) take turns, so PostgreSQL's look-up after the insert waits for the
/// other and then finds its row, as heap's dirty snapshot does.
pub(crate) fn exclusion_lock(exclusion: bool, vals: &[(pg_sys::Datum, bool)], key: impl FnOnce() -> Vec<u8>) -> Option<WriteOp> {
    (exclusion && !vals.iter().any(|(_, n)| *n)).then(|| WriteOp::row_lock(key(), pinax_proto::LockStrength::Update))
}

/// Row `row_key`'s deferred duplicate entry for unique key `key` (see the
/// module docs): the key followed by the row key.
fn deferred_entry(key: &[u8], row_key: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(key.len() + row_key.len());
    e.extend_from_slice(key);
    e.extend_from_slice(row_key);
    e
}

/// The row key index `im`'s entry at `key` names, as this transaction sees it
/// (its own writes included).
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
unsafe fn entry_owner(im: &IndexMeta, key: &[u8]) -> Option<Vec<u8>> {
    let mut pager = Pager::new(im.storage.clone(), Vec::new(), None, false, u32::MAX);
    pager.get(&im.storage, key).or_raise()
}

/// The writes that take row `row_key`'s entry `entry` (its key in index `im`
/// and whether it is enforced-unique, [`secondary_entry`]) out of the index.
/// An enforced-unique key of a deferrable constraint's index may be another
/// row's (this row then holds a deferred duplicate entry, see the module
/// docs): the key's own entry goes only if it is this row's, the deferred one
/// in any case.
///
/// # Safety
/// Calls into PostgreSQL: only in a backend, where its errors can be raised.
pub(crate) unsafe fn entry_deletes(im: &IndexMeta, (entry, enforced): (Vec<u8>, bool), row_key: &[u8]) -> Vec<WriteOp> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !im.deferrable || !enforced {
            return vec![WriteOp::delete(entry)];
        }
        let mut ops = vec![WriteOp::delete(deferred_entry(&entry, row_key))];
        if entry_owner(im, &entry).as_deref() == Some(row_key) {
            ops.push(WriteOp::delete(entry));
        }
        ops
    }
}
