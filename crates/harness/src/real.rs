//! Real mode in the system contract: what a system's rack of processes offers, and the checks
//! every `pisadb cluster` request passes before any process starts.
//!
//! A system offers its real mode as a [`RealMode`]: serve its switch, serve any of its hosts
//! (each given the rack's config file, as the supervisor writes it), the [`RealFlag`]s its
//! cluster honours, and a check of its settings against what its rack can hold. The binary
//! keeps one table of them ([`RealModes`]) and never branches on a system's name: `pisadb
//! switch` and `pisadb node` look the config's system up, and `pisadb cluster` runs
//! [`RealModes::check_request`] first, so that:
//!
//! - a flag the system cannot honour is refused with its name and the systems that take it
//!   (not silently ignored);
//! - a kill at or after the end of the run, or of a process the rack does not have, is refused;
//! - settings the rack cannot hold (no clients, more than it can serve) are refused by the
//!   system's own [`RealMode::check_settings`];
//!
//! all before anything starts.
//!
//! The system then runs and checks its own cluster ([`RealMode::run_cluster`]): the binary
//! hands it a [`ClusterRun`] in the words every system shares (variant, settings, seconds,
//! wires, kills) and prints the [`ClusterOutcome`] it returns, a table or one JSON value, and
//! the verdict. A system's own flags of old (P4DB's `--nodes`, NetAccel's `--tuple-gap-ns`)
//! are settings like any other, taken by `--set`; the system may keep them as
//! [`FlagAlias`]es, which the binary rewrites to `--set KEY=VALUE` before it parses the
//! command line, so that no system's word is written in the binary.

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A flag of `pisadb cluster` that not every system can honour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RealFlag {
    /// `--loss`: datagrams the switch drops on its way to a host.
    Loss,
    /// `--delay-us`: delay added to datagrams toward a host.
    DelayUs,
    /// `--jitter-us`: delay drawn from delay ± jitter.
    JitterUs,
    /// `--port-wire`: one port's wire.
    PortWire,
    /// `--kill-node N@S`: `kill -9` a host and restart it.
    KillNode,
    /// `--kill-switch [ID@]S`: `kill -9` a switch and restart it.
    KillSwitch,
    /// `--down`: how long a killed process stays down.
    Down,
    /// `--netns`: the processes in network namespaces.
    Netns,
    /// `--no-log`: no write-ahead logs.
    NoLog,
    /// `--preset`: a named set of settings.
    Preset,
    /// `--set NAME=VALUE`: one of the system's settings.
    Set,
    /// An alias flag of one system's own ([`FlagAlias`]: P4DB's `--mode`, `--nodes`, …),
    /// named by the string.
    Own(&'static str),
}

impl RealFlag {
    /// The flag as typed.
    pub fn name(self) -> &'static str {
        match self {
            RealFlag::Loss => "--loss",
            RealFlag::DelayUs => "--delay-us",
            RealFlag::JitterUs => "--jitter-us",
            RealFlag::PortWire => "--port-wire",
            RealFlag::KillNode => "--kill-node",
            RealFlag::KillSwitch => "--kill-switch",
            RealFlag::Down => "--down",
            RealFlag::Netns => "--netns",
            RealFlag::NoLog => "--no-log",
            RealFlag::Preset => "--preset",
            RealFlag::Set => "--set",
            RealFlag::Own(name) => name,
        }
    }
}

/// A process to `kill -9` mid-run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RealKill {
    /// Host `id` at `at_s` seconds into the run.
    Node {
        /// The host.
        id: u16,
        /// Seconds into the run.
        at_s: f64,
    },
    /// Switch `id` at `at_s` seconds into the run.
    Switch {
        /// The switch.
        id: u16,
        /// Seconds into the run.
        at_s: f64,
    },
}

/// What `pisadb cluster` was asked, in the words every system shares.
#[derive(Clone, Debug, Default)]
pub struct RealRequest {
    /// The run's length in seconds (for a system whose run ends by itself: its deadline).
    pub seconds: f64,
    /// The flags given that not every system honours.
    pub flags: Vec<RealFlag>,
    /// The processes to kill.
    pub kills: Vec<RealKill>,
    /// The variant chosen.
    pub variant: String,
    /// The system's settings with every `--set` applied.
    pub settings: Value,
}

