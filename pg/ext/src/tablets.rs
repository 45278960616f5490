//! `pinax_tablets(regclass)`: where a Pinax table's rows and its indexes'
//! entries are, one row per tablet (the table's tablets, then each secondary
//! index's): key interval, leader, replicas and approximate size.
//!
//! The C function `pinax_tablets_json` builds a JSON array (the catalog's
//! placement from the master, each tablet's size and leader from a replica of
//! it: `Request::TabletStats`); the SQL function of that name expands it
//! (`jsonb_to_recordset`), so the set-returning part is PostgreSQL's own.
//! Keys are shown in hex (a hash-sharded tablet's bounds are hash prefixes).
//! A tablet no replica answered for has NULL leader and size.

use crate::error::{self, OrRaise};
use crate::meta;
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

/// One JSON object per tablet of storage table `t`, for relation `relid`.
fn tablet_rows(out: &mut Vec<String>, relid: u32, t: &TableInfo, client: &pinax_client::Client) {
    for ti in &t.tablets {
        let stats =
            ti.replicas.iter().chain(std::iter::once(&ti.leader)).rev().find_map(|addr| match client.call_at(addr, Request::TabletStats { tablet: ti.id }) {
                Ok(Response::TabletStats { approximate_bytes, leader, .. }) => Some((approximate_bytes, leader.map(|l| l.1))),
                _ => None,
            });
        let (bytes, leader) = match stats {
            Some((b, l)) => (b.to_string(), l.map_or("null".into(), |l| json_str(&l))),
            None => ("null".into(), "null".into()),
        };
        let end = ti.partition.end.as_deref().map_or("null".into(), |e| json_str(&hex(e)));
        let replicas = ti.replicas.iter().map(|r| json_str(r)).collect::<Vec<_>>().join(",");
        out.push(format!(
            "{{\"relation\":{relid},\"tablet\":{},\"start_key\":{},\"end_key\":{end},\"leader\":{leader},\"replicas\":[{replicas}],\"approximate_bytes\":{bytes}}}",
            ti.id.0,
            json_str(&hex(&ti.partition.start)),
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
            let name = pg_sys::get_rel_name(relid);
            let name = if name.is_null() { relid.to_u32().to_string() } else { std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned() };
            error::raise_with(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, format!("\"{name}\" is not a Pinax table"), None);
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
        let json = format!("[{}]", rows.join(","));
        let c = std::ffi::CString::new(json).unwrap_or_default();
        pg_sys::Datum::from(pg_sys::cstring_to_text(c.as_ptr()))
    }
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_pinax_tablets_json() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

pgrx::extension_sql!(
    r#"
CREATE FUNCTION pg_catalog.pinax_tablets_json(regclass) RETURNS text
    AS 'MODULE_PATHNAME', 'pinax_tablets_json' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION pg_catalog.pinax_tablets(rel regclass)
    RETURNS TABLE (relation regclass, tablet bigint, start_key text, end_key text, leader text, replicas text[], approximate_bytes bigint)
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$
        SELECT t.relation::regclass, t.tablet, t.start_key, t.end_key, t.leader, t.replicas, t.approximate_bytes
        FROM jsonb_to_recordset(pg_catalog.pinax_tablets_json(rel)::jsonb)
            AS t(relation oid, tablet bigint, start_key text, end_key text, leader text, replicas text[], approximate_bytes bigint)
    $$;
COMMENT ON FUNCTION pg_catalog.pinax_tablets(regclass) IS 'Pinax: the tablets of a table and of its indexes (key interval in hex, leader, replicas, approximate bytes on disk)';
"#,
    name = "pinax_tablets",
    requires = ["pinax_access_method"]
);
