//! TransKV's wire format: the paper's header (Fig. 5: T-TS, TLength, a list of (op, key))
//! plus what a working protocol needs, behind the shared frame (`KIND`).
//!
//! ```text
//! ts u32 | tlength u8 | status u8 | client u16 | seq u32 | tlength × (op u8 | key 16 B | value 48 B)
//! ```
//!
//! - `ts` is the transaction's timestamp T-TS; 0 marks a non-transactional operation (§IV-A).
//! - `op`: the low nibble is the paper's 4-bit operation ([`OpType`]); the high nibble is ours,
//!   flags the switches set on the way ([`FLAG_DECIDED`]: a switch that caches the key has
//!   decided the op by TSO; [`FLAG_SERVED`]: the value slot holds the committed value read
//!   by that switch), and the client's [`FLAG_SHARE`] (the op's request is one share of a
//!   read-only transaction over several nodes).
//! - `key` is 16 bytes as in the paper. The switch model's exact-match tables hold keys of at
//!   most 64 bits (`pisadb_switch::program::TABLE_FIELD_BITS_MAX`), so a key whose high 8
//!   bytes are not zero is never cached (always a miss, which is safe); YCSB's keys are record
//!   numbers and fit.
//! - `value` is the 48-byte slot of every op (NetCache-style three 16-byte words): a write
//!   carries its new value, a read's answer comes back in it.
//! - `status` says which step of the protocol the message is ([`Status`]); `client` and `seq`
//!   let a client match an answer to its outstanding transaction.
//!
//! **Size.** Every op is [`OP_BYTES`] = 65 bytes. A switch must parse the whole header into its
//! packet header vector; Tofino 1's PHV is 4 Kbit (512 bytes), of which Ethernet/IPv4/UDP take
//! 42 bytes and we leave 64 bytes to metadata ([`PARSED_BYTES_MAX`], an assumption). That admits
//! [`MAX_OPS`] = 6 ops (12 + 6 × 65 = 402 bytes), checked at compile time.
//!
//! Decoding never panics: lengths, counts, op types, flags and statuses are checked, and a
//! rejection names its reason ([`Rejections`] counts them).

use num_enum::TryFromPrimitive;
use pisadb_wire::{enum_field, exact_len, DecodeError, Frame, Kind};
use std::collections::BTreeMap;
use zerocopy::network_endian::{U128, U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The frame kind of every datagram this system sends: A TransKV transaction, reply or cache-control message (clients, switches, storage nodes
/// and the controller).
pub const KIND: Kind = Kind::new(8);
/// Every frame kind this system declares (the binary's registry checks that no two systems collide).
pub const KINDS: &[Kind] = &[KIND];

/// The header as it is on the wire.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawHeader {
    ts: U32,
    count: u8,
    status: u8,
    client: U16,
    seq: U32,
}

/// One op as it is on the wire: op type (low nibble) and flags (high nibble), key, value.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawOp {
    code: u8,
    key: U128,
    value: Value,
}

/// Bytes of the header after the frame.
pub const HEADER_BYTES: usize = std::mem::size_of::<RawHeader>();
/// Bytes of one op: op byte, 16-byte key, 48-byte value.
pub const OP_BYTES: usize = std::mem::size_of::<RawOp>();
const _: () = assert!(HEADER_BYTES == 12 && OP_BYTES == 1 + KEY_BYTES + VALUE_BYTES);
/// Bytes of a key.
pub const KEY_BYTES: usize = 16;
/// Bytes of a value (three 16-byte words).
pub const VALUE_BYTES: usize = 48;
/// Bytes of the TransKV header a switch may parse into its PHV (assumption, see module docs).
pub const PARSED_BYTES_MAX: usize = 512 - 42 - 64;
/// At most this many ops in one message.
pub const MAX_OPS: usize = 6;
const _: () = assert!(HEADER_BYTES + MAX_OPS * OP_BYTES <= PARSED_BYTES_MAX, "the header must fit the parser");

/// Op flag: a switch that caches the key decided this op by TSO.
pub const FLAG_DECIDED: u8 = 0x10;
/// Op flag: the value slot holds the committed value a switch read.
pub const FLAG_SERVED: u8 = 0x20;
/// Op flag (set by the client): the op is in one share of a read-only transaction over
/// several nodes, sent as one request per node (`client.rs`); no one copy of it is the whole
/// transaction.
pub const FLAG_SHARE: u8 = 0x40;
const FLAGS_KNOWN: u8 = FLAG_DECIDED | FLAG_SERVED | FLAG_SHARE;

