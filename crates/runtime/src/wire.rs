//! The wires behind the software switch's ports: loss, delay and jitter on what leaves a port.
//!
//! Real-mode tests need a network that loses and delays datagrams, and this kernel has no
//! `netem` queueing discipline to ask for one. A wire's behaviour lives at a switch port
//! anyway, so the switch process applies it: each port has a [`PortWire`] (a loss
//! probability, a delay and a jitter), and every datagram the switch sends out of that port is
//! dropped, held back, or sent at once accordingly. Jitter draws each datagram's delay
//! uniformly from `delay ± jitter`, so datagrams on one port overtake each other: loss,
//! delay and reordering come from one mechanism.
//!
//! ## Egress queues
//!
//! In front of each wire a port may have strict-priority classes sharing a finite buffer that
//! tail-drops ([`EgressQueues`], for systems whose program gives datagrams classes: SwitchTx's
//! §3.4.1). They are the very queues the simulator's links use, the switch model's
//! [`PriorityPort`] state machine, fed and polled with the process's clock: a datagram the
//! switch sends out of a port is classified (by the system's classifier, as the simulator's
//! `World::set_classifier`), pushed into the port at `now`, and handed to the wire (loss,
//! delay) when the port says its last bit has left. The port drains at the configured line
//! rate, so a backlog forms in it rather than in the kernel whenever the switch emits faster:
//! an urgent datagram then overtakes the less urgent ones still waiting. A port decides which
//! frame goes next only once the clock has passed the decision instant (see its module), so a
//! datagram through a priority port leaves in a later round of the switch's loop than the one
//! that sent it ([`Wires::next_due`] says when).
//!
//! ## Scope
//!
//! Settings apply to the switch-to-host direction of each host's wire. Everything a host
//! sends, to the switch or to another host, crosses the switch and leaves through some port,
//! so every exchange is exposed: a lost switch reply is recovered by the host's resend, a lost
//! host-to-host message by the protocols' timeouts. Trunks to neighbour switches have wires
//! too (perfect unless set), so that each port's traffic is counted the same way.
//!
//! ## Determinism
//!
//! Each port draws from its own generator, derived from the run's seed and the port
//! ([`pisadb_core::rng::derive`]), and draws the same numbers for every datagram whatever the
//! settings (a perfect wire draws nothing: it has no fate to decide). Given the seed, the fate
//! of the n-th datagram leaving port p is therefore fixed;
//! which datagram is the n-th is up to the real processes' timing.
//!
//! ## Bounds
//!
//! Held-back datagrams wait in one queue ordered by due time, of at most
//! [`MAX_HELD_DATAGRAMS`]; a datagram that finds it full is dropped and counted as such,
//! as a full transmit queue would drop it.

use crate::error::{Result, RuntimeError};
use pisadb_core::rng::{derive, SeededRng};
use pisadb_core::Nanos;
use pisadb_net::{ClassCounters, LinkParams, PortDiscipline, PriorityPort};
use pisadb_switch::Port;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// Most datagrams the wires hold back at once.
pub const MAX_HELD_DATAGRAMS: usize = 65_536;
/// The longest delay or jitter a wire accepts (µs): 10 s.
pub const MAX_DELAY_US: u64 = 10_000_000;

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

impl From<pisadb_harness::real::RealWire> for PortWire {
    /// The wire a real-mode run asks for (`--loss`, `--delay-us`, `--jitter-us`).
    fn from(w: pisadb_harness::real::RealWire) -> Self {
        PortWire { loss: w.loss, delay_us: w.delay_us, jitter_us: w.jitter_us }
    }
}

impl PortWire {
    /// A wire that loses and delays nothing.
    pub fn is_perfect(&self) -> bool {
        self.loss == 0.0 && self.delay_us == 0 && self.jitter_us == 0
    }

    /// Says which setting is out of range, if one is.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(RuntimeError::bad_setting("loss", self.loss, "a probability in [0, 1]"));
        }
        if self.delay_us > MAX_DELAY_US {
            return Err(RuntimeError::bad_setting("delay", format!("{} µs", self.delay_us), "at most 10 s"));
        }
        if self.jitter_us > MAX_DELAY_US {
            return Err(RuntimeError::bad_setting("jitter", format!("{} µs", self.jitter_us), "at most 10 s"));
        }
        Ok(())
    }
}

