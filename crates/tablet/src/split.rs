//! Splitting a tablet in two at a key: what each half starts with.
//!
//! The halves share their parent's rows (the regular column family is not
//! copied: in a node's store each half is a view of the parent's keys, bounded to
//! its interval; see `pinax_engine_rocks::KeySpace::split_at`). Everything else
//! a tablet keeps is per tablet and is written to each half when the split is
//! applied, from one snapshot of the parent taken behind every write before the
//! split ([`half_states`]):
//! - **Intents** go to the half that owns their key, with their reverse-index
//!   entries; a transaction's "unindexed" mark (its reverse index is incomplete:
//!   a walk of the intents finds them) goes to both halves.
//! - **Locks on the parent's range-lock key** (its partition start): a
//!   SERIALIZABLE range read's lock, a SERIALIZABLE writer's predicate lock and
//!   the mark of a pending deletion of every row are about the whole parent, so
//!   they stay in the left half (whose start is the parent's) and are copied to
//!   the right half re-keyed to its start, the split key (with a reverse-index
//!   entry, and an earlier statement number where the transaction wrote that
//!   very row in the same statement). (A row lock on a row
//!   whose key is the parent's start is copied too: a spurious conflict on the
//!   right half's first key at worst, never a wrong answer.)
//! - **Metadata**: the format version, the newest SERIALIZABLE write time and the
//!   applied deletions of every row go to both halves.

use crate::error::Result;
use crate::tablet::{Partition, META_DELETIONS, META_FORMAT_VERSION, META_PREDICATE_WRITE_HT};
use pinax_codec::keys::{self, IntentKind};
use pinax_common::{TabletId, TxnId};
use pinax_engine::{Cf, IterOptions, KvIterator, Snapshot};

/// `Cf::Meta` key of a split tablet's record of its split ([`SplitRecord`]):
/// written with the split, it retires the tablet (every request is refused with
/// `TabletSplit`, naming the halves).
pub(crate) const META_SPLIT: &[u8] = b"split";

/// Where a tablet split and into which tablets: `left` holds its keys below
/// `at`, `right` the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitRecord {
    pub at: Vec<u8>,
    pub left: TabletId,
    pub right: TabletId,
}

const SPLIT_RECORD_FORMAT: u8 = 1;

impl SplitRecord {
    /// The `Cf::Meta` entry that records the split in the parent (written
    /// with the split: it retires the parent).
    pub fn meta_entry(&self) -> (Vec<u8>, Vec<u8>) {
        let mut v = vec![SPLIT_RECORD_FORMAT];
        v.extend_from_slice(&self.left.0.to_be_bytes());
        v.extend_from_slice(&self.right.0.to_be_bytes());
        v.extend_from_slice(&self.at);
        (META_SPLIT.to_vec(), v)
    }

    /// [`SplitRecord::meta_entry`]'s value undone.
    pub fn decode(v: &[u8]) -> Result<SplitRecord> {
        match v {
            [SPLIT_RECORD_FORMAT, rest @ ..] if rest.len() >= 16 => {
                let id = |b: &[u8]| TabletId(u64::from_be_bytes(b.try_into().unwrap_or([0; 8])));
                Ok(SplitRecord { left: id(&rest[..8]), right: id(&rest[8..16]), at: rest[16..].to_vec() })
            }
            _ => Err(keys::KeyError::Truncated.into()),
        }
    }
}

