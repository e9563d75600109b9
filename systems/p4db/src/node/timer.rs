//! The timers a node asks for, and the bytes they add to the simulator's trace hash.
//!
//! A timer names what it is for and, where it can be stale, the attempt or transaction it was
//! set for: a timer that fires after its attempt moved on (a switch answer arrived, the attempt
//! aborted) finds another id or phase and does nothing. Every timer runs on the core of the
//! worker it names ([`Timer::worker`]); work for no particular worker runs on core 0.

use pisadb_core::{TraceBytes, TraceHash};
use pisadb_engine::id::TxnId;

/// A timer a node asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Worker starts its next transaction.
    Begin {
        /// The worker.
        worker: u16,
    },
    /// Worker retries its aborted transaction.
    Retry {
        /// The worker.
        worker: u16,
    },
    /// Worker continues after a lock it waited for on its own node was granted.
    Resume {
        /// The worker.
        worker: u16,
    },
    /// A switch transaction may have been dropped.
    SwitchTimeout {
        /// The worker.
        worker: u16,
        /// The attempt it was for.
        txn: TxnId,
    },
    /// Another node has not answered an attempt in time (with `peer_timeout_ns`).
    PeerTimeout {
        /// The worker.
        worker: u16,
        /// The attempt it was for.
        txn: TxnId,
    },
    /// A transaction this node serves for another has outlived its lease (with
    /// `peer_timeout_ns`): drop it if unprepared, else ask its coordinator for the outcome.
    Lease {
        /// The transaction.
        txn: TxnId,
    },
    /// After a restart: a logged switch transaction whose answer is not in the log is sent
    /// (again) until it is answered.
    RecoveredSwitchTxn {
        /// The transaction.
        txn: TxnId,
    },
}

impl Timer {
    /// The worker whose core runs this timer.
    pub fn worker(&self) -> u16 {
        match *self {
            Timer::Begin { worker } | Timer::Retry { worker } | Timer::Resume { worker } => worker,
            Timer::SwitchTimeout { worker, .. } | Timer::PeerTimeout { worker, .. } => worker,
            // Work for no particular worker runs on the first core.
            Timer::Lease { .. } | Timer::RecoveredSwitchTxn { .. } => 0,
        }
    }
}

/// A timer's trace bytes spell it as `Name { field: value, … }` with decimal numbers: the text
/// the trace hashed before it had explicit bytes, kept so the pinned trace hashes hold. It is
/// written out here field by field, independent of the `Debug` derive.
impl TraceBytes for Timer {
    fn trace(&self, h: &mut TraceHash) {
        let (name, worker, txn) = match *self {
            Timer::Begin { worker } => ("Begin", Some(worker), None),
            Timer::Retry { worker } => ("Retry", Some(worker), None),
            Timer::Resume { worker } => ("Resume", Some(worker), None),
            Timer::SwitchTimeout { worker, txn } => ("SwitchTimeout", Some(worker), Some(txn)),
            Timer::PeerTimeout { worker, txn } => ("PeerTimeout", Some(worker), Some(txn)),
            Timer::Lease { txn } => ("Lease", None, Some(txn)),
            Timer::RecoveredSwitchTxn { txn } => ("RecoveredSwitchTxn", None, Some(txn)),
        };
        h.write(name.as_bytes());
        h.write(b" { ");
        if let Some(worker) = worker {
            h.write(b"worker: ");
            h.write_decimal(u64::from(worker));
            h.write(if txn.is_some() { b", " } else { b" }" });
        }
        if let Some(txn) = txn {
            h.write(b"txn: ");
            h.write_decimal(txn.bits());
            h.write(b" }");
        }
    }
}
