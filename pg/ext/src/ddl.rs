//! DDL on every SQL node: each node runs its own PostgreSQL, and their catalogs
//! are kept in step through the cluster's DDL log (kept by the master).
//!
//! - **Capture** (origin node): the utility hook (`hooks/utility.rs`) records each
//!   top-level DDL statement that succeeds, with its SQL text and the storage
//!   tables it created, keyed by relation name (`record_or_replay`). At PRE_COMMIT
//!   the transaction's statements are published as one `DdlEntry`
//!   (`Request::PublishDdl`): the master logs it and has every other live SQL node
//!   replay it before the commit returns. Nodes that could not are named in a
//!   WARNING and catch up from the log (the node daemon replays it every second).
//!   Statements of a rolled-back subtransaction are forgotten with it.
//! - **Replay** (other nodes; the node daemon's session sets `pinax.replaying`): a
//!   relation the statement creates is not given new storage; its storage table
//!   is named another name of the origin's (`Request::AddTableName`), found by
//!   relation name in `pinax.replay_names`. Writes to Pinax tables are dropped
//!   (CREATE TABLE AS, a table rewrite and an index build have written the rows and
//!   entries already on the origin), and nothing replayed is published again.
//! - **Storage names** are per PostgreSQL: `t{db}_{relfilenode}` on node 1 (as
//!   before multi-node SQL), `n{node}_t{db}_{relfilenode}` on the others, so that
//!   two nodes' relations never collide.
//!
//! What is DDL: what `log_statement = ddl` logs, plus TRUNCATE, REINDEX and
//! REFRESH MATERIALIZED VIEW (they give relations new storage); not temporary
//! objects. DDL run by DO blocks, functions and procedures is captured statement by
//! statement (the text each ran: a dynamic statement's as executed). A role's
//! password goes to the log as PostgreSQL's verifier, never as typed
//! ([`loggable_text`]).

use crate::error::{self, OrRaise};
use crate::guc;
use crate::state;
use pgrx::pg_sys;
use pinax_proto::{DdlEntry, DdlStatement, Request, Response};
use std::cell::{Cell, RefCell};
use std::ffi::CStr;

thread_local! {
    /// Id of this PostgreSQL's node (0: not known yet).
    static NODE_ID: Cell<u64> = const { Cell::new(0) };
    /// The statement being captured: storage tables it created so far.
    static CAPTURING: RefCell<Option<Vec<(String, String)>>> = const { RefCell::new(None) };
    /// The transaction's captured statements, with the subtransaction each ran in.
    static STATEMENTS: RefCell<Vec<(u32, DdlStatement)>> = const { RefCell::new(Vec::new()) };
    /// Replay: `pinax.replay_names` as last parsed, and its names not used yet.
    static REPLAY: RefCell<(String, Vec<(String, String)>)> = const { RefCell::new((String::new(), Vec::new())) };
}

/// This PostgreSQL's node id (connects to the node on first use).
fn node_id() -> u64 {
    let id = NODE_ID.with(Cell::get);
    if id != 0 {
        return id;
    }
    let id = state::with(|b| b.client()).or_raise().node_id();
    NODE_ID.with(|c| c.set(id));
    id
}

/// Prefix of this PostgreSQL's storage table (and sequence) names.
pub fn prefix() -> String {
    prefix_of(node_id())
}

fn prefix_of(node: u64) -> String {
    match node {
        1 => String::new(),
        n => format!("n{n}_"),
    }
}

/// [`prefix`] without raising (for transaction-end callbacks, where an error
/// must not be thrown): `None` if the node cannot be reached.
pub fn try_prefix() -> Option<String> {
    let id = NODE_ID.with(Cell::get);
    if id != 0 {
        return Some(prefix_of(id));
    }
    let id = state::with(|b| b.client()).ok()?.node_id();
    NODE_ID.with(|c| c.set(id));
    Some(prefix_of(id))
}

/// Storage table of a Pinax table's file node.
pub fn table_storage_name(db: u32, relnode: u32) -> String {
    storage_names(&prefix(), db, relnode)[0].clone()
}

/// Storage table of a Pinax index's file node.
pub fn index_storage_name(db: u32, relnode: u32) -> String {
    storage_names(&prefix(), db, relnode)[1].clone()
}

/// The storage table names of file node `relnode` with node prefix `prefix`: as
/// a table's, and as an index's.
pub fn storage_names(prefix: &str, db: u32, relnode: u32) -> [String; 2] {
    [format!("{prefix}t{db}_{relnode}"), format!("{prefix}i{db}_{relnode}")]
}

/// Whether this session replays another node's DDL.
pub fn replaying() -> bool {
    guc::replaying()
}

