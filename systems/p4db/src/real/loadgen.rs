//! The switch benchmark (`pisadb switch-bench`): P4DB's switch process alone, under a load
//! generator, measured side by side with the simulator running the same load on the same
//! switch model.
//!
//! ## What is measured
//!
//! [`run_switch_bench`] starts one `pisadb switch` child process through the runtime's
//! supervisor, exactly as `pisadb cluster` does (a P4DB rack config on loopback), and then
//! plays every node of that config itself: it binds each node address and sends what a node
//! would send through the switch. The messages come from the rack's own workload and layout
//! ([`message_pool`]): for each transaction a node's generator issues, a hot one (or a warm
//! one's hot part) becomes the P4DB switch packet the node would send
//! ([`crate::programs::p4db::P4dbEngine::packet_for`], the node's own builder), and a cold
//! distributed one becomes its first remote request, a `LockRead` forwarded to the tuple's
//! owner, which (the generator again, on the owner's socket) answers it through the switch.
//! Local cold transactions never reach the switch and are skipped.
//!
//! ## A closed loop with a bounded window
//!
//! Each sender has `window` slots, one message in flight per slot, like a node's workers run
//! one transaction each. A slot is a worker id in the transaction ids it sends
//! ([`crate::node::machine::txn_id`]), so the switch's at-most-once memory (one entry per
//! worker slot) sees what it would see from real nodes: each slot's ids increase. A slot whose
//! answer is lost is freed after a timeout and sends its next message. Bounded windows keep
//! the offered load at what the switch can take instead of filling socket buffers and
//! measuring the kernel's drops.
//!
//! ## One generator, two drivers
//!
//! Each sender is a [`Sender`], a [`Host`] like any other: it hands out datagrams to send and
//! takes datagrams received, with `now` passed in, and reports what happened as
//! [`LoadEvent`]s, which a [`Tally`] counts. [`run_switch_bench`] drives the senders with real
//! sockets ([`pisadb_runtime::host_set`]: one thread polls every sender's socket, leaving the
//! other core of a small machine to the switch), and [`model_run`] drives them in the
//! simulator ([`pisadb_sim::World`], the same one every simulated experiment runs) on the
//! switch model the switch process runs ([`RackSwitch`]), over the simulator's links, in
//! virtual time. The two runs therefore see the same message mix, the same senders and the
//! same window; what differs is the switch: a process on a kernel UDP stack, or the modelled
//! Tofino behind 10 GbE links. A simulated sender spends no CPU time (its `cpu_ns` is 0): the
//! model's load generator is ideal. The model's figures are predictions of the model, never
//! fitted to the measurement.

use crate::node::machine::{owner_node, txn_id, worker_of};
use crate::node::Mode;
use crate::real::cluster::P4dbLaunch;
use crate::real::switch::P4dbSwitchReport;
use crate::real::{P4dbSpec, RealError, Result, SYSTEM};
use crate::wire::p4db::TxnPacket;
use crate::{RackPlan, RackSwitch, RunConfig};
use pisadb_core::{Nanos, OpKind, TraceBytes, TraceHash, Txn};
use pisadb_host::{Host, HostOutbox, Route, Send};
use pisadb_report::latency::{Latency, LatencySummary};
use pisadb_runtime::supervisor::{free_ports, Supervisor};
use pisadb_runtime::udp::BatchSocket;
use pisadb_runtime::{
    host_set, install_stop_signals, read_json, stop_requested, unix_now_ns, Network, RackConfig, Role,
};
use pisadb_sim::{Moment, Observer, World};
use pisadb_switch::SwitchDevice;
use pisadb_wire::node::{LockMode, NodeMsg, OnConflict, MAX_ITEMS};
use pisadb_wire::{Frame, Kind, FRAME_BYTES, SWITCH_ID};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Why the switch benchmark cannot run its load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The workload sends too few transactions through the switch to fill a sender's pool.
    #[error(
        "node {sender}: {found} of {wanted} messages in {draws} {workload} transactions: the workload puts \
         (almost) nothing through the switch (mode {mode}); raise --hot-prob or --remote"
    )]
    TooLittleSwitchTraffic {
        /// The sender whose pool stayed short.
        sender: u16,
        /// Messages found.
        found: usize,
        /// Messages wanted.
        wanted: usize,
        /// Transactions drawn.
        draws: usize,
        /// The workload.
        workload: &'static str,
        /// The mode.
        mode: &'static str,
    },
    /// A window outside the worker slots a transaction id has.
    #[error("--window {window}: expected 1..=64 (one worker slot each)")]
    Window {
        /// The window asked for.
        window: u16,
    },
    /// A sender without messages.
    #[error("sender {sender}: expected at least one message in its pool")]
    EmptyPool {
        /// The sender.
        sender: u16,
    },
    /// A mode whose switch runs no P4DB engine.
    #[error("mode {mode}: expected p4db (the switch benchmark loads the P4DB engine only)")]
    NotP4db {
        /// The mode asked for.
        mode: &'static str,
    },
    /// The switch process never forwarded the probe.
    #[error("the switch process did not forward a probe within {waited_s} s")]
    SwitchSilent {
        /// How long the benchmark waited.
        waited_s: u64,
    },
}

