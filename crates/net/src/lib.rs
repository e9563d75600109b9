//! # pisadb-net: hosts and switches joined by links, and what a datagram's trip costs
//!
//! Every system PisaDB runs sends its messages through the same network model, so the model
//! lives once, here, and names no system (GUIDE §2.3). It answers three questions a driver
//! (the simulator, or the load generator of the real runtime) asks about a datagram:
//!
//! 1. **Which way does it go?** A [`Topology`] holds the hosts, the switches and the one-way
//!    [`Link`]s between them; builders lay out the papers' shapes (a rack, a line of switches,
//!    a core over top-of-rack switches, a three-level hierarchy) with deterministic numbering.
//!    Forwarding tables derived from the links give each switch its next hop to every
//!    destination on a shortest path ([`Topology::next_hop`], [`Topology::route`]).
//! 2. **How long is it on a wire?** [`LinkParams`] holds a link's line rate, propagation and
//!    NIC latency with their sources, and turns a payload into serialization time with the
//!    real Ethernet/IP/UDP overhead and minimum frame.
//! 3. **What happens when the wire is busy?** The egress port in front of each link queues it.
//!    The default discipline is FIFO, kept as pure arithmetic ([`Link::carry`]): no events,
//!    bit-identical to the arithmetic the simulator's pinned trace hashes were recorded with.
//!    The other is strict priority with a finite shared buffer that tail-drops
//!    ([`PriorityPort`]), a sans-IO state machine the driver feeds and polls, because under
//!    priorities a frame's departure depends on frames that arrive after it.
//!
//! Nothing here does I/O, reads a clock or draws a random number: time is passed in as
//! [`pisadb_core::Nanos`], and every tie (equal-length routes, frames at the same instant)
//! breaks the same way on every run.
//!
//! See `docs/ARCHITECTURE.md` (how a datagram travels in the simulator) for the page that explains
//! it.

mod error;
mod link;
mod port;
mod topology;

pub use error::NetError;
pub use link::{buffered_bytes, Link, LinkParams, PREAMBLE_AND_GAP_BYTES, WIRE_MIN_BYTES, WIRE_OVERHEAD_BYTES};
pub use port::{Arrival, ClassCounters, Dropped, PortDiscipline, PriorityPort, MAX_CLASSES};
pub use topology::{Endpoint, Topology};
