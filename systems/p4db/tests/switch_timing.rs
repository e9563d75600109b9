//! Timing, queues, forwarding and multicast of the pipeline model.

mod common;

use pisadb_core::{Op, OpKind, TupleKey, Txn};
use pisadb_p4db::programs::p4db::{FineLocks, P4dbConfig, P4dbEngine, RecirculationModel};
use pisadb_p4db_layout::random;
use pisadb_switch::{Switch, SwitchProfile};
use pisadb_wire::{Frame, Kind, SWITCH_ID};

fn switch_with(profile: SwitchProfile) -> (Switch<P4dbEngine>, pisadb_p4db_layout::Layout, P4dbEngine) {
    let cfg = P4dbConfig {
        first_data_stage: 1,
        data_stages: 4,
        arrays_per_stage: 2,
        entries_per_array: 16,
        fine_locks: FineLocks::WholePipeline,
        fast_recirculation: true,
        recirculation: RecirculationModel::Priority,
        first_pass_only: false,
        single_pass_waits_for_either_half: false,
    };
    let engine = P4dbEngine::new(cfg.clone());
    let keys: Vec<TupleKey> = (0..8).map(|r| TupleKey::new(0, r)).collect();
    let layout = random(&keys, &cfg.layout_target(&profile), 1);
    let mut switch = Switch::new(profile, engine.clone()).unwrap();
    (0..4).for_each(|n| switch.attach(n));
    (switch, layout, engine)
}

fn datagram(engine: &P4dbEngine, layout: &pisadb_p4db_layout::Layout, txn: &Txn, id: u64, from: u16) -> Vec<u8> {
    let (pkt, _) = engine.packet_for(txn, layout, id).unwrap();
    let mut bytes = Vec::new();
    Frame { kind: pisadb_p4db::wire::TXN_KIND, src: from, dst: SWITCH_ID }.encode(&mut bytes);
    pkt.encode(&mut bytes);
    bytes
}

#[test]
fn a_single_pass_reply_leaves_after_one_pass_and_egress() {
    let profile = SwitchProfile::tofino1();
    let (mut switch, layout, engine) = switch_with(profile.clone());
    let txn = Txn::new(vec![Op::read(TupleKey::new(0, 0))]);
    let out = common::drive(&mut switch, vec![(1_000, 2, datagram(&engine, &layout, &txn, 1, 2))]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].dst, 2, "the reply goes back to the sender");
    assert_eq!(out[0].at_ns, 1_000 + profile.pass_ns() + profile.egress_ns);
}

#[test]
fn one_packet_enters_per_clock() {
    let profile = SwitchProfile::tofino1();
    let (mut switch, layout, engine) = switch_with(profile.clone());
    let txn = Txn::new(vec![Op::read(TupleKey::new(0, 0))]);
    let arrivals = (0..1000).map(|i| (5_000, 0, datagram(&engine, &layout, &txn, i, 0))).collect();
    let out = common::drive(&mut switch, arrivals);
    let last = out.iter().map(|t| t.at_ns).max().unwrap();
    let first = out.iter().map(|t| t.at_ns).min().unwrap();
    // 1000 packets at 1.22 GHz need 999 more cycles: about 819 ns.
    assert!((810..=830).contains(&(last - first)), "spread {}", last - first);
}

#[test]
fn a_full_recirculation_queue_drops_and_counts() {
    let profile = SwitchProfile { recirc_queue_packets: 1, recirc_ports_per_pipe: 2, ..SwitchProfile::tofino1() };
    let (mut switch, layout, engine) = switch_with(profile);
    let (a, b) = (TupleKey::new(0, 0), TupleKey::new(0, 1));
    // A long multi-pass transaction holds the (whole-pipeline) lock while many others wait.
    let long = Txn::new((0..6).flat_map(|_| [Op::new(a, OpKind::Add, 1)]).collect());
    let short = Txn::new(vec![Op::read(b)]);
    let mut arrivals = vec![(0, 0, datagram(&engine, &layout, &long, 0, 0))];
    arrivals.extend((1..50).map(|i| (300, 1, datagram(&engine, &layout, &short, i, 1))));
    let out = common::drive(&mut switch, arrivals);
    let dropped = switch.stats().dropped.get("recirc_queue_full").copied().unwrap_or(0);
    assert!(dropped > 0, "{:?}", switch.stats());
    assert_eq!(out.len() as u64 + dropped, 50, "every packet is answered or counted");
}

#[test]
fn plain_datagrams_are_forwarded_and_multicast_reaches_the_group() {
    let (mut switch, _, _) = switch_with(SwitchProfile::tofino1());
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: 0, dst: 3 }.encode(&mut bytes);
    bytes.extend_from_slice(b"2pc prepare");
    let mut to_nowhere = Vec::new();
    Frame { kind: Kind::FORWARD, src: 0, dst: 9 }.encode(&mut to_nowhere);
    let out = common::drive(&mut switch, vec![(0, 0, bytes.clone()), (1, 0, to_nowhere)]);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].dst, &out[0].bytes), (3, &bytes));
    assert_eq!(switch.stats().rejected.get("unknown_destination"), Some(&1));
}
