//! Pattern 1 through the switch model alone, without hosts or links: the tuples enter in
//! stream order (every outer tuple and END, then every inner tuple and END), overflow is handed
//! to an [`Overflow`] as the control plane would get it, and the drained groups are collected.
//!
//! This is what the property tests check against the reference. Overflow depends only on the
//! order tuples reach the switch and on the layout, not on timing, so it needs no simulated
//! rack; the experiments (`crate::experiments`) still run the rack for the overflow tables,
//! because they also report whether the control plane's core kept up.

use crate::layout::{Layout, DIST_TABLE};
use crate::overflow::Overflow;
use crate::program::{NetAccel, GROUP_ALL, GROUP_SEGMENTS};
use crate::wire::{Msg, Op};
use pisadb_olap::ops::DISTRIBUTION_BUCKETS;
use pisadb_switch::device::run_alone;
use pisadb_switch::{Port, Switch, SwitchProfile};
use pisadb_wire::{Frame, SWITCH_ID};

/// Host id of the master (segments are `1..=segments`, the control plane after them).
pub const MASTER: u16 = 0;

/// The host id of segment `s` (0-based).
pub fn segment_host(s: u16) -> u16 {
    s + 1
}

/// The control plane's host id with `segments` segments.
pub fn control_plane_host(segments: u16) -> u16 {
    segments + 1
}

/// The switch loaded with `layout`'s program (reloading pattern 1's groups for a probe stream
/// if `reload`), its ports, multicast groups and distribution
/// table (bucket `b` → the segment `b % segments`, as [`pisadb_olap::ops::segment_of`]).
pub fn build_switch(profile: SwitchProfile, layout: Layout, reload: bool) -> Result<Switch<NetAccel>, String> {
    layout.check()?;
    let program = if reload { NetAccel::reloading(layout) } else { NetAccel::new(layout) };
    let mut switch = Switch::new(profile, program).map_err(|e| e.to_string())?;
    let segments: Vec<u16> = (0..layout.segments).map(segment_host).collect();
    switch.attach(MASTER);
    for &s in &segments {
        switch.attach(s);
    }
    switch.attach(control_plane_host(layout.segments));
    switch.set_controller(control_plane_host(layout.segments));
    let mut all = vec![MASTER];
    all.extend(&segments);
    switch.set_multicast_group(GROUP_ALL, all);
    switch.set_multicast_group(GROUP_SEGMENTS, segments);
    for bucket in 0..DISTRIBUTION_BUCKETS {
        let dst = segment_host((bucket % u32::from(layout.segments)) as u16);
        switch.insert_entry(DIST_TABLE, u64::from(bucket), u64::from(dst)).map_err(|e| e.to_string())?;
    }
    Ok(switch)
}

/// A datagram from segment `s` to the switch.
pub fn tuple_datagram(m: &Msg) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(pisadb_wire::FRAME_BYTES + crate::wire::MSG_BYTES);
    Frame { kind: crate::wire::KIND, src: segment_host(m.segment), dst: SWITCH_ID }.encode(&mut bytes);
    m.encode(&mut bytes);
    bytes
}

/// What one run of pattern 1 through the switch gave.
pub struct Outcome {
    /// Groups drained from the switch: (partkey, suppkey, sum, destination host).
    pub switch_groups: Vec<(u32, u32, i64, u16)>,
    /// Probe rows of the reloaded pattern that passed in the switch: (partkey, suppkey,
    /// availqty, destination host).
    pub switch_passing: Vec<(u32, u32, u32, u16)>,
    /// The control plane's work.
    pub control_plane: Overflow,
    /// Outer and inner tuples sent.
    pub sent: [u64; 2],
    /// Whether a `Go` and the drain's end came out, and whether any carried the loss flag.
    pub go: bool,
    /// Whether the clearing iterator announced the end of the drain to every segment.
    pub drained: bool,
    /// Whether the control plane was told its input is complete.
    pub control_plane_done: bool,
    /// Whether any barrier reported lost tuples.
    pub loss: bool,
    /// The switch, after the run (its registers should be clear).
    pub switch: Switch<NetAccel>,
}

/// Runs `outer` (segment, key) and `inner` (segment, partkey, suppkey, quantity) through a
/// switch with `layout`; `drop_inner` loses that inner tuple on its way (to test the loss
/// check).
pub fn run(
    layout: Layout,
    outer: &[(u16, u32)],
    inner: &[(u16, u32, u32, u32)],
    drop_inner: Option<usize>,
) -> Result<Outcome, String> {
    run_streams(layout, outer, inner, None, drop_inner)
}

