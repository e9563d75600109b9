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
//!    Only intents that can have run that early are tried: an intent logged after its node
//!    logged the answer with GID g ran after g (the fuzzer found a rebuild that placed a
//!    worker's next transaction before the one it waited for).
//! 3. The unanswered intents nothing depended on run last, in transaction-id order: any order
//!    is correct for them, as they count as committed but nobody saw their effects.
//!
//! Each replayed transaction's answer stays in the engine's memory of answers
//! ([`P4dbEngine::remember`]), so when its node sends it again (it never got the answer), the
//! new switch answers without running it twice.
//!
//! ## GIDs
//!
//! A logged transaction is replayed under its logged GID. An intent placed before a logged
//! transaction with GID g ran on the old switch at one of the GIDs below g that no logged
//! transaction has (GIDs have no holes, and every transaction that ran was logged as an
//! intent). It takes the largest such free GID that is still after every transaction replayed
//! on its cells: the transactions between that GID and g touch other cells, so whether it runs
//! before or after them changes nothing. Appended intents take GIDs after the largest logged
//! one. Answers sent after the rebuild thus order every switch transaction by GID exactly as
//! the rebuilt registers do.
//!
//! Limitations: step 2 tries one unanswered intent at a time, so a logged transaction whose
//! results depend on two unanswered ones is not placed, and the rebuild stops with an error
//! naming the transaction instead of building a wrong state. If no free GID fits a placed
//! intent (a logged transaction on its cells holds every GID below g after its own), it gets
//! one after the logged ones and is counted as `misordered`: the registers are right, its
//! GID's order is not.

use crate::wal::LogRecord;
use pisadb_core::Nanos;
use pisadb_switch::programs::p4db::{Answer, P4dbEngine};
use pisadb_switch::Switch;
use pisadb_wire::p4db::TxnPacket;
use pisadb_wire::{Frame, Kind, SWITCH_ID};
use std::collections::{BTreeMap, BTreeSet};

/// What a rebuild did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RebuildReport {
    /// Transactions replayed in GID order.
    pub by_gid: usize,
    /// Unanswered transactions placed before a logged one because its results depend on them.
    pub placed_by_dependency: usize,
    /// Unanswered transactions run at the end.
    pub appended: usize,
    /// Placed transactions whose GID could not be the one just before the transaction they
    /// were placed before.
    pub misordered: usize,
    /// The last GID afterwards.
    pub last_gid: u64,
}

/// A switch transaction as the logs tell it.
struct Logged {
    node: u16,
    packet: TxnPacket,
    answer: Option<Answer>,
    /// The largest GID its node had logged before this intent: it ran after that one.
    after_gid: u64,
}

