//! Row patches: an update that changed some columns of a row, stored so that a
//! concurrent update of other columns of the same row need not wait for it.
//!
//! A patch is the set of attributes the update changed (1-based attribute
//! numbers, ascending) and the whole row as its writer formed it; only the changed
//! attributes are taken from it. A row whose newest versions are patches is the
//! newest full version (a plain put) with the patches laid over it, oldest first.
//! Concurrent patches change disjoint attributes (the tablet refuses others), so
//! their order does not matter.
//!
//! Reads do not form a row: a read that meets patches answers a *stack*
//! ([`encode_stack`]): the patches, newest first, then the full row. The SQL layer
//! merges it. (A writer may send the table's layout with a patch, and the tablet
//! then folds a row's stack into the whole row: `heap_tuple::fold`.) A stack starts with [`STACK_TAG`],
//! which no heap tuple starts with (a tuple's first four bytes are its length
//! shifted left by two: the low two bits of its first byte are zero).
//!
//! Layouts (integers big-endian):
//! - patch: `n: u16`, `n × attnum: u16`, row bytes;
//! - patch write op (on the wire): `m: u16`, `m × attnum: u16` (the attributes the
//!   update depends on: read or written), then a patch; with `m`'s top bit set, a
//!   layout between them: `l: u16`, `l × (attlen: i16, attalign: u8)`;
//! - stack: [`STACK_TAG`], `layers: u16`, then per layer `len: u32` + bytes (the
//!   patches, then the full row);
//! - patch intent: `base: u64` (the hybrid time of the newest version its writer
//!   saw), then a patch. When it commits with nothing newer than `base` under it
//!   and no other writer on the row, it is applied as a whole row
//!   (`keys::VALUE_PUT_COLS`): patches last only while updates are concurrent.

use crate::keys::KeyError;
use pinax_common::HybridTime;

/// First byte of a stack.
pub const STACK_TAG: u8 = 0x03;

/// Patches over one row a writer lays down before the tablet stores the row whole
/// again (when nothing concurrent is in the way): reads merge at most about this
/// many.
pub const MAX_CHAIN: usize = 8;

fn put_cols(out: &mut Vec<u8>, cols: &[u16]) {
    out.extend_from_slice(&(cols.len() as u16).to_be_bytes());
    for c in cols {
        out.extend_from_slice(&c.to_be_bytes());
    }
}

fn take_cols(b: &[u8]) -> Result<(Vec<u16>, &[u8]), KeyError> {
    if b.len() < 2 {
        return Err(KeyError::Truncated);
    }
    cols_at(&b[2..], u16::from_be_bytes([b[0], b[1]]) as usize)
}

/// `n` attribute numbers (ascending, 1-based) at the start of `b`, and what follows.
fn cols_at(b: &[u8], n: usize) -> Result<(Vec<u16>, &[u8]), KeyError> {
    let end = 2 * n;
    if b.len() < end {
        return Err(KeyError::Truncated);
    }
    let cols: Vec<u16> = b[..end].chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
    if cols.windows(2).any(|w| w[0] >= w[1]) || cols.first() == Some(&0) {
        return Err(KeyError::BadTag(0));
    }
    Ok((cols, &b[end..]))
}

/// A patch: attributes `cols` (ascending, 1-based) of `row` replace the row's.
pub fn encode_patch(out: &mut Vec<u8>, cols: &[u16], row: &[u8]) {
    out.reserve(2 + 2 * cols.len() + row.len());
    put_cols(out, cols);
    out.extend_from_slice(row);
}

/// The changed attributes and the row of a patch.
pub fn decode_patch(b: &[u8]) -> Result<(Vec<u16>, &[u8]), KeyError> {
    take_cols(b)
}

/// The row of a patch (its attributes skipped, not decoded).
pub fn patch_row(b: &[u8]) -> Result<&[u8], KeyError> {
    if b.len() < 2 {
        return Err(KeyError::Truncated);
    }
    let end = 2 + 2 * u16::from_be_bytes([b[0], b[1]]) as usize;
    b.get(end..).ok_or(KeyError::Truncated)
}

/// A patch write op's value: the attributes the update depends on (`deps`), then
/// the patch.
pub fn encode_patch_op(cols: &[u16], deps: &[u16], row: &[u8]) -> Vec<u8> {
    encode_patch_op_with_layout(cols, deps, &[], row)
}

/// Flag on a patch op's count of `deps`: a layout follows them.
const LAYOUT_FLAG: u16 = 0x8000;

