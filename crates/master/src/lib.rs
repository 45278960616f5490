//! pinax-master: the catalog of tables and tablets, and where each tablet lives.
//!
//! For now the master is a single role inside every daemon with one persisted
//! [`Catalog`] (its own engine); the replicated multi-master comes with Raft.
//!
//! Key types: [`Catalog`] (persisted tables, id allocation), [`plan_partitions`] (how a
//! table is cut into tablets).
//! Invariants: table names are unique; tablet ids are never reused; a table's
//! tablets are sorted by partition start and cover the whole key space without gaps
//! or overlaps.
//! Depends on engine traits, never on RocksDB. Start at [`Catalog::create_table`].

pub mod catalog;
pub mod partitions;

pub use catalog::{Catalog, CatalogError};
pub use partitions::plan_partitions;
