//! # pisadb-engine: the host-side transaction machinery every system shares
//!
//! What a database node needs whichever switch it sits behind, as sans-IO pieces that read no
//! clock and send nothing (they say what is due; the host does it):
//!
//! - [`id`]: transaction ids that say where an attempt runs (node, incarnation, worker, lane)
//!   and timestamps that order transactions;
//! - [`storage`]: the [`Storage`] trait, with [`store::Store`], dense in-memory arrays, behind it;
//! - [`cc`]: one [`Concurrency`] interface a participant reads, writes, prepares, commits and
//!   aborts through, implemented by two-phase locking (NO_WAIT, WAIT_DIE, over the [`locks`]
//!   table), optimistic concurrency control and timestamp ordering;
//! - [`twopc`]: two-phase commit's coordinator rounds, decisions and inquiries, and the
//!   participant's served transactions, votes and leases;
//! - [`worker`]: worker lanes with their attempt ids, retries and seeded backoff.
//!
//! Systems build their hosts from these pieces; none of them names a system.
//!
//! See `docs/ARCHITECTURE.md` (the layers) for the page that explains it.

#![warn(missing_docs)]

pub mod cc;
pub mod id;
pub mod locks;
pub mod storage;
pub mod store;
pub mod twopc;
pub mod worker;

pub use cc::{
    Concurrency, Conflict, Grant, Intent, Misuse, Occ, Read, TimestampOrdering, TwoPhaseLocking, TxnError, Work,
};
pub use id::{IdError, Lanes, Slot, Timestamp, TxnId};
pub use locks::{Acquire, LockTable};
pub use storage::{Storage, StorageError};
pub use store::{Store, Tuple};
pub use twopc::{Decisions, LeaseAction, Origin, Outcome, Participant, Round, Served, Tally};
pub use worker::{Backoff, Job, Workers};
