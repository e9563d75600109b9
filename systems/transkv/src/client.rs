//! A client host (§III's client library): closed-loop YCSB transactions, several outstanding.
//!
//! Each of the host's `outstanding` slots runs one transaction at a time and starts the next
//! when it commits, until the host has started its share of transactions. A transaction is
//! `ops_per_txn` distinct keys, each drawn from YCSB's scrambled Zipf (or uniform when `zipf`
//! is 0), as a transaction that groups YCSB operations would draw them: its keys may live on
//! several storage nodes and be cached on switches of several paths (§IV-B: "the requested
//! key-value pairs may be cached on different switches"). It is a write transaction (all ops
//! write) with probability `write_ratio`, else read-only. A non-transactional multi-get reads
//! the first key's neighbours on its node (one datagram to one node).
//!
//! **Timestamps.** T-TS is unique and follows time: `(slot << 2) | index`, where `slot` is the
//! larger of the host's last slot + 1 and the time in 100 ns units, and `index` (0..4) names
//! the client host. It stays below 2^31 for 53 s of simulated time (the switch's ALU compares
//! 32-bit signed words). An abort restarts the transaction with a new timestamp (basic TSO).
//!
//! **Refusals.** A switch's refusal (`SwitchAborted`) of a write sent straight to its node is
//! confirmed by the node before the client retries (`ClientHost::confirms_refusal`): the
//! network may duplicate a request, and one copy may commit while another is refused, so only
//! the node, which decides each timestamp once, can say which it was. The switch still
//! refuses early (no claim, no forward); the confirmation costs the refused write one round
//! trip to its node.
//!
//! **Lost messages.** An attempt unanswered for `resolve_ns` is resolved: the client sends
//! `Resolve` with the same timestamp where the attempt went (the node, the controller, or
//! each node whose share is unanswered) and
//! keeps doing so until an answer comes; the node (`store.rs`) is where the outcome is decided
//! once, so a resolve never makes a second copy of the transaction cross the switches.
//!
//! **Path** ([`Path`]): TransKV sends a transaction whose keys are all cached straight to the
//! storage node (the switches on the way decide it), and any other to the controller
//! (coordinator, `control.rs`), whose shares the switches on each node's path still decide
//! where they cache the keys. Keys cached on several nodes' paths: a read-only transaction
//! goes as one request per node, each decided (and usually answered) by the switches on its
//! path, and commits when every share was accepted. Under basic TSO that needs no
//! coordination: an accepted read of t raised the key's R-TS to t and found no older writer
//! pending, so its value is the one t must see whatever else happens, and a refused share
//! leaves only raised R-TS behind (conservative, never unsafe) — the client retries with a new
//! timestamp. A write over several nodes needs the controller for atomicity: no one switch
//! sees all of it. Tranx-Coor sends every transaction to the controller; non-transactional
//! reads (T-TS = 0) go straight to the node. Which keys are cached starts as the setup fill
//! and is learned from every committed answer (an op a switch decided is cached on the path,
//! one no switch decided is not), so a TransKV client follows the controller's cache refresh
//! without being told (`crate::refresh`); either path is correct whatever the client believes
//! (switches on the path decide the keys they cache, the node decides the others), only the
//! cost differs.

use crate::costs;
use crate::layout::{Hierarchy, CONTROLLER};
use crate::wire::{value_of, version_of, Message, Op, OpType, Rejections, Status, FLAG_SHARE, LEASE_CLIENT};
use pisadb_core::rng::{derive, SeededRng};
use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route, Send};
use pisadb_workload::Popularity;
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How a client sends its transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// TransKV: all keys cached → to the node; else → to the controller.
    TransKv,
    /// Tranx-Coor: every transaction → to the controller.
    Coordinator,
    /// Non-transactional reads (T-TS = 0) → to the node.
    NonTransactional,
}

