//! The simulator's receive queues: a host that sorts its receive batches
//! ([`Host::sorts_receive_batches`]) gets the datagrams that waited for its busy core in class
//! order, larger first and stable within a class; a host that does not gets them in arrival
//! order.
//!
//! A sender host fires bursts of plain datagrams at a receiver whose handler takes 10 µs, so
//! everything after a burst's first datagram waits for the core. Each datagram's payload is
//! (class, tag, core): the receiver's class and route come from it, and it records the tags in
//! the order its handlers ran.

use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route, Send};
use pisadb_net::{LinkParams, Topology};
use pisadb_sim::World;
use pisadb_switch::{Forwarder, Switch, SwitchProfile};
use pisadb_wire::{Frame, Kind};

/// The sender's one timer: send burst `n`.
#[derive(Clone, Copy, Debug)]
struct Burst(usize);

impl TraceBytes for Burst {
    fn trace(&self, hash: &mut TraceHash) {
        hash.write(&(self.0 as u64).to_le_bytes());
    }
}

/// The tag an empty burst's timer records when it runs.
const TIMER_TAG: u8 = 255;

/// A datagram's payload: its class, its tag and the receiver core it names.
type Mark = (u8, u8, u16);

/// The sender (bursts at given times) or the receiver (records what it handles).
struct Node {
    /// Bursts to send to host 1: (when, datagrams).
    bursts: Vec<(Nanos, Vec<Mark>)>,
    /// Cores.
    cores: u16,
    /// CPU time of one datagram's handler.
    handler_ns: Nanos,
    /// Whether it sorts its receive batches.
    sorts: bool,
    /// (when, core named, tag) of each datagram handled, in handling order.
    handled: Vec<(Nanos, u16, u8)>,
}

fn payload(bytes: &[u8]) -> Mark {
    let (_, p) = Frame::decode(bytes).expect("a frame");
    (p[0], p[1], u16::from(p[2]))
}

impl Host for Node {
    type Timer = Burst;
    type Log = ();
    type Event = ();

    fn cores(&self) -> u16 {
        self.cores
    }
    fn start(&mut self, _now: Nanos, out: &mut HostOutbox<Self>) {
        out.timers.extend(self.bursts.iter().enumerate().map(|(i, (at, _))| (*at, Burst(i))));
    }
    fn route(&self, bytes: &[u8]) -> Route {
        Route::Core(payload(bytes).2)
    }
    fn timer_core(&self, _timer: &Burst) -> u16 {
        0
    }
    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        let (_, tag, core) = payload(bytes);
        self.handled.push((now, core, tag));
        out.cpu_ns = self.handler_ns;
    }
    fn handle_timer(&mut self, now: Nanos, Burst(i): Burst, out: &mut HostOutbox<Self>) {
        if self.bursts[i].1.is_empty() {
            // An empty burst is a timer that only marks when it ran.
            self.handled.push((now, 0, TIMER_TAG));
        }
        for &(class, tag, core) in &self.bursts[i].1 {
            let mut bytes = Vec::new();
            Frame { kind: Kind::FORWARD, src: 0, dst: 1 }.encode(&mut bytes);
            bytes.extend_from_slice(&[class, tag, core as u8]);
            out.sends.push(Send { dst: 1, bytes });
        }
    }
    fn stop(&mut self) {}
    fn is_idle(&self) -> bool {
        true
    }
    fn sorts_receive_batches(&self) -> bool {
        self.sorts
    }
    fn receive_class(&self, bytes: &[u8]) -> u8 {
        payload(bytes).0
    }
}

/// Runs the bursts from host 0 into host 1 (`cores` cores, 10 µs handlers, sorting or not);
/// what host 1 handled and the trace hash.
fn run(bursts: Vec<(Nanos, Vec<Mark>)>, cores: u16, sorts: bool) -> (Vec<(Nanos, u16, u8)>, u64) {
    run_with_timers(bursts, Vec::new(), cores, sorts)
}