/// One message a sender puts through the switch, taken from the workload.
#[derive(Clone, Debug)]
pub enum Template {
    /// A hot transaction (or a warm one's hot part) as its P4DB switch packet; the switch
    /// executes it and answers.
    SwitchTxn(TxnPacket),
    /// A cold distributed transaction's request to the owner `dst` of some of its tuples; the
    /// switch forwards it, the owner answers through the switch.
    LockRead {
        /// The owner.
        dst: u16,
        /// The tuples on `dst` and the locks they need.
        entries: Vec<(pisadb_core::TupleKey, LockMode)>,
    },
}

/// The next `size` messages sender `sender` puts through the switch, from its node's own
/// transaction stream (see the module documentation).
pub fn message_pool(plan: &RackPlan, run: &RunConfig, sender: u16, size: usize) -> Result<Vec<Template>> {
    let mut workload = plan.node_workload(run, sender);
    let partitioning = workload.partitioning();
    let mut pool = Vec::with_capacity(size);
    let draws_max = size.saturating_mul(1000).max(100_000);
    for _ in 0..draws_max {
        if pool.len() == size {
            return Ok(pool);
        }
        let generated = workload.next_txn(sender);
        let ops = &generated.txn.ops;
        let hot: Vec<_> = ops.iter().copied().filter(|op| plan.layout.contains(op.key)).collect();
        if run.mode == Mode::P4db && !hot.is_empty() {
            // A packet the node could not build either (too many operations) is skipped.
            if let Ok((packet, _)) = plan.engine.packet_for(&Txn::new(hot), &plan.layout, 0) {
                pool.push(Template::SwitchTxn(packet));
            }
            continue;
        }
        let Some(dst) = ops.iter().map(|op| partitioning.node_of(op.key)).find(|&n| n != sender) else { continue };
        let entries: Vec<_> = ops
            .iter()
            .filter(|op| partitioning.node_of(op.key) == dst)
            .map(|op| (op.key, if op.kind == OpKind::Read { LockMode::Shared } else { LockMode::Exclusive }))
            .take(MAX_ITEMS)
            .collect();
        pool.push(Template::LockRead { dst, entries });
    }
    Err(LoadError::TooLittleSwitchTraffic {
        sender,
        found: pool.len(),
        wanted: size,
        draws: draws_max,
        workload: workload.name(),
        mode: run.mode.name(),
    }
    .into())
}

/// The mix of a set of message pools.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Mix {
    /// Share of messages that are switch transactions (the rest are forwarded lock requests).
    pub switch_txn_share: f64,
    /// Planned passes per switch transaction (recirculations while waiting for a lock come on top).
    pub passes_per_txn: f64,
    /// Instructions per switch transaction.
    pub instructions_per_txn: f64,
    /// Mean datagram size sent to the switch, frame included (bytes).
    pub datagram_bytes: f64,
}

impl Mix {
    /// The mix of `pools`.
    pub fn of(pools: &[Vec<Template>]) -> Mix {
        let (mut txns, mut passes, mut instrs, mut bytes, mut all) = (0usize, 0usize, 0usize, 0usize, 0usize);
        for t in pools.iter().flatten() {
            all += 1;
            bytes += encode(t, 0, 0).len();
            if let Template::SwitchTxn(p) = t {
                txns += 1;
                passes += p.passes();
                instrs += p.instrs.len();
            }
        }
        let per = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        Mix {
            switch_txn_share: per(txns, all),
            passes_per_txn: per(passes, txns),
            instructions_per_txn: per(instrs, txns),
            datagram_bytes: per(bytes, all),
        }
    }
}

