//! Serde helpers that put byte strings on the wire as one length-prefixed block.
//!
//! Serde's default for `Vec<u8>` is a sequence of `u8`, which bincode encodes (and
//! decodes) through one call per byte; keys and row values are the bulk of every
//! request and response, so they use these instead (`#[serde(with = ...)]`). The
//! bytes on the wire are the same (length, then the bytes).

use crate::types::Row;
use serde::de::{self, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, SerializeTuple};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a byte string")
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }
    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(out)
    }
}

/// `#[serde(with = "crate::wire::bytes")]` for a `Vec<u8>` field.
pub mod bytes {
    use super::*;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }
}

struct ByteSlice<'a>(&'a [u8]);

impl Serialize for ByteSlice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

struct ByteBuf(Vec<u8>);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_byte_buf(BytesVisitor).map(ByteBuf)
    }
}

struct RowDe(Row);

impl<'de> Deserialize<'de> for RowDe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct RowVisitor;
        impl<'de> Visitor<'de> for RowVisitor {
            type Value = RowDe;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a (key, value) pair of byte strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RowDe, A::Error> {
                let k: ByteBuf = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let v: ByteBuf = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                Ok(RowDe((k.0, v.0)))
            }
        }
        d.deserialize_tuple(2, RowVisitor)
    }
}

/// `#[serde(with = "crate::wire::rows")]` for a `Vec<Row>` field.
pub mod rows {
    use super::*;

    pub fn serialize<S: Serializer>(rows: &[Row], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(rows.len()))?;
        for (k, v) in rows {
            seq.serialize_element(&RowSer(k, v))?;
        }
        seq.end()
    }

    struct RowSer<'a>(&'a [u8], &'a [u8]);

    impl Serialize for RowSer<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut t = s.serialize_tuple(2)?;
            t.serialize_element(&ByteSlice(self.0))?;
            t.serialize_element(&ByteSlice(self.1))?;
            t.end()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Row>, D::Error> {
        struct RowsVisitor;
        impl<'de> Visitor<'de> for RowsVisitor {
            type Value = Vec<Row>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence of rows")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Row>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(RowDe(r)) = seq.next_element()? {
                    out.push(r);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(RowsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use crate::frame;
    use crate::{ScanResult, WriteOp};

    #[test]
    fn byte_strings_round_trip_as_blocks() {
        let ops = vec![WriteOp::put(vec![0u8, 255, 7], vec![1u8; 300]), WriteOp::delete(Vec::<u8>::new())];
        let mut buf = Vec::new();
        frame::encode_frame(&ops, &mut buf).unwrap();
        let back: Vec<WriteOp> = frame::decode_frame(&buf).unwrap();
        assert_eq!(back, ops);
        let r = ScanResult {
            rows: vec![(b"k1".to_vec(), b"v1".to_vec()), (vec![], vec![0xFF; 3])],
            resume: Some(b"k2".to_vec()),
            count: 2,
            aggregates: vec![],
            groups: vec![],
        };
        let mut buf = Vec::new();
        frame::encode_frame(&r, &mut buf).unwrap();
        let back: ScanResult = frame::decode_frame(&buf).unwrap();
        assert_eq!(back, r);
    }
}
