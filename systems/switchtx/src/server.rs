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
//! redo. The decision is taken as soon as one primary says it installed or every backup has
//! answered (a primary installs only after every backup applied the redo, and a frozen backup
//! that has not never will), so a silent or crashed primary does not hold it up: its backup
//! answers for it. The client then tells everyone the outcome (`Resolve`), which finishes or
//! rolls back, and waits for every acknowledgement before the lane moves on.
//! Query and decision are resent to those that have not answered, first after `timeout_ns`,
//! then after twice as long each time no new answer came, up to [`REQUERY_BACKOFF_CAP`] times
//! `timeout_ns` ([`requery_interval`]); an answer (or the decision) starts the doubling over.
//! Without the backoff, when latency nears the timeout the resends add load that makes more
//! attempts time out. The intervals are exact (no jitter): the run stays deterministic.
//!
//! **Retry backoff.** An attempt that timed out (in its execute phase, or resolved as
//! aborted) is not retried at once: the lane pauses (whatever still arrives for the old
//! attempt is ignored) for [`retry_backoff`]: `timeout_ns` doubled per timeout its thread has
//! had in a row since its last commit, capped at [`RETRY_BACKOFF_CAP`] × `timeout_ns`, times a
//! jitter in `[1/2, 1)` drawn from the thread's own seeded stream (not the workload's, whose
//! draws therefore do not move). Retrying at once added load exactly when latency was near the
//! timeout; in real mode at a 20 ms timeout that collapsed whole runs to a few commits/s.
//! Listing 1's MPL reset already admits fewer transactions after a loss, but only at the next
//! epoch, and not at all with a static MPL.
//!
//! **Server crashes** (§3.5; `durable`). The paper recovers a failed server from replicas
//! alone: a backup is promoted, and a new server gathers the failed coordinator's transaction
//! states from the participants. Here a server also writes a write-ahead log
//! ([`crate::wal`]: its client attempts entering and leaving the commit protocol, its locks,
//! installs, applied redo records, rollbacks and query answers), durable before any message of
//! the same handler leaves, and a crashed server restarts from it ([`Server::recover`]):
//!
//! - *participant recovery*: the primary shard, the backup copy, the locks and every
//!   participant state a query may ask about come back as they were answered; what was not
//!   logged (a read primary's copied versions, a pure backup's redo record not yet applied, a
//!   request that overtook its `prepare`) is lost, and its transaction times out and is
//!   decided aborted, which is safe because none of it can have let a primary install;
//! - *coordinator recovery*: the restarted server itself plays the paper's "new server": each
//!   lane whose last logged attempt has no counted outcome asks every participant and decides
//!   by the rule above; a lane whose last attempt was aborted tells its participants again
//!   (the `fail` may have been lost where a participant still holds locks); new attempts start
//!   above every logged one, so no transaction id (slot, attempt) is reused.
//!
//! The restarted server rejoins as what it was (primary of its shard, backup of the previous
//! one) unless it was removed meanwhile (below): while it was down no other server wrote its
//! shard, so there is nothing to catch up. While it is down, transactions that touch it time
//! out; those that need it only as a primary (or read primary) are decided without it, from
//! its backup's answer, and the live participants' locks are released; the restarted server
//! learns the decision from the client's resent `Resolve`.
//!
//! **Backup promotion** (§3.5: "SwitchTx can select a backup participant as the new primary
//! participant"; with `lease_ns`, [`crate::config`]). A configuration manager grants leases
//! and removes a server whose lease lapsed; every grant carries the shard map. A server acts
//! as a primary or backup only while it holds a lease, and only in the roles its map gives it:
//! a prepare whose roles disagree with its map fails, a read of a shard it does not lead reads
//! as locked. When a server's map makes it primary of the shard it backed up it takes the
//! shard over (`Server::take_over`): its backup copy becomes the primary store; keys whose
//! redo record it applied for an attempt it cannot know decided stay locked by that attempt
//! (`Part::promoted`) while it resolves the attempt itself, with the same query as a client;
//! a redo record it had not applied yet never will be (that attempt cannot have committed, and
//! the part answers "aborted"). A shard left without a backup commits straight after
//! validation.
//!
//! Transactions in flight when a server fails are decided without it (`Query::hear`): once
//! it is out of the map, the rule no longer waits for its answer as a backup (commit iff a
//! primary installed, or a backup applied its redo record and every remaining write
//! participant holds its part; FaRM's rule), and the participants of a removed client's
//! attempts resolve those themselves. Resolvers and participants carry their map's epoch, and
//! a participant answers and acts only at its own epoch, so two resolvers under different maps
//! never carry out different outcomes. The removed server, when it restarts, learns from its
//! first grant that it is out: it answers for what it took part in (from its log), resolves
//! its own lanes under the new map, and starts nothing new. Not built: re-replicating a shard
//! that lost its backup, and a removed server rejoining.

use crate::admission::Admission;
use crate::config::ShardMap;
pub use crate::costs::{Costs, COSTS};
use crate::tree::{Coordination, Layout, Participants};
use crate::wal::{LoggedParts, WalRecord};
use crate::wire::{class_of, Control, Data, Item, Message, MsgType, FLAG_DOWN, FLAG_RETRY};
use pisadb_core::{Nanos, TraceBytes, TraceHash};
use pisadb_host::{Host, HostOutbox, Route, Send};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use zerocopy::FromBytes;

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
    /// Whether the server writes its write-ahead log ([`crate::wal`]): needed to survive a
    /// crash; off where no server crashes (the paper's system logs nothing).
    pub durable: bool,
    /// How long a lease from the configuration manager lasts ([`crate::config`]); a server
    /// whose lease lapsed for longer than this and a quarter is removed and its shard served
    /// by its backup. 0: no leases, no manager, the initial shard map for good.
    pub lease_ns: Nanos,
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
        if self.lease_ns > 0 && (!self.durable || self.timeout_ns == 0 || self.eris) {
            return Err(format!(
                "lease_us {}: promotion needs durable=true and timeout_us > 0, and eris has no backups to promote (a removed server answers for its in-flight transactions from its log, and they end by timeouts)",
                self.lease_ns / 1_000
            ));
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
    /// The lane whose attempt `attempt` timed out and was resolved as aborted has backed off
    /// long enough: retry ([`retry_backoff`]).
    Retry(u16, u8, u32),
    /// Time to renew the lease (and, at the manager, to look for lapsed ones).
    Lease,
    /// A promoted primary's resolution of (slot, attempt) may need its query or decision sent
    /// again.
    Recover(u16, u32),
    /// Thread `0`'s clients may start transactions (the server's first lease grant came).
    Fill(u16),
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
            ServerTimer::Retry(t, l, a) => {
                hash.write(&[3, l]);
                hash.write(&t.to_be_bytes());
                hash.write(&a.to_be_bytes());
            }
            ServerTimer::Lease => hash.write(&[4]),
            ServerTimer::Recover(slot, a) => {
                hash.write(&[5]);
                hash.write(&slot.to_be_bytes());
                hash.write(&a.to_be_bytes());
            }
            ServerTimer::Fill(t) => {
                hash.write(&[6]);
                hash.write(&t.to_be_bytes());
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
    /// Backing off after a timeout: its attempt is over, the next has not started; nothing
    /// that arrives for the attempt is taken.
    paused: bool,
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
    /// A participant had moved on to a later attempt of the slot (only a promoted primary's
    /// resolution of an old attempt hears this: [`Query::hear`]).
    superseded: bool,
    /// A participant had carried out an abort of the attempt (or failed it).
    aborted: bool,
    /// The decision was known before any answer (a participant failed the attempt): kept
    /// under a newer map, where a decision taken by the rule is taken again.
    certain: bool,
    /// The shard-map epoch the answers were gathered under: a resolver whose map changes
    /// starts over ([`Query::follow`]).
    epoch: u32,
    /// What a participant's "superseded" answer decides: only a participant's own resolution
    /// asks about an attempt its client may have moved on from, and its own part tells which
    /// way that went ([`Server::start_recovery`]).
    if_superseded: bool,
    /// Participants that hold their part of the attempt (a primary its locked writes, a
    /// backup its redo record), so could carry out a commit.
    prepared: u8,
    /// The decision, once every participant answered: commit or not.
    decided: Option<bool>,
    /// Resends since the last progress (a new answer, or the decision): the backoff's exponent.
    resends: u32,
}

/// What a resolution does after an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Decided (commit or not): tell every participant.
    Decided(bool),
    /// Every participant carried the decision out.
    Done(bool),
}

