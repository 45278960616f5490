//! Intents of one key: the records as found in the intents CF, what one
//! transaction's intents leave when it commits ([`txn_effect`]), and their lookups
//! (by holder, [`holders_intents`]; cursors over a range of keys, [`intents_cursor`],
//! [`intents_cursor_between`]).

use super::cursor::KeyCursor;
use crate::Result;
use pinax_codec::keys::{self, IntentKind};
use pinax_codec::patch;
use pinax_common::{HybridTime, TxnId};
use pinax_engine::{Cf, IterOptions, KvIterator, Snapshot};

/// One intent as found in the intents CF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntentRecord {
    pub txn: TxnId,
    pub seq: u32,
    pub kind: IntentKind,
    pub subtxn: u32,
    pub data: Vec<u8>,
}

/// What one transaction's intents on a key leave when it commits (see
/// [`txn_effect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnEffect {
    Put(Vec<u8>),
    Delete,
    /// A stored patch (`pinax_codec::patch`), and the time of the newest version
    /// its writer saw (of an intent; INVALID for a stored version).
    Patch(Vec<u8>, HybridTime),
}

/// The version a transaction's intents `recs` on one key leave: its newest write;
/// a newest patch takes in the attributes of its earlier patches since its last
/// full write (each statement's patch holds the whole row as that statement saw
/// it, its own earlier changes included), and over its own full write it is a
/// full row. None: only locks.
pub fn txn_effect<'r>(recs: impl IntoIterator<Item = &'r IntentRecord>) -> Result<Option<TxnEffect>> {
    let mut writes: Vec<&IntentRecord> = recs.into_iter().filter(|r| r.kind != IntentKind::Lock).collect();
    writes.sort_by_key(|r| std::cmp::Reverse(r.seq));
    let Some(newest) = writes.first() else {
        return Ok(None);
    };
    Ok(Some(match newest.kind {
        IntentKind::Put => TxnEffect::Put(newest.data.clone()),
        IntentKind::Delete => TxnEffect::Delete,
        IntentKind::Lock => unreachable!("locks were left out"),
        IntentKind::Patch if writes.len() == 1 => {
            let (base, stored) = patch::decode_patch_intent(&newest.data)?;
            patch::patch_row(stored)?;
            TxnEffect::Patch(stored.to_vec(), base)
        }
        IntentKind::Patch => {
            let (base, stored) = patch::decode_patch_intent(&newest.data)?;
            let (mut cols, row) = patch::decode_patch(stored)?;
            for earlier in &writes[1..] {
                match earlier.kind {
                    IntentKind::Patch => cols = patch::union(&cols, &patch::decode_patch(patch::decode_patch_intent(&earlier.data)?.1)?.0),
                    // Over its own full write (or, which an update cannot follow,
                    // a delete) the newest statement's row is the whole row.
                    _ => return Ok(Some(TxnEffect::Put(row.to_vec()))),
                }
            }
            let mut p = Vec::new();
            patch::encode_patch(&mut p, &cols, row);
            TxnEffect::Patch(p, base)
        }
    }))
}

/// An intent record from its key's parts and its stored value.
fn intent_record(txn: TxnId, seq: u32, value: &[u8]) -> Result<IntentRecord> {
    let v = keys::decode_intent_value(value)?;
    Ok(IntentRecord { txn, seq, kind: v.kind, subtxn: v.subtxn, data: v.data.to_vec() })
}

/// Consume and decode the intents of escaped key `esc`.
pub(super) fn collect_intent_group<I: KvIterator>(it: &mut I, esc: &[u8], reverse: bool) -> Result<Vec<IntentRecord>> {
    let mut out = Vec::new();
    while it.valid()? {
        let (k, txn, seq) = keys::split_intent_key(it.key())?;
        if k != esc {
            break;
        }
        out.push(intent_record(txn, seq, it.value())?);
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    Ok(out)
}

/// The intents on `key` of the transactions `holders` (in key order: by
/// [`TxnId`] bytes), when the caller knows that no other transaction has an intent
/// on it: the same as [`KeyCursor::intents`] then, without walking the row's
/// intent keys. Each resolved intent of a row leaves a tombstone until compaction,
/// and every lookup of a hot row's intents stepped over all of them (under YCSB F,
/// a tenth of the daemon's CPU, rising between flushes). Each holder's intents are
/// read through an iterator bounded to its own intent keys on `key` (probing the
/// row's prefix: bloom filters): a seek or a step there meets no other
/// transaction's tombstone, whether or not the holder has an intent on the row
/// (`holders` may be a superset). (Seeking each holder through one iterator of
/// the row stepped past its intents to the next live entry, over the tombstones
/// behind them; bracketing them with `seek_for_prev` stepped back over those
/// before a holder that had none left, and backward steps cost more.)
pub fn holders_intents<S: Snapshot>(snap: &S, key: &[u8], holders: &[TxnId]) -> Result<Vec<IntentRecord>> {
    let prefix = keys::intent_key_prefix(key);
    let mut out = Vec::new();
    for txn in holders {
        // From a whole key (`!seq` at least zero): its probe prefix is the row's.
        let (first, upper) = keys::txn_intents_range(&prefix, *txn);
        let mut it = snap.iter(Cf::Intents, IterOptions { lower: Some(first.clone()), upper, prefix_same_as_start: true });
        it.seek(&first);
        while it.valid()? {
            let (_, t, seq) = keys::split_intent_key(it.key())?;
            out.push(intent_record(t, seq, it.value())?);
            it.next();
        }
    }
    Ok(out)
}

/// A cursor over the whole intents column family (see [`KeyCursor`]).
pub fn intents_cursor<S: Snapshot>(snap: &S) -> KeyCursor<S::Iter<'_>> {
    KeyCursor::new(snap.iter(Cf::Intents, IterOptions { lower: Some(keys::intents_start()), upper: Some(keys::intents_end()), prefix_same_as_start: false }))
}

/// A cursor over the intents of keys in `[first, last]` (bounded, so a seek walks
/// no tombstones past them).
/// `probe`: a [`KeyCursor::probing`] one (for keys in no order).
pub fn intents_cursor_between<'s, S: Snapshot>(snap: &'s S, first: &[u8], last: &[u8], probe: bool) -> KeyCursor<S::Iter<'s>> {
    let lower = keys::intent_key_prefix(first);
    let upper = keys::prefix_upper_bound(&keys::intent_key_prefix(last)).unwrap_or_else(keys::intents_end);
    let it = snap.iter(Cf::Intents, IterOptions { lower: Some(lower), upper: Some(upper), prefix_same_as_start: probe });
    if probe {
        KeyCursor::probing(it)
    } else {
        KeyCursor::new(it)
    }
}
