//! # pisadb-engine: the host-side transaction machinery every system shares
//!
//! What a database node needs whichever switch it sits behind: transaction ids that say where
//! an attempt runs ([`id`]), its partition of the data ([`store`]) and a lock table for
//! two-phase locking with NO_WAIT or WAIT_DIE ([`locks`]). Systems build their hosts from these
//! pieces; none of them names a system.

#![warn(missing_docs)]

pub mod cc;
pub mod id;
pub mod locks;
pub mod storage;
pub mod store;

pub use cc::{
    Concurrency, Conflict, Grant, Intent, Misuse, Occ, Read, TimestampOrdering, TwoPhaseLocking, TxnError, Work,
};
pub use id::{IdError, Lanes, Slot, Timestamp, TxnId};
pub use locks::{Acquire, LockTable};
pub use storage::{Storage, StorageError};
pub use store::{Store, Tuple};
