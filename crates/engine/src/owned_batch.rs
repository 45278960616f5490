//! [`OwnedBatch`]: a write batch held as self-describing bytes.
//!
//! A tablet leader decides a write into an `OwnedBatch`; its bytes are what the Raft
//! log carries, and every replica replays them into its own engine's batch
//! ([`OwnedBatch::replay`]). The encoding is Pinax's own and stable (it is on disk
//! in Raft logs):
//!
//! ```text
//! op*        op := tag:u8 cf:u8 body
//! tag 1 put           body := klen:u32le key vlen:u32le value
//! tag 2 delete        body := klen:u32le key
//! tag 3 delete_range  body := slen:u32le start elen:u32le end
//! cf: 0 regular, 1 intents, 2 meta, 3 log (`Cf::index`)
//! ```
//!
//! Bytes from disk or the network go through [`OwnedBatch::from_bytes`], which checks
//! every op, so a replay never meets a malformed one.

use crate::{Cf, Error, Result, WriteBatch};

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;
const TAG_DELETE_RANGE: u8 = 3;

/// One decoded op of an [`OwnedBatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOp<'a> {
    Put { cf: Cf, key: &'a [u8], value: &'a [u8] },
    Delete { cf: Cf, key: &'a [u8] },
    DeleteRange { cf: Cf, start: &'a [u8], end: &'a [u8] },
}

/// A write batch as bytes (see the module docs for the layout).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OwnedBatch {
    rep: Vec<u8>,
    count: usize,
}

impl std::fmt::Debug for OwnedBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedBatch").field("ops", &self.count).field("bytes", &self.rep.len()).finish()
    }
}

fn push_slice(rep: &mut Vec<u8>, s: &[u8]) {
    // A single key or value over 4 GiB cannot be written by any caller (frames
    // and rows are far smaller); truncating the length would corrupt the batch.
    let len = u32::try_from(s.len()).unwrap_or_else(|_| panic!("invariant: batch key/value under 4 GiB, got {} bytes", s.len()));
    rep.extend_from_slice(&len.to_le_bytes());
    rep.extend_from_slice(s);
}

fn cf_from(b: u8) -> Option<Cf> {
    Cf::ALL.into_iter().find(|cf| cf.index() == b as usize)
}

/// Reads ops from encoded bytes; `None` on the first malformed byte.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn slice(&mut self) -> Option<&'a [u8]> {
        let (len, rest) = self.rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return None;
        }
        let (s, rest) = rest.split_at(len);
        self.rest = rest;
        Some(s)
    }

    fn op(&mut self) -> Option<BatchOp<'a>> {
        let [tag, cf, rest @ ..] = self.rest else {
            return None;
        };
        let (tag, cf) = (*tag, cf_from(*cf)?);
        self.rest = rest;
        Some(match tag {
            TAG_PUT => BatchOp::Put { cf, key: self.slice()?, value: self.slice()? },
            TAG_DELETE => BatchOp::Delete { cf, key: self.slice()? },
            TAG_DELETE_RANGE => BatchOp::DeleteRange { cf, start: self.slice()?, end: self.slice()? },
            _ => return None,
        })
    }
}

impl OwnedBatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decode and check bytes made by [`OwnedBatch::as_bytes`].
    pub fn from_bytes(rep: Vec<u8>) -> Result<Self> {
        let count = check(&rep)?;
        Ok(OwnedBatch { rep, count })
    }

    /// [`OwnedBatch::replay`] of bytes made by [`OwnedBatch::as_bytes`], checked
    /// first as [`OwnedBatch::from_bytes`] does, without owning them (a Raft
    /// entry's batch is shared with the log's in-memory tail).
    pub fn replay_bytes<B: WriteBatch + ?Sized>(rep: &[u8], out: &mut B) -> Result<()> {
        check(rep)?;
        replay_ops(ops_of(rep), out);
        Ok(())
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.rep
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.rep
    }

    /// The ops, in the order they were added.
    pub fn ops(&self) -> impl Iterator<Item = BatchOp<'_>> {
        // Every OwnedBatch was built by the methods below or checked by from_bytes.
        ops_of(&self.rep)
    }

    /// Add every op to `out` (another engine's batch), to the same effect as in the
    /// order they were added, but with the puts and deletes between two range
    /// deletions in key order per column family. Ops on one key keep their order
    /// (the sort is stable), and ops on different keys commute. A memtable insert
    /// that lands next to the one before it is cheap (RocksDB's skip list resumes
    /// from the last insert's position), one at a random place is a full search:
    /// a batch of random keys (uuid primary keys), or one alternating between two
    /// key ranges (an intent and its reverse-index entry), costs up to twice as
    /// much to apply unsorted.
    pub fn replay<B: WriteBatch + ?Sized>(&self, out: &mut B) {
        replay_ops(self.ops(), out);
    }
}

/// The number of ops in batch bytes; an error if one does not decode.
fn check(rep: &[u8]) -> Result<usize> {
    let mut r = Reader { rest: rep };
    let mut count = 0;
    while !r.rest.is_empty() {
        if r.op().is_none() {
            return Err(Error::Corruption(format!("malformed write batch: op {count} does not decode")));
        }
        count += 1;
    }
    Ok(count)
}

/// The ops of checked batch bytes.
fn ops_of(rep: &[u8]) -> impl Iterator<Item = BatchOp<'_>> {
    let mut r = Reader { rest: rep };
    std::iter::from_fn(move || if r.rest.is_empty() { None } else { r.op() })
}