/// A value: 48 bytes.
pub type Value = [u8; VALUE_BYTES];

/// The paper's 4-bit operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, TryFromPrimitive)]
#[repr(u8)]
pub enum OpType {
    /// Read the key.
    Read = 1,
    /// Write the value slot to the key.
    Write = 2,
}

/// Which step of the protocol a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, TryFromPrimitive)]
#[repr(u8)]
pub enum Status {
    /// Client → storage node: every key is cached, the switches on the path decide.
    Request = 0,
    /// Client → controller: coordinate this transaction (switches only forward it).
    Coordinate = 1,
    /// Controller → storage node: vote on this transaction (the switches decide cached ops).
    Prepare = 2,
    /// Storage node → controller: yes, read values attached.
    Voted = 3,
    /// Controller → storage node: commit the prepared transaction.
    Commit = 4,
    /// Final: committed (writes installed; the switches on the way install cached values).
    Committed = 5,
    /// Final: aborted by a storage node or the controller (the switches clear pending marks).
    Aborted = 6,
    /// Final: aborted by a switch's TSO check (the switches clear pending marks).
    SwitchAborted = 7,
    /// Final: answered by a switch from its cache (read-only).
    Served = 8,
    /// Client → storage node or controller, after a timeout: what became of this timestamp?
    /// The node answers with the outcome it recorded, or, if it never saw the timestamp,
    /// records it as aborted (later copies are refused) and answers `Aborted`.
    Resolve = 9,
    /// Switch → controller: a copy of a transaction the switch accepted, for the controller's
    /// transaction log (§IV-E; variant `transkv-log`).
    Log = 10,
    /// Storage node → controller: a copy of its share of a commit it installed, each write
    /// op's value slot holding the key's value before the write (its before image).
    CommitLog = 11,
    /// Controller → storage node, cache refresh (`crate::refresh`): hand the keys of the read
    /// ops to a switch; `seq` names the request.
    HandOff = 12,
    /// Storage node → controller: the answer to `HandOff`. An op with [`FLAG_SERVED`] was
    /// handed, its value slot holds the committed value (which names its version, the new
    /// W-TS); `ts` is the R-TS floor. An op without it has a prepared transaction: ask again.
    HandedOff = 13,
    /// Controller → storage node, cache refresh: the keys of the read ops are back from their
    /// switch; `ts` is their floor (max of the switch's W-TS and R-TS).
    TakeBack = 14,
    /// Storage node → controller: `TakeBack` done.
    TookBack = 15,
    /// Controller → storage node, cache refresh: report the epoch's misses; `seq` is the epoch.
    Report = 16,
    /// Storage node → controller: part `client` of `ts` parts of its report for epoch `seq`:
    /// per read op, a key and in the value slot's first 8 bytes its misses (ops no switch
    /// decided); an op with 0 misses fills an empty report.
    Misses = 17,
    /// Switch → storage node, the lease (`crate::program`): a claim of `ts` on the write ops'
    /// keys has outlived its lease. The node answers with its outcome of `ts` (`client` is
    /// [`LEASE_CLIENT`], so that no host takes the answer for its own): `Committed` (its
    /// recorded commit again: the switches on the way install it) or `Aborted` with these ops
    /// (they release the claims), deciding `ts` aborted if it never saw it; nothing while `ts`
    /// is prepared (its coordinator finishes it).
    Lease = 18,
}

/// The `client` of a lease query and of its answer: no client's address, so the host the
/// answer reaches (whichever client or controller sent the request that met the claim)
/// ignores it; only the switches on the way act on it.
pub const LEASE_CLIENT: u16 = u16::MAX;

impl Status {
    /// Whether the switches run TSO on the message's ops (a request on its way to storage).
    pub fn is_tso_request(self) -> bool {
        matches!(self, Status::Request | Status::Prepare)
    }

    /// Whether the message ends the transaction as aborted.
    pub fn is_abort(self) -> bool {
        matches!(self, Status::Aborted | Status::SwitchAborted)
    }
}

/// One operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// What it does.
    pub op_type: OpType,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// The 16-byte key, as a number.
    pub key: u128,
    /// The value slot.
    pub value: Value,
}

