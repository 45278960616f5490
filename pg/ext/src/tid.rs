//! Row identity: TIDs handed to PostgreSQL that map back to row keys.
//!
//! PostgreSQL speaks in 6-byte TIDs; Pinax rows are named by their key. Every row
//! version the table AM hands out (scan, index scan, insert, update) gets a fresh TID
//! and an entry here holding the storage table, the row key and the tuple bytes of
//! that version, so a re-fetch by TID (triggers, `UPDATE`'s old row, RI checks) sees
//! exactly that version for the rest of the transaction. The map is per backend and
//! reset at the end of each top-level transaction; TIDs are never reused within one.
//!
//! TIDs: entry `n` is block `n / 256`, offset `n % 256 + 1` (offsets stay within
//! `MaxHeapTuplesPerPage`, blocks never reach `InvalidBlockNumber`).

use pgrx::pg_sys;

const PER_BLOCK: u64 = 256;
/// Arena bytes a cleared map keeps allocated.
const KEEP_BYTES: usize = 1 << 20;

/// Where an entry's row came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Read from storage (committed, or this transaction's earlier statements).
    Read,
    /// Written by this transaction (insert or update): its xmin is ours.
    Written,
    /// Read at the present time, not at the statement's read time (a dirty
    /// snapshot's look-up: ON CONFLICT's arbiter check): a snapshot may not see it.
    Latest,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    relid: u32,
    key_off: u64,
    key_len: u32,
    tup_len: u32,
    origin: Origin,
    /// Command id that replaced or deleted this version, if any.
    superseded_by: Option<u32>,
    /// Handed to a bitmap index scan: 1 + the index of its read in
    /// `TidMap::bitmap_reads` (0: not).
    bitmap: u32,
}

/// The read a bitmap index scan's rows were read at: every bitmap scan of one
/// statement reads at the same point, and its rows must be named by the same
/// TIDs in all of them (BitmapAnd intersects TIDs, BitmapOr unites them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BitmapRead {
    pub read_ht: u64,
    pub txn: Option<([u8; 16], u32)>,
    pub curcid: u32,
}

impl BitmapRead {
    /// The read of a scan at `at` as of command `curcid`.
    pub fn new(at: pinax_proto::ReadPoint, curcid: u32) -> BitmapRead {
        BitmapRead { read_ht: at.read_ht.0, txn: at.txn.map(|(t, seq)| (t.0, seq)), curcid }
    }
}

/// Per-transaction TID map (an arena of keys and tuple bytes).
#[derive(Default)]
pub struct TidMap {
    entries: Vec<Entry>,
    arena: Vec<u8>,
    /// Relations whose rows keep one TID per version for the transaction (see
    /// [`TidMap::keep_stable`]), and the entry of each (relation, key).
    stable: Vec<u32>,
    stable_entries: std::collections::HashMap<(u32, Vec<u8>), usize>,
    /// Relations whose rows' replacements are remembered by row key (see
    /// [`TidMap::track_rows`]), and for each (relation, key) when (the entry
    /// count then) and by which command each replacement was.
    tracked: Vec<u32>,
    replaced: Replacements,
    /// Reads of bitmap index scans (see [`BitmapRead`]), and the entry of each
    /// (read, relation, row key) they handed out.
    bitmap_reads: Vec<BitmapRead>,
    bitmap_entries: std::collections::HashMap<(u32, u32, Vec<u8>), usize>,
}

/// By (relation, row key): the entry count and command of each replacement.
type Replacements = std::collections::HashMap<(u32, Vec<u8>), Vec<(usize, u32)>>;

/// A row version looked up by TID.
pub struct RowRef<'a> {
    pub relid: u32,
    pub key: &'a [u8],
    pub tuple: &'a [u8],
    pub origin: Origin,
    pub superseded_by: Option<u32>,
}

impl TidMap {
    /// Rows of relation `relid` read again get the TID they were handed out with
    /// (the same version), as heap's do: for REFRESH MATERIALIZED VIEW
    /// CONCURRENTLY's new contents, which PostgreSQL checks for duplicates by
    /// joining them with themselves on `ctid <>`. (Other relations' rows get a
    /// fresh TID per read, which costs no look-up.)
    pub fn keep_stable(&mut self, relid: u32) {
        if !self.stable.contains(&relid) {
            self.stable.push(relid);
        }
    }

    /// Record a row version and return its TID.
    pub fn add(&mut self, relid: u32, key: &[u8], tuple: &[u8], origin: Origin) -> pg_sys::ItemPointerData {
        if !self.stable.is_empty() && self.stable.contains(&relid) {
            if let Some(&i) = self.stable_entries.get(&(relid, key.to_vec())) {
                let e = self.entries[i];
                let k1 = e.key_off as usize + e.key_len as usize;
                if e.superseded_by.is_none() && &self.arena[k1..k1 + e.tup_len as usize] == tuple {
                    return tid_of(i as u64);
                }
            }
            self.stable_entries.insert((relid, key.to_vec()), self.entries.len());
        }
        let n = self.entries.len() as u64;
        let key_off = self.arena.len() as u64;
        self.arena.extend_from_slice(key);
        self.arena.extend_from_slice(tuple);
        self.entries.push(Entry { relid, key_off, key_len: key.len() as u32, tup_len: tuple.len() as u32, origin, superseded_by: None, bitmap: 0 });
        tid_of(n)
    }

