//! Settings (`pinax.*` GUCs).

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;

static ADDRESS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"127.0.0.1:7100"));
static SOCKET: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static TLS_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static TABLETS: GucSetting<i32> = GucSetting::<i32>::new(8);
static INDEX_ONLY_FETCH_ROWS: GucSetting<bool> = GucSetting::<bool>::new(false);
static STATEMENT_RESTARTS: GucSetting<i32> = GucSetting::<i32>::new(100);
static SEQUENCE_CACHE_MIN: GucSetting<i32> = GucSetting::<i32>::new(100);
static REPLICATE_DDL: GucSetting<bool> = GucSetting::<bool>::new(true);
static REPLAYING: GucSetting<bool> = GucSetting::<bool>::new(false);
static REPLAY_NAMES: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static READ_TIME_LAG_MS: GucSetting<i32> = GucSetting::<i32>::new(0);
static OUTPUT_BUFFER_SIZE: GucSetting<i32> = GucSetting::<i32>::new(256 * 1024);
static WRITE_BUFFER_SIZE: GucSetting<i32> = GucSetting::<i32>::new(2 << 20);
static HOLD_SELECTS_ALWAYS: GucSetting<bool> = GucSetting::<bool>::new(false);
static ENABLE_FILTER_PUSHDOWN: GucSetting<bool> = GucSetting::<bool>::new(true);
static ENABLE_LIMIT_PUSHDOWN: GucSetting<bool> = GucSetting::<bool>::new(true);
static TRACE_SCANS: GucSetting<bool> = GucSetting::<bool>::new(false);
static COLUMN_CONFLICTS: GucSetting<bool> = GucSetting::<bool>::new(true);
static SINGLE_ROW_WRITES: GucSetting<bool> = GucSetting::<bool>::new(true);
static SINGLE_ROW_WRITES_IN_TXNS: GucSetting<bool> = GucSetting::<bool>::new(true);
static TABLET_FOLDS: GucSetting<bool> = GucSetting::<bool>::new(true);
static INSERT_AT_ONCE: GucSetting<bool> = GucSetting::<bool>::new(true);
static DELETE_ALL: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `pinax.session_ready`: set for every role by `pinax start` (`ALTER ROLE ALL
/// SET`), so PostgreSQL sets it as each session starts, after the startup
/// packet's settings and before the first query; its assign hook then waits
/// until the node has applied the DDL log it knows of (`state::wait_for_ddl`):
/// a session never parses its first statement against a catalog other nodes
/// changed while this node was down or behind.
static mut SESSION_READY: bool = false;

/// Assign hook of `pinax.session_ready`: in a client session (not a replaying
/// one, not a parallel worker), connect to the node, which waits for the DDL
/// log (up to 30 s). Errors are not raised here (an assign hook must not fail):
/// the session's first use of Pinax reports them.
///
/// # Safety
/// Called only by PostgreSQL's GUC machinery.
unsafe extern "C-unwind" fn session_ready_assign(newval: bool, _extra: *mut std::ffi::c_void) {
    // SAFETY: reads backend globals; the client is made in a transaction.
    unsafe {
        if newval
            && pgrx::pg_sys::IsUnderPostmaster
            && pgrx::pg_sys::ParallelWorkerNumber < 0
            && !pgrx::pg_sys::MyProcPort.is_null()
            && pgrx::pg_sys::IsTransactionState()
            && !replaying()
        {
            let _ = crate::state::with(|b| b.client());
        }
    }
}

