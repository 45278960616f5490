//! Access methods: the table AM `pinax` and the Pinax behaviour of btree indexes on
//! Pinax tables.

pub mod index;
pub mod index_only;
pub mod table;
