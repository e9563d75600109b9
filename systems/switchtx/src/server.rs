//! A SwitchTx server: one shard's primary, the previous shard's backup, and worker threads
//! that are clients and participants at once (the symmetric model, §3.1).
//!
//! **Data.** Shard `i` lives on server `i`; its backup on server `i + 1 mod n`. A record is
//! single-version: value, version (the id of the transaction that wrote it; 0 initially) and
//! a lock bit naming the holding attempt. Records are created on first touch.
//!
//! **Threads.** Thread `t` of every server handles the transactions of client threads `t`:
//! every message names its client thread and runs on that core of the receiver, so a
//! participant's work for a transaction runs on the thread its message names, as the paper's
//! per-thread queue pairs and UDP ports steer it. Each thread keeps up to `lanes` transactions
//! in flight (its MPL, static or adaptive, [`crate::admission`]); lane `l` of thread `t` of
//! server `s` owns switch slot `(s × threads + t) × lanes + l`, so slots never collide.
//!
//! **A transaction** (client side): *execute* reads its keys from their primaries (a read that
//! finds a lock aborts at once); then the client computes its writes (read-modify-write,
//! `value + 1`), claims its switch slot with `init` (not in FaSST) and sends each participant
//! a `prepare` with its part: the writes of its shard (write primaries), the writes it backs
//! up (write backups), the reads of its shard with their versions (read primaries), and who
//! the participants are. From here the participants and the coordinator drive the phases:
//!
//! - *lock*: a write primary try-locks its write keys (no waiting), checking each version is
//!   still the one read (so a read-modify-write key needs no separate validation race), and
//!   answers `lock_ok` or `fail`;
//! - *validate* (on the scattered `lock_ok`): a read primary checks every read version is
//!   unchanged and the record not locked by another attempt: `validate_ok` or `fail`; a write
//!   primary that is the only read primary validates right after locking, without a round
//!   (single-shard transactions, §3.2.3);
//! - *commit backup* (on `validate_ok`): a write backup applies the redo record to its copy:
//!   `replicate_ok`;
//! - *commit primary* (on `replicate_ok`): a write primary installs its writes (version := the
//!   transaction id), unlocks: `commit_ok`; the gathered `commit_ok` reaches the client.
//! - *abort*: the first `fail` reaches the write participants, which unlock and forget, and
//!   the client, which retries the same keys as a new attempt (marked retrying: high priority).
//!
//! Two shorter kinds (§3.2.3): a *read-only* transaction skips the execute phase: its read
//! primaries copy their versions (`version_copy_ok`, gathered), then validate and answer the
//! client with the values; a *blind write* skips execute and validate: its write primaries lock
//! (no version to check) and answer `validate_ok` straight away, so the backups start when every
//! lock is held.
//!
//! The workload is YCSB-T ([`Workload`]) or TPC-C NewOrder + Payment from
//! `pisadb_workload::tpcc` (`tpcc_warehouses > 0`), whose operations become keys on their
//! warehouse's server, written if any operation writes them.
//!
//! The coordinator is the switch tree (messages go to the sender's anchor, [`crate::tree`]),
//! or, in FaSST, the client: participants answer it and it gathers with the same counter
//! logic and sends the next phase to each participant itself (its own server's share by a
//! local call). Messages that come from the coordinator carry `FLAG_DOWN`.
//!
//! **Serializability across participants.** Validation is distributed: each read primary
//! checks only its own keys, and the serialization point is when the last `validate_ok` is
//! gathered, while every write lock is held (locks are taken before any validation starts,
//! since validation is scattered only after all `lock_ok`s). This is OCC's lock → validate
//! order across nodes; the engine's single-node `Occ` validator is not used here because it
//! validates a whole read set at one node, and using it per participant without the lock
//! phase ordering would allow write skew across participants.
//!
//! **Out of order.** A participant keeps, per slot, only the newest attempt it heard of. A
//! request for an older attempt is dropped; a `fail` or a phase request that overtakes the
//! `prepare` leaves a placeholder that the `prepare` finds (an aborted one makes it a no-op,
//! an early request is replayed after it). A `prepare` for a newer attempt releases what an
//! older one still held (its client has moved on, so it was aborted).
//!
//! **Timeouts** (§3.5, control messages lost): a client that hears no outcome within
//! `timeout_ns` counts a loss (for admission control) and resolves the attempt by asking
//! every participant ([`crate::wire::MsgType`] `Query`): each freezes the attempt and answers
//! what it did; the attempt committed iff a primary installed, or every backup applied the
//! redo. The client then tells everyone the outcome (`Resolve`), which finishes or rolls back.
//! Query and decision are resent to those that have not answered, first after `timeout_ns`,
//! then after twice as long each time no new answer came, up to [`REQUERY_BACKOFF_CAP`] times
//! `timeout_ns` ([`requery_interval`]); an answer (or the decision) starts the doubling over.
//! Without the backoff, when latency nears the timeout the resends add load that makes more
//! attempts time out. The intervals are exact (no jitter): the run stays deterministic.

use crate::admission::Admission;
use crate::tree::{Coordination, Layout, Participants};
use crate::wire::{class_of, Control, Data, Item, Message, MsgType, FLAG_DOWN, FLAG_RETRY};
use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route, Send};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use zerocopy::FromBytes;

/// The CPU costs a server charges (see `CALIBRATION.md`, `## SwitchTx`): per datagram
/// received `stack_ns + handler_ns` (a `prepare`: `prepare_ns` instead of `handler_ns`),
/// plus `item_ns` per key it touches, plus `stack_ns` per datagram it sends; `begin_ns` to
/// draw a transaction and build its reads.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    /// Network stack per datagram sent or received (not our code: assumed, as P4DB's).
    pub stack_ns: Nanos,
    /// Drawing a transaction and building its reads (bench `begin`).
    pub begin_ns: Nanos,
    /// Handling one message, fixed part (benches `read_1`, `validate` less one key).
    pub handler_ns: Nanos,
    /// Handling a `prepare` and locking, fixed part (bench `prepare_lock` less two keys).
    pub prepare_ns: Nanos,
    /// Per key a handler touches (`(read_8 − read_1) / 7`).
    pub item_ns: Nanos,
}

/// The figures measured by `benches/costs.rs` on 2026-11-26 (CALIBRATION.md, `## SwitchTx`).
pub const COSTS: Costs = Costs { stack_ns: 200, begin_ns: 1_900, handler_ns: 110, prepare_ns: 290, item_ns: 39 };

/// The YCSB-T workload (§5.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Records per server table.
    pub records: u64,
    /// Columns per record (each column is a key).
    pub columns: u64,
    /// Zipf θ of the record.
    pub theta: f64,
    /// Keys per transaction.
    pub keys: u8,
    /// Servers a transaction spans (keys are dealt round-robin over that many distinct ones).
    pub partitions: u8,
    /// Chance that a key is written (read-modify-write); at least one key always is, except
    /// in read-only transactions.
    pub write_fraction: f64,
    /// Chance that a transaction is read-only (version copy, then validate and read).
    #[serde(default)]
    pub read_only_fraction: f64,
    /// Chance that a transaction is a blind write (every key written with a constant, nothing
    /// read: no execute and no validate phase).
    #[serde(default)]
    pub blind_fraction: f64,
    /// TPC-C instead of YCSB-T when non-zero: warehouses per server (NewOrder + Payment 50/50
    /// from `pisadb_workload::tpcc`; the YCSB fields above are then unused).
    #[serde(default)]
    pub tpcc_warehouses: u16,
    /// TPC-C: the chance that a NewOrder line comes from another warehouse (the paper: 1.0).
    #[serde(default = "all_remote")]
    pub remote_items: f64,
}

fn all_remote() -> f64 {
    1.0
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            records: 100_000,
            columns: 24,
            theta: 0.8,
            keys: 8,
            partitions: 8,
            write_fraction: 0.5,
            read_only_fraction: 0.0,
            blind_fraction: 0.0,
            tpcc_warehouses: 0,
            remote_items: 1.0,
        }
    }
}

/// How many transactions a thread keeps in flight.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Mpl {
    /// Always this many.
    Static(u8),
    /// Listing 1, epoch by epoch, up to `max`.
    Adaptive {
        /// The cap (the thread's lanes).
        max: u8,
        /// The epoch length.
        epoch_ns: Nanos,
    },
}

