//! Property tests of the datum encoding against a reference implementation of
//! PostgreSQL's comparison semantics (written here independently of the codec).
//!
//! For every type, column order and random pair `a`, `b` (NULL included):
//! `enc(a).cmp(enc(b)) == pg_cmp(a, b)`, encodings are prefix-free, and
//! `decode(enc(a))` is the normalized `a`. Composite keys compare lexicographically.
//! Arbitrary and mutated bytes never make a decoder panic, and whatever decodes
//! re-encodes to exactly the bytes consumed (the encoding is canonical).

use std::cmp::Ordering;

use pinax_codec::datum::{decode_datum, decode_key, encode_datum, encode_key, ColumnOrder, Datum, DatumType, NullsOrder, SortOrder};
use proptest::prelude::*;
use proptest::sample::select;

// ------------------------------------------------------------------------------------
// Reference semantics
// ------------------------------------------------------------------------------------

/// PostgreSQL's float comparison (`float8_cmp_internal`): NaN equals NaN and is greater
/// than everything else; -0.0 == 0.0.
fn pg_float_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).expect("not NaN"),
    }
}

/// A numeric as the reference sees it: sign and plain decimal digits.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RefNum {
    NegInf,
    /// `neg`, integer digits (no leading zeros), fraction digits (no trailing zeros);
    /// zero is `{ neg: false, int: "", frac: "" }`.
    Finite {
        neg: bool,
        int: String,
        frac: String,
    },
    PosInf,
    NaN,
}

/// Parse numeric text (the subset the generators produce, including exponents).
fn ref_parse(s: &str) -> RefNum {
    let s = s.trim();
    if s.eq_ignore_ascii_case("nan") {
        return RefNum::NaN;
    }
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if body.eq_ignore_ascii_case("infinity") || body.eq_ignore_ascii_case("inf") {
        return if neg { RefNum::NegInf } else { RefNum::PosInf };
    }
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i64>().expect("exponent")),
        None => (body, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let digits = format!("{int}{frac}");
    let point = int.len() as i64 + exp;
    let (int, frac) = if point <= 0 {
        (String::new(), format!("{}{digits}", "0".repeat((-point) as usize)))
    } else if point as usize >= digits.len() {
        (format!("{digits}{}", "0".repeat(point as usize - digits.len())), String::new())
    } else {
        (digits[..point as usize].to_owned(), digits[point as usize..].to_owned())
    };
    let int = int.trim_start_matches('0').to_owned();
    let frac = frac.trim_end_matches('0').to_owned();
    let neg = neg && !(int.is_empty() && frac.is_empty());
    RefNum::Finite { neg, int, frac }
}

fn ref_numeric_text(n: &RefNum) -> String {
    match n {
        RefNum::NegInf => "-Infinity".into(),
        RefNum::PosInf => "Infinity".into(),
        RefNum::NaN => "NaN".into(),
        RefNum::Finite { neg, int, frac } => {
            let int = if int.is_empty() { "0" } else { int };
            let sign = if *neg { "-" } else { "" };
            if frac.is_empty() {
                format!("{sign}{int}")
            } else {
                format!("{sign}{int}.{frac}")
            }
        }
    }
}

/// PostgreSQL numeric order: -Infinity < negatives < 0 < positives < Infinity < NaN.
fn ref_numeric_cmp(a: &RefNum, b: &RefNum) -> Ordering {
    fn rank(n: &RefNum) -> i32 {
        match n {
            RefNum::NegInf => 0,
            RefNum::Finite { neg: true, .. } => 1,
            RefNum::Finite { int, frac, .. } if int.is_empty() && frac.is_empty() => 2,
            RefNum::Finite { .. } => 3,
            RefNum::PosInf => 4,
            RefNum::NaN => 5,
        }
    }
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (RefNum::Finite { neg, int: ia, frac: fa }, RefNum::Finite { int: ib, frac: fb, .. }) => {
            // Magnitude: longer integer part is larger; then digit by digit.
            let mag = ia.len().cmp(&ib.len()).then_with(|| ia.cmp(ib)).then_with(|| fa.cmp(fb));
            if *neg {
                mag.reverse()
            } else {
                mag
            }
        }
        _ => Ordering::Equal,
    }
}

