//! TransKV (seed 003) on PisaDB: a hierarchy of switches caching hot keys and ordering
//! transactions by timestamp. Work in progress (issue 19): not yet registered with the CLI.
//!
//! - [`wire`]: the message format behind the shared frame.
//! - [`program`]: the switch program (cache table, timestamps, values, basic TSO).

pub mod program;
pub mod wire;
