//! The simulated world: hosts with cores, links and a switch, driven by one event scheduler.
//!
//! [`World`] runs any system: its hosts are any [`Host`] (a system with several kinds makes an
//! enum of them), its switch any [`SwitchDevice`], and what the hosts report goes to an
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
//! ## Network and switch
//!
//! A datagram leaves a host after its NIC latency, is serialized on the host's uplink behind
//! earlier frames, propagates, and enters the switch model, which executes or forwards it and
//! says when each output leaves; the output is serialized on the downlink to its destination,
//! propagates, and reaches the host after the NIC latency. See [`crate::net`].
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
use crate::net::{Endpoint, LinkParams, Topology};
use pisadb_core::rng::SeededRng;
use pisadb_core::{Nanos, Scheduler, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route};
use pisadb_switch::SwitchDevice;
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
    /// The switch, rebuilt from `logs` (one per host), answering in `epoch` (its number of
    /// crashes so far); hosts are attached by the caller.
    fn switch(&mut self, logs: &[Vec<H::Log>], epoch: u16) -> Result<S, String>;
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
    fn on_window_start(&mut self, _at: Nanos, _hosts: &[H], _switch: &S) {}
    /// The measurement window ends at `at`.
    fn on_window_end(&mut self, _at: Nanos, _hosts: &[H], _switch: &S, _moment: Moment) {}
}

/// An observer that keeps nothing (runs that only need the hosts' end state).
impl<H: Host, S> Observer<H, S> for () {
    fn on_event(&mut self, _host: u16, _event: H::Event, _moment: Moment) -> Result<(), String> {
        Ok(())
    }
}

enum Event<T> {
    HostTimer { host: u16, epoch: u32, timer: T },
    Deliver { host: u16, bytes: Vec<u8> },
    AtSwitch { from: u16, bytes: Vec<u8> },
    SwitchWake { epoch: u32 },
    WindowStart,
    Crash(Target),
    Restart(Target),
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

/// A simulated rack of hosts of type `H` on one switch of type `S`, reporting to `O`.
pub struct World<H: Host, S, O> {
    /// The hosts, by id.
    hosts: Vec<H>,
    /// Per host, per core: busy until.
    cores: Vec<Vec<Nanos>>,
    /// The switch.
    switch: S,
    /// The links.
    topology: Topology,
    /// NIC and stack latency at each end of a link.
    nic_ns: Nanos,
    /// What waits to happen.
    events: Scheduler<Event<H::Timer>>,
    /// The current virtual time.
    now: Nanos,
    /// Events handled so far.
    processed: u64,
    /// When the switch is due to wake by itself, if a wake-up is scheduled.
    switch_wake: Option<Nanos>,
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
    /// The switch's incarnation number (its crashes so far).
    switch_epoch: u32,
    /// Whether the switch is down.
    switch_down: bool,
    /// What the system does with its hosts' events.
    observer: O,
    /// Why the run must stop (a restart or an observer failed).
    failure: Option<String>,
}

impl<H: Host, S: SwitchDevice, O: Observer<H, S>> World<H, S, O> {
    /// A rack of `hosts` (host `i` has id `i`) on one switch, links with `link`.
    pub fn new(hosts: Vec<H>, mut switch: S, link: &LinkParams, observer: O) -> Self {
        let n = hosts.len() as u16;
        let cores = hosts.iter().map(|host| vec![0; usize::from(host.cores())]).collect();
        for id in 0..n {
            switch.attach(id);
        }
        World {
            hosts,
            cores,
            switch,
            topology: Topology::rack(n, link),
            nic_ns: link.nic_ns,
            events: Scheduler::new(),
            now: 0,
            processed: 0,
            switch_wake: None,
            trace: TraceHash::new(),
            window_start: None,
            stopping: false,
            faults: None,
            logs: vec![Vec::new(); usize::from(n)],
            host_epoch: vec![0; usize::from(n)],
            host_down: vec![false; usize::from(n)],
            switch_epoch: 0,
            switch_down: false,
            observer,
            failure: None,
        }
    }

    /// Subjects the rack to `faults`, restarting what crashes with `restarts`. Call before
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
        self.observer.on_window_end(end, &self.hosts, &self.switch, moment);
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

    fn run_until(&mut self, end: Nanos, max_events: u64) -> Result<(), SimError> {
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
            Event::HostTimer { host, epoch, timer } => {
                let h = usize::from(host);
                if self.host_down[h] || epoch != self.host_epoch[h] {
                    return; // set by an incarnation that crashed
                }
                // Hashed before the core check: a timer that waits for its core is hashed
                // again when it runs (the pinned hashes count both).
                self.trace.write(&now.to_le_bytes());
                self.trace.write(&host.to_le_bytes());
                timer.trace(&mut self.trace);
                let core = usize::from(self.hosts[h].timer_core(&timer));
                let free = self.cores[h][core];
                if free > now {
                    self.schedule(free, Event::HostTimer { host, epoch, timer });
                    return;
                }
                let mut out = HostOutbox::<H>::default();
                self.hosts[h].handle_timer(now, timer, &mut out);
                self.finish_handler(host, core, now, out);
            }
            Event::Deliver { host, bytes } => {
                let h = usize::from(host);
                if self.host_down[h] {
                    return self.count(|s| s.to_down += 1);
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
                self.trace_event(now, host, b"deliver", &bytes);
                let mut out = HostOutbox::<H>::default();
                self.hosts[h].handle_datagram(now, &bytes, &mut out);
                self.finish_handler(host, core, now, out);
            }
            Event::AtSwitch { from, bytes } => {
                if self.switch_down {
                    return self.count(|s| s.to_down += 1);
                }
                self.trace_event(now, from, b"switch", &bytes);
                self.switch.handle_datagram(now, from, &bytes);
                self.drain_switch(now);
            }
            Event::SwitchWake { epoch } => {
                if epoch != self.switch_epoch {
                    return;
                }
                self.switch_wake = None;
                self.switch.handle_timeout(now);
                self.drain_switch(now);
            }
            Event::WindowStart => {
                self.window_start = Some(now);
                self.observer.on_window_start(now, &self.hosts, &self.switch);
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
                self.count(|s| s.node_crashes += 1);
            }
            Target::Switch => {
                self.switch_down = true;
                self.switch_epoch += 1;
                self.switch_wake = None;
                self.count(|s| s.switch_crashes += 1);
            }
        }
    }

