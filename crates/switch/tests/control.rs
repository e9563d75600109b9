//! The control channel: the controller reads and writes registers and table entries over the
//! wire, after the control plane's latency, one operation at a time; no other host may.

mod common;

use common::toy::{open, Action, Toy, ToyPacket, COUNTER, MISS, TABLE};
use pisadb_switch::{Port, Switch, SwitchProfile};
use pisadb_wire::control::{ControlMessage, ControlOp, ControlResult, ControlStatus};
use pisadb_wire::{Frame, Kind, SWITCH_ID};
use proptest::prelude::*;

const CONTROLLER: u16 = 9;

fn toy_switch() -> Switch<Toy> {
    let mut switch = Switch::new(SwitchProfile::tofino1(), Toy::default()).unwrap();
    switch.attach(0);
    switch.attach(CONTROLLER);
    switch.set_controller(CONTROLLER);
    switch
}

fn request(from: u16, request_id: u32, op: ControlOp) -> Vec<u8> {
    let mut bytes = Vec::new();
    Frame { kind: Kind::CONTROL, src: from, dst: SWITCH_ID }.encode(&mut bytes);
    ControlMessage::Request { request_id, op }.encode(&mut bytes);
    bytes
}

/// The reply in `bytes`: `(request_id, status, result)`, checking its frame.
fn reply(bytes: &[u8]) -> (u32, ControlStatus, ControlResult) {
    let (frame, payload) = Frame::decode(bytes).unwrap();
    assert_eq!((frame.kind, frame.src, frame.dst), (Kind::CONTROL, SWITCH_ID, CONTROLLER));
    match ControlMessage::decode(payload).unwrap() {
        ControlMessage::Reply { request_id, status, result, .. } => (request_id, status, result),
        other => panic!("not a reply: {other:?}"),
    }
}

#[test]
fn the_controller_writes_a_register_and_a_table_entry_over_the_wire_and_reads_them_back() {
    let cp = SwitchProfile::tofino1().control_plane_ns;
    let mut switch = toy_switch();
    let write = ControlOp::WriteRegister { register: COUNTER, index: 3, lo: 77, hi: 0 };
    let insert = ControlOp::InsertEntry { table: TABLE, key: 42, value: 5 };
    let read = ControlOp::ReadRegister { register: COUNTER, index: 3 };
    let arrivals = vec![
        (1_000, CONTROLLER, request(CONTROLLER, 1, write)),
        (1_000, CONTROLLER, request(CONTROLLER, 2, insert)),
        (2_000, CONTROLLER, request(CONTROLLER, 3, read)),
    ];
    let out = common::drive(&mut switch, arrivals);
    assert_eq!(out.len(), 3);
    let times: Vec<u64> = out.iter().map(|t| t.at_ns).collect();
    assert_eq!(times, vec![1_000 + cp, 1_000 + 2 * cp, 1_000 + 3 * cp], "one operation at a time");
    assert!(out.iter().all(|t| (t.dst, t.port) == (CONTROLLER, Port::Host(CONTROLLER))), "back by the request's port");
    assert_eq!(reply(&out[0].bytes), (1, ControlStatus::Ok, ControlResult::Cell { lo: 77, hi: 0 }));
    assert_eq!(reply(&out[1].bytes), (2, ControlStatus::Ok, ControlResult::Entry { previous: None }));
    assert_eq!(reply(&out[2].bytes), (3, ControlStatus::Ok, ControlResult::Cell { lo: 77, hi: 0 }));
    assert_eq!(switch.registers().read(COUNTER, 3), Ok((77, 0)));
    assert_eq!(switch.tables().get(TABLE, 42), Ok(Some(5)));
    assert_eq!(switch.stats().control_ops, 3);

    // The data plane sees the entry; deleting it makes the next lookup miss.
    let later = 1_000 + 4 * cp;
    let lookup = || ToyPacket::new(Action::Lookup, 42).datagram(0, SWITCH_ID);
    let arrivals = vec![
        (later, 0, lookup()),
        (later, CONTROLLER, request(CONTROLLER, 4, ControlOp::DeleteEntry { table: TABLE, key: 42 })),
        (later + 2 * cp, 0, lookup()),
    ];
    let out = common::drive(&mut switch, arrivals);
    let lookups: Vec<u64> = out.iter().filter(|t| t.dst == 0).map(|t| open(&t.bytes).1.result).collect();
    assert_eq!(lookups, vec![5, MISS], "a hit before the delete takes effect, a miss after");
    let deleted = out.iter().find(|t| t.dst == CONTROLLER).unwrap();
    assert_eq!(reply(&deleted.bytes), (4, ControlStatus::Ok, ControlResult::Entry { previous: Some(5) }));
}

