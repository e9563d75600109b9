//! The world beyond one rack: two switches in a line with hosts on each side, driven by the
//! generic simulator with probe hosts that send scripted datagrams and record what arrives.
//!
//! - hop-by-hop forwarding: a datagram from host 0 (switch 0) reaches host 3 (switch 1) with
//!   its source kept, after crossing the trunk, at the time the link figures give;
//! - strict-priority service: on a trunk with two classes, a high-class frame sent behind a
//!   burst of low-class ones overtakes those still waiting;
//! - tail drop: a burst larger than the trunk's buffer loses frames, counted by class, and
//!   every frame is either delivered or counted as dropped;
//! - the control channel: a controller host writes a register cell of the far switch and
//!   reads it back over the network;
//! - non-reordering jitter: frames of one class crossing a strict-priority trunk under jitter
//!   injected with `reorder: false` arrive in the order they were sent, as on a FIFO trunk.

use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route, Send};
use pisadb_net::{Endpoint, LinkParams, PortDiscipline, Topology};
use pisadb_sim::{Faults, Restarts, World};
use pisadb_switch::alu::{Branch, Expr, RegisterAction};
use pisadb_switch::registers::PassContext;
use pisadb_switch::{PassDecision, Program, ProgramSpec, RegisterArraySpec, Reject, Switch, SwitchProfile};
use pisadb_wire::control::{ControlMessage, ControlOp, ControlResult, ControlStatus};
use pisadb_wire::{Frame, Kind, SWITCH_ID};

/// A program with one register array and no packets of its own: plain traffic is forwarded by
/// the pipeline, control requests are served by the control plane.
#[derive(Clone, Debug, Default)]
struct Cells;

/// The register array the controller writes.
/// The toy program's frame kind, declared here as a system declares its own.
const TOY_KIND: Kind = Kind::new(2);
const CELLS: u8 = 1;

impl Program for Cells {
    type Packet = ();

    fn spec(&self) -> ProgramSpec {
        let read = RegisterAction::always("read", Branch::set(Expr::LO, Expr::LO));
        let cells = RegisterArraySpec {
            id: CELLS,
            name: "cells".into(),
            stage: 0,
            entries: 16,
            width_bits: 32,
            pair: false,
            actions: vec![read],
        };
        ProgramSpec { name: "cells".into(), arrays: vec![cells], reserve_fast_recirc_port: false, tables: vec![] }
    }
    fn kind(&self) -> Kind {
        TOY_KIND
    }
    fn admit(&self, frame: &Frame, _payload: &[u8]) -> Result<(), Reject> {
        Err(Reject::rule("no_program_packets", format!("{:?}", frame.kind)))
    }
    fn execute_pass(&mut self, _ctx: &mut PassContext<'_>, _packet: &mut ()) -> PassDecision {
        PassDecision::Drop("no_program_packets")
    }
    fn encode(&self, _packet: &(), _out: &mut Vec<u8>) {}
    fn wire_bytes(&self, _packet: &()) -> usize {
        0
    }
}

/// A probe's one timer: send the `n`th scripted datagram.
#[derive(Clone, Copy, Debug)]
struct SendNth(usize);

impl TraceBytes for SendNth {
    fn trace(&self, hash: &mut TraceHash) {
        hash.write(&(self.0 as u64).to_le_bytes());
    }
}

/// What a probe saw arrive: (time, frame, payload).
type Arrival = (Nanos, Frame, Vec<u8>);

/// A host that sends scripted datagrams at given times and records what arrives.
struct Probe {
    /// (when, datagram) to send.
    script: Vec<(Nanos, Vec<u8>)>,
    /// Everything that arrived.
    arrived: Vec<Arrival>,
}

impl Probe {
    fn new(script: Vec<(Nanos, Vec<u8>)>) -> Self {
        Probe { script, arrived: Vec::new() }
    }
}

impl Host for Probe {
    type Timer = SendNth;
    type Log = ();
    type Event = ();

