//! Numeric bodies: parsing and normalizing PostgreSQL numeric text, and its
//! memcomparable encoding (the layout is described in the parent module's header,
//! "Numeric").

use super::{Reader, NUMERIC_MAX_FRAC_DIGITS, NUMERIC_MAX_INT_DIGITS, NUMERIC_NAN, NUMERIC_NEG, NUMERIC_NEG_INF, NUMERIC_POS, NUMERIC_POS_INF, NUMERIC_ZERO};
use crate::error::CodecError;

const EXP_SMALL_MAX: i64 = 120;
const EXP_LARGE_NEG: u8 = 0x01;
const EXP_LARGE_POS: u8 = 0xFF;
const EXP_SMALL_BIAS: i64 = 0x80;

/// A parsed, normalized numeric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Numeric {
    NegInf,
    Zero,
    PosInf,
    NaN,
    /// `±0.d1..dn × 10^exp`, digits `0..=9` with `d1 != 0` and `dn != 0`.
    Finite {
        neg: bool,
        digits: Vec<u8>,
        exp: i64,
    },
}

fn invalid(msg: impl Into<String>) -> CodecError {
    CodecError::InvalidNumeric(msg.into())
}

/// Normalize PostgreSQL numeric text: `"-012.3400"` → `"-12.34"`, `"1e3"` → `"1000"`,
/// `"-0"` → `"0"`, `"inf"` → `"Infinity"`.
pub fn normalize_numeric(text: &str) -> Result<String, CodecError> {
    Ok(format_numeric(&parse_numeric(text)?))
}

/// Largest exponent magnitude accepted in numeric text before range checking (keeps the
/// arithmetic far away from overflow; any nonzero value this large is out of range).
const MAX_TEXT_EXPONENT: i64 = 1_000_000_000;

pub(super) fn parse_numeric(text: &str) -> Result<Numeric, CodecError> {
    let s = text.trim_matches(|c: char| c.is_ascii_whitespace());
    if s.eq_ignore_ascii_case("nan") {
        return Ok(Numeric::NaN);
    }
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if body.eq_ignore_ascii_case("infinity") || body.eq_ignore_ascii_case("inf") {
        return Ok(if neg { Numeric::NegInf } else { Numeric::PosInf });
    }
    let b = body.as_bytes();
    let mut i = 0;
    let mut digits = Vec::with_capacity(b.len());
    while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
        digits.push(c - b'0');
        i += 1;
    }
    let int_len = digits.len();
    if b.get(i) == Some(&b'.') {
        i += 1;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            digits.push(c - b'0');
            i += 1;
        }
    }
    if digits.is_empty() {
        return Err(invalid(format!("invalid input syntax for type numeric: {text:?}")));
    }
    let mut exponent: i64 = 0;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_neg = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let exp_start = i;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            exponent = exponent * 10 + i64::from(c - b'0');
            if exponent > MAX_TEXT_EXPONENT {
                return Err(invalid(format!("exponent out of range: {text:?}")));
            }
            i += 1;
        }
        if i == exp_start {
            return Err(invalid(format!("invalid input syntax for type numeric: {text:?}")));
        }
        if exp_neg {
            exponent = -exponent;
        }
    }
    if i != b.len() {
        return Err(invalid(format!("invalid input syntax for type numeric: {text:?}")));
    }
    // value = 0.digits × 10^(int_len + exponent)
    let leading = digits.iter().take_while(|&&d| d == 0).count();
    if leading == digits.len() {
        return Ok(Numeric::Zero);
    }
    let trailing = digits.iter().rev().take_while(|&&d| d == 0).count();
    digits.truncate(digits.len() - trailing);
    digits.drain(..leading);
    let exp = int_len as i64 + exponent - leading as i64;
    check_numeric_range(digits.len(), exp)?;
    Ok(Numeric::Finite { neg, digits, exp })
}

/// `0.d1..dn × 10^exp` (normalized) must have at most 131072 digits before the point and
/// 16383 after it.
fn check_numeric_range(n_digits: usize, exp: i64) -> Result<(), CodecError> {
    if exp > NUMERIC_MAX_INT_DIGITS || (n_digits as i64) - exp > NUMERIC_MAX_FRAC_DIGITS {
        return Err(invalid("value overflows numeric format"));
    }
    Ok(())
}

fn format_numeric(n: &Numeric) -> String {
    let (neg, digits, exp) = match n {
        Numeric::NegInf => return "-Infinity".to_owned(),
        Numeric::Zero => return "0".to_owned(),
        Numeric::PosInf => return "Infinity".to_owned(),
        Numeric::NaN => return "NaN".to_owned(),
        Numeric::Finite { neg, digits, exp } => (*neg, digits, *exp),
    };
    let ascii = |ds: &[u8]| ds.iter().map(|d| char::from(b'0' + d)).collect::<String>();
    let mut s = String::with_capacity(digits.len() + exp.unsigned_abs() as usize + 3);
    if neg {
        s.push('-');
    }
    let n = digits.len() as i64;
    if exp <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n('0', (-exp) as usize));
        s.push_str(&ascii(digits));
    } else if exp < n {
        let (int, frac) = digits.split_at(exp as usize);
        s.push_str(&ascii(int));
        s.push('.');
        s.push_str(&ascii(frac));
    } else {
        s.push_str(&ascii(digits));
        s.extend(std::iter::repeat_n('0', (exp - n) as usize));
    }
    s
}

