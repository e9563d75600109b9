//! Two-phase locking over the [`LockTable`]: NO_WAIT and WAIT_DIE.
//!
//! A read takes the tuple's lock first — shared to read, exclusive to write later, none for a
//! tuple isolated elsewhere ([`Intent::Unguarded`]) — and reads it once the lock is held. A
//! lock that is taken either denies the request (NO_WAIT; WAIT_DIE when the requester is
//! younger) or queues it (WAIT_DIE, older requester): the read then *waits*, and the commit or
//! abort of a holder that hands the lock over returns a [`Grant`] with the tuple. Locks are
//! held to the end (commit or abort), so growing and shrinking never overlap: strict 2PL.
//!
//! Writes are buffered and installed at commit, under the exclusive locks taken by the reads
//! (or for tuples read unguarded, under whatever isolates them). `prepare` has nothing to
//! check: a transaction whose reads all went through holds every lock it needs.
//!
//! ## What is released, in which order
//!
//! Commit installs the writes in the order given, then releases the held locks in the order
//! they were granted. Abort releases the held locks in that order and then withdraws the
//! request that did not get through (the one waiting, or the one just denied — withdrawing a
//! denied request changes nothing in the table, but is one more lock-table operation, and the
//! cost model counts it). The order matters to the grants a release hands out, and hence to
//! which transaction goes on first; P4DB's figures are pinned to it.

use super::{install, stored, Concurrency, Conflict, Grant, Intent, Misuse, Read, TxnError, Work};
use crate::id::{Timestamp, TxnId};
use crate::locks::{Acquire, LockTable};
use crate::storage::Storage;
use crate::store::Tuple;
use pisadb_core::TupleKey;
use pisadb_wire::node::{LockMode, OnConflict};
use std::collections::BTreeMap;

/// Strict two-phase locking (see the module documentation).
#[derive(Debug)]
pub struct TwoPhaseLocking {
    /// The locks of every tuple that has a holder or a waiter.
    locks: LockTable,
    /// What a conflict means for a transaction begun with [`Concurrency::begin`].
    policy: OnConflict,
    /// Active transactions.
    txns: BTreeMap<TxnId, Locking>,
}

/// One active transaction's locks and writes.
#[derive(Debug)]
struct Locking {
    /// Its WAIT_DIE timestamp.
    ts: Timestamp,
    /// What a conflict means for it.
    policy: OnConflict,
    /// Locks held, in the order they were granted.
    held: Vec<(TupleKey, LockMode)>,
    /// The request that did not get through: waiting in a queue, or just denied.
    blocked: Option<(TupleKey, LockMode)>,
    /// Tuples read unguarded (isolated elsewhere; they may be written without a lock here).
    unguarded: Vec<TupleKey>,
    /// Buffered writes, installed in this order at commit.
    writes: Vec<(TupleKey, i64)>,
}

impl TwoPhaseLocking {
    /// No transaction yet; conflicts handled by `policy` unless a transaction begins with its own.
    pub fn new(policy: OnConflict) -> Self {
        TwoPhaseLocking { locks: LockTable::default(), policy, txns: BTreeMap::new() }
    }

    /// Registers `txn` like [`Concurrency::begin`], with its own conflict `policy` (a request
    /// from another node says which one it wants).
    pub fn begin_with(&mut self, txn: TxnId, ts: Timestamp, policy: OnConflict) -> Result<(), TxnError> {
        if self.txns.contains_key(&txn) {
            return Err(Misuse::AlreadyActive { txn }.into());
        }
        let locking =
            Locking { ts, policy, held: Vec::new(), blocked: None, unguarded: Vec::new(), writes: Vec::new() };
        self.txns.insert(txn, locking);
        Ok(())
    }

    /// The lock table (for counts and assertions).
    pub fn lock_table(&self) -> &LockTable {
        &self.locks
    }

    /// Locks `txn` holds (0 if it is not active).
    pub fn held_by(&self, txn: TxnId) -> usize {
        self.txns.get(&txn).map_or(0, |t| t.held.len())
    }

    /// `txn`'s buffered writes, in order (empty if it is not active).
    pub fn writes_of(&self, txn: TxnId) -> &[(TupleKey, i64)] {
        self.txns.get(&txn).map_or(&[], |t| &t.writes)
    }

