//! The switch-side options that reproduce what the paper's prototype measured: the `random`
//! (`idx % N`) and `ideal` (`SWITCH_NO_CONFLICT`) layouts, `parity` lock halves and the two-port
//! FIFO recirculation. Each test states the prototype's rule in its own words and checks the
//! engine against it, not against the engine's own helpers.

use pisadb_core::{Op, TupleKey, Txn};
use pisadb_p4db::node::Mode;
use pisadb_p4db::programs::p4db::{FineLocks, P4dbConfig, P4dbEngine, RecirculationModel};
use pisadb_p4db::wire::p4db::LockPair;
use pisadb_p4db::{plan, run, LayoutChoice, RackSwitch, RunConfig, WorkloadSpec};
use pisadb_p4db_layout::modulo;
use pisadb_switch::{Program, Switch, SwitchDevice, SwitchProfile};
use pisadb_wire::{Frame, SWITCH_ID};
use pisadb_workload::{Scheme, SmallBankConfig, YcsbConfig};
use std::collections::BTreeSet;

/// The prototype's YCSB switch program has 20 data arrays (`NUM_REGS` in its `switch.hpp`).
const YCSB_ARRAYS: u64 = 20;

fn small_ycsb(layout: LayoutChoice) -> RunConfig {
    RunConfig {
        nodes: 4,
        workers: 4,
        mode: Mode::P4db,
        layout,
        workload: WorkloadSpec::Ycsb(YcsbConfig { partitioning: Scheme::Range, ..YcsbConfig::default() }),
        warmup_ns: 50_000,
        measure_ns: 500_000,
        layout_sample: 1_000,
        record_history: true,
        ..RunConfig::ycsb_default()
    }
}

fn engine_of(switch: &RackSwitch) -> &P4dbEngine {
    match switch {
        RackSwitch::P4db(s) => s.program(),
        RackSwitch::LockManager(_) => panic!("a P4DB rack runs the P4DB engine"),
    }
}

#[test]
fn random_is_the_prototypes_idx_mod_n_with_n_its_array_count_per_workload() {
    for (workload, n) in
        [(WorkloadSpec::Ycsb(YcsbConfig::default()), 20), (WorkloadSpec::SmallBank(SmallBankConfig::default()), 10)]
    {
        let cfg = RunConfig { nodes: 4, layout: LayoutChoice::Random, workload, ..RunConfig::ycsb_default() };
        let target = cfg.p4db_config().layout_target(&cfg.profile);
        let rack = plan(&cfg).unwrap();
        assert!(!rack.layout.is_empty());
        for (key, p) in rack.layout.iter() {
            let array = ((key.row + u64::from(key.table)) % n) as usize;
            assert_eq!(p.register, target.arrays[array].register, "{key:?} with N = {n}");
        }
    }
}

/// Under `SWITCH_NO_CONFLICT` the prototype sorts a YCSB transaction's instructions by
/// (how many earlier operations used the same array, array) and its parser stops at the first
/// instruction whose array is not above the previous one's: what executes is the first
/// operation on each distinct array, everything else is dropped.
fn prototype_dropped_ops(switch_keys: &[TupleKey]) -> u64 {
    let mut used = BTreeSet::new();
    switch_keys.iter().filter(|k| !used.insert(k.row % YCSB_ARRAYS)).count() as u64
}

#[test]
fn under_the_ideal_layout_nothing_recirculates_and_the_dropped_ops_are_the_prototypes() {
    let mut out = run(&small_ycsb(LayoutChoice::Ideal)).unwrap();
    let window = out.result.ideal.expect("an ideal run reports what it dropped");
    assert!(window.dropped_ops > 0 && window.truncated_txns > 0, "8 keys over 20 arrays collide: {window:?}");
    assert_eq!(out.result.recirculations, 0);
    out.cluster.drain(50_000_000).unwrap();
    let switch = out.cluster.switch(0);
    assert_eq!(switch.stats().recirculations, 0, "ideal never recirculates, warm-up and drain included");
    assert!(switch.stats().dropped.is_empty(), "{:?}", switch.stats().dropped);
    // Independent count over every committed transaction's switch part (all of them, drained).
    let (mut dropped, mut truncated) = (0, 0);
    for record in out.cluster.observer().records() {
        let keys: Vec<TupleKey> = record.switch_ops.iter().map(|&i| record.gen.txn.ops[i].key).collect();
        let lost = prototype_dropped_ops(&keys);
        dropped += lost;
        truncated += u64::from(lost > 0);
    }
    let engine = engine_of(out.cluster.switch(0));
    assert_eq!(engine.first_pass_dropped_ops, dropped);
    assert_eq!(engine.first_pass_truncated_txns, truncated);
}

