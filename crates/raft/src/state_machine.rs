//! The state machine of one group: the tablet engine's data column families.
//!
//! Applying a batch of committed entries is one engine write: every command's ops,
//! plus the last applied log id and the membership (in `Cf::Meta`). It is neither
//! synced nor written to the engine's write-ahead log (`skip_log`): the Raft log
//! is the write-ahead log, and the entries it applies were synced to it before
//! they were committed. A crash loses the applies since the last memtable flush,
//! with the applied id written alongside them (flushes are atomic across column
//! families): the restart redoes them from the log. (Writing them to RocksDB's log
//! too copied every command into it a second time.) So the log must keep every
//! entry past the flushed applied id: `build_snapshot`, which lets openraft purge
//! the log behind the applied id it reports, flushes first.
//!
//! Snapshots: the engine is the snapshot. `build_snapshot` records the applied id
//! (so openraft may purge the log behind it) without copying anything; a peer that
//! needs a snapshot gets `get_current_snapshot`: the engine's data column families
//! at one engine snapshot (the applied id and membership included, read from that
//! same snapshot), streamed into a [`SnapshotFile`] in the engine's scratch
//! directory (never the whole tablet in memory), which openraft sends in chunks.
//! Installing one checks the received file whole, then replaces those column
//! families with its entries ([`KvEngine::replace_contents`]: RocksDB range-deletes
//! the tablet's keys and ingests an SST file per column family), `Cf::Meta` last, so
//! the applied id changes only once the data is in. A crash part-way leaves the old
//! applied id over partly replaced data: the replica restarts behind its leader's
//! log, replays its own log and is sent the snapshot again, whose install replaces
//! everything; it cannot lead meanwhile (its log is behind a majority's).

use crate::snapshot_file::SnapshotFile;
use crate::{decode, encode, Entry, LogId, Membership, Reply, StorageError, TypeConfig};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StorageIOError};
use parking_lot::Mutex;
use pinax_common::{HybridClock, HybridTime, RecentRequests};
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, OwnedBatch, Snapshot as _, WriteBatch, WriteOptions};
use std::sync::Arc;

/// `Cf::Meta` entries (key, value) to write.
pub type MetaEntries = Vec<(Vec<u8>, Vec<u8>)>;

/// `Cf::Meta` keys of the applied state. Other `Cf::Meta` keys are the tablet's.
const APPLIED_KEY: &[u8] = b"raft.applied";
const MEMBERSHIP_KEY: &[u8] = b"raft.membership";

/// The column families a snapshot carries (everything but the log), in the order
/// they are sent and replaced (`Cf::Meta`, with the applied id, last).
const DATA_CFS: [Cf; 3] = [Cf::Regular, Cf::Intents, Cf::Meta];

fn snapshot_err(meta: &SnapshotMeta<u64, openraft::BasicNode>, e: impl std::fmt::Display) -> StorageError {
    StorageIOError::read_snapshot(Some(meta.signature()), openraft::AnyError::error(e.to_string())).into()
}

fn sm_err(verb: ErrorVerb, e: impl std::fmt::Display) -> StorageError {
    StorageIOError::new(ErrorSubject::StateMachine, verb, openraft::AnyError::error(e.to_string())).into()
}

/// Applies the entry that splits a group's tablet ([`crate::Command::split`]) on
/// a replica: the tablet layer's, which knows what a split makes (the halves'
/// engines, their states and seeds: [`StateMachine::half_seed`]).
pub trait SplitHook: Send + Sync {
    /// Apply split entry `log_id` carrying `payload`. Everything the group
    /// applied before it is in the engine and durable (the engine was flushed).
    /// The hook writes what the split makes together with `applied` (`Cf::Meta`
    /// entries of the parent: its applied id at `log_id`), atomically and
    /// durably: a crash before that write replays the entry (so the hook must
    /// cope with finding part of what it makes already there), none after it.
    fn apply_split(&self, log_id: crate::LogId, payload: &[u8], applied: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String>;
}

/// The state machine (cheap to clone; a clone is also its snapshot builder).
pub struct StateMachine<E: KvEngine> {
    engine: Arc<E>,
    /// Applies split entries (none: the group's tablet never splits; such an
    /// entry is then a storage error).
    split_hook: Option<Arc<dyn SplitHook>>,
    clock: Arc<HybridClock>,
    /// The last snapshot built (its meta only: the data is the engine).
    built: Arc<Mutex<Option<SnapshotMeta<u64, openraft::BasicNode>>>>,
    /// Request ids of the commands applied lately.
    recent: Arc<Mutex<RecentRequests>>,
    /// The group's id (for the trace).
    group: u64,
}

impl<E: KvEngine> Clone for StateMachine<E> {
    fn clone(&self) -> Self {
        StateMachine {
            engine: self.engine.clone(),
            split_hook: self.split_hook.clone(),
            clock: self.clock.clone(),
            built: self.built.clone(),
            recent: self.recent.clone(),
            group: self.group,
        }
    }
}

fn snapshot_id(applied: &Option<LogId>) -> String {
    match applied {
        Some(l) => format!("{}-{}-{}", l.leader_id.term, l.leader_id.node_id, l.index),
        None => "empty".into(),
    }
}

impl<E: KvEngine> StateMachine<E> {
    pub fn new(engine: Arc<E>, clock: Arc<HybridClock>) -> Self {
        StateMachine { engine, split_hook: None, clock, built: Arc::default(), recent: Arc::default(), group: 0 }
    }

