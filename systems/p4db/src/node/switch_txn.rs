//! P4DB's hot and warm transactions: the part the switch executes.
//!
//! - **Hot** (every tuple in the switch, paper §6.1): one switch packet, built from the
//!   layout, goes to the switch; its answer carries the results and the transaction is
//!   committed — half a round trip, no locks, no 2PC. With a log it counts as committed once
//!   its intent is logged, before the packet leaves: it can no longer abort.
//! - **Warm** (hot and cold tuples together, §6.2): the cold part runs on the nodes up to the
//!   point where it can no longer abort (locks held, operations executed, remote writers
//!   prepared and voted yes); only then does the switch sub-transaction go out, in the same
//!   packet format. The switch multicasts its answer to the coordinator and every prepared
//!   participant (a group per set of nodes, [`multicast_group`](crate::programs::p4db::multicast_group)),
//!   and each commits on receipt: no separate commit round. With no remote writer there is no
//!   voting round at all. The cold and hot parts must not feed each other through the
//!   accumulator (a cold tuple written from a hot read is offloaded with the hot set instead,
//!   §6.2); a transaction that breaks this is refused and counted (`warm_dependency`).
//!
//! The switch may drop a packet (its recirculation queue is full): a packet not answered within
//! `switch_timeout_ns` is sent again, and the switch's at-most-once memory (per slot, `id >>
//! 32`) answers a copy of one it already ran instead of running it twice.

use super::events::*;
use super::ids::*;
use super::machine::Node;
use super::timer::Timer;
use super::worker::Phase;
use crate::node::wal::LogRecord;
use crate::wire::p4db::TxnPacket;
use pisadb_core::{Nanos, Txn};
use pisadb_engine::id::TxnId;

/// The part of a transaction P4DB's switch executes.
#[derive(Clone, Debug)]
pub(super) struct SwitchPart {
    /// Its operations: indices into the transaction, in program order.
    pub(super) ops: Vec<usize>,
    /// The operation behind each instruction of the packet.
    pub(super) instr_order: Vec<usize>,
    /// The packet, kept to send again after a timeout.
    pub(super) packet: TxnPacket,
}

