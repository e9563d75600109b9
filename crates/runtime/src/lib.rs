//! # pisadb-runtime: the real runtime
//!
//! The same state machines the simulator drives, driven by real time and real sockets: a
//! software switch process ([`switch_proc`]) running the pipeline model and the switch
//! programs, database node processes ([`node_proc`]) with their write-ahead logs on disk
//! ([`wal_file`]), and a supervisor ([`cluster`]) that starts them on loopback, kills and
//! restarts them on request, and checks the result. Every process of a rack reads one
//! [`RealConfig`] (a JSON file the supervisor writes), so all of them build the same workload
//! and layout ([`pisadb_sim::RackPlan`]).
//!
//! ## Addresses
//!
//! Each node has a UDP address, and so has the switch. Nodes send everything to the switch,
//! which forwards node-to-node datagrams by the destination in their frame and runs switch
//! transactions, exactly as the top-of-rack switch of the simulated rack. The switch's table
//! of registered nodes is the config's address list: a datagram from any other address, or
//! whose frame names another sender than the address's node, is counted and dropped.
//!
//! ## Time
//!
//! A process's clock is the wall clock in nanoseconds since the rack's epoch (in the config),
//! read once per round of its event loop and handed to the state machine as `now`. Protocol
//! code still reads no clock. Lost datagrams surface as timeouts in the state machines.

pub mod cluster;
pub mod node_proc;
pub mod switch_proc;
pub mod udp;
pub mod wal_file;

use pisadb_sim::RunConfig;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;
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
}

impl RealConfig {
    /// Reads a config file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let cfg: RealConfig = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if cfg.nodes.len() != usize::from(cfg.run.nodes) {
            return Err(format!("{}: {} node addresses for {} nodes", path.display(), cfg.nodes.len(), cfg.run.nodes));
        }
        Ok(cfg)
    }

    /// Writes the config file.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).expect("config serializes");
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
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
