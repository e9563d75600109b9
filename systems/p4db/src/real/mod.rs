//! P4DB in real mode: what the shared runtime (`pisadb-runtime`) needs from P4DB to run a rack
//! as processes, and what P4DB does with a real run.
//!
//! The runtime drives any host and any switch; this module says which: a node process is a
//! [`crate::node::Node`] planned from the rack's [`crate::RunConfig`] and recovered from its
//! write-ahead log ([`node`]); the switch process is a [`crate::RackSwitch`] with its hot
//! tuples loaded, rebuilt from every node's log after a crash ([`switch`]). The supervisor
//! ([`cluster`]) writes P4DB's rack config, starts the processes through the runtime's
//! supervisor, injects crashes, and checks the run: every store rebuilt from its log, the
//! switch's registers rebuilt from all logs, the workload's invariants. [`loadgen`] is
//! `pisadb switch-bench`: the switch process alone under P4DB's load, beside the simulator
//! running the same load. A real rack takes its own few settings ([`settings`]; the flags they
//! were before are kept as aliases), and [`outcome`] runs both commands from them and reports.
//!
//! Every process of a rack reads one [`P4dbRackConfig`]: the runtime's [`RackConfig`] with
//! [`P4dbSpec`] as the system's part, so all of them plan the same workload and layout
//! ([`crate::plan`]).

pub mod cluster;
pub mod loadgen;
pub mod node;
pub mod outcome;
pub mod settings;
pub mod switch;

use crate::RunConfig;
use pisadb_runtime::{RackConfig, RuntimeError};
use pisadb_sim::SimError;
use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

/// The system name in a P4DB rack's config.
pub const SYSTEM: &str = "p4db";

/// What every process of a P4DB rack is built from, besides the network.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct P4dbSpec {
    /// The rack and workload, as the simulator takes them (its time fields are unused).
    pub run: RunConfig,
    /// A worker aborts an attempt another node has not answered in this long (ms).
    pub peer_timeout_ms: u64,
    /// Keep every committed transaction and the final store for the end-of-run checks.
    pub verify: bool,
}

/// A P4DB rack's config file.
pub type P4dbRackConfig = RackConfig<P4dbSpec>;

/// Why a real P4DB process or run failed.
#[derive(Debug, Error)]
pub enum RealError {
    /// The runtime failed: a file, a socket, a process, a setting.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The rack cannot be planned (its workload, layout or switch program).
    #[error(transparent)]
    Plan(#[from] SimError),
    /// A node cannot be built or recovered from its log.
    #[error("node {node}: {why}")]
    Node {
        /// The node.
        node: u16,
        /// What is wrong.
        why: String,
    },
    /// The switch cannot be rebuilt from the nodes' logs.
    #[error("switch rebuild from the logs: {0}")]
    Rebuild(String),
    /// A load the switch benchmark cannot use, or a switch process that never served it.
    #[error(transparent)]
    Load(#[from] crate::real::loadgen::LoadError),
}

/// A result of P4DB's real mode.
pub type Result<T, E = RealError> = std::result::Result<T, E>;

/// Reads a P4DB rack config and checks that its network has one host per node.
pub fn load(path: &Path) -> Result<P4dbRackConfig> {
    let cfg: P4dbRackConfig = RackConfig::load(path)?;
    if cfg.system != SYSTEM {
        return Err(RuntimeError::bad_setting("system", &cfg.system, format!("{SYSTEM:?} for a P4DB rack")).into());
    }
    let (hosts, nodes) = (cfg.network.hosts.len(), cfg.spec.run.nodes);
    if hosts != usize::from(nodes) {
        return Err(RuntimeError::bad_setting(
            "network.hosts",
            format!("{hosts} addresses"),
            format!("one per node ({nodes})"),
        )
        .into());
    }
    if cfg.network.switches.len() != 1 {
        let switches = cfg.network.switches.len();
        return Err(RuntimeError::bad_setting("network.switches", switches, "1: a P4DB rack has one switch").into());
    }
    Ok(cfg)
}

/// P4DB's real mode in the system contract ([`pisadb_harness::real`]). Its rack takes its own
/// settings ([`settings::RealSettings`], by `--set`; its old flags `--nodes`, `--workers`,
/// `--cc`, `--workload`, … are aliases of them); `--variant` names its mode, as `--mode` (an
/// alias) does. Its `--preset`s are the simulator's and are refused here.
pub struct Real;

/// P4DB's [`Real`], for the binary's table of real modes.
pub static REAL: Real = Real;

/// `settings` as P4DB's real-mode settings, checked.
fn real_settings(settings: &serde_json::Value) -> std::result::Result<settings::RealSettings, String> {
    let s: settings::RealSettings = pisadb_harness::real::read_settings(settings, "--set")?;
    s.check().map(|()| s)
}

impl pisadb_harness::real::RealMode for Real {
    fn name(&self) -> &'static str {
        SYSTEM
    }

    fn flags(&self) -> &'static [pisadb_harness::real::RealFlag] {
        use pisadb_harness::real::RealFlag::*;
        &[Loss, DelayUs, JitterUs, PortWire, KillNode, KillSwitch, Down, Netns, NoLog, Set]
    }

    fn flag_aliases(&self) -> &'static [pisadb_harness::real::FlagAlias] {
        settings::ALIASES
    }

    fn defaults(&self) -> Option<serde_json::Value> {
        Some(serde_json::to_value(settings::RealSettings::default()).expect("settings serialize"))
    }

    fn processes(&self, _variant: &str, settings: &serde_json::Value) -> Option<(u16, u16)> {
        real_settings(settings).ok().map(|s| (s.nodes, 1))
    }

    fn check_settings(&self, _variant: &str, settings: &serde_json::Value) -> std::result::Result<(), String> {
        real_settings(settings).map(drop)
    }

    fn run_cluster(
        &self,
        run: &pisadb_harness::real::ClusterRun,
    ) -> std::result::Result<pisadb_harness::real::ClusterOutcome, String> {
        outcome::cluster(run)
    }

    fn switch_bench(
        &self,
        run: &pisadb_harness::real::SwitchBenchRun,
    ) -> Option<std::result::Result<pisadb_harness::real::ClusterOutcome, String>> {
        Some(outcome::switch_bench(run))
    }

    fn serve_switch(
        &self,
        config: &Path,
        id: u16,
        recover_from: &[std::path::PathBuf],
        epoch: u16,
        report: Option<&Path>,
    ) -> std::result::Result<(), String> {
        if id != 0 {
            return Err(RuntimeError::bad_setting("--id", id, "0: a P4DB rack has one switch").to_string());
        }
        let cfg = load(config).map_err(|e| e.to_string())?;
        switch::run_switch(&cfg, recover_from, epoch, report).map(drop).map_err(|e| e.to_string())
    }

    fn serve_host(&self, config: &Path, id: u16, data_dir: &Path) -> std::result::Result<(), String> {
        let cfg = load(config).map_err(|e| e.to_string())?;
        node::run_node(&cfg, id, data_dir).map(drop).map_err(|e| e.to_string())
    }
}
