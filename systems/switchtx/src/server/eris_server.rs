//! The Eris baseline's server host: the same client lanes as a replicated server's
//! ([`Clients`], which send an Eris transaction as one message to the sequencer) and the
//! server's Eris shards ([`Executor`]) over one [`Store`]; no participant, no backup, no log,
//! no lease (its settings refuse them). It is a host of its own rather than a flag in the
//! replicated server: the two share their client lanes and nothing else.

use super::client::Clients;
use super::eris::Executor;
use super::events::{ServerEvent, ServerTimer};
use super::settings::{Mpl, ServerConfig};
use super::shared::{Out, Shared};
use super::store::Store;
use crate::config::ShardMap;
use crate::wal::WalRecord;
use crate::wire::{Message, MsgType};
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route};

/// An Eris server host (see the module documentation).
#[derive(Debug)]
pub struct ErisServer {
    /// Settings and the (fixed) shard map.
    sh: Shared,
    /// The client lanes.
    clients: Clients,
    /// The shards' records.
    store: Store,
    /// The shards.
    shards: Executor,
}

impl ErisServer {
    /// An Eris server; `cfg.check()` must hold.
    pub fn new(cfg: ServerConfig) -> Self {
        let shards = Executor::new(cfg.threads);
        let sh = Shared::new(cfg);
        ErisServer { clients: Clients::new(&sh), store: Store::default(), shards, sh }
    }

    /// The shards' records and (no) locks.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The shard map (the initial one, for good).
    pub fn map(&self) -> &ShardMap {
        &self.sh.map
    }

    /// Each thread's MPL now.
    pub fn mpls(&self) -> Vec<u8> {
        self.clients.mpls(&self.sh)
    }

    /// Starts a new transaction in lane 0 of thread 0; for the cost benchmarks.
    pub fn begin_one(&mut self, now: Nanos, out: &mut Out) {
        self.clients.begin_one(now, &self.sh, out);
    }
}

impl Host for ErisServer {
    type Timer = ServerTimer;
    type Log = WalRecord;
    type Event = ServerEvent;

    fn cores(&self) -> u16 {
        self.sh.cfg.threads
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
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
        self.sh.route_to_thread(bytes)
    }

    fn sorts_receive_batches(&self) -> bool {
        self.sh.cfg.priority
    }

    fn receive_class(&self, bytes: &[u8]) -> u8 {
        crate::wire::classify(bytes)
    }

    fn timer_core(&self, timer: &ServerTimer) -> u16 {
        match *timer {
            ServerTimer::Epoch(t)
            | ServerTimer::Timeout(t, _, _)
            | ServerTimer::Retry(t, _, _)
            | ServerTimer::Fill(t) => t.min(self.sh.cfg.threads - 1),
            ServerTimer::Lease | ServerTimer::Recover(..) => 0,
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
        match msg {
            Message::Data(_) if from >= self.sh.n() => out.events.push(ServerEvent::Rejected("unknown_source")),
            Message::Data(d) if d.msg == MsgType::ErisReply => {
                out.cpu_ns += costs.handler_ns;
                self.clients.eris_reply(now, &d, &self.sh, out)
            }
            Message::Sequenced(q) => {
                out.cpu_ns += costs.handler_ns;
                self.shards.receive(q, &self.sh, &mut self.store, out)
            }
            Message::Control(_) | Message::Data(_) => out.events.push(ServerEvent::Rejected("unexpected_type")),
        }
    }

    fn handle_timer(&mut self, now: Nanos, timer: ServerTimer, out: &mut HostOutbox<Self>) {
        let (sh, clients) = (&mut self.sh, &mut self.clients);
        match timer {
            ServerTimer::Epoch(t) => clients.epoch(now, t, sh, out),
            ServerTimer::Timeout(t, l, a) => clients.timeout(now, t, l, a, sh, out),
            ServerTimer::Retry(t, l, a) => clients.backed_off(now, t, l, a, sh, out),
            ServerTimer::Fill(t) => clients.fill_lanes(now, t, sh, out),
            ServerTimer::Lease | ServerTimer::Recover(..) => {}
        }
    }

    fn stop(&mut self) {
        self.sh.stopping = true;
    }

    fn is_idle(&self) -> bool {
        self.clients.is_idle()
    }
}
