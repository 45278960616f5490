//! Scans of stored GIN and hash indexes (`ambeginscan`, `amrescan`,
//! `amgettuple`, `amendscan`).
//!
//! At its first tuple a scan works out its candidate rows, as GIN's own scan
//! does (ginscan.c, ginget.c), from posting lists read at one read point:
//! - GIN: each scan key's query goes through its operator class's
//!   `extractQuery`; each query key's posting list is one range read (a
//!   partial-match key, `comparePartial`, and a search mode that matches every
//!   row, `GIN_SEARCH_MODE_ALL`, read the whole index once); a row is a
//!   candidate of a scan key when `consistent` (or `triConsistent`) accepts
//!   which of the key's query keys it holds, and a candidate of the scan when
//!   it is one of every scan key.
//! - hash: the posting list of the hash code of the scan keys' value.
//!
//! Then it hands out the candidates in row-key order (both ways, for SCROLL
//! cursors over hash indexes), each row read at the scan's read point and
//! rechecked by the executor against the index conditions (`xs_recheck`:
//! GIN's keys are often lossy, and hash codes always are). A dirty snapshot's
//! look-up (an exclusion constraint's check on a hash index) reads the newest
//! committed state, as btree look-ups do.

use super::{entry_prefix, hash_key, meta_for, support_collation, InvertedMeta, Method};
use super::{CAT_EMPTY_ITEM, CAT_NORM_KEY, CAT_NULL_ITEM, CAT_NULL_KEY};
use super::{GIN_COMPARE_PARTIAL_PROC, GIN_CONSISTENT_PROC, GIN_EXTRACTQUERY_PROC, GIN_TRICONSISTENT_PROC};
use crate::keys::{decode_key, prefix_end};
use crate::scan::{snapshot_cid, Pager};
use crate::state;
use crate::tid::Origin;
use crate::violation::OrRaiseFlush;
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_codec::hash::HASH_PREFIX_LEN;
use pinax_proto::ReadPoint;
use std::collections::{BTreeSet, HashSet};

/// GIN's search modes (access/gin.h).
const GIN_SEARCH_MODE_DEFAULT: i32 = 0;
const GIN_SEARCH_MODE_INCLUDE_EMPTY: i32 = 1;
const GIN_SEARCH_MODE_ALL: i32 = 2;
/// `ScanKeyData.sk_flags`: the argument is NULL (access/skey.h).
const SK_ISNULL: i32 = 0x0001;

/// Reads of one scan, all at the read point its first read settled on.
struct Reader {
    index_storage: String,
    table_storage: String,
    curcid: u32,
    /// A dirty snapshot's look-up: the newest committed state.
    latest: bool,
    at: Option<ReadPoint>,
    /// The walk rows are fetched through (point reads).
    rows: Option<Pager>,
}

impl Reader {
    /// The entries of the index in `[start, end)`: (entry key, row key).
    fn range(&mut self, start: Vec<u8>, end: Option<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
        if state::serializable_locking() {
            // A SERIALIZABLE read locks what it reads (as btree scans do).
            state::with(|b| b.lock_ranges(&self.index_storage, &start, end.as_deref())).or_raise();
        }
        let mut p = Pager::new(self.index_storage.clone(), start, end, false, self.curcid);
        p.latest = self.latest;
        p.settle_at(self.at);
        let mut out = Vec::new();
        while let Some(row) = p.next_row().or_raise() {
            out.push(row);
        }
        self.at = self.at.or(p.settled_at());
        out
    }

    /// The row keys of the entries starting with `prefix`.
    fn posting(&mut self, prefix: Vec<u8>) -> HashSet<Vec<u8>> {
        let end = prefix_end(&prefix);
        self.range(prefix, end).into_iter().map(|(_, row)| row).collect()
    }

    /// Row `key` of the table, as the scan's read point sees it.
    fn row(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let (table, curcid, latest) = (self.table_storage.clone(), self.curcid, self.latest);
        let p = self.rows.get_or_insert_with(|| {
            let mut p = Pager::new(table, Vec::new(), None, false, curcid);
            p.latest = latest;
            p
        });
        p.settle_at(self.at);
        let row = p.get(&self.table_storage, key).or_raise();
        self.at = self.at.or(p.settled_at());
        row
    }
}

/// One entry of the whole index (a full read): its column (0-based), category,
/// key encoding and row key.
struct Entry {
    col: usize,
    cat: u8,
    key: Vec<u8>,
    row: Vec<u8>,
}

