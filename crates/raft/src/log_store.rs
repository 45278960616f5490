//! The Raft log of one group: its entries in files of their own next to the tablet
//! engine ([`LogFiles`], `<engine dir>/raft-log`), its other state in the engine's
//! `Cf::Log`. An engine without a directory (the in-memory test double) keeps the
//! entries in `Cf::Log` too.
//!
//! Layout in `Cf::Log`:
//! ```text
//! "v"                → vote (synced)
//! "c"                → committed log id (not synced, at most every 100 ms: an
//!                      optimisation of restarts, see `COMMITTED_EVERY`)
//! "p"                → last purged log id (synced before purged segments are deleted)
//! "e" + index:u64be  → entry (bincode of openraft's Entry): engines without a
//!                      directory only
//! ```
//! An entry's bytes are the same bincode in either place. Appends are synced, so an
//! entry is acknowledged (`LogFlushed`) only once it survives a crash. The state
//! machine's applies are not logged by the engine (see `state_machine`): after a
//! crash they are redone from these entries, which is why the log is purged only
//! behind an applied id the engine has flushed.
//!
//! The newest entries are also kept in memory (`Cached::tail`, bounded): the state
//! machine and replication to followers read an entry right after it was appended,
//! and answering them from there spares a RocksDB iterator and a decode per read.
//! The tail is cut before the files or the engine are (truncate, purge), so a
//! reader that misses it finds the entries there as before.

use crate::log_files::{read_record, LogFiles};
use crate::{decode, encode, encode_into, Entry, LogId, StorageError, TypeConfig, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader, StorageIOError};
use parking_lot::Mutex;
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, Snapshot, WriteBatch, WriteOptions};
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
/// The entries' directory, under the engine's.
pub const LOG_DIR: &str = "raft-log";

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

/// The log store (cheap to clone; a clone is also its reader).
pub struct LogStore<E: KvEngine> {
    engine: Arc<E>,
    cached: Arc<Mutex<Cached>>,
    /// The entries' files (None: the entries are in `Cf::Log`).
    files: Option<Arc<Mutex<LogFiles>>>,
}

impl<E: KvEngine> Clone for LogStore<E> {
    fn clone(&self) -> Self {
        LogStore { engine: self.engine.clone(), cached: self.cached.clone(), files: self.files.clone() }
    }
}

fn log_err(verb: ErrorVerb) -> impl Fn(std::io::Error) -> StorageError {
    move |e| io_err(ErrorSubject::Logs, verb, e)
}

