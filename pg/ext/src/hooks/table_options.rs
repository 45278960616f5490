//! `ALTER TABLE … SET (pinax.auto_split = on | off)` and `ALTER TABLE … RESET
//! (pinax.auto_split)` on Pinax tables (from the utility hook).
//!
//! A Pinax table's options live with its storage tables in the master's
//! catalog (`TableInfo::options`), not in `pg_class.reloptions` (PostgreSQL
//! 15 has no way for a table access method to accept options of its own:
//! `heap_reloptions` would refuse the `pinax` namespace). So the utility hook
//! takes the `pinax.*` options out of the statement before PostgreSQL sees it
//! (an emptied `SET (…)` goes with them; PostgreSQL runs what is left, or
//! nothing, taking its lock), checks that the user owns the table, and the
//! change is sent to the master as the transaction commits: for the table's
//! storage and every one of its indexes' (an index follows its table). It is
//! undone with a transaction or subtransaction that aborts, as PostgreSQL's
//! own `SET (…)` is. Other SQL nodes replaying the statement do nothing: the
//! catalog is the cluster's. `pinax_tablets` shows the setting.
//!
//! Only `pinax.auto_split` can change after CREATE TABLE; the layout options
//! (`sharding`, `tablets`, `split_at`) cannot (0A000: split tablets instead).

use crate::error::{self, OrRaise};
use crate::meta;
use pgrx::{pg_sys, PgSqlErrorCode};
use pinax_proto::TableOptions;
use std::cell::RefCell;
use std::ffi::CStr;

/// An option change waiting for its transaction to commit.
struct Pending {
    /// The transaction nesting level that made it.
    level: i32,
    storage: String,
    options: TableOptions,
}

thread_local! {
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
}

/// A boolean option value as PostgreSQL reads one (`parse_bool`: on, off,
/// true, false, yes, no, 1, 0 and their prefixes; no value means true).
pub fn parse_bool(name: &str, v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let c = std::ffi::CString::new(v).unwrap_or_default();
    let mut out = false;
    // SAFETY: `c` is a valid C string; `out` a valid bool to write.
    if unsafe { pg_sys::parse_bool(c.as_ptr(), &mut out) } {
        return out;
    }
    error::raise_with(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("invalid value for boolean option \"pinax.{name}\": {v}"), None)
}

/// What an `ALTER TABLE` asks of a Pinax table's options (taken out of it).
#[derive(Default)]
pub struct Plan {
    change: Option<(pg_sys::Oid, bool)>,
}

