//! Adaptive admission control (§3.4.2, Listing 1): each worker thread's multi-programming
//! level (MPL, transactions it keeps in flight) is adjusted once per epoch.
//!
//! With a packet loss in the epoch (here: a transaction whose control messages timed out)
//! the MPL restarts at 1 and slow start aims at half the old MPL. Otherwise, right after a
//! restart, or while the throughput holds (`T_i > 0.9 × T_{i-1}`), the MPL grows: doubling
//! below the slow-start threshold, by one above it. When the throughput drops the MPL halves
//! and the next epoch counts as a restart. The MPL never leaves `1..=max` (the cap is ours:
//! the lanes a thread has).
//!
//! The throughput is the commits of the whole cluster in the epoch as this thread knows them:
//! its own server's, plus what the other servers piggybacked on their last control messages.

use serde::Serialize;

/// The growth threshold α of Listing 1.
pub const ALPHA: f64 = 0.9;

/// One thread's admission controller.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Admission {
    /// The MPL now.
    pub mpl: u8,
    /// The slow-start threshold.
    pub slow_start: u8,
    /// Whether the last epoch ended in a reset or a decrease.
    pub restart: bool,
    /// The throughput of the last epoch.
    pub last_throughput: f64,
    /// The cap of the MPL.
    pub max: u8,
}

impl Admission {
    /// Listing 1's initial state: restart, MPL 1, slow start at `max / 2`.
    pub fn new(max: u8) -> Self {
        Admission { mpl: 1, slow_start: (max / 2).max(1), restart: true, last_throughput: 0.0, max: max.max(1) }
    }

    fn grow(&self) -> u8 {
        if self.mpl < self.slow_start {
            self.mpl.saturating_mul(2)
        } else {
            self.mpl.saturating_add(1)
        }
    }

    /// The end of an epoch with `throughput` and whether a packet was lost in it.
    pub fn epoch(&mut self, throughput: f64, loss: bool) {
        if loss {
            self.slow_start = (self.mpl / 2).max(1);
            self.restart = true;
            self.mpl = 1;
        } else if self.restart {
            self.restart = false;
            self.mpl = self.grow();
        } else if throughput > ALPHA * self.last_throughput {
            self.mpl = self.grow();
        } else {
            self.restart = true;
            self.mpl /= 2;
        }
        self.mpl = self.mpl.clamp(1, self.max);
        self.last_throughput = throughput;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_1_step_by_step() {
        let mut a = Admission::new(16);
        assert_eq!((a.mpl, a.slow_start, a.restart), (1, 8, true));
        a.epoch(100.0, false); // restart: slow start doubles
        assert_eq!((a.mpl, a.restart), (2, false));
        a.epoch(150.0, false); // holds: double below the threshold
        assert_eq!(a.mpl, 4);
        a.epoch(200.0, false);
        assert_eq!(a.mpl, 8);
        a.epoch(210.0, false); // at the threshold: additive
        assert_eq!(a.mpl, 9);
        a.epoch(180.0, false); // 180 <= 0.9 × 210 = 189: halve, restart
        assert_eq!((a.mpl, a.restart), (4, true));
        a.epoch(100.0, false); // after a restart it grows whatever the throughput
        assert_eq!((a.mpl, a.restart), (8, false));
        a.epoch(300.0, true); // loss: reset to 1, slow start at half
        assert_eq!((a.mpl, a.slow_start, a.restart), (1, 4, true));
        for _ in 0..20 {
            a.epoch(1e9, false);
        }
        assert_eq!(a.mpl, 16, "capped at the lanes");
        let mut one = Admission::new(1);
        one.epoch(0.0, false);
        one.epoch(0.0, false);
        assert_eq!(one.mpl, 1, "never 0");
    }
}
