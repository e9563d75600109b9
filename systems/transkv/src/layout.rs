//! Where everything is: the Fig. 6(c) hierarchy, the key space, and which switch caches which
//! key.
//!
//! ## The network
//!
//! Switches: core 0 and 1 ([`CORES`]), aggregation 2 and 3, ToRs 4–7. Hosts: storage nodes
//! 0–15, four per ToR (node n on ToR 4 + n/4); clients 16–19, two per core (16, 17 on core 0;
//! 18, 19 on core 1); the controller, host 20, on core 0. Links: core p – aggregation p (pod
//! p's core), aggregation p – its two ToRs, ToR – its four nodes, and one link core 0 – core 1.
//!
//! **Why this shape.** TSO is correct only if a key's timestamps live in one switch on every
//! path to the key. The network is a tree, so every route is unique and the way back is the
//! way there (symmetric). Pod p (nodes 8p..8p+7) is reached from anywhere only through core
//! p, aggregation p and the node's ToR, so a key of pod p cached at any of those three
//! switches is seen by every request to it and every reply from it. The paper's testbed has
//! two cores over both aggregation switches; with both paths open, a key cached at a core
//! would need its timestamps in both cores. Here each pod has a home core and the other core
//! reaches it over the core–core link ([`Hierarchy::routes_cover_cached_keys`] checks it on
//! the simulator's own routes).
//!
//! ## Keys and their cache level
//!
//! `records` keys, range-partitioned over the 16 nodes (node = key × 16 / records). YCSB's
//! scrambled Zipf: popularity rank r is key `scramble(r)` ([`key_of_rank`], the workload's
//! one-to-one [`Scramble`] of `0..records`, so every key is drawn and none twice). The cache
//! fill walks ranks from the hottest and puts each key at the first level of its pod with
//! room: its pod's core, then its pod's aggregation switch, then its ToR, each holding
//! `cache_per_switch` keys (§IV-B: hottest at level 1, hot at level 2, warm at level 3; each
//! key once). The total is n × m: 8 switches × m.

use pisadb_net::{Endpoint, LinkParams, Topology};
use pisadb_workload::Scramble;
use std::collections::BTreeMap;

/// The core switches.
pub const CORES: [u16; 2] = [0, 1];
/// The aggregation switches (pod p's is `AGGS[p]`).
pub const AGGS: [u16; 2] = [2, 3];
/// The first ToR switch.
pub const TOR0: u16 = 4;
/// Storage nodes (hosts 0..NODES).
pub const NODES: u16 = 16;
/// Storage nodes per ToR.
pub const NODES_PER_TOR: u16 = 4;
/// The first client host.
pub const CLIENT0: u16 = 16;
/// Client hosts.
pub const CLIENTS: u16 = 4;
/// The controller host.
pub const CONTROLLER: u16 = 20;
/// Switches in all.
pub const SWITCHES: u16 = 8;

/// The pod of storage node `node`.
pub fn pod_of(node: u16) -> usize {
    usize::from(node / (NODES / 2))
}

/// The ToR switch of storage node `node`.
pub fn tor_of(node: u16) -> u16 {
    TOR0 + node / NODES_PER_TOR
}

/// The core switch client `client` hangs off.
pub fn core_of_client(client: u16) -> u16 {
    CORES[usize::from((client - CLIENT0) / 2)]
}

/// The three switches that may cache a key of `node`, hottest level first.
pub fn levels_of(node: u16) -> [u16; 3] {
    let pod = pod_of(node);
    [CORES[pod], AGGS[pod], tor_of(node)]
}

/// The network of Fig. 6(c) with our routing choice (see the module docs).
pub fn topology(link: &LinkParams) -> Topology {
    let mut t = Topology::default();
    for node in 0..NODES {
        t.connect(Endpoint::Host(node), Endpoint::Switch(tor_of(node)), link);
    }
    for client in CLIENT0..CLIENT0 + CLIENTS {
        t.connect(Endpoint::Host(client), Endpoint::Switch(core_of_client(client)), link);
    }
    t.connect(Endpoint::Host(CONTROLLER), Endpoint::Switch(CORES[0]), link);
    t.connect(Endpoint::Switch(CORES[0]), Endpoint::Switch(CORES[1]), link);
    for pod in 0..2 {
        t.connect(Endpoint::Switch(CORES[pod]), Endpoint::Switch(AGGS[pod]), link);
        for tor in 0..2 {
            t.connect(Endpoint::Switch(AGGS[pod]), Endpoint::Switch(TOR0 + 2 * pod as u16 + tor), link);
        }
    }
    t
}

/// YCSB's scrambling of a popularity rank into a key: the workload's one-to-one
/// [`Scramble`] of `0..records` (the rank taken mod `records`); panics if `records` is 0.
pub fn key_of_rank(rank: u64, records: u64) -> u64 {
    Scramble::new(records).expect("a key space of at least one key").apply(rank)
}

/// The keys, their nodes and their cache places.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    /// Keys in all.
    pub records: u64,
    /// Keys each switch caches.
    pub cache_per_switch: u32,
    /// Cached key → (switch, slot).
    pub cached: BTreeMap<u64, (u16, u16)>,
}