/// [`OwnedBatch::replay`]'s work.
fn replay_ops<'a, B: WriteBatch + ?Sized>(ops: impl Iterator<Item = BatchOp<'a>>, out: &mut B) {
    let mut run: Vec<BatchOp<'a>> = Vec::new();
    for op in ops {
        match op {
            BatchOp::DeleteRange { cf, start, end } => {
                flush_sorted(&mut run, out);
                out.delete_range(cf, start, end);
            }
            op => run.push(op),
        }
    }
    flush_sorted(&mut run, out);
}

/// The (column family, key) a put or delete writes.
fn sort_key<'a>(op: &BatchOp<'a>) -> (usize, &'a [u8]) {
    match *op {
        BatchOp::Put { cf, key, .. } | BatchOp::Delete { cf, key } => (cf.index(), key),
        BatchOp::DeleteRange { cf, start, .. } => (cf.index(), start),
    }
}

/// Adds `run` (puts and deletes) to `out` in (column family, key) order, and empties it.
fn flush_sorted<B: WriteBatch + ?Sized>(run: &mut Vec<BatchOp<'_>>, out: &mut B) {
    if !run.is_sorted_by(|a, b| sort_key(a) <= sort_key(b)) {
        run.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
    }
    for op in run.drain(..) {
        match op {
            BatchOp::Put { cf, key, value } => out.put(cf, key, value),
            BatchOp::Delete { cf, key } => out.delete(cf, key),
            BatchOp::DeleteRange { cf, start, end } => out.delete_range(cf, start, end),
        }
    }
}

impl WriteBatch for OwnedBatch {
    fn put(&mut self, cf: Cf, key: &[u8], value: &[u8]) {
        self.rep.reserve(10 + key.len() + value.len());
        self.rep.extend_from_slice(&[TAG_PUT, cf.index() as u8]);
        push_slice(&mut self.rep, key);
        push_slice(&mut self.rep, value);
        self.count += 1;
    }
    fn delete(&mut self, cf: Cf, key: &[u8]) {
        self.rep.extend_from_slice(&[TAG_DELETE, cf.index() as u8]);
        push_slice(&mut self.rep, key);
        self.count += 1;
    }
    fn delete_range(&mut self, cf: Cf, start: &[u8], end: &[u8]) {
        self.rep.extend_from_slice(&[TAG_DELETE_RANGE, cf.index() as u8]);
        push_slice(&mut self.rep, start);
        push_slice(&mut self.rep, end);
        self.count += 1;
    }
    fn count(&self) -> usize {
        self.count
    }
    fn data_size(&self) -> usize {
        self.rep.len()
    }
    fn clear(&mut self) {
        self.rep.clear();
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_replay_order() {
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, b"k1", b"v1");
        b.delete(Cf::Intents, b"");
        b.delete_range(Cf::Meta, b"a", b"z");
        b.put(Cf::Log, b"k2", b"");
        assert_eq!(b.count(), 4);
        let again = OwnedBatch::from_bytes(b.as_bytes().to_vec()).unwrap();
        assert_eq!(again, b);
        let ops: Vec<_> = again.ops().collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Put { cf: Cf::Regular, key: b"k1", value: b"v1" },
                BatchOp::Delete { cf: Cf::Intents, key: b"" },
                BatchOp::DeleteRange { cf: Cf::Meta, start: b"a", end: b"z" },
                BatchOp::Put { cf: Cf::Log, key: b"k2", value: b"" },
            ]
        );
        let mut copy = OwnedBatch::new();
        again.replay(&mut copy);
        assert_eq!(copy, b);
    }

    #[test]
    fn replay_sorts_keys_between_range_deletions_and_keeps_each_keys_order() {
        let mut b = OwnedBatch::new();
        b.put(Cf::Intents, b"R2", b"");
        b.put(Cf::Regular, b"b", b"1");
        b.put(Cf::Intents, b"I1", b"x");
        b.delete(Cf::Regular, b"b");
        b.put(Cf::Regular, b"a", b"2");
        b.put(Cf::Regular, b"b", b"3");
        b.delete_range(Cf::Regular, b"a", b"c");
        b.put(Cf::Regular, b"b", b"4");
        b.put(Cf::Regular, b"a", b"5");
        let mut out = OwnedBatch::new();
        b.replay(&mut out);
        let ops: Vec<_> = out.ops().collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Put { cf: Cf::Regular, key: b"a", value: b"2" },
                BatchOp::Put { cf: Cf::Regular, key: b"b", value: b"1" },
                BatchOp::Delete { cf: Cf::Regular, key: b"b" },
                BatchOp::Put { cf: Cf::Regular, key: b"b", value: b"3" },
                BatchOp::Put { cf: Cf::Intents, key: b"I1", value: b"x" },
                BatchOp::Put { cf: Cf::Intents, key: b"R2", value: b"" },
                BatchOp::DeleteRange { cf: Cf::Regular, start: b"a", end: b"c" },
                BatchOp::Put { cf: Cf::Regular, key: b"a", value: b"5" },
                BatchOp::Put { cf: Cf::Regular, key: b"b", value: b"4" },
            ]
        );
    }

    #[test]
    fn every_truncation_and_bad_byte_is_rejected() {
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, b"key", b"value");
        b.delete(Cf::Intents, b"x");
        let bytes = b.as_bytes().to_vec();
        for cut in 1..bytes.len() {
            // Cuts at an op boundary leave a valid shorter batch; all others fail.
            let r = OwnedBatch::from_bytes(bytes[..cut].to_vec());
            assert_eq!(r.is_ok(), cut == 2 + 4 + 3 + 4 + 5, "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[0] = 9;
        assert!(OwnedBatch::from_bytes(bad).is_err());
        let mut bad = bytes;
        bad[1] = 7;
        assert!(OwnedBatch::from_bytes(bad).is_err());
    }
}
