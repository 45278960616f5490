//! The storage engine's probe prefix (`pinax_engine::probe_prefix`, what its bloom
//! filters are built over) of the keys `keys` lays out is the row's: a version
//! key's is its escaped user key, an intent key's `'I' ++` it. The engine cannot
//! depend on this crate, so its few facts about key layout (the suffix lengths and
//! the two bytes ending an escaped key) are pinned to the codec's here.

use pinax_codec::keys;
use pinax_common::{HybridTime, TxnId};
use pinax_engine::{probe_prefix, Cf};

const USER_KEYS: [&[u8]; 6] = [b"", b"k", &[0x00], &[0x00, 0x01], &[0xff, 0x00, 0xff], b"a\x00\x01b"];

#[test]
fn the_engines_layout_facts_are_the_codecs() {
    assert_eq!(keys::HT_SUFFIX_LEN, pinax_engine::PROBE_SUFFIX_LEN);
    assert_eq!(keys::INTENT_SUFFIX_LEN, pinax_engine::INTENT_PROBE_SUFFIX_LEN);
    assert_eq!([keys::ESC, keys::ESC_END], pinax_engine::PROBE_PREFIX_END);
}

#[test]
fn every_version_and_intent_of_a_row_has_the_rows_probe_prefix() {
    let txn = TxnId([0xab; 16]);
    for k in USER_KEYS {
        let esc = keys::escape(k);
        let prefix = keys::intent_key_prefix(k);
        assert_eq!(prefix, keys::escaped_intent_prefix(&esc));
        for ht in [HybridTime(0), HybridTime(1), HybridTime(u64::MAX)] {
            assert_eq!(probe_prefix(Cf::Regular, &keys::version_key(k, ht)), Some(&esc[..]), "{k:?} at {ht:?}");
        }
        assert_eq!(probe_prefix(Cf::Regular, &keys::first_version_key(&esc)), Some(&esc[..]));
        for seq in [0, 1, u32::MAX] {
            assert_eq!(probe_prefix(Cf::Intents, &keys::intent_key(k, txn, seq)), Some(&prefix[..]), "{k:?} seq {seq}");
        }
        assert_eq!(probe_prefix(Cf::Intents, &keys::first_intent_key(&prefix)), Some(&prefix[..]));
        let (first, upper) = keys::txn_intents_range(&prefix, txn);
        assert_eq!(probe_prefix(Cf::Intents, &first), Some(&prefix[..]));
        assert_eq!(first, keys::intent_key(k, txn, u32::MAX), "the first key of the range is the transaction's first possible intent");
        assert!(upper.is_some_and(|u| keys::intent_key(k, txn, 0) < u && u <= keys::intent_key(k, TxnId([0xac; 16]), u32::MAX)));
        // The first possible keys sort before every key of the row.
        assert!(keys::first_version_key(&esc) <= keys::version_key(k, HybridTime(u64::MAX)));
        assert!(keys::first_intent_key(&prefix) <= keys::intent_key(k, TxnId([0; 16]), u32::MAX));
    }
    // Intent records lie between the intents' bounds; the reverse index does not.
    assert!(keys::intents_start() <= keys::intent_key(b"", txn, 0) && keys::intent_key(&[0xff; 4], txn, 0) < keys::intents_end());
    assert!(keys::reverse_key(txn, b"k") >= keys::intents_end());
}
