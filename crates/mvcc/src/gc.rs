//! MVCC garbage collection as a compaction filter on the regular column family.
//!
//! For each key, every version newer than the history cutoff is kept, plus the newest
//! version at or before the cutoff (the one a read at the cutoff sees). Older versions
//! are dropped. That newest-at-cutoff version, when it is a tombstone, is dropped too,
//! but only in a bottommost compaction (nothing older can resurface from below).
//! Entries that do not parse are always kept.

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
        Box::new(HistoryGcFilter { cutoff: self.cutoff.get(), bottommost, current: Vec::new(), seen_below: false })
    }
}

pub struct HistoryGcFilter {
    cutoff: HybridTime,
    bottommost: bool,
    current: Vec<u8>,
    seen_below: bool,
}

impl CompactionFilter for HistoryGcFilter {
    fn keep(&mut self, key: &[u8], value: &[u8]) -> bool {
        let Ok((esc, ht)) = keys::split_version_key(key) else {
            return true;
        };
        if esc != &self.current[..] {
            self.current.clear();
            self.current.extend_from_slice(esc);
            self.seen_below = false;
        }
        if ht > self.cutoff {
            return true;
        }
        if self.seen_below {
            return false;
        }
        self.seen_below = true;
        !(self.bottommost && matches!(keys::decode_value(value), Ok(StoredValue::Tombstone)))
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