    /// Record a row version a bitmap index scan read at `read` and return its
    /// TID: the same TID for the same row of every bitmap scan at that read.
    pub fn add_bitmap(&mut self, read: BitmapRead, relid: u32, key: &[u8], tuple: &[u8]) -> pg_sys::ItemPointerData {
        let r = self.bitmap_read(read);
        let slot = (r, relid, key.to_vec());
        if let Some(&i) = self.bitmap_entries.get(&slot) {
            return tid_of(i as u64);
        }
        let i = self.entries.len();
        let tid = self.add(relid, key, tuple, Origin::Read);
        self.entries[i].bitmap = r + 1;
        self.bitmap_entries.insert(slot, i);
        tid
    }

    /// The index of `read` in `bitmap_reads`, added if new (the reads of a
    /// transaction's later statements come last: searched from the end).
    fn bitmap_read(&mut self, read: BitmapRead) -> u32 {
        if let Some(i) = self.bitmap_reads.iter().rposition(|r| *r == read) {
            return i as u32;
        }
        self.bitmap_reads.push(read);
        (self.bitmap_reads.len() - 1) as u32
    }

    /// The TIDs of block `block` that bitmap index scans at `read` handed out for
    /// rows of relation `relid` (a lossy bitmap page names the block alone).
    pub fn bitmap_block(&self, relid: u32, block: u32, read: BitmapRead) -> Vec<pg_sys::ItemPointerData> {
        let Some(r) = self.bitmap_reads.iter().rposition(|x| *x == read) else { return Vec::new() };
        let first = block as u64 * PER_BLOCK;
        let end = (first + PER_BLOCK).min(self.entries.len() as u64);
        (first..end).filter(|&n| self.entries[n as usize].relid == relid && self.entries[n as usize].bitmap == r as u32 + 1).map(tid_of).collect()
    }

    fn index(tid: &pg_sys::ItemPointerData) -> Option<usize> {
        let block = ((tid.ip_blkid.bi_hi as u64) << 16) | tid.ip_blkid.bi_lo as u64;
        let off = tid.ip_posid as u64;
        if off == 0 || off > PER_BLOCK {
            return None;
        }
        Some((block * PER_BLOCK + off - 1) as usize)
    }

    /// The row version behind `tid`, if it belongs to relation `relid`.
    pub fn get(&self, relid: u32, tid: &pg_sys::ItemPointerData) -> Option<RowRef<'_>> {
        let e = self.entries.get(Self::index(tid)?)?;
        if e.relid != relid {
            return None;
        }
        let k0 = e.key_off as usize;
        let k1 = k0 + e.key_len as usize;
        let t1 = k1 + e.tup_len as usize;
        Some(RowRef { relid: e.relid, key: &self.arena[k0..k1], tuple: &self.arena[k1..t1], origin: e.origin, superseded_by: e.superseded_by })
    }

    /// Mark the version behind `tid` as replaced or deleted by command `cid`.
    pub fn supersede(&mut self, tid: &pg_sys::ItemPointerData, cid: u32) {
        let n = self.entries.len();
        if let Some(e) = Self::index(tid).and_then(|i| self.entries.get_mut(i)) {
            e.superseded_by = Some(cid);
            if !self.tracked.is_empty() && self.tracked.contains(&e.relid) {
                let (k0, k1) = (e.key_off as usize, e.key_off as usize + e.key_len as usize);
                self.replaced.entry((e.relid, self.arena[k0..k1].to_vec())).or_default().push((n, cid));
            }
        }
    }

    /// Remember, for relation `relid`, when each row was replaced or deleted
    /// (by row key, whichever TID the command was given): a deferred unique
    /// constraint's recheck asks [`TidMap::replaced_since`] about the version its
    /// index entry was made for, which a later command may have replaced through
    /// another TID of the same row (each read hands out a fresh one).
    pub fn track_rows(&mut self, relid: u32) {
        if !self.tracked.contains(&relid) {
            self.tracked.push(relid);
        }
    }

    /// Whether the row of the version behind `tid` (of a tracked relation) was
    /// replaced or deleted after that version was handed out.
    pub fn replaced_since(&self, relid: u32, tid: &pg_sys::ItemPointerData) -> bool {
        let Some(i) = Self::index(tid) else { return false };
        let Some(r) = self.get(relid, tid) else { return false };
        r.superseded_by.is_some() || self.replaced.get(&(relid, r.key.to_vec())).is_some_and(|marks| marks.iter().any(|(at, _)| *at > i))
    }

    /// Undo the marks of commands `cid` and later (their subtransaction rolled
    /// back: the versions they replaced are current again).
    pub fn unsupersede_from(&mut self, cid: u32) {
        for e in &mut self.entries {
            if e.superseded_by.is_some_and(|c| c >= cid) {
                e.superseded_by = None;
            }
        }
        for marks in self.replaced.values_mut() {
            marks.retain(|(_, c)| *c < cid);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forget every entry. The buffers keep their capacity, up to
    /// [`KEEP_BYTES`] of rows, for the next transaction: one that reads a few pages
    /// of rows would otherwise grow them again from nothing, each doubling a
    /// large allocation and a copy.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.arena.clear();
        self.stable.clear();
        self.stable_entries.clear();
        self.tracked.clear();
        self.replaced.clear();
        self.bitmap_reads.clear();
        self.bitmap_entries.clear();
        if self.arena.capacity() > KEEP_BYTES {
            self.arena = Vec::new();
            self.entries = Vec::new();
        }
    }
}

