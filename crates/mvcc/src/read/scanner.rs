//! Scans: the rows of a key range visible at a read's time, one key at a time, in
//! key order (or reverse).
//!
//! [`Scanner`] merges the regular CF's versions with the intents CF and applies the
//! crate's visibility rule to each key, with the intent and uncertainty rules of
//! [`MvccReader`] (a value in the uncertainty window fails the step with
//! `ReadRestart`). It yields every key it visits ([`Step::Hidden`] for one with no
//! visible row), so that its caller can bound the keys a request visits and resume
//! after the last one ([`Scanner::resume_after`]). What to do with a visible row
//! (filter, count, aggregate, limit) is the caller's: `pinax-pushdown`.
//!
//! Invariants: each step reads one key's versions and intents and no further (the
//! iterators then stand on the next key); a step that does not want the value
//! ([`Want::Presence`], a count) copies no value; no step allocates but for the
//! value it returns and the key's intent records. A forward point read
//! ([`ScanRange::point`]) probes its row through the bloom filters and reads the
//! intents of the holders the tablet names, with no intents iterator.

use super::intents::{collect_intent_group, holders_intents, IntentRecord};
use super::{Deletions, Found, MvccReader, ReadContext};
use crate::status::TxnStatusResolver;
use crate::Result;
use pinax_codec::keys::{self, StoredValue};
use pinax_codec::patch;
use pinax_common::HybridTime;
use pinax_engine::{Cf, IterOptions, KvIterator, Snapshot};

/// The keys a scan visits: `[start, end)`, in key order or reverse.
#[derive(Clone, Copy, Debug)]
pub struct ScanRange<'k> {
    /// Inclusive lower bound (a user key).
    pub start: &'k [u8],
    /// Exclusive upper bound; None: to the end of the snapshot.
    pub end: Option<&'k [u8]>,
    /// Descending key order.
    pub reverse: bool,
    /// Read only the row `start` (if `end` does not exclude it), probing it
    /// through the bloom filters (a forward scan; a reverse one reads the range).
    pub point: bool,
}

/// What the caller needs of a key's visible row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Its value: the row, or a stack of patches over it (`pinax_codec::patch`).
    Value,
    /// Only that it is visible (a count): its value is not read, and comes back
    /// empty.
    Presence,
}

/// One key a scan visited.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// No key is left in the range.
    End,
    /// The key has no row visible to the read (deleted; intents of others only).
    Hidden,
    /// The key's visible row, its value as [`Want`] asked.
    Visible(Vec<u8>),
}

/// The rows of a [`ScanRange`] visible to one [`MvccReader`] (see the module
/// header); made by [`MvccReader::scanner`].
pub struct Scanner<'r, 'a, S: Snapshot, R: TxnStatusResolver + ?Sized> {
    reader: &'r MvccReader<'a, S, R>,
    reverse: bool,
    /// A forward point read (see [`ScanRange::point`]).
    point: bool,
    esc_start: Vec<u8>,
    reg: S::Iter<'a>,
    /// The intents CF (None: not read, or a point read's `point_intents`).
    int: Option<S::Iter<'a>>,
    /// A point read whose row's intent holders are known reads their intents up
    /// front (with no cursor over the intents CF).
    point_intents: Option<Vec<IntentRecord>>,
    deletions: Option<Deletions>,
    /// The escaped key of the current row (one buffer for the whole scan: no
    /// allocation per row on the way to a count); empty before the first.
    esc: Vec<u8>,
}

