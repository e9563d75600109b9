//! A switch as a process: any switch model ([`SwitchDevice`], the same one the simulator
//! drives) behind a UDP socket, with ports toward its hosts and toward neighbour switches.
//!
//! ## The loop
//!
//! Each round receives a batch of datagrams, maps each sender's address to a port (one of the
//! switch's hosts, or a neighbour switch: [`Network::ingress_ports`]; anything else is counted
//! as unregistered and dropped, never executed), hands them to the model with the current
//! time and their ingress port, runs what the model has due (recirculated packets
//! re-entering), and sends what leaves it in one batch, each datagram to the address behind
//! the port the model chose, through the wire behind that port ([`crate::wire`]: loss and
//! delay, if the config asks for them). Datagrams for hosts of other switches leave by the
//! trunk their route names: the switch process is one hop of a network of processes, and the
//! next switch forwards them on, keeping the frame (and so the source) as it is.
//!
//! The model's own latencies (a pass, recirculation) are hundreds of nanoseconds, below the
//! loop's granularity: packets go out as soon as the model has produced them. For the same
//! reason the model may run ahead of the wall clock: a packet waiting for a pipeline lock
//! recirculates every few hundred nanoseconds in model time, and a round of system calls per
//! recirculation would make the process, not the model, decide how long waiting takes. After
//! each batch the loop therefore runs every model event due within [`RUN_AHEAD_NS`] of now at
//! once; model time then leads the wall clock by at most that, and the next round's time is
//! the later of the two (model time never goes back).
//!
//! ## Egress queues
//!
//! If the network asks for them ([`Network::egress`]), every port has strict-priority classes
//! with a finite buffer in front of its wire: the switch model's own port state machine
//! ([`crate::wire`], "Egress queues"), fed with the classes the system's classifier gives
//! ([`serve_classified`]; the simulator's `World::set_classifier` takes the same function). The
//! loop wakes when a port can let its next datagram go, as it does for a delayed one.
//!
//! ## What the system adds
//!
//! The system builds the switch (its program, its initial registers, a rebuild from the
//! hosts' logs after a crash) before calling [`serve`], which attaches the hosts, connects the
//! neighbours, sets the routes, and only then opens the socket, so no datagram meets a
//! half-built switch. What the system reports beyond the traffic counters
//! ([`SwitchReport`]) is its own.

use crate::error::Result;
use crate::network::Network;
use crate::udp::BatchSocket;
use crate::wire::{PortReport, TrunkReport, Wires};
use crate::{cpu_seconds, stop_requested, RackConfig, Role};
use pisadb_core::Nanos;
use pisadb_switch::{Port, SwitchDevice, SwitchStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How far the model's time may lead the wall clock (see the module documentation).
pub const RUN_AHEAD_NS: Nanos = 50_000;

/// The longest a round waits for a datagram when nothing is due sooner.
const IDLE_WAIT_NS: Nanos = 1_000_000;

/// What a switch process did: its traffic and the model's counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SwitchReport {
    /// Datagrams received.
    pub datagrams_in: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// Datagrams from addresses that are neither the switch's hosts nor its neighbours.
    pub unregistered: u64,
    /// Seconds the switch ran.
    pub seconds: f64,
    /// CPU seconds the process used while serving (user and system, from `getrusage`; the
    /// planning before is not counted).
    #[serde(default)]
    pub cpu_s: f64,
    /// Receive calls that returned datagrams (`datagrams_in / batches_in` is the mean batch).
    #[serde(default)]
    pub batches_in: u64,
    /// Pipeline passes.
    pub passes: u64,
    /// Passes that recirculated.
    pub recirculations: u64,
    /// Datagrams forwarded host to host (to an attached host or on to a neighbour switch).
    pub forwarded: u64,
    /// Program packets sent out.
    pub emitted: u64,
    /// Packets dropped after admission, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Datagrams refused, by reason (malformed, unknown destination, spoofed sender, …).
    pub rejected: BTreeMap<String, u64>,
    /// The last GID stamped.
    pub last_gid: u64,
    /// What each host port's wire did (loss, delay: [`crate::wire`]).
    #[serde(default)]
    pub ports: Vec<PortReport>,
    /// What each trunk to a neighbour switch carried.
    #[serde(default)]
    pub trunks: Vec<TrunkReport>,
}

impl SwitchReport {
    /// Copies the model's counters into the report.
    fn take_stats(&mut self, stats: &SwitchStats) {
        let named = |m: &BTreeMap<&'static str, u64>| m.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        (self.passes, self.recirculations, self.forwarded, self.emitted) =
            (stats.passes, stats.recirculations, stats.forwarded, stats.emitted);
        (self.dropped, self.rejected, self.last_gid) = (named(&stats.dropped), named(&stats.rejected), stats.last_gid);
    }
}

/// Wires `switch` into switch `id` of `network`: attaches its hosts, connects its neighbours,
/// sets a route to every other host, gives it its id and sets a route to every other switch's
/// control address (control requests travel hop by hop to the switch they name,
/// `pisadb_wire::control`).
pub fn connect<S: SwitchDevice>(switch: &mut S, network: &Network, id: u16) -> Result<()> {
    for host in network.hosts_of(id) {
        switch.attach(host);
    }
    for neighbour in network.neighbours_of(id) {
        switch.connect_switch(neighbour);
    }
    for (host, port) in network.routes_of(id) {
        switch.set_route(host, port).map_err(|e| crate::RuntimeError::bad_setting("route", host, e.to_string()))?;
    }
    switch.set_switch_id(id);
    if !network.trunks.is_empty() {
        let topology = network.topology();
        let here = pisadb_net::Endpoint::Switch(id);
        for s in (0..network.switches.len() as u16).filter(|&s| s != id) {
            let next = topology.next_hop(here, pisadb_net::Endpoint::Switch(s));
            let (Some(address), Some(pisadb_net::Endpoint::Switch(next))) =
                (pisadb_wire::control::switch_address(s), next)
            else {
                continue;
            };
            switch
                .set_route(address, Port::Switch(next))
                .map_err(|e| crate::RuntimeError::bad_setting("route", address, e.to_string()))?;
        }
    }
    Ok(())
}

