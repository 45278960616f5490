//! Safe time: the hybrid time below which a tablet's data no longer changes.
//!
//! A writer registers the hybrid time it writes at (taken from the clock under this
//! manager's lock) and finishes after the engine has its batch. A reader at `ht`
//! first moves the clock past `ht` (so later writers write above it), then waits
//! until no registered write at or below `ht` is in flight.

use parking_lot::{Condvar, Mutex};
use pinax_common::{HybridClock, HybridTime};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct MvccManager {
    in_flight: Mutex<BTreeMap<HybridTime, usize>>,
    done: Condvar,
}

impl MvccManager {
    /// Take a hybrid time for a write and register it as in flight.
    pub fn register_write(&self, clock: &HybridClock) -> HybridTime {
        let mut g = self.in_flight.lock();
        let ht = clock.now();
        *g.entry(ht).or_insert(0) += 1;
        ht
    }

    pub fn finish_write(&self, ht: HybridTime) {
        let mut g = self.in_flight.lock();
        if let Some(n) = g.get_mut(&ht) {
            *n -= 1;
            if *n == 0 {
                g.remove(&ht);
            }
        }
        drop(g);
        self.done.notify_all();
    }

    /// Block until every write at or below `read_ht` is visible in the engine.
    pub fn wait_for_safe_time(&self, clock: &HybridClock, read_ht: HybridTime) {
        clock.update(read_ht);
        let mut g = self.in_flight.lock();
        while g.keys().next().is_some_and(|first| *first <= read_ht) {
            self.done.wait(&mut g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn reader_waits_for_in_flight_write() {
        let clock = Arc::new(HybridClock::system());
        let m = Arc::new(MvccManager::default());
        let w = m.register_write(&clock);
        let (m2, c2) = (m.clone(), clock.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            m2.wait_for_safe_time(&c2, w);
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(std::time::Duration::from_millis(50)).is_err());
        m.finish_write(w);
        rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        t.join().unwrap();
        // after the read, new writes are above it
        assert!(m.register_write(&clock) > w);
    }
}
