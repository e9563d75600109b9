//! The outputs a pass can end in beyond reply, unicast, multicast and recirculation: forward
//! keeping the source, a copy while recirculating, the control plane; and table lookups.

mod common;

use common::toy::{open, Action, Toy, ToyPacket, EARLY_PASSES, MISS, TABLE, TOY_BYTES};
use pisadb_switch::registers::AccessError;
use pisadb_switch::{Port, Switch, SwitchProfile};
use pisadb_wire::{FRAME_BYTES, SWITCH_ID};

/// Host 0 is a client, host 5 a store behind the switch.
fn toy_switch() -> Switch<Toy> {
    let mut switch = Switch::new(SwitchProfile::tofino1(), Toy::default()).unwrap();
    switch.attach(0);
    switch.attach(5);
    switch
}

#[test]
fn forward_sends_the_packet_on_to_its_destination_keeping_the_source() {
    let profile = SwitchProfile::tofino1();
    let mut switch = toy_switch();
    let request = ToyPacket::new(Action::Forward, 0).datagram(0, 5);
    let out = common::drive(&mut switch, vec![(1_000, 0, request)]);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].dst, out[0].port), (5, Port::Host(5)), "to the store, by its port");
    assert_eq!(out[0].at_ns, 1_000 + profile.pass_ns() + profile.egress_ns);
    let (frame, packet) = open(&out[0].bytes);
    assert_eq!((frame.src, frame.dst), (0, 5), "the client stays the source: the store answers it directly");
    assert_eq!(packet.passes, 1);
    assert_eq!(switch.stats().emitted, 1);
}

#[test]
fn forward_to_a_host_that_is_neither_attached_nor_routed_is_dropped() {
    let mut switch = toy_switch();
    let out = common::drive(&mut switch, vec![(0, 0, ToyPacket::new(Action::Forward, 0).datagram(0, 7))]);
    assert!(out.is_empty());
    assert_eq!(switch.stats().dropped.get("unknown_destination"), Some(&1));
}

#[test]
fn emit_and_recirculate_sends_a_copy_after_each_pass_while_the_packet_keeps_going() {
    let profile = SwitchProfile::tofino1();
    let mut switch = toy_switch();
    let start = 10_000;
    let out =
        common::drive(&mut switch, vec![(start, 0, ToyPacket::new(Action::EarlyAnswer, 0).datagram(0, SWITCH_ID))]);
    let passes = u64::from(EARLY_PASSES);
    assert_eq!(out.len() as u64, passes, "a copy after each of the first passes, the reply after the last");
    assert_eq!(switch.stats().passes, passes);
    assert_eq!(switch.stats().recirculations, passes - 1);
    assert_eq!(switch.stats().emitted, passes);
    // Each pass: enter, pass, egress; the copy leaves then, and the packet is serialized on a
    // recirculation port and enters again.
    let leave = profile.pass_ns() + profile.egress_ns;
    let loop_ns = leave + profile.recirc_serialization_ns(FRAME_BYTES + TOY_BYTES);
    for (k, t) in out.iter().enumerate() {
        let (frame, packet) = open(&t.bytes);
        assert_eq!(usize::from(packet.passes), k + 1, "copy {k} shows the packet after pass {}", k + 1);
        assert_eq!((t.dst, t.port, frame.src, frame.dst), (0, Port::Host(0), SWITCH_ID, 0), "copy {k} is a reply");
        assert_eq!(t.at_ns, start + k as u64 * loop_ns + leave, "copy {k} leaves after its pass");
    }
}

#[test]
fn to_control_plane_goes_out_of_the_cpu_port_to_the_controller_with_the_frame_untouched() {
    let mut switch = toy_switch();
    let packet = ToyPacket::new(Action::ToCpu, 3);
    let out = common::drive(&mut switch, vec![(0, 0, packet.datagram(0, SWITCH_ID))]);
    assert!(out.is_empty(), "no controller, nowhere to go");
    assert_eq!(switch.stats().dropped.get("no_controller"), Some(&1));

    switch.set_controller(9);
    let out = common::drive(&mut switch, vec![(1_000, 0, packet.datagram(0, SWITCH_ID))]);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].dst, out[0].port), (9, Port::ControlPlane));
    let (frame, seen) = open(&out[0].bytes);
    assert_eq!((frame.src, frame.dst), (0, SWITCH_ID), "the controller sees who sent it to whom");
    assert_eq!(seen.key, 3);
}

#[test]
fn a_table_lookup_returns_the_installed_value_on_a_hit_and_nothing_on_a_miss() {
    let mut switch = toy_switch();
    assert_eq!(switch.insert_entry(TABLE, 42, 7), Ok(None));
    let arrivals = vec![
        (0, 0, ToyPacket::new(Action::Lookup, 42).datagram(0, SWITCH_ID)),
        (100, 0, ToyPacket::new(Action::Lookup, 43).datagram(0, SWITCH_ID)),
    ];
    let out = common::drive(&mut switch, arrivals);
    let results: Vec<u64> = out.iter().map(|t| open(&t.bytes).1.result).collect();
    assert_eq!(results, vec![7, MISS]);
}

#[test]
fn a_table_looked_up_twice_in_a_pass_or_behind_the_pass_is_refused() {
    for (action, error) in [
        (Action::LookupTwice, AccessError::TableTwice(TABLE)),
        (Action::LookupAfterLaterStage, AccessError::TableStageOrder { table: TABLE, stage: 1, reached: 3 }),
    ] {
        let mut switch = toy_switch();
        switch.insert_entry(TABLE, 1, 1).unwrap();
        let out = common::drive(&mut switch, vec![(0, 0, ToyPacket::new(action, 1).datagram(0, SWITCH_ID))]);
        assert!(out.is_empty(), "{action:?}: nothing leaves");
        assert_eq!(switch.stats().dropped.get("toy_refused"), Some(&1), "{action:?}");
        assert_eq!(switch.program().last_error, Some(error), "{action:?}");
    }
}

#[test]
fn existing_outputs_name_the_host_port_they_leave_by() {
    let mut switch = toy_switch();
    let out = common::drive(&mut switch, vec![(0, 5, ToyPacket::new(Action::Lookup, 1).datagram(5, SWITCH_ID))]);
    assert_eq!((out[0].dst, out[0].port), (5, Port::Host(5)));
}
