//! Crash points (tests only): a node started with `--fault-injection` can be
//! told (`Request::CrashAt`) to end its process abruptly, as `kill -9` would
//! (`std::process::abort`: no destructors, no flushes; what was written and
//! synced stays, the rest is lost), when it reaches a named step of a tablet
//! split. crates/node/tests/cluster.rs kills a node at each step and checks
//! that the cluster comes back to the parent or its halves, every row there.
//!
//! The steps, in the order a split takes them (docs/plans/tablet-splitting.md §7):
//! - `master.recorded`: the master wrote the split record (M1).
//! - `leader.flushed`: the parent's leader flushed its memtable, before the drain.
//! - `leader.proposed`: the split entry is applied on the leader (its drain held).
//! - `apply.written`: a replica wrote its halves' engines and the parent's record
//!   of the split, before the halves' replica records.
//! - `apply.recorded`: ... and the halves' replica records, before opening them.
//! - `leader.answered`: the leader opened its halves, before answering the master.
//! - `master.swapped`: the catalog lists the halves (M3), before the answer.
//! - `cleanup.created`: the halves' replicas exist on every listed node (M4),
//!   before the parent's replicas are dropped.
//! - `cleanup.dropped`: the parent's replicas are dropped, before the record retires.
//!
//! One crash point per process (a node is a process in those tests), kept in a
//! global so that a Raft group's apply can reach it.

use parking_lot::Mutex;

/// Every step, for tests to go through.
pub const STEPS: &[&str] = &[
    "master.recorded",
    "leader.flushed",
    "leader.proposed",
    "apply.written",
    "apply.recorded",
    "leader.answered",
    "master.swapped",
    "cleanup.created",
    "cleanup.dropped",
];

static CRASH_AT: Mutex<Option<String>> = Mutex::new(None);

/// Crash at `step` from now on (None: nowhere).
pub(crate) fn set(step: Option<String>) {
    *CRASH_AT.lock() = step;
}

/// This process reached `step`: end it if told to.
pub(crate) fn point(step: &str) {
    if CRASH_AT.lock().as_deref() == Some(step) {
        tracing::error!(step, "fault injection: crashing at this step");
        std::process::abort();
    }
}
