//! The progress oracle of TransKV's fault-injection cases (issue 31, "checks that can fail").
//!
//! The end-of-run checks (`crate::rack::check`) prove that nothing wrong was committed and
//! that every client finished; they say nothing while a run is still going, and a case that
//! livelocks (clients retrying forever against a key something holds for good) went on to the
//! simulator's event bound, minutes of wall time, before failing as a step limit (fuzz seed
//! 1980). This oracle watches the run instead: once the faults have healed, some client must
//! commit within [`PROGRESS_BOUND_NS`] of the healing or of the last commit, until every
//! client has finished. It is checked on every host event, so a livelock (events without
//! commits) fails as soon as the bound has passed; a deadlock (no events at all) ends the run
//! with clients unfinished, which the end checks already fail.
//!
//! The bound is simulated time, not wall time, so the oracle is deterministic: a case fails
//! or passes the same way on every machine. One second is 25 leases at the longest resolve
//! time the cases draw (10 ms; a lease is four resolves), while a healthy case commits its
//! 240 transactions in a few milliseconds: a case that trips it is stuck, not slow.

use crate::layout::CLIENTS;
use pisadb_core::Nanos;

/// The longest a healed run may go without a commit while clients are unfinished.
pub const PROGRESS_BOUND_NS: Nanos = 1_000_000_000;

/// Commits seen so far and when the last one was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The longest gap allowed.
    bound_ns: Nanos,
    /// When the last commit was (0: none yet).
    last_commit_ns: Nanos,
    /// Client hosts that finished all their transactions.
    finished: u16,
}

impl Progress {
    /// An oracle allowing gaps of at most `bound_ns` after healing.
    pub fn new(bound_ns: Nanos) -> Self {
        Progress { bound_ns, last_commit_ns: 0, finished: 0 }
    }

    /// A client committed a transaction at `at`.
    pub fn committed(&mut self, at: Nanos) {
        self.last_commit_ns = self.last_commit_ns.max(at);
    }

    /// A client host finished all its transactions.
    pub fn finished(&mut self) {
        self.finished += 1;
    }

    /// At `at`, with the faults healed from `healthy_from`: whether the run still makes
    /// progress.
    pub fn check(&self, at: Nanos, healthy_from: Nanos) -> Result<(), String> {
        if self.finished >= CLIENTS {
            return Ok(());
        }
        let since = self.last_commit_ns.max(healthy_from);
        if at > since.saturating_add(self.bound_ns) {
            return Err(format!(
                "no progress: no transaction committed from {:.3} ms (the faults healed at {:.3} ms, \
                 the last commit at {:.3} ms) to {:.3} ms, more than the bound of {:.3} ms, with {} of \
                 {CLIENTS} client hosts unfinished",
                since as f64 / 1e6,
                healthy_from as f64 / 1e6,
                self.last_commit_ns as f64 / 1e6,
                at as f64 / 1e6,
                self.bound_ns as f64 / 1e6,
                CLIENTS - self.finished,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_longer_than_the_bound_after_healing_fails_and_one_before_healing_does_not() {
        let mut p = Progress::new(1_000);
        p.committed(500);
        assert_eq!(p.check(1_500, 0), Ok(()), "exactly the bound");
        assert!(p.check(1_501, 0).unwrap_err().contains("no progress"));
        assert_eq!(p.check(5_000, 4_500), Ok(()), "faulty until 4,500: the gap counts from there");
        assert!(p.check(5_501, 4_500).is_err());
        p.committed(5_400);
        assert_eq!(p.check(6_000, 4_500), Ok(()));
    }

    #[test]
    fn once_every_client_finished_there_is_nothing_to_wait_for() {
        let mut p = Progress::new(1_000);
        for _ in 0..CLIENTS {
            assert!(p.check(10_000, 0).is_err());
            p.finished();
        }
        assert_eq!(p.check(10_000, 0), Ok(()));
    }
}