/// PostgreSQL's comparison of two non-NULL values of the same type.
fn pg_cmp_values(a: &Datum, b: &Datum) -> Ordering {
    match (a, b) {
        (Datum::Bool(x), Datum::Bool(y)) => x.cmp(y),
        (Datum::Int2(x), Datum::Int2(y)) => x.cmp(y),
        (Datum::Int4(x), Datum::Int4(y)) => x.cmp(y),
        (Datum::Int8(x), Datum::Int8(y)) => x.cmp(y),
        (Datum::Float4(x), Datum::Float4(y)) => pg_float_cmp(f64::from(*x), f64::from(*y)),
        (Datum::Float8(x), Datum::Float8(y)) => pg_float_cmp(*x, *y),
        (Datum::Numeric(x), Datum::Numeric(y)) => ref_numeric_cmp(&ref_parse(x), &ref_parse(y)),
        (Datum::Text(x), Datum::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Datum::Bytea(x), Datum::Bytea(y)) => x.cmp(y),
        (Datum::Date(x), Datum::Date(y)) => x.cmp(y),
        (Datum::Timestamp(x), Datum::Timestamp(y)) => x.cmp(y),
        (Datum::TimestampTz(x), Datum::TimestampTz(y)) => x.cmp(y),
        (Datum::Uuid(x), Datum::Uuid(y)) => x.cmp(y),
        _ => panic!("type mismatch: {a:?} vs {b:?}"),
    }
}

/// PostgreSQL's ORDER BY comparison under a column order.
fn pg_cmp(a: &Datum, b: &Datum, co: ColumnOrder) -> Ordering {
    let nulls_first = co.nulls == NullsOrder::First;
    match (a.is_null(), b.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) if nulls_first => Ordering::Less,
        (true, false) => Ordering::Greater,
        (false, true) if nulls_first => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => {
            let o = pg_cmp_values(a, b);
            if co.order == SortOrder::Desc {
                o.reverse()
            } else {
                o
            }
        }
    }
}

/// What decoding the encoding of `d` must give.
fn expected_roundtrip(d: &Datum) -> Datum {
    match d {
        Datum::Float4(v) if v.is_nan() => Datum::Float4(f32::from_bits(0x7FC0_0000)),
        Datum::Float4(v) if *v == 0.0 => Datum::Float4(0.0),
        Datum::Float8(v) if v.is_nan() => Datum::Float8(f64::from_bits(0x7FF8_0000_0000_0000)),
        Datum::Float8(v) if *v == 0.0 => Datum::Float8(0.0),
        Datum::Numeric(s) => Datum::Numeric(ref_numeric_text(&ref_parse(s))),
        other => other.clone(),
    }
}

/// Equality that compares floats by bits (so NaN == NaN and -0.0 != 0.0).
fn same(a: &Datum, b: &Datum) -> bool {
    match (a, b) {
        (Datum::Float4(x), Datum::Float4(y)) => x.to_bits() == y.to_bits(),
        (Datum::Float8(x), Datum::Float8(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn enc(d: &Datum, co: ColumnOrder) -> Vec<u8> {
    let mut v = Vec::new();
    encode_datum(&mut v, d, co);
    v
}

// ------------------------------------------------------------------------------------
// Generators
// ------------------------------------------------------------------------------------

fn digits() -> BoxedStrategy<String> {
    prop_oneof!["[0-9]{0,6}", "[0-2]{0,3}", "0{0,3}[0-9]{0,4}0{0,3}", "[0-9]{10,30}",].boxed()
}

/// Numeric text: specials in various spellings, plain decimals, and exponent forms.
fn numeric_text() -> BoxedStrategy<String> {
    let finite = (select(vec!["", "-", "+"]), digits(), prop::option::of(digits()), prop::option::of(prop_oneof![-6i64..6, -400i64..400,])).prop_filter_map(
        "needs a digit",
        |(sign, int, frac, exp)| {
            if int.is_empty() && frac.as_deref().unwrap_or("").is_empty() {
                return None;
            }
            let mut s = format!("{sign}{int}");
            if let Some(f) = frac {
                s.push('.');
                s.push_str(&f);
            }
            if let Some(e) = exp {
                s.push_str(&format!("e{e}"));
            }
            Some(s)
        },
    );
    prop_oneof![
        1 => select(vec!["NaN", "nan", "Infinity", "-Infinity", "+inf", "-inf", "0", "-0", "0.0"]).prop_map(String::from),
        8 => finite,
    ]
    .boxed()
}

fn f64_edge() -> impl Strategy<Value = f64> {
    select(vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7FF0_0000_0000_0001),
        f64::from_bits(0xFFF8_0000_0000_00AB),
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::from_bits(0x8000_0000_0000_0001),
        f64::MAX,
        f64::MIN,
    ])
}

fn f32_edge() -> impl Strategy<Value = f32> {
    select(vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7F80_0001),
        f32::from_bits(0xFFC0_00AB),
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MAX,
        f32::MIN,
    ])
}

