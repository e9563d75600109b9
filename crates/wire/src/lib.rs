//! # pisadb-wire: every byte that crosses a link
//!
//! Each datagram starts with a 6-byte [`Frame`] header (version, kind, source node, destination
//! node). The switch reads only the frame to decide whether a datagram is plain node-to-node
//! traffic to forward, or a request for one of its programs. Behind the frame comes the kind's
//! own fixed layout:
//!
//! - a system's own formats, which live with the system (P4DB's switch transactions and
//!   LM-Switch's lock requests are in `systems/p4db/src/wire`);
//! - [`node`]: node-to-node 2PL and 2PC messages, which the switch only forwards.
//! - [`control`]: the control channel: a controller host's requests to read and write register
//!   cells and table entries of a switch, and the switch's replies with a status.
//!
//! Layouts are `#[repr(C)]` structs of byte-order-explicit integers read in place with
//! `zerocopy`, so decoding costs a bounds check, not a parse. Enumerated fields are Rust enums
//! that derive `num_enum::TryFromPrimitive`, read by [`enum_field`]; 0/1 bytes are read by
//! [`bool_field`] and whole payloads measured by [`exact_len`], so no format hand-writes a
//! byte-to-value `match` or a length check of its own, and every refusal says the same thing
//! the same way. Decoding never panics and never
//! allocates more than the fixed maximum: malformed input returns a [`DecodeError`] whose
//! [`DecodeError::reason`] is a stable label the receiver counts.
//!
//! See `docs/ARCHITECTURE.md` (the layers) for the page that explains it.

pub mod control;
pub mod node;

use num_enum::TryFromPrimitive;
use thiserror::Error;
use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The wire-format version this build speaks; anything else is rejected.
pub const VERSION: u8 = 1;

/// The node id that addresses the switch itself (its programs), not a node behind it.
pub const SWITCH_ID: u16 = 0xFFFF;

/// What a datagram carries, from the frame's `kind` byte: an open identifier.
///
/// The shared crates define only the kinds every rack has: [`Kind::FORWARD`] (plain traffic)
/// and [`Kind::CONTROL`] (the control channel). Every other kind is declared by the system
/// whose format it names, as a constant in that system's `wire` module (e.g. Gotthard's
/// `wire::KIND`), so a new system adds its formats without editing this crate. Kinds must not
/// collide across systems: the binary's registry of systems (`src/systems.rs`) has a test that
/// lists every system's declared kinds and checks that no byte is claimed twice. Byte 0 is no
/// kind ([`Kind::new`] refuses it at compile time and [`Frame::decode`] at run time), so a
/// zeroed buffer is never read as a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind(u8);

impl Kind {
    /// Node-to-node traffic the switch only forwards (2PC, remote reads, …).
    pub const FORWARD: Kind = Kind::new(1);
    /// A control-plane message ([`control`]): to [`SWITCH_ID`] from the controller, or a
    /// switch's reply to it.
    pub const CONTROL: Kind = Kind::new(4);
    /// The kinds the shared crates define, which no system may declare again.
    pub const SHARED: &'static [Kind] = &[Kind::FORWARD, Kind::CONTROL];

    /// The kind whose frames carry `byte`; for a system's constant, so 0 fails to compile.
    pub const fn new(byte: u8) -> Kind {
        assert!(byte != 0, "frame kind 0 is reserved: no datagram carries it");
        Kind(byte)
    }

    /// The byte this kind is on the wire.
    pub const fn byte(self) -> u8 {
        self.0
    }

    fn from_u8(byte: u8) -> Result<Self, DecodeError> {
        match byte {
            0 => Err(DecodeError::UnknownKind(0)),
            byte => Ok(Kind(byte)),
        }
    }
}

/// The fixed header in front of every datagram.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FrameHeader {
    /// Must equal [`VERSION`].
    pub version: u8,
    /// A [`Kind`] as a byte ([`Kind::byte`]).
    pub kind: u8,
    /// The sending node.
    pub src: U16,
    /// The receiving node, or [`SWITCH_ID`].
    pub dst: U16,
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What the datagram carries.
    pub kind: Kind,
    /// The sending node.
    pub src: u16,
    /// The receiving node, or [`SWITCH_ID`].
    pub dst: u16,
}

/// Size of the frame header in bytes.
pub const FRAME_BYTES: usize = std::mem::size_of::<FrameHeader>();

impl Frame {
    /// Reads the frame header; returns it and the rest of the datagram.
    pub fn decode(bytes: &[u8]) -> Result<(Frame, &[u8]), DecodeError> {
        let (header, rest) = FrameHeader::ref_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { need: FRAME_BYTES, got: bytes.len() })?;
        if header.version != VERSION {
            return Err(DecodeError::BadVersion(header.version));
        }
        let kind = Kind::from_u8(header.kind)?;
        Ok((Frame { kind, src: header.src.get(), dst: header.dst.get() }, rest))
    }

    /// Appends the frame header to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let header =
            FrameHeader { version: VERSION, kind: self.kind.byte(), src: U16::new(self.src), dst: U16::new(self.dst) };
        out.extend_from_slice(header.as_bytes());
    }
}

/// The variant of enum `E` that `byte` stands for, or a [`DecodeError::BadField`] naming `field`
/// and the byte (the enum derives `num_enum::TryFromPrimitive` with `#[repr(u8)]`).
pub fn enum_field<E: TryFromPrimitive<Primitive = u8>>(field: &'static str, byte: u8) -> Result<E, DecodeError> {
    E::try_from_primitive(byte).map_err(|_| DecodeError::BadField { field, value: u64::from(byte) })
}

