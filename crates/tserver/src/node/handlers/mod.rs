//! Request handlers, one file per group of requests (see `../serve.rs` for
//! which request goes where).

mod catalog;
mod ddl;
mod join;
mod replica;
mod sequence;
mod status;
mod tablet;
