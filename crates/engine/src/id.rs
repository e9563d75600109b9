//! Transaction ids and timestamps: one 64-bit layout, written down once.
//!
//! Every attempt of a transaction on a node has an id that is unique across the rack and
//! across the node's crashes, and that tells whoever holds it where the attempt lives: which
//! node started it, in which incarnation, on which worker and which of the worker's lanes. The
//! id travels in every message and switch packet of the attempt, so a reply finds its worker
//! without any lookup table, and switch programs can keep per-slot state indexed by it.
//!
//! ## The layout
//!
//! ```text
//!  63    62 ..... 58   57 ..... 48   47 ......... 38   37 .... 32   31 .............. 0
//! [tag] [   lane    ] [   node    ] [  incarnation  ] [  worker  ] [      attempt      ]
//!  1 b      5 b           10 b            10 b             6 b              32 b
//!       \______________________ slot: bits 32..62 __________________/
//! ```
//!
//! - **attempt** (0..31): the lane's attempt counter, wrapping. Every attempt of every
//!   transaction the lane runs (retries included) gets the next number.
//! - **worker** (32..37), **incarnation** (38..47), **node** (48..57): who runs it. The
//!   incarnation counts the node's restarts (it wraps after [`TxnId::INCARNATIONS`]), so an id
//!   is never reused after a crash while the old one may still be on the wire.
//! - **lane** (58..62): which of the worker's in-flight transactions this is. A worker that runs
//!   one transaction at a time (closed loop, as P4DB's) uses lane 0 only; one that keeps several
//!   in flight (a multi-programming level) gives each its own lane. With lane 0 the
//!   bits are exactly those of the layout before lanes existed, so one-lane systems' ids, and
//!   every trace hash built from them, did not move when lanes were added.
//! - **tag** (63): one bit a system may set on the ids it puts in its own packets, to mark a
//!   kind of packet that needs no answer (P4DB's lock-manager baseline marks its releases).
//!   An id as handed out never has it.
//!
//! Bits 32..62 together are the **slot**: one lane of one worker in one incarnation, which has
//! at most one attempt in flight at any time. A switch program that remembers "the last
//! transaction of each sender" (for at-most-once execution over a lossy network) indexes its
//! memory by the slot (`id >> 32` without the tag) and orders the attempts of one slot by their
//! attempt counter, with wrapping arithmetic.
//!
//! ## Timestamps
//!
//! Timestamp-based schemes (WAIT_DIE, timestamp ordering) need a total order of transactions
//! in which a retried transaction keeps its place, so that it eventually becomes the oldest and
//! cannot starve. [`Slot::timestamp`] gives one from the time the transaction *first* started,
//! ties broken by node, worker and lane: smaller is older. With one lane per worker it is
//! `start_ns << 16 | node << 6 | worker`, the layout the wire has always carried.

use std::fmt;
use thiserror::Error;

/// A timestamp of a transaction for timestamp-based concurrency control: smaller is older.
pub type Timestamp = u64;

/// A field of a [`Slot`] is out of the id layout's range: a configuration error, never a
/// reason to retry.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum IdError {
    /// The node number does not fit.
    #[error("node = {node}: the transaction-id layout holds nodes 0..{}", TxnId::NODES)]
    Node {
        /// The node asked for.
        node: u16,
    },
    /// The worker number does not fit.
    #[error("worker = {worker}: the transaction-id layout holds workers 0..{}", TxnId::WORKERS)]
    Worker {
        /// The worker asked for.
        worker: u16,
    },
    /// The lane number does not fit.
    #[error("lane = {lane}: the transaction-id layout holds lanes 0..{}", TxnId::LANES)]
    Lane {
        /// The lane asked for.
        lane: u16,
    },
    /// A worker count of 0, or more workers than the layout holds.
    #[error("workers = {workers}: expected 1..={}", TxnId::WORKERS)]
    Workers {
        /// The count asked for.
        workers: u16,
    },
    /// A lane count of 0, or more lanes than the layout holds.
    #[error("lanes = {lanes}: expected 1..={}", TxnId::LANES)]
    Lanes {
        /// The count asked for.
        lanes: u16,
    },
}