/// A client host's settings.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Its host id.
    pub address: u16,
    /// Its index among the client hosts (0..4).
    pub index: u16,
    /// How it sends.
    pub path: Path,
    /// Transactions in flight at once.
    pub outstanding: u16,
    /// Transactions it commits in all.
    pub txns: u32,
    /// Ops per transaction.
    pub ops_per_txn: u8,
    /// Share of write transactions.
    pub write_ratio: f64,
    /// Zipf exponent; 0: uniform.
    pub zipf: f64,
    /// The seed.
    pub seed: u64,
    /// After this long without an answer an attempt is resolved (`Status::Resolve`).
    pub resolve_ns: Nanos,
    /// Keys, nodes and the cache placement.
    pub hierarchy: Arc<Hierarchy>,
    /// The hot set moves at this time by this many ranks (`RackConfig::hot_shift_at_us`);
    /// (0, 0): never.
    pub hot_shift: (Nanos, u64),
}

/// A client timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientTimer {
    /// No answer yet to attempt `ts` of transaction `seq`: resolve it (a non-transactional
    /// read, `ts` = 0, is sent again).
    Resolve {
        /// The transaction.
        seq: u32,
        /// The attempt.
        ts: u32,
    },
}

impl TraceBytes for ClientTimer {
    fn trace(&self, hash: &mut TraceHash) {
        let ClientTimer::Resolve { seq, ts } = *self;
        hash.write(b"resolve");
        hash.write(&seq.to_le_bytes());
        hash.write(&ts.to_le_bytes());
    }
}

/// What a client reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// A transaction committed.
    Committed {
        /// T-TS of the attempt that committed.
        ts: u32,
        /// Keys it wrote (0: read-only).
        writes: u8,
        /// From its first attempt's send to the answer.
        latency_ns: Nanos,
        /// Attempts it took.
        attempts: u32,
        /// Whether a switch answered it.
        by_switch: bool,
        /// Whether switches decided every op of it (all its keys were cached on its path).
        switch_decided: bool,
        /// (key, version read) per read.
        reads: Vec<(u64, u64)>,
    },
    /// An attempt went unanswered for `resolve_ns`: the client asked what became of it.
    Resolving,
    /// An attempt aborted (by a switch, or by a node or the controller).
    Aborted {
        /// Whether a switch aborted it.
        by_switch: bool,
    },
    /// The client host committed all its transactions.
    Finished(u16),
    /// A reply for no outstanding attempt.
    Stale,
    /// A datagram rejected, with the reason.
    Rejected(&'static str),
}

/// One transaction in flight.
#[derive(Clone, Debug)]
struct Txn {
    /// Its sequence number.
    seq: u32,
    /// The current attempt's T-TS.
    ts: u32,
    /// Its ops (values of writes filled per attempt).
    ops: Vec<Op>,
    /// When its first attempt was sent.
    started_ns: Nanos,
    /// Attempts so far.
    attempts: u32,
    /// Where the current attempt went (a node, or the controller).
    dst: u16,
    /// A read-only attempt over cached keys of several nodes, sent as one request per node:
    /// each node's answer so far (empty: the attempt went as one message to `dst`).
    shares: BTreeMap<u16, Option<Message>>,
    /// A switch refused the current attempt, a write sent straight to its node, and the node
    /// is asked to confirm it (`Resolve`): a copy of the request may have committed there.
    refused: bool,
}

/// A client host.
#[derive(Debug)]
pub struct ClientHost {
    cfg: ClientConfig,
    rng: SeededRng,
    /// Which key a draw picks: YCSB's Zipf (or uniform) ranks, scrambled one-to-one.
    popularity: Popularity,
    /// What the committed answers taught about the cache where it differs from the setup
    /// fill: key → cached on its path.
    learned: BTreeMap<u64, bool>,
    /// In flight, by sequence number.
    in_flight: BTreeMap<u32, Txn>,
    /// Transactions started.
    started: u32,
    /// Transactions committed.
    committed: u32,
    /// The last timestamp slot taken.
    last_slot: u64,
    /// Whether it was told to stop.
    stopped: bool,
    /// Rejected datagrams by reason.
    pub rejections: Rejections,
}