/// Strict-priority egress queues on every port of a switch (see "Egress queues" above).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EgressQueues {
    /// Classes, `1..=8`; the largest is the most urgent. A datagram classified beyond the
    /// last class goes in the last.
    pub classes: u8,
    /// The buffer all classes of one port share, in bytes as the switch model counts them
    /// (`pisadb_net::buffered_bytes`); a datagram that does not fit is dropped.
    pub buffer_bytes: u64,
    /// The rate each port drains at, Gbit/s.
    pub gbps: f64,
}

impl EgressQueues {
    /// Says which setting is out of range, if one is.
    pub fn validate(&self) -> Result<()> {
        let discipline = PortDiscipline::StrictPriority { classes: self.classes, buffer_bytes: self.buffer_bytes };
        discipline
            .check()
            .map_err(|e| RuntimeError::bad_setting("egress queues", format!("{self:?}"), e.to_string()))?;
        self.params().check("gbps").map_err(|e| RuntimeError::bad_setting("egress gbps", self.gbps, e.to_string()))
    }

    /// The wire behind the queues as the switch model sees it: the line rate only (loopback
    /// has no propagation to model; delay is the [`PortWire`]'s).
    fn params(&self) -> LinkParams {
        LinkParams { gbps: self.gbps, propagation_ns: 0, nic_ns: 0 }
    }

    /// An empty port with these settings.
    fn port(&self) -> Result<PriorityPort<Vec<u8>>> {
        PriorityPort::new(self.params(), self.classes, self.buffer_bytes)
            .map_err(|e| RuntimeError::bad_setting("egress queues", format!("{self:?}"), e.to_string()))
    }
}

/// What one wire did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireCounts {
    /// Datagrams that left the port (at once or after their delay).
    pub sent: u64,
    /// Datagrams the wire lost.
    pub lost: u64,
    /// Datagrams held back for their delay.
    pub delayed: u64,
    /// Datagrams dropped because the queue of held-back datagrams was full.
    pub queue_full: u64,
    /// Per class of the port's egress queues (empty without them): frames enqueued, sent,
    /// tail-dropped, peak occupancy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassCounters>,
}

/// What the wire behind one host port did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortReport {
    /// The host behind the port.
    pub node: u16,
    /// Its counters.
    #[serde(flatten)]
    pub counts: WireCounts,
}

/// What the wire of one trunk to a neighbour switch did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrunkReport {
    /// The neighbour switch.
    pub switch: u16,
    /// Its counters.
    #[serde(flatten)]
    pub counts: WireCounts,
}

struct PortState {
    wire: PortWire,
    rng: SeededRng,
    counts: WireCounts,
}

/// A held-back datagram: (due time, arrival order, port, bytes), earliest first in a max-heap.
type Held = Reverse<(Nanos, u64, Port, Vec<u8>)>;

/// The wires of every port of one switch (see the module documentation).
pub struct Wires {
    ports: BTreeMap<Port, PortState>,
    /// Held-back datagrams by due time, then arrival order.
    held: BinaryHeap<Held>,
    seq: u64,
    /// The strict-priority egress queue in front of each port that has one.
    queues: BTreeMap<Port, PriorityPort<Vec<u8>>>,
    /// A datagram's class in the egress queues.
    classify: fn(&[u8]) -> u8,
    /// The latest time shown to the egress queues (they may not go back).
    clock_ns: Nanos,
}

impl Wires {
    /// Wires for `ports`, each with its settings; each port's generator derives from `seed`
    /// and the port. A port not listed passes everything through uncounted.
    pub fn new(ports: impl IntoIterator<Item = (Port, PortWire)>, seed: u64) -> Self {
        let ports = ports
            .into_iter()
            .map(|(port, wire)| {
                let name = match port {
                    Port::Host(h) => format!("wire/port/{h}"),
                    Port::Switch(s) => format!("wire/trunk/{s}"),
                    Port::ControlPlane => "wire/cpu".to_string(),
                };
                (port, PortState { wire, rng: derive(seed, &name), counts: WireCounts::default() })
            })
            .collect();
        Wires { ports, held: BinaryHeap::new(), seq: 0, queues: BTreeMap::new(), classify: |_| 0, clock_ns: 0 }
    }

