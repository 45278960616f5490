//! A versioned, checksummed envelope for small metadata records (catalog entries).
//!
//! `[kind u8][version u8][payload][crc32c(kind, version, payload) u32 BE]`. The payload's
//! own layout belongs to its owner (the catalog pins its encoding in a golden test).

use crate::keys::KeyError;

pub fn encode_blob(kind: u8, version: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(payload.len() + 6);
    v.push(kind);
    v.push(version);
    v.extend_from_slice(payload);
    let crc = crc32c::crc32c(&v);
    v.extend_from_slice(&crc.to_be_bytes());
    v
}

/// Returns (version, payload) if `kind` matches and the checksum holds.
pub fn decode_blob(kind: u8, b: &[u8]) -> Result<(u8, &[u8]), KeyError> {
    if b.len() < 6 {
        return Err(KeyError::Truncated);
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32c::crc32c(body) != u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        return Err(KeyError::Checksum);
    }
    if body[0] != kind {
        return Err(KeyError::BadTag(body[0]));
    }
    Ok((body[1], &body[2..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_and_checks() {
        let b = encode_blob(b'C', 1, b"xy");
        assert_eq!(&b[..4], &[b'C', 1, b'x', b'y']);
        assert_eq!(decode_blob(b'C', &b).unwrap(), (1, &b"xy"[..]));
        assert_eq!(decode_blob(b'D', &b), Err(KeyError::BadTag(b'C')));
        let mut bad = b.clone();
        bad[2] = b'z';
        assert_eq!(decode_blob(b'C', &bad), Err(KeyError::Checksum));
        assert_eq!(decode_blob(b'C', &b[..3]), Err(KeyError::Truncated));
    }
}
