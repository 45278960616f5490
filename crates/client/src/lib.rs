//! pinax-client: the Rust client of a Pinax cluster, used by the SQL layer, tools and
//! tests. Blocking and synchronous: a call runs on the caller's thread and does only
//! socket I/O, so a single-threaded process (a PostgreSQL backend) can use it.
//!
//! Key types:
//! - [`Client`]: connections (pooled per node), table-location cache, hybrid-clock
//!   propagation, autocommit writes and reads.
//! - [`Txn`]: a distributed transaction: provisional writes to every tablet it
//!   touches, reads at its read time seeing its own earlier writes, commit/abort.
//!
//! Routing: a key goes to the tablet whose partition contains it
//! ([`pinax_proto::TableInfo::tablet_index_for`]). An autocommit write that touches one
//! tablet takes the fast path (one RPC, no intents); one that touches several runs as
//! a transaction. On `TabletNotFound` the table's locations are refreshed and the
//! request retried a bounded number of times. A tablet that split answers
//! `TabletSplit` (its replicas, once dropped, `TabletNotFound`, which the client
//! turns into `TabletSplit` when the master says the tablet split): reads and
//! autocommit writes refresh the locations and retry, a scan goes on from where
//! it stood on the tablets holding those keys now, and a transaction's writes,
//! delete-all and savepoint rollback go to the halves ([`Client::covering`]); no
//! error reaches the caller.
//!
//! Depends only on `pinax-proto` and `pinax-common`. Start at [`Client::connect`].

pub mod client;
pub mod conn;
pub mod error;
pub mod txn;

pub use client::{Aggregated, Client, ClientOptions};
pub use error::{ClientError, Result};
pub use pinax_proto::Row;
pub use txn::Txn;
