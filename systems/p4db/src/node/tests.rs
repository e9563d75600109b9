//! Unit tests of one node, driven through its host interface: datagrams in, datagrams, timers
//! and log records out. Node 1 of a two-node No-Switch rack serves a coordinator on node 0
//! (whose messages the tests write by hand), and coordinates transactions of its own.

use super::*;
use crate::run::{plan, RunConfig};
use crate::WorkloadSpec;
use pisadb_core::TupleKey;
use pisadb_engine::id::{Slot, TxnId};
use pisadb_wire::node::{LockMode, NodeMsg, OnConflict};
use pisadb_wire::{Frame, Kind};
use pisadb_workload::YcsbConfig;

const ME: u16 = 1;
const PEER: u16 = 0;

fn config(cc: Cc) -> RunConfig {
    let ycsb = YcsbConfig { nodes: 2, rows: 2_000, hot_per_node: 10, ..YcsbConfig::default() };
    RunConfig {
        nodes: 2,
        workers: 2,
        mode: Mode::NoSwitch,
        cc,
        workload: WorkloadSpec::Ycsb(ycsb),
        layout_sample: 200,
        ..RunConfig::ycsb_default()
    }
}

/// Node 1, not started (its workers draw nothing unless a test starts them).
fn node(cc: Cc, peer_timeout_ns: u64, log: bool) -> Node {
    let cfg = config(cc);
    let plan = plan(&cfg).unwrap();
    let node_cfg = NodeConfig { peer_timeout_ns, log, ..plan.node_config(&cfg, ME) };
    Node::new(node_cfg, plan.node_workload(&cfg, ME), plan.switch_view(), cfg.seed).unwrap()
}

/// The `i`-th tuple node 1 owns.
fn key(node: &Node, i: usize) -> TupleKey {
    node.store().iter().nth(i).unwrap().0
}

/// Attempt `seq` of worker `worker` on the peer.
fn peer_txn(worker: u16, seq: u32) -> TxnId {
    Slot::new(PEER, 0, worker, 0).unwrap().attempt(seq)
}

fn from_peer(node: &mut Node, msg: &NodeMsg) -> Outbox {
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: PEER, dst: ME }.encode(&mut bytes);
    msg.encode(&mut bytes);
    let mut out = Outbox::default();
    node.handle_datagram(1_000, &bytes, &mut out);
    out
}

/// The node-to-node messages in `out`, with their destinations.
fn sent(out: &Outbox) -> Vec<(u16, NodeMsg)> {
    out.sends
        .iter()
        .map(|s| {
            let (frame, payload) = Frame::decode(&s.bytes).unwrap();
            assert_eq!((frame.kind, frame.src, frame.dst), (Kind::FORWARD, ME, s.dst));
            (s.dst, NodeMsg::decode(payload).unwrap())
        })
        .collect()
}

fn lock_read(txn: TxnId, ts: u64, entries: Vec<(TupleKey, LockMode)>) -> NodeMsg {
    NodeMsg::LockRead { txn: txn.bits(), ts, on_conflict: OnConflict::Deny, entries }
}