impl Mpl {
    /// Lanes a thread needs.
    pub fn lanes(&self) -> u8 {
        match *self {
            Mpl::Static(n) => n.max(1),
            Mpl::Adaptive { max, .. } => max.max(1),
        }
    }
}

/// One server's configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Its id (its shard).
    pub id: u8,
    /// The racks.
    pub layout: Layout,
    /// Worker threads (cores).
    pub threads: u16,
    /// How transactions are coordinated.
    pub coord: Coordination,
    /// Whether messages carry their semantic class (else all medium).
    pub priority: bool,
    /// The MPL policy.
    pub mpl: Mpl,
    /// The workload.
    pub workload: Workload,
    /// The seed.
    pub seed: u64,
    /// A transaction without an outcome after this long is resolved (0: never).
    pub timeout_ns: Nanos,
    /// The CPU costs.
    pub costs: Costs,
    /// The Eris baseline instead of the five phases: one-shot transactions sequenced by a
    /// switch, executed by each shard (a thread) in sequence order.
    pub eris: bool,
}

impl ServerConfig {
    /// The switch slot of (server, thread, lane).
    pub fn slot(&self, server: u8, thread: u16, lane: u8) -> u16 {
        let lanes = u32::from(self.mpl.lanes());
        let slot = (u32::from(server) * u32::from(self.threads) + u32::from(thread)) * lanes + u32::from(lane);
        u16::try_from(slot).unwrap_or(u16::MAX)
    }

    /// Checks that slots fit 16 bits and servers fit the bit sets.
    pub fn check(&self) -> Result<(), String> {
        let n = self.layout.servers();
        if !(2..=8).contains(&n) {
            return Err(format!("servers {n}: accepted 2..=8 (bit sets of one byte)"));
        }
        let slots = u32::from(n) * u32::from(self.threads) * u32::from(self.mpl.lanes());
        if slots > 1 << 16 {
            return Err(format!("servers × threads × lanes = {slots} slots; the switch has 65536"));
        }
        if self.threads == 0 || self.threads > 255 {
            return Err(format!("threads {}: accepted 1..=255", self.threads));
        }
        let w = &self.workload;
        if self.eris {
            let shards = usize::from(n) * usize::from(self.threads);
            if shards > crate::wire::ERIS_SHARDS {
                return Err(format!(
                    "eris: {n} servers × {} threads = {shards} shards, but the sequencer's 224-byte header holds {} sequence numbers (use threads <= {})",
                    self.threads,
                    crate::wire::ERIS_SHARDS,
                    crate::wire::ERIS_SHARDS / usize::from(n)
                ));
            }
            if w.tpcc_warehouses > 0 {
                return Err("eris runs independent one-shot transactions (YCSB-T) only, not TPC-C".into());
            }
        }
        if w.tpcc_warehouses > 0 {
            return if (0.0..=1.0).contains(&w.remote_items) && w.tpcc_warehouses <= 1_000 {
                Ok(())
            } else {
                Err("tpcc_warehouses 1..=1000 per server and remote_items in 0..=1".into())
            };
        }
        if w.partitions == 0 || w.partitions > n || w.keys == 0 || w.keys > 32 {
            return Err(format!("partitions {} and keys {}: accepted 1..={n} and 1..=32", w.partitions, w.keys));
        }
        if !(0.0..=1.0).contains(&w.write_fraction)
            || !(0.0..=1.0).contains(&w.read_only_fraction)
            || !(0.0..=1.0).contains(&w.blind_fraction)
            || w.theta < 0.0
            || w.records == 0
            || w.columns == 0
        {
            return Err("write_fraction in 0..=1, theta >= 0, records and columns > 0".into());
        }
        Ok(())
    }
}

/// A timer of a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerTimer {
    /// Thread `0`'s admission-control epoch ends.
    Epoch(u16),
    /// The attempt `attempt` of (thread, lane) may have timed out.
    Timeout(u16, u8, u32),
}

impl TraceBytes for ServerTimer {
    fn trace(&self, hash: &mut TraceHash) {
        match *self {
            ServerTimer::Epoch(t) => {
                hash.write(&[1]);
                hash.write(&t.to_be_bytes());
            }
            ServerTimer::Timeout(t, l, a) => {
                hash.write(&[2, l]);
                hash.write(&t.to_be_bytes());
                hash.write(&a.to_be_bytes());
            }
        }
    }
}

/// Why an attempt aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum AbortReason {
    /// A read found the record locked.
    ReadLocked,
    /// A participant failed to lock or validate.
    Fail,
    /// Resolved as aborted after a timeout.
    Timeout,
}

/// What a server reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerEvent {
    /// A client's transaction committed.
    Committed {
        /// Its id (the committing attempt's).
        txn: u64,
        /// From its first attempt's start.
        latency_ns: Nanos,
        /// Attempts before the one that committed.
        retries: u32,
        /// (key, version read) of every key.
        reads: Vec<(u64, u64)>,
        /// Whether it was read-only (no primary installs anything for it).
        read_only: bool,
    },
    /// An attempt aborted.
    Aborted(AbortReason),
    /// A primary installed a write: (txn, key, the version it overwrote).
    Installed(u64, u64, u64),
    /// A primary released the locks of an attempt held for this long.
    LockTime(Nanos),
    /// A thread's MPL after an epoch.
    Mpl(u16, u8),
    /// An attempt timed out.
    Timeout,
    /// A datagram was not understood.
    Rejected(&'static str),
}

/// A record of the primary shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The value.
    pub value: u64,
    /// The writer's transaction id (0: initial).
    pub version: u64,
    /// The attempt holding the lock: (slot, attempt).
    pub lock: Option<(u16, u32)>,
}

/// A client transaction in a lane.
#[derive(Clone, Debug)]
struct Txn {
    attempt: u32,
    /// (key, written).
    keys: Vec<(u64, bool)>,
    /// key → (value, version) read so far.
    reads: BTreeMap<u64, (u64, u64)>,
    /// Servers whose read replies are outstanding (bit set).
    awaiting: u8,
    /// Whether the commit protocol has started.
    committing: bool,
    first_start: Nanos,
    retries: u32,
    parts: Participants,
    /// FaSST: the client's gather counter and abort flag.
    counter: u8,
    aborted: bool,
    /// After a timeout: the resolution in progress.
    query: Option<Query>,
    /// Read-only: version copy, then validate and read (no execute phase).
    read_only: bool,
    /// Eris: the shards whose replies are outstanding.
    shards: u64,
    /// A blind write: lock, commit backup, commit primary (no execute, no validate).
    blind: bool,
}

/// A client's resolution of a timed-out attempt.
#[derive(Clone, Copy, Debug, Default)]
struct Query {
    /// Participants asked.
    asked: u8,
    /// Those that answered the query (or, once decided, acknowledged the decision).
    answered: u8,
    /// Whether a primary said it installed.
    installed: bool,
    /// Backups that said they applied the redo record.
    replicated: u8,
    /// The decision, once every participant answered: commit or not.
    decided: Option<bool>,
    /// Resends since the last progress (a new answer, or the decision): the backoff's exponent.
    resends: u32,
}

/// The most the interval between a client's resends of a query or decision grows to, in
/// multiples of `timeout_ns`.
pub const REQUERY_BACKOFF_CAP: u64 = 8;

/// How long a client waits for answers after sending a query or decision with `resends`
/// earlier sends since the last progress: `timeout_ns` doubled `resends` times, at most
/// [`REQUERY_BACKOFF_CAP`] × `timeout_ns`.
pub fn requery_interval(timeout_ns: Nanos, resends: u32) -> Nanos {
    let factor = 1u64.checked_shl(resends).unwrap_or(u64::MAX).min(REQUERY_BACKOFF_CAP);
    timeout_ns.saturating_mul(factor)
}

/// One worker thread's client side.
#[derive(Clone, Debug)]
struct Worker {
    lanes: Vec<Option<Txn>>,
    /// Attempts started per lane so far.
    attempts: Vec<u32>,
    admission: Admission,
    rng: ChaCha8Rng,
    /// Losses (timeouts) in this epoch.
    losses: u32,
    /// The server's commits at this thread's last epoch end.
    commits_at_epoch: u64,
}

