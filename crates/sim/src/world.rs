//! The simulated world: hosts with cores, switches, and the links between them, driven by one
//! event scheduler.
//!
//! [`World`] runs any system: its hosts are any [`Host`] (a system with several kinds makes an
//! enum of them), its switches any [`SwitchDevice`], and what the hosts report goes to an
//! [`Observer`] the system provides (its metrics and its oracles' records). The world itself
//! knows no protocol, no workload and no program.
//!
//! ## Time and order
//!
//! Virtual time is integer nanoseconds. Events wait in one [`Scheduler`] ordered by (time,
//! sequence number), the sequence number being the order in which they were scheduled, so ties
//! break the same way every run: one seed, one history, one trace hash. The trace hash folds
//! explicit bytes of every event handled (time, host, kind, datagram or timer bytes).
//!
//! ## CPU
//!
//! Every host has [`Host::cores`] cores. A handler runs on a core ([`Host::route`] for a
//! datagram, [`Host::timer_core`] for a timer: a worker's own core for its transaction's
//! events, the first free core for requests from other hosts); if the core is busy the event
//! waits until it is free. The handler's effects on the host's state happen when it starts; its
//! outputs (datagrams, timers, events) take effect when it ends, `cpu_ns` later, and the core
//! is busy until then.
//!
//! ## Receive queues
//!
//! A datagram whose core is busy waits in that core's receive queue. For most hosts the queue
//! is FIFO and lives in the scheduler itself: the datagram's delivery is put off to the time its
//! core frees, and tried again then (the order the pinned goldens were recorded with, kept bit
//! for bit). A host that sorts its receive batches ([`Host::sorts_receive_batches`]; SwitchTx's
//! servers, seed 001 §3.4.1) gets an explicit queue per core instead: datagrams for a busy core
//! (or for a free core that still has a batch to finish) join its `waiting` list with the class
//! the host gives them ([`Host::receive_class`]); when the core frees, the driver takes the
//! whole waiting list as the next batch, stable-sorts it by class (larger first; arrival order
//! within a class) and hands its datagrams over one handler at a time, the next when the core
//! frees again. What arrives meanwhile waits for the batch after: a real server drains its
//! receive ring, sorts what it got, processes it, and only then looks again. A timer that fires
//! while a batch runs waits for the batch's end (the batch's next handler was scheduled before
//! the timer asks again). A datagram routed to any core goes to the core that is free soonest,
//! and among free ones to the one with the fewest datagrams queued. The sort costs no CPU time
//! in the model (a few comparisons per batch against microseconds of handlers).
//!
//! ## Network and switches
//!
//! The network is a [`Topology`] of hosts and switches (a rack: every host on switch 0; a line
//! of racks; a core and its ToRs; a hierarchy). Each switch learns at construction which hosts
//! hang off its own ports, which neighbour switches it has, and, from the topology's
//! forwarding tables, out of which neighbour port every other host lies.
//!
//! A datagram leaves a host after its NIC latency, is serialized on the host's uplink behind
//! earlier frames, propagates, and enters its switch's model, which executes or forwards it and
//! says when and by which port each output leaves. Toward a host, the output is serialized on
//! that host's downlink, propagates, and reaches the host after the NIC latency; toward a
//! neighbour switch it is serialized on the trunk, propagates, and enters that switch (no NIC:
//! switches are joined port to port). A packet for the CPU port goes to the controller host
//! over its link.
//!
//! Every link has its own figures ([`LinkParams`]: line rate, propagation, NIC) and its own
//! egress discipline ([`pisadb_net::PortDiscipline`]). A FIFO link is pure arithmetic (the frame's arrival
//! is known when it is sent: no extra events, the fast path of a rack). A strict-priority link
//! is a [`PriorityPort`] the world drives with events: a frame enters it when it reaches the
//! port, waits in its class behind a shared, finite buffer that tail-drops (counted in
//! [`World::port_counters`]), and leaves when the wire is free and no more urgent frame waits.
//! A datagram's class comes from the world's classifier ([`World::set_classifier`]; class 0
//! without one), as a switch's traffic manager maps header fields to egress queues.
//!
//! ## Faults
//!
//! A world may be given a [`Faults`] plan ([`World::inject`]): lossy, duplicating, reordering
//! and slow links, and crashes of hosts and of the switch, each restarted by the system's
//! [`Restarts`] from the hosts' write-ahead logs, which the world keeps as the hosts' disks. A
//! crash discards the outputs of a handler that had not finished (its records were not
//! durable). Events meant for a crashed incarnation (its timers, the switch's wake-ups) are
//! dropped by an epoch number.
//!
//! ## Bounds
//!
//! A run stops at its end time, or with [`SimError::StepLimit`] when it processed more events
//! than its limit (a livelock or a runaway configuration). Whether the window saw enough work
//! is the observer's to judge ([`SimError::Stalled`] is there for it).
//!
//! ## Where the code lives
//!
//! This module holds the world, its event loop and the hosts' handlers; `links` carries
//! datagrams over the links and out of the switches (FIFO arithmetic, strict-priority ports,
//! the fault plan's fate of each datagram), `rx` the receive queues of hosts that sort their
//! batches, and `recovery` crashes and restarts.

