//! What the table AM needs to know about a Pinax relation: its storage table, its
//! sharding, its primary key (the row key) and its secondary indexes.
//!
//! Cached per relation OID and dropped by the relcache invalidation callback
//! (`hooks/relcache.rs`), so DDL (new index, dropped primary key, TRUNCATE's
//! new file node) is seen at once.

use crate::ddl::{index_storage_name, table_storage_name};
use crate::keys::{build_key, KeyColumn};
use crate::pg_list::list_oids;
use crate::state;
use pgrx::pg_sys;
use pinax_client::ClientError;
use pinax_proto::Sharding;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A btree index of a Pinax table.
#[derive(Debug)]
pub struct IndexMeta {
    pub oid: u32,
    /// Storage table of a secondary index (the primary key has none: it is the row key).
    pub storage: String,
    pub is_pk: bool,
    pub unique: bool,
    /// A DEFERRABLE unique constraint's index: while the constraint is deferred a
    /// key may have several entries (see `am/index/insert.rs`).
    pub deferrable: bool,
    pub nulls_not_distinct: bool,
    /// The index of an exclusion constraint (`EXCLUDE USING btree (c WITH =)`).
    pub exclusion: bool,
    /// A partial index (`WHERE ...`): a row has an entry only if it satisfies
    /// the predicate.
    pub partial: bool,
    /// Key columns (INCLUDE columns are not stored).
    pub cols: Vec<KeyColumn>,
    /// Table attribute number of each key column (0: an expression).
    pub heap_attnums: Vec<i16>,
    /// No expressions: keys come straight from the row's attributes.
    pub simple: bool,
    /// Keys start with a hash of the first column (secondary indexes always; the
    /// primary key when the table is hash-sharded).
    pub hashed: bool,
}

#[derive(Debug)]
pub struct TableMeta {
    /// Unique per metadata build (identity that survives address reuse).
    pub generation: u64,
    pub relid: u32,
    /// The file node the metadata was built for (its storage table's name is made
    /// from it; a rewrite or TRUNCATE gives the relation a new one).
    pub relnode: u32,
    pub storage: String,
    pub hashed: bool,
    pub pk: Option<Rc<IndexMeta>>,
    pub secondary: Vec<Rc<IndexMeta>>,
    /// GIN and hash indexes, stored by Pinax as inverted indexes
    /// (`am/index/inverted/`).
    pub inverted: Vec<Rc<crate::am::index::inverted::InvertedMeta>>,
    /// Indexes of other access methods (GiST, SP-GiST, BRIN; GIN and hash ones
    /// whose keys Pinax cannot store, and those built before Pinax stored them):
    /// kept in the catalog, not stored nor used (`am/index/other.rs`).
    pub others: Vec<u32>,
    /// Some secondary or hash index is an exclusion constraint's: rows written are
    /// remembered with their TIDs for its checks (`Backend::note_excl_row`).
    pub exclusion: bool,
    /// Some secondary index is a deferrable unique constraint's: the versions
    /// its rows' updates and deletes replace are tracked by row key
    /// (`TidMap::track_rows`) for the constraint's recheck.
    pub deferrable_unique: bool,
    /// What an update of some columns adds to what it depends on (made on first
    /// use by `am/table/modify.rs`; DDL changing indexes or constraints invalidates the
    /// whole entry).
    pub patch_rules: std::cell::OnceCell<Option<PatchRules>>,
}

/// Columns that go together for column-level conflicts (attribute numbers,
/// ascending): an update changing one depends on all.
#[derive(Debug)]
pub struct PatchRules {
    /// Every column of any index (expressions and predicates included).
    pub indexed: Vec<u16>,
    /// Each CHECK constraint's columns.
    pub checks: Vec<Vec<u16>>,
    /// The columns not in the primary key (dropped ones left out): an update
    /// depending on all of them conflicts with every other update of the row,
    /// and is written whole.
    pub non_key: Vec<u16>,
}

