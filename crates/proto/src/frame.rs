//! Length-prefixed, checksummed frames over any byte stream.
//!
//! `[len: u32 BE][crc32c(payload): u32 BE][payload: len bytes]`
//!
//! Every frame carries its checksum; a client reading answers over a Unix-domain
//! socket does not verify it ([`read_frame_buffered`]: memory to memory).

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{self, BufRead, BufReader, Read, Write};

/// Largest accepted payload.
pub const MAX_FRAME: usize = 64 << 20;
pub const HEADER_LEN: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection error: {0}")]
    Io(#[from] io::Error),
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    #[error("frame checksum mismatch")]
    Checksum,
    #[error("malformed message: {0}")]
    Decode(String),
    #[error("could not encode message: {0}")]
    Encode(String),
}

fn config() -> bincode::config::Configuration<bincode::config::BigEndian, bincode::config::Varint, bincode::config::Limit<MAX_FRAME>> {
    bincode::config::standard().with_big_endian().with_limit::<MAX_FRAME>()
}

/// Serialize `msg` as one frame into `out` (cleared first).
pub fn encode_frame<T: Serialize>(msg: &T, out: &mut Vec<u8>) -> Result<(), FrameError> {
    out.clear();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    bincode::serde::encode_into_std_write(msg, out, config()).map_err(|e| FrameError::Encode(e.to_string()))?;
    let len = out.len() - HEADER_LEN;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    let crc = crc32c::crc32c(&out[HEADER_LEN..]);
    out[0..4].copy_from_slice(&(len as u32).to_be_bytes());
    out[4..8].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Decode a payload (already checksum-verified).
pub fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    let (v, used) = bincode::serde::decode_from_slice(payload, config()).map_err(|e| FrameError::Decode(e.to_string()))?;
    if used != payload.len() {
        return Err(FrameError::Decode(format!("{} trailing bytes", payload.len() - used)));
    }
    Ok(v)
}

/// Parse a frame header: (payload length, checksum).
pub fn parse_header(h: &[u8; HEADER_LEN]) -> Result<(usize, u32), FrameError> {
    let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    Ok((len, u32::from_be_bytes([h[4], h[5], h[6], h[7]])))
}

/// Decode a whole frame held in memory (header + payload).
pub fn decode_frame<T: DeserializeOwned>(frame: &[u8]) -> Result<T, FrameError> {
    let h: &[u8; HEADER_LEN] = frame.get(..HEADER_LEN).and_then(|h| h.try_into().ok()).ok_or(FrameError::Decode("truncated header".into()))?;
    let (len, crc) = parse_header(h)?;
    let payload = frame.get(HEADER_LEN..HEADER_LEN + len).ok_or(FrameError::Decode("truncated payload".into()))?;
    if frame.len() != HEADER_LEN + len {
        return Err(FrameError::Decode("trailing bytes after frame".into()));
    }
    if crc32c::crc32c(payload) != crc {
        return Err(FrameError::Checksum);
    }
    decode_payload(payload)
}

