//! The Raft log of one group: in the data directory's shared Raft log
//! ([`SharedLog`], under the group's id), or, for an engine without a directory
//! (the in-memory test double), in the engine's `Cf::Log`.
//!
//! What a group keeps ([`LogPlace::Shared`]: raft-engine entries and keys of the
//! group; [`LogPlace::Engine`]: `Cf::Log` keys):
//! ```text
//! "v"                → vote (synced)
//! "c"                → committed log id (not synced, at most every 100 ms: an
//!                      optimisation of restarts, see `COMMITTED_EVERY`)
//! "p"                → last purged log id (in the shared log: in the same synced
//!                      write as the compaction of the entries through it)
//! entries            → shared log: raft-engine entries (see `shared_log`);
//!                      engine: "e" + index:u64be → entry
//! ```
//! An entry's bytes are openraft's entry in bincode either way. Appends are
//! synced (unless the node runs `--no-sync`), so an entry is acknowledged
//! (`LogFlushed`) only once it survives a crash; a failed write acknowledges
//! nothing and is reported to openraft as a `StorageError`. The appends of all the
//! groups of a data directory share the shared log's writes and fsyncs (group
//! commit across tablets). The state machine's applies are not logged by the
//! engine (see `state_machine`): after a crash they are redone from these
//! entries, which is why the log is purged only behind an applied id the engine
//! has flushed.
//!
//! The shared log has no truncate: a truncation is recorded here in memory (the
//! entries after it are no longer read) and the next append, at the truncation
//! point, replaces them on disk. A crash in between brings them back as they were
//! before the conflicting AppendEntries arrived, which Raft allows (they were never
//! committed by this replica's log alone). Appends are checked for contiguity
//! before they are written (raft-engine cannot recover a log with a hole).
//!
//! The newest entries are also kept in memory (`Cached::tail`, bounded): the state
//! machine and replication to followers read an entry right after it was appended,
//! and answering them from there spares a read and a decode per entry. The tail is
//! cut before the log is (truncate, purge), so a reader that misses it finds the
//! entries in the log as before.

use crate::shared_log::{entry_bytes, entry_message, EntryMsg, GroupLog, SharedLog};
use crate::{decode, encode, encode_into, Entry, LogId, StorageError, TypeConfig, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader, StorageIOError};
use parking_lot::Mutex;
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, Snapshot, WriteBatch, WriteOptions};
use raft_engine::{Command as LogCommand, LogBatch};
use std::collections::VecDeque;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ENTRY_PREFIX: u8 = b'e';
const VOTE_KEY: &[u8] = b"v";
const COMMITTED_KEY: &[u8] = b"c";
const PURGED_KEY: &[u8] = b"p";

/// Where a group keeps its log.
#[derive(Clone, Debug)]
pub enum LogPlace {
    /// In the tablet engine's `Cf::Log` (the in-memory test double; written as
    /// the engine writes).
    Engine,
    /// In the data directory's shared Raft log, under the group's id. `sync`:
    /// appends are fsynced before openraft is told they are durable (the default);
    /// off (a node run with `--no-sync`) they are left in the OS's cache: a power
    /// loss loses the newest, a process crash nothing. Votes and purges are synced
    /// either way.
    Shared { log: Arc<SharedLog>, sync: bool },
}

