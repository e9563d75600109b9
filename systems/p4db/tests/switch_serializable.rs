//! P4DB's switch transactions are serializable in GID order.
//!
//! Random hot transactions (single- and multi-pass, constrained writes, read-dependent writes
//! through the accumulator, repeated tuples) are sent from several nodes at nearly the same
//! time, so that multi-pass transactions hold locks while others wait and recirculate. Every
//! reply and the final register contents must equal a serial execution of the replied
//! transactions in GID order, for every combination of the §5.3 optimizations. Some
//! transactions are sent twice, as a node does after a timeout: the copy must get the same
//! answer and change nothing.

mod common;

use pisadb_core::{AccOut, Op, OpKind, SerialStore, TupleKey, Txn};
use pisadb_p4db::programs::p4db::{FineLocks, P4dbConfig, P4dbEngine, RecirculationModel};
use pisadb_p4db::wire::p4db::TxnPacket;
use pisadb_p4db_layout::{random, Layout};
use pisadb_switch::{Switch, SwitchProfile};
use pisadb_wire::{Frame, SWITCH_ID};
use proptest::prelude::*;
use std::collections::BTreeMap;

const NODES: u16 = 4;
const HOT: u64 = 24;

fn config(fine_grained_locks: bool, fast_recirculation: bool) -> P4dbConfig {
    P4dbConfig {
        first_data_stage: 1,
        data_stages: 4,
        arrays_per_stage: 2,
        entries_per_array: 16,
        fine_locks: if fine_grained_locks { FineLocks::Stages } else { FineLocks::WholePipeline },
        fast_recirculation,
        recirculation: RecirculationModel::Priority,
        first_pass_only: false,
        single_pass_waits_for_either_half: false,
    }
}

fn hot_keys() -> Vec<TupleKey> {
    (0..HOT).map(|r| TupleKey::new(0, r)).collect()
}

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        Just(OpKind::Read),
        Just(OpKind::Write),
        Just(OpKind::Add),
        Just(OpKind::AddIfNonNegative),
        Just(OpKind::WriteCheck),
        Just(OpKind::Restock)
    ];
    let acc_out = prop_oneof![Just(AccOut::None), Just(AccOut::Set), Just(AccOut::Add), Just(AccOut::Sub)];
    (0..HOT, kind, -100i64..100, any::<bool>(), acc_out).prop_map(|(row, kind, data, acc_in, acc_out)| Op {
        key: TupleKey::new(0, row),
        kind,
        data,
        acc_in,
        acc_out,
    })
}

fn txn() -> impl Strategy<Value = Txn> {
    proptest::collection::vec(op(), 1..=6).prop_map(Txn::new)
}

fn datagram(from: u16, pkt: &TxnPacket) -> Vec<u8> {
    let mut bytes = Vec::new();
    Frame { kind: pisadb_p4db::wire::TXN_KIND, src: from, dst: SWITCH_ID }.encode(&mut bytes);
    pkt.encode(&mut bytes);
    bytes
}

