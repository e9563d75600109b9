//! A SwitchTx server: one shard's primary, the previous shard's backup, and worker threads
//! that are clients and participants at once (the symmetric model, §3.1).
//!
//! The server is a hub of pieces, each a type of its own with its own tests, in the way P4DB's
//! node composes the engine's (`systems/p4db/src/node/machine.rs`). The hub owns them, routes
//! every input to the piece it concerns, and is the only place where pieces meet; no piece
//! uses the hub.
//!
//! | piece | type | engine piece | what it does |
//! |---|---|---|---|
//! | [`shared`] | [`Shared`] | | settings, shard map, lease, known throughputs; how any piece sends |
//! | [`client`] | [`Clients`] | [`Workers`](pisadb_engine::worker::Workers), [`Backoff`](pisadb_engine::worker::Backoff) | lanes, execute, commit, timeouts, retries, admission |
//! | [`participant`] | [`Participant`] | | write/read primary and backup: lock, validate, replicate, install, queries, takeover |
//! | [`store`] | [`Store`] | [`LockTable`](pisadb_engine::locks::LockTable) | primary records, backup copy, write locks |
//! | [`resolution`] | [`Query`](resolution::Query) | | the rule that decides a timed-out attempt (pure) |
//! | [`promotion`] | [`Resolutions`] | | attempts a participant resolves itself |
//! | [`manager`] | [`Manager`] | | the configuration manager (leases), on the last server |
//! | [`eris`] | [`Executor`] | | the Eris baseline's shards |
//!
//! beside [`settings`] (the server's configuration and slots) and [`events`] (its timers,
//! events and outbox). The workload's draws are [`crate::workload`]'s, the log records
//! [`crate::wal`]'s.
//!
//! **Data.** Shard `i` lives on server `i`; its backup on server `i + 1 mod n`. The
//! coordinator is the switch tree (messages go to the sender's anchor, [`crate::tree`]), or, in
//! FaSST, the client; messages that come from the coordinator carry `FLAG_DOWN`. The workload
//! is YCSB-T or TPC-C NewOrder + Payment ([`crate::workload`]).
//!
//! **Server crashes** (§3.5; `durable`). The paper recovers a failed server from replicas
//! alone: a backup is promoted, and a new server gathers the failed coordinator's transaction
//! states from the participants. Here a server also writes a write-ahead log ([`crate::wal`]:
//! its client attempts entering and leaving the commit protocol, its locks, installs, applied
//! redo records, rollbacks and query answers), durable before any message of the same handler
//! leaves, and a crashed server restarts from it ([`Server::recover`]): the participant's
//! state comes back as it was answered (what was not logged is lost, and its transaction times
//! out and is decided aborted, which is safe because none of it can have let a primary
//! install); the restarted server itself plays the paper's "new server" for its own lanes
//! ([`client`]). It rejoins as what it was unless it was removed meanwhile: while it was down
//! no other server wrote its shard, so there is nothing to catch up.
//!
//! **Backup promotion** (§3.5, with `lease_ns`, [`crate::config`]). A server acts as a primary
//! or backup only while it holds a lease from the [`manager`], and only in the roles its map
//! gives it. When its map makes it primary of the shard it backed up it takes the shard over
//! ([`Participant::take_over`]) and resolves the attempts whose redo records it had applied
//! ([`promotion`]); the participants of a removed client's attempts resolve those themselves.
//! Resolvers and participants carry their map's epoch, and a participant answers and acts only
//! at its own epoch, so two resolvers under different maps never carry out different outcomes
//! ([`resolution`]). The removed server, when it restarts, learns from its first grant that it
//! is out: it answers for what it took part in (from its log), resolves its own lanes under the
//! new map, and starts nothing new. Not built: re-replicating a shard that lost its backup, and
//! a removed server rejoining.

pub mod client;
pub mod eris;
pub mod events;
pub mod manager;
pub mod participant;
pub mod promotion;
pub mod resolution;
pub mod settings;
pub mod shared;
pub mod store;

pub use crate::costs::{Costs, COSTS};
pub use crate::keys::{key_of, shard_of};
pub use crate::workload::Workload;
pub use client::{Clients, RETRY_BACKOFF_CAP};
pub use eris::Executor;
pub use events::{AbortReason, ServerEvent, ServerTimer};
pub use manager::Manager;
pub use participant::Participant;
pub use promotion::Resolutions;
pub use resolution::{requery_interval, REQUERY_BACKOFF_CAP};
pub use settings::{Mpl, ServerConfig};
pub use shared::{Out, Shared};
pub use store::{Owner, Record, Store};

use crate::config::ShardMap;
use crate::wal::WalRecord;
use crate::wire::{Message, MsgType, FLAG_DOWN};
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route};
use resolution::answer;
use std::collections::BTreeMap;