fn entry_key(index: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = ENTRY_PREFIX;
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

fn io_err(subject: ErrorSubject<u64>, verb: ErrorVerb, e: impl std::fmt::Display) -> StorageError {
    StorageIOError::new(subject, verb, openraft::AnyError::error(e.to_string())).into()
}

#[derive(Default)]
struct Cached {
    last_purged: Option<LogId>,
    last_log: Option<LogId>,
    /// The newest appended entries, consecutive indexes (see the module docs),
    /// and the bytes of their payloads.
    tail: VecDeque<Entry>,
    tail_bytes: usize,
    /// Reads answered from `tail` (tests; shared with [`LogStore::tail_reads`]'s callers).
    tail_reads: Arc<AtomicU64>,
    /// The committed id openraft last gave, if it gave one since the log was
    /// opened, and when one was last written to the engine.
    committed: Option<Option<LogId>>,
    committed_written: Option<Instant>,
}

/// The committed id is written to the engine at most this often: it only spares a
/// restart waiting for a leader before applying what was committed, and an older
/// one is as correct (every id it names was committed). Openraft gives one per
/// commit; writing each was a RocksDB write per replicated write.
const COMMITTED_EVERY: Duration = Duration::from_millis(100);

/// Most entries and payload bytes kept in [`Cached::tail`].
const TAIL_ENTRIES: usize = 256;
const TAIL_BYTES: usize = 8 << 20;

fn payload_bytes(e: &Entry) -> usize {
    match &e.payload {
        openraft::EntryPayload::Normal(c) => c.batch.len(),
        _ => 0,
    }
}

impl Cached {
    /// Entries `[start, end)` if the tail holds every one of them.
    fn read_tail(&mut self, start: u64, end: u64) -> Option<Vec<Entry>> {
        let first = self.tail.front()?.log_id.index;
        let next = self.tail.back()?.log_id.index + 1;
        if start < first || end > next || start >= end {
            return None;
        }
        self.tail_reads.fetch_add(1, Ordering::Relaxed);
        Some(self.tail.range((start - first) as usize..(end - first) as usize).cloned().collect())
    }

    fn push_tail(&mut self, entries: &[Entry]) {
        let Some(e) = entries.first() else { return };
        if self.tail.back().is_some_and(|b| b.log_id.index + 1 != e.log_id.index) {
            self.tail.clear();
            self.tail_bytes = 0;
        }
        for e in entries {
            self.tail_bytes += payload_bytes(e);
            self.tail.push_back(e.clone());
        }
        while self.tail.len() > TAIL_ENTRIES || (self.tail_bytes > TAIL_BYTES && !self.tail.is_empty()) {
            if let Some(e) = self.tail.pop_front() {
                self.tail_bytes -= payload_bytes(&e);
            }
        }
    }

    /// Forget tail entries from `index` on.
    fn cut_tail_from(&mut self, index: u64) {
        while self.tail.back().is_some_and(|e| e.log_id.index >= index) {
            if let Some(e) = self.tail.pop_back() {
                self.tail_bytes -= payload_bytes(&e);
            }
        }
    }

    /// Forget tail entries up to `index`.
    fn cut_tail_through(&mut self, index: u64) {
        while self.tail.front().is_some_and(|e| e.log_id.index <= index) {
            if let Some(e) = self.tail.pop_front() {
                self.tail_bytes -= payload_bytes(&e);
            }
        }
    }
}

/// Where the log store's log is (see [`LogPlace`]).
enum Backend<E: KvEngine> {
    Engine(Arc<E>),
    Shared(Arc<GroupLog>),
}

impl<E: KvEngine> Clone for Backend<E> {
    fn clone(&self) -> Self {
        match self {
            Backend::Engine(e) => Backend::Engine(e.clone()),
            Backend::Shared(g) => Backend::Shared(g.clone()),
        }
    }
}

/// The log store (cheap to clone; a clone is also its reader).
pub struct LogStore<E: KvEngine> {
    backend: Backend<E>,
    cached: Arc<Mutex<Cached>>,
}

impl<E: KvEngine> Clone for LogStore<E> {
    fn clone(&self) -> Self {
        LogStore { backend: self.backend.clone(), cached: self.cached.clone() }
    }
}

/// How many times a read of the shared log is tried: the entries it locates may
/// be compacted or moved (purge, file rewrites) before they are read.
const READ_TRIES: usize = 3;

fn decode_message(m: &protobuf::well_known_types::BytesValue) -> Result<Entry, String> {
    let (index, bytes) = entry_bytes(m)?;
    let e: Entry = decode(bytes)?;
    if e.log_id.index != index {
        return Err(format!("Raft log entry stored at index {index} is entry {}", e.log_id.index));
    }
    Ok(e)
}

impl<E: KvEngine> LogStore<E> {
    /// Open the log of group `group` (empty for a new group) where `place` says;
    /// `engine` is the group's tablet engine (it holds the log for
    /// [`LogPlace::Engine`]). A group's log is open in one store at a time.
    pub fn open(engine: Arc<E>, place: &LogPlace, group: u64) -> Result<Self, StorageError> {
        let backend = match place {
            LogPlace::Engine => Backend::Engine(engine),
            LogPlace::Shared { log, sync } => Backend::Shared(Arc::new(log.attach(group, *sync).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))?)),
        };
        let store = LogStore { backend, cached: Arc::default() };
        let last_purged = store.get_id(PURGED_KEY, ErrorSubject::Logs)?;
        let last_log = store.last_entry()?.or(last_purged);
        if crate::trace_on() {
            let vote = store.get_raw(VOTE_KEY, ErrorSubject::Vote)?.and_then(|b| decode::<Vote>(&b).ok());
            tracing::debug!(target: "pinax_trace", group, ?vote, ?last_log, ?last_purged, "raft log opened");
        }
        *store.cached.lock() = Cached { last_purged, last_log, ..Cached::default() };
        Ok(store)
    }

    /// Append `entries` durably (the body of `append`, less openraft's callback).
    fn append_entries(&self, entries: &[Entry]) -> Result<(), String> {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return Ok(()) };
        // Contiguity: raft-engine writes a hole to disk before it panics on it, and
        // cannot open such a log again.
        if let Some(w) = entries.windows(2).find(|w| w[1].log_id.index != w[0].log_id.index + 1) {
            return Err(format!("refusing to append entries {} then {}: not consecutive", w[0].log_id.index, w[1].log_id.index));
        }
        // An append may replace a suffix (an implicit truncation, as raft-engine
        // does), not leave a hole; under the shared log it may not rewrite
        // entries it still holds below the first (checked below).
        let expected = self.cached.lock().last_log.map(|l| l.index + 1);
        if expected.is_some_and(|n| first.log_id.index > n) {
            return Err(format!("refusing to append entry {} to a log whose last entry is {:?}", first.log_id.index, expected.map(|n| n - 1)));
        }
        match &self.backend {
            Backend::Shared(g) => {
                let (engine, group) = (g.engine(), g.group);
                if let (Some(f), Some(l)) = (engine.first_index(group), engine.last_index(group)) {
                    if first.log_id.index < f || first.log_id.index > l + 1 {
                        return Err(format!("refusing to append entry {} to group {group}'s log holding {f}..={l}", first.log_id.index));
                    }
                }
                // Encoded straight into the message written (no copy per entry first).
                let msgs: Vec<_> = entries.iter().map(|e| entry_message(e.log_id.index, |out| encode_into(e, out), payload_bytes(e) + 64)).collect();
                let mut b = LogBatch::with_capacity(1);
                b.add_entries::<EntryMsg>(group, &msgs).map_err(|e| e.to_string())?;
                g.write(&mut b, g.sync)?;
            }
            Backend::Engine(engine) => {
                let mut b = engine.new_batch();
                if expected.is_some_and(|n| first.log_id.index < n) {
                    b.delete_range(Cf::Log, &entry_key(first.log_id.index), &entry_key(u64::MAX));
                    b.delete(Cf::Log, &entry_key(u64::MAX));
                }
                for e in entries {
                    b.put(Cf::Log, &entry_key(e.log_id.index), &encode(e));
                }
                engine.write(b, WriteOptions { sync: true, ..Default::default() }).map_err(|e| e.to_string())?;
            }
        }
        let mut c = self.cached.lock();
        c.cut_tail_from(first.log_id.index);
        c.last_log = Some(last.log_id);
        c.push_tail(entries);
        Ok(())
    }

    /// Entries `[start, end)` that the shared log holds, decoded.
    fn read_shared(g: &GroupLog, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let read_err = |e: &dyn std::fmt::Display| io_err(ErrorSubject::Logs, ErrorVerb::Read, e);
        let engine = g.engine();
        let mut tries = 0;
        loop {
            let (Some(first), Some(last)) = (engine.first_index(g.group), engine.last_index(g.group)) else { return Ok(Vec::new()) };
            let (from, to) = (start.max(first), end.min(last.saturating_add(1)));
            if from >= to {
                return Ok(Vec::new());
            }
            let mut msgs = Vec::with_capacity((to - from).min(1024) as usize);
            match engine.fetch_entries_to::<EntryMsg>(g.group, from, to, None, &mut msgs) {
                Ok(_) => return msgs.iter().map(|m| decode_message(m).map_err(|e| read_err(&e))).collect(),
                Err(e) => {
                    tries += 1;
                    if tries >= READ_TRIES {
                        return Err(read_err(&format!("reading entries {from}..{to} of group {}: {e}", g.group)));
                    }
                }
            }
        }
    }

    /// The count of entry reads answered from the in-memory tail (tests).
    pub fn tail_reads(&self) -> Arc<AtomicU64> {
        self.cached.lock().tail_reads.clone()
    }

    /// The id of the entry at `index`, if the log holds it.
    fn entry_id(&self, index: u64) -> Result<Option<LogId>, StorageError> {
        match &self.backend {
            Backend::Shared(g) => Ok(Self::read_shared(g, index, index + 1)?.pop().map(|e| e.log_id)),
            Backend::Engine(engine) => match engine.get(Cf::Log, &entry_key(index)).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))? {
                Some(b) => Ok(Some(decode::<Entry>(&b).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))?.log_id)),
                None => Ok(None),
            },
        }
    }

    fn last_entry(&self) -> Result<Option<LogId>, StorageError> {
        let engine = match &self.backend {
            Backend::Shared(g) => {
                let Some(last) = g.engine().last_index(g.group) else { return Ok(None) };
                return self.entry_id(last);
            }
            Backend::Engine(engine) => engine,
        };
        let snap = engine.snapshot();
        let mut it = snap.iter(Cf::Log, IterOptions::bounded(vec![ENTRY_PREFIX], vec![ENTRY_PREFIX + 1]));
        it.seek_to_last();
        if !it.valid().map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))? {
            return Ok(None);
        }
        let e: Entry = decode(it.value()).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))?;
        Ok(Some(e.log_id))
    }

    fn get_raw(&self, key: &[u8], subject: ErrorSubject<u64>) -> Result<Option<Vec<u8>>, StorageError> {
        match &self.backend {
            Backend::Shared(g) => Ok(g.engine().get(g.group, key)),
            Backend::Engine(engine) => engine.get(Cf::Log, key).map_err(|e| io_err(subject, ErrorVerb::Read, e)),
        }
    }

    fn get_id(&self, key: &[u8], subject: ErrorSubject<u64>) -> Result<Option<LogId>, StorageError> {
        match self.get_raw(key, subject.clone())? {
            Some(b) => Ok(Some(decode(&b).map_err(|e| io_err(subject, ErrorVerb::Read, e))?)),
            None => Ok(None),
        }
    }

    /// Put (`Some`) or delete (`None`) one key of the group, synced or not.
    fn put_key(&self, key: &[u8], value: Option<Vec<u8>>, sync: bool, subject: ErrorSubject<u64>) -> Result<(), StorageError> {
        match &self.backend {
            Backend::Shared(g) => {
                let mut b = LogBatch::with_capacity(1);
                match value {
                    Some(v) => b.put(g.group, key.to_vec(), v).map_err(|e| io_err(subject.clone(), ErrorVerb::Write, e))?,
                    None => b.delete(g.group, key.to_vec()),
                }
                g.write(&mut b, sync).map_err(|e| io_err(subject, ErrorVerb::Write, e))
            }
            Backend::Engine(engine) => {
                let mut b = engine.new_batch();
                match value {
                    Some(v) => b.put(Cf::Log, key, &v),
                    None => b.delete(Cf::Log, key),
                }
                engine.write(b, WriteOptions { sync, ..Default::default() }).map_err(|e| io_err(subject, ErrorVerb::Write, e))
            }
        }
    }
}

