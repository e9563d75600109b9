//! A toy switch program that exercises every output and the tables: each packet names one
//! action, and the program does exactly that.

use pisadb_switch::alu::{Branch, Expr, RegisterAction};
use pisadb_switch::registers::{AccessError, PassContext};
use pisadb_switch::{Output, PassDecision, Program, ProgramSpec, Recirc, RegisterArraySpec, Reject, TableSpec};
use pisadb_wire::{Frame, Kind, FRAME_BYTES};

/// The toy program's frame kind, declared here as a system declares its own.
const TOY_KIND: Kind = Kind::new(2);

/// The toy's one register array: a counter in stage 3.
pub(crate) const COUNTER: u8 = 1;
/// The toy's one table: 32-bit keys to 32-bit values in stage 1.
pub(crate) const TABLE: u8 = 1;
/// Result of a lookup that missed.
pub(crate) const MISS: u64 = u64::MAX;
/// Passes an `EarlyAnswer` packet takes.
pub(crate) const EARLY_PASSES: u8 = 3;

/// What a toy packet asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Action {
    /// `PassDecision::Forward`.
    Forward = 1,
    /// A copy back to the sender after every pass but the last, `EARLY_PASSES` passes in all.
    EarlyAnswer = 2,
    /// `PassDecision::ToControlPlane`.
    ToCpu = 3,
    /// Look `key` up in `TABLE` and reply with the value (`MISS` on a miss).
    Lookup = 4,
    /// Look `TABLE` up twice in one pass (refused).
    LookupTwice = 5,
    /// Add to `COUNTER` (stage 3), then look up `TABLE` (stage 1): out of stage order.
    LookupAfterLaterStage = 6,
}

/// A toy packet: `action u8 | passes u8 | key u64 | result u64` (18 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ToyPacket {
    /// What to do.
    pub action: u8,
    /// Passes taken so far.
    pub passes: u8,
    /// The lookup key.
    pub key: u64,
    /// The lookup result.
    pub result: u64,
}

/// Bytes of a toy packet without frame.
pub(crate) const TOY_BYTES: usize = 18;

impl ToyPacket {
    /// A fresh packet asking for `action` with `key`.
    pub(crate) fn new(action: Action, key: u64) -> Self {
        ToyPacket { action: action as u8, passes: 0, key, result: 0 }
    }

    /// Appends the packet.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.action, self.passes]);
        out.extend_from_slice(&self.key.to_be_bytes());
        out.extend_from_slice(&self.result.to_be_bytes());
    }

    /// Reads a packet; `None` if the length is wrong.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != TOY_BYTES {
            return None;
        }
        let word = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        Some(ToyPacket { action: bytes[0], passes: bytes[1], key: word(2), result: word(10) })
    }

    /// The datagram `src -> dst` carrying this packet.
    pub(crate) fn datagram(&self, src: u16, dst: u16) -> Vec<u8> {
        let mut bytes = Vec::new();
        Frame { kind: TOY_KIND, src, dst }.encode(&mut bytes);
        self.encode(&mut bytes);
        bytes
    }
}

/// Splits a datagram the toy emitted into its frame and packet.
pub(crate) fn open(bytes: &[u8]) -> (Frame, ToyPacket) {
    let (frame, payload) = Frame::decode(bytes).expect("a frame");
    (frame, ToyPacket::decode(payload).expect("a toy packet"))
}

/// The toy program; it remembers the last access error it saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct Toy {
    /// The last access the pass context refused.
    pub last_error: Option<AccessError>,
}

impl Program for Toy {
    type Packet = ToyPacket;

    fn spec(&self) -> ProgramSpec {
        let add = RegisterAction::always("add", Branch::set(Expr::LO.plus(Expr::IN1), Expr::LO));
        let counter = RegisterArraySpec {
            id: COUNTER,
            name: "counter".into(),
            stage: 3,
            entries: 16,
            width_bits: 32,
            pair: false,
            actions: vec![add],
        };
        let table =
            TableSpec { id: TABLE, name: "values".into(), stage: 1, key_bits: 32, value_bits: 32, entries: 1024 };
        ProgramSpec { name: "toy".into(), arrays: vec![counter], reserve_fast_recirc_port: false, tables: vec![table] }
    }

    fn kind(&self) -> Kind {
        TOY_KIND
    }

    fn admit(&self, frame: &Frame, payload: &[u8]) -> Result<ToyPacket, Reject> {
        if frame.kind != TOY_KIND {
            return Err(Reject::rule("not_for_toy", format!("{:?}", frame.kind)));
        }
        ToyPacket::decode(payload).ok_or_else(|| Reject::rule("toy_length", format!("{} bytes", payload.len())))
    }

    fn execute_pass(&mut self, ctx: &mut PassContext<'_>, p: &mut ToyPacket) -> PassDecision {
        p.passes += 1;
        let refused = |toy: &mut Toy, e: AccessError| {
            toy.last_error = Some(e);
            PassDecision::Drop("toy_refused")
        };
        match p.action {
            a if a == Action::Forward as u8 => PassDecision::Forward,
            a if a == Action::EarlyAnswer as u8 && p.passes < EARLY_PASSES => {
                PassDecision::EmitAndRecirculate { copy: Output::Reply, recirc: Recirc::Waiting }
            }
            a if a == Action::EarlyAnswer as u8 => PassDecision::Reply,
            a if a == Action::ToCpu as u8 => PassDecision::ToControlPlane,
            a if a == Action::Lookup as u8 => match ctx.lookup(TABLE, p.key) {
                Ok(value) => {
                    p.result = value.unwrap_or(MISS);
                    PassDecision::Reply
                }
                Err(e) => refused(self, e),
            },
            a if a == Action::LookupTwice as u8 => {
                match ctx.lookup(TABLE, p.key).and_then(|_| ctx.lookup(TABLE, p.key)) {
                    Ok(_) => PassDecision::Reply,
                    Err(e) => refused(self, e),
                }
            }
            a if a == Action::LookupAfterLaterStage as u8 => {
                match ctx.execute(COUNTER, 0, 0, 1, 0).and_then(|_| ctx.lookup(TABLE, p.key)) {
                    Ok(_) => PassDecision::Reply,
                    Err(e) => refused(self, e),
                }
            }
            _ => PassDecision::Drop("toy_unknown_action"),
        }
    }

    fn encode(&self, p: &ToyPacket, out: &mut Vec<u8>) {
        p.encode(out);
    }

    fn wire_bytes(&self, _p: &ToyPacket) -> usize {
        FRAME_BYTES + TOY_BYTES
    }
}