use crate::faults::{FaultStats, Faults, Target};
use pisadb_core::{Nanos, Scheduler, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route};
use pisadb_net::{ClassCounters, Endpoint, LinkParams, Topology};
use pisadb_switch::{Port, SwitchDevice};

mod links;
mod recovery;
mod rx;

use links::{DrivenPort, PortEntry};
use recovery::FaultState;
use rx::RxQueue;

/// Why a run did not finish normally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// More events than the step limit: the run is livelocked or far larger than intended.
    StepLimit {
        /// Events processed.
        events: u64,
        /// Virtual time reached.
        at_ns: Nanos,
    },
    /// No transaction committed in the measurement window.
    Stalled {
        /// Virtual time reached.
        at_ns: Nanos,
    },
    /// The configuration cannot run.
    Config(String),
    /// A crashed host or switch could not be restarted from the logs, or an observer found
    /// the history broken.
    Recovery(String),
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::StepLimit { events, at_ns } => write!(
                f,
                "step limit reached: {events} events by {at_ns} ns of virtual time (livelock, or raise the limit)"
            ),
            SimError::Stalled { at_ns } => {
                write!(f, "no transaction committed in the measurement window (by {at_ns} ns)")
            }
            SimError::Config(why) => write!(f, "{why}"),
            SimError::Recovery(why) => write!(f, "recovery failed: {why}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Builds what a crash destroyed, from the logs the world kept as the hosts' disks.
pub trait Restarts<H: Host, S> {
    /// Host `id`, recovered from its log.
    fn host(&mut self, id: u16, log: &[H::Log]) -> Result<H, String>;
    /// Switch `id`, rebuilt from `logs` (one per host), answering in `epoch` (its number of
    /// crashes so far); the world connects its ports again.
    fn switch(&mut self, id: u16, logs: &[Vec<H::Log>], epoch: u16) -> Result<S, String>;
}

/// Where in a run an event happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moment {
    /// When the handler that reported it ended.
    pub at: Nanos,
    /// Whether the measurement window has begun.
    pub in_window: bool,
    /// Whether the world is draining (hosts start no new work; nothing counts).
    pub stopping: bool,
    /// From when the network is healed and every restart done (0 without faults).
    pub healthy_from: Nanos,
}

/// What a system does with its hosts' events: metrics, and the records its oracles check.
pub trait Observer<H: Host, S> {
    /// Host `host` reported `event` from a handler that ended at `moment.at`. An error stops
    /// the run as [`SimError::Recovery`].
    fn on_event(&mut self, host: u16, event: H::Event, moment: Moment) -> Result<(), String>;
    /// The hosts are about to start at time 0.
    fn on_start(&mut self, _hosts: &[H]) {}
    /// The measurement window begins at `at`.
    fn on_window_start(&mut self, _at: Nanos, _hosts: &[H], _switches: &[&S]) {}
    /// The measurement window ends at `at`.
    fn on_window_end(&mut self, _at: Nanos, _hosts: &[H], _switches: &[&S], _moment: Moment) {}
}

/// An observer that keeps nothing (runs that only need the hosts' end state).
impl<H: Host, S> Observer<H, S> for () {
    fn on_event(&mut self, _host: u16, _event: H::Event, _moment: Moment) -> Result<(), String> {
        Ok(())
    }
}

