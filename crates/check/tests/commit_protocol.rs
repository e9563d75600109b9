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
//!
//! The coordinator does not crash here (its recovery is the same log replay as a participant's).
//!
//! ## Properties (checked on every reachable state)
//!
//! - *atomicity*: no node has committed while another has aborted (logs and volatile state);
//! - *switch at most once*: the switch's registers hold the sub-transaction's effect at most once;
//! - *switch only after yes votes*: the switch never executes a transaction some participant
//!   refused;
//! - *commit only after the switch* (warm): nobody commits a warm transaction the switch never ran;
//! - *decisions survive crashes*: a node's volatile outcome never contradicts its log;
//! - and, so the checks are not vacuous, commit and abort are both reachable.
//!
//! The model is ours and abstract: it checks the protocol's design, not the node's code (the
//! simulator's fault-free tests and the serializability checker cover that).

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

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    /// Restarted after a crash, prepared and still without an outcome: it must ask.
    fn in_doubt(&self) -> bool {
        !self.down && self.crashes_left == 0 && self.prepared && self.logged.is_none()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Coordinator {
    /// Yes votes received.
    yes: BTreeSet<u8>,
    /// Durable: the switch sub-transaction's intent is logged (warm).
    intent_logged: bool,
    /// Durable: the logged outcome.
    logged: Option<Outcome>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
}

/// The protocol at one size.
struct CommitModel {
    /// Remote participants (0 = a warm transaction local to the coordinator: no voting).
    participants: u8,
    /// Warm (switch decides) or cold (2PC).
    warm: bool,
}

impl CommitModel {
    fn ids(&self) -> impl Iterator<Item = u8> {
        1..=self.participants
    }

    /// The coordinator's next step once all votes are in: ask the switch (warm) or decide.
    fn all_yes(&self, s: &mut State) {
        if self.warm {
            s.coordinator.intent_logged = true;
            s.net.insert(Msg::SwitchTxn);
        } else {
            self.decide(s, Outcome::Commit);
        }
    }

    fn decide(&self, s: &mut State, outcome: Outcome) {
        s.coordinator.logged = Some(outcome);
        for p in self.ids() {
            s.net.insert(Msg::Decision { to: p, outcome });
        }
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
            coordinator: Coordinator { yes: BTreeSet::new(), intent_logged: false, logged: None },
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
        if s.coordinator.logged.is_none() {
            actions.push(Action::Timeout);
        }
        for (i, node) in s.participants.iter().enumerate() {
            let p = i as u8 + 1;
            if node.crashes_left > 0 && !node.down {
                actions.push(Action::CrashParticipant(p));
            }
            if node.down {
                actions.push(Action::RestartParticipant(p));
            }
            if node.in_doubt() {
                actions.push(Action::Ask(p));
            }
        }
        if s.switch.crashes_left > 0 && !s.switch.down {
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
                    Msg::Vote { from, yes } => {
                        if s.coordinator.logged.is_some() || s.coordinator.intent_logged {
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
                        if s.coordinator.logged.is_none() {
                            s.coordinator.logged = Some(Outcome::Commit);
                        }
                    }
                    Msg::Query(p) => {
                        if let Some(outcome) = s.coordinator.logged {
                            s.net.insert(Msg::Decision { to: p, outcome });
                        }
                    }
                }
            }
            Action::Timeout => {
                if s.coordinator.intent_logged {
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
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        fn outcomes(s: &State) -> impl Iterator<Item = Outcome> + '_ {
            let nodes = s.participants.iter().flat_map(|p| [p.logged, p.outcome]);
            nodes.chain([s.coordinator.logged]).flatten()
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
            Property::sometimes("commit is reachable", |_, s: &State| {
                s.coordinator.logged == Some(Outcome::Commit)
                    && s.participants.iter().all(|p| p.outcome == Some(Outcome::Commit))
            }),
            Property::sometimes("abort is reachable", |m: &CommitModel, s: &State| {
                m.participants == 0 || s.coordinator.logged == Some(Outcome::Abort)
            }),
        ]
    }
}

/// Checks every reachable state of the protocol at `participants` and reports how many there were.
fn check(participants: u8, warm: bool) -> usize {
    let checker = CommitModel { participants, warm }.checker().spawn_bfs().join();
    checker.assert_properties();
    let states = checker.unique_state_count();
    println!("{} transaction, {participants} remote participants: {states} states", if warm { "warm" } else { "cold" });
    states
}

#[test]
fn warm_transactions_are_atomic_and_run_on_the_switch_at_most_once() {
    for participants in [0, 1, 2] {
        assert!(check(participants, true) > 10);
    }
}

#[test]
fn cold_two_phase_commit_is_atomic_under_participant_crashes() {
    for participants in [1, 2] {
        assert!(check(participants, false) > 10);
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
    let checker = NoDedup(CommitModel { participants: 1, warm: true }).checker().spawn_bfs().join();
    assert!(checker.discovery("switch at most once").is_some());
}
