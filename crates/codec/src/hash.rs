//! The hash-sharding hash: which 16-bit hash bucket a row belongs to.
//!
//! A hash-sharded row key is `be16(hash16(encoded hash columns)) ++ encoded hash columns
//! ++ encoded range columns`, the columns encoded with [`crate::datum::encode_key`].
//! Tablets own contiguous ranges of the 16-bit hash space.
//!
//! Stability: `hash16` is the upper 16 bits of XXH3-64 (seed 0) of the bytes. It decides
//! where every stored row lives, so it must never change; `tests::golden_hash16` pins
//! exact values (the empty input against XXH3's published test vector).

use crate::error::CodecError;

/// Length in bytes of the hash prefix written by [`encode_hash_prefix`].
pub const HASH_PREFIX_LEN: usize = 2;

/// Upper 16 bits of `xxh3_64(bytes)`.
pub fn hash16(bytes: &[u8]) -> u16 {
    (xxhash_rust::xxh3::xxh3_64(bytes) >> 48) as u16
}

/// Append `h` big-endian, so that keys sort by hash bucket first.
pub fn encode_hash_prefix(out: &mut Vec<u8>, h: u16) {
    out.extend_from_slice(&h.to_be_bytes());
}

/// Read a hash prefix written by [`encode_hash_prefix`] and advance `input` past it.
pub fn decode_hash_prefix(input: &mut &[u8]) -> Result<u16, CodecError> {
    match *input {
        [a, b, ref rest @ ..] => {
            *input = rest;
            Ok(u16::from_be_bytes([*a, *b]))
        }
        _ => Err(CodecError::Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh3_reference_vector() {
        // XXH3_64bits("") from the xxHash reference test vectors.
        assert_eq!(xxhash_rust::xxh3::xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        // Cross-checked against the Python `xxhash` binding (xxh3_64_intdigest).
        assert_eq!(xxhash_rust::xxh3::xxh3_64(b"abc"), 0x78AF_5F94_892F_3950);
    }

    #[test]
    fn golden_hash16() {
        let cases: &[(&[u8], u16)] = &[
            (b"", 0x2D06),
            (b"a", 0xE6C6),
            (b"abc", 0x78AF),
            (b"hello world", 0xD447),
            (&[0x02, 0x80, 0x00, 0x00, 0x01], 0x5B9A),
            (&[0x00; 32], 0xA057),
            (b"The quick brown fox jumps over the lazy dog, twice over: 0123456789abcdefghijklmnopqrstuvwxyz!", 0x870A),
        ];
        // Values cross-checked against the Python `xxhash` binding.
        for (input, want) in cases {
            assert_eq!(hash16(input), *want, "hash16({input:02x?})");
        }
    }

    #[test]
    fn prefix_roundtrip_and_order() {
        let mut v = Vec::new();
        encode_hash_prefix(&mut v, 0x1234);
        v.push(0xAA);
        assert_eq!(v, [0x12, 0x34, 0xAA]);
        let mut input = &v[..];
        assert_eq!(decode_hash_prefix(&mut input), Ok(0x1234));
        assert_eq!(input, [0xAA]);
        assert_eq!(decode_hash_prefix(&mut &[0x01][..]), Err(CodecError::Truncated));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode_hash_prefix(&mut a, 0x00FF);
        encode_hash_prefix(&mut b, 0x0100);
        assert!(a < b);
    }
}
