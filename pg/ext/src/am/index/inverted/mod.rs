//! GIN and hash indexes of Pinax tables, stored by Pinax as inverted indexes.
//!
//! PostgreSQL's GIN keeps, for every key its operator class extracts from a
//! row's value (`extractValue`: the words of a tsvector, the elements of an
//! array, the paths of a jsonb, the trigrams of a text), a posting list of the
//! rows holding it. Pinax keeps the same thing in a storage table of the index's
//! own, one entry per (key, row):
//!
//! `be16(hash16(tail)) ++ tail ++ row key` → row key, where
//! `tail = [column number] [category] [key encoding, for a normal key]`
//!
//! with GIN's categories: a normal key, a NULL key (an element that is NULL),
//! an empty item (a value with no keys: an empty array) and a NULL item (a NULL
//! value), so that every row has at least one entry per column, as in GIN. A key
//! is encoded as a btree key of the key type is (`keys.rs`), which makes values
//! the operator class calls equal the same bytes; key types for which that does
//! not hold (a nondeterministic collation, a type whose equality is not equality
//! of its bytes and that `keys.rs` does not encode by value) are not stored
//! (`describe` says why, and the index is kept in the catalog, not used:
//! `other.rs`). The hash prefix spreads keys
//! over the tablets, and all entries of one key are in one tablet: a key's
//! posting list is one range read.
//!
//! A hash index is the same with one key per row, the value's hash code from the
//! operator class's hash function (no entry for NULL, which hash indexes do not
//! hold). Its equality look-ups work under any collation and for any type with a
//! hash operator class (citext included), since candidates are always rechecked.
//!
//! Entries are written and deleted with their rows, by the same command, as for
//! btree indexes (`aminsert` here; the table AM's delete and update compute a
//! row's old entries with [`row_entries`]); an UPDATE leaves entries that stay
//! the same alone. Scans (`scan.rs`) evaluate the operator class's own query
//! functions (`extractQuery`, `consistent`/`triConsistent`, `comparePartial`) over
//! the posting lists read at one read point, and hand out the candidate rows for
//! a recheck of the index conditions. The planner sees these indexes as
//! index-scan-capable (`hooks/relation_info.rs`); there are no bitmap scans of
//! Pinax tables.

pub mod scan;

use super::build::{entry_values, predicate};
use crate::error::{self, OrRaise};
use crate::keys::KeyColumn;
use crate::meta::{self, TableMeta};
use crate::scan::Pager;
use crate::state;
use crate::tuple::store_tuple;
use crate::violation::{self, OrRaiseFlush};
use pgrx::pg_guard;
use pgrx::pg_sys;
use pinax_codec::hash::{encode_hash_prefix, hash16};
use pinax_proto::WriteOp;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

/// GIN's support function numbers (access/gin.h).
pub(crate) const GIN_EXTRACTVALUE_PROC: u16 = 2;
pub(crate) const GIN_EXTRACTQUERY_PROC: u16 = 3;
pub(crate) const GIN_CONSISTENT_PROC: u16 = 4;
pub(crate) const GIN_COMPARE_PARTIAL_PROC: u16 = 5;
pub(crate) const GIN_TRICONSISTENT_PROC: u16 = 6;
/// Hash indexes' standard hash function (access/hash.h).
const HASHSTANDARD_PROC: u16 = 1;
/// btree's "equal image" support function (access/nbtree.h).
const BTEQUALIMAGE_PROC: i16 = 4;
const INT4OID: u32 = 23;
const DEFAULT_COLLATION_OID: u32 = 100;

/// GIN's entry categories (access/ginblock.h `GinNullCategory`), as stored.
pub(crate) const CAT_NORM_KEY: u8 = 0;
pub(crate) const CAT_NULL_KEY: u8 = 1;
pub(crate) const CAT_EMPTY_ITEM: u8 = 2;
pub(crate) const CAT_NULL_ITEM: u8 = 3;

/// The access method of an inverted index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Gin,
    Hash,
}

