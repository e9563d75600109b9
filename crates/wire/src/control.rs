//! Control-plane messages: how a controller host reads and writes a switch's memory.
//!
//! On a Tofino the control plane (the switch's CPU running the driver) reads and writes
//! register cells and installs match-table entries over PCIe, between packets. PisaDB gives a
//! designated controller host the same powers over the wire: it sends a [`ControlMessage`]
//! request in a [`crate::Kind::CONTROL`] frame addressed to [`crate::SWITCH_ID`], and the switch
//! answers with a reply that echoes the request and says how it went ([`ControlStatus`]).
//!
//! ## Addressing a switch by id, hop by hop
//!
//! A request to [`crate::SWITCH_ID`] is carried out by the first switch it reaches: the one
//! the controller is linked to, which is all a one-switch rack needs. In a network of
//! switches a controller names its target instead: switch `s` answers to the frame address
//! [`switch_address`]`(s)` (a block at the top of the address space, below `SWITCH_ID`, that
//! no host uses). A switch that is not the target forwards the request like any datagram,
//! by its forwarding table, which the driver fills with a route to every other switch (one
//! mechanism for hosts and switches alike, so a switch with no hosts, an aggregation switch,
//! is reached as any other). The target carries the request out and answers from its own
//! address, so the controller knows who answered; the reply leaves by the port the request
//! came in by and retraces its path to the controller. The message below is the same
//! whichever way it is addressed.
//!
//! Every message, request or reply, has one fixed 52-byte layout (network byte order):
//!
//! ```text
//! op u8 | status u8 | object u8 | reserved u8 | request_id u32 | index u32 | key u64
//!       | arg_lo u64 | arg_hi u64 | out_lo u64 | out_hi u64
//! ```
//!
//! - `op`: the operation ([`OpCode`]), with the top bit set in a reply.
//! - `status`: 0 in a request; the outcome in a reply.
//! - `object`: the register array id or the table id.
//! - `index`: the register cell (register operations; 0 otherwise).
//! - `key`: the table key (table operations; 0 otherwise).
//! - `arg_lo`, `arg_hi`: the request's arguments, echoed in the reply: a register write's two
//!   halves (two's complement), or a table insert's value in `arg_lo`; unused ones are 0.
//! - `out_lo`, `out_hi`: 0 in a request; the reply's [`ControlResult`]: a register cell as
//!   read or as stored after a write (`lo`, `hi`), or for table operations the value an insert
//!   replaced or a delete removed in `out_lo`, with `out_hi` = 1 if there was one.
//!
//! A fixed layout keeps decoding a bounds check and a few field checks. Decoding never panics
//! (a property test feeds it random bytes): unknown opcodes or statuses, nonzero reserved or
//! unused fields and wrong lengths come back as a [`DecodeError`] naming the field.

use crate::{enum_field, DecodeError};
use num_enum::TryFromPrimitive;
use zerocopy::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawControl {
    op: u8,
    status: u8,
    object: u8,
    reserved: u8,
    request_id: U32,
    index: U32,
    key: U64,
    arg_lo: U64,
    arg_hi: U64,
    out_lo: U64,
    out_hi: U64,
}

/// The frame address of switch 0; switch `s` answers to `SWITCH_ADDRESS_BASE + s`.
pub const SWITCH_ADDRESS_BASE: u16 = 0xFF00;

/// Switches that have an address: ids `0..SWITCH_ADDRESSES` (the block ends below
/// [`crate::SWITCH_ID`]). Hosts must use ids below [`SWITCH_ADDRESS_BASE`].
pub const SWITCH_ADDRESSES: u16 = crate::SWITCH_ID - SWITCH_ADDRESS_BASE;

/// The frame address that names switch `switch` as a control request's target, if it has one.
pub fn switch_address(switch: u16) -> Option<u16> {
    (switch < SWITCH_ADDRESSES).then(|| SWITCH_ADDRESS_BASE + switch)
}

/// The switch a frame address names, if it is one of [`switch_address`]'s.
pub fn addressed_switch(address: u16) -> Option<u16> {
    (SWITCH_ADDRESS_BASE..crate::SWITCH_ID).contains(&address).then(|| address - SWITCH_ADDRESS_BASE)
}

/// Bytes of every control message (without the frame).
pub const CONTROL_BYTES: usize = std::mem::size_of::<RawControl>();

/// The bit of the `op` byte that marks a reply.
const REPLY_BIT: u8 = 0x80;

/// The operation a control message asks for, as its `op` byte (without the reply bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, TryFromPrimitive)]
#[repr(u8)]
pub enum OpCode {
    /// Read one register cell.
    ReadRegister = 1,
    /// Write one register cell.
    WriteRegister = 2,
    /// Insert a table entry, or overwrite the value of an existing key.
    InsertEntry = 3,
    /// Delete a table entry.
    DeleteEntry = 4,
}

