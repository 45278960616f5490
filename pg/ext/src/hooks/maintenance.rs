//! CLUSTER and VACUUM FULL on Pinax tables (from the utility hook).
//!
//! Both rewrite a table into a new file node to put its rows in an order
//! (CLUSTER) or to give back the space dead rows took (VACUUM FULL). A Pinax
//! table's rows are where their primary key puts them (in key order within each
//! tablet), and storage's compaction drops old versions by itself: there is
//! nothing to rewrite. So, as YugabyteDB does for VACUUM, they leave Pinax
//! tables as they are, with a NOTICE, and do their work on every other table
//! the command names (or, without names, on all of them):
//! - `CLUSTER t [USING i]` of a Pinax table checks what PostgreSQL checks
//!   (ownership, the index is one of the table's) and does nothing more; it does
//!   not mark the index as clustered, so a later bare `CLUSTER` leaves the table
//!   alone too.
//! - `VACUUM (FULL) ...` runs as written on the other tables, and as a plain
//!   VACUUM (ANALYZE if asked for) on the Pinax ones; a partitioned table named
//!   is taken apart into its leaf partitions.

use crate::meta::{self, is_pinax_relid, relid_named};
use pgrx::pg_sys;
use std::ffi::CStr;

unsafe extern "C-unwind" {
    fn find_all_inheritors(parent: pg_sys::Oid, lockmode: pg_sys::LOCKMODE, numparents: *mut *mut pg_sys::List) -> *mut pg_sys::List;
}

fn notice(what: &str, relid: pg_sys::Oid) {
    // SAFETY: a catalog lookup by OID, in a transaction.
    let name = unsafe {
        let p = pg_sys::get_rel_name(relid);
        if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    pgrx::notice!("{what} leaves Pinax table \"{name}\" as it is: its rows are kept in primary-key order in its tablets, and storage compacts away old versions by itself");
}

/// `CLUSTER` of one Pinax table: checked, then nothing to do. True when the
/// statement was handled here (PostgreSQL must not run it).
///
/// # Safety
/// `stmt` must be a valid ClusterStmt; in a transaction.
pub unsafe fn cluster(stmt: *mut pg_sys::ClusterStmt) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if (*stmt).relation.is_null() {
            return false; // every table with a clustered index: never a Pinax one
        }
        let relid = relid_named((*stmt).relation);
        if !is_pinax_relid(relid) {
            return false;
        }
        let rel = pg_sys::table_open(relid, pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE);
        if !pg_sys::pg_class_ownercheck(relid, pg_sys::GetUserId()) {
            pg_sys::aclcheck_error(pg_sys::AclResult::ACLCHECK_NOT_OWNER, pg_sys::ObjectType::OBJECT_TABLE, (*(*stmt).relation).relname);
        }
        if !(*stmt).indexname.is_null() {
            let index = pg_sys::get_relname_relid((*stmt).indexname, (*(*rel).rd_rel).relnamespace);
            let ours = index != pg_sys::InvalidOid && pg_sys::IndexGetRelation(index, true) == relid;
            if !ours {
                let e = pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT;
                let (iname, tname) = (CStr::from_ptr((*stmt).indexname).to_string_lossy(), CStr::from_ptr((*(*stmt).relation).relname).to_string_lossy());
                pgrx::ereport!(ERROR, e, format!("index \"{iname}\" for table \"{tname}\" does not exist"));
            }
        }
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        notice("CLUSTER", relid);
        true
    }
}

/// Whether a VACUUM option list asks for FULL.
///
/// # Safety
/// `options` must be a valid list of DefElem.
unsafe fn wants_full(options: *mut pg_sys::List) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        crate::pg_list::list_ptrs::<pg_sys::DefElem>(options)
            .into_iter()
            .any(|d| CStr::from_ptr((*d).defname).to_bytes() == b"full" && pg_sys::defGetBoolean(d))
    }
}

/// `options` without FULL.
///
/// # Safety
/// As for [`wants_full`].
unsafe fn without_full(options: *mut pg_sys::List) -> *mut pg_sys::List {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let mut out = std::ptr::null_mut();
        for d in crate::pg_list::list_ptrs::<pg_sys::DefElem>(options) {
            if CStr::from_ptr((*d).defname).to_bytes() != b"full" {
                out = pg_sys::lappend(out, d.cast());
            }
        }
        out
    }
}