/// How many transactions each worker keeps in flight (1..=[`TxnId::LANES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lanes(u16);

impl Lanes {
    /// One transaction at a time per worker (a closed loop).
    pub const ONE: Lanes = Lanes(1);

    /// `lanes` lanes per worker.
    pub fn new(lanes: u16) -> Result<Self, IdError> {
        if lanes == 0 || lanes > TxnId::LANES {
            return Err(IdError::Lanes { lanes });
        }
        Ok(Lanes(lanes))
    }

    /// The count.
    pub fn get(self) -> u16 {
        self.0
    }

    /// Bits a timestamp spends to tell the lanes apart (0 for one lane).
    pub fn bits(self) -> u32 {
        u32::from(self.0).next_power_of_two().trailing_zeros()
    }
}

/// One lane of one worker of one node incarnation: the place an attempt runs in, holding at
/// most one attempt at a time. Its fields are in the id layout's range (see [`Slot::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot {
    /// The node, `0..TxnId::NODES`.
    node: u16,
    /// The node's incarnation, `0..TxnId::INCARNATIONS`.
    incarnation: u16,
    /// The worker on that node, `0..TxnId::WORKERS`.
    worker: u16,
    /// The worker's lane, `0..TxnId::LANES`.
    lane: u16,
}

impl Slot {
    /// The slot of `lane` of `worker` on `node` in `incarnation`. The incarnation wraps
    /// around modulo [`TxnId::INCARNATIONS`] (restarts are counted forever; the id keeps the
    /// last few); the other fields are refused when out of range.
    pub fn new(node: u16, incarnation: u16, worker: u16, lane: u16) -> Result<Self, IdError> {
        if node >= TxnId::NODES {
            return Err(IdError::Node { node });
        }
        if worker >= TxnId::WORKERS {
            return Err(IdError::Worker { worker });
        }
        if lane >= TxnId::LANES {
            return Err(IdError::Lane { lane });
        }
        Ok(Slot { node, incarnation: incarnation % TxnId::INCARNATIONS, worker, lane })
    }

    /// The node.
    pub fn node(self) -> u16 {
        self.node
    }

    /// The node's incarnation (modulo [`TxnId::INCARNATIONS`]).
    pub fn incarnation(self) -> u16 {
        self.incarnation
    }

    /// The worker.
    pub fn worker(self) -> u16 {
        self.worker
    }

    /// The lane.
    pub fn lane(self) -> u16 {
        self.lane
    }

    /// The id of this slot's attempt number `attempt`.
    pub fn attempt(self, attempt: u32) -> TxnId {
        TxnId(
            (u64::from(self.lane) << TxnId::LANE_SHIFT)
                | (u64::from(self.node) << TxnId::NODE_SHIFT)
                | (u64::from(self.incarnation) << TxnId::INCARNATION_SHIFT)
                | (u64::from(self.worker) << TxnId::WORKER_SHIFT)
                | u64::from(attempt),
        )
    }

    /// The timestamp of a transaction this slot first started at `first_start_ns`, with
    /// `lanes` lanes per worker: start time first, then node, worker and lane, so that two
    /// transactions never share one. Timestamps are only comparable among slots with the same
    /// lane count; the start time keeps `64 - 16 - lanes.bits()` bits.
    pub fn timestamp(self, first_start_ns: u64, lanes: Lanes) -> Timestamp {
        debug_assert!(self.lane < lanes.get(), "lane {} of {} lanes", self.lane, lanes.get());
        let lane_bits = lanes.bits();
        (first_start_ns << (16 + lane_bits))
            | (u64::from(self.node) << (6 + lane_bits))
            | (u64::from(self.worker) << lane_bits)
            | u64::from(self.lane)
    }
}

