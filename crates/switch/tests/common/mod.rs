//! A tiny driver for the switch in tests: delivers datagrams in time order, runs timeouts, and
//! collects what leaves.

#![allow(dead_code)]

use pisadb_core::Nanos;
use pisadb_switch::{Program, Switch, Transmit};

/// Sends each `(time, from, bytes)` (sorted by time) into the switch, runs it until idle, and
/// returns everything it transmitted.
pub fn drive<P: Program>(switch: &mut Switch<P>, mut arrivals: Vec<(Nanos, u16, Vec<u8>)>) -> Vec<Transmit> {
    arrivals.sort_by_key(|a| a.0);
    let mut out = Vec::new();
    for (at, from, bytes) in arrivals {
        while let Some(t) = switch.poll_timeout().filter(|&t| t <= at) {
            switch.handle_timeout(t);
        }
        switch.handle_datagram(at, from, &bytes);
        while let Some(tx) = switch.poll_transmit() {
            out.push(tx);
        }
    }
    // Bounded: every pending event either emits, drops or recirculates, and recirculation of a
    // waiting packet ends once no lock is held; a livelock would trip this bound.
    for _ in 0..10_000_000 {
        let Some(t) = switch.poll_timeout() else { break };
        switch.handle_timeout(t);
        while let Some(tx) = switch.poll_transmit() {
            out.push(tx);
        }
    }
    assert!(switch.poll_timeout().is_none(), "switch did not go idle: livelock");
    out
}

pub mod toy;