/// A participant's answer to a query, as bits of its `wp` byte.
mod answer {
    /// A primary installed the attempt's writes.
    pub(super) const INSTALLED: u8 = 1;
    /// A backup applied its redo record.
    pub(super) const REPLICATED: u8 = 2;
    /// The participant has moved on to a later attempt of the slot.
    pub(super) const SUPERSEDED: u8 = 4;
    /// The resolver's shard map is older than the participant's: nothing was done.
    pub(super) const STALE_RESOLVER: u8 = 8;
    /// The participant carried out an abort of the attempt (or failed it).
    pub(super) const ABORTED: u8 = 16;
    /// The participant holds its part (locked writes or a redo record).
    pub(super) const PREPARED: u8 = 32;
    /// The participant's shard map is older than the resolver's: nothing was done.
    pub(super) const BEHIND: u8 = 64;
}

impl Query {
    /// Takes participant `from`'s answer (`msg` with its [`answer`] bits `state`) to the
    /// resolution of an attempt with `parts`, under a shard map whose members are `members`.
    ///
    /// While every write participant is in the map, the decision needs only a primary that
    /// installed, or every backup's answer (§3.5: committed iff some primary says committed or
    /// every backup does). A primary installs only once every backup has applied the redo
    /// record, and a frozen backup that has not applied it never will; so a crashed or silent
    /// primary (or read primary) does not hold the decision up: its backup answers for it, and
    /// the live participants release their locks. Where the shards written have no backup left
    /// ([`crate::config`]), every write primary's answer is needed instead.
    ///
    /// Once a write participant has been removed from the map its answer never comes, and the
    /// decision is taken from the others (FaRM's rule): commit if a primary installed, or if a
    /// backup applied its redo record (so validation passed everywhere) and every remaining
    /// write participant holds its part and none carried out an abort; else abort. Resolvers
    /// of one attempt may differ in rule only across maps, and a participant answers and acts
    /// only for a resolver at its own map's epoch, so an older resolver's decision is either
    /// carried out where a newer one will see it, or refused (and the older resolver starts
    /// over under the newer map).
    ///
    /// A participant that moved on to a later attempt of the slot answers "superseded": its
    /// client decided this attempt and went on. Only a participant resolving an attempt itself
    /// (a promoted primary, or one whose client was removed) asks about such an old attempt,
    /// and its own part tells the outcome: a client moves on from a commit only once every
    /// write primary installed (or carried out the decision) and from an abort only once every
    /// participant acknowledged it, so an attempt whose resolver holds an applied redo record
    /// or installed writes and saw no abort was committed, and one whose resolver is a write
    /// primary that did not install was not. The acknowledgements of the decision are awaited
    /// from all members.
    fn hear(&mut self, msg: MsgType, state: u8, from: u8, parts: &Participants, members: u8) -> Option<Step> {
        if state & (answer::STALE_RESOLVER | answer::BEHIND) != 0 {
            return None;
        }
        if self.answered & (1 << from) == 0 {
            // Progress: the next resend waits `timeout_ns` again.
            self.resends = 0;
        }
        if members & (1 << from) == 0 && (parts.wp | parts.wb) & !members != 0 {
            // A removed server's state no longer counts (it may have been cut off, not
            // crashed, and still answers): under the rule for removed participants only the
            // members' answers do.
            return None;
        }
        match (msg, self.decided) {
            (MsgType::QueryReply, None) => {
                self.answered |= 1 << from;
                self.installed |= state & answer::INSTALLED != 0;
                if state & answer::REPLICATED != 0 {
                    self.replicated |= 1 << from;
                }
                if state & answer::PREPARED != 0 {
                    self.prepared |= 1 << from;
                }
                self.superseded |= state & answer::SUPERSEDED != 0;
                self.aborted |= state & answer::ABORTED != 0;
            }
            (MsgType::ResolveAck, Some(_)) => self.answered |= 1 << from,
            _ => return None,
        }
        let (wp, wb) = (parts.wp, parts.wb);
        let writers = wp | wb;
        match self.decided {
            None if self.superseded => Some(self.decide(self.if_superseded && !self.aborted)),
            None if writers & !members == 0 => {
                let heard_all = if wb != 0 { self.answered & wb == wb } else { self.answered & wp == wp };
                if !(self.installed || heard_all) {
                    return None;
                }
                // Committed iff a primary installed or every backup applied the redo record.
                let commit = self.installed || (wb != 0 && self.replicated & wb == wb);
                Some(self.decide(commit))
            }
            None => {
                let live = writers & members;
                if !(self.installed || self.aborted || self.answered & live == live) {
                    return None;
                }
                let validated = self.replicated != 0 && self.prepared & live == live && !self.aborted;
                Some(self.decide(self.installed || validated))
            }
            // A removed participant's acknowledgement never comes (nor is it needed: its copy
            // no longer counts).
            Some(commit) => (self.answered & members == self.asked & members).then_some(Step::Done(commit)),
        }
    }

    /// Follows the resolver's map to `epoch`: answers gathered under another map do not count
    /// (a participant acts only for a resolver at its own epoch), so a decision taken by the
    /// rule is taken again; a certain one is only sent again.
    fn follow(&mut self, epoch: u32) {
        if self.epoch == epoch {
            return;
        }
        if self.certain {
            self.answered = 0;
        } else {
            let (asked, if_superseded) = (self.asked, self.if_superseded);
            *self = Query { asked, if_superseded, ..Query::default() };
        }
        self.resends = 0;
        self.epoch = epoch;
    }

    fn decide(&mut self, commit: bool) -> Step {
        self.decided = Some(commit);
        self.answered = 0;
        self.resends = 0;
        Step::Decided(commit)
    }
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

/// The most a retry after a timeout is put off, in multiples of `timeout_ns`.
pub const RETRY_BACKOFF_CAP: u64 = 8;

/// How long a lane waits before retrying a transaction whose attempt timed out, when its
/// thread has seen `timeouts_in_a_row` timeouts (this one included) since its last commit:
/// `timeout_ns` doubled per earlier timeout in the row, capped at [`RETRY_BACKOFF_CAP`]
/// × `timeout_ns`, times a jitter factor uniform in `[1/2, 1)` drawn from the thread's own
/// seeded stream (so the lanes and threads that timed out together do not retry together, and
/// a seed still replays). The first retry thus waits half a timeout to a whole one, where the
/// old code waited nothing.
pub fn retry_backoff(timeout_ns: Nanos, timeouts_in_a_row: u32, rng: &mut ChaCha8Rng) -> Nanos {
    let doublings = timeouts_in_a_row.saturating_sub(1);
    let ceiling = timeout_ns.saturating_mul(1u64.checked_shl(doublings).unwrap_or(u64::MAX));
    let ceiling = ceiling.min(RETRY_BACKOFF_CAP.saturating_mul(timeout_ns)).max(1);
    ceiling / 2 + rng.random_range(0..ceiling.div_ceil(2))
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
    /// Timeouts of this thread's attempts since its last commit: the retry backoff's exponent.
    timeouts_in_a_row: u32,
    /// Draws the retry backoff's jitter (its own stream: the workload's draws do not move).
    backoff_rng: ChaCha8Rng,
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
    /// Keys whose redo record this backup had applied when it was promoted to their primary,
    /// locked by this attempt until its outcome is known ([`Server::promote`]).
    promoted: Vec<u64>,
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
    /// Lanes rebuilt from the log whose attempt must be resolved when the server starts.
    recovered: Vec<(u16, u8, u32)>,
    /// Which server is primary and backup of each shard ([`crate::config`]).
    map: ShardMap,
    /// Until when this server may serve as a primary or backup (with leases on).
    lease_until: Nanos,
    /// The configuration manager (the last server, with leases on): when it last heard each
    /// server ask for a lease.
    heard: Vec<Nanos>,
    /// A promoted primary's resolutions of the attempts whose redo records it had applied:
    /// (slot, attempt) → the query in progress.
    recoveries: BTreeMap<(u16, u32), Query>,
    /// The newest attempt of each slot this server has heard of as a participant: one older
    /// than it was decided by its client ([`Query::hear`], "superseded"), even where its part
    /// was dropped.
    seen: BTreeMap<u16, u32>,
    /// When a draining server stops renewing its lease.
    drain_renewals_until: Option<Nanos>,
    /// The manager: when its last lease tick ran.
    last_tick: Option<Nanos>,
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

fn logged(p: &Participants) -> LoggedParts {
    (p.wp, p.wb, p.rp, p.client)
}

fn unlogged((wp, wb, rp, client): LoggedParts) -> Participants {
    Participants { wp, wb, rp, client }
}

/// The participant state of `slot` for `attempt`, as a replay finds it: the one there if it is
/// that attempt's, else a fresh one (an older attempt's locks were released before a newer
/// attempt's state was logged, and that release was logged too).
fn replayed_part(parts: &mut BTreeMap<u16, Part>, slot: u16, attempt: u32) -> &mut Part {
    if parts.get(&slot).is_none_or(|p| p.attempt != attempt) {
        parts.insert(slot, Part { attempt, ..Part::default() });
    }
    parts.get_mut(&slot).expect("present")
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
                timeouts_in_a_row: 0,
                backoff_rng: ChaCha8Rng::seed_from_u64(pisadb_core::rng::splitmix64(
                    cfg.seed ^ 0x6261_636b_6f66_6600 ^ (u64::from(cfg.id) << 32) ^ u64::from(t),
                )),
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
            recovered: Vec::new(),
            map: ShardMap::initial(n as u8),
            lease_until: 0,
            heard: vec![0; n],
            recoveries: BTreeMap::new(),
            seen: BTreeMap::new(),
            drain_renewals_until: None,
            last_tick: None,
            cfg,
        }
    }

