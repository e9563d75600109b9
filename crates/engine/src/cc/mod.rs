//! One interface to concurrency control: two-phase locking, OCC and timestamp ordering.
//!
//! A participant — the node that owns some of a transaction's tuples — does four things for
//! the transaction whatever scheme keeps it isolated: it reads tuples, buffers writes, is asked
//! whether the transaction can commit (phase one of two-phase commit), and then commits or
//! aborts it. [`Concurrency`] is exactly that, and each scheme is one implementation:
//!
//! | scheme | `read` | `write` | `prepare` | who uses it |
//! |---|---|---|---|---|
//! | [`TwoPhaseLocking`] (NO_WAIT, WAIT_DIE) | lock, then read; may wait | buffer (lock held) | yes | P4DB's nodes and baselines |
//! | [`Occ`] | read, remember the version | buffer | lock writes, validate reads | stores that validate at one node |
//! | [`TimestampOrdering`] | refuse if a younger write is there | refuse if a younger read or write is there | yes | TransKV's storage nodes |
//!
//! ## The contract
//!
//! 1. [`Concurrency::begin`] registers a transaction with its timestamp (smaller = older; used
//!    by WAIT_DIE and timestamp ordering, ignored by OCC).
//! 2. [`Concurrency::read`] each tuple once, with the strongest [`Intent`] the transaction has
//!    for it, before writing it. A read may *wait* (2PL WAIT_DIE): the transaction makes no
//!    progress until another transaction's commit or abort returns a [`Grant`] for it, which
//!    carries the tuple.
//! 3. [`Concurrency::write`] buffers new values; nothing is visible before commit.
//! 4. [`Concurrency::prepare`]: after `Ok`, commit cannot fail (the participant may vote yes).
//! 5. [`Concurrency::commit`] installs the writes (each tuple's new version is the
//!    transaction's id) and lets go of everything; [`Concurrency::abort`] drops the writes and
//!    lets go. Both return the grants of transactions that waited for what was let go.
//!
//! Any call may answer [`TxnError::Abort`]: the transaction conflicts with another and must be
//! aborted (by calling `abort`, which also withdraws what it holds) and may be retried.
//! [`TxnError::Fatal`] means the caller broke this contract — a bug, never retried.
//!
//! ## Work, for the cost model
//!
//! The engine reads no clock. Each call adds what it did to a [`Work`] meter — operations on
//! concurrency-control state (a lock acquired or released, a version validated, a timestamp
//! checked) and tuple reads or writes in storage — which the caller prices with its calibrated
//! CPU costs. The read that hands a waiting transaction its granted tuple is part of the
//! release that granted it and is not counted again.
//!
//! ## Correctness
//!
//! Every scheme is checked the same way in `tests`: random transactions under random
//! interleavings of their steps, committed histories recorded with the versions they read and
//! overwrote, and `pisadb_check::History` asked whether they are conflict-serializable.

mod occ;
mod tso;
mod two_phase;

#[cfg(test)]
mod tests;

pub use occ::Occ;
pub use tso::TimestampOrdering;
pub use two_phase::TwoPhaseLocking;

use crate::id::{Timestamp, TxnId};
use crate::storage::{Storage, StorageError};
use crate::store::Tuple;
use pisadb_core::TupleKey;
use thiserror::Error;

/// What a transaction means to do with a tuple it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Intent {
    /// Read it only (2PL: a shared lock).
    Read,
    /// Read it and write it later (2PL: an exclusive lock, taken now).
    Write,
    /// Read it under no concurrency control here: the caller isolates this tuple by other
    /// means (a lock held in a switch's lock manager, say). It may still be written.
    Unguarded,
}

/// The work a call did, for the caller's CPU cost model (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Operations on concurrency-control state: lock acquires and releases, version
    /// validations, timestamp checks.
    pub cc_ops: u64,
    /// Tuple reads and writes in storage.
    pub tuple_ops: u64,
}

/// How a read went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The tuple as the transaction sees it.
    Done(Tuple),
    /// The transaction waits for the tuple; a [`Grant`] will carry it.
    Waiting,
}

/// A waiting read that may go on: another transaction let go of `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The transaction that waited.
    pub txn: TxnId,
    /// The tuple it waited for.
    pub key: TupleKey,
    /// The tuple as the transaction sees it.
    pub tuple: Tuple,
}

/// Why a transaction must abort: a conflict with another transaction (retrying may succeed).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum Conflict {
    /// 2PL: the lock is held or wanted by another transaction, and the policy says die.
    #[error("the lock on {key:?} is taken and the request may not wait")]
    LockDenied {
        /// The tuple.
        key: TupleKey,
    },
    /// OCC: a tuple read changed before the transaction validated.
    #[error("{key:?} changed since it was read (version {read_version:#x} read, {current_version:#x} now)")]
    Changed {
        /// The tuple.
        key: TupleKey,
        /// The version the transaction read.
        read_version: u64,
        /// The version there now.
        current_version: u64,
    },
    /// OCC: another transaction is committing a write of the tuple.
    #[error("{key:?} is locked for commit by another transaction")]
    Locked {
        /// The tuple.
        key: TupleKey,
    },
    /// Timestamp ordering: a younger transaction already read or wrote the tuple.
    #[error("timestamp {ts} is too late for {key:?}, which a transaction with timestamp {seen} already used")]
    TooLate {
        /// The tuple.
        key: TupleKey,
        /// The transaction's timestamp.
        ts: Timestamp,
        /// The younger timestamp found on the tuple.
        seen: Timestamp,
    },
    /// Timestamp ordering: another transaction's write of the tuple is not committed yet.
    #[error("{key:?} has an uncommitted write by another transaction")]
    Pending {
        /// The tuple.
        key: TupleKey,
    },
}