thread_local! {
    static TABLES: RefCell<HashMap<u32, Rc<TableMeta>>> = RefCell::new(HashMap::new());
    /// Storage table name → OID of the unique index whose keys it holds (error messages).
    static OWNERS: RefCell<HashMap<String, u32>> = RefCell::new(HashMap::new());
    static AM_OID: RefCell<Option<u32>> = const { RefCell::new(None) };
    static GENERATION: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Relcache invalidation of `relid` (0: all, `hooks/relcache.rs`): forget
/// cached metadata.
pub fn forget(relid: u32) {
    TABLES.with(|t| {
        let mut t = t.borrow_mut();
        if relid == 0 {
            t.clear();
        } else {
            // An index's invalidation also concerns its table's metadata.
            t.retain(|k, m| {
                *k != relid
                    && !m.secondary.iter().any(|i| i.oid == relid)
                    && m.pk.as_ref().is_none_or(|p| p.oid != relid)
                    && !m.inverted.iter().any(|i| i.oid == relid)
                    && !m.others.contains(&relid)
            });
        }
    });
}

/// OID of the `pinax` table access method (0 if the extension is not installed here).
pub fn pinax_am_oid() -> u32 {
    if let Some(o) = AM_OID.with(|a| *a.borrow()) {
        return o;
    }
    // SAFETY: catalog lookup with missing_ok.
    let o = unsafe { pg_sys::get_table_am_oid(c"pinax".as_ptr(), true) }.to_u32();
    if o != 0 {
        AM_OID.with(|a| *a.borrow_mut() = Some(o));
    }
    o
}

/// The `pinax` access method's OID if this backend has looked it up (no catalog
/// access: safe while a transaction aborts). A backend that never looked it up has
/// not touched a Pinax relation.
pub fn pinax_am_oid_cached() -> Option<u32> {
    AM_OID.with(|a| *a.borrow())
}

/// Whether `rel` is a Pinax table.
///
/// # Safety
/// `rel` must be a valid relation.
pub unsafe fn is_pinax_table(rel: pg_sys::Relation) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let r = (*rel).rd_rel;
        (*r).relkind as u8 == pg_sys::RELKIND_RELATION && (*r).relam.to_u32() != 0 && (*r).relam.to_u32() == pinax_am_oid()
    }
}

/// Whether relation `relid` is a Pinax table (false when there is no such relation).
///
/// # Safety
/// In a transaction.
pub unsafe fn is_pinax_relid(relid: pg_sys::Oid) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if relid == pg_sys::InvalidOid {
            return false;
        }
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return false;
        }
        let pinax = is_pinax_table(rel);
        pg_sys::RelationClose(rel);
        pinax
    }
}

/// The relation a statement's RangeVar names, looked up without a lock
/// (InvalidOid when there is none: the statement then reports it itself).
///
/// # Safety
/// `rv` must be a valid RangeVar; in a transaction.
pub unsafe fn relid_named(rv: *mut pg_sys::RangeVar) -> pg_sys::Oid {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { pg_sys::RangeVarGetRelidExtended(rv, pg_sys::NoLock as pg_sys::LOCKMODE, pg_sys::RVROption::RVR_MISSING_OK, None, std::ptr::null_mut()) }
}

