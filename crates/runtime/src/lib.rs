//! # pisadb-runtime: the real runtime, for any system
//!
//! The same state machines the simulator drives, driven by real time, real sockets and real
//! files. Like the simulator, the runtime knows no system: it runs any host
//! ([`pisadb_host::Host`]) as a process ([`host_proc`]) with its write-ahead log on disk
//! ([`wal_file`]: the one record framing of every log, [`framed_log`], around the system's own
//! record encoding, [`pisadb_host::LogCodec`]), any switch
//! ([`pisadb_switch::SwitchDevice`], with ports toward neighbour switches:
//! [`pisadb_switch::SwitchDevice`]) as a process ([`switch_proc`]) that plays the wires
//! behind its ports and, if asked, their strict-priority egress queues ([`wire`]), and a supervisor ([`supervisor`]) that starts them on loopback
//! or in network namespaces ([`netns`]), kills and restarts them on request, and stops them in
//! order. What a system adds — how its hosts and switch are built from its configuration, its
//! reports and its end-of-run checks — lives in its own crate (P4DB's in
//! `systems/p4db/src/real`). [`echo`] is the runtime's own minimal system, for its tests.
//!
//! ## One config per rack
//!
//! Every process of a rack reads one [`RackConfig`] (a JSON file the supervisor writes): the
//! system's name and its own configuration ([`RackConfig::spec`], opaque here), the network
//! ([`Network`]: every switch's and host's UDP address, which switch each host hangs off, the
//! trunks between switches, the wires behind host ports), and the times the rack runs.
//!
//! ## Addresses
//!
//! Each host and each switch has a UDP address. Hosts send everything to their switch, which
//! forwards host-to-host datagrams by the destination in their frame (to a neighbour switch
//! when the destination hangs off another: routes come from [`pisadb_net::Topology`]) and runs
//! its program on the rest, exactly as the switches of the simulated network do. A switch
//! accepts datagrams only from its own hosts and its neighbour switches: anything else is
//! counted and dropped.
//!
//! ## Starting together
//!
//! Every process plans its part (a workload, a layout) before it can serve, which takes from
//! milliseconds to minutes depending on the rack, the build and how busy the machine is. So
//! the rack's clock does not start at a guessed time: each process, once planned and bound,
//! announces itself in the config's rendezvous directory and waits; when all have, the
//! supervisor writes the go (the epoch and the stop time) and they all start
//! ([`RackConfig::ready`]).
//!
//! ## Time
//!
//! A process's clock is the wall clock in nanoseconds since the rack's epoch (in the config),
//! read once per round of its event loop and handed to the state machine as `now`. Protocol
//! code still reads no clock. Lost datagrams surface as timeouts in the state machines.
//!
//! See `docs/ARCHITECTURE.md` (how a datagram travels in real mode) for the page that explains it.

#![warn(missing_docs)]

pub mod echo;
pub mod error;
pub mod framed_log;
pub mod host_proc;
pub mod host_set;
pub mod ledger;
pub mod netns;
pub mod network;
pub mod supervisor;
pub mod switch_proc;
pub mod udp;
pub mod wal_file;
pub mod wire;

pub use error::{Result, RuntimeError};
pub use network::Network;

use pisadb_core::Nanos;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Everything every process of a real rack needs to know.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RackConfig<S> {
    /// The system the rack runs (its processes are that system's): the CLI dispatches on it.
    pub system: String,
    /// The system's own configuration: what its hosts and switches are built from.
    pub spec: S,
    /// Addresses, attachments, trunks and wires.
    pub network: Network,
    /// Wall-clock nanoseconds since the Unix epoch at which the rack's time starts.
    pub epoch_unix_ns: u64,
    /// Wall-clock nanoseconds since the Unix epoch at which hosts stop starting new work.
    pub stop_unix_ns: u64,
    /// Write-ahead logs on (with `fdatasync` group commit).
    pub durable: bool,
    /// Where the processes meet before the rack's time starts (see "Starting together"); without
    /// one, the epoch and stop time above hold as they are.
    #[serde(default)]
    pub rendezvous: Option<PathBuf>,
}

/// A process of a rack, by what it plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    /// Switch `id` of the network.
    Switch(u16),
    /// Host `id` of the network.
    Host(u16),
}

impl Role {
    /// The process's name in the rendezvous directory (`switch-0`, `host-3`).
    pub fn tag(self) -> String {
        match self {
            Role::Switch(id) => format!("switch-{id}"),
            Role::Host(id) => format!("host-{id}"),
        }
    }
}

/// The start and stop times the supervisor hands out once every process is ready.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Go {
    /// Wall-clock nanoseconds since the Unix epoch at which the rack's time starts.
    pub epoch_unix_ns: u64,
    /// Wall-clock nanoseconds since the Unix epoch at which hosts stop starting new work.
    pub stop_unix_ns: u64,
}

/// The supervisor's go, in the rendezvous directory.
pub const GO_FILE: &str = "go.json";
/// Where each process announces itself ready, in the rendezvous directory.
pub const READY_DIR: &str = "ready";
/// Where stopping hosts report whether they are idle, in the rendezvous directory.
pub const DRAIN_DIR: &str = "drain";
/// The supervisor's word that every host is idle and may leave, in the rendezvous directory.
pub const DONE_FILE: &str = "done";
/// How long a process or the supervisor waits at the rendezvous: a debug build planning a big
/// rack on a busy machine takes minutes, never this long.
pub const RENDEZVOUS_TIMEOUT_NS: u64 = 600_000_000_000;