#[test]
fn failed_operations_are_answered_with_a_status() {
    let mut switch = toy_switch();
    let t = 50_000;
    let cases = [
        (ControlOp::ReadRegister { register: 7, index: 0 }, ControlStatus::UnknownRegister),
        (ControlOp::WriteRegister { register: COUNTER, index: 16, lo: 1, hi: 0 }, ControlStatus::IndexOutOfRange),
        (ControlOp::InsertEntry { table: 4, key: 1, value: 1 }, ControlStatus::UnknownTable),
        (ControlOp::InsertEntry { table: TABLE, key: 1 << 32, value: 1 }, ControlStatus::KeyTooWide),
        (ControlOp::InsertEntry { table: TABLE, key: 1, value: 1 << 32 }, ControlStatus::ValueTooWide),
        (ControlOp::DeleteEntry { table: TABLE, key: 1 }, ControlStatus::NoSuchEntry),
    ];
    let arrivals = cases.iter().zip(10..).map(|(&(op, _), id)| (t, CONTROLLER, request(CONTROLLER, id, op))).collect();
    let out = common::drive(&mut switch, arrivals);
    let statuses: Vec<(u32, ControlStatus)> = out.iter().map(|t| reply(&t.bytes)).map(|(id, s, _)| (id, s)).collect();
    let expected: Vec<(u32, ControlStatus)> = cases.iter().zip(10..).map(|(&(_, s), id)| (id, s)).collect();
    assert_eq!(statuses, expected);
}

#[test]
fn a_host_other_than_the_controller_is_refused_and_counted() {
    let mut switch = toy_switch();
    let write = ControlOp::WriteRegister { register: COUNTER, index: 0, lo: 5, hi: 0 };
    let insert = ControlOp::InsertEntry { table: TABLE, key: 1, value: 1 };
    let out = common::drive(&mut switch, vec![(0, 0, request(0, 1, write)), (0, 0, request(0, 2, insert))]);
    assert!(out.is_empty(), "no answer to a host that is not the controller");
    assert_eq!(switch.stats().rejected.get("not_controller"), Some(&2));
    assert_eq!(switch.stats().control_ops, 0);
    assert_eq!(switch.registers().read(COUNTER, 0), Ok((0, 0)), "the register is unchanged");
    assert_eq!(switch.tables().get(TABLE, 1), Ok(None), "the table is unchanged");

    let mut no_controller = Switch::new(SwitchProfile::tofino1(), Toy::default()).unwrap();
    no_controller.attach(CONTROLLER);
    assert!(common::drive(&mut no_controller, vec![(0, CONTROLLER, request(CONTROLLER, 1, write))]).is_empty());
    assert_eq!(no_controller.stats().rejected.get("not_controller"), Some(&1), "no controller set: nobody may");
}

#[test]
fn requests_by_the_cpu_port_are_carried_out_and_answered_by_it() {
    let mut switch = Switch::new(SwitchProfile::tofino1(), Toy::default()).unwrap();
    switch.set_controller(CONTROLLER);
    let write = ControlOp::WriteRegister { register: COUNTER, index: 1, lo: (1 << 32) + 6, hi: 0 };
    switch.handle_datagram_from(0, Port::ControlPlane, &request(CONTROLLER, 8, write));
    let at = switch.poll_timeout().expect("the operation is under way");
    switch.handle_timeout(at);
    let t = switch.poll_transmit().expect("a reply");
    assert_eq!((t.dst, t.port), (CONTROLLER, Port::ControlPlane));
    let stored = ControlResult::Cell { lo: 6, hi: 0 };
    assert_eq!(reply(&t.bytes), (8, ControlStatus::Ok, stored), "as stored: wrapped to the array's 32 bits");
}

#[test]
fn malformed_or_misdirected_control_messages_are_counted() {
    let mut switch = toy_switch();
    let mut short = Vec::new();
    Frame { kind: Kind::CONTROL, src: CONTROLLER, dst: SWITCH_ID }.encode(&mut short);
    short.extend_from_slice(&[1, 0, 1]);
    let mut a_reply = Vec::new();
    Frame { kind: Kind::CONTROL, src: CONTROLLER, dst: SWITCH_ID }.encode(&mut a_reply);
    let op = ControlOp::ReadRegister { register: COUNTER, index: 0 };
    let result = ControlResult::Cell { lo: 0, hi: 0 };
    ControlMessage::Reply { request_id: 1, op, status: ControlStatus::Ok, result }.encode(&mut a_reply);
    let out = common::drive(&mut switch, vec![(0, CONTROLLER, short), (0, CONTROLLER, a_reply)]);
    assert!(out.is_empty());
    assert_eq!(switch.stats().rejected.get("too_short"), Some(&1));
    assert_eq!(switch.stats().rejected.get("control_reply_to_switch"), Some(&1));
}