    fn cores(&self) -> u16 {
        1
    }
    fn start(&mut self, _now: Nanos, out: &mut HostOutbox<Self>) {
        out.timers.extend(self.script.iter().enumerate().map(|(i, (at, _))| (*at, SendNth(i))));
    }
    fn route(&self, _bytes: &[u8]) -> Route {
        Route::AnyCore
    }
    fn timer_core(&self, _timer: &SendNth) -> u16 {
        0
    }
    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], _out: &mut HostOutbox<Self>) {
        let (frame, payload) = Frame::decode(bytes).expect("a frame");
        self.arrived.push((now, frame, payload.to_vec()));
    }
    fn handle_timer(&mut self, _now: Nanos, SendNth(i): SendNth, out: &mut HostOutbox<Self>) {
        let bytes = self.script[i].1.clone();
        let dst = Frame::decode(&bytes).expect("a frame").0.dst;
        out.sends.push(Send { dst, bytes });
    }
    fn stop(&mut self) {}
    fn is_idle(&self) -> bool {
        true
    }
}

/// A plain datagram `src -> dst` whose payload is `class` then `tag` and `pad` zero bytes.
fn plain(src: u16, dst: u16, class: u8, tag: u8, pad: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src, dst }.encode(&mut bytes);
    bytes.extend_from_slice(&[class, tag]);
    bytes.resize(bytes.len() + pad, 0);
    bytes
}

/// The class of a plain datagram: the first payload byte (as hosts would mark DSCP).
fn class_of(bytes: &[u8]) -> u8 {
    match Frame::decode(bytes) {
        Ok((frame, payload)) if frame.kind == Kind::FORWARD => payload.first().copied().unwrap_or(0).min(1),
        _ => 0,
    }
}

type LineWorld = World<Probe, Switch<Cells>, ()>;

/// Two switches in a line, hosts 0 and 1 on switch 0, hosts 2 and 3 on switch 1, 10 GbE
/// everywhere; the trunk 0 -> 1 has `trunk` as its discipline.
fn line(scripts: Vec<Vec<(Nanos, Vec<u8>)>>, trunk: PortDiscipline) -> LineWorld {
    line_with(scripts, trunk, &LinkParams::ten_gbe())
}

/// [`line`] with hosts on `host_link` (a faster host link lets one host fill the trunk's queue).
fn line_with(scripts: Vec<Vec<(Nanos, Vec<u8>)>>, trunk: PortDiscipline, host_link: &LinkParams) -> LineWorld {
    let ten = LinkParams::ten_gbe();
    let mut topology = Topology::line(2, 2, host_link, &ten).expect("a valid line");
    topology.set_discipline(Endpoint::Switch(0), Endpoint::Switch(1), trunk).expect("the trunk exists");
    let hosts = scripts.into_iter().map(Probe::new).collect();
    let switches = (0..2).map(|_| Switch::new(SwitchProfile::tofino1(), Cells).expect("fits")).collect();
    let mut world = World::new(topology, hosts, switches, ()).expect("a valid world");
    world.set_classifier(class_of);
    world
}

fn run(world: &mut LineWorld) {
    world.run(0, 1_000_000, 1_000_000).expect("runs");
}

#[test]
fn a_datagram_crosses_both_switches_hop_by_hop_keeping_its_source() {
    let mut world = line(vec![vec![(1_000, plain(0, 3, 0, 7, 100))], vec![], vec![], vec![]], PortDiscipline::Fifo);
    run(&mut world);
    let arrived = &world.hosts()[3].arrived;
    assert_eq!(arrived.len(), 1, "one datagram reaches host 3");
    let (at, frame, payload) = &arrived[0];
    assert_eq!((frame.src, frame.dst, frame.kind), (0, 3, Kind::FORWARD), "source and destination kept");
    assert_eq!(payload[1], 7);
    // host NIC, three links (host->0, 0->1, 1->host), two switch passes, host NIC.
    let ten = LinkParams::ten_gbe();
    let profile = SwitchProfile::tofino1();
    let len = 6 + 2 + 100;
    let hop = ten.serialization_ns(len) + ten.propagation_ns;
    let switch_ns = profile.pass_ns() + profile.egress_ns;
    assert!(
        *at >= 1_000 + 2 * ten.nic_ns + 3 * hop + 2 * switch_ns,
        "arrived at {at} ns, before the three links and two switches could carry it"
    );
    assert!(*at <= 1_000 + 2 * ten.nic_ns + 3 * hop + 2 * switch_ns + 10, "arrived late at {at} ns");
    assert_eq!(world.switch(0).stats().forwarded, 1);
    assert_eq!(world.switch(1).stats().forwarded, 1);
    assert!(world.hosts()[2].arrived.is_empty(), "host 2 sees nothing");
}

