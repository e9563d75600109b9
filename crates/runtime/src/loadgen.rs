//! The switch benchmark: the software switch process alone, under a load generator, measured
//! side by side with what the simulator's switch model predicts for the same load.
//!
//! ## What is measured
//!
//! [`run_switch_bench`] starts one `pisadb switch` child process exactly as the supervisor
//! does (a [`RealConfig`] on loopback, the same [`crate::cluster::Procs`]), and then plays every
//! node of that config itself: it binds each node address and sends what a node would send
//! through the switch. The messages come from the rack's own workload and layout
//! ([`message_pool`]): for each transaction a node's generator issues, a hot one (or a warm
//! one's hot part) becomes the P4DB switch packet the node would send
//! ([`pisadb_p4db::programs::p4db::P4dbEngine::packet_for`], the node's own builder), and a
//! cold distributed one becomes its first remote request, a `LockRead` forwarded to the
//! tuple's owner, which (the generator again, on the owner's socket) answers it through the
//! switch. Local cold transactions never reach the switch and are skipped.
//!
//! ## A closed loop with a bounded window
//!
//! Each sender has `window` slots, one message in flight per slot, like a node's workers run
//! one transaction each. A slot is a worker id in the transaction ids it sends
//! ([`pisadb_p4db::node::machine::txn_id`]), so the switch's at-most-once memory (one entry per worker
//! slot) sees what it would see from real nodes: each slot's ids increase. A slot whose answer
//! is lost is freed after a timeout and sends its next message. Bounded windows keep the
//! offered load at what the switch can take instead of filling socket buffers and measuring
//! the kernel's drops.
//!
//! ## One generator, two drivers
//!
//! [`Generator`] is sans-IO: it hands out datagrams to send and takes datagrams received,
//! with `now` passed in. [`run_switch_bench`] drives it with real sockets (one thread polls
//! every sender's socket, leaving the other core of a small machine to the switch), and
//! [`model_run`] drives it against the simulator's switch model ([`pisadb_p4db::RackSwitch`], the
//! same pipeline the switch process runs) over the simulator's links ([`pisadb_sim::Topology`])
//! in virtual time. The two runs therefore see the same message mix, the same senders and the
//! same window; what differs is the switch: a process on a kernel UDP stack, or the modelled
//! Tofino behind 10 GbE links. The model's figures are predictions of the model, never fitted
//! to the measurement.

use crate::cluster::{free_ports, read_json, stop, Procs};
use crate::switch_proc::SwitchReport;
use crate::udp::BatchSocket;
use crate::{install_stop_signals, stop_requested, unix_now_ns, RealConfig};
use hdrhistogram::Histogram;
use pisadb_core::{Nanos, OpKind, Scheduler, Txn};
use pisadb_p4db::node::machine::{owner_node, txn_id, worker_of};
use pisadb_p4db::node::Mode;
use pisadb_p4db::wire::p4db::TxnPacket;
use pisadb_p4db::{RackPlan, RunConfig};
use pisadb_sim::net::Endpoint;
use pisadb_sim::Topology;
use pisadb_switch::SwitchDevice;
use pisadb_wire::node::{LockMode, NodeMsg, OnConflict, MAX_ITEMS};
use pisadb_wire::{Frame, Kind, FRAME_BYTES, SWITCH_ID};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
pub fn message_pool(plan: &RackPlan, run: &RunConfig, sender: u16, size: usize) -> Result<Vec<Template>, String> {
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
    Err(format!(
        "node {sender}: {} of {size} messages in {draws_max} {} transactions: the workload puts (almost) nothing \
         through the switch (mode {}); raise --hot-prob or --remote",
        pool.len(),
        workload.name(),
        run.mode.name()
    ))
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
            Frame { kind: Kind::P4dbTxn, src, dst: SWITCH_ID }.encode(&mut bytes);
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
    Frame { kind: Kind::Forward, src, dst }.encode(&mut bytes);
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

/// One sender: its messages and its slots.
struct Sender {
    pool: Vec<Template>,
    next: usize,
    slots: Vec<Slot>,
}

/// What the generator counted.
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
    pub txn_latency: Histogram<u64>,
    /// Send to answer, lock requests (two trips through the switch; ns).
    pub lock_latency: Histogram<u64>,
}

