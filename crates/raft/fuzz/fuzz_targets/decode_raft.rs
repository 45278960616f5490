#![no_main]
//! Feed arbitrary bytes to every Raft decoder (log entries from the disk,
//! AppendEntries/Vote/InstallSnapshot/Quiesce messages from the wire): they must
//! return, never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pinax_raft::fuzz_decode(data));