/// Describe index relation `idx` of a table sharded by hash (`table_hashed`).
///
/// # Safety
/// `idx` must be a valid, open index relation.
pub unsafe fn index_meta(idx: pg_sys::Relation, table_hashed: bool) -> IndexMeta {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let ind = (*idx).rd_index;
        let nkey = (*ind).indnkeyatts as usize;
        let desc = (*idx).rd_att;
        let mut cols = Vec::with_capacity(nkey);
        let mut heap_attnums = Vec::with_capacity(nkey);
        let indkey = (*ind).indkey.values.as_slice(nkey);
        for (i, &heap_att) in indkey.iter().enumerate() {
            let att = (*desc).attrs.as_ptr().add(i);
            let coll = *(*idx).rd_indcollation.add(i);
            let opt = *(*idx).rd_indoption.add(i);
            cols.push(KeyColumn::new((*att).atttypid.to_u32(), (*att).atttypmod, coll.to_u32(), opt));
            heap_attnums.push(heap_att);
        }
        let is_pk = (*ind).indisprimary;
        let db = pg_sys::MyDatabaseId.to_u32();
        IndexMeta {
            oid: (*idx).rd_id.to_u32(),
            storage: index_storage_name(db, (*idx).rd_node.relNode.to_u32()),
            is_pk,
            unique: (*ind).indisunique,
            deferrable: (*ind).indisunique && !(*ind).indimmediate,
            nulls_not_distinct: (*ind).indnullsnotdistinct,
            exclusion: (*ind).indisexclusion,
            partial: is_partial(idx),
            simple: heap_attnums.iter().all(|a| *a != 0),
            cols,
            heap_attnums,
            hashed: if is_pk { table_hashed } else { true },
        }
    }
}

/// Metadata of Pinax table `rel` (cached).
///
/// # Safety
/// `rel` must be a valid, open Pinax table.
pub unsafe fn table_meta(rel: pg_sys::Relation) -> Result<Rc<TableMeta>, ClientError> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let relid = (*rel).rd_id.to_u32();
        let relnode = (*rel).rd_node.relNode.to_u32();
        // Checked by file node: no storage name formatted per call (this runs several
        // times per statement).
        if let Some(m) = TABLES.with(|t| t.borrow().get(&relid).cloned()) {
            if m.relnode == relnode {
                return Ok(m);
            }
        }
        let storage = table_storage_name(pg_sys::MyDatabaseId.to_u32(), relnode);
        let info = state::with(|b| b.client())?.table(&storage)?;
        let hashed = matches!(info.sharding, Sharding::Hash { .. });
        let list = pg_sys::RelationGetIndexList(rel);
        let pk_oid = (*rel).rd_pkindex.to_u32();
        let mut pk = None;
        let mut secondary = Vec::new();
        let mut others = Vec::new();
        let mut inverted = Vec::new();
        if !list.is_null() {
            for oid in list_oids(list) {
                let idx = pg_sys::index_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
                let valid = (*(*idx).rd_index).indisvalid || (*(*idx).rd_index).indisready;
                let is_btree = (*(*idx).rd_rel).relam.to_u32() == pg_sys::BTREE_AM_OID.to_u32();
                if !is_btree {
                    let described = crate::am::index::inverted::describe(idx).ok();
                    pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
                    // Stored only if its storage exists: an index built before Pinax
                    // stored its method has none, and stays kept-not-used.
                    let stored = match &described {
                        Some(im) => match state::with(|b| b.client())?.table(&im.storage) {
                            Ok(_) => true,
                            Err(e) if e.code() == pinax_common::ErrorCode::TableNotFound => false,
                            Err(e) => return Err(e),
                        },
                        None => false,
                    };
                    match described {
                        Some(im) if stored => {
                            if valid {
                                inverted.push(Rc::new(im));
                            }
                        }
                        _ => others.push(oid.to_u32()),
                    }
                    continue;
                }
                let m = index_meta(idx, hashed);
                pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
                if !valid {
                    continue;
                }
                if oid.to_u32() == pk_oid && m.is_pk {
                    pk = Some(Rc::new(m));
                } else {
                    if m.unique {
                        OWNERS.with(|o| o.borrow_mut().insert(m.storage.clone(), m.oid));
                    }
                    secondary.push(Rc::new(m));
                }
            }
            pg_sys::list_free(list);
        }
        if let Some(p) = &pk {
            OWNERS.with(|o| o.borrow_mut().insert(storage.clone(), p.oid));
        }
        let generation = GENERATION.with(|g| {
            g.set(g.get() + 1);
            g.get()
        });
        let exclusion = secondary.iter().any(|i| i.exclusion) || inverted.iter().any(|i| i.exclusion);
        let deferrable_unique = secondary.iter().any(|i| i.deferrable);
        let meta = Rc::new(TableMeta {
            generation,
            relid,
            relnode,
            storage,
            hashed,
            pk,
            secondary,
            inverted,
            others,
            exclusion,
            deferrable_unique,
            patch_rules: std::cell::OnceCell::new(),
        });
        TABLES.with(|t| t.borrow_mut().insert(relid, meta.clone()));
        Ok(meta)
    }
}

