//! pinax-master: the catalog of tables and tablets, and where each tablet lives.
//!
//! The master is a role of the first node of a cluster (the one started without
//! `--join`): its persisted [`Catalog`] (its own engine) holds the tables, and it
//! places every new tablet's replicas on the live nodes. Every node also keeps, in
//! its own catalog engine, the [`ReplicaRecord`]s of the replicas it serves. A
//! replicated master (a Raft group of masters) is the next step.
//!
//! The catalog also keeps the cluster's DDL log ([`Catalog::append_ddl`]): every SQL
//! node's PostgreSQL logs its committed DDL there and replays the others', so all
//! catalogs agree; and other names of tables ([`Catalog::add_name`]): a node
//! replaying a CREATE TABLE names the creator's storage table for its own relation.
//!
//! The catalog's own tables, named from [`SYSTEM_TABLE_PREFIX`]: one status table
//! per node (`$status.N`, one tablet, id `TabletId::status_of_node(N)`), holding
//! the records of transactions begun through that node, replicated and placed
//! like any table.
//!
//! Key types: [`Catalog`] (persisted tables, id allocation), [`plan_partitions`] (how a
//! table is cut into tablets).
//! Invariants: table names are unique; tablet ids are never reused; a table's
//! tablets are sorted by partition start and cover the whole key space without gaps
//! or overlaps.
//! Depends on engine traits, never on RocksDB. Start at [`Catalog::plan_table`].

pub mod catalog;
pub mod partitions;

pub use catalog::{status_table_name, Catalog, CatalogError, Dropped, ReplicaRecord, SYSTEM_TABLE_PREFIX};
pub use partitions::plan_partitions;
