//! The control channel across a network of switches: a controller host addresses a switch by
//! id (`pisadb_wire::control::switch_address`), the switches in between forward the request
//! by their routes, the target carries it out and its reply retraces the path.
//!
//! The network is a line of three switches: the controller (host 0) on switch 0, no host on
//! switch 1 (an aggregation switch), host 1 on switch 2. The controller writes and reads a
//! register of switch 2, two hops away, and of switch 1, which has no hosts.

use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route, Send};
use pisadb_net::{Endpoint, LinkParams, Topology};
use pisadb_sim::World;
use pisadb_switch::alu::{Branch, Expr, RegisterAction};
use pisadb_switch::registers::PassContext;
use pisadb_switch::{PassDecision, Program, ProgramSpec, RegisterArraySpec, Reject, Switch, SwitchProfile};
use pisadb_wire::control::{switch_address, ControlMessage, ControlOp, ControlResult, ControlStatus};
use pisadb_wire::{Frame, Kind};

/// A program with one register array and no packets of its own.
#[derive(Clone, Debug, Default)]
struct Cells;

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

#[derive(Clone, Copy, Debug)]
struct SendNth(usize);

impl TraceBytes for SendNth {
    fn trace(&self, hash: &mut TraceHash) {
        hash.write(&(self.0 as u64).to_le_bytes());
    }
}

/// A host that sends scripted datagrams and records what arrives: (time, frame, payload).
struct Probe {
    script: Vec<(Nanos, Vec<u8>)>,
    arrived: Vec<(Nanos, Frame, Vec<u8>)>,
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

const CONTROLLER: u16 = 0;

fn request(target: u16, id: u32, op: ControlOp) -> Vec<u8> {
    let mut bytes = Vec::new();
    let dst = switch_address(target).expect("an addressable switch");
    Frame { kind: Kind::CONTROL, src: CONTROLLER, dst }.encode(&mut bytes);
    ControlMessage::Request { request_id: id, op }.encode(&mut bytes);
    bytes
}

/// The line 0 – 1 – 2 with the controller on switch 0 and host 1 on switch 2; every switch
/// takes host 0 as its controller.
fn line(script: Vec<(Nanos, Vec<u8>)>) -> World<Probe, Switch<Cells>, ()> {
    line_of(script, Vec::new())
}

/// [`line`] with a script for host 1 too.
fn line_of(script: Vec<(Nanos, Vec<u8>)>, other: Vec<(Nanos, Vec<u8>)>) -> World<Probe, Switch<Cells>, ()> {
    let link = LinkParams::ten_gbe();
    let mut t = Topology::default();
    t.connect(Endpoint::Host(CONTROLLER), Endpoint::Switch(0), &link);
    t.connect(Endpoint::Host(1), Endpoint::Switch(2), &link);
    t.connect(Endpoint::Switch(0), Endpoint::Switch(1), &link);
    t.connect(Endpoint::Switch(1), Endpoint::Switch(2), &link);
    let hosts = vec![Probe { script, arrived: Vec::new() }, Probe { script: other, arrived: Vec::new() }];
    let switches = (0..3).map(|_| Switch::new(SwitchProfile::tofino1(), Cells).expect("fits")).collect();
    let mut world = World::new(t, hosts, switches, ()).expect("a valid world");
    for s in 0..3 {
        world.set_controller(s, CONTROLLER);
    }
    world
}

/// Each reply the controller got: (from address, request id, status, cell).
fn replies(world: &World<Probe, Switch<Cells>, ()>) -> Vec<(u16, u32, ControlStatus, i64)> {
    world.hosts()[usize::from(CONTROLLER)]
        .arrived
        .iter()
        .map(|(_, frame, payload)| match ControlMessage::decode(payload).expect("a control message") {
            ControlMessage::Reply { request_id, status, result: ControlResult::Cell { lo, .. }, .. } => {
                (frame.src, request_id, status, lo)
            }
            other => panic!("not a register reply: {other:?}"),
        })
        .collect()
}

#[test]
fn a_controller_reads_and_writes_registers_of_a_switch_two_hops_away_and_of_one_without_hosts() {
    let write = |v| ControlOp::WriteRegister { register: CELLS, index: 5, lo: v, hi: 0 };
    let read = ControlOp::ReadRegister { register: CELLS, index: 5 };
    let script = vec![
        (1_000, request(2, 1, write(42))),
        (1_000, request(1, 2, write(7))),
        (200_000, request(2, 3, read)),
        (200_000, request(1, 4, read)),
    ];
    let mut world = line(script);
    world.run(0, 1_000_000, 1_000_000).expect("runs");
    let cell = |s: u16| world.switch(s).registers().read(CELLS, 5).map(|(lo, _)| lo);
    assert_eq!((cell(0), cell(1), cell(2)), (Ok(0), Ok(7), Ok(42)), "each write landed on the switch it named");
    let mut got = replies(&world);
    got.sort_by_key(|r| r.1);
    let a = |s: u16| switch_address(s).unwrap();
    assert_eq!(
        got,
        vec![
            (a(2), 1, ControlStatus::Ok, 42),
            (a(1), 2, ControlStatus::Ok, 7),
            (a(2), 3, ControlStatus::Ok, 42),
            (a(1), 4, ControlStatus::Ok, 7),
        ],
        "every request answered by the switch it named, from its address"
    );
    let ops: Vec<u64> = (0..3).map(|s| world.switch(s).stats().control_ops).collect();
    assert_eq!(ops, vec![0, 2, 2], "the switches in between only forwarded");
    assert!(world.switch(0).stats().forwarded >= 4 && world.switch(1).stats().forwarded >= 2, "hop by hop");
    // Two hops each way, and the control plane's time: later than the near switch's reply.
    let cp = SwitchProfile::tofino1().control_plane_ns;
    let arrived = &world.hosts()[usize::from(CONTROLLER)].arrived;
    let at = |id: u32| {
        arrived.iter().find(|(_, _, p)| matches!(ControlMessage::decode(p), Ok(ControlMessage::Reply { request_id, .. }) if request_id == id)).unwrap().0
    };
    assert!(at(1) > 1_000 + cp && at(1) > at(2) - cp, "switch 2 is farther than switch 1");
}

#[test]
fn a_request_from_another_host_is_refused_by_the_switch_it_names() {
    let mut bytes = Vec::new();
    Frame { kind: Kind::CONTROL, src: 1, dst: switch_address(0).unwrap() }.encode(&mut bytes);
    let op = ControlOp::WriteRegister { register: CELLS, index: 1, lo: 5, hi: 0 };
    ControlMessage::Request { request_id: 9, op }.encode(&mut bytes);
    let mut world = line_of(Vec::new(), vec![(1_000, bytes)]);
    world.run(0, 1_000_000, 1_000_000).expect("runs");
    assert_eq!(world.switch(0).registers().read(CELLS, 1).map(|(lo, _)| lo), Ok(0), "not written");
    assert_eq!(world.switch(0).stats().rejected.get("not_controller"), Some(&1));
    assert!(world.hosts()[1].arrived.is_empty(), "no reply");
}