/// Where a frame goes when it has crossed a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hop {
    /// Into a host (after the link's NIC latency).
    Host(u16),
    /// Into a switch, through the port facing the sender.
    Switch {
        /// The switch entered.
        switch: u16,
        /// Its port the frame comes in by.
        ingress: Port,
    },
}

enum Event<T> {
    HostTimer {
        host: u16,
        epoch: u32,
        timer: T,
    },
    Deliver {
        host: u16,
        bytes: Vec<u8>,
    },
    /// A core of a host that sorts its receive batches may be free for its next datagram.
    CoreFree {
        host: u16,
        core: u16,
        epoch: u32,
    },
    AtSwitch {
        switch: u16,
        ingress: Port,
        bytes: Vec<u8>,
    },
    SwitchWake {
        switch: u16,
        epoch: u32,
    },
    /// A frame reaches a strict-priority port (not boxed: events wait in the scheduler's slab
    /// and never move while it orders them, so a larger variant costs no allocation).
    EnterPort(PortEntry),
    /// Strict-priority link `link`'s port may have a frame done.
    PortWake {
        link: u32,
    },
    WindowStart,
    Crash(Target),
    Restart(Target),
}

/// One switch and its incarnation.
struct SwitchSlot<S> {
    /// The switch model.
    device: S,
    /// When it is due to wake by itself, if a wake-up is scheduled.
    wake: Option<Nanos>,
    /// Its incarnation number (its crashes so far).
    epoch: u32,
    /// Whether it is down.
    down: bool,
}

/// Hosts of type `H` on switches of type `S` joined by a [`Topology`], reporting to `O`.
pub struct World<H: Host, S, O> {
    /// The hosts, by id.
    hosts: Vec<H>,
    /// Per host, per core: busy until.
    cores: Vec<Vec<Nanos>>,
    /// Per host, per core: the receive queue (used only by hosts that sort their batches).
    rx: Vec<Vec<RxQueue>>,
    /// The switches, by id.
    switches: Vec<SwitchSlot<S>>,
    /// The links and forwarding tables.
    topology: Topology,
    /// Per host: the switch its uplink goes to, and that link's index in the topology.
    uplink: Vec<(u16, usize)>,
    /// Per switch, per host: the index of the link from the switch to the host, if any
    /// (looked up once: the send path is the simulator's hot loop).
    downlinks: Vec<Vec<Option<usize>>>,
    /// The strict-priority ports, by link index (`None` for a FIFO link: looked up on every
    /// send, so a vector rather than a map).
    ports: Vec<Option<DrivenPort>>,
    /// The class of a datagram on strict-priority links.
    classify: fn(&[u8]) -> u8,
    /// What waits to happen.
    events: Scheduler<Event<H::Timer>>,
    /// The current virtual time.
    now: Nanos,
    /// Events handled so far.
    processed: u64,
    /// The trace hash so far.
    trace: TraceHash,
    /// When the measurement window began.
    window_start: Option<Nanos>,
    /// Whether hosts were told to stop.
    stopping: bool,
    /// The fault plan, if any.
    faults: Option<FaultState<H, S>>,
    /// Each host's write-ahead log (its disk: survives crashes).
    logs: Vec<Vec<H::Log>>,
    /// Per host: the incarnation's number.
    host_epoch: Vec<u32>,
    /// Per host: whether it is down.
    host_down: Vec<bool>,
    /// An empty outbox whose vectors keep their capacity: each handler fills it and [`World::apply`]
    /// empties it again, so a handler allocates no outbox in steady state.
    spare: HostOutbox<H>,
    /// What the system does with its hosts' events.
    observer: O,
    /// Why the run must stop (a restart or an observer failed).
    failure: Option<String>,
}

/// Why a world cannot be built from the topology given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// The topology's hosts are not `0..hosts.len()`.
    #[error("the topology has hosts {topology:?}, but {given} hosts were given (ids must be 0..{given})")]
    Hosts {
        /// Host ids in the topology.
        topology: Vec<u16>,
        /// Hosts given.
        given: usize,
    },
    /// The topology's switches are not `0..switches.len()`.
    #[error("the topology has switches {topology:?}, but {given} switches were given (ids must be 0..{given})")]
    Switches {
        /// Switch ids in the topology.
        topology: Vec<u16>,
        /// Switches given.
        given: usize,
    },
    /// A host has no link to a switch.
    #[error("host {0} has no uplink to a switch")]
    NoUplink(u16),
    /// A switch refused the route the topology derived.
    #[error("switch {switch}: {why}")]
    Route {
        /// The switch.
        switch: u16,
        /// What it said.
        why: String,
    },
}

