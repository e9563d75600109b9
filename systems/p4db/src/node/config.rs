//! How a node runs: the system under test (mode), its engine, its concurrency control and
//! its CPU costs.
//!
//! The [`Engine`] says how the node's workers run transactions on the nodes. PisaDB's own
//! engine (the default) locks each owner's tuples with one request, commits with 2PC and
//! retries an aborted transaction; [`Engine::Prototype`] behaves as the public P4DB prototype's
//! node did (DataManagementLab/p4db, `src/db/transaction.hpp`, `undolog.hpp`,
//! `table/concurrency_control/no_wait.hpp`), so that its testbed's figures can be reproduced:
//! one remote key per round trip, one unlock message per remote key at the end, no retries,
//! one receive thread per node, a latch on every row lock.

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

/// How a node's workers run their transactions (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// PisaDB's engine: one lock-and-read request per owner node, 2PC with a voting round for
    /// remote writers, an aborted transaction retried after a seeded backoff, requests served
    /// by whichever worker core is free, a transaction drawn (and its CPU charged) when a
    /// worker begins it.
    #[default]
    Pisadb,
    /// The P4DB prototype's engine:
    /// - transactions are pre-generated, a fixed number per worker
    ///   ([`NodeConfig::txns_per_worker`]): no generation cost is charged, and a worker that
    ///   used up its share stops;
    /// - tuples are locked one at a time in program order, a remote one by a synchronous round
    ///   trip (a one-entry `LockRead`);
    /// - the end of a transaction (commit or rollback) sends one `Release` per remote tuple
    ///   (with its new value if written) and waits for every `Released`: no voting round;
    /// - an aborted transaction is counted and skipped: the worker moves to its next one, with
    ///   no backoff and no retry;
    /// - one extra core per node (the prototype's message-handler thread) receives every
    ///   datagram and serves every request from other nodes; answers to a worker are handed to
    ///   the worker's core;
    /// - every lock-table operation (lock or unlock, shared or exclusive) also takes the row's
    ///   latch ([`CpuCosts::latch_ns`]).
    ///
    /// Hot transactions in P4DB mode still go to the switch in one packet; a warm one locks
    /// its cold tuples as above, then sends its hot part to the switch, and after the answer
    /// releases its remote tuples (the prototype's TPC-C Payment and NewOrder).
    Prototype,
}

impl Engine {
    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Pisadb => "pisadb",
            Engine::Prototype => "prototype",
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
    /// Taking a row's latch while another core takes it too (the prototype's `std::mutex`
    /// around a row's lock state, measured contended): charged by [`Engine::Prototype`] on top
    /// of `lock_ns` for a lock-table operation, shared or exclusive, when another core took the
    /// same row's latch less than this long before or after (`node/latch.rs`).
    #[serde(default)]
    pub latch_ns: u64,
}

impl CpuCosts {
    /// The calibrated figures (CALIBRATION.md says where each one comes from).
    pub fn calibrated() -> Self {
        crate::node::calibration::CPU_COSTS
    }

    /// The P4DB prototype's testbed: per-operation costs derived from its fitted 0.86 µs of CPU
    /// per local 8-operation transaction, the latch measured here (CALIBRATION.md).
    pub fn testbed() -> Self {
        crate::node::calibration::TESTBED_COSTS
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
    /// How the workers run transactions.
    #[serde(default)]
    pub engine: Engine,
    /// [`Engine::Prototype`]: transactions pre-generated per worker; a worker that has run them
    /// all stops. 0: no limit. (PisaDB's engine ignores it.)
    #[serde(default)]
    pub txns_per_worker: u64,
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
        if self.engine == Engine::Prototype && (self.log || self.peer_timeout_ns > 0) {
            return Err(format!(
                "engine = prototype with log = {} and peer_timeout_ns = {}: the prototype's engine has no \
                 write-ahead log and no timeouts (expected log = false, peer_timeout_ns = 0; or engine = pisadb)",
                self.log, self.peer_timeout_ns
            ));
        }
        Ok(())
    }
}
