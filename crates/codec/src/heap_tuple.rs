//! Reading attribute values out of a stored row: a PostgreSQL 15 heap tuple
//! (`HeapTupleHeaderData` + data, as `heap_form_tuple` lays it out on a
//! little-endian machine), which is what the SQL layer stores as a row's value.
//!
//! Only what a pushed-down filter needs: where each attribute's bytes are, given
//! every attribute's length and alignment (`attlen`, `attalign`) up to the last one
//! read. Values are never interpreted here. A value that cannot be read in place
//! (compressed or out-of-line varlena, an attribute past the tuple's end: added
//! to the table after the row was written, its default only in the catalog) is
//! [`Attr::Unknown`], as is everything after a malformed part. Never panics.

/// An attribute of a tuple, as [`deform`] finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attr {
    Null,
    /// Where in the tuple the value's bytes are (`start..end`): a fixed-length
    /// value's bytes; a varlena's payload (without its header); a C string's bytes
    /// (without the NUL). Offsets, not a slice: a caller reuses one buffer of
    /// these for every row.
    Value(usize, usize),
    Unknown,
}

impl Attr {
    /// The value's bytes in `tuple` (the one [`deform`] read).
    pub fn bytes<'a>(&self, tuple: &'a [u8]) -> Option<&'a [u8]> {
        match *self {
            Attr::Value(a, b) => tuple.get(a..b),
            _ => None,
        }
    }
}

// HeapTupleHeaderData (htup_details.h): t_choice (12 bytes), t_ctid (6),
// t_infomask2 (u16), t_infomask (u16), t_hoff (u8), t_bits[].
const INFOMASK2_OFFSET: usize = 18;
const INFOMASK_OFFSET: usize = 20;
const HOFF_OFFSET: usize = 22;
const BITS_OFFSET: usize = 23;
const HEAP_HASNULL: u16 = 0x0001;
const HEAP_NATTS_MASK: u16 = 0x07FF;

