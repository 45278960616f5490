//! [`KeyCursor`]: lookups of many keys (their newest committed versions, or their
//! intents) through one iterator, stepping from key to key when they come in
//! ascending order and probing each row through bloom filters when they do not.

use super::intents::{collect_intent_group, IntentRecord};
use crate::Result;
use pinax_codec::keys::{self, StoredValue};
use pinax_codec::patch;
use pinax_common::HybridTime;
use pinax_engine::KvIterator;

/// A row's stored patches (newest first) and the whole row under them.
pub type Layers = (Vec<Vec<u8>>, Vec<u8>);

/// A committed version of a key, as a writer checks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub ht: HybridTime,
    /// The attributes the update that wrote it changed, when known (a patch, or a
    /// whole row written by an update of some columns).
    pub cols: Option<Vec<u16>>,
    /// Not a tombstone.
    pub live: bool,
    /// A patch: older versions hold the rest of the row.
    pub patch: bool,
}

/// Entries a [`KeyCursor`] steps over before it seeks instead.
const CURSOR_STEPS: usize = 8;

/// After stepping failed to reach a key, a [`KeyCursor`] seeks directly for this
/// many lookups (keys in random order would otherwise pay the steps and the seek).
const CURSOR_BACKOFF: u32 = 16;

/// Lookups of many keys through one iterator (creating an iterator per key costs
/// more: RocksDB builds a child iterator per memtable and file). When the keys
/// come in ascending order, as a statement's rows usually do, a lookup steps
/// forward from where the previous one stopped instead of seeking: a seek searches
/// every memtable and file level again, and in the intents CF walks the
/// tombstones of resolved intents after its target every time. Keys in any other
/// order are sought, as before.
pub struct KeyCursor<I: KvIterator> {
    it: I,
    /// The iterator is at the first entry at or after this key (None: not
    /// positioned yet).
    from: Option<Vec<u8>>,
    /// Lookups answered without a seek (for tests).
    pub stepped: u64,
    /// Lookups left that seek without trying to step (see [`CURSOR_BACKOFF`]).
    backoff: u32,
    /// Every lookup is a probe of one row's versions (see [`KeyCursor::probing`]).
    probe: bool,
}

impl<I: KvIterator> KeyCursor<I> {
    pub fn new(it: I) -> Self {
        KeyCursor { it, from: None, stepped: 0, backoff: 0, probe: false }
    }

    /// A cursor for keys in no particular order (a batch of random keys): `it`
    /// was made with `prefix_same_as_start`, and every lookup seeks to the key's
    /// first possible version key (or intent key), whose probe prefix is the
    /// row's, so the engine's bloom filters skip the SST files without a version
    /// (intent) of the row. A row that has none (the key an insert adds) then
    /// costs a memtable search and no block read. It never steps from key to key: that is for
    /// ascending keys ([`KeyCursor::new`]).
    pub fn probing(it: I) -> Self {
        KeyCursor { it, from: None, stepped: 0, backoff: 0, probe: true }
    }

    /// Position at the first key with prefix `prefix` (an escaped key in the
    /// regular CF, `'I' ++` one in the intents CF), whose first possible key is
    /// `first(prefix)` ([`keys::first_version_key`], [`keys::first_intent_key`]).
    fn position_row(&mut self, prefix: &[u8], first: fn(&[u8]) -> Vec<u8>) -> Result<()> {
        if !self.probe {
            return self.position(prefix);
        }
        self.it.seek(&first(prefix));
        Ok(())
    }

    /// Position at the first entry at or after `target`.
    fn position(&mut self, target: &[u8]) -> Result<()> {
        if self.backoff > 0 {
            self.backoff -= 1;
        } else if self.from.as_deref().is_some_and(|from| from <= target) {
            // No entry lies between `from` and the current position: step.
            let mut steps = 0;
            loop {
                if !self.it.valid()? || self.it.key() >= target {
                    self.stepped += 1;
                    self.set_from(target);
                    return Ok(());
                }
                if steps == CURSOR_STEPS {
                    self.backoff = CURSOR_BACKOFF;
                    break;
                }
                self.it.next();
                steps += 1;
            }
        }
        self.it.seek(target);
        self.set_from(target);
        Ok(())
    }

    fn set_from(&mut self, k: &[u8]) {
        let from = self.from.get_or_insert_with(Vec::new);
        from.clear();
        from.extend_from_slice(k);
    }