    /// Releases `txn`'s locks on `keys` in order, handing each lock to whoever waited for it.
    fn release<S: Storage + ?Sized>(
        &mut self,
        storage: &S,
        txn: TxnId,
        keys: impl IntoIterator<Item = TupleKey>,
        work: &mut Work,
    ) -> Vec<Grant> {
        let mut grants = Vec::new();
        for key in keys {
            work.cc_ops += 1;
            for waiter in self.locks.release(key, txn) {
                // The contract has a transaction commit only when nothing of it waits; one that
                // broke it (see `commit`) may be granted a lock after it ended, which then goes
                // to nobody active.
                let Some(w) = self.txns.get_mut(&waiter) else { continue };
                let Some((_, mode)) = w.blocked.take() else { continue };
                w.held.push((key, mode));
                grants.push(Grant { txn: waiter, key, tuple: stored(storage, key) });
            }
        }
        grants
    }
}

impl Concurrency for TwoPhaseLocking {
    fn begin(&mut self, txn: TxnId, ts: Timestamp) -> Result<(), TxnError> {
        self.begin_with(txn, ts, self.policy)
    }

    fn read<S: Storage + ?Sized>(
        &mut self,
        storage: &S,
        txn: TxnId,
        key: TupleKey,
        intent: Intent,
        work: &mut Work,
    ) -> Result<Read, TxnError> {
        let t = self.txns.get_mut(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        if let Some((waiting, _)) = t.blocked {
            return Err(Misuse::Waiting { txn, key: waiting }.into());
        }
        let mode = match intent {
            Intent::Read => LockMode::Shared,
            Intent::Write => LockMode::Exclusive,
            Intent::Unguarded => LockMode::None,
        };
        match t.held.iter().find(|&&(k, _)| k == key) {
            Some(&(_, held)) if held < mode => return Err(Misuse::Upgrade { txn, key }.into()),
            Some(_) => {}
            None if mode == LockMode::None => t.unguarded.push(key),
            None => {
                work.cc_ops += 1;
                match self.locks.acquire(key, txn, t.ts, mode, t.policy) {
                    Acquire::Granted => t.held.push((key, mode)),
                    Acquire::Waiting => {
                        t.blocked = Some((key, mode));
                        return Ok(Read::Waiting);
                    }
                    Acquire::Denied => {
                        t.blocked = Some((key, mode));
                        return Err(Conflict::LockDenied { key }.into());
                    }
                }
            }
        }
        work.tuple_ops += 1;
        let own = t.writes.iter().rev().find(|&&(k, _)| k == key);
        Ok(Read::Done(match own {
            Some(&(_, value)) => Tuple { value, version: txn.bits() },
            None => stored(storage, key),
        }))
    }

    fn write(&mut self, txn: TxnId, key: TupleKey, value: i64, _work: &mut Work) -> Result<(), TxnError> {
        let t = self.txns.get_mut(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        let exclusive = t.held.iter().any(|&(k, mode)| k == key && mode == LockMode::Exclusive);
        if !exclusive && !t.unguarded.contains(&key) {
            return Err(Misuse::WriteWithoutLock { txn, key }.into());
        }
        t.writes.push((key, value));
        Ok(())
    }

    fn prepare<S: Storage + ?Sized>(&mut self, _storage: &S, txn: TxnId, _work: &mut Work) -> Result<(), TxnError> {
        let t = self.txns.get(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        match t.blocked {
            Some((key, _)) => Err(Misuse::Waiting { txn, key }.into()),
            None => Ok(()),
        }
    }

    /// Installs the writes and releases the held locks. A request still queued stays queued
    /// (the contract rules it out: a transaction commits once its reads are done).
    fn commit<S: Storage + ?Sized>(
        &mut self,
        storage: &mut S,
        txn: TxnId,
        work: &mut Work,
    ) -> Result<Vec<Grant>, TxnError> {
        let t = self.txns.remove(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        // Installed before the release: a read granted by the release sees the new values.
        let installed = install(storage, txn, &t.writes, work);
        let grants = self.release(storage, txn, t.held.iter().map(|&(k, _)| k), work);
        installed.map(|()| grants)
    }

    fn abort<S: Storage + ?Sized>(&mut self, storage: &S, txn: TxnId, work: &mut Work) -> Vec<Grant> {
        let Some(t) = self.txns.remove(&txn) else { return Vec::new() };
        let mut keys: Vec<TupleKey> = t.held.iter().map(|&(k, _)| k).collect();
        if let Some((key, mode)) = t.blocked {
            if mode != LockMode::None && !keys.contains(&key) {
                keys.push(key);
            }
        }
        self.release(storage, txn, keys, work)
    }

    fn is_active(&self, txn: TxnId) -> bool {
        self.txns.contains_key(&txn)
    }

    fn active(&self) -> usize {
        self.txns.len()
    }
}
