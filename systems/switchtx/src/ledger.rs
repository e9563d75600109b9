//! What the end-of-run checks need from a run: every committed transaction's reads (by its
//! client) and every write a primary installed.
//!
//! The simulator's observer keeps one ledger from the servers' events (a commit by
//! [`Ledger::commit`], an install by [`Ledger::add_install`]); in real mode each server's is
//! read from its write-ahead log and the cluster merges them ([`Ledger::merge`]). Either way a
//! transaction counted committed twice is refused at once: that is a bug, not a figure. The
//! ledger names no log record, so the log reads into it.

use crate::server::events::ServerEvent;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Committed reads and installed writes (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// txn → (key, version read) of every key, as its client saw it commit.
    pub reads: BTreeMap<u64, Vec<(u64, u64)>>,
    /// Read-only transactions committed.
    pub read_only: BTreeSet<u64>,
    /// txn → writes as installed: (key, overwritten version).
    pub installed: BTreeMap<u64, Vec<(u64, u64)>>,
}

impl Ledger {
    /// Takes what the checks need from a server's `event`; refuses a transaction committed
    /// twice.
    pub fn record(&mut self, event: &ServerEvent) -> Result<(), String> {
        match event {
            ServerEvent::Committed { txn, reads, read_only, .. } => self.commit(*txn, reads, *read_only)?,
            ServerEvent::Installed(txn, key, overwritten) => self.add_install(*txn, *key, *overwritten),
            _ => {}
        }
        Ok(())
    }

    /// Notes that `txn` committed, having read `reads` (key, version); refuses a
    /// transaction committed twice.
    pub fn commit(&mut self, txn: u64, reads: &[(u64, u64)], read_only: bool) -> Result<(), String> {
        if read_only {
            self.read_only.insert(txn);
        }
        if self.reads.insert(txn, reads.to_vec()).is_some() {
            return Err(format!("transaction {txn:#x} committed twice"));
        }
        Ok(())
    }

    /// Adds another server's ledger; refuses a transaction committed on both.
    pub fn merge(&mut self, other: Ledger) -> Result<(), String> {
        for (txn, reads) in other.reads {
            if self.reads.insert(txn, reads).is_some() {
                return Err(format!("transaction {txn:#x} committed twice"));
            }
        }
        self.read_only.extend(other.read_only);
        for (txn, writes) in other.installed {
            for (key, overwritten) in writes {
                self.add_install(txn, key, overwritten);
            }
        }
        Ok(())
    }

    /// Notes that `txn` installed `key` over `overwritten`, once: a write can be installed
    /// twice, by a primary that then failed and by its promoted backup when it finds the
    /// transaction committed.
    pub fn add_install(&mut self, txn: u64, key: u64, overwritten: u64) {
        let writes = self.installed.entry(txn).or_default();
        if writes.iter().all(|w| w.0 != key) {
            writes.push((key, overwritten));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_committed_twice_is_refused_and_a_repeated_install_counted_once() {
        let commit =
            ServerEvent::Committed { txn: 7, latency_ns: 1, retries: 0, reads: vec![(1, 0)], read_only: false };
        let mut ledger = Ledger::default();
        ledger.record(&commit).unwrap();
        ledger.record(&ServerEvent::Installed(7, 1, 0)).unwrap();
        ledger.record(&ServerEvent::Installed(7, 1, 0)).unwrap();
        assert_eq!(ledger.installed[&7], vec![(1, 0)]);
        assert!(ledger.record(&commit).unwrap_err().contains("committed twice"));
        let mut other = Ledger::default();
        other.record(&commit).unwrap();
        assert!(Ledger::default().merge(other.clone()).is_ok());
        assert!(ledger.merge(other).unwrap_err().contains("committed twice"));
    }
}
