//! Rebuilding a crashed switch's state from the nodes' logs (P4DB §6.1, Appendix A.3 case 1).
//!
//! A switch that restarts has lost its registers: the hot tuples' values. Every switch
//! transaction that changed them is in the log of the node that sent it, as an intent (logged
//! before sending, so a transaction the switch ran is always there) and, if its answer
//! arrived, with its GID and results. The rebuild starts from the hot set's initial values and
//! replays them through the switch itself, one at a time:
//!
//! 1. Transactions with a GID, in GID order: the switch's own serial order.
//! 2. An intent without a logged answer may or may not have run before the crash. If it ran,
//!    some later transaction's logged results depend on it: replayed in place, that later
//!    transaction's results come out different. Then the rebuild tries each unanswered intent
//!    just before it, and keeps the one that makes the logged results come out (seed Fig. 9: T2
//!    read x = 3, which only T1 wrote). A trial is undone by restoring the cells both touched.
//! 3. The unanswered intents nothing depended on run last, in transaction-id order: any order
//!    is correct for them, as they count as committed but nobody saw their effects.
//!
//! Each replayed transaction's answer stays in the engine's memory of answers
//! ([`P4dbEngine::remember`]), so when its node sends it again (it never got the answer), the
//! new switch answers without running it twice. GIDs continue after the largest logged one.
//!
//! Limitations: step 2 tries one unanswered intent at a time, so a logged transaction whose
//! results depend on two unanswered ones is not placed. And an intent placed by step 2 gets a
//! new GID, after the logged ones; once its node logs that answer, a second rebuild replays it
//! there, not where step 2 put it. In both cases the rebuild stops with an error naming the
//! transaction instead of building a wrong state.

use crate::wal::LogRecord;
use pisadb_core::Nanos;
use pisadb_switch::programs::p4db::{Answer, P4dbEngine};
use pisadb_switch::Switch;
use pisadb_wire::p4db::TxnPacket;
use pisadb_wire::{Frame, Kind, SWITCH_ID};
use std::collections::BTreeMap;

/// What a rebuild did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RebuildReport {
    /// Transactions replayed in GID order.
    pub by_gid: usize,
    /// Unanswered transactions placed before a logged one because its results depend on them.
    pub placed_by_dependency: usize,
    /// Unanswered transactions run at the end.
    pub appended: usize,
    /// The last GID afterwards.
    pub last_gid: u64,
}

/// A switch transaction as the logs tell it.
struct Logged {
    node: u16,
    packet: TxnPacket,
    answer: Option<Answer>,
}

/// Replays the switch transactions in `logs` (one log per node, indexed by node id) into
/// `switch`, which must hold the hot set's initial values and have every node attached.
pub fn rebuild_switch(switch: &mut Switch<P4dbEngine>, logs: &[Vec<LogRecord>]) -> Result<RebuildReport, String> {
    let mut txns: BTreeMap<u64, Logged> = BTreeMap::new();
    for (node, log) in logs.iter().enumerate() {
        for record in log {
            match record {
                LogRecord::SwitchIntent { txn, packet, .. } => {
                    let packet = TxnPacket::decode(packet)
                        .map_err(|e| format!("node {node}'s log, transaction {txn:#x}: {e}"))?;
                    txns.insert(*txn, Logged { node: node as u16, packet, answer: None });
                }
                LogRecord::SwitchResult { txn, gid, results, acc, .. } => {
                    let Some(t) = txns.get_mut(txn) else {
                        return Err(format!("node {node}'s log: answer of {txn:#x} without its intent"));
                    };
                    t.answer = Some(Answer { gid: *gid, results: results.clone(), acc: *acc });
                }
                _ => {}
            }
        }
    }
    let mut by_gid: Vec<(u64, u64)> =
        txns.iter().filter_map(|(&id, t)| t.answer.as_ref().map(|a| (a.gid, id))).collect();
    by_gid.sort_unstable();
    let mut unanswered: Vec<u64> = txns.iter().filter(|(_, t)| t.answer.is_none()).map(|(&id, _)| id).collect();
    let max_logged_gid = by_gid.last().map_or(0, |&(gid, _)| gid);

    // Replayed transactions get fresh GIDs after every logged one: a node that logs the answer
    // of an appended transaction then orders it after them in a later rebuild, as here.
    switch.set_last_gid(max_logged_gid);
    let mut replay = Replay { switch, now: 0 };
    let mut report = RebuildReport { by_gid: by_gid.len(), ..RebuildReport::default() };
    for &(gid, id) in &by_gid {
        let t = &txns[&id];
        let expected = t.answer.as_ref().expect("answered");
        if replay.try_run(&[(t.node, &t.packet)], |answers| same_results(&answers[0], expected))? {
            continue;
        }
        let mut placed = None;
        for (i, &u) in unanswered.iter().enumerate() {
            let before = &txns[&u];
            let pair = [(before.node, &before.packet), (t.node, &t.packet)];
            if replay.try_run(&pair, |answers| same_results(&answers[1], expected))? {
                placed = Some(i);
                break;
            }
        }
        let Some(i) = placed else {
            return Err(format!(
                "cannot rebuild the switch: switch transaction {id:#x} (GID {gid}, node {}) logged results that no \
                 replay order of the logged transactions reproduces",
                t.node
            ));
        };
        unanswered.remove(i);
        report.placed_by_dependency += 1;
    }
    for &u in &unanswered {
        let t = &txns[&u];
        replay.try_run(&[(t.node, &t.packet)], |_| true)?;
        report.appended += 1;
    }
    report.last_gid = replay.switch.last_gid();
    Ok(report)
}

