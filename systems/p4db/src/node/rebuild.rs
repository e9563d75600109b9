//! Rebuilding a crashed switch's state from the nodes' logs (P4DB §6.1, Appendix A.3 case 1).
//!
//! A switch that restarts has lost its registers: the hot tuples' values. Every switch
//! transaction that changed them is in the log of the node that sent it, as an intent (logged
//! before sending, so a transaction the switch ran is always there) and, if its answer
//! arrived, with its GID and results. The rebuild starts from the hot set's initial values and
//! replays them through the switch itself, one at a time, in GID order.
//!
//! ## Where the unanswered transactions ran
//!
//! The old switch stamped GIDs without holes, so every GID up to the largest logged one that no
//! logged answer carries is a *hole*: the GID of a transaction whose answer never reached a
//! log. Each hole was taken by one of the unanswered intents. Which one matters only where a
//! later logged transaction's results depend on it: replayed without it, that transaction's
//! results come out different from its log (seed Fig. 9: T2 read x = 3, which only T1 wrote).
//!
//! So the replay runs the logged transactions at their GIDs and leaves the holes empty until a
//! logged result fails to come out. Then it searches for the placements that explain it: an
//! unanswered intent into a hole below the failing GID, the nearest holes and the intents that
//! share a cell with the failing transaction first. A trial rewinds the registers to the hole
//! with an undo journal, runs the intent there and every logged transaction after it again; it
//! is kept only if all of them, the failing one included, give their logged results. One
//! placement is tried before two (a result that depends on two unanswered transactions).
//! Only intents that can have run that early are tried: an intent logged after its node logged
//! the answer with GID g ran after g (the fuzzer found a rebuild that placed a worker's next
//! transaction before the one it waited for).
//!
//! A placed intent keeps its hole as its GID, and the unanswered intents nothing depended on
//! run last, in transaction-id order, under fresh GIDs after the largest logged one: any order
//! is correct for them, as they count as committed but nobody saw their effects. Every switch
//! transaction, logged or not, thus has a GID that orders it exactly as the rebuilt registers
//! do, which is what the fuzzer's GID-order replay checks.
//!
//! ## The crashed switch's last answers
//!
//! An answer the crashed switch sent may still be on the wire when the rebuilt one starts. No
//! log had it, so the rebuild may have decided that transaction differently (another hole, or
//! a fresh GID). The rebuilt switch therefore answers in a new epoch (the top bits of the GID
//! word, see `crate::wire::p4db`), and a node drops answers from epochs older than one it knows
//! of. In the simulator the control plane that collects the logs fences every node as it does
//! ([`crate::node::Node::fence_switch`]). In real mode the supervisor starts the rebuilt switch with
//! `--epoch`, and a node learns the epoch from the rebuilt switch's first answer: a stale
//! answer is then only taken if it waited in the node's socket for the whole restart.
//!
//! Each replayed transaction's answer stays in the engine's memory of answers
//! ([`P4dbEngine::remember`]), so when its node sends it again (it never got the answer), the
//! new switch answers without running it twice.
//!
//! Limits: the search for one result places at most two intents more than the rebuild had
//! placed before it, looks no farther than [`MAX_HOLES`] holes below it, and gives up after
//! [`SEARCH_BUDGET`] transaction runs. The rebuild then stops with an error naming the
//! transaction instead of building a wrong state.

use crate::node::wal::LogRecord;
use crate::programs::p4db::{Answer, P4dbEngine};
use crate::wire::p4db::TxnPacket;
use pisadb_core::Nanos;
use pisadb_switch::Switch;
use pisadb_wire::{Frame, SWITCH_ID};
use std::collections::{BTreeMap, BTreeSet};

/// How many holes below a failing transaction the search tries.
pub const MAX_HOLES: usize = 256;
/// How many transaction runs the search for the placements that explain one logged result may
/// take.
pub const SEARCH_BUDGET: usize = 1_000_000;
/// How many placements together may explain one logged result.
const MAX_PLACEMENTS: usize = 2;

/// What a rebuild did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RebuildReport {
    /// Transactions replayed in GID order.
    pub by_gid: usize,
    /// Unanswered transactions placed in a hole among the logged GIDs, because a logged
    /// transaction's results depend on them.
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
    /// The largest GID its node had logged before this intent: it ran after that one.
    after_gid: u64,
}