/// `schema.name` of relation `rel`.
///
/// # Safety
/// `rel` must be a valid relation.
pub unsafe fn qualified_name(rel: pg_sys::Relation) -> String {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let r = (*rel).rd_rel;
        let nsp = pg_sys::get_namespace_name((*r).relnamespace);
        let nsp = if nsp.is_null() { String::new() } else { CStr::from_ptr(nsp).to_string_lossy().into_owned() };
        format!("{nsp}.{}", CStr::from_ptr((*r).relname.data.as_ptr()).to_string_lossy())
    }
}

/// Storage for relation `rel`'s new file node, named `name` here. Replaying: make
/// `name` another name of the origin's storage table and return true; false when
/// the caller is to create the storage (not replaying, or the origin's table is
/// gone: the log is replayed after the relation was dropped or truncated there).
/// Not replaying, the storage is recorded for the statement being captured.
///
/// # Safety
/// `rel` must be a valid relation.
pub unsafe fn adopt_or_record(rel: pg_sys::Relation, name: &str) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let Some(existing) = record_or_replay(&qualified_name(rel), name) else {
            return false;
        };
        let client = state::with(|b| b.client()).or_raise();
        match client.call(Request::AddTableName { name: name.to_string(), existing }) {
            Ok(_) => true,
            Err(e) if e.code() == pinax_common::ErrorCode::TableNotFound => false,
            Err(e) => error::raise(&e),
        }
    }
}

/// Relation `relation` (`schema.name`) is created here under cluster name `name`.
/// Not replaying: record it for the statement being captured; `None`. Replaying:
/// the origin's name for it, if the replayed statement has one.
pub fn record_or_replay(relation: &str, name: &str) -> Option<String> {
    if !replaying() {
        CAPTURING.with(|c| {
            if let Some(names) = c.borrow_mut().as_mut() {
                names.push((relation.to_string(), name.to_string()));
            }
        });
        return None;
    }
    take_replay_name(relation)
}

/// The first unused replay name for relation `key`.
fn take_replay_name(key: &str) -> Option<String> {
    let raw = guc::replay_names();
    REPLAY.with(|r| {
        let mut r = r.borrow_mut();
        if r.0 != raw {
            *r = (raw.clone(), DdlStatement::decode_names(&raw));
        }
        let i = r.1.iter().position(|(k, _)| k == key)?;
        Some(r.1.remove(i).1)
    })
}

/// Whether top-level utility statement `node` is DDL to replicate.
///
/// # Safety
/// `node` must be a valid parse node.
pub unsafe fn is_replicated_ddl(node: *mut pg_sys::Node) -> bool {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        use pg_sys::NodeTag::*;
        if node.is_null() || !guc::replicate_ddl() || replaying() {
            return false;
        }
        let temp = |rv: *mut pg_sys::RangeVar| !rv.is_null() && (*rv).relpersistence as u8 == pg_sys::RELPERSISTENCE_TEMP;
        match (*node).type_ {
            T_CreateStmt => !temp((*(node as *mut pg_sys::CreateStmt)).relation),
            T_CreateTableAsStmt => {
                let into = (*(node as *mut pg_sys::CreateTableAsStmt)).into;
                into.is_null() || !temp((*into).rel)
            }
            T_ViewStmt => !temp((*(node as *mut pg_sys::ViewStmt)).view),
            T_CreateSeqStmt => !temp((*(node as *mut pg_sys::CreateSeqStmt)).sequence),
            T_TruncateStmt | T_ReindexStmt | T_RefreshMatViewStmt => true,
            // What log_statement = ddl logs.
            _ => pg_sys::GetCommandLogLevel(node) == pg_sys::LogStmtLevel::LOGSTMT_DDL,
        }
    }
}

/// Whether a DDL statement is being captured (the statements it runs are its own).
pub fn capturing() -> bool {
    CAPTURING.with(|c| c.borrow().is_some())
}

/// Start capturing a DDL statement.
pub fn begin_statement() {
    CAPTURING.with(|c| *c.borrow_mut() = Some(Vec::new()));
}

/// The captured statement succeeded: keep it (`sql`) for the transaction's entry.
/// `None`: it failed, forget it.
pub fn end_statement(sql: Option<String>) {
    let names = CAPTURING.with(|c| c.borrow_mut().take()).unwrap_or_default();
    if let Some(sql) = sql {
        // SAFETY: reads backend state.
        let subid = unsafe { pg_sys::GetCurrentSubTransactionId() };
        STATEMENTS.with(|s| s.borrow_mut().push((subid, DdlStatement { sql, names })));
    }
}