/// A flag byte: 0 is false, 1 is true, anything else a [`DecodeError::BadField`] naming `field`
/// (so every accepted byte re-encodes to itself).
pub fn bool_field(field: &'static str, byte: u8) -> Result<bool, DecodeError> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(DecodeError::BadField { field, value: u64::from(value) }),
    }
}

/// Checks that a payload of `got` bytes is the `need` its header announces: fewer is
/// [`DecodeError::TooShort`], more is [`DecodeError::TrailingBytes`].
pub fn exact_len(got: usize, need: usize) -> Result<(), DecodeError> {
    if got < need {
        return Err(DecodeError::TooShort { need, got });
    }
    if got > need {
        return Err(DecodeError::TrailingBytes { extra: got - need });
    }
    Ok(())
}

/// Why a datagram was rejected. [`DecodeError::reason`] gives the label it is counted under.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Fewer bytes than the fixed layout needs.
    #[error("datagram too short: need {need} bytes, got {got}")]
    TooShort {
        /// Bytes the layout needs.
        need: usize,
        /// Bytes received.
        got: usize,
    },
    /// More bytes than the header announces.
    #[error("datagram has {extra} trailing bytes after the announced content")]
    TrailingBytes {
        /// Bytes left over.
        extra: usize,
    },
    /// A version this build does not speak.
    #[error("unsupported wire version {0} (this build speaks {VERSION})")]
    BadVersion(u8),
    /// A frame kind no format declares (0; a receiver that does not know a nonzero kind
    /// refuses it as [`DecodeError::WrongKind`]).
    #[error("unknown datagram kind {0}")]
    UnknownKind(u8),
    /// A frame kind that is not what the receiver expected (another system's, or one no
    /// system declares).
    #[error("unexpected datagram kind {}", .0.byte())]
    WrongKind(Kind),
    /// Zero, or more instructions or entries than the format allows.
    #[error("bad item count {count} (allowed 1..={max})")]
    BadCount {
        /// The announced count.
        count: usize,
        /// The maximum the format allows.
        max: usize,
    },
    /// A field holds a value the format does not define.
    #[error("field `{field}` holds invalid value {value}")]
    BadField {
        /// The field's name.
        field: &'static str,
        /// The value found.
        value: u64,
    },
}

impl DecodeError {
    /// A stable label for counting rejected datagrams by reason.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::TooShort { .. } => "too_short",
            DecodeError::TrailingBytes { .. } => "trailing_bytes",
            DecodeError::BadVersion(_) => "bad_version",
            DecodeError::UnknownKind(_) => "unknown_kind",
            DecodeError::WrongKind(_) => "wrong_kind",
            DecodeError::BadCount { .. } => "bad_count",
            DecodeError::BadField { field, .. } => field,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A kind of the tests' own, as a system would declare one.
    const TEST_KIND: Kind = Kind::new(2);

    #[test]
    fn frame_round_trips() {
        let frame = Frame { kind: TEST_KIND, src: 3, dst: SWITCH_ID };
        let mut bytes = Vec::new();
        frame.encode(&mut bytes);
        bytes.push(42);
        let (decoded, rest) = Frame::decode(&bytes).unwrap();
        assert_eq!(decoded, frame);
        assert_eq!(rest, &[42]);
    }

    #[test]
    fn every_nonzero_kind_round_trips_and_the_shared_kinds_keep_their_bytes() {
        for byte in 1..=u8::MAX {
            let kind = Kind::new(byte);
            let mut bytes = Vec::new();
            Frame { kind, src: 1, dst: SWITCH_ID }.encode(&mut bytes);
            assert_eq!(bytes[1], byte);
            assert_eq!(Frame::decode(&bytes).unwrap().0.kind, kind);
        }
        assert_eq!(Frame::decode(&[VERSION, 4, 0, 9, 0xFF, 0xFF]).unwrap().0.kind, Kind::CONTROL);
        assert_eq!(Frame::decode(&[VERSION, 1, 0, 9, 0, 1]).unwrap().0.kind, Kind::FORWARD);
    }

    #[test]
    fn frame_rejects_bad_version_and_kind_zero() {
        assert_eq!(Frame::decode(&[9, 1, 0, 0, 0, 0]).unwrap_err(), DecodeError::BadVersion(9));
        assert_eq!(Frame::decode(&[VERSION, 0, 0, 0, 0, 0]).unwrap_err(), DecodeError::UnknownKind(0));
        assert_eq!(Frame::decode(&[VERSION]).unwrap_err().reason(), "too_short");
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq, num_enum::TryFromPrimitive)]
    #[repr(u8)]
    enum Colour {
        Red = 1,
        Blue = 7,
    }

    #[test]
    fn field_readers_accept_what_they_define_and_name_the_field_otherwise() {
        assert_eq!(enum_field::<Colour>("colour", 7), Ok(Colour::Blue));
        assert_eq!(enum_field::<Colour>("colour", 1), Ok(Colour::Red));
        assert_eq!(enum_field::<Colour>("colour", 2), Err(DecodeError::BadField { field: "colour", value: 2 }));
        assert_eq!((bool_field("f", 0), bool_field("f", 1)), (Ok(false), Ok(true)));
        assert_eq!(bool_field("f", 2).unwrap_err().reason(), "f");
        assert_eq!(exact_len(5, 5), Ok(()));
        assert_eq!(exact_len(4, 5), Err(DecodeError::TooShort { need: 5, got: 4 }));
        assert_eq!(exact_len(7, 5), Err(DecodeError::TrailingBytes { extra: 2 }));
    }

    proptest! {
        #[test]
        fn frame_decoding_never_panics_and_reencodes(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok((frame, rest)) = Frame::decode(&bytes) {
                let mut again = Vec::new();
                frame.encode(&mut again);
                again.extend_from_slice(rest);
                prop_assert_eq!(again, bytes);
            }
        }
    }
}