/// A GIN or hash index of a Pinax table, stored by Pinax.
#[derive(Debug)]
pub struct InvertedMeta {
    pub oid: u32,
    /// Its storage table (named after its file node, as a btree index's).
    pub storage: String,
    pub method: Method,
    /// How each column's keys are encoded: GIN, the key type of the column's
    /// operator class; hash, the int4 hash code.
    pub keys: Vec<KeyColumn>,
    /// Table attribute number of each key column (0: an expression).
    pub heap_attnums: Vec<i16>,
    /// No expressions and no predicate: values come straight from the row.
    pub simple: bool,
    pub partial: bool,
    /// A hash index backing an exclusion constraint (`EXCLUDE USING hash (c WITH =)`).
    pub exclusion: bool,
}

/// Describe GIN or hash index `idx` for storing it; Err: why Pinax cannot store
/// it (another method, or a key whose equality is not equality of its bytes).
///
/// # Safety
/// `idx` must be a valid, open index relation.
pub unsafe fn describe(idx: pg_sys::Relation) -> Result<InvertedMeta, String> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let am = (*(*idx).rd_rel).relam;
        let method = if am == pg_sys::GIN_AM_OID {
            Method::Gin
        } else if am == pg_sys::HASH_AM_OID {
            Method::Hash
        } else {
            return Err("Pinax stores btree, GIN and hash indexes".into());
        };
        let ind = (*idx).rd_index;
        let nkey = (*ind).indnkeyatts as usize;
        let mut keys = Vec::with_capacity(nkey);
        let mut heap_attnums = Vec::with_capacity(nkey);
        let indkey = (*ind).indkey.values.as_slice(nkey);
        for (i, &heap_att) in indkey.iter().enumerate() {
            heap_attnums.push(heap_att);
            match method {
                Method::Hash => keys.push(KeyColumn::new(INT4OID, -1, 0, 0)),
                Method::Gin => {
                    let att = (*(*idx).rd_att).attrs.as_ptr().add(i);
                    let coll = support_collation(idx, i).to_u32();
                    let typid = (*att).atttypid.to_u32();
                    if !bytes_equal_when_equal(typid, coll) {
                        let t = std::ffi::CStr::from_ptr(pg_sys::format_type_be(pg_sys::Oid::from(typid))).to_string_lossy().into_owned();
                        return Err(format!("its keys (type {t}) may be equal without being the same bytes"));
                    }
                    keys.push(KeyColumn::new(typid, -1, coll, 0));
                }
            }
        }
        let partial = meta::is_partial(idx);
        Ok(InvertedMeta {
            oid: (*idx).rd_id.to_u32(),
            storage: crate::ddl::index_storage_name(pg_sys::MyDatabaseId.to_u32(), (*idx).rd_node.relNode.to_u32()),
            method,
            simple: !partial && heap_attnums.iter().all(|a| *a != 0),
            keys,
            heap_attnums,
            partial,
            exclusion: (*ind).indisexclusion,
        })
    }
}

/// Whether keys of type `typid` under collation `coll` that compare equal are
/// encoded as the same bytes by `keys.rs`: types it encodes by value, text under
/// a deterministic collation, and other types whose btree operator class says
/// equality is equality of images (`equalimage`, as btree deduplication asks).
///
/// # Safety
/// Catalog lookups: in a transaction.
unsafe fn bytes_equal_when_equal(typid: u32, coll: u32) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if coll != 0 && coll != DEFAULT_COLLATION_OID && !pg_sys::get_collation_isdeterministic(pg_sys::Oid::from(coll)) {
            return false;
        }
        let c = KeyColumn::new(typid, -1, coll, 0);
        if !matches!(c.kind, crate::keys::KeyKind::Raw { .. }) {
            return true;
        }
        let opclass = pg_sys::GetDefaultOpClass(pg_sys::Oid::from(c.typid), pg_sys::BTREE_AM_OID);
        if opclass == pg_sys::InvalidOid {
            return false;
        }
        let family = pg_sys::get_opclass_family(opclass);
        let intype = pg_sys::get_opclass_input_type(opclass);
        let proc_ = pg_sys::get_opfamily_proc(family, intype, intype, BTEQUALIMAGE_PROC);
        if proc_ == pg_sys::InvalidOid {
            return false;
        }
        let r = pg_sys::OidFunctionCall1Coll(proc_, pg_sys::Oid::from(coll), pg_sys::Datum::from(intype.to_u32() as usize));
        r.value() != 0
    }
}