impl ClientHost {
    /// A client host; `cfg.zipf` must be 0 or a valid exponent.
    pub fn new(cfg: ClientConfig) -> Result<Self, String> {
        let popularity = Popularity::new(cfg.hierarchy.records, cfg.zipf).map_err(|e| format!("zipf: {e}"))?;
        let rng = derive(cfg.seed, &format!("transkv-client-{}", cfg.index));
        Ok(ClientHost {
            cfg,
            rng,
            popularity,
            learned: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            started: 0,
            committed: 0,
            last_slot: 0,
            stopped: false,
            rejections: Rejections::default(),
        })
    }

    fn next_ts(&mut self, now: Nanos) -> u32 {
        self.last_slot = (self.last_slot + 1).max(now / 100);
        let ts = (self.last_slot << 2) | u64::from(self.cfg.index);
        u32::try_from(ts).ok().filter(|&t| t < 1 << 31).expect("timestamps stay below 2^31 (53 s of simulated time)")
    }

    fn draw_ops(&mut self, now: Nanos) -> Vec<Op> {
        let h = Arc::clone(&self.cfg.hierarchy);
        let first = self.draw_key(now);
        let write = self.rng.random_bool(self.cfg.write_ratio);
        let mut keys = vec![first];
        let wanted = usize::from(self.cfg.ops_per_txn);
        if self.cfg.path == Path::NonTransactional {
            // A non-transactional multi-get goes to one node: the first key's neighbours there.
            let node = h.node_of(first);
            let mut step = 1u64;
            while keys.len() < wanted && step <= h.records {
                for k in [first.checked_add(step), first.checked_sub(step)].into_iter().flatten() {
                    if keys.len() < wanted && k < h.records && h.node_of(k) == node {
                        keys.push(k);
                    }
                }
                step += 1;
            }
        } else {
            // Distinct keys, each drawn as YCSB draws one (a transaction groups YCSB
            // operations), so a transaction spans nodes. Bounded tries: a tiny key space
            // with high skew repeats keys.
            let mut tries = 0;
            while keys.len() < wanted && tries < 64 * wanted {
                tries += 1;
                let k = self.draw_key(now);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        keys.into_iter()
            .map(|k| if write { Op::write(u128::from(k), [0; 48]) } else { Op::read(u128::from(k)) })
            .collect()
    }

    /// Learns from a committed answer which of its keys are cached on their path.
    fn learn(&mut self, msg: &Message) {
        for op in &msg.ops {
            let Ok(key) = u64::try_from(op.key) else { continue };
            if op.decided() == self.cfg.hierarchy.switch_of(key).is_some() {
                self.learned.remove(&key);
            } else {
                self.learned.insert(key, op.decided());
            }
        }
    }

    /// One key by the workload's popularity (YCSB's scrambled Zipf, or uniform).
    /// From `hot_shift`'s time on, rank r is drawn as rank r + its shift.
    fn draw_key(&mut self, now: Nanos) -> u64 {
        let rank = self.popularity.rank(&mut self.rng);
        let (shift_at, shift) = self.cfg.hot_shift;
        let rank = if shift > 0 && now >= shift_at { rank.wrapping_add(shift) } else { rank };
        self.popularity.key_of_rank(rank)
    }

    fn send_attempt(&mut self, now: Nanos, seq: u32, out: &mut HostOutbox<Self>) {
        let ts = match self.cfg.path {
            Path::NonTransactional => 0,
            _ => self.next_ts(now),
        };
        let h = Arc::clone(&self.cfg.hierarchy);
        let Some(txn) = self.in_flight.get_mut(&seq) else { return };
        txn.ts = ts;
        txn.attempts += 1;
        txn.refused = false;
        for op in txn.ops.iter_mut().filter(|o| o.op_type == OpType::Write) {
            op.value = value_of(op.key, u64::from(ts));
        }
        let learned = &self.learned;
        let cached = |key: u64| learned.get(&key).copied().unwrap_or_else(|| h.switch_of(key).is_some());
        let all_cached = txn.ops.iter().all(|o| cached(o.key as u64));
        let node = h.node_of(txn.ops[0].key as u64);
        let one_node = txn.ops.iter().all(|o| h.node_of(o.key as u64) == node);
        let read_only = txn.ops.iter().all(|o| o.op_type == OpType::Read);
        txn.shares.clear();
        if self.cfg.path == Path::TransKv && all_cached && read_only && !one_node {
            // Read-only over cached keys of several nodes: one request per node, each decided
            // by the switches on that node's path; no commit needs coordinating (below).
            for (node, mut ops) in h.ops_by_node(&txn.ops) {
                ops.iter_mut().for_each(|o| o.flags |= FLAG_SHARE);
                let msg = Message { ts, status: Status::Request, client: self.cfg.address, seq, ops };
                out.cpu_ns += costs::CLIENT_MESSAGE_NS;
                out.sends.push(Send { dst: node, bytes: msg.datagram(self.cfg.address, node) });
                txn.shares.insert(node, None);
            }
            txn.dst = node;
            out.timers.push((now + self.cfg.resolve_ns, ClientTimer::Resolve { seq, ts }));
            return;
        }
        let (status, dst) = match self.cfg.path {
            Path::TransKv if all_cached && one_node => (Status::Request, node),
            Path::TransKv | Path::Coordinator => (Status::Coordinate, CONTROLLER),
            Path::NonTransactional => (Status::Request, node),
        };
        txn.dst = dst;
        let msg = Message { ts, status, client: self.cfg.address, seq, ops: txn.ops.clone() };
        out.cpu_ns += costs::CLIENT_MESSAGE_NS;
        out.sends.push(Send { dst, bytes: msg.datagram(self.cfg.address, dst) });
        out.timers.push((now + self.cfg.resolve_ns, ClientTimer::Resolve { seq, ts }));
    }

    fn start_next(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        if self.stopped || self.started >= self.cfg.txns {
            return;
        }
        self.started += 1;
        let seq = self.started;
        let ops = self.draw_ops(now);
        self.in_flight.insert(
            seq,
            Txn { seq, ts: 0, ops, started_ns: now, attempts: 0, dst: 0, shares: BTreeMap::new(), refused: false },
        );
        self.send_attempt(now, seq, out);
    }

    fn answer(&mut self, now: Nanos, msg: Message, out: &mut HostOutbox<Self>) {
        if msg.client == LEASE_CLIENT {
            // A switch's lease query answered, passing the switches because a request of
            // ours met the claim (`program.rs`): no transaction of ours.
            return;
        }
        let current = self.in_flight.get(&msg.seq).is_some_and(|t| t.ts == msg.ts);
        if !current || msg.client != self.cfg.address {
            out.events.push(ClientEvent::Stale);
            return;
        }
        match msg.status {
            Status::Committed | Status::Served => {
                let Some(txn) = self.in_flight.get_mut(&msg.seq) else { return };
                let mut answers = vec![msg.clone()];
                if !txn.shares.is_empty() {
                    let node = self.cfg.hierarchy.node_of(msg.ops[0].key as u64);
                    match txn.shares.get_mut(&node) {
                        Some(answer) => *answer = Some(msg.clone()),
                        None => {
                            self.rejections.count("unknown_share");
                            return out.events.push(ClientEvent::Rejected("unknown_share"));
                        }
                    }
                    if txn.shares.values().any(Option::is_none) {
                        return;
                    }
                    answers = txn.shares.values().flatten().cloned().collect();
                }
                let Some(txn) = self.in_flight.remove(&msg.seq) else { return };
                if self.cfg.path == Path::TransKv {
                    answers.iter().for_each(|m| self.learn(m));
                }
                let answered: Vec<&Op> = answers.iter().flat_map(|m| &m.ops).collect();
                let reads = txn
                    .ops
                    .iter()
                    .filter(|o| o.op_type == OpType::Read)
                    .filter_map(|o| answered.iter().find(|a| a.key == o.key))
                    .map(|o| (o.key as u64, version_of(&o.value)))
                    .collect();
                out.events.push(ClientEvent::Committed {
                    ts: txn.ts,
                    writes: txn.ops.iter().filter(|o| o.op_type == OpType::Write).count() as u8,
                    latency_ns: now - txn.started_ns,
                    attempts: txn.attempts,
                    by_switch: answers.iter().all(|m| m.status == Status::Served),
                    switch_decided: answers.iter().all(|m| m.ops.iter().all(|o| o.decided())),
                    reads,
                });
                debug_assert_eq!(txn.seq, msg.seq);
                self.committed += 1;
                if self.committed == self.cfg.txns {
                    out.events.push(ClientEvent::Finished(self.cfg.index));
                }
                self.start_next(now, out);
            }
            Status::SwitchAborted if self.confirms_refusal(msg.seq) => {
                let Some(txn) = self.in_flight.get_mut(&msg.seq) else { return };
                if !std::mem::replace(&mut txn.refused, true) {
                    let resolve = Message { status: Status::Resolve, ops: txn.ops.clone(), ..msg };
                    out.cpu_ns += costs::CLIENT_MESSAGE_NS;
                    out.sends.push(Send { dst: txn.dst, bytes: resolve.datagram(self.cfg.address, txn.dst) });
                }
            }
            Status::Aborted | Status::SwitchAborted => {
                let refused = self.in_flight.get(&msg.seq).is_some_and(|t| t.refused);
                out.events.push(ClientEvent::Aborted { by_switch: msg.status == Status::SwitchAborted || refused });
                self.send_attempt(now, msg.seq, out);
            }
            _ => {
                self.rejections.count("unexpected_status");
                out.events.push(ClientEvent::Rejected("unexpected_status"));
            }
        }
    }
}

impl ClientHost {
    /// Whether a switch's refusal of attempt `seq` needs its node's confirmation: a write sent
    /// straight to its node. The switch cannot tell a copy of a request (the network may
    /// duplicate it) from a late request, and a copy may have committed at the node while W-TS
    /// moved past it since; the node decides each timestamp once (`store.rs`), so its answer
    /// to `Resolve` is the outcome: `Aborted` (never seen: refused for good, so no copy commits
    /// later) or `Committed`. A read-only attempt installs nothing, and one the controller
    /// coordinates is decided there, so their refusals are final.
    fn confirms_refusal(&self, seq: u32) -> bool {
        self.in_flight.get(&seq).is_some_and(|t| {
            t.dst != CONTROLLER && t.shares.is_empty() && t.ops.iter().any(|o| o.op_type == OpType::Write)
        })
    }
}

impl Host for ClientHost {
    type Timer = ClientTimer;
    type Log = ();
    type Event = ClientEvent;

    fn cores(&self) -> u16 {
        costs::CLIENT_CORES
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        for _ in 0..self.cfg.outstanding {
            self.start_next(now, out);
        }
    }

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::AnyCore
    }

    fn timer_core(&self, _timer: &ClientTimer) -> u16 {
        0
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        out.cpu_ns += costs::CLIENT_MESSAGE_NS;
        match Message::open(bytes) {
            Ok((_, msg)) => self.answer(now, msg, out),
            Err(e) => {
                self.rejections.count(e.reason());
                out.events.push(ClientEvent::Rejected(e.reason()));
            }
        }
    }

    fn handle_timer(&mut self, now: Nanos, timer: ClientTimer, out: &mut HostOutbox<Self>) {
        let ClientTimer::Resolve { seq, ts } = timer;
        let Some(txn) = self.in_flight.get(&seq).filter(|t| t.ts == ts) else { return };
        // A non-transactional read is only asked again (reads change nothing).
        let status = if ts == 0 { Status::Request } else { Status::Resolve };
        let resolve = |dst: u16, ops: Vec<Op>, out: &mut HostOutbox<Self>| {
            let msg = Message { ts, status, client: self.cfg.address, seq, ops };
            out.cpu_ns += costs::CLIENT_MESSAGE_NS;
            out.sends.push(Send { dst, bytes: msg.datagram(self.cfg.address, dst) });
        };
        if txn.shares.is_empty() {
            resolve(txn.dst, txn.ops.clone(), out);
        } else {
            // Each unanswered share is resolved at its node (its outcome, or refused for good).
            for (node, mut ops) in self.cfg.hierarchy.ops_by_node(&txn.ops) {
                if txn.shares.get(&node).is_some_and(Option::is_none) {
                    ops.iter_mut().for_each(|o| o.flags |= FLAG_SHARE);
                    resolve(node, ops, out);
                }
            }
        }
        out.timers.push((now + self.cfg.resolve_ns, timer));
        out.events.push(ClientEvent::Resolving);
    }

    fn stop(&mut self) {
        self.stopped = true;
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(path: Path, zipf: f64) -> ClientHost {
        let hierarchy = Arc::new(Hierarchy::new(10_000, 64).unwrap());
        ClientHost::new(ClientConfig {
            address: 16,
            index: 0,
            path,
            outstanding: 4,
            txns: 10,
            ops_per_txn: 3,
            write_ratio: 0.5,
            zipf,
            seed: 1,
            resolve_ns: 1_000_000,
            hierarchy,
            hot_shift: (0, 0),
        })
        .unwrap()
    }

    #[test]
    fn transactions_are_distinct_independent_keys_with_unique_rising_timestamps() {
        let mut c = client(Path::Coordinator, 0.99);
        let mut out = HostOutbox::<ClientHost>::default();
        c.start(0, &mut out);
        assert_eq!(out.sends.len(), 4);
        let mut last = 0;
        for s in &out.sends {
            let (_, m) = Message::open(&s.bytes).unwrap();
            assert_eq!((s.dst, m.status, m.ops.len()), (CONTROLLER, Status::Coordinate, 3));
            let mut keys: Vec<u128> = m.ops.iter().map(|o| o.key).collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), 3, "distinct keys");
            assert!(m.ts > last && m.ts % 4 == 0);
            last = m.ts;
        }
        // Keys are drawn independently, so transactions span nodes; a non-transactional
        // multi-get stays on one node (one datagram to one node).
        let spans = |path: Path| {
            let mut c = client(path, 0.99);
            (0..200)
                .map(|_| {
                    let ops = c.draw_ops(0);
                    let nodes: std::collections::BTreeSet<u16> =
                        ops.iter().map(|o| c.cfg.hierarchy.node_of(o.key as u64)).collect();
                    nodes.len()
                })
                .collect::<Vec<_>>()
        };
        assert!(spans(Path::Coordinator).iter().filter(|&&n| n > 1).count() > 100, "most span several nodes");
        assert!(spans(Path::NonTransactional).iter().all(|&n| n == 1));
    }