/// A participant's state for one slot's newest attempt.
#[derive(Clone, Debug, Default)]
struct Part {
    attempt: u32,
    tag: u16,
    txn: u64,
    client: u8,
    thread: u8,
    coord: u8,
    retry: bool,
    parts: Participants,
    prepared: bool,
    aborted: bool,
    /// Frozen by a query: no more control messages for it.
    frozen: bool,
    /// Primary: writes of this shard.
    writes: Vec<(u64, u64)>,
    /// Primary: reads of this shard with their versions.
    reads: Vec<(u64, u64)>,
    /// Backup: writes it backs up.
    redo: Vec<(u64, u64)>,
    /// Backup: before-images of what it applied, for a rollback.
    undo: Vec<(u64, (u64, u64))>,
    locked: Vec<u64>,
    locked_at: Nanos,
    installed: bool,
    replicated: bool,
    /// Requests that came before the prepare.
    early: Vec<MsgType>,
}

/// The TPC-C generators of a server's threads (each its own stream over one database).
struct TpccStreams(Vec<Box<dyn pisadb_workload::Workload>>);

impl std::fmt::Debug for TpccStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TpccStreams({} threads)", self.0.len())
    }
}

/// A server host.
#[derive(Debug)]
pub struct Server {
    cfg: ServerConfig,
    tpcc: Option<TpccStreams>,
    zipf: Zipf<f64>,
    primary: BTreeMap<u64, Record>,
    backup: BTreeMap<u64, (u64, u64)>,
    workers: Vec<Worker>,
    parts: BTreeMap<u16, Part>,
    stopping: bool,
    /// Commits of this server's clients so far.
    commits: u64,
    /// Each server's last-epoch throughput as piggybacked (this one's own included).
    known: Vec<u32>,
    /// Eris: per local shard (thread), the next sequence number to execute and the
    /// transactions waiting for their turn.
    eris: Vec<(u32, BTreeMap<u32, crate::wire::Sequenced>)>,
}

/// The key of (server, record, column).
pub fn key_of(server: u8, record: u64, column: u64, columns: u64) -> u64 {
    (u64::from(server) << 40) | (record * columns + column)
}

/// The shard (server) of a key.
pub fn shard_of(key: u64) -> u8 {
    (key >> 40) as u8
}

fn bits(set: u8) -> impl Iterator<Item = u8> {
    (0..8u8).filter(move |s| set & (1 << s) != 0)
}

impl Server {
    /// A server; `cfg.check()` must hold.
    pub fn new(cfg: ServerConfig) -> Self {
        let w = &cfg.workload;
        let zipf = Zipf::new(w.records as f64, w.theta).unwrap_or_else(|_| Zipf::new(1.0, 0.0).expect("valid"));
        let lanes = usize::from(cfg.mpl.lanes());
        let max = cfg.mpl.lanes();
        let workers = (0..cfg.threads)
            .map(|t| Worker {
                lanes: vec![None; lanes],
                attempts: vec![0; lanes],
                admission: Admission::new(max),
                rng: ChaCha8Rng::seed_from_u64(pisadb_core::rng::splitmix64(
                    cfg.seed ^ (u64::from(cfg.id) << 32) ^ u64::from(t),
                )),
                losses: 0,
                commits_at_epoch: 0,
            })
            .collect();
        let n = usize::from(cfg.layout.servers());
        let tpcc = (w.tpcc_warehouses > 0).then(|| {
            let nodes = u16::from(cfg.layout.servers());
            let config = pisadb_workload::tpcc::TpccConfig {
                nodes,
                warehouses: w.tpcc_warehouses * nodes,
                remote_item_prob: w.remote_items,
                ..pisadb_workload::tpcc::TpccConfig::default()
            };
            // `check` made sure the configuration is valid.
            let db = pisadb_workload::tpcc::Tpcc::new(config, cfg.seed).expect("a valid TPC-C configuration");
            let seed = |t: u16| pisadb_core::rng::splitmix64(cfg.seed ^ (u64::from(cfg.id) << 32) ^ u64::from(t));
            TpccStreams((0..cfg.threads).map(|t| pisadb_workload::Workload::with_stream(&db, seed(t))).collect())
        });
        Server {
            tpcc,
            zipf,
            primary: BTreeMap::new(),
            backup: BTreeMap::new(),
            workers,
            parts: BTreeMap::new(),
            stopping: false,
            commits: 0,
            known: vec![0; n],
            eris: vec![(1, BTreeMap::new()); usize::from(cfg.threads)],
            cfg,
        }
    }

    /// The primary shard's records.
    pub fn primary(&self) -> &BTreeMap<u64, Record> {
        &self.primary
    }

    /// The backup copy of the previous shard: key → (value, version).
    pub fn backup(&self) -> &BTreeMap<u64, (u64, u64)> {
        &self.backup
    }

    /// Starts a new transaction in lane 0 of thread 0 as a worker would (draw its keys, send
    /// its reads); for the cost benchmarks.
    pub fn begin_one(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        self.workers[0].lanes[0] = None;
        self.start_lane(now, 0, 0, out);
    }

    /// Each thread's MPL now.
    pub fn mpls(&self) -> Vec<u8> {
        self.workers.iter().map(|w| self.mpl_of(w)).collect()
    }

    fn n(&self) -> u8 {
        self.cfg.layout.servers()
    }

    fn mpl_of(&self, w: &Worker) -> u8 {
        match self.cfg.mpl {
            Mpl::Static(n) => n.max(1),
            Mpl::Adaptive { .. } => w.admission.mpl,
        }
    }

    fn txn_id(&self, thread: u16, lane: u8, attempt: u32) -> u64 {
        ((u64::from(self.cfg.slot(self.cfg.id, thread, lane)) + 1) << 32) | u64::from(attempt)
    }

    fn tag(attempt: u32) -> u16 {
        (attempt % 65_535) as u16 + 1
    }

    fn send(&self, out: &mut HostOutbox<Self>, dst: u8, bytes: Vec<u8>) {
        out.cpu_ns += self.cfg.costs.stack_ns;
        out.sends.push(Send { dst: u16::from(dst), bytes });
    }

    fn class(&self, msg: MsgType, retry: bool) -> u8 {
        if self.cfg.priority {
            class_of(msg, retry)
        } else {
            1
        }
    }

    // ---- client side ----

    /// Draws a transaction's keys.
    /// A transaction's keys (key, written) and whether it is a blind write.
    fn draw(&mut self, thread: u16) -> (Vec<(u64, bool)>, bool) {
        if let Some(tpcc) = self.tpcc.as_mut() {
            return (draw_tpcc(tpcc.0[usize::from(thread)].as_mut(), self.cfg.id), false);
        }
        let w = self.cfg.workload.clone();
        let n = self.n();
        let rng = &mut self.workers[usize::from(thread)].rng;
        let mut servers: Vec<u8> = (0..n).collect();
        for i in 0..usize::from(w.partitions) {
            let j = rng.random_range(i..servers.len());
            servers.swap(i, j);
        }
        let mut keys: Vec<(u64, bool)> = Vec::with_capacity(usize::from(w.keys));
        while keys.len() < usize::from(w.keys) {
            let server = servers[keys.len() % usize::from(w.partitions)];
            let record = (self.zipf.sample(rng) as u64).saturating_sub(1).min(w.records - 1);
            let key = key_of(server, record, rng.random_range(0..w.columns), w.columns);
            if keys.iter().all(|&(k, _)| k != key) {
                keys.push((key, rng.random_bool(w.write_fraction)));
            }
        }
        let read_only = w.read_only_fraction > 0.0 && rng.random_bool(w.read_only_fraction);
        let blind = !read_only && w.blind_fraction > 0.0 && rng.random_bool(w.blind_fraction);
        if read_only {
            keys.iter_mut().for_each(|k| k.1 = false);
        } else if blind {
            keys.iter_mut().for_each(|k| k.1 = true);
        } else if keys.iter().all(|&(_, wr)| !wr) {
            keys[0].1 = true;
        }
        (keys, blind)
    }

