//! SwitchTx's wire format: one fixed control message the switches parse, and the data
//! messages they only route.
//!
//! **Control messages** (§3.2.2, Figure 6) carry the coordination of one attempt: which slot
//! of the switches' registers it owns and its 16-bit tag there, the message type (the phase
//! result: `lock_ok`, `validate_ok`, `replicate_ok`, `commit_ok`, `fail`, or the client's
//! `init`), and, per switch of the tree, the switch's part of the gather-and-scatter: its
//! threshold, its role (leaf: forward the last message up; root: scatter) and its scatter
//! group. The layout is fixed (zerocopy, network byte order) so a parser reads it at fixed
//! offsets; [`CONTROL_BYTES`] is 58 bytes with room for [`MAX_SWITCHES`] switches, well under
//! the 224-byte parser limit (a test proves it; an earlier design used 40 bytes without the
//! host-side fields).
//!
//! ```text
//! msg u8 | flags u8 | slot u16 | tag u16 | client u8 | thread u8 | sender u8 | class u8
//! | attempt u32 | txn u64 | throughput u32 | 8 × (threshold u8 | role u8 | scatter u16)
//! ```
//!
//! **Data messages** are reliable host-to-host traffic (RDMA RC in the paper): execute-phase
//! reads and their replies, and the client's `prepare` at the start of the lock phase that
//! hands each participant its write set, its read set with versions and the coordination
//! info (which servers are write primaries, write backups and read primaries, and how the
//! transaction is coordinated), so the switches can drive the rest without the client; and
//! the recovery after a timeout (`query`, its reply, `resolve`, its ack; §3.5).
//!
//! Decoding never panics: every length, count and type is checked and an error names the
//! field (`DecodeError::reason` is the counter name).

use num_enum::TryFromPrimitive;
use pisadb_wire::{bool_field, enum_field, exact_len, DecodeError, Frame, Kind, FRAME_BYTES};
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The frame kind of every datagram this system sends: A SwitchTx coordination or data message (servers and the gather-and-scatter switches).
pub const KIND: Kind = Kind::new(7);
/// Every frame kind this system declares (the binary's registry checks that no two systems collide).
pub const KINDS: &[Kind] = &[KIND];

/// Switches a control message has an entry for (switch ids `0..MAX_SWITCHES`).
pub const MAX_SWITCHES: usize = 8;
/// The parser limit of a Tofino: 224 bytes of header (seed 001 §2.4).
pub const PARSER_LIMIT_BYTES: usize = 224;
/// Most items in one data message (a `prepare` carries a participant's writes, the writes it
/// backs up and its reads: at most twice a transaction's [`MAX_KEYS`]). Data messages are
/// routed, never parsed by a switch, so the parser limit does not bound them.
pub const MAX_ITEMS: usize = 2 * MAX_KEYS;
/// Most keys in one transaction.
pub const MAX_KEYS: usize = 64;

/// Flag: the message comes down the tree from the root (scatter): switches only multicast it.
pub const FLAG_DOWN: u8 = 1;
/// Flag: the message belongs to a retrying transaction (high priority, §3.4.1).
pub const FLAG_RETRY: u8 = 2;
/// Every flag bit in use.
const FLAGS_KNOWN: u8 = FLAG_DOWN | FLAG_RETRY;

/// A switch's role for one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, TryFromPrimitive)]
#[repr(u8)]
pub enum Role {
    /// Not on the transaction's tree: forward.
    None = 0,
    /// A leaf below the root: gather, then send the last message up.
    Leaf = 1,
    /// The root: gather, then scatter.
    Root = 2,
}

