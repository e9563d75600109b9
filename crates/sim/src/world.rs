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

use crate::faults::{FaultStats, Faults, Target};
use pisadb_core::rng::SeededRng;
use pisadb_core::{Nanos, Scheduler, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route};
use pisadb_net::{ClassCounters, Endpoint, LinkParams, PriorityPort, Topology};
use pisadb_switch::{Port, SwitchDevice, Transmit};
use rand::Rng;

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
    /// A frame reaches a strict-priority port (boxed: the scheduler moves events around, and
    /// the common ones are smaller).
    EnterPort(Box<PortEntry>),
    /// Strict-priority link `link`'s port may have a frame done.
    PortWake {
        link: u32,
    },
    WindowStart,
    Crash(Target),
    Restart(Target),
}

/// A frame reaching strict-priority link `link`'s port.
struct PortEntry {
    /// The link.
    link: usize,
    /// Where the frame goes once across.
    hop: Hop,
    /// A reordering delay the fault plan drew, added to its arrival.
    after_ns: Nanos,
    /// Its class (the world's classifier's, found as it was sent).
    class: u8,
    /// The datagram.
    bytes: Vec<u8>,
}

/// The fault plan in force and what it needs.
struct FaultState<H: Host, S> {
    plan: Faults,
    rng: SeededRng,
    restarts: Box<dyn Restarts<H, S>>,
    stats: FaultStats,
    /// When progress is demanded from: the network has healed and every restart is done.
    healthy_from: Nanos,
}

/// A frame inside a strict-priority port: where it goes and its delay after the link.
type PortItem = (Hop, Nanos, Vec<u8>);

/// A strict-priority egress port and its pending wake-up.
struct DrivenPort {
    /// The port's state machine.
    port: PriorityPort<PortItem>,
    /// When a [`Event::PortWake`] is scheduled, if one is.
    wake: Option<Nanos>,
    /// Frames the fault plan holds before the port (jitter without `reorder`, slow links) that
    /// have not entered it yet: (class, when the frame was ready, when it enters).
    held: Vec<(u8, Nanos, Nanos)>,
}

impl DrivenPort {
    /// When a frame of `class`, ready at `ready` and held by the fault plan until `at`, enters
    /// the port: no earlier than any held frame of its class that was ready no later than it
    /// (sent, from now, `now`). A delay before the link keeps a class in order, as the FIFO
    /// wire does for every frame (`Link::carry`); each class is its own queue, so another
    /// class's held frames do not hold it. Without faults no frame is held and `at` comes back.
    fn entry_time(&mut self, now: Nanos, class: u8, ready: Nanos, at: Nanos) -> Nanos {
        // A frame entering by now is in the port or enters before any frame sent from now on.
        self.held.retain(|&(_, _, enter)| enter > now);
        let floor = self.held.iter().filter(|&&(c, r, _)| c == class && r <= ready).map(|&(_, _, enter)| enter).max();
        let at = floor.map_or(at, |floor| floor.max(at));
        if at > ready {
            self.held.push((class, ready, at));
        }
        at
    }
}

/// The receive queue of one core of a host that sorts its batches (see "Receive queues").
#[derive(Debug, Default)]
struct RxQueue {
    /// Datagrams that arrived since the current batch was taken, in arrival order, each with
    /// the class the host gave it: the next batch.
    waiting: Vec<(u8, Vec<u8>)>,
    /// The batch being handled, sorted, next first.
    batch: std::collections::VecDeque<Vec<u8>>,
    /// Whether an [`Event::CoreFree`] for this core is scheduled.
    armed: bool,
}

impl RxQueue {
    /// Datagrams queued here, in the batch being handled and after it.
    fn len(&self) -> usize {
        self.waiting.len() + self.batch.len()
    }
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
                let PortEntry { link, hop, after_ns, class, bytes } = *entry;
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