    /// Puts strict-priority egress queues with `settings` in front of every port listed at
    /// [`Wires::new`]; `classify` gives each datagram its class.
    pub fn with_egress_queues(mut self, settings: &EgressQueues, classify: fn(&[u8]) -> u8) -> Result<Self> {
        settings.validate()?;
        for &port in self.ports.keys() {
            self.queues.insert(port, settings.port()?);
        }
        self.classify = classify;
        Ok(self)
    }

    /// A datagram leaves port `port` at `now`: it waits in the port's egress queue if it has
    /// one (or is dropped there, the buffer full), else goes to the wire at once: to `out` as
    /// `(port, bytes)`, held back, or lost.
    pub fn egress(&mut self, now: Nanos, port: Port, bytes: Vec<u8>, out: &mut Vec<(Port, Vec<u8>)>) {
        self.clock_ns = self.clock_ns.max(now);
        if let Some(queue) = self.queues.get_mut(&port) {
            let class = (self.classify)(&bytes).min(queue.classes() - 1);
            // A refused datagram is counted by the port (tail drop).
            let _ = queue.push(self.clock_ns, class, bytes.len(), bytes);
            return;
        }
        self.onto_wire(now, port, bytes, out);
    }

    /// A datagram enters the wire behind `port` at `now`: to `out` at once, held back, or lost.
    fn onto_wire(&mut self, now: Nanos, port: Port, bytes: Vec<u8>, out: &mut Vec<(Port, Vec<u8>)>) {
        let Some(p) = self.ports.get_mut(&port) else {
            out.push((port, bytes));
            return;
        };
        if p.wire.is_perfect() {
            p.counts.sent += 1;
            out.push((port, bytes));
            return;
        }
        // Two draws per datagram whatever the settings, so the n-th datagram's fate depends on
        // the seed and n only.
        let lose: f64 = p.rng.random();
        let spread: f64 = p.rng.random_range(-1.0..=1.0);
        if lose < p.wire.loss {
            p.counts.lost += 1;
            return;
        }
        let delay_ns = (p.wire.delay_us as f64 + spread * p.wire.jitter_us as f64).max(0.0) * 1e3;
        if delay_ns < 1.0 {
            p.counts.sent += 1;
            out.push((port, bytes));
            return;
        }
        if self.held.len() >= MAX_HELD_DATAGRAMS {
            p.counts.queue_full += 1;
            return;
        }
        p.counts.delayed += 1;
        self.seq += 1;
        self.held.push(Reverse((now + delay_ns as Nanos, self.seq, port, bytes)));
    }

    /// Moves every datagram whose egress queue has let it go by `now` onto its wire, and every
    /// held-back datagram due at or before `now` to `out`.
    pub fn release(&mut self, now: Nanos, out: &mut Vec<(Port, Vec<u8>)>) {
        self.clock_ns = self.clock_ns.max(now);
        let mut left = Vec::new();
        for (&port, queue) in &mut self.queues {
            while let Some(arrival) = queue.pop_arrival(self.clock_ns) {
                left.push((port, arrival.item));
            }
        }
        for (port, bytes) in left {
            self.onto_wire(now, port, bytes, out);
        }
        while self.held.peek().is_some_and(|Reverse((due, ..))| *due <= now) {
            let Some(Reverse((_, _, port, bytes))) = self.held.pop() else { break };
            if let Some(p) = self.ports.get_mut(&port) {
                p.counts.sent += 1;
            }
            out.push((port, bytes));
        }
    }

    /// When [`Wires::release`] next has something to do: a held-back datagram is due, or an
    /// egress queue may let one go (strictly after its decision instant: see "Egress queues").
    pub fn next_due(&self) -> Option<Nanos> {
        let queues = self.queues.values().filter_map(|q| q.poll_timeout()).map(|at| at.max(self.clock_ns) + 1);
        self.held.peek().map(|Reverse((due, ..))| *due).into_iter().chain(queues).min()
    }

