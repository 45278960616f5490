//! pinax-pushdown: what a tablet does with the rows a scan request reads, above
//! MVCC ("coprocessor" in TiKV's terms): the pushed-down `WHERE` conditions,
//! LIMIT, counts, ANALYZE's sample and aggregate partials of a [`ScanSpec`].
//!
//! Key items:
//! - [`scan`]: a scan request's answer ([`ScanResult`]) from one
//!   [`pinax_mvcc::MvccReader`], consuming its [`pinax_mvcc::Scanner`] (the rows
//!   visible at the read's time, key by key) — start reading here (`executor.rs`);
//! - [`filter::RowMatcher`]: a request's filter, checked on each visible row
//!   (three-valued, with "cannot tell" for what the SQL layer must decide), and the
//!   folding of a row into aggregate partials.
//!
//! Invariants: visibility (intents, uncertainty, deletions) is MVCC's alone: this
//! crate sees only visible rows, and a filter only ever drops rows the SQL layer
//! would drop too (it re-checks every shipped row). The hot loop is generic over
//! the snapshot and resolver (no dynamic dispatch) and allocates per row only what
//! it ships.
//!
//! Depends on `pinax-mvcc` (the rows), `pinax-codec` (stored rows and patches),
//! `pinax-engine` (the snapshot trait) and `pinax-proto` (the request and answer
//! types); nothing above them. Its errors are MVCC's ([`pinax_mvcc::Error`]): a
//! read fails with one error type, a malformed request as `InvalidRequest`.

mod executor;
pub mod filter;

pub use executor::{scan, MAX_GROUPS, MAX_SHIPPED_BYTES};
pub use pinax_mvcc::{Error, Result};
pub use pinax_proto::{ScanResult, ScanSpec};
