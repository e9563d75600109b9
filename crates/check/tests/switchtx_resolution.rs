//! A model-checked abstraction of SwitchTx's resolution of attempts under server crashes,
//! leases and backup promotion (seed 001 §3.5; FaRM's rule as `systems/switchtx` implements
//! it: `server.rs`, `Query::hear` and "Backup promotion", and `config.rs`, `ShardMap`). The
//! model is ours and imports nothing of the server: it checks the design at the smallest size
//! where promotion can bite.
//!
//! ## What is modelled
//!
//! - **One attempt** of a client that writes one key in each of two shards, A and B. Each
//!   shard has a primary and a backup: servers 0 (A's primary), 1 (A's backup), 2 (B's
//!   primary), 3 (B's backup); the client is a fifth, which does not crash. Its prepares leave
//!   under map epoch 0 with those roles.
//! - **The normal path** (switch-tree coordination): a primary locks and validates (yes, or
//!   no: `fail`), a backup holds its redo record; once both primaries said yes the switch
//!   scatters `validate_ok` to the backups, which apply their redo records; once both applied,
//!   `replicate_ok` to the primaries, which install; the client hears the gathered `commit_ok`.
//!   The first `fail` is scattered to every participant and the client, which moves on. A
//!   participant does this work only while it holds a lease, its map names it and the attempt
//!   is not frozen, and only in the roles the prepare names (else it refuses: `fail`).
//! - **Leases and the configuration manager**: one server, the *victim* (a parameter: A's
//!   primary or A's backup; B's are symmetric), either loses its lease (`Fault::Cut`: still
//!   running, it keeps answering queries and decisions, which need no lease) or crashes
//!   (`Fault::Crash`: silent; it may restart from its log, without a lease: locks, installs,
//!   applied redo records, rollbacks and freezes are logged; a redo record not yet applied, a
//!   request that overtook its prepare and a lockless primary's abort are not). The manager
//!   removes it once it holds no lease: map epoch 1, in which A's backup is A's primary (if
//!   the victim led A) or A has no backup. Every server and the client adopt the new map on
//!   their own (a lease grant), in any order (B's two servers together: the change does not
//!   touch them). A renewal before the removal is left out.
//! - **Resolution** (`Query::hear`): the client may time out at any point and resolve: it
//!   asks every participant under its epoch; a participant at the same epoch freezes the
//!   attempt (no more normal-path work) and answers what it did (installed, applied the redo,
//!   carried out an abort, holds its part). A query from a newer map waits until its receiver
//!   adopts it (the server's "behind" answer makes it ask the manager, and the resolver sends
//!   again); one from an older map is refused and dropped. While every writer is a member the
//!   decision needs a primary that installed or every backup's answer (commit iff installed or
//!   every backup applied); once a writer is removed its answers no longer count and FaRM's
//!   rule decides from the others (commit iff installed, or some backup applied and every live
//!   writer holds its part and none aborted). The decision goes to everyone; a participant at
//!   the resolver's epoch carries it out and acknowledges; a resolver whose map changes starts
//!   over under the new one, decided or not (`Query::follow`).
//! - **Promotion** (`Server::take_over`): a backup whose map makes it the primary of its shard
//!   keeps an applied redo record locked until the outcome is known and resolves the attempt
//!   itself with the same query, as a second resolver; a redo record it had not applied is
//!   aborted (its attempt cannot have committed).
//! - **The network** reorders freely; a message to a crashed server is lost; a resolver
//!   resends to those that have not answered where its message or their answer is gone
//!   (`resend_helps`); a set of messages in flight makes a copy of one in flight the same one.
//!
//! **Abstractions that keep it small** (each named where it is made): an answer to a query is
//! counted as it is given (so a participant's state cannot change between answering and being
//! heard: that window is not checked); B's prepares are delivered at the start and B's primary
//! votes yes (A's primary may vote no, except where it is the victim; B's servers still take
//! every later step in any order); the switch scatters a phase as soon as it has gathered it;
//! `ResolutionModel::canonical` forgets what can no longer matter. Lost normal-path messages
//! need no separate loss action: a message the receiver never acts on is the same as a lost
//! one.
//!
//! ## Properties (every reachable state)
//!
//! - *atomicity*: no two servers that are members of the newest map carried out different
//!   outcomes (installed or carried out a commit, next to failed or carried out an abort);
//! - *the client is told what the members carried out*;
//! - *a committed attempt's writes survive promotion*: once the attempt committed, each
//!   shard's primary under the newest map holds the write or still can (holds its part, has
//!   not aborted), and in a finished state holds it;
//! - *a decided abort leaves no write*: in a finished aborted state no shard's primary holds it;
//! - *a failed backup keeps no aborted write in its copy*: a backup that aborted the attempt
//!   (a `fail`, a decision, a refusal) does not hold its applied redo record;
//! - reachable, so the checks are not vacuous: commit, abort, a commit resolved under the new
//!   map, and (victim A's primary) a commit decided by the promoted backup's own resolution.
//!
//! *No two resolvers decide differently* holds only for decisions that take effect, and the
//! model shows why the weaker form is the design: a client that decided under map 0 (say
//! abort: B's backup had not applied yet) whose decision reached no one before the map
//! changed starts over under map 1, where the promoted backup may decide commit; "two
//! resolvers decide differently" is a reachable `sometimes` property, and atomicity and the
//! client's outcome hold through it (a decision is binding once a member at its epoch carried
//! it out, and then every later resolver hears of it).
//!
//! **Liveness** (`model_support`): from every reachable state, fault-free steps (deliveries,
//! resends, adoptions, restarts, the manager's removal) finish: the client has its outcome,
//! every resolution is done and no promoted backup still locks a redo record.
//!
//! **States** (BFS, every interleaving): A's primary cut off 415,012; A's backup crashed
//! 91,615, cut off 61,536; A's primary crashed 687,861 (`--ignored`: about 19 s alone). The
//! default checks take about 45 s in a debug build run on one thread, most of it the
//! liveness walks of the 415,012-state case.
//!
//! **Broken on purpose**: a resolver that counts an answer given under another map, and one
//! that counts a removed (cut-off, still answering) primary's answer, each break atomicity; a
//! promoted backup that never resolves leaves its key locked (liveness).
//!
//! A backup that carries out a `fail` without rolling back the redo record it applied leaves
//! the aborted write in its copy (`Flaw::FailKeepsAppliedRedo`; a finding of this model, fixed
//! in the server: a `fail` can be scattered after the validate phase when a promoted backup
//! refuses a prepare its new map no longer matches).

