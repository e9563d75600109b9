//! P4DB's switch as a process: the rack's [`RackSwitch`] (the same one the simulator drives),
//! planned from the rack's config, run by the runtime's switch loop
//! ([`pisadb_runtime::switch_proc`]).
//!
//! ## Restart
//!
//! Started with the nodes' data directories (`--recover-from`), the switch first rebuilds its
//! registers from their logs ([`crate::node::rebuild`]) and only then opens its socket, so no
//! transaction runs on a half-built state. Nodes resend what went unanswered; the rebuilt
//! switch answers those it replayed from its memory of answers. Each restart is a new epoch,
//! stamped on every answer, so nodes drop answers of a killed switch still on the wire.

use crate::node::rebuild::{rebuild_switch, RebuildReport};
use crate::node::{LogRecord, Mode};
use crate::real::{P4dbRackConfig, RealError, Result};
use crate::{RackPlan, RackSwitch};
use pisadb_core::TupleKey;
use pisadb_runtime::switch_proc::{self, SwitchReport};
use pisadb_runtime::wal_file::read_dir_log;
use pisadb_runtime::write_json;
use pisadb_switch::SwitchDevice;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What P4DB's switch reports when it stops: the runtime's counters and P4DB's own.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct P4dbSwitchReport {
    /// Traffic and the pipeline's counters.
    #[serde(flatten)]
    pub traffic: SwitchReport,
    /// Copies of finished transactions answered again without running them.
    pub replayed_answers: u64,
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

/// The switch of `plan` as it starts, with every node of `cfg` attached.
pub fn fresh_switch(plan: &RackPlan, cfg: &P4dbRackConfig) -> Result<RackSwitch> {
    let mut switch = plan.switch(&cfg.spec.run)?;
    for id in 0..cfg.spec.run.nodes {
        switch.attach(id);
    }
    Ok(switch)
}

/// Builds the switch of `cfg` in `epoch`, rebuilt from the logs in `recover_from` if any are
/// given.
pub fn build_switch(
    cfg: &P4dbRackConfig,
    recover_from: &[PathBuf],
    epoch: u16,
) -> Result<(RackPlan, RackSwitch, Option<RebuildSummary>)> {
    let plan = crate::plan(&cfg.spec.run)?;
    let mut switch = fresh_switch(&plan, cfg)?;
    let mut rebuilt = None;
    if let RackSwitch::P4db(s) = &mut switch {
        s.program_mut().set_epoch(epoch);
        if !recover_from.is_empty() {
            let logs = recover_from.iter().map(|d| read_dir_log::<LogRecord>(d)).collect::<Result<Vec<_>, _>>()?;
            let report = rebuild_switch(s, &logs).map_err(RealError::Rebuild)?;
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

/// The hot tuples' values in a P4DB switch.
pub fn hot_values(plan: &RackPlan, switch: &RackSwitch) -> Vec<(TupleKey, i64)> {
    plan.layout.iter().filter_map(|(k, p)| switch.register_value(p.register, p.index).map(|v| (k, v))).collect()
}

/// Runs the switch of `cfg` until SIGINT/SIGTERM; writes its report to `report` if given.
pub fn run_switch(
    cfg: &P4dbRackConfig,
    recover_from: &[PathBuf],
    epoch: u16,
    report: Option<&Path>,
) -> Result<P4dbSwitchReport> {
    let (plan, mut switch, rebuild) = build_switch(cfg, recover_from, epoch)?;
    let traffic = switch_proc::serve(cfg, 0, &mut switch, cfg.spec.run.seed)?;
    let mut out = P4dbSwitchReport { traffic, rebuild, ..P4dbSwitchReport::default() };
    if let RackSwitch::P4db(s) = &switch {
        out.replayed_answers = s.program().replayed;
        if cfg.spec.run.mode == Mode::P4db {
            out.hot_values = hot_values(&plan, &switch);
        }
    }
    if let Some(path) = report {
        write_json(path, &out)?;
    }
    Ok(out)
}
