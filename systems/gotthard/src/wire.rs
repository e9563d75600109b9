//! Gotthard's wire format: one header and up to ten operations, behind the shared frame.
//!
//! The layout follows the authors' `gotthard.p4` header (flags, client id, request id, status,
//! op count) with fixed-width ops of (type, key, value), plus one field of ours: the
//! *attempt*. The request id names a client's transaction and stays the same over all its
//! attempts (retransmissions after a timeout and retries after an abort), so the store's
//! deduplication can commit a transaction at most once; the attempt number tells the client
//! which reply answers the attempt it is waiting on (see `client.rs`). Values are 32-bit signed integers
//! because one switch cell is a pair of 32-bit halves (`crates/switch` models Tofino's 64-bit
//! pair); the original's 1024-bit BMv2 values do not fit a Tofino stateful ALU.
//!
//! ```text
//! flags u8 | client u32 | request u32 | attempt u16 | status u8 | count u8 | count × (type u8 | key u32 | value i32)
//! ```
//!
//! Decoding never panics: every length, count, op type and status is checked, and an error
//! names the field and the values it accepts (`DecodeError::reason` is the counter name).

use num_enum::TryFromPrimitive;
use pisadb_wire::{enum_field, exact_len, DecodeError, Frame, Kind};
use zerocopy::network_endian::{I32, U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The frame kind of every datagram this system sends: A Gotthard request or reply (client, switch, store).
pub const KIND: Kind = Kind::new(5);
/// Every frame kind this system declares (the binary's registry checks that no two systems collide).
pub const KINDS: &[Kind] = &[KIND];

/// At most this many ops in one message (the original's `GOTTHARD_MAX_OP`).
pub const MAX_OPS: usize = 10;
/// The header as it is on the wire.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawHeader {
    flags: u8,
    client: U32,
    request: U32,
    attempt: U16,
    status: u8,
    count: u8,
}

/// One op as it is on the wire.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawOp {
    op_type: u8,
    key: U32,
    value: I32,
}

/// Bytes of the header after the frame.
pub const HEADER_BYTES: usize = std::mem::size_of::<RawHeader>();
/// Bytes of one op.
pub const OP_BYTES: usize = std::mem::size_of::<RawOp>();

/// Flag: the message is a reply (from the store or the switch), not a request.
pub const FLAG_REPLY: u8 = 1;
/// Flag: the reply was made by the switch.
pub const FLAG_FROM_SWITCH: u8 = 2;
/// Every flag bit in use.
const FLAGS_KNOWN: u8 = FLAG_REPLY | FLAG_FROM_SWITCH;

/// What one op says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, TryFromPrimitive)]
#[repr(u8)]
pub enum OpType {
    /// `READ(k)`: the client asks for k's value.
    Read = 0,
    /// `WRITE(k, v)`: set k to v.
    Write = 1,
    /// `VALUE(k, v)`: in a request "I believe k = v"; in a reply "k is v".
    Value = 2,
    /// `UPDATED(k, v)`: in a reply, k was written to v.
    Updated = 3,
}

/// The outcome a reply carries (requests carry `Ok`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, TryFromPrimitive)]
#[repr(u8)]
pub enum Status {
    /// Committed (or, in a request, nothing yet).
    Ok = 0,
    /// Aborted by the store or by the switch against a committed value.
    Abort = 1,
    /// Aborted by the switch against an optimistically logged value.
    OptimisticAbort = 2,
    /// Refused: an empty request.
    BadRequest = 3,
}

/// One operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// What it says.
    pub op_type: OpType,
    /// The key.
    pub key: u32,
    /// The value (0 for a `READ`).
    pub value: i32,
}

impl Op {
    /// `READ(key)`.
    pub fn read(key: u32) -> Self {
        Op { op_type: OpType::Read, key, value: 0 }
    }
    /// `WRITE(key, value)`.
    pub fn write(key: u32, value: i32) -> Self {
        Op { op_type: OpType::Write, key, value }
    }
    /// `VALUE(key, value)`.
    pub fn value(key: u32, value: i32) -> Self {
        Op { op_type: OpType::Value, key, value }
    }
    /// `UPDATED(key, value)`.
    pub fn updated(key: u32, value: i32) -> Self {
        Op { op_type: OpType::Updated, key, value }
    }
}

/// A Gotthard message: a request or a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `FLAG_*` bits.
    pub flags: u8,
    /// The client that sent the request.
    pub client: u32,
    /// The client's request id: its transaction, the same over every attempt.
    pub request: u32,
    /// The attempt of the transaction (0 first; a retry after an abort takes the next one, a
    /// retransmission after a timeout repeats its attempt).
    pub attempt: u16,
    /// The outcome (replies).
    pub status: Status,
    /// The ops, at most [`MAX_OPS`].
    pub ops: Vec<Op>,
}