mod model_support;

use model_support::every_state_can_finish;
use stateright::{Checker, Model, Property};
use std::collections::BTreeSet;

/// Servers 0..4: A's primary, A's backup, B's primary, B's backup.
const SERVERS: u8 = 4;
/// Every participant, as a bit set.
const ALL: u8 = 0b1111;
/// The attempt's write primaries (its roles under epoch 0).
const WP: u8 = 0b0101;
/// The attempt's write backups.
const WB: u8 = 0b1010;

/// What the switch has scattered (bits of `State::scattered`), and what a participant has
/// received (bits of `Part::received`, with `PREPARE`).
const PREPARE: u8 = 1;
/// `validate_ok` to the backups.
const VALIDATE: u8 = 2;
/// `replicate_ok` to the primaries.
const INSTALL: u8 = 4;
/// `fail` to everyone.
const FAIL: u8 = 8;

fn bit(server: u8) -> u8 {
    1 << server
}

fn is_primary(server: u8) -> bool {
    WP & bit(server) != 0
}

/// The phase message the switch scatters to `server` after the lock phase.
fn phase_of(server: u8) -> u8 {
    if is_primary(server) {
        INSTALL
    } else {
        VALIDATE
    }
}

/// Who resolves: the client, or the backup promoted over the victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Resolver {
    Client,
    Promoted,
}

/// What a participant says to a query (`answer::*` in the server).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Answer {
    installed: bool,
    replicated: bool,
    aborted: bool,
    prepared: bool,
}

/// A resolution message in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Msg {
    /// A query; its answer is counted as it is given.
    Query { by: Resolver, to: u8, epoch: u8 },
    /// A decision; its acknowledgement is counted when it is carried out.
    Resolve { by: Resolver, to: u8, epoch: u8, commit: bool },
}

/// A server's liveness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Status {
    /// Holds a lease.
    Serving,
    /// Running without a lease: answers queries and decisions only.
    Cut,
    /// Crashed: silent.
    Down,
}

/// One participant server's state for the attempt.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Part {
    /// Its map's epoch.
    epoch: u8,
    status: Status,
    /// Normal-path messages delivered to it (or lost on the way): `PREPARE`, its phase, `FAIL`.
    received: u8,
    /// Its lock-phase reply: a primary's yes or no, or anyone's refusal of its prepare.
    vote: Option<bool>,
    /// Its phase reply: a backup's `replicate_ok`, a primary's `commit_ok`.
    phase_done: bool,
    /// Holds its part: a primary its locks, a backup its redo record.
    prepared: bool,
    /// A backup's `validate_ok` that came before its prepare (volatile).
    early: bool,
    /// Queried or told a decision: no more normal-path work.
    frozen: bool,
    /// Failed or carried out an abort.
    aborted: bool,
    /// A primary installed the write.
    installed: bool,
    /// A backup applied the redo record to its copy (and has not rolled it back).
    replicated: bool,
    /// A promoted backup keeps its applied redo record locked until the outcome is known.
    promoted: bool,
    /// Ghost, for the properties: carried out a commit.
    did_commit: bool,
    /// Ghost: carried out an abort.
    did_abort: bool,
}

/// A resolution in progress (`Query` in the server).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Resolution {
    /// The map epoch its answers are gathered under.
    epoch: u8,
    /// Participants that answered the query (or, once decided, carried the decision out).
    answered: u8,
    installed: bool,
    replicated: u8,
    prepared: u8,
    aborted: bool,
    decided: Option<bool>,
    /// Every member carried the decision out.
    done: bool,
}

