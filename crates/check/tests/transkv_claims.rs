//! A model-checked abstraction of TransKV's claims, leases and aborts (seed 003 §IV;
//! `systems/transkv`: `program.rs` "The lease of a claim" and stage 7, `store.rs` deciding
//! each timestamp once, `fuzz.rs` rebuilding a switch from the nodes' logs). The model is ours
//! and imports nothing of TransKV: it checks the design at the smallest size where a claim can
//! be left behind.
//!
//! ## What is modelled
//!
//! - **One key** cached by one switch, stored on one node, and **two transactions** with
//!   timestamps 1 < 2, each a single write of the key from its own client (the TSO path: every
//!   key cached, no controller). A request passes the switch, which runs basic TSO on the key:
//!   it *claims* the key (T-TS := t) if no one holds it and t is not older than W-TS, accepts
//!   it again if t already holds it, and otherwise refuses it (`SwitchAborted` back to the
//!   client). An accepted request goes on to the node.
//! - **The node decides each timestamp once** and logs it: a forwarded write commits (and is
//!   installed) unless the timestamp was decided before (the recorded answer again) or the
//!   node has fenced a crashed switch's decisions (then it aborts); a client's `Resolve` or a
//!   switch's `Lease` query about a timestamp it never saw decides it aborted for good. Every
//!   answer passes the switch on its way back: `Committed` installs (W-TS := max, T-TS := 0 if
//!   it is t), `Aborted` releases (T-TS := 0 if it is t). A claim is released only so.
//! - **Clients** wait for their answer; a client that waits too long sends `Resolve` (again,
//!   at any time). A client does not retry here (a retry is a new timestamp). A switch's
//!   refusal of a write is not final: the client has it confirmed by the node (`Resolve`),
//!   since a copy of the request may have committed there (below).
//! - **The lease**: a claim met by a later transaction's refused op once its lease ran out
//!   makes the switch send a `Lease` query for the claiming timestamp (`Probe`); the node's
//!   answer releases or installs it on its way back. Time is not modelled: a probe may happen
//!   whenever a claim is held (safety does not depend on when).
//! - **The network** reorders freely, loses any message, and duplicates forwarded writes and
//!   the node's answers (a copy of a `Resolve`, a `Lease` query or a reply is a state already
//!   explored: clients resend, switches probe again, a client keeps its first answer; a copy
//!   of a client's request is the gap below); a set of messages in flight makes a copy of one
//!   in flight the same one.
//! - **A switch crash** (once): its registers are rebuilt from the node's log (W-TS at a floor
//!   above every timestamp it accepted; T-TS restored only for voted, undecided shares, of
//!   which this path has none) and the node fences the crashed switch's decisions still on
//!   the wire (an undecided forwarded write below the floor aborts).
//!
//! ## Properties (every reachable state)
//!
//! - *a claim is released only by the node's decision*: T-TS is cleared only for a timestamp
//!   the node has decided (a crash loses the register; that is not a release);
//! - *a timestamp is never both committed and aborted*: by the node, or as its client was
//!   told (a switch's refusal included);
//! - *installs only of committed timestamps*: W-TS and the node's value are only ever written
//!   by a committed timestamp (or the rebuild's floor);
//! - reachable, so the checks are not vacuous: both commit (in order), one commits and the
//!   other is refused, a claim released by a lease query's answer, and an abort of a write
//!   the crashed switch had accepted (fenced by the node).
//!
//! **Liveness** (`model_support`): from every reachable state, fault-free steps (deliveries,
//! resends of `Resolve`, lease probes; no loss, duplication or crash) reach a state where both
//! clients have their answer and the key is not claimed: no key stays wedged. Without the
//! lease (`Flaw::NoLease`) the checker finds the wedge the lease exists for: a request delayed
//! past its own resolution claims the key and its node's `Aborted` is lost.
//!
//! **Duplicated requests** were the gap issue 31 names for TransKV ("a copy would be decided
//! twice"): two copies of one request can be answered differently, one committed by the node,
//! the other refused by the switch (W-TS has moved past it: a later commit, or a rebuild's
//! floor), and a client that took whichever answer came first was told its committed write
//! aborted. The switch cannot tell a copy from a late request (its registers hold no past
//! timestamps), and the node is the one place each timestamp is decided, so a client that
//! hears a refusal of a write asks the node (`Resolve`): a timestamp the node never saw is
//! decided aborted for good (a copy arriving later is refused there), one it committed is
//! answered `Committed`. The exhaustive checks include request copies; the flaw of a client
//! that trusts the refusal (`Flaw::TrustsRefusal`) is caught.
//!
//! **States**: 1,305,504 with the older request's copies (202,416 without copies; a reply to
//! a client that has its answer is forgotten, as it changes nothing); the default checks take
//! about 35 s of CPU in a debug build. Copies of both requests (9,430,800 states) are checked
//! by an `--ignored` test: the older one's copies are the ones a newer commit refuses, and a
//! rebuild's floor refuses a copy of either.
//!
//! **Broken on purpose**: a switch that releases a claim when its lease runs out (by time,
//! without asking the node), one that installs a write when it accepts it rather than when
//! the commit passes, and a client that takes a switch's refusal of a copy as final, each
//! break a property.