pub fn init() {
    // SAFETY: defining a GUC while loading the library (in the postmaster).
    unsafe {
        pgrx::pg_sys::DefineCustomBoolVariable(
            c"pinax.session_ready".as_ptr(),
            c"Sessions wait, as they start, until this node has applied the schema changes other nodes made.".as_ptr(),
            c"Set for every role by pinax start; off: the first statement that uses Pinax waits instead.".as_ptr(),
            &raw mut SESSION_READY,
            false,
            pgrx::pg_sys::GucContext::PGC_USERSET,
            0,
            None,
            Some(session_ready_assign),
            None,
        );
    }
    GucRegistry::define_string_guc(
        c"pinax.address",
        c"Address (host:port) of the Pinax node daemon this server uses.",
        c"Set by `pinax start`; every backend connects there on first use of a Pinax table.",
        &ADDRESS,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"pinax.socket",
        c"Unix-domain socket of the node daemon at pinax.address, used instead of TCP to reach it.",
        c"Set by `pinax start`. Empty, or a socket that does not answer: TCP.",
        &SOCKET,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"pinax.tls_dir",
        c"Certificates directory whose ca.crt, backend.crt and backend.key backends use to reach nodes over TCP (mutual TLS).",
        c"Set by `pinax start` for a secure node. Empty: plaintext (an --insecure cluster).",
        &TLS_DIR,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pinax.tablets",
        c"Number of tablets a new hash-sharded Pinax table or index is split into.",
        c"Overridden per table with WITH (pinax.tablets = N).",
        &TABLETS,
        1,
        4096,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.index_only_fetch_rows",
        c"Index-only scans of Pinax indexes fetch every row, as PostgreSQL's own node does without a visibility map.",
        c"Off (default): they return the index entries alone, which is correct because entries are versioned with their rows. For testing and diagnosis.",
        &INDEX_ONLY_FETCH_ROWS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pinax.statement_restarts",
        c"How many times a READ COMMITTED statement is run again after a write conflict before the conflict is reported.",
        c"A statement that meets a row changed by a transaction that committed after it read runs again at a new read time, as PostgreSQL re-checks such rows. 0 turns restarts off (the conflict is reported as 40001).",
        &STATEMENT_RESTARTS,
        0,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pinax.output_buffer_size",
        c"Bytes of a READ COMMITTED SELECT's rows held back from the client, so that the SELECT can run again after a read restart.",
        c"A SELECT that meets a value in its clock-uncertainty window after it has read rows runs again whole at a later read time, as long as none of its rows was sent to the client; rows are sent once they exceed this size (or the SELECT ends). 0: SELECTs are not run again (the read restart is reported as 40001).",
        &OUTPUT_BUFFER_SIZE,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"pinax.write_buffer_size",
        c"Bytes of writes a backend buffers before it sends them to the tablets.",
        c"A backend sends its buffered writes (rows, index entries, locks) once they reach this size or 65536 writes; each tablet's share of them becomes one Raft log entry, about twice as large with its intents. Larger batches cost less per row (a tablet applies a batch in key order, and its memtable inserts are cheaper the closer together their keys fall).",
        &WRITE_BUFFER_SIZE,
        1024,
        16 << 20,
        GucContext::Userset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_bool_guc(
        c"pinax.hold_selects_always",
        c"Plain SELECTs hold their rows back for a re-run even where no read can need one (a lone node). For tests.",
        c"The SQL tests run once with it on, so that every SELECT of theirs also goes through the re-run path.",
        &HOLD_SELECTS_ALWAYS,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pinax.sequence_cache_min",
        c"Fewest values a backend takes from a cluster-wide sequence at a time (more if the sequence's CACHE is larger).",
        c"Each take is a round trip to the master; 1 gives PostgreSQL's order of values across sessions at that cost.",
        &SEQUENCE_CACHE_MIN,
        1,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.replicate_ddl",
        c"DDL committed here is logged for, and replayed on, every other SQL node of the cluster.",
        c"Off: this session's DDL stays on this node (`pinax start` sets it off for its own set-up statements).",
        &REPLICATE_DDL,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.replaying",
        c"This session replays DDL another node logged (set by the node daemon).",
        c"Relations get the origin's storage tables and writes to Pinax tables are dropped.",
        &REPLAYING,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"pinax.replay_names",
        c"Storage tables of the relations the replayed statement creates (set by the node daemon).",
        c"hex(schema.relation)=storage, comma-separated. Only read while pinax.replaying is on (superuser only), so any role may set it: a replay runs as the origin's role.",
        &REPLAY_NAMES,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.enable_filter_pushdown",
        c"Sequential scans of Pinax tables send their WHERE conditions on columns to the tablets, which return only rows that may match.",
        c"Comparisons of a column with a constant or parameter (integers, floats, bool, text, bytea, date and time stamps, uuid), IS [NOT] NULL, AND, OR, NOT. EXPLAIN shows them as Storage Filter on a Custom Scan (PinaxScan). PostgreSQL still checks the whole WHERE clause on the rows that arrive.",
        &ENABLE_FILTER_PUSHDOWN,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.enable_limit_pushdown",
        c"A scan of a Pinax table or index right under a LIMIT asks storage for the LIMIT's rows (plus OFFSET) in its first read.",
        c"Without it a scan's first read asks for 16 rows and each next one for four times more, so a LIMIT of 50 took two round trips and 80 rows. Rows a filter rejects are made up by further reads as before. pinax.trace_scans shows the reads.",
        &ENABLE_LIMIT_PUSHDOWN,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.trace_scans",
        c"Each storage read of a scan of a Pinax table or index raises a NOTICE with the number of rows it asks for.",
        c"For tests and diagnosis.",
        &TRACE_SCANS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.enable_single_row_writes",
        c"An autocommit UPDATE or DELETE of one Pinax row by its whole primary key writes without reading the row first.",
        c"When nothing needs the old row (no RETURNING, triggers, row-level security, CHECK constraints, stored generated columns; an UPDATE whose new values do not read the row and that changes no indexed column; a DELETE from a table without secondary indexes), the statement is one storage write that applies only if the row exists. EXPLAIN shows Custom Scan (PinaxWriteByKey). In transaction blocks see pinax.enable_single_row_writes_in_transactions; in REPEATABLE READ and SERIALIZABLE transactions the statement runs as usual.",
        &SINGLE_ROW_WRITES,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.enable_single_row_writes_in_transactions",
        c"pinax.enable_single_row_writes also inside READ COMMITTED transaction blocks: the row is written as a provisional record of the transaction without being read first.",
        c"A top-level statement (not run by a function, procedure or DO block). The row is live for the transaction when its own earlier writes say so, else when its newest committed version is live (PostgreSQL's READ COMMITTED re-check of an updated row). A second such UPDATE of a row the transaction wrote, or of a row carrying two earlier ones that the tablet cannot merge (pinax.enable_tablet_folds), reads the row and runs as usual.",
        &SINGLE_ROW_WRITES_IN_TXNS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.enable_tablet_folds",
        c"An UPDATE by key without reading the row (pinax.enable_single_row_writes) sends the table's row layout, so that the tablet can merge the row's earlier updates into the whole row itself.",
        c"Such an UPDATE stores only the columns it assigns, laid over the row; over a row already carrying two of them the tablet forms the whole row (when no other transaction's write is in the way), where without the layout it refuses and the statement reads the row and writes it whole: two more round trips.",
        &TABLET_FOLDS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.enable_insert_at_once",
        c"An autocommit INSERT ... ON CONFLICT DO NOTHING of one row into a Pinax table writes the row at once, if it is absent, without reading first; an upsert setting every other column from EXCLUDED writes it whether the key exists or not.",
        c"For a table whose only index is its primary key, without AFTER INSERT triggers (foreign keys to other tables included) or views' check options, a statement without RETURNING that inserts one row (VALUES) and is its whole transaction, under READ COMMITTED or REPEATABLE READ. The row is one storage write that fails if the key exists; the conflict is then read and resolved as usual (nothing is inserted). ON CONFLICT (key) DO UPDATE SET every column but the key's = EXCLUDED.column, without WHERE, under READ COMMITTED, into a table without UPDATE triggers, row-level security or stored generated columns whose key types have no distinct equal values (integers, text under a deterministic collation, uuid, dates and times, bytea, bool): one storage write of the row. Otherwise the row is checked for first and inserted in a storage transaction.",
        &INSERT_AT_ONCE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.enable_delete_all",
        c"A DELETE of every row of a Pinax table is done in its tablets: no row is read or written one by one.",
        c"DELETE FROM t with no WHERE, under READ COMMITTED, as the first write of its transaction (autocommit or in a block), from a table without triggers (foreign keys included), row-level security or RETURNING whose indexes are B-trees: each tablet of the table and of its secondary indexes counts its rows and writes one whole-tablet tombstone. EXPLAIN shows Custom Scan (PinaxWriteByKey) with Operation: Delete All. Otherwise the statement runs as usual.",
        &DELETE_ALL,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pinax.column_conflicts",
        c"UPDATEs of a Pinax row conflict only with concurrent updates of columns they depend on.",
        c"An UPDATE (READ COMMITTED or REPEATABLE READ) that keeps the row's key writes only the columns it changed; another transaction's concurrent UPDATE of columns it neither reads nor writes does not make it wait or fail. Tables with row triggers or row-level security, and SERIALIZABLE transactions, always conflict on the whole row.",
        &COLUMN_CONFLICTS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pinax.read_time_lag_ms",
        c"Takes read times this many milliseconds in the past, as a backend whose clock lags would (tests of read restarts).",
        c"Reads then meet recent values in their clock-uncertainty window and restart past them. Beyond the cluster's --max-clock-skew-ms reads may miss recent writes: for tests only.",
        &READ_TIME_LAG_MS,
        0,
        60_000,
        GucContext::Suset,
        GucFlags::default(),
    );
}

/// `pinax.read_time_lag_ms` in microseconds.
pub fn read_time_lag_micros() -> u64 {
    READ_TIME_LAG_MS.get().max(0) as u64 * 1000
}

/// `pinax.output_buffer_size`: bytes of a SELECT's rows held back (0: SELECTs are not
/// run again after a read restart).
pub fn output_buffer_size() -> usize {
    OUTPUT_BUFFER_SIZE.get().max(0) as usize
}

/// `pinax.write_buffer_size`: bytes of writes buffered before they are sent.
pub fn write_buffer_size() -> usize {
    WRITE_BUFFER_SIZE.get().max(1024) as usize
}

/// `pinax.enable_filter_pushdown`.
pub fn enable_filter_pushdown() -> bool {
    ENABLE_FILTER_PUSHDOWN.get()
}

/// `pinax.enable_limit_pushdown`.
pub fn enable_limit_pushdown() -> bool {
    ENABLE_LIMIT_PUSHDOWN.get()
}

/// `pinax.trace_scans`.
pub fn trace_scans() -> bool {
    TRACE_SCANS.get()
}

/// `pinax.enable_single_row_writes`.
pub fn single_row_writes() -> bool {
    SINGLE_ROW_WRITES.get()
}

/// `pinax.enable_tablet_folds`.
pub fn tablet_folds() -> bool {
    TABLET_FOLDS.get()
}

/// `pinax.enable_insert_at_once`.
pub fn insert_at_once() -> bool {
    INSERT_AT_ONCE.get()
}

/// `pinax.enable_single_row_writes_in_transactions`.
pub fn single_row_writes_in_transactions() -> bool {
    SINGLE_ROW_WRITES_IN_TXNS.get()
}

/// `pinax.enable_delete_all`.
pub fn delete_all() -> bool {
    DELETE_ALL.get()
}

/// `pinax.column_conflicts`.
pub fn column_conflicts() -> bool {
    COLUMN_CONFLICTS.get()
}

/// `pinax.hold_selects_always` (tests).
pub fn hold_selects_always() -> bool {
    HOLD_SELECTS_ALWAYS.get()
}

/// Fewest values taken from a cluster-wide sequence at a time.
pub fn sequence_cache_min() -> u32 {
    SEQUENCE_CACHE_MIN.get().max(1) as u32
}

/// Whether this session's DDL is replicated to the other SQL nodes.
pub fn replicate_ddl() -> bool {
    REPLICATE_DDL.get()
}

/// Whether this session replays another node's DDL.
pub fn replaying() -> bool {
    REPLAYING.get()
}

/// `pinax.replay_names` (empty if unset).
pub fn replay_names() -> String {
    REPLAY_NAMES.get().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The node daemon's address.
pub fn address() -> String {
    ADDRESS.get().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "127.0.0.1:7100".to_string())
}

/// `pinax.socket`: the local node's Unix socket, if set.
pub fn socket() -> Option<std::path::PathBuf> {
    SOCKET.get().map(|s| std::path::PathBuf::from(s.to_string_lossy().into_owned())).filter(|p| !p.as_os_str().is_empty())
}

/// The certs directory backends present `backend.crt` from (None: plaintext).
pub fn tls_dir() -> Option<std::path::PathBuf> {
    TLS_DIR.get().map(|s| std::path::PathBuf::from(s.to_string_lossy().into_owned())).filter(|p| !p.as_os_str().is_empty())
}

/// Default tablet count for new tables.
pub fn tablets() -> u32 {
    TABLETS.get().max(1) as u32
}

/// Whether index-only scans run PostgreSQL's own node (fetching every row).
pub fn index_only_fetch_rows() -> bool {
    INDEX_ONLY_FETCH_ROWS.get()
}

/// Most restarts of one READ COMMITTED statement after write conflicts (0: none).
pub fn statement_restarts() -> u32 {
    STATEMENT_RESTARTS.get().max(0) as u32
}