/// Take the `pinax.*` options out of `ALTER TABLE`'s `SET (…)` and `RESET (…)`
/// commands of utility statement `*pstmt` when it alters a Pinax table (copying
/// the statement first when `*read_only` says it may not be changed), to be
/// recorded by [`apply`].
///
/// # Safety
/// `*pstmt` must be a valid planned utility statement; in a transaction.
pub unsafe fn plan(pstmt: &mut *mut pg_sys::PlannedStmt, read_only: &mut bool) -> Plan {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let node = (**pstmt).utilityStmt;
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_AlterTableStmt {
            return Plan::default();
        }
        let stmt = node as *mut pg_sys::AlterTableStmt;
        let is_options = |c: *mut pg_sys::AlterTableCmd| {
            matches!((*c).subtype, pg_sys::AlterTableType::AT_SetRelOptions | pg_sys::AlterTableType::AT_ResetRelOptions)
                && crate::pg_list::list_ptrs::<pg_sys::DefElem>((*c).def.cast())
                    .iter()
                    .any(|&d| !(*d).defnamespace.is_null() && CStr::from_ptr((*d).defnamespace).to_bytes() == b"pinax")
        };
        if (*stmt).relation.is_null() || !crate::pg_list::list_ptrs::<pg_sys::AlterTableCmd>((*stmt).cmds).into_iter().any(is_options) {
            return Plan::default();
        }
        let relid = meta::relid_named((*stmt).relation);
        if relid == pg_sys::InvalidOid {
            return Plan::default(); // PostgreSQL says what is wrong (IF EXISTS, no such table)
        }
        let kind = pg_sys::get_rel_relkind(relid) as u8;
        if kind == pg_sys::RELKIND_INDEX && meta::is_pinax_relid(pg_sys::IndexGetRelation(relid, true)) {
            error::not_supported("pinax.* options are set on the table: its indexes follow it");
        }
        if !meta::is_pinax_relid(relid) {
            return Plan::default(); // PostgreSQL refuses the pinax namespace
        }
        if *read_only {
            *pstmt = pg_sys::copyObjectImpl((*pstmt).cast()) as *mut pg_sys::PlannedStmt;
            *read_only = false;
        }
        let stmt = (**pstmt).utilityStmt as *mut pg_sys::AlterTableStmt;
        let mut auto_split = None;
        let mut keep_cmds: *mut pg_sys::List = std::ptr::null_mut();
        for cmd in crate::pg_list::list_ptrs::<pg_sys::AlterTableCmd>((*stmt).cmds) {
            if !is_options(cmd) {
                keep_cmds = pg_sys::lappend(keep_cmds, cmd.cast());
                continue;
            }
            let reset = (*cmd).subtype == pg_sys::AlterTableType::AT_ResetRelOptions;
            let mut keep_defs: *mut pg_sys::List = std::ptr::null_mut();
            for d in crate::pg_list::list_ptrs::<pg_sys::DefElem>((*cmd).def.cast()) {
                if (*d).defnamespace.is_null() || CStr::from_ptr((*d).defnamespace).to_bytes() != b"pinax" {
                    keep_defs = pg_sys::lappend(keep_defs, d.cast());
                    continue;
                }
                let name = CStr::from_ptr((*d).defname).to_string_lossy().into_owned();
                match name.as_str() {
                    "auto_split" if reset => auto_split = Some(true),
                    "auto_split" => {
                        let v = if (*d).arg.is_null() { String::new() } else { CStr::from_ptr(pg_sys::defGetString(d)).to_string_lossy().into_owned() };
                        auto_split = Some(parse_bool("auto_split", &v));
                    }
                    "sharding" | "tablets" | "split_at" => error::not_supported(format!(
                        "pinax.{name} cannot be changed after CREATE TABLE (split tablets with pinax_split_tablet, or create a new table)"
                    )),
                    _ => error::raise_with(
                        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                        format!("unrecognized parameter \"pinax.{name}\""),
                        Some("The Pinax table parameter that ALTER TABLE changes is pinax.auto_split.".into()),
                    ),
                }
            }
            if !keep_defs.is_null() {
                (*cmd).def = keep_defs.cast();
                keep_cmds = pg_sys::lappend(keep_cmds, cmd.cast());
            }
        }
        // PostgreSQL runs what else the statement asks (nothing is fine: an ALTER
        // TABLE without commands takes its lock, fires event triggers, and ends).
        (*stmt).cmds = keep_cmds;
        Plan { change: auto_split.map(|a| (relid, a)) }
    }
}

/// Record the change [`plan`] took out of its statement, once that ran: the
/// table's owner only; sent to the master at commit ([`at_commit`]).
///
/// # Safety
/// In the transaction of the statement [`plan`] was given.
pub unsafe fn apply(plan: &Plan) {
    let Some((relid, auto_split)) = plan.change else {
        return;
    };
    if crate::ddl::replaying() {
        return; // the origin node changed the catalog
    }
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        // The lock PostgreSQL takes for SET (storage parameter).
        let rel = pg_sys::relation_open(relid, pg_sys::ShareUpdateExclusiveLock as pg_sys::LOCKMODE);
        meta::check_owner(relid);
        let m = meta::table_meta(rel).or_raise();
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        let level = pg_sys::GetCurrentTransactionNestLevel();
        let storages =
            std::iter::once(m.storage.clone()).chain(m.secondary.iter().map(|i| i.storage.clone())).chain(m.inverted.iter().map(|i| i.storage.clone()));
        PENDING.with(|p| p.borrow_mut().extend(storages.map(|storage| Pending { level, storage, options: TableOptions { auto_split } })));
    }
}

/// Before the transaction commits: send the changes to the master (an error
/// aborts the transaction).
pub fn at_commit() {
    let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    if pending.is_empty() {
        return;
    }
    let client = crate::state::with(|b| b.client()).or_raise();
    for p in pending {
        client.set_table_options(&p.storage, p.options).or_raise();
    }
}

/// Whether the transaction has changes to send.
pub fn any_pending() -> bool {
    PENDING.with(|p| !p.borrow().is_empty())
}

/// The transaction aborted: nothing changes.
pub fn at_abort() {
    PENDING.with(|p| p.borrow_mut().clear());
}

/// A subtransaction at nesting level `level` committed: its changes are its
/// parent's.
pub fn subxact_committed(level: i32) {
    PENDING.with(|p| p.borrow_mut().iter_mut().filter(|c| c.level >= level).for_each(|c| c.level = level - 1));
}

/// A subtransaction at nesting level `level` aborted: its changes go with it.
pub fn subxact_aborted(level: i32) {
    PENDING.with(|p| p.borrow_mut().retain(|c| c.level < level));
}
