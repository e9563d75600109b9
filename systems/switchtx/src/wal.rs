//! A SwitchTx server's write-ahead log: what a restarted server needs so that no commit is
//! lost and no in-flight transaction is left half done (§3.5, "Server failure").
//!
//! The paper keeps a failed server's state alive in its backup's memory and promotes it; it
//! writes nothing to disk ("availability via replication without guaranteeing durability",
//! §3.6.1). PisaDB's hosts restart from their write-ahead log instead (the simulator keeps it
//! as the host's disk; real mode writes `wal.log` with `fdatasync` before any send of the same
//! round), so a server logs each state change that another server, or its own client after a
//! restart, may rely on once it has been answered:
//!
//! - **client side**: [`WalRecord::Begin`] when an attempt enters the commit protocol (from
//!   here participants hold state for it, so a restarted client must resolve it: the paper's
//!   coordinator recovery) and [`WalRecord::Closed`] when its outcome is counted (a commit,
//!   with what it read, or an abort), so a restarted client neither resolves it again nor
//!   counts a commit twice, and starts its next attempts above every attempt it logged;
//! - **participant side**: [`WalRecord::Locked`] (a write primary's locks and its part of the
//!   transaction), [`WalRecord::Unlocked`], [`WalRecord::Installed`] (values, versions and what
//!   they overwrote), [`WalRecord::Replicated`] (a backup's redo applied, with the before
//!   images), [`WalRecord::RolledBack`], and [`WalRecord::Frozen`] (a participant answered a
//!   query: it must not move on after a restart, or a decision taken on its answer could be
//!   contradicted).
//!
//! Replaying the records in order rebuilds the primary shard, the backup copy and every
//! participant state a query may ask about; what is not logged (a read primary's copied
//! versions, a placeholder for a request that overtook its `prepare`) is lost with the crash,
//! and its transaction times out and is resolved as aborted (the answers of read primaries do
//! not decide anything).
//!
//! **On disk** (real mode, [`LogCodec`]): each record is its JSON, in one frame of the
//! runtime's one log framing (length, CRC32C, and its rules for torn tails and corruption:
//! `pisadb_runtime::framed_log`).

use pisadb_core::Nanos;
use pisadb_host::LogCodec;
use serde::{Deserialize, Serialize};

/// Participants as logged: (write primaries, write backups, read primaries, client).
pub type LoggedParts = (u8, u8, u8, u8);

/// One record of a server's write-ahead log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WalRecord {
    /// A client attempt enters the commit protocol.
    Begin {
        /// Worker thread.
        thread: u16,
        /// Lane of the thread.
        lane: u8,
        /// Attempt number (per lane).
        attempt: u32,
        /// The attempt's transaction id.
        txn: u64,
        /// (key, written) of every key.
        keys: Vec<(u64, bool)>,
        /// What the execute phase read: (key, value, version).
        reads: Vec<(u64, u64, u64)>,
        /// Read-only (version copy, then validate and read).
        read_only: bool,
        /// A blind write.
        blind: bool,
        /// When the transaction's first attempt started (for its latency).
        first_start: Nanos,
        /// Attempts before this one.
        retries: u32,
        /// Its participants.
        parts: LoggedParts,
    },
    /// A client attempt's outcome is counted: committed with these (key, version) reads, or
    /// aborted (`None`).
    Closed {
        /// Worker thread.
        thread: u16,
        /// Lane of the thread.
        lane: u8,
        /// Attempt number.
        attempt: u32,
        /// The attempt's transaction id.
        txn: u64,
        /// The reads of a commit; `None` for an abort.
        committed: Option<Vec<(u64, u64)>>,
        /// Whether it was read-only.
        read_only: bool,
    },
    /// A write primary took the locks of its part of an attempt.
    Locked {
        /// The attempt's switch slot.
        slot: u16,
        /// Attempt number.
        attempt: u32,
        /// Transaction id.
        txn: u64,
        /// Switch tag.
        tag: u16,
        /// Client server.
        client: u8,
        /// Client thread.
        thread: u8,
        /// Coordination (as `Coordination as u8`).
        coord: u8,
        /// Whether the attempt is a retry (priority class).
        retry: bool,
        /// Participants.
        parts: LoggedParts,
        /// Writes of this shard: (key, value).
        writes: Vec<(u64, u64)>,
        /// Reads of this shard: (key, version).
        reads: Vec<(u64, u64)>,
        /// The writes it backs up, if it is a write backup too: (key, value). Logged here so
        /// that a restarted primary that is also a backup applies the right redo record
        /// when the validate phase ends.
        redo: Vec<(u64, u64)>,
    },
    /// A write primary released an attempt's locks.
    Unlocked {
        /// Slot.
        slot: u16,
        /// Attempt.
        attempt: u32,
    },
    /// A write primary installed an attempt's writes: (key, value, overwritten version).
    Installed {
        /// Slot.
        slot: u16,
        /// Attempt.
        attempt: u32,
        /// Transaction id (the new version).
        txn: u64,
        /// (key, value, overwritten version).
        writes: Vec<(u64, u64, u64)>,
    },
    /// A backup applied an attempt's redo record.
    Replicated {
        /// Slot.
        slot: u16,
        /// Attempt.
        attempt: u32,
        /// Transaction id.
        txn: u64,
        /// Client server.
        client: u8,
        /// Client thread.
        thread: u8,
        /// Participants.
        parts: LoggedParts,
        /// (key, value) applied.
        redo: Vec<(u64, u64)>,
        /// (key, value, version) before.
        undo: Vec<(u64, u64, u64)>,
    },
    /// A backup rolled an attempt's redo back: (key, value, version) restored.
    RolledBack {
        /// Slot.
        slot: u16,
        /// Attempt.
        attempt: u32,
        /// (key, value, version) restored.
        restored: Vec<(u64, u64, u64)>,
    },
    /// A participant answered a query for the attempt: it does no more for it unprompted.
    Frozen {
        /// Slot.
        slot: u16,
        /// Attempt.
        attempt: u32,
    },
    /// The server adopted a new shard map (`ShardMap`); the shards it became primary
    /// of moved from its backup copy to its primary store at this point of the log.
    Adopted {
        /// The map's epoch.
        epoch: u32,
        /// Shard → primary.
        primary: Vec<u8>,
        /// Shard → backup.
        backup: Vec<Option<u8>>,
        /// Servers in the map.
        members: u8,
        /// The (slot, attempt)s whose redo records it found undecided and locked.
        undecided: Vec<(u16, u32)>,
    },
}

