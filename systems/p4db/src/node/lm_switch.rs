//! LM-Switch: the locks of hot tuples in the switch's lock manager.

use super::events::*;
use super::ids::*;
use super::machine::Node;
use super::worker::*;
use crate::wire::lock::{LockOp, LockPacket};
use pisadb_core::Nanos;
use pisadb_wire::Kind;

/// Tag on lock-manager packets that release locks: their replies are not waited for.
pub(super) const RELEASE_TAG: u64 = 1 << 63;

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
        let pkt = LockPacket { txn_id: request.txn_id | RELEASE_TAG, granted: 0, entries };
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        self.send_switch(Kind::Lock, |b| pkt.encode(b), out);
    }

    pub(super) fn on_switch_lock_reply(&mut self, now: Nanos, pkt: LockPacket, out: &mut Outbox) {
        if pkt.txn_id & RELEASE_TAG != 0 {
            return; // a release needs no answer
        }
        let id = pkt.txn_id;
        if owner_node(id) != self.cfg.id || worker_of(id) >= self.cfg.workers {
            return self.reject("reply_for_unknown_worker");
        }
        let worker = worker_of(id);
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