impl Op {
    /// A read of `key`.
    pub fn read(key: u128) -> Self {
        Op { op_type: OpType::Read, flags: 0, key, value: [0; VALUE_BYTES] }
    }

    /// A write of `value` to `key`.
    pub fn write(key: u128, value: Value) -> Self {
        Op { op_type: OpType::Write, flags: 0, key, value }
    }

    /// Whether a switch decided it.
    pub fn decided(&self) -> bool {
        self.flags & FLAG_DECIDED != 0
    }

    /// Whether a switch filled its value slot.
    pub fn served(&self) -> bool {
        self.flags & FLAG_SERVED != 0
    }
}

/// A TransKV message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// T-TS: the transaction's timestamp; 0 = non-transactional.
    pub ts: u32,
    /// The step.
    pub status: Status,
    /// The client that started the transaction.
    pub client: u16,
    /// The client's sequence number of the transaction (the same over its attempts).
    pub seq: u32,
    /// The ops (TLength of them), 1..=[`MAX_OPS`].
    pub ops: Vec<Op>,
}

impl Message {
    /// Bytes of the payload (without frame).
    pub fn payload_bytes(&self) -> usize {
        HEADER_BYTES + OP_BYTES * self.ops.len()
    }

    /// Appends the payload. More than [`MAX_OPS`] ops is a bug of the caller.
    pub fn encode(&self, out: &mut Vec<u8>) {
        debug_assert!(!self.ops.is_empty() && self.ops.len() <= MAX_OPS, "1..={MAX_OPS} ops");
        let header = RawHeader {
            ts: U32::new(self.ts),
            count: u8::try_from(self.ops.len()).unwrap_or(u8::MAX),
            status: self.status as u8,
            client: U16::new(self.client),
            seq: U32::new(self.seq),
        };
        out.extend_from_slice(header.as_bytes());
        for op in &self.ops {
            let raw = RawOp { code: op.op_type as u8 | op.flags, key: U128::new(op.key), value: op.value };
            out.extend_from_slice(raw.as_bytes());
        }
    }

    /// The datagram `src -> dst` carrying this message.
    pub fn datagram(&self, src: u16, dst: u16) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(pisadb_wire::FRAME_BYTES + self.payload_bytes());
        Frame { kind: KIND, src, dst }.encode(&mut bytes);
        self.encode(&mut bytes);
        bytes
    }

    /// Reads a payload; rejects short or long input, a TLength of 0 or above [`MAX_OPS`],
    /// unknown statuses, op types and flags.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (h, rest) = RawHeader::ref_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { need: HEADER_BYTES, got: bytes.len() })?;
        let count = usize::from(h.count);
        if count == 0 || count > MAX_OPS {
            return Err(DecodeError::BadCount { count, max: MAX_OPS });
        }
        let status = enum_field("status", h.status)?;
        let need = HEADER_BYTES + OP_BYTES * count;
        exact_len(bytes.len(), need)?;
        let raws = <[RawOp]>::ref_from_bytes(rest).map_err(|_| DecodeError::TooShort { need, got: bytes.len() })?;
        let ops = raws
            .iter()
            .map(|raw| {
                let (code, flags) = (raw.code & 0x0f, raw.code & 0xf0);
                let op_type = enum_field("op_type", code)?;
                if flags & !FLAGS_KNOWN != 0 {
                    return Err(DecodeError::BadField { field: "op_flags", value: u64::from(flags) });
                }
                Ok(Op { op_type, flags, key: raw.key.get(), value: raw.value })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        Ok(Message { ts: h.ts.get(), status, client: h.client.get(), seq: h.seq.get(), ops })
    }

    /// Reads a whole datagram: a `TransKv` frame and its message.
    pub fn open(bytes: &[u8]) -> Result<(Frame, Message), DecodeError> {
        let (frame, payload) = Frame::decode(bytes)?;
        if frame.kind != KIND {
            return Err(DecodeError::WrongKind(frame.kind));
        }
        Ok((frame, Message::decode(payload)?))
    }
}

/// The value a key holds after the transaction with timestamp `version` wrote it (0: the
/// initial load): the version in the first 8 bytes, then 40 bytes derived from key and version.
/// Every write of the simulation writes this, so a value names its writer (what the
/// serializability checker needs) and a cached copy can be compared with the store's.
pub fn value_of(key: u128, version: u64) -> Value {
    let mut value = [0u8; VALUE_BYTES];
    value[..8].copy_from_slice(&version.to_be_bytes());
    let mut x = (key as u64) ^ ((key >> 64) as u64) ^ version.rotate_left(17);
    for chunk in value[8..].chunks_exact_mut(8) {
        x = pisadb_core::rng::splitmix64(x);
        chunk.copy_from_slice(&x.to_be_bytes());
    }
    value
}