/// What an alias flag stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AliasTo {
    /// Another flag of the command, taking the same value (`--mode X` is `--variant X`).
    Flag(&'static str),
    /// A setting: `--nodes 4` is `--set nodes=4`.
    Set(&'static str),
    /// A flag without a value that stands for one assignment: `--no-verify` is
    /// `--set verify=false`.
    Assign(&'static str),
}

/// A flag a system keeps for one of its settings (or for a flag under another name), so that
/// commands written before the setting existed still run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlagAlias {
    /// The flag as typed (`--nodes`).
    pub flag: &'static str,
    /// What it stands for.
    pub to: AliasTo,
}

/// The faults on a wire from the switch to a host.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RealWire {
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Delay added to every datagram (µs).
    pub delay_us: u64,
    /// Each datagram's delay is drawn from delay ± jitter (µs).
    pub jitter_us: u64,
}

/// The hidden argument (`--alias-of-another-system=FLAG`) that [`RealModes::rewrite_aliases`]
/// leaves for another system's alias flag, for the command to refuse by name.
pub const FOREIGN_ALIAS_ARG: &str = "alias-of-another-system";

/// A cluster to run, in the words every system shares (what `pisadb cluster` was asked, once
/// [`RealModes::check_request`] passed it).
#[derive(Clone, Debug)]
pub struct ClusterRun {
    /// The variant.
    pub variant: String,
    /// The settings: the real mode's defaults, then `--preset`, then every `--set`.
    pub settings: Value,
    /// Where the settings came from, for errors (`--preset paper --set clients=4`; empty for
    /// the defaults).
    pub edits: String,
    /// The run's length in seconds (for a run that ends by itself: its deadline).
    pub seconds: f64,
    /// Where logs, config and reports go.
    pub data_dir: PathBuf,
    /// The `pisadb` binary, to start the rack's processes from.
    pub exe: PathBuf,
    /// Every port's wire (`--loss`, `--delay-us`, `--jitter-us`).
    pub wire: RealWire,
    /// Single ports' wires (`--port-wire`), each `wire` with the port's own values on top.
    pub port_wires: Vec<(u16, RealWire)>,
    /// The processes to `kill -9` and restart.
    pub kills: Vec<RealKill>,
    /// Seconds a killed process stays down.
    pub down_s: f64,
    /// The processes in network namespaces rather than on loopback.
    pub netns: bool,
    /// No write-ahead logs.
    pub no_log: bool,
}

impl ClusterRun {
    /// The settings read as the system's typed configuration; an error names where they came
    /// from.
    pub fn read_settings<T: DeserializeOwned>(&self) -> Result<T, String> {
        read_settings(&self.settings, &self.edits)
    }
}

/// `settings` read as `T`; an error names `edits` (where they came from).
pub fn read_settings<T: DeserializeOwned>(settings: &Value, edits: &str) -> Result<T, String> {
    serde_json::from_value(settings.clone()).map_err(|e| match edits {
        "" => format!("settings: {e}"),
        edits => format!("settings after {edits}: {e} (a value real mode's rack cannot hold)"),
    })
}

/// What a system's cluster (or another real-mode run) reports.
#[derive(Clone, Debug)]
pub struct ClusterOutcome {
    /// The report as printed without `--json`, up to the verdict.
    pub table: String,
    /// The report as one JSON value (`--json`).
    pub json: Value,
    /// Why the end-of-run checks failed, if one did.
    pub failure: Option<String>,
    /// What passing the checks means, printed `ok   …` after the table (`None`: the table
    /// states each check itself).
    pub ok: Option<String>,
    /// The last line: where the run's data is (empty: none, or in the table).
    pub data: String,
}