impl<H: Host, S: SwitchDevice, O: Observer<H, S>> World<H, S, O> {
    /// A rack: `hosts` (host `i` has id `i`) on one switch, every link with `link`.
    pub fn rack(hosts: Vec<H>, switch: S, link: &LinkParams, observer: O) -> Self {
        let topology = Topology::rack(hosts.len() as u16, link);
        Self::new(topology, hosts, vec![switch], observer).expect("a rack is a valid world")
    }

    /// A world of `hosts` and `switches` (ids are positions) joined as `topology` says: each
    /// switch gets its hosts attached, its neighbour ports connected and a route for every
    /// other host.
    pub fn new(topology: Topology, hosts: Vec<H>, switches: Vec<S>, observer: O) -> Result<Self, WorldError> {
        let n = hosts.len();
        if topology.hosts() != (0..n as u16).collect::<Vec<_>>() {
            return Err(WorldError::Hosts { topology: topology.hosts(), given: n });
        }
        if topology.switches() != (0..switches.len() as u16).collect::<Vec<_>>() {
            return Err(WorldError::Switches { topology: topology.switches(), given: switches.len() });
        }
        let uplink = (0..n as u16)
            .map(|h| {
                let switch = topology.uplink_of(h).ok_or(WorldError::NoUplink(h))?;
                let link = topology.link_index(Endpoint::Host(h), Endpoint::Switch(switch));
                Ok((switch, link.ok_or(WorldError::NoUplink(h))?))
            })
            .collect::<Result<Vec<_>, WorldError>>()?;
        let downlinks = (0..switches.len() as u16)
            .map(|s| (0..n as u16).map(|h| topology.link_index(Endpoint::Switch(s), Endpoint::Host(h))).collect())
            .collect();
        let mut switches: Vec<SwitchSlot<S>> =
            switches.into_iter().map(|device| SwitchSlot { device, wake: None, epoch: 0, down: false }).collect();
        for (id, slot) in switches.iter_mut().enumerate() {
            connect(&topology, id as u16, n as u16, &mut slot.device)?;
        }
        let ports = topology
            .links
            .iter()
            .map(|link| Some(DrivenPort { port: link.priority_port()?, wake: None, held: Vec::new() }))
            .collect();
        Ok(World {
            cores: hosts.iter().map(|host| vec![0; usize::from(host.cores())]).collect(),
            rx: hosts.iter().map(|host| (0..host.cores()).map(|_| RxQueue::default()).collect()).collect(),
            hosts,
            switches,
            topology,
            uplink,
            downlinks,
            ports,
            classify: |_| 0,
            events: Scheduler::new(),
            now: 0,
            processed: 0,
            trace: TraceHash::new(),
            window_start: None,
            stopping: false,
            faults: None,
            logs: vec![Vec::new(); n],
            host_epoch: vec![0; n],
            host_down: vec![false; n],
            spare: HostOutbox::<H>::default(),
            observer,
            failure: None,
        })
    }

    /// Sets how a datagram's class on strict-priority links is found (its first bytes are the
    /// frame header).
    pub fn set_classifier(&mut self, classify: fn(&[u8]) -> u8) {
        self.classify = classify;
    }

    /// Makes host `host` the controller of switch `switch`: packets for the CPU port go to it,
    /// and its control requests are served.
    pub fn set_controller(&mut self, switch: u16, host: u16) {
        self.switches[usize::from(switch)].device.set_controller(host);
    }

    /// Subjects the world to `faults`, restarting what crashes with `restarts`. Call before
    /// [`World::run`]. The hosts should log (their logs are what restarts read).
    pub fn inject(&mut self, faults: Faults, restarts: Box<dyn Restarts<H, S>>) {
        for c in &faults.crashes {
            self.schedule(c.at_ns, Event::Crash(c.target));
            self.schedule(c.at_ns + c.down_ns, Event::Restart(c.target));
        }
        let rng = pisadb_core::rng::derive(faults.seed, "faults");
        let healthy_from = faults.heal_at_ns.max(faults.last_restart_ns());
        self.faults = Some(FaultState { plan: faults, rng, restarts, stats: FaultStats::default(), healthy_from });
    }