    fn start_lane(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let (keys, blind) = self.draw(thread);
        let txn = Txn {
            attempt: 0,
            keys,
            reads: BTreeMap::new(),
            awaiting: 0,
            committing: false,
            first_start: now,
            retries: 0,
            parts: Participants::default(),
            counter: 0,
            aborted: false,
            query: None,
            read_only: false,
            shards: 0,
            blind,
        };
        let read_only = txn.keys.iter().all(|k| !k.1);
        let txn = Txn { read_only, ..txn };
        self.workers[usize::from(thread)].lanes[usize::from(lane)] = Some(txn);
        self.execute(now, thread, lane, out);
    }

    /// Starts a new attempt of the lane's transaction: the execute phase.
    fn execute(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let (t, l) = (usize::from(thread), usize::from(lane));
        self.workers[t].attempts[l] += 1;
        let attempt = self.workers[t].attempts[l];
        let slot = self.cfg.slot(self.cfg.id, thread, lane);
        let Some(txn) = self.workers[t].lanes[l].as_mut() else { return };
        txn.attempt = attempt;
        txn.reads.clear();
        txn.committing = false;
        txn.counter = 0;
        txn.aborted = false;
        txn.query = None;
        let retry = txn.retries > 0;
        let keys = txn.keys.clone();
        let servers = keys.iter().fold(0u8, |m, &(k, _)| m | (1 << shard_of(k)));
        txn.awaiting = servers;
        out.cpu_ns += self.cfg.costs.begin_ns;
        if self.cfg.eris {
            return self.eris_send(thread, lane, out);
        }
        if txn.read_only || txn.blind {
            // No execute phase: the participants copy their versions, or nothing is read
            // (§3.2.3).
            return self.commit(now, thread, lane, out);
        }
        for server in bits(servers) {
            let mut d = Data::new(MsgType::Read, slot, Self::tag(attempt), attempt, 0);
            d.client = self.cfg.id;
            d.thread = thread as u8;
            d.flags = if retry { FLAG_RETRY } else { 0 };
            d.items = keys
                .iter()
                .filter(|&&(k, _)| shard_of(k) == server)
                .map(|&(key, _)| Item { key, value: 0, version: 0, locked: false })
                .collect();
            self.send(out, server, d.datagram(u16::from(self.cfg.id), u16::from(server)));
        }
        if self.cfg.timeout_ns > 0 {
            out.timers.push((now + self.cfg.timeout_ns, ServerTimer::Timeout(thread, lane, attempt)));
        }
    }

    /// Eris: the shard of a key (its server's thread `hash(key) % threads`).
    fn eris_shard(&self, key: u64) -> u8 {
        let thread = pisadb_core::rng::splitmix64(key) % u64::from(self.cfg.threads);
        shard_of(key) * self.cfg.threads as u8 + thread as u8
    }

    /// Eris: the whole transaction in one message to the sequencer (through S0: the anchor).
    fn eris_send(&mut self, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let me = self.cfg.id;
        let slot = self.cfg.slot(me, thread, lane);
        let attempt = self.workers[usize::from(thread)].attempts[usize::from(lane)];
        let txn_id = self.txn_id(thread, lane, attempt);
        let Some(txn) = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_ref() else { return };
        let keys = txn.keys.clone();
        let mask = keys.iter().fold(0u64, |m, &(k, _)| m | (1 << self.eris_shard(k)));
        let mut h = crate::wire::SequencedHeader::read_from_bytes(&[0u8; crate::wire::SEQUENCED_BYTES][..])
            .expect("a header's worth of zeros");
        h.msg = MsgType::ErisTxn as u8;
        h.slot.set(slot);
        h.tag.set(self.cfg.threads);
        h.client = me;
        h.thread = thread as u8;
        h.attempt.set(attempt);
        h.txn.set(txn_id);
        h.mask.set(mask);
        if let Some(txn) = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_mut() {
            txn.shards = mask;
            txn.committing = true;
        }
        let anchor = self.cfg.layout.anchor(me) as u8;
        let q = crate::wire::Sequenced { header: h, keys };
        self.send(out, anchor, q.datagram(u16::from(me), u16::from(anchor)));
    }

    /// Eris: a sequenced transaction reaches a server: each of its shards here runs it in
    /// sequence order, waiting on gaps.
    fn eris_receive(&mut self, q: crate::wire::Sequenced, out: &mut HostOutbox<Self>) {
        let threads = self.cfg.threads as u8;
        let me = self.cfg.id;
        for t in 0..threads {
            let shard = me * threads + t;
            if q.header.mask.get() & (1 << shard) == 0 {
                continue;
            }
            let seq = q.header.seq[usize::from(shard)].get();
            self.eris[usize::from(t)].1.insert(seq, q.clone());
            loop {
                let (next, pending) = &mut self.eris[usize::from(t)];
                let Some(ready) = pending.remove(next) else { break };
                *next += 1;
                self.eris_execute(&ready, shard, out);
            }
        }
    }

    fn eris_execute(&mut self, q: &crate::wire::Sequenced, shard: u8, out: &mut HostOutbox<Self>) {
        let txn = q.header.txn.get();
        let mut reply = Data::new(MsgType::ErisReply, q.header.slot.get(), 1, q.header.attempt.get(), txn);
        reply.client = q.header.client;
        reply.thread = q.header.thread;
        reply.coord = shard;
        let mine: Vec<(u64, bool)> = q.keys.iter().copied().filter(|&(k, _)| self.eris_shard(k) == shard).collect();
        for (k, written) in mine {
            let r = self.primary.entry(k).or_default();
            reply.items.push(Item { key: k, value: r.value, version: r.version, locked: false });
            if written {
                out.events.push(ServerEvent::Installed(txn, k, r.version));
                r.value += 1;
                r.version = txn;
            }
        }
        out.cpu_ns += self.cfg.costs.handler_ns + self.cfg.costs.item_ns * reply.items.len() as u64;
        let client = q.header.client;
        self.send(out, client, reply.datagram(u16::from(self.cfg.id), u16::from(client)));
    }

    /// Eris: a shard's reply reaches the client.
    fn eris_reply(&mut self, now: Nanos, d: &Data, out: &mut HostOutbox<Self>) {
        let Some((thread, lane, txn)) = self.current(d.slot, d.attempt) else { return };
        txn.shards &= !(1u64 << d.coord);
        for item in &d.items {
            txn.reads.insert(item.key, (item.value, item.version));
        }
        if txn.shards == 0 {
            self.committed(now, thread, lane, out);
        }
    }

    fn lane_of(&self, slot: u16) -> Option<(u16, u8)> {
        let lanes = u32::from(self.cfg.mpl.lanes());
        let base = u32::from(self.cfg.id) * u32::from(self.cfg.threads) * lanes;
        let rel = u32::from(slot).checked_sub(base)?;
        let thread = u16::try_from(rel / lanes).ok()?;
        (thread < self.cfg.threads).then_some((thread, (rel % lanes) as u8))
    }

    fn current(&mut self, slot: u16, attempt: u32) -> Option<(u16, u8, &mut Txn)> {
        let (thread, lane) = self.lane_of(slot)?;
        let txn = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_mut()?;
        (txn.attempt == attempt).then_some((thread, lane, txn))
    }

    fn read_reply(&mut self, now: Nanos, d: &Data, from: u8, out: &mut HostOutbox<Self>) {
        let Some((thread, lane, txn)) = self.current(d.slot, d.attempt) else { return };
        if txn.committing != txn.read_only || txn.query.is_some() || txn.awaiting & (1 << from) == 0 {
            return;
        }
        txn.awaiting &= !(1 << from);
        let mut locked = false;
        for item in &d.items {
            txn.reads.insert(item.key, (item.value, item.version));
            locked |= item.locked;
        }
        if locked {
            out.events.push(ServerEvent::Aborted(AbortReason::ReadLocked));
            return self.retry(now, thread, lane, out);
        }
        if txn.awaiting == 0 && txn.read_only {
            self.committed(now, thread, lane, out);
        } else if txn.awaiting == 0 {
            self.commit(now, thread, lane, out);
        }
    }