fn small_bytes() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![prop::collection::vec(any::<u8>(), 0..10), prop::collection::vec(select(vec![0x00u8, 0x01, 0x02, 0xFE, 0xFF]), 0..5),].boxed()
}

/// A non-NULL value of type `ty`, biased towards collisions and edge values.
fn value_of(ty: DatumType) -> BoxedStrategy<Datum> {
    match ty {
        DatumType::Bool => any::<bool>().prop_map(Datum::Bool).boxed(),
        DatumType::Int2 => prop_oneof![any::<i16>(), -3i16..3, select(vec![i16::MIN, i16::MAX])].prop_map(Datum::Int2).boxed(),
        DatumType::Int4 => prop_oneof![any::<i32>(), -3i32..3, select(vec![i32::MIN, i32::MAX])].prop_map(Datum::Int4).boxed(),
        DatumType::Int8 => prop_oneof![any::<i64>(), -3i64..3, select(vec![i64::MIN, i64::MAX])].prop_map(Datum::Int8).boxed(),
        DatumType::Float4 => prop_oneof![any::<f32>(), f32_edge(), (-3i8..3).prop_map(f32::from)].prop_map(Datum::Float4).boxed(),
        DatumType::Float8 => prop_oneof![any::<f64>(), f64_edge(), (-3i8..3).prop_map(f64::from)].prop_map(Datum::Float8).boxed(),
        DatumType::Numeric => numeric_text().prop_map(Datum::Numeric).boxed(),
        DatumType::Text => prop_oneof![any::<String>(), "[\\x00\\x01ab\u{ff}\u{10000}]{0,5}"].prop_map(Datum::Text).boxed(),
        DatumType::Bytea => small_bytes().prop_map(Datum::Bytea).boxed(),
        DatumType::Date => prop_oneof![any::<i32>(), -3i32..3, select(vec![i32::MIN, i32::MAX])].prop_map(Datum::Date).boxed(),
        DatumType::Timestamp => prop_oneof![any::<i64>(), -3i64..3, select(vec![i64::MIN, i64::MAX])].prop_map(Datum::Timestamp).boxed(),
        DatumType::TimestampTz => prop_oneof![any::<i64>(), -3i64..3, select(vec![i64::MIN, i64::MAX])].prop_map(Datum::TimestampTz).boxed(),
        DatumType::Uuid => prop_oneof![
            any::<[u8; 16]>(),
            select(vec![0x00u8, 0x7F, 0xFF]).prop_map(|b| [b; 16]),
            (0usize..16, any::<u8>()).prop_map(|(i, b)| {
                let mut u = [0u8; 16];
                u[i] = b;
                u
            }),
        ]
        .prop_map(Datum::Uuid)
        .boxed(),
    }
}

/// A value of type `ty` or NULL.
fn datum_of(ty: DatumType) -> BoxedStrategy<Datum> {
    prop_oneof![1 => Just(Datum::Null), 6 => value_of(ty)].boxed()
}

/// Two datums of type `ty`; equal a quarter of the time.
fn pair_of(ty: DatumType) -> BoxedStrategy<(Datum, Datum)> {
    (datum_of(ty), datum_of(ty), 0u8..4).prop_map(|(a, b, k)| if k == 0 { (a.clone(), a) } else { (a, b) }).boxed()
}

// ------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------