/// Replays the switch transactions in `logs` (one log per node, indexed by node id) into
/// `switch`, which must hold the hot set's initial values and have every node attached.
pub fn rebuild_switch(switch: &mut Switch<P4dbEngine>, logs: &[Vec<LogRecord>]) -> Result<RebuildReport, String> {
    let txns = read_logs(logs)?;
    let mut by_gid: Vec<(u64, u64)> =
        txns.iter().filter_map(|(&id, t)| t.answer.as_ref().map(|a| (a.gid, id))).collect();
    by_gid.sort_unstable();
    if let Some(w) = by_gid.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("the logs give GID {} to both {:#x} and {:#x}", w[0].0, w[0].1, w[1].1));
    }
    let max_logged_gid = by_gid.last().map_or(0, |&(gid, _)| gid);
    let mut replay = Replay {
        switch,
        txns: &txns,
        now: 0,
        schedule: BTreeMap::new(),
        journal: Vec::new(),
        unplaced: txns.iter().filter(|(_, t)| t.answer.is_none()).map(|(&id, _)| id).collect(),
        budget: 0,
    };
    for &(gid, id) in &by_gid {
        replay.schedule.insert(gid, id);
        if replay.advance(gid)?.is_some() && !replay.explain(gid)? {
            let t = &txns[&id];
            return Err(format!(
                "cannot rebuild the switch: switch transaction {id:#x} (GID {gid}, node {}) logged results that no \
                 placement of the unanswered transactions reproduces",
                t.node
            ));
        }
    }
    let placed = replay.schedule.len() - by_gid.len();
    // Fresh GIDs after every logged one: a node that logs the answer of an appended
    // transaction then orders it after them in a later rebuild, as here.
    let appended: Vec<u64> = std::mem::take(&mut replay.unplaced).into_iter().collect();
    let mut last_gid = max_logged_gid;
    for id in &appended {
        last_gid += 1;
        replay.schedule.insert(last_gid, *id);
    }
    replay.advance(last_gid)?;
    replay.switch.set_last_gid(last_gid);
    replay.switch.restart_clock();
    Ok(RebuildReport { by_gid: by_gid.len(), placed_by_dependency: placed, appended: appended.len(), last_gid })
}

/// The switch transactions in `logs`, by transaction id.
fn read_logs(logs: &[Vec<LogRecord>]) -> Result<BTreeMap<u64, Logged>, String> {
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
    Ok(txns)
}

fn same_results(got: &TxnPacket, logged: &Answer) -> bool {
    got.acc == logged.acc && got.instrs.iter().map(|i| i.data).eq(logged.results.iter().copied())
}

/// A transaction the replay ran, with its cells as they were before.
struct Ran {
    gid: u64,
    txn: u64,
    before: Vec<(u8, u32, i64, i64)>,
}

/// Runs transactions through the switch in GID order, with an undo journal.
///
/// Invariant: `journal` is the prefix of `schedule` that has run, in order.
struct Replay<'a> {
    switch: &'a mut Switch<P4dbEngine>,
    txns: &'a BTreeMap<u64, Logged>,
    now: Nanos,
    /// What runs at each GID: logged transactions at theirs, placed intents in holes.
    schedule: BTreeMap<u64, u64>,
    journal: Vec<Ran>,
    /// Unanswered intents not placed yet.
    unplaced: BTreeSet<u64>,
    /// Transaction runs the current search may still take.
    budget: usize,
}

