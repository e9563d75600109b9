//! The shared formats: the frame header, node-to-node messages, control messages, and the
//! echo host's ping (the real runtime's smoke test).

use crate::check::canonical;
use crate::gen::Gen;
use crate::{Target, Verdict};
use pisadb_core::TupleKey;
use pisadb_runtime::echo;
use pisadb_wire::control::{ControlMessage, ControlOp, ControlResult, ControlStatus};
use pisadb_wire::node::{LockMode, NodeMsg, OnConflict, MAX_ITEMS};
use pisadb_wire::{Frame, Kind};

/// The shared formats' targets.
pub(crate) const TARGETS: &[Target] = &[
    Target { name: "frame", generate: frame, check: check_frame, repair: None },
    Target { name: "node_msg", generate: node_msg, check: check_node_msg, repair: None },
    Target { name: "control_msg", generate: control_msg, check: check_control_msg, repair: None },
    Target { name: "echo", generate: echo_datagram, check: check_echo, repair: None },
];

fn any_frame(g: &mut Gen, kind: Kind) -> Frame {
    Frame { kind, src: g.u16(), dst: g.u16() }
}

fn frame(g: &mut Gen) -> Vec<u8> {
    let kind = Kind::new(g.range(1..=u8::MAX));
    let mut bytes = Vec::new();
    any_frame(g, kind).encode(&mut bytes);
    bytes.extend(g.bytes(0..=8));
    bytes
}

fn check_frame(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(
        bytes,
        |b| Frame::decode(b).map(|(frame, rest)| (frame, rest.to_vec())),
        |(frame, rest), out| {
            frame.encode(out);
            out.extend_from_slice(rest);
        },
    )
}

fn key(g: &mut Gen) -> TupleKey {
    TupleKey::new(g.u16(), g.u64())
}

fn node_msg(g: &mut Gen) -> Vec<u8> {
    let txn = g.u64();
    let items = 0..=if g.range(0..8) == 0 { MAX_ITEMS } else { 4 };
    let msg = match g.range(0..9) {
        0 => NodeMsg::LockRead {
            txn,
            ts: g.u64(),
            on_conflict: g.pick(&[OnConflict::Deny, OnConflict::WaitDie]),
            entries: g.vec(items, |g| (key(g), g.pick(&[LockMode::None, LockMode::Shared, LockMode::Exclusive]))),
        },
        1 => NodeMsg::LockReadReply { txn, granted: g.bool(), values: g.vec(items, |g| (g.i64(), g.u64())) },
        2 => NodeMsg::Prepare { txn, writes: g.vec(items, |g| (key(g), g.i64())) },
        3 => NodeMsg::Vote { txn, yes: g.bool() },
        4 => NodeMsg::Commit { txn },
        5 => NodeMsg::Abort { txn },
        6 => NodeMsg::Inquire { txn },
        7 => NodeMsg::Release { txn, key: key(g), write: g.bool().then(|| g.i64()) },
        _ => NodeMsg::Released { txn },
    };
    let mut bytes = Vec::new();
    msg.encode(&mut bytes);
    bytes
}

fn check_node_msg(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, NodeMsg::decode, NodeMsg::encode)
}

fn control_msg(g: &mut Gen) -> Vec<u8> {
    let (object, index, key) = (g.u8(), g.u32(), g.u64());
    let op = match g.range(0..4) {
        0 => ControlOp::ReadRegister { register: object, index },
        1 => ControlOp::WriteRegister { register: object, index, lo: g.i64(), hi: g.i64() },
        2 => ControlOp::InsertEntry { table: object, key, value: g.u64() },
        _ => ControlOp::DeleteEntry { table: object, key },
    };
    let request_id = g.u32();
    let msg = if g.bool() {
        ControlMessage::Request { request_id, op }
    } else {
        let status = ControlStatus::try_from(g.range(0..=7u8)).expect("statuses 0..=7");
        let result = match op {
            ControlOp::ReadRegister { .. } | ControlOp::WriteRegister { .. } => {
                ControlResult::Cell { lo: g.i64(), hi: g.i64() }
            }
            _ => ControlResult::Entry { previous: g.bool().then(|| g.u64()) },
        };
        ControlMessage::Reply { request_id, op, status, result }
    };
    let mut bytes = Vec::new();
    msg.encode(&mut bytes);
    bytes
}

fn check_control_msg(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, ControlMessage::decode, ControlMessage::encode)
}

fn echo_datagram(g: &mut Gen) -> Vec<u8> {
    let frame = any_frame(g, Kind::FORWARD);
    echo::Message { echo: g.bool(), slot: g.u16(), seq: g.u32(), origin: g.u16() }.datagram(frame.src, frame.dst)
}

fn check_echo(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(
        bytes,
        |b| echo::Message::decode(b).ok_or("not an echo datagram"),
        |(frame, message), out| out.extend(message.datagram(frame.src, frame.dst)),
    )
}