/// [`encode_patch_op`] with the table's row layout (every attribute's `attlen`
/// and `attalign` in bytes, as `heap_tuple::deform` takes them; empty: none),
/// which lets the tablet fold the row's patches into a whole row
/// (`heap_tuple::fold`) instead of refusing a blind patch over too many.
pub fn encode_patch_op_with_layout(cols: &[u16], deps: &[u16], layout: &[(i16, u8)], row: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + 2 * (cols.len() + deps.len()) + 3 * layout.len() + row.len());
    put_cols(&mut out, deps);
    if !layout.is_empty() {
        out[0] |= (LAYOUT_FLAG >> 8) as u8;
        out.extend_from_slice(&(layout.len() as u16).to_be_bytes());
        for (len, align) in layout {
            out.extend_from_slice(&len.to_be_bytes());
            out.push(*align);
        }
    }
    encode_patch(&mut out, cols, row);
    out
}

/// A patch write op, decoded.
pub struct PatchOp<'a> {
    /// The attributes the update depends on (read or written).
    pub deps: Vec<u16>,
    /// The table's row layout, if the writer sent it (empty: not sent).
    pub layout: Vec<(i16, u8)>,
    /// The patch as stored.
    pub patch: &'a [u8],
}

/// A patch write op's value, decoded (see [`encode_patch_op_with_layout`]).
pub fn decode_patch_op(b: &[u8]) -> Result<PatchOp<'_>, KeyError> {
    if b.len() < 2 {
        return Err(KeyError::Truncated);
    }
    let m = u16::from_be_bytes([b[0], b[1]]);
    let (deps, layout, patch) = if m & LAYOUT_FLAG == 0 {
        let (deps, patch) = take_cols(b)?;
        (deps, Vec::new(), patch)
    } else {
        let (deps, rest) = cols_at(&b[2..], (m & !LAYOUT_FLAG) as usize)?;
        if rest.len() < 2 {
            return Err(KeyError::Truncated);
        }
        let n = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let end = 2 + 3 * n;
        let l = rest.get(2..end).ok_or(KeyError::Truncated)?;
        let layout = l.chunks_exact(3).map(|c| (i16::from_be_bytes([c[0], c[1]]), c[2])).collect();
        (deps, layout, &rest[end..])
    };
    decode_patch(patch)?;
    Ok(PatchOp { deps, layout, patch })
}

/// A patch intent's data: the time of the version its writer saw, then the patch.
pub fn encode_patch_intent(base: HybridTime, patch: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + patch.len());
    out.extend_from_slice(&base.as_u64().to_be_bytes());
    out.extend_from_slice(patch);
    out
}

/// (time of the version its writer saw, the patch) of a patch intent's data.
pub fn decode_patch_intent(b: &[u8]) -> Result<(HybridTime, &[u8]), KeyError> {
    if b.len() < 8 {
        return Err(KeyError::Truncated);
    }
    let mut t = [0u8; 8];
    t.copy_from_slice(&b[..8]);
    Ok((HybridTime(u64::from_be_bytes(t)), &b[8..]))
}

