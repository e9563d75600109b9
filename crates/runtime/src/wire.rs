//! The wires behind the software switch's ports: loss, delay and jitter on what leaves a port.
//!
//! Real-mode tests need a network that loses and delays datagrams, and this kernel has no
//! `netem` queueing discipline to ask for one. A wire's behaviour lives at a switch port
//! anyway, so the switch process applies it: each node's port has a [`PortWire`] (a loss
//! probability, a delay and a jitter), and every datagram the switch sends out of that port is
//! dropped, held back, or sent at once accordingly. Jitter draws each datagram's delay
//! uniformly from `delay ± jitter`, so datagrams on one port overtake each other: loss,
//! delay and reordering come from one mechanism.
//!
//! ## Scope
//!
//! Settings apply to the switch-to-node direction of each node's wire. Everything a node
//! sends, to the switch or to another node, crosses the switch and leaves through some port,
//! so every exchange is exposed: a lost switch reply is recovered by the node's resend, a lost
//! 2PC message by the peer timeouts, leases and inquiries of the node state machine.
//!
//! ## Determinism
//!
//! Each port draws from its own generator, derived from the run's seed and the port
//! ([`pisadb_core::rng::derive`]), and draws the same numbers for every datagram whatever the
//! settings. Given the seed, the fate of the n-th datagram leaving port p is therefore fixed;
//! which datagram is the n-th is up to the real processes' timing.
//!
//! ## Bounds
//!
//! Held-back datagrams wait in one queue ordered by due time, of at most
//! [`MAX_HELD_DATAGRAMS`]; a datagram that finds it full is dropped and counted as such,
//! as a full transmit queue would drop it.

use pisadb_core::rng::{derive, SeededRng};
use pisadb_core::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Most datagrams the wires hold back at once.
pub const MAX_HELD_DATAGRAMS: usize = 65_536;

/// How the wire behind one switch port treats what leaves the port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortWire {
    /// Probability that a datagram is lost (0 to 1).
    pub loss: f64,
    /// Delay added to every datagram (µs).
    pub delay_us: u64,
    /// Each datagram's delay is drawn uniformly from `delay_us ± jitter_us` (µs).
    pub jitter_us: u64,
}

impl PortWire {
    /// A wire that loses and delays nothing.
    pub fn is_perfect(&self) -> bool {
        self.loss == 0.0 && self.delay_us == 0 && self.jitter_us == 0
    }

    /// Says which setting is out of range, if one is.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(format!("loss {}: expected a probability in [0, 1]", self.loss));
        }
        if self.delay_us > 10_000_000 || self.jitter_us > 10_000_000 {
            return Err(format!(
                "delay {} µs, jitter {} µs: expected at most 10 s each",
                self.delay_us, self.jitter_us
            ));
        }
        Ok(())
    }
}

/// What one port's wire did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortReport {
    /// The node behind the port.
    pub node: u16,
    /// Datagrams that left the port (at once or after their delay).
    pub sent: u64,
    /// Datagrams the wire lost.
    pub lost: u64,
    /// Datagrams held back for their delay.
    pub delayed: u64,
    /// Datagrams dropped because the queue of held-back datagrams was full.
    pub queue_full: u64,
}

struct Port {
    wire: PortWire,
    rng: SeededRng,
    report: PortReport,
}

/// A held-back datagram: (due time, arrival order, port, bytes), earliest first in a max-heap.
type Held = Reverse<(Nanos, u64, u16, Vec<u8>)>;

/// The wires of every port (see the module documentation).
pub struct Wires {
    ports: Vec<Port>,
    /// Held-back datagrams by due time, then arrival order.
    held: BinaryHeap<Held>,
    seq: u64,
}

impl Wires {
    /// Wires for ports `0..nodes`: `settings[p]` for port `p`, a perfect wire where there is
    /// none; each port's generator derives from `seed`.
    pub fn new(settings: &[PortWire], nodes: u16, seed: u64) -> Self {
        let ports = (0..nodes)
            .map(|p| Port {
                wire: settings.get(usize::from(p)).cloned().unwrap_or_default(),
                rng: derive(seed, &format!("wire/port/{p}")),
                report: PortReport { node: p, ..PortReport::default() },
            })
            .collect();
        Wires { ports, held: BinaryHeap::new(), seq: 0 }
    }

    /// A datagram leaves port `port` at `now`: it goes to `out` as `(port, bytes)` at once, or
    /// is held back, or is lost.
    pub fn egress(&mut self, now: Nanos, port: u16, bytes: Vec<u8>, out: &mut Vec<(u16, Vec<u8>)>) {
        let Some(p) = self.ports.get_mut(usize::from(port)) else {
            out.push((port, bytes));
            return;
        };
        if p.wire.is_perfect() {
            p.report.sent += 1;
            out.push((port, bytes));
            return;
        }
        // Two draws per datagram whatever the settings, so the n-th datagram's fate depends on
        // the seed and n only.
        let lose: f64 = p.rng.random();
        let spread: f64 = p.rng.random_range(-1.0..=1.0);
        if lose < p.wire.loss {
            p.report.lost += 1;
            return;
        }
        let delay_ns = (p.wire.delay_us as f64 + spread * p.wire.jitter_us as f64).max(0.0) * 1e3;
        if delay_ns < 1.0 {
            p.report.sent += 1;
            out.push((port, bytes));
            return;
        }
        if self.held.len() >= MAX_HELD_DATAGRAMS {
            p.report.queue_full += 1;
            return;
        }
        p.report.delayed += 1;
        self.seq += 1;
        self.held.push(Reverse((now + delay_ns as Nanos, self.seq, port, bytes)));
    }