impl<E: KvEngine> LogStore<E> {
    /// Open the log of `engine` (empty for a new group): its entries' files in
    /// the engine's directory, or `Cf::Log` for an engine without one.
    pub fn open(engine: Arc<E>) -> Result<Self, StorageError> {
        let last_purged: Option<LogId> = match engine.get(Cf::Log, PURGED_KEY).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))? {
            Some(b) => Some(decode(&b).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))?),
            None => None,
        };
        let files = match engine.dir() {
            Some(dir) => Some(Arc::new(Mutex::new(LogFiles::open(&dir.join(LOG_DIR)).map_err(log_err(ErrorVerb::Read))?))),
            None => None,
        };
        let store = LogStore { engine, cached: Arc::default(), files };
        if let (Some(files), Some(p)) = (&store.files, last_purged) {
            // Segments whose deletion a crash undid.
            files.lock().purge(p.index).map_err(log_err(ErrorVerb::Delete))?;
        }
        let last_log = store.last_entry()?.or(last_purged);
        *store.cached.lock() = Cached { last_purged, last_log, ..Cached::default() };
        Ok(store)
    }

    /// Append `entries` durably (the body of `append`, less openraft's callback).
    fn append_entries(&self, entries: &[Entry]) -> Result<(), String> {
        let Some(last) = entries.last() else { return Ok(()) };
        match &self.files {
            Some(files) => {
                // Encoded straight into the buffer written (no copy per entry first).
                files.lock().append_with(entries, |e| (e.log_id.index, payload_bytes(e) + 64), encode_into).map_err(|e| e.to_string())?;
            }
            None => {
                let mut b = self.engine.new_batch();
                for e in entries {
                    b.put(Cf::Log, &entry_key(e.log_id.index), &encode(e));
                }
                self.engine.write(b, WriteOptions { sync: true, ..Default::default() }).map_err(|e| e.to_string())?;
            }
        }
        let mut c = self.cached.lock();
        c.last_log = Some(last.log_id);
        c.push_tail(entries);
        Ok(())
    }

    /// Entries `[start, end)` that the files hold, decoded (read outside the lock).
    fn read_files(files: &Mutex<LogFiles>, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let locs = files.lock().locate(start, end);
        let mut out = Vec::with_capacity(locs.len());
        for (seq, file, offset, len) in locs {
            let bytes = read_record(seq, &file, offset, len).map_err(log_err(ErrorVerb::Read))?;
            out.push(decode(&bytes).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))?);
        }
        Ok(out)
    }

    /// Whether appends are fsynced before openraft is told they are durable (the
    /// default) or left in the OS's cache (a node run with `--no-sync`: a power
    /// loss loses the newest, a process crash nothing; see `log_files`). Entries
    /// an engine without a directory holds follow the engine's own writes.
    pub fn set_sync(&self, sync: bool) {
        if let Some(files) = &self.files {
            files.lock().set_sync(sync);
        }
    }

    /// The count of entry reads answered from the in-memory tail (tests).
    pub fn tail_reads(&self) -> Arc<AtomicU64> {
        self.cached.lock().tail_reads.clone()
    }

    fn last_entry(&self) -> Result<Option<LogId>, StorageError> {
        if let Some(files) = &self.files {
            let Some((_, last)) = files.lock().bounds() else { return Ok(None) };
            return Ok(Self::read_files(files, last, last + 1)?.pop().map(|e| e.log_id));
        }
        let snap = self.engine.snapshot();
        let mut it = snap.iter(Cf::Log, IterOptions::bounded(vec![ENTRY_PREFIX], vec![ENTRY_PREFIX + 1]));
        it.seek_to_last();
        if !it.valid().map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))? {
            return Ok(None);
        }
        let e: Entry = decode(it.value()).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))?;
        Ok(Some(e.log_id))
    }

    fn get_id(&self, key: &[u8], subject: ErrorSubject<u64>) -> Result<Option<LogId>, StorageError> {
        match self.engine.get(Cf::Log, key).map_err(|e| io_err(subject.clone(), ErrorVerb::Read, e))? {
            Some(b) => Ok(Some(decode(&b).map_err(|e| io_err(subject, ErrorVerb::Read, e))?)),
            None => Ok(None),
        }
    }

    fn write(&self, b: E::Batch, sync: bool, subject: ErrorSubject<u64>) -> Result<(), StorageError> {
        self.engine.write(b, WriteOptions { sync, ..Default::default() }).map_err(|e| io_err(subject, ErrorVerb::Write, e))
    }

    /// Delete entries with index in `[from, to)`.
    fn delete_entries(&self, from: u64, to: u64, b: &mut E::Batch) {
        b.delete_range(Cf::Log, &entry_key(from), &entry_key(to));
        if to == u64::MAX {
            b.delete(Cf::Log, &entry_key(u64::MAX));
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
        if let Some(entries) = self.cached.lock().read_tail(start, end) {
            return Ok(entries);
        }
        if let Some(files) = &self.files {
            return Self::read_files(files, start, end);
        }
        let upper = match range.end_bound() {
            Bound::Included(&i) => entry_key(i).to_vec().into_iter().chain([0]).collect(),
            Bound::Excluded(&i) => entry_key(i).to_vec(),
            Bound::Unbounded => vec![ENTRY_PREFIX + 1],
        };
        let snap = self.engine.snapshot();
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
        let mut b = self.engine.new_batch();
        b.put(Cf::Log, VOTE_KEY, &encode(vote));
        self.write(b, true, ErrorSubject::Vote)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        match self.engine.get(Cf::Log, VOTE_KEY).map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Read, e))? {
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
        let mut b = self.engine.new_batch();
        match committed {
            Some(c) => b.put(Cf::Log, COMMITTED_KEY, &encode(&c)),
            None => b.delete(Cf::Log, COMMITTED_KEY),
        }
        self.write(b, false, ErrorSubject::Store)
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
        match &self.files {
            Some(files) => files.lock().truncate(log_id.index).map_err(log_err(ErrorVerb::Delete))?,
            None => {
                let mut b = self.engine.new_batch();
                self.delete_entries(log_id.index, u64::MAX, &mut b);
                self.write(b, true, ErrorSubject::Logs)?;
            }
        }
        let prev = if log_id.index == 0 { None } else { self.last_entry()? };
        let mut c = self.cached.lock();
        c.last_log = prev.or(c.last_purged);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.cached.lock().cut_tail_through(log_id.index);
        let mut b = self.engine.new_batch();
        b.put(Cf::Log, PURGED_KEY, &encode(&log_id));
        match &self.files {
            Some(files) => {
                // Recorded durably before any segment goes (see `LogFiles`).
                self.write(b, true, ErrorSubject::Logs)?;
                files.lock().purge(log_id.index).map_err(log_err(ErrorVerb::Delete))?;
            }
            None => {
                self.delete_entries(0, log_id.index.saturating_add(1), &mut b);
                self.write(b, false, ErrorSubject::Logs)?;
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
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64, term: u64, len: usize) -> Entry {
        let cmd = crate::Command { ht: index, batch: vec![0; len].into(), request: 0 };
        Entry { log_id: LogId::new(CommittedLeaderId::new(term, 1), index), payload: EntryPayload::Normal(cmd) }
    }

    fn indexes(v: Option<Vec<Entry>>) -> Option<Vec<u64>> {
        v.map(|v| v.iter().map(|e| e.log_id.index).collect())
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    }

    fn engine_entries(e: &pinax_engine_rocks::RocksEngine) -> usize {
        let snap = e.snapshot();
        let mut it = snap.iter(Cf::Log, IterOptions::bounded(vec![ENTRY_PREFIX], vec![ENTRY_PREFIX + 1]));
        it.seek_to_first();
        let mut n = 0;
        while it.valid().unwrap() {
            n += 1;
            it.next();
        }
        n
    }

    #[test]
    fn entries_live_in_files_and_survive_reopening() {
        use pinax_engine_rocks::{RocksConfig, RocksEngine};
        let tmp = tempfile::tempdir().unwrap();
        let open = || Arc::new(RocksEngine::open(tmp.path().join("db"), &RocksConfig::default()).unwrap());
        let engine = open();
        let mut store = LogStore::open(engine.clone()).unwrap();
        assert!(tmp.path().join("db").join(LOG_DIR).is_dir());
        store.append_entries(&(1..=5).map(|i| entry(i, 1, 10)).collect::<Vec<_>>()).unwrap();
        let all = |s: &mut LogStore<RocksEngine>| {
            block_on(s.try_get_log_entries(0..)).unwrap().iter().map(|e| (e.log_id.index, e.log_id.leader_id.term)).collect::<Vec<_>>()
        };
        assert_eq!(all(&mut store), (1..=5).map(|i| (i, 1)).collect::<Vec<_>>());
        store.append_entries(&(6..=8).map(|i| entry(i, 2, 10)).collect::<Vec<_>>()).unwrap();
        block_on(store.truncate(entry(8, 2, 0).log_id)).unwrap();
        store.append_entries(&[entry(8, 3, 10)]).unwrap();
        block_on(store.purge(entry(3, 1, 0).log_id)).unwrap();
        let want = vec![(4, 1), (5, 1), (6, 2), (7, 2), (8, 3)];
        assert_eq!(all(&mut store), want);
        assert_eq!(engine_entries(&engine), 0, "appends go to the files only");
        drop(store);
        drop(engine);
        // Reopened: nothing in memory, every read from the files.
        let engine = open();
        let mut store = LogStore::open(engine.clone()).unwrap();
        let state = block_on(store.get_log_state()).unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(3));
        assert_eq!(state.last_log_id.map(|l| (l.index, l.leader_id.term)), Some((8, 3)));
        assert_eq!(all(&mut store), want);
        assert_eq!(block_on(store.try_get_log_entries(5..7)).unwrap().len(), 2);
        assert_eq!(store.tail_reads().load(Ordering::Relaxed), 0);
        // A purge past every entry, then a reopen: an empty log after it.
        block_on(store.purge(entry(20, 3, 0).log_id)).unwrap();
        drop(store);
        drop(engine);
        let engine = open();
        let mut store = LogStore::open(engine).unwrap();
        let state = block_on(store.get_log_state()).unwrap();
        assert_eq!((state.last_purged_log_id.map(|l| l.index), state.last_log_id.map(|l| l.index)), (Some(20), Some(20)));
        assert_eq!(all(&mut store), vec![]);
    }

    #[test]
    fn the_committed_id_is_written_at_most_every_interval_and_read_back_as_last_given() {
        use pinax_engine_rocks::{RocksConfig, RocksEngine};
        let tmp = tempfile::tempdir().unwrap();
        let engine = Arc::new(RocksEngine::open(tmp.path().join("db"), &RocksConfig::default()).unwrap());
        let mut store = LogStore::open(engine.clone()).unwrap();
        let id = |i| Some(entry(i, 1, 0).log_id);
        let stored = |e: &RocksEngine| e.get(Cf::Log, COMMITTED_KEY).unwrap().map(|b| decode::<LogId>(&b).unwrap().index);
        block_on(store.save_committed(id(1))).unwrap();
        block_on(store.save_committed(id(2))).unwrap();
        assert_eq!(stored(&engine), Some(1), "the second within the interval is not written");
        assert_eq!(block_on(store.read_committed()).unwrap(), id(2), "but is the one read back");
        std::thread::sleep(COMMITTED_EVERY);
        block_on(store.save_committed(id(3))).unwrap();
        assert_eq!(stored(&engine), Some(3));
        // A restart reads what was written: an older id, still committed.
        block_on(store.save_committed(id(4))).unwrap();
        drop(store);
        let mut store = LogStore::open(engine.clone()).unwrap();
        assert_eq!(block_on(store.read_committed()).unwrap(), id(3));
        block_on(store.save_committed(None)).unwrap();
        assert_eq!(stored(&engine), None, "clearing it is always written");
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
