//! pinax-raft: the openraft glue. Every tablet is one Raft group whose log lives
//! in its data directory's shared Raft log ([`SharedLog`]: one raft-engine for
//! every group there, keyed by group id) and whose state machine is the tablet's
//! engine.
//!
//! Key types:
//! - [`TypeConfig`]: the openraft type configuration. A log entry's payload is a
//!   [`Command`]: one write batch a tablet leader decided, as [`OwnedBatch`] bytes,
//!   with the hybrid time it was decided at, or several of them merged into one
//!   entry ([`Command::merge`], group commit).
//! - [`SharedLog`]: a data directory's Raft log engine, shared by its groups:
//!   their appends share writes and fsyncs (group commit across tablets), one
//!   stream of files for all; groups are removed from it with their tablets.
//! - [`LogStore`]: one group's Raft log in the shared log ([`LogPlace::Shared`]):
//!   entries appended and fsynced, never through memtables or compactions; vote,
//!   purge point and committed id as keys of the group. An engine without a
//!   directory (the in-memory test double) keeps it in `Cf::Log` instead
//!   ([`LogPlace::Engine`]).
//! - [`StateMachine`]: applies committed commands to the engine, atomically with
//!   the applied log id (`Cf::Meta`); snapshots are the engine's contents. A
//!   tablet split is one entry ([`Command::split`], never merged with writes)
//!   that every replica applies at the same index through the group's
//!   [`SplitHook`] (the tablet layer's), after flushing what came before; each
//!   half's group starts from [`StateMachine::half_seed`] (the parent's members,
//!   an applied id at index 0 of term 0, no log).
//! - [`network`]: RPCs between replicas over a [`network::Transport`] the node
//!   provides (the node's RPC connections), plus the receiving side.
//! - [`RaftGroup`]: one group as the synchronous tablet code uses it: replicate a
//!   command (writes handed over while an entry is in flight share the next one),
//!   who leads, read barriers.
//! - [`quiesce`]: followers held quiet by a quiesced leader, and the node-level
//!   [`quiesce::PeerWatch`] that wakes them when the leader's node is lost.
//! - [`runtime::GroupRuntime`]: the current-thread runtime each group's tasks run
//!   on, driven by the threads that wait on the group (a write's RPC thread appends,
//!   fsyncs and applies its entry itself) and by a ticker for timers.
//!
//! Invariants:
//! - an entry is acknowledged to openraft (`LogFlushed`) only after an fsync
//!   (unless the node runs `--no-sync`), never after a failed write; a failed
//!   fsync of the shared log aborts the process (see [`shared_log`]);
//! - a group's log is purged only behind an applied id its engine has flushed;
//! - the state machine applies each committed entry exactly once: the batch and the
//!   new applied log id go to the engine in one atomic write, and a restart resumes
//!   after the applied id;
//! - every replica applies the same batches in log order (leaders decide, never
//!   followers).
//!
//! Depends on the engine traits, openraft and raft-engine only (not on tablets).
//!
//! [`OwnedBatch`]: pinax_engine::OwnedBatch

// openraft's StorageError (224 bytes) is the error type its storage traits demand;
// the helpers around them return it too rather than boxing and unboxing.
#![allow(clippy::result_large_err)]

pub mod group;
pub mod log_store;
pub mod network;
pub mod quiesce;
pub mod runtime;
pub mod shared_log;
pub mod snapshot_file;
pub mod state_machine;

pub use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub use group::{GroupError, RaftGroup};
pub use log_store::{LogPlace, LogStore};
pub use shared_log::SharedLog;
pub use state_machine::{SplitHook, StateMachine};

/// A node's id (the same id the node has in the cluster catalog).
pub type NodeId = u64;

