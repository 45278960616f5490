//! Errors of the datum codec ([`crate::datum`]) and the hash prefix ([`crate::hash`]).
//!
//! Every decoder in those modules returns one of these on malformed input; none panics.

/// Why a byte string is not a valid encoding (or a text is not a valid numeric).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The input ended in the middle of an encoding.
    #[error("encoded datum is truncated")]
    Truncated,
    /// A tag or sign byte that is not allowed at this position.
    #[error("invalid tag byte {tag:#04x} ({context})")]
    InvalidTag { tag: u8, context: &'static str },
    /// A boolean body byte other than `0x00` / `0x01`.
    #[error("invalid boolean byte {0:#04x}")]
    InvalidBool(u8),
    /// `0x00` followed by something other than `0xFF` (escaped zero) or `0x01` (end).
    #[error("invalid escape sequence 0x00 {0:#04x} in text/bytea")]
    InvalidEscape(u8),
    /// A `Text` datum whose bytes are not UTF-8.
    #[error("text datum is not valid UTF-8")]
    InvalidUtf8,
    /// `decode_key` decoded every column but bytes were left over.
    #[error("{0} trailing byte(s) after the last key column")]
    TrailingBytes(usize),
    /// A numeric text that does not parse, or a value outside PostgreSQL's numeric range
    /// (also used for malformed encoded numerics).
    #[error("invalid numeric: {0}")]
    InvalidNumeric(String),
    /// Well-formed bytes that no encoder produces (e.g. `-0.0`, a non-canonical NaN, a
    /// numeric with a zero trailing digit pair). Rejected so that the encoding of a
    /// value is unique.
    #[error("non-canonical encoding: {0}")]
    NonCanonical(&'static str),
}