/// The client of the attempt.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Client {
    /// Waiting for the normal path's outcome.
    Waiting,
    /// Timed out: resolving.
    Resolving(Resolution),
    Done(bool),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct State {
    parts: Vec<Part>,
    /// What the switch has scattered: `VALIDATE`, `INSTALL`, `FAIL`.
    scattered: u8,
    client: Client,
    client_epoch: u8,
    /// The manager's map epoch: 1 once the victim is removed.
    manager_epoch: u8,
    /// The promoted backup's resolution, once it started one.
    recovery: Option<Resolution>,
    /// The victim's fault has not happened yet.
    fault_left: bool,
    /// Resolution messages in flight.
    net: BTreeSet<Msg>,
    /// Ghost: every outcome the client's normal path or a resolver decided.
    decided: BTreeSet<bool>,
    /// Ghost: the promoted backup's resolution decided commit.
    promoted_committed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    /// A normal-path message (`PREPARE`, a phase, `FAIL`) reaches a participant.
    Receive {
        to: u8,
        what: u8,
    },
    /// A primary's prepare: it locks and validates (yes) or fails (no).
    Lock {
        to: u8,
        yes: bool,
    },
    /// The client hears the gathered outcome of the normal path.
    ClientHears(bool),
    ClientTimeout,
    Deliver(Msg),
    /// A resolver resends its query or decision to those that have not answered.
    Resend(Resolver),
    /// The victim's lease lapses (it is cut off from the manager).
    Cut,
    Crash,
    Restart,
    /// The manager removes the victim (epoch 1).
    Remove,
    /// A server (0..4) or the client (4) adopts the manager's newer map.
    Adopt(u8),
}

impl Action {
    fn is_fault(&self) -> bool {
        matches!(self, Action::Cut | Action::Crash)
    }
}

/// A deliberate bug, to see the checks fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    None,
    /// Resolvers count answers gathered under another map epoch.
    CountsOtherEpochs,
    /// Resolvers count a removed server's answer as if it were a member's.
    CountsRemovedServers,
    /// A promoted backup locks its applied redo record but starts no resolution of its own.
    PromotedNeverResolves,
    /// A backup carries out a scattered `fail` without rolling back the redo record it
    /// applied (the server before the fix of the finding below).
    FailKeepsAppliedRedo,
}

impl Flaw {
    /// The safety property the flaw breaks, which alone is checked with it (so that the
    /// search stops at its first counterexample).
    fn breaks(self) -> &'static str {
        match self {
            Flaw::FailKeepsAppliedRedo => NO_ABORTED_WRITE_IN_A_COPY,
            _ => "atomicity",
        }
    }
}

/// The property of the fixed finding: no copy holds the write of an attempt that aborted there.
const NO_ABORTED_WRITE_IN_A_COPY: &str = "a failed backup keeps no aborted write in its copy";

/// The victim's fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Its lease lapses (cut off from the manager, still running and answering).
    Cut,
    /// It crashes (and may restart from its log, without a lease).
    Crash,
}

struct ResolutionModel {
    /// The server that may lose its lease or crash: 0 (A's primary) or 1 (A's backup).
    victim: u8,
    fault: Fault,
    flaw: Flaw,
}

impl ResolutionModel {
    /// The members of the map at `epoch`.
    fn members(&self, epoch: u8) -> u8 {
        if epoch == 0 {
            ALL
        } else {
            ALL & !bit(self.victim)
        }
    }

    /// The backup promoted over the victim at epoch 1, if the victim led a shard.
    fn promoted(&self) -> Option<u8> {
        is_primary(self.victim).then_some(self.victim + 1)
    }

    /// Whether `server`'s map at `epoch` gives it the roles the prepare (epoch 0) named.
    fn agrees(&self, server: u8, epoch: u8) -> bool {
        epoch == 0 || (server != self.victim && Some(server) != self.promoted())
    }

    /// The primary of `shard` (0: A, 1: B) at `epoch`.
    fn primary_of(&self, shard: u8, epoch: u8) -> u8 {
        let original = 2 * shard;
        if epoch == 1 && original == self.victim {
            original + 1
        } else {
            original
        }
    }

    /// Whether `server` holds the write in the copy it serves as primary.
    fn holds_write(server: u8, p: &Part) -> bool {
        if is_primary(server) {
            p.installed
        } else {
            p.replicated && !p.aborted
        }
    }

    /// Whether `server` holds the write or could still come to (holds its part, not aborted).
    fn may_hold_write(server: u8, p: &Part) -> bool {
        Self::holds_write(server, p) || (p.prepared && !p.aborted && (is_primary(server) || p.replicated))
    }

    /// Whether `server` may do normal-path work now: it holds a lease, its map names it, and
    /// the attempt is neither frozen nor aborted here.
    fn serving(&self, s: &State, server: u8) -> bool {
        let p = &s.parts[usize::from(server)];
        p.status == Status::Serving && self.members(p.epoch) & bit(server) != 0 && !p.frozen && !p.aborted
    }