fn tid_of(n: u64) -> pg_sys::ItemPointerData {
    let block = n / PER_BLOCK;
    let off = (n % PER_BLOCK + 1) as u16;
    pg_sys::ItemPointerData { ip_blkid: pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: (block & 0xFFFF) as u16 }, ip_posid: off }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracked_rows_replacement_through_another_tid_is_seen() {
        let mut m = TidMap::default();
        m.track_rows(7);
        let written = m.add(7, b"k", b"v1", Origin::Written);
        let read_again = m.add(7, b"k", b"v1", Origin::Read);
        let other = m.add(7, b"j", b"v1", Origin::Written);
        assert!(!m.replaced_since(7, &written));
        m.supersede(&read_again, 3);
        assert!(m.replaced_since(7, &written), "the row was deleted through the TID of a later read");
        assert!(!m.replaced_since(7, &other));
        let newer = m.add(7, b"k", b"v2", Origin::Written);
        assert!(!m.replaced_since(7, &newer), "a version made after the replacement is current");
        m.unsupersede_from(3);
        assert!(!m.replaced_since(7, &written), "the replacing command's subtransaction rolled back");
        // An untracked relation keeps no marks.
        let u = m.add(8, b"k", b"v", Origin::Written);
        let u2 = m.add(8, b"k", b"v", Origin::Read);
        m.supersede(&u2, 4);
        assert!(!m.replaced_since(8, &u));
    }

    #[test]
    fn bitmap_scans_at_one_read_name_a_row_by_one_tid() {
        let mut m = TidMap::default();
        let read = BitmapRead { read_ht: 10, txn: None, curcid: 0 };
        let later = BitmapRead { read_ht: 11, txn: None, curcid: 0 };
        let a = m.add_bitmap(read, 7, b"a", b"row a");
        let plain = m.add(7, b"b", b"row b", Origin::Read);
        let b = m.add_bitmap(read, 7, b"b", b"row b");
        assert_ne!(plain, b, "a plain read's TID is its own");
        assert_eq!(m.add_bitmap(read, 7, b"a", b"row a"), a, "the second bitmap scan's TID of a row");
        assert_ne!(m.add_bitmap(read, 8, b"a", b"row a"), a, "another relation's row");
        let a_later = m.add_bitmap(later, 7, b"a", b"row a2");
        assert_ne!(a_later, a, "a later read's version");
        assert_eq!(m.get(7, &a_later).unwrap().tuple, b"row a2");
        // A lossy page: the rows bitmap scans at that read handed out for the relation.
        assert_eq!(m.bitmap_block(7, 0, read), vec![a, b]);
        assert_eq!(m.bitmap_block(7, 0, later), vec![a_later]);
        assert!(m.bitmap_block(7, 1, read).is_empty());
        m.clear();
        assert!(m.bitmap_block(7, 0, read).is_empty());
        assert_eq!(m.add_bitmap(read, 7, b"b", b"row b"), tid_of(0));
    }

    #[test]
    fn tids_round_trip_and_are_valid() {
        let mut m = TidMap::default();
        let mut tids = Vec::new();
        for i in 0..1000u32 {
            tids.push(m.add(7, &i.to_be_bytes(), b"tuple", Origin::Read));
        }
        for (i, t) in tids.iter().enumerate() {
            assert!(t.ip_posid >= 1 && t.ip_posid as u64 <= PER_BLOCK);
            let r = m.get(7, t).unwrap();
            assert_eq!(r.key, (i as u32).to_be_bytes());
            assert_eq!(r.tuple, b"tuple");
        }
        assert!(m.get(8, &tids[0]).is_none(), "another relation's TID");
        m.supersede(&tids[3], 5);
        m.supersede(&tids[4], 9);
        assert_eq!(m.get(7, &tids[3]).unwrap().superseded_by, Some(5));
        m.unsupersede_from(6);
        assert_eq!(m.get(7, &tids[3]).unwrap().superseded_by, Some(5));
        assert_eq!(m.get(7, &tids[4]).unwrap().superseded_by, None, "rolled back");
    }
}
