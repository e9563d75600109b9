//! The replicated SwitchTx server (every variant but Eris): the hub that owns the pieces of
//! [`crate::server`]'s table, routes each input to the piece it concerns, and is the only place
//! where they meet. What it does itself is what involves several pieces: a restart from the log
//! (the client's and the participant's records), a new shard map (the participant takes shards
//! over, removed clients' attempts are resolved, lanes and resolutions resend), the lease tick
//! and grants, and which of a lane or the participant's own resolutions an answer is for.

use super::client::Clients;
use super::events::{ServerEvent, ServerTimer};
use super::manager::Manager;
use super::participant::Participant;
use super::promotion::Resolutions;
use super::resolution::answer;
use super::settings::{Mpl, ServerConfig};
use super::shared::{Out, Shared};
use super::store::{Owner, Record};
use crate::config::ShardMap;
use crate::wal::WalRecord;
use crate::wire::{Message, MsgType, FLAG_DOWN};
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route};
use std::collections::BTreeMap;

/// A replicated SwitchTx server host (see the module documentation).
#[derive(Debug)]
pub struct Replicated {
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
    /// When a draining server stops renewing its lease.
    drain_renewals_until: Option<Nanos>,
}

impl Replicated {
    /// A server; `cfg.check()` must hold.
    pub fn new(cfg: ServerConfig) -> Self {
        let manager = (cfg.lease_ns > 0 && cfg.id == ShardMap::manager(cfg.layout.servers()))
            .then(|| Manager::new(cfg.layout.servers()));
        let sh = Shared::new(cfg);
        Replicated {
            clients: Clients::new(&sh),
            participant: Participant::default(),
            resolutions: Resolutions::default(),
            manager,
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
        let mut server = Replicated::new(cfg);
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

impl Host for Replicated {
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
        let msg_byte = bytes.get(pisadb_wire::FRAME_BYTES).copied();
        if cfg.lease_ns > 0 && matches!(msg_byte, Some(b) if b == MsgType::Lease as u8 || b == MsgType::Grant as u8) {
            return Route::Core(cfg.threads);
        }
        self.sh.route_to_thread(bytes)
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
                MsgType::Lease => match self.manager.as_mut() {
                    Some(m) => m.request(now, &d, from, sh, out),
                    None => out.events.push(ServerEvent::Rejected("lease_not_manager")),
                },
                MsgType::Grant => self.grant(now, &d, out),
                _ => out.events.push(ServerEvent::Rejected("unexpected_type")),
            },
            Message::Sequenced(_) => {
                out.cpu_ns += costs.handler_ns;
                out.events.push(ServerEvent::Rejected("unexpected_type"))
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
