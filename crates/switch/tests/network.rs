//! Switches in a network: ports toward neighbour switches, a forwarding table filled by the
//! driver, and sources kept across hops.

mod common;

use common::toy::{open, Action, Toy, ToyPacket};
use pisadb_core::Nanos;
use pisadb_switch::{Port, PortError, Switch, SwitchProfile, Transmit};
use pisadb_wire::{Frame, Kind};

/// Switch ids the driver chose: A is 0, B is 1.
const A: u16 = 0;
const B: u16 = 1;

/// `host 0 - A - B - host 2`: A routes host 2 by B's port, B routes host 0 by A's.
fn line() -> [Switch<Toy>; 2] {
    let mut a = Switch::new(SwitchProfile::tofino1(), Toy::default()).unwrap();
    let mut b = Switch::new(SwitchProfile::tofino1(), Toy::default()).unwrap();
    a.attach(0);
    a.connect_switch(B);
    a.set_route(2, Port::Switch(B)).unwrap();
    b.attach(2);
    b.connect_switch(A);
    b.set_route(0, Port::Switch(A)).unwrap();
    [a, b]
}

/// A tiny driver for the line: zero-length links; what leaves a switch by a switch port
/// enters the neighbour by its port toward the sender. Returns what reached hosts, in order.
fn run_line(switches: &mut [Switch<Toy>; 2], at: Nanos, from_host: u16, bytes: Vec<u8>) -> Vec<(usize, Transmit)> {
    let first = if from_host == 0 { 0 } else { 1 };
    switches[first].handle_datagram(at, from_host, &bytes);
    let mut delivered = Vec::new();
    for _ in 0..1_000 {
        let mut moved = false;
        for s in 0..2 {
            if let Some(t) = switches[s].poll_timeout() {
                switches[s].handle_timeout(t);
            }
            while let Some(tx) = switches[s].poll_transmit() {
                moved = true;
                match tx.port {
                    Port::Switch(n) => {
                        switches[usize::from(n)].handle_datagram_from(tx.at_ns, Port::Switch(s as u16), &tx.bytes)
                    }
                    _ => delivered.push((s, tx)),
                }
            }
        }
        if !moved && switches.iter().all(|s| s.poll_timeout().is_none()) {
            return delivered;
        }
    }
    panic!("the line did not go idle");
}

#[test]
fn two_switches_in_a_line_carry_plain_traffic_from_host_0_to_host_2_keeping_its_source() {
    let profile = SwitchProfile::tofino1();
    let mut switches = line();
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: 0, dst: 2 }.encode(&mut bytes);
    bytes.extend_from_slice(b"2pc prepare");
    let delivered = run_line(&mut switches, 1_000, 0, bytes.clone());
    assert_eq!(delivered.len(), 1);
    let (at_switch, t) = &delivered[0];
    assert_eq!((*at_switch, t.dst, t.port), (1, 2, Port::Host(2)), "B hands it to host 2");
    assert_eq!(t.bytes, bytes, "unchanged: host 0 is still the source");
    let hop = profile.pass_ns() + profile.egress_ns;
    assert_eq!(t.at_ns, 1_000 + 2 * hop, "two hops, no link delay in this driver");
    assert_eq!(switches.iter().map(|s| s.stats().forwarded).collect::<Vec<_>>(), vec![1, 1]);
}

#[test]
fn a_program_forward_crosses_the_line_and_the_answer_comes_back_the_other_way() {
    let mut switches = line();
    let delivered = run_line(&mut switches, 0, 0, ToyPacket::new(Action::Forward, 5).datagram(0, 2));
    assert_eq!(delivered.len(), 1);
    let (frame, packet) = open(&delivered[0].1.bytes);
    assert_eq!((frame.src, frame.dst), (0, 2), "the source survives both switches' programs");
    assert_eq!(packet.passes, 2, "each switch ran one pass");

    let back = run_line(&mut switches, 10_000, 2, ToyPacket::new(Action::Forward, 5).datagram(2, 0));
    assert_eq!((back[0].0, back[0].1.dst, back[0].1.port), (0, 0, Port::Host(0)));
}

#[test]
fn neighbour_ports_are_trusted_but_must_exist_and_routes_must_name_a_port() {
    let [mut a, _] = line();
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: 7, dst: 0 }.encode(&mut bytes);
    a.handle_datagram_from(0, Port::Switch(B), &bytes);
    let t = a.poll_transmit().expect("a neighbour may carry any source");
    assert_eq!((t.dst, t.port), (0, Port::Host(0)));
    a.handle_datagram_from(0, Port::Switch(5), &bytes);
    a.handle_datagram(0, 2, &bytes);
    assert_eq!(a.stats().rejected.get("unregistered_port"), Some(&2), "no port toward switch 5 or host 2");
    assert_eq!(a.set_route(3, Port::Switch(5)), Err(PortError::NoSuchPort { dst_host: 3, port: Port::Switch(5) }));
    assert_eq!(a.egress_port(2), Some(Port::Switch(B)));
    assert_eq!(a.clear_route(2), Some(Port::Switch(B)));
    let mut to_2 = Vec::new();
    Frame { kind: Kind::FORWARD, src: 0, dst: 2 }.encode(&mut to_2);
    a.handle_datagram(0, 0, &to_2);
    assert_eq!(a.stats().rejected.get("unknown_destination"), Some(&1), "no route, as before routes existed");
}

#[test]
fn without_neighbours_or_routes_a_switch_forwards_as_a_single_rack_switch() {
    let profile = SwitchProfile::tofino1();
    let mut switch = Switch::new(profile.clone(), Toy::default()).unwrap();
    (0..2).for_each(|n| switch.attach(n));
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: 0, dst: 1 }.encode(&mut bytes);
    let out = common::drive(&mut switch, vec![(500, 0, bytes.clone())]);
    assert_eq!(
        out,
        vec![Transmit { at_ns: 500 + profile.pass_ns() + profile.egress_ns, dst: 1, bytes, port: Port::Host(1) }]
    );
}