/// A datagram's class in the egress queues (0 is the least urgent).
pub type Classifier = fn(&[u8]) -> u8;

/// [`serve`], then writes the report to `report` if given (the `--report` file of
/// [`crate::supervisor::ConfigLaunch`]).
pub fn serve_and_report<S, C>(
    cfg: &RackConfig<C>,
    id: u16,
    switch: &mut S,
    wire_seed: u64,
    report: Option<&std::path::Path>,
) -> Result<SwitchReport>
where
    S: SwitchDevice,
    C: Clone + Serialize + serde::de::DeserializeOwned,
{
    serve_and_report_classified(cfg, id, switch, wire_seed, |_| 0, report)
}

/// [`serve_classified`], then writes the report to `report` if given.
pub fn serve_and_report_classified<S, C>(
    cfg: &RackConfig<C>,
    id: u16,
    switch: &mut S,
    wire_seed: u64,
    classify: Classifier,
    report: Option<&std::path::Path>,
) -> Result<SwitchReport>
where
    S: SwitchDevice,
    C: Clone + Serialize + serde::de::DeserializeOwned,
{
    let out = serve_classified(cfg, id, switch, wire_seed, classify)?;
    if let Some(path) = report {
        crate::write_json(path, &out)?;
    }
    Ok(out)
}

/// Runs `switch` as switch `id` of `cfg` until SIGINT/SIGTERM (see the module documentation);
/// the wires behind its ports draw from generators derived from `wire_seed`.
pub fn serve<S, C>(cfg: &RackConfig<C>, id: u16, switch: &mut S, wire_seed: u64) -> Result<SwitchReport>
where
    S: SwitchDevice,
    C: Clone + Serialize + serde::de::DeserializeOwned,
{
    serve_classified(cfg, id, switch, wire_seed, |_| 0)
}

/// [`serve`], with `classify` giving each datagram its class in the egress queues, if the
/// network has them ([`Network::egress`]; see "Egress queues" above).
pub fn serve_classified<S, C>(
    cfg: &RackConfig<C>,
    id: u16,
    switch: &mut S,
    wire_seed: u64,
    classify: Classifier,
) -> Result<SwitchReport>
where
    S: SwitchDevice,
    C: Clone + Serialize + serde::de::DeserializeOwned,
{
    let network = &cfg.network;
    connect(switch, network, id)?;
    let mut socket = BatchSocket::bind(network.switches[usize::from(id)])?;
    let cfg = &cfg.ready(Role::Switch(id))?;
    let ingress = network.ingress_ports(id);
    let host_wires = network.hosts_of(id).into_iter().map(|h| (Port::Host(h), network.wire_of(h)));
    let trunk_wires = network.neighbours_of(id).into_iter().map(|s| (Port::Switch(s), Default::default()));
    let mut wires = Wires::new(host_wires.chain(trunk_wires), wire_seed);
    if let Some(queues) = &network.egress {
        wires = wires.with_egress_queues(queues, classify)?;
    }
    let mut report = SwitchReport::default();
    let started = cfg.now_ns();
    let mut now: Nanos = started;
    let (mut leaving, mut outgoing) = (Vec::new(), Vec::new());
    let cpu_at_start = cpu_seconds();
    while !stop_requested() {
        let due = [switch.poll_timeout(), wires.next_due()].into_iter().flatten().min();
        let wait = due.map_or(IDLE_WAIT_NS, |t| t.saturating_sub(now)).min(IDLE_WAIT_NS);
        let received = socket.recv_batch(Duration::from_nanos(wait), |from, bytes| {
            report.datagrams_in += 1;
            match ingress.get(&from) {
                Some(&port) => switch.handle_datagram_from(now, port, bytes),
                None => report.unregistered += 1,
            }
        })?;
        report.batches_in += u64::from(received > 0);
        // The model needs time to move forward only.
        now = cfg.now_ns().max(now);
        switch.handle_timeout(now);
        let horizon = now + RUN_AHEAD_NS;
        while let Some(due) = switch.poll_timeout().filter(|&t| t <= horizon) {
            now = now.max(due);
            switch.handle_timeout(now);
        }
        while let Some(t) = switch.poll_transmit() {
            wires.egress(now, t.port, t.bytes, &mut leaving);
        }
        wires.release(now, &mut leaving);
        let controller = switch.controller();
        outgoing
            .extend(leaving.drain(..).filter_map(|(port, bytes)| Some((network.port_addr(port, controller)?, bytes))));
        report.datagrams_out += socket.send_batch(&outgoing) as u64;
        outgoing.clear();
    }
    report.seconds = cfg.now_ns().saturating_sub(started) as f64 / 1e9;
    report.cpu_s = cpu_seconds() - cpu_at_start;
    report.ports = wires.reports();
    report.trunks = wires.trunk_reports();
    report.take_stats(switch.stats());
    Ok(report)
}