/// A server host (see the module documentation).
#[derive(Debug)]
pub struct Server {
    /// What every piece reads.
    sh: Shared,
    /// The client side.
    clients: Clients,
    /// The participant side and the data.
    participant: Participant,
    /// Attempts the participant resolves itself.
    resolutions: Resolutions,
    /// The configuration manager, on the manager's server with leases on.
    manager: Option<Manager>,
    /// The Eris baseline's shards, in an Eris run.
    eris: Option<Executor>,
    /// When a draining server stops renewing its lease.
    drain_renewals_until: Option<Nanos>,
}

impl Server {
    /// A server; `cfg.check()` must hold.
    pub fn new(cfg: ServerConfig) -> Self {
        let manager = (cfg.lease_ns > 0 && cfg.id == ShardMap::manager(cfg.layout.servers()))
            .then(|| Manager::new(cfg.layout.servers()));
        let eris = cfg.eris.then(|| Executor::new(cfg.threads));
        let sh = Shared::new(cfg);
        Server {
            clients: Clients::new(&sh),
            participant: Participant::default(),
            resolutions: Resolutions::default(),
            manager,
            eris,
            drain_renewals_until: None,
            sh,
        }
    }

    /// A server restarted from its write-ahead log `log` ([`crate::wal`]): its primary shard,
    /// its backup copy and the participant states replayed; each client lane whose last
    /// logged attempt has no counted outcome resumes resolving it, and a lane whose last
    /// attempt was aborted tells its participants so again before it retries (its `fail` may
    /// have been lost, and the locks it left would otherwise wait for an attempt that may
    /// never come). New attempts start above every logged one, so no transaction id is reused.
    pub fn recover(cfg: ServerConfig, log: &[WalRecord]) -> Self {
        let mut server = Server::new(cfg);
        let mut begun = BTreeMap::new();
        for record in log {
            server.clients.replay(record, &mut begun);
            server.participant.replay(record, &mut server.sh);
        }
        server.clients.resume(begun);
        server
    }

    /// The primary shard's records.
    pub fn primary(&self) -> &BTreeMap<u64, Record> {
        self.participant.store().primary()
    }

    /// The backup copy of the previous shard: key → (value, version).
    pub fn backup(&self) -> &BTreeMap<u64, (u64, u64)> {
        self.participant.store().backup()
    }

    /// Every key of the primary store still locked, with its holder.
    pub fn locked(&self) -> Vec<(u64, Owner)> {
        self.participant.store().locked()
    }

    /// The shard map this server follows.
    pub fn map(&self) -> &ShardMap {
        &self.sh.map
    }

    /// Each thread's MPL now.
    pub fn mpls(&self) -> Vec<u8> {
        self.clients.mpls(&self.sh)
    }

    /// Starts a new transaction in lane 0 of thread 0 as a worker would (draw its keys, send
    /// its reads); for the cost benchmarks.
    pub fn begin_one(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        self.clients.begin_one(now, &self.sh, out);
    }

    /// Starts resolving an attempt this server holds a part of and cannot leave to its client
    /// (not one of its own lanes' current attempts: the lane resolves it).
    fn start_resolution(&mut self, now: Nanos, slot: u16, attempt: u32, out: &mut Out) {
        let lane_runs_it = self.clients.is_current(&self.sh, slot, attempt);
        self.resolutions.start(now, (slot, attempt), lane_runs_it, &self.participant, out);
    }

    /// Adopts a newer map: logged, then the shards this server now leads are taken over and
    /// the redo records it applied for them are resolved, as are a removed client's attempts.
    fn adopt(&mut self, now: Nanos, map: ShardMap, out: &mut Out) {
        if map.epoch <= self.sh.map.epoch {
            return;
        }
        let logged = (map.epoch, map.primary.clone(), map.backup.clone(), map.members);
        let removed = self.sh.map.members & !map.members;
        let undecided = self.participant.take_over(&mut self.sh, map, None);
        self.sh.log(out, || WalRecord::Adopted {
            epoch: logged.0,
            primary: logged.1,
            backup: logged.2,
            members: logged.3,
            undecided: undecided.clone(),
        });
        // Attempts of a removed client are resolved by every member holding a part of them
        // (the same rule under the same map decides the same); a removed server resolves
        // nothing for others (its answers no longer count either).
        let orphans = if self.sh.map.is_member(self.sh.me()) { self.participant.orphans(removed) } else { Vec::new() };
        for (slot, attempt) in undecided.into_iter().chain(orphans) {
            self.start_resolution(now, slot, attempt, out);
        }
        self.clients.follow_new_map(now, out);
        self.resolutions.follow_new_map(now, out);
    }