    fn resolver_epoch(&self, s: &State, by: Resolver) -> u8 {
        match by {
            Resolver::Client => s.client_epoch,
            Resolver::Promoted => s.parts[usize::from(self.promoted().expect("a promoted backup"))].epoch,
        }
    }

    fn resolution(s: &State, by: Resolver) -> Option<&Resolution> {
        match by {
            Resolver::Client => match &s.client {
                Client::Resolving(r) => Some(r),
                _ => None,
            },
            Resolver::Promoted => s.recovery.as_ref(),
        }
    }

    fn resolution_mut(s: &mut State, by: Resolver) -> Option<&mut Resolution> {
        match by {
            Resolver::Client => match &mut s.client {
                Client::Resolving(r) => Some(r),
                _ => None,
            },
            Resolver::Promoted => s.recovery.as_mut(),
        }
    }

    /// Whether a resend would send anything: some participant has not answered and neither the
    /// resolver's message to it nor its answer is in flight (lost, or refused under another
    /// epoch), or the resolver's map changed. Resending only then keeps the state space small
    /// and loses nothing: a copy of a message still in flight is the same message in a set.
    fn resend_helps(&self, s: &State, by: Resolver) -> bool {
        let Some(r) = Self::resolution(s, by) else { return false };
        let epoch = self.resolver_epoch(s, by);
        if r.done || r.epoch != epoch {
            return !r.done;
        }
        let in_flight = |p: u8| {
            s.net.iter().any(|m| match *m {
                Msg::Query { by: b, to, epoch: e } | Msg::Resolve { by: b, to, epoch: e, .. } => {
                    b == by && to == p && e == epoch
                }
            })
        };
        (0..SERVERS).any(|p| r.answered & bit(p) == 0 && !in_flight(p))
    }

    /// Follows the resolver's map (`Query::follow`: a new map starts the resolution over),
    /// then sends its query or decision to every participant that has not answered.
    fn resend(&self, s: &mut State, by: Resolver) {
        let epoch = self.resolver_epoch(s, by);
        let Some(r) = Self::resolution_mut(s, by) else { return };
        if r.done {
            return;
        }
        if r.epoch != epoch {
            *r = Resolution { epoch, ..Resolution::default() };
        }
        let (answered, decided) = (r.answered, r.decided);
        for to in (0..SERVERS).filter(|&p| answered & bit(p) == 0) {
            s.net.insert(match decided {
                None => Msg::Query { by, to, epoch },
                Some(commit) => Msg::Resolve { by, to, epoch, commit },
            });
        }
    }

    /// A resolver hears participant `from`'s answer (`Query::hear`); returns its decision.
    fn hear(&self, r: &mut Resolution, from: u8, epoch: u8, a: Answer) -> Option<bool> {
        if (epoch != r.epoch && self.flaw != Flaw::CountsOtherEpochs) || r.decided.is_some() {
            return None;
        }
        let members = self.members(r.epoch);
        let writers = WP | WB;
        if members & bit(from) == 0 && writers & !members != 0 && self.flaw != Flaw::CountsRemovedServers {
            // A removed server's state no longer counts.
            return None;
        }
        r.answered |= bit(from);
        r.installed |= a.installed;
        r.aborted |= a.aborted;
        if a.replicated {
            r.replicated |= bit(from);
        }
        if a.prepared {
            r.prepared |= bit(from);
        }
        let commit = if writers & !members == 0 {
            // Every writer in the map: a primary that installed, or every backup's answer.
            if !(r.installed || r.answered & WB == WB) {
                return None;
            }
            r.installed || r.replicated & WB == WB
        } else {
            // FaRM's rule for a removed writer.
            let live = writers & members;
            if !(r.installed || r.aborted || r.answered & live == live) {
                return None;
            }
            r.installed || (r.replicated != 0 && r.prepared & live == live && !r.aborted)
        };
        r.decided = Some(commit);
        r.answered = 0;
        Some(commit)
    }

    /// Participant `to` answers a query, and is frozen from now on.
    fn answer(p: &mut Part) -> Answer {
        p.frozen = true;
        let holds = p.prepared || p.installed || p.replicated;
        Answer { installed: p.installed, replicated: p.replicated, aborted: p.aborted, prepared: holds && !p.aborted }
    }

    /// Participant `server` carries out a decision.
    fn carry_out(server: u8, p: &mut Part, commit: bool) {
        p.frozen = true;
        if !commit {
            p.replicated = false;
            p.aborted = true;
            p.promoted = false;
            p.prepared = false;
            p.did_abort = true;
            return;
        }
        if is_primary(server) && p.prepared && !p.installed && !p.aborted {
            p.installed = true;
            p.did_commit = true;
        }
        if !is_primary(server) && !p.replicated && p.prepared && !p.aborted {
            // Committed without this backup's `replicate_ok`: apply the redo record now.
            p.replicated = true;
        }
        if !is_primary(server) && p.replicated {
            p.promoted = false;
            p.did_commit = true;
        }
    }