#[test]
fn the_random_layout_runs_real_multi_pass_transactions_and_drops_nothing() {
    let out = run(&small_ycsb(LayoutChoice::Random)).unwrap();
    assert!(out.result.ideal.is_none());
    assert!(out.result.recirculations > 0, "colliding keys need a second pass under idx % 20");
    assert_eq!(engine_of(out.cluster.switch(0)).first_pass_dropped_ops, 0);
}

/// A tiny switch with `fine_locks`, `recirculation` and the prototype's 20 YCSB arrays laid out
/// as `idx % 20`.
fn switch_with(fine_locks: FineLocks) -> (Switch<P4dbEngine>, pisadb_p4db_layout::Layout) {
    let profile = SwitchProfile::tofino1();
    let config = P4dbConfig { fine_locks, ..P4dbConfig::for_profile(&profile) };
    let keys: Vec<TupleKey> = (0..200).map(|r| TupleKey::new(0, r)).collect();
    let layout = modulo(&keys, &config.layout_target(&profile), 20);
    let mut switch = Switch::new(profile, P4dbEngine::new(config)).unwrap();
    (0..4).for_each(|n| switch.attach(n));
    (switch, layout)
}

fn send(switch: &mut Switch<P4dbEngine>, layout: &pisadb_p4db_layout::Layout, txn: &Txn, from: u16) -> LockPair {
    let (pkt, _) = switch.program().packet_for(txn, layout, u64::from(from) << 32 | 1).unwrap();
    let mut bytes = Vec::new();
    Frame { kind: pisadb_p4db::wire::TXN_KIND, src: from, dst: SWITCH_ID }.encode(&mut bytes);
    pkt.encode(&mut bytes);
    switch.handle_datagram(0, from, &bytes);
    pkt.locks
}

fn k(row: u64) -> TupleKey {
    TupleKey::new(0, row)
}

#[test]
fn parity_locks_take_the_half_of_the_first_keys_parity_as_the_prototype_does() {
    let (switch, layout) = switch_with(FineLocks::Parity);
    let engine = switch.program();
    // Rows 0, 20, 40 share array 0; rows 1, 21 share array 1: two passes each.
    for first in [0u64, 1, 20, 21, 7, 40] {
        let txn = Txn::new(vec![Op::read(k(first)), Op::write(k(first + 40), 3), Op::read(k(first + 20))]);
        let (pkt, _) = engine.packet_for(&txn, &layout, 1).unwrap();
        assert!(pkt.is_multipass);
        // The prototype: `ops[0].id % 2 == 0 ? lock_t{1, 0} : lock_t{0, 1}`.
        let expected =
            if first % 2 == 0 { LockPair { left: true, right: false } } else { LockPair { left: false, right: true } };
        assert_eq!(pkt.locks, expected, "first key {first}");
    }
    // A single-pass packet waits while either half is held.
    let (pkt, _) = engine.packet_for(&Txn::new(vec![Op::read(k(3)), Op::read(k(4))]), &layout, 2).unwrap();
    assert!(!pkt.is_multipass);
    assert_eq!(pkt.locks, LockPair::BOTH);
}

