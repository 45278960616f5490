//! Cutting a table's key space into tablet partitions.

use pinax_proto::{Partition, Sharding};

/// Partitions of a new table. Hash: the 16-bit hash prefix space cut into equal
/// parts at big-endian boundaries. Range: cut at the sorted, deduplicated split points.
pub fn plan_partitions(sharding: &Sharding) -> Result<Vec<Partition>, String> {
    let mut cuts: Vec<Vec<u8>> = match sharding {
        Sharding::Hash { tablets } => {
            let n = *tablets;
            if n == 0 || n > 4096 {
                return Err(format!("number of tablets must be between 1 and 4096, got {n}"));
            }
            (1..n).map(|i| (((i as u64) * 65536 / n as u64) as u16).to_be_bytes().to_vec()).collect()
        }
        Sharding::Range { split_points } => {
            if split_points.len() > 4095 {
                return Err("too many split points (at most 4095)".into());
            }
            let mut s = split_points.clone();
            s.sort();
            s.dedup();
            if s.first().is_some_and(|f| f.is_empty()) {
                return Err("a split point must not be empty".into());
            }
            s
        }
    };
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut start = Vec::new();
    for cut in cuts.drain(..) {
        out.push(Partition { start: std::mem::replace(&mut start, cut.clone()), end: Some(cut) });
    }
    out.push(Partition { start, end: None });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_cuts_cover_space() {
        let p = plan_partitions(&Sharding::Hash { tablets: 8 }).unwrap();
        assert_eq!(p.len(), 8);
        assert_eq!(p[0].start, Vec::<u8>::new());
        assert_eq!(p[1].start, vec![0x20, 0x00]);
        assert_eq!(p[7].end, None);
        for w in p.windows(2) {
            assert_eq!(w[0].end.as_ref(), Some(&w[1].start));
        }
        assert_eq!(plan_partitions(&Sharding::Hash { tablets: 1 }).unwrap(), vec![Partition { start: vec![], end: None }]);
        assert!(plan_partitions(&Sharding::Hash { tablets: 0 }).is_err());
    }

    #[test]
    fn range_cuts_sorted() {
        let p = plan_partitions(&Sharding::Range { split_points: vec![b"m".to_vec(), b"c".to_vec(), b"m".to_vec()] }).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[1], Partition { start: b"c".to_vec(), end: Some(b"m".to_vec()) });
        assert!(plan_partitions(&Sharding::Range { split_points: vec![vec![]] }).is_err());
    }
}
