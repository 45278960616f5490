//! object_access_hook: when a Pinax table or an index of one is dropped, its storage
//! table is freed after the transaction commits (kept if it aborts).

use crate::meta;
use crate::state::{self, index_storage_name, table_storage_name};
use pgrx::pg_guard;
use pgrx::pg_sys;
use std::sync::OnceLock;

static PREV: OnceLock<pg_sys::object_access_hook_type> = OnceLock::new();

/// Install the hook (once, from `_PG_init`).
///
/// # Safety
/// Only while loading shared_preload_libraries in the postmaster.
pub unsafe fn install() {
    let _ = PREV.set(pg_sys::object_access_hook);
    pg_sys::object_access_hook = Some(object_access);
}

/// (relkind, relam, relfilenode) of relation `oid`.
unsafe fn class_info(oid: pg_sys::Oid) -> Option<(u8, u32, u32)> {
    let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as i32, pg_sys::Datum::from(oid));
    if tup.is_null() {
        return None;
    }
    let form = pg_sys::GETSTRUCT(tup) as pg_sys::Form_pg_class;
    let r = ((*form).relkind as u8, (*form).relam.to_u32(), (*form).relfilenode.to_u32());
    pg_sys::ReleaseSysCache(tup);
    Some(r)
}

unsafe fn index_table(oid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::INDEXRELID as i32, pg_sys::Datum::from(oid));
    if tup.is_null() {
        return None;
    }
    let form = pg_sys::GETSTRUCT(tup) as pg_sys::Form_pg_index;
    let t = (*form).indrelid;
    pg_sys::ReleaseSysCache(tup);
    Some(t)
}

#[pg_guard]
unsafe extern "C-unwind" fn object_access(access: pg_sys::ObjectAccessType::Type, class_id: pg_sys::Oid, object_id: pg_sys::Oid, sub_id: i32, arg: *mut std::ffi::c_void) {
    if let Some(prev) = PREV.get().copied().flatten() {
        prev(access, class_id, object_id, sub_id, arg);
    }
    if access != pg_sys::ObjectAccessType::OAT_DROP || class_id != pg_sys::RelationRelationId || sub_id != 0 {
        return;
    }
    let am = meta::pinax_am_oid();
    if am == 0 {
        return;
    }
    let Some((kind, relam, node)) = class_info(object_id) else { return };
    let db = pg_sys::MyDatabaseId.to_u32();
    if kind == pg_sys::RELKIND_RELATION && relam == am {
        state::with(|b| b.on_commit_drop.push(table_storage_name(db, node)));
    } else if kind == pg_sys::RELKIND_INDEX && relam == pg_sys::BTREE_AM_OID.to_u32() {
        if let Some(t) = index_table(object_id) {
            if class_info(t).is_some_and(|(k, a, _)| k == pg_sys::RELKIND_RELATION && a == am) {
                state::with(|b| b.on_commit_drop.push(index_storage_name(db, node)));
            }
        }
    }
}