/// Keep `sql` (a statement this node ran on the user's behalf, which other
/// nodes must run too) for the transaction's entry.
pub fn record_statement(sql: String) {
    // SAFETY: reads backend state.
    let subid = unsafe { pg_sys::GetCurrentSubTransactionId() };
    STATEMENTS.with(|s| s.borrow_mut().push((subid, DdlStatement { sql, names: Vec::new() })));
}

/// The text of statement `pstmt` within `query` (a query string may hold several).
///
/// # Safety
/// `pstmt` and `query` must be valid.
pub unsafe fn statement_text(pstmt: *mut pg_sys::PlannedStmt, query: *const std::ffi::c_char) -> String {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if query.is_null() {
            return String::new();
        }
        let all = CStr::from_ptr(query).to_bytes();
        let loc = (*pstmt).stmt_location;
        let len = (*pstmt).stmt_len;
        let start = if loc < 0 { 0 } else { (loc as usize).min(all.len()) };
        let end = if loc < 0 || len <= 0 { all.len() } else { (start + len as usize).min(all.len()) };
        String::from_utf8_lossy(&all[start..end]).trim().to_string()
    }
}

/// Subtransaction `subid` rolled back: forget its statements (and its
/// subtransactions', whose ids are higher).
pub fn subxact_aborted(subid: u32) {
    STATEMENTS.with(|s| s.borrow_mut().retain(|(id, _)| *id < subid));
}

/// The transaction ended (either way): forget what was captured.
pub fn end_of_xact() {
    STATEMENTS.with(|s| s.borrow_mut().clear());
    CAPTURING.with(|c| *c.borrow_mut() = None);
}

/// PRE_COMMIT: publish the transaction's DDL, if any. An error aborts the
/// transaction (nothing was logged); nodes that have not applied it yet are named
/// in a WARNING.
pub fn publish() {
    let statements: Vec<DdlStatement> = STATEMENTS.with(|s| std::mem::take(&mut *s.borrow_mut())).into_iter().map(|(_, st)| st).collect();
    if statements.is_empty() {
        return;
    }
    // SAFETY: catalog lookups inside a transaction (PRE_COMMIT allows them).
    let (database, user, search_path) = unsafe {
        let db = pg_sys::get_database_name(pg_sys::MyDatabaseId);
        let user = pg_sys::GetUserNameFromId(pg_sys::GetUserId(), false);
        let sp = pg_sys::GetConfigOption(c"search_path".as_ptr(), true, false);
        let s = |p: *const std::ffi::c_char| if p.is_null() { String::new() } else { CStr::from_ptr(p).to_string_lossy().into_owned() };
        (s(db), s(user), s(sp))
    };
    let entry = DdlEntry { seq: 0, origin: node_id(), database, user, search_path, statements, lock: crate::ddl_lock::current() };
    let client = state::with(|b| b.client()).or_raise();
    match client.call(Request::PublishDdl { entry }) {
        Ok(Response::DdlPublished { lagging, .. }) if !lagging.is_empty() => {
            let nodes: Vec<String> = lagging.iter().map(|(id, addr)| format!("{id} ({addr})")).collect();
            pgrx::warning!("pinax: node(s) {} have not applied this DDL yet; they will when they can", nodes.join(", "));
        }
        Ok(_) => {}
        Err(e) => error::raise(&e),
    }
}

/// The text of role statement `node` (CREATE/ALTER ROLE … PASSWORD '…') as it
/// goes to the DDL log: the password literal replaced by the verifier
/// PostgreSQL stored for it (a SCRAM verifier; stored as-is where it is
/// replayed), so no password travels to the master or rests in its log in
/// plaintext. Other statements come back unchanged. A password written in a
/// form this cannot find raises an error (the statement's transaction aborts)
/// rather than log the secret.
///
/// # Safety
/// `node` and `pstmt` must be valid; the statement has run.
pub unsafe fn loggable_text(node: *mut pg_sys::Node, pstmt: *mut pg_sys::PlannedStmt, query: *const std::ffi::c_char) -> String {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        let text = statement_text(pstmt, query);
        use pg_sys::NodeTag::*;
        let (options, role) = match (*node).type_ {
            T_CreateRoleStmt => {
                let s = node as *mut pg_sys::CreateRoleStmt;
                ((*s).options, CStr::from_ptr((*s).role).to_string_lossy().into_owned())
            }
            T_AlterRoleStmt => {
                let s = node as *mut pg_sys::AlterRoleStmt;
                ((*s).options, CStr::from_ptr(pg_sys::get_rolespec_name((*s).role)).to_string_lossy().into_owned())
            }
            _ => return text,
        };
        let password = crate::pg_list::list_ptrs::<pg_sys::DefElem>(options).into_iter().find(|d| CStr::from_ptr((**d).defname).to_bytes() == b"password");
        let Some(d) = password else { return text };
        if (*d).arg.is_null() {
            return text; // PASSWORD NULL
        }
        // The option's place in the query string, less where the statement's
        // text starts in it (statement_text trims leading blanks).
        let all = if query.is_null() { &b""[..] } else { CStr::from_ptr(query).to_bytes() };
        let base = ((*pstmt).stmt_location.max(0) as usize).min(all.len());
        let lead = all[base..].iter().take_while(|c| c.is_ascii_whitespace()).count();
        let at = ((*d).location.max(0) as usize).saturating_sub(base + lead);
        let span = password_literal(&text, at)
            .unwrap_or_else(|| pgrx::error!("pinax: cannot log {role}'s password for the other SQL nodes without its literal; write PASSWORD 'string'"));
        pg_sys::CommandCounterIncrement();
        let verifier = stored_password(&role);
        let replacement = match verifier {
            Some(v) => format!("'{}'", v.replace('\'', "''")),
            None => "NULL".to_string(),
        };
        format!("{}{}{}", &text[..span.0], replacement, &text[span.1..])
    }
}

