//! The runtime's own minimal system: hosts that ping each other through a network of switch
//! processes that only forward, and echo what they are pinged with. It exercises every
//! generic part — the host loop, the switch loop with neighbour switches and routes, the
//! supervisor — without any system's protocol, and is what the runtime's tests run.
//!
//! ## Pings and echoes
//!
//! Every host keeps `window` pings in flight, each from its own slot, to its peers in turn
//! (every other host of the network). A ping is a plain [`Kind::FORWARD`] datagram whose
//! payload repeats its origin: `kind u8 | slot u16 | seq u32 | origin u16`. The peer checks
//! that the frame's source is still the origin, answers with an echo to the frame's source,
//! and the pinging host checks that the echo comes from the peer it pinged. A switch that
//! rewrote a source on the way — on any hop — would make these checks fail
//! ([`EchoStats::wrong_source`]) or the echo go astray. A ping unanswered for `resend_ms` is
//! sent again (counted: loopback UDP may drop under load). When told to stop, a host sends no
//! new ping and is idle once every ping it sent is answered.
//!
//! ## Switches
//!
//! The switch runs [`Forwarder`], a program that admits nothing: every datagram is plain
//! traffic that the pipeline forwards by its destination, to an attached host or by the route
//! toward a neighbour switch.
//!
//! ## Running one
//!
//! [`run_line`] lays switches out in a line ([`pisadb_net::Topology::line`]) with hosts on
//! each, writes the rack config, and supervises one `pisadb switch` process per switch and
//! one `pisadb node` process per host (both dispatch to [`serve_switch`] and [`serve_host`]
//! for a config whose system is [`SYSTEM`]).

use crate::error::{Result, RuntimeError};
use crate::host_proc::{self, HostRun};
use crate::network::Network;
use crate::supervisor::{free_ports, ConfigLaunch};
use crate::switch_proc::{self, SwitchReport};
use crate::{write_json, RackConfig};
use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, LogCodec, Route, Send};
use pisadb_net::{LinkParams, Topology};
use pisadb_switch::{Switch, SwitchProfile};
use pisadb_wire::{Frame, Kind, FRAME_BYTES};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The system name in an echo rack's config.
pub const SYSTEM: &str = "echo";

/// Bytes of a ping or echo without its frame.
pub const MESSAGE_BYTES: usize = 9;

const PING: u8 = 1;
const ECHO: u8 = 2;

/// What every echo host is built from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EchoSpec {
    /// Pings in flight per host.
    pub window: u16,
    /// A ping unanswered this long is sent again (ms).
    pub resend_ms: u64,
}

impl Default for EchoSpec {
    fn default() -> Self {
        EchoSpec { window: 4, resend_ms: 50 }
    }
}

/// A ping or an echo, behind a [`Kind::FORWARD`] frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// An echo (else a ping).
    pub echo: bool,
    /// The pinging host's slot.
    pub slot: u16,
    /// The slot's ping counter.
    pub seq: u32,
    /// The pinging host, as it wrote itself in the payload.
    pub origin: u16,
}

impl Message {
    /// The datagram `src -> dst` carrying this message.
    pub fn datagram(&self, src: u16, dst: u16) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(FRAME_BYTES + MESSAGE_BYTES);
        Frame { kind: Kind::FORWARD, src, dst }.encode(&mut bytes);
        bytes.push(if self.echo { ECHO } else { PING });
        bytes.extend_from_slice(&self.slot.to_le_bytes());
        bytes.extend_from_slice(&self.seq.to_le_bytes());
        bytes.extend_from_slice(&self.origin.to_le_bytes());
        bytes
    }

    /// The frame and message of `bytes`, if it is one.
    pub fn decode(bytes: &[u8]) -> Option<(Frame, Message)> {
        let (frame, payload) = Frame::decode(bytes).ok()?;
        let p: &[u8; MESSAGE_BYTES] = payload.try_into().ok()?;
        let echo = match p[0] {
            PING => false,
            ECHO => true,
            _ => return None,
        };
        let message = Message {
            echo,
            slot: u16::from_le_bytes([p[1], p[2]]),
            seq: u32::from_le_bytes([p[3], p[4], p[5], p[6]]),
            origin: u16::from_le_bytes([p[7], p[8]]),
        };
        (frame.kind == Kind::FORWARD).then_some((frame, message))
    }
}

/// An echo host's timer: look for pings unanswered too long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResendTick;

impl TraceBytes for ResendTick {
    fn trace(&self, hash: &mut TraceHash) {
        hash.write(b"resend");
    }
}

/// An echo host logs nothing: its log has no record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoRecord {}

