//! A Raft log's entries in append-only files of their own ("segments"), in a
//! directory next to the engine's (`<engine dir>/raft-log`), rather than in the
//! engine: as TiKV's raft-engine and YugabyteDB's WAL, an entry is written once,
//! appended and fsynced, and never goes through memtables, flushes or compactions
//! (in RocksDB it was written to the WAL, a memtable, then an SST, then compacted
//! before the purge deleted it).
//!
//! Layout: files `{seq:016x}.log` (`seq` from 1, one more per new segment), each
//! ```text
//! "PXRLOG01" seq:u64le                                 header
//! (len:u32le crc:u32le kind:u8 index:u64le payload[len])*   records
//! ```
//! `crc` is CRC-32C over `seq:u64le kind index:u64le payload` (the segment's own
//! sequence number is in it: a record copied into another file fails it). Kinds:
//! - [`KIND_ENTRY`]: the entry at `index` (payload: the caller's bytes);
//! - [`KIND_TRUNCATE`]: entries at `index` and after are gone (no payload).
//!
//! A segment is created at its full size ([`SEGMENT_BYTES`], a sparse file: no
//! block is allocated until written), as PostgreSQL's WAL segments are: an append
//! then never changes the file's size, and its `fdatasync` writes the data alone,
//! not also the inode (Python on this project's machines: p50 143-174 us appending
//! at a file's end, 86-108 us writing into a preallocated one; Pinax's single-row
//! inserts: the daemon's fdatasync -6%, rows/s 0.55 -> 0.59 of PostgreSQL's, mean
//! of 6 interleaved runs, bench/results/2026-11-27-log-prealloc.txt). Records end
//! where the zeros begin.
//!
//! Replaying every segment in order rebuilds the index → position map: an entry at
//! or before the last one replaces that suffix (an implicit truncation), one past a
//! gap starts the log over at it (after a purge past every entry). Where the
//! records stop and only zeros follow, the segment ends. A record that is cut short
//! or fails its checksum at the end of the newest segment is a write that never
//! completed (it was not synced, so never acknowledged): everything from it on is
//! cleared (the file cut there and extended again with zeros, so no record of that
//! write can reappear behind later appends). Anywhere else it is corruption, and
//! opening fails.
//!
//! Appends write every record of the call with one `write` and make them durable
//! with one `fdatasync` (a new segment's directory entry is synced when it is
//! created). A log opened without syncing appends ([`LogFiles::set_sync`], a node
//! run with `--no-sync`) leaves them in the OS's cache: a process crash loses
//! nothing, a power loss the newest appends; the segment before a new one is still
//! synced when the new one starts, so only the newest segment can end short.
//!
//! Purging forgets entries at the front and deletes the oldest segments while all
//! their entries are purged; the caller records the purge point first (in the
//! engine, synced), so a segment whose deletion a crash undid is dropped again at
//! the next open.
//!
//! Not thread-safe by itself: the log store holds it behind a mutex. Reads copy
//! the segment's file handle and read outside that mutex.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"PXRLOG01";
const HEADER: u64 = 16;
/// len, crc, kind, index.
const RECORD_HEADER: usize = 4 + 4 + 1 + 8;
const KIND_ENTRY: u8 = 1;
const KIND_TRUNCATE: u8 = 2;

/// A new segment is started once the active one reaches this size.
pub const SEGMENT_BYTES: u64 = 16 << 20;