impl ClusterOutcome {
    /// The outcome of a cluster whose checks say `ok` when they pass; its data in `data_dir`,
    /// the hosts' reports under `reports`.
    pub fn checked(
        table: String,
        json: Value,
        failure: Option<String>,
        ok: &str,
        data_dir: &Path,
        reports: &Path,
    ) -> Self {
        let data = format!("data: {} (reports in {}/…)", data_dir.display(), reports.display());
        ClusterOutcome { table, json, failure, ok: Some(ok.to_string()), data }
    }

    /// The text printed without `--json`: the table, the verdict, where the data is.
    pub fn text(&self) -> String {
        let mut text = self.table.clone();
        if let Some(ok) = &self.ok {
            match &self.failure {
                None => text.push_str(&format!("ok   {ok}\n")),
                Some(why) => text.push_str(&format!("FAIL {why}\n")),
            }
        }
        if !self.data.is_empty() {
            text.push_str(&format!("\n{}\n", self.data));
        }
        text
    }

    /// The command's result: an error naming the check that failed.
    pub fn result(&self) -> Result<(), String> {
        match &self.failure {
            None => Ok(()),
            Some(why) => Err(format!("the checks failed: {why}")),
        }
    }
}

/// A switch process alone under a load generator (`pisadb switch-bench`), beside the
/// simulator's model of the same switch on the same load.
#[derive(Clone, Debug)]
pub struct SwitchBenchRun {
    /// The settings, as for a cluster (the real mode's defaults, then every `--set`).
    pub settings: Value,
    /// Where the settings came from, for errors.
    pub edits: String,
    /// Seconds of load on the switch process.
    pub seconds: f64,
    /// Hosts the load generator plays.
    pub senders: u16,
    /// Messages in flight per sender.
    pub window: u16,
    /// Virtual milliseconds the model runs the same load.
    pub model_ms: u64,
    /// A slot gives up on an answer after this many ms.
    pub timeout_ms: u64,
    /// Where the config and the switch's report go.
    pub data_dir: PathBuf,
    /// The `pisadb` binary, to start the switch from.
    pub exe: PathBuf,
}

/// A system's real mode (see the module documentation).
pub trait RealMode: Sync {
    /// The system's name, as in its rack config.
    fn name(&self) -> &'static str;

    /// The flags its cluster honours.
    fn flags(&self) -> &'static [RealFlag];

    /// Serves switch `id` of the rack in `config` until it is stopped; `recover_from` and
    /// `epoch` are for a switch restarted after a crash (the hosts' data directories to rebuild
    /// from, and its incarnation); `report` is where it writes its counters.
    fn serve_switch(
        &self,
        config: &Path,
        id: u16,
        recover_from: &[std::path::PathBuf],
        epoch: u16,
        report: Option<&Path>,
    ) -> Result<(), String>;

    /// Serves host `id` of the rack in `config` with its data (log, report) in `data_dir`.
    fn serve_host(&self, config: &Path, id: u16, data_dir: &Path) -> Result<(), String>;

    /// The settings its real mode starts from, where they differ from the system's defaults
    /// (a rack of processes sharing one machine's cores may start smaller); `--preset` and
    /// `--set` edit them. `None`: the system's defaults.
    fn defaults(&self) -> Option<Value> {
        None
    }

    /// The number of hosts and switches the rack of `variant` with `settings` has, if the
    /// system knows it before it starts (to refuse kills of processes it does not have).
    fn processes(&self, _variant: &str, _settings: &Value) -> Option<(u16, u16)> {
        None
    }

    /// Refuses settings its rack cannot hold (no clients, more than it can serve), naming the
    /// setting and the values accepted.
    fn check_settings(&self, _variant: &str, _settings: &Value) -> Result<(), String> {
        Ok(())
    }

    /// Runs `run`'s cluster and checks it; `Err` when it could not run (not when a check
    /// failed: that is the outcome's `failure`).
    fn run_cluster(&self, _run: &ClusterRun) -> Result<ClusterOutcome, String> {
        Err(format!("system {} has no cluster of its own", self.name()))
    }