/// Every entry of the index, read once per scan that needs them.
fn all_entries(reader: &mut Reader) -> Vec<Entry> {
    reader
        .range(Vec::new(), None)
        .into_iter()
        .filter_map(|(k, row)| {
            let tail = k.get(HASH_PREFIX_LEN..k.len().checked_sub(row.len())?)?;
            let (&col, rest) = tail.split_first()?;
            let (&cat, key) = rest.split_first()?;
            Some(Entry { col: usize::from(col).checked_sub(1)?, cat, key: key.to_vec(), row })
        })
        .collect()
}

/// A GIN scan key, after its operator class's `extractQuery`.
struct GinKey {
    col: usize,
    strategy: u16,
    query: pg_sys::Datum,
    coll: pg_sys::Oid,
    n: usize,
    entries: *mut pg_sys::Datum,
    partial: *mut bool,
    extra: *mut pg_sys::Pointer,
    mode: i32,
    consistent: *mut pg_sys::FmgrInfo,
    tri: *mut pg_sys::FmgrInfo,
    compare_partial: *mut pg_sys::FmgrInfo,
    /// `nulls`, or as many `false` when the operator class gave none.
    null_flags: Vec<bool>,
}

impl GinKey {
    fn is_partial(&self, i: usize) -> bool {
        // SAFETY: `partial`, when set, has `n` flags (extractQuery's contract).
        !self.partial.is_null() && unsafe { *self.partial.add(i) }
    }

    /// The extra data of query key `i` (null when the operator class gave none).
    fn extra_of(&self, i: usize) -> pg_sys::Pointer {
        if self.extra.is_null() {
            std::ptr::null_mut()
        } else {
            // SAFETY: `extra`, when set, has `n` pointers (extractQuery's contract).
            unsafe { *self.extra.add(i) }
        }
    }

    /// Whether a row holding exactly the query keys `check` may match.
    ///
    /// # Safety
    /// Calls the operator class's functions: in a backend.
    unsafe fn consistent(&mut self, check: &[bool]) -> bool {
        // SAFETY: the caller upholds this function's contract (# Safety).
        unsafe {
            let mut flags: Vec<bool> = check.to_vec();
            flags.push(false); // never an empty buffer
            let strategy = pg_sys::Datum::from(self.strategy as usize);
            let n = pg_sys::Datum::from(self.n);
            let extra = pg_sys::Datum::from(self.extra);
            let entries = pg_sys::Datum::from(self.entries);
            let nulls = pg_sys::Datum::from(self.null_flags.as_mut_ptr());
            if !self.consistent.is_null() {
                let mut recheck = false;
                let r = pg_sys::FunctionCall8Coll(
                    self.consistent,
                    self.coll,
                    pg_sys::Datum::from(flags.as_mut_ptr()),
                    strategy,
                    self.query,
                    n,
                    extra,
                    pg_sys::Datum::from(&mut recheck as *mut bool),
                    entries,
                    nulls,
                );
                r.value() & 0xFF != 0
            } else {
                // GinTernaryValue: GIN_FALSE 0, GIN_TRUE 1, GIN_MAYBE 2.
                let mut tri: Vec<u8> = flags.iter().map(|&b| u8::from(b)).collect();
                let r = pg_sys::FunctionCall7Coll(self.tri, self.coll, pg_sys::Datum::from(tri.as_mut_ptr()), strategy, self.query, n, extra, entries, nulls);
                r.value() & 0xFF != 0
            }
        }
    }
}