/// The first fields of every rack config: enough to tell which system it is for.
#[derive(Deserialize)]
struct SystemOnly {
    system: String,
}

/// The name of the system the rack config at `path` is for.
pub fn system_of(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| RuntimeError::io(path, e))?;
    let only: SystemOnly =
        serde_json::from_str(&text).map_err(|source| RuntimeError::Json { path: path.into(), source })?;
    Ok(only.system)
}

/// A process of a system's real mode: loads the rack config at `path` and runs `serve` on it;
/// any error becomes the message the binary prints. What a system's `RealMode::serve_switch`
/// and `serve_host` (`pisadb_harness::real`) reduce to.
pub fn serve_config<S: Clone + Serialize + DeserializeOwned, R>(
    path: &Path,
    serve: impl FnOnce(&RackConfig<S>) -> Result<R>,
) -> std::result::Result<(), String> {
    let cfg = RackConfig::load(path).map_err(|e| e.to_string())?;
    serve(&cfg).map(drop).map_err(|e| e.to_string())
}

impl<S: Clone + Serialize + DeserializeOwned> RackConfig<S> {
    /// Reads a config file and checks its network.
    pub fn load(path: &Path) -> Result<Self> {
        let cfg: RackConfig<S> = read_json(path)?;
        cfg.network.validate()?;
        Ok(cfg)
    }

    /// Writes the config file.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("a config serializes");
        std::fs::write(path, text).map_err(|e| RuntimeError::io(path, e))
    }

    /// Announces `who` ready (planned, socket bound) at the rendezvous and waits for the
    /// supervisor's go; returns the config with the go's times. A process restarted after the
    /// go finds it there and carries on at once. Without a rendezvous, returns the config.
    pub fn ready(&self, who: Role) -> Result<Self> {
        let Some(dir) = &self.rendezvous else { return Ok(self.clone()) };
        let ready = dir.join(READY_DIR);
        std::fs::create_dir_all(&ready).map_err(|e| RuntimeError::io(&ready, e))?;
        std::fs::write(ready.join(who.tag()), b"").map_err(|e| RuntimeError::io(ready.join(who.tag()), e))?;
        let deadline = unix_now_ns() + RENDEZVOUS_TIMEOUT_NS;
        let go_path = dir.join(GO_FILE);
        loop {
            // The supervisor writes the go whole (a rename), so a read sees all of it or nothing.
            if let Ok(bytes) = std::fs::read(&go_path) {
                let go: Go = serde_json::from_slice(&bytes)
                    .map_err(|source| RuntimeError::Json { path: go_path.clone(), source })?;
                return Ok(RackConfig {
                    epoch_unix_ns: go.epoch_unix_ns,
                    stop_unix_ns: go.stop_unix_ns,
                    ..self.clone()
                });
            }
            if stop_requested() {
                return Err(RuntimeError::StoppedBeforeStart { who: who.tag() });
            }
            if unix_now_ns() > deadline {
                return Err(RuntimeError::RendezvousTimeout {
                    who: who.tag(),
                    dir: dir.clone(),
                    timeout_s: RENDEZVOUS_TIMEOUT_NS / 1_000_000_000,
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

impl<S> RackConfig<S> {
    /// The rack's time now: nanoseconds since its epoch.
    pub fn now_ns(&self) -> Nanos {
        unix_now_ns().saturating_sub(self.epoch_unix_ns)
    }

    /// The rack's time at which hosts stop starting new work.
    pub fn stop_ns(&self) -> Nanos {
        self.stop_unix_ns.saturating_sub(self.epoch_unix_ns)
    }
}

/// Reads a JSON file.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| RuntimeError::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|source| RuntimeError::Json { path: path.into(), source })
}

/// Writes `value` as JSON to `path`.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    std::fs::write(path, serde_json::to_vec(value).expect("a report serializes")).map_err(|e| RuntimeError::io(path, e))
}

/// Writes `value` as JSON to `path` whole (a rename: readers see all of it or nothing),
/// creating the directory.
pub fn write_atomically<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io(dir, e))?;
    }
    let tmp = path.with_extension("tmp");
    write_json(&tmp, value)?;
    std::fs::rename(&tmp, path).map_err(|e| RuntimeError::io(path, e))
}

/// Nanoseconds since the Unix epoch, from the wall clock (drivers only, never protocol code).
#[allow(clippy::disallowed_methods)]
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM ask the process to stop cleanly ([`stop_requested`]).
pub fn install_stop_signals() -> Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(SigHandler::Handler(on_stop_signal), SaFlags::empty(), SigSet::empty());
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }.map_err(|source| RuntimeError::Syscall { call: "sigaction", source })?;
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// CPU seconds this process has used, user and system (from `getrusage`).
pub fn cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    use nix::sys::time::TimeValLike;
    getrusage(UsageWho::RUSAGE_SELF)
        .map_or(0.0, |u| (u.user_time().num_microseconds() + u.system_time().num_microseconds()) as f64 / 1e6)
}
