//! A server as client: its worker threads' lanes, each running one transaction at a time from
//! its first attempt until it commits, on the engine's [`Workers`] and [`Backoff`].
//!
//! Thread `t` of every server handles the transactions of client threads `t`: every message
//! names its client thread and runs on that core of the receiver. Each thread keeps up to
//! `lanes` transactions in flight (its MPL, static or adaptive, [`crate::admission`]); lane
//! `l` of thread `t` owns one switch slot (`crate::server::settings`).
//!
//! **A transaction**: *execute* reads its keys from their primaries (a read that finds a lock
//! aborts at once); then the client computes its writes (read-modify-write, `value + 1`),
//! claims its switch slot with `init` (not in FaSST) and sends each participant a `prepare`
//! with its part (`crate::server::participant`). The outcome comes back gathered by the
//! switches, or in FaSST the client gathers each phase's replies itself and scatters the next
//! phase ([`Clients::at_client`]). A `fail` makes the client retry the same keys as a new
//! attempt (marked retrying: high priority). A read-only transaction and a blind write skip
//! the execute phase (§3.2.3).
//!
//! **Timeouts** (§3.5): a client that hears no outcome within `timeout_ns` counts a loss (for
//! admission control) and resolves the attempt by asking every participant
//! ([`crate::server::resolution`]); it then tells everyone the outcome and waits for every
//! acknowledgement before the lane moves on.
//!
//! **Retry backoff.** An attempt that timed out (in its execute phase, or resolved as aborted)
//! is not retried at once: the lane pauses (whatever still arrives for the old attempt is
//! ignored) for the engine's doubling [`Backoff`]: `timeout_ns` doubled per timeout its thread
//! has had in a row since its last commit, capped at [`RETRY_BACKOFF_CAP`] × `timeout_ns`,
//! times a jitter in `[1/2, 1)` drawn from the thread's own seeded stream (not the workload's,
//! whose draws therefore do not move). Retrying at once added load exactly when latency was
//! near the timeout; in real mode at a 20 ms timeout that collapsed whole runs to a few
//! commits/s.
//!
//! **Restart** ([`Clients::replay`], [`Clients::resume`]): each lane whose last logged attempt
//! has no counted outcome resumes resolving it; a lane whose last attempt was aborted tells
//! its participants so again; new attempts start above every logged one.

use super::events::{AbortReason, ServerEvent, ServerTimer};
use super::participant::{logged, unlogged, LocalClient, Participant};
use super::resolution::{requery_interval, Query, Step};
use super::settings::Mpl;
use super::shared::Out;
use super::shared::Shared;
use crate::admission::Admission;
use crate::keys::{bits, shard_of};
use crate::tree::{Coordination, Participants};
use crate::wal::WalRecord;
use crate::wire::{Control, Data, Item, MsgType, FLAG_DOWN, FLAG_RETRY};
use crate::workload::Draws;
use pisadb_core::Nanos;
use pisadb_engine::id::Lanes;
use pisadb_engine::worker::{Backoff, Workers};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// The most a retry after a timeout is put off, in multiples of `timeout_ns`.
pub const RETRY_BACKOFF_CAP: u64 = 8;