/// [`run`], host 1 also running a timer on core 0 at each of `timers`.
fn run_with_timers(
    bursts: Vec<(Nanos, Vec<Mark>)>,
    timers: Vec<Nanos>,
    cores: u16,
    sorts: bool,
) -> (Vec<(Nanos, u16, u8)>, u64) {
    let node = |bursts, cores, handler_ns, sorts| Node { bursts, cores, handler_ns, sorts, handled: Vec::new() };
    let marks = timers.into_iter().map(|at| (at, Vec::new())).collect();
    let hosts = vec![node(bursts, 1, 0, false), node(marks, cores, 10_000, sorts)];
    let topology = Topology::rack(2, &LinkParams::ten_gbe());
    let switch = Switch::new(SwitchProfile::tofino1(), Forwarder).expect("fits");
    let mut world = World::new(topology, hosts, vec![switch], ()).expect("a valid world");
    world.run(0, 2_000_000, 100_000).expect("runs");
    (world.hosts()[1].handled.clone(), world.trace_hash())
}

fn tags(handled: &[(Nanos, u16, u8)]) -> Vec<u8> {
    handled.iter().map(|&(_, _, tag)| tag).collect()
}

/// One burst of eight datagrams for core 0, classes mixed, tags in sending order.
fn mixed_burst() -> Vec<Mark> {
    [0, 1, 0, 2, 1, 0, 2, 0].iter().enumerate().map(|(tag, &class)| (class, tag as u8, 0)).collect()
}

#[test]
fn a_waiting_batch_is_handled_high_class_first_and_in_arrival_order_within_a_class() {
    let (handled, _) = run(vec![(1_000, mixed_burst())], 1, true);
    // Tag 0 finds the core free; the other seven wait for it and are one batch:
    // class 2 (tags 3, 6), class 1 (1, 4), class 0 (2, 5, 7).
    assert_eq!(tags(&handled), vec![0, 3, 6, 1, 4, 2, 5, 7]);
    // One handler after another, each as the core frees.
    assert!(handled.windows(2).all(|w| w[1].0 == w[0].0 + 10_000), "{handled:?}");
}

#[test]
fn without_opting_in_waiting_datagrams_are_handled_in_arrival_order() {
    let (handled, _) = run(vec![(1_000, mixed_burst())], 1, false);
    assert_eq!(tags(&handled), (0..8).collect::<Vec<u8>>());
}

#[test]
fn datagrams_arriving_during_a_batch_wait_for_the_next_batch() {
    // The second burst arrives while the first batch (tags 1..8) is being handled: its
    // high-class datagrams do not jump into that batch, and are sorted among themselves.
    let second = vec![(0, 10, 0), (2, 11, 0), (1, 12, 0), (2, 13, 0)];
    let (handled, _) = run(vec![(1_000, mixed_burst()), (25_000, second)], 1, true);
    assert_eq!(tags(&handled), vec![0, 3, 6, 1, 4, 2, 5, 7, 11, 13, 12, 10]);
}

#[test]
fn each_core_has_its_own_queue() {
    // Core 0's backlog does not hold up core 1: its datagrams wait only for core 1.
    let burst: Vec<Mark> = vec![(0, 0, 0), (0, 1, 0), (0, 2, 0), (0, 3, 1), (2, 4, 0), (1, 5, 1)];
    let (handled, _) = run(vec![(1_000, burst)], 2, true);
    let on = |core| handled.iter().filter(|h| h.1 == core).map(|h| h.2).collect::<Vec<_>>();
    assert_eq!(on(0), vec![0, 4, 1, 2], "core 0: the class-2 datagram overtakes the waiting ones");
    assert_eq!(on(1), vec![3, 5], "core 1: its first datagram is handled at once");
    let first_on_1 = handled.iter().find(|h| h.1 == 1).map(|h| h.0).unwrap();
    let first_on_0 = handled.iter().find(|h| h.1 == 0).map(|h| h.0).unwrap();
    assert!(first_on_1 < first_on_0 + 10_000, "core 1 started before core 0 freed");
}

#[test]
fn the_same_bursts_give_the_same_trace_and_sorting_changes_it() {
    let bursts = || vec![(1_000, mixed_burst()), (25_000, mixed_burst())];
    let (a, hash_a) = run(bursts(), 1, true);
    let (b, hash_b) = run(bursts(), 1, true);
    assert_eq!((a, hash_a), (b, hash_b));
    assert_ne!(run(bursts(), 1, false).1, hash_a, "the handling order is in the trace");
}

#[test]
fn a_timer_that_fires_while_a_batch_runs_waits_for_the_batch_to_end() {
    // The batch of tags 1..8 runs from about 11 µs to 81 µs; the timer fires at 25 µs.
    let (handled, _) = run_with_timers(vec![(1_000, mixed_burst())], vec![25_000], 1, true);
    assert_eq!(tags(&handled), vec![0, 3, 6, 1, 4, 2, 5, 7, TIMER_TAG]);
}