fn corrupt(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn crc(seq: u64, kind: u8, index: u64, payload: &[u8]) -> u32 {
    let mut c = crc32c::crc32c(&seq.to_le_bytes());
    c = crc32c::crc32c_append(c, &[kind]);
    c = crc32c::crc32c_append(c, &index.to_le_bytes());
    crc32c::crc32c_append(c, payload)
}

/// A record whose payload `write` appends to `out` (encoded in place: no copy of
/// it is made first); returns the payload's length.
fn encode_record_with(out: &mut Vec<u8>, seq: u64, kind: u8, index: u64, write: impl FnOnce(&mut Vec<u8>)) -> io::Result<u32> {
    let at = out.len();
    out.resize(at + RECORD_HEADER, 0);
    write(out);
    let len = out.len() - at - RECORD_HEADER;
    let Ok(len32) = u32::try_from(len) else {
        out.truncate(at);
        return Err(corrupt(format!("log entry {index} of {len} bytes is too large")));
    };
    let sum = crc(seq, kind, index, &out[at + RECORD_HEADER..]);
    let h = &mut out[at..at + RECORD_HEADER];
    h[0..4].copy_from_slice(&len32.to_le_bytes());
    h[4..8].copy_from_slice(&sum.to_le_bytes());
    h[8] = kind;
    h[9..17].copy_from_slice(&index.to_le_bytes());
    Ok(len32)
}

/// One record parsed from `buf` at `at`: (kind, index, payload range), or None if
/// it is cut short or fails its checksum.
fn parse_record(buf: &[u8], at: usize, seq: u64) -> Option<(u8, u64, std::ops::Range<usize>)> {
    let h = buf.get(at..at.checked_add(RECORD_HEADER)?)?;
    let len = u32::from_le_bytes(h[0..4].try_into().ok()?) as usize;
    let sum = u32::from_le_bytes(h[4..8].try_into().ok()?);
    let kind = h[8];
    let index = u64::from_le_bytes(h[9..17].try_into().ok()?);
    let start = at + RECORD_HEADER;
    let payload = buf.get(start..start.checked_add(len)?)?;
    (crc(seq, kind, index, payload) == sum).then_some((kind, index, start..start + len))
}

fn segment_name(seq: u64) -> String {
    format!("{seq:016x}.log")
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

struct Segment {
    file: Arc<File>,
    /// The highest entry index written into it (0: none).
    max_index: u64,
}

/// Where an entry's record starts, and its payload's length.
#[derive(Clone, Copy, Debug)]
struct Loc {
    seq: u64,
    offset: u64,
    len: u32,
}

/// The segments of one log (see the module docs).
pub struct LogFiles {
    dir: PathBuf,
    /// By sequence number; the last one is the active segment (appended to).
    segments: BTreeMap<u64, Segment>,
    /// Where the next record goes in the active segment.
    end: u64,
    /// Index of `locs[0]`.
    first: u64,
    locs: VecDeque<Loc>,
    segment_bytes: u64,
    /// Appends are fsynced (see the module docs).
    sync: bool,
    /// fsyncs of appended records so far (tests).
    append_syncs: u64,
}

impl LogFiles {
    /// Open the log in `dir` (created if missing), replaying every segment.
    pub fn open(dir: &Path) -> io::Result<LogFiles> {
        Self::open_with(dir, SEGMENT_BYTES)
    }

    /// [`LogFiles::open`] with another segment size (tests).
    fn open_with(dir: &Path, segment_bytes: u64) -> io::Result<LogFiles> {
        std::fs::create_dir_all(dir)?;
        let mut seqs = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let name = e?.file_name();
            let name = name.to_string_lossy();
            if let Some(hex) = name.strip_suffix(".log") {
                if let Ok(seq) = u64::from_str_radix(hex, 16) {
                    seqs.push(seq);
                }
            }
        }
        seqs.sort_unstable();
        let mut log =
            LogFiles { dir: dir.to_path_buf(), segments: BTreeMap::new(), end: 0, first: 0, locs: VecDeque::new(), segment_bytes, sync: true, append_syncs: 0 };
        for (i, &seq) in seqs.iter().enumerate() {
            let newest = i + 1 == seqs.len();
            log.replay(seq, newest)?;
        }
        if log.segments.is_empty() {
            log.new_segment(1)?;
        }
        Ok(log)
    }

    fn replay(&mut self, seq: u64, newest: bool) -> io::Result<()> {
        let path = self.dir.join(segment_name(seq));
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let buf = std::fs::read(&path)?;
        if buf.len() < HEADER as usize || &buf[..8] != MAGIC || buf[8..16] != seq.to_le_bytes() {
            // (Sized before its header was synced: zeros.)
            if newest && (buf.len() < HEADER as usize || buf[..HEADER as usize].iter().all(|b| *b == 0)) {
                // Created, header not yet synced: nothing was ever acknowledged in it.
                drop(file);
                std::fs::remove_file(&path)?;
                return Ok(());
            }
            return Err(corrupt(format!("{}: not a log segment (bad header)", path.display())));
        }
        let mut at = HEADER as usize;
        let mut max_index = 0;
        while at < buf.len() {
            let Some((kind, index, payload)) = parse_record(&buf, at, seq) else {
                if buf[at..].iter().all(|b| *b == 0) {
                    break; // the rest of the segment, never written
                }
                if newest {
                    // A write cut short by a crash: never synced, never acknowledged.
                    // Cleared to its end (its later blocks may have reached the disk).
                    file.set_len(at as u64)?;
                    file.set_len(self.segment_bytes.max(at as u64))?;
                    file.sync_data()?;
                    break;
                }
                return Err(corrupt(format!("{}: damaged record at offset {at}", path.display())));
            };
            match kind {
                KIND_ENTRY => {
                    self.place(index, Loc { seq, offset: at as u64, len: payload.len() as u32 });
                    max_index = max_index.max(index);
                }
                KIND_TRUNCATE => self.cut_from(index),
                k => return Err(corrupt(format!("{}: unknown record kind {k} at offset {at}", path.display()))),
            }
            at = payload.end;
        }
        self.segments.insert(seq, Segment { file: Arc::new(file), max_index });
        self.end = at as u64;
        Ok(())
    }

    /// Record where entry `index` is (see the module docs for the rules).
    fn place(&mut self, index: u64, loc: Loc) {
        if self.locs.is_empty() || index > self.first + self.locs.len() as u64 || index < self.first {
            self.locs.clear();
            self.first = index;
        } else {
            self.cut_from(index);
        }
        self.locs.push_back(loc);
    }

    fn cut_from(&mut self, index: u64) {
        let keep = index.saturating_sub(self.first).min(self.locs.len() as u64);
        self.locs.truncate(keep as usize);
    }

    fn new_segment(&mut self, seq: u64) -> io::Result<()> {
        if !self.sync {
            // Only the newest segment may lose its tail (see the module docs).
            if let Some((_, old)) = self.segments.last_key_value() {
                old.file.sync_data()?;
            }
        }
        let path = self.dir.join(segment_name(seq));
        let mut file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&seq.to_le_bytes());
        file.write_all(&header)?;
        file.set_len(self.segment_bytes.max(HEADER))?;
        file.sync_data()?;
        sync_dir(&self.dir)?;
        self.segments.insert(seq, Segment { file: Arc::new(file), max_index: 0 });
        self.end = HEADER;
        Ok(())
    }

    fn active(&self) -> (u64, &Segment) {
        let (seq, s) = self.segments.last_key_value().unwrap_or_else(|| unreachable!("a log has an active segment"));
        (*seq, s)
    }

    /// Whether appends are fsynced before they return (the default) or left in
    /// the OS's cache (see the module docs).
    pub fn set_sync(&mut self, sync: bool) {
        self.sync = sync;
    }

    /// The first and last entry indexes held (None: no entry).
    pub fn bounds(&self) -> Option<(u64, u64)> {
        (!self.locs.is_empty()).then(|| (self.first, self.first + self.locs.len() as u64 - 1))
    }

    /// Append `(index, payload)` records (consecutive indexes) and make them
    /// durable. An index at or before the last entry replaces the entries from
    /// it on; one past a gap starts the log over at it.
    pub fn append(&mut self, entries: &[(u64, Vec<u8>)]) -> io::Result<()> {
        self.append_with(entries, |(index, p)| (*index, p.len()), |(_, p), out| out.extend_from_slice(p))
    }

    /// [`LogFiles::append`] of entries whose payloads `write` appends to the
    /// buffer written (`head`: an entry's index and its payload's expected size).
    pub fn append_with<T>(&mut self, entries: &[T], head: impl Fn(&T) -> (u64, usize), write: impl Fn(&T, &mut Vec<u8>)) -> io::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        if self.end >= self.segment_bytes {
            let (seq, _) = self.active();
            self.new_segment(seq + 1)?;
        }
        let (seq, seg) = self.active();
        let mut buf = Vec::with_capacity(entries.iter().map(|e| RECORD_HEADER + head(e).1).sum());
        let mut locs = Vec::with_capacity(entries.len());
        let mut max = 0;
        for e in entries {
            let index = head(e).0;
            let at = buf.len();
            let len = encode_record_with(&mut buf, seq, KIND_ENTRY, index, |out| write(e, out))?;
            locs.push((index, Loc { seq, offset: self.end + at as u64, len }));
            max = max.max(index);
        }
        seg.file.write_all_at(&buf, self.end)?;
        if self.sync {
            seg.file.sync_data()?;
            self.append_syncs += 1;
        }
        self.end += buf.len() as u64;
        if let Some(s) = self.segments.get_mut(&seq) {
            s.max_index = s.max_index.max(max);
        }
        for (index, loc) in locs {
            self.place(index, loc);
        }
        Ok(())
    }

    /// Forget the entries from `index` on, durably.
    pub fn truncate(&mut self, index: u64) -> io::Result<()> {
        let (seq, seg) = self.active();
        let mut buf = Vec::with_capacity(RECORD_HEADER);
        encode_record_with(&mut buf, seq, KIND_TRUNCATE, index, |_| {})?;
        seg.file.write_all_at(&buf, self.end)?;
        seg.file.sync_data()?;
        self.end += buf.len() as u64;
        self.cut_from(index);
        Ok(())
    }

    /// Forget the entries through `index` and delete the oldest segments while
    /// they hold only such entries (never the active one). The caller has
    /// recorded the purge.
    pub fn purge(&mut self, index: u64) -> io::Result<()> {
        let drop_n = (index + 1).saturating_sub(self.first).min(self.locs.len() as u64);
        self.locs.drain(..drop_n as usize);
        self.first = self.first.max(index + 1);
        let (active, _) = self.active();
        // Only a prefix of the segments: a later one may hold a truncation record
        // that replaying needs after the entries of the ones before it.
        let gone: Vec<u64> = self.segments.iter().take_while(|(seq, s)| **seq != active && s.max_index <= index).map(|(seq, _)| *seq).collect();
        for seq in gone {
            self.segments.remove(&seq);
            match std::fs::remove_file(self.dir.join(segment_name(seq))) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Where the records of entries `[start, end)` are (those held), to read
    /// with [`read_record`] without holding the log.
    pub fn locate(&self, start: u64, end: u64) -> Vec<(u64, Arc<File>, u64, u32)> {
        let from = start.max(self.first);
        let to = end.min(self.first + self.locs.len() as u64);
        (from..to)
            .filter_map(|i| {
                let loc = self.locs[(i - self.first) as usize];
                self.segments.get(&loc.seq).map(|s| (loc.seq, s.file.clone(), loc.offset, loc.len))
            })
            .collect()
    }

    /// Segment files now (tests).
    #[cfg(test)]
    fn segment_count(&self) -> usize {
        self.segments.len()
    }
}

/// The payload of the entry record at `offset` of segment `seq` (see
/// [`LogFiles::locate`]), its checksum verified.
pub fn read_record(seq: u64, file: &File, offset: u64, len: u32) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; RECORD_HEADER + len as usize];
    file.read_exact_at(&mut buf, offset)?;
    match parse_record(&buf, 0, seq) {
        Some((KIND_ENTRY, _, payload)) => {
            buf.truncate(payload.end);
            buf.drain(..payload.start);
            Ok(buf)
        }
        _ => Err(corrupt(format!("log segment {seq}: damaged entry record at offset {offset}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(i: u64, term: u8) -> Vec<u8> {
        let mut v = vec![term; (i % 7) as usize + 1];
        v.extend_from_slice(&i.to_le_bytes());
        v
    }

    fn read_all(log: &LogFiles) -> Vec<(u64, Vec<u8>)> {
        let Some((a, b)) = log.bounds() else { return Vec::new() };
        log.locate(a, b + 1).into_iter().zip(a..).map(|((seq, f, off, len), i)| (i, read_record(seq, &f, off, len).unwrap())).collect()
    }

    fn expect(log: &LogFiles, range: std::ops::RangeInclusive<u64>, term_of: impl Fn(u64) -> u8) {
        let want: Vec<(u64, Vec<u8>)> = range.map(|i| (i, payload(i, term_of(i)))).collect();
        assert_eq!(read_all(log), want);
    }

    fn batch(range: std::ops::RangeInclusive<u64>, term: u8) -> Vec<(u64, Vec<u8>)> {
        range.map(|i| (i, payload(i, term))).collect()
    }

    #[test]
    fn appends_truncations_and_purges_survive_reopening_across_segments() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFiles::open_with(dir.path(), 200).unwrap();
        assert_eq!(log.bounds(), None);
        for i in 1..=40 {
            log.append(&batch(i..=i, 1)).unwrap();
        }
        assert!(log.segment_count() > 3, "small segments roll over: {}", log.segment_count());
        expect(&log, 1..=40, |_| 1);
        // A conflicting suffix goes (into earlier segments too), new entries follow.
        log.truncate(25).unwrap();
        assert_eq!(log.bounds(), Some((1, 24)));
        log.append(&batch(25..=30, 2)).unwrap();
        // An append at or before the last entry replaces the suffix by itself.
        log.append(&batch(29..=31, 3)).unwrap();
        let term = |i| {
            if i < 25 {
                1
            } else if i < 29 {
                2
            } else {
                3
            }
        };
        expect(&log, 1..=31, term);
        drop(log);
        let mut log = LogFiles::open_with(dir.path(), 200).unwrap();
        expect(&log, 1..=31, term);
        // Purging deletes segments holding only purged entries.
        let before = log.segment_count();
        log.purge(20).unwrap();
        assert!(log.segment_count() < before);
        expect(&log, 21..=31, term);
        drop(log);
        // Reopened: segments still holding purged entries bring them back; the
        // caller purges again from its own record of the purge.
        let mut log = LogFiles::open_with(dir.path(), 200).unwrap();
        assert!(log.bounds().unwrap().0 <= 21);
        log.purge(20).unwrap();
        expect(&log, 21..=31, term);
        // A purge past every entry: the log starts over at the next append.
        log.purge(100).unwrap();
        assert_eq!(log.bounds(), None);
        log.append(&batch(101..=103, 4)).unwrap();
        drop(log);
        let mut log = LogFiles::open_with(dir.path(), 200).unwrap();
        log.purge(100).unwrap();
        expect(&log, 101..=103, |_| 4);
    }

    #[test]
    fn a_log_that_does_not_sync_appends_keeps_them_readable_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFiles::open_with(dir.path(), 200).unwrap();
        log.append(&batch(1..=2, 1)).unwrap();
        assert_eq!(log.append_syncs, 1, "appends are synced by default");
        log.set_sync(false);
        for i in 3..=30 {
            log.append(&batch(i..=i, 1)).unwrap();
        }
        assert_eq!(log.append_syncs, 1, "no append was synced");
        assert!(log.segment_count() > 2, "segments rolled over without syncing appends");
        expect(&log, 1..=30, |_| 1);
        drop(log);
        // A process that stopped without syncing lost nothing: the records are in
        // the OS's cache.
        let log = LogFiles::open_with(dir.path(), 200).unwrap();
        expect(&log, 1..=30, |_| 1);
    }

    #[test]
    fn records_of_a_torn_write_do_not_reappear_behind_later_appends() {
        // One append of entries 6 and 7 reached the disk in part: 7's record whole,
        // 6's not. Replaying stops at 6; the new 6 written there must not be
        // followed by the old 7 (never acknowledged), whatever their lengths.
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFiles::open_with(dir.path(), 1 << 20).unwrap();
        log.append(&batch(1..=5, 1)).unwrap();
        let at = log.end;
        log.append(&batch(6..=7, 1)).unwrap();
        drop(log);
        let seg = dir.path().join(segment_name(1));
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(&[0xff], at + RECORD_HEADER as u64).unwrap();
        drop(f);
        let mut log = LogFiles::open_with(dir.path(), 1 << 20).unwrap();
        expect(&log, 1..=5, |_| 1);
        // The same length as the old 6: the old 7 would follow it exactly.
        log.append(&batch(6..=6, 2)).unwrap();
        drop(log);
        expect(&LogFiles::open_with(dir.path(), 1 << 20).unwrap(), 1..=6, |i| if i < 6 { 1 } else { 2 });
    }

    #[test]
    fn segments_written_at_their_exact_size_still_replay() {
        // Segments written before they were created at full size end with their
        // last record; older segments' zero tails end them too.
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFiles::open_with(dir.path(), 200).unwrap();
        for i in 1..=20 {
            log.append(&batch(i..=i, 1)).unwrap();
        }
        assert!(log.segment_count() > 2);
        let end = log.end;
        let newest = dir.path().join(segment_name(log.active().0));
        drop(log);
        OpenOptions::new().write(true).open(&newest).unwrap().set_len(end).unwrap();
        let mut log = LogFiles::open_with(dir.path(), 200).unwrap();
        expect(&log, 1..=20, |_| 1);
        log.append(&batch(21..=21, 1)).unwrap();
        drop(log);
        expect(&LogFiles::open_with(dir.path(), 200).unwrap(), 1..=21, |_| 1);
    }

    #[test]
    fn a_torn_tail_is_cut_and_damage_elsewhere_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFiles::open_with(dir.path(), 1 << 20).unwrap();
        log.append(&batch(1..=5, 1)).unwrap();
        drop(log);
        let seg = dir.path().join(segment_name(1));
        let zeros_from = |at: u64| std::fs::read(&seg).unwrap()[at as usize..].iter().all(|b| *b == 0);
        let len = LogFiles::open_with(dir.path(), 1 << 20).unwrap().end;
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), 1 << 20, "a segment has its full size from the start");
        assert!(zeros_from(len));
        // A crash in the middle of an append: half a record at the end.
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(&[9, 0, 0, 0, 1, 2], len).unwrap();
        drop(f);
        let mut log = LogFiles::open_with(dir.path(), 1 << 20).unwrap();
        expect(&log, 1..=5, |_| 1);
        assert_eq!(log.end, len);
        assert!(zeros_from(len), "the torn record was cleared");
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), 1 << 20, "and the segment keeps its size");
        log.append(&batch(6..=6, 1)).unwrap();
        drop(log);
        expect(&LogFiles::open_with(dir.path(), 1 << 20).unwrap(), 1..=6, |_| 1);
        // A flipped byte in the newest segment's last record: cut there (never synced).
        let len = LogFiles::open_with(dir.path(), 1 << 20).unwrap().end;
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(&[0xff], len - 1).unwrap();
        drop(f);
        expect(&LogFiles::open_with(dir.path(), 1 << 20).unwrap(), 1..=5, |_| 1);
        // Damage in a segment that is not the newest: corruption, not a torn write.
        let mut log = LogFiles::open_with(dir.path(), 1 << 20).unwrap();
        log.segment_bytes = 0;
        log.append(&batch(6..=6, 1)).unwrap();
        assert_eq!(log.segment_count(), 2);
        drop(log);
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(&[0xff], HEADER + RECORD_HEADER as u64).unwrap();
        drop(f);
        let e = LogFiles::open_with(dir.path(), 1 << 20).err().expect("a damaged record in an older segment fails the open");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        // A record read back is checked too.
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFiles::open_with(dir.path(), 1 << 20).unwrap();
        log.append(&batch(1..=2, 1)).unwrap();
        let locs = log.locate(1, 3);
        let (seq, f, off, len) = &locs[1];
        OpenOptions::new().write(true).open(dir.path().join(segment_name(1))).unwrap().write_all_at(&[0xee], off + RECORD_HEADER as u64).unwrap();
        assert!(read_record(*seq, f, *off, *len).is_err());
        assert_eq!(read_record(locs[0].0, &locs[0].1, locs[0].2, locs[0].3).unwrap(), payload(1, 1));
    }
}