mod model_support;

use model_support::every_state_can_finish;
use stateright::{Checker, Model, Property};
use std::collections::BTreeSet;

/// The timestamps (1 and 2); index `ts - 1` in per-timestamp arrays.
const TIMESTAMPS: [u8; 2] = [1, 2];
/// W-TS after a switch rebuild: above every timestamp the crashed switch accepted.
const FLOOR: u8 = 3;

/// An answer a client can get.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Outcome {
    Committed,
    /// The node decided it aborted.
    Aborted,
    /// The switch refused it.
    SwitchAborted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Msg {
    /// Client → switch.
    Request(u8),
    /// Switch → node: a write the switch accepted (its op decided).
    Forward(u8),
    /// Switch → node: the lease query for a claim's timestamp.
    Lease(u8),
    /// Client → node (the switch forwards it untouched).
    Resolve(u8),
    /// Node → switch: its decision, on its way to the client.
    Decision { ts: u8, commit: bool },
    /// Switch → client.
    Reply { ts: u8, outcome: Outcome },
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct State {
    /// Switch registers: W-TS and T-TS (0: no claim).
    w_ts: u8,
    t_ts: u8,
    /// The switch crash has not happened yet.
    crash_left: bool,
    /// The node's decisions, per timestamp (logged).
    decided: [Option<bool>; 2],
    /// The node's value: the timestamp of the last write installed (0: the initial load).
    value: u8,
    /// The node refuses undecided forwarded writes below the floor (after a switch rebuild).
    fenced: bool,
    /// What each client was told.
    told: [Option<Outcome>; 2],
    net: BTreeSet<Msg>,
    /// Ghost: a claim was cleared for a timestamp the node had not decided.
    released_undecided: bool,
    /// Ghost: a lease query asked the node about the timestamp.
    asked_by_lease: [bool; 2],
    /// Ghost: a claim was released on a timestamp a lease query asked about.
    lease_released: bool,
    /// Ghost: W-TS was set to a timestamp the node had not committed.
    installed_uncommitted: bool,
    /// Ghost: the switch refused the timestamp's request (a copy of it, perhaps).
    refused: [bool; 2],
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Deliver(Msg),
    /// A message is delivered and a copy stays in flight (duplication).
    DeliverCopy(Msg),
    Lose(Msg),
    /// A client that waited too long sends `Resolve`.
    Timeout(u8),
    /// A later transaction's op meets the claim after its lease ran out: the switch asks.
    Probe,
    CrashSwitch,
}

impl Action {
    fn is_fault(&self) -> bool {
        matches!(self, Action::DeliverCopy(_) | Action::Lose(_) | Action::CrashSwitch)
    }
}

/// A deliberate bug, to see the checks fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    None,
    /// No lease: nobody ever asks about a claim.
    NoLease,
    /// The switch releases an expired claim itself (by time) instead of asking the node.
    ReleaseByTime,
    /// The switch installs a write (W-TS) when it accepts it, not when its commit passes.
    InstallOnAccept,
    /// A client takes a switch's refusal of its write as final (TransKV before the fix of the
    /// duplication gap): a copy of the request may have committed at the node.
    TrustsRefusal,
}

