//! The Eris baseline's shards: one-shot transactions sequenced by a switch and executed by
//! each shard in sequence order.
//!
//! A shard is one thread of one server (`server × threads + thread`); a key belongs to its
//! server's thread `hash(key) % threads` ([`shard_of_key`]). A client sends its whole
//! transaction in one message ([`request`]) whose header names the shards it touches; the
//! sequencer switch stamps one sequence number per shard and multicasts it. [`Executor`] is a
//! server's shards: each runs the transactions it receives in sequence order, waiting on gaps,
//! and answers the client with what it read. There is no replication and no recovery from loss
//! (the baseline's own are not built; it is not among the fuzz cases).
//!
//! The host that runs them is `ErisServer` (beside this module).

use super::events::ServerEvent;
use super::shared::{Out, Shared};
use super::store::Store;
use crate::keys::shard_of;
use crate::wire::{Data, Item, MsgType, Sequenced, SequencedHeader, SEQUENCED_BYTES};
use std::collections::BTreeMap;
use zerocopy::FromBytes;

/// The Eris shard of `key` with `threads` threads per server.
pub fn shard_of_key(key: u64, threads: u16) -> u8 {
    let thread = pisadb_core::rng::splitmix64(key) % u64::from(threads);
    shard_of(key) * threads as u8 + thread as u8
}

/// A client's whole transaction (`keys`, each with whether it is written) as one message to
/// the sequencer, from (client, thread) in `slot`, attempt `attempt` with id `txn`.
pub fn request(
    (slot, client, thread, threads): (u16, u8, u16, u16),
    attempt: u32,
    txn: u64,
    keys: Vec<(u64, bool)>,
) -> Sequenced {
    let mask = keys.iter().fold(0u64, |m, &(k, _)| m | (1 << shard_of_key(k, threads)));
    let mut h = SequencedHeader::read_from_bytes(&[0u8; SEQUENCED_BYTES][..]).expect("a header's worth of zeros");
    h.msg = MsgType::ErisTxn as u8;
    h.slot.set(slot);
    h.tag.set(threads);
    h.client = client;
    h.thread = thread as u8;
    h.attempt.set(attempt);
    h.txn.set(txn);
    h.mask.set(mask);
    Sequenced { header: h, keys }
}

/// A server's Eris shards (see the module documentation).
#[derive(Debug)]
pub struct Executor {
    /// Per local shard (thread): the next sequence number to execute and the transactions
    /// waiting for their turn.
    shards: Vec<(u32, BTreeMap<u32, Sequenced>)>,
}

impl Executor {
    /// The shards of a server with `threads` threads, each expecting sequence number 1.
    pub fn new(threads: u16) -> Self {
        Executor { shards: vec![(1, BTreeMap::new()); usize::from(threads)] }
    }

    /// A sequenced transaction reaches this server: each of its shards here runs it in
    /// sequence order, waiting on gaps.
    pub fn receive(&mut self, q: Sequenced, sh: &Shared, store: &mut Store, out: &mut Out) {
        let threads = sh.cfg.threads as u8;
        let me = sh.me();
        for t in 0..threads {
            let shard = me * threads + t;
            if q.header.mask.get() & (1 << shard) == 0 {
                continue;
            }
            let seq = q.header.seq[usize::from(shard)].get();
            self.shards[usize::from(t)].1.insert(seq, q.clone());
            loop {
                let (next, pending) = &mut self.shards[usize::from(t)];
                let Some(ready) = pending.remove(next) else { break };
                *next += 1;
                execute(&ready, shard, sh, store, out);
            }
        }
    }
}

/// Shard `shard` runs `q`: reads its keys, writes those written (read-modify-write), answers
/// the client.
fn execute(q: &Sequenced, shard: u8, sh: &Shared, store: &mut Store, out: &mut Out) {
    let txn = q.header.txn.get();
    let mut reply = Data::new(MsgType::ErisReply, q.header.slot.get(), 1, q.header.attempt.get(), txn);
    reply.client = q.header.client;
    reply.thread = q.header.thread;
    reply.coord = shard;
    let mine: Vec<(u64, bool)> =
        q.keys.iter().copied().filter(|&(k, _)| shard_of_key(k, sh.cfg.threads) == shard).collect();
    for (k, written) in mine {
        let r = store.entry(k);
        reply.items.push(Item { key: k, value: r.value, version: r.version, locked: false });
        if written {
            out.events.push(ServerEvent::Installed(txn, k, r.version));
            r.value += 1;
            r.version = txn;
        }
    }
    out.cpu_ns += sh.cfg.costs.handler_ns + sh.cfg.costs.item_ns * reply.items.len() as u64;
    let client = q.header.client;
    sh.send(out, client, reply.datagram(u16::from(sh.me()), u16::from(client)));
}
