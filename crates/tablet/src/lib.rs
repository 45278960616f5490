//! pinax-tablet: one tablet = one storage engine + one Raft group (its [`Replicator`]).
//!
//! Key types:
//! - [`Tablet`]: the data tablet. Fast-path writes (one round, no intents), intent
//!   writes of distributed transactions, MVCC reads and scans (a scan request's
//!   filters, limits and aggregates: `pinax_pushdown::scan`), intent apply/removal.
//! - [`StatusTablet`]: the transaction status tablet: persists the decisions of
//!   [`pinax_txn::Coordinator`].
//! - [`mvcc_manager::MvccManager`]: "safe time" — a scan at `ht` waits until every
//!   write that was given a hybrid time `<= ht` is in the engine (a point read
//!   waits for writes of its own row only: `Tablet::row_snapshot`).
//! - [`WriteOp`]: one row operation of a batch.
//! - [`split::half_states`]: what each half of a tablet split at a key starts
//!   with besides the rows it shares with its parent (intents, locks on the
//!   range-lock key, metadata).
//!
//! Invariants:
//! - all writes of one tablet are decided under one mutex (conflict checks and the
//!   batch they produce are atomic with respect to other writers);
//! - committed versions of a key are written in increasing hybrid-time order, and no
//!   committed version is ever newer than a live intent on the same key: a writer that
//!   meets a committed intent applies it first, one that meets an aborted intent
//!   removes it, one that meets a pending intent of another transaction fails with a
//!   retryable serialization error;
//! - the write lock's state knows which transactions hold intents here and, for
//!   those whose intents were all written in the leader's term, on which rows (a
//!   superset, by hash): a point read or a one-row write looks only for those
//!   transactions' intents (`WriteState::row_intents`), each through an iterator
//!   bounded to its own intent keys, so it never steps over the tombstones that
//!   resolved intents of a hot row leave until compaction;
//! - a write acknowledged with `sync` is in the engine's durable log;
//! - only the leader decides writes; every replica applies the same batches in the
//!   same order ([`replication`]).
//!
//! Depends on engine traits only (never on RocksDB). Start at `tablet.rs`.

pub mod error;
pub mod mvcc_manager;
pub mod ops;
pub mod replication;
pub mod split;
pub mod status_tablet;
pub mod tablet;

pub use error::{Error, Result};
pub use ops::{WriteOp, WriteOpKind};
pub use replication::{DirectWrite, Replicator};
pub use status_tablet::StatusTablet;
pub use tablet::{Partition, Tablet, TabletOptions};