struct ClaimModel {
    /// The timestamps whose client's request the network may duplicate.
    duplicate_requests: &'static [u8],
    flaw: Flaw,
    /// Check only this safety property (so that the search stops at its counterexample).
    only: Option<&'static str>,
}

fn idx(ts: u8) -> usize {
    usize::from(ts - 1)
}

impl ClaimModel {
    /// The switch handles a request for `ts` (basic TSO on the key).
    fn switch_request(&self, s: &mut State, ts: u8) {
        if (s.t_ts == 0 && ts >= s.w_ts) || s.t_ts == ts {
            s.t_ts = ts;
            if self.flaw == Flaw::InstallOnAccept {
                Self::install(s, ts);
            }
            s.net.insert(Msg::Forward(ts));
        } else {
            s.net.insert(Msg::Reply { ts, outcome: Outcome::SwitchAborted });
        }
    }

    /// The node decides `ts` (once) and answers.
    fn node_decides(s: &mut State, ts: u8, commit: bool) {
        let commit = *s.decided[idx(ts)].get_or_insert(commit);
        if commit {
            s.value = s.value.max(ts);
        }
        s.net.insert(Msg::Decision { ts, commit });
    }

    /// The switch installs `ts`'s write: W-TS := max(W-TS, ts).
    fn install(s: &mut State, ts: u8) {
        if ts > s.w_ts {
            s.w_ts = ts;
            s.installed_uncommitted |= s.decided[idx(ts)] != Some(true);
        }
    }

    /// A claim on `ts` is cleared (a release).
    fn release(s: &mut State, ts: u8) {
        if s.t_ts == ts {
            s.t_ts = 0;
            s.released_undecided |= s.decided[idx(ts)].is_none();
        }
    }

    fn deliver(&self, s: &mut State, msg: Msg) {
        match msg {
            Msg::Request(ts) => self.switch_request(s, ts),
            Msg::Forward(ts) => {
                let commit = s.decided[idx(ts)].unwrap_or(!s.fenced);
                Self::node_decides(s, ts, commit);
            }
            Msg::Lease(ts) | Msg::Resolve(ts) => {
                let commit = s.decided[idx(ts)].unwrap_or(false);
                s.asked_by_lease[idx(ts)] |= matches!(msg, Msg::Lease(_));
                Self::node_decides(s, ts, commit);
            }
            Msg::Decision { ts, commit } => {
                if commit {
                    Self::install(s, ts);
                }
                let held = s.t_ts == ts;
                Self::release(s, ts);
                s.lease_released |= held && s.asked_by_lease[idx(ts)];
                let outcome = if commit { Outcome::Committed } else { Outcome::Aborted };
                s.net.insert(Msg::Reply { ts, outcome });
            }
            Msg::Reply { ts, outcome: Outcome::SwitchAborted } if self.flaw != Flaw::TrustsRefusal => {
                // A copy of the write may have committed at the node (W-TS moved past it since):
                // the node, which decides each timestamp once, confirms the refusal.
                if s.told[idx(ts)].is_none() {
                    s.refused[idx(ts)] = true;
                    s.net.insert(Msg::Resolve(ts));
                }
            }
            Msg::Reply { ts, outcome } => {
                s.told[idx(ts)].get_or_insert(outcome);
            }
        }
    }

    /// Both clients have their answer and the key is not claimed.
    fn finished(s: &State) -> bool {
        s.told.iter().all(Option::is_some) && s.t_ts == 0
    }
}