    /// Server `server` adopts map epoch 1: a promoted backup takes its shard over.
    fn adopt(&self, s: &mut State, server: u8) {
        let p = &mut s.parts[usize::from(server)];
        p.epoch = 1;
        if Some(server) != self.promoted() || p.aborted {
            return;
        }
        if p.replicated {
            // Its applied redo record stays locked until it has resolved the attempt.
            p.promoted = true;
            if self.flaw != Flaw::PromotedNeverResolves {
                s.recovery = Some(Resolution { epoch: 1, ..Resolution::default() });
                self.resend(s, Resolver::Promoted);
            }
        } else if p.prepared || p.early {
            // Never applied: its attempt cannot have committed.
            p.aborted = true;
            p.frozen = true;
            p.did_abort = true;
        }
    }

    /// A normal-path message `what` reaches participant `to` (lost if it is down).
    fn receive(&self, s: &mut State, to: u8, what: u8) {
        let serving = self.serving(s, to);
        let agrees = self.agrees(to, s.parts[usize::from(to)].epoch);
        let p = &mut s.parts[usize::from(to)];
        p.received |= what;
        if !serving {
            return;
        }
        match what {
            PREPARE if !agrees => {
                // Its map disagrees with the prepare's roles: it fails the attempt.
                p.aborted = true;
                p.did_abort = true;
                p.vote = Some(false);
            }
            PREPARE => {
                p.prepared = true;
                if std::mem::take(&mut p.early) {
                    p.replicated = true;
                    p.phase_done = true;
                }
            }
            VALIDATE if !p.prepared => p.early = true,
            VALIDATE => {
                p.replicated = true;
                p.phase_done = true;
            }
            INSTALL if p.prepared => {
                p.installed = true;
                p.did_commit = true;
                p.phase_done = true;
            }
            FAIL => {
                // Released; a backup that applied its redo record puts the before-image back
                // (and a promoted one unlocks it: the outcome is known).
                if self.flaw != Flaw::FailKeepsAppliedRedo {
                    p.replicated = false;
                    p.promoted = false;
                }
                p.prepared = false;
                p.aborted = true;
                p.did_abort = true;
            }
            _ => {}
        }
    }

    fn deliver(&self, s: &mut State, msg: Msg) {
        match msg {
            Msg::Query { by, to, epoch } => {
                let p = &mut s.parts[usize::from(to)];
                if p.status == Status::Down || p.epoch != epoch {
                    return;
                }
                // The answer is heard as it is given (the essay says what that leaves out).
                let answer = Self::answer(p);
                let Some(r) = Self::resolution_mut(s, by) else { return };
                if let Some(commit) = self.hear(r, to, epoch, answer) {
                    s.decided.insert(commit);
                    s.promoted_committed |= by == Resolver::Promoted && commit;
                    self.resend(s, by);
                }
            }
            Msg::Resolve { by, to, epoch, commit } => {
                let p = &mut s.parts[usize::from(to)];
                if p.status == Status::Down || p.epoch != epoch {
                    return;
                }
                Self::carry_out(to, p, commit);
                let members = self.members(epoch);
                let Some(r) = Self::resolution_mut(s, by) else { return };
                if r.epoch == epoch && r.decided == Some(commit) {
                    r.answered |= bit(to);
                    if r.answered & members == members {
                        r.done = true;
                        if by == Resolver::Client {
                            s.client = Client::Done(commit);
                        }
                    }
                }
            }
        }
    }

    /// Forgets what can no longer matter, so that states that behave alike are one state: the
    /// normal-path messages of a participant that will never do normal-path work again (it is
    /// frozen, aborted, without a lease or out of the map: none of these is undone, since a
    /// lease is never renewed after it lapsed here), the votes and replies the switch has
    /// gathered, a decided resolution's tallies, and resolution messages that can only be
    /// refused (an older epoch than their receiver's, or an answer to a resolver that has
    /// decided or moved on).
    fn canonical(&self, s: &mut State) {
        for server in 0..SERVERS {
            let dead = !self.serving(s, server);
            let p = &mut s.parts[usize::from(server)];
            if dead {
                p.received = PREPARE | phase_of(server) | FAIL;
                p.early = false;
            }
            if s.scattered & (VALIDATE | FAIL) != 0 {
                p.vote = None;
            }
            if !is_primary(server) && s.scattered & (INSTALL | FAIL) != 0 {
                p.phase_done = false;
            }
        }
        for by in [Resolver::Client, Resolver::Promoted] {
            if let Some(r) = Self::resolution_mut(s, by).filter(|r| r.decided.is_some()) {
                (r.installed, r.replicated, r.prepared, r.aborted) = (false, 0, 0, false);
            }
        }
        let live = |m: &Msg| match *m {
            Msg::Query { to, epoch, .. } | Msg::Resolve { to, epoch, .. } => s.parts[usize::from(to)].epoch <= epoch,
        };
        let net: BTreeSet<Msg> = s.net.iter().copied().filter(live).collect();
        s.net = net;
    }

    /// The switch scatters each phase as soon as it has gathered the replies it needs.
    fn scatter(s: &mut State) {
        for what in [FAIL, VALIDATE, INSTALL] {
            if Self::can_scatter(s, what) {
                s.scattered |= what;
            }
        }
    }