/// The message types: control (`0..16`) and data (`16..`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, TryFromPrimitive)]
#[repr(u8)]
pub enum MsgType {
    /// The client (re)claims its slot: install the tag, clear flag and counter.
    Init = 1,
    /// A write primary locked its keys (gathered: `#W_P`; scattered: validate, to `R_P`).
    LockOk = 2,
    /// A read primary validated its versions (`#R_P`; then commit backup, to `W_B`).
    ValidateOk = 3,
    /// A write backup logged the redo record (`#W_B`; then commit primary, to `W_P`).
    ReplicateOk = 4,
    /// A write primary installed and unlocked (`#W_P`; then to the client).
    CommitOk = 5,
    /// A participant failed (threshold 1; to the write participants and the client).
    Fail = 6,
    /// A read-only transaction's read primary copied its versions (`#R_P`; then validate
    /// and read, to `R_P`, who answer the client directly).
    VersionCopyOk = 7,
    /// Eris baseline: a one-shot transaction to sequence ([`Sequenced`]).
    ErisTxn = 8,
    /// Execute phase: read keys (data).
    Read = 16,
    /// The values, versions and lock bits of a read (data).
    ReadReply = 17,
    /// Start of the lock phase: a participant's write and read sets (data).
    Prepare = 18,
    /// After a timeout: freeze the attempt and say what you did (data).
    Query = 19,
    /// A participant's state: `wp` bit 0 installed (primary), bit 1 replicated (backup).
    QueryReply = 20,
    /// The client's decision: `wp` 1 commit, 0 roll back; answered with a `ResolveAck`.
    Resolve = 21,
    /// A participant carried the decision out.
    ResolveAck = 22,
    /// Eris baseline: a shard executed its part (`coord` names the shard; items: what it
    /// read).
    ErisReply = 23,
    /// A server asks the configuration manager for a lease (`ShardMap`): `attempt`
    /// the epoch of its map, `txn` when it asked (its clock, echoed in the grant).
    Lease = 24,
    /// The manager's answer: `attempt` its map's epoch, `txn` the echoed asking time, `wp` 1
    /// if the lease is granted (the server is in the map), items the map
    /// (`ShardMap::to_items`).
    Grant = 25,
}

impl MsgType {
    fn from_u8(byte: u8) -> Result<Self, DecodeError> {
        enum_field("msg_type", byte)
    }

    /// Whether a message whose first byte is `byte` is a control message.
    pub fn is_control_byte(byte: u8) -> bool {
        byte < 16
    }

    /// Whether switches coordinate on it (else they route it).
    pub fn is_control(self) -> bool {
        (self as u8) < 16
    }
}

/// One switch's part of a control message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct SwitchEntry {
    /// Messages to gather before the switch moves on (0: not involved in this phase).
    pub threshold: u8,
    /// A [`Role`] as a byte.
    pub role: u8,
    /// The multicast group to scatter to (root) or to pass a down message on to (leaf).
    pub scatter: U16,
}

impl SwitchEntry {
    /// The entry of a switch in `role` with `threshold` and `scatter`.
    pub fn new(role: Role, threshold: u8, scatter: u16) -> Self {
        SwitchEntry { threshold, role: role as u8, scatter: U16::new(scatter) }
    }

    /// The role (an unknown byte reads as [`Role::None`]; decoding rejects it anyway).
    pub fn role(&self) -> Role {
        Role::try_from_primitive(self.role).unwrap_or(Role::None)
    }
}

/// The fixed control message, as it is on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct Control {
    /// A control [`MsgType`] as a byte.
    pub msg: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// The register slot of the attempt (from client server, thread and lane).
    pub slot: U16,
    /// The attempt's tag in the slot (never 0: a zeroed register holds no attempt).
    pub tag: U16,
    /// The client's server.
    pub client: u8,
    /// The client's thread (participants run the attempt's work on the same thread index).
    pub thread: u8,
    /// The server that sent it (the client for `init`).
    pub sender: u8,
    /// The priority class (0 low, 1 medium, 2 high), read by the egress queues.
    pub class: u8,
    /// The attempt number of the slot, in full (the tag is its low 16 bits, 0 skipped).
    pub attempt: U32,
    /// The transaction id of the attempt (unique, never 0: the version it writes).
    pub txn: U64,
    /// The sender's throughput of the last epoch, in commits per millisecond (piggybacked).
    pub throughput: U32,
    /// Per switch id, its part.
    pub entries: [SwitchEntry; MAX_SWITCHES],
}

