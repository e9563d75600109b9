//! A model-checked abstraction of PisaDB's commit protocols (P4DB §6.1–§6.2, Fig. 10), at the
//! scale where every interleaving can be enumerated: one transaction, a coordinator node, one or
//! two remote participants, the switch, a network that reorders freely, and crashes.
//!
//! ## What is modelled
//!
//! - **Cold** transactions use two-phase commit: the coordinator sends `Prepare`, each participant
//!   votes (yes after logging "prepared", or no), the coordinator logs the decision and sends it.
//! - **Warm** transactions replace the decision round by the switch: once every vote is yes, the
//!   coordinator logs the switch sub-transaction's *intent* and sends it; the switch executes it
//!   and multicasts the result to every participant, each of which commits on that copy without
//!   another round trip. With no remote participant the voting phase is skipped.
//! - **Lost packets and resends**: the coordinator may time out at any moment and resend what it
//!   is waiting on; the switch deduplicates by transaction id and re-multicasts a result it has.
//! - **Participant crash** (once each): volatile state is lost; on restart the node keeps only its
//!   log. Unprepared: it aborts (a late `Prepare` gets a no). Prepared without a decision: it is
//!   in doubt and asks the coordinator, who answers once it knows.
//! - **Switch crash** (once): registers, dedup state and packets on their way to it are lost. On
//!   restart its state is rebuilt from the nodes' logs (§6.1): every logged intent is applied
//!   once and its result multicast, as if the packet had run then.
//! - **Coordinator crash** (once, in the `coordinator_crashes` checks): its volatile state
//!   (votes gathered, the outcome it acts on) is lost and messages to it are lost while it is
//!   down. It restarts from its log (P4DB `node/recovery.rs`): a logged decision is sent again
//!   to every participant; a logged warm intent without a decision is sent to the switch again
//!   (the switch deduplicates it and multicasts its result again); with no record at all it
//!   knows nothing of the transaction and answers any question about it "aborted" (presumed
//!   abort: a commit and an intent are always logged before they leave). Votes for a
//!   transaction it no longer knows are ignored. Since the coordinator's own decision may now
//!   be lost on the way to a participant that never crashed, every prepared participant
//!   without an outcome may ask (its lease ran out); with a coordinator that never crashes
//!   only a restarted one asks, as before (so those checks' state counts do not move).
//!
//! ## Properties (checked on every reachable state)
//!
//! - *atomicity*: no node has committed while another has aborted (logs and volatile state);
//! - *switch at most once*: the switch's registers hold the sub-transaction's effect at most once;
//! - *switch only after yes votes*: the switch never executes a transaction some participant
//!   refused;
//! - *commit only after the switch* (warm): nobody commits a warm transaction the switch never ran;
//! - *decisions survive crashes*: a node's volatile outcome never contradicts its log;
//! - *the coordinator's decisions survive its crash*: what it acts on never contradicts its log;
//! - and, so the checks are not vacuous, commit and abort are both reachable (with coordinator
//!   crashes: also a commit after a coordinator crash, by every node).
//!
//! **Liveness** (`model_support`): from every reachable state, a path of fault-free steps
//! (deliveries, resends, questions and restarts; no crash) reaches a finished state: the
//! coordinator up and decided, every participant up, and every participant that voted yes
//! holding the outcome. So no crash leaves a participant in doubt for ever.
//!
//! **States** (every interleaving, BFS; `cargo test -- --nocapture` prints them): without
//! coordinator crashes, warm with 0 / 1 / 2 remote participants 20 / 1,102 / 72,382, cold
//! with 1 / 2 participants 211 / 17,815; with one coordinator crash (and, at two
//! participants, at most one other crash per run) warm 78 / 7,846 / 265,551 and cold 1,222 /
//! 43,899. The whole file checks in about 20 s in a debug `cargo test` run on one thread.
//!
//! **Broken on purpose**: a switch that does not deduplicate runs a resent sub-transaction
//! twice; a coordinator that sends its intent or decision before logging it (the `Flaw`
//! `SendsBeforeLogging`) presumes abort after a crash where the switch or a participant
//! committed; participants that never ask after the coordinator's crash stay in doubt. The
//! checker finds each.
//!
//! The model is ours and abstract: it checks the protocol's design, not the node's code (the
//! simulator's fault-free tests and the serializability checker cover that).

