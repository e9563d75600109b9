//! TransKV's messages, the storage nodes' (and controller's) log, and the records of its fjall
//! store in real mode.

use crate::check::{canonical, log, repair_frames};
use crate::gen::Gen;
use crate::{Target, Verdict};
use pisadb_core::TupleKey;
use pisadb_engine::Tuple;
use pisadb_transkv::control::ControllerRecord;
use pisadb_transkv::real::{decode_record, encode_record};
use pisadb_transkv::refresh::PlacementRecord;
use pisadb_transkv::store::NodeRecord;
use pisadb_transkv::wire::{Message, Op, OpType, Status, FLAG_DECIDED, FLAG_SERVED, FLAG_SHARE, MAX_OPS, VALUE_BYTES};

/// TransKV's targets.
pub(crate) const TARGETS: &[Target] = &[
    Target { name: "transkv_msg", generate: message_bytes, check: check_message, repair: None },
    Target { name: "transkv_log", generate: wal, check: log::<NodeRecord>, repair: Some(repair_frames) },
    Target { name: "transkv_record", generate: record, check: check_record, repair: None },
];

const STATUSES: [Status; 19] = [
    Status::Request,
    Status::Coordinate,
    Status::Prepare,
    Status::Voted,
    Status::Commit,
    Status::Committed,
    Status::Aborted,
    Status::SwitchAborted,
    Status::Served,
    Status::Resolve,
    Status::Log,
    Status::CommitLog,
    Status::HandOff,
    Status::HandedOff,
    Status::TakeBack,
    Status::TookBack,
    Status::Report,
    Status::Misses,
    Status::Lease,
];

fn message(g: &mut Gen) -> Message {
    let ops = g.vec(1..=MAX_OPS, |g| {
        let mut value = [0u8; VALUE_BYTES];
        value.iter_mut().for_each(|b| *b = g.u8());
        let flags = g.pick(&[0, FLAG_DECIDED, FLAG_SERVED, FLAG_SHARE, FLAG_DECIDED | FLAG_SERVED | FLAG_SHARE]);
        let key = u128::from(g.u64()) << 64 | u128::from(g.u64());
        Op { op_type: g.pick(&[OpType::Read, OpType::Write]), flags, key, value }
    });
    Message { ts: g.u32(), status: g.pick(&STATUSES), client: g.u16(), seq: g.u32(), ops }
}

fn message_bytes(g: &mut Gen) -> Vec<u8> {
    let mut bytes = Vec::new();
    message(g).encode(&mut bytes);
    bytes
}

fn check_message(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, Message::decode, Message::encode)
}

fn placement(g: &mut Gen) -> PlacementRecord {
    match g.range(0..4) {
        0 => PlacementRecord::Begin { switch: g.u16(), key: g.u64(), slot: g.u16(), insert: g.bool() },
        1 => PlacementRecord::Evicted { key: g.u64() },
        2 => PlacementRecord::Inserted { key: g.u64() },
        _ => PlacementRecord::Settled,
    }
}

fn node_record(g: &mut Gen) -> NodeRecord {
    match g.range(0..6) {
        0 => NodeRecord::Prepared(message(g)),
        1 => NodeRecord::Outcome(message(g)),
        2 => NodeRecord::Refresh(message(g)),
        3 => NodeRecord::Controller(ControllerRecord::Copy(message(g))),
        4 => NodeRecord::Controller(ControllerRecord::Span { ts: g.u32(), nodes: g.u8() }),
        _ => NodeRecord::Controller(ControllerRecord::Placement(placement(g))),
    }
}

fn wal(g: &mut Gen) -> Vec<u8> {
    let records = g.vec(0..=4, node_record);
    crate::check::encode_log(&records)
}

/// The key every record of this target belongs to: the decoder checks a record against its key.
const RECORD_KEY: u64 = 0x5eed;

fn record(g: &mut Gen) -> Vec<u8> {
    encode_record(TupleKey::new(0, RECORD_KEY), Tuple { value: g.i64(), version: g.u64() })
}

fn check_record(bytes: &[u8]) -> Result<Verdict, String> {
    let key = TupleKey::new(0, RECORD_KEY);
    canonical(bytes, |b| decode_record(key, b), |tuple, out| out.extend(encode_record(key, *tuple)))
}