/// The unique index whose keys storage table `storage` holds, if known.
pub fn owner_of(storage: &str) -> Option<u32> {
    OWNERS.with(|o| o.borrow().get(storage).copied())
}

/// The primary-key row key of the row in `slot` (attributes must be deformed).
///
/// # Safety
/// `slot` must hold a row of the table `pk` belongs to.
pub unsafe fn pk_key(pk: &IndexMeta, slot: *mut pg_sys::TupleTableSlot) -> Vec<u8> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { build_key(&pk.cols, &column_values(&pk.heap_attnums, slot), pk.hashed) }
}

/// The values of table columns `attnums` (1-based) of the deformed row in `slot`.
///
/// # Safety
/// `slot` must be a valid slot.
pub unsafe fn column_values(attnums: &[i16], slot: *mut pg_sys::TupleTableSlot) -> Vec<(pg_sys::Datum, bool)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        attnums
            .iter()
            .map(|a| {
                let i = (*a - 1) as usize;
                (*(*slot).tts_values.add(i), *(*slot).tts_isnull.add(i))
            })
            .collect()
    }
}

/// The key of secondary index `im` for the row in `slot` whose row key is `row_key`.
/// `values` are the index column values when the caller has them (aminsert).
///
/// # Safety
/// `slot` must hold a deformed row of the index's table.
pub unsafe fn secondary_key(im: &IndexMeta, slot: *mut pg_sys::TupleTableSlot, values: Option<&[(pg_sys::Datum, bool)]>, row_key: &[u8]) -> Vec<u8> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { secondary_entry(im, slot, values, row_key).0 }
}

/// [`secondary_key`], and whether the entry is enforced-unique (its key holds no
/// row key: [`enforced_unique`]).
///
/// # Safety
/// As [`secondary_key`].
pub unsafe fn secondary_entry(im: &IndexMeta, slot: *mut pg_sys::TupleTableSlot, values: Option<&[(pg_sys::Datum, bool)]>, row_key: &[u8]) -> (Vec<u8>, bool) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let owned;
        let vals: &[(pg_sys::Datum, bool)] = match values {
            Some(v) => v,
            None => {
                owned = index_values(im, slot);
                &owned
            }
        };
        let mut k = build_key(&im.cols, vals, true);
        let enforced = enforced_unique(im, vals);
        if !enforced {
            k.extend_from_slice(row_key);
        }
        (k, enforced)
    }
}

/// Whether the entry for these values is unique-enforced (its key has no row key).
pub fn enforced_unique(im: &IndexMeta, vals: &[(pg_sys::Datum, bool)]) -> bool {
    im.unique && (im.nulls_not_distinct || !vals.iter().any(|(_, n)| *n))
}

/// Compute index `im`'s key column values for the row in `slot` (expressions
/// evaluated with `FormIndexDatum`).
///
/// # Safety
/// `slot` must hold a deformed row of the index's table.
pub unsafe fn index_values(im: &IndexMeta, slot: *mut pg_sys::TupleTableSlot) -> Vec<(pg_sys::Datum, bool)> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if im.simple {
            return column_values(&im.heap_attnums, slot);
        }
        row_index_values(im.oid, false, slot).unwrap_or_default()
    }
}

/// Whether index `im` has an entry for the row in `slot`: a partial index's
/// predicate holds on it.
///
/// # Safety
/// `slot` must hold a deformed row of the index's table.
pub unsafe fn row_in_index(im: &IndexMeta, slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { !im.partial || row_index_values(im.oid, true, slot).is_some() }
}

