//! The client host: N closed-loop clients running the paper's micro-benchmark.
//!
//! Every client runs one transaction at a time on one hot key `x`, drawing a write
//! transaction `[VALUE(x, local), WRITE(x, local + 1)]` with probability `w` and otherwise a
//! read transaction `[READ(x)]`, where `local` is the value in the client's own cache. Every
//! reply (commit or abort, from the store or the switch) refreshes the cache from its `VALUE`
//! and `UPDATED` ops. On an abort of either kind the client retries the *same* template with
//! the refreshed value as the transaction's next attempt (same request id); a commit is
//! counted and the next template is drawn, until the client has its commits. Think time is 0.
//!
//! Before any client starts, client 0 sends one uncounted `WRITE(x, 0)` (the original's
//! initialisation), so that every run starts from a known store.
//!
//! ## Attempts, retransmission, and counting a commit once
//!
//! A transaction keeps its request id over all its attempts; only the attempt number moves.
//! An attempt unanswered for `retransmit_ns` is sent again, byte for byte (same id, same
//! attempt). The store commits a request id at most once and answers any later attempt of a
//! committed transaction with that commit's reply (`store.rs`), so however attempts are
//! lost, duplicated or retried, a transaction applies at most once.
//!
//! The switch cannot tell a duplicate or a retransmission from a new request: when a copy of
//! an attempt already logged its write, the switch answers the next copy with an abort
//! against that logged value, while the first copy may well commit at the store. The client
//! therefore never takes an abort as the end of a transaction: it only retries, under the
//! same request id, which the store resolves — if an earlier attempt committed, the retry
//! gets that commit's `OK`, and the transaction is counted once, as committed. What the
//! client accepts:
//! - an `OK` for its current request id, whatever the attempt (any attempt's commit is *the*
//!   commit of the transaction), which ends the transaction;
//! - an abort for its current request id *and* current attempt, which starts the next
//!   attempt with the values the abort carried;
//! - nothing else: replies for older ids or attempts are stale (a duplicate, a retransmission
//!   answered twice) and are counted but change nothing, so duplicated aborts cannot multiply
//!   the attempts in flight.
//!
//! Retransmission uses one lazy timer per client: it is armed when a client sends and no
//! timer is pending; when it fires it retransmits if the current attempt has waited
//! `retransmit_ns`, or else re-arms for when it will have. So a healthy run has about one
//! timer event per client per `retransmit_ns` rather than one per attempt.
//!
use crate::wire::{Message, Op, OpType, Status, FLAG_FROM_SWITCH};
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route, Send, TraceBytes, TraceHash};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// The hot key of the micro-benchmark.
pub const HOT_KEY: u32 = 1;
/// CPU time a client charges per reply handled (and per retransmission): the median of
/// `cargo bench -p pisadb-gotthard --bench handlers`'s `client_reply` (`CALIBRATION.md`).
pub const CLIENT_REPLY_NS: Nanos = 260;

/// Who aborted a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortSource {
    /// The store's compare failed.
    Store,
    /// The switch, against a committed value.
    Switch,
    /// The switch, against an optimistically logged value.
    SwitchOptimistic,
}

/// What the client host reports to the observer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// A transaction committed.
    Committed {
        /// The client.
        client: u32,
        /// Its request id.
        request: u32,
        /// Whether it was a write transaction.
        write: bool,
        /// Whether the switch answered it (a cached read).
        by_switch: bool,
        /// From the first attempt's send to the commit.
        latency_ns: Nanos,
        /// Attempts beyond the first.
        retries: u32,
    },
    /// An attempt aborted.
    Aborted(AbortSource),
    /// An attempt was sent again after a timeout.
    Retransmitted,
    /// A reply for an older request id or attempt was ignored.
    Stale,
    /// A client has all its commits.
    Finished(u32),
    /// A datagram was ignored, with the reason.
    Ignored(&'static str),
}

/// The client host's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientTimer {
    /// Client `0`'s retransmission check.
    Retransmit(u32),
}

