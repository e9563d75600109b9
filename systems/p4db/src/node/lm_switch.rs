//! LM-Switch: the locks of hot tuples live in the switch's lock manager (NetLock-style).
//!
//! The baseline keeps the data on the nodes but moves the hot tuples' locks into the switch.
//! Before its lock-and-read round, an attempt asks the lock manager for all its hot locks in
//! one packet; the answer says which were granted. All of them: the attempt goes on to the
//! nodes, where it only reads the hot tuples ([`pisadb_engine::cc::Intent::Unguarded`]: their
//! lock is in the switch). Any missing: nothing else was contacted yet, so the attempt releases
//! what it got and aborts. A request with more locks than one packet holds is not sent: those
//! tuples are locked on the nodes like cold ones.
//!
//! Locks are released when the attempt ends, committed or aborted, by a packet that carries the
//! attempt's id with the tag bit set ([`TxnId::tagged`]): the switch answers it, but nobody
//! waits for that answer, and it routes to any core.

use super::events::*;
use super::ids::*;
use super::machine::Node;
use super::worker::{Attempt, Phase};
use crate::wire::lock::{LockEntry, LockOp, LockPacket};
use pisadb_core::{Nanos, TupleKey};
use pisadb_engine::id::TxnId;
use pisadb_wire::node::LockMode;

impl Node {
    /// Asks the switch for the locks of `attempt`'s hot tuples, if it has any and they fit in
    /// one packet (then the attempt waits in [`Phase::SwitchLocks`] and `true` is returned).
    /// Otherwise its tuples are all locked on the nodes.
    pub(super) fn request_switch_locks(&mut self, now: Nanos, attempt: &mut Attempt, out: &mut Outbox) -> bool {
        let hot_locks: Vec<(TupleKey, LockOp)> = attempt
            .accesses
            .iter()
            .filter(|a| a.locked_in_switch)
            .map(|a| (a.key, if a.write { LockOp::AcquireExclusive } else { LockOp::AcquireShared }))
            .collect();
        if hot_locks.is_empty() {
            return false;
        }
        let switch = &self.switch;
        if let Some(pkt) = switch.lock_manager.request_for(attempt.id.bits(), &hot_locks, &switch.lock_layout) {
            out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
            self.send_switch(crate::wire::LOCK_KIND, |b| pkt.encode(b), out);
            attempt.enter(now, Phase::SwitchLocks);
            attempt.switch_locks = Some((pkt, 0));
            return true;
        }
        // Too many locks for one packet: lock them on the nodes instead.
        for a in attempt.accesses.iter_mut() {
            a.locked_in_switch = false;
            a.mode = if a.write { LockMode::Exclusive } else { LockMode::Shared };
        }
        false
    }

    /// The lock manager's answer to the worker's request: on to the nodes, or abort.
    pub(super) fn on_switch_lock_reply(&mut self, now: Nanos, pkt: LockPacket, out: &mut Outbox) {
        let id = TxnId::from_bits(pkt.txn_id);
        if id.is_tagged() {
            return; // the answer to a release, which nobody waits for
        }
        let Some((worker, _)) = self.workers.lane_of(id) else {
            return self.reject("reply_for_unknown_worker");
        };
        let Some(a) = self.workers.current_mut(worker, LANE) else { return };
        if a.id != id || a.phase != Phase::SwitchLocks {
            return self.reject("stale_switch_reply");
        }
        let Some((request, granted)) = a.switch_locks.as_mut() else { return };
        *granted = pkt.granted;
        let all = if request.entries.len() == 32 { u32::MAX } else { (1u32 << request.entries.len()) - 1 };
        if pkt.granted & all == all {
            self.lock_and_read(now, worker, out);
        } else {
            // Nothing else was contacted yet: release what the switch granted and retry.
            self.abort(now, worker, out);
        }
    }

    /// Releases the switch locks the worker's attempt was granted (at its end).
    pub(super) fn release_switch_locks(&mut self, worker: u16, out: &mut Outbox) {
        let a = self.attempt_mut(worker);
        let Some((request, granted)) = a.switch_locks.take() else { return };
        let entries: Vec<_> = request
            .entries
            .iter()
            .enumerate()
            .filter(|(i, _)| granted & (1 << i) != 0)
            .map(|(_, e)| {
                let op =
                    if e.op == LockOp::AcquireExclusive { LockOp::ReleaseExclusive } else { LockOp::ReleaseShared };
                LockEntry { op, ..*e }
            })
            .collect();
        if entries.is_empty() {
            return;
        }
        let txn_id = TxnId::from_bits(request.txn_id).tagged().bits();
        let pkt = LockPacket { txn_id, granted: 0, entries };
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        self.send_switch(crate::wire::LOCK_KIND, |b| pkt.encode(b), out);
    }
}