/// Bytes of a control message after the frame.
pub const CONTROL_BYTES: usize = std::mem::size_of::<Control>();

impl Control {
    /// A control message of type `msg` with every field zero but those given.
    pub fn new(msg: MsgType, slot: u16, tag: u16, attempt: u32, txn: u64) -> Self {
        Control {
            msg: msg as u8,
            flags: 0,
            slot: U16::new(slot),
            tag: U16::new(tag),
            client: 0,
            thread: 0,
            sender: 0,
            class: 0,
            attempt: U32::new(attempt),
            txn: U64::new(txn),
            throughput: U32::new(0),
            entries: [SwitchEntry::default(); MAX_SWITCHES],
        }
    }

    /// The message type (checked at decode).
    pub fn msg_type(&self) -> MsgType {
        MsgType::from_u8(self.msg).unwrap_or(MsgType::Fail)
    }

    /// Reads a control payload; rejects wrong lengths, data types, unknown flags and roles.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        exact_len(bytes.len(), CONTROL_BYTES)?;
        let c = Control::read_from_bytes(bytes).map_err(|_| DecodeError::TooShort { need: CONTROL_BYTES, got: 0 })?;
        let msg = MsgType::from_u8(c.msg)?;
        if !msg.is_control() || msg == MsgType::ErisTxn {
            return Err(DecodeError::BadField { field: "control_type", value: u64::from(c.msg) });
        }
        if c.flags & !FLAGS_KNOWN != 0 {
            return Err(DecodeError::BadField { field: "flags", value: u64::from(c.flags) });
        }
        if c.tag.get() == 0 {
            return Err(DecodeError::BadField { field: "tag", value: 0 });
        }
        if c.class > 2 {
            return Err(DecodeError::BadField { field: "class", value: u64::from(c.class) });
        }
        for e in &c.entries {
            enum_field::<Role>("role", e.role)?;
        }
        Ok(c)
    }

    /// The datagram `src -> dst` carrying it.
    pub fn datagram(&self, src: u16, dst: u16) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(FRAME_BYTES + CONTROL_BYTES);
        Frame { kind: KIND, src, dst }.encode(&mut bytes);
        bytes.extend_from_slice(self.as_bytes());
        bytes
    }
}

/// A key with its value and version (the writer's transaction id; 0: initial).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    /// The key: `server << 40 | record * columns + column`.
    pub key: u64,
    /// The value.
    pub value: u64,
    /// The version.
    pub version: u64,
    /// Whether the record was locked (read replies).
    pub locked: bool,
}

/// A data message: routed by the switches, reliable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Data {
    /// [`MsgType::Read`], [`MsgType::ReadReply`] or [`MsgType::Prepare`].
    pub msg: MsgType,
    /// The attempt's slot.
    pub slot: u16,
    /// Its tag.
    pub tag: u16,
    /// Its attempt number.
    pub attempt: u32,
    /// Its transaction id.
    pub txn: u64,
    /// The client's server.
    pub client: u8,
    /// The client's thread.
    pub thread: u8,
    /// `FLAG_RETRY` or 0.
    pub flags: u8,
    /// Prepare: how the transaction is coordinated (a `Coordination` byte).
    pub coord: u8,
    /// Prepare: servers that are write primaries (bit per server).
    pub wp: u8,
    /// Prepare: servers that are write backups.
    pub wb: u8,
    /// Prepare: servers that are read primaries.
    pub rp: u8,
    /// Read: keys (value, version 0); reply: what was read; prepare: the writes
    /// (key, new value) then the reads (key, version read), split by `writes`.
    pub items: Vec<Item>,
    /// Prepare: how many of `items` are writes (the rest are reads).
    pub writes: u8,
}