    /// A datagram reaches a host that sorts its receive batches: handled at once if its core is
    /// free with nothing queued, else queued for the core's next batch.
    fn enqueue(&mut self, now: Nanos, host: u16, bytes: Vec<u8>) {
        let h = usize::from(host);
        let core = match self.hosts[h].route(&bytes) {
            Route::Core(c) => usize::from(c),
            Route::AnyCore => {
                let (cores, rx) = (&self.cores[h], &self.rx[h]);
                (0..cores.len()).min_by_key(|&c| (cores[c].max(now), rx[c].len(), c)).unwrap_or(0)
            }
        };
        if self.cores[h][core] <= now && self.rx[h][core].len() == 0 {
            return self.handle_datagram_on(now, host, core, bytes);
        }
        let class = self.hosts[h].receive_class(&bytes);
        self.rx[h][core].waiting.push((class, bytes));
        self.arm_core(now, host, core);
    }

    /// Schedules an [`Event::CoreFree`] for `core` of `host` when it frees, unless one is.
    fn arm_core(&mut self, now: Nanos, host: u16, core: usize) {
        let h = usize::from(host);
        let rx = &mut self.rx[h][core];
        if rx.armed || rx.len() == 0 {
            return;
        }
        rx.armed = true;
        let (at, epoch) = (self.cores[h][core].max(now), self.host_epoch[h]);
        self.schedule(at, Event::CoreFree { host, core: core as u16, epoch });
    }

    /// `core` of `host` may be free: hands over the next datagram of its batch, taking and
    /// sorting a new batch if the last one is done.
    fn core_free(&mut self, now: Nanos, host: u16, core: usize, epoch: u32) {
        let h = usize::from(host);
        if self.host_down[h] || epoch != self.host_epoch[h] {
            return; // queued for an incarnation that crashed (its queues went with it)
        }
        self.rx[h][core].armed = false;
        if self.cores[h][core] > now {
            return self.arm_core(now, host, core); // a timer took the core first
        }
        let rx = &mut self.rx[h][core];
        if rx.batch.is_empty() {
            let mut batch = std::mem::take(&mut rx.waiting);
            // Stable: arrival order within a class.
            batch.sort_by_key(|&(class, _)| std::cmp::Reverse(class));
            rx.batch = batch.into_iter().map(|(_, bytes)| bytes).collect();
        }
        let Some(bytes) = rx.batch.pop_front() else { return };
        self.handle_datagram_on(now, host, core, bytes);
        self.arm_core(now, host, core);
    }

    fn count(&mut self, what: impl FnOnce(&mut FaultStats)) {
        if let Some(f) = self.faults.as_mut() {
            what(&mut f.stats);
        }
    }

    fn crash(&mut self, target: Target) {
        match target {
            Target::Node(n) => {
                let i = usize::from(n);
                self.host_down[i] = true;
                self.host_epoch[i] += 1;
                // What waited in its receive queues was in its memory.
                self.rx[i].iter_mut().for_each(|q| *q = RxQueue::default());
                self.count(|s| s.node_crashes += 1);
            }
            Target::Switch(s) => {
                let slot = &mut self.switches[usize::from(s)];
                slot.down = true;
                slot.epoch += 1;
                slot.wake = None;
                self.count(|s| s.switch_crashes += 1);
            }
        }
    }

    fn restart(&mut self, now: Nanos, target: Target) -> Result<(), String> {
        // Hosts fence off every switch rebuilt so far; with one switch, its crash count.
        let epoch = self.rebuilt_switch_epoch();
        let hosts = self.hosts.len() as u16;
        let Some(f) = self.faults.as_mut() else { return Err("no restart plan".into()) };
        match target {
            Target::Node(n) => {
                let i = usize::from(n);
                let mut host = f.restarts.host(n, &self.logs[i])?;
                if self.stopping {
                    host.stop();
                }
                host.fence_switch(epoch);
                let mut out = HostOutbox::<H>::default();
                host.start(now, &mut out);
                self.hosts[i] = host;
                self.cores[i].iter_mut().for_each(|c| *c = now);
                self.host_down[i] = false;
                self.apply(n, now, now, out);
            }
            Target::Switch(s) => {
                let mut device = f.restarts.switch(s, &self.logs, epoch)?;
                connect(&self.topology, s, hosts, &mut device).map_err(|e| e.to_string())?;
                // Its CPU port leads to the same controller as before the crash.
                if let Some(controller) = self.switches[usize::from(s)].device.controller() {
                    device.set_controller(controller);
                }
                // The control plane collected every log: each host has fenced off the crashed
                // switch, whose answers may still be on the wire (a host down now is fenced as
                // it restarts).
                for (host, down) in self.hosts.iter_mut().zip(&self.host_down) {
                    if !down {
                        host.fence_switch(epoch);
                    }
                }
                let slot = &mut self.switches[usize::from(s)];
                slot.device = device;
                slot.down = false;
            }
        }
        Ok(())
    }

