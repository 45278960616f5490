#![no_main]
//! Feed arbitrary bytes to the catalog's record decoders (tables, DDL log
//! entries, as read back from the master's store): they must return, never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pinax_master::catalog::fuzz_decode(data));