impl Message {
    /// A request.
    pub fn request(client: u32, request: u32, ops: Vec<Op>) -> Self {
        Message { flags: 0, client, request, attempt: 0, status: Status::Ok, ops }
    }

    /// The same request as attempt `attempt`.
    pub fn with_attempt(mut self, attempt: u16) -> Self {
        self.attempt = attempt;
        self
    }

    /// Whether this is a reply.
    pub fn is_reply(&self) -> bool {
        self.flags & FLAG_REPLY != 0
    }

    /// Bytes of the payload (without frame).
    pub fn payload_bytes(&self) -> usize {
        HEADER_BYTES + OP_BYTES * self.ops.len()
    }

    /// Appends the payload (no frame). More than [`MAX_OPS`] ops is a bug of the caller.
    pub fn encode(&self, out: &mut Vec<u8>) {
        debug_assert!(self.ops.len() <= MAX_OPS, "at most {MAX_OPS} ops");
        let header = RawHeader {
            flags: self.flags,
            client: U32::new(self.client),
            request: U32::new(self.request),
            attempt: U16::new(self.attempt),
            status: self.status as u8,
            count: u8::try_from(self.ops.len()).unwrap_or(u8::MAX),
        };
        out.extend_from_slice(header.as_bytes());
        for op in &self.ops {
            let raw = RawOp { op_type: op.op_type as u8, key: U32::new(op.key), value: I32::new(op.value) };
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

    /// Reads a payload; rejects short or long input, unknown flags, statuses and op types,
    /// and op counts above [`MAX_OPS`].
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (header, rest) = RawHeader::ref_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { need: HEADER_BYTES, got: bytes.len() })?;
        let flags = header.flags;
        if flags & !FLAGS_KNOWN != 0 {
            return Err(DecodeError::BadField { field: "flags", value: u64::from(flags) });
        }
        let status = enum_field("status", header.status)?;
        let count = usize::from(header.count);
        if count > MAX_OPS {
            return Err(DecodeError::BadCount { count, max: MAX_OPS });
        }
        let need = HEADER_BYTES + OP_BYTES * count;
        exact_len(bytes.len(), need)?;
        let raws = <[RawOp]>::ref_from_bytes(rest).map_err(|_| DecodeError::TooShort { need, got: bytes.len() })?;
        let ops = raws
            .iter()
            .map(|raw| {
                Ok(Op { op_type: enum_field("op_type", raw.op_type)?, key: raw.key.get(), value: raw.value.get() })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let (client, request, attempt) = (header.client.get(), header.request.get(), header.attempt.get());
        Ok(Message { flags, client, request, attempt, status, ops })
    }

    /// Reads a whole datagram: a `Gotthard` frame and its message.
    pub fn open(bytes: &[u8]) -> Result<(Frame, Message), DecodeError> {
        let (frame, payload) = Frame::decode(bytes)?;
        if frame.kind != KIND {
            return Err(DecodeError::WrongKind(frame.kind));
        }
        Ok((frame, Message::decode(payload)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_message_round_trips() {
        let msg = Message {
            flags: FLAG_REPLY,
            client: 7,
            request: 9,
            attempt: 3,
            status: Status::OptimisticAbort,
            ops: vec![Op::value(1, -5), Op::write(1, 6), Op::read(3), Op::updated(4, i32::MAX)],
        };
        let (frame, back) = Message::open(&msg.datagram(1, 2)).unwrap();
        assert_eq!((frame.src, frame.dst, frame.kind), (1, 2, KIND));
        assert_eq!(back, msg);
    }

    #[test]
    fn bad_input_names_its_field() {
        let mut bytes = Vec::new();
        Message::request(1, 1, vec![Op::read(1)]).encode(&mut bytes);
        let mut bad = bytes.clone();
        bad[0] = 0x80;
        assert_eq!(Message::decode(&bad).unwrap_err().reason(), "flags");
        let mut bad = bytes.clone();
        bad[11] = 9;
        assert_eq!(Message::decode(&bad).unwrap_err().reason(), "status");
        let mut bad = bytes.clone();
        bad[HEADER_BYTES] = 7;
        assert_eq!(Message::decode(&bad).unwrap_err().reason(), "op_type");
        let mut bad = bytes.clone();
        bad[12] = 11;
        assert_eq!(Message::decode(&bad).unwrap_err().reason(), "bad_count");
        assert_eq!(Message::decode(&bytes[..bytes.len() - 1]).unwrap_err().reason(), "too_short");
        bytes.push(0);
        assert_eq!(Message::decode(&bytes).unwrap_err().reason(), "trailing_bytes");
    }

    proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(msg) = Message::decode(&bytes) {
                let mut again = Vec::new();
                msg.encode(&mut again);
                prop_assert_eq!(again, bytes);
            }
        }
    }
}