    /// What the faults did (zeros without a plan).
    pub fn fault_stats(&self) -> FaultStats {
        self.faults.as_ref().map(|f| f.stats.clone()).unwrap_or_default()
    }

    /// Each host's write-ahead log, by host id.
    pub fn logs(&self) -> &[Vec<H::Log>] {
        &self.logs
    }

    /// Runs from time 0: warm-up until `warmup_ns`, then measures until `warmup_ns + measure_ns`.
    pub fn run(&mut self, warmup_ns: Nanos, measure_ns: Nanos, max_events: u64) -> Result<(), SimError> {
        self.observer.on_start(&self.hosts);
        for id in 0..self.hosts.len() {
            let mut out = HostOutbox::<H>::default();
            self.hosts[id].start(0, &mut out);
            self.apply(id as u16, 0, 0, out);
        }
        self.schedule(warmup_ns, Event::WindowStart);
        let end = warmup_ns + measure_ns;
        self.run_until(end, max_events)?;
        let moment = self.moment(end);
        // Observers see the switches only at the window's edges: a vector of references is cheap.
        let devices: Vec<&S> = self.switches.iter().map(|s| &s.device).collect();
        self.observer.on_window_end(end, &self.hosts, &devices, moment);
        Ok(())
    }

    /// Stops the hosts from starting new work and runs until everything in flight has
    /// finished and the network is empty (for end-of-run checks).
    pub fn drain(&mut self, max_events: u64) -> Result<(), SimError> {
        self.stopping = true;
        for host in &mut self.hosts {
            host.stop();
        }
        self.run_until(Nanos::MAX, max_events)
    }

    /// Runs the event loop until `end`, telling the probe ([`crate::probe`]) where it starts
    /// and ends.
    fn run_until(&mut self, end: Nanos, max_events: u64) -> Result<(), SimError> {
        crate::probe::fire(crate::probe::Phase::LoopStart { events: self.processed });
        let result = self.run_events(end, max_events);
        crate::probe::fire(crate::probe::Phase::LoopEnd { events: self.processed });
        result
    }

    fn run_events(&mut self, end: Nanos, max_events: u64) -> Result<(), SimError> {
        while let Some((at, event)) = self.events.pop_due(end) {
            self.now = at;
            self.processed += 1;
            if self.processed > max_events {
                return Err(SimError::StepLimit { events: self.processed, at_ns: at });
            }
            self.handle(at, event);
            if let Some(why) = self.failure.take() {
                return Err(SimError::Recovery(why));
            }
        }
        if end != Nanos::MAX {
            self.now = end;
        }
        Ok(())
    }

    fn schedule(&mut self, at: Nanos, event: Event<H::Timer>) {
        self.events.push(at, event);
    }

    fn moment(&self, at: Nanos) -> Moment {
        Moment {
            at,
            in_window: self.window_start.is_some(),
            stopping: self.stopping,
            healthy_from: self.faults.as_ref().map_or(0, |f| f.healthy_from),
        }
    }

