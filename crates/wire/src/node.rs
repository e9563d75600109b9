//! Node-to-node messages: two-phase locking and two-phase commit between database nodes.
//!
//! They travel behind a [`crate::Frame`] of kind [`crate::Kind::FORWARD`]: the switch only
//! forwards them. One message per datagram, a type byte first, integers little-endian, item
//! counts bounded by [`MAX_ITEMS`] so decoding never allocates more than a few hundred bytes
//! per item announced *and present* (counts are checked against the bytes left).
//!
//! | message | from → to | meaning |
//! |---|---|---|
//! | `LockRead` | coordinator → owner | lock (or just read) these tuples for `txn`, reply with values |
//! | `LockReadReply` | owner → coordinator | all granted, with values and versions; or denied |
//! | `Prepare` | coordinator → owner | phase 1 of 2PC: here are `txn`'s writes on your tuples |
//! | `Vote` | owner → coordinator | phase 1 answer |
//! | `Commit` | coordinator → owner | apply the prepared writes (if any) and release `txn`'s locks |
//! | `Abort` | coordinator → owner | drop `txn`'s writes and locks, and any waiting request |
//! | `Inquire` | owner → coordinator | what became of `txn`, which I prepared? (answered by `Commit` or `Abort`) |
//! | `Release` | coordinator → owner | write one tuple back (if written) and unlock it: the P4DB prototype's commit or rollback, one per remote key |
//! | `Released` | owner → coordinator | acknowledges one `Release` |

use crate::{bool_field, enum_field, DecodeError};
use num_enum::TryFromPrimitive;
use pisadb_core::TupleKey;

/// Most tuples one message may name.
pub const MAX_ITEMS: usize = 64;

/// How a `LockRead` entry wants its tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, TryFromPrimitive)]
#[repr(u8)]
pub enum LockMode {
    /// Read without a lock (the lock is held elsewhere, e.g. in the switch's lock manager).
    None = 0,
    /// Shared lock: the transaction only reads the tuple.
    Shared = 1,
    /// Exclusive lock: the transaction writes the tuple.
    Exclusive = 2,
}

/// What to do when a lock is taken (the concurrency-control scheme, per request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, TryFromPrimitive)]
#[repr(u8)]
pub enum OnConflict {
    /// NO_WAIT: deny at once.
    Deny = 0,
    /// WAIT_DIE: an older requester (smaller timestamp) waits, a younger one is denied.
    WaitDie = 1,
}

/// A node-to-node message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeMsg {
    /// Lock and read tuples for `txn`.
    LockRead {
        /// The transaction attempt.
        txn: u64,
        /// Its WAIT_DIE timestamp (smaller = older).
        ts: u64,
        /// What a conflict means.
        on_conflict: OnConflict,
        /// The tuples, each with the lock it needs.
        entries: Vec<(TupleKey, LockMode)>,
    },
    /// Answer to `LockRead`.
    LockReadReply {
        /// The transaction attempt.
        txn: u64,
        /// Whether every entry was granted; if not, nothing is held for `txn` any more.
        granted: bool,
        /// Per entry, when granted: the value and its version (the id of its last writer).
        values: Vec<(i64, u64)>,
    },
    /// 2PC phase 1, with the transaction's writes on the receiver's tuples.
    Prepare {
        /// The transaction attempt.
        txn: u64,
        /// New values.
        writes: Vec<(TupleKey, i64)>,
    },
    /// 2PC phase 1 answer.
    Vote {
        /// The transaction attempt.
        txn: u64,
        /// Yes: the participant can commit.
        yes: bool,
    },
    /// Apply prepared writes, if any, and release the transaction's locks.
    Commit {
        /// The transaction attempt.
        txn: u64,
    },
    /// Forget the transaction: release its locks, drop prepared writes and waiting requests.
    Abort {
        /// The transaction attempt.
        txn: u64,
    },
    /// A participant that prepared `txn` asks its coordinator for the outcome (after a lost
    /// `Commit`, or a restart); the answer is `Commit` or `Abort`.
    Inquire {
        /// The transaction attempt.
        txn: u64,
    },
    /// The P4DB prototype's end of a transaction on one remote tuple (its commit and its
    /// rollback alike): write the tuple back, if the transaction wrote it, and unlock it.
    Release {
        /// The transaction attempt.
        txn: u64,
        /// The tuple.
        key: TupleKey,
        /// Its new value, if the transaction wrote it (a rollback writes nothing back).
        write: Option<i64>,
    },
    /// Acknowledges one `Release`.
    Released {
        /// The transaction attempt.
        txn: u64,
    },
}

const LOCK_READ: u8 = 1;
const LOCK_READ_REPLY: u8 = 2;
const PREPARE: u8 = 3;
const VOTE: u8 = 4;
const COMMIT: u8 = 5;
const ABORT: u8 = 6;
const INQUIRE: u8 = 7;
const RELEASE: u8 = 8;
const RELEASED: u8 = 9;