impl Model for ClaimModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            w_ts: 0,
            t_ts: 0,
            crash_left: true,
            decided: [None; 2],
            value: 0,
            fenced: false,
            told: [None; 2],
            net: TIMESTAMPS.into_iter().map(Msg::Request).collect(),
            released_undecided: false,
            asked_by_lease: [false; 2],
            lease_released: false,
            installed_uncommitted: false,
            refused: [false; 2],
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        for &msg in &s.net {
            actions.push(Action::Deliver(msg));
            actions.push(Action::Lose(msg));
            // Copies of the messages whose handlers must be idempotent: the node's (decides
            // once) and the switch's (installs and releases by max and by equality). A copy
            // of a `Resolve`, `Lease` or reply is already explored: a client resends its
            // `Resolve`, a switch probes again, a client keeps its first answer.
            let copied = match msg {
                Msg::Request(ts) => self.duplicate_requests.contains(&ts),
                Msg::Forward(_) | Msg::Decision { .. } => true,
                Msg::Lease(_) | Msg::Resolve(_) | Msg::Reply { .. } => false,
            };
            if copied {
                actions.push(Action::DeliverCopy(msg));
            }
        }
        for ts in TIMESTAMPS {
            if s.told[idx(ts)].is_none() && !s.net.contains(&Msg::Resolve(ts)) {
                actions.push(Action::Timeout(ts));
            }
        }
        if s.t_ts != 0 && self.flaw != Flaw::NoLease {
            actions.push(Action::Probe);
        }
        if s.crash_left {
            actions.push(Action::CrashSwitch);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Deliver(msg) => {
                s.net.remove(&msg);
                self.deliver(&mut s, msg);
            }
            Action::DeliverCopy(msg) => self.deliver(&mut s, msg),
            Action::Lose(msg) => {
                s.net.remove(&msg);
            }
            Action::Timeout(ts) => {
                s.net.insert(Msg::Resolve(ts));
            }
            Action::Probe if self.flaw == Flaw::ReleaseByTime => {
                let ts = s.t_ts;
                Self::release(&mut s, ts);
            }
            Action::Probe => {
                s.net.insert(Msg::Lease(s.t_ts));
            }
            Action::CrashSwitch => {
                // Rebuilt from the node's log: W-TS at the floor, no claim (no voted share);
                // the node fences the crashed switch's decisions still on the wire.
                s.crash_left = false;
                s.w_ts = FLOOR;
                s.t_ts = 0;
                s.fenced = true;
            }
        }
        // A reply to a client that has its answer changes nothing: forget it.
        let told = s.told;
        s.net.retain(|m| !matches!(*m, Msg::Reply { ts, .. } if told[idx(ts)].is_some()));
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let safety = vec![
            Property::always("a claim is released only by the node's decision", |_, s: &State| !s.released_undecided),
            Property::always("a timestamp is never both committed and aborted", |_, s: &State| {
                TIMESTAMPS.into_iter().all(|ts| {
                    let told = s.told[idx(ts)];
                    match s.decided[idx(ts)] {
                        Some(true) => told.is_none_or(|o| o == Outcome::Committed),
                        _ => told != Some(Outcome::Committed),
                    }
                })
            }),
            Property::always("installs only of committed timestamps", |_, s: &State| {
                let node = s.value == 0 || s.decided[idx(s.value)] == Some(true);
                node && !s.installed_uncommitted
            }),
        ];
        if let Some(only) = self.only {
            return safety.into_iter().filter(|p| p.name == only).collect();
        }
        let mut all = safety;
        all.extend([
            Property::sometimes("both commit", |_, s: &State| s.told == [Some(Outcome::Committed); 2]),
            Property::sometimes("one commits, the other is refused", |_, s: &State| {
                s.refused[0] && s.told == [Some(Outcome::Aborted), Some(Outcome::Committed)]
            }),
            Property::sometimes("a refused copy's request commits", |_, s: &State| {
                s.refused.iter().zip(&s.told).any(|(&refused, &told)| refused && told == Some(Outcome::Committed))
            }),
            Property::sometimes("a lease query releases a claim", |_, s: &State| s.lease_released),
            Property::sometimes("an abort after a switch crash", |_, s: &State| {
                s.fenced && s.told.contains(&Some(Outcome::Aborted))
            }),
        ]);
        all
    }
}