    /// Whether nothing waits in an egress queue or behind a wire.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.queues.values().all(PriorityPort::is_empty)
    }

    /// Port `port`'s counters, its egress queue's included.
    fn counts_of(&self, port: &Port, p: &PortState) -> WireCounts {
        let classes = self.queues.get(port).map(|q| q.counters().to_vec()).unwrap_or_default();
        WireCounts { classes, ..p.counts.clone() }
    }

    /// Each host port's counters, in host order.
    pub fn reports(&self) -> Vec<PortReport> {
        self.ports
            .iter()
            .filter_map(|(port, p)| match *port {
                Port::Host(node) => Some(PortReport { node, counts: self.counts_of(port, p) }),
                _ => None,
            })
            .collect()
    }

    /// Each trunk port's counters, in neighbour order.
    pub fn trunk_reports(&self) -> Vec<TrunkReport> {
        self.ports
            .iter()
            .filter_map(|(port, p)| match *port {
                Port::Switch(switch) => Some(TrunkReport { switch, counts: self.counts_of(port, p) }),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lossy(loss: f64, delay_us: u64, jitter_us: u64) -> PortWire {
        PortWire { loss, delay_us, jitter_us }
    }

    /// Sends `n` numbered datagrams out of port 0 at time 0 and releases everything.
    fn fates(wire: PortWire, seed: u64, n: u32) -> (Vec<u32>, WireCounts) {
        let mut wires = Wires::new([(Port::Host(0), wire)], seed);
        let mut out = Vec::new();
        for i in 0..n {
            wires.egress(0, Port::Host(0), i.to_le_bytes().to_vec(), &mut out);
        }
        wires.release(Nanos::MAX, &mut out);
        let order = out.iter().map(|(_, b)| u32::from_le_bytes(b[..4].try_into().unwrap())).collect();
        (order, wires.reports().remove(0).counts)
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
        let mut wires = Wires::new([(Port::Host(0), lossy(0.0, 200, 0))], 1);
        let mut out = Vec::new();
        wires.egress(1_000, Port::Host(0), vec![1], &mut out);
        assert!(out.is_empty(), "held back");
        assert_eq!(wires.next_due(), Some(201_000));
        wires.release(200_999, &mut out);
        assert!(out.is_empty(), "not due yet");
        wires.release(201_000, &mut out);
        assert_eq!(out, vec![(Port::Host(0), vec![1])]);
        let (order, report) = fates(lossy(0.0, 200, 150), 3, 1_000);
        assert_eq!(report.delayed, 1_000);
        assert_eq!(order.len(), 1_000, "jitter loses nothing");
        assert!(order.windows(2).any(|w| w[0] > w[1]), "delays of 50..350 µs reorder datagrams");
    }

    #[test]
    fn ports_draw_from_their_own_generators() {
        let ports = [Port::Host(0), Port::Host(1), Port::Switch(0)];
        let mut wires = Wires::new(ports.map(|p| (p, lossy(0.5, 0, 0))), 1);
        let mut out = Vec::new();
        for i in 0..64u8 {
            ports.iter().for_each(|&p| wires.egress(0, p, vec![i], &mut out));
        }
        let survivors = |port| out.iter().filter(|(p, _)| *p == port).map(|(_, b)| b[0]).collect::<Vec<_>>();
        assert_ne!(survivors(Port::Host(0)), survivors(Port::Host(1)));
        assert_ne!(survivors(Port::Host(0)), survivors(Port::Switch(0)));
        assert_eq!(wires.reports().len(), 2, "host ports");
        assert_eq!(wires.trunk_reports()[0].switch, 0);
        assert_eq!(wires.trunk_reports()[0].counts.lost + wires.trunk_reports()[0].counts.sent, 64);
    }

    /// The class of a test datagram: its first byte.
    fn first_byte(bytes: &[u8]) -> u8 {
        bytes[0]
    }

    /// One host port with three classes sharing `buffer_bytes`, draining at 0.01 Gbit/s (a
    /// 2-byte datagram is a minimum frame: 84 bytes on the wire, 67.2 µs; 64 in the buffer),
    /// behind `wire`.
    fn queued(buffer_bytes: u64, wire: PortWire) -> Wires {
        let queues = EgressQueues { classes: 3, buffer_bytes, gbps: 0.01 };
        Wires::new([(Port::Host(0), wire)], 1).with_egress_queues(&queues, first_byte).unwrap()
    }

    /// Runs `wires` from `now` until nothing waits, waking when it says; the datagrams' tags
    /// (second byte) in the order they left.
    fn drain(wires: &mut Wires, mut now: Nanos) -> Vec<u8> {
        let mut out = Vec::new();
        // Bounded: each wake-up lets a datagram go or moves a decision forward.
        for _ in 0..1_000 {
            let Some(due) = wires.next_due() else { break };
            now = now.max(due);
            wires.release(now, &mut out);
        }
        assert!(wires.is_empty(), "drained");
        out.iter().map(|(_, b)| b[1]).collect()
    }

    #[test]
    fn an_urgent_datagram_overtakes_the_backlog_of_a_slow_port() {
        let mut wires = queued(1 << 20, PortWire::default());
        let mut out = Vec::new();
        for tag in 0..5 {
            wires.egress(0, Port::Host(0), vec![0, tag], &mut out);
        }
        wires.egress(10, Port::Host(0), vec![1, 5], &mut out);
        wires.egress(20, Port::Host(0), vec![2, 6], &mut out);
        assert!(out.is_empty(), "everything waits in the queue");
        // Tag 0 took the idle wire at time 0; then the most urgent waiting goes first.
        assert_eq!(drain(&mut wires, 20), vec![0, 6, 5, 1, 2, 3, 4]);
        let classes = &wires.reports()[0].counts.classes;
        let sent: Vec<u64> = classes.iter().map(|c| c.sent_frames).collect();
        assert_eq!(sent, vec![5, 1, 1]);
    }

    #[test]
    fn without_egress_queues_a_port_sends_in_order_at_once() {
        let mut wires = Wires::new([(Port::Host(0), PortWire::default())], 1);
        let mut out = Vec::new();
        wires.egress(0, Port::Host(0), vec![0, 0], &mut out);
        wires.egress(10, Port::Host(0), vec![2, 1], &mut out);
        assert_eq!(out.iter().map(|(_, b)| b[1]).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(wires.next_due(), None);
        assert!(wires.reports()[0].counts.classes.is_empty());
    }

    #[test]
    fn a_full_egress_buffer_tail_drops_whatever_the_class_and_counts_it() {
        // Room for three minimum frames (64 buffered bytes each).
        let mut wires = queued(3 * 64, PortWire::default());
        let mut out = Vec::new();
        for tag in 0..4 {
            wires.egress(0, Port::Host(0), vec![0, tag], &mut out);
        }
        wires.egress(1, Port::Host(0), vec![2, 9], &mut out);
        assert_eq!(drain(&mut wires, 1), vec![0, 1, 2]);
        let classes = &wires.reports()[0].counts.classes;
        assert_eq!((classes[0].dropped_frames, classes[2].dropped_frames), (1, 1));
    }

    #[test]
    fn a_datagram_the_queue_lets_go_still_crosses_its_wire() {
        // The queue orders, the wire then loses: with loss 1 nothing arrives, all is counted.
        let mut wires = queued(1 << 20, lossy(1.0, 0, 0));
        let mut out = Vec::new();
        for tag in 0..3 {
            wires.egress(0, Port::Host(0), vec![tag % 3, tag], &mut out);
        }
        assert!(drain(&mut wires, 0).is_empty());
        let counts = &wires.reports()[0].counts;
        assert_eq!(counts.lost, 3);
        assert_eq!(counts.classes.iter().map(|c| c.sent_frames).sum::<u64>(), 3);
    }

    #[test]
    fn egress_settings_out_of_range_are_refused() {
        let bad = |classes, buffer_bytes, gbps| EgressQueues { classes, buffer_bytes, gbps }.validate().is_err();
        assert!(bad(0, 1 << 20, 100.0), "no class");
        assert!(bad(9, 1 << 20, 100.0), "more than 8 classes");
        assert!(bad(3, 10, 100.0), "a buffer smaller than one frame");
        assert!(bad(3, 1 << 20, 0.0), "no line rate");
        assert!(!bad(3, 1 << 20, 100.0));
    }

    #[test]
    fn settings_out_of_range_are_refused_with_the_setting_named() {
        let err = lossy(1.5, 0, 0).validate().unwrap_err().to_string();
        assert_eq!(err, "loss 1.5: expected a probability in [0, 1]");
        assert!(lossy(0.0, 20_000_000, 0).validate().unwrap_err().to_string().starts_with("delay 20000000 µs"));
        assert!(lossy(0.0, 0, 20_000_000).validate().unwrap_err().to_string().starts_with("jitter"));
        assert!(lossy(0.02, 200, 50).validate().is_ok());
    }
}