#[test]
fn a_remote_transaction_locks_reads_votes_and_commits() {
    let mut n = node(Cc::NoWait, 0, true);
    let (a, b) = (key(&n, 0), key(&n, 1));
    let t = peer_txn(3, 9);
    let out = from_peer(&mut n, &lock_read(t, 5, vec![(a, LockMode::Exclusive), (b, LockMode::Shared)]));
    let [(PEER, NodeMsg::LockReadReply { granted: true, values, .. })] = &sent(&out)[..] else {
        panic!("expected one granted reply: {:?}", sent(&out));
    };
    let initial = |k| n.store().get(k).unwrap();
    assert_eq!(values, &vec![(initial(a).value, 0), (initial(b).value, 0)]);
    // Receiving and replying cost a message each; two locks and two reads in between.
    let c = &n.config().costs;
    assert_eq!(out.cpu_ns, 2 * (c.stack_ns + c.message_ns) + 2 * c.lock_ns + 2 * c.tuple_ns);
    assert_eq!(n.locked_tuples(), 2);

    // The network delivers the request twice: nothing happens the second time.
    assert!(sent(&from_peer(&mut n, &lock_read(t, 5, vec![(a, LockMode::Exclusive)]))).is_empty());
    assert_eq!(n.stats().rejected.get("duplicate_lock_read"), Some(&1));

    let prepare = NodeMsg::Prepare { txn: t.bits(), writes: vec![(a, 77)] };
    let out = from_peer(&mut n, &prepare);
    assert_eq!(sent(&out), vec![(PEER, NodeMsg::Vote { txn: t.bits(), yes: true })]);
    assert_eq!(out.log, vec![LogRecord::Prepared { txn: t.bits(), coordinator: PEER, writes: vec![(a, 77)] }]);
    let again = from_peer(&mut n, &prepare);
    assert_eq!(sent(&again), vec![(PEER, NodeMsg::Vote { txn: t.bits(), yes: false })], "one yes vote only");

    let out = from_peer(&mut n, &NodeMsg::Commit { txn: t.bits() });
    assert_eq!(out.log, vec![LogRecord::Resolved { txn: t.bits(), commit: true }]);
    assert_eq!(n.store().get(a).unwrap(), pisadb_engine::store::Tuple { value: 77, version: t.bits() });
    assert_eq!(n.locked_tuples(), 0);
    assert!(n.is_idle());
}

#[test]
fn no_wait_denies_a_conflicting_request_and_wait_die_queues_the_older() {
    for (cc, older_waits) in [(Cc::NoWait, false), (Cc::WaitDie, true)] {
        let mut n = node(cc, 0, false);
        let a = key(&n, 0);
        let on_conflict = cc.on_conflict();
        let holder = peer_txn(0, 1);
        let msg = |txn: TxnId, ts| NodeMsg::LockRead {
            txn: txn.bits(),
            ts,
            on_conflict,
            entries: vec![(a, LockMode::Exclusive)],
        };
        from_peer(&mut n, &msg(holder, 50));
        let older = peer_txn(1, 1);
        let out = from_peer(&mut n, &msg(older, 10));
        if older_waits {
            assert!(sent(&out).is_empty(), "{cc:?}: the older request waits");
            // The holder aborts: the waiting request is granted and answered in the same handler.
            let out = from_peer(&mut n, &NodeMsg::Abort { txn: holder.bits() });
            let replies = sent(&out);
            assert!(
                matches!(&replies[..], [(PEER, NodeMsg::LockReadReply { txn, granted: true, .. })] if *txn == older.bits()),
                "{cc:?}: {replies:?}"
            );
        } else {
            let replies = sent(&out);
            assert_eq!(
                replies,
                vec![(PEER, NodeMsg::LockReadReply { txn: older.bits(), granted: false, values: vec![] })],
                "{cc:?}"
            );
        }
    }
}

#[test]
fn a_lease_drops_an_unprepared_request_and_makes_a_prepared_one_ask() {
    let mut n = node(Cc::NoWait, 10_000, false);
    let (a, b) = (key(&n, 0), key(&n, 1));
    let (quiet, prepared) = (peer_txn(0, 1), peer_txn(1, 1));
    let out = from_peer(&mut n, &lock_read(quiet, 1, vec![(a, LockMode::Exclusive)]));
    assert_eq!(out.timers, vec![(1_000 + 20_000, Timer::Lease { txn: quiet })], "a lease of twice the peer timeout");
    from_peer(&mut n, &lock_read(prepared, 2, vec![(b, LockMode::Exclusive)]));
    from_peer(&mut n, &NodeMsg::Prepare { txn: prepared.bits(), writes: vec![(b, 1)] });

    let mut out = Outbox::default();
    n.handle_timer(30_000, Timer::Lease { txn: quiet }, &mut out);
    assert!(out.sends.is_empty());
    assert_eq!((n.stats().leases_expired, n.locked_tuples()), (1, 1), "the unprepared request is gone");
    let out = from_peer(&mut n, &NodeMsg::Prepare { txn: quiet.bits(), writes: vec![(a, 1)] });
    assert_eq!(sent(&out), vec![(PEER, NodeMsg::Vote { txn: quiet.bits(), yes: false })], "asked late, it votes no");

    let mut out = Outbox::default();
    n.handle_timer(30_000, Timer::Lease { txn: prepared }, &mut out);
    assert_eq!(sent(&out), vec![(PEER, NodeMsg::Inquire { txn: prepared.bits() })]);
    assert_eq!(out.timers, vec![(50_000, Timer::Lease { txn: prepared })], "it asks again until it hears");
    let out = from_peer(&mut n, &NodeMsg::Abort { txn: prepared.bits() });
    assert!(out.sends.is_empty());
    assert!(n.is_idle());
}

