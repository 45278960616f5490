//! Row keys of tables without a primary key, chosen so that rows come back in
//! the order they were inserted.
//!
//! SQL promises no order without ORDER BY, but applications and test suites
//! lean on heap's insertion order for small tables. A generated id sorts in
//! insertion order (`keys::new_rowid_key`: microseconds, strictly increasing
//! within a backend, then random bytes). On a hash-sharded table the row's
//! prefix is not a hash of the id but the start of one tablet: a backend puts
//! the first [`RUN_ROWS`] rows it inserts into a table in the first tablet,
//! the next run in the second, and so on around. So a scan of a table filled
//! with fewer rows than that by each session returns them in insertion order
//! (across sessions: by insertion time), and a bulk load still spreads over
//! every tablet, one run at a time. What heap does and this does not: an
//! UPDATE keeps a row's place (heap moves the new version to the end of the
//! table, or of its page).

use crate::error::OrRaise;
use crate::state;
use pinax_codec::hash::HASH_PREFIX_LEN;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Rows a backend puts into one tablet of a table before it moves on to the next.
pub const RUN_ROWS: u64 = 100_000;

/// Tables this backend has inserted rows without a primary key into: how many
/// rows, and where the table's tablets start.
struct Runs {
    tables: HashMap<String, (u64, Arc<pinax_proto::TableInfo>)>,
}

thread_local! {
    static RUNS: RefCell<Runs> = RefCell::new(Runs { tables: HashMap::new() });
}

/// The prefix of the next generated row key of hash-sharded storage table
/// `storage`: the start of the tablet the row goes to.
fn tablet_prefix(storage: &str) -> [u8; HASH_PREFIX_LEN] {
    RUNS.with(|r| {
        let mut r = r.borrow_mut();
        if !r.tables.contains_key(storage) {
            let info = state::with(|b| b.client()).or_raise().table(storage).or_raise();
            if r.tables.len() >= 1024 {
                r.tables.clear();
            }
            r.tables.insert(storage.to_string(), (0, info));
        }
        let (n, info) = r.tables.get_mut(storage).expect("inserted above");
        let run = *n / RUN_ROWS;
        *n += 1;
        let tablets = &info.tablets;
        let mut prefix = [0u8; HASH_PREFIX_LEN];
        if !tablets.is_empty() {
            let start = &tablets[(run % tablets.len() as u64) as usize].partition.start;
            let len = start.len().min(HASH_PREFIX_LEN);
            prefix[..len].copy_from_slice(&start[..len]);
        }
        prefix
    })
}

/// A fresh generated row key for a row of table storage `storage` (hashed or
/// range-sharded).
pub fn new_row_key(storage: &str, hashed: bool) -> Vec<u8> {
    crate::keys::new_rowid_key(hashed.then(|| tablet_prefix(storage)))
}