/// Fill `out` with attributes `0..layouts.len()` of `tuple`; `layouts[i]` is
/// attribute i's (`attlen`, `attalign` in bytes).
pub fn deform(tuple: &[u8], layouts: &[(i16, u8)], out: &mut Vec<Attr>) {
    out.clear();
    let unknown_rest = |out: &mut Vec<Attr>| out.resize(layouts.len(), Attr::Unknown);
    if tuple.len() < BITS_OFFSET {
        return unknown_rest(out);
    }
    let u16_at = |o: usize| u16::from_le_bytes([tuple[o], tuple[o + 1]]);
    let natts = (u16_at(INFOMASK2_OFFSET) & HEAP_NATTS_MASK) as usize;
    let has_null = u16_at(INFOMASK_OFFSET) & HEAP_HASNULL != 0;
    let hoff = tuple[HOFF_OFFSET] as usize;
    if hoff < BITS_OFFSET || hoff > tuple.len() || (has_null && BITS_OFFSET + natts.div_ceil(8) > hoff) {
        return unknown_rest(out);
    }
    let bits = &tuple[BITS_OFFSET..hoff];
    let data = &tuple[hoff..];
    let mut off = 0usize;
    for (i, &(len, align)) in layouts.iter().enumerate() {
        if i >= natts {
            return unknown_rest(out);
        }
        if has_null && bits[i >> 3] & (1 << (i & 7)) == 0 {
            out.push(Attr::Null);
            continue;
        }
        let align = align.max(1) as usize;
        let aligned = |o: usize| o.div_ceil(align) * align;
        let (start, end, value) = match len {
            n if n > 0 => {
                let start = aligned(off);
                let end = start + n as usize;
                if end > data.len() {
                    return unknown_rest(out);
                }
                (start, end, Some((start, end)))
            }
            -1 => {
                // A 1-byte header is never preceded by padding (padding bytes are
                // zero, a 1-byte header never is): `att_align_pointer`.
                let start = match data.get(off) {
                    Some(&b) if b != 0 => off,
                    Some(_) => aligned(off),
                    None => return unknown_rest(out),
                };
                let Some(&h) = data.get(start) else { return unknown_rest(out) };
                if h == 0x01 {
                    // External (TOAST pointer): its size depends on its tag; the
                    // SQL layer detoasts before storing, so this is not expected.
                    return unknown_rest(out);
                } else if h & 0x01 == 0x01 {
                    // 1-byte header: total length in the upper 7 bits.
                    let total = (h >> 1) as usize;
                    if total < 1 || start + total > data.len() {
                        return unknown_rest(out);
                    }
                    (start, start + total, Some((start + 1, start + total)))
                } else {
                    // 4-byte header: length in the upper 30 bits; low bits 10 =
                    // compressed inline (readable only by decompressing).
                    if start + 4 > data.len() {
                        return unknown_rest(out);
                    }
                    let w = u32::from_le_bytes([data[start], data[start + 1], data[start + 2], data[start + 3]]);
                    let total = (w >> 2) as usize;
                    if total < 4 || start + total > data.len() {
                        return unknown_rest(out);
                    }
                    let plain = w & 0x03 == 0x00;
                    (start, start + total, plain.then_some((start + 4, start + total)))
                }
            }
            -2 => {
                let Some(n) = data.get(off..).and_then(|d| d.iter().position(|&b| b == 0)) else { return unknown_rest(out) };
                (off, off + n + 1, Some((off, off + n)))
            }
            _ => return unknown_rest(out),
        };
        debug_assert!(start <= end);
        out.push(match value {
            Some((a, b)) => Attr::Value(hoff + a, hoff + b),
            None => Attr::Unknown,
        });
        off = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum G<'a> {
        N,
        V(&'a [u8]),
        U,
    }
    use G::{N, U, V};

    fn view<'a>(t: &'a [u8], out: &[Attr]) -> Vec<G<'a>> {
        out.iter().map(|a| match a {
            Attr::Null => N,
            Attr::Unknown => U,
            v => V(v.bytes(t).unwrap()),
        }).collect()
    }

    /// A tuple header for `natts` attributes with the given null bitmap (None: no
    /// nulls), then `data`; t_hoff MAXALIGNed as PostgreSQL does.
    fn tuple(natts: u16, nulls: Option<&[bool]>, data: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; BITS_OFFSET];
        t[INFOMASK2_OFFSET..INFOMASK2_OFFSET + 2].copy_from_slice(&natts.to_le_bytes());
        if let Some(n) = nulls {
            t[INFOMASK_OFFSET..INFOMASK_OFFSET + 2].copy_from_slice(&HEAP_HASNULL.to_le_bytes());
            let mut bits = vec![0u8; (natts as usize).div_ceil(8)];
            for (i, null) in n.iter().enumerate() {
                if !null {
                    bits[i >> 3] |= 1 << (i & 7);
                }
            }
            t.extend_from_slice(&bits);
        }
        while !t.len().is_multiple_of(8) {
            t.push(0);
        }
        t[HOFF_OFFSET] = t.len() as u8;
        t.extend_from_slice(data);
        t
    }

    #[test]
    fn fixed_attributes_are_aligned() {
        // int2 (2, align 2) = 7, int8 (8, align 8) = -5, bool = true, int4 = 9.
        let mut data = Vec::new();
        data.extend_from_slice(&7i16.to_le_bytes());
        data.extend_from_slice(&[0; 6]);
        data.extend_from_slice(&(-5i64).to_le_bytes());
        data.push(1);
        data.extend_from_slice(&[0; 3]);
        data.extend_from_slice(&9i32.to_le_bytes());
        let t = tuple(4, None, &data);
        let mut out = Vec::new();
        deform(&t, &[(2, 2), (8, 8), (1, 1), (4, 4)], &mut out);
        assert_eq!(view(&t, &out), vec![V(&7i16.to_le_bytes()), V(&(-5i64).to_le_bytes()), V(&[1]), V(&9i32.to_le_bytes())]);
    }

    #[test]
    fn nulls_take_no_space_and_varlenas_have_both_headers() {
        // int4 NULL, text 'ab' (1-byte header), int4 3 (aligned after it),
        // text of 4-byte header 'xyz', compressed varlena, text NULL.
        let mut data = Vec::new();
        data.extend_from_slice(&[(3 << 1) | 1, b'a', b'b']);
        data.push(0); // padding to 4
        data.extend_from_slice(&3i32.to_le_bytes());
        data.extend_from_slice(&((7u32) << 2).to_le_bytes());
        data.extend_from_slice(b"xyz");
        data.push(0); // padding to 4: a 4-byte header is aligned
        data.extend_from_slice(&(((8u32) << 2) | 0x02).to_le_bytes());
        data.extend_from_slice(&[9, 9, 9, 9]);
        let t = tuple(6, Some(&[true, false, false, false, false, true]), &data);
        let mut out = Vec::new();
        deform(&t, &[(4, 4), (-1, 4), (4, 4), (-1, 4), (-1, 4), (-1, 4)], &mut out);
        assert_eq!(view(&t, &out), vec![N, V(b"ab"), V(&3i32.to_le_bytes()), V(b"xyz"), U, N]);
    }

    #[test]
    fn attributes_past_the_tuple_are_unknown() {
        // A row written before a column was added: natts 1.
        let t = tuple(1, None, &5i32.to_le_bytes());
        let mut out = Vec::new();
        deform(&t, &[(4, 4), (4, 4)], &mut out);
        assert_eq!(view(&t, &out), vec![V(&5i32.to_le_bytes()), U]);
    }

    #[test]
    fn malformed_tuples_never_panic() {
        let mut out = Vec::new();
        let layouts = [(4, 4), (-1, 4), (-2, 1), (8, 8), (-1, 1)];
        let good = {
            let mut d = Vec::new();
            d.extend_from_slice(&1i32.to_le_bytes());
            d.extend_from_slice(&[(4 << 1) | 1, b'a', b'b', b'c']);
            d.extend_from_slice(b"cs\0");
            d.extend_from_slice(&[0; 5]); // int8 at 16
            d.extend_from_slice(&2i64.to_le_bytes());
            d.extend_from_slice(&((6u32) << 2).to_le_bytes());
            d.extend_from_slice(b"zz");
            tuple(5, None, &d)
        };
        deform(&good, &layouts, &mut out);
        assert_eq!(view(&good, &out), vec![V(&1i32.to_le_bytes()), V(b"abc"), V(b"cs"), V(&2i64.to_le_bytes()), V(b"zz")]);
        // Every truncation and every single-byte change: no panic, one entry per layout.
        for n in 0..good.len() {
            deform(&good[..n], &layouts, &mut out);
            assert_eq!(out.len(), layouts.len());
            assert!(out.iter().all(|a| !matches!(a, Attr::Value(..)) || a.bytes(&good[..n]).is_some()));
        }
        for i in 0..good.len() {
            for b in [0u8, 1, 2, 3, 0x7f, 0xff] {
                let mut t = good.clone();
                t[i] = b;
                let mut out = Vec::new();
                deform(&t, &layouts, &mut out);
                assert_eq!(out.len(), layouts.len());
                assert!(out.iter().all(|a| !matches!(a, Attr::Value(..)) || a.bytes(&t).is_some()));
            }
        }
    }
}
