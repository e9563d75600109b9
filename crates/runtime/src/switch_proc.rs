//! The software switch as a process: the pipeline model ([`pisadb_p4db::RackSwitch`], the same
//! one the simulator drives) behind a UDP socket.
//!
//! Each round receives a batch of datagrams, maps each sender's address to its node id (the
//! config's table; anything else is counted as unregistered and dropped, never executed), hands
//! them to the model with the current time, runs what the model has due (recirculated packets
//! re-entering), and sends what leaves it in one batch, through the wire behind each port
//! ([`crate::wire`]: loss and delay, if the config asks for them). The model's own latencies (a pass,
//! recirculation) are hundreds of nanoseconds, below the loop's granularity: packets go out as
//! soon as the model has produced them.
//!
//! For the same reason the model may run ahead of the wall clock: a packet waiting for a
//! pipeline lock recirculates every few hundred nanoseconds in model time, and a round of
//! system calls per recirculation would make the process, not the model, decide how long
//! waiting takes. After each batch the loop therefore runs every model event due within
//! [`RUN_AHEAD_NS`] of now at once; model time then leads the wall clock by at most that, and
//! the next round's time is the later of the two (model time never goes back).
//!
//! ## Restart
//!
//! Started with the nodes' data directories (`--recover-from`), the switch first rebuilds its
//! registers from their logs ([`pisadb_p4db::node::rebuild`]) and only then opens its socket, so no
//! transaction runs on a half-built state. Nodes resend what went unanswered; the rebuilt
//! switch answers those it replayed from its memory of answers.

use crate::udp::BatchSocket;
use crate::wal_file::read_dir_log;
use crate::wire::{PortReport, Wires};
use crate::{stop_requested, unix_now_ns, RealConfig};
use pisadb_core::{Nanos, TupleKey};
use pisadb_p4db::node::rebuild::{rebuild_switch, RebuildReport};
use pisadb_p4db::{RackPlan, RackSwitch};
use pisadb_switch::SwitchDevice;
use pisadb_switch::SwitchStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How far the model's time may lead the wall clock (see the module documentation).
pub const RUN_AHEAD_NS: Nanos = 50_000;

/// What the switch reports when it stops.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SwitchReport {
    /// Datagrams received.
    pub datagrams_in: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// Datagrams from addresses not in the table.
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
    /// Datagrams forwarded node to node.
    pub forwarded: u64,
    /// Program packets sent out.
    pub emitted: u64,
    /// Packets dropped after admission, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Datagrams refused, by reason (malformed, unknown node, spoofed sender, …).
    pub rejected: BTreeMap<String, u64>,
    /// The last GID stamped.
    pub last_gid: u64,
    /// Copies of finished transactions answered again without running them.
    pub replayed_answers: u64,
    /// What each port's wire did (loss, delay: [`crate::wire`]).
    #[serde(default)]
    pub ports: Vec<PortReport>,
    /// What the rebuild did, if the switch was rebuilt from the logs.
    pub rebuild: Option<RebuildSummary>,
    /// P4DB mode: every hot tuple's value at the end.
    pub hot_values: Vec<(TupleKey, i64)>,
}

/// [`RebuildReport`] in the report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RebuildSummary {
    /// Replayed in GID order.
    pub by_gid: usize,
    /// Placed by dependency.
    pub placed_by_dependency: usize,
    /// Appended.
    pub appended: usize,
}

impl From<RebuildReport> for RebuildSummary {
    fn from(r: RebuildReport) -> Self {
        RebuildSummary { by_gid: r.by_gid, placed_by_dependency: r.placed_by_dependency, appended: r.appended }
    }
}

/// Builds the switch of `cfg` in `epoch`, rebuilt from the logs in `recover_from` if any are
/// given.
pub fn build_switch(
    cfg: &RealConfig,
    recover_from: &[PathBuf],
    epoch: u16,
) -> Result<(RackPlan, RackSwitch, Option<RebuildSummary>), String> {
    let plan = pisadb_p4db::plan(&cfg.run).map_err(|e| e.to_string())?;
    let mut switch = fresh_switch(&plan, cfg)?;
    if let RackSwitch::P4db(s) = &mut switch {
        s.program_mut().set_epoch(epoch);
    }
    let mut rebuilt = None;
    if !recover_from.is_empty() {
        let logs = recover_from.iter().map(|d| read_dir_log(d)).collect::<Result<Vec<_>, _>>()?;
        if let RackSwitch::P4db(s) = &mut switch {
            let report = rebuild_switch(s, &logs)?;
            eprintln!(
                "switch: rebuilt from {} logs: {} transactions in GID order, {} placed by dependency, {} unanswered appended",
                logs.len(),
                report.by_gid,
                report.placed_by_dependency,
                report.appended
            );
            rebuilt = Some(report.into());
        }
    }
    Ok((plan, switch, rebuilt))
}

