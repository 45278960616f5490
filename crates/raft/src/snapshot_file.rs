//! A Raft snapshot as a file: what a leader sends a replica that is too far
//! behind (or new), built from the tablet's key ranges at one engine snapshot.
//!
//! Format: frames `[cf: u8][key len: u32 le][key][value len: u32 le][value]`,
//! ordered by column family (as [`crate::state_machine`] lists them) then key, and
//! a trailer `[0xff][entries: u64 le][crc32c of everything before: u32 le]`. The
//! receiver checks the trailer before it touches its engine, then streams the
//! entries into [`pinax_engine::KvEngine::replace_contents`] (RocksDB: one SST file
//! per column family, ingested). The file is written to, and read from, the
//! engine's scratch directory and unlinked as soon as it is open: nothing is
//! left behind by a crash, and a tablet's snapshot is never held in memory.
//!
//! openraft reads and writes snapshot data through tokio's async I/O traits;
//! [`SnapshotFile`] does plain blocking file I/O in them (a local file, as the
//! rest of the state machine's storage is), so tokio's `fs` (a thread hop per
//! call) is not needed.

use pinax_engine::{Cf, Error, Result};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

const TRAILER: u8 = 0xff;

/// One entry of a snapshot: column family, key, value.
pub type SnapshotEntry = (Cf, Vec<u8>, Vec<u8>);

/// An unlinked file holding a snapshot (see the module docs).
#[derive(Debug)]
pub struct SnapshotFile {
    file: File,
    seeked: Option<io::Result<u64>>,
}

static FILES: AtomicU64 = AtomicU64::new(0);

impl SnapshotFile {
    /// A new empty file in `dir` (the system's temporary directory if None),
    /// already unlinked.
    pub fn create(dir: Option<&Path>) -> io::Result<SnapshotFile> {
        let dir: PathBuf = dir.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("raft-snapshot-{}-{}", std::process::id(), FILES.fetch_add(1, Ordering::Relaxed)));
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(SnapshotFile { file, seeked: None })
    }

    /// Its length in bytes.
    pub fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Write `entries` (in order) and the trailer, and rewind.
    pub fn write_entries(&mut self, entries: &mut dyn Iterator<Item = Result<SnapshotEntry>>) -> Result<u64> {
        let io_err = |e: io::Error| Error::Io(format!("writing a snapshot file: {e}"));
        self.file.set_len(0).map_err(io_err)?;
        self.file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let mut w = Crc32Writer { inner: BufWriter::with_capacity(1 << 20, &mut self.file), crc: 0 };
        let mut n = 0u64;
        for e in entries {
            let (cf, k, v) = e?;
            let (kl, vl) = (len32(&k)?, len32(&v)?);
            w.write_all(&[cf.index() as u8]).map_err(io_err)?;
            w.write_all(&kl.to_le_bytes()).map_err(io_err)?;
            w.write_all(&k).map_err(io_err)?;
            w.write_all(&vl.to_le_bytes()).map_err(io_err)?;
            w.write_all(&v).map_err(io_err)?;
            n += 1;
        }
        w.write_all(&[TRAILER]).map_err(io_err)?;
        w.write_all(&n.to_le_bytes()).map_err(io_err)?;
        let crc = w.crc;
        w.inner.write_all(&crc.to_le_bytes()).map_err(io_err)?;
        w.inner.flush().map_err(io_err)?;
        drop(w);
        self.file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        Ok(n)
    }

    /// Check the file whole (its trailer's count and checksum), then rewind and
    /// hand out its entries.
    pub fn entries(&mut self) -> Result<Entries<'_>> {
        let corrupt = |what: String| Error::Corruption(format!("snapshot file: {what}"));
        let io_err = |e: io::Error| Error::Io(format!("reading a snapshot file: {e}"));
        self.file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let mut it = Entries { r: BufReader::with_capacity(1 << 20, &mut self.file), crc: 0, seen: 0, done: false };
        for e in it.by_ref() {
            e?;
        }
        let mut tail = [0u8; 4];
        it.r.read_exact(&mut tail).map_err(|e| corrupt(format!("no checksum: {e}")))?;
        if u32::from_le_bytes(tail) != it.crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        if !it.r.fill_buf().map_err(io_err)?.is_empty() {
            return Err(corrupt("bytes after the checksum".into()));
        }
        drop(it);
        self.file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        Ok(Entries { r: BufReader::with_capacity(1 << 20, &mut self.file), crc: 0, seen: 0, done: false })
    }
}

