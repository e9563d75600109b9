//! The switch refuses what the hardware cannot do, with P4DB's engine: its program at load time,
//! its packets on arrival (the model's own load rules are tested in `crates/switch/tests`).

mod common;

use pisadb_core::AccOut;
use pisadb_p4db::programs::p4db::{action_for, FineLocks, P4dbConfig, P4dbEngine, RecirculationModel};
use pisadb_p4db::wire::p4db::{Instruction, LockPair, TxnPacket};
use pisadb_switch::{LoadError, Switch, SwitchProfile};
use pisadb_wire::{Frame, SWITCH_ID};
use proptest::prelude::*;

#[test]
fn p4db_engine_fits_both_profiles_and_oversized_configs_are_refused() {
    for profile in [SwitchProfile::tofino1(), SwitchProfile::tofino2()] {
        let cfg = P4dbConfig::for_profile(&profile);
        assert!(Switch::new(profile.clone(), P4dbEngine::new(cfg.clone())).is_ok(), "{}", profile.name);
        let too_many = P4dbConfig { arrays_per_stage: 5, data_stages: 4, ..cfg.clone() };
        assert!(matches!(
            Switch::new(profile.clone(), P4dbEngine::new(too_many)).err(),
            Some(LoadError::TooManyArrays { .. })
        ));
        let too_big = P4dbConfig { entries_per_array: 400_000, ..cfg };
        assert!(matches!(Switch::new(profile, P4dbEngine::new(too_big)).err(), Some(LoadError::SramExceeded { .. })));
    }
}

fn small_switch() -> Switch<P4dbEngine> {
    let cfg = P4dbConfig {
        first_data_stage: 1,
        data_stages: 4,
        arrays_per_stage: 2,
        entries_per_array: 16,
        fine_locks: FineLocks::Stages,
        fast_recirculation: true,
        recirculation: RecirculationModel::Priority,
        first_pass_only: false,
        single_pass_waits_for_either_half: false,
    };
    let mut switch = Switch::new(SwitchProfile::tofino1(), P4dbEngine::new(cfg)).unwrap();
    switch.attach(0);
    switch
}

/// Register ids of the small switch: 1, 2 in stage 1; 3, 4 in stage 2; 5, 6 in stage 3; 7, 8 in stage 4.
fn instr(register: u8, end_of_pass: bool) -> Instruction {
    Instruction {
        register,
        action: action_for(pisadb_core::OpKind::Add),
        acc_in: false,
        acc_out: AccOut::None,
        index: 0,
        data: 1,
        end_of_pass,
    }
}

fn send(switch: &mut Switch<P4dbEngine>, pkt: &TxnPacket) -> usize {
    let mut bytes = Vec::new();
    Frame { kind: pisadb_p4db::wire::TXN_KIND, src: 0, dst: SWITCH_ID }.encode(&mut bytes);
    pkt.encode(&mut bytes);
    common::drive(switch, vec![(0, 0, bytes)]).len()
}

fn rejected_as(pkt: TxnPacket, reason: &str) {
    let mut switch = small_switch();
    assert_eq!(send(&mut switch, &pkt), 0, "a rejected packet gets no reply");
    assert_eq!(switch.stats().rejected.get(reason), Some(&1), "{:?}", switch.stats().rejected);
    assert_eq!(switch.stats().passes, 0, "nothing executed");
    for register in 1..=8 {
        assert_eq!(switch.registers().read(register, 0), Ok((0, 0)), "registers untouched");
    }
}

#[test]
fn an_instruction_list_touching_an_array_twice_in_a_pass_is_rejected() {
    let pkt = TxnPacket { locks: LockPair::BOTH, instrs: vec![instr(1, false), instr(1, true)], ..Default::default() };
    rejected_as(pkt, "array_twice_in_pass");
}

#[test]
fn an_instruction_list_out_of_stage_order_is_rejected() {
    let pkt = TxnPacket { locks: LockPair::BOTH, instrs: vec![instr(3, false), instr(1, true)], ..Default::default() };
    rejected_as(pkt, "stage_order");
}

#[test]
fn the_accumulator_cannot_be_produced_and_used_in_one_stage() {
    let mut producer = instr(1, false);
    producer.acc_out = AccOut::Set;
    let mut consumer = instr(2, true);
    consumer.acc_in = true;
    let pkt = TxnPacket { locks: LockPair::BOTH, instrs: vec![producer, consumer], ..Default::default() };
    rejected_as(pkt, "accumulator_same_stage");
}

#[test]
fn flags_and_locks_must_match_the_plan() {
    let two_passes = vec![instr(1, true), instr(1, true)];
    rejected_as(
        TxnPacket { locks: LockPair::BOTH, instrs: two_passes.clone(), ..Default::default() },
        "multipass_flag",
    );
    let right_half = vec![instr(7, true)];
    rejected_as(
        TxnPacket { locks: LockPair { left: true, right: false }, instrs: right_half, ..Default::default() },
        "locks_do_not_cover",
    );
    rejected_as(
        TxnPacket { locks: LockPair::BOTH, instrs: vec![instr(9, true)], ..Default::default() },
        "unknown_register",
    );
    let mut far = instr(1, true);
    far.index = 16;
    rejected_as(TxnPacket { locks: LockPair::BOTH, instrs: vec![far], ..Default::default() }, "index_out_of_range");
}

#[test]
fn a_valid_plan_executes_and_replies() {
    let mut switch = small_switch();
    let pkt = TxnPacket {
        locks: LockPair::BOTH,
        is_multipass: true,
        instrs: vec![instr(1, false), instr(3, true), instr(1, true)],
        ..Default::default()
    };
    assert_eq!(send(&mut switch, &pkt), 1);
    assert_eq!(switch.registers().read(1, 0), Ok((2, 0)));
    assert_eq!(switch.stats().passes, 2);
    assert_eq!(switch.stats().recirculations, 1);
}

#[test]
fn datagrams_from_unknown_or_spoofed_nodes_are_not_executed() {
    let mut switch = small_switch();
    let pkt = TxnPacket { locks: LockPair::BOTH, instrs: vec![instr(1, true)], ..Default::default() };
    let mut bytes = Vec::new();
    Frame { kind: pisadb_p4db::wire::TXN_KIND, src: 5, dst: SWITCH_ID }.encode(&mut bytes);
    pkt.encode(&mut bytes);
    assert!(common::drive(&mut switch, vec![(0, 5, bytes.clone()), (1, 0, bytes)]).is_empty());
    assert_eq!(switch.stats().rejected.get("unregistered_port"), Some(&1));
    assert_eq!(switch.stats().rejected.get("spoofed_source"), Some(&1));
    assert_eq!(switch.stats().passes, 0);
}

proptest! {
    #[test]
    fn malformed_datagrams_are_counted_never_executed(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut switch = small_switch();
        let before = switch.stats().passes;
        let sent = common::drive(&mut switch, vec![(0, 0, bytes)]);
        let stats = switch.stats();
        let accounted = stats.rejected.values().sum::<u64>() + stats.forwarded + stats.emitted + stats.dropped.values().sum::<u64>();
        prop_assert_eq!(accounted, 1, "the datagram is counted exactly once: {:?}", stats);
        prop_assert!(sent.len() <= 1);
        prop_assert!(stats.passes >= before);
    }
}