/// Runs pattern 1 and then the reloaded pattern 2: `probe` (segment, partkey, suppkey,
/// availqty) looks up the groups pattern 1 left in the switch.
pub fn run_reloaded(
    layout: Layout,
    outer: &[(u16, u32)],
    inner: &[(u16, u32, u32, u32)],
    probe: &[(u16, u32, u32, u32)],
) -> Result<Outcome, String> {
    run_streams(layout, outer, inner, Some(probe), None)
}

fn run_streams(
    layout: Layout,
    outer: &[(u16, u32)],
    inner: &[(u16, u32, u32, u32)],
    probe: Option<&[(u16, u32, u32, u32)]>,
    drop_inner: Option<usize>,
) -> Result<Outcome, String> {
    let mut switch = build_switch(SwitchProfile::tofino1(), layout, probe.is_some())?;
    let mut arrivals = Vec::new();
    let mut t = 0u64;
    let mut push = |m: Msg, arrivals: &mut Vec<(u64, u16, Vec<u8>)>| {
        t += 1;
        arrivals.push((t, segment_host(m.segment), tuple_datagram(&m)));
    };
    let mut counts = vec![[0u32; 2]; usize::from(layout.segments)];
    for &(s, key) in outer {
        counts[usize::from(s)][0] += 1;
        push(Msg::new(Op::Outer, s, key, 0, 0), &mut arrivals);
    }
    for s in 0..layout.segments {
        push(Msg::new(Op::EndOuter, s, counts[usize::from(s)][0], 0, 0), &mut arrivals);
    }
    for (i, &(s, pk, sk, q)) in inner.iter().enumerate() {
        counts[usize::from(s)][1] += 1;
        if drop_inner != Some(i) {
            push(Msg::new(Op::Inner, s, pk, sk, q), &mut arrivals);
        }
    }
    for s in 0..layout.segments {
        push(Msg::new(Op::EndInner, s, counts[usize::from(s)][1], 0, 0), &mut arrivals);
    }
    if let Some(probe) = probe {
        let mut probes = vec![0u32; usize::from(layout.segments)];
        for &(s, pk, sk, avail) in probe {
            probes[usize::from(s)] += 1;
            push(Msg::new(Op::Probe, s, pk, sk, avail), &mut arrivals);
        }
        for s in 0..layout.segments {
            push(Msg::new(Op::EndProbe, s, probes[usize::from(s)], 0, 0), &mut arrivals);
        }
    }
    let wakeups =
        4 * (u64::from(layout.group_slots) * u64::from(layout.group_positions) + u64::from(layout.join_slots)) + 1000;
    let transmits = run_alone(&mut switch, arrivals, wakeups)?;
    let mut outcome = Outcome {
        switch_groups: Vec::new(),
        switch_passing: Vec::new(),
        control_plane: Overflow::default(),
        sent: [outer.len() as u64, inner.len() as u64],
        go: false,
        drained: false,
        control_plane_done: false,
        loss: false,
        switch,
    };
    let mut drained_to = std::collections::BTreeSet::new();
    for tx in transmits {
        let (_, payload) = Frame::decode(&tx.bytes).map_err(|e| e.to_string())?;
        let m = Msg::decode(payload).map_err(|e| e.to_string())?;
        outcome.loss |= m.loss();
        match (tx.port, m.op) {
            (Port::ControlPlane, Op::Drain) => outcome.control_plane_done = true,
            (Port::ControlPlane, Op::Go) => {}
            (Port::ControlPlane, _) => {
                if !outcome.control_plane.take(&m) {
                    return Err(format!("the control plane got a tuple without an overflow type: {m:?}"));
                }
            }
            (_, Op::Go) => outcome.go = true,
            (_, Op::Drain) => outcome.switch_groups.push((m.a, m.b, i64::from(m.c), tx.dst)),
            (_, Op::Probe) => outcome.switch_passing.push((m.a, m.b, m.c, tx.dst)),
            (_, Op::Clear) => {
                drained_to.insert(tx.dst);
            }
            (port, op) => return Err(format!("unexpected {op:?} out of {port:?}")),
        }
    }
    outcome.drained = drained_to.len() == usize::from(layout.segments);
    Ok(outcome)
}