#[test]
fn strict_priority_lets_a_high_class_frame_overtake_waiting_low_ones() {
    // Host 0, on 100 GbE, sends 8 low-class frames at once and one high-class frame 100 ns
    // later: they reach the 10 GbE trunk ten times faster than it serves them, and the high
    // one waits only for the frame on the wire.
    let hundred = LinkParams::hundred_gbe();
    let mut script: Vec<_> = (0..8).map(|i| (1_000, plain(0, 2, 0, i, 1000))).collect();
    script.push((1_100, plain(0, 2, 1, 99, 1000)));
    let trunk = PortDiscipline::StrictPriority { classes: 2, buffer_bytes: 1_000_000 };
    let mut world = line_with(vec![script, vec![], vec![], vec![]], trunk, &hundred);
    run(&mut world);
    let tags: Vec<u8> = world.hosts()[2].arrived.iter().map(|(_, _, p)| p[1]).collect();
    assert_eq!(tags.len(), 9, "every frame arrives: {tags:?}");
    let high = tags.iter().position(|&t| t == 99).expect("the high frame arrives");
    assert!(high <= 3, "the high-class frame overtook the waiting low ones, arriving {high}th: {tags:?}");
    let low: Vec<u8> = tags.iter().copied().filter(|&t| t != 99).collect();
    assert_eq!(low, (0..8).collect::<Vec<u8>>(), "low frames stay in order among themselves");

    // The same burst on a FIFO trunk: the high frame comes last.
    let mut script: Vec<_> = (0..8).map(|i| (1_000, plain(0, 2, 0, i, 1000))).collect();
    script.push((1_100, plain(0, 2, 1, 99, 1000)));
    let mut fifo = line_with(vec![script, vec![], vec![], vec![]], PortDiscipline::Fifo, &hundred);
    run(&mut fifo);
    assert_eq!(fifo.hosts()[2].arrived.last().map(|(_, _, p)| p[1]), Some(99));
}

#[test]
fn a_burst_beyond_the_trunk_buffer_is_tail_dropped_and_counted() {
    // One 10 GbE uplink paces its frames at the trunk's own rate, so the trunk's queue only
    // grows when two uplinks feed it: hosts 0 and 1 each send 20 frames of ~1 KB at once.
    let burst = |src: u16| (0..20).map(move |i| (1_000, plain(src, 2, 0, i, 1000))).collect::<Vec<_>>();
    let trunk = PortDiscipline::StrictPriority { classes: 2, buffer_bytes: 4_000 };
    let mut world = line(vec![burst(0), burst(1), vec![], vec![]], trunk);
    run(&mut world);
    let delivered = world.hosts()[2].arrived.len() as u64;
    let counters = world.port_counters(Endpoint::Switch(0), Endpoint::Switch(1)).expect("a priority port");
    let dropped: u64 = counters.iter().map(|c| c.dropped_frames).sum();
    let sent: u64 = counters.iter().map(|c| c.sent_frames).sum();
    assert!(dropped > 0, "two uplinks into one trunk overflow a 4 KB buffer");
    assert_eq!(sent, delivered, "every frame the port sent arrived");
    assert_eq!(sent + dropped, 40, "every frame was either sent or counted as dropped");
    assert!(counters.iter().all(|c| c.peak_occupancy_bytes <= 4_000), "the buffer never held more than its size");
}

#[test]
fn a_controller_writes_and_reads_a_register_of_the_far_switch() {
    // Host 2, on switch 1, is switch 1's controller; a request addressed to the switch is
    // served by the first switch it reaches, its own.
    let request = |id: u32, op: ControlOp| {
        let mut bytes = Vec::new();
        Frame { kind: Kind::CONTROL, src: 2, dst: SWITCH_ID }.encode(&mut bytes);
        ControlMessage::Request { request_id: id, op }.encode(&mut bytes);
        bytes
    };
    let write = ControlOp::WriteRegister { register: CELLS, index: 5, lo: 42, hi: 0 };
    let read = ControlOp::ReadRegister { register: CELLS, index: 5 };
    let script = vec![(1_000, request(1, write)), (200_000, request(2, read))];
    let mut world = line(vec![vec![], vec![], script, vec![]], PortDiscipline::Fifo);
    world.set_controller(1, 2);
    run(&mut world);
    assert_eq!(world.switch(1).registers().read(CELLS, 5).map(|(lo, _)| lo), Ok(42), "the cell was written");
    let replies: Vec<ControlMessage> =
        world.hosts()[2].arrived.iter().map(|(_, _, p)| ControlMessage::decode(p).expect("a reply")).collect();
    assert_eq!(replies.len(), 2, "both requests were answered");
    match replies[1] {
        ControlMessage::Reply {
            request_id: 2,
            status: ControlStatus::Ok,
            result: ControlResult::Cell { lo, .. },
            ..
        } => {
            assert_eq!(lo, 42, "the read returns what was written")
        }
        other => panic!("unexpected reply {other:?}"),
    }
    let (at, _, _) = world.hosts()[2].arrived[0];
    assert!(
        at >= 1_000 + SwitchProfile::tofino1().control_plane_ns,
        "a control operation takes the control-plane time"
    );
    assert_eq!(world.switch(0).stats().control_ops, 0, "switch 0 saw none of it");
}