impl<E: KvEngine> RaftLogReader<TypeConfig> for LogStore<E> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(&mut self, range: RB) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.saturating_add(1),
            Bound::Excluded(&i) => i,
            Bound::Unbounded => u64::MAX,
        };
        let engine = {
            let mut c = self.cached.lock();
            if let Some(entries) = c.read_tail(start, end) {
                return Ok(entries);
            }
            match &self.backend {
                Backend::Shared(g) => {
                    // Entries after a truncation stay in the shared log until the
                    // next append replaces them: never read.
                    let end = end.min(c.last_log.map_or(0, |l| l.index.saturating_add(1)));
                    let g = g.clone();
                    drop(c);
                    return Self::read_shared(&g, start, end);
                }
                Backend::Engine(engine) => engine.clone(),
            }
        };
        let upper = match range.end_bound() {
            Bound::Included(&i) => entry_key(i).to_vec().into_iter().chain([0]).collect(),
            Bound::Excluded(&i) => entry_key(i).to_vec(),
            Bound::Unbounded => vec![ENTRY_PREFIX + 1],
        };
        let snap = engine.snapshot();
        let mut it = snap.iter(Cf::Log, IterOptions::bounded(entry_key(start).to_vec(), upper));
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid().map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))? {
            out.push(decode(it.value()).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))?);
            it.next();
        }
        Ok(out)
    }
}

