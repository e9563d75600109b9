//! A software-switch process with strict-priority egress queues, on loopback: a high-class
//! datagram sent behind a backlog of low-class ones overtakes the backlog still waiting in the
//! switch's port, and the port's report counts each class.
//!
//! The switch (the echo system's [`Forwarder`], which only forwards) runs `switch_proc` in a
//! thread of this test process with every port draining at 50 kbit/s (13.4 ms per minimum
//! frame), so a burst from host 0 to host 1 backs up in the port of host 1. The assertion is
//! about order only: whatever the machine's load, the high-class datagram leaves before every
//! low-class one but the one already on the wire when it arrived. The test is alone in its
//! binary because it stops the switch the way a process is stopped, with SIGTERM.

use pisadb_runtime::echo::Forwarder;
use pisadb_runtime::supervisor::free_ports;
use pisadb_runtime::udp::BatchSocket;
use pisadb_runtime::wire::EgressQueues;
use pisadb_runtime::{install_stop_signals, switch_proc, unix_now_ns, Network, RackConfig};
use pisadb_switch::{Switch, SwitchProfile};
use pisadb_wire::{Frame, Kind, FRAME_BYTES};
use std::net::SocketAddr;
use std::time::Duration;

/// Tags of the datagrams that only wait for the switch to be up.
const HELLO: u8 = 200;
/// The high-class datagram's tag.
const URGENT: u8 = 100;
/// Low-class datagrams in the backlog (tags `0..BACKLOG`).
const BACKLOG: u8 = 8;

/// A datagram's class: the first payload byte.
fn class_of(bytes: &[u8]) -> u8 {
    bytes.get(FRAME_BYTES).copied().unwrap_or(0)
}

/// A plain datagram from host 0 to host 1 with payload (class, tag).
fn datagram(class: u8, tag: u8) -> Vec<u8> {
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: 0, dst: 1 }.encode(&mut bytes);
    bytes.extend_from_slice(&[class, tag]);
    bytes
}

/// The tags host 1 receives within `rounds` waits of 100 ms, until `done` says so.
fn receive_tags(socket: &mut BatchSocket, tags: &mut Vec<u8>, rounds: usize, done: impl Fn(&[u8]) -> bool) {
    for _ in 0..rounds {
        if done(tags) {
            return;
        }
        socket.recv_batch(Duration::from_millis(100), |_, bytes| tags.push(bytes[FRAME_BYTES + 1])).expect("receives");
    }
}

#[test]
fn a_high_class_datagram_overtakes_the_low_class_backlog_in_a_switch_processs_port() {
    install_stop_signals().unwrap();
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut host0 = BatchSocket::bind(loopback).unwrap();
    let mut host1 = BatchSocket::bind(loopback).unwrap();
    let mut network = Network::rack(free_ports(1).unwrap()[0], vec![host0.local_addr(), host1.local_addr()]);
    network.egress = Some(EgressQueues { classes: 3, buffer_bytes: 1 << 20, gbps: 0.00005 });
    let switch_addr = network.switches[0];
    let cfg = RackConfig {
        system: "egress-test".into(),
        spec: (),
        network,
        epoch_unix_ns: unix_now_ns(),
        stop_unix_ns: u64::MAX,
        durable: false,
        rendezvous: None,
    };
    let switch = std::thread::spawn(move || {
        let mut switch = Switch::new(SwitchProfile::tofino1(), Forwarder).unwrap();
        switch_proc::serve_classified(&cfg, 0, &mut switch, 1, class_of)
    });

    // Wait for the switch to be up: hellos (high class) until one comes through.
    let mut tags = Vec::new();
    for i in 0..250u32 {
        host0.send_batch(&[(switch_addr, datagram(2, HELLO))]);
        receive_tags(&mut host1, &mut tags, 1, |t| !t.is_empty());
        if !tags.is_empty() {
            break;
        }
        assert!(i < 249, "the switch never forwarded a hello");
    }

    // The backlog, then the urgent datagram, in one system call.
    let mut burst: Vec<(SocketAddr, Vec<u8>)> = (0..BACKLOG).map(|t| (switch_addr, datagram(0, t))).collect();
    burst.push((switch_addr, datagram(2, URGENT)));
    assert_eq!(host0.send_batch(&burst), burst.len());
    let test_tags = |t: &[u8]| t.iter().copied().filter(|&tag| tag != HELLO).collect::<Vec<u8>>();
    receive_tags(&mut host1, &mut tags, 100, |t| test_tags(t).len() == usize::from(BACKLOG) + 1);

    nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).unwrap();
    let report = switch.join().unwrap().expect("the switch ran");
    let order = test_tags(&tags);
    assert_eq!(order.len(), usize::from(BACKLOG) + 1, "everything arrived: {order:?}");
    let urgent_at = order.iter().position(|&t| t == URGENT).unwrap();
    assert!(urgent_at <= 1, "the urgent datagram overtook the waiting backlog: {order:?}");
    let backlog: Vec<u8> = order.iter().copied().filter(|&t| t != URGENT).collect();
    assert_eq!(backlog, (0..BACKLOG).collect::<Vec<u8>>(), "the backlog kept its order");
    let port = report.ports.iter().find(|p| p.node == 1).expect("host 1's port");
    assert_eq!(port.counts.classes.len(), 3);
    assert_eq!(port.counts.classes[0].sent_frames, u64::from(BACKLOG));
    assert!(port.counts.classes[2].sent_frames > 1, "the urgent datagram and the hellos");
}
