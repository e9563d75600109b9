//! The P4DB switch-transaction packet (paper §5.4, Fig. 6).
//!
//! ```text
//! header (30 B): txn_id u64 | epoch u16 · gid u48 | recircs u32 | acc i32 | is_multipass u8 | lock_left u8 | lock_right u8 | count u8 | multicast u16
//! count × instruction (8 B): register u8 | opcode u8 | index u16 | data i32
//!   register: bits 0-5 register id (1..=63), bit 6 end of pass, bit 7 last instruction
//!   opcode:   bits 0-3 register action, bit 4 acc_in, bits 5-6 acc_out (none/set/add/sub), bit 7 zero
//! ```
//!
//! The node that sends a transaction fixes its pass plan: the *end of pass* bit closes each
//! pass, so the switch can check the plan against the hardware's rules when the packet arrives
//! instead of discovering a violation halfway through. The *last* bit mirrors the P4 parser's
//! stop condition and must sit on the final instruction only. All integers are big-endian.
//!
//! The GID word carries the switch's *epoch* (its incarnation: 0 at first, one more after each
//! rebuild from the logs) in its top 16 bits and the GID in the low 48 (2.8 × 10¹⁴ transactions,
//! nine years at a billion a second). A node drops an answer from an epoch older than one it
//! knows of: it was sent by a switch that crashed before its rebuild, which may have decided
//! that transaction differently.
//!
//! `multicast` is 0 for a reply to the sender only; otherwise the switch sends the finished
//! packet to every member of that multicast group (a warm transaction's participants, who
//! commit on it: paper §6.2, Fig. 10).

use pisadb_core::AccOut;
use pisadb_wire::{bool_field, exact_len, DecodeError};
use zerocopy::network_endian::{I32, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// GIDs are below this: the GID word's low 48 bits.
pub const GID_LIMIT: u64 = 1 << 48;
const EPOCH_SHIFT: u32 = 48;

/// At most this many instructions per packet (the parser's unrolled loop in the P4 program).
pub const MAX_INSTRUCTIONS: usize = 32;

/// Largest register id an instruction can name (6 bits).
pub const MAX_REGISTER_ID: u8 = 63;

const END_OF_PASS: u8 = 0x40;
const LAST: u8 = 0x80;
const REGISTER_MASK: u8 = 0x3F;
const ACTION_MASK: u8 = 0x0F;
const ACC_IN: u8 = 0x10;
const ACC_OUT_SHIFT: u8 = 5;
const OPCODE_RESERVED: u8 = 0x80;

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawHeader {
    txn_id: U64,
    epoch_gid: U64,
    recircs: U32,
    acc: I32,
    is_multipass: u8,
    lock_left: u8,
    lock_right: u8,
    count: u8,
    multicast: U16,
}

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawInstruction {
    register: u8,
    opcode: u8,
    index: U16,
    data: I32,
}

/// Bytes of the transaction header.
pub const HEADER_BYTES: usize = std::mem::size_of::<RawHeader>();
/// Bytes of one instruction.
pub const INSTRUCTION_BYTES: usize = std::mem::size_of::<RawInstruction>();

/// The 2-bit lock pair of §5.3: which halves of the pipeline a transaction locks (multi-pass)
/// or needs free (single-pass).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockPair {
    /// The lock over the first half of the data stages.
    pub left: bool,
    /// The lock over the second half of the data stages.
    pub right: bool,
}

impl LockPair {
    /// Both locks: the whole pipeline.
    pub const BOTH: LockPair = LockPair { left: true, right: true };

    /// Whether `self` includes every lock of `other`.
    pub fn covers(&self, other: LockPair) -> bool {
        (self.left || !other.left) && (self.right || !other.right)
    }

    /// The union of two lock sets.
    pub fn union(self, other: LockPair) -> LockPair {
        LockPair { left: self.left || other.left, right: self.right || other.right }
    }
}

/// One operation of a switch transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// Register array id (1..=63).
    pub register: u8,
    /// Which of the register's actions to run (0..=15).
    pub action: u8,
    /// Whether the accumulator is an input of the action.
    pub acc_in: bool,
    /// How the action's output folds into the accumulator.
    pub acc_out: AccOut,
    /// Entry of the register array.
    pub index: u16,
    /// Operand on the way in, result on the way back.
    pub data: i32,
    /// Whether this instruction closes its pass.
    pub end_of_pass: bool,
}

