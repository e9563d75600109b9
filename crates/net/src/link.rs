//! One direction of a wire: its figures ([`LinkParams`]) and its FIFO state ([`Link`]).
//!
//! A link is a one-way wire with a line rate, a propagation delay and a NIC/stack latency at
//! its ends. It carries one frame at a time, so frames queue behind each other: serialization
//! at line rate is what makes a busy link slow. Every figure is a named parameter with its
//! source next to it.
//!
//! The FIFO discipline needs no events. A frame ready at `ready` starts when both it and the
//! wire are ready, `max(ready, busy_until)`, and nothing that happens later can change that,
//! because later frames only queue behind it. So [`Link::carry`] answers the arrival time at
//! once and keeps one number, `busy_until`. This is the fast path of the default runs; its
//! arithmetic (the `f64` division and the `ceil`) is pinned bit for bit, because the
//! simulator's golden trace hashes depend on every arrival time it produces. A strict-priority
//! port cannot work this way (a frame's start depends on what arrives after it), so it is a
//! state machine of its own, [`crate::PriorityPort`], which reuses these figures.

use crate::error::NetError;
use crate::port::PortDiscipline;
use crate::Endpoint;
use pisadb_core::Nanos;
use serde::{Deserialize, Serialize};

/// Bytes every datagram carries on the wire besides its payload: Ethernet header (14) and FCS
/// (4), IPv4 (20), UDP (8), preamble and inter-frame gap (20). Source: IEEE 802.3 and the RFCs.
pub const WIRE_OVERHEAD_BYTES: u64 = 66;
/// The smallest Ethernet frame (64 bytes) plus preamble and gap: short payloads are padded.
pub const WIRE_MIN_BYTES: u64 = 84;
/// The part of [`WIRE_OVERHEAD_BYTES`] that exists only on the wire (preamble, start delimiter
/// and inter-frame gap): a switch buffer never stores it.
pub const PREAMBLE_AND_GAP_BYTES: u64 = 20;

/// Bytes a datagram with `payload` bytes occupies in a switch's packet buffer: the Ethernet
/// frame with its headers and FCS, padded to the 64-byte minimum, without preamble and gap.
/// Real buffers allocate fixed-size cells (Tofino's are said to be 80 bytes; not modelled), so
/// this is a lower bound on what a frame really costs the buffer.
pub fn buffered_bytes(payload: usize) -> u64 {
    (payload as u64 + WIRE_OVERHEAD_BYTES).max(WIRE_MIN_BYTES) - PREAMBLE_AND_GAP_BYTES
}

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

/// Propagation over the 3 m of cable assumed inside a rack: light in copper or fibre covers
/// about 0.2 m/ns, so ~5 ns per metre.
const RACK_CABLE_NS: Nanos = 15;
/// NIC and stack latency per direction assumed for every datacenter NIC below (see
/// [`LinkParams::nic_ns`]): a kernel-bypass stack's cost is PCIe, DMA and polling, which do not
/// shrink with the line rate, so the same assumed figure serves 10, 25 and 100 GbE.
const ASSUMED_NIC_NS: Nanos = 1_000;

impl LinkParams {
    /// 10 GbE in a rack: 10 Gbit/s, 3 m of cable, 1 µs NIC and stack. P4DB's testbed (seed
    /// 000 §7.1: 10 GbE NICs with DPDK, one Tofino).
    pub fn ten_gbe() -> Self {
        LinkParams { gbps: 10.0, propagation_ns: RACK_CABLE_NS, nic_ns: ASSUMED_NIC_NS }
    }

    /// 25 GbE in a rack: 25 Gbit/s (IEEE 802.3by), 3 m of cable, the same assumed 1 µs NIC and
    /// stack as [`LinkParams::ten_gbe`]. No seed paper ran on 25 GbE; this is today's common
    /// server NIC, offered for what-if runs.
    pub fn twenty_five_gbe() -> Self {
        LinkParams { gbps: 25.0, propagation_ns: RACK_CABLE_NS, nic_ns: ASSUMED_NIC_NS }
    }

    /// 100 GbE: 100 Gbit/s (IEEE 802.3ba/bj), 3 m of cable, the same assumed 1 µs NIC and stack.
    /// SwitchTx's testbed (seed 001 §5.1): 100 Gbit/s ConnectX-5 NICs on a Tofino Wedge
    /// 100BF-32X, whose ports are 100 GbE, so also the natural switch-to-switch trunk. The NIC
    /// figure is not SwitchTx's (it used RDMA, which is likely faster); longer runs between
    /// racks add ~5 ns per metre to `propagation_ns`.
    pub fn hundred_gbe() -> Self {
        LinkParams { gbps: 100.0, propagation_ns: RACK_CABLE_NS, nic_ns: ASSUMED_NIC_NS }
    }

    /// A wide-area link with a one-way delay of `one_way_ms` milliseconds. The delay is given
    /// directly because real routes are not straight lines (light in fibre covers ~200 km per
    /// ms, so 1 ms is roughly a metro-to-metro path). The 10 Gbit/s line rate is an assumption
    /// (a provisioned wavelength or a share of one), the NIC figure is the same assumed 1 µs as
    /// in a rack. It models only rate and delay: no loss, no jitter, no routers' queues on the
    /// way.
    pub fn wan(one_way_ms: u64) -> Self {
        LinkParams { gbps: 10.0, propagation_ns: one_way_ms.saturating_mul(1_000_000), nic_ns: ASSUMED_NIC_NS }
    }

