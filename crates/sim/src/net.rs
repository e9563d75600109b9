//! The network: hosts and switches joined by links, and what a datagram's trip costs.
//!
//! A link is a one-way wire with a line rate, a propagation delay and a NIC/stack latency at
//! its ends; it carries one frame at a time, so frames queue behind each other
//! (serialization at line rate is what makes a busy link slow). Every figure is a named
//! parameter with its source next to it.
//!
//! [`Topology`] is a graph of hosts and switches; [`Topology::rack`] is the default: every node
//! on one top-of-rack switch with a link each way. Routes are shortest paths (breadth-first, in
//! endpoint order, so they are deterministic). The simulator today drives one switch; a tree of
//! switches (SwitchTx) or a hierarchy (TransKV) adds switches and links here.

use pisadb_core::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Bytes every datagram carries on the wire besides its payload: Ethernet header (14) and FCS
/// (4), IPv4 (20), UDP (8), preamble and inter-frame gap (20). Source: IEEE 802.3 and the RFCs.
pub const WIRE_OVERHEAD_BYTES: u64 = 66;
/// The smallest Ethernet frame (64 bytes) plus preamble and gap: short payloads are padded.
pub const WIRE_MIN_BYTES: u64 = 84;

/// One direction of a wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkParams {
    /// Line rate in gigabits per second. P4DB's testbed: 10 GbE NICs (seed 000 §7.1).
    pub gbps: f64,
    /// Signal propagation: ~5 ns per metre of cable, a few metres in a rack.
    pub propagation_ns: Nanos,
    /// NIC and kernel-bypass stack latency per direction (DMA, doorbell, polling). Assumed
    /// ~1 µs, the order DPDK-based systems report for a NIC traversal; not measured here.
    pub nic_ns: Nanos,
}

impl LinkParams {
    /// 10 GbE in a rack: 10 Gbit/s, 3 m of cable, 1 µs NIC and stack.
    pub fn ten_gbe() -> Self {
        LinkParams { gbps: 10.0, propagation_ns: 15, nic_ns: 1_000 }
    }

    /// Time to put a datagram with `payload` bytes on the wire.
    pub fn serialization_ns(&self, payload: usize) -> Nanos {
        let bytes = (payload as u64 + WIRE_OVERHEAD_BYTES).max(WIRE_MIN_BYTES);
        ((bytes * 8) as f64 / self.gbps).ceil() as Nanos
    }
}

/// An end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Endpoint {
    /// A database node.
    Host(u16),
    /// A switch.
    Switch(u16),
}

/// A directed link and its state.
#[derive(Clone, Debug)]
pub struct Link {
    /// Where frames enter.
    pub from: Endpoint,
    /// Where frames leave.
    pub to: Endpoint,
    /// Its figures.
    pub params: LinkParams,
    /// When the wire is free for the next frame.
    pub busy_until: Nanos,
    /// Frames carried.
    pub frames: u64,
}

impl Link {
    /// Sends a frame ready at `ready`: returns when it arrives at the far end.
    pub fn carry(&mut self, ready: Nanos, payload: usize) -> Nanos {
        let start = ready.max(self.busy_until);
        let done = start + self.params.serialization_ns(payload);
        self.busy_until = done;
        self.frames += 1;
        done + self.params.propagation_ns
    }
}

/// Hosts, switches and the links between them.
#[derive(Clone, Debug)]
pub struct Topology {
    /// All links.
    pub links: Vec<Link>,
    /// Index of the link `from → to`.
    index: BTreeMap<(Endpoint, Endpoint), usize>,
}

impl Topology {
    /// Every host `0..hosts` on switch 0, one link each way.
    pub fn rack(hosts: u16, params: &LinkParams) -> Self {
        let mut t = Topology { links: Vec::new(), index: BTreeMap::new() };
        for h in 0..hosts {
            t.add(Endpoint::Host(h), Endpoint::Switch(0), params.clone());
            t.add(Endpoint::Switch(0), Endpoint::Host(h), params.clone());
        }
        t
    }

    /// Adds a directed link.
    pub fn add(&mut self, from: Endpoint, to: Endpoint, params: LinkParams) {
        self.index.insert((from, to), self.links.len());
        self.links.push(Link { from, to, params, busy_until: 0, frames: 0 });
    }

    /// The link `from → to`, if there is one.
    pub fn link(&mut self, from: Endpoint, to: Endpoint) -> Option<&mut Link> {
        let i = *self.index.get(&(from, to))?;
        self.links.get_mut(i)
    }

    /// The next hop from `from` towards `to` on a shortest path.
    pub fn next_hop(&self, from: Endpoint, to: Endpoint) -> Option<Endpoint> {
        if from == to {
            return None;
        }
        // Breadth-first from `from`, remembering each endpoint's first hop.
        let mut first: BTreeMap<Endpoint, Endpoint> = BTreeMap::new();
        let mut queue: VecDeque<Endpoint> = VecDeque::new();
        for (&(a, b), _) in self.index.range((from, Endpoint::Host(0))..) {
            if a != from {
                break;
            }
            first.insert(b, b);
            queue.push_back(b);
        }
        while let Some(e) = queue.pop_front() {
            if e == to {
                return first.get(&e).copied();
            }
            let hop = first[&e];
            for (&(a, b), _) in self.index.range((e, Endpoint::Host(0))..) {
                if a != e {
                    break;
                }
                if b != from && !first.contains_key(&b) {
                    first.insert(b, hop);
                    queue.push_back(b);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_follows_line_rate_with_wire_overhead_and_minimum_frame() {
        let ten = LinkParams::ten_gbe();
        assert_eq!(ten.serialization_ns(0), 68, "84-byte minimum frame at 10 Gbit/s = 67.2 ns");
        assert_eq!(ten.serialization_ns(1434), 1200, "1500 bytes at 10 Gbit/s");
    }

    #[test]
    fn a_busy_link_queues_frames() {
        let mut t = Topology::rack(2, &LinkParams::ten_gbe());
        let link = t.link(Endpoint::Host(0), Endpoint::Switch(0)).unwrap();
        let a = link.carry(0, 1434);
        let b = link.carry(0, 1434);
        assert_eq!(b - a, 1200);
    }

    #[test]
    fn rack_routes_go_through_the_switch() {
        let t = Topology::rack(3, &LinkParams::ten_gbe());
        assert_eq!(t.next_hop(Endpoint::Host(0), Endpoint::Host(2)), Some(Endpoint::Switch(0)));
        assert_eq!(t.next_hop(Endpoint::Switch(0), Endpoint::Host(2)), Some(Endpoint::Host(2)));
        assert_eq!(t.next_hop(Endpoint::Host(1), Endpoint::Host(1)), None);
    }
}
