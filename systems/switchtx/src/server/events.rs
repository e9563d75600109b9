//! What a server asks the driver for and tells it: its timers and its events.

use pisadb_core::{Nanos, TraceBytes, TraceHash};
use serde::Serialize;

/// A timer of a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerTimer {
    /// Thread `0`'s admission-control epoch ends.
    Epoch(u16),
    /// The attempt `attempt` of (thread, lane) may have timed out.
    Timeout(u16, u8, u32),
    /// The lane whose attempt `attempt` timed out and was resolved as aborted has backed off
    /// long enough: retry (the client's retry backoff).
    Retry(u16, u8, u32),
    /// Time to renew the lease (and, at the manager, to look for lapsed ones).
    Lease,
    /// A promoted primary's resolution of (slot, attempt) may need its query or decision sent
    /// again.
    Recover(u16, u32),
    /// Thread `0`'s clients may start transactions (the server's first lease grant came).
    Fill(u16),
}

impl TraceBytes for ServerTimer {
    fn trace(&self, hash: &mut TraceHash) {
        match *self {
            ServerTimer::Epoch(t) => {
                hash.write(&[1]);
                hash.write(&t.to_be_bytes());
            }
            ServerTimer::Timeout(t, l, a) => {
                hash.write(&[2, l]);
                hash.write(&t.to_be_bytes());
                hash.write(&a.to_be_bytes());
            }
            ServerTimer::Retry(t, l, a) => {
                hash.write(&[3, l]);
                hash.write(&t.to_be_bytes());
                hash.write(&a.to_be_bytes());
            }
            ServerTimer::Lease => hash.write(&[4]),
            ServerTimer::Recover(slot, a) => {
                hash.write(&[5]);
                hash.write(&slot.to_be_bytes());
                hash.write(&a.to_be_bytes());
            }
            ServerTimer::Fill(t) => {
                hash.write(&[6]);
                hash.write(&t.to_be_bytes());
            }
        }
    }
}

/// Why an attempt aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum AbortReason {
    /// A read found the record locked.
    ReadLocked,
    /// A participant failed to lock or validate.
    Fail,
    /// Resolved as aborted after a timeout.
    Timeout,
}

/// What a server reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerEvent {
    /// A client's transaction committed.
    Committed {
        /// Its id (the committing attempt's).
        txn: u64,
        /// From its first attempt's start.
        latency_ns: Nanos,
        /// Attempts before the one that committed.
        retries: u32,
        /// (key, version read) of every key.
        reads: Vec<(u64, u64)>,
        /// Whether it was read-only (no primary installs anything for it).
        read_only: bool,
    },
    /// An attempt aborted.
    Aborted(AbortReason),
    /// A primary installed a write: (txn, key, the version it overwrote).
    Installed(u64, u64, u64),
    /// A primary released the locks of an attempt held for this long.
    LockTime(Nanos),
    /// A thread's MPL after an epoch.
    Mpl(u16, u8),
    /// An attempt timed out.
    Timeout,
    /// A datagram was not understood.
    Rejected(&'static str),
}
