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
//! ## Outputs
//!
//! A pass ends in a [`PassDecision`]. Whatever leaves the switch goes through one path
//! (`emit`, by [`Output`]): it picks the frame (`Reply`, `SendTo` and `Multicast` come from
//! where the sender addressed the packet, P4DB's answers from the switch; `Forward` keeps the
//! sender as the source, so a store behind the switch answers the client directly;
//! `ToControlPlane` leaves the frame as the sender wrote it), then the egress port, and leaves
//! `profile.egress_ns` after the pass. `EmitAndRecirculate` does both things a Tofino does
//! with a mirrored copy: the copy leaves at that time, the packet goes to a recirculation port
//! at that same time and re-enters like any recirculated packet, so the copy costs no pass and
//! the packet's next pass is timed exactly as with `Recirculate`.
//!
//! ## Ports and routes
//!
//! The switch has a port per attached host, a port per neighbour switch, and the CPU port
//! toward the controller ([`Port`], [`crate::ports`]). Every [`Transmit`] names the port it
//! leaves by: an attached destination host's own port, else the port of the route the driver
//! set for it ([`Switch::set_route`]); a datagram with neither is refused or dropped as
//! `unknown_destination`, as before routes existed. Datagrams arrive through
//! [`Switch::handle_datagram_from`] with their ingress port; [`Switch::handle_datagram`] is the
//! host-port case. Only host ports check that the frame's source is the host on that port.
//! With no neighbour switches and no routes, the switch behaves exactly as a single-switch
//! rack's did.
//!
//! ## Control channel
//!
//! The host set with [`Switch::set_controller`] sits behind the CPU port. It sends
//! [`ControlMessage`] requests (read or write a register cell, insert or delete a table entry)
//! in [`Kind::CONTROL`] frames to [`SWITCH_ID`]; a request that arrives by the CPU port, or
//! whose source is the controller, is carried out, any other is refused and counted as
//! `not_controller`. The control plane serves one operation at a time, each taking
//! `profile.control_plane_ns` (driver and PCIe, an assumption): an operation that arrives at
//! `t` takes effect at `max(t, previous one's end) + control_plane_ns`, as an event between
//! packets, and its reply leaves by the port the request came in by at that moment. Control
//! frames addressed to a host are plain traffic, forwarded like [`Kind::FORWARD`] (a reply from
//! a switch further away crossing this one). Drivers can run the same operations directly in
//! their setup code ([`Switch::apply_control`], [`Switch::insert_entry`], ...).
//!
//! **Several switches.** A switch the driver gave an id ([`Switch::set_switch_id`]) also
//! serves requests addressed to it by id (`pisadb_wire::control::switch_address`) and
//! answers them from that address; a request addressed to another switch is forwarded by the
//! forwarding table like any datagram (the driver sets a route to every switch's address as
//! to every host), so a controller reaches every switch hop by hop through the data plane
//! (in-band control, as an SDN controller without a management network). Neighbour ports are
//! trusted like the CPU port for the source check, so a request from the controller host is
//! carried out wherever it entered; any switch whose controller is that host serves it.
//!
//! Packets the program sends to the control plane leave by the CPU port at the usual time; the
//! driver models the path to the controller like any link. A switch whose controller is not
//! attached to it sends them in-band, by its route to the controller host.
//!
//! ## Scope
//!
//! One pipe is modelled: every node port sits on the pipe that runs the program, as in the
//! P4DB testbed (8 nodes, one Tofino). Entry arbitration between new and recirculated packets
//! is first-come at clock granularity.

