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

use serde_json::Value;
use std::path::Path;

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
    /// A flag of one system's own (P4DB's `--mode`, `--cc`, `--nodes`, …; NetAccel's
    /// `--tuple-gap-ns`), named by the string.
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

    /// The systems whose cluster honours `flag`.
    pub fn taking(&self, flag: RealFlag) -> Vec<&'static str> {
        self.modes.iter().filter(|m| m.flags().contains(&flag)).map(|m| m.name()).collect()
    }

    /// Checks `request` for `system` before anything starts (see the module documentation).
    pub fn check_request(&self, system: &str, request: &RealRequest) -> Result<(), String> {
        let mode = self.get(system)?;
        if !(request.seconds > 0.0 && request.seconds <= 3600.0) {
            return Err(format!("--seconds {}: expected a number in (0, 3600]", request.seconds));
        }
        for &flag in &request.flags {
            if !mode.flags().contains(&flag) {
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Toy(&'static str, &'static [RealFlag]);

    impl RealMode for Toy {
        fn name(&self) -> &'static str {
            self.0
        }
        fn flags(&self) -> &'static [RealFlag] {
            self.1
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

    static A: Toy = Toy("a", &[RealFlag::KillNode, RealFlag::Down]);
    static B: Toy = Toy("b", &[RealFlag::KillSwitch, RealFlag::KillNode]);

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
}