impl LogCodec for NoRecord {
    fn encode(&self, _out: &mut Vec<u8>) {
        match *self {}
    }
    fn decode(payload: &[u8]) -> Result<Self, String> {
        Err(format!("an echo host logs nothing, but its log holds a record of {} bytes", payload.len()))
    }
}

/// What an echo host reports to its driver: an echo came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echoed {
    /// The peer that echoed.
    pub peer: u16,
    /// Ping to echo (ns).
    pub round_trip_ns: Nanos,
}

/// One ping in flight.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    seq: u32,
    peer: u16,
    sent_at: Option<Nanos>,
}

/// What an echo host counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EchoStats {
    /// Pings sent (resends included).
    pub pings_sent: u64,
    /// Pings sent again after `resend_ms`.
    pub resent: u64,
    /// Echoes received for the ping in flight, by peer.
    pub echoes_by_peer: BTreeMap<u16, u64>,
    /// Pings answered with an echo, by the host that pinged.
    pub served_by_origin: BTreeMap<u16, u64>,
    /// Pings or echoes whose frame's source is not who sent them: a source rewritten on the way.
    pub wrong_source: u64,
    /// Echoes of a ping already answered or given up on.
    pub late: u64,
    /// Datagrams that are not pings or echoes.
    pub malformed: u64,
}

/// A host that pings its peers and echoes their pings (see the module documentation).
#[derive(Debug)]
pub struct EchoHost {
    id: u16,
    peers: Vec<u16>,
    next_peer: usize,
    slots: Vec<Slot>,
    resend_ns: Nanos,
    stopped: bool,
    /// What it counted so far.
    pub stats: EchoStats,
}

impl EchoHost {
    /// Host `id` of `hosts`, pinging every other host with `spec`'s window.
    pub fn new(id: u16, hosts: u16, spec: &EchoSpec) -> Self {
        EchoHost {
            id,
            peers: (0..hosts).filter(|&h| h != id).collect(),
            next_peer: 0,
            slots: vec![Slot::default(); usize::from(spec.window)],
            resend_ns: spec.resend_ms * 1_000_000,
            stopped: false,
            stats: EchoStats::default(),
        }
    }

    /// Sends slot `slot`'s next ping (to the next peer), unless stopped.
    fn ping(&mut self, now: Nanos, slot: usize, out: &mut HostOutbox<Self>) {
        if self.stopped || self.peers.is_empty() {
            self.slots[slot].sent_at = None;
            return;
        }
        let peer = self.peers[self.next_peer % self.peers.len()];
        self.next_peer += 1;
        let s = &mut self.slots[slot];
        (s.seq, s.peer, s.sent_at) = (s.seq.wrapping_add(1), peer, Some(now));
        self.send(slot, out);
    }

    /// Sends slot `slot`'s ping in flight.
    fn send(&mut self, slot: usize, out: &mut HostOutbox<Self>) {
        let s = self.slots[slot];
        let ping = Message { echo: false, slot: slot as u16, seq: s.seq, origin: self.id };
        out.sends.push(Send { dst: s.peer, bytes: ping.datagram(self.id, s.peer) });
        self.stats.pings_sent += 1;
    }
}

impl Host for EchoHost {
    type Timer = ResendTick;
    type Log = NoRecord;
    type Event = Echoed;

    fn cores(&self) -> u16 {
        1
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        (0..self.slots.len()).for_each(|slot| self.ping(now, slot, out));
        out.timers.push((now + self.resend_ns, ResendTick));
    }

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::AnyCore
    }

    fn timer_core(&self, _timer: &ResendTick) -> u16 {
        0
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        let Some((frame, m)) = Message::decode(bytes) else {
            self.stats.malformed += 1;
            return;
        };
        if !m.echo {
            if frame.src != m.origin {
                self.stats.wrong_source += 1;
                return;
            }
            *self.stats.served_by_origin.entry(m.origin).or_default() += 1;
            out.sends.push(Send { dst: frame.src, bytes: Message { echo: true, ..m }.datagram(self.id, frame.src) });
            return;
        }
        let slot = usize::from(m.slot);
        let Some(s) = self.slots.get(slot).copied().filter(|_| m.origin == self.id) else {
            self.stats.malformed += 1;
            return;
        };
        match s.sent_at {
            Some(sent) if s.seq == m.seq && frame.src == s.peer => {
                *self.stats.echoes_by_peer.entry(s.peer).or_default() += 1;
                out.events.push(Echoed { peer: s.peer, round_trip_ns: now.saturating_sub(sent) });
                self.ping(now, slot, out);
            }
            Some(_) if s.seq == m.seq => self.stats.wrong_source += 1,
            _ => self.stats.late += 1,
        }
    }

    fn handle_timer(&mut self, now: Nanos, _timer: ResendTick, out: &mut HostOutbox<Self>) {
        for slot in 0..self.slots.len() {
            if self.slots[slot].sent_at.is_some_and(|at| now.saturating_sub(at) >= self.resend_ns) {
                self.slots[slot].sent_at = Some(now);
                self.stats.resent += 1;
                self.send(slot, out);
            }
        }
        out.timers.push((now + self.resend_ns, ResendTick));
    }

    fn stop(&mut self) {
        self.stopped = true;
    }

    fn is_idle(&self) -> bool {
        self.stopped && self.slots.iter().all(|s| s.sent_at.is_none())
    }
}