fn check_pair(ty: DatumType, a: &Datum, b: &Datum) -> Result<(), TestCaseError> {
    for co in ColumnOrder::ALL {
        let (ea, eb) = (enc(a, co), enc(b, co));
        prop_assert_eq!(ea.cmp(&eb), pg_cmp(a, b, co), "{:?} vs {:?} under {:?}: {:02x?} vs {:02x?}", a, b, co, ea, eb);
        if ea != eb {
            prop_assert!(!ea.starts_with(&eb) && !eb.starts_with(&ea), "prefix: {:02x?} / {:02x?}", ea, eb);
        }
        for (d, e) in [(a, &ea), (b, &eb)] {
            // Decoding stops at the end of the datum and leaves what follows.
            let mut buf = e.clone();
            buf.extend_from_slice(&[0x00, 0xFF, 0x01]);
            let mut input = &buf[..];
            let got = decode_datum(&mut input, ty, co).map_err(|err| TestCaseError::fail(format!("{d:?}: {err}")))?;
            let want = expected_roundtrip(d);
            prop_assert!(same(&got, &want), "roundtrip of {:?} under {:?}: got {:?}, want {:?}", d, co, got, want);
            prop_assert_eq!(input, &[0x00, 0xFF, 0x01][..]);
        }
    }
    Ok(())
}

macro_rules! per_type_props {
    ($($name:ident => $ty:expr),* $(,)?) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            $(
                #[test]
                fn $name((a, b) in pair_of($ty)) {
                    check_pair($ty, &a, &b)?;
                }
            )*
        }
    };
}

per_type_props! {
    order_roundtrip_bool => DatumType::Bool,
    order_roundtrip_int2 => DatumType::Int2,
    order_roundtrip_int4 => DatumType::Int4,
    order_roundtrip_int8 => DatumType::Int8,
    order_roundtrip_float4 => DatumType::Float4,
    order_roundtrip_float8 => DatumType::Float8,
    order_roundtrip_numeric => DatumType::Numeric,
    order_roundtrip_text => DatumType::Text,
    order_roundtrip_bytea => DatumType::Bytea,
    order_roundtrip_date => DatumType::Date,
    order_roundtrip_timestamp => DatumType::Timestamp,
    order_roundtrip_timestamptz => DatumType::TimestampTz,
    order_roundtrip_uuid => DatumType::Uuid,
}

