//! `pinax_tablets(regclass)`: where a Pinax table's rows and its indexes'
//! entries are, one row per tablet (the table's tablets, then each secondary
//! index's): key interval, leader, replicas, approximate size and whether the
//! master splits them by itself (`pinax.auto_split`).
//! `pinax_split_tablet(regclass [, at])`: split one of a table's (or an
//! index's) tablets, online (`Request::SplitTablet`, driven by the master).
//!
//! The C function `pinax_tablets_json` builds a JSON array (the catalog's
//! placement from the master, each tablet's size and leader from a replica of
//! it: `Request::TabletStats`); the SQL function of that name expands it
//! (`jsonb_to_recordset`), so the set-returning part is PostgreSQL's own.
//! Keys are shown in hex (a hash-sharded tablet's bounds are hash prefixes).
//! A tablet no replica answered for has NULL leader and size.

use crate::error::{self, OrRaise};
use crate::meta;
use crate::sequence::rel_name;
use crate::state;
use pgrx::{pg_guard, pg_sys, PgSqlErrorCode};
use pinax_proto::{Request, Response, TableInfo};
use std::fmt::Write as _;

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::with_capacity(b.len() * 2), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// Tablet `ti`'s approximate size and leader's address, from the first of its
/// replicas (the leader first) that answers.
fn tablet_stats(client: &pinax_client::Client, ti: &pinax_proto::TabletInfo) -> Option<(u64, Option<String>)> {
    ti.replicas.iter().chain(std::iter::once(&ti.leader)).rev().find_map(|addr| match client.call_at(addr, Request::TabletStats { tablet: ti.id }) {
        Ok(Response::TabletStats { approximate_bytes, leader, .. }) => Some((approximate_bytes, leader.map(|l| l.1))),
        _ => None,
    })
}

/// `s` as a `text` datum.
///
/// # Safety
/// In a backend (palloc).
unsafe fn text_datum(s: &str) -> pg_sys::Datum {
    let c = std::ffi::CString::new(s).unwrap_or_default();
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe { pg_sys::Datum::from(pg_sys::cstring_to_text(c.as_ptr())) }
}

/// One JSON object per tablet of storage table `t`, for relation `relid`.
fn tablet_rows(out: &mut Vec<String>, relid: u32, t: &TableInfo, client: &pinax_client::Client) {
    for ti in &t.tablets {
        let (bytes, leader) = match tablet_stats(client, ti) {
            Some((b, l)) => (b.to_string(), l.map_or("null".into(), |l| json_str(&l))),
            None => ("null".into(), "null".into()),
        };
        let end = ti.partition.end.as_deref().map_or("null".into(), |e| json_str(&hex(e)));
        let replicas = ti.replicas.iter().map(|r| json_str(r)).collect::<Vec<_>>().join(",");
        out.push(format!(
            "{{\"relation\":{relid},\"tablet\":{},\"start_key\":{},\"end_key\":{end},\"leader\":{leader},\"replicas\":[{replicas}],\"approximate_bytes\":{bytes},\"auto_split\":{}}}",
            ti.id.0,
            json_str(&hex(&ti.partition.start)),
            t.options.auto_split,
        ));
    }
}