impl<'a, S: Snapshot, R: TxnStatusResolver + ?Sized> MvccReader<'a, S, R> {
    /// A scan of `range` by this reader: its keys through [`Scanner::next`].
    pub fn scanner(&self, range: ScanRange<'_>) -> Result<Scanner<'_, 'a, S, R>> {
        let esc_start = keys::escape(range.start);
        // A point read (forward) probes the row `start`: its range narrows to it,
        // and the regular CF is read with a probing iterator (bloom filters).
        let point = range.point && !range.reverse;
        let end = if point {
            let only = [range.start, &[0]].concat();
            Some(range.end.map_or(only.clone(), |e| only.min(e.to_vec())))
        } else {
            range.end.map(<[u8]>::to_vec)
        };
        let esc_end = end.as_ref().map(|e| keys::escape(e));
        let reg_opts = IterOptions { lower: Some(esc_start.clone()), upper: esc_end.clone(), prefix_same_as_start: point };
        let int_lower = keys::escaped_intent_prefix(&esc_start);
        let int_upper = match &esc_end {
            Some(e) => keys::escaped_intent_prefix(e),
            None => keys::intents_end(),
        };
        let int_opts = IterOptions { lower: Some(int_lower), upper: Some(int_upper), prefix_same_as_start: false };
        let mut reg = self.snap.iter(Cf::Regular, reg_opts);
        let mut point_intents = None;
        let mut int = match &self.holders {
            Some(holders) if point && self.intents => {
                // (An empty range, `end` at or before `start`, holds no intent.)
                let empty = end.as_ref().is_some_and(|e| e[..] <= range.start[..]);
                let recs = if empty { Vec::new() } else { holders_intents(self.snap, range.start, holders)? };
                point_intents = (!recs.is_empty()).then_some(recs);
                None
            }
            _ => self.intents.then(|| self.snap.iter(Cf::Intents, int_opts)),
        };
        if range.reverse {
            reg.seek_to_last();
            if let Some(i) = int.as_mut() {
                i.seek_to_last();
            }
        } else if point {
            reg.seek(&keys::first_version_key(&esc_start));
            if let Some(i) = int.as_mut() {
                i.seek_to_first();
            }
        } else {
            reg.seek_to_first();
            if let Some(i) = int.as_mut() {
                i.seek_to_first();
            }
        }
        let deletions = self.deletions()?;
        Ok(Scanner { reader: self, reverse: range.reverse, point, esc_start, reg, int, point_intents, deletions, esc: Vec::new() })
    }
}

impl<S: Snapshot, R: TxnStatusResolver + ?Sized> Scanner<'_, '_, S, R> {
    /// Visit the next key in the range: its row if one is visible to the read
    /// (its value as `want` asks), [`Step::Hidden`] if not, [`Step::End`] past
    /// the last key. A value in the read's uncertainty window fails it with
    /// `ReadRestart`.
    #[inline]
    pub fn next(&mut self, want: Want) -> Result<Step> {
        let reader = self.reader;
        let (in_regular, in_intents) = {
            let a = if self.reg.valid()? { Some(keys::split_version_key(self.reg.key())?.0) } else { None };
            let b = match self.int.as_ref() {
                Some(i) if i.valid()? => Some(keys::split_intent_key(i.key())?.0),
                _ => self.point_intents.as_ref().map(|_| &self.esc_start[..]),
            };
            let next = match (a, b) {
                (None, None) => return Ok(Step::End),
                (Some(x), None) | (None, Some(x)) => x,
                (Some(x), Some(y)) => {
                    if self.reverse {
                        x.max(y)
                    } else {
                        x.min(y)
                    }
                }
            };
            self.esc.clear();
            self.esc.extend_from_slice(next);
            (a == Some(next), b == Some(next))
        };
        let recs = match self.int.as_mut() {
            Some(i) if in_intents => collect_intent_group(i, &self.esc, self.reverse)?,
            _ if in_intents => self.point_intents.take().unwrap_or_default(),
            _ => Vec::new(),
        };
        let from_intents = if in_intents { reader.decide_intents(&recs)? } else { Found::Nothing };
        let want_value = want == Want::Value;
        let from_regular = if in_regular {
            let (found, uncertain, found_ht) = read_version_group(&mut self.reg, &self.esc, &reader.ctx, self.reverse, self.point, want_value)?;
            if let Some(ht) = uncertain {
                reader.restart.set(reader.restart.get().max(ht));
            }
            match (found, &self.deletions) {
                (Found::Value(_) | Found::Patch, Some(d)) if reader.deleted_since(d, found_ht) => Found::Deleted,
                (f, _) => f,
            }
        } else {
            Found::Nothing
        };
        if reader.restart.get() != HybridTime::INVALID {
            return Err(crate::Error::ReadRestart { restart_ht: reader.restart.get() });
        }
        let visible = match from_intents {
            Found::Nothing => from_regular,
            decided => decided,
        };
        let visible = match visible {
            Found::Patch if want_value => reader.stack(&self.esc, &recs)?,
            Found::Patch => Found::Value(Vec::new()),
            v => v,
        };
        Ok(match visible {
            Found::Value(v) => Step::Visible(v),
            Found::Deleted | Found::Nothing | Found::Patch => Step::Hidden,
        })
    }