/// Runs `txns` (sent at `times`) through a switch and checks them against serial execution.
fn check_serializable(
    cfg: P4dbConfig,
    layout_seed: u64,
    initial: &[i64],
    txns: &[Txn],
    times: &[u64],
    copies: &[Option<u64>],
) -> Result<(), TestCaseError> {
    let profile = SwitchProfile::tofino1();
    let engine = P4dbEngine::new(cfg.clone());
    let layout: Layout = random(&hot_keys(), &cfg.layout_target(&profile), layout_seed);
    let mut switch = Switch::new(profile, engine.clone()).expect("engine loads");
    (0..NODES).for_each(|n| switch.attach(n));
    let mut store = SerialStore::default();
    for (key, &value) in hot_keys().iter().zip(initial) {
        let p = layout.get(*key).unwrap();
        switch.registers_mut().write(p.register, p.index, value, 0).unwrap();
        store.set(*key, value);
    }
    let mut orders = BTreeMap::new();
    let mut arrivals = Vec::new();
    for (i, (txn, &at)) in txns.iter().zip(times).enumerate() {
        // Each transaction comes from its own worker slot (the id's upper half).
        let id = (i as u64) << 32;
        let (pkt, order) = engine.packet_for(txn, &layout, id).expect("all tuples are hot");
        orders.insert(id, order);
        let node = (i as u16) % NODES;
        arrivals.push((at, node, datagram(node, &pkt)));
        if let Some(later) = copies[i] {
            arrivals.push((at + later, node, datagram(node, &pkt)));
        }
    }
    let sent = arrivals.len() as u64;
    let all_replies: Vec<TxnPacket> = common::drive(&mut switch, arrivals)
        .into_iter()
        .map(|tx| {
            let (frame, payload) = Frame::decode(&tx.bytes).unwrap();
            assert_eq!(frame.dst, tx.dst);
            TxnPacket::decode(payload).unwrap()
        })
        .collect();
    let stats = switch.stats();
    let dropped: u64 = stats.dropped.values().sum();
    prop_assert_eq!(all_replies.len() as u64 + dropped, sent, "every datagram is answered or counted as dropped");
    // A copy answered again carries exactly the first answer.
    let mut replies: Vec<TxnPacket> = Vec::new();
    for reply in all_replies {
        match replies.iter().find(|r| r.txn_id == reply.txn_id) {
            Some(first) => {
                let answer = |p: &TxnPacket| (p.gid, p.acc, p.instrs.clone());
                prop_assert_eq!(answer(first), answer(&reply), "a copy gets the same answer")
            }
            None => replies.push(reply),
        }
    }
    prop_assert!(stats.rejected.is_empty(), "plans built by packet_for are valid: {:?}", stats.rejected);

    let mut by_gid: Vec<&TxnPacket> = replies.iter().collect();
    by_gid.sort_by_key(|p| p.gid);
    for (n, reply) in by_gid.iter().enumerate() {
        prop_assert_eq!(reply.gid, n as u64 + 1, "GIDs are dense and unique among executed transactions");
        let txn = &txns[(reply.txn_id >> 32) as usize];
        let expected = txn.execute_serial(&mut store);
        for (instr, &op_index) in reply.instrs.iter().zip(&orders[&reply.txn_id]) {
            prop_assert_eq!(i64::from(instr.data), expected[op_index], "txn {} op {} result", reply.txn_id, op_index);
        }
    }
    for key in hot_keys() {
        let p = layout.get(key).unwrap();
        let (value, _) = switch.registers().read(p.register, p.index).unwrap();
        prop_assert_eq!(value, store.get(key), "final value of {:?}", key);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn switch_transactions_equal_serial_execution_in_gid_order(
        layout_seed in any::<u64>(),
        initial in proptest::collection::vec(0i64..1000, HOT as usize),
        txns_and_times in proptest::collection::vec(
            (txn(), 0u64..3_000, proptest::option::weighted(0.2, 0u64..3_000)), 1..120),
        fine in any::<bool>(),
        fast in any::<bool>(),
    ) {
        let txns: Vec<Txn> = txns_and_times.iter().map(|t| t.0.clone()).collect();
        let times: Vec<u64> = txns_and_times.iter().map(|t| t.1).collect();
        let copies: Vec<Option<u64>> = txns_and_times.iter().map(|t| t.2).collect();
        check_serializable(config(fine, fast), layout_seed, &initial, &txns, &times, &copies)?;
    }
}

/// A reader never sees half of a multi-pass transfer: X + Y stays constant in every result.
#[test]
fn no_transaction_observes_a_partial_multi_pass_transaction() {
    let profile = SwitchProfile::tofino1();
    let cfg = config(true, true);
    let engine = P4dbEngine::new(cfg.clone());
    let (x, y) = (TupleKey::new(0, 0), TupleKey::new(0, 1));
    let layout = random(&[x, y], &cfg.layout_target(&profile), 3);
    let mut switch = Switch::new(profile, engine.clone()).unwrap();
    switch.attach(0);
    switch.attach(1);
    // Reading Y and then adding to Y needs two passes: the transfer is multi-pass.
    let transfer = Txn::new(vec![Op::read(y), Op::new(x, OpKind::Add, -1), Op::new(y, OpKind::Add, 1)]);
    let reader = Txn::new(vec![Op::read(x), Op::read(y)]);
    let mut arrivals = Vec::new();
    for i in 0..400u64 {
        let (txn, from) = if i % 4 == 0 { (&transfer, 0) } else { (&reader, 1) };
        let (pkt, _) = engine.packet_for(txn, &layout, i << 32).unwrap();
        assert_eq!(pkt.is_multipass, i % 4 == 0);
        arrivals.push((i * 7, from, datagram(from, &pkt)));
    }
    let replies = common::drive(&mut switch, arrivals);
    let mut readers = 0;
    for tx in replies {
        let pkt = TxnPacket::decode(Frame::decode(&tx.bytes).unwrap().1).unwrap();
        if !pkt.is_multipass {
            readers += 1;
            let sum: i32 = pkt.instrs.iter().map(|i| i.data).sum();
            assert_eq!(sum, 0, "reader {} saw a partial transfer", pkt.txn_id);
        }
    }
    assert_eq!(readers, 300);
    assert!(switch.stats().recirculations > 100, "readers had to wait for transfers");
}