    /// Renews the lease (a quarter lease apart); the manager also removes the servers whose
    /// leases have surely lapsed.
    fn lease_tick(&mut self, now: Nanos, out: &mut Out) {
        let me = self.sh.me();
        let lease = self.sh.cfg.lease_ns;
        // While draining the manager removes no one, and the others keep asking for four leases
        // more (a map the manager made just before the drain must still reach them; then the
        // timers stop, or the drain would never end).
        if self.sh.stopping {
            let until = *self.drain_renewals_until.get_or_insert(now + 4 * lease);
            if self.manager.is_some() || !self.sh.map.is_member(me) || now >= until {
                return;
            }
        }
        if let Some(manager) = self.manager.as_mut() {
            for server in manager.lapsed(now, &self.sh.map, me, lease) {
                if self.sh.map.can_remove(server) {
                    let next = self.sh.map.without(server);
                    self.adopt(now, next, out);
                }
            }
        } else {
            self.sh.ask_for_map(now, out);
        }
        out.timers.push((now + (lease / 4).max(1), ServerTimer::Lease));
    }

    /// A grant reaches a server: adopt a newer map; extend the lease from the asking time.
    fn grant(&mut self, now: Nanos, d: &crate::wire::Data, out: &mut Out) {
        out.cpu_ns += self.sh.cfg.costs.handler_ns;
        let Some(map) = ShardMap::from_items(d.attempt, self.sh.n(), &d.items) else {
            return out.events.push(ServerEvent::Rejected("bad_map"));
        };
        if map.epoch > self.sh.map.epoch {
            self.adopt(now, map, out);
        }
        if d.wp == 1 && d.attempt == self.sh.map.epoch && self.sh.map.is_member(self.sh.me()) {
            let first = self.sh.lease_until == 0;
            self.sh.lease_until = self.sh.lease_until.max(d.txn.saturating_add(self.sh.cfg.lease_ns));
            if first {
                // The clients waited for the map (a restarted server may have been removed);
                // each thread starts its own (on its core, not on the lease core).
                for thread in 0..self.sh.cfg.threads {
                    out.timers.push((now, ServerTimer::Fill(thread)));
                }
            }
        }
    }