/// One replicated write: a batch of engine ops decided by a tablet leader.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Command {
    /// Hybrid time the batch was decided at: followers move their clocks to it.
    pub ht: u64,
    /// [`pinax_engine::OwnedBatch`] bytes, encoded as one byte string (bincode would
    /// otherwise encode and decode megabytes a byte at a time). Shared, not copied,
    /// between openraft, the log's in-memory tail and the state machine: an entry
    /// is cloned when the tail keeps it and again when the state machine reads it,
    /// and a bulk load's entries are hundreds of KiB each (the copies, page faults
    /// of their fresh allocations mostly, were a tenth of the daemon's perf samples
    /// in a 1M-row insert..select; its measured CPU moved within the spread).
    pub batch: Bytes,
    /// The client's id of the write request (0: none): replicas remember it, so a
    /// request sent again is not applied twice ([`pinax_common::RecentRequests`]).
    pub request: u128,
}

/// `Command::request` of a command that carries several writes (see
/// [`Command::merge`]). Clients' request ids are odd, 0 is none.
const MERGED: u128 = 2;

/// `Command::request` of a tablet split ([`Command::split`]).
const SPLIT: u128 = 4;

/// (request id, hybrid time) of each write a command carries.
pub type RequestTimes = Vec<(u128, u64)>;

impl Command {
    /// One command carrying `cmds` in order (group commit: writes proposed while
    /// the previous entry was being made durable share one entry and one fsync).
    /// Applying it applies their batches in order and remembers each request id
    /// with its own time; its `ht` is their newest. The layout keeps the struct
    /// (entries already in logs decode as before): `request` is [`MERGED`] and
    /// `batch` holds
    /// ```text
    /// n:u32le (ht:u64le request:u128le){n} batch bytes of each, concatenated
    /// ```
    /// (a concatenation of [`pinax_engine::OwnedBatch`] bytes is the batch of
    /// all their ops in order). A single command is returned as it is, unless its
    /// own request id is [`MERGED`].
    pub fn merge(mut cmds: Vec<Command>) -> Command {
        debug_assert!(cmds.len() == 1 || cmds.iter().all(|c| c.request != SPLIT), "a split merged with writes");
        if cmds.len() == 1 && cmds[0].request != MERGED {
            return cmds.pop().unwrap_or_else(|| unreachable!("one command"));
        }
        let size: usize = cmds.iter().map(|c| c.batch.len()).sum();
        let mut batch = Vec::with_capacity(4 + cmds.len() * 24 + size);
        batch.extend_from_slice(&(cmds.len() as u32).to_le_bytes());
        for c in &cmds {
            batch.extend_from_slice(&c.ht.to_le_bytes());
            batch.extend_from_slice(&c.request.to_le_bytes());
        }
        for c in &cmds {
            batch.extend_from_slice(&c.batch);
        }
        Command { ht: cmds.iter().map(|c| c.ht).max().unwrap_or(0), batch: batch.into(), request: MERGED }
    }

    /// The entry that splits the group's tablet: `payload` is the tablet
    /// layer's (what to split, where, into which ids), applied by the group's
    /// [`state_machine::SplitHook`] on every replica at its log index. Proposed
    /// alone: never merged with writes ([`RaftGroup::split_tablet`]).
    pub fn split(payload: Vec<u8>) -> Command {
        Command { ht: 0, batch: payload.into(), request: SPLIT }
    }

    /// The payload of a [`Command::split`].
    pub fn split_payload(&self) -> Option<&Bytes> {
        (self.request == SPLIT).then_some(&self.batch)
    }

