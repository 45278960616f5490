//! Hybrid logical clock.
//!
//! A [`HybridTime`] packs physical microseconds since the Unix epoch in the high 52
//! bits and a logical counter in the low 12 bits, so comparing the `u64` compares
//! (physical, logical) lexicographically. This is YugabyteDB's layout.

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// Bits of the logical counter.
pub const LOGICAL_BITS: u32 = 12;
const LOGICAL_MASK: u64 = (1 << LOGICAL_BITS) - 1;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct HybridTime(pub u64);

impl HybridTime {
    pub const MIN: HybridTime = HybridTime(0);
    pub const MAX: HybridTime = HybridTime(u64::MAX);
    /// Marker for "not set".
    pub const INVALID: HybridTime = HybridTime(0);

    pub fn from_parts(physical_micros: u64, logical: u64) -> Self {
        debug_assert!(logical <= LOGICAL_MASK);
        HybridTime((physical_micros << LOGICAL_BITS) | (logical & LOGICAL_MASK))
    }
    pub fn from_micros(physical_micros: u64) -> Self {
        Self::from_parts(physical_micros, 0)
    }
    pub fn physical_micros(self) -> u64 {
        self.0 >> LOGICAL_BITS
    }
    pub fn logical(self) -> u64 {
        self.0 & LOGICAL_MASK
    }
    pub fn as_u64(self) -> u64 {
        self.0
    }
    /// The smallest hybrid time greater than `self`.
    pub fn incremented(self) -> Self {
        HybridTime(self.0.saturating_add(1))
    }
    /// The largest hybrid time smaller than `self`.
    pub fn decremented(self) -> Self {
        HybridTime(self.0.saturating_sub(1))
    }
    /// `self` plus a physical duration in microseconds.
    pub fn add_micros(self, micros: u64) -> Self {
        HybridTime(self.0.saturating_add(micros << LOGICAL_BITS))
    }
    /// `self` minus a physical duration in microseconds (saturating at zero).
    pub fn sub_micros(self, micros: u64) -> Self {
        HybridTime(self.0.saturating_sub(micros << LOGICAL_BITS))
    }
}

impl fmt::Debug for HybridTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == HybridTime::MAX {
            return write!(f, "HT(max)");
        }
        write!(f, "HT({}.{})", self.physical_micros(), self.logical())
    }
}
impl fmt::Display for HybridTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Source of physical time in microseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    fn now_micros(&self) -> u64;
}

/// The machine's real-time clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => d.as_micros() as u64,
            Err(_) => 0,
        }
    }
}

/// A clock that moves only when told: for deterministic tests and simulation.
#[derive(Debug, Default)]
pub struct ManualClock {
    micros: AtomicU64,
}

impl ManualClock {
    pub fn new(start_micros: u64) -> Self {
        ManualClock { micros: AtomicU64::new(start_micros) }
    }
    pub fn set(&self, micros: u64) {
        self.micros.store(micros, Ordering::SeqCst);
    }
    pub fn advance(&self, micros: u64) {
        self.micros.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.micros.load(Ordering::SeqCst)
    }
}

/// Another clock shifted by a (possibly negative) offset: simulates clock skew.
pub struct SkewedClock<C: Clock> {
    inner: C,
    skew_micros: AtomicI64,
}

impl<C: Clock> SkewedClock<C> {
    pub fn new(inner: C, skew_micros: i64) -> Self {
        SkewedClock { inner, skew_micros: AtomicI64::new(skew_micros) }
    }
    pub fn set_skew(&self, skew_micros: i64) {
        self.skew_micros.store(skew_micros, Ordering::SeqCst);
    }
}

impl<C: Clock> Clock for SkewedClock<C> {
    fn now_micros(&self) -> u64 {
        let base = self.inner.now_micros() as i64;
        (base + self.skew_micros.load(Ordering::SeqCst)).max(0) as u64
    }
}

/// Default bound on clock skew between nodes (YugabyteDB's `max_clock_skew_usec`).
pub const DEFAULT_MAX_CLOCK_SKEW_MICROS: u64 = 500_000;

/// Hybrid logical clock: monotonic, and advanced past every hybrid time it hears of.
/// A hybrid time refused by [`HybridClock::update_checked`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockAhead {
    pub ahead_micros: u64,
    pub max_skew_micros: u64,
}

impl fmt::Display for ClockAhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a hybrid time {} ms ahead of this node's clock, past the maximum clock skew of {} ms: refused (check the clocks' synchronisation)",
            self.ahead_micros / 1000,
            self.max_skew_micros / 1000
        )
    }
}

pub struct HybridClock {
    physical: Arc<dyn Clock>,
    last: Mutex<HybridTime>,
    max_skew_micros: u64,
}

