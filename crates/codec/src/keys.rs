//! Key and value layouts of a tablet's column families.
//!
//! A *user key* is any byte string chosen by the layer above (the SQL layer makes it
//! `[hash16][hash columns][range columns]`, each memcomparable). The tablet stores it
//! *escaped* so that every stored key is prefix-free and a fixed-size suffix can follow:
//!
//! | user byte      | stored as   |
//! |----------------|-------------|
//! | `0x00`         | `0x00 0xFF` |
//! | any other `b`  | `b`         |
//! | end of key     | `0x00 0x01` |
//!
//! Escaping preserves order: `a < b` as user keys ⇔ `esc(a) < esc(b)`, and no
//! `esc(a)` is a proper prefix of `esc(b)`. Text and bytea datums (`crate::datum`)
//! are escaped the same way, by [`escape_into`].
//!
//! ## Regular column family (committed versions)
//! `esc(user_key) ++ be64(!ht)` → [`encode_value`]. `!ht` (bitwise NOT) makes the
//! newest version of a key come first.
//!
//! ## Intents column family
//! | prefix | layout                                              | value           |
//! |--------|-----------------------------------------------------|-----------------|
//! | `'I'`  | `'I' ++ esc(user_key) ++ txn_id[16] ++ be32(!seq)`  | [`IntentValue`] |
//! | `'R'`  | `'R' ++ txn_id[16] ++ esc(user_key)`               | empty           |
//!
//! `'I'` records are the provisional writes; for one key and transaction the newest
//! statement (highest `seq`) comes first. `'R'` is the reverse index used to apply or
//! remove all intents of a transaction.
//!
//! ## Values
//! `[tag u8][payload]`: tag `0x01` = put (payload = row bytes), `0x02` = tombstone
//! (no payload). Intent values: `[kind u8][subtxn be32][payload]`, kind `0x01` put,
//! `0x02` delete, `0x03` lock (no data; reserved for row locks).

use pinax_common::{HybridTime, TxnId};

/// Errors decoding stored keys and values.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("stored key is truncated")]
    Truncated,
    #[error("invalid escape sequence in stored key")]
    BadEscape,
    #[error("unknown tag {0:#04x}")]
    BadTag(u8),
    #[error("checksum mismatch")]
    Checksum,
}

pub const ESC: u8 = 0x00;
pub const ESC_ZERO: u8 = 0xFF;
pub const ESC_END: u8 = 0x01;
pub const HT_SUFFIX_LEN: usize = 8;
pub const SEQ_SUFFIX_LEN: usize = 4;
pub const INTENT_PREFIX: u8 = b'I';
pub const REVERSE_PREFIX: u8 = b'R';

/// Append `esc(user_key)` to `out`.
pub fn escape_into(out: &mut Vec<u8>, user_key: &[u8]) {
    out.reserve(user_key.len() + 2);
    let mut rest = user_key;
    while let Some(pos) = rest.iter().position(|&b| b == ESC) {
        out.extend_from_slice(&rest[..pos]);
        out.extend_from_slice(&[ESC, ESC_ZERO]);
        rest = &rest[pos + 1..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&[ESC, ESC_END]);
}

pub fn escape(user_key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + 2);
    escape_into(&mut v, user_key);
    v
}

/// Decode an escaped key at the start of `input`: returns (user_key, bytes consumed).
pub fn unescape_prefix(input: &[u8]) -> Result<(Vec<u8>, usize), KeyError> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    loop {
        let rest = input.get(i..).ok_or(KeyError::Truncated)?;
        let pos = rest.iter().position(|&b| b == ESC).ok_or(KeyError::Truncated)?;
        out.extend_from_slice(&rest[..pos]);
        match rest.get(pos + 1) {
            Some(&ESC_ZERO) => {
                out.push(0);
                i += pos + 2;
            }
            Some(&ESC_END) => return Ok((out, i + pos + 2)),
            Some(_) => return Err(KeyError::BadEscape),
            None => return Err(KeyError::Truncated),
        }
    }
}

/// Stored key of one committed version.
pub fn version_key(user_key: &[u8], ht: HybridTime) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 2 + HT_SUFFIX_LEN);
    escape_into(&mut k, user_key);
    k.extend_from_slice(&(!ht.as_u64()).to_be_bytes());
    k
}

