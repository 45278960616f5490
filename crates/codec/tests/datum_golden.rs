//! Golden tests: the exact bytes of the datum encoding. These bytes are persisted in
//! every tablet; if one of these tests fails the on-disk format changed.

use pinax_codec::datum::{decode_datum, decode_key, encode_datum, encode_key, try_encode_datum, ColumnOrder, Datum, DatumType};
use pinax_codec::CodecError;

const ASC: ColumnOrder = ColumnOrder::ASC_NULLS_LAST;
const ASC_NF: ColumnOrder = ColumnOrder::ASC_NULLS_FIRST;
const DESC: ColumnOrder = ColumnOrder::DESC_NULLS_LAST;
const DESC_NF: ColumnOrder = ColumnOrder::DESC_NULLS_FIRST;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Checks the encoding of `d` under `co` is `want` (hex) and that it decodes to
/// `decoded` (the normalized value).
fn golden_norm(d: Datum, co: ColumnOrder, want: &str, decoded: Datum) {
    let mut out = Vec::new();
    encode_datum(&mut out, &d, co);
    assert_eq!(hex(&out), want, "encoding of {d:?} under {co:?}");
    let ty = decoded.datum_type().or(d.datum_type()).unwrap_or(DatumType::Int4);
    let bytes = unhex(want);
    let mut input = &bytes[..];
    let got = decode_datum(&mut input, ty, co).unwrap();
    assert!(input.is_empty(), "decode of {want} left bytes");
    match (&got, &decoded) {
        (Datum::Float4(a), Datum::Float4(b)) => assert_eq!(a.to_bits(), b.to_bits()),
        (Datum::Float8(a), Datum::Float8(b)) => assert_eq!(a.to_bits(), b.to_bits()),
        _ => assert_eq!(got, decoded, "decode of {want}"),
    }
}

fn golden(d: Datum, co: ColumnOrder, want: &str) {
    golden_norm(d.clone(), co, want, d);
}

fn num(s: &str) -> Datum {
    Datum::Numeric(s.to_owned())
}

#[test]
fn golden_null_tags() {
    for ty in DatumType::ALL {
        for (co, want) in [(ASC, "03"), (ASC_NF, "01"), (DESC, "03"), (DESC_NF, "01")] {
            let mut out = Vec::new();
            encode_datum(&mut out, &Datum::Null, co);
            assert_eq!(hex(&out), want);
            assert_eq!(decode_datum(&mut &out[..], ty, co), Ok(Datum::Null));
        }
    }
    // A null tag of the other nulls order is rejected.
    assert!(matches!(decode_datum(&mut &[0x01][..], DatumType::Int4, ASC), Err(CodecError::InvalidTag { tag: 1, .. })));
    assert!(matches!(decode_datum(&mut &[0x03][..], DatumType::Int4, DESC_NF), Err(CodecError::InvalidTag { tag: 3, .. })));
    assert!(matches!(decode_datum(&mut &[0x00][..], DatumType::Int4, ASC), Err(CodecError::InvalidTag { tag: 0, .. })));
    assert!(matches!(decode_datum(&mut &[0x04][..], DatumType::Text, ASC), Err(CodecError::InvalidTag { tag: 4, .. })));
}

#[test]
fn golden_bool() {
    golden(Datum::Bool(false), ASC, "0200");
    golden(Datum::Bool(true), ASC, "0201");
    golden(Datum::Bool(false), DESC, "02ff");
    golden(Datum::Bool(true), DESC_NF, "02fe");
}

#[test]
fn golden_integers() {
    golden(Datum::Int2(0), ASC, "028000");
    golden(Datum::Int2(1), ASC, "028001");
    golden(Datum::Int2(-1), ASC, "027fff");
    golden(Datum::Int2(i16::MIN), ASC, "020000");
    golden(Datum::Int2(i16::MAX), ASC_NF, "02ffff");
    golden(Datum::Int2(1), DESC, "027ffe");
    golden(Datum::Int4(1), ASC, "0280000001");
    golden(Datum::Int4(-2), ASC, "027ffffffe");
    golden(Datum::Int4(i32::MIN), ASC, "0200000000");
    golden(Datum::Int4(1), DESC, "027ffffffe");
    golden(Datum::Int4(i32::MAX), DESC_NF, "0200000000");
    golden(Datum::Int8(-1), ASC, "027fffffffffffffff");
    golden(Datum::Int8(256), ASC, "028000000000000100");
    golden(Datum::Int8(i64::MIN), ASC, "020000000000000000");
    golden(Datum::Int8(256), DESC, "027ffffffffffffeff");
}

