//! Compaction filters of many engines in one store: RocksDB takes one compaction
//! filter factory per column family, so the store installs [`FilterDispatch`] on
//! [`Cf::Regular`] and every engine opened with a filter registers its factory for
//! its key range ([`FilterRegistry::register`], until its [`Registration`] drops).
//! In a compaction each entry goes to the filter of the engine whose range holds it
//! (created on the first entry of that engine in that compaction), with the
//! engine's prefix removed, as the engine wrote it; entries of no registered engine
//! (a closed or destroyed one) are kept.
//!
//! RocksDB's C API exposes no "bottommost output" flag to the factory, so
//! `bottommost` is mapped from `is_full_compaction` (all files of the column family
//! are inputs, hence the output is the bottom). This is conservative: a bottommost
//! compaction that is not full reports `false`. Filters run during compactions only
//! (never on flush), ignore snapshots (RocksDB does not preserve filtered data for
//! open snapshots), and a panicking filter keeps the entry and the rest of that
//! engine's entries in that compaction.

use crate::view::KeySpace;
use pinax_engine::{Cf, CompactionFilter, CompactionFilterFactory};
use rocksdb::compaction_filter::{CompactionFilter as RocksCompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory as RocksCompactionFilterFactory};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// One registered engine's filter: its range of [`Cf::Regular`] in the store.
struct Entry {
    token: u64,
    lower: Vec<u8>,
    upper: Option<Vec<u8>>,
    prefix_len: usize,
    factory: Arc<dyn CompactionFilterFactory>,
}

impl Entry {
    fn contains(&self, key: &[u8]) -> bool {
        key >= self.lower.as_slice() && self.upper.as_deref().is_none_or(|u| key < u)
    }
}

/// The store's registered filters, by the start of their range (cheap to clone).
#[derive(Clone, Default)]
pub(crate) struct FilterRegistry {
    entries: Arc<RwLock<Arc<Vec<Arc<Entry>>>>>,
    next_token: Arc<AtomicU64>,
}

/// Unregisters an engine's filter when dropped.
pub(crate) struct Registration {
    registry: FilterRegistry,
    token: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut g = self.registry.entries.write().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<Arc<Entry>> = g.as_ref().clone();
        v.retain(|e| e.token != self.token);
        *g = Arc::new(v);
    }
}

impl FilterRegistry {
    /// `factory` filters the entries of `space` in [`Cf::Regular`] until the
    /// returned registration drops.
    pub(crate) fn register(&self, space: &KeySpace, factory: Arc<dyn CompactionFilterFactory>) -> Registration {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (lower, upper) = space.db_range(Cf::Regular);
        let entry = Arc::new(Entry { token, lower, upper, prefix_len: space.prefix(Cf::Regular).len(), factory });
        let mut g = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<Arc<Entry>> = g.as_ref().clone();
        // By start; of ranges starting together, the wider first (the narrower
        // is then found first: a split half before its parent).
        let reaches = |e: &Entry| match (&e.upper, &entry.upper) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => a >= b,
        };
        let at = v.partition_point(|e| e.lower < entry.lower || (e.lower == entry.lower && reaches(e)));
        v.insert(at, entry);
        *g = Arc::new(v);
        Registration { registry: self.clone(), token }
    }

    fn current(&self) -> Arc<Vec<Arc<Entry>>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The store's compaction filter factory on [`Cf::Regular`].
pub(crate) struct FilterDispatch(pub(crate) FilterRegistry);

impl RocksCompactionFilterFactory for FilterDispatch {
    type Filter = Dispatch;

    fn create(&mut self, context: CompactionFilterContext) -> Dispatch {
        Dispatch { entries: self.0.current(), bottommost: context.is_full_compaction, at: None }
    }

    fn name(&self) -> &CStr {
        c"pinax.CompactionFilterFactory"
    }
}

/// One compaction's filter: the entries registered when it began, and the filter
/// of the engine of the last entry seen (entries come in key order).
pub(crate) struct Dispatch {
    entries: Arc<Vec<Arc<Entry>>>,
    bottommost: bool,
    /// Index of the current engine's entry and its filter (`None`: its factory or
    /// filter panicked: keep the rest of its entries).
    at: Option<(usize, Option<Box<dyn CompactionFilter>>)>,
}

impl Dispatch {
    /// The index of the registered range holding `key`: of those that do, the
    /// one starting last. Ranges of different prefixes never overlap; those of one
    /// prefix may while a split tablet's parent is still open next to its halves
    /// (a half's range is inside its parent's), so the walk back from the last
    /// range starting at or before the key stays within the key's prefix.
    fn find(&self, key: &[u8]) -> Option<usize> {
        let n = self.entries.partition_point(|e| e.lower.as_slice() <= key);
        let mut i = n.checked_sub(1)?;
        loop {
            let e = &self.entries[i];
            if e.contains(key) {
                return Some(i);
            }
            if i == 0 || e.prefix_len == 0 || key.get(..e.prefix_len) != e.lower.get(..e.prefix_len) {
                return None;
            }
            i -= 1;
        }
    }

    /// Whether entry `i` is the one for `key` ([`Dispatch::find`]) without a
    /// search: it holds the key and no later range starts at or before it.
    fn still(&self, i: usize, key: &[u8]) -> bool {
        self.entries[i].contains(key) && self.entries.get(i + 1).is_none_or(|next| next.lower.as_slice() > key)
    }
}

impl RocksCompactionFilter for Dispatch {
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> Decision {
        let current = match &self.at {
            Some((i, _)) if self.still(*i, key) => *i,
            _ => {
                let Some(i) = self.find(key) else {
                    self.at = None;
                    return Decision::Keep;
                };
                let (factory, bottommost) = (&self.entries[i].factory, self.bottommost);
                // Unwinding into RocksDB's C++ frames would abort; keeping is safe.
                let filter = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| factory.create(bottommost))).ok();
                if filter.is_none() {
                    tracing::error!("compaction filter factory panicked; this compaction keeps the engine's entries");
                }
                self.at = Some((i, filter));
                i
            }
        };
        let prefix_len = self.entries[current].prefix_len;
        let Some((_, Some(filter))) = self.at.as_mut() else {
            return Decision::Keep;
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| filter.keep(&key[prefix_len..], value))) {
            Ok(true) => Decision::Keep,
            Ok(false) => Decision::Remove,
            Err(_) => {
                tracing::error!("compaction filter panicked; keeping the entry and the rest of the engine's in this compaction");
                self.at = Some((current, None));
                Decision::Keep
            }
        }
    }

    fn name(&self) -> &CStr {
        c"pinax.CompactionFilter"
    }
}