/// Append the descending hybrid-time suffix.
pub fn push_ht_suffix(out: &mut Vec<u8>, ht: HybridTime) {
    out.extend_from_slice(&(!ht.as_u64()).to_be_bytes());
}

/// Split a regular-CF key into (escaped user key, hybrid time).
pub fn split_version_key(stored: &[u8]) -> Result<(&[u8], HybridTime), KeyError> {
    if stored.len() < HT_SUFFIX_LEN + 2 {
        return Err(KeyError::Truncated);
    }
    let (esc, suffix) = stored.split_at(stored.len() - HT_SUFFIX_LEN);
    let mut b = [0u8; 8];
    b.copy_from_slice(suffix);
    Ok((esc, HybridTime(!u64::from_be_bytes(b))))
}

/// `'I' ++ esc(user_key)`: prefix of every intent on `user_key`.
pub fn intent_key_prefix(user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 3 + TxnId::LEN + SEQ_SUFFIX_LEN);
    k.push(INTENT_PREFIX);
    escape_into(&mut k, user_key);
    k
}

/// `'I' ++ esc`: prefix of every intent on the row whose escaped key is `esc`
/// ([`intent_key_prefix`] of a key already escaped).
pub fn escaped_intent_prefix(esc: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + esc.len());
    k.push(INTENT_PREFIX);
    k.extend_from_slice(esc);
    k
}

/// `'I'`: the first key of the intent records in the intents column family.
pub fn intents_start() -> Vec<u8> {
    vec![INTENT_PREFIX]
}

/// The end (exclusive) of the intent records: the first key past every `'I'` key
/// (the reverse index, `'R'`, lies beyond it).
pub fn intents_end() -> Vec<u8> {
    vec![INTENT_PREFIX + 1]
}

/// Bytes after an intent key's `'I' ++ esc(user_key)`: the transaction and `!seq`.
pub const INTENT_SUFFIX_LEN: usize = TxnId::LEN + SEQ_SUFFIX_LEN;

// Probe prefixes: the storage engine keeps bloom filters over the prefix of a key
// that ends `ESC ESC_END` and then a fixed-size suffix (`pinax_engine::probe_prefix`:
// the hybrid time of a version key, the transaction and `!seq` of an intent key), so
// every version (intent) of a row shares the row's escaped key (`'I' ++` it) as its
// probe prefix. The engine cannot see this crate; `tests/probe_prefix.rs` checks
// that its prefix of each key laid out here is the row's.

/// The first possible version key of the row whose escaped key is `esc` (`esc ++
/// 00 * 8`): where a probe of its versions seeks (its probe prefix is `esc`).
pub fn first_version_key(esc: &[u8]) -> Vec<u8> {
    first_key_with(esc, HT_SUFFIX_LEN)
}

/// The first possible intent key with prefix `prefix` (`'I' ++` a row's escaped
/// key, [`intent_key_prefix`]): `prefix ++ 00 * 20`, where a probe of the row's
/// intents seeks (its probe prefix is `prefix`).
pub fn first_intent_key(prefix: &[u8]) -> Vec<u8> {
    first_key_with(prefix, INTENT_SUFFIX_LEN)
}

/// The intent keys of `txn` on the row whose intents have prefix `prefix`: from the
/// first possible one (`prefix ++ txn ++ 00 * 4`, whose probe prefix is the row's)
/// to the end (exclusive) of `prefix ++ txn`.
pub fn txn_intents_range(prefix: &[u8], txn: TxnId) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut first = Vec::with_capacity(prefix.len() + INTENT_SUFFIX_LEN);
    first.extend_from_slice(prefix);
    first.extend_from_slice(txn.as_bytes());
    let upper = prefix_upper_bound(&first);
    first.resize(prefix.len() + INTENT_SUFFIX_LEN, 0);
    (first, upper)
}

/// `prefix` followed by `suffix` zero bytes: the first key of that length with it.
fn first_key_with(prefix: &[u8], suffix: usize) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + suffix);
    k.extend_from_slice(prefix);
    k.resize(prefix.len() + suffix, 0);
    k
}

/// `'I' ++ esc(user_key) ++ txn ++ be32(!seq)`.
pub fn intent_key(user_key: &[u8], txn: TxnId, seq: u32) -> Vec<u8> {
    let mut k = intent_key_prefix(user_key);
    k.extend_from_slice(txn.as_bytes());
    k.extend_from_slice(&(!seq).to_be_bytes());
    k
}