impl TraceBytes for ClientTimer {
    fn trace(&self, hash: &mut TraceHash) {
        match *self {
            ClientTimer::Retransmit(c) => {
                hash.write(b"retransmit ");
                hash.write_decimal(u64::from(c));
            }
        }
    }
}

/// The settings of a client host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientConfig {
    /// This host's address.
    pub address: u16,
    /// The store's address.
    pub store: u16,
    /// Clients on this host.
    pub clients: u32,
    /// Probability of a write transaction, 0..=1.
    pub write_share: f64,
    /// Commits each client makes.
    pub commits_per_client: u32,
    /// The run's seed.
    pub seed: u64,
    /// An attempt unanswered this long is sent again.
    pub retransmit_ns: Nanos,
}

/// The transaction a client runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Template {
    /// The uncounted `WRITE(x, 0)`.
    Init,
    /// `[READ(x)]`.
    Read,
    /// `[VALUE(x, local), WRITE(x, local + 1)]`.
    Increment,
}

/// One closed-loop client.
#[derive(Debug)]
struct Client {
    /// Its generator.
    rng: ChaCha8Rng,
    /// Values learned from replies.
    cache: BTreeMap<u32, i32>,
    /// The request id of the current transaction (or the last one).
    request: u32,
    /// The current attempt of that transaction.
    attempt: u16,
    /// The current attempt's datagram, for retransmission.
    in_flight: Vec<u8>,
    /// When the current attempt was last sent.
    sent_ns: Nanos,
    /// Whether a retransmission timer is pending.
    timer_armed: bool,
    /// The template in flight; `None` when idle (not started or finished).
    template: Option<Template>,
    /// When the current transaction's first attempt was sent.
    started_ns: Nanos,
    /// Commits counted.
    commits: u32,
}

/// The client host.
#[derive(Debug)]
pub struct ClientHost {
    /// Its settings.
    cfg: ClientConfig,
    /// The clients, by id.
    clients: Vec<Client>,
    /// Told to stop: no client begins a new transaction (those in flight finish).
    stopping: bool,
    /// CPU time charged per reply handled and per retransmission.
    reply_ns: Nanos,
}

