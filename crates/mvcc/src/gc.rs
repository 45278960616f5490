//! MVCC garbage collection as a compaction filter on the regular column family.
//!
//! For each key, every version newer than the history cutoff is kept, plus the newest
//! version at or before the cutoff (the one a read at the cutoff sees). Older versions
//! are dropped. That newest-at-cutoff version, when it is a tombstone, is dropped too,
//! but only in a bottommost compaction (nothing older can resurface from below).
//! When that version is a patch (some columns of the row), the versions under it
//! are kept down to the first full one (a put or a tombstone): a read at the
//! cutoff lays the patches over it. Entries that do not parse are always kept.
//! A tablet's deletion of every row (`read::TabletDeletions`) at or before the
//! cutoff drops every version older than it: no read the cutoff allows sees them —
//! only through a filter of that tablet's keys: the tablet and its factory share
//! one [`HistoryCutoff`] (a [`HistoryCutoff::for_tablet`] clone of the node's). In
//! a store shared by many tablets each tablet's engine has a factory of its own
//! (the store dispatches by key range); one factory with one list of deletions for
//! all of them dropped every tablet's versions older than any tablet's deletion.

use pinax_codec::keys::{self, StoredValue};
use pinax_common::HybridTime;
use pinax_engine::{CompactionFilter, CompactionFilterFactory};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Shared, movable history cutoff: reads below it are no longer guaranteed. With
/// it, the commit times of one tablet's deletions of every row (a clone made by
/// [`HistoryCutoff::for_tablet`] shares the cutoff, not the deletions).
#[derive(Clone, Default, Debug)]
pub struct HistoryCutoff {
    at: Arc<AtomicU64>,
    deletions: Arc<Mutex<Arc<Vec<HybridTime>>>>,
}

impl HistoryCutoff {
    pub fn get(&self) -> HybridTime {
        HybridTime(self.at.load(Ordering::Acquire))
    }
    /// Move the cutoff forward (never backward).
    pub fn advance_to(&self, ht: HybridTime) {
        self.at.fetch_max(ht.as_u64(), Ordering::AcqRel);
    }
    /// The same cutoff, for one tablet's engine and the tablet (its deletions).
    pub fn for_tablet(&self) -> HistoryCutoff {
        HistoryCutoff { at: self.at.clone(), deletions: Arc::default() }
    }
    /// The tablet's applied deletions of every row, oldest first.
    pub fn set_deletions(&self, times: Arc<Vec<HybridTime>>) {
        *self.deletions.lock().unwrap_or_else(|e| e.into_inner()) = times;
    }
    /// The newest deletion of every row at or before the cutoff (INVALID: none):
    /// versions older than it are gone for every read allowed.
    fn deleted_below(&self, cutoff: HybridTime) -> HybridTime {
        let d = self.deletions.lock().unwrap_or_else(|e| e.into_inner());
        d.iter().rev().find(|t| **t <= cutoff).copied().unwrap_or(HybridTime::INVALID)
    }
}

pub struct HistoryGcFilterFactory {
    pub cutoff: HistoryCutoff,
}

impl CompactionFilterFactory for HistoryGcFilterFactory {
    fn create(&self, bottommost: bool) -> Box<dyn CompactionFilter> {
        let cutoff = self.cutoff.get();
        Box::new(HistoryGcFilter { cutoff, deleted_below: self.cutoff.deleted_below(cutoff), bottommost, current: Vec::new(), below: Below::None })
    }
}

pub struct HistoryGcFilter {
    cutoff: HybridTime,
    /// Versions older than this went with a deletion of every row (at or before the cutoff).
    deleted_below: HybridTime,
    bottommost: bool,
    current: Vec<u8>,
    below: Below,
}

/// What the current key's versions at or below the cutoff met so far.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Below {
    None,
    /// Only patches: their full version is still to come.
    Patches,
    /// The version a read at the cutoff rests on: the rest go.
    Full,
}