/// Read a frame's header from `r`: (payload length, checksum); `Ok(None)` on clean
/// EOF before it starts.
fn read_header<R: Read>(r: &mut R) -> Result<Option<(usize, u32)>, FrameError> {
    let mut h = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut h[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    parse_header(&h).map(Some)
}

/// Read one frame from `r` into `buf` and decode it. `Ok(None)` on clean EOF
/// before a frame starts.
///
/// The payload buffer grows as its bytes arrive, not to the length the header
/// claims: a peer that announces 64 MiB and sends a few bytes costs the reader
/// those bytes, not 64 MiB per connection.
pub fn read_frame<T: DeserializeOwned, R: Read>(r: &mut R, buf: &mut Vec<u8>) -> Result<Option<T>, FrameError> {
    let Some((len, crc)) = read_header(r)? else { return Ok(None) };
    buf.clear();
    let got = (&mut *r).take(len as u64).read_to_end(buf)?;
    if got < len {
        return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    if crc32c::crc32c(buf) != crc {
        return Err(FrameError::Checksum);
    }
    decode_payload(buf).map(Some)
}

/// [`read_frame`] over a buffered stream, for large frames (scan answers of tens
/// of kilobytes): the part of the payload the reader has buffered is copied, the
/// rest is read from the stream straight into `buf` (not into the reader's buffer
/// and then copied again), and `buf` keeps its length between frames (no zero fill
/// of each payload: its bytes are overwritten). `verify`: check the checksum (a
/// Unix-domain socket copies memory to memory; its reader may skip it).
pub fn read_frame_buffered<T: DeserializeOwned, R: Read>(r: &mut BufReader<R>, buf: &mut Vec<u8>, verify: bool) -> Result<Option<T>, FrameError> {
    let Some((len, crc)) = read_header(r)? else { return Ok(None) };
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let payload = &mut buf[..len];
    let have = r.buffer().len().min(len);
    payload[..have].copy_from_slice(&r.buffer()[..have]);
    r.consume(have);
    r.get_mut().read_exact(&mut payload[have..])?;
    if verify && crc32c::crc32c(payload) != crc {
        return Err(FrameError::Checksum);
    }
    decode_payload(payload).map(Some)
}

/// Encode `msg` and write it as one frame.
pub fn write_frame<T: Serialize, W: Write>(w: &mut W, msg: &T, buf: &mut Vec<u8>) -> Result<(), FrameError> {
    encode_frame(msg, buf)?;
    w.write_all(buf)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Request, RequestEnvelope, WriteOp};
    use pinax_common::{HybridTime, TabletId};

    fn sample() -> RequestEnvelope {
        RequestEnvelope {
            ht: HybridTime(42),
            fence: 0,
            request: Request::Write { tablet: TabletId(7), ops: vec![WriteOp::put(b"k".to_vec(), b"v".to_vec())], read_ht: None, txn: None, request: 0 },
        }
    }

    #[test]
    fn roundtrip() {
        let mut buf = Vec::new();
        encode_frame(&sample(), &mut buf).unwrap();
        let back: RequestEnvelope = decode_frame(&buf).unwrap();
        assert_eq!(back, sample());
        let mut cur = io::Cursor::new(buf.clone());
        let mut scratch = Vec::new();
        let r: Option<RequestEnvelope> = read_frame(&mut cur, &mut scratch).unwrap();
        assert_eq!(r.unwrap(), sample());
        let r: Option<RequestEnvelope> = read_frame(&mut cur, &mut scratch).unwrap();
        assert!(r.is_none());
    }

    #[test]
    fn buffered_reads_take_frames_of_any_size_across_the_buffer() {
        let small = sample();
        let big = RequestEnvelope {
            ht: HybridTime(7),
            fence: 0,
            request: Request::Write {
                tablet: TabletId(1),
                ops: (0..3000u32).map(|i| WriteOp::put(i.to_be_bytes().to_vec(), vec![i as u8; 40])).collect(),
                read_ht: None,
                txn: None,
                request: 0,
            },
        };
        let mut stream = Vec::new();
        let mut one = Vec::new();
        for m in [&small, &big, &small, &big, &big, &small] {
            encode_frame(m, &mut one).unwrap();
            stream.extend_from_slice(&one);
        }
        // A reader buffer smaller and larger than the frames; the scratch buffer is
        // reused (longer than the next payload after a big frame).
        for cap in [16, 4096, 1 << 20] {
            let mut r = BufReader::with_capacity(cap, io::Cursor::new(stream.clone()));
            let mut scratch = Vec::new();
            for want in [&small, &big, &small, &big, &big, &small] {
                let got: RequestEnvelope = read_frame_buffered(&mut r, &mut scratch, true).unwrap().unwrap();
                assert_eq!(&got, want, "buffer of {cap}");
            }
            assert!(read_frame_buffered::<RequestEnvelope, _>(&mut r, &mut scratch, true).unwrap().is_none());
        }
        // A damaged payload: an error when verified, not noticed when not.
        let mut bad = Vec::new();
        encode_frame(&small, &mut bad).unwrap();
        let last = bad.len() - 1;
        bad[last] ^= 0x01;
        let mut r = BufReader::new(io::Cursor::new(bad.clone()));
        assert!(matches!(read_frame_buffered::<RequestEnvelope, _>(&mut r, &mut Vec::new(), true), Err(FrameError::Checksum)));
        let mut r = BufReader::new(io::Cursor::new(bad));
        assert!(!matches!(read_frame_buffered::<RequestEnvelope, _>(&mut r, &mut Vec::new(), false), Err(FrameError::Checksum)));
        // A stream cut in the middle of a payload.
        let mut r = BufReader::with_capacity(16, io::Cursor::new(stream[..stream.len() - 3].to_vec()));
        let mut scratch = Vec::new();
        let mut res = Ok(None);
        for _ in 0..6 {
            res = read_frame_buffered::<RequestEnvelope, _>(&mut r, &mut scratch, true);
        }
        assert!(matches!(res, Err(FrameError::Io(_))), "{res:?}");
    }

    #[test]
    fn golden_header() {
        let mut buf = Vec::new();
        encode_frame(&RequestEnvelope { ht: HybridTime(1), fence: 0, request: Request::Ping }, &mut buf).unwrap();
        let hex: String = buf.iter().map(|b| format!("{b:02x}")).collect();
        // len=3, crc32c([01,00,00]), payload: ht varint 1, fence varint 0, variant 0 (Ping)
        assert_eq!(&hex[..8], "00000003");
        assert_eq!(&hex[16..], "010000");
    }

    #[test]
    fn corrupt_frames_are_errors() {
        let mut buf = Vec::new();
        encode_frame(&sample(), &mut buf).unwrap();
        let mut bad = buf.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xFF;
        assert!(matches!(decode_frame::<RequestEnvelope>(&bad), Err(FrameError::Checksum)));
        let mut huge = buf.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(decode_frame::<RequestEnvelope>(&huge), Err(FrameError::TooLarge(_))));
        assert!(decode_frame::<RequestEnvelope>(&buf[..5]).is_err());
        // valid checksum over garbage payload
        let garbage = vec![0xFFu8; 20];
        let mut f = Vec::new();
        f.extend_from_slice(&(garbage.len() as u32).to_be_bytes());
        f.extend_from_slice(&crc32c::crc32c(&garbage).to_be_bytes());
        f.extend_from_slice(&garbage);
        assert!(matches!(decode_frame::<RequestEnvelope>(&f), Err(FrameError::Decode(_))));
    }
}

#[cfg(test)]
mod robustness {
    //! The same property the fuzz target checks, run on stable in every `make test`.
    use super::*;
    use crate::{RequestEnvelope, ResponseEnvelope};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_frame::<RequestEnvelope>(&data);
            let _ = decode_payload::<RequestEnvelope>(&data);
            let _ = decode_payload::<ResponseEnvelope>(&data);
            let mut cur = std::io::Cursor::new(&data);
            let mut buf = Vec::new();
            let _ = read_frame::<RequestEnvelope, _>(&mut cur, &mut buf);
        }

        #[test]
        fn valid_checksum_over_arbitrary_payload_never_panics(payload in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut f = (payload.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
            f.extend_from_slice(&payload);
            let _ = decode_frame::<RequestEnvelope>(&f);
        }
    }
}