    #[test]
    fn an_abort_retries_with_a_new_timestamp_and_a_commit_starts_the_next() {
        let mut c = client(Path::NonTransactional, 0.0);
        let mut out = HostOutbox::<ClientHost>::default();
        c.start(0, &mut out);
        let (_, mut m) = Message::open(&out.sends[0].bytes).unwrap();
        assert_eq!(m.ts, 0);
        let mut c = client(Path::TransKv, 0.0);
        let mut out = HostOutbox::<ClientHost>::default();
        c.start(0, &mut out);
        (_, m) = Message::open(&out.sends[0].bytes).unwrap();
        m.status = Status::SwitchAborted;
        let mut out = HostOutbox::<ClientHost>::default();
        c.handle_datagram(5_000, &m.datagram(3, 16), &mut out);
        let (_, retry) = Message::open(&out.sends[0].bytes).unwrap();
        assert!(retry.ts > m.ts && retry.seq == m.seq);
        let mut done = retry.clone();
        done.status = Status::Committed;
        let mut out = HostOutbox::<ClientHost>::default();
        c.handle_datagram(9_000, &done.datagram(3, 16), &mut out);
        assert!(matches!(out.events[0], ClientEvent::Committed { attempts: 2, latency_ns: 9_000, .. }));
        assert_eq!(out.sends.len(), 1, "the next transaction");
        // The old attempt's answer is stale.
        let mut out = HostOutbox::<ClientHost>::default();
        c.handle_datagram(9_500, &m.datagram(3, 16), &mut out);
        assert_eq!(out.events, vec![ClientEvent::Stale]);
    }
}
