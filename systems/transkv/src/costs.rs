//! The CPU time the simulator charges TransKV's hosts, measured by `benches/costs.rs`
//! (`cargo bench -p pisadb-transkv --bench costs -- --noplot`; figures and date in
//! `CALIBRATION.md`, section TransKV).
//!
//! A storage node pays its shim's cost per datagram (decode, timestamp checks in the engine's
//! TSO, bookkeeping, encode: the handler measured with an in-memory map) plus, per key it reads
//! or writes, what a real embedded LSM store (fjall, LevelDB's kind, on disk) takes for a point
//! read or an insert. The controller and the clients pay their handlers' measured cost per
//! datagram. No network-stack cost is charged on hosts beyond the links' NIC latency.

use pisadb_core::Nanos;

/// Cores of a storage node's shim (one thread serving the store, as the paper's shim).
pub const STORE_CORES: u16 = 1;
/// A storage node's shim per datagram: `transkv/store_read` (256 ns; `store_write` 356 ns).
pub const STORE_MESSAGE_NS: Nanos = 260;
/// A point read of the LSM store: `transkv/fjall_get` (1.33 µs).
pub const STORE_GET_NS: Nanos = 1_330;
/// An insert into the LSM store: `transkv/fjall_put` (2.76 µs).
pub const STORE_PUT_NS: Nanos = 2_760;
/// Cores of the controller (coordinator).
pub const CONTROLLER_CORES: u16 = 2;
/// The controller per datagram: `transkv/controller_coordinate` (230 ns).
pub const CONTROLLER_MESSAGE_NS: Nanos = 230;
/// Cores of a client host.
pub const CLIENT_CORES: u16 = 8;
/// A client per datagram: `transkv/client_commit` (461 ns: take a commit, draw and send the
/// next transaction).
pub const CLIENT_MESSAGE_NS: Nanos = 460;

/// What a storage node's store work costs: `reads` point reads and `writes` inserts.
pub fn store_ns(reads: u64, writes: u64) -> Nanos {
    reads * STORE_GET_NS + writes * STORE_PUT_NS
}