    /// Whether the switch can scatter `what` now (it has gathered the replies it needs).
    fn can_scatter(s: &State, what: u8) -> bool {
        if s.scattered & (what | FAIL) != 0 {
            return false;
        }
        let parts = || (0..SERVERS).map(|p| (p, &s.parts[usize::from(p)]));
        match what {
            VALIDATE => parts().filter(|(p, _)| is_primary(*p)).all(|(_, x)| x.vote == Some(true)),
            INSTALL => {
                s.scattered & VALIDATE != 0 && parts().filter(|(p, _)| !is_primary(*p)).all(|(_, x)| x.phase_done)
            }
            _ => parts().any(|(_, x)| x.vote == Some(false)),
        }
    }

    /// Finished: the client has its outcome, every resolution is done and no promoted backup
    /// still locks a redo record.
    fn finished(s: &State) -> bool {
        let unlocked = s.parts.iter().all(|p| !p.promoted);
        matches!(s.client, Client::Done(_)) && s.recovery.as_ref().is_none_or(|r| r.done) && unlocked
    }

    /// Committed: the client or some member carried out a commit.
    fn committed(&self, s: &State) -> bool {
        let members = self.members(s.manager_epoch);
        s.client == Client::Done(true)
            || (0..SERVERS).any(|p| members & bit(p) != 0 && s.parts[usize::from(p)].did_commit)
    }
}

