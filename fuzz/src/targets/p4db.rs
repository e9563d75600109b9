//! P4DB's formats: switch transactions, LM-Switch lock requests, and the nodes' write-ahead log.

use crate::check::{canonical, log, repair_frames};
use crate::gen::Gen;
use crate::{Target, Verdict};
use pisadb_core::{AccOut, Insert, InsertRow, TupleKey};
use pisadb_p4db::node::wal::LogRecord;
use pisadb_p4db::wire::lock::{LockEntry, LockOp, LockPacket, MAX_ENTRIES};
use pisadb_p4db::wire::p4db::{Instruction, LockPair, TxnPacket, GID_LIMIT, MAX_INSTRUCTIONS, MAX_REGISTER_ID};

/// P4DB's targets.
pub(crate) const TARGETS: &[Target] = &[
    Target { name: "p4db_txn", generate: txn_bytes, check: check_txn, repair: None },
    Target { name: "p4db_lock", generate: lock, check: check_lock, repair: None },
    Target { name: "p4db_log", generate: wal, check: log::<LogRecord>, repair: Some(repair_frames) },
];

fn txn(g: &mut Gen) -> TxnPacket {
    let count = g.range(1..=MAX_INSTRUCTIONS);
    let instrs = (0..count)
        .map(|i| Instruction {
            register: g.range(1..=MAX_REGISTER_ID),
            action: g.range(0..=15),
            acc_in: g.bool(),
            acc_out: g.pick(&[AccOut::None, AccOut::Set, AccOut::Add, AccOut::Sub]),
            index: g.u16(),
            data: g.i32(),
            end_of_pass: i + 1 == count || g.range(0..4) == 0,
        })
        .collect();
    TxnPacket {
        txn_id: g.u64(),
        gid: g.u64() % GID_LIMIT,
        epoch: g.u16(),
        recircs: g.u32(),
        acc: g.i32(),
        is_multipass: g.bool(),
        locks: LockPair { left: g.bool(), right: g.bool() },
        instrs,
        multicast: g.u16(),
    }
}

fn txn_bytes(g: &mut Gen) -> Vec<u8> {
    let mut bytes = Vec::new();
    txn(g).encode(&mut bytes);
    bytes
}

fn check_txn(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, TxnPacket::decode, TxnPacket::encode)
}

fn lock(g: &mut Gen) -> Vec<u8> {
    let ops = [LockOp::AcquireShared, LockOp::AcquireExclusive, LockOp::ReleaseShared, LockOp::ReleaseExclusive];
    let entries =
        g.vec(1..=MAX_ENTRIES, |g| LockEntry { register: g.range(1..=u8::MAX), op: g.pick(&ops), index: g.u16() });
    let mut bytes = Vec::new();
    LockPacket { txn_id: g.u64(), granted: g.u32(), entries }.encode(&mut bytes);
    bytes
}

fn check_lock(bytes: &[u8]) -> Result<Verdict, String> {
    canonical(bytes, LockPacket::decode, LockPacket::encode)
}

fn kv(g: &mut Gen) -> (TupleKey, i64) {
    (TupleKey::new(g.u16(), g.u64()), g.i64())
}

fn insert(g: &mut Gen) -> Insert {
    let (base, stride) = (g.u64(), g.u64());
    let row = if g.bool() {
        InsertRow::FromOutput { op: g.range(0..64), base, stride }
    } else {
        InsertRow::Sequence { base, stride }
    };
    Insert { table: g.u16(), row, value: g.i64() }
}

fn record(g: &mut Gen) -> LogRecord {
    let txn = g.u64();
    match g.range(0..6) {
        0 => LogRecord::Started { incarnation: g.u16() },
        1 => LogRecord::SwitchIntent {
            txn,
            packet: txn_bytes(g),
            local_writes: g.vec(0..=3, kv),
            writers: g.vec(0..=3, Gen::u16),
            outputs: g.vec(0..=4, Gen::i64),
            instr_order: g.vec(0..=4, Gen::u16),
            inserts: g.vec(0..=2, insert),
        },
        2 => LogRecord::SwitchResult {
            txn,
            gid: g.u64(),
            results: g.vec(0..=4, Gen::i32),
            acc: g.i32(),
            inserted: g.vec(0..=2, kv),
            insert_seq: g.u64(),
        },
        3 => LogRecord::Committed { txn, writes: g.vec(0..=3, kv), inserted: g.vec(0..=2, kv), insert_seq: g.u64() },
        4 => LogRecord::Prepared { txn, coordinator: g.u16(), writes: g.vec(0..=3, kv) },
        _ => LogRecord::Resolved { txn, commit: g.bool() },
    }
}

fn wal(g: &mut Gen) -> Vec<u8> {
    let records = g.vec(0..=5, record);
    crate::check::encode_log(&records)
}
