//! The switch: one pipe running one program, with its timing, as a sans-IO state machine.
//!
//! ## Why executing a pass atomically is exact
//!
//! In a PISA pipe one packet enters per clock, and packet `p` reaches stage `k` at cycle
//! `entry(p) + k`. Packets never overtake each other inside a pipe, so every stage sees the
//! packets in entry order, and two packets never occupy the same stage in the same cycle. Hence
//! for every register array (which lives in one stage), the sequence of accesses is the
//! sequence of packets in entry order. Running each pass to completion at its entry time, in
//! entry order, produces the same access sequence for every array, so the same register
//! contents and the same outputs as the staged execution. That is what [`Switch`] does: it gives
//! each packet an entry slot (one per clock), runs the whole pass there, and computes when the
//! packet leaves instead of stepping stages. The model thus costs one function call per pass.
//!
//! ## Time
//!
//! The switch reads no clock. Its driver (the simulator or the real runtime) passes `now` into
//! every call, in non-decreasing order, and asks [`Switch::poll_timeout`] when the switch next
//! needs to run by itself (a recirculated packet re-entering). Outputs are [`Transmit`]s with
//! the time the packet leaves the switch; the driver models the wire from there.
//!
//! - Entry: a packet arriving at `t` enters at the first free clock slot at or after `t`.
//! - A pass takes `profile.pass_ns()`; a packet leaving the switch then spends
//!   `profile.egress_ns` in the traffic manager, egress pipe and MAC.
//! - A recirculating packet goes to a recirculation port (after the same egress time), waits in
//!   that port's queue, is serialized at the port's line rate and re-enters ingress. Queues are
//!   finite: a packet that finds its port's queue full is dropped and counted. The traffic
//!   manager serves a port's queue by priority class (the packet's recirculation count, capped
//!   at 7: eight queues per port, as on Tofino), FIFO within a class, so long-waiting
//!   transactions go first (P4DB §5.3).
//!
//! ## Scope
//!
//! One pipe is modelled: every node port sits on the pipe that runs the program, as in the
//! P4DB testbed (8 nodes, one Tofino). Entry arbitration between new and recirculated packets
//! is first-come at clock granularity.

use crate::profile::SwitchProfile;
use crate::program::{LoadError, PassDecision, Program, ProgramSpec, Recirc};
use crate::registers::{PassContext, RegisterFile};
use pisadb_core::Nanos;
use pisadb_core::Scheduler;
use pisadb_wire::{Frame, Kind};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A datagram leaving the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// When its last bit leaves the switch's egress port.
    pub at_ns: Nanos,
    /// The node it goes to.
    pub dst: u16,
    /// The datagram, frame included.
    pub bytes: Vec<u8>,
}

/// Counters of everything the switch did; every packet ends up in exactly one final counter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SwitchStats {
    /// Pipeline passes executed (first passes and recirculated ones).
    pub passes: u64,
    /// Passes that ended in recirculation.
    pub recirculations: u64,
    /// Datagrams forwarded node to node without a program.
    pub forwarded: u64,
    /// Program packets sent out (replies, unicasts, multicast copies).
    pub emitted: u64,
    /// Packets dropped after admission, by reason (e.g. a full recirculation queue).
    pub dropped: BTreeMap<&'static str, u64>,
    /// Datagrams refused on arrival, by reason (malformed, rule violations, unknown nodes).
    pub rejected: BTreeMap<&'static str, u64>,
    /// The longest recirculation queue seen, in packets.
    pub recirc_queue_max: u32,
    /// The last global transaction id stamped.
    pub last_gid: u64,
}

/// A program packet inside the switch.
struct InFlight<P> {
    src: u16,
    dst: u16,
    packet: P,
}

/// Priority classes of a recirculation port's queue (Tofino: eight queues per port).
const CLASSES: usize = 8;

/// A recirculation port: a FIFO per priority class and at most one packet on the wire.
struct RecircPort<P> {
    /// Waiting packets, one FIFO per class; higher classes are served first.
    queues: [VecDeque<InFlight<P>>; CLASSES],
    /// Packets waiting in all classes.
    waiting: usize,
    /// The packet being serialized, which re-enters ingress when done.
    on_wire: Option<InFlight<P>>,
}

impl<P> RecircPort<P> {
    fn pop(&mut self) -> Option<InFlight<P>> {
        let flight = self.queues.iter_mut().rev().find_map(|q| q.pop_front())?;
        self.waiting -= 1;
        Some(flight)
    }
}

enum Event<P> {
    /// A packet reaches recirculation port `port`.
    ReachPort { port: u8, flight: InFlight<P> },
    /// The packet on port `port`'s wire has been serialized and re-enters ingress.
    ReEnter { port: u8 },
}