impl<E: KvEngine> RaftLogStorage<TypeConfig> for LogStore<E> {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let c = self.cached.lock();
        Ok(LogState { last_purged_log_id: c.last_purged, last_log_id: c.last_log })
    }

    async fn get_log_reader(&mut self) -> Self {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.put_key(VOTE_KEY, Some(encode(vote)), true, ErrorSubject::Vote)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        match self.get_raw(VOTE_KEY, ErrorSubject::Vote)? {
            Some(b) => Ok(Some(decode(&b).map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Read, e))?)),
            None => Ok(None),
        }
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        {
            let mut c = self.cached.lock();
            c.committed = Some(committed);
            if committed.is_some() && c.committed_written.is_some_and(|at| at.elapsed() < COMMITTED_EVERY) {
                return Ok(());
            }
            c.committed_written = Some(Instant::now());
        }
        self.put_key(COMMITTED_KEY, committed.map(|c| encode(&c)), false, ErrorSubject::Store)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        if let Some(c) = self.cached.lock().committed {
            return Ok(c);
        }
        self.get_id(COMMITTED_KEY, ErrorSubject::Store)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        if let Err(msg) = self.append_entries(&entries) {
            callback.log_io_completed(Err(std::io::Error::other(msg.clone())));
            return Err(io_err(ErrorSubject::Logs, ErrorVerb::Write, msg));
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.cached.lock().cut_tail_from(log_id.index);
        match &self.backend {
            // Replaced on disk by the next append (see the module docs).
            Backend::Shared(_) => {}
            Backend::Engine(engine) => {
                let mut b = engine.new_batch();
                b.delete_range(Cf::Log, &entry_key(log_id.index), &entry_key(u64::MAX));
                b.delete(Cf::Log, &entry_key(u64::MAX));
                engine.write(b, WriteOptions { sync: true, ..Default::default() }).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Write, e))?;
            }
        }
        let prev = if log_id.index == 0 { None } else { self.entry_id(log_id.index - 1)? };
        let mut c = self.cached.lock();
        c.last_log = prev.or(c.last_purged);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.cached.lock().cut_tail_through(log_id.index);
        let through = log_id.index.saturating_add(1);
        match &self.backend {
            Backend::Shared(g) => {
                // The compaction and the purge point in one synced write.
                let mut b = LogBatch::with_capacity(2);
                b.add_command(g.group, LogCommand::Compact { index: through });
                b.put(g.group, PURGED_KEY.to_vec(), encode(&log_id)).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
                g.write(&mut b, true).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
            }
            Backend::Engine(engine) => {
                let mut b = engine.new_batch();
                b.put(Cf::Log, PURGED_KEY, &encode(&log_id));
                b.delete_range(Cf::Log, &entry_key(0), &entry_key(through));
                if through == u64::MAX {
                    b.delete(Cf::Log, &entry_key(u64::MAX));
                }
                engine.write(b, WriteOptions::default()).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
            }
        }
        let mut c = self.cached.lock();
        c.last_purged = Some(log_id);
        if c.last_log < Some(log_id) {
            c.last_log = Some(log_id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared_log::{LogOptions, DIR};
    use openraft::{CommittedLeaderId, EntryPayload};
    use pinax_engine_mem::MemEngine;

    fn entry(index: u64, term: u64, len: usize) -> Entry {
        let cmd = crate::Command { ht: index, batch: vec![0; len].into(), request: 0 };
        Entry { log_id: LogId::new(CommittedLeaderId::new(term, 1), index), payload: EntryPayload::Normal(cmd) }
    }

    fn entries(range: std::ops::RangeInclusive<u64>, term: u64, len: usize) -> Vec<Entry> {
        range.map(|i| entry(i, term, len)).collect()
    }

    fn indexes(v: Option<Vec<Entry>>) -> Option<Vec<u64>> {
        v.map(|v| v.iter().map(|e| e.log_id.index).collect())
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
    }

    /// Group `group`'s store in `log` (the tablet engine plays no part).
    fn store(log: &Arc<SharedLog>, group: u64) -> LogStore<MemEngine> {
        LogStore::open(Arc::new(MemEngine::new()), &LogPlace::Shared { log: log.clone(), sync: true }, group).unwrap()
    }

    /// (index, term) of every entry the store reads back.
    fn all(s: &mut LogStore<MemEngine>) -> Vec<(u64, u64)> {
        block_on(s.try_get_log_entries(0..)).unwrap().iter().map(|e| (e.log_id.index, e.log_id.leader_id.term)).collect()
    }

    fn state(s: &mut LogStore<MemEngine>) -> (Option<u64>, Option<(u64, u64)>) {
        let st = block_on(s.get_log_state()).unwrap();
        (st.last_purged_log_id.map(|l| l.index), st.last_log_id.map(|l| (l.index, l.leader_id.term)))
    }

    fn with_term(range: std::ops::RangeInclusive<u64>, term: u64) -> Vec<(u64, u64)> {
        range.map(|i| (i, term)).collect()
    }

    #[test]
    fn groups_sharing_one_log_keep_their_own_entries_votes_and_purges_across_reopening() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let log = SharedLog::open(&dir).unwrap();
        let (mut a, mut b, mut c) = (store(&log, 1), store(&log, 2), store(&log, 3));
        // Interleaved appends of the three groups.
        for i in 1..=10 {
            a.append_entries(&[entry(i, 1, 10)]).unwrap();
            b.append_entries(&[entry(i, 1, 20)]).unwrap();
            if i % 2 == 0 {
                c.append_entries(&entries(i - 1..=i, 1, 5)).unwrap();
            }
        }
        assert_eq!(log.groups(), vec![1, 2, 3]);
        let vote = Vote::new(3, 7);
        block_on(a.save_vote(&vote)).unwrap();
        // Purging one group leaves the others alone.
        block_on(a.purge(entry(6, 1, 0).log_id)).unwrap();
        assert_eq!(all(&mut a), with_term(7..=10, 1));
        assert_eq!(all(&mut b), with_term(1..=10, 1));
        assert_eq!(all(&mut c), with_term(1..=10, 1));
        // A conflicting suffix: truncated (no longer read), then overwritten.
        block_on(b.truncate(entry(8, 1, 0).log_id)).unwrap();
        assert_eq!(state(&mut b), (None, Some((7, 1))));
        assert_eq!(all(&mut b), with_term(1..=7, 1));
        b.append_entries(&entries(8..=9, 2, 20)).unwrap();
        // A purge past every entry (an installed snapshot).
        block_on(c.purge(entry(20, 1, 0).log_id)).unwrap();
        assert_eq!((state(&mut c), all(&mut c)), ((Some(20), Some((20, 1))), vec![]));
        // Nothing in memory after reopening: everything from the files.
        drop((a, b, c));
        drop(log);
        let log = SharedLog::open(&dir).unwrap();
        let (mut a, mut b, mut c) = (store(&log, 1), store(&log, 2), store(&log, 3));
        assert_eq!(block_on(a.read_vote()).unwrap(), Some(vote));
        assert_eq!(block_on(b.read_vote()).unwrap(), None);
        assert_eq!((state(&mut a), all(&mut a)), ((Some(6), Some((10, 1))), with_term(7..=10, 1)));
        let mut want_b = with_term(1..=7, 1);
        want_b.extend(with_term(8..=9, 2));
        assert_eq!((state(&mut b), all(&mut b)), ((None, Some((9, 2))), want_b));
        assert_eq!((state(&mut c), all(&mut c)), ((Some(20), Some((20, 1))), vec![]));
        assert_eq!(block_on(b.try_get_log_entries(3..5)).unwrap().len(), 2);
        assert_eq!(a.tail_reads().load(Ordering::Relaxed) + b.tail_reads().load(Ordering::Relaxed), 0);
        // The purged group goes on after its purge point.
        c.append_entries(&[entry(21, 2, 5)]).unwrap();
        assert_eq!(all(&mut c), vec![(21, 2)]);
    }

    #[test]
    fn a_truncation_not_followed_by_an_append_is_forgotten_by_a_crash() {
        // Documented behaviour: entries after a truncation are replaced on disk by
        // the next append only.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let log = SharedLog::open(&dir).unwrap();
        let mut a = store(&log, 1);
        a.append_entries(&entries(1..=6, 1, 10)).unwrap();
        block_on(a.truncate(entry(4, 1, 0).log_id)).unwrap();
        assert_eq!(all(&mut a), with_term(1..=3, 1));
        drop(a);
        let mut a = store(&log, 1);
        assert_eq!(all(&mut a), with_term(1..=6, 1));
    }

    #[test]
    fn appends_with_a_hole_or_behind_the_log_are_refused_and_write_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let log = SharedLog::open(&dir).unwrap();
        let mut a = store(&log, 1);
        a.append_entries(&entries(1..=3, 1, 10)).unwrap();
        assert!(a.append_entries(&[entry(5, 1, 10)]).is_err(), "a hole after the last entry");
        assert!(a.append_entries(&[entry(4, 1, 10), entry(6, 1, 10)]).is_err(), "a hole inside the append");
        block_on(a.purge(entry(2, 1, 0).log_id)).unwrap();
        assert!(a.append_entries(&[entry(2, 2, 10)]).is_err(), "over purged entries");
        assert_eq!(all(&mut a), with_term(3..=3, 1));
        // What openraft does after a purge past the log: the next entry follows it.
        block_on(a.purge(entry(9, 1, 0).log_id)).unwrap();
        assert!(a.append_entries(&[entry(11, 1, 10)]).is_err());
        a.append_entries(&[entry(10, 2, 10)]).unwrap();
        drop(a);
        drop(log);
        let log = SharedLog::open(&dir).unwrap();
        let mut a = store(&log, 1);
        assert_eq!((state(&mut a), all(&mut a)), ((Some(9), Some((10, 2))), vec![(10, 2)]));
    }

    #[test]
    fn a_removed_group_is_gone_after_reopening_and_starts_empty() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let log = SharedLog::open(&dir).unwrap();
        let (a, b) = (store(&log, 1), store(&log, 2));
        a.append_entries(&entries(1..=5, 1, 10)).unwrap();
        b.append_entries(&entries(1..=5, 1, 10)).unwrap();
        block_on(a.clone().save_vote(&Vote::new(2, 1))).unwrap();
        assert!(LogStore::open(Arc::new(MemEngine::new()), &LogPlace::Shared { log: log.clone(), sync: true }, 1).is_err(), "a group's log is open once");
        assert!(log.remove_group(1).is_err(), "not while its store has it open");
        let reader = a.clone();
        drop(a);
        assert!(log.remove_group(1).is_err(), "nor while a clone of it (a reader) is alive");
        drop(reader);
        log.remove_group(1).unwrap();
        log.remove_group(9).unwrap();
        assert_eq!(log.groups(), vec![2]);
        drop(b);
        drop(log);
        let log = SharedLog::open(&dir).unwrap();
        assert_eq!(log.groups(), vec![2]);
        let mut a = store(&log, 1);
        assert_eq!((state(&mut a), all(&mut a), block_on(a.read_vote()).unwrap()), ((None, None), vec![], None));
        let mut b = store(&log, 2);
        assert_eq!(all(&mut b), with_term(1..=5, 1));
    }

    #[test]
    fn purged_space_comes_back_even_with_an_idle_group_in_the_oldest_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let opts = LogOptions { file_bytes: 64 << 10, purge_bytes: 256 << 10 };
        let log = SharedLog::open_with(&dir, opts).unwrap();
        let (mut busy, idle) = (store(&log, 1), store(&log, 2));
        idle.append_entries(&entries(1..=3, 1, 10)).unwrap();
        for i in 1..=600 {
            busy.append_entries(&[entry(i, 1, 2000)]).unwrap();
        }
        let full = log.used_bytes();
        assert!(full > 1 << 20, "{full} bytes");
        block_on(busy.purge(entry(600, 1, 0).log_id)).unwrap();
        log.purge_expired_files().unwrap();
        let after = log.used_bytes();
        assert!(after <= 2 * opts.purge_bytes, "{after} bytes in use after purging, {full} before");
        drop((busy, idle));
        drop(log);
        let log = SharedLog::open_with(&dir, opts).unwrap();
        let (mut busy, mut idle) = (store(&log, 1), store(&log, 2));
        assert_eq!(all(&mut idle), with_term(1..=3, 1), "the idle group's entries were moved, not lost");
        assert_eq!((state(&mut busy), all(&mut busy)), ((Some(600), Some((600, 1))), vec![]));
    }

    #[test]
    fn the_committed_id_is_written_at_most_every_interval_and_read_back_as_last_given() {
        let tmp = tempfile::tempdir().unwrap();
        let log = SharedLog::open(&tmp.path().join(DIR)).unwrap();
        let mut s = store(&log, 4);
        let id = |i| Some(entry(i, 1, 0).log_id);
        let stored = |log: &SharedLog| log.engine.get(4, COMMITTED_KEY).map(|b| decode::<LogId>(&b).unwrap().index);
        block_on(s.save_committed(id(1))).unwrap();
        block_on(s.save_committed(id(2))).unwrap();
        assert_eq!(stored(&log), Some(1), "the second within the interval is not written");
        assert_eq!(block_on(s.read_committed()).unwrap(), id(2), "but is the one read back");
        std::thread::sleep(COMMITTED_EVERY);
        block_on(s.save_committed(id(3))).unwrap();
        assert_eq!(stored(&log), Some(3));
        // A restart reads what was written: an older id, still committed.
        block_on(s.save_committed(id(4))).unwrap();
        drop(s);
        let mut s = store(&log, 4);
        assert_eq!(block_on(s.read_committed()).unwrap(), id(3));
        block_on(s.save_committed(None)).unwrap();
        assert_eq!(stored(&log), None, "clearing it is always written");
    }

    #[test]
    fn an_engine_without_a_directory_keeps_the_log_in_its_log_column_family() {
        let engine = Arc::new(MemEngine::new());
        let mut s = LogStore::open(engine.clone(), &LogPlace::Engine, 1).unwrap();
        s.append_entries(&entries(1..=5, 1, 10)).unwrap();
        block_on(s.truncate(entry(5, 1, 0).log_id)).unwrap();
        s.append_entries(&[entry(5, 2, 10)]).unwrap();
        block_on(s.purge(entry(2, 1, 0).log_id)).unwrap();
        drop(s);
        let mut s = LogStore::open(engine.clone(), &LogPlace::Engine, 1).unwrap();
        let mut want = with_term(3..=4, 1);
        want.push((5, 2));
        assert_eq!((state(&mut s), all(&mut s)), ((Some(2), Some((5, 2))), want));
        assert!(engine.get(Cf::Log, &entry_key(4)).unwrap().is_some());
    }

    #[test]
    fn the_tail_answers_only_ranges_it_holds_whole_and_follows_truncate_and_purge() {
        let mut c = Cached::default();
        assert_eq!(indexes(c.read_tail(1, 2)), None, "empty");
        c.push_tail(&(1..=5).map(|i| entry(i, 1, 10)).collect::<Vec<_>>());
        assert_eq!(indexes(c.read_tail(2, 5)), Some(vec![2, 3, 4]));
        assert_eq!(indexes(c.read_tail(1, 6)), Some(vec![1, 2, 3, 4, 5]));
        assert_eq!(indexes(c.read_tail(0, 3)), None, "starts before the tail");
        assert_eq!(indexes(c.read_tail(4, 7)), None, "ends past the tail");
        assert_eq!(indexes(c.read_tail(3, 3)), None, "empty range: the engine answers");
        assert_eq!(c.tail_reads.load(Ordering::Relaxed), 2);
        // A conflicting suffix is truncated, and the new leader's entries follow.
        c.cut_tail_from(4);
        assert_eq!(indexes(c.read_tail(3, 5)), None);
        c.push_tail(&[entry(4, 2, 10)]);
        let got = c.read_tail(3, 5).unwrap();
        assert_eq!(got.iter().map(|e| (e.log_id.index, e.log_id.leader_id.term)).collect::<Vec<_>>(), vec![(3, 1), (4, 2)]);
        // Purged entries go; a gap (entries not appended here) starts the tail over.
        c.cut_tail_through(2);
        assert_eq!(indexes(c.read_tail(2, 4)), None);
        assert_eq!(indexes(c.read_tail(3, 5)), Some(vec![3, 4]));
        c.push_tail(&[entry(9, 2, 10)]);
        assert_eq!(indexes(c.read_tail(3, 5)), None);
        assert_eq!(indexes(c.read_tail(9, 10)), Some(vec![9]));
        assert_eq!(c.tail_bytes, 10);
        // Bounded by entries and by bytes.
        c.push_tail(&(10..10 + TAIL_ENTRIES as u64 + 5).map(|i| entry(i, 2, 1)).collect::<Vec<_>>());
        assert_eq!(c.tail.len(), TAIL_ENTRIES);
        c.push_tail(&[entry(10 + TAIL_ENTRIES as u64 + 5, 2, TAIL_BYTES)]);
        assert!(c.tail_bytes <= TAIL_BYTES && c.tail.len() == 1, "{} bytes in {} entries", c.tail_bytes, c.tail.len());
        c.push_tail(&[entry(11 + TAIL_ENTRIES as u64 + 5, 2, TAIL_BYTES + 1)]);
        assert!(c.tail.is_empty() && c.tail_bytes == 0, "an entry larger than the bound is not kept");
    }
}
