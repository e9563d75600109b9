//! TransKV (seed 003) on PisaDB: a hierarchy of switches caching hot keys and ordering
//! transactions by timestamp. Work in progress (issue 19): not yet registered with the CLI.
//!
//! - [`wire`]: the message format behind the shared frame.
//! - [`program`]: the switch program (cache table, timestamps, values, basic TSO).
//! - [`layout`]: the Fig. 6(c) hierarchy, key partitioning and the cache placement.
//! - [`store`]: a storage node (in-memory versions, engine TSO for uncached keys).
//! - [`client`]: a client host (closed-loop YCSB transactions, several outstanding).
//! - [`control`]: the controller (coordinator of transactions on uncached keys).
//! - [`costs`]: the CPU time charged to the hosts.
//! - [`rack`]: the data center on the simulator, its figures and end-of-run checks.

pub mod client;
pub mod control;
pub mod costs;
pub mod layout;
pub mod program;
pub mod rack;
pub mod store;
pub mod wire;
