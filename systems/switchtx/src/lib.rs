//! SwitchTx (seed 001) on PisaDB: commit coordination by gather-and-scatter on a tree of
//! switches.
//!
//! Servers run optimistic transactions in five phases (execute, lock, validate, commit
//! backup, commit primary) over sharded, primary-backup replicated data. After the execute
//! phase the client hands every participant its part and steps aside: the switches gather
//! each phase's replies and scatter the next phase's requests (§3.2), on a tree of switches
//! when a transaction spans racks (§3.3).
//!
//! - [`wire`]: the fixed control message and the data messages.
//! - [`program`]: the gather-and-scatter switch program and its reference model.
//! - [`tree`]: the racks, each transaction's coordination tree and its switch entries.
//! - [`config`]: which server is primary and backup of each shard, leases, promotion.
//! - [`admission`]: Listing 1's adaptive MPL.
//! - [`costs`]: the CPU time a server charges, measured, as settings of a run.
//! - [`network`]: the NIC's latency and each hop's jitter, as settings of a run.
//! - [`server`]: the server host, a hub of pieces (client lanes, participant, store and
//!   locks, resolutions, the configuration manager, Eris's shards).
//! - [`workload`]: YCSB-T and TPC-C, and each thread's draws.
//! - [`keys`]: how a key names its shard.
//! - [`ledger`]: committed reads and installed writes, for the end-of-run checks.
//! - [`rack`]: the four-switch testbed on the simulator, its figures and end-of-run checks.
//! - [`real`]: real mode: servers and switches as processes on loopback (`pisadb cluster`).
//! - [`system`]: the harness's view (variants, settings, one point, fault-injection cases).
//! - [`experiments`]: the paper's figures we cover, their CSVs, charts and report.
//! - [`fuzz`]: seeded fault-injection cases (`pisadb fuzz --system switchtx`).
//! - [`wal`]: a server's write-ahead log (what a restarted server recovers from).
//!
//! See `systems/switchtx/README.md` for the page that explains it.

pub mod admission;
pub mod config;
pub mod costs;
pub mod experiments;
pub mod fuzz;
pub mod keys;
pub mod ledger;
pub mod network;
pub mod presets;
pub mod program;
pub mod rack;
pub mod real;
pub mod server;
pub mod system;
pub mod tree;
pub mod wal;
pub mod wire;
pub mod workload;

pub use system::SYSTEM;