#[test]
fn parity_lets_two_multi_pass_transactions_on_the_same_stage_run_at_once_stages_does_not() {
    // Both touch array 0 (rows 0, 20, 40) twice; a starts with an even key, b with an odd one.
    let a = Txn::new(vec![Op::write(k(0), 1), Op::write(k(20), 1)]);
    let b = Txn::new(vec![Op::write(k(1), 2), Op::write(k(40), 2), Op::write(k(20), 2)]);
    let mut recirculations = Vec::new();
    for rule in [FineLocks::Parity, FineLocks::Stages] {
        let (mut switch, layout) = switch_with(rule);
        let (la, lb) = (send(&mut switch, &layout, &a, 0), send(&mut switch, &layout, &b, 1));
        switch.handle_timeout(10_000_000);
        assert_eq!(switch.stats().emitted, 2, "{rule:?}: both answered");
        if rule == FineLocks::Parity {
            assert_ne!(la, lb, "different halves for the same stage: the rule is not serializable");
        }
        recirculations.push(switch.stats().recirculations);
    }
    // Each needs exactly one recirculation for its second pass; under `stages` one waits.
    assert_eq!(recirculations[0], 2, "parity: nobody waits");
    assert!(recirculations[1] > 2, "stages: the second waits for the first's lock: {recirculations:?}");
    assert!(!FineLocks::Parity.is_serializable() && FineLocks::Parity.warning().is_some());
    assert!(FineLocks::Stages.warning().is_none());
}

#[test]
fn two_port_fifo_recirculates_on_one_slow_and_one_fast_port_in_one_class() {
    let profile = SwitchProfile::tofino1();
    assert!(profile.recirc_ports_per_pipe > 2, "the default model uses more ports than the prototype");
    let fifo = P4dbConfig { recirculation: RecirculationModel::TwoPortFifo, ..P4dbConfig::for_profile(&profile) };
    assert_eq!(fifo.switch_profile(&profile).recirc_ports_per_pipe, 2);
    let slow = P4dbConfig { fast_recirculation: false, ..fifo.clone() };
    assert_eq!(slow.switch_profile(&profile).recirc_ports_per_pipe, 1, "without the fast port: one shared port");
    let priority = P4dbConfig::for_profile(&profile);
    assert_eq!(priority.switch_profile(&profile), profile);
    // The queue class is the recirculation count under `priority`, always 0 under FIFO.
    let keys: Vec<TupleKey> = (0..50).map(k).collect();
    let layout = modulo(&keys, &fifo.layout_target(&profile), 20);
    let txn = Txn::new(vec![Op::read(k(0)), Op::read(k(20))]);
    for (config, expected) in [(fifo, 0), (priority, 5)] {
        let engine = P4dbEngine::new(config);
        let (mut pkt, _) = engine.packet_for(&txn, &layout, 1).unwrap();
        pkt.recircs = 5;
        let mut payload = Vec::new();
        pkt.encode(&mut payload);
        let frame = Frame { kind: pisadb_p4db::wire::TXN_KIND, src: 0, dst: SWITCH_ID };
        let packet = engine.admit(&frame, &payload).unwrap();
        assert_eq!(engine.priority(&packet), expected);
    }
}

#[test]
fn a_rack_with_the_prototypes_switch_runs_on_two_recirculation_ports() {
    let mut cfg = small_ycsb(LayoutChoice::Random);
    cfg.p4db = Some(P4dbConfig {
        fine_locks: FineLocks::Parity,
        recirculation: RecirculationModel::TwoPortFifo,
        ..P4dbConfig::for_profile(&cfg.profile)
    });
    cfg.record_history = false;
    let out = run(&cfg).unwrap();
    match out.cluster.switch(0) {
        RackSwitch::P4db(s) => assert_eq!(s.profile().recirc_ports_per_pipe, 2),
        RackSwitch::LockManager(_) => unreachable!(),
    }
    assert!(out.result.recirculations > 0 && out.result.switch_committed > 0);
}

#[test]
fn a_single_pass_packet_can_wait_for_either_half_as_the_prototypes_does() {
    let profile = SwitchProfile::tofino1();
    let stages = P4dbConfig::for_profile(&profile);
    let keys: Vec<TupleKey> = (0..50).map(k).collect();
    let layout = modulo(&keys, &stages.layout_target(&profile), 20);
    // Row 3 sits in array 3, a stage of the first half: P4DB's check needs the left half only.
    let txn = Txn::new(vec![Op::read(k(3))]);
    let (pkt, _) = P4dbEngine::new(stages.clone()).packet_for(&txn, &layout, 1).unwrap();
    assert_eq!(pkt.locks, LockPair { left: true, right: false });
    let either = P4dbConfig { single_pass_waits_for_either_half: true, ..stages };
    let (pkt, _) = P4dbEngine::new(either).packet_for(&txn, &layout, 1).unwrap();
    assert_eq!(pkt.locks, LockPair::BOTH, "the prototype's is_locked: any half held means wait");
}
