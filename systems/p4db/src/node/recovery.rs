//! Restart from the write-ahead log (P4DB §6.1, A.3 case 2).
//!
//! A node that crashed loads its partition as at first start and redoes every committed
//! transaction's writes in log order: transactions on the nodes committed here, prepared ones
//! resolved as committed, and switch transactions whose intent was logged (they count as
//! committed once logged). Its incarnation moves one past the last logged one, so its new
//! attempt ids never repeat old ones, and its backoff generator is seeded anew from it.
//!
//! Two kinds of work stay open and are finished once the node runs again:
//!
//! - a switch transaction logged without its answer is sent again until it is answered
//!   ([`Timer::RecoveredSwitchTxn`]); the answer commits it as it would have before the crash
//!   (its inserts, its commit record, its participants told), but no worker reports it — the
//!   checker completes the record it kept from the `Committing` event;
//! - a transaction prepared here without a logged outcome is *in doubt*: it takes its
//!   exclusive locks back (no two prepared transactions overlap) and its buffered writes, is
//!   served again as voted, and asks its coordinator on its lease ([`Timer::Lease`]).

use super::events::*;
use super::machine::{Node, SwitchView};
use super::participant::LockReading;
use super::timer::Timer;
use crate::node::config::NodeConfig;
use crate::node::wal::LogRecord;
use crate::wire::p4db::TxnPacket;
use pisadb_core::{Nanos, TupleKey};
use pisadb_engine::cc::{Concurrency, Intent, Read, Work};
use pisadb_engine::id::TxnId;
use pisadb_engine::store::Tuple;
use pisadb_wire::node::{LockMode, OnConflict};
use pisadb_workload::Workload;
use std::collections::BTreeMap;

/// A switch transaction recovered from the log whose answer was not logged yet.
#[derive(Clone, Debug)]
pub(super) struct PendingSwitchTxn {
    /// The packet, to send again.
    pub(super) packet: TxnPacket,
    /// Remote writers it prepared, to tell if no multicast group covers them.
    pub(super) writers: Vec<u16>,
    /// The outputs of its cold operations.
    pub(super) outputs: Vec<i64>,
    /// The operation behind each instruction of the packet.
    pub(super) instr_order: Vec<u16>,
    /// Rows it creates at commit.
    pub(super) inserts: Vec<pisadb_core::Insert>,
}

impl Node {
    /// A node restarted from its write-ahead log (P4DB §6.1, A.3 case 2): the partition is
    /// loaded as at first start and every committed transaction's writes are redone in log
    /// order: transactions on the nodes committed here, prepared ones resolved as committed,
    /// and switch transactions whose intent was logged (they count as committed once logged).
    /// What stays open is finished after [`Node::start`]: a switch transaction without its
    /// logged answer is sent again (the switch answers a copy of one it already ran from its
    /// memory, or runs it), and a transaction prepared here without a logged outcome keeps its
    /// locks and asks its coordinator. The new incarnation is one past the last logged one.
    pub fn recover(
        mut cfg: NodeConfig,
        workload: Box<dyn Workload>,
        switch: SwitchView,
        seed: u64,
        log: &[LogRecord],
    ) -> Result<(Self, RecoveryReport), String> {
        let last = log.iter().rev().find_map(|r| match r {
            LogRecord::Started { incarnation } => Some(*incarnation),
            _ => None,
        });
        cfg.incarnation = last.map_or(0, |i| i.wrapping_add(1) % NodeConfig::INCARNATIONS);
        let rng_seed = seed ^ u64::from(cfg.incarnation).rotate_left(40);
        let mut node = Node::new(cfg, workload, switch, rng_seed)?;
        let mut report = RecoveryReport { incarnation: node.cfg.incarnation, ..RecoveryReport::default() };
        let mut prepared: BTreeMap<TxnId, (u16, Vec<(TupleKey, i64)>)> = BTreeMap::new();
        let id = |txn: &u64| TxnId::from_bits(*txn);
        for record in log {
            match record {
                LogRecord::Started { .. } => {}
                LogRecord::Committed { txn, writes, inserted, insert_seq } => {
                    node.redo(id(txn), writes, inserted, *insert_seq);
                    node.decisions.commit(id(txn));
                    report.committed += 1;
                }
                LogRecord::Prepared { txn, coordinator, writes } => {
                    prepared.insert(id(txn), (*coordinator, writes.clone()));
                }
                LogRecord::Resolved { txn, commit } => {
                    if let Some((_, writes)) = prepared.remove(&id(txn)).filter(|_| *commit) {
                        node.redo(id(txn), &writes, &[], node.insert_seq);
                        report.committed += 1;
                    }
                }
                LogRecord::SwitchIntent { txn, packet, local_writes, writers, outputs, instr_order, inserts } => {
                    node.redo(id(txn), local_writes, &[], node.insert_seq);
                    let packet =
                        TxnPacket::decode(packet).map_err(|e| format!("log: switch transaction {txn:#x}: {e}"))?;
                    let pending = PendingSwitchTxn {
                        packet,
                        writers: writers.clone(),
                        outputs: outputs.clone(),
                        instr_order: instr_order.clone(),
                        inserts: inserts.clone(),
                    };
                    node.recovering.insert(id(txn), pending);
                }
                LogRecord::SwitchResult { txn, inserted, insert_seq, .. } => {
                    let Some(p) = node.recovering.remove(&id(txn)) else {
                        return Err(format!("log: answer of switch transaction {txn:#x} without its intent"));
                    };
                    node.redo(id(txn), &[], inserted, *insert_seq);
                    if !p.writers.is_empty() {
                        node.decisions.commit(id(txn));
                    }
                    report.committed += 1;
                }
            }
        }
        report.switch_pending = node.recovering.len();
        report.in_doubt = prepared.len();
        for (txn, (coordinator, writes)) in prepared {
            node.hold_in_doubt(txn, coordinator, writes);
        }
        Ok((node, report))
    }

