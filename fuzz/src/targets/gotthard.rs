//! Gotthard's request and reply.

use crate::check::canonical;
use crate::gen::Gen;
use crate::{Target, Verdict};
use pisadb_gotthard::wire::{Message, Op, OpType, Status, FLAG_FROM_SWITCH, FLAG_REPLY, MAX_OPS};

/// Gotthard's targets.
pub(crate) const TARGETS: &[Target] = &[Target { name: "gotthard_msg", generate: message, check, repair: None }];

fn message(g: &mut Gen) -> Vec<u8> {
    let ops = g.vec(0..=MAX_OPS, |g| Op {
        op_type: g.pick(&[OpType::Read, OpType::Write, OpType::Value, OpType::Updated]),
        key: g.u32(),
        value: g.i32(),
    });
    let msg = Message {
        flags: g.pick(&[0, FLAG_REPLY, FLAG_FROM_SWITCH, FLAG_REPLY | FLAG_FROM_SWITCH]),
        client: g.u32(),
        request: g.u32(),
        attempt: g.u16(),
        status: g.pick(&[Status::Ok, Status::Abort, Status::OptimisticAbort, Status::BadRequest]),
        ops,
    };
    let mut bytes = Vec::new();
    msg.encode(&mut bytes);
    bytes
}

fn check(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, Message::decode, Message::encode)
}