use crate::ports::{Port, PortError, Ports};
use crate::profile::SwitchProfile;
use crate::program::{LoadError, Output, PassDecision, Program, ProgramSpec, Recirc};
use crate::registers::{AccessError, PassContext, RegisterFile};
use crate::tables::{TableError, TableFile};
use pisadb_core::Nanos;
use pisadb_core::Scheduler;
use pisadb_wire::control::{switch_address, ControlMessage, ControlOp, ControlResult, ControlStatus, CONTROL_BYTES};
use pisadb_wire::{Frame, Kind, FRAME_BYTES, SWITCH_ID};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// A datagram leaving the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// When its last bit leaves the switch's egress port.
    pub at_ns: Nanos,
    /// The node it goes to.
    pub dst: u16,
    /// The datagram, frame included.
    pub bytes: Vec<u8>,
    /// The port it leaves by: `Port::Host(dst)` for an attached host, a neighbour switch's
    /// port for a routed one, `Port::ControlPlane` toward the controller.
    pub port: Port,
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
    /// Control-channel requests carried out and answered.
    pub control_ops: u64,
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
    /// The control plane has carried out `op` for host `to`; the reply leaves by `port`
    /// from address `from` (the one the request named).
    Control { to: u16, from: u16, port: Port, request_id: u32, op: ControlOp },
}

/// A PISA switch running program `P` in one pipe.
pub struct Switch<P: Program> {
    profile: SwitchProfile,
    program: P,
    spec: ProgramSpec,
    registers: RegisterFile,
    tables: TableFile,
    ports: Ports,
    multicast: BTreeMap<u16, Vec<u16>>,
    gid: u64,
    next_free_cycle: u64,
    pass_ns: Nanos,
    recirc_ports: Vec<RecircPort<P::Packet>>,
    next_waiting_port: usize,
    /// Pending events by (time, sequence).
    events: Scheduler<Event<P::Packet>>,
    now: Nanos,
    transmits: VecDeque<Transmit>,
    stats: SwitchStats,
    /// When the control plane finishes the operations it has been given.
    control_free_ns: Nanos,
    /// Its id among the network's switches, if the driver gave it one: control requests to
    /// that id's address are its own.
    id: Option<u16>,
}

impl<P: Program> Switch<P> {
    /// Loads `program` onto a switch of `profile`, or says why it does not fit.
    pub fn new(profile: SwitchProfile, program: P) -> Result<Self, LoadError> {
        let spec = program.spec();
        spec.check(&profile)?;
        let registers = RegisterFile::new(&spec);
        let tables = TableFile::new(&spec);
        let recirc_ports = (0..profile.recirc_ports_per_pipe.max(1))
            .map(|_| RecircPort { queues: Default::default(), waiting: 0, on_wire: None })
            .collect();
        Ok(Switch {
            pass_ns: profile.pass_ns(),
            profile,
            program,
            spec,
            registers,
            tables,
            ports: Ports::default(),
            multicast: BTreeMap::new(),
            gid: 0,
            next_free_cycle: 0,
            recirc_ports,
            next_waiting_port: 0,
            events: Scheduler::new(),
            now: 0,
            transmits: VecDeque::new(),
            stats: SwitchStats::default(),
            control_free_ns: 0,
            id: None,
        })
    }

    /// Sets the clock of an idle switch back to zero: a switch rebuilt by replaying the logs
    /// ran them at its own pace, ahead of the rack it is about to serve. Panics if anything
    /// is still in flight.
    pub fn restart_clock(&mut self) {
        assert!(self.events.is_empty() && self.transmits.is_empty(), "restart_clock on a busy switch");
        (self.now, self.next_free_cycle, self.control_free_ns) = (0, 0, 0);
    }

    /// Connects node `node` to a port; only attached nodes may send and receive.
    pub fn attach(&mut self, node: u16) {
        self.ports.attach(node);
    }

    /// Connects neighbour switch `neighbour` (an id the driver chooses) to a port:
    /// [`Port::Switch`]`(neighbour)` may then carry traffic in both directions.
    pub fn connect_switch(&mut self, neighbour: u16) {
        self.ports.connect_switch(neighbour);
    }

    /// Sends traffic for host `dst_host`, when it is not attached here, out of `port` (the
    /// driver fills this forwarding table from the topology). `port` must be an attached
    /// host's or a connected neighbour switch's.
    pub fn set_route(&mut self, dst_host: u16, port: Port) -> Result<(), PortError> {
        self.ports.set_route(dst_host, port)
    }

    /// Forgets the route to `dst_host`; returns the port it named.
    pub fn clear_route(&mut self, dst_host: u16) -> Option<Port> {
        self.ports.clear_route(dst_host)
    }