    /// The alias flags the system keeps for its settings (see [`FlagAlias`]).
    fn flag_aliases(&self) -> &'static [FlagAlias] {
        &[]
    }

    /// Runs its switch alone under a load generator, if it has that benchmark (`None`: it has
    /// not).
    fn switch_bench(&self, _run: &SwitchBenchRun) -> Option<Result<ClusterOutcome, String>> {
        None
    }
}

/// Every system's real mode: the binary's one table of them.
pub struct RealModes {
    modes: Vec<&'static dyn RealMode>,
}

impl RealModes {
    /// The table of `modes`.
    pub fn new(modes: Vec<&'static dyn RealMode>) -> Self {
        RealModes { modes }
    }

    /// The real mode of `system`, or an error listing the systems that have one.
    pub fn get(&self, system: &str) -> Result<&'static dyn RealMode, String> {
        self.modes.iter().copied().find(|m| m.name() == system).ok_or_else(|| {
            let known: Vec<&str> = self.modes.iter().map(|m| m.name()).collect();
            format!("system {system:?} has no real mode here: expected one of {}", known.join(", "))
        })
    }

    /// Every real mode, in the table's order.
    pub fn all(&self) -> &[&'static dyn RealMode] {
        &self.modes
    }

    /// The systems whose cluster honours `flag` (as one of its flags or of its aliases).
    pub fn taking(&self, flag: RealFlag) -> Vec<&'static str> {
        self.modes.iter().filter(|m| honours(**m, flag)).map(|m| m.name()).collect()
    }

    /// Rewrites `system`'s alias flags in `args` (a command line's arguments after the
    /// subcommand) to what they stand for: `--nodes 4` to `--set nodes=4`, `--no-verify` to
    /// `--set verify=false`, `--mode X` to `--variant X` (refused if `--variant` says
    /// otherwise). Another system's alias flag becomes `--alias-of-another-system=FLAG` (its
    /// value dropped), which [`RealModes::check_request`] then refuses by name with the
    /// systems that take it.
    pub fn rewrite_aliases(&self, system: &str, args: &[String]) -> Result<Vec<String>, String> {
        let own = self.get(system).map(|m| m.flag_aliases()).unwrap_or(&[]);
        let alias_of = |flag: &str| -> Option<(FlagAlias, bool)> {
            if let Some(a) = own.iter().find(|a| a.flag == flag) {
                return Some((*a, true));
            }
            self.modes.iter().flat_map(|m| m.flag_aliases()).find(|a| a.flag == flag).map(|a| (*a, false))
        };
        let mut out = Vec::with_capacity(args.len());
        let mut given_flags: Vec<(&'static str, &'static str, String)> = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            let Some((alias, ours)) = alias_of(flag) else {
                out.push(arg.clone());
                continue;
            };
            let mut value = || -> Result<String, String> {
                if let Some(v) = &inline {
                    return Ok(v.clone());
                }
                let v = args.get(i).cloned().ok_or_else(|| format!("{flag}: expected a value after it"))?;
                i += 1;
                Ok(v)
            };
            match (alias.to, ours) {
                (AliasTo::Assign(_), false) => out.push(format!("--{FOREIGN_ALIAS_ARG}={}", alias.flag)),
                (_, false) => {
                    value()?;
                    out.push(format!("--{FOREIGN_ALIAS_ARG}={}", alias.flag));
                }
                (AliasTo::Assign(assignment), true) => out.extend(["--set".into(), assignment.into()]),
                (AliasTo::Set(key), true) => out.extend(["--set".into(), format!("{key}={}", value()?)]),
                (AliasTo::Flag(target), true) => given_flags.push((alias.flag, target, value()?)),
            }
        }
        for (flag, target, v) in given_flags {
            let set = out.iter().position(|a| a == target).and_then(|p| out.get(p + 1)).cloned().or_else(|| {
                out.iter().find_map(|a| a.strip_prefix(target).and_then(|r| r.strip_prefix('=')).map(String::from))
            });
            match set {
                Some(w) if w != v => {
                    return Err(format!("{flag} {v}: an alias of {target}, which says {w}: give one of them"))
                }
                Some(_) => {}
                None => out.extend([target.to_string(), v]),
            }
        }
        Ok(out)
    }

    /// Checks `request` for `system` before anything starts (see the module documentation).
    pub fn check_request(&self, system: &str, request: &RealRequest) -> Result<(), String> {
        let mode = self.get(system)?;
        if !(request.seconds > 0.0 && request.seconds <= 3600.0) {
            return Err(format!("--seconds {}: expected a number in (0, 3600]", request.seconds));
        }
        for &flag in &request.flags {
            if !honours(mode, flag) {
                let taking = self.taking(flag);
                let who = if taking.is_empty() { "no system".to_string() } else { taking.join(", ") };
                return Err(format!("{}: {system} cannot honour it; the systems that take it: {who}", flag.name()));
            }
        }
        let processes = mode.processes(&request.variant, &request.settings);
        for kill in &request.kills {
            let (flag, id, at_s, count) = match *kill {
                RealKill::Node { id, at_s } => ("--kill-node", id, at_s, processes.map(|p| p.0)),
                RealKill::Switch { id, at_s } => ("--kill-switch", id, at_s, processes.map(|p| p.1)),
            };
            if !(at_s > 0.0 && at_s < request.seconds) {
                return Err(format!(
                    "{flag} {id}@{at_s}: at {at_s} s, not within the run (expected a time in (0, {}) s, \
                     the run's --seconds)",
                    request.seconds
                ));
            }
            if let Some(count) = count.filter(|&c| id >= c) {
                return Err(format!("{flag} {id}@{at_s}: the rack has {count} of them: expected 0..{count}"));
            }
        }
        mode.check_settings(&request.variant, &request.settings)
    }
}

