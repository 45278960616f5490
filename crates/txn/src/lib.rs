//! pinax-txn: the transaction coordinator as an I/O-free state machine.
//!
//! A distributed transaction's fate lives in one *status record* in a *status
//! tablet*. [`Coordinator`] holds those records and decides every transition; the
//! status tablet (crate `pinax-tablet`) persists what it returns before answering.
//!
//! Life of a record:
//! ```text
//!   create ──► Pending ──commit──► Committed(commit_ht) ──all participants applied──► (retained, then gc)
//!                 │  └──abort / heartbeat expiry──► Aborted ──► (retained, then gc)
//! ```
//! Invariants:
//! - a record leaves `Pending` exactly once; `Committed` and `Aborted` are final;
//! - the commit hybrid time is taken from the coordinator's clock at the commit
//!   decision, after every status query that answered `Pending` moved that clock past
//!   its read time, so no reader that saw `Pending` at read time `r` can later see a
//!   commit at `<= r`;
//! - a `Pending` record whose last heartbeat is older than the timeout is aborted;
//! - an unknown transaction is reported `Aborted` (records are created before the
//!   first intent is written, and removed only after their intents are gone).
//!
//! No I/O and no clock reads: time comes in as arguments. Start at [`Coordinator`]
//! (its records are indexed by state, so the periodic expiry, resolution and
//! garbage collection read only the records they concern).

pub mod coordinator;
pub mod record;

pub use coordinator::{Coordinator, TxnError};
pub use record::{TxnRecord, TxnState};