/// Index `oid`'s column values for the row in `slot` (expressions evaluated with
/// `FormIndexDatum`, pass-by-reference results copied to the current memory
/// context); with `check_predicate`, None when the index is partial and the row
/// fails its predicate.
///
/// # Safety
/// `slot` must hold a deformed row of the index's table.
pub unsafe fn row_index_values(oid: u32, check_predicate: bool, slot: *mut pg_sys::TupleTableSlot) -> Option<Vec<(pg_sys::Datum, bool)>> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let idx = pg_sys::index_open(pg_sys::Oid::from(oid), pg_sys::NoLock as pg_sys::LOCKMODE);
        let ii = pg_sys::BuildIndexInfo(idx);
        let estate = pg_sys::CreateExecutorState();
        let econtext = pg_sys::MakePerTupleExprContext(estate);
        (*econtext).ecxt_scantuple = slot;
        if check_predicate && !(*ii).ii_Predicate.is_null() {
            let pred = pg_sys::ExecPrepareQual((*ii).ii_Predicate, estate);
            if !crate::am::index::exec_qual(pred, econtext) {
                pg_sys::FreeExecutorState(estate);
                pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
                return None;
            }
        }
        let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
        let mut isnull = [false; pg_sys::INDEX_MAX_KEYS as usize];
        pg_sys::FormIndexDatum(ii, slot, estate, values.as_mut_ptr(), isnull.as_mut_ptr());
        let n = (*(*idx).rd_index).indnkeyatts as usize;
        // Copy pass-by-reference results out of the executor state before freeing it.
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let v = if isnull[i] {
                values[i]
            } else {
                let att = (*(*idx).rd_att).attrs.as_ptr().add(i);
                datum_copy(values[i], (*att).attbyval, (*att).attlen)
            };
            out.push((v, isnull[i]));
        }
        pg_sys::FreeExecutorState(estate);
        pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
        Some(out)
    }
}

/// Whether index `idx` is partial (has a predicate).
///
/// # Safety
/// `idx` must be a valid, open index relation.
pub unsafe fn is_partial(idx: pg_sys::Relation) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { !pg_sys::heap_attisnull((*idx).rd_indextuple, pg_sys::Anum_pg_index_indpred as i32, std::ptr::null_mut()) }
}

/// Record that storage table `storage` holds the keys of unique index `oid`.
pub fn register_owner(storage: &str, oid: u32) {
    OWNERS.with(|o| o.borrow_mut().insert(storage.to_string(), oid));
}

/// `datumCopy`: a copy of a datum in the current memory context.
///
/// # Safety
/// `v` must be a valid datum of a type with the given length and passing.
pub unsafe fn datum_copy(v: pg_sys::Datum, byval: bool, len: i16) -> pg_sys::Datum {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if byval {
            return v;
        }
        let n = match len {
            -1 => pgrx::varlena::varsize_any(v.cast_mut_ptr()),
            -2 => std::ffi::CStr::from_ptr(v.cast_mut_ptr::<std::ffi::c_char>()).to_bytes().len() + 1,
            n => n as usize,
        };
        let p = pg_sys::palloc(n) as *mut u8;
        std::ptr::copy_nonoverlapping(v.cast_mut_ptr::<u8>(), p, n);
        pg_sys::Datum::from(p)
    }
}

/// Raise PostgreSQL's error unless the current user owns relation `relid`.
///
/// # Safety
/// In a transaction.
pub(crate) unsafe fn check_owner(relid: pg_sys::Oid) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !pg_sys::pg_class_ownercheck(relid, pg_sys::GetUserId()) {
            let kind = pg_sys::get_relkind_objtype(pg_sys::get_rel_relkind(relid));
            pg_sys::aclcheck_error(pg_sys::AclResult::ACLCHECK_NOT_OWNER, kind, pg_sys::get_rel_name(relid));
        }
    }
}