    /// How many of `queue`'s first commands one entry carries: as many as fit in
    /// `max_bytes` (at least one), never a split with anything else.
    pub fn mergeable<'a>(queue: impl IntoIterator<Item = &'a Command>, max_bytes: usize) -> usize {
        let mut size = 0;
        let mut n = 0;
        for c in queue {
            size += c.batch.len();
            if c.request == SPLIT || size > max_bytes {
                // A split goes alone, even first.
                return if n == 0 { 1 } else { n };
            }
            n += 1;
        }
        n.max(1)
    }

    /// The batch bytes to apply and the (request id, time) pairs to remember
    /// (request 0 left out); an error for a malformed merged command and for a
    /// split (applied by its hook, not as a batch).
    pub fn into_parts(self) -> Result<(Bytes, RequestTimes), String> {
        if self.request == SPLIT {
            return Err("a split entry is not a write batch".into());
        }
        if self.request != MERGED {
            let requests = if self.request != 0 { vec![(self.request, self.ht)] } else { Vec::new() };
            return Ok((self.batch, requests));
        }
        let bad = || "truncated merged command".to_string();
        let n = u32::from_le_bytes(self.batch.get(..4).ok_or_else(bad)?.try_into().map_err(|_| bad())?) as usize;
        let end = n.checked_mul(24).and_then(|t| t.checked_add(4)).ok_or_else(bad)?;
        let table = self.batch.get(4..end).ok_or_else(bad)?;
        let mut requests = Vec::with_capacity(n);
        for part in table.chunks_exact(24) {
            let (ht, request) = part.split_at(8);
            let ht = u64::from_le_bytes(ht.try_into().map_err(|_| bad())?);
            let request = u128::from_le_bytes(request.try_into().map_err(|_| bad())?);
            if request != 0 {
                requests.push((request, ht));
            }
        }
        Ok((self.batch.slice(end..), requests))
    }
}

/// What applying a command answers (nothing: the leader decided everything).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reply;

openraft::declare_raft_types!(
    /// Pinax's openraft types: nodes are addressed by their RPC address.
    pub TypeConfig:
        D = Command,
        R = Reply,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = crate::snapshot_file::SnapshotFile,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type Membership = openraft::StoredMembership<NodeId, openraft::BasicNode>;

/// Timing of every group.
///
/// - Leaders send heartbeats every `heartbeat_ms` (100 ms), from a task of the
///   group ([`RaftGroup`]), not openraft's own timer: openraft 0.9 gives every
///   AppendEntries its `heartbeat_interval` to complete, follower fsync included.
///   At 100 ms, appends of megabytes under load timed out again and again (each
///   retry sending them once more), and nothing committed. `rpc_timeout_ms` (400 ms)
///   is what openraft is told instead.
/// - Elections take 0.5–1 s of silence: long enough that a busy 2-core machine does
///   not depose healthy leaders, short enough that a failover completes in about two
///   seconds. (A failover costs more than one timeout: a follower refuses votes for
///   `election_max_ms` after its leader's last heartbeat — the leader's lease — so the
///   first candidate is often refused. With 0.8–1.6 s, failovers took 2.6–3.2 s.)
/// - A group that needs no timers quiesces after `quiesce_after_ms` (3 s) without
///   a request ([`runtime`], [`group`]): long enough that a busy tablet never
///   pays for quiescing and waking between statements, short enough that a node
///   of thousands of idle tablets settles within seconds.
#[derive(Clone, Copy, Debug)]
pub struct RaftTiming {
    pub heartbeat_ms: u64,
    /// How long an AppendEntries may take (must be below `election_min_ms`).
    pub rpc_timeout_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
    pub quiesce_after_ms: u64,
}

impl Default for RaftTiming {
    fn default() -> Self {
        RaftTiming { heartbeat_ms: 100, rpc_timeout_ms: 400, election_min_ms: 500, election_max_ms: 1000, quiesce_after_ms: 3000 }
    }
}

/// Whether the consensus trace is on (`RUST_LOG=…,pinax_trace=debug`, the
/// target of the node's transaction trace): each group's log as opened (vote,
/// last and purged ids), vote requests served, membership entries applied,
/// snapshots sent and installed, each with its group. Elections
/// and membership changes are rare, so it costs nothing when nothing happens.
pub(crate) fn trace_on() -> bool {
    tracing::enabled!(target: "pinax_trace", tracing::Level::DEBUG)
}

/// The openraft configuration of a group.
pub fn config(timing: RaftTiming) -> Arc<openraft::Config> {
    let c = openraft::Config {
        cluster_name: "pinax".into(),
        // openraft's heartbeat interval is also its AppendEntries timeout; the
        // group's own task sends heartbeats every `heartbeat_ms`.
        heartbeat_interval: timing.rpc_timeout_ms,
        enable_heartbeat: false,
        election_timeout_min: timing.election_min_ms,
        election_timeout_max: timing.election_max_ms,
        install_snapshot_timeout: 5_000,
        max_payload_entries: 64,
        // A snapshot is the engine itself (see `state_machine`): building one records
        // the applied id and lets the log be purged behind it.
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(20_000),
        max_in_snapshot_log_to_keep: 2_000,
        purge_batch_size: 512,
        ..Default::default()
    };
    match c.validate() {
        Ok(c) => Arc::new(c),
        Err(e) => panic!("invariant: the built-in Raft configuration is valid: {e}"),
    }
}

/// Most bytes one decoded value may claim: what one RPC frame can carry
/// (`pinax_proto::frame::MAX_FRAME`), so no entry or message is larger. Without
/// a limit a forged or damaged length (found by the fuzzer: a byte string
/// claiming 74 PB) made the decoder allocate it and the process abort. The
/// limit changes nothing in the encoding.
const DECODE_LIMIT: usize = 64 << 20;

fn codec() -> bincode::config::Configuration<bincode::config::LittleEndian, bincode::config::Varint, bincode::config::Limit<DECODE_LIMIT>> {
    bincode::config::standard().with_limit::<DECODE_LIMIT>()
}

/// Encode a value for the log, the engine or the wire.
pub(crate) fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    match bincode::serde::encode_to_vec(v, codec()) {
        Ok(b) => b,
        Err(e) => panic!("invariant: Raft types always encode: {e}"),
    }
}