    /// A server restarted from its write-ahead log `log` ([`crate::wal`]): its primary shard,
    /// its backup copy and the participant states replayed; each client lane whose last
    /// logged attempt has no counted outcome resumes resolving it (the paper's coordinator
    /// recovery: ask every participant, commit iff a primary installed or every backup
    /// applied the redo), and a lane whose last attempt was aborted tells its participants
    /// so again before it retries (its `fail` may have been lost, and the locks it left would
    /// otherwise wait for an attempt that may never come). New attempts start above every
    /// logged one, so no transaction id is reused.
    pub fn recover(cfg: ServerConfig, log: &[WalRecord]) -> Self {
        let mut server = Server::new(cfg);
        let mut begun: BTreeMap<(u16, u8), (WalRecord, bool)> = BTreeMap::new();
        for record in log {
            server.replay(record, &mut begun);
        }
        for ((thread, lane), (begin, closed_aborted)) in begun {
            let WalRecord::Begin { attempt, keys, reads, read_only, blind, first_start, retries, parts, .. } = begin
            else {
                continue;
            };
            let parts = unlogged(parts);
            let (t, l) = (usize::from(thread), usize::from(lane));
            if t >= server.workers.len() || l >= server.workers[t].lanes.len() {
                continue;
            }
            let asked = parts.wp | parts.wb | parts.rp;
            server.workers[t].lanes[l] = Some(Txn {
                attempt,
                keys,
                reads: reads.into_iter().map(|(k, v, ver)| (k, (v, ver))).collect(),
                awaiting: 0,
                committing: true,
                first_start,
                retries,
                parts,
                counter: 0,
                aborted: false,
                query: closed_aborted.then_some(Query {
                    asked,
                    decided: Some(false),
                    certain: true,
                    ..Query::default()
                }),
                read_only,
                shards: 0,
                blind,
                paused: false,
            });
            server.recovered.push((thread, lane, attempt));
        }
        server
    }