/// Whether `mode`'s cluster honours `flag`: one of its flags, or one of its alias flags.
fn honours(mode: &dyn RealMode, flag: RealFlag) -> bool {
    match flag {
        RealFlag::Own(name) => mode.flag_aliases().iter().any(|a| a.flag == name),
        flag => mode.flags().contains(&flag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Toy(&'static str, &'static [RealFlag], &'static [FlagAlias]);

    impl RealMode for Toy {
        fn name(&self) -> &'static str {
            self.0
        }
        fn flags(&self) -> &'static [RealFlag] {
            self.1
        }
        fn flag_aliases(&self) -> &'static [FlagAlias] {
            self.2
        }
        fn serve_switch(
            &self,
            _: &Path,
            _: u16,
            _: &[std::path::PathBuf],
            _: u16,
            _: Option<&Path>,
        ) -> Result<(), String> {
            Ok(())
        }
        fn serve_host(&self, _: &Path, _: u16, _: &Path) -> Result<(), String> {
            Ok(())
        }
        fn processes(&self, _: &str, _: &Value) -> Option<(u16, u16)> {
            Some((3, 1))
        }
        fn check_settings(&self, _: &str, settings: &Value) -> Result<(), String> {
            match settings["clients"].as_u64() {
                Some(0) => Err("clients 0: expected at least 1".into()),
                _ => Ok(()),
            }
        }
    }

    static A: Toy = Toy("a", &[RealFlag::KillNode, RealFlag::Down], &[]);
    static B: Toy = Toy(
        "b",
        &[RealFlag::KillSwitch, RealFlag::KillNode, RealFlag::Set],
        &[
            FlagAlias { flag: "--nodes", to: AliasTo::Set("nodes") },
            FlagAlias { flag: "--no-verify", to: AliasTo::Assign("verify=false") },
            FlagAlias { flag: "--mode", to: AliasTo::Flag("--variant") },
        ],
    );

    fn modes() -> RealModes {
        RealModes::new(vec![&A, &B])
    }

    fn request(flags: Vec<RealFlag>, kills: Vec<RealKill>) -> RealRequest {
        RealRequest { seconds: 1.0, flags, kills, variant: "v".into(), settings: serde_json::json!({"clients": 2}) }
    }

    #[test]
    fn a_flag_the_system_cannot_honour_is_refused_with_the_systems_that_take_it() {
        let err = modes().check_request("a", &request(vec![RealFlag::KillSwitch], vec![])).unwrap_err();
        assert!(err.starts_with("--kill-switch: a cannot honour it; the systems that take it: b"), "{err}");
        let err = modes().check_request("a", &request(vec![RealFlag::Netns], vec![])).unwrap_err();
        assert!(err.ends_with("no system"), "{err}");
        assert!(modes().check_request("a", &request(vec![RealFlag::KillNode, RealFlag::Down], vec![])).is_ok());
    }

    #[test]
    fn kills_after_the_end_or_of_missing_processes_and_bad_settings_are_refused() {
        let at = |at_s| vec![RealKill::Node { id: 1, at_s }];
        assert!(modes().check_request("a", &request(vec![], at(0.5))).is_ok());
        let err = modes().check_request("a", &request(vec![], at(1.0))).unwrap_err();
        assert!(err.contains("--kill-node 1@1: at 1 s, not within the run"), "{err}");
        let err =
            modes().check_request("b", &request(vec![], vec![RealKill::Switch { id: 1, at_s: 0.2 }])).unwrap_err();
        assert!(err.contains("the rack has 1 of them"), "{err}");
        let mut none = request(vec![], vec![]);
        none.settings = serde_json::json!({"clients": 0});
        assert_eq!(modes().check_request("a", &none).unwrap_err(), "clients 0: expected at least 1");
        none.seconds = 0.0;
        assert!(modes().check_request("a", &none).unwrap_err().starts_with("--seconds 0"));
        assert!(modes().get("c").err().expect("no such system").contains("expected one of a, b"));
    }

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn a_systems_alias_flags_are_rewritten_to_what_they_stand_for() {
        let rewritten = modes().rewrite_aliases("b", &words("--nodes 3 --seconds 1 --nodes=4 --no-verify --mode x"));
        assert_eq!(rewritten.unwrap(), words("--set nodes=3 --seconds 1 --set nodes=4 --set verify=false --variant x"),);
        let same = modes().rewrite_aliases("b", &words("--variant x --mode x")).unwrap();
        assert_eq!(same, words("--variant x"), "an alias agreeing with its flag is dropped");
        let err = modes().rewrite_aliases("b", &words("--variant=y --mode x")).unwrap_err();
        assert_eq!(err, "--mode x: an alias of --variant, which says y: give one of them");
        assert_eq!(modes().rewrite_aliases("b", &words("--nodes")).unwrap_err(), "--nodes: expected a value after it");
    }

    #[test]
    fn another_systems_alias_flag_is_refused_by_name_with_the_systems_that_take_it() {
        let rewritten = modes().rewrite_aliases("a", &words("--nodes 3 --no-verify --seconds 1")).unwrap();
        assert_eq!(
            rewritten,
            words("--alias-of-another-system=--nodes --alias-of-another-system=--no-verify --seconds 1")
        );
        let err = modes().check_request("a", &request(vec![RealFlag::Own("--nodes")], vec![])).unwrap_err();
        assert_eq!(err, "--nodes: a cannot honour it; the systems that take it: b");
        assert!(modes().check_request("b", &request(vec![RealFlag::Own("--nodes")], vec![])).is_ok());
    }

    #[test]
    fn an_outcome_prints_its_table_verdict_and_data_and_fails_with_its_check() {
        let dir = Path::new("/d");
        let ok = ClusterOutcome::checked("t\n".into(), Value::Null, None, "fine", dir, &dir.join("host-0"));
        assert_eq!(ok.text(), "t\nok   fine\n\ndata: /d (reports in /d/host-0/…)\n");
        assert_eq!(ok.result(), Ok(()));
        let failed = ClusterOutcome { failure: Some("lost one".into()), ..ok };
        assert!(failed.text().contains("FAIL lost one\n"));
        assert_eq!(failed.result().unwrap_err(), "the checks failed: lost one");
        let own = ClusterOutcome { ok: None, data: String::new(), ..failed };
        assert_eq!(own.text(), "t\n", "a table that states its checks itself gets no verdict line");
    }
}