/// The GIN scan keys of `keys` on index `idx`; None when the scan can match no
/// row (a NULL argument, or a query with no keys in the default search mode).
///
/// # Safety
/// `idx` must be a valid open GIN index; `keys` its scan keys.
unsafe fn gin_keys(idx: pg_sys::Relation, keys: &[pg_sys::ScanKeyData]) -> Option<Vec<GinKey>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut out = Vec::with_capacity(keys.len());
        for sk in keys {
            if sk.sk_flags & SK_ISNULL != 0 {
                return None; // GIN's operators are strict
            }
            let col = (sk.sk_attno - 1) as usize;
            let attno = sk.sk_attno;
            let coll = support_collation(idx, col);
            let f = pg_sys::index_getprocinfo(idx, attno, GIN_EXTRACTQUERY_PROC);
            let mut n: i32 = 0;
            let mut partial: *mut bool = std::ptr::null_mut();
            let mut extra: *mut pg_sys::Pointer = std::ptr::null_mut();
            let mut nulls: *mut bool = std::ptr::null_mut();
            let mut mode: i32 = GIN_SEARCH_MODE_DEFAULT;
            let entries = pg_sys::FunctionCall7Coll(
                f,
                coll,
                sk.sk_argument,
                pg_sys::Datum::from(&mut n as *mut i32),
                pg_sys::Datum::from(sk.sk_strategy as usize),
                pg_sys::Datum::from(&mut partial as *mut *mut bool),
                pg_sys::Datum::from(&mut extra as *mut *mut pg_sys::Pointer),
                pg_sys::Datum::from(&mut nulls as *mut *mut bool),
                pg_sys::Datum::from(&mut mode as *mut i32),
            )
            .cast_mut_ptr::<pg_sys::Datum>();
            if !(GIN_SEARCH_MODE_DEFAULT..=GIN_SEARCH_MODE_ALL).contains(&mode) {
                mode = GIN_SEARCH_MODE_ALL; // as ginscan.c treats a bogus mode
            }
            if entries.is_null() || n <= 0 {
                if mode == GIN_SEARCH_MODE_DEFAULT {
                    return None; // no keys: nothing can match
                }
                n = 0;
            }
            let n = n as usize;
            let proc_of = |p: u16| {
                if pg_sys::index_getprocid(idx, attno, p) == pg_sys::InvalidOid {
                    std::ptr::null_mut()
                } else {
                    pg_sys::index_getprocinfo(idx, attno, p)
                }
            };
            let null_flags = (0..n).map(|i| !nulls.is_null() && *nulls.add(i)).chain(std::iter::once(false)).collect();
            out.push(GinKey {
                col,
                strategy: sk.sk_strategy,
                query: sk.sk_argument,
                coll,
                n,
                entries,
                partial,
                extra,
                mode,
                consistent: proc_of(GIN_CONSISTENT_PROC),
                tri: proc_of(GIN_TRICONSISTENT_PROC),
                compare_partial: proc_of(GIN_COMPARE_PARTIAL_PROC),
                null_flags,
            });
        }
        Some(out)
    }
}

/// The candidate rows of a GIN scan with keys `keys` (see the module docs).
///
/// # Safety
/// `idx` must be the open index `im` describes; `keys` from [`gin_keys`] on it.
unsafe fn gin_candidates(idx: pg_sys::Relation, im: &InvertedMeta, reader: &mut Reader, keys: &mut [GinKey]) -> BTreeSet<Vec<u8>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let _ = idx;
        // Partial-match keys, an index scan without keys (every row), and keys in
        // the ALL search mode (every row with a value) when no other key narrows
        // the scan read the whole index.
        let every_key_all = keys.iter().all(|k| k.mode == GIN_SEARCH_MODE_ALL);
        let needs_all = keys.iter().any(|k| (0..k.n).any(|i| k.is_partial(i))) || every_key_all;
        let everything = if needs_all { Some(all_entries(reader)) } else { None };
        if keys.is_empty() {
            // No conditions: every row in the index (its first column's entries).
            let all = everything.as_deref().unwrap_or(&[]);
            return all.iter().filter(|e| e.col == 0).map(|e| e.row.clone()).collect();
        }
        // Evaluating consistent functions allocates: a context reset per call.
        let cxt = pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"pinax gin consistent".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
        let mut result: Option<BTreeSet<Vec<u8>>> = None;
        // Narrowing keys first: their candidates bound the others'.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by_key(|&i| keys[i].mode == GIN_SEARCH_MODE_ALL);
        for ki in order {
            let k = &mut keys[ki];
            let mut sets: Vec<HashSet<Vec<u8>>> = Vec::with_capacity(k.n);
            for i in 0..k.n {
                if k.is_partial(i) {
                    sets.push(HashSet::new());
                    continue;
                }
                let prefix = if k.null_flags[i] {
                    entry_prefix(k.col, CAT_NULL_KEY, &[])
                } else {
                    let mut enc = Vec::new();
                    im.keys[k.col].encode(&mut enc, *k.entries.add(i), false);
                    entry_prefix(k.col, CAT_NORM_KEY, &enc)
                };
                sets.push(reader.posting(prefix));
            }
            let mut hidden: HashSet<Vec<u8>> = HashSet::new();
            if let Some(all) = &everything {
                let old = pg_sys::MemoryContextSwitchTo(cxt);
                for e in all.iter().filter(|e| e.col == k.col) {
                    if e.cat == CAT_NORM_KEY && !k.compare_partial.is_null() {
                        let mut decoded = None;
                        for (i, set) in sets.iter_mut().enumerate() {
                            if !k.is_partial(i) {
                                continue;
                            }
                            let Some(key) = *decoded.get_or_insert_with(|| decode_key(&im.keys[k.col..=k.col], &e.key, false).map(|v| v[0].0)) else {
                                break;
                            };
                            let r = pg_sys::FunctionCall4Coll(
                                k.compare_partial,
                                k.coll,
                                *k.entries.add(i),
                                key,
                                pg_sys::Datum::from(k.strategy as usize),
                                pg_sys::Datum::from(k.extra_of(i)),
                            );
                            if r.value() as i32 == 0 {
                                set.insert(e.row.clone());
                            }
                        }
                        pg_sys::MemoryContextReset(cxt);
                    }
                    if k.mode == GIN_SEARCH_MODE_ALL && result.is_none() && e.cat != CAT_NULL_ITEM {
                        hidden.insert(e.row.clone());
                    }
                }
                pg_sys::MemoryContextSwitchTo(old);
            }
            if k.mode == GIN_SEARCH_MODE_INCLUDE_EMPTY {
                hidden.extend(reader.posting(entry_prefix(k.col, CAT_EMPTY_ITEM, &[])));
            }
            // This key's candidates: rows holding one of its query keys (or matched
            // by its mode), within the earlier keys' result.
            let mut cands: BTreeSet<Vec<u8>> = BTreeSet::new();
            match &result {
                Some(prev) if k.mode == GIN_SEARCH_MODE_ALL => cands.extend(prev.iter().cloned()),
                Some(prev) => cands.extend(sets.iter().flatten().chain(hidden.iter()).filter(|r| prev.contains(*r)).cloned()),
                None => cands.extend(sets.iter().flatten().chain(hidden.iter()).cloned()),
            }
            let mut kept = BTreeSet::new();
            let mut check = vec![false; k.n];
            for row in cands {
                for (i, set) in sets.iter().enumerate() {
                    check[i] = set.contains(&row);
                }
                let old = pg_sys::MemoryContextSwitchTo(cxt);
                let ok = k.consistent(&check);
                pg_sys::MemoryContextSwitchTo(old);
                pg_sys::MemoryContextReset(cxt);
                if ok {
                    kept.insert(row);
                }
            }
            result = Some(kept);
        }
        pg_sys::MemoryContextDelete(cxt);
        result.unwrap_or_default()
    }
}