/// A PISA switch running program `P` in one pipe.
pub struct Switch<P: Program> {
    profile: SwitchProfile,
    program: P,
    spec: ProgramSpec,
    registers: RegisterFile,
    nodes: BTreeSet<u16>,
    multicast: BTreeMap<u16, Vec<u16>>,
    gid: u64,
    next_free_cycle: u64,
    pass_ns: Nanos,
    ports: Vec<RecircPort<P::Packet>>,
    next_waiting_port: usize,
    /// Pending events by (time, sequence).
    events: Scheduler<Event<P::Packet>>,
    now: Nanos,
    transmits: VecDeque<Transmit>,
    stats: SwitchStats,
}

impl<P: Program> Switch<P> {
    /// Loads `program` onto a switch of `profile`, or says why it does not fit.
    pub fn new(profile: SwitchProfile, program: P) -> Result<Self, LoadError> {
        let spec = program.spec();
        spec.check(&profile)?;
        let registers = RegisterFile::new(&spec);
        let ports = (0..profile.recirc_ports_per_pipe.max(1))
            .map(|_| RecircPort { queues: Default::default(), waiting: 0, on_wire: None })
            .collect();
        Ok(Switch {
            pass_ns: profile.pass_ns(),
            profile,
            program,
            spec,
            registers,
            nodes: BTreeSet::new(),
            multicast: BTreeMap::new(),
            gid: 0,
            next_free_cycle: 0,
            ports,
            next_waiting_port: 0,
            events: Scheduler::new(),
            now: 0,
            transmits: VecDeque::new(),
            stats: SwitchStats::default(),
        })
    }

    /// Sets the clock of an idle switch back to zero: a switch rebuilt by replaying the logs
    /// ran them at its own pace, ahead of the rack it is about to serve. Panics if anything
    /// is still in flight.
    pub fn restart_clock(&mut self) {
        assert!(self.events.is_empty() && self.transmits.is_empty(), "restart_clock on a busy switch");
        (self.now, self.next_free_cycle) = (0, 0);
    }

    /// Connects node `node` to a port; only attached nodes may send and receive.
    pub fn attach(&mut self, node: u16) {
        self.nodes.insert(node);
    }

    /// Sets multicast group `group` to `members` (the control plane's job).
    pub fn set_multicast_group(&mut self, group: u16, members: Vec<u16>) {
        self.multicast.insert(group, members);
    }

    /// The loaded program.
    pub fn program(&self) -> &P {
        &self.program
    }

    /// The loaded program's declaration.
    pub fn spec(&self) -> &ProgramSpec {
        &self.spec
    }

    /// The profile the switch models.
    pub fn profile(&self) -> &SwitchProfile {
        &self.profile
    }

    /// The register memory (control-plane reads).
    pub fn registers(&self) -> &RegisterFile {
        &self.registers
    }

    /// The register memory (control-plane writes: loading hot tuples, recovery).
    pub fn registers_mut(&mut self) -> &mut RegisterFile {
        &mut self.registers
    }

    /// The program, for the control plane (e.g. restoring what a rebuilt switch remembers).
    pub fn program_mut(&mut self) -> &mut P {
        &mut self.program
    }

    /// Continues global transaction ids after `gid` (a switch rebuilt from the nodes' logs
    /// must not hand out an id that is already logged).
    pub fn set_last_gid(&mut self, gid: u64) {
        self.gid = gid;
        self.stats.last_gid = gid;
    }

    /// The last global transaction id stamped.
    pub fn last_gid(&self) -> u64 {
        self.gid
    }

    /// What the switch has done so far.
    pub fn stats(&self) -> &SwitchStats {
        &self.stats
    }