/// A transaction attempt's id (layout in the [module documentation](self)).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxnId(u64);

impl TxnId {
    /// Bits of the attempt counter (0..31).
    pub const ATTEMPT_BITS: u32 = 32;
    /// Where the worker starts.
    pub const WORKER_SHIFT: u32 = 32;
    /// Where the incarnation starts.
    pub const INCARNATION_SHIFT: u32 = 38;
    /// Where the node starts.
    pub const NODE_SHIFT: u32 = 48;
    /// Where the lane starts.
    pub const LANE_SHIFT: u32 = 58;
    /// Where the slot (lane, node, incarnation, worker) starts: `id >> SLOT_SHIFT` without the
    /// tag names the slot.
    pub const SLOT_SHIFT: u32 = 32;
    /// The tag bit a system may set on ids in its own packets (never set on a fresh id).
    pub const TAG: u64 = 1 << 63;
    /// Workers per node the layout tells apart.
    pub const WORKERS: u16 = 1 << 6;
    /// Incarnations the layout tells apart (they wrap around after that).
    pub const INCARNATIONS: u16 = 1 << 10;
    /// Nodes the layout tells apart.
    pub const NODES: u16 = 1 << 10;
    /// Lanes per worker the layout tells apart.
    pub const LANES: u16 = 1 << 5;

    /// The id whose 64 bits are `bits` (any bits decode; the fields are read, not checked).
    pub const fn from_bits(bits: u64) -> Self {
        TxnId(bits)
    }

    /// The 64 bits, as they travel in messages.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// The node that started the attempt.
    pub fn node(self) -> u16 {
        self.field(Self::NODE_SHIFT, Self::NODES)
    }

    /// The node's incarnation when it started the attempt.
    pub fn incarnation(self) -> u16 {
        self.field(Self::INCARNATION_SHIFT, Self::INCARNATIONS)
    }

    /// The worker that runs the attempt.
    pub fn worker(self) -> u16 {
        self.field(Self::WORKER_SHIFT, Self::WORKERS)
    }

    /// The worker's lane that runs the attempt.
    pub fn lane(self) -> u16 {
        self.field(Self::LANE_SHIFT, Self::LANES)
    }

    /// The slot's attempt counter.
    pub fn attempt(self) -> u32 {
        self.0 as u32
    }

    /// The slot the attempt runs in.
    pub fn slot(self) -> Slot {
        Slot { node: self.node(), incarnation: self.incarnation(), worker: self.worker(), lane: self.lane() }
    }

    /// The slot as a switch program indexes it: bits 32..62.
    pub fn slot_bits(self) -> u32 {
        ((self.0 & !Self::TAG) >> Self::SLOT_SHIFT) as u32
    }

    /// The same id with the tag bit set.
    pub fn tagged(self) -> Self {
        TxnId(self.0 | Self::TAG)
    }

    /// Whether the tag bit is set.
    pub fn is_tagged(self) -> bool {
        self.0 & Self::TAG != 0
    }

    /// The id without the tag bit.
    pub fn untagged(self) -> Self {
        TxnId(self.0 & !Self::TAG)
    }

    fn field(self, shift: u32, values: u16) -> u16 {
        ((self.0 >> shift) & u64::from(values - 1)) as u16
    }
}

impl From<TxnId> for u64 {
    fn from(id: TxnId) -> u64 {
        id.0
    }
}