impl Replay<'_> {
    /// Runs what is scheduled up to `gid`; the GID of the first logged transaction whose
    /// results come out different, if any (it has run).
    fn advance(&mut self, gid: u64) -> Result<Option<u64>, String> {
        let from = self.journal.last().map_or(0, |r| r.gid);
        if from >= gid {
            return Ok(None);
        }
        let due: Vec<(u64, u64)> = self.schedule.range(from + 1..=gid).map(|(&g, &id)| (g, id)).collect();
        for (g, id) in due {
            let answer = self.run(g, id)?;
            if self.txns[&id].answer.as_ref().is_some_and(|expected| !same_results(&answer, expected)) {
                return Ok(Some(g));
            }
        }
        Ok(None)
    }

    /// Undoes every run at `gid` or later.
    fn rewind(&mut self, gid: u64) -> Result<(), String> {
        while self.journal.last().is_some_and(|r| r.gid >= gid) {
            let ran = self.journal.pop().expect("checked");
            for &(r, i, lo, hi) in ran.before.iter().rev() {
                self.switch.registers_mut().write(r, i, lo, hi).map_err(|e| e.to_string())?;
            }
            self.switch.program_mut().forget(ran.txn);
        }
        Ok(())
    }

    /// Searches placements of unanswered intents that make every logged transaction up to
    /// `target` (which has run and failed) give its logged results: first keeping the
    /// placements made so far, with one more and then two; then with those taken back too, so
    /// that they can move (an earlier result may have been explained by the wrong transaction).
    /// On success the placements stay scheduled and everything up to `target` has run.
    fn explain(&mut self, target: u64) -> Result<bool, String> {
        self.budget = SEARCH_BUDGET;
        self.rewind(target)?;
        for more in 1..=MAX_PLACEMENTS {
            if self.solve(target, more)? {
                return Ok(true);
            }
        }
        let placed: Vec<u64> =
            self.schedule.iter().filter(|(_, id)| self.txns[id].answer.is_none()).map(|(&h, _)| h).collect();
        if placed.is_empty() {
            return Ok(false);
        }
        for &h in &placed {
            self.unplace(h)?;
        }
        self.solve(target, placed.len() + MAX_PLACEMENTS)
    }

    /// Runs everything scheduled up to `target`; where a logged result comes out different,
    /// tries each unanswered intent in each hole below it (nearest holes first, and intents
    /// sharing a cell with it first), with at most `placements` placements in all.
    fn solve(&mut self, target: u64, placements: usize) -> Result<bool, String> {
        let Some(failed) = self.advance(target)? else { return Ok(true) };
        if placements == 0 {
            return Ok(false);
        }
        let cells = self.cells(self.schedule[&failed]);
        for h in self.holes_below(failed) {
            // Only intents that may have run at `h` (see the module documentation).
            let mut candidates: Vec<(bool, u64)> = self
                .unplaced
                .iter()
                .filter(|u| self.txns[u].after_gid < h)
                .map(|&u| (self.cells(u).is_disjoint(&cells), u))
                .collect();
            candidates.sort_unstable();
            for (_, u) in candidates {
                if self.budget == 0 {
                    return Err(format!(
                        "cannot rebuild the switch: the search for where unanswered transactions ran took more than \
                         {SEARCH_BUDGET} runs at GID {target}"
                    ));
                }
                self.place(h, u)?;
                if self.solve(target, placements - 1)? {
                    return Ok(true);
                }
                self.unplace(h)?;
            }
        }
        Ok(false)
    }

    /// Schedules unanswered intent `u` in hole `h`, undoing what ran from there on.
    fn place(&mut self, h: u64, u: u64) -> Result<(), String> {
        self.schedule.insert(h, u);
        self.unplaced.remove(&u);
        self.rewind(h)
    }

    /// Takes back the intent placed in hole `h`, undoing what ran from there on.
    fn unplace(&mut self, h: u64) -> Result<(), String> {
        let u = self.schedule.remove(&h).expect("a placed intent");
        self.unplaced.insert(u);
        self.rewind(h)
    }

    /// The free GIDs below `gid`, nearest first, at most [`MAX_HOLES`].
    fn holes_below(&self, gid: u64) -> Vec<u64> {
        let mut holes = Vec::new();
        let mut above = gid;
        for &g in self.schedule.range(..gid).rev().map(|(g, _)| g).chain(std::iter::once(&0)) {
            holes.extend((g + 1..above).rev().take(MAX_HOLES - holes.len()));
            if holes.len() == MAX_HOLES {
                break;
            }
            above = g;
        }
        holes
    }

    /// The cells `txn` touches.
    fn cells(&self, txn: u64) -> BTreeSet<(u8, u32)> {
        self.txns[&txn].packet.instrs.iter().map(|i| (i.register, u32::from(i.index))).collect()
    }

    /// Runs `txn` stamped with `gid` and journals it.
    fn run(&mut self, gid: u64, txn: u64) -> Result<TxnPacket, String> {
        let t = &self.txns[&txn];
        let before = t
            .packet
            .instrs
            .iter()
            .map(|i| {
                let (r, index) = (i.register, u32::from(i.index));
                let (lo, hi) = self.switch.registers().read(r, index).map_err(|e| e.to_string())?;
                Ok((r, index, lo, hi))
            })
            .collect::<Result<_, String>>()?;
        self.switch.set_last_gid(gid - 1);
        let answer = run_alone(self.switch, &mut self.now, t.node, &t.packet)?;
        self.budget = self.budget.saturating_sub(1);
        self.journal.push(Ran { gid, txn, before });
        Ok(answer)
    }
}