#[test]
fn golden_floats() {
    golden(Datum::Float4(1.0), ASC, "02bf800000");
    golden(Datum::Float4(-1.0), ASC, "02407fffff");
    golden(Datum::Float4(0.0), ASC, "0280000000");
    golden_norm(Datum::Float4(-0.0), ASC, "0280000000", Datum::Float4(0.0));
    golden(Datum::Float4(f32::INFINITY), ASC, "02ff800000");
    golden(Datum::Float4(f32::NEG_INFINITY), ASC, "02007fffff");
    golden_norm(Datum::Float4(f32::NAN), ASC, "02ffc00000", Datum::Float4(f32::from_bits(0x7FC0_0000)));
    golden_norm(Datum::Float4(f32::from_bits(0xFFC0_0001)), ASC, "02ffc00000", Datum::Float4(f32::from_bits(0x7FC0_0000)));
    golden(Datum::Float4(1.0), DESC, "02407fffff");
    golden_norm(Datum::Float4(f32::NAN), DESC_NF, "02003fffff", Datum::Float4(f32::from_bits(0x7FC0_0000)));

    golden(Datum::Float8(1.5), ASC, "02bff8000000000000");
    golden(Datum::Float8(-2.0), ASC, "023fffffffffffffff");
    golden_norm(Datum::Float8(-0.0), ASC, "028000000000000000", Datum::Float8(0.0));
    golden(Datum::Float8(f64::INFINITY), ASC, "02fff0000000000000");
    golden_norm(Datum::Float8(-f64::NAN), ASC, "02fff8000000000000", Datum::Float8(f64::from_bits(0x7FF8_0000_0000_0000)));
    golden(Datum::Float8(1.5), DESC, "024007ffffffffffff");
}

#[test]
fn float_non_canonical_rejected() {
    // -0.0 (bits 0x8000_0000 → key !bits = 0x7FFF_FFFF).
    assert!(matches!(decode_datum(&mut &unhex("027fffffff")[..], DatumType::Float4, ASC), Err(CodecError::NonCanonical(_))));
    // A NaN other than the canonical one.
    assert!(matches!(decode_datum(&mut &unhex("02ffc00001")[..], DatumType::Float4, ASC), Err(CodecError::NonCanonical(_))));
    assert!(matches!(decode_datum(&mut &unhex("020007fffffffffffe")[..], DatumType::Float8, ASC), Err(CodecError::NonCanonical(_))));
    assert!(matches!(decode_datum(&mut &unhex("027fffffffffffffff")[..], DatumType::Float8, ASC), Err(CodecError::NonCanonical(_))));
}

#[test]
fn golden_text_and_bytea() {
    golden(Datum::Text(String::new()), ASC, "020001");
    golden(Datum::Text("a".into()), ASC, "02610001");
    golden(Datum::Text("a\0b".into()), ASC, "026100ff620001");
    golden(Datum::Text("é".into()), ASC, "02c3a90001");
    golden(Datum::Text("a".into()), DESC, "029efffe");
    golden(Datum::Text(String::new()), DESC_NF, "02fffe");
    golden(Datum::Bytea(vec![]), ASC, "020001");
    golden(Datum::Bytea(vec![0x00]), ASC, "0200ff0001");
    golden(Datum::Bytea(vec![0xff, 0x01]), ASC, "02ff010001");
    golden(Datum::Bytea(vec![0x00]), DESC, "02ff00fffe");

    assert_eq!(decode_datum(&mut &unhex("02c3")[..], DatumType::Text, ASC), Err(CodecError::Truncated));
    assert_eq!(decode_datum(&mut &unhex("026100")[..], DatumType::Text, ASC), Err(CodecError::Truncated));
    assert_eq!(decode_datum(&mut &unhex("02610002")[..], DatumType::Bytea, ASC), Err(CodecError::InvalidEscape(2)));
    assert_eq!(decode_datum(&mut &unhex("02ff0001")[..], DatumType::Text, ASC), Err(CodecError::InvalidUtf8));
}

#[test]
fn golden_dates_times_uuid() {
    golden(Datum::Date(0), ASC, "0280000000");
    golden(Datum::Date(i32::MIN), ASC, "0200000000");
    golden(Datum::Date(i32::MAX), ASC, "02ffffffff");
    golden(Datum::Date(-1), DESC, "0280000000");
    golden(Datum::Timestamp(1_000_000), ASC, "0280000000000f4240");
    golden(Datum::Timestamp(i64::MAX), ASC, "02ffffffffffffffff");
    golden(Datum::TimestampTz(-1), ASC, "027fffffffffffffff");
    golden(Datum::TimestampTz(0), DESC_NF, "027fffffffffffffff");
    let u: [u8; 16] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff];
    golden(Datum::Uuid(u), ASC, "0200112233445566778899aabbccddeeff");
    golden(Datum::Uuid(u), DESC, "02ffeeddccbbaa99887766554433221100");
}

