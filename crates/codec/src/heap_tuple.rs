//! Reading attribute values out of a stored row: a PostgreSQL 15 heap tuple
//! (`HeapTupleHeaderData` + data, as `heap_form_tuple` lays it out on a
//! little-endian machine), which is what the SQL layer stores as a row's value.
//!
//! What a pushed-down filter needs: where each attribute's bytes are, given
//! every attribute's length and alignment (`attlen`, `attalign`) up to the last one
//! read ([`deform`]); and what a tablet needs to fold a row's patches into the
//! whole row ([`fold`]), laid out as `heap_form_tuple` would. Values are never
//! interpreted here. A value that cannot be read in place
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
    walk(tuple, layouts, |p| {
        out.push(match p {
            Piece::Null => Attr::Null,
            Piece::Datum { payload: Some((a, b)), .. } => Attr::Value(a, b),
            Piece::Datum { payload: None, .. } => Attr::Unknown,
        })
    });
    out.resize(layouts.len(), Attr::Unknown);
}

/// One attribute as [`walk`] finds it. Offsets are into the whole tuple.
#[derive(Clone, Copy)]
enum Piece {
    Null,
    /// `start..end`: the datum's bytes as stored (a varlena with its header);
    /// `payload`: the value's bytes when readable in place (see [`Attr::Value`]).
    Datum {
        start: usize,
        end: usize,
        payload: Option<(usize, usize)>,
    },
}

/// The number of attributes `tuple` holds (None: too short for a header).
fn natts_of(tuple: &[u8]) -> Option<usize> {
    let b = tuple.get(INFOMASK2_OFFSET..INFOMASK2_OFFSET + 2)?;
    Some((u16::from_le_bytes([b[0], b[1]]) & HEAP_NATTS_MASK) as usize)
}

/// Visit attributes `0..layouts.len()` of `tuple` in order, stopping at the
/// first one that cannot be found (malformed, or past the tuple's attributes).
/// Returns how many were visited.
fn walk(tuple: &[u8], layouts: &[(i16, u8)], mut visit: impl FnMut(Piece)) -> usize {
    if tuple.len() < BITS_OFFSET {
        return 0;
    }
    let Some(natts) = natts_of(tuple) else { return 0 };
    let has_null = u16::from_le_bytes([tuple[INFOMASK_OFFSET], tuple[INFOMASK_OFFSET + 1]]) & HEAP_HASNULL != 0;
    let hoff = tuple[HOFF_OFFSET] as usize;
    if hoff < BITS_OFFSET || hoff > tuple.len() || (has_null && BITS_OFFSET + natts.div_ceil(8) > hoff) {
        return 0;
    }
    let bits = &tuple[BITS_OFFSET..hoff];
    let data = &tuple[hoff..];
    let mut off = 0usize;
    for (i, &(len, align)) in layouts.iter().enumerate() {
        if i >= natts {
            return i;
        }
        if has_null && bits[i >> 3] & (1 << (i & 7)) == 0 {
            visit(Piece::Null);
            continue;
        }
        let align = align.max(1) as usize;
        let aligned = |o: usize| o.div_ceil(align) * align;
        let (start, end, value) = match len {
            n if n > 0 => {
                let start = aligned(off);
                let end = start + n as usize;
                if end > data.len() {
                    return i;
                }
                (start, end, Some((start, end)))
            }
            -1 => {
                // A 1-byte header is never preceded by padding (padding bytes are
                // zero, a 1-byte header never is): `att_align_pointer`.
                let start = match data.get(off) {
                    Some(&b) if b != 0 => off,
                    Some(_) => aligned(off),
                    None => return i,
                };
                let Some(&h) = data.get(start) else { return i };
                if h == 0x01 {
                    // External (TOAST pointer): its size depends on its tag; the
                    // SQL layer detoasts before storing, so this is not expected.
                    return i;
                } else if h & 0x01 == 0x01 {
                    // 1-byte header: total length in the upper 7 bits.
                    let total = (h >> 1) as usize;
                    if total < 1 || start + total > data.len() {
                        return i;
                    }
                    (start, start + total, Some((start + 1, start + total)))
                } else {
                    // 4-byte header: length in the upper 30 bits; low bits 10 =
                    // compressed inline (readable only by decompressing).
                    if start + 4 > data.len() {
                        return i;
                    }
                    let w = u32::from_le_bytes([data[start], data[start + 1], data[start + 2], data[start + 3]]);
                    let total = (w >> 2) as usize;
                    if total < 4 || start + total > data.len() {
                        return i;
                    }
                    let plain = w & 0x03 == 0x00;
                    (start, start + total, plain.then_some((start + 4, start + total)))
                }
            }
            -2 => {
                let Some(n) = data.get(off..).and_then(|d| d.iter().position(|&b| b == 0)) else { return i };
                (off, off + n + 1, Some((off, off + n)))
            }
            _ => return i,
        };
        debug_assert!(start <= end);
        let payload = value.map(|(a, b)| (hoff + a, hoff + b));
        visit(Piece::Datum { start: hoff + start, end: hoff + end, payload });
        off = end;
    }
    layouts.len()
}