#[test]
fn the_same_line_twice_gives_the_same_trace() {
    let script = || (0..8).map(|i| (1_000 + u64::from(i) * 10, plain(0, 3, i % 2, i, 500))).collect::<Vec<_>>();
    let trunk = PortDiscipline::StrictPriority { classes: 2, buffer_bytes: 3_000 };
    let mut a = line(vec![script(), script(), vec![], vec![]], trunk.clone());
    let mut b = line(vec![script(), script(), vec![], vec![]], trunk);
    run(&mut a);
    run(&mut b);
    assert_eq!(a.trace_hash(), b.trace_hash());
    assert!(a.events_processed() > 16);
}

/// Restarts for a plan without crashes: never called.
struct NoRestarts;

impl Restarts<Probe, Switch<Cells>> for NoRestarts {
    fn host(&mut self, id: u16, _log: &[()]) -> Result<Probe, String> {
        Err(format!("host {id} never crashes here"))
    }
    fn switch(&mut self, id: u16, _logs: &[Vec<()>], _epoch: u16) -> Result<Switch<Cells>, String> {
        Err(format!("switch {id} never crashes here"))
    }
}

/// The tags host 2 received in `class`, in arrival order, when host 0 sends 24 frames
/// alternating between classes 0 and 1 (tag = send index) through a `trunk` under jitter of
/// up to 20 µs per hop injected with `reorder: false` (no loss, no duplicates).
fn tags_under_in_order_jitter(trunk: PortDiscipline, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let script: Vec<_> = (0..24u8).map(|i| (1_000 + Nanos::from(i) * 200, plain(0, 2, i % 2, i, 200))).collect();
    let mut world = line(vec![script, vec![], vec![], vec![]], trunk);
    let faults = Faults { seed, jitter_ns: 20_000, reorder: false, heal_at_ns: 10_000_000, ..Faults::default() };
    world.inject(faults, Box::new(NoRestarts));
    run(&mut world);
    let arrived = &world.hosts()[2].arrived;
    assert_eq!(arrived.len(), 24, "no loss, so every frame arrives");
    let tags = |class: u8| arrived.iter().map(|(_, _, p)| p).filter(|p| p[0] == class).map(|p| p[1]).collect();
    (tags(0), tags(1))
}

#[test]
fn non_reordering_jitter_keeps_each_class_in_order_on_a_strict_priority_trunk() {
    // Jitter of up to 20 µs on frames 200 ns apart would let a later frame overtake an earlier
    // one if each were delayed independently; `reorder: false` queues them in order instead.
    let sent = |class: u8| (0..24u8).filter(|i| i % 2 == class).collect::<Vec<u8>>();
    for seed in 1..=8 {
        let trunk = PortDiscipline::StrictPriority { classes: 2, buffer_bytes: 1_000_000 };
        let (low, high) = tags_under_in_order_jitter(trunk, seed);
        assert_eq!(low, sent(0), "seed {seed}: class 0 arrived out of order on the strict-priority trunk");
        assert_eq!(high, sent(1), "seed {seed}: class 1 arrived out of order on the strict-priority trunk");
        // The FIFO trunk, the reference: in order too.
        let (low, high) = tags_under_in_order_jitter(PortDiscipline::Fifo, seed);
        assert_eq!((low, high), (sent(0), sent(1)), "seed {seed}: the FIFO trunk keeps order");
    }
}