impl Node {
    /// The part of `txn` (attempt `id`) the switch executes: none if no tuple of it is hot;
    /// refused (with the reason counted) if its parts depend on each other or its hot part
    /// does not fit in one packet — the hot tuples live only in the switch, so the nodes
    /// cannot run it instead.
    pub(super) fn switch_part(&self, txn: &Txn, id: TxnId) -> Result<Option<SwitchPart>, &'static str> {
        let layout = &self.switch.layout;
        let ops: Vec<usize> = (0..txn.ops.len()).filter(|&i| layout.contains(txn.ops[i].key)).collect();
        if ops.is_empty() {
            return Ok(None);
        }
        if ops.len() < txn.ops.len() && !parts_independent(txn, &ops) {
            return Err("warm_dependency");
        }
        let sub = Txn::new(ops.iter().map(|&i| txn.ops[i]).collect());
        match self.switch.engine.packet_for(&sub, layout, id.bits()) {
            Ok((packet, order)) => {
                let instr_order = order.iter().map(|&k| ops[k]).collect();
                Ok(Some(SwitchPart { ops, instr_order, packet }))
            }
            // Too many operations or out-of-range values for one packet.
            Err(_) => Err("switch_packet_unbuildable"),
        }
    }

    /// Sends the attempt's switch packet (hot, or a warm transaction's hot part) with its
    /// result going to multicast `group` (0: back to this node only).
    pub(super) fn send_switch_txn(&mut self, now: Nanos, worker: u16, group: u16, out: &mut Outbox) {
        let a = self.workers.current_mut(worker, LANE).expect("the worker runs an attempt");
        let part = a.switch.as_mut().expect("a switch part");
        part.packet.multicast = group;
        let (id, pkt) = (a.id, part.packet.clone());
        if self.cfg.log {
            // From here on it counts as committed: it can no longer abort (§6.1).
            let mut packet = Vec::with_capacity(pkt.encoded_len());
            pkt.encode(&mut packet);
            out.log.push(LogRecord::SwitchIntent {
                txn: id.bits(),
                packet,
                local_writes: self.cc.writes_of(id).to_vec(),
                writers: a.writers.clone(),
                outputs: a.outputs.clone(),
                instr_order: part.instr_order.iter().map(|&i| i as u16).collect(),
                inserts: a.job.txn.inserts.clone(),
            });
            self.report_committing(worker, out);
        }
        out.cpu_ns += self.cfg.costs.message_ns + self.cfg.costs.stack_ns;
        self.send_switch(crate::wire::TXN_KIND, |b| pkt.encode(b), out);
        out.timers.push((now + self.cfg.switch_timeout_ns, Timer::SwitchTimeout { worker, txn: id }));
    }

    /// The switch's answer to a switch transaction: this node's attempt, one recovered from
    /// the log, or another node's warm transaction this node prepared.
    pub(super) fn on_switch_txn_reply(&mut self, now: Nanos, pkt: TxnPacket, out: &mut Outbox) {
        let id = TxnId::from_bits(pkt.txn_id);
        if !started_on(id, self.cfg.id) {
            // Another node's warm transaction, which this node prepared: the result commits it.
            if pkt.multicast == 0 || !self.served.contains(id) {
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
        let prototype = self.prototype();
        let Some(a) = self.workers.current_mut(worker, LANE) else { return };
        let waiting = matches!(a.phase, Phase::SwitchTxn | Phase::WarmSwitch);
        let instrs = a.switch.as_ref().map_or(0, |p| p.instr_order.len());
        if a.id != id || !waiting || pkt.instrs.len() != instrs {
            return self.reject("stale_switch_reply");
        }
        a.outputs.resize(a.job.txn.txn.ops.len(), 0);
        let part = a.switch.as_ref().expect("checked above");
        for (instr, &op) in pkt.instrs.iter().zip(&part.instr_order) {
            a.outputs[op] = i64::from(instr.data);
        }
        if a.phase == Phase::WarmSwitch && prototype {
            // The prototype's warm transaction releases its remote tuples after the answer.
            a.answer = Some(pkt);
            return self.release_remote(now, worker, true, out);
        }
        if a.phase == Phase::WarmSwitch && pkt.multicast == 0 && !a.writers.is_empty() {
            // No multicast group covers the participants: tell them here.
            let (writers, id) = (a.writers.clone(), a.id);
            self.send_commit(id, &writers, out);
        }
        self.commit_coordinator(now, worker, Some(&pkt), out);
    }

    /// Attempt `txn`'s switch packet may have been dropped: send it again, if still waiting.
    pub(super) fn on_switch_timeout(&mut self, now: Nanos, worker: u16, txn: TxnId, out: &mut Outbox) {
        let waiting =
            |a: &&super::worker::Attempt| a.id == txn && matches!(a.phase, Phase::SwitchTxn | Phase::WarmSwitch);
        let current = self.workers.current(worker, LANE).filter(waiting);
        if let Some(pkt) = current.and_then(|a| a.switch.as_ref()).map(|p| p.packet.clone()) {
            self.stats.switch_resends += 1;
            self.send_switch(crate::wire::TXN_KIND, |b| pkt.encode(b), out);
            out.timers.push((now + self.cfg.switch_timeout_ns, Timer::SwitchTimeout { worker, txn }));
        }
    }
}

/// Whether a warm transaction's switch part (`on_switch`, sorted indices) and node part can run
/// apart: no operation of one reads or changes the accumulator that an operation of the other
/// changes or reads (their tuples differ, so the accumulator is the only link).
fn parts_independent(txn: &Txn, on_switch: &[usize]) -> bool {
    if !txn.ops.iter().any(|op| op.reads_acc() || op.writes_acc()) {
        return true;
    }
    let switch = |i: usize| on_switch.binary_search(&i).is_ok();
    txn.dependencies().iter().all(|&(i, j)| switch(i) == switch(j))
}