    /// (hybrid time, is-a-live-row) of the newest committed version of `key`
    /// (over the regular column family).
    pub fn latest_version(&mut self, key: &[u8]) -> Result<(Option<HybridTime>, bool)> {
        let esc = keys::escape(key);
        // Version keys start with the escaped key, which no other escaped key
        // starts with: the first entry at or after it is the key's newest version
        // if it has any.
        self.position_row(&esc, keys::first_version_key)?;
        if !self.it.valid()? {
            return Ok((None, false));
        }
        let (k, ht) = keys::split_version_key(self.it.key())?;
        if k != &esc[..] {
            return Ok((None, false));
        }
        let live = !matches!(keys::decode_value(self.it.value())?, StoredValue::Tombstone);
        Ok((Some(ht), live))
    }

    /// The newest committed versions of `key` (over the regular column family),
    /// newest first, down to the first full one (not a patch): every one newer
    /// than `newer_than`, and at least `max` if there are as many. A whole row a
    /// patch wrote (`PutCols`) newer than `newer_than` (not INVALID) does not end
    /// them: it records only the attributes its update changed, and a writer
    /// that read at `newer_than` must see the changes under it too.
    pub fn recent_versions(&mut self, key: &[u8], newer_than: HybridTime, max: usize) -> Result<Vec<Version>> {
        let esc = keys::escape(key);
        self.position_row(&esc, keys::first_version_key)?;
        let mut out = Vec::new();
        while self.it.valid()? {
            let (k, ht) = keys::split_version_key(self.it.key())?;
            if k != &esc[..] || (out.len() >= max && ht <= newer_than) {
                break;
            }
            let v = match keys::decode_value(self.it.value())? {
                StoredValue::Patch(p) => Version { ht, cols: Some(patch::decode_patch(p)?.0), live: true, patch: true },
                StoredValue::PutCols(p) => Version { ht, cols: Some(patch::decode_patch(p)?.0), live: true, patch: false },
                StoredValue::Put(_) => Version { ht, cols: None, live: true, patch: false },
                StoredValue::Tombstone => Version { ht, cols: None, live: false, patch: false },
            };
            // Under a patch, or a whole row a patch wrote newer than `newer_than`,
            // the next version counts too.
            let more = v.patch || (v.cols.is_some() && newer_than != HybridTime::INVALID && ht > newer_than);
            let last = !more;
            out.push(v);
            if last {
                break;
            }
            self.it.next();
        }
        // The iterator stands on the entry at or after its current key: a later
        // lookup of a greater key steps on from there.
        if self.probe {
            // Past the row, a probing iterator may have skipped keys.
        } else if self.it.valid()? {
            let k = self.it.key().to_vec();
            self.set_from(&k);
        } else {
            self.from = keys::prefix_upper_bound(&esc);
        }
        Ok(out)
    }

    /// The newest committed state of `key` (over the regular column family) when it
    /// is a live row: its patches over the newest whole version (the stored patches,
    /// newest first) and that version's row. None: no live row, or patches with no
    /// whole version under them.
    pub fn committed_layers(&mut self, key: &[u8]) -> Result<Option<Layers>> {
        let esc = keys::escape(key);
        self.position_row(&esc, keys::first_version_key)?;
        // Stepping from here would not know where the iterator stopped.
        self.from = None;
        let mut patches = Vec::new();
        while self.it.valid()? {
            let (k, _) = keys::split_version_key(self.it.key())?;
            if k != &esc[..] {
                break;
            }
            match keys::decode_value(self.it.value())? {
                StoredValue::Patch(p) => patches.push(p.to_vec()),
                StoredValue::PutCols(p) => return Ok(Some((patches, patch::patch_row(p)?.to_vec()))),
                StoredValue::Put(v) => return Ok(Some((patches, v.to_vec()))),
                StoredValue::Tombstone => return Ok(None),
            }
            self.it.next();
        }
        Ok(None)
    }

    /// Every intent on `key`, of any transaction (over the intents column family).
    pub fn intents(&mut self, key: &[u8]) -> Result<Vec<IntentRecord>> {
        let prefix = keys::intent_key_prefix(key);
        self.position_row(&prefix, keys::first_intent_key)?;
        let out = collect_intent_group(&mut self.it, &prefix[1..], false)?;
        // The key's intents were consumed: the iterator is now at the first entry
        // past every key with this prefix (a probing one may have skipped some).
        if !out.is_empty() && !self.probe {
            match keys::prefix_upper_bound(&prefix) {
                Some(upper) => self.set_from(&upper),
                None => self.from = None,
            }
        }
        Ok(out)
    }
}