impl Model for ResolutionModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let part = Part {
            epoch: 0,
            status: Status::Serving,
            received: 0,
            vote: None,
            phase_done: false,
            prepared: false,
            early: false,
            frozen: false,
            aborted: false,
            installed: false,
            replicated: false,
            promoted: false,
            did_commit: false,
            did_abort: false,
        };
        // Shard B's roles never change, so its prepares are taken as delivered at the start:
        // its backup holds the redo record, its primary has locked (yes) or failed (no).
        [true]
            .into_iter()
            .map(|yes| {
                let mut parts = vec![part.clone(); usize::from(SERVERS)];
                parts[2] = Part {
                    received: PREPARE,
                    vote: Some(yes),
                    prepared: yes,
                    aborted: !yes,
                    did_abort: !yes,
                    ..part.clone()
                };
                parts[3] = Part { received: PREPARE, prepared: true, ..part.clone() };
                let mut s = State {
                    parts,
                    scattered: 0,
                    client: Client::Waiting,
                    client_epoch: 0,
                    manager_epoch: 0,
                    recovery: None,
                    fault_left: true,
                    net: BTreeSet::new(),
                    decided: BTreeSet::new(),
                    promoted_committed: false,
                };
                Self::scatter(&mut s);
                s
            })
            .collect()
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        for to in 0..SERVERS {
            let p = &s.parts[usize::from(to)];
            for what in [PREPARE, phase_of(to), FAIL] {
                if p.received & what != 0 || (what != PREPARE && s.scattered & what == 0) {
                    continue;
                }
                if what == PREPARE && is_primary(to) && self.serving(s, to) && self.agrees(to, p.epoch) {
                    actions.push(Action::Lock { to, yes: true });
                    if self.victim != 0 {
                        // With A's primary the victim, abort is reached by resolutions and by a
                        // promoted backup's refusal; its own no vote is left out (state count).
                        actions.push(Action::Lock { to, yes: false });
                    }
                } else {
                    actions.push(Action::Receive { to, what });
                }
            }
        }
        if s.client == Client::Waiting {
            actions.push(Action::ClientTimeout);
            let installed = (0..SERVERS).filter(|&p| is_primary(p)).all(|p| s.parts[usize::from(p)].phase_done);
            if s.scattered & INSTALL != 0 && installed {
                actions.push(Action::ClientHears(true));
            }
            if s.scattered & FAIL != 0 {
                actions.push(Action::ClientHears(false));
            }
        }
        for &msg in &s.net {
            // A message from a newer map waits for its receiver to adopt it (the receiver's
            // "behind" answer makes it ask the manager, and the resolver sends again).
            let (Msg::Query { to, epoch, .. } | Msg::Resolve { to, epoch, .. }) = msg;
            if s.parts[usize::from(to)].epoch >= epoch {
                actions.push(Action::Deliver(msg));
            }
        }
        for by in [Resolver::Client, Resolver::Promoted] {
            if self.resend_helps(s, by) {
                actions.push(Action::Resend(by));
            }
        }
        let victim = &s.parts[usize::from(self.victim)];
        if s.fault_left {
            actions.push(if self.fault == Fault::Cut { Action::Cut } else { Action::Crash });
        }
        if victim.status == Status::Down {
            actions.push(Action::Restart);
        }
        if s.manager_epoch == 0 && victim.status != Status::Serving {
            actions.push(Action::Remove);
        }
        if s.manager_epoch == 1 {
            // Shard B's servers adopt together (the change does not touch them).
            for p in [0, 1, 2] {
                let part = &s.parts[usize::from(p)];
                if part.epoch == 0 && part.status != Status::Down {
                    actions.push(Action::Adopt(p));
                }
            }
            if s.client_epoch == 0 {
                actions.push(Action::Adopt(SERVERS));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Receive { to, what } => self.receive(&mut s, to, what),
            Action::Lock { to, yes } => {
                let p = &mut s.parts[usize::from(to)];
                p.received |= PREPARE;
                p.vote = Some(yes);
                if yes {
                    p.prepared = true;
                } else {
                    p.aborted = true;
                    p.did_abort = true;
                }
            }
            Action::ClientHears(commit) => {
                s.decided.insert(commit);
                s.client = Client::Done(commit);
            }
            Action::ClientTimeout => {
                s.client = Client::Resolving(Resolution { epoch: s.client_epoch, ..Resolution::default() });
                self.resend(&mut s, Resolver::Client);
            }
            Action::Deliver(msg) => {
                s.net.remove(&msg);
                self.deliver(&mut s, msg);
            }
            Action::Resend(by) => self.resend(&mut s, by),
            Action::Cut => {
                s.fault_left = false;
                s.parts[usize::from(self.victim)].status = Status::Cut;
            }
            Action::Crash => {
                s.fault_left = false;
                let p = &mut s.parts[usize::from(self.victim)];
                p.status = Status::Down;
                // Lost: what was not logged (a redo record not yet applied, a request that
                // overtook its prepare, the abort of a primary that held no locks).
                p.early = false;
                if !is_primary(self.victim) && !p.replicated {
                    p.prepared = false;
                }
                if is_primary(self.victim) && !p.prepared && !p.installed {
                    p.aborted = false;
                }
            }
            Action::Restart => s.parts[usize::from(self.victim)].status = Status::Cut,
            Action::Remove => s.manager_epoch = 1,
            Action::Adopt(p) if p == SERVERS => {
                s.client_epoch = 1;
                self.resend(&mut s, Resolver::Client);
            }
            Action::Adopt(2) => {
                self.adopt(&mut s, 2);
                self.adopt(&mut s, 3);
            }
            Action::Adopt(p) => self.adopt(&mut s, p),
        }
        Self::scatter(&mut s);
        self.canonical(&mut s);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let safety = vec![
            Property::always("atomicity", |m: &ResolutionModel, s: &State| {
                let members = m.members(s.manager_epoch);
                let member = |p: &u8| members & bit(*p) != 0;
                let parts = || (0..SERVERS).filter(member).map(|p| &s.parts[usize::from(p)]);
                !(parts().any(|p| p.did_commit) && parts().any(|p| p.did_abort))
            }),
            Property::always("the client is told what the members carried out", |m: &ResolutionModel, s: &State| {
                let members = m.members(s.manager_epoch);
                let member = |p: &u8| members & bit(*p) != 0;
                let mut parts = (0..SERVERS).filter(member).map(|p| &s.parts[usize::from(p)]);
                match s.client {
                    Client::Done(true) => !parts.any(|p| p.did_abort),
                    Client::Done(false) => !parts.any(|p| p.did_commit),
                    _ => true,
                }
            }),
            Property::always("a committed attempt's writes survive promotion", |m: &ResolutionModel, s: &State| {
                !m.committed(s)
                    || (0..2).all(|shard| {
                        let primary = m.primary_of(shard, s.manager_epoch);
                        let p = &s.parts[usize::from(primary)];
                        if ResolutionModel::finished(s) {
                            ResolutionModel::holds_write(primary, p)
                        } else {
                            ResolutionModel::may_hold_write(primary, p)
                        }
                    })
            }),
            Property::always(NO_ABORTED_WRITE_IN_A_COPY, |_, s: &State| {
                s.parts.iter().all(|p| !(p.replicated && p.aborted))
            }),
            Property::always("a decided abort leaves no write", |m: &ResolutionModel, s: &State| {
                s.client != Client::Done(false)
                    || !ResolutionModel::finished(s)
                    || (0..2).all(|shard| {
                        let primary = m.primary_of(shard, s.manager_epoch);
                        !ResolutionModel::holds_write(primary, &s.parts[usize::from(primary)])
                    })
            }),
        ];
        if self.flaw != Flaw::None {
            // Only the property it breaks, so that the search stops at its first counterexample.
            return safety.into_iter().filter(|p| p.name == self.flaw.breaks()).collect();
        }
        let mut all = safety;
        all.extend([
            Property::sometimes("commit is reachable", |_, s: &State| s.client == Client::Done(true)),
            Property::sometimes("abort is reachable", |_, s: &State| s.client == Client::Done(false)),
            Property::sometimes("a resolution under the new map commits", |_, s: &State| {
                s.manager_epoch == 1 && s.client == Client::Done(true) && s.decided.contains(&true)
            }),
        ]);
        if self.promoted().is_some() {
            all.push(Property::sometimes("the promoted backup's resolution commits", |_, s: &State| {
                s.promoted_committed
            }));
            // Not a bug (the essay): a decision taken under the old map that no member carried
            // out is taken again under the new one, and may come out the other way.
            all.push(Property::sometimes("two resolvers decide differently", |_, s: &State| s.decided.len() > 1));
        }
        all
    }
}