impl ClientHost {
    /// A host of `cfg.clients` clients, none started.
    pub fn new(cfg: ClientConfig) -> Self {
        let clients = (0..cfg.clients)
            .map(|c| Client {
                rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ (u64::from(c) << 32) ^ 0x6077_4a2d),
                cache: BTreeMap::new(),
                request: 0,
                attempt: 0,
                in_flight: Vec::new(),
                sent_ns: 0,
                timer_armed: false,
                template: None,
                started_ns: 0,
                commits: 0,
            })
            .collect();
        ClientHost { cfg, clients, stopping: false, reply_ns: CLIENT_REPLY_NS }
    }

    /// The same host charging `reply_ns` per reply and retransmission (default
    /// [`CLIENT_REPLY_NS`]).
    pub fn with_reply_ns(self, reply_ns: Nanos) -> Self {
        ClientHost { reply_ns, ..self }
    }

    /// Commits counted by client `c`.
    pub fn commits(&self, c: u32) -> u32 {
        self.clients[c as usize].commits
    }

    fn ops(&self, c: u32, template: Template) -> Vec<Op> {
        let local = self.clients[c as usize].cache.get(&HOT_KEY).copied().unwrap_or(0);
        match template {
            Template::Init => vec![Op::write(HOT_KEY, 0)],
            Template::Read => vec![Op::read(HOT_KEY)],
            Template::Increment => vec![Op::value(HOT_KEY, local), Op::write(HOT_KEY, local.wrapping_add(1))],
        }
    }

    /// Sends the first attempt of a new transaction (`retry` false) or the next attempt of
    /// the current one, and arms the retransmission timer if none is pending.
    fn send(&mut self, now: Nanos, c: u32, template: Template, retry: bool, out: &mut HostOutbox<Self>) {
        let ops = self.ops(c, template);
        let client = &mut self.clients[c as usize];
        if retry {
            client.attempt = client.attempt.wrapping_add(1);
        } else {
            client.request += 1;
            client.attempt = 0;
        }
        client.template = Some(template);
        let msg = Message::request(c, client.request, ops).with_attempt(client.attempt);
        client.in_flight = msg.datagram(self.cfg.address, self.cfg.store);
        client.sent_ns = now;
        out.sends.push(Send { dst: self.cfg.store, bytes: client.in_flight.clone() });
        if !client.timer_armed {
            client.timer_armed = true;
            out.timers.push((now + self.cfg.retransmit_ns, ClientTimer::Retransmit(c)));
        }
    }

    /// Client `c`'s retransmission check.
    fn on_timer(&mut self, now: Nanos, c: u32, out: &mut HostOutbox<Self>) {
        let retransmit_ns = self.cfg.retransmit_ns;
        let Some(client) = self.clients.get_mut(c as usize) else { return };
        client.timer_armed = false;
        if client.template.is_none() {
            return;
        }
        let due = client.sent_ns + retransmit_ns;
        if now >= due {
            out.cpu_ns += self.reply_ns;
            client.sent_ns = now;
            out.sends.push(Send { dst: self.cfg.store, bytes: client.in_flight.clone() });
            out.events.push(ClientEvent::Retransmitted);
        }
        client.timer_armed = true;
        out.timers.push((client.sent_ns + retransmit_ns, ClientTimer::Retransmit(c)));
    }

    fn begin(&mut self, now: Nanos, c: u32, out: &mut HostOutbox<Self>) {
        let client = &mut self.clients[c as usize];
        if client.commits >= self.cfg.commits_per_client || self.stopping {
            client.template = None;
            return out.events.push(ClientEvent::Finished(c));
        }
        let write = client.rng.random_bool(self.cfg.write_share.clamp(0.0, 1.0));
        client.started_ns = now;
        self.send(now, c, if write { Template::Increment } else { Template::Read }, false, out);
    }

    fn on_reply(&mut self, now: Nanos, msg: Message, out: &mut HostOutbox<Self>) {
        let Some(client) = self.clients.get_mut(msg.client as usize) else {
            return out.events.push(ClientEvent::Ignored("unknown_client"));
        };
        let Some(template) = client.template.filter(|_| msg.request == client.request) else {
            return out.events.push(ClientEvent::Stale);
        };
        let aborted = matches!(msg.status, Status::Abort | Status::OptimisticAbort);
        if aborted && msg.attempt != client.attempt {
            return out.events.push(ClientEvent::Stale);
        }
        for op in msg.ops.iter().filter(|o| matches!(o.op_type, OpType::Value | OpType::Updated)) {
            client.cache.insert(op.key, op.value);
        }
        let c = msg.client;
        match msg.status {
            Status::Ok if template == Template::Init => {
                client.template = None;
                for c in 0..self.cfg.clients {
                    self.begin(now, c, out);
                }
            }
            Status::Ok => {
                client.commits += 1;
                out.events.push(ClientEvent::Committed {
                    client: c,
                    request: msg.request,
                    write: template == Template::Increment,
                    by_switch: msg.flags & FLAG_FROM_SWITCH != 0,
                    latency_ns: now - client.started_ns,
                    retries: u32::from(client.attempt),
                });
                self.begin(now, c, out);
            }
            Status::Abort | Status::OptimisticAbort => {
                let source = match (msg.flags & FLAG_FROM_SWITCH != 0, msg.status) {
                    (false, _) => AbortSource::Store,
                    (true, Status::OptimisticAbort) => AbortSource::SwitchOptimistic,
                    (true, _) => AbortSource::Switch,
                };
                out.events.push(ClientEvent::Aborted(source));
                self.send(now, c, template, true, out);
            }
            Status::BadRequest => out.events.push(ClientEvent::Ignored("bad_request")),
        }
    }
}

impl Host for ClientHost {
    type Timer = ClientTimer;
    type Log = ();
    type Event = ClientEvent;

    fn cores(&self) -> u16 {
        u16::try_from(self.cfg.clients.max(1)).unwrap_or(u16::MAX)
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        if self.clients.is_empty() {
            return;
        }
        self.clients[0].started_ns = now;
        self.send(now, 0, Template::Init, false, out);
    }