pub(super) fn encode_numeric(out: &mut Vec<u8>, n: &Numeric) {
    let (neg, digits, exp10) = match n {
        Numeric::NegInf => return out.push(NUMERIC_NEG_INF),
        Numeric::Zero => return out.push(NUMERIC_ZERO),
        Numeric::PosInf => return out.push(NUMERIC_POS_INF),
        Numeric::NaN => return out.push(NUMERIC_NAN),
        Numeric::Finite { neg, digits, exp } => (*neg, digits, *exp),
    };
    out.push(if neg { NUMERIC_NEG } else { NUMERIC_POS });
    let start = out.len();
    // Regroup in base 100: 0.d1d2.. × 10^exp10 == 0.(0)d1d2..(0) × 100^exp100.
    let lead_zero = exp10.rem_euclid(2) == 1;
    let exp100 = if lead_zero { (exp10 + 1) / 2 } else { exp10 / 2 };
    encode_numeric_exponent(out, exp100);
    let mut padded = Vec::with_capacity(digits.len() + 2);
    if lead_zero {
        padded.push(0);
    }
    padded.extend_from_slice(digits);
    if padded.len() % 2 == 1 {
        padded.push(0);
    }
    let n_pairs = padded.len() / 2;
    for (i, pair) in padded.chunks_exact(2).enumerate() {
        let p = pair[0] * 10 + pair[1];
        out.push(if i + 1 == n_pairs { 2 * p } else { 2 * p + 1 });
    }
    if neg {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
}

fn encode_numeric_exponent(out: &mut Vec<u8>, e: i64) {
    if (-EXP_SMALL_MAX..=EXP_SMALL_MAX).contains(&e) {
        out.push((EXP_SMALL_BIAS + e) as u8);
    } else {
        // In range by construction: |e| ≤ 65536 (checked by `check_numeric_range`).
        let wide = ((e as i32) as u32) ^ 0x8000_0000;
        out.push(if e < 0 { EXP_LARGE_NEG } else { EXP_LARGE_POS });
        out.extend_from_slice(&wide.to_be_bytes());
    }
}

pub(super) fn decode_numeric(r: &mut Reader<'_>) -> Result<String, CodecError> {
    let sign = r.byte()?;
    let neg = match sign {
        NUMERIC_NEG_INF => return Ok(format_numeric(&Numeric::NegInf)),
        NUMERIC_ZERO => return Ok(format_numeric(&Numeric::Zero)),
        NUMERIC_POS_INF => return Ok(format_numeric(&Numeric::PosInf)),
        NUMERIC_NAN => return Ok(format_numeric(&Numeric::NaN)),
        NUMERIC_NEG => true,
        NUMERIC_POS => false,
        tag => return Err(CodecError::InvalidTag { tag, context: "numeric sign byte" }),
    };
    // For negatives every byte after the sign is inverted once more.
    let flip = if neg { 0xFF } else { 0x00 };
    let exp100 = match r.byte()? ^ flip {
        class @ (EXP_LARGE_NEG | EXP_LARGE_POS) => {
            let mut raw: [u8; 4] = r.array()?;
            for b in &mut raw {
                *b ^= flip;
            }
            let e = i64::from((u32::from_be_bytes(raw) ^ 0x8000_0000) as i32);
            let expected = if e < 0 { EXP_LARGE_NEG } else { EXP_LARGE_POS };
            if class != expected || (-EXP_SMALL_MAX..=EXP_SMALL_MAX).contains(&e) {
                return Err(CodecError::NonCanonical("numeric exponent in the wrong size class"));
            }
            e
        }
        b => {
            let e = i64::from(b) - EXP_SMALL_BIAS;
            if !(-EXP_SMALL_MAX..=EXP_SMALL_MAX).contains(&e) {
                return Err(CodecError::InvalidTag { tag: b, context: "numeric exponent byte" });
            }
            e
        }
    };
    let mut digits = Vec::new();
    loop {
        let b = r.byte()? ^ flip;
        if b > 199 {
            return Err(invalid(format!("invalid digit-pair byte {b:#04x}")));
        }
        let p = b / 2;
        if digits.is_empty() && p == 0 {
            return Err(CodecError::NonCanonical("numeric leading digit pair is zero"));
        }
        digits.push(p / 10);
        digits.push(p % 10);
        if b % 2 == 0 {
            if p == 0 {
                return Err(CodecError::NonCanonical("numeric trailing digit pair is zero"));
            }
            break;
        }
    }
    // 0.p1..pk × 100^exp100 == 0.d1..d2k × 10^(2·exp100); strip the zero digits that the
    // pairing added.
    let mut exp10 = 2 * exp100;
    if digits.first() == Some(&0) {
        digits.remove(0);
        exp10 -= 1;
    }
    if digits.last() == Some(&0) {
        digits.pop();
    }
    check_numeric_range(digits.len(), exp10)?;
    Ok(format_numeric(&Numeric::Finite { neg, digits, exp: exp10 }))
}
