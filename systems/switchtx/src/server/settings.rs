//! A server's settings: who it is, its threads and MPL, how transactions are coordinated,
//! what it runs and what it survives; and the switch slot of each client lane.
//!
//! Lane `l` of thread `t` of server `s` owns switch slot `(s × threads + t) × lanes + l`, so
//! slots never collide; a transaction id is `(slot + 1) << 32 | attempt` (its attempt number
//! from the lane's counter). [`ServerConfig::check`] refuses what the slots, the bit sets of
//! servers, the engine's worker lanes, Eris's sequencer header or promotion cannot hold, naming
//! the field and the accepted values.

use crate::costs::Costs;
use crate::tree::{Coordination, Layout};
use crate::workload::Workload;
use pisadb_core::Nanos;
use pisadb_engine::id::TxnId;
use serde::{Deserialize, Serialize};

/// How many transactions a thread keeps in flight.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Mpl {
    /// Always this many.
    Static(u8),
    /// Listing 1, epoch by epoch, up to `max`.
    Adaptive {
        /// The cap (the thread's lanes).
        max: u8,
        /// The epoch length.
        epoch_ns: Nanos,
        /// Listing 1's other constants (α, the initial slow start).
        listing: crate::admission::Listing1,
    },
}

impl Mpl {
    /// Lanes a thread needs.
    pub fn lanes(&self) -> u8 {
        match *self {
            Mpl::Static(n) => n.max(1),
            Mpl::Adaptive { max, .. } => max.max(1),
        }
    }
}

/// One server's configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Its id (its shard).
    pub id: u8,
    /// The racks.
    pub layout: Layout,
    /// Worker threads (cores).
    pub threads: u16,
    /// How transactions are coordinated.
    pub coord: Coordination,
    /// Whether messages carry their semantic class (else all medium).
    pub priority: bool,
    /// The MPL policy.
    pub mpl: Mpl,
    /// The workload.
    pub workload: Workload,
    /// The seed.
    pub seed: u64,
    /// A transaction without an outcome after this long is resolved (0: never).
    pub timeout_ns: Nanos,
    /// The CPU costs.
    pub costs: Costs,
    /// The Eris baseline instead of the five phases: one-shot transactions sequenced by a
    /// switch, executed by each shard (a thread) in sequence order.
    pub eris: bool,
    /// Whether the server writes its write-ahead log ([`crate::wal`]): needed to survive a
    /// crash; off where no server crashes (the paper's system logs nothing).
    pub durable: bool,
    /// How long a lease from the configuration manager lasts ([`crate::config`]); a server
    /// whose lease lapsed for longer than this and a quarter is removed and its shard served
    /// by its backup. 0: no leases, no manager, the initial shard map for good.
    pub lease_ns: Nanos,
}

impl ServerConfig {
    /// The switch slot of (server, thread, lane).
    pub fn slot(&self, server: u8, thread: u16, lane: u8) -> u16 {
        let lanes = u32::from(self.mpl.lanes());
        let slot = (u32::from(server) * u32::from(self.threads) + u32::from(thread)) * lanes + u32::from(lane);
        u16::try_from(slot).unwrap_or(u16::MAX)
    }

    /// The (thread, lane) of this server that owns `slot`, if one does.
    pub fn lane_of(&self, slot: u16) -> Option<(u16, u8)> {
        let lanes = u32::from(self.mpl.lanes());
        let base = u32::from(self.id) * u32::from(self.threads) * lanes;
        let rel = u32::from(slot).checked_sub(base)?;
        let thread = u16::try_from(rel / lanes).ok()?;
        (thread < self.threads).then_some((thread, (rel % lanes) as u8))
    }

    /// The id of `attempt` of (thread, lane) of this server.
    pub fn txn_id(&self, thread: u16, lane: u8, attempt: u32) -> u64 {
        ((u64::from(self.slot(self.id, thread, lane)) + 1) << 32) | u64::from(attempt)
    }

    /// Checks that slots fit 16 bits and servers fit the bit sets.
    pub fn check(&self) -> Result<(), String> {
        let n = self.layout.servers();
        if !(2..=8).contains(&n) {
            return Err(format!("servers {n}: accepted 2..=8 (bit sets of one byte)"));
        }
        let slots = u32::from(n) * u32::from(self.threads) * u32::from(self.mpl.lanes());
        if slots > 1 << 16 {
            return Err(format!("servers × threads × lanes = {slots} slots; the switch has 65536"));
        }
        if self.threads == 0 || self.threads > TxnId::WORKERS {
            return Err(format!(
                "threads {}: accepted 1..={} (the engine's worker lanes)",
                self.threads,
                TxnId::WORKERS
            ));
        }
        if u16::from(self.mpl.lanes()) > TxnId::LANES {
            return Err(format!(
                "mpl {}: accepted 1..={} lanes per thread (the engine's worker lanes)",
                self.mpl.lanes(),
                TxnId::LANES
            ));
        }
        let w = &self.workload;
        if self.eris {
            let shards = usize::from(n) * usize::from(self.threads);
            if shards > crate::wire::ERIS_SHARDS {
                return Err(format!(
                    "eris: {n} servers × {} threads = {shards} shards, but the sequencer's 224-byte header holds {} sequence numbers (use threads <= {})",
                    self.threads,
                    crate::wire::ERIS_SHARDS,
                    crate::wire::ERIS_SHARDS / usize::from(n)
                ));
            }
            if w.tpcc_warehouses > 0 {
                return Err("eris runs independent one-shot transactions (YCSB-T) only, not TPC-C".into());
            }
        }
        if self.lease_ns > 0 && (!self.durable || self.timeout_ns == 0 || self.eris) {
            return Err(format!(
                "lease_us {}: promotion needs durable=true and timeout_us > 0, and eris has no backups to promote (a removed server answers for its in-flight transactions from its log, and they end by timeouts)",
                self.lease_ns / 1_000
            ));
        }
        if w.tpcc_warehouses > 0 {
            return if (0.0..=1.0).contains(&w.remote_items) && w.tpcc_warehouses <= 1_000 {
                Ok(())
            } else {
                Err("tpcc_warehouses 1..=1000 per server and remote_items in 0..=1".into())
            };
        }
        if w.partitions == 0 || w.partitions > n || w.keys == 0 || w.keys > 32 {
            return Err(format!("partitions {} and keys {}: accepted 1..={n} and 1..=32", w.partitions, w.keys));
        }
        if !(0.0..=1.0).contains(&w.write_fraction)
            || !(0.0..=1.0).contains(&w.read_only_fraction)
            || !(0.0..=1.0).contains(&w.blind_fraction)
            || w.theta < 0.0
            || w.records == 0
            || w.columns == 0
        {
            return Err("write_fraction in 0..=1, theta >= 0, records and columns > 0".into());
        }
        Ok(())
    }
}