impl CompactionFilter for HistoryGcFilter {
    fn keep(&mut self, key: &[u8], value: &[u8]) -> bool {
        let Ok((esc, ht)) = keys::split_version_key(key) else {
            return true;
        };
        if ht < self.deleted_below {
            return false;
        }
        if esc != &self.current[..] {
            self.current.clear();
            self.current.extend_from_slice(esc);
            self.below = Below::None;
        }
        if ht > self.cutoff {
            return true;
        }
        let first = match self.below {
            Below::Full => return false,
            Below::None => true,
            Below::Patches => false,
        };
        match keys::decode_value(value) {
            Ok(StoredValue::Patch(_)) => {
                self.below = Below::Patches;
                true
            }
            // Under patches, a tombstone stays (a read stops there).
            Ok(StoredValue::Tombstone) => {
                self.below = Below::Full;
                !(first && self.bottommost)
            }
            _ => {
                self.below = Below::Full;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put() -> Vec<u8> {
        let mut v = Vec::new();
        keys::encode_put(&mut v, b"x");
        v
    }

    #[test]
    fn keeps_newest_below_cutoff_and_all_above() {
        let cutoff = HistoryCutoff::default();
        cutoff.advance_to(HybridTime(10));
        let f = HistoryGcFilterFactory { cutoff };
        let mut filt = f.create(false);
        let p = put();
        // versions of "a": 15, 12, 9, 5  (newest first as stored)
        assert!(filt.keep(&keys::version_key(b"a", HybridTime(15)), &p));
        assert!(filt.keep(&keys::version_key(b"a", HybridTime(12)), &p));
        assert!(filt.keep(&keys::version_key(b"a", HybridTime(9)), &p));
        assert!(!filt.keep(&keys::version_key(b"a", HybridTime(5)), &p));
        // new key resets
        assert!(filt.keep(&keys::version_key(b"b", HybridTime(3)), &p));
        assert!(!filt.keep(&keys::version_key(b"b", HybridTime(2)), &p));
        // garbage kept
        assert!(filt.keep(b"zz", b""));
    }

    #[test]
    fn patches_at_the_cutoff_keep_their_full_version() {
        let cutoff = HistoryCutoff::default();
        cutoff.advance_to(HybridTime(10));
        let f = HistoryGcFilterFactory { cutoff };
        let mut filt = f.create(true);
        let mut patch = Vec::new();
        keys::encode_patch_value(&mut patch, &[0, 1, 0, 2, b'r']);
        let p = put();
        // "a": 15 patch, 9 patch, 8 patch, 6 put, 4 put
        assert!(filt.keep(&keys::version_key(b"a", HybridTime(15)), &patch));
        assert!(filt.keep(&keys::version_key(b"a", HybridTime(9)), &patch));
        assert!(filt.keep(&keys::version_key(b"a", HybridTime(8)), &patch));
        assert!(filt.keep(&keys::version_key(b"a", HybridTime(6)), &p));
        assert!(!filt.keep(&keys::version_key(b"a", HybridTime(4)), &p));
        // "b": a patch at the cutoff over a tombstone: both stay, then nothing.
        assert!(filt.keep(&keys::version_key(b"b", HybridTime(10)), &patch));
        assert!(filt.keep(&keys::version_key(b"b", HybridTime(7)), &keys::encode_tombstone()));
        assert!(!filt.keep(&keys::version_key(b"b", HybridTime(5)), &p));
        // "c": a patch above the cutoff only: the newest at the cutoff decides.
        assert!(filt.keep(&keys::version_key(b"c", HybridTime(12)), &patch));
        assert!(filt.keep(&keys::version_key(b"c", HybridTime(10)), &p));
        assert!(!filt.keep(&keys::version_key(b"c", HybridTime(9)), &patch));
    }

    #[test]
    fn a_deletion_of_every_row_at_the_cutoff_drops_what_it_deleted() {
        let global = HistoryCutoff::default();
        global.advance_to(HybridTime(10));
        let cutoff = global.for_tablet();
        // Deletions at 6 and 9 (at or before the cutoff) and 12 (after it).
        cutoff.set_deletions(Arc::new(vec![HybridTime(6), HybridTime(9), HybridTime(12)]));
        let mut filt = HistoryGcFilterFactory { cutoff: cutoff.clone() }.create(false);
        let p = put();
        // "a": 11 (after the deletion at 9) stays, 8 and 3 (deleted at 9) go.
        assert!(filt.keep(&keys::version_key(b"a", HybridTime(11)), &p));
        assert!(!filt.keep(&keys::version_key(b"a", HybridTime(8)), &p));
        assert!(!filt.keep(&keys::version_key(b"a", HybridTime(3)), &p));
        // "b": 9 itself is not older than the deletion: the newest at the cutoff stays.
        assert!(filt.keep(&keys::version_key(b"b", HybridTime(9)), &p));
        assert!(!filt.keep(&keys::version_key(b"b", HybridTime(7)), &p));
        // Another tablet sharing the cutoff has no deletions: only history goes.
        let other = HistoryGcFilterFactory { cutoff: global.for_tablet() };
        let mut f2 = other.create(false);
        assert!(f2.keep(&keys::version_key(b"a", HybridTime(8)), &p));
        assert!(!f2.keep(&keys::version_key(b"a", HybridTime(3)), &p));
        // A deletion after the cutoff drops nothing yet; once the cutoff passes it, it does.
        cutoff.set_deletions(Arc::new(vec![HybridTime(12)]));
        let mut f3 = HistoryGcFilterFactory { cutoff: cutoff.clone() }.create(false);
        assert!(f3.keep(&keys::version_key(b"c", HybridTime(11)), &p));
        global.advance_to(HybridTime(13));
        let mut f4 = HistoryGcFilterFactory { cutoff }.create(false);
        assert!(!f4.keep(&keys::version_key(b"c", HybridTime(11)), &p));
        assert!(f4.keep(&keys::version_key(b"c", HybridTime(12)), &p));
    }

    #[test]
    fn tombstone_dropped_only_bottommost() {
        let cutoff = HistoryCutoff::default();
        cutoff.advance_to(HybridTime(10));
        let f = HistoryGcFilterFactory { cutoff };
        let t = keys::encode_tombstone();
        let mut upper = f.create(false);
        assert!(upper.keep(&keys::version_key(b"a", HybridTime(8)), &t));
        let mut bottom = f.create(true);
        assert!(!bottom.keep(&keys::version_key(b"a", HybridTime(8)), &t));
        assert!(!bottom.keep(&keys::version_key(b"a", HybridTime(7)), &put()));
    }
}