/// Encodes `t` as sender `src` sends it under transaction id `id`.
fn encode(t: &Template, src: u16, id: u64) -> Vec<u8> {
    match t {
        Template::SwitchTxn(p) => {
            let mut bytes = Vec::with_capacity(FRAME_BYTES + p.encoded_len());
            Frame { kind: crate::wire::TXN_KIND, src, dst: SWITCH_ID }.encode(&mut bytes);
            TxnPacket { txn_id: id, ..p.clone() }.encode(&mut bytes);
            bytes
        }
        Template::LockRead { dst, entries } => {
            let msg = NodeMsg::LockRead { txn: id, ts: id, on_conflict: OnConflict::Deny, entries: entries.clone() };
            forward(src, *dst, &msg)
        }
    }
}

fn forward(src: u16, dst: u16, msg: &NodeMsg) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(FRAME_BYTES + msg.encoded_len());
    Frame { kind: Kind::FORWARD, src, dst }.encode(&mut bytes);
    msg.encode(&mut bytes);
    bytes
}

/// What one slot has in flight.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// The attempt counter of its last message (the low half of the transaction id).
    seq: u32,
    /// When that message left, while it is unanswered.
    sent_at: Option<Nanos>,
    /// Whether it is a switch transaction (else a lock request).
    switch_txn: bool,
}

/// A sender's timer: look for slots that waited too long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick;

impl TraceBytes for Tick {
    fn trace(&self, hash: &mut TraceHash) {
        hash.write(b"tick");
    }
}

/// What a sender reports, for a [`Tally`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadEvent {
    /// A slot sent a message: a switch transaction or a lock request.
    Sent {
        /// A switch transaction (else a lock request).
        switch_txn: bool,
    },
    /// A datagram arrived from the switch.
    Received,
    /// This sender, as the owner, answered another's lock request through the switch.
    Served,
    /// The answer to a slot's message came back.
    Answered {
        /// A switch transaction (else a lock request's answer from its owner).
        switch_txn: bool,
        /// Send to answer (ns).
        latency_ns: Nanos,
    },
    /// A slot gave up on its answer after the timeout.
    TimedOut,
    /// An answer to a slot's earlier message, after it timed out.
    Late,
    /// A datagram the sender did not expect (malformed, unknown kind).
    Unexpected,
}

/// One sender of the load: a node address the generator plays, its messages and its slots
/// (see the module documentation).
#[derive(Debug)]
pub struct Sender {
    id: u16,
    pool: Vec<Template>,
    next: usize,
    slots: Vec<Slot>,
    timeout_ns: Nanos,
    tick_ns: Nanos,
}

impl Sender {
    /// Sender `id` sending the messages of `pool` in a loop, `window` at a time (at most 64:
    /// worker ids have 6 bits), giving up on an answer after `timeout_ns`.
    pub fn new(id: u16, pool: Vec<Template>, window: u16, timeout_ns: Nanos) -> Result<Self> {
        if !(1..=64).contains(&window) {
            return Err(LoadError::Window { window }.into());
        }
        if pool.is_empty() {
            return Err(LoadError::EmptyPool { sender: id }.into());
        }
        let tick_ns = (timeout_ns / 4).max(1_000);
        Ok(Sender { id, pool, next: 0, slots: vec![Slot::default(); usize::from(window)], timeout_ns, tick_ns })
    }

    /// One sender per pool, sender `i` sending `pools[i]`.
    pub fn all(pools: &[Vec<Template>], window: u16, timeout_ns: Nanos) -> Result<Vec<Sender>> {
        pools.iter().enumerate().map(|(i, pool)| Sender::new(i as u16, pool.clone(), window, timeout_ns)).collect()
    }

    /// Sends a message from every slot that is free or waited too long.
    fn fill(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        for (w, slot) in self.slots.iter_mut().enumerate() {
            match slot.sent_at {
                Some(at) if now.saturating_sub(at) < self.timeout_ns => continue,
                Some(_) => out.events.push(LoadEvent::TimedOut),
                None => {}
            }
            let template = &self.pool[self.next];
            self.next = (self.next + 1) % self.pool.len();
            slot.seq = slot.seq.wrapping_add(1);
            slot.sent_at = Some(now);
            slot.switch_txn = matches!(template, Template::SwitchTxn(_));
            out.events.push(LoadEvent::Sent { switch_txn: slot.switch_txn });
            let id = txn_id(self.id, 0, w as u16, slot.seq);
            out.sends.push(Send { dst: SWITCH_ID, bytes: encode(template, self.id, id) });
        }
    }