/// The collation GIN calls column `col`'s support functions with (ginutil.c
/// `initGinState`).
///
/// # Safety
/// `idx` must be a valid, open index relation with more than `col` columns.
pub(crate) unsafe fn support_collation(idx: pg_sys::Relation, col: usize) -> pg_sys::Oid {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let c = *(*idx).rd_indcollation.add(col);
        if c == pg_sys::InvalidOid {
            pg_sys::Oid::from(DEFAULT_COLLATION_OID)
        } else {
            c
        }
    }
}

/// The start of every entry for key `key` (already encoded; empty for the
/// categories without one) of category `cat` in column `col` (0-based): the
/// hash prefix and the tail (see the module docs). A row's entry is this
/// followed by its row key.
pub(crate) fn entry_prefix(col: usize, cat: u8, key: &[u8]) -> Vec<u8> {
    let mut tail = Vec::with_capacity(2 + key.len());
    tail.push(col as u8 + 1);
    tail.push(cat);
    tail.extend_from_slice(key);
    let mut k = Vec::with_capacity(tail.len() + 2);
    encode_hash_prefix(&mut k, hash16(&tail));
    k.extend_from_slice(&tail);
    k
}

/// The entry prefixes (see [`entry_prefix`]) of index `im` for index column
/// values `vals` (no row key yet).
///
/// # Safety
/// `idx` must be the index `im` describes, open; the values valid datums of its
/// columns. Calls the operator classes' functions: in a backend.
pub unsafe fn value_entries(idx: pg_sys::Relation, im: &InvertedMeta, vals: &[(pg_sys::Datum, bool)]) -> BTreeSet<Vec<u8>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut out = BTreeSet::new();
        // The support functions allocate: in a context of our own, freed here.
        let cxt = pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"pinax inverted entries".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
        let old = pg_sys::MemoryContextSwitchTo(cxt);
        for (col, &(v, isnull)) in vals.iter().enumerate().take(im.keys.len()) {
            match im.method {
                Method::Hash => {
                    if isnull {
                        continue; // hash indexes hold no NULLs
                    }
                    let f = pg_sys::index_getprocinfo(idx, 1, HASHSTANDARD_PROC);
                    let h = pg_sys::FunctionCall1Coll(f, *(*idx).rd_indcollation, v).value() as u32;
                    out.insert(entry_prefix(0, CAT_NORM_KEY, &hash_key(&im.keys[0], h)));
                }
                Method::Gin => {
                    if isnull {
                        out.insert(entry_prefix(col, CAT_NULL_ITEM, &[]));
                        continue;
                    }
                    let f = pg_sys::index_getprocinfo(idx, col as i16 + 1, GIN_EXTRACTVALUE_PROC);
                    let mut n: i32 = 0;
                    let mut nulls: *mut bool = std::ptr::null_mut();
                    let keys = pg_sys::FunctionCall3Coll(
                        f,
                        support_collation(idx, col),
                        v,
                        pg_sys::Datum::from(&mut n as *mut i32),
                        pg_sys::Datum::from(&mut nulls as *mut *mut bool),
                    )
                    .cast_mut_ptr::<pg_sys::Datum>();
                    if keys.is_null() || n <= 0 {
                        out.insert(entry_prefix(col, CAT_EMPTY_ITEM, &[]));
                        continue;
                    }
                    for j in 0..n as usize {
                        if !nulls.is_null() && *nulls.add(j) {
                            out.insert(entry_prefix(col, CAT_NULL_KEY, &[]));
                        } else {
                            let mut enc = Vec::new();
                            im.keys[col].encode(&mut enc, *keys.add(j), false);
                            out.insert(entry_prefix(col, CAT_NORM_KEY, &enc));
                        }
                    }
                }
            }
        }
        pg_sys::MemoryContextSwitchTo(old);
        pg_sys::MemoryContextDelete(cxt);
        out
    }
}

/// The encoding of hash code `h` as a key of `col` (int4).
pub(crate) fn hash_key(col: &KeyColumn, h: u32) -> Vec<u8> {
    let mut enc = Vec::with_capacity(6);
    // SAFETY: an int4 datum is a plain value.
    unsafe { col.encode(&mut enc, pg_sys::Datum::from(h as i32 as isize as usize), false) };
    enc
}