impl NodeMsg {
    /// The transaction attempt the message is about.
    pub fn txn(&self) -> u64 {
        match self {
            NodeMsg::LockRead { txn, .. }
            | NodeMsg::LockReadReply { txn, .. }
            | NodeMsg::Prepare { txn, .. }
            | NodeMsg::Vote { txn, .. }
            | NodeMsg::Commit { txn }
            | NodeMsg::Abort { txn }
            | NodeMsg::Inquire { txn }
            | NodeMsg::Release { txn, .. }
            | NodeMsg::Released { txn } => *txn,
        }
    }

    /// Whether the message answers a request of the receiver's (it goes to the worker that
    /// waits for it) rather than asking the receiver to do something.
    pub fn is_reply(&self) -> bool {
        matches!(self, NodeMsg::LockReadReply { .. } | NodeMsg::Vote { .. } | NodeMsg::Released { .. })
    }

    /// Appends the message to `out`; panics on a sender bug (more than [`MAX_ITEMS`] items).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            NodeMsg::LockRead { txn, ts, on_conflict, entries } => {
                header(out, LOCK_READ, *txn, entries.len());
                out.extend_from_slice(&ts.to_le_bytes());
                out.push(*on_conflict as u8);
                for (key, mode) in entries {
                    put_key(out, *key);
                    out.push(*mode as u8);
                }
            }
            NodeMsg::LockReadReply { txn, granted, values } => {
                header(out, LOCK_READ_REPLY, *txn, values.len());
                out.push(u8::from(*granted));
                for (value, version) in values {
                    out.extend_from_slice(&value.to_le_bytes());
                    out.extend_from_slice(&version.to_le_bytes());
                }
            }
            NodeMsg::Prepare { txn, writes } => {
                header(out, PREPARE, *txn, writes.len());
                for (key, value) in writes {
                    put_key(out, *key);
                    out.extend_from_slice(&value.to_le_bytes());
                }
            }
            NodeMsg::Vote { txn, yes } => {
                header(out, VOTE, *txn, 0);
                out.push(u8::from(*yes));
            }
            NodeMsg::Commit { txn } => header(out, COMMIT, *txn, 0),
            NodeMsg::Abort { txn } => header(out, ABORT, *txn, 0),
            NodeMsg::Inquire { txn } => header(out, INQUIRE, *txn, 0),
            NodeMsg::Release { txn, key, write } => {
                // The count says whether a value follows the key.
                header(out, RELEASE, *txn, usize::from(write.is_some()));
                put_key(out, *key);
                if let Some(value) = write {
                    out.extend_from_slice(&value.to_le_bytes());
                }
            }
            NodeMsg::Released { txn } => header(out, RELEASED, *txn, 0),
        }
    }

    /// Bytes [`NodeMsg::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        HEADER
            + match self {
                NodeMsg::LockRead { entries, .. } => 9 + entries.len() * (KEY + 1),
                NodeMsg::LockReadReply { values, .. } => 1 + values.len() * 16,
                NodeMsg::Prepare { writes, .. } => writes.len() * (KEY + 8),
                NodeMsg::Vote { .. } => 1,
                NodeMsg::Commit { .. } | NodeMsg::Abort { .. } | NodeMsg::Inquire { .. } => 0,
                NodeMsg::Release { write, .. } => KEY + if write.is_some() { 8 } else { 0 },
                NodeMsg::Released { .. } => 0,
            }
    }

    /// Reads a message (the bytes after the frame).
    pub fn decode(bytes: &[u8]) -> Result<NodeMsg, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        let kind = r.u8()?;
        let txn = r.u64()?;
        let count = usize::from(r.u8()?);
        if count > MAX_ITEMS {
            return Err(DecodeError::BadCount { count, max: MAX_ITEMS });
        }
        if count != 0 && matches!(kind, VOTE | COMMIT | ABORT | INQUIRE | RELEASED) {
            // These carry no items: a count would make two encodings of one message.
            return Err(DecodeError::BadField { field: "item_count", value: count as u64 });
        }
        let msg = match kind {
            LOCK_READ => {
                let ts = r.u64()?;
                let on_conflict = enum_field("on_conflict", r.u8()?)?;
                r.need(count * (KEY + 1))?;
                let entries = (0..count)
                    .map(|_| {
                        let key = r.key()?;
                        Ok((key, enum_field("lock_mode", r.u8()?)?))
                    })
                    .collect::<Result<_, _>>()?;
                NodeMsg::LockRead { txn, ts, on_conflict, entries }
            }
            LOCK_READ_REPLY => {
                let granted = r.flag("granted")?;
                r.need(count * 16)?;
                let values = (0..count).map(|_| Ok((r.u64()? as i64, r.u64()?))).collect::<Result<_, DecodeError>>()?;
                NodeMsg::LockReadReply { txn, granted, values }
            }
            PREPARE => {
                r.need(count * (KEY + 8))?;
                let writes = (0..count).map(|_| Ok((r.key()?, r.u64()? as i64))).collect::<Result<_, DecodeError>>()?;
                NodeMsg::Prepare { txn, writes }
            }
            VOTE => NodeMsg::Vote { txn, yes: r.flag("yes")? },
            COMMIT => NodeMsg::Commit { txn },
            ABORT => NodeMsg::Abort { txn },
            INQUIRE => NodeMsg::Inquire { txn },
            RELEASE => {
                if count > 1 {
                    return Err(DecodeError::BadField { field: "release_values", value: count as u64 });
                }
                let key = r.key()?;
                let write = if count == 1 { Some(r.u64()? as i64) } else { None };
                NodeMsg::Release { txn, key, write }
            }
            RELEASED => NodeMsg::Released { txn },
            v => return Err(DecodeError::BadField { field: "node_msg_type", value: u64::from(v) }),
        };
        if r.at != bytes.len() {
            return Err(DecodeError::TrailingBytes { extra: bytes.len() - r.at });
        }
        Ok(msg)
    }
}