    fn handle(&mut self, now: Nanos, event: Event<H::Timer>) {
        match event {
            Event::HostTimer { host, epoch, timer } => self.host_timer(now, host, epoch, timer),
            Event::Deliver { host, bytes } => self.deliver(now, host, bytes),
            Event::CoreFree { host, core, epoch } => self.core_free(now, host, usize::from(core), epoch),
            Event::AtSwitch { switch, ingress, bytes } => {
                if self.switches[usize::from(switch)].down {
                    return self.count(|s| s.to_down += 1);
                }
                match ingress {
                    Port::Host(from) => {
                        self.trace_event(now, from, b"switch", &bytes);
                        self.switches[usize::from(switch)].device.handle_datagram(now, from, &bytes);
                    }
                    Port::Switch(_) | Port::ControlPlane => {
                        let port_id = match ingress {
                            Port::Switch(neighbour) => neighbour,
                            _ => u16::MAX,
                        };
                        self.trace_event(now, switch, b"switch from port", &port_id.to_le_bytes());
                        self.trace.write(&bytes);
                        self.switches[usize::from(switch)].device.handle_datagram_from(now, ingress, &bytes);
                    }
                }
                self.drain_switch(now, switch);
            }
            Event::SwitchWake { switch, epoch } => {
                let slot = &mut self.switches[usize::from(switch)];
                if epoch != slot.epoch {
                    return;
                }
                slot.wake = None;
                slot.device.handle_timeout(now);
                self.drain_switch(now, switch);
            }
            Event::EnterPort(entry) => {
                let PortEntry { link, hop, after_ns, class, bytes } = entry;
                self.enter_port(now, link, hop, after_ns, class, bytes)
            }
            Event::PortWake { link } => self.wake_port(now, link as usize),
            Event::WindowStart => {
                self.window_start = Some(now);
                let devices: Vec<&S> = self.switches.iter().map(|s| &s.device).collect();
                self.observer.on_window_start(now, &self.hosts, &devices);
            }
            Event::Crash(target) => {
                self.trace_target(now, b"crash ", target);
                self.crash(target);
            }
            Event::Restart(target) => {
                self.trace_target(now, b"restart ", target);
                if let Err(why) = self.restart(now, target) {
                    self.failure = Some(format!("{target} at {now} ns: {why}"));
                }
            }
        }
    }

    fn host_timer(&mut self, now: Nanos, host: u16, epoch: u32, timer: H::Timer) {
        let h = usize::from(host);
        if self.host_down[h] || epoch != self.host_epoch[h] {
            return; // set by an incarnation that crashed
        }
        // Hashed before the core check: a timer that waits for its core is hashed again when
        // it runs (the pinned hashes count both).
        self.trace.write(&now.to_le_bytes());
        self.trace.write(&host.to_le_bytes());
        timer.trace(&mut self.trace);
        let core = usize::from(self.hosts[h].timer_core(&timer));
        let free = self.cores[h][core];
        if free > now {
            self.schedule(free, Event::HostTimer { host, epoch, timer });
            return;
        }
        let mut out = std::mem::take(&mut self.spare);
        self.hosts[h].handle_timer(now, timer, &mut out);
        self.finish_handler(host, core, now, out);
    }

    fn deliver(&mut self, now: Nanos, host: u16, bytes: Vec<u8>) {
        let h = usize::from(host);
        if self.host_down[h] {
            return self.count(|s| s.to_down += 1);
        }
        if self.hosts[h].sorts_receive_batches() {
            return self.enqueue(now, host, bytes);
        }
        let core = match self.hosts[h].route(&bytes) {
            Route::Core(c) => usize::from(c),
            Route::AnyCore => self.first_free_core(host),
        };
        if self.cores[h][core] > now {
            let at = self.cores[h][core];
            self.schedule(at, Event::Deliver { host, bytes });
            return;
        }
        self.handle_datagram_on(now, host, core, bytes);
    }

    /// Runs host `host`'s handler for `bytes` on `core` at `now`.
    fn handle_datagram_on(&mut self, now: Nanos, host: u16, core: usize, bytes: Vec<u8>) {
        self.trace_event(now, host, b"deliver", &bytes);
        let mut out = std::mem::take(&mut self.spare);
        self.hosts[usize::from(host)].handle_datagram(now, &bytes, &mut out);
        self.finish_handler(host, core, now, out);
    }

    /// Folds one event into the trace hash (no allocation: this is the simulator's hot loop).
    fn trace_event(&mut self, now: Nanos, who: u16, what: &[u8], bytes: &[u8]) {
        self.trace.write(&now.to_le_bytes());
        self.trace.write(&who.to_le_bytes());
        self.trace.write(what);
        self.trace.write(bytes);
    }

    /// Folds a crash or restart of `target` into the trace hash.
    fn trace_target(&mut self, now: Nanos, what: &[u8], target: Target) {
        self.trace.write(&now.to_le_bytes());
        self.trace.write(&0u16.to_le_bytes());
        self.trace.write(what);
        target.trace(&mut self.trace);
    }

    fn first_free_core(&self, host: u16) -> usize {
        let cores = &self.cores[usize::from(host)];
        (0..cores.len()).min_by_key(|&c| (cores[c], c)).unwrap_or(0)
    }