    /// The execute phase is done: hand the participants their parts.
    fn commit(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let me = self.cfg.id;
        let slot = self.cfg.slot(me, thread, lane);
        let n = self.n();
        let coord = self.cfg.coord;
        let timeout = self.cfg.timeout_ns;
        let (attempt, keys, reads, retry, blind);
        {
            let Some(txn) = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_mut() else { return };
            txn.committing = true;
            let wp = txn.keys.iter().filter(|k| k.1).fold(0u8, |m, &(k, _)| m | (1 << shard_of(k)));
            // A blind write reads nothing: its write primaries stand in for the read primaries,
            // so gathering their `validate_ok` waits for every lock.
            let rp = if txn.blind { wp } else { txn.keys.iter().fold(0u8, |m, &(k, _)| m | (1 << shard_of(k))) };
            let wb = bits(wp).fold(0u8, |m, s| m | (1 << ((s + 1) % n)));
            txn.parts = Participants { wp, wb, rp, client: me };
            txn.awaiting = rp;
            attempt = txn.attempt;
            keys = if txn.blind { txn.keys.iter().map(|&(k, _)| (k, true)).collect() } else { txn.keys.clone() };
            blind = txn.blind;
            reads = txn.reads.clone();
            retry = txn.retries > 0;
        }
        let txn_id = self.txn_id(thread, lane, attempt);
        let parts =
            self.workers[usize::from(thread)].lanes[usize::from(lane)].as_ref().map(|t| t.parts).unwrap_or_default();
        let tag = Self::tag(attempt);
        let flags = if retry { FLAG_RETRY } else { 0 };
        if coord != Coordination::Client {
            let mut init = self.control(MsgType::Init, slot, tag, attempt, txn_id, thread, &parts, coord, retry);
            init.flags = flags;
            let anchor = self.cfg.layout.anchor(me) as u8;
            self.send(out, anchor, init.datagram(u16::from(me), u16::from(anchor)));
        }
        for server in bits(parts.wp | parts.wb | parts.rp) {
            let mut d = Data::new(MsgType::Prepare, slot, tag, attempt, txn_id);
            d.client = me;
            d.thread = thread as u8;
            d.flags = flags;
            d.coord = coord as u8;
            (d.wp, d.wb, d.rp) = (parts.wp, parts.wb, parts.rp);
            let backs = (server + n - 1) % n;
            let value = |k: u64| reads.get(&k).map_or(0, |r| r.0) + 1;
            let mut items: Vec<Item> = keys
                .iter()
                .filter(|&&(k, w)| {
                    w && (shard_of(k) == server || (parts.wb & (1 << server) != 0 && shard_of(k) == backs))
                })
                .map(|&(key, _)| Item { key, value: value(key), version: 0, locked: false })
                .collect();
            d.writes = items.len() as u8;
            items.extend(keys.iter().filter(|&&(k, _)| !blind && shard_of(k) == server).map(|&(key, _)| Item {
                key,
                value: 0,
                version: reads.get(&key).map_or(0, |r| r.1),
                locked: false,
            }));
            d.items = items;
            out.cpu_ns += self.cfg.costs.item_ns * d.items.len() as u64;
            self.send(out, server, d.datagram(u16::from(me), u16::from(server)));
        }
        if timeout > 0 {
            out.timers.push((now + timeout, ServerTimer::Timeout(thread, lane, attempt)));
        }
    }

    /// A lane's attempt may have timed out: retry an execute phase, else resolve (§3.5).
    fn timeout(&mut self, now: Nanos, thread: u16, lane: u8, attempt: u32, out: &mut HostOutbox<Self>) {
        let (t, l) = (usize::from(thread), usize::from(lane));
        let Some(txn) = self.workers[t].lanes[l].as_mut() else { return };
        if txn.attempt != attempt {
            return;
        }
        if !txn.committing && txn.query.is_none() {
            self.workers[t].losses += 1;
            out.events.push(ServerEvent::Timeout);
            return self.retry(now, thread, lane, out);
        }
        let parts = txn.parts;
        let query = txn.query.get_or_insert(Query { asked: parts.wp | parts.wb | parts.rp, ..Query::default() });
        let q = *query;
        query.resends = query.resends.saturating_add(1);
        if q.answered == 0 && q.decided.is_none() {
            self.workers[t].losses += 1;
            out.events.push(ServerEvent::Timeout);
        }
        let slot = self.cfg.slot(self.cfg.id, thread, lane);
        let msg = if q.decided.is_some() { MsgType::Resolve } else { MsgType::Query };
        for server in bits(q.asked & !q.answered) {
            let mut d = Data::new(msg, slot, Self::tag(attempt), attempt, 0);
            d.client = self.cfg.id;
            d.thread = thread as u8;
            d.wp = u8::from(q.decided == Some(true));
            self.send(out, server, d.datagram(u16::from(self.cfg.id), u16::from(server)));
        }
        let wait = requery_interval(self.cfg.timeout_ns, q.resends);
        out.timers.push((now + wait, ServerTimer::Timeout(thread, lane, attempt)));
    }

    /// Tells every participant of the lane's attempt that it aborted (and waits for them).
    fn resolve_abort(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let slot = self.cfg.slot(self.cfg.id, thread, lane);
        let me = self.cfg.id;
        let Some(txn) = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_mut() else { return };
        let asked = txn.parts.wp | txn.parts.wb | txn.parts.rp;
        txn.query = Some(Query { asked, decided: Some(false), ..Query::default() });
        let attempt = txn.attempt;
        for server in bits(asked) {
            let mut r = Data::new(MsgType::Resolve, slot, Self::tag(attempt), attempt, 0);
            r.client = me;
            r.thread = thread as u8;
            self.send(out, server, r.datagram(u16::from(me), u16::from(server)));
        }
        if self.cfg.timeout_ns > 0 {
            out.timers.push((now + self.cfg.timeout_ns, ServerTimer::Timeout(thread, lane, attempt)));
        }
    }

    /// A participant's answer to a query or a decision.
    fn query_answer(&mut self, now: Nanos, d: &Data, from: u8, out: &mut HostOutbox<Self>) {
        let Some((thread, lane, txn)) = self.current(d.slot, d.attempt) else { return };
        let wb = txn.parts.wb;
        let Some(q) = txn.query.as_mut() else { return };
        if q.answered & (1 << from) == 0 {
            // Progress: the next resend waits `timeout_ns` again.
            q.resends = 0;
        }
        match (d.msg, q.decided) {
            (MsgType::QueryReply, None) => {
                q.answered |= 1 << from;
                q.installed |= d.wp & 1 != 0;
                if d.wp & 2 != 0 {
                    q.replicated |= 1 << from;
                }
            }
            (MsgType::ResolveAck, Some(_)) => q.answered |= 1 << from,
            _ => return,
        }
        if q.answered != q.asked {
            return;
        }
        match q.decided {
            None => {
                // Committed iff a primary installed or every backup applied the redo record.
                let commit = q.installed || (wb != 0 && q.replicated & wb == wb);
                q.decided = Some(commit);
                q.answered = 0;
                q.resends = 0;
                let (asked, attempt) = (q.asked, d.attempt);
                for server in bits(asked) {
                    let mut r = Data::new(MsgType::Resolve, d.slot, d.tag, attempt, 0);
                    r.client = self.cfg.id;
                    r.thread = thread as u8;
                    r.wp = u8::from(commit);
                    self.send(out, server, r.datagram(u16::from(self.cfg.id), u16::from(server)));
                }
            }
            Some(true) => self.committed(now, thread, lane, out),
            Some(false) => {
                out.events.push(ServerEvent::Aborted(AbortReason::Timeout));
                self.retry(now, thread, lane, out);
            }
        }
    }

    /// A query or a decision reaches a participant.
    fn query_serve(&mut self, now: Nanos, d: &Data, from: u8, out: &mut HostOutbox<Self>) {
        let me = self.cfg.id;
        let slot = d.slot;
        match self.parts.get(&slot).map(|p| p.attempt) {
            Some(a) if a > d.attempt => return,
            Some(a) if a == d.attempt => {}
            _ => {
                if self.parts.contains_key(&slot) {
                    self.release(now, slot, out);
                }
                self.parts.insert(slot, Part { attempt: d.attempt, ..Part::default() });
            }
        }
        let part = self.parts.get_mut(&slot).expect("present");
        part.frozen = true;
        let mut reply = Data::new(
            if d.msg == MsgType::Query { MsgType::QueryReply } else { MsgType::ResolveAck },
            slot,
            d.tag,
            d.attempt,
            0,
        );
        reply.client = d.client;
        reply.thread = d.thread;
        if d.msg == MsgType::Query {
            reply.wp = u8::from(part.installed) | (u8::from(part.replicated) << 1);
        } else if d.wp == 1 {
            if part.prepared && part.parts.wp & (1 << me) != 0 && !part.installed {
                self.install(now, slot, out);
            }
        } else {
            let undo = std::mem::take(&mut part.undo);
            part.replicated = false;
            part.aborted = true;
            let txn = part.txn;
            for (k, before) in undo.into_iter().rev() {
                // Only if no later transaction has written the key since (its primary lock
                // was released by this same decision, possibly earlier than here).
                if self.backup.get(&k).map(|v| v.1) == Some(txn) {
                    self.backup.insert(k, before);
                }
            }
            self.release(now, slot, out);
        }
        out.cpu_ns += self.cfg.costs.handler_ns;
        self.send(out, from, reply.datagram(u16::from(me), u16::from(from)));
    }