/// A control-plane operation with its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlOp {
    /// Read cell `index` of register array `register`.
    ReadRegister {
        /// The register array id.
        register: u8,
        /// The cell.
        index: u32,
    },
    /// Write cell `index` of register array `register` (values wrap to the array's width).
    WriteRegister {
        /// The register array id.
        register: u8,
        /// The cell.
        index: u32,
        /// The low half (or the whole cell).
        lo: i64,
        /// The high half of a pair cell (ignored for a single cell).
        hi: i64,
    },
    /// Insert `key -> value` into table `table`, overwriting the value of an existing key.
    InsertEntry {
        /// The table id.
        table: u8,
        /// The key.
        key: u64,
        /// The value.
        value: u64,
    },
    /// Delete the entry of `key` from table `table`.
    DeleteEntry {
        /// The table id.
        table: u8,
        /// The key.
        key: u64,
    },
}

impl ControlOp {
    /// The operation's code.
    pub fn code(&self) -> OpCode {
        match self {
            ControlOp::ReadRegister { .. } => OpCode::ReadRegister,
            ControlOp::WriteRegister { .. } => OpCode::WriteRegister,
            ControlOp::InsertEntry { .. } => OpCode::InsertEntry,
            ControlOp::DeleteEntry { .. } => OpCode::DeleteEntry,
        }
    }

    /// Whether the operation changes switch memory.
    pub fn is_write(&self) -> bool {
        !matches!(self, ControlOp::ReadRegister { .. })
    }

    fn fill(&self, raw: &mut RawControl) {
        raw.op = self.code() as u8;
        match *self {
            ControlOp::ReadRegister { register, index } => (raw.object, raw.index) = (register, U32::new(index)),
            ControlOp::WriteRegister { register, index, lo, hi } => {
                (raw.object, raw.index) = (register, U32::new(index));
                (raw.arg_lo, raw.arg_hi) = (U64::new(lo as u64), U64::new(hi as u64));
            }
            ControlOp::InsertEntry { table, key, value } => {
                (raw.object, raw.key, raw.arg_lo) = (table, U64::new(key), U64::new(value));
            }
            ControlOp::DeleteEntry { table, key } => (raw.object, raw.key) = (table, U64::new(key)),
        }
    }

    /// Reads the operation from `raw`, requiring the fields it does not use to be zero.
    fn read(raw: &RawControl, code: OpCode) -> Result<Self, DecodeError> {
        let (object, index, key) = (raw.object, raw.index.get(), raw.key.get());
        let (arg_lo, arg_hi) = (raw.arg_lo.get(), raw.arg_hi.get());
        let unused: &[(&'static str, u64)] = match code {
            OpCode::ReadRegister => &[("key", key), ("arg_lo", arg_lo), ("arg_hi", arg_hi)],
            OpCode::WriteRegister => &[("key", key)],
            OpCode::InsertEntry => &[("index", u64::from(index)), ("arg_hi", arg_hi)],
            OpCode::DeleteEntry => &[("index", u64::from(index)), ("arg_lo", arg_lo), ("arg_hi", arg_hi)],
        };
        if let Some(&(field, value)) = unused.iter().find(|(_, v)| *v != 0) {
            return Err(DecodeError::BadField { field, value });
        }
        Ok(match code {
            OpCode::ReadRegister => ControlOp::ReadRegister { register: object, index },
            OpCode::WriteRegister => {
                ControlOp::WriteRegister { register: object, index, lo: arg_lo as i64, hi: arg_hi as i64 }
            }
            OpCode::InsertEntry => ControlOp::InsertEntry { table: object, key, value: arg_lo },
            OpCode::DeleteEntry => ControlOp::DeleteEntry { table: object, key },
        })
    }
}

/// How a control operation went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, TryFromPrimitive)]
#[repr(u8)]
pub enum ControlStatus {
    /// Done.
    Ok = 0,
    /// No register array has this id.
    UnknownRegister = 1,
    /// The register index is past the array's end.
    IndexOutOfRange = 2,
    /// No table has this id.
    UnknownTable = 3,
    /// The key has bits set above the table's key width.
    KeyTooWide = 4,
    /// The value has bits set above the table's value width.
    ValueTooWide = 5,
    /// The table holds as many entries as it was declared with.
    TableFull = 6,
    /// The key has no entry to delete.
    NoSuchEntry = 7,
}

/// What a successful control operation reports back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlResult {
    /// A register cell as read, or as stored after a write: low half and high half (0 for a
    /// single cell). Register operations that failed report `Cell { lo: 0, hi: 0 }`.
    Cell {
        /// The low half (or the whole cell).
        lo: i64,
        /// The high half of a pair cell.
        hi: i64,
    },
    /// A table operation: the value an insert replaced or a delete removed, if any.
    Entry {
        /// The earlier value of the key.
        previous: Option<u64>,
    },
}