/// The candidate rows of a hash index scan with keys `keys`: the rows whose
/// value hashes as the keys' argument.
///
/// # Safety
/// `idx` must be the open hash index `im` describes; `keys` its scan keys.
unsafe fn hash_candidates(idx: pg_sys::Relation, im: &InvertedMeta, reader: &mut Reader, keys: &[pg_sys::ScanKeyData]) -> BTreeSet<Vec<u8>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut codes = BTreeSet::new();
        for sk in keys {
            if sk.sk_flags & SK_ISNULL != 0 {
                return BTreeSet::new(); // `=` is strict
            }
            let opcintype = *(*idx).rd_opcintype;
            let coll = *(*idx).rd_indcollation;
            // A cross-type key hashes with its own type's function of the family,
            // which hashes equal values alike (as hash indexes require).
            let h = if sk.sk_subtype == pg_sys::InvalidOid || sk.sk_subtype == opcintype {
                pg_sys::FunctionCall1Coll(pg_sys::index_getprocinfo(idx, 1, 1), coll, sk.sk_argument)
            } else {
                let p = pg_sys::get_opfamily_proc(*(*idx).rd_opfamily, sk.sk_subtype, sk.sk_subtype, 1);
                pg_sys::OidFunctionCall1Coll(p, coll, sk.sk_argument)
            };
            codes.insert(h.value() as u32);
        }
        match codes.len() {
            0 => all_entries(reader).into_iter().map(|e| e.row).collect(),
            1 => {
                let h = *codes.iter().next().expect("one code");
                reader.posting(entry_prefix(0, CAT_NORM_KEY, &hash_key(&im.keys[0], h))).into_iter().collect()
            }
            _ => BTreeSet::new(), // two different codes: no value equals both
        }
    }
}

/// A scan's state, made at its first tuple.
struct ScanState {
    reader: Reader,
    rows: Vec<Vec<u8>>,
    /// The candidate handed out last (None: none yet; `rows.len()` or -1 past an end).
    cur: Option<isize>,
    relid: u32,
}

#[repr(C)]
struct Opaque {
    cb: pg_sys::MemoryContextCallback,
    state: *mut ScanState,
    /// The memory context the scan lives in.
    scan_cxt: pg_sys::MemoryContext,
}

/// Frees the scan's Rust state (a memory context reset callback; also called directly).
///
/// # Safety
/// `arg` must be the scan's `Opaque`.
#[pg_guard]
unsafe extern "C-unwind" fn free_opaque(arg: *mut std::ffi::c_void) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let o = arg as *mut Opaque;
        if !(*o).state.is_null() {
            drop(Box::from_raw((*o).state));
            (*o).state = std::ptr::null_mut();
        }
    }
}