/// Ids read best in hex, where the fields show: `0x0001_0400_0000_0007`.
impl fmt::Debug for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Hex, as `{:#x}` of the bits.
impl fmt::LowerHex for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// Hex with the `0x` prefix.
impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The layout before lanes, as P4DB's node computed it.
    fn lane_free_layout(node: u16, incarnation: u16, worker: u16, seq: u32) -> u64 {
        let incarnation = incarnation % 1024;
        (u64::from(node) << 48) | (u64::from(incarnation) << 38) | (u64::from(worker) << 32) | u64::from(seq)
    }

    proptest! {
        #[test]
        fn lane_zero_ids_are_the_lane_free_layout(node in 0u16..1024, inc in any::<u16>(), worker in 0u16..64, seq in any::<u32>()) {
            let id = Slot::new(node, inc, worker, 0).unwrap().attempt(seq);
            prop_assert_eq!(id.bits(), lane_free_layout(node, inc, worker, seq));
            prop_assert_eq!(id.slot_bits(), (id.bits() >> 32) as u32);
        }

        #[test]
        fn every_field_reads_back(node in 0u16..1024, inc in 0u16..1024, worker in 0u16..64, lane in 0u16..32, seq in any::<u32>()) {
            let slot = Slot::new(node, inc, worker, lane).unwrap();
            let id = slot.attempt(seq);
            prop_assert_eq!((id.node(), id.incarnation(), id.worker(), id.lane(), id.attempt()), (node, inc, worker, lane, seq));
            prop_assert_eq!(id.slot(), slot);
            prop_assert!(!id.is_tagged());
            prop_assert_eq!(id.tagged().untagged(), id);
            prop_assert_eq!(id.tagged().slot_bits(), id.slot_bits());
            prop_assert_eq!(id.tagged().slot(), slot);
        }

        #[test]
        fn one_lane_timestamps_are_the_lane_free_layout(now in 0u64..(1 << 47), node in 0u16..1024, worker in 0u16..64) {
            let ts = Slot::new(node, 3, worker, 0).unwrap().timestamp(now, Lanes::ONE);
            prop_assert_eq!(ts, (now << 16) | (u64::from(node) << 6) | u64::from(worker));
        }
    }

    #[test]
    fn lanes_of_one_worker_have_distinct_slots_and_timestamps() {
        let lanes = Lanes::new(5).unwrap();
        assert_eq!(lanes.bits(), 3);
        let ids: Vec<TxnId> = (0..5).map(|l| Slot::new(2, 1, 7, l).unwrap().attempt(9)).collect();
        let slots: std::collections::BTreeSet<u32> = ids.iter().map(|id| id.slot_bits()).collect();
        assert_eq!(slots.len(), 5);
        let ts: std::collections::BTreeSet<u64> = ids.iter().map(|id| id.slot().timestamp(100, lanes)).collect();
        assert_eq!(ts.len(), 5);
        // Start time dominates: a later start is younger whatever its lane.
        assert!(ids[4].slot().timestamp(100, lanes) < ids[0].slot().timestamp(101, lanes));
    }

    #[test]
    fn out_of_range_fields_are_refused_by_name() {
        assert_eq!(Slot::new(1024, 0, 0, 0), Err(IdError::Node { node: 1024 }));
        assert_eq!(Slot::new(0, 0, 64, 0), Err(IdError::Worker { worker: 64 }));
        assert_eq!(Slot::new(0, 0, 0, 32), Err(IdError::Lane { lane: 32 }));
        assert_eq!(Lanes::new(0), Err(IdError::Lanes { lanes: 0 }));
        assert_eq!(Lanes::new(33), Err(IdError::Lanes { lanes: 33 }));
        assert_eq!(Slot::new(0, 1025, 0, 0).unwrap().incarnation(), 1, "incarnations wrap");
        assert_eq!(
            IdError::Worker { worker: 64 }.to_string(),
            "worker = 64: the transaction-id layout holds workers 0..64"
        );
    }

    #[test]
    fn ids_print_in_hex() {
        let id = Slot::new(1, 1, 0, 0).unwrap().attempt(7);
        assert_eq!(format!("{id}"), "0x1004000000007");
        assert_eq!(format!("{id:?}"), "0x1004000000007");
        assert_eq!(format!("{id:#x}"), "0x1004000000007");
    }
}
