//! TransKV (seed 003) on PisaDB: a hierarchy of switches caching hot keys and ordering
//! transactions by timestamp.
//!
//! Clients stamp each transaction with a timestamp (T-TS). The switches of a data center's
//! three levels cache the hottest keys (hottest at the core, warm at the ToRs, each key once)
//! together with each key's read, write and pending-writer timestamps, and run basic timestamp
//! ordering on the ops for keys they cache: a late op aborts the transaction right there, an
//! accepted read is answered from the cache, an accepted write goes on to its storage node.
//! Transactions on keys no switch caches are coordinated by the controller (the storage nodes
//! vote by the same TSO). The baselines: Tranx-Coor (every transaction through the
//! coordinator), No-Cache and TransKV-cache (non-transactional reads without and with the
//! cache).
//!
//! Faults: the storage node is where each transaction's outcome is decided once; clients
//! resolve unanswered attempts with it, so lost messages never lose a commit, and a switch's
//! lease on each claim has the node asked about a claim nobody answered for (a request lost
//! after it claimed, delayed past its own resolution), so none wedges a key.
//! Nodes restart from their logs, a crashed switch is rebuilt from the nodes' logs with safe
//! timestamps, and the controller restarts with nothing to coordinate (`store.rs`,
//! `fuzz.rs`). The variant `transkv-log` clones every accepted transaction and every commit
//! with its before images to the controller's log, over which [`recovery`] undoes and redoes
//! with cascading rollback (§IV-E); the controller writes that log ahead and a crashed one
//! comes back with it ([`control::Controller::restore`]). The cache refresh ([`refresh`])
//! runs in the simulator and in real mode; its placement is logged by the controller, so a
//! restarted controller finishes or undoes the moves under way and a rebuilt switch gets the
//! current placement. Not built yet: tolerance of duplicated packets.
//!
//! - [`wire`]: the message format behind the shared frame.
//! - [`program`]: the switch program (cache table, timestamps, values, basic TSO).
//! - [`layout`]: the Fig. 6(c) hierarchy, key partitioning and the cache placement.
//! - [`store`]: a storage node (in-memory versions, engine TSO for uncached keys).
//! - [`client`]: a client host (closed-loop YCSB transactions, several outstanding).
//! - [`control`]: the controller (coordinator of transactions on uncached keys).
//! - [`costs`]: the CPU time charged to the hosts.
//! - [`rack`]: the data center on the simulator, its figures and end-of-run checks.
//! - [`real`]: real mode (`pisadb cluster --system transkv`): the processes on loopback, the
//!   storage nodes over fjall on disk.
//! - [`recovery`]: the controller's log with before and after images, undo/redo recovery with
//!   cascading rollback (§IV-E).
//! - [`refresh`]: the controller's hot-key statistics, the placement they call for, the safe
//!   eviction/insertion protocol and its recovery from controller and switch crashes.
//! - [`system`]: the harness's view (variants, settings, one point).
//! - [`experiments`]: Figs. 9–11 and Tables I–II as data, with the paper's claims.
//! - [`presets`]: `pisadb` and `paper`, every value with its provenance.
//! - [`fuzz`]: seeded fault-injection cases and their oracles (`pisadb fuzz --system transkv`).
//!
//! See `systems/transkv/README.md` for the page that explains it.

pub mod client;
pub mod control;
pub mod costs;
pub mod experiments;
pub mod fuzz;
pub mod layout;
pub mod presets;
pub mod program;
pub mod progress;
pub mod rack;
pub mod real;
pub mod recovery;
pub mod refresh;
pub mod store;
pub mod system;
pub mod wire;

pub use system::SYSTEM;