    fn restart(&mut self, now: Nanos, target: Target) -> Result<(), String> {
        let epoch = self.rebuilt_switch_epoch();
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
            Target::Switch => {
                let mut switch = f.restarts.switch(&self.logs, epoch)?;
                for id in 0..self.hosts.len() as u16 {
                    switch.attach(id);
                }
                // The control plane collected every log: each host has fenced off the crashed
                // switch, whose answers may still be on the wire (a host down now is fenced as
                // it restarts).
                for (host, down) in self.hosts.iter_mut().zip(&self.host_down) {
                    if !down {
                        host.fence_switch(epoch);
                    }
                }
                self.switch = switch;
                self.switch_down = false;
            }
        }
        Ok(())
    }

    /// The epoch of the switch rebuilt after the latest crash: its number of crashes.
    fn rebuilt_switch_epoch(&self) -> u16 {
        u16::try_from(self.switch_epoch).unwrap_or(u16::MAX)
    }

    /// Whether a crash of `target` planned in `[start, end)` cuts short what happens then.
    fn crashes_within(&self, target: Target, start: Nanos, end: Nanos) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| f.plan.crashes.iter().any(|c| c.target == target && (start..end).contains(&c.at_ns)))
    }

    /// The copies of a datagram that enter a link to or from `host` at `now`: none if lost,
    /// two if duplicated; each with its delay before the link (in order) and after it
    /// (overtaking, with `reorder`).
    fn network_fate(&mut self, now: Nanos, host: u16) -> [Option<(Nanos, Nanos)>; 2] {
        let Some(f) = self.faults.as_mut() else { return [Some((0, 0)), None] };
        let slow = f.plan.slow_ns(host, now);
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
    fn apply(&mut self, host: u16, start: Nanos, end: Nanos, out: HostOutbox<H>) {
        if self.crashes_within(Target::Node(host), start, end) {
            return self.count(|s| s.cut_short += 1);
        }
        self.logs[usize::from(host)].extend(out.log);
        for send in out.sends {
            let fates = self.network_fate(end, host);
            let link = self.topology.link(Endpoint::Host(host), Endpoint::Switch(0)).expect("every host has an uplink");
            let arrivals = fates
                .map(|f| f.map(|(before, after)| link.carry(end + self.nic_ns + before, send.bytes.len()) + after));
            let [first, copy] = arrivals;
            if let Some(at) = copy {
                self.schedule(at, Event::AtSwitch { from: host, bytes: send.bytes.clone() });
            }
            if let Some(at) = first {
                self.schedule(at, Event::AtSwitch { from: host, bytes: send.bytes });
            }
        }
        let epoch = self.host_epoch[usize::from(host)];
        for (at, timer) in out.timers {
            self.schedule(at.max(end), Event::HostTimer { host, epoch, timer });
        }
        let moment = self.moment(end);
        for event in out.events {
            if let Err(why) = self.observer.on_event(host, event, moment) {
                self.failure.get_or_insert(why);
            }
        }
    }

    fn drain_switch(&mut self, now: Nanos) {
        while let Some(t) = self.switch.poll_transmit() {
            if self.crashes_within(Target::Switch, now, t.at_ns) {
                self.count(|s| s.cut_short += 1);
                continue; // still inside the switch when it crashed
            }
            let fates = self.network_fate(t.at_ns, t.dst);
            let Some(link) = self.topology.link(Endpoint::Switch(0), Endpoint::Host(t.dst)) else { continue };
            let arrivals = fates.map(|f| f.map(|(before, after)| link.carry(t.at_ns + before, t.bytes.len()) + after));
            let [first, copy] = arrivals;
            if let Some(at) = copy {
                self.schedule(at + self.nic_ns, Event::Deliver { host: t.dst, bytes: t.bytes.clone() });
            }
            if let Some(at) = first {
                self.schedule(at + self.nic_ns, Event::Deliver { host: t.dst, bytes: t.bytes });
            }
        }
        if let Some(at) = self.switch.poll_timeout() {
            let at = at.max(now);
            if self.switch_wake.is_none_or(|w| at < w) {
                self.switch_wake = Some(at);
                self.schedule(at, Event::SwitchWake { epoch: self.switch_epoch });
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

    /// The switch.
    pub fn switch(&self) -> &S {
        &self.switch
    }

    /// The observer (the system's metrics and records).
    pub fn observer(&self) -> &O {
        &self.observer
    }
}
