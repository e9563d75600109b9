//! Two-phase commit as small sans-IO state machines: the coordinator's rounds and decisions,
//! and the participant's served transactions.
//!
//! Two-phase commit is the same in every system that spreads a transaction over nodes, whatever
//! carries its messages (node to node, or gathered and scattered by a switch) and whatever
//! concurrency control runs underneath. What is protocol — and only that — lives here:
//!
//! - [`Round`] (coordinator): one answer expected from each of a set of nodes — replies to
//!   lock-and-read requests, or votes. A second answer from the same node is a duplicate (the
//!   network may deliver a datagram twice) and must not count; one refusal makes the round's
//!   outcome *no*; the round is complete when every node answered.
//! - [`Decisions`] (coordinator): the transactions it committed, so it can answer a
//!   participant's *inquiry* about one it prepared. Presumed abort: a transaction the
//!   coordinator neither committed nor is still deciding was aborted (a commit is always
//!   recorded before anyone is told).
//! - [`Participant`]: the transactions a node serves for coordinators, each with its origin
//!   and whether it voted yes. A yes vote is given once, only when the system says the
//!   transaction is ready (every read done), and binds the participant: from then on only the
//!   coordinator may end the transaction. When a served transaction's *lease* runs out (the
//!   coordinator went quiet), an unprepared one is dropped — it will vote no if asked later —
//!   and a prepared one asks its coordinator for the outcome, again and again until it hears.
//!
//! The machines never send, log or set timers themselves: they say what is due
//! ([`LeaseAction`], [`Tally`], [`Outcome`]) and the host does it, in its own message format
//! and with its own durability (a yes vote and a decision are logged before they are sent).
//!
//! The scripted tests in `tests` drive each machine from a short text scenario and compare
//! what it says with the expected lines written under each command (goldenscript style).

mod coordinator;
mod participant;

#[cfg(test)]
mod tests;

pub use coordinator::{Decisions, Duplicate, Round, Tally};
pub use participant::{LeaseAction, Origin, Participant, Served};

/// What became of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It committed: apply its writes.
    Commit,
    /// It aborted: drop its writes.
    Abort,
}
