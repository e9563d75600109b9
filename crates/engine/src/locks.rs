//! The per-tuple lock table of one node (2PL with NO_WAIT or WAIT_DIE).
//!
//! A tuple's lock has holders (shared, or one exclusive) and a FIFO of waiters. A request
//! *conflicts* when it is incompatible with a holder or when others already wait (no queue
//! jumping). On a conflict, NO_WAIT denies at once. WAIT_DIE lets the requester wait only if it
//! is older (smaller timestamp) than every holder and every waiter; otherwise it dies (is
//! denied). Waiters are granted from the front of the queue, so a waiter only ever waits for
//! younger transactions: every wait-for edge points from older to younger, and there can be no
//! cycle, hence no deadlock. The test suite checks this on random schedules.
//!
//! Only tuples with a holder or a waiter have an entry, in a `BTreeMap` (deterministic order,
//! and the table stays as small as the set of locked tuples).

use pisadb_core::TupleKey;
use pisadb_wire::node::{LockMode, OnConflict};
use std::collections::{BTreeMap, VecDeque};

pub use crate::id::TxnId;

/// Outcome of a lock request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// The lock is held now.
    Granted,
    /// The request is refused; nothing is held or queued for it.
    Denied,
    /// The request waits in the queue; [`LockTable::release`] reports when it is granted.
    Waiting,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Request {
    txn: TxnId,
    ts: u64,
    mode: LockMode,
}

#[derive(Debug, Default)]
struct Lock {
    holders: Vec<Request>,
    waiters: VecDeque<Request>,
}

impl Lock {
    fn compatible(&self, mode: LockMode) -> bool {
        match mode {
            LockMode::None => true,
            LockMode::Shared => self.holders.iter().all(|h| h.mode == LockMode::Shared),
            LockMode::Exclusive => self.holders.is_empty(),
        }
    }
}

/// The lock table.
#[derive(Debug, Default)]
pub struct LockTable {
    locks: BTreeMap<TupleKey, Lock>,
}

impl LockTable {
    /// Requests `mode` on `key` for `txn` with WAIT_DIE timestamp `ts`.
    pub fn acquire(&mut self, key: TupleKey, txn: TxnId, ts: u64, mode: LockMode, policy: OnConflict) -> Acquire {
        debug_assert!(mode != LockMode::None, "LockMode::None needs no lock");
        let lock = self.locks.entry(key).or_default();
        let request = Request { txn, ts, mode };
        if lock.waiters.is_empty() && lock.compatible(mode) {
            lock.holders.push(request);
            return Acquire::Granted;
        }
        let older_than_all = lock.holders.iter().chain(&lock.waiters).all(|r| ts < r.ts);
        if policy == OnConflict::WaitDie && older_than_all {
            lock.waiters.push_back(request);
            return Acquire::Waiting;
        }
        if lock.holders.is_empty() && lock.waiters.is_empty() {
            self.locks.remove(&key);
        }
        Acquire::Denied
    }

    /// Releases `txn`'s hold on `key`, or withdraws its waiting request, and returns the
    /// transactions whose waiting requests on `key` are granted as a result, in grant order.
    pub fn release(&mut self, key: TupleKey, txn: TxnId) -> Vec<TxnId> {
        let Some(lock) = self.locks.get_mut(&key) else { return Vec::new() };
        lock.holders.retain(|h| h.txn != txn);
        lock.waiters.retain(|w| w.txn != txn);
        let mut granted = Vec::new();
        while let Some(front) = lock.waiters.front() {
            if !lock.compatible(front.mode) {
                break;
            }
            let front = lock.waiters.pop_front().expect("front exists");
            lock.holders.push(front);
            granted.push(front.txn);
        }
        if lock.holders.is_empty() && lock.waiters.is_empty() {
            self.locks.remove(&key);
        }
        granted
    }

    /// Whether `txn` holds a lock on `key` (for assertions and tests).
    pub fn holds(&self, key: TupleKey, txn: TxnId) -> bool {
        self.locks.get(&key).is_some_and(|l| l.holders.iter().any(|h| h.txn == txn))
    }