/// The echo rack's switches run the switch crate's [`Forwarder`]: every datagram an echo rack
/// sends is plain traffic, forwarded by the pipeline itself.
pub use pisadb_switch::Forwarder;

/// What an echo host process reports when it stops (`report.json` in its data directory).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EchoReport {
    /// The host.
    pub id: u16,
    /// What it counted.
    pub stats: EchoStats,
    /// The longest round trip (µs).
    pub round_trip_max_us: f64,
    /// Whether it drained: every ping answered before it left.
    pub drained: bool,
    /// Datagrams from addresses other than its switch.
    pub not_from_switch: u64,
}

/// Runs host `id` of the echo rack `cfg` until it stops and drains; writes its report to
/// `<data_dir>/report.json` and returns it.
pub fn serve_host(cfg: &RackConfig<EchoSpec>, id: u16, data_dir: &Path) -> Result<EchoReport> {
    let hosts = cfg.network.hosts.len() as u16;
    if id >= hosts {
        return Err(RuntimeError::bad_setting("--id", id, format!("a host of the rack: 0..{hosts}")));
    }
    let name = format!("host {id}");
    let (mut wal, _) = host_proc::open_log::<NoRecord>(cfg.durable, data_dir, &name)?;
    let mut host = EchoHost::new(id, hosts, &cfg.spec);
    let mut round_trip_max_ns = 0;
    let run: HostRun = host_proc::serve(cfg, id, &name, &mut host, wal.as_mut(), |_, e| {
        round_trip_max_ns = round_trip_max_ns.max(e.round_trip_ns)
    })?;
    let report = EchoReport {
        id,
        stats: host.stats.clone(),
        round_trip_max_us: round_trip_max_ns as f64 / 1e3,
        drained: run.drained,
        not_from_switch: run.not_from_switch,
    };
    std::fs::create_dir_all(data_dir).map_err(|e| RuntimeError::io(data_dir, e))?;
    write_json(&data_dir.join("report.json"), &report)?;
    Ok(report)
}

/// Runs switch `id` of the echo rack `cfg` (a [`Forwarder`]) until SIGINT/SIGTERM; writes its
/// report to `report` if given.
pub fn serve_switch(cfg: &RackConfig<EchoSpec>, id: u16, report: Option<&Path>) -> Result<SwitchReport> {
    let switches = cfg.network.switches.len() as u16;
    if id >= switches {
        return Err(RuntimeError::bad_setting("--id", id, format!("a switch of the rack: 0..{switches}")));
    }
    let mut switch = Switch::new(SwitchProfile::tofino1(), Forwarder)
        .map_err(|e| RuntimeError::bad_setting("program", "forwarder", e.to_string()))?;
    switch_proc::serve_and_report(cfg, id, &mut switch, 0, report)
}

/// What to run with [`run_line`].
#[derive(Clone, Debug)]
pub struct LineOptions {
    /// Switch processes, in a line.
    pub switches: u16,
    /// Host processes on each switch.
    pub hosts_per_switch: u16,
    /// Seconds of pinging.
    pub seconds: f64,
    /// The hosts' settings.
    pub spec: EchoSpec,
    /// Where the config, the reports and the hosts' data directories go.
    pub data_dir: PathBuf,
    /// The `pisadb` binary to start the processes from.
    pub exe: PathBuf,
}

/// What [`run_line`] saw.
#[derive(Clone, Debug)]
pub struct LineResult {
    /// The network the rack ran on.
    pub network: Network,
    /// Each host's report, by host id.
    pub hosts: Vec<EchoReport>,
    /// Each switch's report, by switch id.
    pub switches: Vec<SwitchReport>,
}

