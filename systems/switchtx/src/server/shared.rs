//! What every piece of a server reads: its settings, the shard map it follows, its lease, the
//! throughputs it knows of, whether it drains; and the few ways any piece talks (a datagram,
//! a control message, a log record, a resolution's query or decision).
//!
//! The hub owns one [`Shared`] and lends it to the pieces; only the hub changes the map and
//! the lease (on a grant, or at the manager), and only the clients change this server's own
//! throughput (at an epoch's end). Keeping these in one place is what lets the client, the
//! participant and the resolvers stay separate types: none of them holds another's state.

use super::events::{ServerEvent, ServerTimer};
use super::settings::ServerConfig;
use crate::config::ShardMap;
use crate::keys::bits;
use crate::tree::{Coordination, Participants};
use crate::wal::WalRecord;
use crate::wire::{class_of, Control, Data, MsgType, FLAG_RETRY};
use pisadb_core::Nanos;
use pisadb_host::{Route, Send};

/// What a handler of any piece of a server appends to: sends, timers, log records, events and
/// CPU time (the driver's outbox for the server host).
pub type Out = pisadb_host::Outbox<ServerTimer, WalRecord, ServerEvent>;

/// A server's common facts (see the module documentation).
#[derive(Debug)]
pub struct Shared {
    /// The settings.
    pub cfg: ServerConfig,
    /// Which server is primary and backup of each shard ([`crate::config`]).
    pub map: ShardMap,
    /// Until when this server may serve as a primary or backup (with leases on).
    pub lease_until: Nanos,
    /// Each server's last-epoch throughput as piggybacked (this one's own included).
    pub known: Vec<u32>,
    /// Whether the run drains: no new transactions, no retries.
    pub stopping: bool,
}

impl Shared {
    /// The facts of a server that starts with `cfg` under the initial map.
    pub fn new(cfg: ServerConfig) -> Self {
        let n = cfg.layout.servers();
        Shared { map: ShardMap::initial(n), lease_until: 0, known: vec![0; usize::from(n)], stopping: false, cfg }
    }

    /// Servers in the rack.
    pub fn n(&self) -> u8 {
        self.cfg.layout.servers()
    }

    /// This server's id.
    pub fn me(&self) -> u8 {
        self.cfg.id
    }

    /// The tag of `attempt` (the switch's check of a slot's current attempt).
    pub fn tag(attempt: u32) -> u16 {
        (attempt % 65_535) as u16 + 1
    }

    /// Appends `record` to the write-ahead log if the server keeps one.
    pub fn log(&self, out: &mut Out, record: impl FnOnce() -> WalRecord) {
        if self.cfg.durable {
            out.log.push(record());
        }
    }

    /// Sends `bytes` to server `dst`, charging the network stack.
    pub fn send(&self, out: &mut Out, dst: u8, bytes: Vec<u8>) {
        out.cpu_ns += self.cfg.costs.stack_ns;
        out.sends.push(Send { dst: u16::from(dst), bytes });
    }

    /// The semantic class `msg` travels in (all medium without priority).
    pub fn class(&self, msg: MsgType, retry: bool) -> u8 {
        if self.cfg.priority {
            class_of(msg, retry)
        } else {
            1
        }
    }

    /// A control message about (slot, attempt) of a transaction with `parts`, coordinated by
    /// `coord`, carrying this server's throughput and the switch entries of its tree.
    #[allow(clippy::too_many_arguments)]
    pub fn control(
        &self,
        msg: MsgType,
        (slot, tag, attempt, txn): (u16, u16, u32, u64),
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

    /// Whether this server's clients may start transactions: without leases always; with
    /// them once a grant told it the map (at the manager, always).
    pub fn knows_its_map(&self) -> bool {
        self.cfg.lease_ns == 0 || self.lease_until > 0 || self.cfg.id == ShardMap::manager(self.n())
    }

    /// Whether this server may act as a primary or backup now: it is in the map and holds a
    /// lease (or runs without leases). Draining changes nothing here: a server removed just
    /// before the drain may not have heard yet, and only its lapsed lease keeps it from
    /// serving next to its promoted backup. (Leases are renewed for a while into the drain;
    /// what is still in flight after that times out and is resolved, and queries and
    /// decisions need no lease.)
    pub fn serving(&self, now: Nanos) -> bool {
        if self.cfg.lease_ns == 0 {
            return true;
        }
        let me = self.cfg.id;
        self.map.is_member(me) && (me == ShardMap::manager(self.n()) || now < self.lease_until)
    }

    /// Asks the manager for its map now (a participant or resolver met a newer one, or the
    /// lease is due), also while draining, when leases are no longer renewed.
    pub fn ask_for_map(&self, now: Nanos, out: &mut Out) {
        let manager = ShardMap::manager(self.n());
        if self.cfg.id != manager {
            let mut d = Data::new(MsgType::Lease, 0, 0, self.map.epoch, now);
            d.client = self.cfg.id;
            self.send(out, manager, d.datagram(u16::from(self.cfg.id), u16::from(manager)));
        }
    }

    /// The core a datagram is handled on: the client thread it names (messages of a
    /// transaction run on the thread of its client's thread number, as the paper's per-thread
    /// queue pairs and UDP ports steer them), else any.
    pub fn route_to_thread(&self, bytes: &[u8]) -> Route {
        match thread_of(bytes) {
            Some(t) if t < self.cfg.threads => Route::Core(t),
            _ => Route::AnyCore,
        }
    }

    /// Sends a resolution's query (`decided` None) or its decision to each server of
    /// `servers`, about (slot, attempt) of the lane of (client, thread), under this server's
    /// shard map: the one message a client, a restarted client and a participant resolving an
    /// attempt itself all send.
    pub fn send_resolution(
        &self,
        out: &mut Out,
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
}

/// The client thread a datagram names (its handler's core).
fn thread_of(bytes: &[u8]) -> Option<u16> {
    let payload = bytes.get(pisadb_wire::FRAME_BYTES..)?;
    // Control: msg, flags, slot (2), tag (2), client, thread; data: msg, slot, tag, attempt
    // (4), txn (8), client, thread.
    let at = if MsgType::is_control_byte(*payload.first()?) { 7 } else { 18 };
    payload.get(at).map(|&t| u16::from(t))
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
}