    /// The answer to transaction `id` reached this sender.
    fn answered(&mut self, now: Nanos, id: u64, out: &mut HostOutbox<Self>) {
        let slot = (owner_node(id) == self.id).then(|| self.slots.get_mut(usize::from(worker_of(id)))).flatten();
        let Some(slot) = slot else { return out.events.push(LoadEvent::Unexpected) };
        match slot.sent_at {
            Some(sent) if slot.seq == id as u32 => {
                slot.sent_at = None;
                let latency_ns = now.saturating_sub(sent).max(1);
                out.events.push(LoadEvent::Answered { switch_txn: slot.switch_txn, latency_ns });
            }
            _ => out.events.push(LoadEvent::Late),
        }
    }
}

impl Host for Sender {
    type Timer = Tick;
    type Log = ();
    type Event = LoadEvent;

    fn cores(&self) -> u16 {
        1
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        self.fill(now, out);
        out.timers.push((now + self.tick_ns, Tick));
    }

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::AnyCore
    }

    fn timer_core(&self, _timer: &Tick) -> u16 {
        0
    }

    /// An answer frees its slot, which sends its next message at once; a lock request for
    /// this sender is answered (granted) through the switch.
    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        out.events.push(LoadEvent::Received);
        let Ok((frame, payload)) = Frame::decode(bytes) else { return out.events.push(LoadEvent::Unexpected) };
        match frame.kind {
            crate::wire::TXN_KIND => match TxnPacket::decode(payload) {
                Ok(p) => self.answered(now, p.txn_id, out),
                Err(_) => out.events.push(LoadEvent::Unexpected),
            },
            Kind::FORWARD => match NodeMsg::decode(payload) {
                Ok(NodeMsg::LockRead { txn, entries, .. }) => {
                    let reply = NodeMsg::LockReadReply { txn, granted: true, values: vec![(0, 0); entries.len()] };
                    out.sends.push(Send { dst: frame.src, bytes: forward(self.id, frame.src, &reply) });
                    out.events.push(LoadEvent::Served);
                }
                Ok(NodeMsg::LockReadReply { txn, .. }) => self.answered(now, txn, out),
                _ => out.events.push(LoadEvent::Unexpected),
            },
            _ => out.events.push(LoadEvent::Unexpected),
        }
        self.fill(now, out);
    }

    fn handle_timer(&mut self, now: Nanos, _timer: Tick, out: &mut HostOutbox<Self>) {
        self.fill(now, out);
        out.timers.push((now + self.tick_ns, Tick));
    }

    fn stop(&mut self) {}

    fn is_idle(&self) -> bool {
        true
    }
}

/// What the senders counted.
#[derive(Clone, Debug)]
pub struct Tally {
    /// Datagrams handed out to send (requests and the owners' answers).
    pub datagrams_out: u64,
    /// Datagrams received from the switch.
    pub datagrams_in: u64,
    /// Switch transactions sent.
    pub txn_sent: u64,
    /// Switch transactions answered.
    pub txn_answered: u64,
    /// Lock requests sent.
    pub lock_sent: u64,
    /// Lock requests that reached their owner through the switch (and were answered by it).
    pub lock_served: u64,
    /// Lock requests whose answer came back to the sender through the switch.
    pub lock_answered: u64,
    /// Slots given up after the timeout.
    pub timed_out: u64,
    /// Answers to a slot's earlier message, after it timed out.
    pub late: u64,
    /// Datagrams the generator did not expect (malformed, unknown kind).
    pub unexpected: u64,
    /// Send to answer, switch transactions (ns).
    pub txn_latency: Latency,
    /// Send to answer, lock requests (two trips through the switch; ns).
    pub lock_latency: Latency,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            datagrams_out: 0,
            datagrams_in: 0,
            txn_sent: 0,
            txn_answered: 0,
            lock_sent: 0,
            lock_served: 0,
            lock_answered: 0,
            timed_out: 0,
            late: 0,
            unexpected: 0,
            txn_latency: Latency::new(),
            lock_latency: Latency::new(),
        }
    }
}