/// A client transaction in a lane.
#[derive(Clone, Debug)]
pub struct Txn {
    /// The current attempt.
    attempt: u32,
    /// (key, written).
    keys: Vec<(u64, bool)>,
    /// key → (value, version) read so far.
    reads: BTreeMap<u64, (u64, u64)>,
    /// Servers whose read replies are outstanding (bit set).
    awaiting: u8,
    /// Whether the commit protocol has started.
    committing: bool,
    /// When its first attempt started.
    first_start: Nanos,
    /// Attempts before the current one.
    retries: u32,
    /// Its participants.
    parts: Participants,
    /// FaSST: the client's gather counter.
    counter: u8,
    /// FaSST: whether a participant failed it.
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

/// One worker thread's admission control and retry state.
#[derive(Clone, Debug)]
struct Thread {
    /// Listing 1's MPL.
    admission: Admission,
    /// Losses (timeouts) in this epoch.
    losses: u32,
    /// The server's commits at this thread's last epoch end.
    commits_at_epoch: u64,
    /// Timeouts of this thread's attempts since its last commit: the retry backoff's exponent.
    timeouts_in_a_row: u32,
    /// The retry backoff (its own stream: the workload's draws do not move).
    backoff: Backoff,
}

/// A lane's last logged `Begin` and whether it was closed as aborted, as a restart finds them.
pub type Begun = BTreeMap<(u16, u8), (WalRecord, bool)>;

/// A server's client side (see the module documentation).
#[derive(Debug)]
pub struct Clients {
    /// Every thread's lanes and their attempt counters.
    lanes: Workers<Txn>,
    /// Per thread: admission and backoff.
    threads: Vec<Thread>,
    /// The transactions' generators.
    draws: Draws,
    /// Commits of this server's clients so far.
    commits: u64,
    /// Lanes rebuilt from the log whose attempt must be resolved when the server starts.
    recovered: Vec<(u16, u8, u32)>,
}

impl Clients {
    /// The client side of a server with settings `sh.cfg` (checked).
    pub fn new(sh: &Shared) -> Self {
        let cfg = &sh.cfg;
        let max = cfg.mpl.lanes();
        let lanes = Lanes::new(u16::from(max)).expect("checked: lanes fit the engine's");
        let threads = (0..cfg.threads)
            .map(|t| Thread {
                admission: match cfg.mpl {
                    Mpl::Adaptive { listing, .. } => Admission::with(max, listing),
                    Mpl::Static(_) => Admission::new(max),
                },
                losses: 0,
                commits_at_epoch: 0,
                timeouts_in_a_row: 0,
                backoff: Backoff::doubling(
                    ChaCha8Rng::seed_from_u64(pisadb_core::rng::splitmix64(
                        cfg.seed ^ 0x6261_636b_6f66_6600 ^ (u64::from(cfg.id) << 32) ^ u64::from(t),
                    )),
                    cfg.timeout_ns,
                    RETRY_BACKOFF_CAP,
                ),
            })
            .collect();
        Clients {
            lanes: Workers::new(u16::from(cfg.id), 0, cfg.threads, lanes).expect("checked: threads fit the engine's"),
            threads,
            draws: Draws::new(&cfg.workload, cfg.id, cfg.layout.servers(), cfg.threads, cfg.seed),
            commits: 0,
            recovered: Vec::new(),
        }
    }

    /// Each thread's MPL now.
    pub fn mpls(&self, sh: &Shared) -> Vec<u8> {
        self.threads.iter().map(|w| mpl_of(sh, w)).collect()
    }

    /// Whether no lane runs anything.
    pub fn is_idle(&self) -> bool {
        self.lanes.all_idle()
    }

    /// Whether (slot, attempt) is a lane's current attempt (not backing off).
    pub fn is_current(&mut self, sh: &Shared, slot: u16, attempt: u32) -> bool {
        self.current(sh, slot, attempt).is_some()
    }

    /// The lanes rebuilt from the log, to resolve at start.
    pub fn take_recovered(&mut self) -> Vec<(u16, u8, u32)> {
        std::mem::take(&mut self.recovered)
    }

    fn txn_mut(&mut self, thread: u16, lane: u8) -> Option<&mut Txn> {
        self.lanes.current_mut(thread, u16::from(lane))
    }

    fn current(&mut self, sh: &Shared, slot: u16, attempt: u32) -> Option<(u16, u8, &mut Txn)> {
        let (thread, lane) = sh.cfg.lane_of(slot)?;
        let txn = self.txn_mut(thread, lane)?;
        (txn.attempt == attempt && !txn.paused).then_some((thread, lane, txn))
    }

    /// Starts a new transaction in lane 0 of thread 0 as a worker would (draw its keys, send
    /// its reads); for the cost benchmarks.
    pub fn begin_one(&mut self, now: Nanos, sh: &Shared, out: &mut Out) {
        self.lanes.take(0, 0);
        self.start_lane(now, 0, 0, sh, out);
    }

