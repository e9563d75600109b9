//! LM-Switch: the locks of hot tuples in the switch's lock manager.

use super::events::*;
use super::ids::*;
use super::machine::Node;
use super::worker::*;
use crate::wire::lock::{LockOp, LockPacket};
use pisadb_core::Nanos;
use pisadb_engine::id::TxnId;
use pisadb_wire::Kind;

impl Node {
    pub(super) fn release_switch_locks(&mut self, worker: u16, out: &mut Outbox) {
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        let Some((request, granted)) = a.switch_locks.take() else { return };
        let entries: Vec<_> = request
            .entries
            .iter()
            .enumerate()
            .filter(|(i, _)| granted & (1 << i) != 0)
            .map(|(_, e)| {
                let op =
                    if e.op == LockOp::AcquireExclusive { LockOp::ReleaseExclusive } else { LockOp::ReleaseShared };
                crate::wire::lock::LockEntry { op, ..*e }
            })
            .collect();
        if entries.is_empty() {
            return;
        }
        // A release carries the attempt's id with the tag bit set: nobody waits for its answer.
        let pkt = LockPacket { txn_id: TxnId::from_bits(request.txn_id).tagged().bits(), granted: 0, entries };
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        self.send_switch(Kind::Lock, |b| pkt.encode(b), out);
    }

    pub(super) fn on_switch_lock_reply(&mut self, now: Nanos, pkt: LockPacket, out: &mut Outbox) {
        let id = TxnId::from_bits(pkt.txn_id);
        if id.is_tagged() {
            return; // the answer to a release, which nobody waits for
        }
        if !started_on(id, self.cfg.id) || id.worker() >= self.cfg.workers {
            return self.reject("reply_for_unknown_worker");
        }
        let worker = id.worker();
        let Some(a) = self.workers[usize::from(worker)].current.as_mut() else { return };
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
}
