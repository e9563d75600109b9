//! Storage behind a trait: what concurrency control and recovery need from a node's data.
//!
//! A node's tuples may live in dense in-memory arrays ([`crate::store::Store`], what P4DB's
//! nodes use) or in an embedded key-value store on disk (an LSM tree, for a system whose paper
//! has one). Everything above storage — the lock table, the OCC validator, timestamp ordering,
//! the redo of a write-ahead log — only needs five things, and this trait is those five:
//!
//! - [`Storage::get`]: the current tuple (value and version);
//! - [`Storage::put`]: overwrite a tuple that exists;
//! - [`Storage::create`]: create a row that does not exist yet (rows transactions insert);
//! - [`Storage::created_rows`]: how many rows were created (oracles check inserts against it);
//! - [`Storage::scan`]: every tuple, in a deterministic order (checkers compare stores).
//!
//! A tuple's *version* is the id of the transaction attempt that last wrote it (0: the initial
//! load). Concurrency control relies on it being unique per write: OCC validates a read by
//! comparing versions, and the serializability checker names versions by their writers.
//!
//! Storage does no concurrency control of its own: whoever calls `put` holds whatever the
//! concurrency-control scheme requires (a lock, a validated write set, a timestamp check).
//! Its errors are never a reason to retry a transaction: a write to a tuple the node does not
//! hold or a row created twice is a bug in the caller, and an I/O failure of a backend is
//! fatal to the node.

use crate::store::Tuple;
use pisadb_core::TupleKey;
use thiserror::Error;

/// A storage operation that cannot be carried out (fatal: see the module documentation).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum StorageError {
    /// `put` of a tuple this storage does not hold.
    #[error("{key:?} is not held here: put overwrites existing tuples only")]
    NotHeld {
        /// The tuple.
        key: TupleKey,
    },
    /// `create` of a row that exists already, or that belongs to another node.
    #[error("{key:?} cannot be created here: it exists already or another node owns it")]
    NotCreatable {
        /// The row.
        key: TupleKey,
    },
    /// The backend failed (an I/O error of an on-disk store).
    #[error("storage backend failed on {key:?}: {reason}")]
    Backend {
        /// The tuple.
        key: TupleKey,
        /// What the backend said.
        reason: String,
    },
}

/// A node's tuples (see the module documentation).
pub trait Storage {
    /// The tuple `key`, if this storage holds it.
    fn get(&self, key: TupleKey) -> Option<Tuple>;

    /// Overwrites tuple `key`, which must exist.
    fn put(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError>;

    /// Creates row `key`, which must not exist yet and must belong here.
    fn create(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError>;

    /// Rows created by [`Storage::create`] so far.
    fn created_rows(&self) -> usize;

    /// Calls `visit` with every tuple, in an order that depends only on the contents.
    fn scan(&self, visit: &mut dyn FnMut(TupleKey, Tuple));
}