/// Whether two ascending attribute lists share one.
pub fn intersects(a: &[u16], b: &[u16]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// Union of two ascending attribute lists.
pub fn union(a: &[u16], b: &[u16]) -> Vec<u16> {
    let mut out: Vec<u16> = a.iter().chain(b).copied().collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether a row value is a stack (to merge) rather than a row.
pub fn is_stack(value: &[u8]) -> bool {
    value.first() == Some(&STACK_TAG)
}

/// A stack: `patches` (stored patches, newest first) over the full row `base`.
pub fn encode_stack(patches: &[&[u8]], base: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + patches.iter().map(|p| 4 + p.len()).sum::<usize>() + 4 + base.len());
    out.push(STACK_TAG);
    out.extend_from_slice(&((patches.len() + 1) as u16).to_be_bytes());
    for layer in patches.iter().chain(std::iter::once(&base)) {
        out.extend_from_slice(&(layer.len() as u32).to_be_bytes());
        out.extend_from_slice(layer);
    }
    out
}

/// A decoded stack: the patches newest first (changed attributes, row) and the full
/// row under them.
#[derive(Debug, PartialEq, Eq)]
pub struct Stack<'a> {
    pub patches: Vec<(Vec<u16>, &'a [u8])>,
    pub base: &'a [u8],
}

pub fn decode_stack(b: &[u8]) -> Result<Stack<'_>, KeyError> {
    if b.len() < 3 {
        return Err(KeyError::Truncated);
    }
    if b[0] != STACK_TAG {
        return Err(KeyError::BadTag(b[0]));
    }
    let n = u16::from_be_bytes([b[1], b[2]]) as usize;
    if n == 0 {
        return Err(KeyError::Truncated);
    }
    let mut rest = &b[3..];
    let mut layers = Vec::with_capacity(n);
    for _ in 0..n {
        if rest.len() < 4 {
            return Err(KeyError::Truncated);
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        rest = &rest[4..];
        if rest.len() < len {
            return Err(KeyError::Truncated);
        }
        layers.push(&rest[..len]);
        rest = &rest[len..];
    }
    if !rest.is_empty() {
        return Err(KeyError::BadTag(STACK_TAG));
    }
    let base = layers.pop().unwrap_or_default();
    let patches = layers.into_iter().map(decode_patch).collect::<Result<Vec<_>, _>>()?;
    Ok(Stack { patches, base })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_ops_and_stacks_round_trip() {
        let mut p = Vec::new();
        encode_patch(&mut p, &[2, 5], b"row-a");
        assert_eq!(decode_patch(&p).unwrap(), (vec![2, 5], &b"row-a"[..]));
        assert_eq!(patch_row(&p).unwrap(), b"row-a");
        assert!(patch_row(&p[..5]).is_err());
        let op = encode_patch_op(&[2, 5], &[1, 2, 5], b"row-a");
        let d = decode_patch_op(&op).unwrap();
        assert_eq!((d.deps, d.layout, d.patch), (vec![1, 2, 5], vec![], &p[..]));
        let op = encode_patch_op_with_layout(&[2, 5], &[1, 2, 5], &[(4, 4), (-1, 4), (-2, 1), (8, 8), (16, 1)], b"row-a");
        let d = decode_patch_op(&op).unwrap();
        assert_eq!((d.deps, d.layout, d.patch), (vec![1, 2, 5], vec![(4, 4), (-1, 4), (-2, 1), (8, 8), (16, 1)], &p[..]));
        for n in 0..op.len() - 5 {
            assert!(decode_patch_op(&op[..n]).is_err(), "truncated at {n}");
        }
        let mut q = Vec::new();
        encode_patch(&mut q, &[], b"row-b");
        let s = encode_stack(&[&p, &q], b"base");
        assert!(is_stack(&s));
        let d = decode_stack(&s).unwrap();
        assert_eq!(d, Stack { patches: vec![(vec![2, 5], &b"row-a"[..]), (vec![], &b"row-b"[..])], base: b"base" });
        // A stack of no patches is the row alone.
        assert_eq!(decode_stack(&encode_stack(&[], b"x")).unwrap(), Stack { patches: vec![], base: b"x" });
    }

    #[test]
    fn a_heap_tuple_is_never_a_stack() {
        // A formed tuple starts with its length << 2 (little-endian varlena header).
        for len in [24u32, 27, 100, 1000, 70000] {
            assert!(!is_stack(&(len << 2).to_le_bytes()));
        }
    }

    #[test]
    fn sets_intersect_and_unite() {
        assert!(intersects(&[1, 4, 9], &[2, 9]));
        assert!(!intersects(&[1, 4, 9], &[2, 3, 10]));
        assert!(!intersects(&[], &[1]));
        assert_eq!(union(&[1, 4], &[2, 4, 7]), vec![1, 2, 4, 7]);
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        let mut p = Vec::new();
        encode_patch(&mut p, &[2, 5], b"row");
        let s = encode_stack(&[&p], b"base");
        for cut in 0..s.len() {
            let _ = decode_stack(&s[..cut]);
        }
        for i in 0..s.len() {
            let mut t = s.clone();
            t[i] ^= 0xA5;
            let _ = decode_stack(&t);
        }
        assert!(decode_patch(&[0, 2, 0, 5, 0, 2]).is_err(), "descending attributes");
        assert!(decode_patch(&[0, 1, 0, 0]).is_err(), "attribute 0");
        assert!(decode_patch_op(&[0, 1]).is_err());
        assert!(decode_patch_intent(&[0; 7]).is_err());
        let i = encode_patch_intent(HybridTime(77), &p);
        assert_eq!(decode_patch_intent(&i).unwrap(), (HybridTime(77), &p[..]));
    }
}