/// What one half of a split is given besides the rows it shares with its
/// parent: its partition, and its entries of [`Cf::Intents`] and of the
/// tablet's own [`Cf::Meta`] keys, as the tablet stores them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HalfState {
    pub partition: Partition,
    pub intents: Vec<(Vec<u8>, Vec<u8>)>,
    pub meta: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Whether `at` can split `parent`: strictly inside it (both halves non-empty
/// intervals).
pub fn can_split_at(parent: &Partition, at: &[u8]) -> bool {
    at > parent.start.as_slice() && parent.end.as_deref().is_none_or(|e| at < e)
}

/// The user key of a stored regular-column-family key (`esc(key) ++ be64(!ht)`):
/// where a tablet splits when its engine names a middle key
/// (`KvEngine::approximate_middle_key`). `None` if it cannot split `parent`.
pub fn split_key_of_stored(parent: &Partition, stored: &[u8]) -> Option<Vec<u8>> {
    let (esc, _) = keys::split_version_key(stored).ok()?;
    let (key, _) = keys::unescape_prefix(esc).ok()?;
    can_split_at(parent, &key).then_some(key)
}

/// The states of the two halves of the tablet of partition `parent` split at
/// `at`, from `snap` (see the module docs). `snap` must show every write of the
/// parent before the split and none after.
pub fn half_states<S: Snapshot>(snap: &S, parent: &Partition, at: &[u8]) -> Result<[HalfState; 2]> {
    if !can_split_at(parent, at) {
        return Err(crate::Error::InvalidRequest(format!("split key {at:02x?} is not strictly inside the tablet's partition")));
    }
    let mut left = HalfState { partition: Partition { start: parent.start.clone(), end: Some(at.to_vec()) }, ..Default::default() };
    let mut right = HalfState { partition: Partition { start: at.to_vec(), end: parent.end.clone() }, ..Default::default() };
    let route = |left: &mut HalfState, right: &mut HalfState, user_key: &[u8], k: &[u8], v: &[u8]| {
        let half = if user_key < at { left } else { right };
        half.intents.push((k.to_vec(), v.to_vec()));
    };
    let mut it = snap.iter(Cf::Intents, IterOptions::default());
    it.seek_to_first();
    let mut range_locks: Vec<(TxnId, u32, Vec<u8>)> = Vec::new();
    while it.valid()? {
        let (k, v) = (it.key(), it.value());
        match k.first() {
            Some(&keys::INTENT_PREFIX) => {
                let (esc, txn, seq) = keys::split_intent_key(k)?;
                let (user_key, _) = keys::unescape_prefix(esc)?;
                route(&mut left, &mut right, &user_key, k, v);
                if user_key == parent.start && keys::decode_intent_value(v)?.kind == IntentKind::Lock {
                    range_locks.push((txn, seq, v.to_vec()));
                }
            }
            Some(&keys::REVERSE_PREFIX) => {
                let tail = k.get(1 + TxnId::LEN..).ok_or(keys::KeyError::Truncated)?;
                if tail == [keys::ESC, keys::ESC_UNINDEXED] {
                    left.intents.push((k.to_vec(), v.to_vec()));
                    right.intents.push((k.to_vec(), v.to_vec()));
                } else {
                    let (user_key, _) = keys::unescape_prefix(tail)?;
                    route(&mut left, &mut right, &user_key, k, v);
                }
            }
            _ => return Err(keys::KeyError::BadTag(k.first().copied().unwrap_or(0)).into()),
        }
        it.next();
    }
    // The copies on the right half's start. A transaction that also wrote that
    // row in the same statement keeps its write there, and the lock takes the
    // nearest earlier statement number that is free (held a little longer if
    // the transaction rolls back to a savepoint in between: a spurious conflict
    // at worst, never a lost write).
    let mut taken: std::collections::HashSet<Vec<u8>> = right.intents.iter().map(|(k, _)| k.clone()).collect();
    for (txn, seq, v) in range_locks {
        let Some(key) = (0..=seq).rev().map(|s| keys::intent_key(at, txn, s)).find(|k| !taken.contains(k)) else {
            continue;
        };
        taken.insert(key.clone());
        right.intents.push((key, v));
        let reverse = keys::reverse_key(txn, at);
        if taken.insert(reverse.clone()) {
            right.intents.push((reverse, Vec::new()));
        }
    }
    right.intents.sort();
    for key in [META_FORMAT_VERSION, META_PREDICATE_WRITE_HT, META_DELETIONS] {
        if let Some(v) = snap.get(Cf::Meta, key)? {
            left.meta.push((key.to_vec(), v.clone()));
            right.meta.push((key.to_vec(), v));
        }
    }
    Ok([left, right])
}
