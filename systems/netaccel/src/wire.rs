//! NetAccel's messages behind the shared frame.
//!
//! ## Tuple packets ([`Msg`], frame kind `NetAccel`)
//!
//! One tuple per packet, as the paper's deparser sends them (§3.2, §5): a fixed 20-byte
//! payload the switch parses at fixed offsets.
//!
//! ```text
//! op u8 | flags u8 | segment u16 | a u32 | b u32 | c u32 | index u32      (little-endian)
//! ```
//!
//! | op | sent by | a, b, c | meaning |
//! |---|---|---|---|
//! | `Outer` | segment | join key | a build-side tuple (`part_FP.partkey`) |
//! | `Inner` | segment | partkey, suppkey, quantity | a probe-side tuple (`lineitem_FP`) |
//! | `EndOuter`, `EndInner` | segment | tuples it sent | the end of its stream (barrier, loss check) |
//! | `Probe` | segment | partkey, suppkey, availqty | a probe tuple of the reloaded pattern (`partsupp`); from the switch: a row that passed |
//! | `EndProbe` | segment | tuples it sent | the end of its probe stream |
//! | `Go` | switch | – | a barrier passed: send the next stream (`index`: 1 inner, 2 probe) |
//! | `Drain` | switch | partkey, suppkey, sum | a drained group (the iterator's copy); to the control plane: input is complete |
//! | `Clear` | switch | – | the iterator clears the join arrays; to a segment: every switch group was sent |
//!
//! `flags`: bit 7 ([`LOSS`]) says a stream lost tuples; the low nibble is the overflow type
//! (1, 2, 3: the paper's (i), (ii), (iii)) of a tuple sent to the control plane, or the
//! drain iterator's group position. `index` is the drain or clear iterator's slot.
//!
//! ## Motions ([`Motion`], frame kind `Forward`)
//!
//! Host-to-host batches of rows, as an MPP database's motion operators send them: a header
//! and up to [`MOTION_VALUES_MAX`] 32-bit values, `width` per row, in datagrams of at most
//! 1,400 payload bytes.

use num_enum::TryFromPrimitive;
use pisadb_wire::{bool_field, enum_field, exact_len, DecodeError, Kind};
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The frame kind of every datagram this system sends: A NetAccel tuple, barrier, drained group or iterator (segments, switch, control plane).
pub const KIND: Kind = Kind::new(6);
/// Every frame kind this system declares (the binary's registry checks that no two systems collide).
pub const KINDS: &[Kind] = &[KIND];

/// A [`Msg`] as it is on the wire.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawMsg {
    op: u8,
    flags: u8,
    segment: U16,
    a: U32,
    b: U32,
    c: U32,
    index: U32,
}

/// Bytes of a [`Msg`].
pub const MSG_BYTES: usize = std::mem::size_of::<RawMsg>();

/// Flag: a stream lost tuples (set on `Go` and on the control plane's end of input).
pub const LOSS: u8 = 0x80;

/// What a tuple packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, TryFromPrimitive)]
#[repr(u8)]
pub enum Op {
    /// A build-side tuple.
    Outer = 1,
    /// A probe-side tuple.
    Inner = 2,
    /// The end of a segment's outer stream.
    EndOuter = 3,
    /// The end of a segment's inner stream.
    EndInner = 4,
    /// The outer barrier passed.
    Go = 5,
    /// The drain iterator, or a group it drained.
    Drain = 6,
    /// The clearing iterator, or its announcement that the drain is over.
    Clear = 7,
    /// A probe tuple of the reloaded pattern (Q20's `partsupp`: partkey, suppkey, availqty);
    /// from the switch to a segment: a row that passed `2·availqty > sum`.
    Probe = 8,
    /// The end of a segment's probe stream.
    EndProbe = 9,
}

/// One tuple packet's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    /// What it is.
    pub op: Op,
    /// [`LOSS`] and the overflow type or drain position.
    pub flags: u8,
    /// The sending segment (0-based) of a tuple or end.
    pub segment: u16,
    /// First value (join key, partkey, count).
    pub a: u32,
    /// Second value (suppkey).
    pub b: u32,
    /// Third value (quantity, sum).
    pub c: u32,
    /// The iterators' slot.
    pub index: u32,
}

impl Msg {
    /// A message of `op` from `segment` with values `a`, `b`, `c`.
    pub fn new(op: Op, segment: u16, a: u32, b: u32, c: u32) -> Msg {
        Msg { op, flags: 0, segment, a, b, c, index: 0 }
    }

    /// Appends the payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let raw = RawMsg {
            op: self.op as u8,
            flags: self.flags,
            segment: U16::new(self.segment),
            a: U32::new(self.a),
            b: U32::new(self.b),
            c: U32::new(self.c),
            index: U32::new(self.index),
        };
        out.extend_from_slice(raw.as_bytes());
    }

    /// Reads a payload.
    pub fn decode(bytes: &[u8]) -> Result<Msg, DecodeError> {
        exact_len(bytes.len(), MSG_BYTES)?;
        let raw =
            RawMsg::read_from_bytes(bytes).map_err(|_| DecodeError::TooShort { need: MSG_BYTES, got: bytes.len() })?;
        Ok(Msg {
            op: enum_field("netaccel_op", raw.op)?,
            flags: raw.flags,
            segment: raw.segment.get(),
            a: raw.a.get(),
            b: raw.b.get(),
            c: raw.c.get(),
            index: raw.index.get(),
        })
    }

    /// The overflow type or drain position in the flags.
    pub fn low_flags(&self) -> u8 {
        self.flags & 0x0f
    }

    /// Whether [`LOSS`] is set.
    pub fn loss(&self) -> bool {
        self.flags & LOSS != 0
    }
}