/// A call that breaks the contract (a bug in the caller; never retried).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Misuse {
    /// A call for a transaction that never began (or already ended).
    #[error("transaction {txn} is not active here")]
    UnknownTxn {
        /// The transaction.
        txn: TxnId,
    },
    /// `begin` of a transaction that is active already.
    #[error("transaction {txn} began already")]
    AlreadyActive {
        /// The transaction.
        txn: TxnId,
    },
    /// A write after `prepare` (the write set is fixed by then).
    #[error("transaction {txn} is prepared: it may only commit or abort")]
    Prepared {
        /// The transaction.
        txn: TxnId,
    },
    /// `commit` before a successful `prepare`, where the scheme validates at prepare.
    #[error("transaction {txn} commits without a successful prepare")]
    NotPrepared {
        /// The transaction.
        txn: TxnId,
    },
    /// A call while the transaction waits for a lock (only a grant or an abort may follow).
    #[error("transaction {txn} waits for {key:?}: only a grant or an abort may follow")]
    Waiting {
        /// The transaction.
        txn: TxnId,
        /// What it waits for.
        key: TupleKey,
    },
    /// 2PL: a write of a tuple the transaction holds no exclusive lock on and did not read
    /// unguarded.
    #[error("transaction {txn} writes {key:?} without an exclusive lock (read it with Intent::Write first)")]
    WriteWithoutLock {
        /// The transaction.
        txn: TxnId,
        /// The tuple.
        key: TupleKey,
    },
    /// 2PL: a read with `Intent::Write` of a tuple the transaction holds shared (locks are not
    /// upgraded: read each tuple once, with the strongest intent).
    #[error("transaction {txn} asks to upgrade its shared lock on {key:?}")]
    Upgrade {
        /// The transaction.
        txn: TxnId,
        /// The tuple.
        key: TupleKey,
    },
    /// Storage refused a write at commit.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// What went wrong: abort and retry, or a fatal bug.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TxnError {
    /// A conflict: abort the transaction (and retry it, if the system does).
    #[error("abort: {0}")]
    Abort(#[from] Conflict),
    /// The caller broke the contract: not retried.
    #[error("fatal: {0}")]
    Fatal(#[from] Misuse),
}

impl TxnError {
    /// Whether the transaction may be retried (a conflict, not a bug).
    pub fn is_retryable(&self) -> bool {
        matches!(self, TxnError::Abort(_))
    }
}

/// A concurrency-control scheme as a participant uses it (see the module documentation).
pub trait Concurrency {
    /// Registers `txn` with timestamp `ts` (smaller = older).
    fn begin(&mut self, txn: TxnId, ts: Timestamp) -> Result<(), TxnError>;

    /// Reads `key` for `txn` with `intent`.
    fn read<S: Storage + ?Sized>(
        &mut self,
        storage: &S,
        txn: TxnId,
        key: TupleKey,
        intent: Intent,
        work: &mut Work,
    ) -> Result<Read, TxnError>;

    /// Buffers `value` as `txn`'s new value of `key`, installed at commit.
    fn write(&mut self, txn: TxnId, key: TupleKey, value: i64, work: &mut Work) -> Result<(), TxnError>;

    /// Phase one: whether `txn` can commit. After `Ok`, [`Concurrency::commit`] cannot fail
    /// for a conflict.
    fn prepare<S: Storage + ?Sized>(&mut self, storage: &S, txn: TxnId, work: &mut Work) -> Result<(), TxnError>;

    /// Installs `txn`'s writes, each tuple's version becoming `txn`, and ends it.
    fn commit<S: Storage + ?Sized>(
        &mut self,
        storage: &mut S,
        txn: TxnId,
        work: &mut Work,
    ) -> Result<Vec<Grant>, TxnError>;

    /// Drops `txn`'s writes and ends it, withdrawing whatever it holds or waits for. A
    /// transaction that is not active is ignored (aborts may be repeated).
    fn abort<S: Storage + ?Sized>(&mut self, storage: &S, txn: TxnId, work: &mut Work) -> Vec<Grant>;

    /// Whether `txn` is active (began, not yet committed or aborted).
    fn is_active(&self, txn: TxnId) -> bool;

    /// Active transactions.
    fn active(&self) -> usize;
}

/// The tuple `key` as a read sees it: a tuple storage does not hold reads as never written
/// (value 0, version 0), as a row not created yet would.
fn stored<S: Storage + ?Sized>(storage: &S, key: TupleKey) -> Tuple {
    storage.get(key).unwrap_or_default()
}

/// Installs `txn`'s buffered `writes` in order, each tuple's version becoming `txn`, counting
/// a tuple operation per write: what every scheme's commit does. Every write is attempted; the
/// first one the storage refused is the error.
fn install<S: Storage + ?Sized>(
    storage: &mut S,
    txn: TxnId,
    writes: &[(TupleKey, i64)],
    work: &mut Work,
) -> Result<(), TxnError> {
    let mut refused = None;
    for &(key, value) in writes {
        work.tuple_ops += 1;
        if let Err(e) = storage.put(key, Tuple { value, version: txn.bits() }) {
            refused.get_or_insert(e);
        }
    }
    match refused {
        Some(e) => Err(Misuse::Storage(e).into()),
        None => Ok(()),
    }
}