impl HybridClock {
    pub fn new(physical: Arc<dyn Clock>) -> Self {
        HybridClock { physical, last: Mutex::new(HybridTime::MIN), max_skew_micros: DEFAULT_MAX_CLOCK_SKEW_MICROS }
    }
    pub fn system() -> Self {
        Self::new(Arc::new(SystemClock))
    }
    pub fn with_max_skew(mut self, micros: u64) -> Self {
        self.max_skew_micros = micros;
        self
    }
    pub fn max_skew_micros(&self) -> u64 {
        self.max_skew_micros
    }

    /// A hybrid time strictly greater than every one this clock returned or was told of.
    pub fn now(&self) -> HybridTime {
        let phys = HybridTime::from_micros(self.physical.now_micros());
        let mut last = self.last.lock();
        let next = if phys > *last { phys } else { last.incremented() };
        *last = next;
        next
    }

    /// Take in a hybrid time heard from elsewhere (an RPC): later `now()` exceed it.
    pub fn update(&self, seen: HybridTime) {
        if seen == HybridTime::MAX {
            return;
        }
        let mut last = self.last.lock();
        if seen > *last {
            *last = seen;
        }
    }

    /// [`HybridClock::update`] for a time heard from another process (a request,
    /// an answer): refused, not taken in, when its physical part is more than the
    /// clock's max skew ahead of this clock's physical time. A clock that far off,
    /// or a forged time, would otherwise push every later time of this node (and,
    /// through it, of the cluster) into the future, and nothing could bring it
    /// back. A hybrid time cannot honestly be further ahead: it never exceeds the
    /// fastest physical clock of the cluster. Without a max skew (0) any time is
    /// taken.
    pub fn update_checked(&self, seen: HybridTime) -> Result<(), ClockAhead> {
        if self.max_skew_micros > 0 && seen != HybridTime::MAX {
            let local = self.physical.now_micros();
            let ahead = seen.physical_micros().saturating_sub(local);
            if ahead > self.max_skew_micros {
                return Err(ClockAhead { ahead_micros: ahead, max_skew_micros: self.max_skew_micros });
            }
        }
        self.update(seen);
        Ok(())
    }

    /// The latest hybrid time handed out or heard of, without advancing.
    pub fn peek(&self) -> HybridTime {
        *self.last.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_order() {
        let a = HybridTime::from_parts(10, 5);
        let b = HybridTime::from_parts(11, 0);
        assert!(a < b);
        assert_eq!(a.physical_micros(), 10);
        assert_eq!(a.logical(), 5);
        assert_eq!(a.incremented(), HybridTime::from_parts(10, 6));
    }

    #[test]
    fn hlc_monotonic_with_stalled_clock() {
        let manual = Arc::new(ManualClock::new(1000));
        let hlc = HybridClock::new(manual.clone());
        let a = hlc.now();
        let b = hlc.now();
        assert!(b > a);
        assert_eq!(b.physical_micros(), 1000);
        manual.set(500); // clock went backwards
        let c = hlc.now();
        assert!(c > b);
    }

    #[test]
    fn hlc_update_moves_past_remote() {
        let manual = Arc::new(ManualClock::new(1000));
        let hlc = HybridClock::new(manual.clone());
        let remote = HybridTime::from_parts(5000, 7);
        hlc.update(remote);
        assert!(hlc.now() > remote);
        manual.set(6000);
        assert_eq!(hlc.now(), HybridTime::from_micros(6000));
    }

    #[test]
    fn skewed_clock() {
        let s = SkewedClock::new(ManualClock::new(1_000_000), -250_000);
        assert_eq!(s.now_micros(), 750_000);
        s.set_skew(10);
        assert_eq!(s.now_micros(), 1_000_010);
    }

    #[test]
    fn a_time_further_ahead_than_the_max_skew_is_refused_and_not_taken_in() {
        let phys = Arc::new(ManualClock::new(10_000_000));
        let c = HybridClock::new(phys.clone()).with_max_skew(500_000);
        c.update_checked(HybridTime::from_micros(10_400_000)).unwrap();
        assert_eq!(c.peek(), HybridTime::from_micros(10_400_000));
        let e = c.update_checked(HybridTime::from_micros(10_000_000 + 3_600_000_000)).unwrap_err();
        assert_eq!(e, ClockAhead { ahead_micros: 3_600_000_000, max_skew_micros: 500_000 });
        assert!(e.to_string().contains("3600000 ms ahead"), "{e}");
        assert_eq!(c.peek(), HybridTime::from_micros(10_400_000), "the refused time was taken in");
        // Without a max skew, anything goes (a lone test clock).
        let free = HybridClock::new(phys).with_max_skew(0);
        free.update_checked(HybridTime::from_micros(u64::MAX >> 20)).unwrap();
    }
}