    /// Whether a key was visited.
    pub fn at_key(&self) -> bool {
        !self.esc.is_empty()
    }

    /// The user key of the key last visited.
    pub fn user_key(&self) -> Result<Vec<u8>> {
        Ok(keys::unescape_prefix(&self.esc)?.0)
    }

    /// A forward point read (see [`ScanRange::point`]): its one key is the range's
    /// only one, and nothing follows it (the regular iterator may have stopped
    /// inside its older versions).
    pub fn is_point(&self) -> bool {
        self.point
    }

    /// Where a scan stopped after the key last visited continues: the key just
    /// after it (forward, an inclusive start) or the key itself (reverse, an
    /// exclusive end); None when no key is left.
    pub fn resume_after(&mut self) -> Result<Option<Vec<u8>>> {
        resume_after(&self.esc, self.reverse, &mut self.reg, self.int.as_mut())
    }
}

/// Older versions of a key stepped over before seeking past the rest (RocksDB's own
/// iterator switches from stepping to seeking after 8 as well).
const SEQUENTIAL_SKIPS: usize = 8;

/// Where a scan stopped after the key `esc` (escaped) continues: the key just
/// after it (forward, an inclusive start) or the key itself (reverse, an
/// exclusive end); None when neither iterator has more.
fn resume_after<I: KvIterator>(esc: &[u8], reverse: bool, reg: &mut I, int: Option<&mut I>) -> Result<Option<Vec<u8>>> {
    let more_intents = match int {
        Some(i) => i.valid()?,
        None => false,
    };
    if !reg.valid()? && !more_intents {
        return Ok(None);
    }
    let mut last = keys::unescape_prefix(esc)?.0;
    if !reverse {
        last.push(0);
    }
    Ok(Some(last))
}

/// Consume the versions of escaped key `esc` (iterator positioned on its first entry
/// in scan direction) and return the newest one at or before `ctx.read_ht` (its
/// value copied only if `want_value`: a count needs none), with the newest version
/// in the read's uncertainty window, if any (a read restarted at that time sees
/// every version of the key the window held), and the time of the one returned.
fn read_version_group<I: KvIterator>(
    it: &mut I,
    esc: &[u8],
    ctx: &ReadContext,
    reverse: bool,
    point: bool,
    want_value: bool,
) -> Result<(Found, Option<HybridTime>, HybridTime)> {
    let read_ht = ctx.read_ht;
    let mut found = Found::Nothing;
    let mut found_ht = HybridTime::INVALID;
    let mut uncertain: Option<HybridTime> = None;
    let mut decided = false;
    let mut skipped = 0;
    while it.valid()? {
        let (k, ht) = keys::split_version_key(it.key())?;
        if k != esc {
            break;
        }
        if decided && point {
            // A point read needs nothing after the answer: the older versions can
            // neither be visible nor uncertain (both are newer than the answer).
            break;
        }
        if decided && !reverse {
            // Forward, the answer is known: the rest are older versions. Step over a
            // few; past that, seek beyond them (an often-updated row has thousands
            // until compaction drops those older than the history cutoff, and a
            // point read would walk them all).
            skipped += 1;
            if skipped > SEQUENTIAL_SKIPS {
                // Escaped keys end in ESC ESC_END: never all 0xFF, always a bound.
                if let Some(next) = keys::prefix_upper_bound(esc) {
                    it.seek(&next);
                    break;
                }
            }
        }
        if ctx.uncertain(ht) {
            uncertain = Some(uncertain.map_or(ht, |u| u.max(ht)));
        }
        if ht <= read_ht && !decided {
            found = match keys::decode_value(it.value())? {
                StoredValue::Put(v) if want_value => Found::Value(v.to_vec()),
                StoredValue::PutCols(p) if want_value => Found::Value(patch::patch_row(p)?.to_vec()),
                StoredValue::Patch(_) if want_value => Found::Patch,
                StoredValue::Put(_) | StoredValue::PutCols(_) | StoredValue::Patch(_) => Found::Value(Vec::new()),
                StoredValue::Tombstone => Found::Deleted,
            };
            found_ht = ht;
            // Forward: newest first, so the first match is the answer. Reverse:
            // oldest first, so keep replacing until a version is too new.
            decided = !reverse;
        } else if ht > read_ht && reverse {
            decided = true;
        }
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    Ok((found, uncertain, found_ht))
}