impl Tally {
    /// Counts one sender's event.
    pub fn record(&mut self, event: LoadEvent) {
        match event {
            LoadEvent::Sent { switch_txn } => {
                self.datagrams_out += 1;
                *(if switch_txn { &mut self.txn_sent } else { &mut self.lock_sent }) += 1;
            }
            LoadEvent::Received => self.datagrams_in += 1,
            LoadEvent::Served => {
                self.datagrams_out += 1;
                self.lock_served += 1;
            }
            LoadEvent::Answered { switch_txn: true, latency_ns } => {
                self.txn_answered += 1;
                self.txn_latency.record_ns(latency_ns);
            }
            LoadEvent::Answered { switch_txn: false, latency_ns } => {
                self.lock_answered += 1;
                self.lock_latency.record_ns(latency_ns);
            }
            LoadEvent::TimedOut => self.timed_out += 1,
            LoadEvent::Late => self.late += 1,
            LoadEvent::Unexpected => self.unexpected += 1,
        }
    }
}

/// Figures of one side (measured or modelled) of the benchmark.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Side {
    /// Seconds measured (wall clock, or virtual for the model).
    pub seconds: f64,
    /// Datagrams the senders sent to the switch, per second.
    pub offered_per_s: f64,
    /// Datagrams the switch delivered to the senders, per second.
    pub answered_per_s: f64,
    /// Switch transactions answered per second.
    pub switch_txn_per_s: f64,
    /// Lock requests answered (two trips through the switch) per second.
    pub lock_round_trips_per_s: f64,
    /// Pipeline passes per second (the switch's own counter).
    pub passes_per_s: f64,
    /// Switch transaction latency, send to answer (µs, `latency_us_*`).
    pub txn_latency: LatencySummary,
    /// Lock request round trip (µs, `latency_us_*`).
    pub lock_latency: LatencySummary,
    /// Slots given up after the timeout.
    pub timed_out: u64,
}

impl Side {
    fn of(tally: &Tally, seconds: f64, passes: u64) -> Side {
        let per_s = |n: u64| n as f64 / seconds.max(1e-12);
        Side {
            seconds,
            offered_per_s: per_s(tally.datagrams_out),
            answered_per_s: per_s(tally.datagrams_in),
            switch_txn_per_s: per_s(tally.txn_answered),
            lock_round_trips_per_s: per_s(tally.lock_answered),
            passes_per_s: per_s(passes),
            txn_latency: tally.txn_latency.summary(),
            lock_latency: tally.lock_latency.summary(),
            timed_out: tally.timed_out,
        }
    }
}

/// The model's own ceilings for the mix, from the switch profile and the link parameters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ModelCeilings {
    /// Packets entering the pipe per second: one per clock (the profile's clock).
    pub pipeline_passes_per_s: f64,
    /// Switch transactions per second the pipe admits at that rate, at the mix's planned
    /// passes per transaction (forwarded datagrams take no entry slot in the model).
    pub pipeline_switch_txn_per_s: f64,
    /// Datagrams per second one link of the model carries at the mix's mean size.
    pub link_datagrams_per_s: f64,
    /// The model's link line rate (Gbit/s).
    pub link_gbps: f64,
}

/// Everything [`run_switch_bench`] measured and predicted.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    /// The workload.
    pub workload: String,
    /// Senders (node addresses the generator plays).
    pub senders: u16,
    /// Messages in flight per sender.
    pub window: u16,
    /// The message mix.
    pub mix: Mix,
    /// The software switch process on loopback.
    pub measured: Side,
    /// The simulator's switch model over its links, same senders, window and mix.
    pub model: Side,
    /// The model's ceilings.
    pub ceilings: ModelCeilings,
    /// The switch process's own report.
    pub switch: P4dbSwitchReport,
    /// Where the config and the switch's report are.
    pub data_dir: PathBuf,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The rack (its `nodes` are the senders) and workload.
    pub run: RunConfig,
    /// Seconds of load on the switch process.
    pub seconds: f64,
    /// Messages in flight per sender (1..=64).
    pub window: u16,
    /// Messages prepared per sender (then reused in a loop).
    pub pool: usize,
    /// A slot gives up on an answer after this long (ms).
    pub timeout_ms: u64,
    /// Virtual milliseconds the model runs.
    pub model_ms: u64,
    /// Where the config and the switch's report go.
    pub data_dir: PathBuf,
    /// The `pisadb` binary to start the switch from.
    pub exe: PathBuf,
}

