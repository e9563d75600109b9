//! Unit tests of the P4DB prototype's engine ([`Engine::Prototype`]) on one node, driven
//! through its host interface as `tests.rs` drives PisaDB's: node 1 of a two-node No-Switch
//! rack, with node 0 played by hand.

use super::*;
use crate::run::{plan, RunConfig};
use crate::WorkloadSpec;
use pisadb_core::TupleKey;
use pisadb_engine::id::{Slot, TxnId};
use pisadb_engine::twopc::Origin;
use pisadb_host::Route;
use pisadb_wire::node::{LockMode, NodeMsg, OnConflict};
use pisadb_wire::{Frame, Kind};
use pisadb_workload::{YcsbConfig, YcsbMix};
use std::collections::{BTreeMap, BTreeSet};

const ME: u16 = 1;
const PEER: u16 = 0;

fn config(engine: Engine, nodes: u16, ycsb: YcsbConfig) -> RunConfig {
    let mut cfg = RunConfig {
        nodes,
        workers: 2,
        mode: Mode::NoSwitch,
        workload: WorkloadSpec::Ycsb(YcsbConfig { nodes, ..ycsb }),
        layout_sample: 200,
        ..RunConfig::ycsb_default()
    };
    crate::testbed::apply(&mut cfg);
    cfg.engine = engine;
    cfg
}

/// Node `id` of the rack `cfg`, not started.
fn node_of(cfg: &RunConfig, id: u16) -> Node {
    let plan = plan(cfg).unwrap();
    Node::new(plan.node_config(cfg, id), plan.node_workload(cfg, id), plan.switch_view(), cfg.seed).unwrap()
}

/// Node 1 of a two-node YCSB-A rack with half its keys remote.
fn node(engine: Engine) -> Node {
    let ycsb = YcsbConfig { rows: 2_000, hot_per_node: 10, hot_prob: 0.0, remote_prob: 0.5, ..YcsbConfig::default() };
    node_of(&config(engine, 2, ycsb), ME)
}

fn datagram(msg: &NodeMsg) -> Vec<u8> {
    let mut bytes = Vec::new();
    Frame { kind: Kind::FORWARD, src: PEER, dst: ME }.encode(&mut bytes);
    msg.encode(&mut bytes);
    bytes
}

fn sent(out: &Outbox) -> Vec<NodeMsg> {
    out.sends.iter().map(|s| NodeMsg::decode(Frame::decode(&s.bytes).unwrap().1).unwrap()).collect()
}

/// What node 0 saw of worker 0's transactions on node 1.
#[derive(Default)]
struct PeerView {
    /// Per transaction attempt: the `LockRead`s it got, in order, each with its entries.
    lock_reads: BTreeMap<u64, Vec<Vec<(TupleKey, LockMode)>>>,
    /// Per transaction attempt: the tuples released.
    releases: BTreeMap<u64, Vec<TupleKey>>,
    /// Most lock requests of worker 0 outstanding at once.
    most_outstanding: usize,
    /// Transactions committed.
    committed: usize,
    /// Retry timers set (a retried transaction would need one).
    retries: usize,
}