    /// The port traffic for host `dst_host` would leave by, if any.
    pub fn egress_port(&self, dst_host: u16) -> Option<Port> {
        self.ports.egress(dst_host)
    }

    /// Gives the switch its id among the network's switches: it then also serves control
    /// requests addressed to `pisadb_wire::control::switch_address(id)` (the driver routes
    /// the other switches' addresses like hosts, [`Switch::set_route`]).
    pub fn set_switch_id(&mut self, id: u16) {
        self.id = Some(id);
    }

    /// The id the driver gave the switch, if any.
    pub fn switch_id(&self) -> Option<u16> {
        self.id
    }

    /// Whether a control frame to `dst` is for this switch's control plane: the first
    /// switch's address, or its own.
    fn is_control_target(&self, dst: u16) -> bool {
        dst == SWITCH_ID || (self.id.is_some() && self.id.and_then(switch_address) == Some(dst))
    }

    /// Puts host `host` behind the CPU port: it receives what programs send to the control
    /// plane, and its control messages are carried out.
    pub fn set_controller(&mut self, host: u16) {
        self.ports.set_controller(host);
    }

    /// The controller host, if one is set.
    pub fn controller(&self) -> Option<u16> {
        self.ports.controller()
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

    /// The exact-match tables (control-plane reads).
    pub fn tables(&self) -> &TableFile {
        &self.tables
    }

    /// Installs `key -> value` in table `table` now, overwriting an existing key's value;
    /// returns the value it replaced (a driver's setup; over the wire, see the control channel).
    pub fn insert_entry(&mut self, table: u8, key: u64, value: u64) -> Result<Option<u64>, TableError> {
        self.tables.insert(table, key, value)
    }

    /// Deletes the entry of `key` from table `table` now; returns its value.
    pub fn delete_entry(&mut self, table: u8, key: u64) -> Result<u64, TableError> {
        self.tables.delete(table, key)
    }

    /// Carries out a control-plane operation now, as the control channel does when its time
    /// comes: what a controller can do over the wire, for a driver's setup code.
    pub fn apply_control(&mut self, op: &ControlOp) -> (ControlStatus, ControlResult) {
        let cell = |r: Result<(i64, i64), AccessError>| match r {
            Ok((lo, hi)) => (ControlStatus::Ok, ControlResult::Cell { lo, hi }),
            Err(e) => (access_status(e), ControlResult::Cell { lo: 0, hi: 0 }),
        };
        let entry = |r: Result<Option<u64>, TableError>| match r {
            Ok(previous) => (ControlStatus::Ok, ControlResult::Entry { previous }),
            Err(e) => (table_status(e), ControlResult::Entry { previous: None }),
        };
        match *op {
            ControlOp::ReadRegister { register, index } => cell(self.registers.read(register, index)),
            ControlOp::WriteRegister { register, index, lo, hi } => {
                let written = self.registers.write(register, index, lo, hi);
                cell(written.and_then(|()| self.registers.read(register, index)))
            }
            ControlOp::InsertEntry { table, key, value } => entry(self.tables.insert(table, key, value)),
            ControlOp::DeleteEntry { table, key } => entry(self.tables.delete(table, key).map(Some)),
        }
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

    /// A datagram arrives from node `from` at time `now` (by that host's port).
    pub fn handle_datagram(&mut self, now: Nanos, from: u16, bytes: &[u8]) {
        self.handle_datagram_from(now, Port::Host(from), bytes);
    }

    /// A datagram arrives by port `ingress` at time `now`. On a host port its frame's source
    /// must be that host; neighbour switches and the CPU port are trusted.
    pub fn handle_datagram_from(&mut self, now: Nanos, ingress: Port, bytes: &[u8]) {
        self.advance(now);
        let (frame, payload) = match Frame::decode(bytes) {
            Ok(parts) => parts,
            Err(e) => return self.reject(e.reason()),
        };
        if !self.ports.exists(ingress) {
            return self.reject("unregistered_port");
        }
        if matches!(ingress, Port::Host(host) if host != frame.src) {
            return self.reject("spoofed_source");
        }
        match frame.kind {
            Kind::CONTROL if self.is_control_target(frame.dst) => self.control_request(now, ingress, frame, payload),
            Kind::FORWARD | Kind::CONTROL => self.forward(now, frame.dst, bytes),
            _ => match self.program.admit(&frame, payload) {
                Ok(packet) => self.enter(now, InFlight { src: frame.src, dst: frame.dst, packet }),
                Err(e) => self.reject(e.reason()),
            },
        }
    }

    /// Plain traffic: out of the destination's port after a pass and egress, unchanged.
    fn forward(&mut self, now: Nanos, dst: u16, bytes: &[u8]) {
        let Some(port) = self.ports.egress(dst) else {
            return self.reject("unknown_destination");
        };
        self.stats.forwarded += 1;
        let at_ns = now + self.pass_ns + self.profile.egress_ns;
        self.transmits.push_back(Transmit { at_ns, dst, bytes: bytes.to_vec(), port });
    }

    /// A control message to the switch: queued for the control plane if the controller sent it.
    fn control_request(&mut self, now: Nanos, ingress: Port, frame: Frame, payload: &[u8]) {
        let from = frame.src;
        let controller = self.ports.controller();
        if ingress != Port::ControlPlane && controller != Some(from) {
            return self.reject("not_controller");
        }
        let (request_id, op) = match ControlMessage::decode(payload) {
            Ok(ControlMessage::Request { request_id, op }) => (request_id, op),
            Ok(ControlMessage::Reply { .. }) => return self.reject("control_reply_to_switch"),
            Err(e) => return self.reject(e.reason()),
        };
        let to = if ingress == Port::ControlPlane { controller.unwrap_or(from) } else { from };
        let done = self.control_free_ns.max(now) + self.profile.control_plane_ns;
        self.control_free_ns = done;
        self.schedule(done, Event::Control { to, from: frame.dst, port: ingress, request_id, op });
    }

    /// The control plane is done with `op`: apply it and send the reply.
    fn answer_control(&mut self, at_ns: Nanos, (to, from): (u16, u16), port: Port, request_id: u32, op: ControlOp) {
        let (status, result) = self.apply_control(&op);
        self.stats.control_ops += 1;
        let mut bytes = Vec::with_capacity(FRAME_BYTES + CONTROL_BYTES);
        Frame { kind: Kind::CONTROL, src: from, dst: to }.encode(&mut bytes);
        ControlMessage::Reply { request_id, op, status, result }.encode(&mut bytes);
        self.transmits.push_back(Transmit { at_ns, dst: to, bytes, port });
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
                Event::Control { to, from, port, request_id, op } => {
                    self.answer_control(at, (to, from), port, request_id, op)
                }
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
            let mut ctx = PassContext::with_tables(&mut self.registers, &self.tables, &mut self.gid).at(entry_ns);
            self.program.execute_pass(&mut ctx, &mut flight.packet)
        };
        self.stats.last_gid = self.gid;
        let leave_ns = entry_ns + self.pass_ns + self.profile.egress_ns;
        match decision {
            PassDecision::Reply => self.emit(leave_ns, Output::Reply, &flight),
            PassDecision::SendTo(node) => self.emit(leave_ns, Output::Node(node), &flight),
            PassDecision::Multicast(group) => self.emit(leave_ns, Output::Multicast(group), &flight),
            PassDecision::Forward => self.emit(leave_ns, Output::Forward, &flight),
            PassDecision::ToControlPlane => self.emit(leave_ns, Output::ControlPlane, &flight),
            PassDecision::Recirculate(kind) => self.recirculate(leave_ns, kind, flight),
            PassDecision::EmitAndRecirculate { copy, recirc } => {
                self.emit(leave_ns, copy, &flight);
                self.recirculate(leave_ns, recirc, flight);
            }
            PassDecision::Drop(reason) => self.drop_packet(reason),
        }
    }

    /// Sends the packet as it is now toward `to`, leaving at `at_ns`.
    fn emit(&mut self, at_ns: Nanos, to: Output, flight: &InFlight<P::Packet>) {
        let kind = self.program.kind();
        let (src, dst) = (flight.src, flight.dst);
        match to {
            Output::Reply => self.send(at_ns, Frame { kind, src: dst, dst: src }, flight),
            Output::Node(node) => self.send(at_ns, Frame { kind, src: dst, dst: node }, flight),
            Output::Forward => self.send(at_ns, Frame { kind, src, dst }, flight),
            Output::Multicast(group) => match self.multicast.get_mut(&group).map(std::mem::take) {
                // Taken out while the copies go (no clone per packet), then put back.
                Some(members) => {
                    members.iter().for_each(|&m| self.send(at_ns, Frame { kind, src: dst, dst: m }, flight));
                    self.multicast.insert(group, members);
                }
                None => self.drop_packet("unknown_multicast_group"),
            },
            Output::ControlPlane => match self.ports.controller() {
                // Not attached here: in-band, by the route to the controller host.
                Some(c) if !self.ports.is_attached(c) && self.ports.egress(c).is_some() => {
                    let port = self.ports.egress(c).expect("checked");
                    self.transmit(at_ns, c, port, Frame { kind, src, dst }, flight)
                }
                Some(c) => self.transmit(at_ns, c, Port::ControlPlane, Frame { kind, src, dst }, flight),
                None => self.drop_packet("no_controller"),
            },
        }
    }

    /// Sends `frame` and the packet out of the port toward `frame.dst`, if there is one.
    fn send(&mut self, at_ns: Nanos, frame: Frame, flight: &InFlight<P::Packet>) {
        let Some(port) = self.ports.egress(frame.dst) else {
            return self.drop_packet("unknown_destination");
        };
        self.transmit(at_ns, frame.dst, port, frame, flight);
    }

    fn transmit(&mut self, at_ns: Nanos, dst: u16, port: Port, frame: Frame, flight: &InFlight<P::Packet>) {
        let mut bytes = Vec::with_capacity(self.program.wire_bytes(&flight.packet));
        frame.encode(&mut bytes);
        self.program.encode(&flight.packet, &mut bytes);
        self.stats.emitted += 1;
        self.transmits.push_back(Transmit { at_ns, dst, bytes, port });
    }

    /// Sends the packet to a recirculation port of kind `kind`, reaching it at `at`.
    fn recirculate(&mut self, at: Nanos, kind: Recirc, flight: InFlight<P::Packet>) {
        self.stats.recirculations += 1;
        let port = self.pick_port(kind);
        self.schedule(at, Event::ReachPort { port, flight });
    }

    fn pick_port(&mut self, kind: Recirc) -> u8 {
        let n = self.recirc_ports.len();
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
        let p = &mut self.recirc_ports[usize::from(port)];
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
        let flight = self.recirc_ports[usize::from(port)].on_wire.as_ref().expect("packet on the wire");
        self.profile.recirc_serialization_ns(self.program.wire_bytes(&flight.packet))
    }

    fn re_enter(&mut self, at: Nanos, port: u8) {
        let p = &mut self.recirc_ports[usize::from(port)];
        let flight = p.on_wire.take().expect("packet on the wire");
        if let Some(next) = p.pop() {
            p.on_wire = Some(next);
            let done = at + self.serialization_ns(port);
            self.schedule(done, Event::ReEnter { port });
        }
        self.enter(at, flight);
    }
}

/// The status a failed control-plane register operation reports (a read or a write fails only
/// for an unknown array or an index past its end).
fn access_status(e: AccessError) -> ControlStatus {
    match e {
        AccessError::IndexOutOfRange { .. } => ControlStatus::IndexOutOfRange,
        _ => ControlStatus::UnknownRegister,
    }
}

/// The status a failed control-plane table operation reports.
fn table_status(e: TableError) -> ControlStatus {
    match e {
        TableError::UnknownTable(_) => ControlStatus::UnknownTable,
        TableError::KeyTooWide { .. } => ControlStatus::KeyTooWide,
        TableError::ValueTooWide { .. } => ControlStatus::ValueTooWide,
        TableError::TableFull { .. } => ControlStatus::TableFull,
        TableError::NoSuchEntry { .. } => ControlStatus::NoSuchEntry,
    }
}
