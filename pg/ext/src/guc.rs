//! Settings (`pinax.*` GUCs).

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;

static ADDRESS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"127.0.0.1:7100"));
static TABLETS: GucSetting<i32> = GucSetting::<i32>::new(8);
static INDEX_ONLY_FETCH_ROWS: GucSetting<bool> = GucSetting::<bool>::new(false);
static STATEMENT_RESTARTS: GucSetting<i32> = GucSetting::<i32>::new(100);

pub fn init() {
    GucRegistry::define_string_guc(
        c"pinax.address",
        c"Address (host:port) of the Pinax node daemon this server uses.",
        c"Set by `pinax start`; every backend connects there on first use of a Pinax table.",
        &ADDRESS,
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
}

/// The node daemon's address.
pub fn address() -> String {
    ADDRESS.get().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "127.0.0.1:7100".to_string())
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
