//! P4DB's own packet formats, behind the shared frame header ([`pisadb_wire::Frame`]):
//!
//! - [`p4db`]: a switch transaction — a header (transaction id, GID, recirculation count,
//!   multi-pass flag, the lock pair, the accumulator) and up to [`p4db::MAX_INSTRUCTIONS`]
//!   8-byte instructions `{register, opcode, index, data}`, as §5.4 and Fig. 6 of the P4DB paper
//!   describe. The switch writes each instruction's result over its `data` and sends the same
//!   packet back.
//! - [`lock`]: a lock-manager request/reply for the LM-Switch baseline (NetLock-style grants for
//!   hot tuples whose data stays on the nodes).

pub mod lock;
pub mod p4db;

use pisadb_wire::Kind;

/// The frame kind of a P4DB switch transaction (request, and the reply with results).
pub const TXN_KIND: Kind = Kind::new(2);
/// The frame kind of a lock-manager request or reply (the LM-Switch baseline).
pub const LOCK_KIND: Kind = Kind::new(3);
/// Every frame kind P4DB declares (the binary's registry checks that no two systems collide).
pub const KINDS: &[Kind] = &[TXN_KIND, LOCK_KIND];
