//! pinax-mvcc: multi-version reads and write-conflict rules over one tablet's engine.
//!
//! Key types:
//! - [`ReadContext`]: the hybrid time a read is at, and (inside a transaction) whose
//!   intents are its own and which statement is reading.
//! - [`MvccReader`]: point reads and forward/reverse bounded scans that merge committed
//!   versions with intents.
//! - [`TxnStatusResolver`]: how a reader learns the fate of another transaction's
//!   intent (the status tablet answers; tests use a map).
//! - [`filter::RowMatcher`]: a scan's pushed-down `WHERE` conditions, checked on
//!   each visible row before it is returned or counted.
//! - [`gc::HistoryGcFilterFactory`]: the compaction filter that drops versions older
//!   than the history cutoff.
//!
//! Visibility rule for one key, first match wins:
//! 1. the reader's own intents with `seq < ctx.seq` (newest first; a lock-only intent
//!    is skipped) — a statement never sees its own writes but sees earlier ones;
//! 2. another transaction's intents if it COMMITTED at `commit_ht <= read_ht`;
//! 3. the newest committed version with `ht <= read_ht`, unless a deletion of
//!    every row of the tablet ([`read::TabletDeletions`]) at or before `read_ht` is
//!    newer than it (no intent of another transaction survives such a deletion's
//!    writing: it resolves or conflicts with all of them first).
//!
//! Tombstones make the key absent. Intents of pending or aborted transactions are
//! invisible. (2) outranks (3) because a writer that meets a committed intent applies
//! it before writing, so no regular version is ever newer than a live intent.
//!
//! Must not depend on any engine implementation or do I/O other than through the
//! [`pinax_engine::Snapshot`] and the resolver. Start at `read.rs`.

pub mod error;
pub mod filter;
pub mod gc;
pub mod read;
pub mod status;

pub use error::{Error, Result};
pub use read::{MvccReader, ReadContext, ScanResult, ScanSpec, TabletDeletions};
pub use status::{TxnStatus, TxnStatusResolver};