#[test]
fn setup_code_runs_the_same_operations_directly() {
    let mut switch = toy_switch();
    let write = ControlOp::WriteRegister { register: COUNTER, index: 2, lo: 4, hi: 0 };
    assert_eq!(switch.apply_control(&write), (ControlStatus::Ok, ControlResult::Cell { lo: 4, hi: 0 }));
    assert_eq!(switch.insert_entry(TABLE, 3, 30), Ok(None));
    assert_eq!(switch.delete_entry(TABLE, 3), Ok(30));
    assert_eq!(switch.registers().read(COUNTER, 2), Ok((4, 0)));
    assert!(switch.poll_timeout().is_none() && switch.poll_transmit().is_none(), "nothing on the wire");
}

proptest! {
    #[test]
    fn any_payload_from_the_controller_is_answered_or_counted_once(
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        op in 0u8..=0x84,
    ) {
        let mut switch = toy_switch();
        let mut bytes = Vec::new();
        Frame { kind: Kind::CONTROL, src: CONTROLLER, dst: SWITCH_ID }.encode(&mut bytes);
        // Half the time, a plausible start: a known opcode and zeros, so decoding goes deep.
        let mut payload = payload;
        if op <= 4 && payload.len() >= 4 {
            payload[..4].copy_from_slice(&[op, 0, 1, 0]);
        }
        bytes.extend_from_slice(&payload);
        let out = common::drive(&mut switch, vec![(0, CONTROLLER, bytes)]);
        let stats = switch.stats();
        let rejected: u64 = stats.rejected.values().sum();
        prop_assert_eq!(rejected + stats.control_ops, 1, "{:?}", stats);
        prop_assert_eq!(out.len() as u64, stats.control_ops);
    }
}

#[test]
fn a_switch_with_an_id_serves_requests_to_its_address_and_forwards_those_to_other_switches() {
    use pisadb_wire::control::switch_address;
    // Switch 2 of a network: host 0 attached, neighbours 1 and 3, the controller (host 9)
    // behind neighbour 1, switch 5 behind neighbour 3.
    let mut switch = Switch::new(SwitchProfile::tofino1(), Toy::default()).unwrap();
    switch.attach(0);
    switch.connect_switch(1);
    switch.connect_switch(3);
    switch.set_route(CONTROLLER, Port::Switch(1)).unwrap();
    switch.set_route(switch_address(5).unwrap(), Port::Switch(3)).unwrap();
    switch.set_controller(CONTROLLER);
    switch.set_switch_id(2);
    let addressed = |target: u16, id: u32, op: ControlOp| {
        let mut bytes = Vec::new();
        Frame { kind: Kind::CONTROL, src: CONTROLLER, dst: switch_address(target).unwrap() }.encode(&mut bytes);
        ControlMessage::Request { request_id: id, op }.encode(&mut bytes);
        bytes
    };
    let write = ControlOp::WriteRegister { register: COUNTER, index: 4, lo: 9, hi: 0 };
    switch.handle_datagram_from(0, Port::Switch(1), &addressed(2, 1, write));
    switch.handle_datagram_from(0, Port::Switch(1), &addressed(5, 2, write));
    // The request for switch 5 leaves at once by its route, untouched.
    let forwarded = switch.poll_transmit().expect("forwarded");
    assert_eq!((forwarded.dst, forwarded.port), (switch_address(5).unwrap(), Port::Switch(3)));
    assert_eq!(forwarded.bytes, addressed(5, 2, write));
    // Its own is carried out and answered from its address, back by the port it came in by.
    let at = switch.poll_timeout().expect("the operation is under way");
    switch.handle_timeout(at);
    let t = switch.poll_transmit().expect("a reply");
    assert_eq!((t.dst, t.port), (CONTROLLER, Port::Switch(1)));
    let (frame, _) = Frame::decode(&t.bytes).unwrap();
    assert_eq!(frame.src, switch_address(2).unwrap(), "the reply names who answered");
    assert_eq!(switch.registers().read(COUNTER, 4), Ok((9, 0)));
    assert_eq!(switch.stats().control_ops, 1);
    // A switch without an id takes only SWITCH_ID requests: one to an address it has no
    // route for is refused as any unroutable datagram.
    let mut anonymous = toy_switch();
    let out = common::drive(&mut anonymous, vec![(0, CONTROLLER, addressed(2, 3, write))]);
    assert!(out.is_empty());
    assert_eq!(anonymous.stats().rejected.get("unknown_destination"), Some(&1));
}

#[test]
fn a_packet_in_reaches_a_controller_attached_elsewhere_by_its_route() {
    use common::toy::ToyPacket;
    let mut switch = Switch::new(SwitchProfile::tofino1(), Toy::default()).unwrap();
    switch.attach(0);
    switch.connect_switch(1);
    switch.set_route(CONTROLLER, Port::Switch(1)).unwrap();
    switch.set_controller(CONTROLLER);
    let out = common::drive(&mut switch, vec![(0, 0, ToyPacket::new(Action::ToCpu, 1).datagram(0, SWITCH_ID))]);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].dst, out[0].port), (CONTROLLER, Port::Switch(1)), "in-band, not by a CPU port it lacks");
}
