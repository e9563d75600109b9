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

use pisadb_wire::{DecodeError, Kind};

/// The frame kind of every datagram this system sends: A NetAccel tuple, barrier, drained group or iterator (segments, switch, control plane).
pub const KIND: Kind = Kind::new(6);
/// Every frame kind this system declares (the binary's registry checks that no two systems collide).
pub const KINDS: &[Kind] = &[KIND];

/// Bytes of a [`Msg`].
pub const MSG_BYTES: usize = 20;

/// Flag: a stream lost tuples (set on `Go` and on the control plane's end of input).
pub const LOSS: u8 = 0x80;

/// What a tuple packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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

impl Op {
    fn from_u8(byte: u8) -> Result<Op, DecodeError> {
        Ok(match byte {
            1 => Op::Outer,
            2 => Op::Inner,
            3 => Op::EndOuter,
            4 => Op::EndInner,
            5 => Op::Go,
            6 => Op::Drain,
            7 => Op::Clear,
            8 => Op::Probe,
            9 => Op::EndProbe,
            other => return Err(DecodeError::BadField { field: "netaccel_op", value: u64::from(other) }),
        })
    }
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
        out.push(self.op as u8);
        out.push(self.flags);
        out.extend_from_slice(&self.segment.to_le_bytes());
        for v in [self.a, self.b, self.c, self.index] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Reads a payload.
    pub fn decode(bytes: &[u8]) -> Result<Msg, DecodeError> {
        if bytes.len() < MSG_BYTES {
            return Err(DecodeError::TooShort { need: MSG_BYTES, got: bytes.len() });
        }
        if bytes.len() > MSG_BYTES {
            return Err(DecodeError::TrailingBytes { extra: bytes.len() - MSG_BYTES });
        }
        let u32_at = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        Ok(Msg {
            op: Op::from_u8(bytes[0])?,
            flags: bytes[1],
            segment: u16::from_le_bytes([bytes[2], bytes[3]]),
            a: u32_at(4),
            b: u32_at(8),
            c: u32_at(12),
            index: u32_at(16),
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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

impl Stream {
    fn from_u8(byte: u8) -> Result<Stream, DecodeError> {
        Ok(match byte {
            1 => Stream::PartFp,
            2 => Stream::CpGroups,
            3 => Stream::Pattern1Done,
            4 => Stream::Suppkeys,
            5 => Stream::Answer,
            6 => Stream::CpSuppkeys,
            other => return Err(DecodeError::BadField { field: "motion_stream", value: u64::from(other) }),
        })
    }
}

/// Header bytes of a [`Motion`].
pub const MOTION_HEADER_BYTES: usize = 8;

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
        out.push(self.stream as u8);
        out.push(u8::from(self.last));
        out.extend_from_slice(&self.from.to_le_bytes());
        out.push(self.width);
        out.push(0);
        out.extend_from_slice(&(self.values.len() as u16).to_le_bytes());
        for v in &self.values {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Reads a payload.
    pub fn decode(bytes: &[u8]) -> Result<Motion, DecodeError> {
        if bytes.len() < MOTION_HEADER_BYTES {
            return Err(DecodeError::TooShort { need: MOTION_HEADER_BYTES, got: bytes.len() });
        }
        let count = usize::from(u16::from_le_bytes([bytes[6], bytes[7]]));
        let body = &bytes[MOTION_HEADER_BYTES..];
        if body.len() != count * 4 {
            return Err(DecodeError::BadCount { count, max: body.len() / 4 });
        }
        if bytes[4] == 0 || count % usize::from(bytes[4]) != 0 {
            return Err(DecodeError::BadField { field: "motion_width", value: u64::from(bytes[4]) });
        }
        Ok(Motion {
            stream: Stream::from_u8(bytes[0])?,
            last: bytes[1] != 0,
            from: u16::from_le_bytes([bytes[2], bytes[3]]),
            width: bytes[4],
            values: body.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
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