    /// When the switch next needs [`Switch::handle_timeout`], if ever.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.events.peek_time()
    }

    /// The next datagram leaving the switch.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// Runs everything due at or before `now`.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.advance(now);
    }

    /// A datagram arrives from node `from` at time `now`.
    pub fn handle_datagram(&mut self, now: Nanos, from: u16, bytes: &[u8]) {
        self.advance(now);
        let (frame, payload) = match Frame::decode(bytes) {
            Ok(parts) => parts,
            Err(e) => return self.reject(e.reason()),
        };
        if !self.nodes.contains(&from) {
            return self.reject("unregistered_port");
        }
        if frame.src != from {
            return self.reject("spoofed_source");
        }
        if frame.kind == Kind::Forward {
            if !self.nodes.contains(&frame.dst) {
                return self.reject("unknown_destination");
            }
            self.stats.forwarded += 1;
            let at_ns = now + self.pass_ns + self.profile.egress_ns;
            self.transmits.push_back(Transmit { at_ns, dst: frame.dst, bytes: bytes.to_vec() });
            return;
        }
        match self.program.admit(&frame, payload) {
            Ok(packet) => self.enter(now, InFlight { src: frame.src, dst: frame.dst, packet }),
            Err(e) => self.reject(e.reason()),
        }
    }

    fn reject(&mut self, reason: &'static str) {
        *self.stats.rejected.entry(reason).or_default() += 1;
    }

    fn drop_packet(&mut self, reason: &'static str) {
        *self.stats.dropped.entry(reason).or_default() += 1;
    }

    fn advance(&mut self, now: Nanos) {
        debug_assert!(now >= self.now, "time went backwards: {now} < {}", self.now);
        while let Some((at, event)) = self.events.pop_due(now) {
            self.now = at;
            match event {
                Event::ReachPort { port, flight } => self.reach_port(at, port, flight),
                Event::ReEnter { port } => self.re_enter(at, port),
            }
        }
        self.now = self.now.max(now);
    }

    fn schedule(&mut self, at: Nanos, event: Event<P::Packet>) {
        self.events.push(at, event);
    }

    /// Runs one pass of `flight` at the first free entry slot at or after `t`.
    fn enter(&mut self, t: Nanos, mut flight: InFlight<P::Packet>) {
        let cycle = self.profile.ns_to_cycles(t).max(self.next_free_cycle);
        self.next_free_cycle = cycle + 1;
        let entry_ns = self.profile.cycles_to_ns(cycle).max(t);
        self.stats.passes += 1;
        let decision = {
            let mut ctx = PassContext::new(&mut self.registers, &mut self.gid);
            self.program.execute_pass(&mut ctx, &mut flight.packet)
        };
        self.stats.last_gid = self.gid;
        let leave_ns = entry_ns + self.pass_ns + self.profile.egress_ns;
        match decision {
            PassDecision::Reply => self.emit(leave_ns, flight.src, &flight),
            PassDecision::SendTo(node) => self.emit(leave_ns, node, &flight),
            PassDecision::Multicast(group) => match self.multicast.get(&group).cloned() {
                Some(members) => members.into_iter().for_each(|m| self.emit(leave_ns, m, &flight)),
                None => self.drop_packet("unknown_multicast_group"),
            },
            PassDecision::Recirculate(kind) => {
                self.stats.recirculations += 1;
                let port = self.pick_port(kind);
                self.schedule(leave_ns, Event::ReachPort { port, flight });
            }
            PassDecision::Drop(reason) => self.drop_packet(reason),
        }
    }

    fn emit(&mut self, at_ns: Nanos, dst: u16, flight: &InFlight<P::Packet>) {
        if !self.nodes.contains(&dst) {
            return self.drop_packet("unknown_destination");
        }
        let mut bytes = Vec::with_capacity(self.program.wire_bytes(&flight.packet));
        Frame { kind: self.program.kind(), src: flight.dst, dst }.encode(&mut bytes);
        self.program.encode(&flight.packet, &mut bytes);
        self.stats.emitted += 1;
        self.transmits.push_back(Transmit { at_ns, dst, bytes });
    }

    fn pick_port(&mut self, kind: Recirc) -> u8 {
        let n = self.ports.len();
        let reserved = usize::from(self.spec.reserve_fast_recirc_port && n > 1);
        if kind == Recirc::Fast && reserved == 1 {
            return 0;
        }
        let waiting = n - reserved;
        let port = reserved + self.next_waiting_port % waiting;
        self.next_waiting_port = (self.next_waiting_port + 1) % waiting;
        port as u8
    }

    fn reach_port(&mut self, at: Nanos, port: u8, flight: InFlight<P::Packet>) {
        let capacity = self.profile.recirc_queue_packets as usize;
        let p = &mut self.ports[usize::from(port)];
        if p.on_wire.is_none() {
            p.on_wire = Some(flight);
            let done = at + self.serialization_ns(port);
            self.schedule(done, Event::ReEnter { port });
            return;
        }
        if p.waiting >= capacity {
            return self.drop_packet("recirc_queue_full");
        }
        let class = (self.program.priority(&flight.packet) as usize).min(CLASSES - 1);
        p.queues[class].push_back(flight);
        p.waiting += 1;
        let len = p.waiting as u32;
        self.stats.recirc_queue_max = self.stats.recirc_queue_max.max(len);
    }

    fn serialization_ns(&self, port: u8) -> Nanos {
        let flight = self.ports[usize::from(port)].on_wire.as_ref().expect("packet on the wire");
        self.profile.recirc_serialization_ns(self.program.wire_bytes(&flight.packet))
    }

    fn re_enter(&mut self, at: Nanos, port: u8) {
        let p = &mut self.ports[usize::from(port)];
        let flight = p.on_wire.take().expect("packet on the wire");
        if let Some(next) = p.pop() {
            p.on_wire = Some(next);
            let done = at + self.serialization_ns(port);
            self.schedule(done, Event::ReEnter { port });
        }
        self.enter(at, flight);
    }
}