impl Default for Tally {
    fn default() -> Self {
        let histogram = || Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("valid bounds");
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
            txn_latency: histogram(),
            lock_latency: histogram(),
        }
    }
}

/// The load generator as a sans-IO state machine (see the module documentation).
pub struct Generator {
    senders: Vec<Sender>,
    timeout_ns: Nanos,
    /// What it counted since it started or since [`Generator::restart_tally`].
    pub tally: Tally,
}

impl Generator {
    /// A generator whose sender `i` sends the messages of `pools[i]` in a loop, `window` at a
    /// time (at most 64: worker ids have 6 bits), giving up on an answer after `timeout_ns`.
    pub fn new(pools: Vec<Vec<Template>>, window: u16, timeout_ns: Nanos) -> Result<Self, String> {
        if !(1..=64).contains(&window) {
            return Err(format!("--window {window}: expected 1..=64 (one worker slot each)"));
        }
        if pools.iter().any(|p| p.is_empty()) {
            return Err("every sender needs at least one message".into());
        }
        let senders = pools
            .into_iter()
            .map(|pool| Sender { pool, next: 0, slots: vec![Slot::default(); usize::from(window)] })
            .collect();
        Ok(Generator { senders, timeout_ns, tally: Tally::default() })
    }

    /// Forgets the counts so far (the end of a warm-up).
    pub fn restart_tally(&mut self) {
        self.tally = Tally::default();
    }

    /// Sends a message from every slot that is free or waited too long: appends
    /// `(sender, datagram)` to `out`.
    pub fn fill(&mut self, now: Nanos, out: &mut Vec<(u16, Vec<u8>)>) {
        for (s, sender) in self.senders.iter_mut().enumerate() {
            for (w, slot) in sender.slots.iter_mut().enumerate() {
                match slot.sent_at {
                    Some(at) if now.saturating_sub(at) < self.timeout_ns => continue,
                    Some(_) => self.tally.timed_out += 1,
                    None => {}
                }
                let template = &sender.pool[sender.next];
                sender.next = (sender.next + 1) % sender.pool.len();
                slot.seq = slot.seq.wrapping_add(1);
                slot.sent_at = Some(now);
                slot.switch_txn = matches!(template, Template::SwitchTxn(_));
                if slot.switch_txn {
                    self.tally.txn_sent += 1;
                } else {
                    self.tally.lock_sent += 1;
                }
                let id = txn_id(s as u16, 0, w as u16, slot.seq);
                out.push((s as u16, encode(template, s as u16, id)));
                self.tally.datagrams_out += 1;
            }
        }
    }

    /// Sender `at` received `bytes` from the switch; an owner's answer to a lock request goes
    /// to `out`.
    pub fn handle(&mut self, now: Nanos, at: u16, bytes: &[u8], out: &mut Vec<(u16, Vec<u8>)>) {
        self.tally.datagrams_in += 1;
        let Ok((frame, payload)) = Frame::decode(bytes) else {
            self.tally.unexpected += 1;
            return;
        };
        match frame.kind {
            Kind::P4dbTxn => match TxnPacket::decode(payload) {
                Ok(p) => self.answered(now, at, p.txn_id),
                Err(_) => self.tally.unexpected += 1,
            },
            Kind::Forward => match NodeMsg::decode(payload) {
                Ok(NodeMsg::LockRead { txn, entries, .. }) => {
                    let reply = NodeMsg::LockReadReply { txn, granted: true, values: vec![(0, 0); entries.len()] };
                    out.push((at, forward(at, frame.src, &reply)));
                    self.tally.lock_served += 1;
                    self.tally.datagrams_out += 1;
                }
                Ok(NodeMsg::LockReadReply { txn, .. }) => self.answered(now, at, txn),
                _ => self.tally.unexpected += 1,
            },
            Kind::Lock | Kind::Control => self.tally.unexpected += 1,
        }
    }