/// Entry `prefix` of row `row_key`: the storage key.
pub fn entry_key(prefix: &[u8], row_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + row_key.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(row_key);
    k
}

/// The storage keys of the entries index `im` has for the row in `slot` whose
/// row key is `row_key` (none when a partial index's predicate fails on it).
///
/// # Safety
/// `slot` must hold a deformed row of the index's table.
pub unsafe fn row_entries(im: &InvertedMeta, slot: *mut pg_sys::TupleTableSlot, row_key: &[u8]) -> BTreeSet<Vec<u8>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let vals = if im.simple { Some(meta::column_values(&im.heap_attnums, slot)) } else { meta::row_index_values(im.oid, true, slot) };
        let Some(vals) = vals else { return BTreeSet::new() };
        let idx = pg_sys::index_open(pg_sys::Oid::from(im.oid), pg_sys::NoLock as pg_sys::LOCKMODE);
        let out = value_entries(idx, im, &vals).into_iter().map(|p| entry_key(&p, row_key)).collect();
        pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
        out
    }
}

/// Metadata of inverted index `idx` of Pinax table `heap`.
///
/// # Safety
/// Valid open relations.
pub(crate) unsafe fn meta_for(heap: pg_sys::Relation, idx: pg_sys::Relation) -> (Rc<TableMeta>, Rc<InvertedMeta>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let m = meta::table_meta(heap).or_raise();
        let oid = (*idx).rd_id.to_u32();
        let im = match m.inverted.iter().find(|i| i.oid == oid) {
            Some(i) => i.clone(),
            None => Rc::new(describe(idx).unwrap_or_else(|why| error::not_supported(format!("this index cannot be stored by Pinax: {why}")))),
        };
        (m, im)
    }
}

thread_local! {
    /// The stored routine of each access method (GIN, hash), made on first use.
    static ROUTINES: RefCell<HashMap<u32, *mut pg_sys::IndexAmRoutine>> = RefCell::new(HashMap::new());
}

/// The routine of a stored GIN or hash index (access method `am`): the method's
/// own (build, options, costs, validation), with storing and scanning Pinax's.
///
/// # Safety
/// `am` must be GIN's or hash's OID.
pub unsafe fn routine(am: pg_sys::Oid) -> *mut pg_sys::IndexAmRoutine {
    if let Some(r) = ROUTINES.with(|r| r.borrow().get(&am.to_u32()).copied()) {
        return r;
    }
    // SAFETY: the caller upholds this function's contract (# Safety).
    let r = unsafe {
        super::derived_routine(am, |mine| {
            mine.aminsert = Some(aminsert);
            super::pinax_scans(mine, Some(scan::ambeginscan), Some(scan::amrescan), Some(scan::amgettuple), Some(scan::amendscan));
        })
    };
    ROUTINES.with(|c| c.borrow_mut().insert(am.to_u32(), r));
    r
}

/// Index AM callback `aminsert` of a stored GIN or hash index: the row's
/// entries, except those an UPDATE kept.
///
/// # Safety
/// Called only by PostgreSQL, through the index AM routine, with the arguments
/// `IndexAmRoutine` documents.
#[pg_guard]
unsafe extern "C-unwind" fn aminsert(
    idx: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    heap_tid: pg_sys::ItemPointer,
    heap: pg_sys::Relation,
    _check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _ii: *mut pg_sys::IndexInfo,
) -> bool {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let (m, im) = meta_for(heap, idx);
        let relid = m.relid;
        let Some(row_key) = state::with(|b| b.tids.get(relid, &*heap_tid).map(|r| r.key.to_vec())) else {
            error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pinax: index insert for a row this transaction did not write", None);
        };
        let vals: Vec<(pg_sys::Datum, bool)> = (0..im.keys.len()).map(|i| (*values.add(i), *isnull.add(i))).collect();
        let entries = value_entries(idx, &im, &vals);
        // (A hash index's exclusion constraint: as a btree one's, insert.rs.)
        let locks: Vec<WriteOp> = entries.iter().filter_map(|p| super::insert::exclusion_lock(im.exclusion, &vals, || p.clone())).collect();
        state::with(|b| {
            let cid = b.last_cid;
            for l in locks {
                b.push(cid, &im.storage, l)?;
            }
            for p in entries {
                let key = entry_key(&p, &row_key);
                if b.unchanged.contains(&(im.oid, key.clone())) {
                    continue;
                }
                if let Some(s) = &mut b.spec {
                    s.written.push((im.storage.clone(), key.clone()));
                }
                b.push(cid, &im.storage, WriteOp::put(key, row_key.clone()))?;
            }
            Ok::<(), state::FlushError>(())
        })
        .or_raise();
        true
    }
}