/// A data message's header as it is on the wire.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawData {
    msg: u8,
    slot: U16,
    tag: U16,
    attempt: U32,
    txn: U64,
    client: u8,
    thread: u8,
    flags: u8,
    coord: u8,
    wp: u8,
    wb: u8,
    rp: u8,
    writes: u8,
    count: u8,
}

/// One item as it is on the wire.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawItem {
    key: U64,
    value: U64,
    version: U64,
    locked: u8,
}

/// Bytes of a data message's header.
pub const DATA_HEADER_BYTES: usize = std::mem::size_of::<RawData>();
/// Bytes of one item.
pub const ITEM_BYTES: usize = std::mem::size_of::<RawItem>();

impl Data {
    /// A data message of type `msg` with no items.
    pub fn new(msg: MsgType, slot: u16, tag: u16, attempt: u32, txn: u64) -> Self {
        Data {
            msg,
            slot,
            tag,
            attempt,
            txn,
            client: 0,
            thread: 0,
            flags: 0,
            coord: 0,
            wp: 0,
            wb: 0,
            rp: 0,
            items: Vec::new(),
            writes: 0,
        }
    }

    /// Bytes of the payload.
    pub fn payload_bytes(&self) -> usize {
        DATA_HEADER_BYTES + ITEM_BYTES * self.items.len()
    }

    /// Appends the payload. More than [`MAX_ITEMS`] items is a bug of the caller.
    pub fn encode(&self, out: &mut Vec<u8>) {
        debug_assert!(self.items.len() <= MAX_ITEMS);
        let header = RawData {
            msg: self.msg as u8,
            slot: U16::new(self.slot),
            tag: U16::new(self.tag),
            attempt: U32::new(self.attempt),
            txn: U64::new(self.txn),
            client: self.client,
            thread: self.thread,
            flags: self.flags,
            coord: self.coord,
            wp: self.wp,
            wb: self.wb,
            rp: self.rp,
            writes: self.writes,
            count: u8::try_from(self.items.len()).unwrap_or(u8::MAX),
        };
        out.extend_from_slice(header.as_bytes());
        for item in &self.items {
            let raw = RawItem {
                key: U64::new(item.key),
                value: U64::new(item.value),
                version: U64::new(item.version),
                locked: u8::from(item.locked),
            };
            out.extend_from_slice(raw.as_bytes());
        }
    }

    /// The datagram `src -> dst` carrying it.
    pub fn datagram(&self, src: u16, dst: u16) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(FRAME_BYTES + self.payload_bytes());
        Frame { kind: KIND, src, dst }.encode(&mut bytes);
        self.encode(&mut bytes);
        bytes
    }

    /// Reads a data payload; rejects control types, bad counts, flags and lengths.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (h, rest) = RawData::ref_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { need: DATA_HEADER_BYTES, got: bytes.len() })?;
        let msg = MsgType::from_u8(h.msg)?;
        if msg.is_control() {
            return Err(DecodeError::BadField { field: "data_type", value: u64::from(h.msg) });
        }
        if h.flags & !FLAG_RETRY != 0 {
            return Err(DecodeError::BadField { field: "flags", value: u64::from(h.flags) });
        }
        let count = usize::from(h.count);
        if count > MAX_ITEMS {
            return Err(DecodeError::BadCount { count, max: MAX_ITEMS });
        }
        if h.writes > h.count {
            return Err(DecodeError::BadField { field: "writes", value: u64::from(h.writes) });
        }
        let need = DATA_HEADER_BYTES + ITEM_BYTES * count;
        exact_len(bytes.len(), need)?;
        let raws = <[RawItem]>::ref_from_bytes(rest).map_err(|_| DecodeError::TooShort { need, got: bytes.len() })?;
        let items = raws
            .iter()
            .map(|raw| {
                let locked = bool_field("locked", raw.locked)?;
                Ok(Item { key: raw.key.get(), value: raw.value.get(), version: raw.version.get(), locked })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        Ok(Data {
            msg,
            slot: h.slot.get(),
            tag: h.tag.get(),
            attempt: h.attempt.get(),
            txn: h.txn.get(),
            client: h.client,
            thread: h.thread,
            flags: h.flags,
            coord: h.coord,
            wp: h.wp,
            wb: h.wb,
            rp: h.rp,
            items,
            writes: h.writes,
        })
    }
}