/// Every relation a database-wide VACUUM would take (tables, materialized
/// views, partitioned tables), by OID, split into Pinax tables and the others.
///
/// # Safety
/// In a transaction.
unsafe fn all_relations() -> (Vec<pg_sys::Oid>, Vec<pg_sys::Oid>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let am = meta::pinax_am_oid();
        let (mut pinax, mut others) = (Vec::new(), Vec::new());
        let pgclass = pg_sys::table_open(pg_sys::RelationRelationId, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let scan = pg_sys::table_beginscan_catalog(pgclass, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let data = (*tuple).t_data;
            let form = (data as *mut u8).add((*data).t_hoff as usize) as *mut pg_sys::FormData_pg_class;
            let kind = (*form).relkind as u8;
            if kind != pg_sys::RELKIND_RELATION && kind != pg_sys::RELKIND_MATVIEW && kind != pg_sys::RELKIND_PARTITIONED_TABLE {
                continue;
            }
            if (*form).relam.to_u32() == am && am != 0 {
                pinax.push((*form).oid);
            } else {
                others.push((*form).oid);
            }
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(pgclass, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        (pinax, others)
    }
}

/// A VacuumRelation of `relid`, as a database-wide VACUUM makes them.
///
/// # Safety
/// In a transaction.
unsafe fn by_oid(relid: pg_sys::Oid, va_cols: *mut pg_sys::List) -> *mut std::ffi::c_void {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { pg_sys::makeVacuumRelation(std::ptr::null_mut(), relid, va_cols).cast() }
}

/// `VACUUM (FULL)`: split into the FULL vacuum of the relations that are not
/// Pinax tables, returned to run first (None if there are none), and `stmt`
/// changed into a plain VACUUM of the Pinax tables (left alone when it takes
/// none).
///
/// # Safety
/// `stmt` must be a valid VacuumStmt (a copy the caller may change); in a
/// transaction.
pub unsafe fn vacuum_full(stmt: *mut pg_sys::VacuumStmt) -> Option<*mut pg_sys::VacuumStmt> {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !(*stmt).is_vacuumcmd || !wants_full((*stmt).options) || meta::pinax_am_oid() == 0 {
            return None;
        }
        // (relation, its column list) for each side.
        let (mut pinax, mut others): (Vec<(pg_sys::Oid, *mut pg_sys::List)>, Vec<*mut std::ffi::c_void>) = (Vec::new(), Vec::new());
        let named = crate::pg_list::list_ptrs::<pg_sys::VacuumRelation>((*stmt).rels);
        if named.is_empty() {
            let (p, o) = all_relations();
            pinax = p.into_iter().map(|r| (r, std::ptr::null_mut())).collect();
            others = o.into_iter().map(|r| by_oid(r, std::ptr::null_mut())).collect();
        } else {
            for vr in named {
                let relid = if (*vr).oid != pg_sys::InvalidOid { (*vr).oid } else { relid_named((*vr).relation) };
                if relid == pg_sys::InvalidOid {
                    others.push(vr.cast()); // PostgreSQL reports it
                    continue;
                }
                if pg_sys::get_rel_relkind(relid) as u8 == pg_sys::RELKIND_PARTITIONED_TABLE {
                    let parts = pg_sys::ffi::pg_guard_ffi_boundary(|| find_all_inheritors(relid, pg_sys::NoLock as pg_sys::LOCKMODE, std::ptr::null_mut()));
                    let (pinax_parts, other_parts): (Vec<pg_sys::Oid>, Vec<pg_sys::Oid>) =
                        crate::pg_list::list_oids(parts).into_iter().partition(|p| is_pinax_relid(*p));
                    if pinax_parts.is_empty() {
                        others.push(vr.cast());
                    } else {
                        // Its partitions one by one, each to its side (the
                        // partitioned tables themselves have nothing to vacuum).
                        pinax.extend(pinax_parts.into_iter().map(|p| (p, (*vr).va_cols)));
                        for p in other_parts {
                            if pg_sys::get_rel_relkind(p) as u8 != pg_sys::RELKIND_PARTITIONED_TABLE {
                                others.push(by_oid(p, (*vr).va_cols));
                            }
                        }
                    }
                } else if is_pinax_relid(relid) {
                    pinax.push((relid, (*vr).va_cols));
                } else {
                    others.push(vr.cast());
                }
            }
        }
        if pinax.is_empty() {
            return None;
        }
        for (relid, _) in &pinax {
            notice("VACUUM FULL", *relid);
        }
        let first = (!others.is_empty()).then(|| {
            let full = pg_sys::copyObjectImpl(stmt.cast()) as *mut pg_sys::VacuumStmt;
            let mut rels = std::ptr::null_mut();
            for r in others {
                rels = pg_sys::lappend(rels, r);
            }
            (*full).rels = rels;
            full
        });
        // The Pinax tables: a plain VACUUM (nothing to do in storage; ANALYZE if asked).
        let mut rels = std::ptr::null_mut();
        for (relid, cols) in pinax {
            rels = pg_sys::lappend(rels, by_oid(relid, cols));
        }
        (*stmt).options = without_full((*stmt).options);
        (*stmt).rels = rels;
        first
    }
}
