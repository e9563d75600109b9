//! # pisadb-runtime: the real runtime
//!
//! The same state machines the simulator drives, driven by real time and real sockets: a
//! software switch process ([`switch_proc`]) running the pipeline model and the switch
//! programs, database node processes ([`node_proc`]) with their write-ahead logs on disk
//! ([`wal_file`]), and a supervisor ([`cluster`]) that starts them on loopback, kills and
//! restarts them on request, and checks the result. Every process of a rack reads one
//! [`RealConfig`] (a JSON file the supervisor writes), so all of them build the same workload
//! and layout ([`pisadb_p4db::RackPlan`]).
//!
//! ## Addresses
//!
//! Each node has a UDP address, and so has the switch. Nodes send everything to the switch,
//! which forwards node-to-node datagrams by the destination in their frame and runs switch
//! transactions, exactly as the top-of-rack switch of the simulated rack. The switch's table
//! of registered nodes is the config's address list: a datagram from any other address, or
//! whose frame names another sender than the address's node, is counted and dropped.
//!
//! ## Wires
//!
//! This kernel has no `netem`, so the switch process itself plays the wires behind its ports:
//! the config's per-port settings ([`wire::PortWire`]) make it lose, delay and reorder what
//! it sends to each node ([`wire`]).
//!
//! ## Starting together
//!
//! Every process plans the rack (workload, layout) before it can serve, which takes from
//! milliseconds to minutes depending on the rack, the build and how busy the machine is. So
//! the rack's clock does not start at a guessed time: each process, once planned and bound,
//! announces itself in the config's rendezvous directory and waits; when all have, the
//! supervisor writes the go (the epoch and the stop time) and they all start
//! ([`RealConfig::ready`]).
//!
//! ## Time
//!
//! A process's clock is the wall clock in nanoseconds since the rack's epoch (in the config),
//! read once per round of its event loop and handed to the state machine as `now`. Protocol
//! code still reads no clock. Lost datagrams surface as timeouts in the state machines.

pub mod cluster;
pub mod loadgen;
pub mod netns;
pub mod node_proc;
pub mod switch_proc;
pub mod udp;
pub mod wal_file;
pub mod wire;

use pisadb_p4db::RunConfig;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Everything every process of a real rack needs to know.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RealConfig {
    /// The rack and workload, as the simulator takes them (its time fields are unused).
    pub run: RunConfig,
    /// The switch's UDP address.
    pub switch: SocketAddr,
    /// Each node's UDP address, by node id.
    pub nodes: Vec<SocketAddr>,
    /// Wall-clock nanoseconds since the Unix epoch at which the rack's time starts.
    pub epoch_unix_ns: u64,
    /// Wall-clock nanoseconds since the Unix epoch at which nodes stop starting transactions.
    pub stop_unix_ns: u64,
    /// A worker aborts an attempt another node has not answered in this long (ms).
    pub peer_timeout_ms: u64,
    /// Write-ahead logs on (with `fdatasync` group commit).
    pub durable: bool,
    /// Keep every committed transaction and the final store for the end-of-run checks.
    pub verify: bool,
    /// The wire behind each node's switch port (loss, delay), by node id; a node without an
    /// entry has a perfect wire.
    #[serde(default)]
    pub wire: Vec<wire::PortWire>,
    /// Where the processes meet before the rack's time starts (see "Starting together"); without
    /// one, the epoch and stop time above hold as they are.
    #[serde(default)]
    pub rendezvous: Option<PathBuf>,
}

/// The start and stop times the supervisor hands out once every process is ready.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Go {
    /// Wall-clock nanoseconds since the Unix epoch at which the rack's time starts.
    pub epoch_unix_ns: u64,
    /// Wall-clock nanoseconds since the Unix epoch at which nodes stop starting transactions.
    pub stop_unix_ns: u64,
}

/// The supervisor's go, in the rendezvous directory.
pub const GO_FILE: &str = "go.json";
/// Where each process announces itself ready, in the rendezvous directory.
pub const READY_DIR: &str = "ready";
/// Where stopping nodes report whether they are idle, in the rendezvous directory.
pub const DRAIN_DIR: &str = "drain";
/// The supervisor's word that every node is idle and may leave, in the rendezvous directory.
pub const DONE_FILE: &str = "done";
/// How long a process or the supervisor waits at the rendezvous: a debug build planning a big
/// rack on a busy machine takes minutes, never this long.
pub const RENDEZVOUS_TIMEOUT_NS: u64 = 600_000_000_000;

impl RealConfig {
    /// Reads a config file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let cfg: RealConfig = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if cfg.nodes.len() != usize::from(cfg.run.nodes) {
            return Err(format!("{}: {} node addresses for {} nodes", path.display(), cfg.nodes.len(), cfg.run.nodes));
        }
        if cfg.wire.len() > cfg.nodes.len() {
            return Err(format!(
                "{}: wire settings for {} ports, {} nodes",
                path.display(),
                cfg.wire.len(),
                cfg.run.nodes
            ));
        }
        for (port, w) in cfg.wire.iter().enumerate() {
            w.validate().map_err(|e| format!("{}: wire of port {port}: {e}", path.display()))?;
        }
        Ok(cfg)
    }

    /// Writes the config file.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).expect("config serializes");
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Announces process `who` ready (planned, socket bound) at the rendezvous and waits for
    /// the supervisor's go; returns the config with the go's times. A process restarted after
    /// the go finds it there and carries on at once. Without a rendezvous, returns the config.
    pub fn ready(&self, who: &str) -> Result<RealConfig, String> {
        let Some(dir) = &self.rendezvous else { return Ok(self.clone()) };
        let ready = dir.join(READY_DIR);
        std::fs::create_dir_all(&ready).map_err(|e| format!("{}: {e}", ready.display()))?;
        std::fs::write(ready.join(who), b"").map_err(|e| format!("{}: {e}", ready.join(who).display()))?;
        let deadline = unix_now_ns() + RENDEZVOUS_TIMEOUT_NS;
        loop {
            // The supervisor writes the go whole (a rename), so a read sees all of it or nothing.
            if let Ok(go) = std::fs::read(dir.join(GO_FILE)).map(|b| serde_json::from_slice::<Go>(&b)) {
                let go = go.map_err(|e| format!("{}: {e}", dir.join(GO_FILE).display()))?;
                return Ok(RealConfig {
                    epoch_unix_ns: go.epoch_unix_ns,
                    stop_unix_ns: go.stop_unix_ns,
                    ..self.clone()
                });
            }
            if stop_requested() {
                return Err(format!("{who}: stopped before the rack started"));
            }
            if unix_now_ns() > deadline {
                return Err(format!("{who}: no go from the supervisor in {} within 600 s", dir.display()));
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// The node whose address is `addr`.
    pub fn node_at(&self, addr: SocketAddr) -> Option<u16> {
        self.nodes.iter().position(|&a| a == addr).map(|i| i as u16)
    }
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
pub fn install_stop_signals() -> Result<(), String> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(SigHandler::Handler(on_stop_signal), SaFlags::empty(), SigSet::empty());
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }.map_err(|e| format!("sigaction({signal}): {e}"))?;
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}