/// Runs worker 0 of `n` alone for `steps` handlers, node 0 answering every request: it grants
/// (or denies, when `deny` says so for the n-th `LockRead`) and acknowledges releases.
fn drive(n: &mut Node, steps: usize, deny: impl Fn(usize) -> bool) -> PeerView {
    let mut view = PeerView::default();
    let mut timers = vec![(0, Timer::Begin { worker: 0 })];
    // Requests node 0 has not answered yet: (arrival time, answer).
    let mut inbound: Vec<(u64, NodeMsg)> = Vec::new();
    let mut lock_reads = 0;
    let mut now = 0;
    for _ in 0..steps {
        timers.sort_by_key(|&(at, _)| std::cmp::Reverse(at));
        inbound.sort_by_key(|&(at, _)| std::cmp::Reverse(at));
        let mut out = Outbox::default();
        match (timers.last().copied(), inbound.last().map(|m| m.0)) {
            (Some((at, _)), Some(m)) if m < at => {
                let (at, msg) = inbound.pop().unwrap();
                now = now.max(at);
                n.handle_datagram(now, &datagram(&msg), &mut out);
            }
            (Some((at, timer)), _) => {
                timers.pop();
                now = now.max(at);
                n.handle_timer(now, timer, &mut out);
            }
            (None, Some(_)) => {
                let (at, msg) = inbound.pop().unwrap();
                now = now.max(at);
                n.handle_datagram(now, &datagram(&msg), &mut out);
            }
            (None, None) => break,
        }
        view.committed += out.events.iter().filter(|e| matches!(e, NodeEvent::Finished(_))).count();
        view.retries += out.timers.iter().filter(|(_, t)| matches!(t, Timer::Retry { .. })).count();
        timers.extend(out.timers.iter().copied().filter(|(_, t)| t.worker() == 0));
        for msg in sent(&out) {
            let answer = match msg {
                NodeMsg::LockRead { txn, entries, .. } => {
                    lock_reads += 1;
                    let granted = !deny(lock_reads);
                    let values = if granted { vec![(1, 0); entries.len()] } else { vec![] };
                    view.lock_reads.entry(txn).or_default().push(entries);
                    NodeMsg::LockReadReply { txn, granted, values }
                }
                NodeMsg::Release { txn, key, .. } => {
                    view.releases.entry(txn).or_default().push(key);
                    NodeMsg::Released { txn }
                }
                other => panic!("unexpected {other:?}"),
            };
            inbound.push((now + 10_000, answer));
        }
        let lock_replies = inbound.iter().filter(|(_, m)| matches!(m, NodeMsg::LockReadReply { .. })).count();
        view.most_outstanding = view.most_outstanding.max(lock_replies);
    }
    view
}

#[test]
fn a_transaction_with_k_remote_keys_takes_k_round_trips() {
    let mut n = node(Engine::Prototype);
    let view = drive(&mut n, 3_000, |_| false);
    assert!(view.committed >= 10, "committed {}", view.committed);
    assert!(view.lock_reads.values().any(|r| r.len() >= 2), "some transaction has several remote keys");
    for (txn, reads) in &view.lock_reads {
        assert!(reads.iter().all(|e| e.len() == 1), "{txn:#x}: one tuple per request: {reads:?}");
        let keys: BTreeSet<TupleKey> = reads.iter().map(|e| e[0].0).collect();
        assert_eq!(keys.len(), reads.len(), "{txn:#x}: each remote key asked for once");
        if let Some(released) = view.releases.get(txn) {
            assert_eq!(released.iter().copied().collect::<BTreeSet<_>>(), keys, "{txn:#x}: one Release per remote key");
        }
    }
    assert_eq!(view.most_outstanding, 1, "a worker waits for each answer before its next lock request");

    // PisaDB's engine asks node 0 for all of a transaction's tuples there at once.
    let mut n = node(Engine::Pisadb);
    let mut out = Outbox::default();
    n.handle_timer(0, Timer::Begin { worker: 0 }, &mut out);
    let requests: Vec<_> = sent(&out).into_iter().filter(|m| matches!(m, NodeMsg::LockRead { .. })).collect();
    assert!(requests.len() <= 1, "one request per owner: {requests:?}");
}

#[test]
fn an_aborted_transaction_is_skipped_not_retried() {
    let mut n = node(Engine::Prototype);
    // Node 0 denies every third lock request.
    let view = drive(&mut n, 3_000, |i| i % 3 == 0);
    let s = n.stats().clone();
    assert!(s.skipped > 0 && view.committed > 0, "{s:?}");
    assert_eq!(s.aborts, s.skipped, "every abort skips its transaction");
    let in_flight = u64::from(!n.workers.all_idle());
    assert_eq!(s.begun, s.committed + s.skipped + in_flight, "begun = committed + skipped (+ the one running)");
    assert_eq!(view.retries, 0, "no transaction is retried");
}

