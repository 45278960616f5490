//! MVCC garbage collection as a compaction filter on the regular column family.
//!
//! For each key, every version newer than the history cutoff is kept, plus the newest
//! version at or before the cutoff (the one a read at the cutoff sees). Older versions
//! are dropped. That newest-at-cutoff version, when it is a tombstone, is dropped too,
//! but only in a bottommost compaction (nothing older can resurface from below).
//! When that version is a patch (some columns of the row), the versions under it
//! are kept down to the first full one (a put or a tombstone): a read at the
//! cutoff lays the patches over it. Entries that do not parse are always kept.

use pinax_codec::keys::{self, StoredValue};
use pinax_common::HybridTime;
use pinax_engine::{CompactionFilter, CompactionFilterFactory};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Shared, movable history cutoff: reads below it are no longer guaranteed.
#[derive(Clone, Default, Debug)]
pub struct HistoryCutoff(Arc<AtomicU64>);

impl HistoryCutoff {
    pub fn get(&self) -> HybridTime {
        HybridTime(self.0.load(Ordering::Acquire))
    }
    /// Move the cutoff forward (never backward).
    pub fn advance_to(&self, ht: HybridTime) {
        self.0.fetch_max(ht.as_u64(), Ordering::AcqRel);
    }
}

pub struct HistoryGcFilterFactory {
    pub cutoff: HistoryCutoff,
}

impl CompactionFilterFactory for HistoryGcFilterFactory {
    fn create(&self, bottommost: bool) -> Box<dyn CompactionFilter> {
        Box::new(HistoryGcFilter { cutoff: self.cutoff.get(), bottommost, current: Vec::new(), below: Below::None })
    }
}

pub struct HistoryGcFilter {
    cutoff: HybridTime,
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
