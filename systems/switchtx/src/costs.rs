//! The CPU time a SwitchTx server charges for its work, as settings of a run.
//!
//! The simulator charges every handler the CPU time it would take on a real server, so that a
//! loaded thread queues its messages as a busy core does. The figures are **measured**: the
//! criterion benchmarks in `benches/costs.rs` time the real handlers (`CALIBRATION.md`,
//! `## SwitchTx`, 2026-11-26), except the network stack, which is not our code and is
//! **assumed** (as P4DB's). They are settings of a run (`RackConfig::costs`), each
//! defaulting to the measured figure, so a preset can sweep one to show what a result depends
//! on, and a settings file that names none runs with [`COSTS`].
//!
//! A server charges per datagram received `stack_ns + handler_ns` (a `prepare`: `prepare_ns`
//! instead of `handler_ns`), plus `item_ns` per key it touches, plus `stack_ns` per datagram
//! it sends; and `begin_ns` to draw a transaction and build its reads.

use pisadb_core::Nanos;
use serde::{Deserialize, Serialize};

/// The CPU costs a server charges (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Costs {
    /// Network stack per datagram sent or received (not our code: assumed, as P4DB's).
    #[serde(default = "defaults::stack_ns")]
    pub stack_ns: Nanos,
    /// Drawing a transaction and building its reads (bench `begin`).
    #[serde(default = "defaults::begin_ns")]
    pub begin_ns: Nanos,
    /// Handling one message, fixed part (benches `read_1`, `validate` less one key).
    #[serde(default = "defaults::handler_ns")]
    pub handler_ns: Nanos,
    /// Handling a `prepare` and locking, fixed part (bench `prepare_lock` less two keys).
    #[serde(default = "defaults::prepare_ns")]
    pub prepare_ns: Nanos,
    /// Per key a handler touches (`(read_8 − read_1) / 7`).
    #[serde(default = "defaults::item_ns")]
    pub item_ns: Nanos,
}

/// The figures measured by `benches/costs.rs` on 2026-11-26 (CALIBRATION.md, `## SwitchTx`).
pub const COSTS: Costs = Costs { stack_ns: 200, begin_ns: 1_900, handler_ns: 110, prepare_ns: 290, item_ns: 39 };

impl Default for Costs {
    fn default() -> Self {
        COSTS
    }
}

impl Costs {
    /// Whether these are the measured figures ([`COSTS`]): a run's settings leave them out when
    /// serialized, so settings written before costs were settings read and print the same.
    pub fn is_measured(&self) -> bool {
        *self == COSTS
    }
}

/// Each field's default: the measured figure.
mod defaults {
    use super::COSTS;
    use pisadb_core::Nanos;

    pub(super) fn stack_ns() -> Nanos {
        COSTS.stack_ns
    }
    pub(super) fn begin_ns() -> Nanos {
        COSTS.begin_ns
    }
    pub(super) fn handler_ns() -> Nanos {
        COSTS.handler_ns
    }
    pub(super) fn prepare_ns() -> Nanos {
        COSTS.prepare_ns
    }
    pub(super) fn item_ns() -> Nanos {
        COSTS.item_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unnamed_costs_are_the_measured_ones_and_one_can_be_set_alone() {
        let none: Costs = serde_json::from_str("{}").unwrap();
        assert_eq!(none, COSTS);
        let one: Costs = serde_json::from_str(r#"{"item_ns": 50}"#).unwrap();
        assert_eq!(one, Costs { item_ns: 50, ..COSTS });
        assert!(!one.is_measured() && none.is_measured());
        let err = serde_json::from_str::<Costs>(r#"{"items_ns": 50}"#).unwrap_err().to_string();
        assert!(err.contains("items_ns") && err.contains("item_ns"), "{err}");
    }
}