fn len32(b: &[u8]) -> Result<u32> {
    u32::try_from(b.len()).map_err(|_| Error::Other(format!("a {}-byte key or value in a snapshot", b.len())))
}

struct Crc32Writer<W: Write> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for Crc32Writer<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The entries of a [`SnapshotFile`], in order (an error ends them).
pub struct Entries<'a> {
    r: BufReader<&'a mut File>,
    crc: u32,
    seen: u64,
    done: bool,
}

impl Entries<'_> {
    fn read(&mut self, n: usize) -> Result<Vec<u8>> {
        let mut b = vec![0u8; n];
        self.r.read_exact(&mut b).map_err(|e| Error::Corruption(format!("snapshot file cut short: {e}")))?;
        self.crc = crc32c::crc32c_append(self.crc, &b);
        Ok(b)
    }

    fn read_u32(&mut self) -> Result<usize> {
        let b = self.read(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn entry(&mut self) -> Result<Option<SnapshotEntry>> {
        let tag = self.read(1)?[0];
        if tag == TRAILER {
            let b = self.read(8)?;
            let n = u64::from_le_bytes(b.try_into().map_err(|_| Error::Corruption("snapshot trailer".into()))?);
            if n != self.seen {
                return Err(Error::Corruption(format!("snapshot file: {} entries, its trailer says {n}", self.seen)));
            }
            return Ok(None);
        }
        let cf = Cf::ALL.into_iter().find(|c| c.index() == tag as usize).ok_or_else(|| Error::Corruption(format!("snapshot file: column family {tag}")))?;
        let kl = self.read_u32()?;
        let k = self.read(kl)?;
        let vl = self.read_u32()?;
        let v = self.read(vl)?;
        self.seen += 1;
        Ok(Some((cf, k, v)))
    }
}

impl Iterator for Entries<'_> {
    type Item = Result<SnapshotEntry>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let e = self.entry();
        if !matches!(e, Ok(Some(_))) {
            self.done = true;
        }
        e.transpose()
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let n = me.file.read(buf.initialize_unfilled())?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(self.get_mut().file.write(buf))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.get_mut().file.flush())
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(self: Pin<&mut Self>, pos: SeekFrom) -> io::Result<()> {
        let me = self.get_mut();
        me.seeked = Some(me.file.seek(pos));
        Ok(())
    }
    fn poll_complete(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        let me = self.get_mut();
        Poll::Ready(match me.seeked.take() {
            Some(r) => r,
            None => me.file.stream_position(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<(Cf, Vec<u8>, Vec<u8>)> {
        vec![(Cf::Regular, b"a".to_vec(), b"1".to_vec()), (Cf::Regular, b"b".to_vec(), vec![7; 3000]), (Cf::Meta, b"m".to_vec(), Vec::new())]
    }

    #[test]
    fn entries_come_back_as_written_and_no_file_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = SnapshotFile::create(Some(dir.path())).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "unlinked at once");
        assert_eq!(f.write_entries(&mut sample().into_iter().map(Ok)).unwrap(), 3);
        let back: Vec<_> = f.entries().unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(back, sample());
        // Empty snapshots too.
        f.write_entries(&mut std::iter::empty()).unwrap();
        assert_eq!(f.entries().unwrap().count(), 0);
    }

    #[test]
    fn a_damaged_or_cut_file_is_refused_before_any_entry_is_used() {
        let mut f = SnapshotFile::create(None).unwrap();
        f.write_entries(&mut sample().into_iter().map(Ok)).unwrap();
        let len = f.len().unwrap();
        let mut bytes = Vec::new();
        f.file.read_to_end(&mut bytes).unwrap();
        for (what, damaged) in [
            ("a flipped bit", {
                let mut b = bytes.clone();
                b[10] ^= 1;
                b
            }),
            ("cut short", bytes[..bytes.len() - 7].to_vec()),
            ("cut before the trailer", bytes[..20].to_vec()),
            ("a byte after the end", [bytes.clone(), vec![0]].concat()),
        ] {
            let mut g = SnapshotFile::create(None).unwrap();
            g.file.write_all(&damaged).unwrap();
            assert!(g.entries().is_err(), "{what}: taken");
        }
        assert!(len > 3000);
    }
}
