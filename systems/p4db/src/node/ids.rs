//! How P4DB's node names its transaction attempts: [`pisadb_engine::id`]'s layout with one lane
//! per worker (a worker runs one transaction at a time), so every id is the pre-lane layout
//! bit for bit, and the switch's at-most-once memory, indexed by `id >> 32`, keeps one entry
//! per worker of each node incarnation.
//!
//! The functions here are the raw-`u64` spelling the load generator and older code use; the
//! node itself works with [`TxnId`].

use pisadb_engine::id::{Lanes, Slot, Timestamp, TxnId};

/// Workers run one transaction at a time.
pub(super) const LANES: Lanes = Lanes::ONE;

/// The lane every worker runs its transactions in.
pub(super) const LANE: u16 = 0;

/// The slot of `worker` on `node` in `incarnation` (its only lane).
///
/// # Panics
///
/// If `node` or `worker` is outside the id layout, which [`crate::node::NodeConfig::validate`]
/// rules out for every configured node.
fn slot(node: u16, incarnation: u16, worker: u16) -> Slot {
    Slot::new(node, incarnation, worker, LANE).expect("a validated node config fits the id layout")
}

/// The id of attempt `seq` of `worker` on `node` in `incarnation`, as raw bits: node (bits
/// 48..57), incarnation (38..47, wrapping), worker (32..37) and the worker's attempt counter
/// (0..31); see [`pisadb_engine::id`].
pub fn txn_id(node: u16, incarnation: u16, worker: u16, seq: u32) -> u64 {
    slot(node, incarnation, worker).attempt(seq).bits()
}

/// The node of an attempt id.
pub fn owner_node(id: u64) -> u16 {
    TxnId::from_bits(id).node()
}

/// The worker of an attempt id.
pub fn worker_of(id: u64) -> u16 {
    TxnId::from_bits(id).worker()
}

/// The WAIT_DIE timestamp of a transaction `slot` first started at `first_start_ns`.
pub(super) fn timestamp(slot: Slot, first_start_ns: u64) -> Timestamp {
    slot.timestamp(first_start_ns, LANES)
}

/// Whether attempt `id` was started on `node`: its node field, with lane 0, the only lane P4DB
/// uses (an id with another lane is no attempt of this node's).
pub(super) fn started_on(id: TxnId, node: u16) -> bool {
    id.node() == node && id.lane() == 0
}