/// The switch of `plan` as it starts, with every node of `cfg` attached.
pub fn fresh_switch(plan: &RackPlan, cfg: &RealConfig) -> Result<RackSwitch, String> {
    let mut switch = plan.switch(&cfg.run).map_err(|e| e.to_string())?;
    for id in 0..cfg.run.nodes {
        switch.attach(id);
    }
    Ok(switch)
}

/// The hot tuples' values in a P4DB switch.
pub fn hot_values(plan: &RackPlan, switch: &RackSwitch) -> Vec<(TupleKey, i64)> {
    plan.layout.iter().filter_map(|(k, p)| switch.register_value(p.register, p.index).map(|v| (k, v))).collect()
}

/// Runs the switch until SIGINT/SIGTERM; writes its report to `report` if given.
pub fn run_switch(
    cfg: &RealConfig,
    recover_from: &[PathBuf],
    epoch: u16,
    report: Option<&Path>,
) -> Result<SwitchReport, String> {
    let (plan, mut switch, rebuild) = build_switch(cfg, recover_from, epoch)?;
    let mut socket = BatchSocket::bind(cfg.switch)?;
    let cfg = &cfg.ready("switch")?;
    let mut out = SwitchReport { rebuild, ..SwitchReport::default() };
    let clock = || unix_now_ns().saturating_sub(cfg.epoch_unix_ns);
    let started = clock();
    let mut now: Nanos = started;
    let mut outgoing = Vec::new();
    let mut wires = Wires::new(&cfg.wire, cfg.run.nodes, cfg.run.seed);
    let cpu_at_start = cpu_seconds();
    let mut leaving = Vec::new();
    while !stop_requested() {
        let due = [switch.poll_timeout(), wires.next_due()].into_iter().flatten().min();
        let wait = due.map_or(1_000_000, |t| t.saturating_sub(now)).min(1_000_000);
        let received = socket.recv_batch(Duration::from_nanos(wait), |from, bytes| {
            out.datagrams_in += 1;
            match cfg.node_at(from) {
                Some(node) => switch.handle_datagram(now, node, bytes),
                None => out.unregistered += 1,
            }
        })?;
        out.batches_in += u64::from(received > 0);
        // The model needs time to move forward only.
        now = clock().max(now);
        switch.handle_timeout(now);
        let horizon = now + RUN_AHEAD_NS;
        while let Some(due) = switch.poll_timeout().filter(|&t| t <= horizon) {
            now = now.max(due);
            switch.handle_timeout(now);
        }
        while let Some(t) = switch.poll_transmit() {
            wires.egress(now, t.dst, t.bytes, &mut leaving);
        }
        wires.release(now, &mut leaving);
        for (port, bytes) in leaving.drain(..) {
            if let Some(&to) = cfg.nodes.get(usize::from(port)) {
                outgoing.push((to, bytes));
            }
        }
        out.datagrams_out += socket.send_batch(&outgoing) as u64;
        outgoing.clear();
    }
    out.seconds = clock().saturating_sub(started) as f64 / 1e9;
    out.ports = wires.reports();
    out.cpu_s = cpu_seconds() - cpu_at_start;
    let stats: &SwitchStats = switch.stats();
    let named = |m: &BTreeMap<&'static str, u64>| m.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    (out.passes, out.recirculations, out.forwarded, out.emitted) =
        (stats.passes, stats.recirculations, stats.forwarded, stats.emitted);
    (out.dropped, out.rejected, out.last_gid) = (named(&stats.dropped), named(&stats.rejected), stats.last_gid);
    if let RackSwitch::P4db(s) = &switch {
        out.replayed_answers = s.program().replayed;
        if cfg.run.mode == pisadb_p4db::node::Mode::P4db {
            out.hot_values = hot_values(&plan, &switch);
        }
    }
    if let Some(path) = report {
        std::fs::write(path, serde_json::to_vec(&out).expect("report serializes"))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(out)
}

/// CPU seconds this process has used, user and system.
fn cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    use nix::sys::time::TimeValLike;
    getrusage(UsageWho::RUSAGE_SELF)
        .map_or(0.0, |u| (u.user_time().num_microseconds() + u.system_time().num_microseconds()) as f64 / 1e6)
}
