//! A tiny driver for the switch in tests: delivers datagrams in time order, runs timeouts, and
//! collects what leaves.

#![allow(dead_code)]

use pisadb_core::Nanos;
use pisadb_switch::device::run_alone;
use pisadb_switch::{Program, Switch, Transmit};

/// Sends each `(time, from, bytes)` into the switch, runs it until idle, and returns everything
/// it transmitted; panics on a livelock.
pub(crate) fn drive<P: Program>(switch: &mut Switch<P>, arrivals: Vec<(Nanos, u16, Vec<u8>)>) -> Vec<Transmit> {
    run_alone(switch, arrivals, 10_000_000).expect("switch goes idle")
}