    /// This state machine, applying split entries with `hook`.
    pub fn splitting_with(mut self, hook: Option<Arc<dyn SplitHook>>) -> Self {
        self.split_hook = hook;
        self
    }

    /// This state machine, of group `group` (named in the trace).
    pub fn in_group(mut self, group: u64) -> Self {
        self.group = group;
        self
    }

    /// The request ids this state machine records as it applies commands.
    pub fn recent_requests(&self) -> Arc<Mutex<RecentRequests>> {
        self.recent.clone()
    }

    fn read_state<S: pinax_engine::Snapshot>(snap: &S) -> Result<(Option<LogId>, Membership), StorageError> {
        let applied = match snap.get(Cf::Meta, APPLIED_KEY).map_err(|e| sm_err(ErrorVerb::Read, e))? {
            Some(b) => Some(decode(&b).map_err(|e| sm_err(ErrorVerb::Read, e))?),
            None => None,
        };
        let membership = match snap.get(Cf::Meta, MEMBERSHIP_KEY).map_err(|e| sm_err(ErrorVerb::Read, e))? {
            Some(b) => decode(&b).map_err(|e| sm_err(ErrorVerb::Read, e))?,
            None => Membership::default(),
        };
        Ok((applied, membership))
    }

    /// The `Cf::Meta` entries that start the group of one half of a split from
    /// its parent's state at the split (`parent`: a snapshot of the parent's
    /// engine with the split applied): the parent's voters and learners as its
    /// membership, and an applied id at index 0 of term 0 with no log. The group
    /// starts as a replica restarts after a snapshot (openraft purges its empty
    /// log up to that id and builds a snapshot of the engine), with an empty vote:
    /// its first election is of term 1, so its log ids never sort below the seed.
    /// Refused while the parent's membership is joint (a change in flight).
    pub fn half_seed<S: pinax_engine::Snapshot>(parent: &S) -> Result<MetaEntries, String> {
        let (_, membership) = Self::read_state(parent).map_err(|e| e.to_string())?;
        let config = membership.membership();
        if config.get_joint_config().len() != 1 {
            return Err("the parent's membership is changing".into());
        }
        if config.voter_ids().next().is_none() {
            return Err("the parent has no voters".into());
        }
        let seed = LogId::new(openraft::CommittedLeaderId::new(0, 0), 0);
        Ok(vec![(APPLIED_KEY.to_vec(), encode(&seed)), (MEMBERSHIP_KEY.to_vec(), encode(&Membership::new(Some(seed), config.clone())))])
    }

    /// Write batch `b` of applied entries through `last` (nothing if none),
    /// moving the clock to `newest_ht` and remembering `requests`.
    fn write_applied(&self, mut b: E::Batch, last: Option<LogId>, newest_ht: HybridTime, requests: Vec<(u128, HybridTime)>) -> Result<(), StorageError> {
        let Some(last) = last else { return Ok(()) };
        b.put(Cf::Meta, APPLIED_KEY, &encode(&last));
        if newest_ht.0 != 0 {
            self.clock.update(newest_ht);
        }
        self.engine.write(b, WriteOptions { sync: false, skip_log: true }).map_err(|e| sm_err(ErrorVerb::Write, e))?;
        let mut recent = self.recent.lock();
        for (id, ht) in requests {
            recent.insert(id, ht);
        }
        Ok(())
    }

    /// The applied log id (for tests and status pages).
    pub fn applied(&self) -> Result<Option<LogId>, StorageError> {
        Ok(Self::read_state(&self.engine.snapshot())?.0)
    }
}

impl<E: KvEngine> RaftSnapshotBuilder<TypeConfig> for StateMachine<E> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let (applied, membership) = Self::read_state(&self.engine.snapshot())?;
        // The applies through `applied` were not logged (see the module docs):
        // durable before the log behind them may go.
        self.engine.flush().map_err(|e| sm_err(ErrorVerb::Write, e))?;
        let meta = SnapshotMeta { last_log_id: applied, last_membership: membership, snapshot_id: snapshot_id(&applied) };
        *self.built.lock() = Some(meta.clone());
        // Only the meta of a built snapshot is used (to purge the log behind it).
        let empty = SnapshotFile::create(self.engine.dir()).map_err(|e| sm_err(ErrorVerb::Write, e))?;
        Ok(Snapshot { meta, snapshot: Box::new(empty) })
    }
}

