//! One Raft log engine per data directory, shared by every group on it
//! ([`SharedLog`], TiKV's `raft-engine` in `<data directory>/raft-log`).
//!
//! Each group's log lives in it under the group's id (the tablet id): its entries
//! (appended, read back, compacted at the front when purged) and a few keys (vote,
//! purge point, committed id; see `log_store`). Every group's writes go to one
//! stream of files; writers that arrive together are written by one of them as a
//! group and made durable by one `fdatasync` ("group commit": the appends of many
//! tablets share one fsync). Opening replays the files and rebuilds each group's
//! in-memory index (entry index → file position) and keys.
//!
//! Entries are stored as protobuf `BytesValue`s (raft-engine stores protobuf
//! messages): their index (8 bytes, big-endian), then openraft's entry in the
//! log's usual encoding (bincode).
//!
//! Hazards of raft-engine that the log store guards against:
//! - An append that leaves a hole (its first index past the group's last + 1) or
//!   rewrites compacted entries panics *after* reaching the disk, and every later
//!   open panics replaying it: the log store checks contiguity before writing.
//! - There is no truncate command: entries after a conflict are replaced by the
//!   next append at that index (openraft appends right after truncating).
//! - A failed `fdatasync` panics inside raft-engine (Linux may drop the dirty
//!   pages of a failed fsync, so a retry could "succeed" without the data); the
//!   other writers of that write group are then woken as if it had succeeded.
//!   [`SharedLog::open`] therefore makes such a panic abort the process before it
//!   unwinds (a hook on panics raised in raft-engine's code), as PostgreSQL
//!   PANICs on a failed fsync: nothing is acknowledged after it, and the restart
//!   recovers from what is on disk. Write errors that raft-engine returns (EIO,
//!   ENOSPC after its one retry in a new file) come back as errors: the log store
//!   reports them to openraft as a `StorageError` and acknowledges nothing.
//! - Files are freed only by [`SharedLog::purge_expired_files`] (call it
//!   periodically): once the files exceed `purge_bytes` ([`LogOptions::for_disk`]:
//!   a thirty-second of the disk, at most [`PURGE_BYTES`]) it rewrites the few
//!   entries of idle groups that pin the oldest files, deletes or recycles the
//!   files no group needs any more, and names groups whose many old entries pin
//!   them (they should purge their log: the node asks them for a snapshot).
//!
//! A group's log is open in at most one log store at a time ([`SharedLog::attach`]),
//! and is removed ([`SharedLog::remove_group`], raft-engine's `Clean`) only while
//! no store has it open.

use parking_lot::Mutex;
use protobuf::well_known_types::BytesValue;
use raft_engine::{Command, Config, Engine, LogBatch, MessageExt, ReadableSize, RecoveryMode};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};

/// The log's directory under a data directory.
pub const DIR: &str = "raft-log";

/// Size of one log file.
pub const FILE_BYTES: u64 = 32 << 20;
/// `purge_expired_files` frees files once the log's files exceed this. Files are
/// recycled (renamed and overwritten rather than deleted and created again), up to
/// 1.5 × this much, so the log's directory holds at most about 2.5 × this.
pub const PURGE_BYTES: u64 = 512 << 20;

/// Sizes of a log's files (tests use small ones).
#[derive(Clone, Copy, Debug)]
pub struct LogOptions {
    pub file_bytes: u64,
    pub purge_bytes: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions { file_bytes: FILE_BYTES, purge_bytes: PURGE_BYTES }
    }
}

/// The least [`LogOptions::purge_bytes`] a disk's size brings it down to.
pub const MIN_PURGE_BYTES: u64 = 64 << 20;

impl LogOptions {
    /// Sizes for a log on a disk of `disk_bytes`: the log may hold about 2.5 ×
    /// `purge_bytes`, so that is a thirty-second of the disk, between
    /// [`MIN_PURGE_BYTES`] and [`PURGE_BYTES`] (on a 4 GiB disk 128 MiB instead
    /// of 512, which with its recycled files would have taken a third of it),
    /// in files of a sixteenth of that (at most [`FILE_BYTES`]).
    pub fn for_disk(disk_bytes: u64) -> LogOptions {
        let purge_bytes = (disk_bytes / 32).clamp(MIN_PURGE_BYTES, PURGE_BYTES);
        LogOptions { file_bytes: (purge_bytes / 16).min(FILE_BYTES), purge_bytes }
    }
}

/// raft-engine's view of an entry (see the module docs).
pub(crate) struct EntryMsg;

impl MessageExt for EntryMsg {
    type Entry = BytesValue;

    fn index(e: &BytesValue) -> u64 {
        let mut b = [0u8; 8];
        if let Some(head) = e.value.get(..8) {
            b.copy_from_slice(head);
        }
        u64::from_be_bytes(b)
    }
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Panics raised in raft-engine's own code abort the process (see the module docs).
fn abort_on_log_engine_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            let in_engine = info.location().is_some_and(|l| l.file().contains("raft-engine-"));
            if in_engine {
                // No unwinding: the other writers of the failed write group must not
                // go on as if their writes were durable.
                eprintln!("the shared Raft log failed (see the panic above); aborting so that nothing more is acknowledged");
                std::process::abort();
            }
        }));
    });
}

/// One data directory's Raft log engine, shared by every group on it (see the
/// module docs). Open it once per directory.
pub struct SharedLog {
    pub(crate) engine: Engine,
    dir: PathBuf,
    /// Groups whose log a log store has open.
    open: Mutex<HashSet<u64>>,
}

impl std::fmt::Debug for SharedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLog").field("dir", &self.dir).finish()
    }
}