/// Parts of an intent key: (escaped user key, txn, seq).
pub fn split_intent_key(stored: &[u8]) -> Result<(&[u8], TxnId, u32), KeyError> {
    let tail = TxnId::LEN + SEQ_SUFFIX_LEN;
    if stored.len() < 1 + 2 + tail {
        return Err(KeyError::Truncated);
    }
    if stored[0] != INTENT_PREFIX {
        return Err(KeyError::BadTag(stored[0]));
    }
    let esc = &stored[1..stored.len() - tail];
    let txn_bytes = &stored[stored.len() - tail..stored.len() - SEQ_SUFFIX_LEN];
    let txn = TxnId::from_slice(txn_bytes).ok_or(KeyError::Truncated)?;
    let mut s = [0u8; 4];
    s.copy_from_slice(&stored[stored.len() - SEQ_SUFFIX_LEN..]);
    Ok((esc, txn, !u32::from_be_bytes(s)))
}

/// `'R' ++ txn ++ esc(user_key)`.
pub fn reverse_key(txn: TxnId, user_key: &[u8]) -> Vec<u8> {
    let mut k = reverse_prefix(txn);
    escape_into(&mut k, user_key);
    k
}

/// Escape byte after which [`unindexed_key`] has this (escaped keys have only
/// `ESC_ZERO` or `ESC_END` after `ESC`).
pub const ESC_UNINDEXED: u8 = 0x02;

/// `'R' ++ txn ++ ESC ESC_UNINDEXED`: in a transaction's reverse index, the mark
/// that the index is incomplete (some of its intents have no entry: a bulk write;
/// its intents are then found by walking the intents). No escaped key equals it.
pub fn unindexed_key(txn: TxnId) -> Vec<u8> {
    let mut k = reverse_prefix(txn);
    k.extend_from_slice(&[ESC, ESC_UNINDEXED]);
    k
}

/// `'R' ++ txn`: prefix of the reverse index of one transaction.
pub fn reverse_prefix(txn: TxnId) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + TxnId::LEN + 16);
    k.push(REVERSE_PREFIX);
    k.extend_from_slice(txn.as_bytes());
    k
}

/// Upper bound (exclusive) for keys starting with `prefix`; `None` if unbounded.
pub fn prefix_upper_bound(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut v = prefix.to_vec();
    while let Some(last) = v.pop() {
        if last != 0xFF {
            v.push(last + 1);
            return Some(v);
        }
    }
    None
}

/// A committed value in the regular column family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredValue<'a> {
    Put(&'a [u8]),
    Tombstone,
    /// Some columns of the row changed (a [`crate::patch`] over the older versions).
    Patch(&'a [u8]),
    /// A whole row written by an update of some columns: laid out as a
    /// [`crate::patch`], whose row is the whole row (nothing under it is read) and
    /// whose attributes say what the update changed (for conflict checks).
    PutCols(&'a [u8]),
}

pub const VALUE_PUT: u8 = 0x01;
pub const VALUE_TOMBSTONE: u8 = 0x02;
pub const VALUE_PATCH: u8 = 0x03;
pub const VALUE_PUT_COLS: u8 = 0x04;

pub fn encode_put(out: &mut Vec<u8>, row: &[u8]) {
    out.reserve(row.len() + 1);
    out.push(VALUE_PUT);
    out.extend_from_slice(row);
}

pub fn encode_patch_value(out: &mut Vec<u8>, patch: &[u8]) {
    out.reserve(patch.len() + 1);
    out.push(VALUE_PATCH);
    out.extend_from_slice(patch);
}

pub fn encode_put_cols(out: &mut Vec<u8>, patch: &[u8]) {
    out.reserve(patch.len() + 1);
    out.push(VALUE_PUT_COLS);
    out.extend_from_slice(patch);
}

pub fn encode_tombstone() -> [u8; 1] {
    [VALUE_TOMBSTONE]
}

pub fn decode_value(stored: &[u8]) -> Result<StoredValue<'_>, KeyError> {
    match stored.first() {
        Some(&VALUE_PUT) => Ok(StoredValue::Put(&stored[1..])),
        Some(&VALUE_TOMBSTONE) => Ok(StoredValue::Tombstone),
        Some(&VALUE_PATCH) => Ok(StoredValue::Patch(&stored[1..])),
        Some(&VALUE_PUT_COLS) => Ok(StoredValue::PutCols(&stored[1..])),
        Some(&t) => Err(KeyError::BadTag(t)),
        None => Err(KeyError::Truncated),
    }
}

/// What a provisional record does to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntentKind {
    Put = 1,
    Delete = 2,
    Lock = 3,
    /// A [`crate::patch`]: some columns of the row.
    Patch = 4,
}