    /// Moves every held-back datagram due at or before `now` to `out`.
    pub fn release(&mut self, now: Nanos, out: &mut Vec<(u16, Vec<u8>)>) {
        while self.held.peek().is_some_and(|Reverse((due, ..))| *due <= now) {
            let Some(Reverse((_, _, port, bytes))) = self.held.pop() else { break };
            if let Some(p) = self.ports.get_mut(usize::from(port)) {
                p.report.sent += 1;
            }
            out.push((port, bytes));
        }
    }

    /// When the next held-back datagram is due.
    pub fn next_due(&self) -> Option<Nanos> {
        self.held.peek().map(|Reverse((due, ..))| *due)
    }

    /// Each port's counters.
    pub fn reports(&self) -> Vec<PortReport> {
        self.ports.iter().map(|p| p.report.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lossy(loss: f64, delay_us: u64, jitter_us: u64) -> PortWire {
        PortWire { loss, delay_us, jitter_us }
    }

    /// Sends `n` numbered datagrams out of port 0 at time 0 and releases everything.
    fn fates(wire: PortWire, seed: u64, n: u32) -> (Vec<u32>, PortReport) {
        let mut wires = Wires::new(&[wire], 1, seed);
        let mut out = Vec::new();
        for i in 0..n {
            wires.egress(0, 0, i.to_le_bytes().to_vec(), &mut out);
        }
        wires.release(Nanos::MAX, &mut out);
        let order = out.iter().map(|(_, b)| u32::from_le_bytes(b[..4].try_into().unwrap())).collect();
        (order, wires.reports().remove(0))
    }

    #[test]
    fn a_perfect_wire_sends_everything_at_once_in_order() {
        let (order, report) = fates(PortWire::default(), 1, 100);
        assert_eq!(order, (0..100).collect::<Vec<_>>());
        assert_eq!((report.sent, report.lost, report.delayed), (100, 0, 0));
    }

    #[test]
    fn loss_drops_about_the_given_share_and_the_same_seed_drops_the_same_datagrams() {
        let (a, report) = fates(lossy(0.1, 0, 0), 7, 10_000);
        assert!((800..1200).contains(&report.lost), "about 10% of 10000 lost: {report:?}");
        assert_eq!(report.sent + report.lost, 10_000, "every datagram is counted once");
        assert_eq!(fates(lossy(0.1, 0, 0), 7, 10_000).0, a, "same seed, same survivors");
        assert_ne!(fates(lossy(0.1, 0, 0), 8, 10_000).0, a, "another seed, other survivors");
    }

    #[test]
    fn delay_holds_datagrams_until_due_and_jitter_reorders_them() {
        let mut wires = Wires::new(&[lossy(0.0, 200, 0)], 1, 1);
        let mut out = Vec::new();
        wires.egress(1_000, 0, vec![1], &mut out);
        assert!(out.is_empty(), "held back");
        assert_eq!(wires.next_due(), Some(201_000));
        wires.release(200_999, &mut out);
        assert!(out.is_empty(), "not due yet");
        wires.release(201_000, &mut out);
        assert_eq!(out, vec![(0, vec![1])]);
        let (order, report) = fates(lossy(0.0, 200, 150), 3, 1_000);
        assert_eq!(report.delayed, 1_000);
        assert_eq!(order.len(), 1_000, "jitter loses nothing");
        assert!(order.windows(2).any(|w| w[0] > w[1]), "delays of 50..350 µs reorder datagrams");
    }

    #[test]
    fn ports_draw_from_their_own_generators() {
        let mut wires = Wires::new(&[lossy(0.5, 0, 0), lossy(0.5, 0, 0)], 2, 1);
        let mut out = Vec::new();
        for i in 0..64u8 {
            wires.egress(0, 0, vec![i], &mut out);
            wires.egress(0, 1, vec![i], &mut out);
        }
        let survivors = |port| out.iter().filter(|(p, _)| *p == port).map(|(_, b)| b[0]).collect::<Vec<_>>();
        assert_ne!(survivors(0), survivors(1));
    }

    #[test]
    fn settings_out_of_range_are_refused_with_the_setting_named() {
        assert!(lossy(1.5, 0, 0).validate().unwrap_err().contains("loss 1.5"));
        assert!(lossy(0.0, 20_000_000, 0).validate().unwrap_err().contains("delay"));
        assert!(lossy(0.02, 200, 50).validate().is_ok());
    }
}
