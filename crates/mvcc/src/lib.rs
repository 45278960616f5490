//! pinax-mvcc: multi-version reads and write-conflict rules over one tablet's engine.
//!
//! Key types:
//! - [`ReadContext`]: the hybrid time a read is at, and (inside a transaction) whose
//!   intents are its own and which statement is reading.
//! - [`MvccReader`]: point reads, and forward/reverse bounded scans ([`Scanner`]:
//!   the rows visible to the read, one key at a time) that merge committed versions
//!   with intents.
//! - [`TxnStatusResolver`]: how a reader learns the fate of another transaction's
//!   intent (the status tablet answers; tests use a map).
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
//! [`pinax_engine::Snapshot`] and the resolver; must not depend on the wire
//! (`pinax-proto`): what a scan request does with the visible rows (pushed-down
//! filters, limits, counts, aggregates) is `pinax-pushdown`'s, above this crate.
//! Start at `read/mod.rs`, then `read/scanner.rs`.

pub mod error;
pub mod gc;
pub mod read;
pub mod status;

pub use error::{Error, Result};
pub use read::{MvccReader, ReadContext, ScanRange, Scanner, Step, TabletDeletions, Want};
pub use status::{TxnStatus, TxnStatusResolver};