/// The most shards the Eris baseline's sequencer header numbers: 40 sequence numbers of 4
/// bytes fill the 224-byte parser limit with the frame and the rest of the header (seed 001
/// §5.2: "the programmable switch can only parse 40 sequence numbers").
pub const ERIS_SHARDS: usize = 40;

/// The Eris baseline's header: one sequence number per destination shard, stamped by the
/// sequencer switch, followed (unparsed) by the transaction's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct SequencedHeader {
    /// [`MsgType::ErisTxn`].
    pub msg: u8,
    /// `FLAG_DOWN` once sequenced.
    pub flags: u8,
    /// The client's slot.
    pub slot: U16,
    /// Threads per server, so the sequencer knows shard `k`'s server (`k / tag`); at the
    /// offset of a control message's tag.
    pub tag: U16,
    /// The client's server.
    pub client: u8,
    /// The client's thread.
    pub thread: u8,
    /// The attempt.
    pub attempt: U32,
    /// The transaction id.
    pub txn: U64,
    /// The destination shards (bit per shard, `server × threads + thread`).
    pub mask: U64,
    /// Per shard, its sequence number (stamped by the sequencer).
    pub seq: [U32; ERIS_SHARDS],
}

/// Bytes of the sequencer header after the frame.
pub const SEQUENCED_BYTES: usize = std::mem::size_of::<SequencedHeader>();

/// One key of an Eris transaction as it is on the wire: the key, and 1 if it is written.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawKey {
    key: U64,
    written: u8,
}

/// An Eris one-shot transaction: the header and its keys (key, written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequenced {
    /// The header the sequencer reads and stamps.
    pub header: SequencedHeader,
    /// The keys and whether each is written.
    pub keys: Vec<(u64, bool)>,
}

impl Sequenced {
    /// Appends the payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.header.as_bytes());
        out.push(u8::try_from(self.keys.len()).unwrap_or(u8::MAX));
        for &(key, written) in &self.keys {
            out.extend_from_slice(RawKey { key: U64::new(key), written: u8::from(written) }.as_bytes());
        }
    }

    /// Bytes of the payload.
    pub fn payload_bytes(&self) -> usize {
        SEQUENCED_BYTES + 1 + 9 * self.keys.len()
    }

    /// The datagram `src -> dst` carrying it.
    pub fn datagram(&self, src: u16, dst: u16) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(FRAME_BYTES + self.payload_bytes());
        Frame { kind: KIND, src, dst }.encode(&mut bytes);
        self.encode(&mut bytes);
        bytes
    }

    /// Reads a payload; rejects bad lengths, flags, shard masks past [`ERIS_SHARDS`] and keys.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (header, rest) = SequencedHeader::read_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { need: SEQUENCED_BYTES + 1, got: bytes.len() })?;
        if header.msg != MsgType::ErisTxn as u8 {
            return Err(DecodeError::BadField { field: "msg_type", value: u64::from(header.msg) });
        }
        if header.flags & !FLAGS_KNOWN != 0 {
            return Err(DecodeError::BadField { field: "flags", value: u64::from(header.flags) });
        }
        if header.mask.get() >> ERIS_SHARDS != 0 {
            return Err(DecodeError::BadField { field: "mask", value: header.mask.get() });
        }
        let count =
            usize::from(*rest.first().ok_or(DecodeError::TooShort { need: SEQUENCED_BYTES + 1, got: bytes.len() })?);
        if count > MAX_KEYS {
            return Err(DecodeError::BadCount { count, max: MAX_KEYS });
        }
        let need = SEQUENCED_BYTES + 1 + std::mem::size_of::<RawKey>() * count;
        exact_len(bytes.len(), need)?;
        let raws =
            <[RawKey]>::ref_from_bytes(&rest[1..]).map_err(|_| DecodeError::TooShort { need, got: bytes.len() })?;
        let keys = raws
            .iter()
            .map(|raw| Ok((raw.key.get(), bool_field("written", raw.written)?)))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        Ok(Sequenced { header, keys })
    }
}