    /// Redoes a committed transaction's writes and inserts.
    pub(super) fn redo(
        &mut self,
        txn: TxnId,
        writes: &[(TupleKey, i64)],
        inserted: &[(TupleKey, i64)],
        insert_seq: u64,
    ) {
        for &(key, value) in writes {
            self.store.set(key, Tuple { value, version: txn.bits() });
        }
        for &(key, value) in inserted {
            self.store.insert(key, Tuple { value, version: txn.bits() });
        }
        self.insert_seq = self.insert_seq.max(insert_seq);
    }

    /// Takes back the locks of a transaction prepared before the crash, whose outcome only its
    /// coordinator knows; its writes wait for that outcome.
    pub(super) fn hold_in_doubt(&mut self, txn: TxnId, coordinator: u16, writes: Vec<(TupleKey, i64)>) {
        let cc = &mut self.cc;
        cc.begin_with(txn, 0, OnConflict::Deny).expect("each transaction is prepared once");
        let mut work = Work::default();
        for &(key, _) in &writes {
            // Two prepared transactions never hold the same tuple: both had it locked exclusively.
            let locked = cc.read(&self.store, txn, key, Intent::Write, &mut work);
            debug_assert!(matches!(locked, Ok(Read::Done(_))), "in-doubt transactions overlap on {key:?}");
        }
        for &(key, value) in &writes {
            let written = cc.write(txn, key, value, &mut work);
            debug_assert!(written.is_ok(), "{txn}: {written:?}");
        }
        let entries = writes.iter().map(|&(k, _)| (k, LockMode::Exclusive)).collect::<Vec<_>>();
        let progress = LockReading { next: entries.len(), entries, values: Vec::new(), replied: 0, released: 0 };
        self.served.admit_prepared(txn, coordinator, progress);
    }

    /// A switch transaction recovered from the log got its answer: it commits now, as it would
    /// have before the crash (its coordinator's attempt is gone, so nothing is reported).
    pub(super) fn finish_recovered(&mut self, txn: TxnId, p: PendingSwitchTxn, answer: &TxnPacket, out: &mut Outbox) {
        let mut outputs = p.outputs;
        // A hot transaction logs no outputs of its own: make room for the switch's.
        let ops = p.instr_order.iter().map(|&op| usize::from(op) + 1).max().unwrap_or(0);
        if outputs.len() < ops {
            outputs.resize(ops, 0);
        }
        for (instr, &op) in answer.instrs.iter().zip(&p.instr_order) {
            if let Some(slot) = outputs.get_mut(usize::from(op)) {
                *slot = i64::from(instr.data);
            }
        }
        let inserted = self.insert_rows(txn, &p.inserts, &outputs, out);
        if answer.multicast == 0 {
            // No multicast group covered the participants: tell them here.
            self.send_commit(txn, &p.writers, out);
        }
        self.note_decided(txn, !p.writers.is_empty());
        if self.cfg.log {
            out.log.extend(self.commit_record(txn, Some(answer), Vec::new(), inserted.clone(), !p.writers.is_empty()));
        }
        if self.cfg.record_history {
            out.events.push(NodeEvent::Recovered(RecoveredCommit {
                txn: txn.bits(),
                gid: answer.gid,
                outputs,
                inserted,
            }));
        }
        self.stats.recovered_commits += 1;
    }

    /// A logged switch transaction still has no answer: send it again (the switch answers a
    /// copy of one it already ran from its memory, or runs it).
    pub(super) fn resend_recovered(&mut self, now: Nanos, txn: TxnId, out: &mut Outbox) {
        let Some(p) = self.recovering.get(&txn) else { return };
        let pkt = p.packet.clone();
        self.stats.switch_resends += 1;
        self.send_switch(crate::wire::TXN_KIND, |b| pkt.encode(b), out);
        out.timers.push((now + self.cfg.switch_timeout_ns, Timer::RecoveredSwitchTxn { txn }));
    }
}