/// Which rows a motion carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, TryFromPrimitive)]
#[repr(u8)]
pub enum Stream {
    /// `part_FP` keys, broadcast (the normal plan of pattern 1).
    PartFp = 1,
    /// Groups (partkey, suppkey, sum) from the control plane to the segment that owns them.
    CpGroups = 2,
    /// A segment to the master: pattern 1 is complete here (`values[0]`: groups held; `[1]`: 1
    /// if a stream lost tuples).
    Pattern1Done = 3,
    /// Distinct `suppkey`s redistributed by `suppkey` (pattern 2's motion).
    Suppkeys = 4,
    /// A segment's answer `s_suppkey`s gathered to the master.
    Answer = 5,
    /// `suppkey`s of the rows that passed pattern 2 in the control plane, to their owners.
    CpSuppkeys = 6,
}

/// A [`Motion`]'s header as it is on the wire.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawMotion {
    stream: u8,
    last: u8,
    from: U16,
    width: u8,
    reserved: u8,
    count: U16,
}

/// Header bytes of a [`Motion`].
pub const MOTION_HEADER_BYTES: usize = std::mem::size_of::<RawMotion>();

/// Most values one motion datagram carries (1,400 payload bytes).
pub const MOTION_VALUES_MAX: usize = (1400 - MOTION_HEADER_BYTES) / 4;

/// A batch of rows between hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Motion {
    /// Which rows.
    pub stream: Stream,
    /// Whether it is the sender's last batch of the stream.
    pub last: bool,
    /// The sending host.
    pub from: u16,
    /// Values per row.
    pub width: u8,
    /// The rows, `width` values each.
    pub values: Vec<u32>,
}

impl Motion {
    /// Appends the payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let header = RawMotion {
            stream: self.stream as u8,
            last: u8::from(self.last),
            from: U16::new(self.from),
            width: self.width,
            reserved: 0,
            count: U16::new(self.values.len() as u16),
        };
        out.extend_from_slice(header.as_bytes());
        for v in &self.values {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Reads a payload; refuses a count the body does not hold, a width that does not divide
    /// it, an unknown stream, a `last` other than 0 or 1 and a nonzero reserved byte.
    pub fn decode(bytes: &[u8]) -> Result<Motion, DecodeError> {
        let (h, body) = RawMotion::ref_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { need: MOTION_HEADER_BYTES, got: bytes.len() })?;
        let count = usize::from(h.count.get());
        let values = <[U32]>::ref_from_bytes(body)
            .ok()
            .filter(|values| values.len() == count)
            .ok_or(DecodeError::BadCount { count, max: body.len() / 4 })?;
        if h.width == 0 || count % usize::from(h.width) != 0 {
            return Err(DecodeError::BadField { field: "motion_width", value: u64::from(h.width) });
        }
        let stream = enum_field("motion_stream", h.stream)?;
        let last = bool_field("motion_last", h.last)?;
        if h.reserved != 0 {
            return Err(DecodeError::BadField { field: "motion_reserved", value: u64::from(h.reserved) });
        }
        Ok(Motion {
            stream,
            last,
            from: h.from.get(),
            width: h.width,
            values: values.iter().map(|v| v.get()).collect(),
        })
    }

    /// `rows` (each `width` values) cut into motions of at most [`MOTION_VALUES_MAX`] values;
    /// always at least one (an empty last batch still ends the stream).
    pub fn batches(stream: Stream, from: u16, width: u8, values: &[u32]) -> Vec<Motion> {
        let per = MOTION_VALUES_MAX / usize::from(width) * usize::from(width);
        let mut chunks: Vec<&[u32]> = values.chunks(per).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let n = chunks.len();
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| Motion { stream, last: i + 1 == n, from, width, values: c.to_vec() })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = Msg { op: Op::Drain, flags: LOSS | 3, segment: 2, a: 7, b: 8, c: 9, index: 10 };
        let mut bytes = Vec::new();
        m.encode(&mut bytes);
        assert_eq!(bytes.len(), MSG_BYTES);
        assert_eq!(Msg::decode(&bytes), Ok(m));
        assert!(m.loss() && m.low_flags() == 3);
        let batches = Motion::batches(Stream::CpGroups, 4, 3, &(0..999).collect::<Vec<_>>());
        assert!(batches.iter().all(|b| b.values.len() <= MOTION_VALUES_MAX && b.values.len() % 3 == 0));
        assert_eq!(batches.iter().map(|b| b.values.len()).sum::<usize>(), 999);
        assert!(batches.last().is_some_and(|b| b.last));
        let mut bytes = Vec::new();
        batches[0].encode(&mut bytes);
        assert_eq!(Motion::decode(&bytes), Ok(batches[0].clone()));
        assert_eq!(Motion::batches(Stream::PartFp, 1, 1, &[]).len(), 1);
    }
}