/// Any SwitchTx message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A control message.
    Control(Control),
    /// A data message.
    Data(Data),
    /// An Eris one-shot transaction.
    Sequenced(Sequenced),
}

impl Message {
    /// Reads a payload of either kind (the first byte tells which).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let first = *bytes.first().ok_or(DecodeError::TooShort { need: 1, got: 0 })?;
        if first == MsgType::ErisTxn as u8 {
            return Sequenced::decode(bytes).map(Message::Sequenced);
        }
        if MsgType::from_u8(first)?.is_control() {
            Control::decode(bytes).map(Message::Control)
        } else {
            Data::decode(bytes).map(Message::Data)
        }
    }

    /// Reads a whole datagram: a `SwitchTx` frame and its message.
    pub fn open(bytes: &[u8]) -> Result<(Frame, Message), DecodeError> {
        let (frame, payload) = Frame::decode(bytes)?;
        if frame.kind != KIND {
            return Err(DecodeError::WrongKind(frame.kind));
        }
        Ok((frame, Message::decode(payload)?))
    }
}

/// The priority class of a datagram (§3.4.1), for the strict-priority egress queues: 2 high
/// (`replicate_ok`, `fail`, `lock_ok`, `init`, anything of a retrying transaction), 0 low
/// (execute-phase reads and their replies, `commit_ok`), 1 medium (the rest). Anything
/// unreadable is medium.
pub fn classify(bytes: &[u8]) -> u8 {
    let Some(payload) = bytes.get(FRAME_BYTES..) else { return 1 };
    match Message::decode(payload) {
        Ok(Message::Control(c)) => c.class,
        Ok(Message::Data(d)) => class_of(d.msg, d.flags & FLAG_RETRY != 0),
        Ok(Message::Sequenced(_)) | Err(_) => 1,
    }
}

