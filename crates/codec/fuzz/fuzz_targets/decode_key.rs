//! Feeds arbitrary bytes to the datum decoders (`make fuzz`).
//!
//! Input layout: byte 0 picks the number of key columns (1..=3), the next bytes pick
//! each column's type and order, the rest is the key. Decoders must never panic, and
//! whatever decodes must re-encode to exactly the same bytes (the encoding is canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pinax_codec::datum::{decode_datum, decode_key, encode_datum, encode_key, ColumnOrder, Datum, DatumType};

fn column(b: u8) -> (DatumType, ColumnOrder) {
    let ty = DatumType::ALL[usize::from(b) % DatumType::ALL.len()];
    let co = ColumnOrder::ALL[usize::from(b) / DatumType::ALL.len() % ColumnOrder::ALL.len()];
    (ty, co)
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 3) + 1;
    if rest.len() < n {
        return;
    }
    let (spec, key) = rest.split_at(n);
    let schema: Vec<(DatumType, ColumnOrder)> = spec.iter().map(|&b| column(b)).collect();

    if let Ok(row) = decode_key(key, &schema) {
        let cols: Vec<(&Datum, ColumnOrder)> = row.iter().zip(&schema).map(|(d, (_, co))| (d, *co)).collect();
        let mut again = Vec::new();
        encode_key(&mut again, &cols);
        assert_eq!(again, key, "decoded key does not re-encode to the same bytes");
    }

    let (ty, co) = schema[0];
    let mut input = key;
    if let Ok(d) = decode_datum(&mut input, ty, co) {
        let mut again = Vec::new();
        encode_datum(&mut again, &d, co);
        assert_eq!(&again[..], &key[..key.len() - input.len()]);
    }
});