/// The version (writer's timestamp) a value names.
pub fn version_of(value: &Value) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&value[..8]);
    u64::from_be_bytes(word)
}

/// Datagrams a host rejected, counted by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Count per reason (`DecodeError::reason` or a host's own label).
    pub by_reason: BTreeMap<&'static str, u64>,
}

impl Rejections {
    /// Counts one rejection under `reason`.
    pub fn count(&mut self, reason: &'static str) {
        *self.by_reason.entry(reason).or_insert(0) += 1;
    }

    /// All rejections.
    pub fn total(&self) -> u64 {
        self.by_reason.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Message {
        let mut w = Op::write(u128::MAX - 3, value_of(9, 77));
        w.flags = FLAG_DECIDED;
        let mut r = Op::read(5);
        r.flags = FLAG_DECIDED | FLAG_SERVED;
        Message { ts: 42, status: Status::Prepare, client: 3, seq: 8, ops: vec![r, w] }
    }

    #[test]
    fn a_message_round_trips() {
        let msg = sample();
        let (frame, back) = Message::open(&msg.datagram(1, 2)).unwrap();
        assert_eq!((frame.src, frame.dst, frame.kind), (1, 2, KIND));
        assert_eq!(back, msg);
        assert_eq!(msg.datagram(1, 2).len(), pisadb_wire::FRAME_BYTES + HEADER_BYTES + 2 * OP_BYTES);
    }

    #[test]
    fn bad_input_is_rejected_with_its_reason() {
        let mut bytes = Vec::new();
        sample().encode(&mut bytes);
        let reason = |b: &[u8]| Message::decode(b).unwrap_err().reason();
        let mut bad = bytes.clone();
        bad[4] = 0;
        assert_eq!(reason(&bad), "bad_count");
        bad[4] = MAX_OPS as u8 + 1;
        assert_eq!(reason(&bad), "bad_count");
        let mut bad = bytes.clone();
        bad[5] = 19;
        assert_eq!(reason(&bad), "status");
        let mut bad = bytes.clone();
        bad[HEADER_BYTES] = 0x03;
        assert_eq!(reason(&bad), "op_type");
        let mut bad = bytes.clone();
        bad[HEADER_BYTES] = 0x81;
        assert_eq!(reason(&bad), "op_flags");
        assert_eq!(reason(&bytes[..bytes.len() - 1]), "too_short");
        assert_eq!(reason(&bytes[..3]), "too_short");
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(reason(&long), "trailing_bytes");
        let mut counted = Rejections::default();
        counted.count(reason(&long));
        counted.count(reason(&long));
        counted.count(reason(&bytes[..3]));
        assert_eq!((counted.total(), counted.by_reason["trailing_bytes"]), (3, 2));
    }

    #[test]
    fn a_value_names_its_version() {
        assert_eq!(version_of(&value_of(3, 99)), 99);
        assert_ne!(value_of(3, 99), value_of(4, 99));
        assert_ne!(value_of(3, 99), value_of(3, 98));
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        (any::<bool>(), 0u8..4, any::<u128>(), any::<u64>()).prop_map(|(write, flags, key, v)| Op {
            op_type: if write { OpType::Write } else { OpType::Read },
            flags: flags << 4,
            key,
            value: value_of(key, v),
        })
    }

    proptest! {
        #[test]
        fn every_message_round_trips(
            ts in any::<u32>(), status in 0u8..18, client in any::<u16>(), seq in any::<u32>(),
            ops in proptest::collection::vec(op_strategy(), 1..=MAX_OPS),
        ) {
            let msg = Message { ts, status: Status::try_from(status).unwrap(), client, seq, ops };
            let mut bytes = Vec::new();
            msg.encode(&mut bytes);
            prop_assert_eq!(Message::decode(&bytes).unwrap(), msg);
        }

        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(msg) = Message::decode(&bytes) {
                let mut again = Vec::new();
                msg.encode(&mut again);
                prop_assert_eq!(again, bytes);
            }
        }
    }
}