/// Equivalent spellings of the same numeric value (`1.5` = `01.50` = `15e-1` = ...).
fn numeric_spellings(normal: &str) -> Vec<String> {
    if !normal.starts_with(|c: char| c.is_ascii_digit() || c == '-') || normal.ends_with("Infinity") {
        return vec![normal.to_owned()];
    }
    let (sign, abs) = normal.strip_prefix('-').map_or(("", normal), |r| ("-", r));
    let (int, frac) = abs.split_once('.').unwrap_or((abs, ""));
    let digits = format!("{int}{frac}");
    vec![
        normal.to_owned(),
        format!("{sign}00{int}.{frac}000"),
        format!(" {sign}{digits}e-{} ", frac.len()),
        format!("{sign}0.{digits}E{}", int.len()),
        format!("{sign}{digits}0e-{}", frac.len() + 1),
        if sign.is_empty() { format!("+{abs}") } else { format!("-{abs}") },
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Values PostgreSQL considers equal get identical bytes, whatever the spelling.
    #[test]
    fn numeric_equal_values_equal_bytes(text in numeric_text(), co in select(ColumnOrder::ALL.to_vec())) {
        let normal = ref_numeric_text(&ref_parse(&text));
        let want = enc(&Datum::Numeric(normal.clone()), co);
        for s in numeric_spellings(&normal) {
            prop_assert_eq!(&enc(&Datum::Numeric(s.clone()), co), &want, "{} vs {}", s, normal);
        }
    }

    /// Composite keys of 2–3 columns compare lexicographically by PostgreSQL's order and
    /// decode back; every proper prefix of a key fails to decode as the full key.
    #[test]
    fn composite_keys(
        (schema, a, b) in prop::collection::vec((select(DatumType::ALL.to_vec()), select(ColumnOrder::ALL.to_vec())), 2..=3)
            .prop_flat_map(|schema| {
                let row: Vec<BoxedStrategy<Datum>> = schema.iter().map(|(ty, _)| datum_of(*ty)).collect();
                (Just(schema), row.clone(), row, 0usize..4)
            })
            .prop_map(|(schema, a, mut b, shared)| {
                // Share a prefix of columns so later columns decide the order.
                let n = shared.min(a.len());
                b[..n].clone_from_slice(&a[..n]);
                (schema, a, b)
            })
    ) {
        let key = |row: &[Datum]| {
            let cols: Vec<(&Datum, ColumnOrder)> = row.iter().zip(&schema).map(|(d, (_, co))| (d, *co)).collect();
            let mut out = Vec::new();
            encode_key(&mut out, &cols);
            out
        };
        let (ka, kb) = (key(&a), key(&b));
        let want = a.iter().zip(&b).zip(&schema)
            .map(|((x, y), (_, co))| pg_cmp(x, y, *co))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal);
        prop_assert_eq!(ka.cmp(&kb), want, "{:?} vs {:?} with {:?}", a, b, schema);
        for (row, k) in [(&a, &ka), (&b, &kb)] {
            let got = decode_key(k, &schema).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(got.len(), row.len());
            for (g, d) in got.iter().zip(row.iter()) {
                prop_assert!(same(g, &expected_roundtrip(d)), "{:?} vs {:?}", g, d);
            }
            for cut in 0..k.len() {
                prop_assert!(decode_key(&k[..cut], &schema).is_err());
            }
        }
    }

    /// Arbitrary bytes: decoders never panic, and what decodes re-encodes to exactly the
    /// bytes consumed.
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..48),
        ty in select(DatumType::ALL.to_vec()),
        co in select(ColumnOrder::ALL.to_vec()),
    ) {
        check_canonical(&bytes, ty, co)?;
        // Force the value tag so bodies get exercised.
        let mut tagged = vec![0x02];
        tagged.extend_from_slice(&bytes);
        check_canonical(&tagged, ty, co)?;
    }

    /// Valid encodings with a random byte changed, inserted or removed.
    #[test]
    fn mutated_encodings_never_panic(
        d in prop::sample::select(DatumType::ALL.to_vec()).prop_flat_map(|ty| (Just(ty), value_of(ty))),
        co in select(ColumnOrder::ALL.to_vec()),
        edits in prop::collection::vec((0u8..3, any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let (ty, d) = d;
        let mut bytes = enc(&d, co);
        for (kind, at, byte) in edits {
            let i = at.index(bytes.len() + 1);
            match kind {
                0 if i < bytes.len() => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ if i < bytes.len() => { bytes.remove(i); }
                _ => {}
            }
        }
        check_canonical(&bytes, ty, co)?;
    }

    /// decode_key on arbitrary bytes and schemas never panics; success means canonical.
    #[test]
    fn decode_key_arbitrary(
        bytes in prop::collection::vec(any::<u8>(), 0..64),
        schema in prop::collection::vec((select(DatumType::ALL.to_vec()), select(ColumnOrder::ALL.to_vec())), 0..4),
    ) {
        if let Ok(row) = decode_key(&bytes, &schema) {
            let cols: Vec<(&Datum, ColumnOrder)> = row.iter().zip(&schema).map(|(d, (_, co))| (d, *co)).collect();
            let mut out = Vec::new();
            encode_key(&mut out, &cols);
            prop_assert_eq!(out, bytes);
        }
    }
}

fn check_canonical(bytes: &[u8], ty: DatumType, co: ColumnOrder) -> Result<(), TestCaseError> {
    let mut input = bytes;
    match decode_datum(&mut input, ty, co) {
        Ok(d) => {
            let consumed = &bytes[..bytes.len() - input.len()];
            prop_assert_eq!(enc(&d, co), consumed, "{:?} decoded from non-canonical bytes", d);
        }
        Err(_) => prop_assert_eq!(input, bytes, "input advanced on error"),
    }
    Ok(())
}

#[test]
fn reference_numeric_parser_sanity() {
    assert_eq!(ref_numeric_text(&ref_parse("-012.3400")), "-12.34");
    assert_eq!(ref_numeric_text(&ref_parse("1.5e-3")), "0.0015");
    assert_eq!(ref_numeric_text(&ref_parse("-0.0e5")), "0");
    assert_eq!(ref_numeric_text(&ref_parse("25e1")), "250");
    assert_eq!(ref_numeric_cmp(&ref_parse("-2"), &ref_parse("-10")), Ordering::Greater);
    assert_eq!(ref_numeric_cmp(&ref_parse("0.5"), &ref_parse("0.05")), Ordering::Greater);
    assert_eq!(ref_numeric_cmp(&ref_parse("NaN"), &ref_parse("Infinity")), Ordering::Greater);
}