#[test]
fn one_handler_core_receives_every_datagram_and_hands_answers_to_the_worker() {
    let mut n = node(Engine::Prototype);
    assert_eq!(Host::cores(&n), 3, "two workers and the handler");
    let mine = Slot::new(ME, 0, 1, 0).unwrap().attempt(4);
    let reply = NodeMsg::LockReadReply { txn: mine.bits(), granted: true, values: vec![] };
    let request = NodeMsg::Commit { txn: Slot::new(PEER, 0, 1, 0).unwrap().attempt(1).bits() };
    assert_eq!(n.route(&datagram(&reply)), Route::Core(2));
    assert_eq!(n.route(&datagram(&request)), Route::Core(2));
    // An answer to a running attempt is handed to its worker's core through a Resume timer.
    let mut out = Outbox::default();
    n.handle_timer(0, Timer::Begin { worker: 0 }, &mut out);
    let Some(NodeMsg::LockRead { txn, .. }) = sent(&out).into_iter().next() else {
        return; // its first tuple is local: nothing to answer yet
    };
    let mut out = Outbox::default();
    n.handle_datagram(5_000, &datagram(&NodeMsg::LockReadReply { txn, granted: true, values: vec![(1, 0)] }), &mut out);
    assert!(out.sends.is_empty(), "the handler does not go on with the transaction");
    assert_eq!(out.timers, vec![(5_000, Timer::Resume { worker: 0 })]);
}

/// The CPU of worker 0's request for a lock in `mode` on a row whose latch the handler core
/// took 50 ns before, for a shared lock of node 0's, and the contended latches counted.
fn second_at_the_latch(engine: Engine, mode: LockMode) -> (u64, u64) {
    let mut n = node(engine);
    let key = n.store().iter().next().unwrap().0;
    let costs = n.config().costs.clone();
    let lock = |txn: TxnId, mode| NodeMsg::LockRead {
        txn: txn.bits(),
        ts: 1,
        on_conflict: OnConflict::Deny,
        entries: vec![(key, mode)],
    };
    // Node 0's shared lock, on the handler core: its latch is taken once the datagram is in.
    let remote = Slot::new(PEER, 0, 0, 0).unwrap().attempt(1);
    let mut out = Outbox::default();
    n.handle_datagram(1_000, &datagram(&lock(remote, LockMode::Shared)), &mut out);
    let received = costs.stack_ns + costs.message_ns;
    assert_eq!(out.cpu_ns, 2 * received + costs.lock_ns + costs.tuple_ns, "{engine:?}: nobody met yet");
    assert_eq!(n.contended_latches(), 0);
    // Worker 0 of this node, on its own core, 50 ns after that latch.
    n.core = 0;
    let local = Slot::new(ME, 0, 0, 0).unwrap().attempt(1);
    let mut out = Outbox::default();
    n.serve(1_000 + received + 50, Origin::Local, lock(local, mode), &mut out);
    (out.cpu_ns, n.contended_latches())
}

#[test]
fn a_latch_is_charged_for_shared_locks_too_when_two_cores_meet() {
    let latch_ns = CpuCosts::testbed().latch_ns;
    // Shared after shared is granted; exclusive after shared is denied: both take the latch.
    for mode in [LockMode::Shared, LockMode::Exclusive] {
        let (prototype, contended) = second_at_the_latch(Engine::Prototype, mode);
        let (pisadb, none) = second_at_the_latch(Engine::Pisadb, mode);
        assert_eq!(prototype, pisadb + latch_ns, "{mode:?}: the prototype pays the contended latch");
        assert_eq!((contended, none), (1, 0), "{mode:?}");
    }
}

#[test]
fn a_local_eight_read_transaction_costs_the_fitted_cpu_on_the_testbed() {
    // One node: every tuple is local; YCSB-C reads only; no hot set in the way.
    let ycsb = YcsbConfig { rows: 2_000, hot_prob: 0.0, mix: YcsbMix::C, ..YcsbConfig::default() };
    let mut n = node_of(&config(Engine::Prototype, 1, ycsb), 0);
    let mut timers = vec![(0, Timer::Begin { worker: 0 })];
    let mut cpu_ns = 0;
    while let Some((at, timer)) = timers.pop() {
        let mut out = Outbox::default();
        n.handle_timer(at, timer, &mut out);
        cpu_ns += out.cpu_ns;
        if out.events.iter().any(|e| matches!(e, NodeEvent::Finished(_))) {
            break;
        }
        timers.extend(out.timers);
    }
    assert_eq!(n.stats().committed, 1);
    assert!(cpu_ns.abs_diff(crate::testbed::LOCAL_TXN_NS) <= 8, "{cpu_ns} ns for a local 8-read transaction");
}