fn checked(model: ClaimModel) -> usize {
    let checker = model.checker().spawn_bfs().join();
    checker.assert_properties();
    checker.unique_state_count()
}

#[test]
fn claims_are_released_only_by_decisions_and_each_timestamp_is_decided_once() {
    let states = checked(ClaimModel { duplicate_requests: &[1], flaw: Flaw::None, only: None });
    println!("{states} states");
    assert!(states > 100);
}

/// Both requests copied: 9,430,800 states, safety and liveness, about 16 minutes in a debug
/// build on a loaded machine, so not in every `cargo test`:
/// `cargo test --release -p pisadb-check --test transkv_claims -- --ignored`.
#[test]
#[ignore = "9,430,800 states: cargo test --release -p pisadb-check --test transkv_claims -- --ignored"]
fn with_both_requests_copied_each_timestamp_is_decided_once_and_no_key_stays_wedged() {
    let model = ClaimModel { duplicate_requests: &[1, 2], flaw: Flaw::None, only: None };
    let states = checked(ClaimModel { duplicate_requests: &[1, 2], flaw: Flaw::None, only: None });
    println!("{states} states");
    match every_state_can_finish(&model, Action::is_fault, ClaimModel::finished) {
        Ok(states) => println!("all {states} states can finish"),
        Err(path) => panic!("wedged after {path:?}"),
    }
}

#[test]
fn no_key_stays_wedged_once_faults_stop() {
    let model = ClaimModel { duplicate_requests: &[1], flaw: Flaw::None, only: None };
    match every_state_can_finish(&model, Action::is_fault, ClaimModel::finished) {
        Ok(states) => println!("all {states} states can finish"),
        Err(path) => panic!("wedged after {path:?}"),
    }
}

/// Liveness can fail: without the lease, a request delayed past its own resolution claims the
/// key, its `Aborted` is lost, and nobody ever asks again.
#[test]
fn the_liveness_check_finds_the_wedge_the_lease_exists_for() {
    let model = ClaimModel { duplicate_requests: &[], flaw: Flaw::NoLease, only: None };
    let path = every_state_can_finish(&model, Action::is_fault, ClaimModel::finished).expect_err("a wedge");
    assert!(path.iter().any(|a| matches!(a, Action::Lose(_))), "the wedge needs a loss: {path:?}");
    println!("wedged after {path:?}");
}

/// The safety properties can fail: a switch that releases a claim by time, and one that
/// installs a write it has only accepted.
#[test]
fn the_checker_finds_a_release_by_time_and_an_install_before_the_commit() {
    for (flaw, property) in [
        (Flaw::ReleaseByTime, "a claim is released only by the node's decision"),
        (Flaw::InstallOnAccept, "installs only of committed timestamps"),
    ] {
        let checker = ClaimModel { duplicate_requests: &[], flaw, only: Some(property) }.checker().spawn_bfs().join();
        let path = checker.discovery(property).unwrap_or_else(|| panic!("{flaw:?}: no counterexample"));
        println!("{flaw:?} breaks {property}:\n{path}");
    }
}

/// Once a finding (issue 31's TransKV duplication gap), now held by the checks above with
/// request copies: two copies of one request can be answered differently, one committed by
/// the node and the other refused by the switch (W-TS has moved past it: a later commit, or a
/// rebuild's floor). A client that takes the refusal as final (`Flaw::TrustsRefusal`, TransKV
/// before the fix) is told its committed write aborted; the checker finds it.
#[test]
fn the_checker_finds_a_client_that_trusts_a_refused_copy_of_a_committed_request() {
    let property = "a timestamp is never both committed and aborted";
    let model = ClaimModel { duplicate_requests: &[1], flaw: Flaw::TrustsRefusal, only: Some(property) };
    let path = model.checker().spawn_bfs().join().discovery(property).expect("a counterexample");
    let actions = path.into_actions();
    assert!(actions.iter().any(|a| matches!(a, Action::DeliverCopy(Msg::Request(_)))), "a copy: {actions:?}");
    println!("{actions:?}");
}