/// A decoded intent value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentValue<'a> {
    pub kind: IntentKind,
    pub subtxn: u32,
    pub data: &'a [u8],
}

pub fn encode_intent_value(out: &mut Vec<u8>, kind: IntentKind, subtxn: u32, data: &[u8]) {
    out.reserve(5 + data.len());
    out.push(kind as u8);
    out.extend_from_slice(&subtxn.to_be_bytes());
    out.extend_from_slice(data);
}

pub fn decode_intent_value(stored: &[u8]) -> Result<IntentValue<'_>, KeyError> {
    if stored.len() < 5 {
        return Err(KeyError::Truncated);
    }
    let kind = match stored[0] {
        1 => IntentKind::Put,
        2 => IntentKind::Delete,
        3 => IntentKind::Lock,
        4 => IntentKind::Patch,
        t => return Err(KeyError::BadTag(t)),
    };
    let mut s = [0u8; 4];
    s.copy_from_slice(&stored[1..5]);
    Ok(IntentValue { kind, subtxn: u32::from_be_bytes(s), data: &stored[5..] })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn golden_escape() {
        assert_eq!(hex(&escape(b"")), "0001");
        assert_eq!(hex(&escape(b"ab")), "61620001");
        assert_eq!(hex(&escape(&[0x00])), "00ff0001");
        assert_eq!(hex(&escape(&[0x01, 0x00, 0x02])), "0100ff020001");
    }

    #[test]
    fn golden_version_key() {
        let k = version_key(b"k", HybridTime(1));
        assert_eq!(hex(&k), "6b0001fffffffffffffffe");
        let (esc, ht) = split_version_key(&k).unwrap();
        assert_eq!(esc, &escape(b"k")[..]);
        assert_eq!(ht, HybridTime(1));
        // newer version sorts first
        assert!(version_key(b"k", HybridTime(5)) < version_key(b"k", HybridTime(4)));
    }

    #[test]
    fn golden_intent_keys() {
        let txn = TxnId([0xAB; 16]);
        let k = intent_key(b"x", txn, 2);
        assert_eq!(hex(&k), format!("49780001{}fffffffd", "ab".repeat(16)));
        let (esc, t, seq) = split_intent_key(&k).unwrap();
        assert_eq!((esc, t, seq), (&escape(b"x")[..], txn, 2));
        assert!(intent_key(b"x", txn, 3) < intent_key(b"x", txn, 2));
        assert_eq!(hex(&reverse_key(txn, b"x")), format!("52{}780001", "ab".repeat(16)));
    }

    #[test]
    fn escape_preserves_order_and_is_prefix_free() {
        let keys: Vec<&[u8]> = vec![b"", &[0x00], &[0x00, 0x00], &[0x00, 0x01], &[0x01], b"a", b"a\x00", b"a\x00b", b"ab", &[0xFF], &[0xFF, 0x00]];
        for a in &keys {
            for b in &keys {
                let (ea, eb) = (escape(a), escape(b));
                assert_eq!(a.cmp(b), ea.cmp(&eb), "{a:?} vs {b:?}");
                if a != b {
                    assert!(!eb.starts_with(&ea), "{a:?} prefix of {b:?}");
                }
            }
            let (back, used) = unescape_prefix(&escape(a)).unwrap();
            assert_eq!(&back[..], *a);
            assert_eq!(used, escape(a).len());
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(unescape_prefix(b"abc"), Err(KeyError::Truncated));
        assert_eq!(unescape_prefix(&[0x00, 0x05]), Err(KeyError::BadEscape));
        assert!(split_version_key(&[1, 2]).is_err());
        assert!(split_intent_key(&[b'I', 0, 1]).is_err());
        assert!(decode_value(&[]).is_err());
        assert!(decode_value(&[9]).is_err());
        assert!(decode_intent_value(&[1, 0]).is_err());
        assert!(decode_intent_value(&[7, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn prefix_bound() {
        assert_eq!(prefix_upper_bound(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_upper_bound(&[0x01, 0xFF]), Some(vec![0x02]));
        assert_eq!(prefix_upper_bound(&[0xFF, 0xFF]), None);
    }
}