    fn route(&self, bytes: &[u8]) -> Route {
        match Message::open(bytes) {
            Ok((_, msg)) if msg.client < self.cfg.clients => Route::Core(u16::try_from(msg.client).unwrap_or(0)),
            _ => Route::AnyCore,
        }
    }

    fn timer_core(&self, timer: &ClientTimer) -> u16 {
        match *timer {
            ClientTimer::Retransmit(c) => u16::try_from(c).unwrap_or(0),
        }
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        out.cpu_ns += self.reply_ns;
        match Message::open(bytes) {
            Ok((_, msg)) if msg.is_reply() => self.on_reply(now, msg, out),
            Ok(_) => out.events.push(ClientEvent::Ignored("request_to_client")),
            Err(e) => out.events.push(ClientEvent::Ignored(e.reason())),
        }
    }

    fn handle_timer(&mut self, now: Nanos, timer: ClientTimer, out: &mut HostOutbox<Self>) {
        match timer {
            ClientTimer::Retransmit(c) => self.on_timer(now, c, out),
        }
    }

    fn stop(&mut self) {
        self.stopping = true;
    }

    fn is_idle(&self) -> bool {
        self.clients.iter().all(|c| c.template.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn cfg(clients: u32, write_share: f64) -> ClientConfig {
        ClientConfig {
            address: 1,
            store: 9,
            clients,
            write_share,
            commits_per_client: 2,
            seed: 5,
            retransmit_ns: 1_000,
        }
    }

    /// Delivers every send of `out` to the store and returns the store's replies.
    fn through_store(store: &mut Store, out: &mut HostOutbox<ClientHost>) -> Vec<Vec<u8>> {
        let mut replies = Vec::new();
        for send in out.sends.drain(..) {
            let mut store_out = HostOutbox::<Store>::default();
            store.handle_datagram(0, &send.bytes, &mut store_out);
            replies.extend(store_out.sends.into_iter().map(|s| s.bytes));
        }
        replies
    }

    #[test]
    fn init_then_closed_loop_until_every_client_has_its_commits() {
        let mut host = ClientHost::new(cfg(3, 0.5));
        let mut store = Store::new(9);
        let mut out = HostOutbox::<ClientHost>::default();
        host.start(0, &mut out);
        assert_eq!(out.sends.len(), 1, "only the initial write");
        let (_, init) = Message::open(&out.sends[0].bytes).unwrap();
        assert_eq!(init.ops, vec![Op::write(HOT_KEY, 0)]);
        let mut rounds = 0;
        while !out.sends.is_empty() {
            rounds += 1;
            assert!(rounds < 100, "bounded");
            for reply in through_store(&mut store, &mut out) {
                host.handle_datagram(10, &reply, &mut out);
            }
        }
        assert!(host.is_idle());
        assert!((0..3).all(|c| host.commits(c) == 2));
        let committed_writes =
            out.events.iter().filter(|e| matches!(e, ClientEvent::Committed { write: true, .. })).count();
        assert_eq!(store.value(HOT_KEY), i32::try_from(committed_writes).unwrap());
    }

    #[test]
    fn an_abort_retries_the_same_template_with_the_refreshed_value() {
        let mut host = ClientHost::new(cfg(1, 1.0));
        let mut out = HostOutbox::<ClientHost>::default();
        host.start(0, &mut out);
        let mut store = Store::new(9);
        let reply = through_store(&mut store, &mut out).remove(0);
        host.handle_datagram(1, &reply, &mut out);
        let (_, first) = Message::open(&out.sends[0].bytes).unwrap();
        assert_eq!(first.ops, vec![Op::value(HOT_KEY, 0), Op::write(HOT_KEY, 1)]);
        out.sends.clear();
        let abort = Message {
            flags: crate::wire::FLAG_REPLY | FLAG_FROM_SWITCH,
            client: 0,
            request: first.request,
            attempt: 0,
            status: Status::OptimisticAbort,
            ops: vec![Op::value(HOT_KEY, 7)],
        };
        host.handle_datagram(2, &abort.datagram(9, 1), &mut out);
        assert!(out.events.contains(&ClientEvent::Aborted(AbortSource::SwitchOptimistic)));
        let (_, retry) = Message::open(&out.sends[0].bytes).unwrap();
        assert_eq!(retry.ops, vec![Op::value(HOT_KEY, 7), Op::write(HOT_KEY, 8)]);
        assert_eq!((retry.request, retry.attempt), (first.request, 1), "same transaction, next attempt");
        out.sends.clear();
        host.handle_datagram(3, &abort.datagram(9, 1), &mut out);
        assert_eq!(out.events.last(), Some(&ClientEvent::Stale), "a duplicate of the first abort");
        assert!(out.sends.is_empty(), "a stale abort starts no attempt");
    }

    /// The client host after its initial write committed, with client 0's first increment
    /// (`[VALUE(x, 0), WRITE(x, 1)]`) sent; returns that request.
    fn one_writer_started(out: &mut HostOutbox<ClientHost>, store: &mut Store) -> (ClientHost, Message) {
        let mut host = ClientHost::new(cfg(1, 1.0));
        host.start(0, out);
        let reply = through_store(store, out).remove(0);
        host.handle_datagram(1, &reply, out);
        let (_, first) = Message::open(&out.sends[0].bytes).unwrap();
        (host, first)
    }

    #[test]
    fn an_unanswered_attempt_is_retransmitted_byte_for_byte_and_the_timer_is_lazy() {
        let mut out = HostOutbox::<ClientHost>::default();
        let mut store = Store::new(9);
        let (mut host, _) = one_writer_started(&mut out, &mut store);
        let sent = out.sends.remove(0).bytes;
        assert_eq!(out.timers, vec![(1_000, ClientTimer::Retransmit(0))], "one timer, armed by the init");
        out.timers.clear();
        host.handle_timer(1_000, ClientTimer::Retransmit(0), &mut out);
        assert!(out.sends.is_empty(), "the increment was sent at 1, due at 1001: no retransmission yet");
        assert_eq!(out.timers, vec![(1_001, ClientTimer::Retransmit(0))], "re-armed for when it is due");
        out.timers.clear();
        host.handle_timer(1_001, ClientTimer::Retransmit(0), &mut out);
        assert_eq!(out.sends[0].bytes, sent, "same request id, same attempt");
        assert_eq!(out.events.last(), Some(&ClientEvent::Retransmitted));
    }

    #[test]
    fn a_switch_abort_of_a_copy_whose_twin_committed_is_resolved_by_the_store_and_counted_once() {
        // The first attempt passes the switch (which logs x = 1) and commits at the store, but
        // the store's reply is lost. The retransmission meets the switch's logged value: the
        // switch answers OPTIMISTIC_ABORT with x = 1. The client retries (attempt 1:
        // [VALUE(x, 1), WRITE(x, 2)]) under the same request id; the store replays the commit.
        let mut out = HostOutbox::<ClientHost>::default();
        let mut store = Store::new(9);
        let (mut host, first) = one_writer_started(&mut out, &mut store);
        let lost = through_store(&mut store, &mut out);
        assert_eq!(lost.len(), 1, "committed; its reply is lost");
        let switch_abort = Message {
            flags: crate::wire::FLAG_REPLY | FLAG_FROM_SWITCH,
            status: Status::OptimisticAbort,
            ops: vec![Op::value(HOT_KEY, 1), Op::write(HOT_KEY, 1)],
            ..first.clone()
        };
        host.handle_datagram(2, &switch_abort.datagram(9, 1), &mut out);
        let (_, retry) = Message::open(&out.sends[0].bytes).unwrap();
        assert_eq!((retry.request, retry.attempt), (first.request, 1));
        let replayed = through_store(&mut store, &mut out).remove(0);
        host.handle_datagram(3, &replayed, &mut out);
        let commits: Vec<&ClientEvent> =
            out.events.iter().filter(|e| matches!(e, ClientEvent::Committed { .. })).collect();
        assert_eq!(commits.len(), 1);
        assert_eq!(store.value(HOT_KEY), 1, "the increment applied once");
        assert_eq!(host.commits(0), 1);
    }
}