/// The password PostgreSQL stores for `role` (`pg_authid.rolpassword`).
unsafe fn stored_password(role: &str) -> Option<String> {
    // SAFETY: syscache access in a transaction (the caller's).
    unsafe {
        let name = std::ffi::CString::new(role).ok()?;
        let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::AUTHNAME as i32, pg_sys::Datum::from(name.as_ptr()));
        if tup.is_null() {
            return None;
        }
        let mut isnull = false;
        let d =
            pg_sys::SysCacheGetAttr(pg_sys::SysCacheIdentifier::AUTHNAME as i32, tup, pg_sys::Anum_pg_authid_rolpassword as pg_sys::AttrNumber, &mut isnull);
        let out = (!isnull).then(|| {
            let c = pg_sys::text_to_cstring(d.cast_mut_ptr());
            let s = CStr::from_ptr(c).to_string_lossy().into_owned();
            pg_sys::pfree(c.cast());
            s
        });
        pg_sys::ReleaseSysCache(tup);
        out
    }
}

/// Where the password literal of the option at byte `at` of `sql` (`[ENCRYPTED]
/// PASSWORD <literal>`) is: its byte range. Literals: '…' (with ''), E'…' (with
/// \ escapes), $tag$…$tag$.
fn password_literal(sql: &str, at: usize) -> Option<(usize, usize)> {
    let b = sql.as_bytes();
    let mut i = at.min(b.len());
    let skip_blank = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let word = |i: usize, w: &str| sql.get(i..i + w.len()).is_some_and(|s| s.eq_ignore_ascii_case(w));
    if word(i, "encrypted") {
        i = skip_blank(i + "encrypted".len());
    }
    if !word(i, "password") {
        return None;
    }
    i = skip_blank(i + "password".len());
    let start = i;
    match b.get(i)? {
        b'\'' => {
            i += 1;
            loop {
                match b.get(i)? {
                    b'\'' if b.get(i + 1) == Some(&b'\'') => i += 2,
                    b'\'' => return Some((start, i + 1)),
                    _ => i += 1,
                }
            }
        }
        b'e' | b'E' if b.get(i + 1) == Some(&b'\'') => {
            i += 2;
            loop {
                match b.get(i)? {
                    b'\\' => i += 2,
                    b'\'' if b.get(i + 1) == Some(&b'\'') => i += 2,
                    b'\'' => return Some((start, i + 1)),
                    _ => i += 1,
                }
            }
        }
        b'$' => {
            let close = sql[i + 1..].find('$')? + i + 1;
            let tag = &sql[i..=close];
            let end = sql[close + 1..].find(tag)? + close + 1;
            Some((start, end + tag.len()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::password_literal;

    #[test]
    fn password_literals_are_found_in_every_form() {
        let find = |sql: &str| {
            password_literal(sql, sql.to_ascii_lowercase().find("encrypted").or_else(|| sql.to_ascii_lowercase().find("password")).unwrap())
                .map(|(a, b)| sql[a..b].to_string())
        };
        assert_eq!(find("CREATE ROLE a LOGIN PASSWORD 'x''y' VALID UNTIL 'infinity'").as_deref(), Some("'x''y'"));
        assert_eq!(find("ALTER ROLE a WITH ENCRYPTED PASSWORD E'a\\'b'").as_deref(), Some("E'a\\'b'"));
        assert_eq!(find("create role a password $p$se'cret$p$ login").as_deref(), Some("$p$se'cret$p$"));
        assert_eq!(find("CREATE ROLE a PASSWORD 'unterminated"), None);
    }
}