mod model_support;

use model_support::every_state_can_finish;
use stateright::{Checker, Model, Property};
use std::collections::BTreeSet;

/// An outcome, as logged or known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Outcome {
    Commit,
    Abort,
}

/// A message in flight. Participants are numbered from 1; node 0 is the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Msg {
    Prepare(u8),
    Vote {
        from: u8,
        yes: bool,
    },
    Decision {
        to: u8,
        outcome: Outcome,
    },
    /// The warm transaction's hot part, coordinator to switch.
    SwitchTxn,
    /// The switch's multicast copy of the result to node `to` (0 is the coordinator).
    SwitchResult {
        to: u8,
    },
    /// An in-doubt participant asks the coordinator for the outcome.
    Query(u8),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Participant {
    /// Durable: voted yes (and logged it).
    prepared: bool,
    /// Durable: the logged outcome.
    logged: Option<Outcome>,
    /// Volatile: the outcome this node acts on (lost in a crash).
    outcome: Option<Outcome>,
    /// Crashed and not restarted: messages to it are lost.
    down: bool,
    /// Crashes left.
    crashes_left: u8,
}

impl Participant {
    /// Up, prepared and still without an outcome: it may ask the coordinator. Only a restarted
    /// participant asks where the coordinator never crashes (its decision is never lost then).
    fn in_doubt(&self, coordinator_crashes: u8) -> bool {
        let asks = self.crashes_left == 0 || coordinator_crashes > 0;
        !self.down && asks && self.prepared && self.logged.is_none()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Coordinator {
    /// Volatile: yes votes received.
    yes: BTreeSet<u8>,
    /// Durable: the switch sub-transaction's intent is logged (warm).
    intent_logged: bool,
    /// Volatile: the sub-transaction was sent to the switch (warm): waiting for its result.
    intent_sent: bool,
    /// Durable: the logged outcome.
    logged: Option<Outcome>,
    /// Volatile: the outcome it acts on and answers with (after a restart without a record:
    /// the presumed abort).
    outcome: Option<Outcome>,
    /// Crashed and not restarted: messages to it are lost.
    down: bool,
    /// Crashes left.
    crashes_left: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Switch {
    /// How many times the sub-transaction's effect is in the registers.
    applied: u8,
    /// Whether it ever executed (survives crashes; for the properties only).
    ever_executed: bool,
    /// Dedup state: the transaction id was seen (volatile).
    seen: bool,
    /// Down after a crash, until its restart.
    down: bool,
    /// Crashes left.
    crashes_left: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct State {
    coordinator: Coordinator,
    participants: Vec<Participant>,
    switch: Switch,
    /// Messages in flight: a set, so a resend of a message already in flight changes nothing and
    /// the state space stays finite; delivery order is free.
    net: BTreeSet<Msg>,
    /// The coordinator has started the protocol.
    started: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Start,
    Deliver(Msg),
    /// A participant decides how to vote on a `Prepare` (yes or no), modelled as two deliveries.
    Vote {
        to: u8,
        yes: bool,
    },
    Timeout,
    /// An in-doubt participant asks the coordinator (again).
    Ask(u8),
    CrashParticipant(u8),
    RestartParticipant(u8),
    CrashSwitch,
    RestartSwitch,
    CrashCoordinator,
    RestartCoordinator,
}

impl Action {
    /// Whether the action is a fault (the liveness check drops these).
    fn is_fault(&self) -> bool {
        matches!(self, Action::CrashParticipant(_) | Action::CrashSwitch | Action::CrashCoordinator)
    }
}

/// A deliberate bug, to see the checks fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    /// None: the protocol as designed.
    None,
    /// The coordinator sends its warm intent or its decision without logging it first.
    SendsBeforeLogging,
    /// Participants never ask the coordinator (only a decision sent unprompted reaches them).
    NeverAsk,
}

/// The protocol at one size.
struct CommitModel {
    /// Remote participants (0 = a warm transaction local to the coordinator: no voting).
    participants: u8,
    /// Warm (switch decides) or cold (2PC).
    warm: bool,
    /// How many times the coordinator may crash.
    coordinator_crashes: u8,
    /// How many crashes of any kind one run may have (each node and the switch crash at most
    /// once anyway).
    max_crashes: u8,
    /// A deliberate bug, or none.
    flaw: Flaw,
}

impl CommitModel {
    fn ids(&self) -> impl Iterator<Item = u8> {
        1..=self.participants
    }

    /// Whether another crash may happen in `s`.
    fn may_crash(&self, s: &State) -> bool {
        let participants = s.participants.iter().map(|p| 1 - p.crashes_left);
        let used = participants.sum::<u8>() + (1 - s.switch.crashes_left) + self.coordinator_crashes
            - s.coordinator.crashes_left;
        used < self.max_crashes
    }

    /// The coordinator's next step once all votes are in: ask the switch (warm) or decide.
    fn all_yes(&self, s: &mut State) {
        if self.warm {
            s.coordinator.intent_logged = self.flaw != Flaw::SendsBeforeLogging;
            s.coordinator.intent_sent = true;
            s.net.insert(Msg::SwitchTxn);
        } else {
            self.decide(s, Outcome::Commit);
        }
    }

    fn decide(&self, s: &mut State, outcome: Outcome) {
        self.coordinator_decides(s, outcome);
        for p in self.ids() {
            s.net.insert(Msg::Decision { to: p, outcome });
        }
    }

    /// The coordinator logs `outcome` (unless flawed) and acts on it.
    fn coordinator_decides(&self, s: &mut State, outcome: Outcome) {
        if self.flaw != Flaw::SendsBeforeLogging {
            s.coordinator.logged = Some(outcome);
        }
        s.coordinator.outcome = Some(outcome);
    }

    /// The switch runs the sub-transaction (once) and multicasts its result.
    fn switch_execute(&self, s: &mut State) {
        if !s.switch.seen {
            s.switch.seen = true;
            s.switch.applied += 1;
            s.switch.ever_executed = true;
        }
        for to in 0..=self.participants {
            s.net.insert(Msg::SwitchResult { to });
        }
    }

    /// Participant `p` receives the outcome (lost if it is down).
    fn participant_learns(s: &mut State, p: u8, outcome: Outcome) {
        let node = &mut s.participants[usize::from(p - 1)];
        if node.down {
            return;
        }
        node.logged = Some(outcome);
        node.outcome = Some(outcome);
    }
}

impl Model for CommitModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let participant = Participant { prepared: false, logged: None, outcome: None, down: false, crashes_left: 1 };
        vec![State {
            coordinator: Coordinator {
                yes: BTreeSet::new(),
                intent_logged: false,
                intent_sent: false,
                logged: None,
                outcome: None,
                down: false,
                crashes_left: self.coordinator_crashes,
            },
            participants: vec![participant; usize::from(self.participants)],
            switch: Switch { applied: 0, ever_executed: false, seen: false, down: false, crashes_left: 1 },
            net: BTreeSet::new(),
            started: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if !s.started {
            actions.push(Action::Start);
            return;
        }
        for &msg in &s.net {
            match msg {
                Msg::Prepare(p) => {
                    actions.push(Action::Vote { to: p, yes: true });
                    actions.push(Action::Vote { to: p, yes: false });
                }
                _ => actions.push(Action::Deliver(msg)),
            }
        }
        let coordinator = &s.coordinator;
        if coordinator.outcome.is_none() && !coordinator.down {
            actions.push(Action::Timeout);
        }
        let may_crash = self.may_crash(s);
        if coordinator.crashes_left > 0 && !coordinator.down && may_crash {
            actions.push(Action::CrashCoordinator);
        }
        if coordinator.down {
            actions.push(Action::RestartCoordinator);
        }
        for (i, node) in s.participants.iter().enumerate() {
            let p = i as u8 + 1;
            if node.crashes_left > 0 && !node.down && may_crash {
                actions.push(Action::CrashParticipant(p));
            }
            if node.down {
                actions.push(Action::RestartParticipant(p));
            }
            if node.in_doubt(self.coordinator_crashes) && self.flaw != Flaw::NeverAsk {
                actions.push(Action::Ask(p));
            }
        }
        if s.switch.crashes_left > 0 && !s.switch.down && may_crash {
            actions.push(Action::CrashSwitch);
        }
        if s.switch.down {
            actions.push(Action::RestartSwitch);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Start => {
                s.started = true;
                if self.participants == 0 {
                    self.all_yes(&mut s);
                } else {
                    self.ids().for_each(|p| {
                        s.net.insert(Msg::Prepare(p));
                    });
                }
            }
            Action::Vote { to, yes } => {
                s.net.remove(&Msg::Prepare(to));
                let node = &mut s.participants[usize::from(to - 1)];
                if node.down {
                    return Some(s); // lost
                }
                // A node that already aborted (after a crash before voting) can only refuse; a
                // prepared one repeats its yes.
                let yes = match node.logged {
                    Some(Outcome::Abort) => false,
                    Some(Outcome::Commit) => true,
                    None if node.prepared => true,
                    None => yes,
                };
                if yes {
                    node.prepared = true;
                } else {
                    node.logged = Some(Outcome::Abort);
                    node.outcome = Some(Outcome::Abort);
                }
                s.net.insert(Msg::Vote { from: to, yes });
            }
            Action::Deliver(msg) => {
                s.net.remove(&msg);
                match msg {
                    Msg::Prepare(_) => unreachable!("prepares are delivered as votes"),
                    Msg::Vote { .. } | Msg::SwitchResult { to: 0 } | Msg::Query(_) if s.coordinator.down => {}
                    Msg::Vote { from, yes } => {
                        if s.coordinator.outcome.is_some() || s.coordinator.intent_sent {
                            return Some(s);
                        }
                        if yes {
                            s.coordinator.yes.insert(from);
                            if s.coordinator.yes.len() == usize::from(self.participants) {
                                self.all_yes(&mut s);
                            }
                        } else {
                            self.decide(&mut s, Outcome::Abort);
                        }
                    }
                    Msg::Decision { to, outcome } => Self::participant_learns(&mut s, to, outcome),
                    Msg::SwitchResult { to } if to > 0 => Self::participant_learns(&mut s, to, Outcome::Commit),
                    Msg::SwitchTxn => {
                        if s.switch.down {
                            return Some(s); // lost
                        }
                        self.switch_execute(&mut s);
                    }
                    Msg::SwitchResult { .. } => {
                        if s.coordinator.outcome.is_none() {
                            self.coordinator_decides(&mut s, Outcome::Commit);
                        }
                    }
                    Msg::Query(p) => {
                        if let Some(outcome) = s.coordinator.outcome {
                            s.net.insert(Msg::Decision { to: p, outcome });
                        }
                    }
                }
            }
            Action::Timeout => {
                if s.coordinator.intent_sent {
                    s.net.insert(Msg::SwitchTxn);
                } else {
                    for p in self.ids() {
                        if !s.coordinator.yes.contains(&p) {
                            s.net.insert(Msg::Prepare(p));
                        }
                    }
                }
            }
            Action::Ask(p) => {
                s.net.insert(Msg::Query(p));
            }
            Action::CrashParticipant(p) => {
                let node = &mut s.participants[usize::from(p - 1)];
                node.crashes_left -= 1;
                node.down = true;
                node.outcome = None;
            }
            Action::RestartParticipant(p) => {
                let node = &mut s.participants[usize::from(p - 1)];
                node.down = false;
                match (node.logged, node.prepared) {
                    (Some(outcome), _) => node.outcome = Some(outcome),
                    // In doubt: ask the coordinator (and again later, `Ask`).
                    (None, true) => {
                        s.net.insert(Msg::Query(p));
                    }
                    // Never voted yes: abort unilaterally.
                    (None, false) => {
                        node.logged = Some(Outcome::Abort);
                        node.outcome = Some(Outcome::Abort);
                    }
                }
            }
            Action::CrashSwitch => {
                s.switch.crashes_left -= 1;
                s.switch.down = true;
                s.switch.applied = 0;
                s.switch.seen = false;
                s.net.remove(&Msg::SwitchTxn);
            }
            Action::RestartSwitch => {
                s.switch.down = false;
                // Rebuilt from the nodes' logs: a logged intent is applied once and answered.
                if s.coordinator.intent_logged {
                    self.switch_execute(&mut s);
                }
            }
            Action::CrashCoordinator => {
                let c = &mut s.coordinator;
                c.crashes_left -= 1;
                c.down = true;
                c.yes.clear();
                c.intent_sent = false;
                c.outcome = None;
            }
            Action::RestartCoordinator => {
                s.coordinator.down = false;
                match (s.coordinator.logged, s.coordinator.intent_logged) {
                    (Some(outcome), _) => {
                        // Decided: tell everyone again.
                        s.coordinator.outcome = Some(outcome);
                        for p in self.ids() {
                            s.net.insert(Msg::Decision { to: p, outcome });
                        }
                    }
                    (None, true) => {
                        // The intent again: the switch deduplicates it and answers.
                        s.coordinator.intent_sent = true;
                        s.net.insert(Msg::SwitchTxn);
                    }
                    // No record: presumed abort (answered to whoever asks; nothing is sent).
                    (None, false) => s.coordinator.outcome = Some(Outcome::Abort),
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        fn outcomes(s: &State) -> impl Iterator<Item = Outcome> + '_ {
            let nodes = s.participants.iter().flat_map(|p| [p.logged, p.outcome]);
            nodes.chain([s.coordinator.logged, s.coordinator.outcome]).flatten()
        }
        vec![
            Property::always("atomicity", |_, s: &State| {
                let all: BTreeSet<Outcome> = outcomes(s).collect();
                all.len() <= 1
            }),
            Property::always("switch at most once", |_, s: &State| s.switch.applied <= 1),
            Property::always("switch only after yes votes", |_, s: &State| {
                !s.switch.ever_executed || s.participants.iter().all(|p| p.prepared)
            }),
            Property::always("commit only after the switch", |m: &CommitModel, s: &State| {
                !m.warm || s.switch.ever_executed || outcomes(s).all(|o| o != Outcome::Commit)
            }),
            Property::always("decisions survive crashes", |_, s: &State| {
                s.participants.iter().all(|p| p.outcome.is_none() || p.outcome == p.logged)
            }),
            Property::always("the coordinator's decisions survive its crash", |_, s: &State| {
                let c = &s.coordinator;
                c.logged.is_none() || c.outcome.is_none() || c.outcome == c.logged
            }),
            Property::sometimes("commit is reachable", |_, s: &State| {
                s.coordinator.logged == Some(Outcome::Commit)
                    && s.participants.iter().all(|p| p.outcome == Some(Outcome::Commit))
            }),
            Property::sometimes("abort is reachable", |m: &CommitModel, s: &State| {
                m.participants == 0 || s.coordinator.logged == Some(Outcome::Abort)
            }),
            Property::sometimes("commit after a coordinator crash", |m: &CommitModel, s: &State| {
                (m.coordinator_crashes == 0 || s.coordinator.crashes_left == 0)
                    && s.coordinator.outcome == Some(Outcome::Commit)
                    && s.participants.iter().all(|p| p.outcome == Some(Outcome::Commit))
            }),
        ]
    }
}

impl CommitModel {
    /// The protocol as designed, with `coordinator_crashes`; with one, at most two crashes in
    /// all per run when there are two participants (the coordinator's and one other), to keep
    /// the check quick.
    fn new(participants: u8, warm: bool, coordinator_crashes: u8) -> Self {
        let max_crashes = if coordinator_crashes > 0 && participants > 1 { 2 } else { u8::MAX };
        CommitModel { participants, warm, coordinator_crashes, max_crashes, flaw: Flaw::None }
    }

    /// Everyone is up, the coordinator has decided and every participant that voted yes holds
    /// the outcome (one that never voted yes holds nothing to release).
    fn finished(s: &State) -> bool {
        let c = &s.coordinator;
        let participants = s.participants.iter().all(|p| !p.down && (!p.prepared || p.outcome.is_some()));
        s.started && !c.down && c.outcome.is_some() && participants
    }

    /// Checks that every reachable state can still finish without another crash
    /// (`model_support`), and returns the state count.
    fn check_finishes(&self) -> Result<usize, Vec<Action>> {
        every_state_can_finish(self, Action::is_fault, Self::finished)
    }
}

/// Checks every reachable state of the protocol and reports how many there were.
fn check(model: CommitModel) -> usize {
    let (participants, warm, crashes) = (model.participants, model.warm, model.coordinator_crashes);
    let checker = model.checker().spawn_bfs().join();
    checker.assert_properties();
    let states = checker.unique_state_count();
    let kind = if warm { "warm" } else { "cold" };
    println!("{kind} transaction, {participants} remote participants, {crashes} coordinator crashes: {states} states");
    states
}

#[test]
fn warm_transactions_are_atomic_and_run_on_the_switch_at_most_once() {
    for participants in [0, 1, 2] {
        assert!(check(CommitModel::new(participants, true, 0)) > 10);
    }
}

#[test]
fn cold_two_phase_commit_is_atomic_under_participant_crashes() {
    for participants in [1, 2] {
        assert!(check(CommitModel::new(participants, false, 0)) > 10);
    }
}

#[test]
fn warm_transactions_stay_atomic_when_the_coordinator_crashes_too() {
    for participants in [0, 1, 2] {
        assert!(check(CommitModel::new(participants, true, 1)) > 10);
    }
}

#[test]
fn cold_two_phase_commit_stays_atomic_when_the_coordinator_crashes_too() {
    for participants in [1, 2] {
        assert!(check(CommitModel::new(participants, false, 1)) > 10);
    }
}

#[test]
fn every_reachable_state_can_still_decide_after_any_crashes() {
    for (participants, warm) in [(0, true), (1, true), (2, true), (1, false), (2, false)] {
        for crashes in [0, 1] {
            let model = CommitModel::new(participants, warm, crashes);
            match model.check_finishes() {
                Ok(states) => {
                    println!("warm {warm}, {participants} participants, {crashes} coordinator crashes: all {states} states can finish");
                    assert!(states > 10);
                }
                Err(path) => panic!("warm {warm}, {participants} participants: stuck after {path:?}"),
            }
        }
    }
}

/// The properties can fail: a switch that forgets to deduplicate executes a resent
/// sub-transaction twice, and the checker finds it.
#[test]
fn the_checker_finds_a_switch_that_does_not_deduplicate() {
    struct NoDedup(CommitModel);
    impl Model for NoDedup {
        type State = State;
        type Action = Action;
        fn init_states(&self) -> Vec<State> {
            self.0.init_states()
        }
        fn actions(&self, s: &State, a: &mut Vec<Action>) {
            self.0.actions(s, a)
        }
        fn next_state(&self, last: &State, action: Action) -> Option<State> {
            let mut s = self.0.next_state(last, action)?;
            // Forget the dedup state after every step.
            s.switch.seen = false;
            Some(s)
        }
        fn properties(&self) -> Vec<Property<Self>> {
            vec![Property::always("switch at most once", |_, s: &State| s.switch.applied <= 1)]
        }
    }
    let checker = NoDedup(CommitModel::new(1, true, 0)).checker().spawn_bfs().join();
    assert!(checker.discovery("switch at most once").is_some());
}

/// Atomicity can fail: a coordinator that sends its warm intent (or its cold decision) before
/// logging it presumes abort after a crash, where the switch or a participant committed.
#[test]
fn the_checker_finds_a_coordinator_that_sends_before_logging() {
    for warm in [true, false] {
        let model = CommitModel { flaw: Flaw::SendsBeforeLogging, ..CommitModel::new(1, warm, 1) };
        let checker = model.checker().spawn_bfs().join();
        let found = checker.discovery("atomicity").expect("a commit next to a presumed abort");
        println!("warm {warm}: {found}");
        let flawless = CommitModel::new(1, warm, 1).checker().spawn_bfs().join();
        assert!(flawless.discovery("atomicity").is_none(), "and only with the flaw");
    }
}

/// Liveness can fail: if prepared participants never ask, one whose decision died with the
/// coordinator (or that the coordinator never knew of after a restart) stays in doubt.
#[test]
fn the_liveness_check_finds_participants_that_never_ask() {
    let model = CommitModel { flaw: Flaw::NeverAsk, ..CommitModel::new(1, false, 1) };
    let path = model.check_finishes().expect_err("a participant left in doubt");
    assert!(path.contains(&Action::CrashCoordinator), "the wedge needs the coordinator's crash: {path:?}");
    println!("in doubt for ever after {path:?}");
}