impl<E: KvEngine> RaftStateMachine<TypeConfig> for StateMachine<E> {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Membership), StorageError> {
        Self::read_state(&self.engine.snapshot())
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Reply>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut b = self.engine.new_batch();
        let mut replies = Vec::new();
        let mut last = None;
        let mut newest_ht = HybridTime(0);
        let mut requests = Vec::new();
        for e in entries {
            match e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(cmd) if cmd.split_payload().is_some() => {
                    // What came before is written and durable first (applies skip
                    // the engine's log: a durable split over lost applies would
                    // lose rows the halves read), then the hook's one write.
                    let before = std::mem::replace(&mut b, self.engine.new_batch());
                    self.write_applied(before, last.take(), std::mem::take(&mut newest_ht), std::mem::take(&mut requests))?;
                    self.engine.flush().map_err(|err| sm_err(ErrorVerb::Write, err))?;
                    let hook = self
                        .split_hook
                        .clone()
                        .ok_or_else(|| StorageIOError::apply(e.log_id, openraft::AnyError::error("a split entry in a group that cannot split")))?;
                    let payload = cmd.split_payload().cloned().unwrap_or_default();
                    hook.apply_split(e.log_id, &payload, &[(APPLIED_KEY.to_vec(), encode(&e.log_id))])
                        .map_err(|err| StorageIOError::apply(e.log_id, openraft::AnyError::error(err)))?;
                    if crate::trace_on() {
                        tracing::debug!(target: "pinax_trace", group = self.group, log_id = %e.log_id, "split applied");
                    }
                    replies.push(Reply);
                    continue;
                }
                EntryPayload::Normal(cmd) => {
                    let bad = |err: String| StorageIOError::apply(e.log_id, openraft::AnyError::error(err));
                    let ht = HybridTime(cmd.ht);
                    let (bytes, reqs) = cmd.into_parts().map_err(bad)?;
                    OwnedBatch::replay_bytes(&bytes, &mut b).map_err(|err| bad(err.to_string()))?;
                    newest_ht = newest_ht.max(ht);
                    requests.extend(reqs.into_iter().map(|(id, ht)| (id, HybridTime(ht))));
                }
                EntryPayload::Membership(m) => {
                    if crate::trace_on() {
                        tracing::debug!(target: "pinax_trace", group = self.group, log_id = %e.log_id, membership = %m, "membership applied");
                    }
                    b.put(Cf::Meta, MEMBERSHIP_KEY, &encode(&Membership::new(Some(e.log_id), m)));
                }
            }
            last = Some(e.log_id);
            replies.push(Reply);
        }
        self.write_applied(b, last, newest_ht, requests)?;
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFile>, StorageError> {
        Ok(Box::new(SnapshotFile::create(self.engine.dir()).map_err(|e| sm_err(ErrorVerb::Write, e))?))
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta<u64, openraft::BasicNode>, mut snapshot: Box<SnapshotFile>) -> Result<(), StorageError> {
        // Checked whole before the engine is touched.
        let mut entries = snapshot.entries().map_err(|e| snapshot_err(meta, e))?;
        self.engine.replace_contents(&DATA_CFS, &mut entries).map_err(|e| sm_err(ErrorVerb::Write, e))?;
        if crate::trace_on() {
            tracing::debug!(target: "pinax_trace", group = self.group, snapshot = %meta.snapshot_id, last_log = ?meta.last_log_id, "snapshot installed");
        }
        // The applied id and membership came in the snapshot's `Cf::Meta` (read from
        // the same engine snapshot as the meta): replaced with the rest, durably.
        *self.built.lock() = Some(meta.clone());
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        if self.built.lock().is_none() {
            return Ok(None);
        }
        let snap = self.engine.snapshot();
        let (applied, membership) = Self::read_state(&snap)?;
        let mut file = SnapshotFile::create(self.engine.dir()).map_err(|e| sm_err(ErrorVerb::Write, e))?;
        let mut entries = DATA_CFS.into_iter().flat_map(|cf| {
            let mut it = snap.iter(cf, IterOptions::default());
            it.seek_to_first();
            std::iter::from_fn(move || match it.valid() {
                Ok(true) => {
                    let e = (cf, it.key().to_vec(), it.value().to_vec());
                    it.next();
                    Some(Ok(e))
                }
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            })
        });
        let written = file.write_entries(&mut entries).map_err(|e| sm_err(ErrorVerb::Write, e))?;
        if crate::trace_on() {
            tracing::debug!(target: "pinax_trace", group = self.group, snapshot = snapshot_id(&applied), ?written, "snapshot built to send");
        }
        let meta = SnapshotMeta { last_log_id: applied, last_membership: membership, snapshot_id: snapshot_id(&applied) };
        Ok(Some(Snapshot { meta, snapshot: Box::new(file) }))
    }
}
