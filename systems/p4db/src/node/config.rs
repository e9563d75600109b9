//! How a node runs: the system under test (mode), its concurrency control and its CPU costs.

use pisadb_engine::cc::Work;
use pisadb_engine::id::TxnId;
use pisadb_wire::node::OnConflict;
use serde::{Deserialize, Serialize};

/// Which system the rack runs (P4DB §7.1's three contenders).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Mode {
    /// Hot transactions run in the switch (P4DB); cold ones on the nodes.
    P4db,
    /// The switch only forwards; every transaction runs on the nodes.
    NoSwitch,
    /// The switch grants locks on hot tuples (NetLock-style); data stays on the nodes.
    LmSwitch,
}

impl Mode {
    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            Mode::P4db => "p4db",
            Mode::NoSwitch => "no-switch",
            Mode::LmSwitch => "lm-switch",
        }
    }
}

/// Two-phase locking variant for transactions on the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Cc {
    /// A conflicting lock request aborts at once.
    NoWait,
    /// An older requester waits for younger holders; a younger one aborts (dies).
    WaitDie,
}

impl Cc {
    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            Cc::NoWait => "no-wait",
            Cc::WaitDie => "wait-die",
        }
    }

    /// What a lock conflict means under this scheme, as lock requests carry it.
    pub fn on_conflict(self) -> OnConflict {
        match self {
            Cc::NoWait => OnConflict::Deny,
            Cc::WaitDie => OnConflict::WaitDie,
        }
    }
}

/// CPU time the node's code paths take, in nanoseconds. The simulator charges them to the core
/// that runs the handler. [`CpuCosts::calibrated`] holds the figures measured from our own code
/// (see `systems/p4db/benches/costs.rs` and `CALIBRATION.md` at the repository root).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuCosts {
    /// Generating a transaction and classifying it (hot / cold) against the hot-set index.
    pub txn_begin_ns: u64,
    /// One lock-table acquire or release.
    pub lock_ns: u64,
    /// One tuple read or write in storage.
    pub tuple_ns: u64,
    /// Encoding or decoding one message (node message or switch packet), fixed part.
    pub message_ns: u64,
    /// The network stack's per-datagram CPU work (send or receive): DPDK-style polling I/O.
    pub stack_ns: u64,
}

impl CpuCosts {
    /// The calibrated figures (CALIBRATION.md says where each one comes from).
    pub fn calibrated() -> Self {
        crate::node::calibration::CPU_COSTS
    }

    /// The CPU time of `work` done by concurrency control: a lock-table operation costs
    /// `lock_ns`, a tuple read or write `tuple_ns`.
    pub fn work_ns(&self, work: Work) -> u64 {
        work.cc_ops * self.lock_ns + work.tuple_ops * self.tuple_ns
    }
}

/// Everything a node needs to know about how to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// This node's id, `0..nodes`.
    pub id: u16,
    /// Nodes in the rack.
    pub nodes: u16,
    /// Worker threads (cores), each running one transaction at a time, closed loop.
    pub workers: u16,
    /// The system under test.
    pub mode: Mode,
    /// Concurrency control for transactions on the nodes.
    pub cc: Cc,
    /// CPU costs.
    pub costs: CpuCosts,
    /// An aborted transaction is retried after a random backoff in `0..=backoff_max_ns`.
    pub backoff_max_ns: u64,
    /// A switch transaction not answered within this time is sent again (it was dropped).
    pub switch_timeout_ns: u64,
    /// Record every committed transaction's reads and writes for the serializability checker.
    pub record_history: bool,
    /// Put write-ahead log records in the outbox ([`crate::node::wal`]); the driver makes them durable.
    #[serde(default)]
    pub log: bool,
    /// How long a worker waits for another node's answer before it aborts the attempt, and (twice
    /// that) how long a node serves an unprepared request before it drops it, or waits before it
    /// asks a prepared transaction's coordinator for the outcome. 0: wait forever (a network
    /// that loses nothing and nodes that never crash, as the default simulation).
    #[serde(default)]
    pub peer_timeout_ns: u64,
    /// How many times this node started before (part of its transaction ids, so ids never repeat
    /// across a crash); set by recovery.
    #[serde(default)]
    pub incarnation: u16,
}

impl NodeConfig {
    /// Most nodes and workers the transaction-id and timestamp layout can tell apart.
    pub const NODES_MAX: u16 = TxnId::NODES;
    /// See [`NodeConfig::NODES_MAX`].
    pub const WORKERS_MAX: u16 = TxnId::WORKERS;
    /// Incarnations the transaction-id layout tells apart (they wrap around after that).
    pub const INCARNATIONS: u16 = TxnId::INCARNATIONS;

    /// Why this configuration cannot run, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 || self.nodes > Self::NODES_MAX {
            return Err(format!("nodes = {}: expected 1..={}", self.nodes, Self::NODES_MAX));
        }
        if self.id >= self.nodes {
            return Err(format!("node id {} is not below nodes = {}", self.id, self.nodes));
        }
        if self.workers == 0 || self.workers > Self::WORKERS_MAX {
            return Err(format!("workers = {}: expected 1..={}", self.workers, Self::WORKERS_MAX));
        }
        Ok(())
    }
}