    /// The epoch of the switches rebuilt after the latest crash: their crashes so far.
    fn rebuilt_switch_epoch(&self) -> u16 {
        let crashes: u32 = self.switches.iter().map(|s| s.epoch).sum();
        u16::try_from(crashes).unwrap_or(u16::MAX)
    }

    /// Whether a crash of `target` planned in `[start, end)` cuts short what happens then.
    fn crashes_within(&self, target: Target, start: Nanos, end: Nanos) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| f.plan.crashes.iter().any(|c| c.target == target && (start..end).contains(&c.at_ns)))
    }

    /// The copies of a datagram that enter a link to or from `host` at `now`: none if lost,
    /// two if duplicated; each with its delay before the link (in order) and after it
    /// (overtaking, with `reorder`). Slow links are per host; a trunk between switches passes
    /// `None` and is only lossy, duplicating and jittery.
    fn network_fate(&mut self, now: Nanos, host: Option<u16>) -> [Option<(Nanos, Nanos)>; 2] {
        let Some(f) = self.faults.as_mut() else { return [Some((0, 0)), None] };
        let slow = host.map_or(0, |h| f.plan.slow_ns(h, now));
        if !f.plan.network_faulty(now) {
            return [Some((slow, 0)), None];
        }
        if f.rng.random_bool(f.plan.loss) {
            f.stats.lost += 1;
            return [None, None];
        }
        let (jitter, reorder) = (f.plan.jitter_ns, f.plan.reorder);
        let delay = |rng: &mut SeededRng| {
            let j = rng.random_range(0..=jitter);
            if reorder {
                (slow, j)
            } else {
                (slow + j, 0)
            }
        };
        let first = Some(delay(&mut f.rng));
        let second = f.rng.random_bool(f.plan.duplicate).then(|| delay(&mut f.rng));
        if second.is_some() {
            f.stats.duplicated += 1;
        }
        [first, second]
    }

    /// Puts `bytes`, which left its sender at `left`, on link `index` at `ready` (plus each
    /// copy's fault delays), toward `hop`: a FIFO link computes the arrival at once, a
    /// strict-priority one takes the frame into its port when it gets there. A delay before
    /// the link keeps order either way: on the FIFO wire, every frame queues behind it; into a
    /// strict-priority port, a frame of its class waits for it ([`DrivenPort::entry_time`]).
    fn send_on_link(
        &mut self,
        index: usize,
        hop: Hop,
        (left, ready): (Nanos, Nanos),
        bytes: Vec<u8>,
        fault_host: Option<u16>,
    ) {
        let fates = self.network_fate(left, fault_host);
        let [first, copy] = fates;
        if self.ports.get(index).is_some_and(Option::is_some) {
            let class = (self.classify)(&bytes);
            let now = self.now;
            let enter = |world: &mut Self, (before, after): (Nanos, Nanos), bytes| {
                let Some(Some(driven)) = world.ports.get_mut(index) else { return };
                let at = driven.entry_time(now, class, ready, ready + before);
                let entry = PortEntry { link: index, hop, after_ns: after, class, bytes };
                world.schedule(at, Event::EnterPort(Box::new(entry)));
            };
            if let Some(c) = copy {
                enter(self, c, bytes.clone());
            }
            if let Some(f) = first {
                enter(self, f, bytes);
            }
            return;
        }
        let link = &mut self.topology.links[index];
        let nic_ns = if matches!(hop, Hop::Host(_)) { link.params.nic_ns } else { 0 };
        let arrive = |link: &mut pisadb_net::Link, (before, after): (Nanos, Nanos)| {
            link.carry(ready + before, bytes.len()) + after + nic_ns
        };
        // The first copy takes the wire first, as the pinned traces have it.
        let first_at = first.map(|c| arrive(link, c));
        let copy_at = copy.map(|c| arrive(link, c));
        if let Some(at) = copy_at {
            self.arrive(at, hop, bytes.clone());
        }
        if let Some(at) = first_at {
            self.arrive(at, hop, bytes);
        }
    }

    fn arrive(&mut self, at: Nanos, hop: Hop, bytes: Vec<u8>) {
        match hop {
            Hop::Host(host) => self.schedule(at, Event::Deliver { host, bytes }),
            Hop::Switch { switch, ingress } => self.schedule(at, Event::AtSwitch { switch, ingress, bytes }),
        }
    }

    fn enter_port(&mut self, now: Nanos, link: usize, hop: Hop, after_ns: Nanos, class: u8, bytes: Vec<u8>) {
        let Some(Some(driven)) = self.ports.get_mut(link) else { return };
        let len = bytes.len();
        // A refused frame is counted by the port itself (tail drop).
        let _ = driven.port.push(now, class, len, (hop, after_ns, bytes));
        self.arm_port(now, link);
    }

    fn wake_port(&mut self, now: Nanos, link: usize) {
        let Some(Some(driven)) = self.ports.get_mut(link) else { return };
        driven.wake = None;
        let nic_ns = self.topology.links[link].params.nic_ns;
        let mut arrivals = Vec::new();
        while let Some(a) = driven.port.pop_arrival(now) {
            arrivals.push(a);
        }
        for a in arrivals {
            let (hop, after_ns, bytes) = a.item;
            let nic = if matches!(hop, Hop::Host(_)) { nic_ns } else { 0 };
            self.arrive(a.arrival_at_ns + after_ns + nic, hop, bytes);
        }
        self.arm_port(now, link);
    }

    /// Schedules link `link`'s port to wake when it next needs to, unless it already will.
    fn arm_port(&mut self, now: Nanos, link: usize) {
        let Some(Some(driven)) = self.ports.get_mut(link) else { return };
        let Some(at) = driven.port.poll_timeout() else { return };
        // The port decides an instant only once time has passed it.
        let at = at.max(now) + 1;
        if driven.wake.is_none_or(|w| at < w) {
            driven.wake = Some(at);
            self.schedule(at, Event::PortWake { link: link as u32 });
        }
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

    fn drain_switch(&mut self, now: Nanos, switch: u16) {
        while let Some(Transmit { at_ns, dst, bytes, port }) = self.switches[usize::from(switch)].device.poll_transmit()
        {
            if self.crashes_within(Target::Switch(switch), now, at_ns) {
                self.count(|s| s.cut_short += 1);
                continue; // still inside the switch when it crashed
            }
            let fault_host = match port {
                Port::Switch(_) => None,
                // The CPU port is the controller's own link.
                Port::Host(_) | Port::ControlPlane => Some(dst),
            };
            let (link, hop) = match port {
                Port::Switch(next) => (
                    self.topology.link_index(Endpoint::Switch(switch), Endpoint::Switch(next)),
                    Hop::Switch { switch: next, ingress: Port::Switch(switch) },
                ),
                Port::Host(_) | Port::ControlPlane => {
                    (self.downlinks[usize::from(switch)].get(usize::from(dst)).copied().flatten(), Hop::Host(dst))
                }
            };
            match link {
                Some(link) => self.send_on_link(link, hop, (at_ns, at_ns), bytes, fault_host),
                // No wire there: the datagram is lost, as it always was (the fault plan still
                // draws its fate first, so seeds replay).
                None => {
                    self.network_fate(at_ns, fault_host);
                }
            }
        }
        let slot = &mut self.switches[usize::from(switch)];
        if let Some(at) = slot.device.poll_timeout() {
            let at = at.max(now);
            if slot.wake.is_none_or(|w| at < w) {
                slot.wake = Some(at);
                let epoch = slot.epoch;
                self.schedule(at, Event::SwitchWake { switch, epoch });
            }
        }
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