    fn start_lane(&mut self, now: Nanos, thread: u16, lane: u8, sh: &Shared, out: &mut Out) {
        let (keys, blind) = self.draws.draw(thread);
        let read_only = keys.iter().all(|k| !k.1);
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
            read_only,
            shards: 0,
            blind,
            paused: false,
        };
        self.lanes.run(thread, u16::from(lane), txn);
        self.execute(now, thread, lane, sh, out);
    }

    /// Starts a new attempt of the lane's transaction: the execute phase.
    fn execute(&mut self, now: Nanos, thread: u16, lane: u8, sh: &Shared, out: &mut Out) {
        let attempt = self.lanes.next_attempt(thread, u16::from(lane));
        let me = sh.me();
        let slot = sh.cfg.slot(me, thread, lane);
        if !sh.map.is_member(me) {
            // Removed from the map ([`crate::config`]): this server's clients start nothing
            // more (what they had in flight was resolved on the way here).
            self.lanes.take(thread, u16::from(lane));
            return;
        }
        let Some(txn) = self.txn_mut(thread, lane) else { return };
        txn.attempt = attempt;
        txn.reads.clear();
        txn.committing = false;
        txn.counter = 0;
        txn.aborted = false;
        txn.query = None;
        let retry = txn.retries > 0;
        let keys = txn.keys.clone();
        let map = &sh.map;
        let servers = keys.iter().fold(0u8, |m, &(k, _)| m | (1 << map.primary_of(shard_of(k))));
        txn.awaiting = servers;
        out.cpu_ns += sh.cfg.costs.begin_ns;
        if sh.cfg.eris {
            return self.eris_send(thread, lane, sh, out);
        }
        if txn.read_only || txn.blind {
            // No execute phase: the participants copy their versions, or nothing is read
            // (§3.2.3).
            return self.commit(now, thread, lane, sh, out);
        }
        for server in bits(servers) {
            let mut d = Data::new(MsgType::Read, slot, Shared::tag(attempt), attempt, 0);
            d.client = me;
            d.thread = thread as u8;
            d.flags = if retry { FLAG_RETRY } else { 0 };
            d.items = keys
                .iter()
                .filter(|&&(k, _)| map.primary_of(shard_of(k)) == server)
                .map(|&(key, _)| Item { key, value: 0, version: 0, locked: false })
                .collect();
            sh.send(out, server, d.datagram(u16::from(me), u16::from(server)));
        }
        if sh.cfg.timeout_ns > 0 {
            out.timers.push((now + sh.cfg.timeout_ns, ServerTimer::Timeout(thread, lane, attempt)));
        }
    }

    /// Eris: the whole transaction in one message to the sequencer (through the anchor).
    fn eris_send(&mut self, thread: u16, lane: u8, sh: &Shared, out: &mut Out) {
        let me = sh.me();
        let slot = sh.cfg.slot(me, thread, lane);
        let Some(txn) = self.txn_mut(thread, lane) else { return };
        let attempt = txn.attempt;
        let q = super::eris::request(
            (slot, me, thread, sh.cfg.threads),
            attempt,
            sh.cfg.txn_id(thread, lane, attempt),
            txn.keys.clone(),
        );
        txn.shards = q.header.mask.get();
        txn.committing = true;
        let anchor = sh.cfg.layout.anchor(me) as u8;
        sh.send(out, anchor, q.datagram(u16::from(me), u16::from(anchor)));
    }

    /// Eris: a shard's reply reaches the client.
    pub fn eris_reply(&mut self, now: Nanos, d: &Data, sh: &Shared, out: &mut Out) {
        let Some((thread, lane, txn)) = self.current(sh, d.slot, d.attempt) else { return };
        txn.shards &= !(1u64 << d.coord);
        for item in &d.items {
            txn.reads.insert(item.key, (item.value, item.version));
        }
        if txn.shards == 0 {
            self.committed(now, thread, lane, sh, None, out);
        }
    }