impl SharedLog {
    /// Open (creating if missing) the log in `dir`, replaying its files.
    pub fn open(dir: &Path) -> std::io::Result<Arc<SharedLog>> {
        Self::open_with(dir, LogOptions::default())
    }

    /// [`SharedLog::open`] with other file sizes.
    pub fn open_with(dir: &Path, opts: LogOptions) -> std::io::Result<Arc<SharedLog>> {
        abort_on_log_engine_panics();
        // raft-engine creates its directory, not the directories above it.
        std::fs::create_dir_all(dir).map_err(|e| other(format!("creating {}: {e}", dir.display())))?;
        let cfg = Config {
            dir: dir.to_string_lossy().into_owned(),
            // A torn write at the end (a crash mid-append: never synced, never
            // acknowledged) is cut; damage anywhere else fails the open.
            recovery_mode: RecoveryMode::TolerateTailCorruption,
            recovery_threads: 2,
            // Entries are written as they are (as the per-tablet logs before did):
            // compressing them would cost CPU on the write path of a 2-core node.
            batch_compression_threshold: ReadableSize(0),
            target_file_size: ReadableSize(opts.file_bytes),
            purge_threshold: ReadableSize(opts.purge_bytes.max(opts.file_bytes)),
            enable_log_recycle: true,
            ..Config::default()
        };
        let engine = Engine::open(cfg).map_err(|e| other(format!("opening the Raft log in {}: {e}", dir.display())))?;
        Ok(Arc::new(SharedLog { engine, dir: dir.to_path_buf(), open: Mutex::new(HashSet::new()) }))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The groups that have a log here (entries or keys).
    pub fn groups(&self) -> Vec<u64> {
        let mut g = self.engine.raft_groups();
        g.sort_unstable();
        g
    }

    /// Remove group `group`'s log for good (every entry and key), durably. Fails
    /// while a log store has it open. Nothing to do for a group without a log.
    pub fn remove_group(&self, group: u64) -> std::io::Result<()> {
        let open = self.open.lock();
        if open.contains(&group) {
            return Err(other(format!("the Raft log of group {group} is still open")));
        }
        if !self.engine.raft_groups().contains(&group) {
            return Ok(());
        }
        let mut b = LogBatch::default();
        b.add_command(group, Command::Clean);
        self.engine.write(&mut b, true).map_err(|e| other(format!("removing the Raft log of group {group}: {e}")))?;
        Ok(())
    }

    /// Free the files no group needs (see the module docs); the groups whose old
    /// entries pin files and should purge their logs.
    pub fn purge_expired_files(&self) -> std::io::Result<Vec<u64>> {
        self.engine.purge_expired_files().map_err(|e| other(format!("purging the Raft log in {}: {e}", self.dir.display())))
    }

    /// Bytes of the log's files in use (recycled files left out).
    pub fn used_bytes(&self) -> u64 {
        self.engine.get_used_size() as u64
    }

    /// Open group `group`'s log for a log store (see [`GroupLog`]).
    pub(crate) fn attach(self: &Arc<Self>, group: u64, sync: bool) -> Result<GroupLog, String> {
        if !self.open.lock().insert(group) {
            return Err(format!("the Raft log of group {group} is already open"));
        }
        Ok(GroupLog { log: self.clone(), group, sync })
    }
}

/// One group's log in a [`SharedLog`], open in a log store; closed when dropped.
pub(crate) struct GroupLog {
    pub(crate) log: Arc<SharedLog>,
    pub(crate) group: u64,
    /// Appends are fsynced before they are acknowledged (off: `--no-sync`).
    pub(crate) sync: bool,
}

impl Drop for GroupLog {
    fn drop(&mut self) {
        self.log.open.lock().remove(&self.group);
    }
}

impl GroupLog {
    pub(crate) fn engine(&self) -> &Engine {
        &self.log.engine
    }

    /// Write `b`, fsynced if `sync`.
    pub(crate) fn write(&self, b: &mut LogBatch, sync: bool) -> Result<(), String> {
        self.log.engine.write(b, sync).map(|_| ()).map_err(|e| e.to_string())
    }
}

/// An entry's bytes as raft-engine stores them (see the module docs).
pub(crate) fn entry_message(index: u64, encode: impl FnOnce(&mut Vec<u8>), size_hint: usize) -> BytesValue {
    let mut value = Vec::with_capacity(8 + size_hint);
    value.extend_from_slice(&index.to_be_bytes());
    encode(&mut value);
    let mut m = BytesValue::new();
    m.value = value;
    m
}

/// The entry bytes of a stored message, and the index it names.
pub(crate) fn entry_bytes(m: &BytesValue) -> Result<(u64, &[u8]), String> {
    if m.value.len() < 8 {
        return Err(format!("a Raft log entry of {} bytes has no index", m.value.len()));
    }
    Ok((EntryMsg::index(m), &m.value[8..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logs_share_of_a_disk_follows_its_size() {
        let gib = 1u64 << 30;
        // Large disks: today's sizes.
        let big = LogOptions::for_disk(500 * gib);
        assert_eq!((big.purge_bytes, big.file_bytes), (PURGE_BYTES, FILE_BYTES));
        // A 4 GiB disk: 128 MiB before purging (about 320 MiB at most with
        // recycled files, not 1.25 GiB), in 8 MiB files.
        let small = LogOptions::for_disk(4 * gib);
        assert_eq!((small.purge_bytes, small.file_bytes), (128 << 20, 8 << 20));
        // Tiny or unknown sizes keep a floor.
        let tiny = LogOptions::for_disk(256 << 20);
        assert_eq!((tiny.purge_bytes, tiny.file_bytes), (MIN_PURGE_BYTES, 4 << 20));
        assert!(LogOptions::for_disk(0).purge_bytes >= MIN_PURGE_BYTES);
    }
}