    /// The answer to transaction `id` reached sender `at`.
    fn answered(&mut self, now: Nanos, at: u16, id: u64) {
        let slot = (owner_node(id) == at)
            .then(|| self.senders.get_mut(usize::from(at)))
            .flatten()
            .and_then(|s| s.slots.get_mut(usize::from(worker_of(id))));
        let Some(slot) = slot else {
            self.tally.unexpected += 1;
            return;
        };
        match slot.sent_at {
            Some(sent) if slot.seq == id as u32 => {
                slot.sent_at = None;
                let latency = now.saturating_sub(sent).max(1);
                if slot.switch_txn {
                    self.tally.txn_answered += 1;
                    self.tally.txn_latency.saturating_record(latency);
                } else {
                    self.tally.lock_answered += 1;
                    self.tally.lock_latency.saturating_record(latency);
                }
            }
            _ => self.tally.late += 1,
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
    /// Switch transaction latency, send to answer: median (µs).
    pub txn_latency_p50_us: f64,
    /// 99th percentile (µs).
    pub txn_latency_p99_us: f64,
    /// Lock request round trip: median (µs).
    pub lock_latency_p50_us: f64,
    /// Slots given up after the timeout.
    pub timed_out: u64,
}

impl Side {
    fn of(tally: &Tally, seconds: f64, passes: u64) -> Side {
        let per_s = |n: u64| n as f64 / seconds.max(1e-12);
        let us = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1e3 };
        Side {
            seconds,
            offered_per_s: per_s(tally.datagrams_out),
            answered_per_s: per_s(tally.datagrams_in),
            switch_txn_per_s: per_s(tally.txn_answered),
            lock_round_trips_per_s: per_s(tally.lock_answered),
            passes_per_s: per_s(passes),
            txn_latency_p50_us: us(&tally.txn_latency, 0.5),
            txn_latency_p99_us: us(&tally.txn_latency, 0.99),
            lock_latency_p50_us: us(&tally.lock_latency, 0.5),
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
    pub switch: SwitchReport,
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
pub fn run_switch_bench(opts: &BenchOptions) -> Result<BenchResult, String> {
    install_stop_signals()?;
    if opts.run.mode != Mode::P4db {
        return Err(format!("mode {}: the switch benchmark loads the P4DB engine only", opts.run.mode.name()));
    }
    std::fs::create_dir_all(&opts.data_dir).map_err(|e| format!("{}: {e}", opts.data_dir.display()))?;
    let nodes = opts.run.nodes;
    let addrs = free_ports(usize::from(nodes) + 1)?;
    let now = unix_now_ns();
    let cfg = RealConfig {
        run: opts.run.clone(),
        switch: addrs[0],
        nodes: addrs[1..].to_vec(),
        // The switch's clock starts now; nodes never run, so no stop time matters.
        epoch_unix_ns: now,
        stop_unix_ns: now,
        peer_timeout_ms: opts.timeout_ms,
        durable: false,
        verify: false,
        wire: Vec::new(),
        // The generator finds the switch ready by probing it.
        rendezvous: None,
    };
    let config = opts.data_dir.join("rack.json");
    cfg.save(&config)?;
    let procs = Procs { exe: opts.exe.clone(), config, data_dir: opts.data_dir.clone(), nodes, namespaces: None };
    let mut switch = procs.spawn_switch(0)?;
    let measured = (|| {
        eprintln!("switch-bench: switch process on {}; planning the rack to build the senders' packets", cfg.switch);
        let plan = pisadb_p4db::plan(&opts.run).map_err(|e| e.to_string())?;
        let pools = (0..nodes).map(|s| message_pool(&plan, &opts.run, s, opts.pool)).collect::<Result<Vec<_>, _>>()?;
        let mut sockets = cfg.nodes.iter().map(|&a| BatchSocket::bind(a)).collect::<Result<Vec<_>, _>>()?;
        wait_for_switch(&mut sockets, cfg.switch, &mut switch)?;
        let generator = Generator::new(pools.clone(), opts.window, opts.timeout_ms * 1_000_000)?;
        let (tally, seconds) = drive_sockets(generator, &mut sockets, cfg.switch, opts.seconds)?;
        Ok::<_, String>((plan, pools, tally, seconds))
    })();
    // The switch writes its report when asked to stop, whatever happened here.
    let stopped = stop(&mut switch);
    let (plan, pools, tally, seconds) = measured?;
    stopped?;
    let report: SwitchReport = read_json(&opts.data_dir.join("switch.json"))?;
    eprintln!("switch-bench: running the simulator's switch model on the same load ({} ms virtual)", opts.model_ms);
    let generator = Generator::new(pools.clone(), opts.window, opts.timeout_ms * 1_000_000)?;
    let (model_tally, model_passes) = model_run(&plan, &opts.run, generator, opts.model_ms * 1_000_000)?;
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
        measured: Side::of(&tally, seconds, report.passes),
        model: Side::of(&model_tally, opts.model_ms as f64 * 0.9 / 1e3, model_passes),
        mix,
        ceilings,
        switch: report,
        data_dir: opts.data_dir.clone(),
    })
}

/// Waits until the switch forwards a datagram (it plans the rack before it opens its socket).
fn wait_for_switch(
    sockets: &mut [BatchSocket],
    switch: SocketAddr,
    child: &mut std::process::Child,
) -> Result<(), String> {
    let mut probe = Vec::new();
    Frame { kind: Kind::Forward, src: 0, dst: 0 }.encode(&mut probe);
    NodeMsg::Commit { txn: u64::MAX }.encode(&mut probe);
    let deadline = unix_now_ns() + 300_000_000_000;
    while unix_now_ns() < deadline && !stop_requested() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the switch process ended before it served ({status}); see its messages above"));
        }
        sockets[0].send_batch(&[(switch, probe.clone())]);
        let mut back = false;
        sockets[0].recv_batch(Duration::from_millis(20), |from, bytes| back |= from == switch && bytes == probe)?;
        if back {
            return Ok(());
        }
    }
    Err("the switch process did not forward a probe within 300 s".into())
}