/// The class of a message of type `msg`, of a retrying transaction or not.
pub fn class_of(msg: MsgType, retry: bool) -> u8 {
    if retry {
        return 2;
    }
    match msg {
        MsgType::ReplicateOk | MsgType::Fail | MsgType::LockOk | MsgType::Init | MsgType::VersionCopyOk => 2,
        MsgType::Read | MsgType::ReadReply | MsgType::CommitOk => 0,
        MsgType::ValidateOk | MsgType::Prepare => 1,
        MsgType::Query | MsgType::QueryReply | MsgType::Resolve | MsgType::ResolveAck => 2,
        MsgType::Lease | MsgType::Grant => 2,
        MsgType::ErisTxn | MsgType::ErisReply => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_control_message_fits_the_parser_limit() {
        assert_eq!(CONTROL_BYTES, 58);
        const { assert!(FRAME_BYTES + CONTROL_BYTES <= PARSER_LIMIT_BYTES) };
        // The switch parses frame and control message; a data message is only routed.
        let whole = Control::new(MsgType::Init, 1, 1, 1, 1).datagram(0, 1).len();
        assert!(whole <= PARSER_LIMIT_BYTES, "{whole} bytes");
    }

    #[test]
    fn a_control_message_round_trips() {
        let mut c = Control::new(MsgType::LockOk, 77, 9, 65_545, 1234);
        c.flags = FLAG_DOWN | FLAG_RETRY;
        c.client = 3;
        c.thread = 23;
        c.class = 2;
        c.entries[0] = SwitchEntry::new(Role::Root, 3, 0x105);
        c.entries[2] = SwitchEntry::new(Role::Leaf, 2, 0x18);
        let (frame, back) = Message::open(&c.datagram(1, 4)).unwrap();
        assert_eq!((frame.src, frame.dst), (1, 4));
        assert_eq!(back, Message::Control(c));
        assert_eq!(classify(&c.datagram(1, 4)), 2);
    }

    #[test]
    fn the_eris_header_fits_the_parser_limit_with_40_shards_and_round_trips() {
        const { assert!(FRAME_BYTES + SEQUENCED_BYTES <= PARSER_LIMIT_BYTES) };
        assert_eq!(SEQUENCED_BYTES, 188);
        let mut h = SequencedHeader::read_from_bytes(&[0u8; SEQUENCED_BYTES][..]).unwrap();
        h.msg = MsgType::ErisTxn as u8;
        h.mask.set((1 << 39) | 5);
        h.seq[39].set(7);
        let s = Sequenced { header: h, keys: vec![(1 << 40, true), (9, false)] };
        let (_, back) = Message::open(&s.datagram(0, 3)).unwrap();
        assert_eq!(back, Message::Sequenced(s.clone()));
        let mut bad = s.datagram(0, 3);
        bad[FRAME_BYTES + 20] = 0xff; // the mask's top byte (big-endian at 20..28): shards past 40
        assert_eq!(Message::open(&bad).unwrap_err().reason(), "mask");
    }

    #[test]
    fn a_data_message_round_trips() {
        let mut d = Data::new(MsgType::Prepare, 5, 6, 7, 8);
        d.items = vec![
            Item { key: 1 << 40, value: 5, version: 0, locked: false },
            Item { key: 9, value: 0, version: 77, locked: true },
        ];
        d.writes = 1;
        d.wp = 3;
        let (_, back) = Message::open(&d.datagram(0, 1)).unwrap();
        assert_eq!(back, Message::Data(d));
    }

    #[test]
    fn bad_input_is_rejected_with_a_reason() {
        let c = Control::new(MsgType::Fail, 1, 1, 1, 1);
        let bytes = c.as_bytes().to_vec();
        let reason = |b: &[u8]| Message::decode(b).unwrap_err().reason();
        let mut bad = bytes.clone();
        bad[0] = 99;
        assert_eq!(reason(&bad), "msg_type");
        let mut bad = bytes.clone();
        bad[1] = 0x80;
        assert_eq!(reason(&bad), "flags");
        let mut bad = bytes.clone();
        bad[4..6].copy_from_slice(&[0, 0]);
        assert_eq!(reason(&bad), "tag");
        let mut bad = bytes.clone();
        bad[26 + 1] = 7;
        assert_eq!(reason(&bad), "role");
        assert_eq!(reason(&bytes[..10]), "too_short");
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(reason(&long), "trailing_bytes");
        let mut d = Vec::new();
        Data::new(MsgType::Read, 1, 1, 1, 1).encode(&mut d);
        let mut bad = d.clone();
        bad[25] = 200;
        assert_eq!(reason(&bad), "bad_count");
        assert_eq!(reason(&[]), "too_short");
    }

    proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..140)) {
            match Message::decode(&bytes) {
                Ok(Message::Data(d)) => {
                    let mut again = Vec::new();
                    d.encode(&mut again);
                    prop_assert_eq!(again, bytes);
                }
                Ok(Message::Control(c)) => prop_assert_eq!(c.as_bytes(), &bytes[..]),
                Ok(Message::Sequenced(q)) => {
                    let mut again = Vec::new();
                    q.encode(&mut again);
                    prop_assert_eq!(again, bytes);
                }
                Err(_) => {}
            }
        }
    }
}