/// Runs the benchmark; see the module documentation.
pub fn run_switch_bench(opts: &BenchOptions) -> Result<BenchResult> {
    install_stop_signals()?;
    if opts.run.mode != Mode::P4db {
        return Err(LoadError::NotP4db { mode: opts.run.mode.name() }.into());
    }
    std::fs::create_dir_all(&opts.data_dir).map_err(|e| pisadb_runtime::RuntimeError::io(&opts.data_dir, e))?;
    let nodes = opts.run.nodes;
    let addrs = free_ports(usize::from(nodes) + 1)?;
    let now = unix_now_ns();
    let cfg = RackConfig {
        system: SYSTEM.to_string(),
        spec: P4dbSpec { run: opts.run.clone(), peer_timeout_ms: opts.timeout_ms, verify: false },
        network: Network::rack(addrs[0], addrs[1..].to_vec()),
        // The switch's clock starts now; nodes never run, so no stop time matters.
        epoch_unix_ns: now,
        stop_unix_ns: now,
        durable: false,
        // The generator finds the switch ready by probing it.
        rendezvous: None,
    };
    let config = opts.data_dir.join("rack.json");
    cfg.save(&config)?;
    let switch_addr = cfg.network.switches[0];
    let launch = P4dbLaunch { config, data_dir: opts.data_dir.clone(), nodes };
    let mut supervisor = Supervisor::new("switch-bench", opts.exe.clone(), launch, &opts.data_dir, None);
    supervisor.spawn(Role::Switch(0))?;
    let measured = (|| {
        eprintln!("switch-bench: switch process on {switch_addr}; planning the rack to build the senders' packets");
        let plan = crate::plan(&opts.run)?;
        let pools = (0..nodes).map(|s| message_pool(&plan, &opts.run, s, opts.pool)).collect::<Result<Vec<_>>>()?;
        let mut sockets = cfg.network.hosts.iter().map(|&a| BatchSocket::bind(a)).collect::<Result<Vec<_>, _>>()?;
        wait_for_switch(&mut sockets, switch_addr, &mut supervisor)?;
        let senders = Sender::all(&pools, opts.window, opts.timeout_ms * 1_000_000)?;
        let (tally, seconds) = drive_sockets(senders, &mut sockets, switch_addr, opts.seconds)?;
        Ok::<_, RealError>((plan, pools, tally, seconds))
    })();
    // The switch writes its report when asked to stop, whatever happened here.
    let stopped = supervisor.stop(Role::Switch(0));
    let (plan, pools, tally, seconds) = measured?;
    stopped?;
    let report: P4dbSwitchReport = read_json(&opts.data_dir.join("switch.json"))?;
    eprintln!("switch-bench: running the simulator's switch model on the same load ({} ms virtual)", opts.model_ms);
    let senders = Sender::all(&pools, opts.window, opts.timeout_ms * 1_000_000)?;
    let (model_tally, model_passes) = model_run(&plan, &opts.run, senders, opts.model_ms * 1_000_000)?;
    let mix = Mix::of(&pools);
    let profile = &opts.run.profile;
    let ceilings = ModelCeilings {
        pipeline_passes_per_s: profile.clock_hz as f64,
        pipeline_switch_txn_per_s: profile.clock_hz as f64 / mix.passes_per_txn.max(1.0),
        link_datagrams_per_s: 1e9 / opts.run.link.serialization_ns(mix.datagram_bytes.round() as usize) as f64,
        link_gbps: opts.run.link.gbps,
    };
    Ok(BenchResult {
        workload: opts.run.workload.name().to_string(),
        senders: nodes,
        window: opts.window,
        measured: Side::of(&tally, seconds, report.traffic.passes),
        model: Side::of(&model_tally, opts.model_ms as f64 * (1.0 - MODEL_WARMUP_SHARE) / 1e3, model_passes),
        mix,
        ceilings,
        switch: report,
        data_dir: opts.data_dir.clone(),
    })
}

/// How long the switch process may take to plan the rack and open its socket (ns).
const SWITCH_START_NS: Nanos = 300_000_000_000;

/// Waits until the switch forwards a datagram (it plans the rack before it opens its socket).
fn wait_for_switch(
    sockets: &mut [BatchSocket],
    switch: SocketAddr,
    supervisor: &mut Supervisor<P4dbLaunch>,
) -> Result<()> {
    let mut probe = Vec::new();
    Frame { kind: Kind::FORWARD, src: 0, dst: 0 }.encode(&mut probe);
    NodeMsg::Commit { txn: u64::MAX }.encode(&mut probe);
    let deadline = unix_now_ns() + SWITCH_START_NS;
    while unix_now_ns() < deadline && !stop_requested() {
        supervisor.check_running(Role::Switch(0))?;
        sockets[0].send_batch(&[(switch, probe.clone())]);
        let mut back = false;
        sockets[0].recv_batch(Duration::from_millis(20), |from, bytes| back |= from == switch && bytes == probe)?;
        if back {
            return Ok(());
        }
    }
    Err(LoadError::SwitchSilent { waited_s: SWITCH_START_NS / 1_000_000_000 }.into())
}