/// A control-plane message: a controller's request, or the switch's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlMessage {
    /// The controller asks the switch to run `op`.
    Request {
        /// Chosen by the controller to match the reply.
        request_id: u32,
        /// The operation.
        op: ControlOp,
    },
    /// The switch's answer to a request.
    Reply {
        /// The request's id.
        request_id: u32,
        /// The request's operation, echoed.
        op: ControlOp,
        /// How it went.
        status: ControlStatus,
        /// What it read, stored or replaced.
        result: ControlResult,
    },
}

impl ControlMessage {
    /// Appends the message (without frame) to `out`; it always takes [`CONTROL_BYTES`].
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut raw = RawControl::default();
        match *self {
            ControlMessage::Request { request_id, op } => {
                op.fill(&mut raw);
                raw.request_id = U32::new(request_id);
            }
            ControlMessage::Reply { request_id, op, status, result } => {
                op.fill(&mut raw);
                raw.op |= REPLY_BIT;
                (raw.request_id, raw.status) = (U32::new(request_id), status as u8);
                let (lo, hi) = match result {
                    ControlResult::Cell { lo, hi } => (lo as u64, hi as u64),
                    ControlResult::Entry { previous: Some(value) } => (value, 1),
                    ControlResult::Entry { previous: None } => (0, 0),
                };
                (raw.out_lo, raw.out_hi) = (U64::new(lo), U64::new(hi));
            }
        }
        out.extend_from_slice(raw.as_bytes());
    }

    /// Reads a message from `payload` (the bytes behind the frame), which must be exactly
    /// [`CONTROL_BYTES`] long.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let (raw, rest) = RawControl::ref_from_prefix(payload)
            .map_err(|_| DecodeError::TooShort { need: CONTROL_BYTES, got: payload.len() })?;
        if !rest.is_empty() {
            return Err(DecodeError::TrailingBytes { extra: rest.len() });
        }
        if raw.reserved != 0 {
            return Err(DecodeError::BadField { field: "reserved", value: u64::from(raw.reserved) });
        }
        let code = enum_field::<OpCode>("control_op", raw.op & !REPLY_BIT)?;
        let op = ControlOp::read(raw, code)?;
        let request_id = raw.request_id.get();
        let (out_lo, out_hi) = (raw.out_lo.get(), raw.out_hi.get());
        if raw.op & REPLY_BIT == 0 {
            let nonzero = [("control_status", u64::from(raw.status)), ("out_lo", out_lo), ("out_hi", out_hi)];
            if let Some(&(field, value)) = nonzero.iter().find(|(_, v)| *v != 0) {
                return Err(DecodeError::BadField { field, value });
            }
            return Ok(ControlMessage::Request { request_id, op });
        }
        let status = enum_field::<ControlStatus>("control_status", raw.status)?;
        let result = match code {
            OpCode::ReadRegister | OpCode::WriteRegister => {
                ControlResult::Cell { lo: out_lo as i64, hi: out_hi as i64 }
            }
            OpCode::InsertEntry | OpCode::DeleteEntry => match out_hi {
                0 if out_lo == 0 => ControlResult::Entry { previous: None },
                0 => return Err(DecodeError::BadField { field: "out_lo", value: out_lo }),
                1 => ControlResult::Entry { previous: Some(out_lo) },
                other => return Err(DecodeError::BadField { field: "out_hi", value: other }),
            },
        };
        Ok(ControlMessage::Reply { request_id, op, status, result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(msg: ControlMessage) -> ControlMessage {
        let mut bytes = Vec::new();
        msg.encode(&mut bytes);
        assert_eq!(bytes.len(), CONTROL_BYTES);
        ControlMessage::decode(&bytes).unwrap()
    }

    #[test]
    fn switch_addresses_are_a_block_below_switch_id_and_round_trip() {
        assert_eq!(switch_address(0), Some(SWITCH_ADDRESS_BASE));
        assert_eq!(switch_address(SWITCH_ADDRESSES - 1), Some(crate::SWITCH_ID - 1));
        assert_eq!(switch_address(SWITCH_ADDRESSES), None, "SWITCH_ID is not a switch's address");
        for s in [0, 7, SWITCH_ADDRESSES - 1] {
            assert_eq!(addressed_switch(switch_address(s).unwrap()), Some(s));
        }
        assert_eq!(addressed_switch(crate::SWITCH_ID), None);
        assert_eq!(addressed_switch(SWITCH_ADDRESS_BASE - 1), None, "hosts are not switches");
    }

    #[test]
    fn the_layout_is_52_bytes() {
        assert_eq!(CONTROL_BYTES, 52);
    }

    #[test]
    fn requests_and_replies_round_trip() {
        let ops = [
            ControlOp::ReadRegister { register: 3, index: 77 },
            ControlOp::WriteRegister { register: 63, index: u32::MAX, lo: -5, hi: i64::MIN },
            ControlOp::InsertEntry { table: 1, key: u64::MAX, value: 42 },
            ControlOp::DeleteEntry { table: 9, key: 1 << 40 },
        ];
        for op in ops {
            let request = ControlMessage::Request { request_id: 0xDEAD_BEEF, op };
            assert_eq!(round_trip(request), request);
            let result = match op.code() {
                OpCode::ReadRegister | OpCode::WriteRegister => ControlResult::Cell { lo: -1, hi: 7 },
                _ => ControlResult::Entry { previous: Some(0) },
            };
            let reply = ControlMessage::Reply { request_id: 1, op, status: ControlStatus::TableFull, result };
            assert_eq!(round_trip(reply), reply);
        }
        let none = ControlMessage::Reply {
            request_id: 2,
            op: ops[2],
            status: ControlStatus::Ok,
            result: ControlResult::Entry { previous: None },
        };
        assert_eq!(round_trip(none), none);
    }

    #[test]
    fn malformed_messages_name_the_field() {
        let mut bytes = Vec::new();
        ControlMessage::Request { request_id: 1, op: ControlOp::ReadRegister { register: 1, index: 2 } }
            .encode(&mut bytes);
        let reason = |mutate: &dyn Fn(&mut Vec<u8>)| {
            let mut b = bytes.clone();
            mutate(&mut b);
            ControlMessage::decode(&b).unwrap_err().reason()
        };
        assert_eq!(reason(&|b| b[0] = 9), "control_op");
        assert_eq!(reason(&|b| b[1] = 1), "control_status", "a request carries no status");
        assert_eq!(reason(&|b| b[3] = 1), "reserved");
        assert_eq!(reason(&|b| b[12] = 1), "key", "a register read has no key");
        assert_eq!(reason(&|b| (b[0], b[1]) = (REPLY_BIT | 1, 8)), "control_status");
        assert_eq!(reason(&|b| (b[0], b[51]) = (REPLY_BIT | 4, 2)), "index", "a table op has no index");
        assert_eq!(
            reason(&|b| (b[0], b[11], b[51]) = (REPLY_BIT | 4, 0, 2)),
            "out_hi",
            "previous-value flag is 0 or 1"
        );
        assert_eq!(reason(&|b| b.push(0)), "trailing_bytes");
        assert_eq!(reason(&|b| b.truncate(10)), "too_short");
    }

    proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(msg) = ControlMessage::decode(&bytes) {
                let mut again = Vec::new();
                msg.encode(&mut again);
                prop_assert_eq!(again, bytes, "whatever decodes re-encodes to the same bytes");
            }
        }

        #[test]
        fn any_request_or_reply_round_trips(
            code in 1u8..=4, object: u8, index: u32, key: u64, lo: i64, hi: i64,
            reply: bool, status in 0u8..=7, previous: Option<u64>,
        ) {
            let op = match code {
                1 => ControlOp::ReadRegister { register: object, index },
                2 => ControlOp::WriteRegister { register: object, index, lo, hi },
                3 => ControlOp::InsertEntry { table: object, key, value: lo as u64 },
                _ => ControlOp::DeleteEntry { table: object, key },
            };
            let msg = if reply {
                let status = ControlStatus::try_from(status).unwrap();
                let result = match code {
                    1 | 2 => ControlResult::Cell { lo: hi, hi: lo },
                    _ => ControlResult::Entry { previous },
                };
                ControlMessage::Reply { request_id: index ^ 7, op, status, result }
            } else {
                ControlMessage::Request { request_id: index ^ 7, op }
            };
            prop_assert_eq!(round_trip(msg), msg);
        }

        #[test]
        fn decoding_near_valid_bytes_never_panics(
            op in 0u8..=255, status in 0u8..10, fields in proptest::array::uniform32(any::<u8>()),
        ) {
            let mut bytes = vec![op, status, 1, 0];
            bytes.extend_from_slice(&[0; 16]);
            bytes.extend_from_slice(&fields);
            if let Ok(msg) = ControlMessage::decode(&bytes) {
                let mut again = Vec::new();
                msg.encode(&mut again);
                prop_assert_eq!(again, bytes);
            }
        }
    }
}