impl Hierarchy {
    /// The fill of §IV-B from the workload's popularity (`cache_per_switch` = 0: no cache).
    pub fn new(records: u64, cache_per_switch: u32) -> Result<Self, String> {
        if records < u64::from(NODES) {
            return Err(format!("records {records}: accepted {NODES}.."));
        }
        if cache_per_switch > crate::program::CACHE_ENTRIES {
            return Err(format!("cache_per_switch {cache_per_switch}: accepted 0..={}", crate::program::CACHE_ENTRIES));
        }
        let mut used = [0u32; SWITCHES as usize];
        let capacity = u64::from(cache_per_switch) * u64::from(SWITCHES);
        // Placed in rank order, into a vector, and made a map once at the end (a sorted bulk
        // build): hundreds of thousands of map inserts were most of a run's setup. The scramble is
        // one-to-one, so no key comes twice; ToRs fill unevenly (a full pod's keys find no room):
        // walk a bounded number of ranks.
        let mut placed: Vec<(u64, (u16, u16))> = Vec::new();
        let ranks = records.min(capacity.saturating_mul(4));
        for rank in 0..ranks {
            if placed.len() as u64 >= capacity {
                break;
            }
            let key = key_of_rank(rank, records);
            let node = Self::node_of_key(records, key);
            if let Some(&switch) = levels_of(node).iter().find(|&&s| used[usize::from(s)] < cache_per_switch) {
                let slot = used[usize::from(switch)] as u16;
                used[usize::from(switch)] += 1;
                placed.push((key, (switch, slot)));
            }
        }
        placed.sort_unstable_by_key(|&(key, _)| key);
        let cached: BTreeMap<u64, (u16, u16)> = placed.into_iter().collect();
        Ok(Hierarchy { records, cache_per_switch, cached })
    }

    fn node_of_key(records: u64, key: u64) -> u16 {
        (u128::from(key) * u128::from(NODES) / u128::from(records)) as u16
    }

    /// The storage node that holds `key` (range partitioning).
    pub fn node_of(&self, key: u64) -> u16 {
        Self::node_of_key(self.records, key)
    }

    /// The ops of `ops` on each storage node, in op order (a transaction's shares).
    pub fn ops_by_node(&self, ops: &[crate::wire::Op]) -> BTreeMap<u16, Vec<crate::wire::Op>> {
        let mut shares: BTreeMap<u16, Vec<crate::wire::Op>> = BTreeMap::new();
        for op in ops {
            shares.entry(self.node_of(op.key as u64)).or_default().push(*op);
        }
        shares
    }

    /// The switch that caches `key`, if any.
    pub fn switch_of(&self, key: u64) -> Option<u16> {
        self.cached.get(&key).map(|&(switch, _)| switch)
    }

    /// Whether, on `topology`'s routes, every cached key's switch lies on the path from every
    /// client and from the controller to the key's node and back, and no other switch that
    /// caches keys of that node does (each key cached once, at a switch every path crosses).
    pub fn routes_cover_cached_keys(&self, topology: &Topology) -> Result<(), String> {
        let senders: Vec<u16> = (CLIENT0..CLIENT0 + CLIENTS).chain([CONTROLLER]).collect();
        for node in 0..NODES {
            for &sender in &senders {
                for (from, to) in [(sender, node), (node, sender)] {
                    let path = topology.route(from, to);
                    for level in levels_of(node) {
                        if !path.contains(&Endpoint::Switch(level)) {
                            return Err(format!("route {from} → {to} misses switch {level} of node {node}: {path:?}"));
                        }
                    }
                }
            }
        }
        for (&key, &(switch, _)) in &self.cached {
            if !levels_of(self.node_of(key)).contains(&switch) {
                return Err(format!("key {key} is cached at switch {switch}, off its node's paths"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_to_a_node_crosses_its_three_cache_levels() {
        let h = Hierarchy::new(100_000, 256).unwrap();
        let t = topology(&LinkParams::ten_gbe());
        h.routes_cover_cached_keys(&t).unwrap();
        // And a path never crosses another pod's aggregation switch or ToRs.
        let path = t.route(CLIENT0, 15);
        assert!(!path.contains(&Endpoint::Switch(AGGS[0])), "{path:?}");
        assert_eq!(t.route(15, CLIENT0), path.into_iter().rev().collect::<Vec<_>>(), "symmetric");
    }

    #[test]
    fn the_fill_puts_each_key_once_hottest_first_within_capacity() {
        let h = Hierarchy::new(100_000, 256).unwrap();
        assert_eq!(h.cached.len(), 8 * 256);
        let mut per_switch = BTreeMap::new();
        for &(switch, slot) in h.cached.values() {
            assert!(slot < 256);
            *per_switch.entry(switch).or_insert(0) += 1;
        }
        assert!(per_switch.values().all(|&n| n == 256), "{per_switch:?}");
        // The hottest key of each pod sits at its core.
        let hottest = key_of_rank(0, 100_000);
        assert_eq!(h.switch_of(hottest), Some(CORES[pod_of(h.node_of(hottest))]));
        assert!(Hierarchy::new(100_000, 0).unwrap().cached.is_empty());
    }
}