/// Sends one transaction into `switch`, alone, and runs the switch until it has answered.
fn run_alone(
    switch: &mut Switch<P4dbEngine>,
    now: &mut Nanos,
    node: u16,
    packet: &TxnPacket,
) -> Result<TxnPacket, String> {
    let mut bytes = Vec::with_capacity(packet.encoded_len() + pisadb_wire::FRAME_BYTES);
    Frame { kind: crate::wire::TXN_KIND, src: node, dst: SWITCH_ID }.encode(&mut bytes);
    packet.encode(&mut bytes);
    switch.handle_datagram(*now, node, &bytes);
    let mut answer = None;
    // Bounded: alone in the switch, a transaction finishes within its passes.
    for _ in 0..1_000 {
        while let Some(tx) = switch.poll_transmit() {
            if let Ok((_, payload)) = Frame::decode(&tx.bytes) {
                answer = TxnPacket::decode(payload).ok().or(answer);
            }
            *now = (*now).max(tx.at_ns);
        }
        match switch.poll_timeout() {
            Some(t) => {
                *now = (*now).max(t);
                switch.handle_timeout(t);
            }
            None => break,
        }
    }
    answer.ok_or_else(|| {
        format!(
            "switch transaction {:#x} from node {node} was not answered on replay: {:?}",
            packet.txn_id,
            switch.stats()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::programs::p4db::P4dbConfig;
    use pisadb_core::{Op, OpKind, TupleKey, Txn};
    use pisadb_p4db_layout::Layout;
    use pisadb_switch::SwitchProfile;

    const X: TupleKey = TupleKey::new(0, 0);
    const Y: TupleKey = TupleKey::new(0, 1);

    /// A switch with X and Y hot (initial values 0) and nodes 0..3 attached.
    fn fresh_switch() -> (Switch<P4dbEngine>, Layout) {
        let profile = SwitchProfile::tofino1();
        let cfg = P4dbConfig::for_profile(&profile);
        let layout = pisadb_p4db_layout::random(&[X, Y], &cfg.layout_target(&profile), 7);
        let mut switch = Switch::new(profile, P4dbEngine::new(cfg)).expect("loads");
        (0..3).for_each(|n| switch.attach(n));
        (switch, layout)
    }

    /// Runs `txns` (node, id, operations) on a live switch in this order, and returns the logs
    /// the nodes would have: every intent, and the answers of those not in `unanswered`.
    fn live_logs(txns: &[(u16, u64, Vec<Op>)], unanswered: &[u64]) -> Vec<Vec<LogRecord>> {
        let (mut switch, layout) = fresh_switch();
        let engine = switch.program().clone();
        let mut logs = vec![Vec::new(); 3];
        let mut now = 0;
        for (node, id, ops) in txns {
            let (packet, _) = engine.packet_for(&Txn::new(ops.clone()), &layout, *id).expect("hot");
            let mut bytes = Vec::new();
            packet.encode(&mut bytes);
            let log = &mut logs[usize::from(*node)];
            log.push(LogRecord::SwitchIntent {
                txn: *id,
                packet: bytes,
                local_writes: vec![],
                writers: vec![],
                outputs: vec![],
                instr_order: vec![],
                inserts: vec![],
            });
            let answer = run_alone(&mut switch, &mut now, *node, &packet).expect("answered");
            if !unanswered.contains(id) {
                log.push(LogRecord::SwitchResult {
                    txn: *id,
                    gid: answer.gid,
                    results: answer.instrs.iter().map(|i| i.data).collect(),
                    acc: answer.acc,
                    inserted: vec![],
                    insert_seq: 0,
                });
            }
        }
        logs
    }

    /// What the rebuilt switch answers a node that sends `id` again: its GID and results.
    fn resend(switch: &mut Switch<P4dbEngine>, layout: &Layout, node: u16, id: u64, ops: &[Op]) -> (u64, Vec<i32>) {
        let (packet, _) = switch.program().clone().packet_for(&Txn::new(ops.to_vec()), layout, id).expect("hot");
        let answer = run_alone(switch, &mut 1_000_000, node, &packet).expect("answered");
        (answer.gid, answer.instrs.iter().map(|i| i.data).collect())
    }

    /// Seed Fig. 9 with a twist the fuzzer found (seed 1092): U read X and added to Y at GID 1
    /// and its answer was lost; A then wrote X (GID 2) and B read Y (GID 3). U must take the
    /// hole at GID 1: after A it would read A's X, and after B it would contradict B's read.
    #[test]
    fn an_unanswered_transaction_takes_the_hole_it_ran_in() {
        let u = vec![Op::read(X), Op::new(Y, OpKind::Add, 10)];
        let txns = [
            (0, 1 << 32, u.clone()),
            (1, 2 << 32, vec![Op::new(X, OpKind::Add, 5)]),
            (1, (2 << 32) + 1, vec![Op::read(Y)]),
        ];
        let logs = live_logs(&txns, &[1 << 32]);
        let (mut switch, layout) = fresh_switch();
        let report = rebuild_switch(&mut switch, &logs).expect("rebuilds");
        assert_eq!((report.by_gid, report.placed_by_dependency, report.appended, report.last_gid), (2, 1, 0, 3));
        let (gid, results) = resend(&mut switch, &layout, 0, 1 << 32, &u);
        assert_eq!((gid, results[0]), (1, 0), "U at GID 1 read X before A added 5");
    }

    /// B's read of Y depends on two lost answers: both are placed.
    #[test]
    fn a_result_explained_by_two_unanswered_transactions_places_both() {
        let txns = [
            (0, 1 << 32, vec![Op::new(Y, OpKind::Add, 10)]),
            (2, 3 << 32, vec![Op::new(Y, OpKind::Add, 100)]),
            (1, 2 << 32, vec![Op::read(Y)]),
        ];
        let logs = live_logs(&txns, &[1 << 32, 3 << 32]);
        let (mut switch, layout) = fresh_switch();
        let report = rebuild_switch(&mut switch, &logs).expect("rebuilds");
        assert_eq!((report.placed_by_dependency, report.appended, report.last_gid), (2, 0, 3));
        let (g1, _) = resend(&mut switch, &layout, 0, 1 << 32, &txns[0].2);
        let (g2, _) = resend(&mut switch, &layout, 2, 3 << 32, &txns[1].2);
        assert_eq!(BTreeSet::from([g1, g2]), BTreeSet::from([1, 2]));
    }

    /// A lost answer nothing depended on runs after every logged transaction.
    #[test]
    fn an_unobserved_unanswered_transaction_is_appended() {
        let txns = [(1, 2 << 32, vec![Op::read(Y)]), (0, 1 << 32, vec![Op::new(X, OpKind::Add, 10)])];
        let logs = live_logs(&txns, &[1 << 32]);
        let (mut switch, layout) = fresh_switch();
        let report = rebuild_switch(&mut switch, &logs).expect("rebuilds");
        assert_eq!((report.by_gid, report.placed_by_dependency, report.appended, report.last_gid), (1, 0, 1, 2));
        assert_eq!(resend(&mut switch, &layout, 0, 1 << 32, &txns[1].2).0, 2);
    }

    /// Logs no placement explains (B saw a value nobody wrote) are refused, naming B.
    #[test]
    fn logs_no_placement_explains_are_refused() {
        let txns = [(0, 1 << 32, vec![Op::new(Y, OpKind::Add, 10)]), (1, 2 << 32, vec![Op::read(Y)])];
        let mut logs = live_logs(&txns, &[1 << 32]);
        let Some(LogRecord::SwitchResult { results, .. }) = logs[1].last_mut() else { panic!("B's answer") };
        results[0] = 7;
        let (mut switch, _) = fresh_switch();
        let err = rebuild_switch(&mut switch, &logs).expect_err("refused");
        assert!(err.contains("0x200000000") && err.contains("GID 2"), "{err}");
    }

    /// An intent its node logged after it knew of GID g is never placed below g.
    #[test]
    fn an_intent_is_not_placed_before_what_its_node_had_seen() {
        // W (node 2) added 1 to X at GID 1, A (node 0) read it at GID 2, then A's worker sent U,
        // which added 1 more at GID 3; B read 2 at GID 4. W's and U's answers were lost.
        // Explaining A tries GID 1, where U would fit too (it touches X, and its id is lower),
        // but U's node logged it after A's answer: there it would run before its own worker's
        // previous transaction, which the switch then refuses as a stale copy.
        let u = vec![Op::new(X, OpKind::Add, 1)];
        let txns = [
            (2, 3 << 32, vec![Op::new(X, OpKind::Add, 1)]),
            (0, 1 << 32, vec![Op::read(X)]),
            (0, (1 << 32) + 1, u.clone()),
            (1, 2 << 32, vec![Op::read(X)]),
        ];
        let logs = live_logs(&txns, &[3 << 32, (1 << 32) + 1]);
        let (mut switch, layout) = fresh_switch();
        let report = rebuild_switch(&mut switch, &logs).expect("rebuilds");
        assert_eq!(report.placed_by_dependency, 2);
        assert_eq!(resend(&mut switch, &layout, 0, (1 << 32) + 1, &u).0, 3);
    }
}