/// How long the real run warms up before it counts (ns): the switch's memory of slots and
/// the sockets' buffers settle.
const WARMUP_NS: Nanos = 300_000_000;

/// Drives `senders` over the real sockets for `seconds` after a short warm-up; returns their
/// tally and the seconds measured.
fn drive_sockets(
    mut senders: Vec<Sender>,
    sockets: &mut [BatchSocket],
    switch: SocketAddr,
    seconds: f64,
) -> Result<(Tally, f64)> {
    let end_ns = WARMUP_NS + (seconds * 1e9) as Nanos;
    // The events of a round are counted, then the round asks whether to go on: both read the
    // one tally, in turn.
    let tally = std::cell::RefCell::new(Tally::default());
    let (mut measuring_since, mut ended_ns) = (None, 0);
    let (mut next_progress, mut last_out) = (WARMUP_NS + 1_000_000_000, 0);
    host_set::drive(
        &mut senders,
        sockets,
        switch,
        |now| {
            measuring_since = measuring_since.or((now >= WARMUP_NS).then_some(now));
            if now >= next_progress {
                let out = tally.borrow().datagrams_out;
                eprintln!(
                    "switch-bench: {:.0} s: {:.0} datagrams/s to the switch",
                    (now - WARMUP_NS) as f64 / 1e9,
                    (out - last_out) as f64
                );
                (last_out, next_progress) = (out, next_progress + 1_000_000_000);
            }
            ended_ns = now;
            now < end_ns && !stop_requested()
        },
        |now, _, event| {
            if now >= WARMUP_NS {
                tally.borrow_mut().record(event);
            }
        },
    )?;
    let measured_ns = ended_ns.saturating_sub(measuring_since.unwrap_or(0));
    Ok((tally.into_inner(), measured_ns as f64 / 1e9))
}

/// The share of a model run spent warming up, not counted.
const MODEL_WARMUP_SHARE: f64 = 0.1;

/// Counts the senders' events in the simulator's measurement window, and the switch's passes
/// over it.
struct ModelTally {
    tally: Tally,
    passes_at_start: u64,
    passes: u64,
}

impl Observer<Sender, RackSwitch> for ModelTally {
    fn on_event(&mut self, _host: u16, event: LoadEvent, moment: Moment) -> Result<(), String> {
        if moment.in_window {
            self.tally.record(event);
        }
        Ok(())
    }

    fn on_window_start(&mut self, _at: Nanos, _hosts: &[Sender], switches: &[&RackSwitch]) {
        self.passes_at_start = switches[0].stats().passes;
    }

    fn on_window_end(&mut self, _at: Nanos, _hosts: &[Sender], switches: &[&RackSwitch], _moment: Moment) {
        self.passes = switches[0].stats().passes - self.passes_at_start;
    }
}

/// Most events a model run may take: far more than any run the command line allows (a 10 s
/// virtual run of a window-bound load is some hundred million events).
const MODEL_EVENTS_MAX: u64 = 2_000_000_000;

