//! [`RecentRequests`]: the write requests a tablet replica applied lately, so a
//! request sent again (its client lost the connection after sending it, or the
//! leader changed) is answered instead of applied twice.
//!
//! Every replica records the request id of each batch it applies (the id travels
//! in the Raft entry), so a new leader knows what its predecessor applied. Ids are
//! kept for [`RecentRequests::KEEP`] (clients retry within seconds) and at most
//! [`RecentRequests::MAX`] of them.

use crate::HybridTime;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct RecentRequests {
    applied: HashMap<u128, HybridTime>,
    order: VecDeque<(Instant, u128)>,
}

impl RecentRequests {
    pub const KEEP: Duration = Duration::from_secs(120);
    pub const MAX: usize = 1 << 20;

    /// Request `id` (0: none) was applied, decided at `ht`.
    pub fn insert(&mut self, id: u128, ht: HybridTime) {
        if id == 0 {
            return;
        }
        let now = Instant::now();
        while let Some((t, old)) = self.order.front().copied() {
            if now.duration_since(t) < Self::KEEP && self.order.len() < Self::MAX {
                break;
            }
            self.order.pop_front();
            self.applied.remove(&old);
        }
        if self.applied.insert(id, ht).is_none() {
            self.order.push_back((now, id));
        }
    }

    /// When request `id` was applied, if it was (lately).
    pub fn get(&self, id: u128) -> Option<HybridTime> {
        if id == 0 {
            return None;
        }
        self.applied.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_and_ignores_zero() {
        let mut r = RecentRequests::default();
        r.insert(0, HybridTime(1));
        assert_eq!(r.get(0), None);
        r.insert(7, HybridTime(5));
        r.insert(7, HybridTime(5));
        assert_eq!(r.get(7), Some(HybridTime(5)));
        assert_eq!(r.get(8), None);
        assert_eq!(r.order.len(), 1);
    }
}