/// Build stored GIN or hash index `idx` of Pinax table `heap` (reached through
/// the method's own ambuild and the table AM's `index_build_range_scan`, which
/// hands the method no row: its local files stay empty). Returns the rows indexed.
///
/// # Safety
/// Valid open relations and index info, inside a transaction.
pub unsafe fn build(heap: pg_sys::Relation, idx: pg_sys::Relation, ii: *mut pg_sys::IndexInfo, im: InvertedMeta) -> f64 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        super::hold_rel_with(idx, routine((*(*idx).rd_rel).relam));
        // As for btree indexes (build.rs): snapshots older than the build do not use it.
        if (*heap).rd_createSubid == 0 && (*heap).rd_firstRelfilenodeSubid == 0 {
            (*ii).ii_BrokenHotChain = true;
        }
        meta::pinax_am_oid(); // for dropping this storage if the transaction aborts (hooks/xact.rs)
        let adopted = crate::ddl::adopt_or_record(idx, &im.storage);
        if !adopted {
            super::create_index_storage(&meta::table_meta(heap).or_raise().storage, &im.storage);
        }
        if crate::ddl::replaying() {
            return 0.0; // the origin node wrote the entries
        }
        if super::build::deferring(im.oid) {
            return 0.0; // CREATE INDEX CONCURRENTLY backfills them (concurrent_index.rs)
        }
        super::build::report_scan_start(heap);
        let m = meta::table_meta(heap).or_raise();
        let (n, _) = write_entries(heap, idx, ii, &m, &im, Vec::new(), usize::MAX);
        if let Err(e) = state::with(|b| b.flush()) {
            violation::raise_build(e, im.oid);
        }
        n as f64
    }
}

/// Write the entries of index `idx` (`im`) for up to `max` rows of `heap` from
/// row key `start` on, as the rows are at the transaction's read time. Returns
/// the rows read and the key the next chunk starts at (None: the table's end).
/// (Entries are puts: one a writer maintaining the index wrote for the same
/// row is written again, the same.)
///
/// # Safety
/// Valid open relations and index info, inside a transaction.
pub unsafe fn write_entries(
    heap: pg_sys::Relation,
    idx: pg_sys::Relation,
    ii: *mut pg_sys::IndexInfo,
    m: &TableMeta,
    im: &InvertedMeta,
    start: Vec<u8>,
    max: usize,
) -> (usize, Option<Vec<u8>>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let cid = pg_sys::GetCurrentCommandId(true);
        let mut pager = Pager::new(m.storage.clone(), start, None, false, u32::MAX);
        let slot = pg_sys::MakeSingleTupleTableSlot((*heap).rd_att, &raw const pg_sys::TTSOpsHeapTuple);
        let estate = pg_sys::CreateExecutorState();
        let econtext = pg_sys::MakePerTupleExprContext(estate);
        (*econtext).ecxt_scantuple = slot;
        let pred = predicate(ii, estate);
        let mut n = 0;
        let mut next = None;
        while let Some((key, value)) = pager.next_row().or_raise() {
            let value = crate::tuple::merged((*heap).rd_att, value);
            store_tuple(slot, &value, pg_sys::ItemPointerData::default(), pg_sys::Oid::from(m.relid), None);
            n += 1;
            if n % 1024 == 0 {
                super::build::report_progress(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE, n as i64);
            }
            if let Some(vals) = entry_values(ii, pred, estate, im.keys.len()) {
                for p in value_entries(idx, im, &vals) {
                    if let Err(e) = state::with(|b| b.push(cid, &im.storage, WriteOp::put(entry_key(&p, &key), key.clone()))) {
                        violation::raise_build(e, im.oid);
                    }
                }
            }
            if n == max {
                let mut k = key;
                k.push(0); // the least key after it
                next = Some(k);
                break;
            }
        }
        pg_sys::FreeExecutorState(estate);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        (n, next)
    }
}