const HEAP_HASVARWIDTH: u16 = 0x0002;
/// `t_choice` as `heap_form_tuple` fills it: the datum's length first.
const DATUM_LEN_OFFSET: usize = 0;
const MAXALIGN: usize = 8;

/// The whole row an update's patches make of a row (`pinax_codec::patch`): each
/// attribute from the newest of `layers` (the patches, newest first: the
/// attributes each assigns, and its row) that assigns it, else from `base`, laid
/// out as `heap_form_tuple` would form it with these values (`layouts`: every
/// attribute's (`attlen`, `attalign` in bytes), as in [`deform`]). The header's
/// type fields are the newest layer's (its writer formed it with the table's
/// current row type).
///
/// None when it cannot be formed here: a tuple that does not hold exactly
/// `layouts.len()` attributes (written before a column was added: the missing
/// value is only in the catalog), one that is malformed, or a value stored out of
/// line. The SQL layer then merges the row itself (`NeedsRow`).
pub fn fold(layouts: &[(i16, u8)], layers: &[(&[u16], &[u8])], base: &[u8]) -> Option<Vec<u8>> {
    let natts = layouts.len();
    let newest = layers.first().map_or(base, |l| l.1);
    // Each attribute's source (an index into `tuples`) and its piece there.
    let mut pieces: Vec<Option<Piece>> = vec![None; natts];
    let tuples: Vec<&[u8]> = layers.iter().map(|l| l.1).chain(std::iter::once(base)).collect();
    let mut source = vec![layers.len(); natts];
    for (li, (cols, _)) in layers.iter().enumerate().rev() {
        for &c in cols.iter() {
            let i = (c as usize).checked_sub(1)?;
            if i >= natts {
                return None;
            }
            source[i] = li;
        }
    }
    for (ti, t) in tuples.iter().enumerate() {
        if t.len() < BITS_OFFSET || natts_of(t) != Some(natts) {
            return None;
        }
        if !source.contains(&ti) {
            continue;
        }
        let mut i = 0;
        let seen = walk(t, layouts, |p| {
            if source[i] == ti {
                pieces[i] = Some(p);
            }
            i += 1;
        });
        if seen != natts {
            return None;
        }
    }
    // Form it: header, null bitmap, MAXALIGNed data (heap_fill_tuple's layout).
    let has_null = pieces.iter().any(|p| matches!(p, Some(Piece::Null)));
    let mut hoff = BITS_OFFSET + if has_null { natts.div_ceil(8) } else { 0 };
    hoff = hoff.div_ceil(MAXALIGN) * MAXALIGN;
    let mut out = Vec::with_capacity(hoff + newest.len());
    out.extend_from_slice(&newest[..INFOMASK2_OFFSET]);
    let infomask2 = (u16::from_le_bytes([newest[INFOMASK2_OFFSET], newest[INFOMASK2_OFFSET + 1]]) & !HEAP_NATTS_MASK) | natts as u16;
    out.extend_from_slice(&infomask2.to_le_bytes());
    out.extend_from_slice(&[0, 0, hoff as u8]);
    out.resize(hoff, 0);
    let mut infomask = if has_null { HEAP_HASNULL } else { 0 };
    for (i, p) in pieces.iter().enumerate() {
        let (start, end) = match (*p)? {
            Piece::Null => continue,
            Piece::Datum { start, end, .. } => (start, end),
        };
        if has_null {
            out[BITS_OFFSET + (i >> 3)] |= 1 << (i & 7);
        }
        let bytes = &tuples[source[i]][start..end];
        let (len, align) = layouts[i];
        if len < 0 {
            infomask |= HEAP_HASVARWIDTH;
        }
        // A varlena with a 1-byte header is stored unaligned; everything else at
        // its alignment, zero-padded (readers tell padding from a 1-byte header
        // by its zero first byte).
        if !(len == -1 && bytes[0] & 0x01 == 0x01) {
            let a = align.max(1) as usize;
            let data_off = out.len() - hoff;
            out.resize(hoff + data_off.div_ceil(a) * a, 0);
        }
        out.extend_from_slice(bytes);
    }
    out[INFOMASK_OFFSET..INFOMASK_OFFSET + 2].copy_from_slice(&infomask.to_le_bytes());
    let total = out.len() as i32;
    out[DATUM_LEN_OFFSET..DATUM_LEN_OFFSET + 4].copy_from_slice(&total.to_le_bytes());
    Some(out)
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
        out.iter()
            .map(|a| match a {
                Attr::Null => N,
                Attr::Unknown => U,
                v => V(v.bytes(t).unwrap()),
            })
            .collect()
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

    /// A tuple of `values` (stored bytes: a varlena with its header; None: NULL)
    /// laid out as heap_form_tuple does, written out by hand: the oracle for [`fold`].
    fn form(layouts: &[(i16, u8)], values: &[Option<&[u8]>]) -> Vec<u8> {
        let nulls: Vec<bool> = values.iter().map(|v| v.is_none()).collect();
        let mut data: Vec<u8> = Vec::new();
        for (v, &(len, align)) in values.iter().zip(layouts) {
            let Some(v) = v else { continue };
            if !(len == -1 && v[0] & 1 == 1) {
                while !data.len().is_multiple_of(align as usize) {
                    data.push(0);
                }
            }
            data.extend_from_slice(v);
        }
        let mut t = tuple(values.len() as u16, nulls.iter().any(|n| *n).then_some(&nulls[..]), &data);
        if layouts.iter().zip(values).any(|(l, v)| l.0 < 0 && v.is_some()) {
            t[INFOMASK_OFFSET] |= HEAP_HASVARWIDTH as u8;
        }
        let n = t.len() as i32;
        t[..4].copy_from_slice(&n.to_le_bytes());
        t
    }

    fn refs(v: &[Option<Vec<u8>>]) -> Vec<Option<&[u8]>> {
        v.iter().map(|x| x.as_deref()).collect()
    }

    fn short(s: &[u8]) -> Vec<u8> {
        let mut v = vec![(((s.len() + 1) << 1) | 1) as u8];
        v.extend_from_slice(s);
        v
    }

    fn long(s: &[u8]) -> Vec<u8> {
        let mut v = (((s.len() + 4) as u32) << 2).to_le_bytes().to_vec();
        v.extend_from_slice(s);
        v
    }

    #[test]
    fn patches_fold_into_the_row_heap_form_tuple_would_make() {
        // int4, text, int8, text, bool, name-like (64 bytes, align 1), cstring, int2
        let layouts = [(4, 4), (-1, 4), (8, 8), (-1, 4), (1, 1), (64, 1), (-2, 1), (2, 2)];
        let i4 = |x: i32| x.to_le_bytes().to_vec();
        let i8v = |x: i64| x.to_le_bytes().to_vec();
        let name = [b'n'; 64];
        // A 4-byte header whose first byte is zero (total length 64: 64 << 2 = 0x100).
        let zero_first = long(&[b'z'; 60]);
        assert_eq!(zero_first[0], 0);
        let base_vals: Vec<Option<Vec<u8>>> = vec![
            Some(i4(1)),
            Some(short(b"abc")),
            Some(i8v(-7)),
            None,
            Some(vec![1]),
            Some(name.to_vec()),
            Some(b"cs\0".to_vec()),
            Some(3i16.to_le_bytes().to_vec()),
        ];
        let base = form(&layouts, &refs(&base_vals));
        // Patch 1 (older): text 4 gets the zero-first long value, int2 9.
        let mut p1_vals = base_vals.clone();
        p1_vals[3] = Some(zero_first.clone());
        p1_vals[7] = Some(9i16.to_le_bytes().to_vec());
        p1_vals[1] = Some(short(b"ignored: not assigned by this patch"));
        let p1 = form(&layouts, &refs(&p1_vals));
        // Patch 2 (newest): text 2 becomes short "z" (an odd offset before the
        // long value and the int8), int8 NULL.
        let mut p2_vals = base_vals.clone();
        p2_vals[1] = Some(short(b"z"));
        p2_vals[2] = None;
        let p2 = form(&layouts, &refs(&p2_vals));
        let folded = fold(&layouts, &[(&[2, 3], &p2), (&[4, 8], &p1)], &base).unwrap();
        let mut want = base_vals.clone();
        want[1] = Some(short(b"z"));
        want[2] = None;
        want[3] = Some(zero_first.clone());
        want[7] = Some(9i16.to_le_bytes().to_vec());
        assert_eq!(folded, form(&layouts, &refs(&want)));
        let mut out = Vec::new();
        deform(&folded, &layouts, &mut out);
        assert_eq!(view(&folded, &out), vec![V(&i4(1)), V(b"z"), N, V(&[b'z'; 60]), V(&[1]), V(&name), V(b"cs"), V(&9i16.to_le_bytes())]);
        // The NULL assigned away again: no bitmap, a shorter header.
        let mut p3_vals = want.clone();
        p3_vals[2] = Some(i8v(42));
        let p3 = form(&layouts, &refs(&p3_vals));
        let folded2 = fold(&layouts, &[(&[3], &p3)], &folded).unwrap();
        want[2] = Some(i8v(42));
        assert_eq!(folded2, form(&layouts, &refs(&want)));
        assert_eq!(folded2[HOFF_OFFSET], 24);
        // No patches: the base, re-formed.
        assert_eq!(fold(&layouts, &[], &base).unwrap(), base);
    }

    #[test]
    fn rows_fold_cannot_form_are_refused() {
        let layouts = [(4, 4), (4, 4)];
        let two = form(&layouts, &[Some(&1i32.to_le_bytes()), Some(&2i32.to_le_bytes())]);
        // A row written before the second column was added.
        let one = form(&layouts[..1], &[Some(&1i32.to_le_bytes())]);
        assert!(fold(&layouts, &[(&[2], &two)], &one).is_none());
        // An attribute the layout does not have; attribute 0.
        assert!(fold(&layouts, &[(&[3], &two)], &two).is_none());
        assert!(fold(&layouts, &[(&[0], &two)], &two).is_none());
        // A TOAST pointer.
        let tl = [(4, 4), (-1, 4)];
        let ext = form(&tl, &[Some(&1i32.to_le_bytes()), Some(&[0x01, 18, 0, 0])]);
        assert!(fold(&tl, &[(&[1], &ext)], &ext).is_none());
        // Truncated and altered tuples: never a panic.
        let good = form(&tl, &[Some(&1i32.to_le_bytes()), Some(&short(b"hello"))]);
        for n in 0..good.len() {
            let _ = fold(&tl, &[(&[1], &good[..n])], &good);
            let _ = fold(&tl, &[(&[1], &good)], &good[..n]);
        }
        for i in 0..good.len() {
            for b in [0u8, 1, 2, 3, 0x7f, 0xff] {
                let mut t = good.clone();
                t[i] = b;
                let _ = fold(&tl, &[(&[2], &good)], &t);
                let _ = fold(&tl, &[(&[2], &t)], &good);
            }
        }
    }
}
