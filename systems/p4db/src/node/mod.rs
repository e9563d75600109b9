//! P4DB's database node as a sans-IO state machine ([`pisadb_host::Host`]).
//!
//! A node owns a partition of every table, two-phase locking over it, the transactions it
//! serves for coordinators and a set of worker cores, each running one transaction at a time
//! in a closed loop. Those are the engine's shared pieces (`pisadb_engine`: storage, the
//! `Concurrency` interface, 2PC machines, workers); [`machine`] composes them with P4DB's own
//! parts, one file each: the worker's transaction (`worker.rs`, `commit.rs`), the participant
//! (`participant.rs`), hot and warm transactions in the switch (`switch_txn.rs`), LM-Switch's
//! lock requests (`lm_switch.rs`), restart from the log (`recovery.rs`) and fencing a crashed
//! switch (`fencing.rs`); `ids.rs` says how its attempt ids use the engine's layout.
//!
//! A node reads no clock and does no I/O: the simulator and the real runtime feed it datagrams
//! and timers with the current time and carry out what it asks for (sends, timers, log
//! records), charging the CPU time it reports ([`config::CpuCosts`], calibrated from our own
//! code in [`calibration`]). [`wal`] is its write-ahead log; [`rebuild`] rebuilds a crashed
//! switch from every node's log.

pub mod calibration;
mod commit;
pub mod config;
mod events;
mod fencing;
mod ids;
mod latch;
mod lm_switch;
pub mod machine;
mod participant;
pub mod rebuild;
mod recovery;
mod switch_txn;
mod timer;
pub mod wal;
mod worker;

#[cfg(test)]
mod prototype_tests;
#[cfg(test)]
mod tests;

pub use config::{Cc, CpuCosts, Engine, Mode, NodeConfig};
pub use events::{Finished, NodeEvent, NodeStats, Outbox, PhaseTimes, Record, RecoveredCommit, RecoveryReport};
pub use machine::{Node, SwitchView};
pub use pisadb_host::{Host, Route, Send};
pub use timer::Timer;
pub use wal::LogRecord;

/// A committed transaction's reads and writes with versions, as the serializability checker wants them.
pub use pisadb_check::CommittedTxn;