fn same_results(got: &TxnPacket, logged: &Answer) -> bool {
    got.acc == logged.acc && got.instrs.iter().map(|i| i.data).eq(logged.results.iter().copied())
}

/// Runs transactions through the switch one at a time, with undo.
struct Replay<'a> {
    switch: &'a mut Switch<P4dbEngine>,
    now: Nanos,
}

impl Replay<'_> {
    /// Runs `txns` in order; keeps their effects if `keep(answers)`, else restores every cell
    /// they touched and forgets their answers.
    fn try_run(&mut self, txns: &[(u16, &TxnPacket)], keep: impl FnOnce(&[TxnPacket]) -> bool) -> Result<bool, String> {
        let cells: Vec<(u8, u32)> =
            txns.iter().flat_map(|(_, p)| p.instrs.iter().map(|i| (i.register, u32::from(i.index)))).collect();
        let saved: Vec<(i64, i64)> = cells
            .iter()
            .map(|&(r, i)| self.switch.registers().read(r, i).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let gid = self.switch.last_gid();
        let mut answers = Vec::with_capacity(txns.len());
        for &(node, packet) in txns {
            answers.push(self.run(node, packet)?);
        }
        if keep(&answers) {
            return Ok(true);
        }
        for (&(r, i), &(lo, hi)) in cells.iter().zip(&saved).rev() {
            self.switch.registers_mut().write(r, i, lo, hi).map_err(|e| e.to_string())?;
        }
        for (_, packet) in txns {
            self.switch.program_mut().forget(packet.txn_id);
        }
        self.switch.set_last_gid(gid);
        Ok(false)
    }

    /// Sends one transaction into the switch and runs the switch until it has answered.
    fn run(&mut self, node: u16, packet: &TxnPacket) -> Result<TxnPacket, String> {
        let mut bytes = Vec::with_capacity(packet.encoded_len() + pisadb_wire::FRAME_BYTES);
        Frame { kind: Kind::P4dbTxn, src: node, dst: SWITCH_ID }.encode(&mut bytes);
        packet.encode(&mut bytes);
        self.switch.handle_datagram(self.now, node, &bytes);
        let mut answer = None;
        // Bounded: alone in the switch, a transaction finishes within its passes.
        for _ in 0..1_000 {
            while let Some(tx) = self.switch.poll_transmit() {
                if let Ok((_, payload)) = Frame::decode(&tx.bytes) {
                    answer = TxnPacket::decode(payload).ok().or(answer);
                }
                self.now = self.now.max(tx.at_ns);
            }
            match self.switch.poll_timeout() {
                Some(t) => {
                    self.now = self.now.max(t);
                    self.switch.handle_timeout(t);
                }
                None => break,
            }
        }
        answer.ok_or_else(|| {
            format!(
                "switch transaction {:#x} from node {node} was not answered on replay: {:?}",
                packet.txn_id,
                self.switch.stats()
            )
        })
    }
}