/// Drives `senders` in the simulator ([`World`]) against the rack's switch model for
/// `virtual_ns`. The first tenth is a warm-up, not counted. Returns the tally and the
/// switch's passes in the counted part.
pub fn model_run(plan: &RackPlan, run: &RunConfig, senders: Vec<Sender>, virtual_ns: Nanos) -> Result<(Tally, u64)> {
    let switch = plan.switch(run)?;
    let observer = ModelTally { tally: Tally::default(), passes_at_start: 0, passes: 0 };
    let mut world = World::rack(senders, switch, &run.link, observer);
    let warmup_ns = (virtual_ns as f64 * MODEL_WARMUP_SHARE) as Nanos;
    world.run(warmup_ns, virtual_ns - warmup_ns, MODEL_EVENTS_MAX)?;
    let observer = world.observer();
    Ok((observer.tally.clone(), observer.passes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_rack() -> RunConfig {
        let mut run = RunConfig::ycsb_default();
        run.nodes = 2;
        run.workload = crate::WorkloadSpec::SmallBank(pisadb_workload::SmallBankConfig {
            nodes: 2,
            accounts: 2_000,
            ..Default::default()
        });
        run.layout_sample = 2_000;
        run
    }

    #[test]
    fn pools_hold_switch_packets_and_lock_requests_from_the_workload() {
        let run = small_rack();
        let plan = crate::plan(&run).unwrap();
        let pool = message_pool(&plan, &run, 1, 500).unwrap();
        let txns = pool.iter().filter(|t| matches!(t, Template::SwitchTxn(_))).count();
        assert!(txns > 300, "SmallBank is 90% hot: {txns} of 500");
        assert!(txns < 500, "some cold distributed transactions reach the switch as lock requests");
        for t in &pool {
            if let Template::LockRead { dst, entries } = t {
                assert_ne!(*dst, 1, "a lock request goes to another node");
                assert!(!entries.is_empty());
            }
        }
    }

    /// Runs `event` on `sender` and returns what it produced.
    fn outbox(f: impl FnOnce(&mut HostOutbox<Sender>)) -> HostOutbox<Sender> {
        let mut out = HostOutbox::<Sender>::default();
        f(&mut out);
        out
    }

    #[test]
    fn a_sender_keeps_at_most_window_messages_in_flight_and_matches_answers_to_slots() {
        let run = small_rack();
        let plan = crate::plan(&run).unwrap();
        let pools: Vec<_> = (0..2).map(|s| message_pool(&plan, &run, s, 50).unwrap()).collect();
        let mut senders = Sender::all(&pools, 3, 1_000).unwrap();
        let mut tally = Tally::default();
        let mut sent = Vec::new();
        for s in &mut senders {
            let out = outbox(|o| s.start(0, o));
            sent.extend(out.sends);
            out.events.into_iter().for_each(|e| tally.record(e));
        }
        assert_eq!(sent.len(), 6, "2 senders x window 3");
        let out = outbox(|o| senders[0].handle_timer(10, Tick, o));
        assert!(out.sends.is_empty(), "no free slot, nothing timed out");
        // Answer sender 0's first message as the switch would: a transaction packet comes back
        // as it went; a lock request reaches its owner first, whose answer comes back.
        let bytes = sent[0].bytes.clone();
        let (frame, _) = Frame::decode(&bytes).unwrap();
        let answer = if frame.kind == crate::wire::TXN_KIND {
            bytes
        } else {
            let out = outbox(|o| senders[usize::from(frame.dst)].handle_datagram(15, &bytes, o));
            assert!(out.events.contains(&LoadEvent::Served), "the owner answers");
            out.sends.into_iter().find(|s| s.dst == 0).expect("the owner's answer to sender 0").bytes
        };
        let out = outbox(|o| senders[0].handle_datagram(20, &answer, o));
        out.events.iter().for_each(|&e| tally.record(e));
        assert_eq!(tally.txn_answered + tally.lock_answered, 1);
        assert_eq!(out.sends.len(), 1, "the answered slot sends its next message");
        let out = outbox(|o| senders[0].handle_datagram(21, &answer, o));
        out.events.iter().for_each(|&e| tally.record(e));
        assert_eq!(tally.late, 1, "a second copy of an answer is late, not a second answer");
        let out = outbox(|o| senders[0].handle_timer(2_000, Tick, o));
        out.events.iter().for_each(|&e| tally.record(e));
        assert_eq!(tally.timed_out, 3, "every slot of sender 0 waited past the timeout (slot 0 since 20)");
        assert_eq!(out.sends.len(), 3, "each sends its next message");
    }

    #[test]
    fn the_model_answers_every_message_and_stays_under_its_pipeline_ceiling() {
        let run = small_rack();
        let plan = crate::plan(&run).unwrap();
        let pools: Vec<_> = (0..2).map(|s| message_pool(&plan, &run, s, 200).unwrap()).collect();
        let senders = Sender::all(&pools, 4, 1_000_000).unwrap();
        let (tally, passes) = model_run(&plan, &run, senders, 2_000_000).unwrap();
        assert!(tally.txn_answered > 1_000, "{tally:?}");
        assert_eq!(tally.timed_out, 0, "a lossless model loses nothing: {tally:?}");
        assert_eq!(tally.unexpected, 0);
        let seconds = 0.0018;
        assert!((passes as f64 / seconds) < run.profile.clock_hz as f64, "one pass per clock at most");
        // Window-bound: 8 in flight, each delivery at least two NIC traversals after its send.
        let round_trip_ns = 2 * run.link.nic_ns;
        let bound = 8.0 / (round_trip_ns as f64 / 1e9);
        assert!((tally.datagrams_in as f64 / seconds) <= bound * 1.01, "{tally:?}");
    }
}
