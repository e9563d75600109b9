//! What `pisadb perf` needs of a system beyond its points: how to grow its network, and how
//! many transactions a point committed.
//!
//! `pisadb perf` measures the simulator itself (events, wall seconds, memory) on every
//! system's default point, and on networks of growing size. It runs points through the same
//! contract as every command ([`crate::System::run_point`]), so the only things it must ask a
//! system are the ones the contract does not say:
//!
//! - **A larger network** ([`crate::System::scaled`]): the settings edits (as `--set`
//!   overrides) that give a network `factor` times the default's hosts, and how many hosts
//!   that is, so the table can say events per second and memory *per host* as the network
//!   grows. A system whose topology is fixed in its code offers none (the default).
//! - **Work done** ([`committed`]): the transactions a point committed, read from its figures
//!   by the names the systems already share (`commits`, or P4DB's `hot_committed` plus
//!   `cold_committed`); a system that runs queries rather than transactions has none.

use serde::Serialize;
use serde_json::Value;

/// A network grown from a system's default point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Scaled {
    /// `--set key=value` overrides on the default settings that build it.
    pub sets: Vec<String>,
    /// Its hosts (nodes, servers, clients: every host the world simulates).
    pub hosts: u64,
}

/// Transactions committed by a point, from its figures: `commits`, or `hot_committed` plus
/// `cold_committed` where a system splits them; `None` where it reports neither.
pub fn committed(figures: &Value) -> Option<u64> {
    let split: Option<u64> = ["hot_committed", "cold_committed"]
        .iter()
        .map(|k| figures.get(*k).and_then(Value::as_u64))
        .try_fold(0u64, |sum, n| Some(sum + n?));
    split.or_else(|| figures.get("commits").and_then(Value::as_u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn committed_reads_commits_or_the_hot_and_cold_split_and_nothing_else() {
        assert_eq!(committed(&json!({ "commits": 12, "aborts": 3 })), Some(12));
        assert_eq!(committed(&json!({ "hot_committed": 5, "cold_committed": 7, "commits": 1 })), Some(12));
        assert_eq!(committed(&json!({ "hot_committed": 5 })), None);
        assert_eq!(committed(&json!({ "answer_rows": 40 })), None);
    }
}