const HEADER: usize = 10;
const KEY: usize = 10;

fn header(out: &mut Vec<u8>, kind: u8, txn: u64, count: usize) {
    assert!(count <= MAX_ITEMS, "{count} items in one node message");
    out.push(kind);
    out.extend_from_slice(&txn.to_le_bytes());
    out.push(count as u8);
}

fn put_key(out: &mut Vec<u8>, key: TupleKey) {
    out.extend_from_slice(&key.table.to_le_bytes());
    out.extend_from_slice(&key.row.to_le_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.bytes.len() - self.at < n {
            return Err(DecodeError::TooShort { need: self.at + n, got: self.bytes.len() });
        }
        Ok(())
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.need(N)?;
        let mut b = [0; N];
        b.copy_from_slice(&self.bytes[self.at..self.at + N]);
        self.at += N;
        Ok(b)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn flag(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        bool_field(field, self.u8()?)
    }

    fn key(&mut self) -> Result<TupleKey, DecodeError> {
        let table = u16::from_le_bytes(self.take()?);
        Ok(TupleKey::new(table, self.u64()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = TupleKey> {
        (any::<u16>(), any::<u64>()).prop_map(|(t, r)| TupleKey::new(t, r))
    }

    fn msg() -> impl Strategy<Value = NodeMsg> {
        let mode = prop_oneof![Just(LockMode::None), Just(LockMode::Shared), Just(LockMode::Exclusive)];
        let on_conflict = prop_oneof![Just(OnConflict::Deny), Just(OnConflict::WaitDie)];
        prop_oneof![
            (any::<u64>(), any::<u64>(), on_conflict, proptest::collection::vec((key(), mode), 0..=MAX_ITEMS))
                .prop_map(|(txn, ts, on_conflict, entries)| NodeMsg::LockRead { txn, ts, on_conflict, entries }),
            (any::<u64>(), any::<bool>(), proptest::collection::vec((any::<i64>(), any::<u64>()), 0..=MAX_ITEMS))
                .prop_map(|(txn, granted, values)| NodeMsg::LockReadReply { txn, granted, values }),
            (any::<u64>(), proptest::collection::vec((key(), any::<i64>()), 0..=MAX_ITEMS))
                .prop_map(|(txn, writes)| NodeMsg::Prepare { txn, writes }),
            (any::<u64>(), any::<bool>()).prop_map(|(txn, yes)| NodeMsg::Vote { txn, yes }),
            any::<u64>().prop_map(|txn| NodeMsg::Commit { txn }),
            any::<u64>().prop_map(|txn| NodeMsg::Abort { txn }),
            any::<u64>().prop_map(|txn| NodeMsg::Inquire { txn }),
            (any::<u64>(), key(), proptest::option::of(any::<i64>())).prop_map(|(txn, key, write)| NodeMsg::Release {
                txn,
                key,
                write
            }),
            any::<u64>().prop_map(|txn| NodeMsg::Released { txn }),
        ]
    }

    proptest! {
        #[test]
        fn node_messages_round_trip_with_the_announced_length(m in msg()) {
            let mut bytes = Vec::new();
            m.encode(&mut bytes);
            prop_assert_eq!(bytes.len(), m.encoded_len());
            prop_assert_eq!(NodeMsg::decode(&bytes).unwrap(), m);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = NodeMsg::decode(&bytes);
        }

        #[test]
        fn truncated_messages_are_rejected(m in msg(), cut in 1usize..20) {
            let mut bytes = Vec::new();
            m.encode(&mut bytes);
            let keep = bytes.len().saturating_sub(cut);
            prop_assert!(NodeMsg::decode(&bytes[..keep]).is_err());
        }
    }

    #[test]
    fn a_message_without_items_refuses_an_item_count() {
        let mut bytes = Vec::new();
        NodeMsg::Commit { txn: 4 }.encode(&mut bytes);
        bytes[9] = 4;
        assert_eq!(NodeMsg::decode(&bytes).unwrap_err().reason(), "item_count");
    }

    #[test]
    fn a_huge_announced_count_is_refused_before_allocating() {
        let mut bytes = vec![LOCK_READ];
        bytes.extend_from_slice(&7u64.to_le_bytes());
        bytes.push(250);
        assert_eq!(NodeMsg::decode(&bytes).unwrap_err().reason(), "bad_count");
    }
}