/// Runs an echo rack of switches in a line with hosts on each (see the module documentation)
/// on loopback, and collects every process's report. A caller that wants Ctrl-C to stop the
/// rack in order installs [`crate::install_stop_signals`] first.
pub fn run_line(opts: &LineOptions) -> Result<LineResult> {
    let link = LinkParams::ten_gbe();
    let topology = Topology::line(opts.switches, opts.hosts_per_switch, &link, &link).map_err(|e| {
        RuntimeError::bad_setting("line", format!("{} x {}", opts.switches, opts.hosts_per_switch), e.to_string())
    })?;
    let hosts = opts.switches * opts.hosts_per_switch;
    let addrs = free_ports(usize::from(opts.switches + hosts))?;
    let (switch_addrs, host_addrs) = addrs.split_at(usize::from(opts.switches));
    let network = Network::from_topology(&topology, switch_addrs.to_vec(), host_addrs.to_vec())?;
    let mut supervisor =
        ConfigLaunch::start(SYSTEM, opts.spec.clone(), network.clone(), &opts.data_dir, opts.exe.clone())?;
    supervisor.start_together(opts.seconds)?;
    supervisor.wait_for_hosts()?;
    supervisor.stop_switches()?;
    let hosts = ConfigLaunch::host_reports(&opts.data_dir, hosts)?;
    let switches = ConfigLaunch::switch_reports(&opts.data_dir, opts.switches)?;
    Ok(LineResult { network, hosts, switches })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_switch::Port;

    #[test]
    fn messages_read_back_and_anything_else_is_refused() {
        let m = Message { echo: true, slot: 3, seq: 70_000, origin: 5 };
        let bytes = m.datagram(5, 9);
        let (frame, back) = Message::decode(&bytes).unwrap();
        assert_eq!((frame.src, frame.dst, back), (5, 9, m));
        assert!(Message::decode(&bytes[..bytes.len() - 1]).is_none());
        let mut bad = bytes.clone();
        bad[FRAME_BYTES] = 7;
        assert!(Message::decode(&bad).is_none());
    }

    /// Two hosts and the simplest driver: everything one sends, the other gets at once.
    #[test]
    fn hosts_echo_each_other_and_drain_once_stopped() {
        let spec = EchoSpec { window: 2, resend_ms: 1 };
        let mut hosts = [EchoHost::new(0, 2, &spec), EchoHost::new(1, 2, &spec)];
        let mut queue: Vec<Send> = Vec::new();
        for h in &mut hosts {
            let mut out = HostOutbox::<EchoHost>::default();
            h.start(0, &mut out);
            queue.extend(out.sends);
        }
        assert_eq!(queue.len(), 4, "two pings each");
        for round in 1..=10 {
            if round == 5 {
                hosts.iter_mut().for_each(Host::stop);
            }
            for send in std::mem::take(&mut queue) {
                let mut out = HostOutbox::<EchoHost>::default();
                hosts[usize::from(send.dst)].handle_datagram(round, &send.bytes, &mut out);
                queue.extend(out.sends);
            }
        }
        assert!(hosts.iter().all(Host::is_idle), "every ping answered after the stop");
        for h in &hosts {
            assert_eq!(h.stats.wrong_source + h.stats.late + h.stats.malformed, 0, "{:?}", h.stats);
            assert!(h.stats.echoes_by_peer.values().sum::<u64>() >= 4, "{:?}", h.stats);
        }
    }

    #[test]
    fn an_echo_from_another_host_than_the_one_pinged_counts_as_a_wrong_source() {
        let spec = EchoSpec::default();
        let mut host = EchoHost::new(0, 3, &spec);
        let mut out = HostOutbox::<EchoHost>::default();
        host.start(0, &mut out);
        let first = Message::decode(&out.sends[0].bytes).unwrap().1;
        let pinged = out.sends[0].dst;
        let other = if pinged == 1 { 2 } else { 1 };
        let forged = Message { echo: true, ..first }.datagram(other, 0);
        host.handle_datagram(5, &forged, &mut out);
        assert_eq!(host.stats.wrong_source, 1);
        let ping_with_rewritten_source = Message { origin: 2, ..first }.datagram(1, 0);
        host.handle_datagram(6, &ping_with_rewritten_source, &mut out);
        assert_eq!(host.stats.wrong_source, 2);
    }

    #[test]
    fn the_forwarder_forwards_plain_traffic_by_route_and_refuses_programs() {
        let mut switch = Switch::new(SwitchProfile::tofino1(), Forwarder).unwrap();
        switch.attach(0);
        switch.connect_switch(1);
        switch.set_route(5, Port::Switch(1)).unwrap();
        let ping = Message { echo: false, slot: 0, seq: 1, origin: 0 }.datagram(0, 5);
        switch.handle_datagram(0, 0, &ping);
        let t = switch.poll_transmit().expect("forwarded");
        assert_eq!((t.port, t.bytes), (Port::Switch(1), ping));
        let mut program = Vec::new();
        Frame { kind: Kind::new(2), src: 0, dst: 5 }.encode(&mut program);
        switch.handle_datagram(1, 0, &program);
        assert_eq!(switch.stats().rejected.get("no_program"), Some(&1));
    }
}