impl LogCodec for WalRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(out, self).expect("a log record serializes");
    }

    fn decode(payload: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(payload).map_err(|e| e.to_string())
    }
}

/// The ledger (committed transactions with their reads, and installs) a server's log proves:
/// real mode's checks read it from the log, so a server killed with `kill -9` still accounts
/// for what it did before.
pub fn ledger_of(log: &[WalRecord]) -> crate::ledger::Ledger {
    let mut ledger = crate::ledger::Ledger::default();
    for r in log {
        match r {
            WalRecord::Closed { txn, committed: Some(reads), read_only, .. } => {
                if *read_only {
                    ledger.read_only.insert(*txn);
                }
                ledger.reads.insert(*txn, reads.clone());
            }
            WalRecord::Installed { txn, writes, .. } => {
                ledger.installed.entry(*txn).or_default().extend(writes.iter().map(|&(k, _, over)| (k, over)))
            }
            _ => {}
        }
    }
    ledger
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_runtime::framed_log;

    fn sample() -> Vec<WalRecord> {
        vec![
            WalRecord::Unlocked { slot: 3, attempt: 9 },
            WalRecord::Installed { slot: 3, attempt: 9, txn: 77, writes: vec![(1, 2, 0)] },
            WalRecord::Frozen { slot: 4, attempt: 1 },
        ]
    }

    fn encode_all(records: &[WalRecord]) -> Vec<u8> {
        let mut bytes = Vec::new();
        records.iter().for_each(|r| framed_log::append(r, &mut bytes));
        bytes
    }

    #[test]
    fn records_read_back_and_a_torn_tail_is_cut_not_replayed() {
        let bytes = encode_all(&sample());
        let whole = framed_log::read::<WalRecord>(&bytes).unwrap();
        assert_eq!((whole.records, whole.valid_bytes, whole.torn_tail), (sample(), bytes.len(), None));
        for cut in 1..12 {
            let torn = framed_log::read::<WalRecord>(&bytes[..bytes.len() - cut]).unwrap();
            assert_eq!(torn.records, sample()[..2].to_vec(), "cut {cut} bytes");
            assert!(torn.torn_tail.is_some());
        }
    }

    #[test]
    fn damage_before_the_tail_is_an_error() {
        let mut bytes = encode_all(&sample());
        bytes[10] ^= 0xff;
        assert_eq!(framed_log::read::<WalRecord>(&bytes).unwrap_err().offset, 0);
    }

    /// The case that lost committed records before the one framing: a length field mid-log
    /// that points past the end was taken for a torn tail, and every later record was cut.
    #[test]
    fn a_corrupted_length_mid_log_deletes_nothing() {
        let mut bytes = encode_all(&sample());
        bytes[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = framed_log::read::<WalRecord>(&bytes).unwrap_err();
        assert_eq!((err.offset, err.next_record_at), (0, encode_all(&sample()[..1]).len()));
    }
}