#[test]
fn golden_numeric() {
    golden(num("0"), ASC, "0202");
    golden_norm(num("-0.000"), ASC, "0202", num("0"));
    golden(num("NaN"), ASC, "0205");
    golden(num("Infinity"), ASC, "0204");
    golden(num("-Infinity"), ASC, "0200");
    golden(num("1"), ASC, "02038102");
    golden_norm(num("1.00"), ASC, "02038102", num("1"));
    golden(num("1.5"), ASC, "0203810364");
    golden(num("100"), ASC, "02038202");
    golden_norm(num("1e2"), ASC, "02038202", num("100"));
    golden(num("12.34"), ASC, "0203811944");
    golden(num("0.001"), ASC, "02037f14");
    golden(num("-1"), ASC, "02017efd");
    golden(num("-12.34"), ASC, "02017ee6bb");
    golden(num("-0.5"), ASC, "02017f9b");
    golden_norm(num("1e300"), ASC, "0203ff8000009702", num(&format!("1{}", "0".repeat(300))));
    golden_norm(num("1e-300"), ASC, "0203017fffff6b02", num(&format!("0.{}1", "0".repeat(299))));
    golden(num("1"), DESC, "02fc7efd");
    golden(num("-1"), DESC, "02fe8102");
    golden(num("NaN"), DESC_NF, "02fa");
    golden(num("0"), DESC, "02fd");
    golden(num("-Infinity"), DESC, "02ff");
}

#[test]
fn numeric_malformed_rejected() {
    let bad = [
        ("0206", "sign byte"),
        ("0203", "truncated after sign"),
        ("020381", "truncated mantissa"),
        ("02038103", "unterminated mantissa"),
        ("02038100", "zero last pair"),
        ("0203810102", "zero first pair"),
        ("020381c8", "pair byte > 199"),
        ("02030202", "exponent byte out of the one-byte range"),
        ("0203ff8000000102", "wide exponent that fits one byte"),
        ("020301800000ff02", "negative class with a positive exponent"),
        ("0203ff8001000102", "exponent beyond numeric range"),
    ];
    for (h, why) in bad {
        assert!(decode_datum(&mut &unhex(h)[..], DatumType::Numeric, ASC).is_err(), "{why}: {h}");
    }
    let mut out = vec![0xAA];
    assert!(matches!(try_encode_datum(&mut out, &num("12abc"), ASC), Err(CodecError::InvalidNumeric(_))));
    assert_eq!(out, [0xAA], "out is left unchanged on error");
}

#[test]
#[should_panic(expected = "invalid numeric")]
fn encode_datum_panics_on_invalid_numeric() {
    encode_datum(&mut Vec::new(), &num("not a number"), ASC);
}

/// Numerics in strictly increasing order, spanning every exponent class and the limits.
#[test]
fn numeric_ladder_is_strictly_ordered() {
    let max = format!("9{}", "9".repeat(131_071));
    let tiny = format!("0.{}1", "0".repeat(16_382));
    let ladder: Vec<String> = vec![
        "-Infinity".into(),
        format!("-{max}"),
        "-1e300".into(),
        "-1e241".into(),
        "-1e240".into(),
        "-123.45".into(),
        "-1".into(),
        "-0.5".into(),
        "-0.05".into(),
        format!("-{tiny}"),
        "0".into(),
        tiny.clone(),
        format!("0.{}2", "0".repeat(16_382)),
        "1e-300".into(),
        "0.001".into(),
        "0.0011".into(),
        "0.01".into(),
        "0.1".into(),
        "0.10000000000000000001".into(),
        "0.2".into(),
        "1".into(),
        "1.01".into(),
        "1.1".into(),
        "9.99".into(),
        "10".into(),
        "99".into(),
        "100".into(),
        "1e240".into(),
        "1.5e240".into(),
        "1e241".into(),
        "1e300".into(),
        max,
        "Infinity".into(),
        "NaN".into(),
    ];
    for co in ColumnOrder::ALL {
        let encs: Vec<Vec<u8>> = ladder
            .iter()
            .map(|s| {
                let mut v = Vec::new();
                encode_datum(&mut v, &num(s), co);
                v
            })
            .collect();
        for (i, w) in encs.windows(2).enumerate() {
            let ok = match co.order {
                pinax_codec::SortOrder::Asc => w[0] < w[1],
                pinax_codec::SortOrder::Desc => w[0] > w[1],
            };
            assert!(ok, "{} vs {} under {co:?}", ladder[i], ladder[i + 1]);
        }
        for (s, e) in ladder.iter().zip(&encs) {
            let d = decode_datum(&mut &e[..], DatumType::Numeric, co).unwrap();
            assert_eq!(d, Datum::numeric(s).unwrap());
        }
    }
}

#[test]
fn golden_composite_key() {
    let (a, b, c) = (Datum::Int4(1), Datum::Text("ab".into()), Datum::Null);
    let mut out = Vec::new();
    encode_key(&mut out, &[(&a, ASC), (&b, DESC_NF), (&c, ASC)]);
    assert_eq!(hex(&out), "0280000001029e9dfffe03");
    let schema = [(DatumType::Int4, ASC), (DatumType::Text, DESC_NF), (DatumType::Uuid, ASC)];
    assert_eq!(decode_key(&out, &schema), Ok(vec![a, b, c]));
    let mut longer = out.clone();
    longer.push(0);
    assert_eq!(decode_key(&longer, &schema), Err(CodecError::TrailingBytes(1)));
    assert!(decode_key(&out[..out.len() - 1], &schema).is_err());
}