/// [`encode`], appended to `out`.
pub(crate) fn encode_into<T: Serialize>(v: &T, out: &mut Vec<u8>) {
    if let Err(e) = bincode::serde::encode_into_std_write(v, out, codec()) {
        panic!("invariant: Raft types always encode: {e}");
    }
}

/// Decode `data` as every Raft type read from the wire or the disk (log
/// entries, the three RPCs' requests, a quiesce request, votes, log ids,
/// memberships), discarding the results: the fuzz target's entry point
/// (`crates/raft/fuzz`). Never panics, whatever the bytes.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
    let _ = decode::<Entry>(data);
    let _ = decode::<AppendEntriesRequest<TypeConfig>>(data);
    let _ = decode::<VoteRequest<NodeId>>(data);
    let _ = decode::<InstallSnapshotRequest<TypeConfig>>(data);
    let _ = decode::<network::QuiesceRequest>(data);
    let _ = decode::<Vote>(data);
    let _ = decode::<LogId>(data);
    let _ = decode::<Membership>(data);
    let _ = decode::<Command>(data);
}

/// Decode bytes from disk or the wire (never trusted).
pub(crate) fn decode<T: serde::de::DeserializeOwned>(b: &[u8]) -> Result<T, String> {
    match bincode::serde::decode_from_slice(b, codec()) {
        Ok((v, n)) if n == b.len() => Ok(v),
        Ok((_, n)) => Err(format!("{} trailing bytes after a {}-byte value", b.len() - n, n)),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_engine::{Cf, OwnedBatch, WriteBatch};

    /// Group commit takes as many queued writes as fit, never a split with
    /// anything: a split first goes alone, one later ends the entry before it.
    #[test]
    fn a_split_is_never_merged_with_writes() {
        let w = |n: usize| Command { ht: 1, batch: vec![0; n].into(), request: 1 };
        let s = || Command::split(vec![1, 2, 3]);
        assert_eq!(Command::mergeable(&[w(10), w(10), w(10)], 100), 3);
        assert_eq!(Command::mergeable(&[w(60), w(60)], 100), 1);
        assert_eq!(Command::mergeable(&[w(200)], 100), 1, "one too big goes alone");
        assert_eq!(Command::mergeable(&[s(), w(1)], 100), 1);
        assert_eq!(Command::mergeable(&[w(1), w(1), s(), w(1)], 100), 2);
        assert_eq!(Command::mergeable(&[], 100), 1);
        assert_eq!(s().split_payload().map(|b| b.to_vec()), Some(vec![1, 2, 3]));
        assert!(w(1).split_payload().is_none());
        assert!(s().into_parts().is_err(), "a split is not a write batch");
    }

    /// Found by `make fuzz` (decode_raft): ten bytes whose length field claims
    /// 74 PB. The decoder allocated the claim and the process aborted; it must
    /// fail the decode instead.
    #[test]
    fn a_forged_length_fails_the_decode_instead_of_allocating_it() {
        let crash = [0x00, 0xfd, 0xff, 0xfc, 0x08, 0x01, 0x5e, 0x25, 0x08, 0x01];
        fuzz_decode(&crash);
        assert!(decode::<Command>(&crash).is_err());
    }

    fn cmd(ht: u64, request: u128, key: &[u8]) -> Command {
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, key, b"v");
        Command { ht, batch: b.into_bytes().into(), request }
    }

    /// What logs on disk hold: `batch` was a `Vec<u8>` encoded as one byte string.
    #[derive(Serialize)]
    struct CommandBefore {
        ht: u64,
        #[serde(with = "serde_bytes")]
        batch: Vec<u8>,
        request: u128,
    }

    #[test]
    fn commands_encode_as_before_their_batch_was_shared() {
        let c = cmd(5, 7, b"a");
        let before = encode(&CommandBefore { ht: 5, batch: c.batch.to_vec(), request: 7 });
        assert_eq!(encode(&c), before);
        let back: Command = decode(&before).unwrap();
        assert_eq!((back.ht, back.batch, back.request), (5, c.batch.clone(), 7));
        let mut appended = b"x".to_vec();
        encode_into(&c, &mut appended);
        assert_eq!(appended[1..], before[..]);
    }

    #[test]
    fn merged_commands_apply_every_batch_and_remember_every_request() {
        let one = Command::merge(vec![cmd(5, 7, b"a")]);
        assert_eq!((one.ht, one.request), (5, 7), "a single command goes as it is");
        assert_eq!(one.clone().into_parts().unwrap(), (cmd(5, 7, b"a").batch, vec![(7, 5)]));
        let m = Command::merge(vec![cmd(5, 7, b"a"), cmd(9, 0, b"b"), cmd(6, 11, b"c")]);
        assert_eq!((m.ht, m.request), (9, MERGED));
        let (bytes, requests) = m.clone().into_parts().unwrap();
        assert_eq!(requests, vec![(7, 5), (11, 6)]);
        assert_eq!(bytes.as_ptr(), m.batch[4 + 3 * 24..].as_ptr(), "the batches are the command's bytes, not a copy");
        let keys: Vec<Vec<u8>> = OwnedBatch::from_bytes(bytes.to_vec())
            .unwrap()
            .ops()
            .map(|op| match op {
                pinax_engine::BatchOp::Put { key, .. } => key.to_vec(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        // A lone command whose own id is the marker is wrapped, not misread.
        let odd = Command::merge(vec![cmd(3, MERGED, b"x")]);
        assert_eq!(odd.into_parts().unwrap().1, vec![(MERGED, 3)]);
        // Truncated tables are errors, not panics.
        for cut in [0, 3, 4 + 24 * 3 - 1] {
            let bad = Command { batch: m.batch.slice(..cut), ..m.clone() };
            assert!(bad.into_parts().is_err(), "cut at {cut}");
        }
    }
}
