//! The coordinator's side of two-phase commit: rounds of answers, and the decisions it keeps
//! for inquiries.

use super::Outcome;
use crate::id::TxnId;
use std::collections::BTreeSet;
use thiserror::Error;

/// A second answer from a node in one round (the network delivered a datagram twice): it must
/// not count. Not an error of the transaction, which goes on.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("node {from} answered this round already")]
pub struct Duplicate {
    /// The node.
    pub from: u16,
}

/// Where a round stands after an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tally {
    /// Answers are still due.
    Waiting,
    /// Every node answered, all of them yes.
    AllYes,
    /// Every node answered, at least one of them no.
    SomeNo,
}

/// One answer expected from each of a set of nodes (see the module documentation).
///
/// Answering is two steps, so a host can refuse a malformed answer after its sender is known:
/// [`Round::sender`] notes who answered (refusing a second answer from the same node), then
/// [`Round::tally`] counts the answer itself. [`Round::answer`] does both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Answers still due.
    pending: usize,
    /// Nodes that answered so far.
    answered: Vec<u16>,
    /// Whether some node said no.
    refused: bool,
}

impl Round {
    /// A round expecting `expected` answers.
    pub fn new(expected: usize) -> Self {
        Round { pending: expected, answered: Vec::new(), refused: false }
    }

    /// Notes that `from` answered; a second answer from it is a [`Duplicate`].
    pub fn sender(&mut self, from: u16) -> Result<(), Duplicate> {
        if self.answered.contains(&from) {
            return Err(Duplicate { from });
        }
        self.answered.push(from);
        Ok(())
    }

    /// Counts one answer, `yes` or no.
    pub fn tally(&mut self, yes: bool) -> Tally {
        debug_assert!(self.pending > 0, "more answers than expected");
        self.refused |= !yes;
        self.pending = self.pending.saturating_sub(1);
        self.state()
    }

    /// [`Round::sender`] then [`Round::tally`].
    pub fn answer(&mut self, from: u16, yes: bool) -> Result<Tally, Duplicate> {
        self.sender(from)?;
        Ok(self.tally(yes))
    }

    /// Where the round stands.
    pub fn state(&self) -> Tally {
        match (self.pending, self.refused) {
            (0, false) => Tally::AllYes,
            (0, true) => Tally::SomeNo,
            _ => Tally::Waiting,
        }
    }

    /// Answers still due.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Nodes that answered so far, in order.
    pub fn answered(&self) -> &[u16] {
        &self.answered
    }
}

/// The transactions a coordinator committed, for inquiries (presumed abort; see the module
/// documentation). The set only grows: a participant may ask about any transaction it
/// prepared, however long ago, after a crash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Committed transactions that participants may ask about.
    committed: BTreeSet<TxnId>,
}

impl Decisions {
    /// Nothing decided yet.
    pub fn new() -> Self {
        Decisions::default()
    }

    /// Records that `txn` committed (before any participant is told).
    pub fn commit(&mut self, txn: TxnId) {
        self.committed.insert(txn);
    }

    /// The answer to a participant that asks about `txn`: committed if recorded; nothing yet
    /// while the coordinator is `still_deciding` it; otherwise aborted (presumed abort).
    pub fn outcome(&self, txn: TxnId, still_deciding: bool) -> Option<Outcome> {
        if self.committed.contains(&txn) {
            Some(Outcome::Commit)
        } else if still_deciding {
            None
        } else {
            Some(Outcome::Abort)
        }
    }

    /// Committed transactions recorded.
    pub fn len(&self) -> usize {
        self.committed.len()
    }

    /// Whether none is recorded.
    pub fn is_empty(&self) -> bool {
        self.committed.is_empty()
    }
}
