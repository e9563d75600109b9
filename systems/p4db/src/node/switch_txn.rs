//! P4DB's hot and warm transactions in the switch.

use super::events::*;
use super::ids::*;
use super::machine::Node;
use super::timer::Timer;
use super::worker::*;
use crate::node::wal::LogRecord;
use crate::wire::p4db::TxnPacket;
use pisadb_core::{Nanos, Txn};
use pisadb_engine::id::TxnId;
use pisadb_wire::Kind;

impl Node {
    /// Sends the attempt's switch packet (hot, or a warm transaction's hot part) with its
    /// result going to multicast `group` (0: back to this node only).
    pub(super) fn send_switch_txn(&mut self, now: Nanos, worker: u16, group: u16, out: &mut Outbox) {
        let a = self.workers[usize::from(worker)].current.as_mut().expect("an attempt");
        let pkt = a.switch_packet.as_mut().expect("a switch packet");
        pkt.multicast = group;
        let (id, pkt) = (a.id, pkt.clone());
        if self.cfg.log {
            // From here on it counts as committed: it can no longer abort (§6.1).
            let mut packet = Vec::with_capacity(pkt.encoded_len());
            pkt.encode(&mut packet);
            let local_writes = self.cc.writes_of(id).to_vec();
            out.log.push(LogRecord::SwitchIntent {
                txn: id.bits(),
                packet,
                local_writes,
                writers: a.writers.clone(),
                outputs: a.outputs.clone(),
                instr_order: a.instr_order.iter().map(|&i| i as u16).collect(),
                inserts: a.gen.inserts.clone(),
            });
            if self.cfg.record_history {
                out.events.push(NodeEvent::Committing(record_of(a, None)));
            }
        }
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        self.send_switch(Kind::P4dbTxn, |b| pkt.encode(b), out);
        out.timers.push((now + self.cfg.switch_timeout_ns, Timer::SwitchTimeout { worker, txn: id }));
    }

    pub(super) fn on_switch_txn_reply(&mut self, now: Nanos, pkt: TxnPacket, out: &mut Outbox) {
        let id = TxnId::from_bits(pkt.txn_id);
        if !started_on(id, self.cfg.id) {
            // Another node's warm transaction, which this node prepared: the result commits it.
            if pkt.multicast == 0 || !self.served.contains_key(&id) {
                return self.reject("stale_multicast");
            }
            return self.commit_served(now, id, out);
        }
        if let Some(p) = self.recovering.remove(&id) {
            return self.finish_recovered(id, p, &pkt, out);
        }
        if id.worker() >= self.cfg.workers {
            return self.reject("reply_for_unknown_worker");
        }
        let worker = id.worker();
        let Some(a) = self.workers[usize::from(worker)].current.as_mut() else { return };
        let waiting = matches!(a.phase, Phase::SwitchTxn | Phase::WarmSwitch);
        if a.id != id || !waiting || pkt.instrs.len() != a.instr_order.len() {
            return self.reject("stale_switch_reply");
        }
        a.outputs.resize(a.gen.txn.ops.len(), 0);
        for (instr, &op) in pkt.instrs.iter().zip(&a.instr_order) {
            a.outputs[op] = i64::from(instr.data);
        }
        if a.phase == Phase::WarmSwitch && pkt.multicast == 0 && !a.writers.is_empty() {
            // No multicast group covers the participants: tell them here.
            let (writers, id) = (a.writers.clone(), a.id);
            self.send_commit(id, &writers, out);
        }
        self.commit_coordinator(now, worker, Some(&pkt), out);
    }
}

/// Whether a warm transaction's switch part (`on_switch`, sorted indices) and node part can run
/// apart: no operation of one reads or changes the accumulator that an operation of the other
/// changes or reads (their tuples differ, so the accumulator is the only link).
pub(super) fn parts_independent(txn: &Txn, on_switch: &[usize]) -> bool {
    if !txn.ops.iter().any(|op| op.reads_acc() || op.writes_acc()) {
        return true;
    }
    let switch = |i: usize| on_switch.binary_search(&i).is_ok();
    txn.dependencies().iter().all(|&(i, j)| switch(i) == switch(j))
}