#[test]
fn an_inquiry_about_a_transaction_the_node_never_committed_is_answered_abort() {
    let mut n = node(Cc::NoWait, 10_000, true);
    let mine = Slot::new(ME, 0, 1, 0).unwrap().attempt(4);
    let out = from_peer(&mut n, &NodeMsg::Inquire { txn: mine.bits() });
    assert_eq!(sent(&out), vec![(PEER, NodeMsg::Abort { txn: mine.bits() })], "presumed abort");
}

#[test]
fn replies_are_routed_to_the_core_of_the_worker_whose_attempt_they_answer() {
    let n = node(Cc::NoWait, 0, false);
    let frame = |msg: &NodeMsg| {
        let mut bytes = Vec::new();
        Frame { kind: Kind::FORWARD, src: PEER, dst: ME }.encode(&mut bytes);
        msg.encode(&mut bytes);
        bytes
    };
    let mine = Slot::new(ME, 0, 1, 0).unwrap().attempt(4);
    let reply = NodeMsg::Vote { txn: mine.bits(), yes: true };
    assert_eq!(n.route(&frame(&reply)), pisadb_host::Route::Core(1));
    let request = NodeMsg::Commit { txn: peer_txn(1, 1).bits() };
    assert_eq!(n.route(&frame(&request)), pisadb_host::Route::AnyCore);
    let stray = NodeMsg::Vote { txn: peer_txn(1, 1).bits(), yes: true };
    assert_eq!(n.route(&frame(&stray)), pisadb_host::Route::AnyCore);
}

#[test]
fn a_started_node_runs_its_own_transactions_to_commit() {
    let mut n = node(Cc::NoWait, 0, false);
    let mut out = Outbox::default();
    n.start(0, &mut out);
    assert_eq!(out.timers, vec![(0, Timer::Begin { worker: 0 }), (0, Timer::Begin { worker: 1 })]);
    // Run worker 0 alone, answering its remote requests as a peer that grants and votes yes.
    let mut timers = vec![(0, Timer::Begin { worker: 0 })];
    let mut committed = 0;
    let mut now = 0;
    for _ in 0..200 {
        let Some((at, timer)) = timers.pop() else { break };
        now = now.max(at);
        let mut out = Outbox::default();
        n.handle_timer(now, timer, &mut out);
        let mut pending = vec![out];
        while let Some(out) = pending.pop() {
            committed += out.events.iter().filter(|e| matches!(e, NodeEvent::Finished(_))).count();
            timers.extend(out.timers.iter().copied().filter(|(_, t)| t.worker() == 0));
            for (_, msg) in sent(&out) {
                let answer = match msg {
                    NodeMsg::LockRead { txn, entries, .. } => {
                        Some(NodeMsg::LockReadReply { txn, granted: true, values: vec![(1, 0); entries.len()] })
                    }
                    NodeMsg::Prepare { txn, .. } => Some(NodeMsg::Vote { txn, yes: true }),
                    _ => None,
                };
                if let Some(answer) = answer {
                    pending.push(from_peer_at(&mut n, now, &answer));
                }
            }
        }
        timers.sort_by_key(|&(at, _)| std::cmp::Reverse(at));
    }
    assert!(committed >= 10, "worker 0 committed {committed} transactions");
    assert_eq!(n.stats().aborts, 0, "nobody conflicts with a lone worker");
}

fn from_peer_at(node: &mut Node, now: u64, msg: &NodeMsg) -> Outbox {
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: PEER, dst: ME }.encode(&mut bytes);
    msg.encode(&mut bytes);
    let mut out = Outbox::default();
    node.handle_datagram(now, &bytes, &mut out);
    out
}