/// A P4DB switch transaction, request or reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnPacket {
    /// Chosen by the sending node to match the reply.
    pub txn_id: u64,
    /// Global transaction id, stamped by the switch; zero in a request. Below [`GID_LIMIT`].
    pub gid: u64,
    /// The epoch of the switch that answered; zero in a request.
    pub epoch: u16,
    /// How often the packet was recirculated while waiting (priority against starvation).
    pub recircs: u32,
    /// The accumulator (a PHV field that survives recirculation).
    pub acc: i32,
    /// Whether the plan has more than one pass.
    pub is_multipass: bool,
    /// Locks to take (multi-pass) or that must be free (single-pass).
    pub locks: LockPair,
    /// The instructions, in pass order.
    pub instrs: Vec<Instruction>,
    /// Multicast group for the result (0: back to the sender only).
    pub multicast: u16,
}

impl TxnPacket {
    /// Bytes the encoded packet (without frame) takes.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.instrs.len() * INSTRUCTION_BYTES
    }

    /// Number of passes the plan announces.
    pub fn passes(&self) -> usize {
        self.instrs.iter().filter(|i| i.end_of_pass).count()
    }

    /// Appends the packet to `out`. Panics if the packet breaks the format (a bug in the
    /// sender, not bad input): no instructions, too many, or a field out of range.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let count = self.instrs.len();
        assert!((1..=MAX_INSTRUCTIONS).contains(&count), "instruction count {count}");
        assert!(self.gid < GID_LIMIT, "GID {}", self.gid);
        let header = RawHeader {
            txn_id: U64::new(self.txn_id),
            epoch_gid: U64::new(u64::from(self.epoch) << EPOCH_SHIFT | self.gid),
            recircs: U32::new(self.recircs),
            acc: I32::new(self.acc),
            is_multipass: u8::from(self.is_multipass),
            lock_left: u8::from(self.locks.left),
            lock_right: u8::from(self.locks.right),
            count: count as u8,
            multicast: U16::new(self.multicast),
        };
        out.extend_from_slice(header.as_bytes());
        for (i, instr) in self.instrs.iter().enumerate() {
            assert!((1..=MAX_REGISTER_ID).contains(&instr.register), "register {}", instr.register);
            assert!(instr.action <= ACTION_MASK, "action {}", instr.action);
            let last = if i + 1 == count { LAST } else { 0 };
            let eop = if instr.end_of_pass { END_OF_PASS } else { 0 };
            let raw = RawInstruction {
                register: instr.register | eop | last,
                opcode: instr.action
                    | if instr.acc_in { ACC_IN } else { 0 }
                    | (acc_out_bits(instr.acc_out) << ACC_OUT_SHIFT),
                index: U16::new(instr.index),
                data: I32::new(instr.data),
            };
            out.extend_from_slice(raw.as_bytes());
        }
    }

    /// Reads a packet (the bytes after the frame). Checks the format only; whether the plan
    /// fits the switch's pipeline is the switch program's check.
    pub fn decode(bytes: &[u8]) -> Result<TxnPacket, DecodeError> {
        let (header, rest) = RawHeader::ref_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { need: HEADER_BYTES, got: bytes.len() })?;
        let count = usize::from(header.count);
        if !(1..=MAX_INSTRUCTIONS).contains(&count) {
            return Err(DecodeError::BadCount { count, max: MAX_INSTRUCTIONS });
        }
        let need = HEADER_BYTES + count * INSTRUCTION_BYTES;
        exact_len(bytes.len(), need)?;
        let raws =
            <[RawInstruction]>::ref_from_bytes(rest).map_err(|_| DecodeError::TooShort { need, got: bytes.len() })?;
        let mut instrs = Vec::with_capacity(count);
        for (i, raw) in raws.iter().enumerate() {
            instrs.push(decode_instruction(raw, i + 1 == count)?);
        }
        Ok(TxnPacket {
            txn_id: header.txn_id.get(),
            gid: header.epoch_gid.get() & (GID_LIMIT - 1),
            epoch: (header.epoch_gid.get() >> EPOCH_SHIFT) as u16,
            recircs: header.recircs.get(),
            acc: header.acc.get(),
            is_multipass: bool_field("is_multipass", header.is_multipass)?,
            locks: LockPair {
                left: bool_field("lock_left", header.lock_left)?,
                right: bool_field("lock_right", header.lock_right)?,
            },
            instrs,
            multicast: header.multicast.get(),
        })
    }
}