/// Index AM callback `ambeginscan` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambeginscan(idx: pg_sys::Relation, nkeys: i32, norderbys: i32) -> pg_sys::IndexScanDesc {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(idx, nkeys, norderbys);
        let o = pg_sys::palloc0(std::mem::size_of::<Opaque>()) as *mut Opaque;
        (*o).cb.func = Some(free_opaque);
        (*o).cb.arg = o.cast();
        (*o).scan_cxt = pg_sys::CurrentMemoryContext;
        pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*o).cb);
        (*scan).opaque = o.cast();
        scan
    }
}

/// Index AM callback `amrescan` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amrescan(scan: pg_sys::IndexScanDesc, keys: pg_sys::ScanKey, nkeys: i32, _orderbys: pg_sys::ScanKey, _norderbys: i32) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        if !keys.is_null() && nkeys > 0 {
            std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
        }
        free_opaque((*scan).opaque);
    }
}

/// Index AM callback `amendscan` (`IndexAmRoutine`, access/amapi.h).
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amendscan(scan: pg_sys::IndexScanDesc) {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe { free_opaque((*scan).opaque) }
}

/// The state of scan `scan` at its first tuple: its candidates worked out.
///
/// # Safety
/// `scan` must be a scan begun by [`ambeginscan`].
unsafe fn begin(scan: pg_sys::IndexScanDesc, o: *mut Opaque) -> ScanState {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let heap = (*scan).heapRelation;
        let idx = (*scan).indexRelation;
        let (m, im) = meta_for(heap, idx);
        let snapshot = (*scan).xs_snapshot;
        let dirty = !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_DIRTY;
        let mut reader =
            Reader { index_storage: im.storage.clone(), table_storage: m.storage.clone(), curcid: snapshot_cid(snapshot), latest: dirty, at: None, rows: None };
        let keys: &[pg_sys::ScanKeyData] = if (*scan).keyData.is_null() || (*scan).numberOfKeys <= 0 {
            &[]
        } else {
            std::slice::from_raw_parts((*scan).keyData, (*scan).numberOfKeys as usize)
        };
        // The operator classes' query data lives as long as the scan.
        let old = pg_sys::MemoryContextSwitchTo((*o).scan_cxt);
        let rows = match im.method {
            Method::Hash => hash_candidates(idx, &im, &mut reader, keys),
            Method::Gin => match gin_keys(idx, keys) {
                Some(mut ks) => gin_candidates(idx, &im, &mut reader, &mut ks),
                None => BTreeSet::new(),
            },
        };
        pg_sys::MemoryContextSwitchTo(old);
        ScanState { reader, rows: rows.into_iter().collect(), cur: None, relid: m.relid }
    }
}

/// Index AM callback `amgettuple` (`IndexAmRoutine`, access/amapi.h): the next
/// candidate row the scan's read point sees, for a recheck.
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amgettuple(scan: pg_sys::IndexScanDesc, direction: pg_sys::ScanDirection::Type) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let o = (*scan).opaque as *mut Opaque;
        if (*o).state.is_null() {
            let st = begin(scan, o);
            (*o).state = Box::into_raw(Box::new(st));
        }
        let st = &mut *(*o).state;
        let backward = direction == pg_sys::ScanDirection::BackwardScanDirection;
        let n = st.rows.len() as isize;
        loop {
            let next = match (st.cur, backward) {
                (None, false) => 0,
                (None, true) => n - 1,
                (Some(c), false) => (c + 1).min(n),
                (Some(c), true) => (c - 1).max(-1),
            };
            st.cur = Some(next);
            if next < 0 || next >= n {
                return false;
            }
            let key = st.rows[next as usize].clone();
            let Some(row) = st.reader.row(&key) else { continue }; // a row the read point does not see
            let row = crate::tuple::merged((*(*scan).heapRelation).rd_att, row);
            if state::serializable_locking() {
                state::with(|b| b.lock_read_row(&st.reader.table_storage, &key)).or_raise();
            }
            let relid = st.relid;
            let tid = if st.reader.latest {
                state::with(|b| match b.excl_row_tid(relid, &key) {
                    Some(own) => own,
                    None => b.tids.add(relid, &key, &row, Origin::Latest),
                })
            } else {
                state::with(|b| b.tids.add(relid, &key, &row, Origin::Read))
            };
            (*scan).xs_heaptid = tid;
            (*scan).xs_recheck = true;
            return true;
        }
    }
}