    /// Applies one logged record to a restarting server; `begun` keeps each lane's last
    /// `Begin` and whether it was closed as aborted (a lane closed as committed is dropped).
    fn replay(&mut self, record: &WalRecord, begun: &mut BTreeMap<(u16, u8), (WalRecord, bool)>) {
        match record.clone() {
            WalRecord::Begin { thread, lane, attempt, .. } => {
                if let Some(a) =
                    self.workers.get_mut(usize::from(thread)).and_then(|w| w.attempts.get_mut(usize::from(lane)))
                {
                    *a = (*a).max(attempt);
                }
                begun.insert((thread, lane), (record.clone(), false));
            }
            WalRecord::Closed { thread, lane, attempt, committed, .. } => {
                let last = begun
                    .get(&(thread, lane))
                    .map(|(b, _)| matches!(b, WalRecord::Begin { attempt: a, .. } if *a == attempt));
                match (last, committed) {
                    (Some(true), Some(_)) => {
                        begun.remove(&(thread, lane));
                    }
                    (Some(true), None) => {
                        if let Some(b) = begun.get_mut(&(thread, lane)) {
                            b.1 = true;
                        }
                    }
                    _ => {}
                }
            }
            WalRecord::Locked { slot, attempt, txn, tag, client, thread, coord, retry, parts, writes, reads, redo } => {
                let keys: Vec<u64> = writes.iter().map(|w| w.0).collect();
                for &k in &keys {
                    self.primary.entry(k).or_default().lock = Some((slot, attempt));
                }
                let part = replayed_part(&mut self.parts, slot, attempt);
                (part.txn, part.tag, part.client, part.thread, part.coord, part.retry) =
                    (txn, tag, client, thread, coord, retry);
                part.parts = unlogged(parts);
                part.prepared = true;
                part.writes = writes;
                part.reads = reads;
                part.redo = redo;
                part.locked = keys;
            }
            WalRecord::Unlocked { slot, attempt } => {
                let Some(part) = self.parts.get_mut(&slot).filter(|p| p.attempt == attempt) else { return };
                for k in std::mem::take(&mut part.locked) {
                    if let Some(r) = self.primary.get_mut(&k).filter(|r| r.lock == Some((slot, attempt))) {
                        r.lock = None;
                    }
                }
                part.aborted |= !part.installed;
            }
            WalRecord::Installed { slot, attempt, txn, writes } => {
                for &(k, v, _) in &writes {
                    let r = self.primary.entry(k).or_default();
                    (r.value, r.version) = (v, txn);
                    if r.lock == Some((slot, attempt)) && self.parts.get(&slot).is_some_and(|p| p.promoted.contains(&k))
                    {
                        // A promoted redo record found committed ([`Server::finish_promoted`]).
                        r.lock = None;
                    }
                }
                let part = replayed_part(&mut self.parts, slot, attempt);
                part.promoted.retain(|k| !writes.iter().any(|w| w.0 == *k));
                part.installed = true;
            }
            WalRecord::Replicated { slot, attempt, txn, client, thread, parts, redo, undo } => {
                for &(k, v) in &redo {
                    self.backup.insert(k, (v, txn));
                }
                let part = replayed_part(&mut self.parts, slot, attempt);
                (part.txn, part.client, part.thread) = (txn, client, thread);
                part.parts = unlogged(parts);
                part.prepared = true;
                part.redo = redo;
                part.undo = undo.into_iter().map(|(k, v, ver)| (k, (v, ver))).collect();
                part.replicated = true;
            }
            WalRecord::RolledBack { slot, attempt, restored } => {
                for (k, v, ver) in restored {
                    if self.map.primary_of(shard_of(k)) == self.cfg.id {
                        // A promoted redo record rolled back: its key is a primary's now.
                        let r = self.primary.entry(k).or_default();
                        (r.value, r.version) = (v, ver);
                    } else {
                        self.backup.insert(k, (v, ver));
                    }
                }
                let promoted =
                    self.parts.get_mut(&slot).filter(|p| p.attempt == attempt).map(|p| std::mem::take(&mut p.promoted));
                for k in promoted.unwrap_or_default() {
                    if let Some(r) = self.primary.get_mut(&k).filter(|r| r.lock == Some((slot, attempt))) {
                        r.lock = None;
                    }
                }
                let part = replayed_part(&mut self.parts, slot, attempt);
                part.undo.clear();
                part.replicated = false;
                part.aborted = true;
            }
            WalRecord::Frozen { slot, attempt } => replayed_part(&mut self.parts, slot, attempt).frozen = true,
            WalRecord::Adopted { epoch, primary, backup, members, undecided } => {
                let map = ShardMap { epoch, primary, backup, members };
                self.take_over(map, Some(&undecided));
            }
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

    /// Appends `record` to the write-ahead log if the server keeps one.
    fn log(&self, out: &mut HostOutbox<Self>, record: impl FnOnce() -> WalRecord) {
        if self.cfg.durable {
            out.log.push(record());
        }
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
            paused: false,
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
        if !self.map.is_member(self.cfg.id) {
            // Removed from the map ([`crate::config`]): this server's clients start nothing
            // more (what they had in flight was resolved on the way here).
            self.workers[t].lanes[l] = None;
            return;
        }
        let Some(txn) = self.workers[t].lanes[l].as_mut() else { return };
        txn.attempt = attempt;
        txn.reads.clear();
        txn.committing = false;
        txn.counter = 0;
        txn.aborted = false;
        txn.query = None;
        let retry = txn.retries > 0;
        let keys = txn.keys.clone();
        let map = &self.map;
        let servers = keys.iter().fold(0u8, |m, &(k, _)| m | (1 << map.primary_of(shard_of(k))));
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
                .filter(|&&(k, _)| self.map.primary_of(shard_of(k)) == server)
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
        (txn.attempt == attempt && !txn.paused).then_some((thread, lane, txn))
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
        let coord = self.cfg.coord;
        let timeout = self.cfg.timeout_ns;
        let map = self.map.clone();
        let primary = |k: u64| 1u8 << map.primary_of(shard_of(k));
        let (attempt, keys, reads, retry, blind);
        {
            let Some(txn) = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_mut() else { return };
            txn.committing = true;
            let wp = txn.keys.iter().filter(|k| k.1).fold(0u8, |m, &(k, _)| m | primary(k));
            // A blind write reads nothing: its write primaries stand in for the read primaries,
            // so gathering their `validate_ok` waits for every lock.
            let rp = if txn.blind { wp } else { txn.keys.iter().fold(0u8, |m, &(k, _)| m | primary(k)) };
            let wb = txn
                .keys
                .iter()
                .filter(|k| k.1)
                .fold(0u8, |m, &(k, _)| m | map.backup_of(shard_of(k)).map_or(0, |b| 1 << b));
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
        // From here participants hold state for the attempt: a restarted client must resolve
        // it (logged before the init and prepares leave).
        self.log_begin(thread, lane, out);
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
            let value = |k: u64| reads.get(&k).map_or(0, |r| r.0) + 1;
            let mut items: Vec<Item> = keys
                .iter()
                .filter(|&&(k, w)| {
                    w && (map.primary_of(shard_of(k)) == server || map.backup_of(shard_of(k)) == Some(server))
                })
                .map(|&(key, _)| Item { key, value: value(key), version: 0, locked: false })
                .collect();
            d.writes = items.len() as u8;
            items.extend(keys.iter().filter(|&&(k, _)| !blind && primary(k) == 1 << server).map(|&(key, _)| Item {
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
        if txn.attempt != attempt || txn.paused {
            return;
        }
        if !txn.committing && txn.query.is_none() {
            self.workers[t].losses += 1;
            out.events.push(ServerEvent::Timeout);
            return self.retry_later(now, thread, lane, out);
        }
        let parts = txn.parts;
        let query = txn.query.get_or_insert(Query { asked: parts.wp | parts.wb | parts.rp, ..Query::default() });
        query.follow(self.map.epoch);
        let q = *query;
        query.resends = query.resends.saturating_add(1);
        if q.answered == 0 && q.decided.is_none() {
            self.workers[t].losses += 1;
            out.events.push(ServerEvent::Timeout);
        }
        let slot = self.cfg.slot(self.cfg.id, thread, lane);
        self.send_resolution(out, q.asked & !q.answered, (slot, attempt), (self.cfg.id, thread as u8), q.decided);
        let wait = requery_interval(self.cfg.timeout_ns, q.resends);
        out.timers.push((now + wait, ServerTimer::Timeout(thread, lane, attempt)));
    }

    /// Logs that the lane's current attempt enters the commit protocol (or, from
    /// [`Server::resolve_abort`], is about to be resolved): participants may hold state for
    /// it from now on.
    fn log_begin(&self, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let Some(t) = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_ref() else { return };
        let attempt = t.attempt;
        self.log(out, || WalRecord::Begin {
            thread,
            lane,
            attempt,
            txn: self.txn_id(thread, lane, attempt),
            keys: t.keys.clone(),
            reads: t.reads.iter().map(|(&k, &(v, ver))| (k, v, ver)).collect(),
            read_only: t.read_only,
            blind: t.blind,
            first_start: t.first_start,
            retries: t.retries,
            parts: logged(&t.parts),
        });
    }

    /// Tells every participant of the lane's attempt that it aborted (and waits for them).
    fn resolve_abort(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let slot = self.cfg.slot(self.cfg.id, thread, lane);
        let me = self.cfg.id;
        // The participants will hold a (frozen, aborted) state for this attempt, which may
        // never have reached the commit protocol: log it as begun, so that a restarted client
        // resumes at this attempt, not below it (where the participants would ignore it).
        self.log_begin(thread, lane, out);
        let Some(txn) = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_mut() else { return };
        let asked = txn.parts.wp | txn.parts.wb | txn.parts.rp;
        txn.query = Some(Query { asked, decided: Some(false), certain: true, ..Query::default() });
        txn.committing = true;
        let attempt = txn.attempt;
        self.send_resolution(out, asked, (slot, attempt), (me, thread as u8), Some(false));
        if self.cfg.timeout_ns > 0 {
            out.timers.push((now + self.cfg.timeout_ns, ServerTimer::Timeout(thread, lane, attempt)));
        }
    }

    /// Sends a resolution's query (`decided` None) or its decision to each server of
    /// `servers`, about (slot, attempt) of the lane of (client, thread), under this server's
    /// shard map: the one message a client, a restarted client and a participant resolving an
    /// attempt itself all send.
    fn send_resolution(
        &self,
        out: &mut HostOutbox<Self>,
        servers: u8,
        (slot, attempt): (u16, u32),
        (client, thread): (u8, u8),
        decided: Option<bool>,
    ) {
        let msg = if decided.is_some() { MsgType::Resolve } else { MsgType::Query };
        for server in bits(servers) {
            let mut d = Data::new(msg, slot, Self::tag(attempt), attempt, u64::from(self.map.epoch));
            (d.client, d.thread, d.wp) = (client, thread, u8::from(decided == Some(true)));
            self.send(out, server, d.datagram(u16::from(self.cfg.id), u16::from(server)));
        }
    }

    /// A participant's answer to a query or a decision.
    fn query_answer(&mut self, now: Nanos, d: &Data, from: u8, out: &mut HostOutbox<Self>) {
        if d.wp & answer::STALE_RESOLVER != 0 && self.cfg.lease_ns > 0 {
            self.ask_for_map(now, out);
        }
        let (members, epoch) = (self.map.members, self.map.epoch);
        let Some((thread, lane, txn)) = self.current(d.slot, d.attempt) else {
            return self.recovery_answer(d, from, out);
        };
        let parts = txn.parts;
        let Some(q) = txn.query.as_mut() else { return };
        q.follow(epoch);
        if d.txn != u64::from(epoch) {
            return;
        }
        match q.hear(d.msg, d.wp, from, &parts, members) {
            None => {}
            Some(Step::Decided(commit)) => {
                let asked = q.asked;
                self.send_resolution(out, asked, (d.slot, d.attempt), (self.cfg.id, thread as u8), Some(commit));
            }
            Some(Step::Done(true)) => self.committed(now, thread, lane, out),
            Some(Step::Done(false)) => {
                out.events.push(ServerEvent::Aborted(AbortReason::Timeout));
                self.retry_later(now, thread, lane, out);
            }
        }
    }

    /// A query or a decision reaches a participant.
    fn query_serve(&mut self, now: Nanos, d: &Data, from: u8, out: &mut HostOutbox<Self>) {
        let me = self.cfg.id;
        let slot = d.slot;
        let epoch = u64::from(self.map.epoch);
        if d.txn != epoch {
            // A resolver under another shard map ([`Query::hear`]): do nothing, say why.
            let why = if d.txn < epoch { answer::STALE_RESOLVER } else { answer::BEHIND };
            let reply = answer_to(d, epoch, why);
            out.cpu_ns += self.cfg.costs.handler_ns;
            if why == answer::BEHIND {
                self.ask_for_map(now, out);
            }
            return self.send(out, from, reply.datagram(u16::from(me), u16::from(from)));
        }
        let held = self.parts.get(&slot).map(|p| p.attempt);
        let newest = held.max(self.seen.get(&slot).copied());
        match held {
            Some(a) if a == d.attempt => {}
            _ if newest > Some(d.attempt) => {
                // Its client has moved on: only a promoted primary resolving an old attempt
                // asks this ([`Query::hear`]). Say so, and do nothing.
                let reply = answer_to(d, epoch, answer::SUPERSEDED);
                out.cpu_ns += self.cfg.costs.handler_ns;
                return self.send(out, from, reply.datagram(u16::from(me), u16::from(from)));
            }
            _ => {
                if self.parts.contains_key(&slot) {
                    self.release(now, slot, out);
                }
                self.parts.insert(slot, Part { attempt: d.attempt, ..Part::default() });
            }
        }
        let part = self.parts.get_mut(&slot).expect("present");
        if !part.frozen && self.cfg.durable {
            // Answered: after a restart it must still do nothing more unprompted.
            out.log.push(WalRecord::Frozen { slot, attempt: d.attempt });
        }
        part.frozen = true;
        let mut reply = answer_to(d, epoch, 0);
        if d.msg == MsgType::Query {
            let holds = !part.locked.is_empty() || !part.redo.is_empty() || part.installed || part.replicated;
            reply.wp = (if part.installed { answer::INSTALLED } else { 0 })
                | (if part.replicated { answer::REPLICATED } else { 0 });
            if self.cfg.lease_ns > 0 {
                // What only the rule for removed participants reads ([`Query::hear`]).
                reply.wp |= (if part.aborted { answer::ABORTED } else { 0 })
                    | (if holds && !part.aborted { answer::PREPARED } else { 0 });
            }
        } else if d.wp == 1 {
            let unapplied =
                part.parts.wb & (1 << me) != 0 && !part.replicated && !part.redo.is_empty() && !part.aborted;
            if part.prepared && part.parts.wp & (1 << me) != 0 && !part.installed && !part.aborted {
                self.install(now, slot, out);
            }
            if unapplied {
                // Committed without this backup's `replicate_ok` (its primary's other backup
                // was removed, [`Query::hear`]): apply the redo record now.
                self.apply_redo(slot, out);
            }
            self.unlock_promoted(slot, true, out);
        } else {
            let undo = std::mem::take(&mut part.undo);
            let was_replicated = part.replicated;
            part.replicated = false;
            part.aborted = true;
            let txn = part.txn;
            let mut restored = Vec::new();
            for (k, before) in undo.into_iter().rev() {
                // Only if no later transaction has written the key since (its primary lock
                // was released by this same decision, possibly earlier than here).
                if self.map.primary_of(shard_of(k)) == me {
                    // A redo record this server applied as a backup and was promoted over.
                    if let Some(r) = self.primary.get_mut(&k).filter(|r| r.version == txn) {
                        (r.value, r.version) = before;
                        restored.push((k, before.0, before.1));
                    }
                } else if self.backup.get(&k).map(|v| v.1) == Some(txn) {
                    self.backup.insert(k, before);
                    restored.push((k, before.0, before.1));
                }
            }
            if was_replicated {
                // Logged even if nothing was restored: a restarted backup must not answer
                // that it holds the redo of an attempt decided aborted.
                self.log(out, || WalRecord::RolledBack { slot, attempt: d.attempt, restored });
            }
            self.unlock_promoted(slot, false, out);
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

    /// Retries a lane whose attempt timed out (and was resolved as aborted, if it had reached
    /// the commit protocol), after [`retry_backoff`]: retrying at once adds load exactly when
    /// latency is near the timeout, which makes more attempts time out. While draining there
    /// is no retry to delay.
    fn retry_later(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let (t, l) = (usize::from(thread), usize::from(lane));
        if self.stopping || self.cfg.timeout_ns == 0 {
            return self.retry(now, thread, lane, out);
        }
        let w = &mut self.workers[t];
        w.timeouts_in_a_row = w.timeouts_in_a_row.saturating_add(1);
        let wait = retry_backoff(self.cfg.timeout_ns, w.timeouts_in_a_row, &mut w.backoff_rng);
        let Some(txn) = w.lanes[l].as_mut() else { return };
        txn.paused = true;
        let attempt = txn.attempt;
        out.timers.push((now + wait, ServerTimer::Retry(thread, lane, attempt)));
    }

    /// A lane's retry backoff ends.
    fn backed_off(&mut self, now: Nanos, thread: u16, lane: u8, attempt: u32, out: &mut HostOutbox<Self>) {
        let Some(txn) = self.workers[usize::from(thread)].lanes[usize::from(lane)].as_mut() else { return };
        if txn.attempt != attempt || !txn.paused {
            return;
        }
        txn.paused = false;
        self.retry(now, thread, lane, out);
    }

    fn retry(&mut self, now: Nanos, thread: u16, lane: u8, out: &mut HostOutbox<Self>) {
        let (t, l) = (usize::from(thread), usize::from(lane));
        if let Some(x) = self.workers[t].lanes[l].as_ref().filter(|x| x.committing && !self.cfg.eris) {
            let (attempt, read_only) = (x.attempt, x.read_only);
            let txn = self.txn_id(thread, lane, attempt);
            self.log(out, || WalRecord::Closed { thread, lane, attempt, txn, committed: None, read_only });
        }
        if self.stopping || !self.map.is_member(self.cfg.id) {
            // No retry while draining (or once removed from the map); but an attempt aborted
            // by a `fail` may have left locks
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
        let slot = self.cfg.slot(self.cfg.id, thread, lane);
        if self.parts.get(&slot).is_some_and(|p| p.attempt == txn.attempt) {
            // This server may hold the attempt's redo records as a promoted primary, and no
            // one else will tell it the outcome.
            self.unlock_promoted(slot, true, out);
        }
        self.commits += 1;
        self.workers[t].timeouts_in_a_row = 0;
        let id = self.txn_id(thread, lane, txn.attempt);
        self.log(out, || WalRecord::Closed {
            thread,
            lane,
            attempt: txn.attempt,
            txn: id,
            committed: Some(txn.reads.iter().map(|(&k, &(_, v))| (k, v)).collect()),
            read_only: txn.read_only,
        });
        out.events.push(ServerEvent::Committed {
            txn: id,
            latency_ns: now.saturating_sub(txn.first_start),
            retries: txn.retries,
            reads: txn.reads.iter().map(|(&k, &(_, v))| (k, v)).collect(),
            read_only: txn.read_only,
        });
        self.fill_lanes(now, thread, out);
    }

    /// Starts transactions in idle lanes up to the thread's MPL.
    fn fill_lanes(&mut self, now: Nanos, thread: u16, out: &mut HostOutbox<Self>) {
        if self.stopping || !self.knows_its_map() {
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
        if !self.serving(now) {
            return;
        }
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
                // A key this server is not (or no longer) primary of reads as locked: the
                // client, routing by an older map, aborts and retries.
                let foreign = self.map.primary_of(shard_of(i.key)) != self.cfg.id;
                Item { key: i.key, value: r.value, version: r.version, locked: r.lock.is_some() || foreign }
            })
            .collect();
        out.cpu_ns += self.cfg.costs.handler_ns + self.cfg.costs.item_ns * d.items.len() as u64;
        self.send(out, from, reply.datagram(u16::from(self.cfg.id), u16::from(from)));
    }

    /// Releases what `part` holds at this primary. Keys it holds as a promoted redo record
    /// still undecided are released as committed: a part is released undecided only when a
    /// later attempt of its slot arrives, and its client moved on from this one either
    /// committed or after every participant, this one included, carried out the abort.
    fn release(&mut self, now: Nanos, slot: u16, out: &mut HostOutbox<Self>) {
        self.unlock_promoted(slot, true, out);
        let Some(part) = self.parts.get_mut(&slot) else { return };
        let owner = (slot, part.attempt);
        let locked = std::mem::take(&mut part.locked);
        if !locked.is_empty() {
            out.events.push(ServerEvent::LockTime(now.saturating_sub(part.locked_at)));
            if self.cfg.durable {
                out.log.push(WalRecord::Unlocked { slot, attempt: owner.1 });
            }
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
        if !self.serving(now) {
            return;
        }
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
        part.tag = d.tag;
        part.txn = d.txn;
        part.client = d.client;
        part.thread = d.thread;
        part.coord = d.coord;
        part.retry = d.flags & FLAG_RETRY != 0;
        part.parts = Participants { wp: d.wp, wb: d.wb, rp: d.rp, client: d.client };
        part.prepared = true;
        let (writes, reads) = d.items.split_at(usize::from(d.writes));
        let map = &self.map;
        let primary = |k: u64| map.primary_of(shard_of(k)) == me;
        let backup = |k: u64| map.backup_of(shard_of(k)) == Some(me);
        // The client's map must agree with ours about every shard it hands us
        // ([`crate::config`]); else the attempt fails here. The roles it gives us (write
        // primary, write backup) must be ours for every write item, and every role it gives us
        // must have an item: a client whose map made us the primary of a shard we still only
        // back up would otherwise have us lock nothing and answer for writes never installed.
        let (as_primary, as_backup) = (d.wp & (1 << me) != 0, d.wb & (1 << me) != 0);
        let agreed = writes.iter().all(|i| (primary(i.key) && as_primary) || (backup(i.key) && as_backup))
            && (!as_primary || writes.iter().any(|i| primary(i.key)))
            && (!as_backup || writes.iter().any(|i| backup(i.key)))
            && reads.iter().all(|i| primary(i.key));
        part.writes = writes.iter().filter(|i| primary(i.key)).map(|i| (i.key, i.value)).collect();
        part.redo =
            writes.iter().filter(|i| backup(i.key) && d.wb & (1 << me) != 0).map(|i| (i.key, i.value)).collect();
        part.reads = reads.iter().map(|i| (i.key, i.version)).collect();
        let early = std::mem::take(&mut part.early);
        out.cpu_ns += self.cfg.costs.prepare_ns + self.cfg.costs.item_ns * d.items.len() as u64;
        if !agreed {
            part.writes.clear();
            part.redo.clear();
            return self.fail(now, slot, out);
        }
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
            if self.cfg.durable {
                out.log.push(WalRecord::Locked {
                    slot,
                    attempt: part.attempt,
                    txn: part.txn,
                    tag: part.tag,
                    client: part.client,
                    thread: part.thread,
                    coord: part.coord,
                    retry: part.retry,
                    parts: logged(&part.parts),
                    writes: part.writes.clone(),
                    reads: part.reads.clone(),
                    redo: part.redo.clone(),
                });
            }
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
        if msg == MsgType::CommitOk || !self.serving(now) {
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
                self.apply_redo(slot, out);
                self.reply(now, slot, MsgType::ReplicateOk, out);
            }
            MsgType::ReplicateOk if part.parts.wp & (1 << me) != 0 && !part.installed => {
                self.install(now, slot, out);
                self.reply(now, slot, MsgType::CommitOk, out);
            }
            MsgType::ValidateOk if part.parts.wb == 0 && part.parts.wp & (1 << me) != 0 && !part.installed => {
                // No backup left for the shards it writes ([`crate::config`]): commit primary
                // straight after validation.
                self.install(now, slot, out);
                self.reply(now, slot, MsgType::CommitOk, out);
            }
            _ => {}
        }
    }

    /// Commit backup: apply the part's redo record to the backup copy (keeping the
    /// before-images for a rollback).
    fn apply_redo(&mut self, slot: u16, out: &mut HostOutbox<Self>) {
        let Some(part) = self.parts.get(&slot) else { return };
        let txn = part.txn;
        let redo = part.redo.clone();
        out.cpu_ns += self.cfg.costs.item_ns * redo.len() as u64;
        let undo: Vec<(u64, (u64, u64))> =
            redo.iter().map(|&(k, v)| (k, self.backup.insert(k, (v, txn)).unwrap_or((0, 0)))).collect();
        self.log(out, || WalRecord::Replicated {
            slot,
            attempt: part.attempt,
            txn,
            client: part.client,
            thread: part.thread,
            parts: logged(&part.parts),
            redo: redo.clone(),
            undo: undo.iter().map(|&(k, (v, ver))| (k, v, ver)).collect(),
        });
        let part = self.parts.get_mut(&slot).expect("present");
        part.undo = undo;
        part.replicated = true;
    }

    /// Commit primary: install the writes, unlock.
    fn install(&mut self, now: Nanos, slot: u16, out: &mut HostOutbox<Self>) {
        let Some(part) = self.parts.get(&slot) else { return };
        let (txn, attempt, writes) = (part.txn, part.attempt, part.writes.clone());
        out.cpu_ns += self.cfg.costs.item_ns * writes.len() as u64;
        let mut logged_writes = Vec::with_capacity(writes.len());
        for (k, v) in writes {
            let r = self.primary.entry(k).or_default();
            out.events.push(ServerEvent::Installed(txn, k, r.version));
            logged_writes.push((k, v, r.version));
            r.value = v;
            r.version = txn;
        }
        self.log(out, || WalRecord::Installed { slot, attempt, txn, writes: logged_writes });
        self.release(now, slot, out);
        if let Some(p) = self.parts.get_mut(&slot) {
            p.installed = true;
        }
    }
}

/// Leases, the shard map and promotion ([`crate::config`]).
impl Server {
    /// The shard map this server follows.
    pub fn map(&self) -> &ShardMap {
        &self.map
    }

    /// Whether this server's clients may start transactions: without leases always; with
    /// them once a grant told it the map (at the manager, always).
    fn knows_its_map(&self) -> bool {
        self.cfg.lease_ns == 0 || self.lease_until > 0 || self.cfg.id == ShardMap::manager(self.n())
    }

    /// Notes that a participant heard of `attempt` of `slot` (with leases on: only a promoted
    /// primary's resolution asks about old attempts).
    fn note_attempt(&mut self, slot: u16, attempt: u32) {
        if self.cfg.lease_ns > 0 {
            let newest = self.seen.entry(slot).or_insert(0);
            *newest = (*newest).max(attempt);
        }
    }

    /// Whether this server may act as a primary or backup now: it is in the map and holds a
    /// lease (or runs without leases). Draining changes nothing here: a server removed just
    /// before the drain may not have heard yet, and only its lapsed lease keeps it from
    /// serving next to its promoted backup. (Leases are renewed for a while into the drain,
    /// [`Server::lease_tick`]; what is still in flight after that times out and is resolved,
    /// and queries and decisions need no lease.)
    fn serving(&self, now: Nanos) -> bool {
        if self.cfg.lease_ns == 0 {
            return true;
        }
        let me = self.cfg.id;
        self.map.is_member(me) && (me == ShardMap::manager(self.n()) || now < self.lease_until)
    }

    /// Asks the manager for its map now (a participant or resolver met a newer one), also while
    /// draining, when leases are no longer renewed.
    fn ask_for_map(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        let manager = ShardMap::manager(self.n());
        if self.cfg.id != manager {
            let mut d = Data::new(MsgType::Lease, 0, 0, self.map.epoch, now);
            d.client = self.cfg.id;
            self.send(out, manager, d.datagram(u16::from(self.cfg.id), u16::from(manager)));
        }
    }

    /// Renews the lease (a quarter lease apart); the manager also removes the servers whose
    /// leases have surely lapsed.
    fn lease_tick(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        let me = self.cfg.id;
        let manager = ShardMap::manager(self.n());
        let lease = self.cfg.lease_ns;
        // While draining the manager removes no one, and the others keep asking for four leases
        // more (a map the manager made just before the drain must still reach them; then the
        // timers stop, or the drain would never end).
        if self.stopping {
            let until = *self.drain_renewals_until.get_or_insert(now + 4 * lease);
            if me == manager || !self.map.is_member(me) || now >= until {
                return;
            }
        }
        if me == manager {
            // A server's lease ends at most `lease` after the request the manager last heard
            // (it counts from when it asked); a quarter lease more covers clock drift. A
            // manager that was itself held up (its tick late by more than a quarter lease)
            // cannot tell a late renewal from a missing one, and removes no one this time.
            let held_up = self.last_tick.is_some_and(|t| now.saturating_sub(t) > lease / 2);
            self.last_tick = Some(now);
            let lapsed: Vec<u8> = (0..self.n())
                .filter(|_| !held_up)
                .filter(|&s| s != me && self.map.is_member(s))
                .filter(|&s| now.saturating_sub(self.heard[usize::from(s)]) > lease + lease / 4)
                .collect();
            for server in lapsed {
                if self.map.can_remove(server) {
                    let next = self.map.without(server);
                    self.adopt(now, next, out);
                }
            }
        } else {
            self.ask_for_map(now, out);
        }
        out.timers.push((now + (lease / 4).max(1), ServerTimer::Lease));
    }

    /// The manager hears a lease request: it grants it to a member and sends its map.
    fn lease_request(&mut self, now: Nanos, d: &Data, from: u8, out: &mut HostOutbox<Self>) {
        let me = self.cfg.id;
        if me != ShardMap::manager(self.n()) || self.cfg.lease_ns == 0 {
            return out.events.push(ServerEvent::Rejected("lease_not_manager"));
        }
        out.cpu_ns += self.cfg.costs.handler_ns;
        self.heard[usize::from(from)] = self.heard[usize::from(from)].max(now);
        let mut g = Data::new(MsgType::Grant, 0, 0, self.map.epoch, d.txn);
        g.client = from;
        g.wp = u8::from(self.map.is_member(from));
        g.items = self.map.to_items();
        self.send(out, from, g.datagram(u16::from(me), u16::from(from)));
    }

    /// A grant reaches a server: adopt a newer map; extend the lease from the asking time.
    fn grant(&mut self, now: Nanos, d: &Data, out: &mut HostOutbox<Self>) {
        out.cpu_ns += self.cfg.costs.handler_ns;
        let Some(map) = ShardMap::from_items(d.attempt, self.n(), &d.items) else {
            return out.events.push(ServerEvent::Rejected("bad_map"));
        };
        if map.epoch > self.map.epoch {
            self.adopt(now, map, out);
        }
        if d.wp == 1 && d.attempt == self.map.epoch && self.map.is_member(self.cfg.id) {
            let first = self.lease_until == 0;
            self.lease_until = self.lease_until.max(d.txn.saturating_add(self.cfg.lease_ns));
            if first {
                // The clients waited for the map (a restarted server may have been removed);
                // each thread starts its own (on its core, not on the lease core).
                for thread in 0..self.cfg.threads {
                    out.timers.push((now, ServerTimer::Fill(thread)));
                }
            }
        }
    }

    /// Adopts a newer map: logged, then the shards this server now leads are taken over and
    /// the redo records it applied for them are resolved.
    fn adopt(&mut self, now: Nanos, map: ShardMap, out: &mut HostOutbox<Self>) {
        if map.epoch <= self.map.epoch {
            return;
        }
        let logged = (map.epoch, map.primary.clone(), map.backup.clone(), map.members);
        let removed = self.map.members & !map.members;
        let undecided = self.take_over(map, None);
        self.log(out, || WalRecord::Adopted {
            epoch: logged.0,
            primary: logged.1,
            backup: logged.2,
            members: logged.3,
            undecided: undecided.clone(),
        });
        // Attempts of a removed client are resolved by every member holding a part of them
        // (the same rule under the same map decides the same); a removed server resolves
        // nothing for others (its answers no longer count either).
        let member = self.map.is_member(self.cfg.id);
        let orphans: Vec<(u16, u32)> = self
            .parts
            .iter()
            .filter(|_| member)
            .filter(|(_, p)| removed & (1 << p.client) != 0 && !p.aborted && (!p.locked.is_empty() || p.replicated))
            .map(|(&slot, p)| (slot, p.attempt))
            .collect();
        for (slot, attempt) in undecided.into_iter().chain(orphans) {
            self.start_recovery(now, slot, attempt, out);
        }
        // A new map is news to every lane waiting out a timeout: what timed out before it says
        // nothing about the servers now in the map. Resolutions resend under it at once, lanes
        // backing off retry at once, and the backoff starts over.
        for (t, w) in self.workers.iter_mut().enumerate() {
            w.timeouts_in_a_row = 0;
            for (l, txn) in w.lanes.iter().enumerate() {
                let Some(txn) = txn else { continue };
                let (thread, lane) = (t as u16, l as u8);
                if txn.paused {
                    out.timers.push((now, ServerTimer::Retry(thread, lane, txn.attempt)));
                } else if txn.query.is_some() {
                    out.timers.push((now, ServerTimer::Timeout(thread, lane, txn.attempt)));
                }
            }
        }
        for &(slot, attempt) in self.recoveries.keys() {
            if self.recoveries.get(&(slot, attempt)).is_some_and(|q| q.epoch != 0 || q.answered != 0) {
                out.timers.push((now, ServerTimer::Recover(slot, attempt)));
            }
        }
    }

    /// Follows `map` (newer than this server's): every shard it now leads and only backed up
    /// moves from its backup copy into its primary store. A redo record it applied for such a
    /// shard may belong to an attempt still undecided (its old primary may not have installed
    /// yet, or may never): its keys are locked by that attempt ([`Part::promoted`]) until the
    /// outcome is known; the (slot, attempt)s to resolve are returned. A redo record it had
    /// not applied yet never will be (its part is frozen, as if queried): a primary installs
    /// only after every backup applied, so its attempt cannot have committed. Also the replay
    /// of [`WalRecord::Adopted`], which names the attempts found undecided (`logged`): a part
    /// replaced live by a later attempt that was never logged would otherwise be taken for
    /// undecided again.
    fn take_over(&mut self, map: ShardMap, logged: Option<&[(u16, u32)]>) -> Vec<(u16, u32)> {
        let me = self.cfg.id;
        let gained: Vec<u8> =
            (0..map.primary.len() as u8).filter(|&s| map.primary_of(s) == me && self.map.primary_of(s) != me).collect();
        self.map = map;
        let mut undecided = Vec::new();
        for shard in gained {
            let first = u64::from(shard) << 40;
            let keys: Vec<u64> = self.backup.range(first..first + (1 << 40)).map(|(&k, _)| k).collect();
            for k in keys {
                let (value, version) = self.backup.remove(&k).expect("listed");
                self.primary.insert(k, Record { value, version, lock: None });
            }
            for (&slot, part) in self.parts.iter_mut().filter(|(_, p)| !p.aborted) {
                let redo: Vec<u64> = part.redo.iter().map(|r| r.0).filter(|&k| shard_of(k) == shard).collect();
                if redo.is_empty() {
                    continue;
                }
                let listed = logged.is_none_or(|l| l.contains(&(slot, part.attempt)));
                if part.replicated && listed {
                    for &k in &redo {
                        self.primary.entry(k).or_default().lock = Some((slot, part.attempt));
                    }
                    part.promoted.extend(redo);
                    undecided.push((slot, part.attempt));
                } else if !part.replicated {
                    // Never applied: its attempt cannot have committed (no primary installs
                    // without this backup), and applying it now could overwrite what this
                    // server commits as primary from here on. Its resolution will say so.
                    part.aborted = true;
                    part.frozen = true;
                }
            }
        }
        undecided.dedup();
        undecided
    }

    /// Unlocks the keys `slot`'s part holds as promoted redo records, its outcome now known:
    /// committed, they are this primary's installed writes (reported and logged as installs);
    /// rolled back, their before-images were put back by the caller.
    fn unlock_promoted(&mut self, slot: u16, committed: bool, out: &mut HostOutbox<Self>) {
        let Some(part) = self.parts.get_mut(&slot) else { return };
        let keys = std::mem::take(&mut part.promoted);
        if keys.is_empty() {
            return;
        }
        let (txn, attempt) = (part.txn, part.attempt);
        let overwritten = |k: u64| part.undo.iter().find(|u| u.0 == k).map_or(0, |u| u.1 .1);
        let mut installed = Vec::new();
        for k in keys {
            let Some(r) = self.primary.get_mut(&k) else { continue };
            if r.lock == Some((slot, attempt)) {
                r.lock = None;
            }
            if committed {
                out.events.push(ServerEvent::Installed(txn, k, overwritten(k)));
                installed.push((k, r.value, overwritten(k)));
            }
        }
        if committed {
            self.log(out, || WalRecord::Installed { slot, attempt, txn, writes: installed });
        }
    }

    /// Starts resolving an attempt this server holds a part of and cannot leave to its client:
    /// one whose redo records it applied before it was promoted, or one whose client was
    /// removed. Not one of its own client lanes' current attempts (the lane resolves it).
    /// The queries go out from the attempt's thread's core (a timer), not from the core that
    /// adopted the map: that is the lease core, which must stay free for renewals.
    fn start_recovery(&mut self, now: Nanos, slot: u16, attempt: u32, out: &mut HostOutbox<Self>) {
        if self.current(slot, attempt).is_some() || self.recoveries.contains_key(&(slot, attempt)) {
            return;
        }
        let Some(part) = self.parts.get(&slot).filter(|p| p.attempt == attempt) else { return };
        let asked = part.parts.wp | part.parts.wb | part.parts.rp;
        self.recoveries.insert((slot, attempt), Query { asked, ..Query::default() });
        out.timers.push((now, ServerTimer::Recover(slot, attempt)));
    }

    /// Sends a recovery's query (or its decision) to those that have not answered, and waits.
    fn recovery_tick(&mut self, now: Nanos, slot: u16, attempt: u32, out: &mut HostOutbox<Self>) {
        let Some(part) = self.parts.get(&slot).filter(|p| p.attempt == attempt) else {
            // Released by a later attempt: its client decided and told everyone.
            self.recoveries.remove(&(slot, attempt));
            return;
        };
        let (client, thread) = (part.client, part.thread);
        let Some(q) = self.recoveries.get_mut(&(slot, attempt)) else { return };
        q.follow(self.map.epoch);
        let sent = *q;
        q.resends = q.resends.saturating_add(1);
        self.send_resolution(out, sent.asked & !sent.answered, (slot, attempt), (client, thread), sent.decided);
        out.timers
            .push((now + requery_interval(self.cfg.timeout_ns, sent.resends), ServerTimer::Recover(slot, attempt)));
    }

    /// An answer to a recovery's query or decision.
    fn recovery_answer(&mut self, d: &Data, from: u8, out: &mut HostOutbox<Self>) {
        let key = (d.slot, d.attempt);
        let Some(part) = self.parts.get(&d.slot).filter(|p| p.attempt == d.attempt) else {
            // Released by a later attempt: its client decided and told everyone.
            self.recoveries.remove(&key);
            return;
        };
        let (parts, client, thread) = (part.parts, part.client, part.thread);
        // What a "superseded" answer means is read off this server's part as it is now: its
        // client moved on only once this server had carried the outcome out.
        let me = 1 << self.cfg.id;
        let (writes, backs) = (parts.wp & me != 0, parts.wb & me != 0);
        let if_superseded =
            !part.aborted && (writes || backs) && (!writes || part.installed) && (!backs || part.replicated);
        let Some(q) = self.recoveries.get_mut(&key) else { return };
        q.if_superseded = if_superseded;
        q.follow(self.map.epoch);
        if d.txn != u64::from(self.map.epoch) {
            return;
        }
        match q.hear(d.msg, d.wp, from, &parts, self.map.members) {
            None => {}
            Some(Step::Decided(commit)) => {
                let asked = q.asked;
                self.send_resolution(out, asked, (d.slot, d.attempt), (client, thread), Some(commit));
            }
            Some(Step::Done(_)) => {
                self.recoveries.remove(&key);
            }
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

/// A participant's answer to a query or decision `d`: its shard map's `epoch` and its
/// [`answer`] bits `state`.
fn answer_to(d: &Data, epoch: u64, state: u8) -> Data {
    let msg = if d.msg == MsgType::Query { MsgType::QueryReply } else { MsgType::ResolveAck };
    let mut reply = Data::new(msg, d.slot, d.tag, d.attempt, epoch);
    (reply.client, reply.thread, reply.wp) = (d.client, d.thread, state);
    reply
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
    type Log = WalRecord;
    type Event = ServerEvent;

    fn cores(&self) -> u16 {
        // With leases, one more core does nothing but lease requests and grants (FaRM's
        // dedicated lease thread): behind a loaded worker's queue a renewal would come late
        // and the manager would remove a live server.
        self.cfg.threads + u16::from(self.cfg.lease_ns > 0)
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        // A restarted server: locks it holds count from now, and every recovered lane resolves
        // its attempt at once (the timeout path asks, or re-sends the decision).
        for part in self.parts.values_mut() {
            part.locked_at = now;
        }
        for (thread, lane, attempt) in std::mem::take(&mut self.recovered) {
            out.timers.push((now, ServerTimer::Timeout(thread, lane, attempt)));
        }
        if self.cfg.lease_ns > 0 {
            // Serve nothing until the first grant; the manager counts everyone from now.
            self.heard.iter_mut().for_each(|h| *h = now);
            out.timers.push((now, ServerTimer::Lease));
            let promoted: Vec<(u16, u32)> =
                self.parts.iter().filter(|(_, p)| !p.promoted.is_empty()).map(|(&s, p)| (s, p.attempt)).collect();
            for (slot, attempt) in promoted {
                self.start_recovery(now, slot, attempt, out);
            }
        }
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
        let msg_byte = bytes.get(pisadb_wire::FRAME_BYTES).copied();
        if self.cfg.lease_ns > 0
            && matches!(msg_byte, Some(b) if b == MsgType::Lease as u8 || b == MsgType::Grant as u8)
        {
            return Route::Core(self.cfg.threads);
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
            ServerTimer::Epoch(t)
            | ServerTimer::Timeout(t, _, _)
            | ServerTimer::Retry(t, _, _)
            | ServerTimer::Fill(t) => t.min(self.cfg.threads - 1),
            ServerTimer::Lease => self.cfg.threads,
            ServerTimer::Recover(slot, _) => {
                self.parts.get(&slot).map_or(0, |p| u16::from(p.thread)).min(self.cfg.threads - 1)
            }
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
                    self.note_attempt(c.slot.get(), c.attempt.get());
                    self.down(now, &c, out);
                } else {
                    self.at_client(now, &c, out);
                }
            }
            Message::Data(_) if from >= self.n() => out.events.push(ServerEvent::Rejected("unknown_source")),
            Message::Data(d) => match d.msg {
                MsgType::Read => {
                    self.note_attempt(d.slot, d.attempt);
                    self.serve_read(now, &d, from, out)
                }
                MsgType::Prepare => {
                    self.note_attempt(d.slot, d.attempt);
                    self.prepare(now, &d, out)
                }
                MsgType::ReadReply => {
                    out.cpu_ns += self.cfg.costs.handler_ns;
                    self.read_reply(now, &d, from, out)
                }
                MsgType::Query | MsgType::Resolve => self.query_serve(now, &d, from, out),
                MsgType::QueryReply | MsgType::ResolveAck => {
                    out.cpu_ns += self.cfg.costs.handler_ns;
                    self.query_answer(now, &d, from, out)
                }
                MsgType::ErisReply => {
                    out.cpu_ns += self.cfg.costs.handler_ns;
                    self.eris_reply(now, &d, out)
                }
                MsgType::Lease => self.lease_request(now, &d, from, out),
                MsgType::Grant => self.grant(now, &d, out),
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
            ServerTimer::Retry(t, l, a) => self.backed_off(now, t, l, a, out),
            ServerTimer::Lease => self.lease_tick(now, out),
            ServerTimer::Recover(slot, a) => self.recovery_tick(now, slot, a, out),
            ServerTimer::Fill(t) => self.fill_lanes(now, t, out),
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
    fn the_retry_backoff_doubles_per_timeout_in_a_row_within_its_jitter_and_caps() {
        let t: Nanos = 20_000_000;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for k in 1..=8u32 {
            let ceiling = (t * (1 << (k - 1))).min(RETRY_BACKOFF_CAP * t);
            for _ in 0..200 {
                let w = retry_backoff(t, k, &mut rng);
                assert!(
                    (ceiling / 2..ceiling).contains(&w),
                    "{k} timeouts in a row: {w} not in [{}, {ceiling})",
                    ceiling / 2
                );
            }
        }
        assert!(retry_backoff(t, u32::MAX, &mut rng) < RETRY_BACKOFF_CAP * t, "capped however many");
        let draws = |seed| {
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            (1..6).map(|k| retry_backoff(t, k, &mut r)).collect::<Vec<_>>()
        };
        assert_eq!(draws(3), draws(3), "a seed replays its waits");
        assert_ne!(draws(3), draws(4), "threads seeded apart draw apart");
    }

    /// Writes on servers 1 and 2 (primaries), backed up on 2 and 3; the client is server 0.
    fn parts_1_2() -> Participants {
        Participants { wp: 0b0110, wb: 0b1100, rp: 0b0110, client: 0 }
    }

    fn answer(q: &mut Query, from: u8, state: u8, members: u8) -> Option<Step> {
        q.hear(MsgType::QueryReply, state, from, &parts_1_2(), members)
    }

    #[test]
    fn with_every_participant_in_the_map_every_backup_decides() {
        let all = 0xff;
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 2, answer::REPLICATED, all), None, "backup 3 not heard yet");
        assert_eq!(answer(&mut q, 3, answer::REPLICATED, all), Some(Step::Decided(true)));
        let mut q = Query { asked: 0b1110, ..Query::default() };
        answer(&mut q, 2, answer::REPLICATED, all);
        assert_eq!(answer(&mut q, 3, 0, all), Some(Step::Decided(false)), "a backup never applied it");
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 1, answer::INSTALLED, all), Some(Step::Decided(true)), "a primary installed");
    }

    #[test]
    fn without_a_removed_backup_the_rule_needs_every_member_to_hold_its_part() {
        // Server 3 (a backup) was removed: its answer never comes and no longer counts.
        let members: u8 = !(1 << 3);
        let held = answer::PREPARED;
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 1, held, members), None);
        assert_eq!(answer(&mut q, 2, held | answer::REPLICATED, members), Some(Step::Decided(true)));
        // No backup applied its redo record: validation may not have passed.
        let mut q = Query { asked: 0b1110, ..Query::default() };
        answer(&mut q, 1, held, members);
        assert_eq!(answer(&mut q, 2, held, members), Some(Step::Decided(false)));
        // A member that carried out an abort decides it at once.
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 1, answer::ABORTED, members), Some(Step::Decided(false)));
        // The removed server's own answer is not counted.
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 3, answer::ABORTED, members), None);
        assert_eq!(q.answered, 0);
    }

    #[test]
    fn answers_under_another_map_do_not_count_and_a_new_map_starts_a_resolution_over() {
        let all = 0xff;
        let mut q = Query { asked: 0b1110, ..Query::default() };
        assert_eq!(answer(&mut q, 2, answer::STALE_RESOLVER | answer::REPLICATED, all), None);
        assert_eq!(answer(&mut q, 3, answer::BEHIND | answer::REPLICATED, all), None);
        assert_eq!(q.answered, 0);
        answer(&mut q, 2, answer::REPLICATED, all);
        assert_eq!(answer(&mut q, 3, answer::REPLICATED, all), Some(Step::Decided(true)));
        q.follow(1);
        assert_eq!((q.decided, q.answered, q.epoch), (None, 0, 1), "a decision by the rule is taken again");
        let mut certain =
            Query { asked: 0b1110, decided: Some(false), certain: true, answered: 0b0110, ..Query::default() };
        certain.follow(1);
        assert_eq!((certain.decided, certain.answered), (Some(false), 0), "a known abort is only sent again");
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
