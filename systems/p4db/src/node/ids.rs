//! Transaction ids and timestamps of a node.

use crate::node::config::NodeConfig;
use pisadb_core::Nanos;
use pisadb_engine::locks::TxnId;

/// A transaction attempt id: node (bits 48..63), the node's incarnation (38..47), worker
/// (32..37) and the worker's attempt counter (0..31). The upper half names a worker slot of
/// one incarnation, which is how the switch tells a resent transaction from a new one.
pub fn txn_id(node: u16, incarnation: u16, worker: u16, seq: u32) -> TxnId {
    let incarnation = incarnation % NodeConfig::INCARNATIONS;
    (u64::from(node) << 48) | (u64::from(incarnation) << 38) | (u64::from(worker) << 32) | u64::from(seq)
}

/// The node of an attempt id.
pub fn owner_node(id: TxnId) -> u16 {
    ((id >> 48) & 0x7FFF) as u16
}

/// The worker of an attempt id.
pub fn worker_of(id: TxnId) -> u16 {
    ((id >> 32) & 0x3F) as u16
}

/// The WAIT_DIE timestamp of a transaction first started at `now` by `worker` of `node`:
/// start time first, ties broken by node and worker, so timestamps are unique.
pub(super) fn timestamp(now: Nanos, node: u16, worker: u16) -> u64 {
    (now << 16) | (u64::from(node) << 6) | u64::from(worker)
}
