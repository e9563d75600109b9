//! Lock-manager requests for the LM-Switch baseline (NetLock-style, P4DB paper §7.1).
//!
//! ```text
//! header (12 B): txn_id u64 | granted u32 (reply: bit i set = entry i granted)
//! then 1..=32 entries (4 B): register u8 | op u8 | index u16
//! ```
//!
//! One request carries all hot-tuple lock operations of a transaction, so acquiring them costs
//! one round trip to the switch, as in the baseline. The count is implied by the length.

use num_enum::TryFromPrimitive;
use pisadb_wire::{enum_field, DecodeError};
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// At most this many lock operations per request (the width of the grant mask).
pub const MAX_ENTRIES: usize = 32;

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawHeader {
    txn_id: U64,
    granted: U32,
}

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawEntry {
    register: u8,
    op: u8,
    index: U16,
}

/// Bytes of the request header.
pub const HEADER_BYTES: usize = std::mem::size_of::<RawHeader>();
/// Bytes of one entry.
pub const ENTRY_BYTES: usize = std::mem::size_of::<RawEntry>();

/// What to do with one lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, TryFromPrimitive)]
#[repr(u8)]
pub enum LockOp {
    /// Take a shared lock if no exclusive holder exists.
    AcquireShared = 0,
    /// Take the exclusive lock if there is no holder at all.
    AcquireExclusive = 1,
    /// Give back a shared lock.
    ReleaseShared = 2,
    /// Give back the exclusive lock.
    ReleaseExclusive = 3,
}

/// One lock operation: which lock (register array and entry), and what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockEntry {
    /// Register array id of the lock table.
    pub register: u8,
    /// The operation.
    pub op: LockOp,
    /// Entry of the register array (one lock per hot tuple).
    pub index: u16,
}

/// A lock request, or its reply with the grant mask filled in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockPacket {
    /// Chosen by the sending node to match the reply.
    pub txn_id: u64,
    /// Reply only: bit `i` set when entry `i` was granted (releases always succeed).
    pub granted: u32,
    /// The lock operations, executed in order.
    pub entries: Vec<LockEntry>,
}

impl LockPacket {
    /// Bytes the encoded packet (without frame) takes.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.entries.len() * ENTRY_BYTES
    }

    /// Appends the packet to `out`; panics on a sender bug (0 or too many entries).
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!((1..=MAX_ENTRIES).contains(&self.entries.len()), "lock entry count");
        let header = RawHeader { txn_id: U64::new(self.txn_id), granted: U32::new(self.granted) };
        out.extend_from_slice(header.as_bytes());
        for e in &self.entries {
            let raw = RawEntry { register: e.register, op: e.op as u8, index: U16::new(e.index) };
            out.extend_from_slice(raw.as_bytes());
        }
    }

    /// Reads a packet (the bytes after the frame).
    pub fn decode(bytes: &[u8]) -> Result<LockPacket, DecodeError> {
        let (header, rest) = RawHeader::ref_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { need: HEADER_BYTES, got: bytes.len() })?;
        if rest.len() % ENTRY_BYTES != 0 {
            return Err(DecodeError::TrailingBytes { extra: rest.len() % ENTRY_BYTES });
        }
        let count = rest.len() / ENTRY_BYTES;
        if !(1..=MAX_ENTRIES).contains(&count) {
            return Err(DecodeError::BadCount { count, max: MAX_ENTRIES });
        }
        let raws = <[RawEntry]>::ref_from_bytes(rest)
            .map_err(|_| DecodeError::TooShort { need: HEADER_BYTES + ENTRY_BYTES, got: bytes.len() })?;
        let entries = raws
            .iter()
            .map(|raw| {
                let op = enum_field("lock_op", raw.op)?;
                if raw.register == 0 {
                    return Err(DecodeError::BadField { field: "register", value: 0 });
                }
                Ok(LockEntry { register: raw.register, op, index: raw.index.get() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LockPacket { txn_id: header.txn_id.get(), granted: header.granted.get(), entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lock_packets_round_trip(txn_id: u64, granted: u32,
            raw in proptest::collection::vec((1u8..=63, 0u8..4, any::<u16>()), 1..=MAX_ENTRIES)) {
            let ops = [LockOp::AcquireShared, LockOp::AcquireExclusive, LockOp::ReleaseShared, LockOp::ReleaseExclusive];
            let entries = raw.into_iter().map(|(register, op, index)| LockEntry { register, op: ops[op as usize], index }).collect();
            let pkt = LockPacket { txn_id, granted, entries };
            let mut bytes = Vec::new();
            pkt.encode(&mut bytes);
            prop_assert_eq!(LockPacket::decode(&bytes).unwrap(), pkt);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = LockPacket::decode(&bytes);
        }
    }
}