    /// A participant's answer to a query or a decision: a lane's resolution's, or this
    /// server's own.
    fn query_answer(&mut self, now: Nanos, d: &crate::wire::Data, from: u8, out: &mut Out) {
        if d.wp & answer::STALE_RESOLVER != 0 && self.sh.cfg.lease_ns > 0 {
            self.sh.ask_for_map(now, out);
        }
        if !self.clients.query_answer(now, d, from, &self.sh, &mut self.participant, out) {
            self.resolutions.answer(d, from, &self.sh, &self.participant, out);
        }
    }
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
        self.sh.cfg.threads + u16::from(self.sh.cfg.lease_ns > 0)
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        // A restarted server: locks it holds count from now, and every recovered lane resolves
        // its attempt at once (the timeout path asks, or re-sends the decision).
        self.participant.restart_lock_clocks(now);
        for (thread, lane, attempt) in self.clients.take_recovered() {
            out.timers.push((now, ServerTimer::Timeout(thread, lane, attempt)));
        }
        if self.sh.cfg.lease_ns > 0 {
            // Serve nothing until the first grant; the manager counts everyone from now.
            if let Some(m) = self.manager.as_mut() {
                m.start(now);
            }
            out.timers.push((now, ServerTimer::Lease));
            for (slot, attempt) in self.participant.promoted() {
                self.start_resolution(now, slot, attempt, out);
            }
        }
        for thread in 0..self.sh.cfg.threads {
            self.clients.fill_lanes(now, thread, &self.sh, out);
            if let Mpl::Adaptive { epoch_ns, .. } = self.sh.cfg.mpl {
                out.timers.push((now + epoch_ns, ServerTimer::Epoch(thread)));
            }
        }
    }

    fn route(&self, bytes: &[u8]) -> Route {
        let cfg = &self.sh.cfg;
        // An Eris transaction runs on the first of this server's shards it names.
        if let Ok((_, Message::Sequenced(q))) = Message::open(bytes) {
            let threads = cfg.threads as u8;
            let first = (0..threads).find(|t| q.header.mask.get() & (1 << (cfg.id * threads + t)) != 0);
            return first.map_or(Route::AnyCore, |t| Route::Core(u16::from(t)));
        }
        let msg_byte = bytes.get(pisadb_wire::FRAME_BYTES).copied();
        if cfg.lease_ns > 0 && matches!(msg_byte, Some(b) if b == MsgType::Lease as u8 || b == MsgType::Grant as u8) {
            return Route::Core(cfg.threads);
        }
        match thread_of(bytes) {
            Some(t) if t < cfg.threads => Route::Core(t),
            _ => Route::AnyCore,
        }
    }

    fn sorts_receive_batches(&self) -> bool {
        // §3.4.1: with semantic priority, a server drains its receive queue and handles the
        // batch by class (the driver sorts; the classes are the wire's, as the switches use).
        self.sh.cfg.priority
    }

    fn receive_class(&self, bytes: &[u8]) -> u8 {
        crate::wire::classify(bytes)
    }

    fn timer_core(&self, timer: &ServerTimer) -> u16 {
        let threads = self.sh.cfg.threads;
        match *timer {
            ServerTimer::Epoch(t)
            | ServerTimer::Timeout(t, _, _)
            | ServerTimer::Retry(t, _, _)
            | ServerTimer::Fill(t) => t.min(threads - 1),
            ServerTimer::Lease => threads,
            ServerTimer::Recover(slot, _) => self.participant.thread_of(slot).unwrap_or(0).min(threads - 1),
        }
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        let costs = self.sh.cfg.costs;
        out.cpu_ns += costs.stack_ns;
        let (frame, msg) = match Message::open(bytes) {
            Ok(m) => m,
            Err(e) => return out.events.push(ServerEvent::Rejected(e.reason())),
        };
        let from = u8::try_from(frame.src).unwrap_or(u8::MAX);
        let (sh, clients, p) = (&mut self.sh, &mut self.clients, &mut self.participant);
        match msg {
            Message::Control(c) => {
                if let Some(k) = sh.known.get_mut(usize::from(c.sender)) {
                    if c.sender != sh.cfg.id {
                        *k = c.throughput.get();
                    }
                }
                out.cpu_ns += costs.handler_ns;
                if c.flags & FLAG_DOWN != 0 {
                    p.note_attempt(c.slot.get(), c.attempt.get(), sh);
                    p.down(now, &c, sh, clients, out);
                } else {
                    clients.at_client(now, &c, sh, p, out);
                }
            }
            Message::Data(_) if from >= sh.n() => out.events.push(ServerEvent::Rejected("unknown_source")),
            Message::Data(d) => match d.msg {
                MsgType::Read => {
                    p.note_attempt(d.slot, d.attempt, sh);
                    p.serve_read(now, &d, from, sh, out)
                }
                MsgType::Prepare => {
                    p.note_attempt(d.slot, d.attempt, sh);
                    p.prepare(now, &d, sh, clients, out)
                }
                MsgType::ReadReply => {
                    out.cpu_ns += costs.handler_ns;
                    clients.read_reply(now, &d, from, sh, p, out)
                }
                MsgType::Query | MsgType::Resolve => p.query_serve(now, &d, from, sh, out),
                MsgType::QueryReply | MsgType::ResolveAck => {
                    out.cpu_ns += costs.handler_ns;
                    self.query_answer(now, &d, from, out)
                }
                MsgType::ErisReply => {
                    out.cpu_ns += costs.handler_ns;
                    clients.eris_reply(now, &d, sh, p, out)
                }
                MsgType::Lease => match self.manager.as_mut() {
                    Some(m) => m.request(now, &d, from, sh, out),
                    None => out.events.push(ServerEvent::Rejected("lease_not_manager")),
                },
                MsgType::Grant => self.grant(now, &d, out),
                _ => out.events.push(ServerEvent::Rejected("unexpected_type")),
            },
            Message::Sequenced(q) => {
                out.cpu_ns += costs.handler_ns;
                match self.eris.as_mut() {
                    Some(eris) => eris.receive(q, sh, p.store_mut(), out),
                    None => out.events.push(ServerEvent::Rejected("not_eris")),
                }
            }
        }
    }

    fn handle_timer(&mut self, now: Nanos, timer: ServerTimer, out: &mut HostOutbox<Self>) {
        let (sh, clients) = (&mut self.sh, &mut self.clients);
        match timer {
            ServerTimer::Epoch(t) => clients.epoch(now, t, sh, out),
            ServerTimer::Timeout(t, l, a) => clients.timeout(now, t, l, a, sh, out),
            ServerTimer::Retry(t, l, a) => clients.backed_off(now, t, l, a, sh, out),
            ServerTimer::Lease => self.lease_tick(now, out),
            ServerTimer::Recover(slot, a) => self.resolutions.tick(now, slot, a, sh, &self.participant, out),
            ServerTimer::Fill(t) => clients.fill_lanes(now, t, sh, out),
        }
    }

    fn stop(&mut self) {
        self.sh.stopping = true;
    }

    fn is_idle(&self) -> bool {
        self.clients.is_idle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Control, Data};

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
}
