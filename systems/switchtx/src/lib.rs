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

pub mod admission;
pub mod program;
pub mod rack;
pub mod server;
pub mod tree;
pub mod wire;