/// Replays the switch transactions in `logs` (one log per node, indexed by node id) into
/// `switch`, which must hold the hot set's initial values and have every node attached.
pub fn rebuild_switch(switch: &mut Switch<P4dbEngine>, logs: &[Vec<LogRecord>]) -> Result<RebuildReport, String> {
    let mut txns: BTreeMap<u64, Logged> = BTreeMap::new();
    for (node, log) in logs.iter().enumerate() {
        let mut node_gid = 0;
        for record in log {
            match record {
                LogRecord::SwitchIntent { txn, packet, .. } => {
                    let packet = TxnPacket::decode(packet)
                        .map_err(|e| format!("node {node}'s log, transaction {txn:#x}: {e}"))?;
                    txns.insert(*txn, Logged { node: node as u16, packet, answer: None, after_gid: node_gid });
                }
                LogRecord::SwitchResult { txn, gid, results, acc, .. } => {
                    let Some(t) = txns.get_mut(txn) else {
                        return Err(format!("node {node}'s log: answer of {txn:#x} without its intent"));
                    };
                    t.answer = Some(Answer { gid: *gid, results: results.clone(), acc: *acc });
                    node_gid = node_gid.max(*gid);
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

    let mut replay = Replay { switch, now: 0 };
    let mut report = RebuildReport { by_gid: by_gid.len(), ..RebuildReport::default() };
    // GIDs taken (logged, or given to a placed intent), and per cell the GID of the last
    // transaction replayed on it.
    let mut taken: BTreeSet<u64> = by_gid.iter().map(|&(gid, _)| gid).collect();
    let mut cell_gid: BTreeMap<(u8, u32), u64> = BTreeMap::new();
    for &(gid, id) in &by_gid {
        let t = &txns[&id];
        let expected = t.answer.as_ref().expect("answered");
        if replay.try_run(&[(t.node, &t.packet, gid)], |answers| same_results(&answers[0], expected))? {
            touch(&t.packet, gid, &mut cell_gid);
            continue;
        }
        let mut placed = None;
        for (i, &u) in unanswered.iter().enumerate() {
            let before = &txns[&u];
            if before.after_gid >= gid {
                continue; // its node sent it after it knew of `gid`: it ran later
            }
            // Its GID: a free one before `gid`, after every transaction replayed on its cells
            // (those in between touch other cells, so the order with them is immaterial).
            let after = before.packet.instrs.iter().filter_map(|i| cell_gid.get(&(i.register, u32::from(i.index))));
            let lower = after.copied().max().unwrap_or(0).max(before.after_gid);
            let free = (lower + 1..gid).rev().find(|g| !taken.contains(g));
            let label = free.unwrap_or(max_logged_gid + 1 + report.misordered as u64);
            let pair = [(before.node, &before.packet, label), (t.node, &t.packet, gid)];
            if replay.try_run(&pair, |answers| same_results(&answers[1], expected))? {
                report.misordered += usize::from(free.is_none());
                taken.insert(label);
                touch(&before.packet, label, &mut cell_gid);
                touch(&t.packet, gid, &mut cell_gid);
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
    // Fresh GIDs after every logged (and placed) one: a node that logs the answer of an
    // appended transaction then orders it after them in a later rebuild, as here.
    let mut label = max_logged_gid + report.misordered as u64;
    for &u in &unanswered {
        let t = &txns[&u];
        label += 1;
        replay.try_run(&[(t.node, &t.packet, label)], |_| true)?;
        report.appended += 1;
    }
    replay.switch.set_last_gid(label.max(max_logged_gid));
    report.last_gid = replay.switch.last_gid();
    Ok(report)
}

/// Notes that `packet` ran under `gid` on each of its cells.
fn touch(packet: &TxnPacket, gid: u64, cell_gid: &mut BTreeMap<(u8, u32), u64>) {
    for i in &packet.instrs {
        let last = cell_gid.entry((i.register, u32::from(i.index))).or_default();
        *last = (*last).max(gid);
    }
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
    /// Runs `txns` in order, each stamped with its GID; keeps their effects if
    /// `keep(answers)`, else restores every cell they touched and forgets their answers.
    fn try_run(
        &mut self,
        txns: &[(u16, &TxnPacket, u64)],
        keep: impl FnOnce(&[TxnPacket]) -> bool,
    ) -> Result<bool, String> {
        let cells: Vec<(u8, u32)> =
            txns.iter().flat_map(|(_, p, _)| p.instrs.iter().map(|i| (i.register, u32::from(i.index)))).collect();
        let saved: Vec<(i64, i64)> = cells
            .iter()
            .map(|&(r, i)| self.switch.registers().read(r, i).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let gid = self.switch.last_gid();
        let mut answers = Vec::with_capacity(txns.len());
        for &(node, packet, gid) in txns {
            self.switch.set_last_gid(gid.saturating_sub(1));
            answers.push(self.run(node, packet)?);
        }
        if keep(&answers) {
            return Ok(true);
        }
        for (&(r, i), &(lo, hi)) in cells.iter().zip(&saved).rev() {
            self.switch.registers_mut().write(r, i, lo, hi).map_err(|e| e.to_string())?;
        }
        for (_, packet, _) in txns {
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
