//! Optimistic concurrency control: read freely, validate at commit (Kung and Robinson, 1981).
//!
//! This is the OCC of a store that validates a whole read set at one node, as one that commits
//! a transaction only if every value it read is still current. (A system whose validation is
//! spread over participants, each checking its own keys after every write lock is held,
//! takes only the [`crate::locks::LockTable`] for its write locks: validating at one
//! participant without that ordering across participants would allow write skew.)
//!
//! - **Execute.** A read takes no lock: it returns the current tuple and remembers its
//!   version (the id of the transaction that wrote it). Writes are buffered.
//! - **Prepare** (lock, then validate). The write set is locked in key order; a tuple locked
//!   by another committing transaction aborts this one (no waiting, so no deadlock). Then every
//!   read is validated: its tuple must still have the version read and not be locked by
//!   another transaction. Success is the serialization point.
//! - **Commit** installs the writes (version = this transaction) and unlocks them.
//!
//! Why it is serializable: take the order of successful prepares. A transaction T that
//! validated read x at version v saw v still current and x unlocked at its prepare, so any
//! writer of x that prepared before T had committed before T read x (T saw its version or a
//! later one), and any writer that prepares after T locks x after T's validation and installs
//! a later version: every conflict edge points forward in the prepare order.
//!
//! Versions are unique per write (they are transaction ids), so a changed tuple can never look
//! unchanged (no ABA).

use super::{install, stored, Concurrency, Conflict, Grant, Intent, Misuse, Read, TxnError, Work};
use crate::id::{Timestamp, TxnId};
use crate::storage::Storage;
use crate::store::Tuple;
use pisadb_core::TupleKey;
use std::collections::BTreeMap;

/// Optimistic concurrency control (see the module documentation).
#[derive(Debug, Default)]
pub struct Occ {
    /// Tuples locked for commit, with the transaction committing them.
    locked: BTreeMap<TupleKey, TxnId>,
    /// Active transactions.
    txns: BTreeMap<TxnId, Optimistic>,
}

/// One active transaction's read and write sets.
#[derive(Debug, Default)]
struct Optimistic {
    /// Tuples read under validation, with the version read.
    reads: Vec<(TupleKey, u64)>,
    /// Buffered writes, one per tuple, installed in this order at commit.
    writes: Vec<(TupleKey, i64)>,
    /// Tuples this transaction locked at prepare.
    locked: Vec<TupleKey>,
    /// Whether it validated: only commit or abort may follow.
    prepared: bool,
}

impl Occ {
    /// No transaction yet.
    pub fn new() -> Self {
        Occ::default()
    }

    /// Tuples locked for commit right now.
    pub fn locked_tuples(&self) -> usize {
        self.locked.len()
    }

    fn unlock(&mut self, txn: TxnId, keys: &[TupleKey], work: &mut Work) {
        for key in keys {
            work.cc_ops += 1;
            if self.locked.get(key) == Some(&txn) {
                self.locked.remove(key);
            }
        }
    }
}

impl Concurrency for Occ {
    fn begin(&mut self, txn: TxnId, _ts: Timestamp) -> Result<(), TxnError> {
        if self.txns.contains_key(&txn) {
            return Err(Misuse::AlreadyActive { txn }.into());
        }
        self.txns.insert(txn, Optimistic::default());
        Ok(())
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
        work.tuple_ops += 1;
        if let Some(&(_, value)) = t.writes.iter().find(|&&(k, _)| k == key) {
            return Ok(Read::Done(Tuple { value, version: txn.bits() }));
        }
        let tuple = stored(storage, key);
        if intent != Intent::Unguarded {
            t.reads.push((key, tuple.version));
        }
        Ok(Read::Done(tuple))
    }

    fn write(&mut self, txn: TxnId, key: TupleKey, value: i64, _work: &mut Work) -> Result<(), TxnError> {
        let t = self.txns.get_mut(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        if t.prepared {
            return Err(Misuse::Prepared { txn }.into());
        }
        match t.writes.iter_mut().find(|(k, _)| *k == key) {
            Some(w) => w.1 = value,
            None => t.writes.push((key, value)),
        }
        Ok(())
    }

    fn prepare<S: Storage + ?Sized>(&mut self, storage: &S, txn: TxnId, work: &mut Work) -> Result<(), TxnError> {
        let t = self.txns.get_mut(&txn).ok_or(Misuse::UnknownTxn { txn })?;
        if t.prepared {
            return Ok(());
        }
        let mut keys: Vec<TupleKey> = t.writes.iter().map(|&(k, _)| k).collect();
        keys.sort_unstable();
        for key in keys {
            work.cc_ops += 1;
            match self.locked.get(&key) {
                Some(&other) if other != txn => return Err(Conflict::Locked { key }.into()),
                Some(_) => {}
                None => {
                    self.locked.insert(key, txn);
                    t.locked.push(key);
                }
            }
        }
        for &(key, read_version) in &t.reads {
            work.cc_ops += 1;
            if self.locked.get(&key).is_some_and(|&other| other != txn) {
                return Err(Conflict::Locked { key }.into());
            }
            let current_version = stored(storage, key).version;
            if current_version != read_version {
                return Err(Conflict::Changed { key, read_version, current_version }.into());
            }
        }
        t.prepared = true;
        Ok(())
    }

    fn commit<S: Storage + ?Sized>(
        &mut self,
        storage: &mut S,
        txn: TxnId,
        work: &mut Work,
    ) -> Result<Vec<Grant>, TxnError> {
        match self.txns.get(&txn) {
            None => return Err(Misuse::UnknownTxn { txn }.into()),
            Some(t) if !t.prepared => return Err(Misuse::NotPrepared { txn }.into()),
            Some(_) => {}
        }
        let t = self.txns.remove(&txn).expect("checked above");
        let installed = install(storage, txn, &t.writes, work);
        self.unlock(txn, &t.locked, work);
        installed.map(|()| Vec::new())
    }

    fn abort<S: Storage + ?Sized>(&mut self, _storage: &S, txn: TxnId, work: &mut Work) -> Vec<Grant> {
        if let Some(t) = self.txns.remove(&txn) {
            self.unlock(txn, &t.locked, work);
        }
        Vec::new()
    }

    fn is_active(&self, txn: TxnId) -> bool {
        self.txns.contains_key(&txn)
    }

    fn active(&self) -> usize {
        self.txns.len()
    }
}
