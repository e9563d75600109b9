//! Adaptive admission control (§3.4.2, Listing 1): each worker thread's multi-programming
//! level (MPL, transactions it keeps in flight) is adjusted once per epoch.
//!
//! ## The port, line by line
//!
//! Listing 1 as the paper prints it, beside [`Admission::epoch`]:
//!
//! | Listing 1 | here |
//! |---|---|
//! | init: `restart = true`, `MPL = 1`, `slow_start = MAXMPL / 2` | [`Admission::new`]; `MAXMPL` is `mpl_max`, `slow_start` is [`Listing1::slow_start`] (0: `MAXMPL / 2`) |
//! | `if packet_loss(i)`: `slow_start = max(MPL / 2, 1)`, `restart = true`, `MPL = 1` | the same; a loss is a transaction whose control messages timed out (§3.5) |
//! | `else if restart`: `restart = false`, grow | the same, whatever the throughput |
//! | `else if T_i > α T_{i-1}` (α = 0.9): grow | the same, α is [`Listing1::alpha`] |
//! | else: `restart = true`, `MPL /= 2` | the same |
//! | grow: `MPL < slow_start ? MPL × 2 : MPL + 1` | `Admission::grow` |
//! | `if MPL == 0: MPL = 1` | the MPL is clamped to `1..=MAXMPL` (the cap is ours: the lanes a thread has; the paper names `MAXMPL` only for the initial slow start) |
//!
//! So the port is faithful, and so is what follows from it: **without a loss the MPL cannot
//! come down for good.** `slow_start` changes only on a loss. A decrease halves the MPL and
//! marks a restart; the restart epoch grows it unconditionally, doubling if it is below
//! `slow_start`, so from any MPL `m` with `m / 2 < slow_start` the next two epochs go `m → m/2
//! → m`. Once the MPL has climbed past `slow_start`, it therefore never sits below about
//! `slow_start / 2` for more than one epoch, whatever the throughput says; only a packet loss
//! lowers `slow_start` and lets it fall. With the paper's init `slow_start = MAXMPL / 2` the
//! MPL's floor is set by `MAXMPL`, which the paper does not state; in a network that never
//! drops (ours, with 4 MiB port buffers) the loss branch never fires. Hence `mpl_max`, the
//! initial `slow_start`, α and the epoch length are all settings, and the `admission`
//! experiment sweeps them ([`crate::experiments`]).
//!
//! The throughput is the commits of the whole cluster in the epoch as this thread knows them:
//! its own server's, plus what the other servers piggybacked on their last control messages.

use serde::{Deserialize, Serialize};

/// The growth threshold α of Listing 1 (its comment: `α = 0.9`).
pub const ALPHA: f64 = 0.9;

/// Listing 1's constants other than `MAXMPL` (which is the run's `mpl_max`) and the epoch
/// length (the run's `epoch_us`): settings of a run, `admission.alpha` and
/// `admission.slow_start`, so a preset can state them and an experiment sweep them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listing1 {
    /// The MPL grows while an epoch's throughput is above `alpha` × the previous epoch's
    /// (Listing 1: 0.9, "the 10% test"); at or below it the MPL halves.
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// The initial slow-start threshold; 0 means Listing 1's `MAXMPL / 2`.
    #[serde(default)]
    pub slow_start: u8,
}

fn default_alpha() -> f64 {
    ALPHA
}

impl Default for Listing1 {
    fn default() -> Self {
        Listing1 { alpha: ALPHA, slow_start: 0 }
    }
}

impl Listing1 {
    /// Whether these are Listing 1's own constants (a run's settings leave them out then, so
    /// settings written before they were settings read and print the same).
    pub fn is_listing(&self) -> bool {
        *self == Listing1::default()
    }

    /// Checks α is in `0..=1` (above 1 the MPL would shrink on every steady epoch, NaN would
    /// never grow it); the error names the setting.
    pub fn check(&self) -> Result<(), String> {
        if (0.0..=1.0).contains(&self.alpha) {
            Ok(())
        } else {
            Err(format!("admission.alpha {}: accepted 0.0..=1.0 (Listing 1: 0.9)", self.alpha))
        }
    }
}

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
    /// The cap of the MPL (`MAXMPL`).
    pub max: u8,
    /// The growth threshold α.
    pub alpha: f64,
}

impl Admission {
    /// Listing 1's initial state with its own constants: restart, MPL 1, slow start at
    /// `max / 2`, α 0.9.
    pub fn new(max: u8) -> Self {
        Admission::with(max, Listing1::default())
    }

    /// Listing 1's initial state with the constants `listing`: restart, MPL 1, slow start
    /// at `listing.slow_start` (0: `max / 2`).
    pub fn with(max: u8, listing: Listing1) -> Self {
        let max = max.max(1);
        let slow_start = if listing.slow_start == 0 { max / 2 } else { listing.slow_start };
        Admission {
            mpl: 1,
            slow_start: slow_start.max(1),
            restart: true,
            last_throughput: 0.0,
            max,
            alpha: listing.alpha,
        }
    }

    /// Listing 1's growth: doubling below the slow-start threshold, by one from it on.
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
        } else if throughput > self.alpha * self.last_throughput {
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

    /// Throughput that rises until the MPL reaches its cap, then falls every epoch by 20% (far
    /// past the 10% test): Listing 1 halves on every test it gets, yet without a loss the
    /// restart epoch doubles the MPL back, so it never falls below `slow_start / 2`; after one loss `slow_start` is low and the MPL stays at 1..2.
    #[test]
    fn without_a_loss_the_mpl_never_falls_below_half_the_slow_start() {
        for max in [2u8, 3, 4, 6, 8, 16, 32] {
            let run = |loss_at: Option<usize>| {
                let mut a = Admission::new(max);
                let mut t = 1.0;
                let mut mpls = Vec::new();
                for epoch in 0..300 {
                    t *= if epoch < 40 { 1.5 } else { 0.8 };
                    a.epoch(t, loss_at == Some(epoch));
                    mpls.push(a.mpl);
                }
                mpls
            };
            let slow_start = (max / 2).max(1);
            let falling = &run(None)[45..];
            let low = falling.iter().min().copied().unwrap_or(0);
            assert!(low >= (slow_start / 2).max(1), "max {max}: {falling:?}");
            let after_loss = &run(Some(200))[205..];
            assert!(after_loss.iter().all(|&m| m <= 2), "max {max}: after a loss the MPL may fall: {after_loss:?}");
        }
    }

    #[test]
    fn the_constants_are_settings() {
        let a = Admission::with(16, Listing1 { alpha: 0.5, slow_start: 2 });
        assert_eq!((a.slow_start, a.alpha), (2, 0.5));
        let mut b = a.clone();
        b.epoch(100.0, false); // restart: 1 < 2, doubles
        b.epoch(60.0, false); // 60 > 0.5 × 100: holds, additive from the threshold on
        assert_eq!(b.mpl, 3);
        let err = Listing1 { alpha: 1.5, slow_start: 0 }.check().unwrap_err();
        assert!(err.contains("admission.alpha") && err.contains("0.0..=1.0"), "{err}");
        assert!(Listing1::default().is_listing() && !Listing1 { alpha: 0.8, slow_start: 0 }.is_listing());
    }
}
