//! Persisted layout of a transaction status record (status tablet, regular CF).
//!
//! Key: `'T' ++ txn_id[16]`. Value (all integers big-endian):
//!
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 1    | layout version (1)                                |
//! | 1      | 1    | state: 1 pending, 2 committed, 3 aborted          |
//! | 2      | 8    | commit hybrid time (0 unless committed)           |
//! | 10     | 8    | start hybrid time                                 |
//! | 18     | 8    | last heartbeat hybrid time                        |
//! | 26     | 8    | resolved-at hybrid time (0 = not resolved)        |
//! | 34     | 4    | number of participants `n`                        |
//! | 38     | 8·n  | participant tablet ids                            |
//! | 38+8n  | 4    | crc32c of bytes `[0, 38+8n)`                       |

use crate::keys::KeyError;

pub const STATUS_KEY_PREFIX: u8 = b'T';
const LAYOUT_VERSION: u8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusRecordFields {
    pub state: u8,
    pub commit_ht: u64,
    pub start_ht: u64,
    pub last_heartbeat: u64,
    pub resolved_at: u64,
    pub participants: Vec<u64>,
}

pub fn status_key(txn: &[u8; 16]) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(STATUS_KEY_PREFIX);
    k.extend_from_slice(txn);
    k
}

pub fn encode(r: &StatusRecordFields) -> Vec<u8> {
    let mut v = Vec::with_capacity(42 + 8 * r.participants.len());
    v.push(LAYOUT_VERSION);
    v.push(r.state);
    v.extend_from_slice(&r.commit_ht.to_be_bytes());
    v.extend_from_slice(&r.start_ht.to_be_bytes());
    v.extend_from_slice(&r.last_heartbeat.to_be_bytes());
    v.extend_from_slice(&r.resolved_at.to_be_bytes());
    v.extend_from_slice(&(r.participants.len() as u32).to_be_bytes());
    for p in &r.participants {
        v.extend_from_slice(&p.to_be_bytes());
    }
    let crc = crc32c::crc32c(&v);
    v.extend_from_slice(&crc.to_be_bytes());
    v
}

fn be64(b: &[u8], at: usize) -> Result<u64, KeyError> {
    let s = b.get(at..at + 8).ok_or(KeyError::Truncated)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_be_bytes(a))
}

fn be32(b: &[u8], at: usize) -> Result<u32, KeyError> {
    let s = b.get(at..at + 4).ok_or(KeyError::Truncated)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(s);
    Ok(u32::from_be_bytes(a))
}

pub fn decode(b: &[u8]) -> Result<StatusRecordFields, KeyError> {
    if b.len() < 42 {
        return Err(KeyError::Truncated);
    }
    if b[0] != LAYOUT_VERSION {
        return Err(KeyError::BadTag(b[0]));
    }
    let n = be32(b, 34)? as usize;
    let body_len = 38usize.checked_add(n.checked_mul(8).ok_or(KeyError::Truncated)?).ok_or(KeyError::Truncated)?;
    if b.len() != body_len + 4 {
        return Err(KeyError::Truncated);
    }
    let crc = be32(b, body_len)?;
    if crc != crc32c::crc32c(&b[..body_len]) {
        return Err(KeyError::Checksum);
    }
    if !(1..=3).contains(&b[1]) {
        return Err(KeyError::BadTag(b[1]));
    }
    let mut participants = Vec::with_capacity(n);
    for i in 0..n {
        participants.push(be64(b, 38 + 8 * i)?);
    }
    Ok(StatusRecordFields {
        state: b[1],
        commit_ht: be64(b, 2)?,
        start_ht: be64(b, 10)?,
        last_heartbeat: be64(b, 18)?,
        resolved_at: be64(b, 26)?,
        participants,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_and_roundtrip() {
        let r = StatusRecordFields { state: 2, commit_ht: 5, start_ht: 1, last_heartbeat: 2, resolved_at: 0, participants: vec![7] };
        let e = encode(&r);
        let hex: String = e.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(
            &hex[..(38 + 8) * 2],
            "0102000000000000000500000000000000010000000000000002000000000000000000000001\
             0000000000000007"
        );
        assert_eq!(decode(&e).unwrap(), r);
    }

    #[test]
    fn corruption_detected() {
        let r = StatusRecordFields { state: 1, commit_ht: 0, start_ht: 1, last_heartbeat: 2, resolved_at: 0, participants: vec![1, 2] };
        let mut e = encode(&r);
        e[12] ^= 1;
        assert_eq!(decode(&e), Err(KeyError::Checksum));
        assert!(decode(&e[..10]).is_err());
        let mut big = encode(&r);
        big[34..38].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode(&big).is_err());
    }
}