/// `pinax_tablets_json(regclass)`.
///
/// # Safety
/// Called only by PostgreSQL, by the function manager, as the C function of its
/// SQL function, with a valid `fcinfo`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn pinax_tablets_json(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let relid = pg_sys::Oid::from((*fcinfo).args.as_slice(1)[0].value.value() as u32);
        if !meta::is_pinax_relid(relid) {
            error::raise_with(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, format!("\"{}\" is not a Pinax table", rel_name(relid)), None);
        }
        let rel = pg_sys::relation_open(relid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let m = meta::table_meta(rel).or_raise();
        pg_sys::relation_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let client = state::with(|b| b.client()).or_raise();
        let mut rows = Vec::new();
        let table = client.refresh_table(&m.storage).or_raise();
        tablet_rows(&mut rows, m.relid, &table, &client);
        let indexes = m.secondary.iter().map(|i| (i.oid, &i.storage)).chain(m.inverted.iter().map(|i| (i.oid, &i.storage)));
        for (oid, storage) in indexes {
            let t = client.refresh_table(storage).or_raise();
            tablet_rows(&mut rows, oid, &t, &client);
        }
        text_datum(&format!("[{}]", rows.join(",")))
    }
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_tablets_json() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The storage table of relation `relid` (a Pinax table, or a Pinax-stored
/// index of one), and how to make a split key from a value of its first key
/// column: that column's encoding and whether keys are hash-prefixed (None:
/// keys not made from values, a table without a primary key or a GIN index).
///
/// # Safety
/// In a transaction.
unsafe fn split_target(relid: pg_sys::Oid) -> (String, Option<(crate::keys::KeyColumn, bool)>) {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let is_index = pg_sys::get_rel_relkind(relid) as u8 == pg_sys::RELKIND_INDEX;
        let heap = if is_index { pg_sys::IndexGetRelation(relid, false) } else { relid };
        if !meta::is_pinax_relid(heap) {
            error::raise_with(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, format!("\"{}\" is not a Pinax table or an index of one", rel_name(relid)), None);
        }
        meta::check_owner(heap);
        let rel = pg_sys::relation_open(heap, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let m = meta::table_meta(rel).or_raise();
        pg_sys::relation_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let oid = relid.to_u32();
        if !is_index || m.pk.as_ref().is_some_and(|pk| pk.oid == oid) {
            return (m.storage.clone(), m.pk.as_ref().map(|pk| (pk.cols[0], m.hashed)));
        }
        if let Some(im) = m.secondary.iter().find(|i| i.oid == oid) {
            return (im.storage.clone(), Some((im.cols[0], true)));
        }
        if let Some(iv) = m.inverted.iter().find(|i| i.oid == oid) {
            return (iv.storage.clone(), None);
        }
        error::raise_with(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, format!("index \"{}\" is not stored by Pinax", rel_name(relid)), None);
    }
}

/// `pinax_split_tablet_json(regclass, text)`: split the tablet of the relation
/// holding key `at` (a value of its first key column, as `pinax.split_at`
/// takes them; a hash-sharded relation splits its hash range at the value's
/// hash) there, or without `at` its largest tablet (by approximate size) at
/// its approximate middle key. Returns the halves' tablet ids, a JSON array.
///
/// # Safety
/// Called only by PostgreSQL, by the function manager, as the C function of its
/// SQL function, with a valid `fcinfo`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn pinax_split_tablet_json(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls this as documented (# Safety).
    unsafe {
        let args = (*fcinfo).args.as_slice(2);
        if args[0].isnull {
            error::raise_with(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, "the relation to split must not be NULL", None);
        }
        let relid = pg_sys::Oid::from(args[0].value.value() as u32);
        let at_text = (!args[1].isnull).then(|| std::ffi::CStr::from_ptr(pg_sys::text_to_cstring(args[1].value.cast_mut_ptr())).to_owned());
        let (storage, key) = split_target(relid);
        let at = match (at_text, key) {
            (None, _) => None,
            (Some(_), None) => error::raise_with(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "this relation's keys are not made from column values: split it without a key (at its middle)",
                None,
            ),
            (Some(text), Some((col, hashed))) => {
                let mut in_func = pg_sys::Oid::from(0u32);
                let mut ioparam = pg_sys::Oid::from(0u32);
                pg_sys::getTypeInputInfo(pg_sys::Oid::from(col.typid), &mut in_func, &mut ioparam);
                let d = pg_sys::OidInputFunctionCall(in_func, text.as_ptr() as *mut _, ioparam, -1);
                let mut k = Vec::new();
                col.encode(&mut k, d, false);
                if hashed {
                    let mut h = Vec::with_capacity(2);
                    pinax_codec::hash::encode_hash_prefix(&mut h, pinax_codec::hash::hash16(&k));
                    k = h;
                }
                Some(k)
            }
        };
        let client = state::with(|b| b.client()).or_raise();
        let t = client.refresh_table(&storage).or_raise();
        let tablet = match &at {
            Some(k) => t.tablets[t.tablet_index_for(k)].id,
            None => {
                // The largest (the first of equals).
                let mut best = (t.tablets[0].id, None);
                for ti in &t.tablets {
                    let s = tablet_stats(&client, ti).map(|(bytes, _)| bytes);
                    if s > best.1 {
                        best = (ti.id, s);
                    }
                }
                best.0
            }
        };
        let answer = match client.call(Request::SplitTablet { tablet, at }) {
            // A key the tablet cannot split at (outside its interior, no middle
            // to find): the caller's argument.
            Err(pinax_client::ClientError::Rpc(e)) if e.code == pinax_common::ErrorCode::InvalidRequest => {
                error::raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("cannot split: {}", e.message), None)
            }
            other => other.or_raise(),
        };
        let children = match answer {
            Response::Split { children, .. } => children,
            other => error::raise_with(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("pinax: unexpected answer to a split: {other:?}"), None),
        };
        let _ = client.refresh_table(&storage);
        text_datum(&format!("[{}]", children.iter().map(|c| c.id.0.to_string()).collect::<Vec<_>>().join(",")))
    }
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_split_tablet_json() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

pgrx::extension_sql!(
    r#"
CREATE FUNCTION pg_catalog.pinax_split_tablet_json(regclass, text) RETURNS text
    AS 'MODULE_PATHNAME', 'pinax_split_tablet_json' LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION pg_catalog.pinax_split_tablet(rel regclass, at text DEFAULT NULL) RETURNS bigint[]
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT array_agg(x::bigint) FROM jsonb_array_elements_text(pg_catalog.pinax_split_tablet_json(rel, at)::jsonb) AS x $$;
COMMENT ON FUNCTION pg_catalog.pinax_split_tablet(regclass, text) IS 'Pinax: split a tablet of a table or index online: the one holding key value at (of the first key column) there, or the largest at its middle; returns the halves'' tablet ids';
"#,
    name = "pinax_split_tablet",
    requires = ["pinax_tablets"]
);

pgrx::extension_sql!(
    r#"
CREATE FUNCTION pg_catalog.pinax_tablets_json(regclass) RETURNS text
    AS 'MODULE_PATHNAME', 'pinax_tablets_json' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION pg_catalog.pinax_tablets(rel regclass)
    RETURNS TABLE (relation regclass, tablet bigint, start_key text, end_key text, leader text, replicas text[], approximate_bytes bigint, auto_split boolean)
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$
        SELECT t.relation::regclass, t.tablet, t.start_key, t.end_key, t.leader, t.replicas, t.approximate_bytes, t.auto_split
        FROM jsonb_to_recordset(pg_catalog.pinax_tablets_json(rel)::jsonb)
            AS t(relation oid, tablet bigint, start_key text, end_key text, leader text, replicas text[], approximate_bytes bigint, auto_split boolean)
    $$;
COMMENT ON FUNCTION pg_catalog.pinax_tablets(regclass) IS 'Pinax: the tablets of a table and of its indexes (key interval in hex, leader, replicas, approximate bytes on disk, whether the master splits them by itself: pinax.auto_split)';
"#,
    name = "pinax_tablets",
    requires = ["pinax_access_method"]
);
