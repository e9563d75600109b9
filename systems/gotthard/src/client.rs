//! The client host: N closed-loop clients running the paper's micro-benchmark.
//!
//! Every client runs one transaction at a time on one hot key `x`, drawing a write
//! transaction `[VALUE(x, local), WRITE(x, local + 1)]` with probability `w` and otherwise a
//! read transaction `[READ(x)]`, where `local` is the value in the client's own cache. Every
//! reply (commit or abort, from the store or the switch) refreshes the cache from its `VALUE`
//! and `UPDATED` ops. On an abort of either kind the client retries the *same* template with
//! the refreshed value under a new request id; a commit is counted and the next template is
//! drawn, until the client has its commits. Think time is 0.
//!
//! Before any client starts, client 0 sends one uncounted `WRITE(x, 0)` (the original's
//! initialisation), so that every run starts from a known store.
//!
//! Each client draws from its own ChaCha8 generator seeded from (seed, client), so a run is a
//! function of its seed. Replies are routed to the client's core by the client id.

use crate::wire::{Message, Op, OpType, Status, FLAG_FROM_SWITCH};
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route, Send, TraceBytes, TraceHash};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// The hot key of the micro-benchmark.
pub const HOT_KEY: u32 = 1;
/// CPU time a client charges per reply handled.
pub const CLIENT_REPLY_NS: Nanos = 1_000;

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
        /// Whether it was a write transaction.
        write: bool,
        /// From the first attempt's send to the commit.
        latency_ns: Nanos,
        /// Attempts beyond the first.
        retries: u32,
    },
    /// An attempt aborted.
    Aborted(AbortSource),
    /// A client has all its commits.
    Finished(u32),
    /// A datagram was ignored, with the reason.
    Ignored(&'static str),
}

/// The client host has no timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientTimer {}

impl TraceBytes for ClientTimer {
    fn trace(&self, _hash: &mut TraceHash) {
        match *self {}
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
    /// The request id in flight (or last sent).
    request: u32,
    /// The template in flight; `None` when idle (not started or finished).
    template: Option<Template>,
    /// When the current transaction's first attempt was sent.
    started_ns: Nanos,
    /// Attempts beyond the first of the current transaction.
    retries: u32,
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
}

impl ClientHost {
    /// A host of `cfg.clients` clients, none started.
    pub fn new(cfg: ClientConfig) -> Self {
        let clients = (0..cfg.clients)
            .map(|c| Client {
                rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ (u64::from(c) << 32) ^ 0x6077_4a2d),
                cache: BTreeMap::new(),
                request: 0,
                template: None,
                started_ns: 0,
                retries: 0,
                commits: 0,
            })
            .collect();
        ClientHost { cfg, clients }
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

    fn send(&mut self, c: u32, template: Template, out: &mut HostOutbox<Self>) {
        let ops = self.ops(c, template);
        let client = &mut self.clients[c as usize];
        client.request += 1;
        client.template = Some(template);
        let msg = Message::request(c, client.request, ops);
        out.sends.push(Send { dst: self.cfg.store, bytes: msg.datagram(self.cfg.address, self.cfg.store) });
    }

    fn begin(&mut self, now: Nanos, c: u32, out: &mut HostOutbox<Self>) {
        let client = &mut self.clients[c as usize];
        if client.commits >= self.cfg.commits_per_client {
            client.template = None;
            return out.events.push(ClientEvent::Finished(c));
        }
        let write = client.rng.random_bool(self.cfg.write_share.clamp(0.0, 1.0));
        client.started_ns = now;
        client.retries = 0;
        self.send(c, if write { Template::Increment } else { Template::Read }, out);
    }

    fn on_reply(&mut self, now: Nanos, msg: Message, out: &mut HostOutbox<Self>) {
        let Some(client) = self.clients.get_mut(msg.client as usize) else {
            return out.events.push(ClientEvent::Ignored("unknown_client"));
        };
        let Some(template) = client.template.filter(|_| msg.request == client.request) else {
            return out.events.push(ClientEvent::Ignored("stale_reply"));
        };
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
                    write: template == Template::Increment,
                    latency_ns: now - client.started_ns,
                    retries: client.retries,
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
                client.retries += 1;
                self.send(c, template, out);
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
        self.send(0, Template::Init, out);
    }

    fn route(&self, bytes: &[u8]) -> Route {
        match Message::open(bytes) {
            Ok((_, msg)) if msg.client < self.cfg.clients => Route::Core(u16::try_from(msg.client).unwrap_or(0)),
            _ => Route::AnyCore,
        }
    }

    fn timer_core(&self, timer: &ClientTimer) -> u16 {
        match *timer {}
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        out.cpu_ns += CLIENT_REPLY_NS;
        match Message::open(bytes) {
            Ok((_, msg)) if msg.is_reply() => self.on_reply(now, msg, out),
            Ok(_) => out.events.push(ClientEvent::Ignored("request_to_client")),
            Err(e) => out.events.push(ClientEvent::Ignored(e.reason())),
        }
    }

    fn handle_timer(&mut self, _now: Nanos, timer: ClientTimer, _out: &mut HostOutbox<Self>) {
        match timer {}
    }

    fn stop(&mut self) {}

    fn is_idle(&self) -> bool {
        self.clients.iter().all(|c| c.template.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn cfg(clients: u32, write_share: f64) -> ClientConfig {
        ClientConfig { address: 1, store: 9, clients, write_share, commits_per_client: 2, seed: 5 }
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
            status: Status::OptimisticAbort,
            ops: vec![Op::value(HOT_KEY, 7)],
        };
        host.handle_datagram(2, &abort.datagram(9, 1), &mut out);
        assert!(out.events.contains(&ClientEvent::Aborted(AbortSource::SwitchOptimistic)));
        let (_, retry) = Message::open(&out.sends[0].bytes).unwrap();
        assert_eq!(retry.ops, vec![Op::value(HOT_KEY, 7), Op::write(HOT_KEY, 8)]);
        assert_eq!(retry.request, first.request + 1);
        host.handle_datagram(3, &abort.datagram(9, 1), &mut out);
        assert_eq!(out.events.last(), Some(&ClientEvent::Ignored("stale_reply")));
    }
}