    /// An admission-control epoch of `thread` ends.
    fn epoch(&mut self, now: Nanos, thread: u16, out: &mut HostOutbox<Self>) {
        let Mpl::Adaptive { epoch_ns, .. } = self.cfg.mpl else { return };
        let me = usize::from(self.cfg.id);
        let commits = self.commits;
        let w = &mut self.workers[usize::from(thread)];
        let own = commits - w.commits_at_epoch;
        w.commits_at_epoch = commits;
        // This server's throughput is what its threads see; the others' came piggybacked.
        self.known[me] = u32::try_from(own).unwrap_or(u32::MAX);
        let total: f64 = self.known.iter().map(|&k| f64::from(k)).sum();
        let w = &mut self.workers[usize::from(thread)];
        w.admission.epoch(total, w.losses > 0);
        w.losses = 0;
        out.events.push(ServerEvent::Mpl(thread, w.admission.mpl));
        self.fill_lanes(now, thread, out);
        if !self.stopping {
            out.timers.push((now + epoch_ns, ServerTimer::Epoch(thread)));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn control(
        &self,
        msg: MsgType,
        slot: u16,
        tag: u16,
        attempt: u32,
        txn: u64,
        thread: u16,
        parts: &Participants,
        coord: Coordination,
        retry: bool,
    ) -> Control {
        let mut c = Control::new(msg, slot, tag, attempt, txn);
        c.client = parts.client;
        c.thread = thread as u8;
        c.sender = self.cfg.id;
        c.class = self.class(msg, retry);
        c.flags = if retry { FLAG_RETRY } else { 0 };
        c.throughput.set(self.known[usize::from(self.cfg.id)]);
        c.entries = self.cfg.layout.entries(coord, parts, msg);
        c
    }

    fn retry(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let (t, l) = (usize::from(thread), usize::from(lane));
        if self.stopping {
            // No retry while draining; but an attempt aborted by a `fail` may have left locks
            // where that `fail` was lost, and no later attempt will release them: tell every
            // participant (the timeout path's decision, with its resends) before leaving.
            // (Any earlier attempt that reached the commit protocol may have: the participants
            // are the same over the attempts, and a decision for this attempt clears theirs.)
            let cleanup = self.workers[t].lanes[l].as_ref().is_some_and(|x| x.parts.wp != 0 && x.query.is_none());
            if cleanup {
                return self.resolve_abort(now, thread, lane, out);
            }
            self.workers[t].lanes[l] = None;
            return;
        }
        if let Some(txn) = self.workers[t].lanes[l].as_mut() {
            txn.retries += 1;
        }
        self.execute(now, thread, lane, out);
    }

    fn committed(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let (t, l) = (usize::from(thread), usize::from(lane));
        let Some(txn) = self.workers[t].lanes[l].take() else { return };
        self.commits += 1;
        out.events.push(ServerEvent::Committed {
            txn: self.txn_id(thread, lane, txn.attempt),
            latency_ns: now.saturating_sub(txn.first_start),
            retries: txn.retries,
            reads: txn.reads.iter().map(|(&k, &(_, v))| (k, v)).collect(),
            read_only: txn.read_only,
        });
        self.fill_lanes(now, thread, out);
    }

    /// Starts transactions in idle lanes up to the thread's MPL.
    fn fill_lanes(&mut self, now: Nanos, thread: u16, out: &mut HostOutbox<Self>) {
        if self.stopping {
            return;
        }
        let w = &self.workers[usize::from(thread)];
        let mpl = usize::from(self.mpl_of(w));
        let busy = w.lanes.iter().filter(|l| l.is_some()).count();
        let idle: Vec<u8> = (0..w.lanes.len()).filter(|&l| w.lanes[l].is_none()).map(|l| l as u8).collect();
        for lane in idle.into_iter().take(mpl.saturating_sub(busy)) {
            self.start_lane(now, thread, lane, out);
        }
    }

    /// The outcome (or, in FaSST, a participant's reply) reaches the client.
    fn at_client(&mut self, now: Nanos, c: &Control, out: &mut HostOutbox<Self>) {
        let (slot, attempt) = (c.slot.get(), c.attempt.get());
        let coord = self.cfg.coord;
        let Some((thread, lane, txn)) = self.current(slot, attempt) else { return };
        if !txn.committing || txn.query.is_some() {
            return;
        }
        let down = c.flags & FLAG_DOWN != 0;
        let msg = c.msg_type();
        if down || coord != Coordination::Client {
            match msg {
                MsgType::CommitOk => self.committed(now, thread, lane, out),
                MsgType::Fail => {
                    out.events.push(ServerEvent::Aborted(AbortReason::Fail));
                    self.retry(now, thread, lane, out);
                }
                _ => {}
            }
            return;
        }
        // FaSST: the client gathers and scatters.
        if txn.aborted {
            return;
        }
        let parts = txn.parts;
        let retry = txn.retries > 0;
        let scatter = if msg == MsgType::Fail {
            txn.aborted = true;
            parts.scatter(MsgType::Fail) & !(1 << self.cfg.id)
        } else {
            txn.counter += 1;
            if u32::from(txn.counter) < parts.gather(msg).count_ones() {
                return;
            }
            txn.counter = 0;
            parts.scatter(msg)
        };
        let mut next = *c;
        next.flags |= FLAG_DOWN;
        next.sender = self.cfg.id;
        next.class = self.class(msg, retry);
        for server in bits(scatter) {
            if server == self.cfg.id {
                continue;
            }
            self.send(out, server, next.datagram(u16::from(self.cfg.id), u16::from(server)));
        }
        if scatter & (1 << self.cfg.id) != 0 || msg == MsgType::Fail {
            self.down(now, &next, out);
        }
    }

    // ---- participant side ----

    fn serve_read(&mut self, now: Nanos, d: &Data, from: u8, out: &mut HostOutbox<Self>) {
        // A newer attempt of the slot: the client decided the older one aborted, so whatever
        // it still holds here (its `fail` was lost on the way) goes.
        if self.parts.get(&d.slot).is_some_and(|p| p.attempt < d.attempt) {
            self.release(now, d.slot, out);
            self.parts.remove(&d.slot);
        }
        let mut reply = Data::new(MsgType::ReadReply, d.slot, d.tag, d.attempt, 0);
        reply.client = d.client;
        reply.thread = d.thread;
        reply.flags = d.flags;
        reply.items = d
            .items
            .iter()
            .map(|i| {
                let r = self.primary.get(&i.key).copied().unwrap_or_default();
                Item { key: i.key, value: r.value, version: r.version, locked: r.lock.is_some() }
            })
            .collect();
        out.cpu_ns += self.cfg.costs.handler_ns + self.cfg.costs.item_ns * d.items.len() as u64;
        self.send(out, from, reply.datagram(u16::from(self.cfg.id), u16::from(from)));
    }

    /// Releases what `part` holds at this primary.
    fn release(&mut self, now: Nanos, slot: u16, out: &mut HostOutbox<Self>) {
        let Some(part) = self.parts.get_mut(&slot) else { return };
        let owner = (slot, part.attempt);
        let locked = std::mem::take(&mut part.locked);
        if !locked.is_empty() {
            out.events.push(ServerEvent::LockTime(now.saturating_sub(part.locked_at)));
        }
        for key in locked {
            if let Some(r) = self.primary.get_mut(&key) {
                if r.lock == Some(owner) {
                    r.lock = None;
                }
            }
        }
    }

    fn prepare(&mut self, now: Nanos, d: &Data, out: &mut HostOutbox<Self>) {
        let me = self.cfg.id;
        let slot = d.slot;
        let existing = self.parts.get(&slot).map(|p| (p.attempt, p.prepared));
        match existing {
            Some((a, _)) if a > d.attempt => return,
            Some((a, true)) if a == d.attempt => return,
            Some((a, _)) if a < d.attempt => {
                self.release(now, slot, out);
                self.parts.remove(&slot);
            }
            _ => {}
        }
        let part = self.parts.entry(slot).or_insert_with(|| Part { attempt: d.attempt, ..Part::default() });
        if part.aborted || part.frozen {
            part.prepared = true;
            return;
        }
        let backs = (me + self.cfg.layout.servers() - 1) % self.cfg.layout.servers();
        part.tag = d.tag;
        part.txn = d.txn;
        part.client = d.client;
        part.thread = d.thread;
        part.coord = d.coord;
        part.retry = d.flags & FLAG_RETRY != 0;
        part.parts = Participants { wp: d.wp, wb: d.wb, rp: d.rp, client: d.client };
        part.prepared = true;
        let (writes, reads) = d.items.split_at(usize::from(d.writes));
        part.writes = writes.iter().filter(|i| shard_of(i.key) == me).map(|i| (i.key, i.value)).collect();
        part.redo = writes
            .iter()
            .filter(|i| shard_of(i.key) == backs && d.wb & (1 << me) != 0)
            .map(|i| (i.key, i.value))
            .collect();
        part.reads = reads.iter().map(|i| (i.key, i.version)).collect();
        let early = std::mem::take(&mut part.early);
        out.cpu_ns += self.cfg.costs.prepare_ns + self.cfg.costs.item_ns * d.items.len() as u64;
        if d.wp == 0 {
            self.version_copy(now, slot, out);
        } else if d.wp & (1 << me) != 0 {
            self.lock(now, slot, out);
        }
        for msg in early {
            self.phase(now, slot, msg, out);
        }
    }

    /// Version copy of a read-only transaction at a read primary: the versions now (a locked
    /// record fails at once).
    fn version_copy(&mut self, now: Nanos, slot: u16, out: &mut HostOutbox<Self>) {
        let Some(part) = self.parts.get(&slot) else { return };
        let copied: Option<Vec<(u64, u64)>> = part
            .reads
            .iter()
            .map(|&(k, _)| {
                let r = self.primary.get(&k).copied().unwrap_or_default();
                r.lock.is_none().then_some((k, r.version))
            })
            .collect();
        match copied {
            Some(reads) => {
                self.parts.get_mut(&slot).expect("present").reads = reads;
                self.reply(now, slot, MsgType::VersionCopyOk, out);
            }
            None => self.fail(now, slot, out),
        }
    }

    /// Lock phase at a write primary.
    fn lock(&mut self, now: Nanos, slot: u16, out: &mut HostOutbox<Self>) {
        let Some(part) = self.parts.get(&slot) else { return };
        let owner = (slot, part.attempt);
        let version_read = |k: u64| part.reads.iter().find(|r| r.0 == k).map_or(0, |r| r.1);
        // A blind write read nothing, so there is no version to hold it to.
        let blind = part.reads.is_empty();
        let ok = part.writes.iter().all(|&(k, _)| {
            let r = self.primary.get(&k).copied().unwrap_or_default();
            r.lock.is_none() && (blind || r.version == version_read(k))
        });
        let keys: Vec<u64> = part.writes.iter().map(|w| w.0).collect();
        if ok {
            for &k in &keys {
                self.primary.entry(k).or_default().lock = Some(owner);
            }
            let part = self.parts.get_mut(&slot).expect("present");
            part.locked = keys;
            part.locked_at = now;
            if blind {
                // No validate phase: locked is validated.
                return self.reply(now, slot, MsgType::ValidateOk, out);
            }
            if part.parts.rp == 1 << self.cfg.id {
                // The validate phase needs only this participant (a single-shard
                // transaction, §3.2.3): validate now, no coordination round.
                return self.phase(now, slot, MsgType::LockOk, out);
            }
            self.reply(now, slot, MsgType::LockOk, out);
        } else {
            self.fail(now, slot, out);
        }
    }

    fn fail(&mut self, now: Nanos, slot: u16, out: &mut HostOutbox<Self>) {
        self.release(now, slot, out);
        if let Some(p) = self.parts.get_mut(&slot) {
            p.aborted = true;
        }
        self.reply(now, slot, MsgType::Fail, out);
    }

    /// Sends a participant's phase result to the coordinator.
    fn reply(&mut self, now: Nanos, slot: u16, msg: MsgType, out: &mut HostOutbox<Self>) {
        let Some(p) = self.parts.get(&slot) else { return };
        let coord = Coordination::from_u8(p.coord);
        let c = self.control(msg, slot, p.tag, p.attempt, p.txn, u16::from(p.thread), &p.parts, coord, p.retry);
        let me = self.cfg.id;
        if coord == Coordination::Client && p.client == me {
            // The client is on this server: no network between them.
            return self.at_client(now, &c, out);
        }
        let dst = if coord == Coordination::Client { p.client } else { self.cfg.layout.anchor(me) as u8 };
        self.send(out, dst, c.datagram(u16::from(me), u16::from(dst)));
    }

    /// A request from the coordinator (`FLAG_DOWN`).
    fn down(&mut self, now: Nanos, c: &Control, out: &mut HostOutbox<Self>) {
        let (slot, attempt) = (c.slot.get(), c.attempt.get());
        let msg = c.msg_type();
        if c.client == self.cfg.id && matches!(msg, MsgType::CommitOk | MsgType::Fail) {
            self.at_client(now, c, out);
        }
        if msg == MsgType::CommitOk {
            return;
        }
        match self.parts.get(&slot).map(|p| p.attempt) {
            Some(a) if a > attempt => return,
            Some(a) if a == attempt => {}
            _ => {
                // Before the prepare (or a newer attempt's first news): a placeholder.
                if self.parts.contains_key(&slot) {
                    self.release(now, slot, out);
                }
                self.parts.insert(slot, Part { attempt, ..Part::default() });
            }
        }
        let part = self.parts.get_mut(&slot).expect("present");
        if part.frozen {
            return;
        }
        if msg == MsgType::Fail {
            self.release(now, slot, out);
            if let Some(p) = self.parts.get_mut(&slot) {
                p.aborted = true;
            }
            return;
        }
        if !part.prepared {
            part.early.push(msg);
            return;
        }
        self.phase(now, slot, msg, out);
    }

    /// The phase that the scattered `msg` starts, at this participant.
    fn phase(&mut self, now: Nanos, slot: u16, msg: MsgType, out: &mut HostOutbox<Self>) {
        let me = self.cfg.id;
        let Some(part) = self.parts.get(&slot) else { return };
        if part.aborted || part.frozen {
            return;
        }
        let owner = (slot, part.attempt);
        match msg {
            MsgType::LockOk if part.parts.rp & (1 << me) != 0 => {
                out.cpu_ns += self.cfg.costs.item_ns * part.reads.len() as u64;
                let ok = part.reads.iter().all(|&(k, v)| {
                    let r = self.primary.get(&k).copied().unwrap_or_default();
                    r.version == v && (r.lock.is_none() || r.lock == Some(owner))
                });
                if ok {
                    self.reply(now, slot, MsgType::ValidateOk, out);
                } else {
                    self.fail(now, slot, out);
                }
            }
            MsgType::VersionCopyOk if part.parts.rp & (1 << me) != 0 => {
                out.cpu_ns += self.cfg.costs.item_ns * part.reads.len() as u64;
                let items: Option<Vec<Item>> = part
                    .reads
                    .iter()
                    .map(|&(k, v)| {
                        let r = self.primary.get(&k).copied().unwrap_or_default();
                        (r.version == v && r.lock.is_none()).then_some(Item {
                            key: k,
                            value: r.value,
                            version: v,
                            locked: false,
                        })
                    })
                    .collect();
                let Some(items) = items else { return self.fail(now, slot, out) };
                let mut d = Data::new(MsgType::ReadReply, slot, part.tag, part.attempt, part.txn);
                d.client = part.client;
                d.thread = part.thread;
                d.items = items;
                let client = part.client;
                self.send(out, client, d.datagram(u16::from(me), u16::from(client)));
            }
            MsgType::ValidateOk if part.parts.wb & (1 << me) != 0 && !part.replicated => {
                let txn = part.txn;
                let redo = part.redo.clone();
                out.cpu_ns += self.cfg.costs.item_ns * redo.len() as u64;
                let undo = redo.iter().map(|&(k, v)| (k, self.backup.insert(k, (v, txn)).unwrap_or((0, 0)))).collect();
                let part = self.parts.get_mut(&slot).expect("present");
                part.undo = undo;
                part.replicated = true;
                self.reply(now, slot, MsgType::ReplicateOk, out);
            }
            MsgType::ReplicateOk if part.parts.wp & (1 << me) != 0 && !part.installed => {
                self.install(now, slot, out);
                self.reply(now, slot, MsgType::CommitOk, out);
            }
            _ => {}
        }
    }

    /// Commit primary: install the writes, unlock.
    fn install(&mut self, now: Nanos, slot: u16, out: &mut HostOutbox<Self>) {
        let Some(part) = self.parts.get(&slot) else { return };
        let (txn, writes) = (part.txn, part.writes.clone());
        out.cpu_ns += self.cfg.costs.item_ns * writes.len() as u64;
        for (k, v) in writes {
            let r = self.primary.entry(k).or_default();
            out.events.push(ServerEvent::Installed(txn, k, r.version));
            r.value = v;
            r.version = txn;
        }
        self.release(now, slot, out);
        if let Some(p) = self.parts.get_mut(&slot) {
            p.installed = true;
        }
    }
}

/// A TPC-C transaction's keys: each distinct tuple once, written if any operation writes it,
/// on the server its warehouse lives on (`table << 32 | row` within the server). Inserts are
/// left out (fresh rows: they conflict with nothing) and values follow this crate's
/// read-modify-write rule, not TPC-C's arithmetic: the conflicts are TPC-C's, the invariants
/// are not checked.
fn draw_tpcc(gen: &mut dyn pisadb_workload::Workload, home: u8) -> Vec<(u64, bool)> {
    let parts = gen.partitioning();
    let txn = gen.next_txn(u16::from(home));
    let mut keys: Vec<(u64, bool)> = Vec::with_capacity(txn.txn.ops.len());
    for op in &txn.txn.ops {
        let server = parts.node_of(op.key) as u8;
        let key = (u64::from(server) << 40) | (u64::from(op.key.table) << 32) | (op.key.row & 0xffff_ffff);
        let writes = op.kind != pisadb_core::OpKind::Read;
        match keys.iter_mut().find(|k| k.0 == key) {
            Some(k) => k.1 |= writes,
            None => keys.push((key, writes)),
        }
    }
    // NewOrder touches at most 4 + 15 × 3 = 49 distinct tuples.
    keys.truncate(crate::wire::MAX_KEYS);
    keys
}

/// The client thread a datagram names (its handler's core).
fn thread_of(bytes: &[u8]) -> Option<u16> {
    let payload = bytes.get(pisadb_wire::FRAME_BYTES..)?;
    // Control: msg, flags, slot (2), tag (2), client, thread; data: msg, slot, tag, attempt
    // (4), txn (8), client, thread.
    let at = if MsgType::is_control_byte(*payload.first()?) { 7 } else { 18 };
    payload.get(at).map(|&t| u16::from(t))
}

impl Host for Server {
    type Timer = ServerTimer;
    type Log = ();
    type Event = ServerEvent;

    fn cores(&self) -> u16 {
        self.cfg.threads
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        for thread in 0..self.cfg.threads {
            self.fill_lanes(now, thread, out);
            if let Mpl::Adaptive { epoch_ns, .. } = self.cfg.mpl {
                out.timers.push((now + epoch_ns, ServerTimer::Epoch(thread)));
            }
        }
    }

    fn route(&self, bytes: &[u8]) -> Route {
        // An Eris transaction runs on the first of this server's shards it names.
        if let Ok((_, Message::Sequenced(q))) = Message::open(bytes) {
            let threads = self.cfg.threads as u8;
            let first = (0..threads).find(|t| q.header.mask.get() & (1 << (self.cfg.id * threads + t)) != 0);
            return first.map_or(Route::AnyCore, |t| Route::Core(u16::from(t)));
        }
        match thread_of(bytes) {
            Some(t) if t < self.cfg.threads => Route::Core(t),
            _ => Route::AnyCore,
        }
    }

    fn sorts_receive_batches(&self) -> bool {
        // §3.4.1: with semantic priority, a server drains its receive queue and handles the
        // batch by class (the driver sorts; the classes are the wire's, as the switches use).
        self.cfg.priority
    }

    fn receive_class(&self, bytes: &[u8]) -> u8 {
        crate::wire::classify(bytes)
    }

    fn timer_core(&self, timer: &ServerTimer) -> u16 {
        match *timer {
            ServerTimer::Epoch(t) | ServerTimer::Timeout(t, _, _) => t.min(self.cfg.threads - 1),
        }
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        out.cpu_ns += self.cfg.costs.stack_ns;
        let (frame, msg) = match Message::open(bytes) {
            Ok(m) => m,
            Err(e) => return out.events.push(ServerEvent::Rejected(e.reason())),
        };
        let from = u8::try_from(frame.src).unwrap_or(u8::MAX);
        match msg {
            Message::Control(c) => {
                if let Some(k) = self.known.get_mut(usize::from(c.sender)) {
                    if c.sender != self.cfg.id {
                        *k = c.throughput.get();
                    }
                }
                out.cpu_ns += self.cfg.costs.handler_ns;
                if c.flags & FLAG_DOWN != 0 {
                    self.down(now, &c, out);
                } else {
                    self.at_client(now, &c, out);
                }
            }
            Message::Data(_) if from >= self.n() => out.events.push(ServerEvent::Rejected("unknown_source")),
            Message::Data(d) => match d.msg {
                MsgType::Read => self.serve_read(now, &d, from, out),
                MsgType::ReadReply => {
                    out.cpu_ns += self.cfg.costs.handler_ns;
                    self.read_reply(now, &d, from, out)
                }
                MsgType::Prepare => self.prepare(now, &d, out),
                MsgType::Query | MsgType::Resolve => self.query_serve(now, &d, from, out),
                MsgType::QueryReply | MsgType::ResolveAck => {
                    out.cpu_ns += self.cfg.costs.handler_ns;
                    self.query_answer(now, &d, from, out)
                }
                MsgType::ErisReply => {
                    out.cpu_ns += self.cfg.costs.handler_ns;
                    self.eris_reply(now, &d, out)
                }
                _ => out.events.push(ServerEvent::Rejected("unexpected_type")),
            },
            Message::Sequenced(q) => {
                out.cpu_ns += self.cfg.costs.handler_ns;
                self.eris_receive(q, out)
            }
        }
    }

    fn handle_timer(&mut self, now: Nanos, timer: ServerTimer, out: &mut HostOutbox<Self>) {
        match timer {
            ServerTimer::Epoch(t) => self.epoch(now, t, out),
            ServerTimer::Timeout(t, l, a) => self.timeout(now, t, l, a, out),
        }
    }

    fn stop(&mut self) {
        self.stopping = true;
    }

    fn is_idle(&self) -> bool {
        self.workers.iter().all(|w| w.lanes.iter().all(|l| l.is_none()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_routed_to_the_thread_it_names() {
        let mut c = Control::new(MsgType::LockOk, 1, 1, 1, 1);
        c.thread = 17;
        c.class = 2;
        c.sender = 5;
        assert_eq!(thread_of(&c.datagram(0, 1)), Some(17));
        let mut d = Data::new(MsgType::Prepare, 1, 1, 1, 1);
        d.thread = 13;
        assert_eq!(thread_of(&d.datagram(0, 1)), Some(13));
    }

    #[test]
    fn the_requery_interval_doubles_per_resend_and_caps_at_eight_timeouts() {
        let t = 20_000_000;
        let waits: Vec<Nanos> = (0..6).map(|r| requery_interval(t, r)).collect();
        assert_eq!(waits, vec![t, 2 * t, 4 * t, 8 * t, 8 * t, 8 * t]);
        assert_eq!(requery_interval(t, u32::MAX), REQUERY_BACKOFF_CAP * t, "capped however many resends");
        assert_eq!(requery_interval(0, 3), 0, "no timeout, no wait");
    }
}
