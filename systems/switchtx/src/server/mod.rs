//! A SwitchTx server: one shard's primary, the previous shard's backup, and worker threads
//! that are clients and participants at once (the symmetric model, §3.1); or, in the Eris
//! baseline, client threads and sequenced shards.
//!
//! [`Server`] is the host a rack runs: a [`Replicated`] server (every variant but Eris) or an
//! [`ErisServer`], chosen by the variant. Each is a hub of pieces, each piece a type of its own
//! with its own tests, in the way P4DB's node composes the engine's
//! (`systems/p4db/src/node/machine.rs`). A hub owns its pieces, routes every input to the piece
//! it concerns, and is the only place where pieces meet; no piece uses a hub.
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
//! | [`eris`] | [`Executor`] | | the Eris baseline's shards (in its own host, [`eris_server`]) |
//!
//! beside [`settings`] (the server's configuration and slots) and [`events`] (its timers and
//! events; the outbox every piece writes to is [`Out`]). The workload's draws are
//! [`crate::workload`]'s, the log records [`crate::wal`]'s.
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
pub mod eris_server;
pub mod events;
pub mod manager;
pub mod participant;
pub mod promotion;
pub mod replicated;
pub mod resolution;
pub mod settings;
pub mod shared;
pub mod store;

pub use crate::costs::{Costs, COSTS};
pub use crate::keys::{key_of, shard_of};
pub use crate::workload::Workload;
pub use client::{Clients, RETRY_BACKOFF_CAP};
pub use eris::Executor;
pub use eris_server::ErisServer;
pub use events::{AbortReason, ServerEvent, ServerTimer};
pub use manager::Manager;
pub use participant::Participant;
pub use promotion::Resolutions;
pub use replicated::Replicated;
pub use resolution::{requery_interval, REQUERY_BACKOFF_CAP};
pub use settings::{Mpl, ServerConfig};
pub use shared::{Out, Shared};
pub use store::{Owner, Record, Store};

use crate::config::ShardMap;
use crate::wal::WalRecord;
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route};
use std::collections::BTreeMap;

/// A SwitchTx server host: replicated, or the Eris baseline's (see the module documentation).
#[derive(Debug)]
pub enum Server {
    /// Every variant but Eris.
    Replicated(Box<Replicated>),
    /// The Eris baseline.
    Eris(Box<ErisServer>),
}

/// Runs `$e` on whichever host `$server` is, as `$s`.
macro_rules! either {
    ($server:expr, $s:ident => $e:expr) => {
        match $server {
            Server::Replicated($s) => $e,
            Server::Eris($s) => $e,
        }
    };
}

impl Server {
    /// The server `cfg` describes (Eris's if `cfg.eris`); `cfg.check()` must hold.
    pub fn new(cfg: ServerConfig) -> Self {
        if cfg.eris {
            Server::Eris(Box::new(ErisServer::new(cfg)))
        } else {
            Server::Replicated(Box::new(Replicated::new(cfg)))
        }
    }

    /// A server restarted from its write-ahead log ([`Replicated::recover`]; an Eris server
    /// keeps none and starts afresh).
    pub fn recover(cfg: ServerConfig, log: &[WalRecord]) -> Self {
        if cfg.eris {
            Server::new(cfg)
        } else {
            Server::Replicated(Box::new(Replicated::recover(cfg, log)))
        }
    }

    /// The primary shard's records.
    pub fn primary(&self) -> &BTreeMap<u64, Record> {
        match self {
            Server::Replicated(s) => s.primary(),
            Server::Eris(s) => s.store().primary(),
        }
    }

    /// The backup copy of the previous shard: key → (value, version) (none in Eris).
    pub fn backup(&self) -> &BTreeMap<u64, (u64, u64)> {
        match self {
            Server::Replicated(s) => s.backup(),
            Server::Eris(s) => s.store().backup(),
        }
    }

    /// Every key of the primary store still locked, with its holder.
    pub fn locked(&self) -> Vec<(u64, Owner)> {
        match self {
            Server::Replicated(s) => s.locked(),
            Server::Eris(s) => s.store().locked(),
        }
    }

    /// The shard map this server follows.
    pub fn map(&self) -> &ShardMap {
        either!(self, s => s.map())
    }

    /// Each thread's MPL now.
    pub fn mpls(&self) -> Vec<u8> {
        either!(self, s => s.mpls())
    }

    /// Starts a new transaction in lane 0 of thread 0 as a worker would; for the cost
    /// benchmarks.
    pub fn begin_one(&mut self, now: Nanos, out: &mut Out) {
        either!(self, s => s.begin_one(now, out))
    }
}

impl Host for Server {
    type Timer = ServerTimer;
    type Log = WalRecord;
    type Event = ServerEvent;

    fn cores(&self) -> u16 {
        either!(self, s => s.cores())
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        either!(self, s => s.start(now, out))
    }

    fn route(&self, bytes: &[u8]) -> Route {
        either!(self, s => s.route(bytes))
    }

    fn sorts_receive_batches(&self) -> bool {
        either!(self, s => s.sorts_receive_batches())
    }

    fn receive_class(&self, bytes: &[u8]) -> u8 {
        either!(self, s => s.receive_class(bytes))
    }

    fn timer_core(&self, timer: &ServerTimer) -> u16 {
        either!(self, s => s.timer_core(timer))
    }

    fn handle_datagram(&mut self, now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        either!(self, s => s.handle_datagram(now, bytes, out))
    }

    fn handle_timer(&mut self, now: Nanos, timer: ServerTimer, out: &mut HostOutbox<Self>) {
        either!(self, s => s.handle_timer(now, timer, out))
    }

    fn stop(&mut self) {
        either!(self, s => s.stop())
    }

    fn is_idle(&self) -> bool {
        either!(self, s => s.is_idle())
    }
}
