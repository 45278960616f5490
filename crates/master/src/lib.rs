//! pinax-master: the catalog of tables and tablets, and where each tablet lives.
//!
//! The master is a Raft group (tablet [`pinax_common::TabletId::MASTER`]) of up to
//! replication-factor nodes: the cluster's first node bootstraps it, and the
//! master's leader adds nodes to it as they join (and replaces members that are
//! gone, as for any tablet). Its [`Catalog`] holds the tables, the DDL log, the
//! sequences and the registered nodes; every change goes through the group
//! ([`CatalogLog`]). The group's leader is the master: it places every new
//! tablet's replicas on the live nodes; other nodes forward catalog requests to
//! it. Every node also keeps, in its own engine ([`LocalRecords`]), the
//! [`ReplicaRecord`]s of the replicas it serves and where the masters were.
//!
//! The catalog also keeps the cluster's DDL log ([`Catalog::append_ddl`]): every SQL
//! node's PostgreSQL logs its committed DDL there and replays the others', so all
//! catalogs agree; and other names of tables ([`Catalog::add_name`]): a node
//! replaying a CREATE TABLE names the creator's storage table for its own relation.
//!
//! The catalog's own tables, named from [`SYSTEM_TABLE_PREFIX`]: the master
//! group itself (`$master`, its one tablet [`pinax_common::TabletId::MASTER`], so
//! it is placed and moved like any tablet); one status table
//! per node (`$status.N`, one tablet, id `TabletId::status_of_node(N)`), holding
//! the records of transactions begun through that node, replicated and placed
//! like any table.
//!
//! The catalog records the tablet splits the master starts ([`catalog::splits`]:
//! a [`SplitRecord`] per split, the swap of a parent for its two children in
//! its table's tablet list, lookups of children not swapped in yet and of
//! parents that split); [`splitting`] decides which tablets split by
//! themselves (from their size and their table's tablets per node).
//!
//! Key types: [`Catalog`] (persisted tables, id allocation), [`plan_partitions`] (how a
//! table is cut into tablets), [`placement`] (pure decisions: where replicas and
//! leaders move, which replicas are orphans; the node carries them out).
//! Invariants: table names are unique; tablet ids are never reused (a split's
//! children's ids too, allocated when it is requested); a table's
//! tablets are sorted by partition start and cover the whole key space without gaps
//! or overlaps (a split swaps a parent for its two halves in one write).
//! Depends on engine traits, never on RocksDB. Start at [`Catalog::plan_table`].

pub mod catalog;
pub mod local;
pub mod partitions;
pub mod placement;
pub mod splitting;

pub use catalog::{
    single_tablet_table, status_table_name, Catalog, CatalogError, CatalogLog, Dropped, LocalLog, Located, SplitRecord, SplitState, MASTER_TABLE_NAME,
    SYSTEM_TABLE_PREFIX,
};
pub use local::{LocalRecords, ReplicaRecord};
pub use partitions::plan_partitions;