/// Drives `generator` over the real sockets for `seconds` after a short warm-up; returns its
/// tally and the seconds measured.
#[allow(clippy::disallowed_methods)] // a driver: it reads the clock, protocol code does not
fn drive_sockets(
    mut generator: Generator,
    sockets: &mut [BatchSocket],
    switch: SocketAddr,
    seconds: f64,
) -> Result<(Tally, f64), String> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let start = std::time::Instant::now();
    let clock = || start.elapsed().as_nanos() as Nanos;
    // A warm-up lets the switch's memory of slots and the sockets' buffers settle.
    let warmup_ns: Nanos = 300_000_000;
    let end_ns = warmup_ns + (seconds * 1e9) as Nanos;
    let mut measuring_since = None;
    let mut next_progress = warmup_ns + 1_000_000_000;
    let mut out: Vec<(u16, Vec<u8>)> = Vec::new();
    let mut batches: Vec<Vec<(SocketAddr, Vec<u8>)>> = vec![Vec::new(); sockets.len()];
    let mut ready = vec![false; sockets.len()];
    let mut last_out = 0;
    loop {
        let now = clock();
        if now >= end_ns || stop_requested() {
            break;
        }
        if measuring_since.is_none() && now >= warmup_ns {
            generator.restart_tally();
            measuring_since = Some(now);
        }
        if now >= next_progress {
            let t = &generator.tally;
            eprintln!(
                "switch-bench: {:.0} s: {:.0} datagrams/s to the switch",
                (now - warmup_ns) as f64 / 1e9,
                (t.datagrams_out - last_out) as f64
            );
            last_out = t.datagrams_out;
            next_progress += 1_000_000_000;
        }
        generator.fill(now, &mut out);
        for (s, bytes) in out.drain(..) {
            batches[usize::from(s)].push((switch, bytes));
        }
        for (socket, batch) in sockets.iter_mut().zip(&mut batches) {
            socket.send_batch(batch);
            batch.clear();
        }
        {
            let mut fds: Vec<PollFd> = sockets.iter().map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN)).collect();
            poll(&mut fds, PollTimeout::from(1u8)).map_err(|e| format!("poll: {e}"))?;
            for (r, fd) in ready.iter_mut().zip(&fds) {
                *r = fd.revents().is_some_and(|e| e.contains(PollFlags::POLLIN));
            }
        }
        let now = clock();
        for (s, socket) in sockets.iter_mut().enumerate() {
            if !ready[s] {
                continue;
            }
            socket.recv_batch(Duration::ZERO, |from, bytes| {
                if from == switch {
                    generator.handle(now, s as u16, bytes, &mut out);
                } else {
                    generator.tally.unexpected += 1;
                }
            })?;
        }
    }
    let measured_ns = clock().saturating_sub(measuring_since.unwrap_or(0));
    Ok((generator.tally, measured_ns as f64 / 1e9))
}