/// Checks every reachable state with `victim` and reports how many there were.
fn check(victim: u8, fault: Fault) -> usize {
    let checker = ResolutionModel { victim, fault, flaw: Flaw::None }.checker().spawn_bfs().join();
    checker.assert_properties();
    let states = checker.unique_state_count();
    println!("victim {victim}, {fault:?}: {states} states");
    states
}

#[test]
fn resolution_is_atomic_when_a_primary_is_cut_off_and_its_backup_is_promoted() {
    assert!(check(0, Fault::Cut) > 1000);
}

#[test]
fn resolution_is_atomic_when_a_backup_crashes_or_is_cut_off_and_is_removed() {
    assert!(check(1, Fault::Crash) > 1000);
    assert!(check(1, Fault::Cut) > 1000);
}

/// The largest case (687,861 states, about 19 s in a debug build on two cores), so not in
/// every `cargo test`: `cargo test -p pisadb-check --test switchtx_resolution -- --ignored`.
#[test]
#[ignore = "687,861 states, about 19 s in a debug build: cargo test -p pisadb-check --test switchtx_resolution -- --ignored"]
fn resolution_is_atomic_when_a_primary_crashes_and_its_backup_is_promoted() {
    assert!(check(0, Fault::Crash) > 1000);
    let model = ResolutionModel { victim: 0, fault: Fault::Crash, flaw: Flaw::None };
    let states = every_state_can_finish(&model, Action::is_fault, ResolutionModel::finished);
    assert!(states.is_ok(), "stuck after {states:?}");
}

#[test]
fn every_reachable_state_can_still_resolve() {
    for (victim, fault) in [(0, Fault::Cut), (1, Fault::Crash)] {
        let model = ResolutionModel { victim, fault, flaw: Flaw::None };
        match every_state_can_finish(&model, Action::is_fault, ResolutionModel::finished) {
            Ok(states) => println!("victim {victim}, {fault:?}: all {states} states can finish"),
            Err(path) => panic!("victim {victim}, {fault:?}: stuck after {path:?}"),
        }
    }
}

/// Atomicity can fail: a resolver that counts an answer given under another map mixes the
/// two maps' rules, and one that counts a removed (cut-off, still answering) primary's answer
/// next to its promoted backup's decides from a copy that no longer counts.
#[test]
fn the_checker_finds_resolvers_that_count_other_epochs_or_removed_servers() {
    for (flaw, victim) in [(Flaw::CountsOtherEpochs, 1), (Flaw::CountsRemovedServers, 0)] {
        let checker = ResolutionModel { victim, fault: Fault::Cut, flaw }.checker().spawn_bfs().join();
        let path = checker.discovery("atomicity").unwrap_or_else(|| panic!("{flaw:?}: no counterexample"));
        println!("{flaw:?} breaks atomicity:\n{path}");
    }
}

/// Liveness can fail: a promoted backup that locks the redo record it applied but never
/// resolves the attempt itself keeps the key locked for ever once the client is done.
#[test]
fn the_liveness_check_finds_a_promoted_backup_that_never_resolves() {
    let model = ResolutionModel { victim: 0, fault: Fault::Cut, flaw: Flaw::PromotedNeverResolves };
    let path = every_state_can_finish(&model, Action::is_fault, ResolutionModel::finished).expect_err("a wedge");
    assert!(path.contains(&Action::Adopt(1)), "the wedge needs the promotion: {path:?}");
    println!("stuck after {path:?}");
}

/// Once a finding, now a property that holds (`NO_ABORTED_WRITE_IN_A_COPY`, checked with the
/// others above): a `fail` can be scattered after a backup applied its redo record, when
/// another participant refuses its prepare after the validate phase (here: A's backup, promoted
/// over a cut-off primary, refuses a prepare whose roles its new map no longer gives it, after
/// B's backup applied). SwitchTx's backup used to release and mark the attempt aborted without
/// rolling the redo record back, so B's copy held the write of an aborted attempt, unlocked,
/// which a later promotion of B's backup (the take-over skips aborted parts) would serve as
/// committed data. The server now rolls back on `fail` (`Participant::down`, seed 001 §3.5:
/// the changes of transactions that did not commit are rolled back); the flaw that skips the
/// rollback is caught, and the counterexample needs the late refusal.
#[test]
fn the_checker_finds_a_fail_that_leaves_an_applied_redo_record_in_a_backup_copy() {
    let model = ResolutionModel { victim: 0, fault: Fault::Cut, flaw: Flaw::FailKeepsAppliedRedo };
    let checker = model.checker().spawn_bfs().join();
    let path = checker.discovery(NO_ABORTED_WRITE_IN_A_COPY).expect("a counterexample");
    let actions = path.into_actions();
    let fail = actions.iter().position(|a| matches!(a, Action::Receive { what: FAIL, .. }));
    let validate = actions.iter().position(|a| matches!(a, Action::Receive { what: VALIDATE, .. }));
    assert!(validate < fail && validate.is_some(), "a backup applies, then hears `fail`: {actions:?}");
    println!("{actions:?}");
}