    /// A read primary's answer to the execute phase (or a read-only transaction's values).
    pub fn read_reply(&mut self, now: Nanos, d: &Data, from: u8, sh: &Shared, p: &mut Participant, out: &mut Out) {
        let Some((thread, lane, txn)) = self.current(sh, d.slot, d.attempt) else { return };
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
            return self.retry(now, thread, lane, sh, out);
        }
        if txn.awaiting == 0 && txn.read_only {
            self.committed(now, thread, lane, sh, Some(p), out);
        } else if txn.awaiting == 0 {
            self.commit(now, thread, lane, sh, out);
        }
    }

    /// The execute phase is done: hand the participants their parts.
    fn commit(&mut self, now: Nanos, thread: u16, lane: u8, sh: &Shared, out: &mut Out) {
        let me = sh.me();
        let slot = sh.cfg.slot(me, thread, lane);
        let coord = sh.cfg.coord;
        let timeout = sh.cfg.timeout_ns;
        let map = &sh.map;
        let primary = |k: u64| 1u8 << map.primary_of(shard_of(k));
        let (attempt, keys, reads, retry, blind, parts);
        {
            let Some(txn) = self.txn_mut(thread, lane) else { return };
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
            parts = txn.parts;
        }
        let txn_id = sh.cfg.txn_id(thread, lane, attempt);
        // From here participants hold state for the attempt: a restarted client must resolve
        // it (logged before the init and prepares leave).
        self.log_begin(thread, lane, sh, out);
        let tag = Shared::tag(attempt);
        let flags = if retry { FLAG_RETRY } else { 0 };
        if coord != Coordination::Client {
            let mut init = sh.control(MsgType::Init, (slot, tag, attempt, txn_id), thread, &parts, coord, retry);
            init.flags = flags;
            let anchor = sh.cfg.layout.anchor(me) as u8;
            sh.send(out, anchor, init.datagram(u16::from(me), u16::from(anchor)));
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
            out.cpu_ns += sh.cfg.costs.item_ns * d.items.len() as u64;
            sh.send(out, server, d.datagram(u16::from(me), u16::from(server)));
        }
        if timeout > 0 {
            out.timers.push((now + timeout, ServerTimer::Timeout(thread, lane, attempt)));
        }
    }

    /// A lane's attempt may have timed out: retry an execute phase, else resolve (§3.5).
    pub fn timeout(&mut self, now: Nanos, thread: u16, lane: u8, attempt: u32, sh: &Shared, out: &mut Out) {
        let t = usize::from(thread);
        let Some(txn) = self.lanes.current_mut(thread, u16::from(lane)) else { return };
        if txn.attempt != attempt || txn.paused {
            return;
        }
        if !txn.committing && txn.query.is_none() {
            self.threads[t].losses += 1;
            out.events.push(ServerEvent::Timeout);
            return self.retry_later(now, thread, lane, sh, out);
        }
        let parts = txn.parts;
        let query = txn.query.get_or_insert(Query { asked: parts.wp | parts.wb | parts.rp, ..Query::default() });
        query.follow(sh.map.epoch);
        let q = *query;
        query.resends = query.resends.saturating_add(1);
        if q.answered == 0 && q.decided.is_none() {
            self.threads[t].losses += 1;
            out.events.push(ServerEvent::Timeout);
        }
        let slot = sh.cfg.slot(sh.me(), thread, lane);
        sh.send_resolution(out, q.asked & !q.answered, (slot, attempt), (sh.me(), thread as u8), q.decided);
        let wait = requery_interval(sh.cfg.timeout_ns, q.resends);
        out.timers.push((now + wait, ServerTimer::Timeout(thread, lane, attempt)));
    }

    /// Logs that the lane's current attempt enters the commit protocol (or, from
    /// [`Clients::resolve_abort`], is about to be resolved): participants may hold state for
    /// it from now on.
    fn log_begin(&self, thread: u16, lane: u8, sh: &Shared, out: &mut Out) {
        let Some(t) = self.lanes.current(thread, u16::from(lane)) else { return };
        let attempt = t.attempt;
        sh.log(out, || WalRecord::Begin {
            thread,
            lane,
            attempt,
            txn: sh.cfg.txn_id(thread, lane, attempt),
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
    fn resolve_abort(&mut self, now: Nanos, thread: u16, lane: u8, sh: &Shared, out: &mut Out) {
        let me = sh.me();
        let slot = sh.cfg.slot(me, thread, lane);
        // The participants will hold a (frozen, aborted) state for this attempt, which may
        // never have reached the commit protocol: log it as begun, so that a restarted client
        // resumes at this attempt, not below it (where the participants would ignore it).
        self.log_begin(thread, lane, sh, out);
        let Some(txn) = self.txn_mut(thread, lane) else { return };
        let asked = txn.parts.wp | txn.parts.wb | txn.parts.rp;
        txn.query = Some(Query { asked, decided: Some(false), certain: true, ..Query::default() });
        txn.committing = true;
        let attempt = txn.attempt;
        sh.send_resolution(out, asked, (slot, attempt), (me, thread as u8), Some(false));
        if sh.cfg.timeout_ns > 0 {
            out.timers.push((now + sh.cfg.timeout_ns, ServerTimer::Timeout(thread, lane, attempt)));
        }
    }

    /// A participant's answer to a lane's query or decision; false if no lane runs
    /// (slot, attempt) (then it is a participant's own resolution's, `crate::server::promotion`).
    pub fn query_answer(
        &mut self,
        now: Nanos,
        d: &Data,
        from: u8,
        sh: &Shared,
        p: &mut Participant,
        out: &mut Out,
    ) -> bool {
        let (members, epoch) = (sh.map.members, sh.map.epoch);
        let Some((thread, lane, txn)) = self.current(sh, d.slot, d.attempt) else { return false };
        let parts = txn.parts;
        let Some(q) = txn.query.as_mut() else { return true };
        q.follow(epoch);
        if d.txn != u64::from(epoch) {
            return true;
        }
        match q.hear(d.msg, d.wp, from, &parts, members) {
            None => {}
            Some(Step::Decided(commit)) => {
                let asked = q.asked;
                sh.send_resolution(out, asked, (d.slot, d.attempt), (sh.me(), thread as u8), Some(commit));
            }
            Some(Step::Done(true)) => self.committed(now, thread, lane, sh, Some(p), out),
            Some(Step::Done(false)) => {
                out.events.push(ServerEvent::Aborted(AbortReason::Timeout));
                self.retry_later(now, thread, lane, sh, out);
            }
        }
        true
    }

    /// An admission-control epoch of `thread` ends.
    pub fn epoch(&mut self, now: Nanos, thread: u16, sh: &mut Shared, out: &mut Out) {
        let Mpl::Adaptive { epoch_ns, .. } = sh.cfg.mpl else { return };
        let me = usize::from(sh.me());
        let commits = self.commits;
        let w = &mut self.threads[usize::from(thread)];
        let own = commits - w.commits_at_epoch;
        w.commits_at_epoch = commits;
        // This server's throughput is what its threads see; the others' came piggybacked.
        sh.known[me] = u32::try_from(own).unwrap_or(u32::MAX);
        let total: f64 = sh.known.iter().map(|&k| f64::from(k)).sum();
        w.admission.epoch(total, w.losses > 0);
        w.losses = 0;
        out.events.push(ServerEvent::Mpl(thread, w.admission.mpl));
        self.fill_lanes(now, thread, sh, out);
        if !sh.stopping {
            out.timers.push((now + epoch_ns, ServerTimer::Epoch(thread)));
        }
    }

    /// Retries a lane whose attempt timed out (and was resolved as aborted, if it had reached
    /// the commit protocol), after the retry backoff: retrying at once adds load exactly when
    /// latency is near the timeout, which makes more attempts time out. While draining there
    /// is no retry to delay.
    fn retry_later(&mut self, now: Nanos, thread: u16, lane: u8, sh: &Shared, out: &mut Out) {
        if sh.stopping || sh.cfg.timeout_ns == 0 {
            return self.retry(now, thread, lane, sh, out);
        }
        let w = &mut self.threads[usize::from(thread)];
        w.timeouts_in_a_row = w.timeouts_in_a_row.saturating_add(1);
        let wait = w.backoff.draw_after_ns(w.timeouts_in_a_row);
        let Some(txn) = self.lanes.current_mut(thread, u16::from(lane)) else { return };
        txn.paused = true;
        let attempt = txn.attempt;
        out.timers.push((now + wait, ServerTimer::Retry(thread, lane, attempt)));
    }

    /// A lane's retry backoff ends.
    pub fn backed_off(&mut self, now: Nanos, thread: u16, lane: u8, attempt: u32, sh: &Shared, out: &mut Out) {
        let Some(txn) = self.txn_mut(thread, lane) else { return };
        if txn.attempt != attempt || !txn.paused {
            return;
        }
        txn.paused = false;
        self.retry(now, thread, lane, sh, out);
    }

    fn retry(&mut self, now: Nanos, thread: u16, lane: u8, sh: &Shared, out: &mut Out) {
        if let Some(x) = self.lanes.current(thread, u16::from(lane)).filter(|x| x.committing && !sh.cfg.eris) {
            let (attempt, read_only) = (x.attempt, x.read_only);
            let txn = sh.cfg.txn_id(thread, lane, attempt);
            sh.log(out, || WalRecord::Closed { thread, lane, attempt, txn, committed: None, read_only });
        }
        if sh.stopping || !sh.map.is_member(sh.me()) {
            // No retry while draining (or once removed from the map); but an attempt aborted
            // by a `fail` may have left locks where that `fail` was lost, and no later attempt
            // will release them: tell every participant (the timeout path's decision, with its
            // resends) before leaving. (Any earlier attempt that reached the commit protocol
            // may have: the participants are the same over the attempts, and a decision for
            // this attempt clears theirs.)
            let cleanup =
                self.lanes.current(thread, u16::from(lane)).is_some_and(|x| x.parts.wp != 0 && x.query.is_none());
            if cleanup {
                return self.resolve_abort(now, thread, lane, sh, out);
            }
            self.lanes.take(thread, u16::from(lane));
            return;
        }
        if let Some(txn) = self.txn_mut(thread, lane) {
            txn.retries += 1;
        }
        self.execute(now, thread, lane, sh, out);
    }

    /// A lane's transaction committed: counted, logged, reported; the lane takes the next.
    /// `participant`: this server's, if it has one (an Eris server has none).
    fn committed(
        &mut self,
        now: Nanos,
        thread: u16,
        lane: u8,
        sh: &Shared,
        participant: Option<&mut Participant>,
        out: &mut Out,
    ) {
        let Some(txn) = self.lanes.take(thread, u16::from(lane)) else { return };
        let slot = sh.cfg.slot(sh.me(), thread, lane);
        if let Some(p) = participant.filter(|p| p.part(slot, txn.attempt).is_some()) {
            // This server may hold the attempt's redo records as a promoted primary, and no
            // one else will tell it the outcome.
            p.unlock_promoted(slot, true, sh, out);
        }
        self.commits += 1;
        self.threads[usize::from(thread)].timeouts_in_a_row = 0;
        let id = sh.cfg.txn_id(thread, lane, txn.attempt);
        sh.log(out, || WalRecord::Closed {
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
        self.fill_lanes(now, thread, sh, out);
    }

    /// Starts transactions in idle lanes up to the thread's MPL.
    pub fn fill_lanes(&mut self, now: Nanos, thread: u16, sh: &Shared, out: &mut Out) {
        if sh.stopping || !sh.knows_its_map() {
            return;
        }
        let mpl = usize::from(mpl_of(sh, &self.threads[usize::from(thread)]));
        let lanes = self.lanes.lanes().get();
        let idle: Vec<u8> = (0..lanes).filter(|&l| self.lanes.current(thread, l).is_none()).map(|l| l as u8).collect();
        let busy = usize::from(lanes) - idle.len();
        for lane in idle.into_iter().take(mpl.saturating_sub(busy)) {
            self.start_lane(now, thread, lane, sh, out);
        }
    }

    /// The outcome (or, in FaSST, a participant's reply) reaches the client.
    pub fn at_client(&mut self, now: Nanos, c: &Control, sh: &Shared, p: &mut Participant, out: &mut Out) {
        let (slot, attempt) = (c.slot.get(), c.attempt.get());
        let coord = sh.cfg.coord;
        let me = sh.me();
        let Some((thread, lane, txn)) = self.current(sh, slot, attempt) else { return };
        if !txn.committing || txn.query.is_some() {
            return;
        }
        let down = c.flags & FLAG_DOWN != 0;
        let msg = c.msg_type();
        if down || coord != Coordination::Client {
            match msg {
                MsgType::CommitOk => self.committed(now, thread, lane, sh, Some(p), out),
                MsgType::Fail => {
                    out.events.push(ServerEvent::Aborted(AbortReason::Fail));
                    self.retry(now, thread, lane, sh, out);
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
            parts.scatter(MsgType::Fail) & !(1 << me)
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
        next.sender = me;
        next.class = sh.class(msg, retry);
        for server in bits(scatter) {
            if server == me {
                continue;
            }
            sh.send(out, server, next.datagram(u16::from(me), u16::from(server)));
        }
        if scatter & (1 << me) != 0 || msg == MsgType::Fail {
            p.down(now, &next, sh, self, out);
        }
    }

    /// A new map is news to every lane waiting out a timeout: what timed out before it says
    /// nothing about the servers now in the map. Resolutions resend under it at once, lanes
    /// backing off retry at once, and the backoff starts over.
    pub fn follow_new_map(&mut self, now: Nanos, out: &mut Out) {
        for w in &mut self.threads {
            w.timeouts_in_a_row = 0;
        }
        for (thread, lane, txn) in self.lanes.running() {
            if txn.paused {
                out.timers.push((now, ServerTimer::Retry(thread, lane as u8, txn.attempt)));
            } else if txn.query.is_some() {
                out.timers.push((now, ServerTimer::Timeout(thread, lane as u8, txn.attempt)));
            }
        }
    }

    /// Applies a client's logged record (`Begin`, `Closed`) to a restarting server: keeps
    /// each lane's last `Begin` in `begun`, with whether it was closed as aborted (a lane
    /// closed as committed is dropped), and moves the lane's attempt counter past it.
    pub fn replay(&mut self, record: &WalRecord, begun: &mut Begun) {
        match record {
            WalRecord::Begin { thread, lane, attempt, .. } => {
                self.lanes.skip_to(*thread, u16::from(*lane), *attempt);
                begun.insert((*thread, *lane), (record.clone(), false));
            }
            WalRecord::Closed { thread, lane, attempt, committed, .. } => {
                let key = (*thread, *lane);
                let last =
                    begun.get(&key).map(|(b, _)| matches!(b, WalRecord::Begin { attempt: a, .. } if a == attempt));
                match (last, committed) {
                    (Some(true), Some(_)) => {
                        begun.remove(&key);
                    }
                    (Some(true), None) => {
                        if let Some(b) = begun.get_mut(&key) {
                            b.1 = true;
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Rebuilds the lanes whose last logged attempt has no counted outcome (`begun`, from
    /// [`Clients::replay`]): each resumes resolving it when the server starts, and one closed
    /// as aborted tells its participants so again.
    pub fn resume(&mut self, begun: Begun) {
        for ((thread, lane), (begin, closed_aborted)) in begun {
            let WalRecord::Begin { attempt, keys, reads, read_only, blind, first_start, retries, parts, .. } = begin
            else {
                continue;
            };
            let parts = unlogged(parts);
            if thread >= self.lanes.workers() || u16::from(lane) >= self.lanes.lanes().get() {
                continue;
            }
            let asked = parts.wp | parts.wb | parts.rp;
            let txn = Txn {
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
            };
            self.lanes.run(thread, u16::from(lane), txn);
            self.recovered.push((thread, lane, attempt));
        }
    }
}

impl LocalClient for Clients {
    fn deliver(&mut self, now: Nanos, c: &Control, sh: &Shared, participant: &mut Participant, out: &mut Out) {
        self.at_client(now, c, sh, participant, out);
    }
}

/// A thread's MPL now: the static one, or admission control's.
fn mpl_of(sh: &Shared, w: &Thread) -> u8 {
    match sh.cfg.mpl {
        Mpl::Static(n) => n.max(1),
        Mpl::Adaptive { .. } => w.admission.mpl,
    }
}