    /// Time to put a datagram with `payload` bytes on the wire.
    pub fn serialization_ns(&self, payload: usize) -> Nanos {
        let bytes = (payload as u64 + WIRE_OVERHEAD_BYTES).max(WIRE_MIN_BYTES);
        ((bytes * 8) as f64 / self.gbps).ceil() as Nanos
    }

    /// Checks that the line rate is a finite positive number (anything else makes
    /// [`LinkParams::serialization_ns`] meaningless); `field` names the link in the error.
    pub fn check(&self, field: &'static str) -> Result<(), NetError> {
        if self.gbps.is_finite() && self.gbps > 0.0 {
            Ok(())
        } else {
            Err(NetError::BadLineRate { field, gbps: self.gbps })
        }
    }
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
    /// When the wire is free for the next frame (FIFO discipline only).
    pub busy_until: Nanos,
    /// Frames carried (FIFO discipline only).
    pub frames: u64,
    /// How the egress port in front of the wire orders frames; set through
    /// [`crate::Topology::set_discipline`], which validates it.
    pub(crate) discipline: PortDiscipline,
}

impl Link {
    /// A fresh link with a FIFO port and an idle wire.
    pub(crate) fn new(from: Endpoint, to: Endpoint, params: LinkParams) -> Self {
        Link { from, to, params, busy_until: 0, frames: 0, discipline: PortDiscipline::Fifo }
    }

    /// Sends a frame ready at `ready` through the FIFO discipline: returns when it arrives at
    /// the far end. A [`PortDiscipline::StrictPriority`] link is driven through the port
    /// [`Link::priority_port`] builds instead.
    pub fn carry(&mut self, ready: Nanos, payload: usize) -> Nanos {
        let start = ready.max(self.busy_until);
        let done = start + self.params.serialization_ns(payload);
        self.busy_until = done;
        self.frames += 1;
        done + self.params.propagation_ns
    }

    /// The port discipline of this link.
    pub fn discipline(&self) -> &PortDiscipline {
        &self.discipline
    }

    /// An empty strict-priority port for this link's wire, or `None` for a FIFO link. The
    /// driver owns the port (it holds the driver's items of type `T`); the topology keeps only
    /// the configuration.
    pub fn priority_port<T>(&self) -> Option<crate::PriorityPort<T>> {
        match self.discipline {
            PortDiscipline::Fifo => None,
            PortDiscipline::StrictPriority { classes, buffer_bytes } => {
                Some(crate::PriorityPort::new_checked_config(self.params.clone(), classes, buffer_bytes))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_follows_line_rate_with_wire_overhead_and_minimum_frame() {
        let ten = LinkParams::ten_gbe();
        assert_eq!(ten.serialization_ns(0), 68, "84-byte minimum frame at 10 Gbit/s = 67.2 ns");
        assert_eq!(ten.serialization_ns(18), 68, "18 + 66 = 84 bytes: exactly the minimum");
        assert_eq!(ten.serialization_ns(20), 69, "86 bytes at 10 Gbit/s = 68.8 ns, rounded up");
        assert_eq!(ten.serialization_ns(1434), 1200, "1500 bytes at 10 Gbit/s");
    }

    #[test]
    fn ten_gbe_figures_are_unchanged() {
        assert_eq!(LinkParams::ten_gbe(), LinkParams { gbps: 10.0, propagation_ns: 15, nic_ns: 1_000 });
    }

    #[test]
    fn faster_links_serialize_proportionally_faster() {
        // 1500 wire bytes = 12 000 bits.
        assert_eq!(LinkParams::twenty_five_gbe().serialization_ns(1434), 480);
        assert_eq!(LinkParams::hundred_gbe().serialization_ns(1434), 120);
        // 84 bytes = 672 bits: 26.88 ns and 6.72 ns, rounded up.
        assert_eq!(LinkParams::twenty_five_gbe().serialization_ns(0), 27);
        assert_eq!(LinkParams::hundred_gbe().serialization_ns(0), 7);
    }

    #[test]
    fn wan_delay_is_the_given_milliseconds() {
        let wan = LinkParams::wan(3);
        assert_eq!(wan.propagation_ns, 3_000_000);
        assert_eq!(LinkParams::wan(u64::MAX).propagation_ns, u64::MAX, "saturates instead of wrapping");
    }

    #[test]
    fn buffered_bytes_drop_preamble_and_gap_and_pad_to_the_minimum_frame() {
        assert_eq!(buffered_bytes(0), 64);
        assert_eq!(buffered_bytes(1434), 1480);
    }

    #[test]
    fn line_rates_must_be_finite_and_positive() {
        assert!(LinkParams::ten_gbe().check("link").is_ok());
        for gbps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let bad = LinkParams { gbps, ..LinkParams::ten_gbe() };
            assert!(matches!(bad.check("link"), Err(NetError::BadLineRate { field: "link", .. })), "{gbps}");
        }
    }

    #[test]
    fn a_busy_link_queues_frames() {
        let mut link = Link::new(Endpoint::Host(0), Endpoint::Switch(0), LinkParams::ten_gbe());
        let a = link.carry(0, 1434);
        let b = link.carry(0, 1434);
        assert_eq!(a, 1215, "1200 ns on the wire + 15 ns of cable");
        assert_eq!(b - a, 1200, "the second frame waits for the first to leave the wire");
        assert_eq!(link.frames, 2);
        let idle = link.carry(10_000, 0);
        assert_eq!(idle, 10_000 + 68 + 15, "an idle wire starts a frame at once");
    }
}