    /// The transactions holding a lock on `key`, in the order they were granted.
    pub fn holders(&self, key: TupleKey) -> impl Iterator<Item = TxnId> + '_ {
        self.locks.get(&key).into_iter().flat_map(|l| l.holders.iter().map(|h| h.txn))
    }

    /// Whether anyone holds a lock on `key`.
    pub fn is_held(&self, key: TupleKey) -> bool {
        self.locks.get(&key).is_some_and(|l| !l.holders.is_empty())
    }

    /// Every lock held, as (tuple, holder), in tuple order then grant order: what a node still
    /// holds when it should hold nothing (an end-of-run check) or what it rebuilds from a log.
    pub fn held(&self) -> impl Iterator<Item = (TupleKey, TxnId)> + '_ {
        self.locks.iter().flat_map(|(&k, l)| l.holders.iter().map(move |h| (k, h.txn)))
    }

    /// Makes `txn` the one exclusive holder of `key`, whoever held it before, and returns the
    /// former holders. For a node replaying its log or taking over a shard, which restores
    /// locks as they were rather than requesting them; waiters are left as they were.
    pub fn install_exclusive(&mut self, key: TupleKey, txn: TxnId) -> Vec<TxnId> {
        let lock = self.locks.entry(key).or_default();
        let former = lock.holders.iter().map(|h| h.txn).filter(|&t| t != txn).collect();
        lock.holders = vec![Request { txn, ts: 0, mode: LockMode::Exclusive }];
        former
    }

    /// Tuples with a holder or a waiter.
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// Whether no tuple is locked.
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// Every wait-for edge `(waiter, holder or earlier waiter)` as `(waiter ts, blocker ts)`.
    pub fn wait_edges(&self) -> Vec<(u64, u64)> {
        let mut edges = Vec::new();
        for lock in self.locks.values() {
            for (i, w) in lock.waiters.iter().enumerate() {
                for b in lock.holders.iter().chain(lock.waiters.iter().take(i)) {
                    edges.push((w.ts, b.ts));
                }
            }
        }
        edges
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn k(r: u64) -> TupleKey {
        TupleKey::new(0, r)
    }

    fn t(n: u64) -> TxnId {
        TxnId::from_bits(n)
    }

    #[test]
    fn shared_locks_share_and_exclusive_excludes() {
        let mut locks = LockTable::default();
        assert_eq!(locks.acquire(k(1), t(1), 1, LockMode::Shared, OnConflict::Deny), Acquire::Granted);
        assert_eq!(locks.acquire(k(1), t(2), 2, LockMode::Shared, OnConflict::Deny), Acquire::Granted);
        assert_eq!(locks.acquire(k(1), t(3), 3, LockMode::Exclusive, OnConflict::Deny), Acquire::Denied);
        locks.release(k(1), t(1));
        locks.release(k(1), t(2));
        assert!(locks.is_empty());
        assert_eq!(locks.acquire(k(1), t(3), 3, LockMode::Exclusive, OnConflict::Deny), Acquire::Granted);
    }

    #[test]
    fn no_wait_never_queues() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut locks = LockTable::default();
        for txn in 0..2000 {
            let mode = if rng.random_bool(0.5) { LockMode::Shared } else { LockMode::Exclusive };
            let key = k(rng.random_range(0..5));
            assert_ne!(locks.acquire(key, t(txn), txn, mode, OnConflict::Deny), Acquire::Waiting);
            if rng.random_bool(0.3) {
                locks.release(key, t(rng.random_range(0..=txn)));
            }
        }
        assert!(locks.wait_edges().is_empty());
    }

    #[test]
    fn wait_die_makes_the_young_die_and_the_old_wait() {
        let mut locks = LockTable::default();
        assert_eq!(locks.acquire(k(1), t(10), 10, LockMode::Exclusive, OnConflict::WaitDie), Acquire::Granted);
        assert_eq!(
            locks.acquire(k(1), t(20), 20, LockMode::Exclusive, OnConflict::WaitDie),
            Acquire::Denied,
            "younger dies"
        );
        assert_eq!(
            locks.acquire(k(1), t(5), 5, LockMode::Shared, OnConflict::WaitDie),
            Acquire::Waiting,
            "older waits"
        );
        assert_eq!(
            locks.acquire(k(1), t(7), 7, LockMode::Shared, OnConflict::WaitDie),
            Acquire::Denied,
            "younger than a waiter"
        );
        assert_eq!(locks.release(k(1), t(10)), vec![t(5)]);
        assert!(locks.holds(k(1), t(5)));
    }

    #[test]
    fn holders_are_listed_and_an_installed_lock_replaces_them() {
        let mut locks = LockTable::default();
        assert!(!locks.is_held(k(1)));
        locks.acquire(k(1), t(1), 1, LockMode::Shared, OnConflict::Deny);
        locks.acquire(k(1), t(2), 2, LockMode::Shared, OnConflict::Deny);
        locks.acquire(k(3), t(3), 3, LockMode::Exclusive, OnConflict::Deny);
        assert_eq!(locks.holders(k(1)).collect::<Vec<_>>(), vec![t(1), t(2)]);
        assert_eq!(locks.held().collect::<Vec<_>>(), vec![(k(1), t(1)), (k(1), t(2)), (k(3), t(3))]);
        assert_eq!(locks.install_exclusive(k(1), t(9)), vec![t(1), t(2)]);
        assert!(locks.holds(k(1), t(9)) && !locks.holds(k(1), t(1)));
        assert_eq!(locks.acquire(k(1), t(4), 4, LockMode::Shared, OnConflict::Deny), Acquire::Denied);
        locks.release(k(1), t(9));
        assert!(!locks.is_held(k(1)));
    }

    /// Random schedules: under WAIT_DIE every wait-for edge goes from an older transaction to
    /// a younger one, so the wait-for graph is acyclic at every step.
    #[test]
    fn wait_die_waits_only_for_younger_transactions() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut locks = LockTable::default();
        let mut live: Vec<(TxnId, TupleKey)> = Vec::new();
        for step in 0..20_000u64 {
            if rng.random_bool(0.6) || live.is_empty() {
                let ts = rng.random_range(0..1000);
                let txn = t(step);
                let mode = if rng.random_bool(0.5) { LockMode::Shared } else { LockMode::Exclusive };
                let key = k(rng.random_range(0..4));
                if locks.acquire(key, txn, ts, mode, OnConflict::WaitDie) != Acquire::Denied {
                    live.push((txn, key));
                }
            } else {
                let (txn, key) = live.swap_remove(rng.random_range(0..live.len()));
                locks.release(key, txn);
            }
            assert!(locks.wait_edges().iter().all(|&(w, b)| w < b), "step {step}: a wait for an older txn");
        }
    }
}
