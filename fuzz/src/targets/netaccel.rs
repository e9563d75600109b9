//! NetAccel's tuple packets and host-to-host motions.

use crate::check::canonical;
use crate::gen::Gen;
use crate::{Target, Verdict};
use pisadb_netaccel::wire::{Motion, Msg, Op, Stream, MOTION_VALUES_MAX};

/// NetAccel's targets.
pub(crate) const TARGETS: &[Target] = &[
    Target { name: "netaccel_msg", generate: msg, check: check_msg, repair: None },
    Target { name: "netaccel_motion", generate: motion, check: check_motion, repair: None },
];

const OPS: [Op; 9] =
    [Op::Outer, Op::Inner, Op::EndOuter, Op::EndInner, Op::Go, Op::Drain, Op::Clear, Op::Probe, Op::EndProbe];
const STREAMS: [Stream; 6] =
    [Stream::PartFp, Stream::CpGroups, Stream::Pattern1Done, Stream::Suppkeys, Stream::Answer, Stream::CpSuppkeys];

fn msg(g: &mut Gen) -> Vec<u8> {
    let m =
        Msg { op: g.pick(&OPS), flags: g.u8(), segment: g.u16(), a: g.u32(), b: g.u32(), c: g.u32(), index: g.u32() };
    let mut bytes = Vec::new();
    m.encode(&mut bytes);
    bytes
}

fn check_msg(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, Msg::decode, Msg::encode)
}

fn motion(g: &mut Gen) -> Vec<u8> {
    let width = g.range(1..=4u8);
    let most = if g.range(0..16) == 0 { MOTION_VALUES_MAX / usize::from(width) } else { 8 };
    let rows = g.range(0..=most);
    let values = (0..rows * usize::from(width)).map(|_| g.u32()).collect();
    let m = Motion { stream: g.pick(&STREAMS), last: g.bool(), from: g.u16(), width, values };
    let mut bytes = Vec::new();
    m.encode(&mut bytes);
    bytes
}

fn check_motion(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, Motion::decode, Motion::encode)
}