    fn finish_handler(&mut self, host: u16, core: usize, now: Nanos, out: HostOutbox<H>) {
        let end = now + out.cpu_ns;
        self.cores[usize::from(host)][core] = end;
        self.apply(host, now, end, out);
    }

    /// Carries out the outputs of a handler that ran from `start` to `end`: its log records
    /// become durable and its datagrams leave at `end`, unless the host crashed first.
    fn apply(&mut self, host: u16, start: Nanos, end: Nanos, mut out: HostOutbox<H>) {
        if self.crashes_within(Target::Node(host), start, end) {
            self.count(|s| s.cut_short += 1);
            return self.recycle(out);
        }
        self.logs[usize::from(host)].append(&mut out.log);
        let (switch, link) = self.uplink[usize::from(host)];
        let nic_ns = self.topology.links[link].params.nic_ns;
        let hop = Hop::Switch { switch, ingress: Port::Host(host) };
        for send in out.sends.drain(..) {
            self.send_on_link(link, hop, (end, end + nic_ns), send.bytes, Some(host));
        }
        let epoch = self.host_epoch[usize::from(host)];
        for (at, timer) in out.timers.drain(..) {
            self.schedule(at.max(end), Event::HostTimer { host, epoch, timer });
        }
        let moment = self.moment(end);
        for event in out.events.drain(..) {
            if let Err(why) = self.observer.on_event(host, event, moment) {
                self.failure.get_or_insert(why);
            }
        }
        self.recycle(out);
    }

    /// Keeps `out`'s vectors, emptied, for the next handler.
    fn recycle(&mut self, mut out: HostOutbox<H>) {
        out.sends.clear();
        out.timers.clear();
        out.log.clear();
        out.events.clear();
        out.cpu_ns = 0;
        self.spare = out;
    }

    /// The hash of every event processed so far: equal for equal seeds.
    pub fn trace_hash(&self) -> u64 {
        self.trace.value()
    }

    /// Events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.processed
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The hosts, by id.
    pub fn hosts(&self) -> &[H] {
        &self.hosts
    }

    /// Switch `id`.
    pub fn switch(&self, id: u16) -> &S {
        &self.switches[usize::from(id)].device
    }

    /// The network.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The per-class counters of the strict-priority port of link `from → to` (sent, dropped,
    /// peak occupancy), if that link has one.
    pub fn port_counters(&self, from: Endpoint, to: Endpoint) -> Option<&[ClassCounters]> {
        let index = self.topology.link_index(from, to)?;
        self.ports.get(index)?.as_ref().map(|p| p.port.counters())
    }

    /// The observer (the system's metrics and records).
    pub fn observer(&self) -> &O {
        &self.observer
    }
}

/// Connects switch `id` as `topology` says: its own hosts attached, its neighbours' ports
/// connected, a route toward every other host of `0..hosts`, its id, and a route toward every
/// other switch's control address (`pisadb_wire::control::switch_address`: control requests
/// travel hop by hop to the switch they name).
fn connect<S: SwitchDevice>(topology: &Topology, id: u16, hosts: u16, device: &mut S) -> Result<(), WorldError> {
    let here = Endpoint::Switch(id);
    let own = topology.hosts_of(id);
    for &h in &own {
        device.attach(h);
    }
    for s in topology.switches() {
        if s != id && topology.get_link(here, Endpoint::Switch(s)).is_some() {
            device.connect_switch(s);
        }
    }
    for h in (0..hosts).filter(|h| !own.contains(h)) {
        if let Some(Endpoint::Switch(next)) = topology.next_hop(here, Endpoint::Host(h)) {
            device
                .set_route(h, Port::Switch(next))
                .map_err(|e| WorldError::Route { switch: id, why: e.to_string() })?;
        }
    }
    device.set_switch_id(id);
    for s in topology.switches().into_iter().filter(|&s| s != id) {
        let (Some(address), Some(Endpoint::Switch(next))) =
            (pisadb_wire::control::switch_address(s), topology.next_hop(here, Endpoint::Switch(s)))
        else {
            continue;
        };
        device
            .set_route(address, Port::Switch(next))
            .map_err(|e| WorldError::Route { switch: id, why: e.to_string() })?;
    }
    Ok(())
}
