//! The CPU time the simulator charges TransKV's hosts.
//!
//! First-cut figures, stated as assumptions until `benches/costs.rs` measures the handlers
//! (see `CALIBRATION.md`, section TransKV): a storage node pays a fixed cost per datagram (its
//! shim: receive, decode, encode, send) and a cost per tuple operation and per timestamp check
//! of its store; the controller and the clients pay a fixed cost per datagram.

use pisadb_core::Nanos;
use pisadb_engine::Work;

/// Cores of a storage node's shim (one thread serving the store).
pub const STORE_CORES: u16 = 1;
/// A storage node's cost per datagram (assumption).
pub const STORE_MESSAGE_NS: Nanos = 1_000;
/// A storage node's cost per tuple read or write of its store (assumption: an LSM store's
/// memtable path).
pub const STORE_TUPLE_NS: Nanos = 1_000;
/// A storage node's cost per timestamp check (assumption).
pub const STORE_CC_NS: Nanos = 200;
/// Cores of the controller (coordinator).
pub const CONTROLLER_CORES: u16 = 2;
/// The controller's cost per datagram (assumption).
pub const CONTROLLER_MESSAGE_NS: Nanos = 1_000;
/// Cores of a client host.
pub const CLIENT_CORES: u16 = 8;
/// A client's cost per datagram (assumption).
pub const CLIENT_MESSAGE_NS: Nanos = 500;

/// What a storage node's store work costs.
pub fn store_ns(work: &Work) -> Nanos {
    work.tuple_ops * STORE_TUPLE_NS + work.cc_ops * STORE_CC_NS
}