fn decode_instruction(raw: &RawInstruction, is_final: bool) -> Result<Instruction, DecodeError> {
    let register = raw.register & REGISTER_MASK;
    if register == 0 {
        return Err(DecodeError::BadField { field: "register", value: 0 });
    }
    if (raw.register & LAST != 0) != is_final {
        return Err(DecodeError::BadField { field: "last_bit", value: u64::from(raw.register) });
    }
    let end_of_pass = raw.register & END_OF_PASS != 0;
    if is_final && !end_of_pass {
        return Err(DecodeError::BadField { field: "end_of_pass", value: u64::from(raw.register) });
    }
    if raw.opcode & OPCODE_RESERVED != 0 {
        return Err(DecodeError::BadField { field: "opcode", value: u64::from(raw.opcode) });
    }
    Ok(Instruction {
        register,
        action: raw.opcode & ACTION_MASK,
        acc_in: raw.opcode & ACC_IN != 0,
        acc_out: acc_out_from_bits((raw.opcode >> ACC_OUT_SHIFT) & 0b11),
        index: raw.index.get(),
        data: raw.data.get(),
        end_of_pass,
    })
}

fn acc_out_bits(mode: AccOut) -> u8 {
    match mode {
        AccOut::None => 0,
        AccOut::Set => 1,
        AccOut::Add => 2,
        AccOut::Sub => 3,
    }
}

fn acc_out_from_bits(bits: u8) -> AccOut {
    match bits {
        0 => AccOut::None,
        1 => AccOut::Set,
        2 => AccOut::Add,
        _ => AccOut::Sub,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn instruction() -> impl Strategy<Value = Instruction> {
        (1..=MAX_REGISTER_ID, 0..=ACTION_MASK, any::<bool>(), 0..4u8, any::<u16>(), any::<i32>(), any::<bool>())
            .prop_map(|(register, action, acc_in, acc, index, data, end_of_pass)| Instruction {
                register,
                action,
                acc_in,
                acc_out: acc_out_from_bits(acc),
                index,
                data,
                end_of_pass,
            })
    }

    fn packet() -> impl Strategy<Value = TxnPacket> {
        (
            any::<u64>(),
            (0..GID_LIMIT, any::<u16>()),
            any::<u32>(),
            any::<i32>(),
            any::<bool>(),
            any::<(bool, bool)>(),
            proptest::collection::vec(instruction(), 1..=MAX_INSTRUCTIONS),
            any::<u16>(),
        )
            .prop_map(
                |(txn_id, (gid, epoch), recircs, acc, is_multipass, (left, right), mut instrs, multicast)| {
                    instrs.last_mut().unwrap().end_of_pass = true;
                    let locks = LockPair { left, right };
                    TxnPacket { txn_id, gid, epoch, recircs, acc, is_multipass, locks, instrs, multicast }
                },
            )
    }

    proptest! {
        #[test]
        fn packets_round_trip(pkt in packet()) {
            let mut bytes = Vec::new();
            pkt.encode(&mut bytes);
            prop_assert_eq!(bytes.len(), pkt.encoded_len());
            prop_assert_eq!(TxnPacket::decode(&bytes).unwrap(), pkt);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Err(e) = TxnPacket::decode(&bytes) {
                prop_assert!(!e.reason().is_empty());
            }
        }

        #[test]
        fn any_truncation_is_rejected(pkt in packet(), cut in 1usize..8) {
            let mut bytes = Vec::new();
            pkt.encode(&mut bytes);
            let keep = bytes.len().saturating_sub(cut);
            prop_assert!(TxnPacket::decode(&bytes[..keep]).is_err());
        }
    }

    #[test]
    fn last_bit_must_mark_the_final_instruction_only() {
        let instr = Instruction {
            register: 1,
            action: 0,
            acc_in: false,
            acc_out: AccOut::None,
            index: 0,
            data: 0,
            end_of_pass: true,
        };
        let pkt = TxnPacket { instrs: vec![instr, instr], ..Default::default() };
        let mut bytes = Vec::new();
        pkt.encode(&mut bytes);
        bytes[HEADER_BYTES] |= LAST; // mark the first instruction as last too
        assert_eq!(TxnPacket::decode(&bytes).unwrap_err().reason(), "last_bit");
    }

    #[test]
    fn zero_instructions_and_bad_flags_are_rejected() {
        let mut bytes = vec![0u8; HEADER_BYTES];
        assert_eq!(TxnPacket::decode(&bytes).unwrap_err().reason(), "bad_count");
        bytes[27] = 1; // count
        bytes.extend_from_slice(&[1 | LAST | END_OF_PASS, 0, 0, 0, 0, 0, 0, 0]);
        assert!(TxnPacket::decode(&bytes).is_ok());
        bytes[24] = 2; // is_multipass must be 0 or 1
        assert_eq!(TxnPacket::decode(&bytes).unwrap_err().reason(), "is_multipass");
    }
}
