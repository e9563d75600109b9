//! SwitchTx's control, data and Eris messages, and the servers' write-ahead log.

use crate::check::{canonical, log_of_json, repair_frames};
use crate::gen::Gen;
use crate::{Target, Verdict};
use pisadb_switchtx::wal::WalRecord;
use pisadb_switchtx::wire::{
    Control, Data, Item, Message, MsgType, Role, Sequenced, SequencedHeader, SwitchEntry, ERIS_SHARDS, FLAG_DOWN,
    FLAG_RETRY, MAX_ITEMS, MAX_KEYS, MAX_SWITCHES, SEQUENCED_BYTES,
};
use zerocopy::{FromBytes, IntoBytes};

/// SwitchTx's targets.
pub(crate) const TARGETS: &[Target] = &[
    Target { name: "switchtx_msg", generate: message, check: check_message, repair: None },
    Target { name: "switchtx_log", generate: wal, check: log_of_json::<WalRecord>, repair: Some(repair_frames) },
];

const CONTROL_TYPES: [MsgType; 7] = [
    MsgType::Init,
    MsgType::LockOk,
    MsgType::ValidateOk,
    MsgType::ReplicateOk,
    MsgType::CommitOk,
    MsgType::Fail,
    MsgType::VersionCopyOk,
];
const DATA_TYPES: [MsgType; 10] = [
    MsgType::Read,
    MsgType::ReadReply,
    MsgType::Prepare,
    MsgType::Query,
    MsgType::QueryReply,
    MsgType::Resolve,
    MsgType::ResolveAck,
    MsgType::ErisReply,
    MsgType::Lease,
    MsgType::Grant,
];

fn control(g: &mut Gen) -> Control {
    let mut c = Control::new(g.pick(&CONTROL_TYPES), g.u16(), g.range(1..=u16::MAX), g.u32(), g.u64());
    c.flags = g.pick(&[0, FLAG_DOWN, FLAG_RETRY, FLAG_DOWN | FLAG_RETRY]);
    (c.client, c.thread, c.sender, c.class) = (g.u8(), g.u8(), g.u8(), g.range(0..=2));
    c.throughput.set(g.u32());
    for entry in c.entries.iter_mut().take(g.range(0..=MAX_SWITCHES)) {
        *entry = SwitchEntry::new(g.pick(&[Role::None, Role::Leaf, Role::Root]), g.u8(), g.u16());
    }
    c
}

fn data(g: &mut Gen) -> Data {
    let mut d = Data::new(g.pick(&DATA_TYPES), g.u16(), g.u16(), g.u32(), g.u64());
    (d.client, d.thread, d.coord, d.wp, d.wb, d.rp) = (g.u8(), g.u8(), g.u8(), g.u8(), g.u8(), g.u8());
    d.flags = g.pick(&[0, FLAG_RETRY]);
    let most = if g.range(0..16) == 0 { MAX_ITEMS } else { 6 };
    d.items = g.vec(0..=most, |g| Item { key: g.u64(), value: g.u64(), version: g.u64(), locked: g.bool() });
    d.writes = g.range(0..=d.items.len() as u8);
    d
}

fn sequenced(g: &mut Gen) -> Sequenced {
    let mut header = SequencedHeader::read_from_bytes(&[0u8; SEQUENCED_BYTES][..]).expect("a zeroed header");
    header.msg = MsgType::ErisTxn as u8;
    header.flags = g.pick(&[0, FLAG_DOWN, FLAG_RETRY, FLAG_DOWN | FLAG_RETRY]);
    (header.client, header.thread) = (g.u8(), g.u8());
    header.slot.set(g.u16());
    header.tag.set(g.u16());
    header.attempt.set(g.u32());
    header.txn.set(g.u64());
    header.mask.set(g.u64() >> (64 - ERIS_SHARDS));
    for seq in header.seq.iter_mut() {
        seq.set(g.u32());
    }
    Sequenced { header, keys: g.vec(0..=MAX_KEYS.min(8), |g| (g.u64(), g.bool())) }
}

fn encode(message: &Message, out: &mut Vec<u8>) {
    match message {
        Message::Control(c) => out.extend_from_slice(c.as_bytes()),
        Message::Data(d) => d.encode(out),
        Message::Sequenced(s) => s.encode(out),
    }
}

fn message(g: &mut Gen) -> Vec<u8> {
    let message = match g.range(0..3) {
        0 => Message::Control(control(g)),
        1 => Message::Data(data(g)),
        _ => Message::Sequenced(sequenced(g)),
    };
    let mut bytes = Vec::new();
    encode(&message, &mut bytes);
    bytes
}

fn check_message(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, Message::decode, encode)
}

fn parts(g: &mut Gen) -> (u8, u8, u8, u8) {
    (g.u8(), g.u8(), g.u8(), g.u8())
}

fn pairs(g: &mut Gen) -> Vec<(u64, u64)> {
    g.vec(0..=3, |g| (g.u64(), g.u64()))
}

fn triples(g: &mut Gen) -> Vec<(u64, u64, u64)> {
    g.vec(0..=3, |g| (g.u64(), g.u64(), g.u64()))
}

fn record(g: &mut Gen) -> WalRecord {
    let (slot, attempt, txn) = (g.u16(), g.u32(), g.u64());
    match g.range(0..9) {
        0 => WalRecord::Begin {
            thread: g.u16(),
            lane: g.u8(),
            attempt,
            txn,
            keys: g.vec(0..=4, |g| (g.u64(), g.bool())),
            reads: triples(g),
            read_only: g.bool(),
            blind: g.bool(),
            first_start: g.u64(),
            retries: g.u32(),
            parts: parts(g),
        },
        1 => WalRecord::Closed {
            thread: g.u16(),
            lane: g.u8(),
            attempt,
            txn,
            committed: g.bool().then(|| pairs(g)),
            read_only: g.bool(),
        },
        2 => WalRecord::Locked {
            slot,
            attempt,
            txn,
            tag: g.u16(),
            client: g.u8(),
            thread: g.u8(),
            coord: g.u8(),
            retry: g.bool(),
            parts: parts(g),
            writes: pairs(g),
            reads: pairs(g),
            redo: pairs(g),
        },
        3 => WalRecord::Unlocked { slot, attempt },
        4 => WalRecord::Installed { slot, attempt, txn, writes: triples(g) },
        5 => WalRecord::Replicated {
            slot,
            attempt,
            txn,
            client: g.u8(),
            thread: g.u8(),
            parts: parts(g),
            redo: pairs(g),
            undo: triples(g),
        },
        6 => WalRecord::RolledBack { slot, attempt, restored: triples(g) },
        7 => WalRecord::Frozen { slot, attempt },
        _ => WalRecord::Adopted {
            epoch: g.u32(),
            primary: g.vec(0..=4, Gen::u8),
            backup: g.vec(0..=4, |g| g.bool().then(|| g.u8())),
            members: g.u8(),
            undecided: g.vec(0..=3, |g| (g.u16(), g.u32())),
        },
    }
}

fn wal(g: &mut Gen) -> Vec<u8> {
    let records = g.vec(0..=4, record);
    crate::check::encode_log(&records)
}
