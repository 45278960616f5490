//! pinax-common: identifiers, hybrid time and clocks, and the stable error codes
//! shared by every Pinax crate.
//!
//! Key types:
//! - [`HybridTime`]: physical microseconds (52 bits) + logical counter (12 bits) in
//!   one `u64`, ordered as the pair. `HybridTime::MAX` means "latest".
//! - [`Clock`]: where physical time comes from (system, manual, skewed); [`HybridClock`]
//!   is the hybrid logical clock that every node owns and updates from every RPC.
//! - Ids: [`TableId`], [`TabletId`], [`NodeId`], [`TxnId`].
//! - [`ErrorCode`]: the stable, wire-visible error codes with `is_retryable()`.
//! - [`TxnStatus`]: the fate of a transaction (pending, committed at a time, aborted).
//!
//! Invariants: a `HybridClock` never goes backwards, and after `update(ht)` every
//! `now()` is strictly greater than `ht`.
//!
//! Depends on nothing of Pinax. Start reading at `hybrid_time.rs`.

pub mod error_code;
pub mod hybrid_time;
pub mod ids;
pub mod recent;
pub mod txn_status;

pub use error_code::ErrorCode;
pub use hybrid_time::{Clock, ClockAhead, HybridClock, HybridTime, ManualClock, SkewedClock, SystemClock};
pub use ids::{NodeId, TableId, TabletId, TxnId};
pub use recent::RecentRequests;
pub use txn_status::TxnStatus;