/// An event of the model run.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum ModelEvent {
    /// A datagram reaches the switch from sender `from`.
    AtSwitch { from: u16, bytes: Vec<u8> },
    /// A datagram reaches sender `at`.
    AtSender { at: u16, bytes: Vec<u8> },
    /// The switch has something due (a recirculated packet re-entering).
    SwitchWake,
    /// The generator looks for timed-out slots.
    Tick,
}

/// Drives `generator` against the simulator's switch model and links for `virtual_ns`
/// (senders spend no time: the load generator is ideal). The first tenth is a warm-up, not
/// counted. Returns the tally and the switch's passes in the counted part.
pub fn model_run(
    plan: &RackPlan,
    run: &RunConfig,
    mut generator: Generator,
    virtual_ns: Nanos,
) -> Result<(Tally, u64), String> {
    let mut switch = plan.switch(run).map_err(|e| e.to_string())?;
    for id in 0..run.nodes {
        switch.attach(id);
    }
    let mut links = Topology::rack(run.nodes, &run.link);
    let nic_ns = run.link.nic_ns;
    let mut events: Scheduler<ModelEvent> = Scheduler::new();
    let push = |events: &mut Scheduler<ModelEvent>, at: Nanos, e: ModelEvent| events.push(at, e);
    let tick_ns = (generator.timeout_ns / 4).max(1_000);
    let warmup_ns = virtual_ns / 10;
    let (mut passes_at_warmup, mut warm) = (0, false);
    let mut out = Vec::new();
    let mut wake: Option<Nanos> = None;
    generator.fill(0, &mut out);
    push(&mut events, tick_ns, ModelEvent::Tick);
    let mut now: Nanos = 0;
    loop {
        for (s, bytes) in out.drain(..) {
            let link = links.link(Endpoint::Host(s), Endpoint::Switch(0)).expect("every sender has an uplink");
            let at = link.carry(now + nic_ns, bytes.len());
            push(&mut events, at, ModelEvent::AtSwitch { from: s, bytes });
        }
        while let Some(t) = switch.poll_transmit() {
            let Some(link) = links.link(Endpoint::Switch(0), Endpoint::Host(t.dst)) else { continue };
            let at = link.carry(t.at_ns, t.bytes.len()) + nic_ns;
            push(&mut events, at, ModelEvent::AtSender { at: t.dst, bytes: t.bytes });
        }
        if let Some(at) = switch.poll_timeout() {
            if wake.is_none_or(|w| at < w) {
                wake = Some(at.max(now));
                push(&mut events, at.max(now), ModelEvent::SwitchWake);
            }
        }
        let Some((at, event)) = events.pop() else { break };
        now = at;
        if now >= virtual_ns {
            break;
        }
        if !warm && now >= warmup_ns {
            warm = true;
            generator.restart_tally();
            passes_at_warmup = switch.stats().passes;
        }
        match event {
            ModelEvent::AtSwitch { from, bytes } => switch.handle_datagram(now, from, &bytes),
            ModelEvent::AtSender { at, bytes } => {
                generator.handle(now, at, &bytes, &mut out);
                generator.fill(now, &mut out);
            }
            ModelEvent::SwitchWake => {
                if wake == Some(now) {
                    wake = None;
                }
                switch.handle_timeout(now);
            }
            ModelEvent::Tick => {
                generator.fill(now, &mut out);
                push(&mut events, now + tick_ns, ModelEvent::Tick);
            }
        }
    }
    Ok((generator.tally, switch.stats().passes - passes_at_warmup))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_rack() -> RunConfig {
        let mut run = RunConfig::ycsb_default();
        run.nodes = 2;
        run.workload = pisadb_p4db::WorkloadSpec::SmallBank(pisadb_workload::SmallBankConfig {
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
        let plan = pisadb_p4db::plan(&run).unwrap();
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

    #[test]
    fn the_generator_keeps_at_most_window_messages_in_flight_and_matches_answers_to_slots() {
        let run = small_rack();
        let plan = pisadb_p4db::plan(&run).unwrap();
        let pools = (0..2).map(|s| message_pool(&plan, &run, s, 50).unwrap()).collect();
        let mut g = Generator::new(pools, 3, 1_000).unwrap();
        let mut out = Vec::new();
        g.fill(0, &mut out);
        assert_eq!(out.len(), 6, "2 senders x window 3");
        g.fill(10, &mut out);
        assert_eq!(out.len(), 6, "no free slot, nothing timed out");
        // Answer sender 0's first message as the switch would: a transaction packet comes back
        // as it went; a lock request reaches its owner first, whose answer comes back.
        let (s, bytes) = out[0].clone();
        let (frame, _) = Frame::decode(&bytes).unwrap();
        let mut more = Vec::new();
        let answer = if frame.kind == Kind::P4dbTxn {
            bytes
        } else {
            g.handle(15, frame.dst, &bytes, &mut more);
            assert_eq!(more.len(), 1, "the owner answers");
            let (owner, reply) = more.pop().unwrap();
            assert_eq!(owner, frame.dst);
            reply
        };
        g.handle(20, s, &answer, &mut more);
        assert_eq!(g.tally.txn_answered + g.tally.lock_answered, 1);
        g.handle(21, s, &answer, &mut more);
        assert_eq!(g.tally.late, 1, "a second copy of an answer is late, not a second answer");
        g.fill(30, &mut out);
        assert_eq!(out.len(), 7, "the answered slot sends its next message");
        g.fill(2_000, &mut out);
        assert_eq!(g.tally.timed_out, 6, "every other slot waited past the timeout");
        assert_eq!(out.len(), 13);
    }

    #[test]
    fn the_model_answers_every_message_and_stays_under_its_pipeline_ceiling() {
        let run = small_rack();
        let plan = pisadb_p4db::plan(&run).unwrap();
        let pools: Vec<_> = (0..2).map(|s| message_pool(&plan, &run, s, 200).unwrap()).collect();
        let g = Generator::new(pools.clone(), 4, 1_000_000).unwrap();
        let (tally, passes) = model_run(&plan, &run, g, 2_000_000).unwrap();
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
