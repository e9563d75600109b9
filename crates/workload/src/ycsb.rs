//! YCSB as P4DB runs it (seed 000, §7.2): one table of 8-byte keys and values, partitioned round
//! robin, and transactions of `ops_per_txn` (8) reads and writes on distinct keys. The mixes
//! A, B and C make each operation a write with probability 50%, 5% and 0%.
//!
//! The paper loads 1 billion rows; we default to 1 million. The size of the cold part barely
//! matters: cold keys are drawn uniformly from ~10^5 rows per node, so they almost never
//! conflict either way, while a million rows load quickly (inserting them into a std `HashMap`
//! took about 0.3 s in a release build on the 2-core development machine), which keeps runs and
//! tests short.
//!
//! [`YcsbConfig::prototype`] is YCSB as the P4DB prototype generates it instead
//! (`src/benchmarks/ycsb/` of DataManagementLab/p4db): 10 million rows in ranges, hot or cold
//! per transaction, and each key remote with the remote probability ([`RemoteRule::PerKey`]).

use crate::partition::{KeySpace, RemoteRule, Scheme};
use crate::{ConfigError, GeneratedTxn, NodeId, Partitioning, TxnClass, Workload};
use pisadb_core::rng::{self, SeededRng};
use pisadb_core::{Op, SerialStore, TupleKey, Txn};
use rand::seq::SliceRandom;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// YCSB's only table.
pub const USERTABLE: u16 = 0;

/// A YCSB read/write mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum YcsbMix {
    /// Update heavy: 50% of operations are writes.
    A,
    /// Read heavy: 5% of operations are writes.
    B,
    /// Read only: no writes.
    C,
}

impl YcsbMix {
    /// The probability that an operation is a write.
    pub fn write_fraction(self) -> f64 {
        match self {
            Self::A => 0.5,
            Self::B => 0.05,
            Self::C => 0.0,
        }
    }
}

impl FromStr for YcsbMix {
    type Err = ConfigError;

    /// Parses "a", "b" or "c", in either case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "a" => Ok(Self::A),
            "b" => Ok(Self::B),
            "c" => Ok(Self::C),
            _ => Err(ConfigError::new("mix", s, "a, b or c")),
        }
    }
}

/// The shape of a YCSB run; [`Default`] is the paper's setup for 8 nodes (with fewer rows).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct YcsbConfig {
    /// The number of database nodes.
    pub nodes: u16,
    /// The number of rows in the table, over all nodes (the module doc explains the default).
    pub rows: u64,
    /// How many of its rows each node contributes to the hot set (the paper: 50).
    pub hot_per_node: u64,
    /// The probability that a transaction is hot (the paper: 75%).
    pub hot_prob: f64,
    /// The probability that a transaction is distributed (the paper's default: 20%), or that a
    /// key is remote, by `remote_rule`.
    pub remote_prob: f64,
    /// What `remote_prob` decides: PisaDB's per transaction, or the prototype's per key.
    #[serde(default)]
    pub remote_rule: RemoteRule,
    /// The read/write mix.
    pub mix: YcsbMix,
    /// The number of operations per transaction, each on a distinct key (the paper: 8).
    pub ops_per_txn: usize,
    /// How rows are spread over the nodes.
    pub partitioning: Scheme,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        Self {
            nodes: 8,
            rows: 1_000_000,
            hot_per_node: 50,
            hot_prob: 0.75,
            remote_prob: 0.20,
            mix: YcsbMix::A,
            ops_per_txn: 8,
            partitioning: Scheme::RoundRobin,
            remote_rule: RemoteRule::PerTransaction,
        }
    }
}

impl YcsbConfig {
    /// YCSB as the P4DB prototype ran it for 8 nodes (`experiments/p4db_exp.py`, `exp_a`):
    /// 10 million rows range-partitioned, 50 hot rows per node, 75% of transactions hot, each
    /// of the 8 keys remote with probability 20%, each operation a write by `mix`.
    pub fn prototype(mix: YcsbMix) -> Self {
        Self { rows: 10_000_000, partitioning: Scheme::Range, remote_rule: RemoteRule::PerKey, mix, ..Self::default() }
    }
}

/// The YCSB generator: see the module doc.
#[derive(Clone, Debug)]
pub struct Ycsb {
    /// What a transaction looks like.
    shape: Shape,
    /// The generator behind `next_txn`.
    rng: SeededRng,
}

/// Everything but the generator, so that generating can borrow both at once.
#[derive(Clone, Debug)]
struct Shape {
    /// The table, its hot set and the transaction odds.
    space: KeySpace,
    /// The read/write mix.
    mix: YcsbMix,
    /// Operations per transaction.
    ops_per_txn: usize,
}

impl Ycsb {
    /// A generator for `config` whose stream is fixed by `seed`.
    pub fn new(config: YcsbConfig, seed: u64) -> Result<Self, ConfigError> {
        if config.ops_per_txn == 0 {
            return Err(ConfigError::new("ops_per_txn", 0, "at least 1"));
        }
        let per_txn = config.remote_rule == RemoteRule::PerTransaction;
        if per_txn && config.ops_per_txn == 1 && config.nodes > 1 && config.remote_prob > 0.0 {
            let expected = "at least 2 when nodes > 1 and remote_prob > 0 (distributing takes 2 keys)";
            return Err(ConfigError::new("ops_per_txn", 1, expected));
        }
        let space = KeySpace {
            partitioning: Partitioning::new(config.partitioning, config.nodes, config.rows),
            rows: config.rows,
            hot_per_node: config.hot_per_node,
            hot_prob: config.hot_prob,
            remote_prob: config.remote_prob,
            remote_rule: config.remote_rule,
        };
        // usize is at most 64 bits on every target Rust supports, so this never truncates.
        space.validate("rows", config.ops_per_txn as u64)?;
        let shape = Shape { space, mix: config.mix, ops_per_txn: config.ops_per_txn };
        Ok(Self { shape, rng: rng::derive(seed, "ycsb") })
    }
}

impl Shape {
    /// A transaction of the given class from `home`, drawn from `rng`.
    fn generate(&self, rng: &mut SeededRng, home: NodeId, class: TxnClass) -> GeneratedTxn {
        let (rows, distributed) = match self.space.remote_rule {
            RemoteRule::PerTransaction => {
                let distributed = self.space.draw_distributed(rng);
                let mut nodes = self.space.pick_nodes(rng, home, self.ops_per_txn, distributed);
                // Spread the home and the guaranteed remote key over the transaction, so that no
                // position (and thus no lock acquisition order) is systematically local or remote.
                nodes.shuffle(rng);
                (self.space.pick_distinct_rows(rng, &nodes, class), distributed)
            }
            RemoteRule::PerKey => self.space.pick_rows_per_key(rng, home, self.ops_per_txn, class),
        };
        let ops = rows
            .into_iter()
            .map(|row| {
                let key = TupleKey::new(USERTABLE, row);
                if rng.random_bool(self.mix.write_fraction()) {
                    Op::write(key, i64::from(rng.random_range(0..=i32::MAX)))
                } else {
                    Op::read(key)
                }
            })
            .collect();
        GeneratedTxn { txn: Txn::new(ops), class, inserts: Vec::new(), distributed, home, kind: "ycsb" }
    }
}

impl Workload for Ycsb {
    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn partitioning(&self) -> Partitioning {
        self.shape.space.partitioning
    }

    fn tables(&self) -> Vec<(u16, u64)> {
        vec![(USERTABLE, self.shape.space.rows)]
    }

    /// YCSB's values start at zero (the benchmark cares about access patterns, not contents).
    fn initial_value(&self, _key: TupleKey) -> i64 {
        0
    }

    fn hot_tuples(&self) -> Vec<TupleKey> {
        self.shape.space.hot_rows().map(|row| TupleKey::new(USERTABLE, row)).collect()
    }

    fn is_hot(&self, key: TupleKey) -> bool {
        key.table == USERTABLE && self.shape.space.is_hot_row(key.row)
    }

    fn next_txn(&mut self, home: NodeId) -> GeneratedTxn {
        assert!(home < self.shape.space.partitioning.nodes, "home {home} is not a node");
        let class = self.shape.space.draw_class(&mut self.rng);
        self.shape.generate(&mut self.rng, home, class)
    }

    fn hot_sample(&self, n: usize, seed: u64) -> Vec<Txn> {
        let mut rng = rng::derive(seed, "ycsb/hot_sample");
        let homes = (0..self.shape.space.partitioning.nodes).cycle().take(n);
        homes.map(|home| self.shape.generate(&mut rng, home, TxnClass::Hot).txn).collect()
    }

    fn with_stream(&self, stream_seed: u64) -> Box<dyn Workload> {
        Box::new(Self { shape: self.shape.clone(), rng: rng::derive(stream_seed, "ycsb") })
    }

    /// YCSB writes arbitrary values: there is nothing to conserve.
    fn check_invariants(&self, _db: &SerialStore, _committed: &[(&GeneratedTxn, &[i64])]) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_well_formed, stream};
    use pisadb_core::OpKind;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn ycsb(config: YcsbConfig) -> Ycsb {
        Ycsb::new(config, 42).unwrap()
    }

    fn share(txns: &[GeneratedTxn], pred: impl Fn(&GeneratedTxn) -> bool) -> f64 {
        txns.iter().filter(|g| pred(g)).count() as f64 / txns.len() as f64
    }

    #[test]
    fn hot_and_remote_proportions_match_the_config() {
        for (hot_prob, remote_prob) in [(0.75, 0.20), (0.0, 1.0), (1.0, 0.0), (0.3, 0.6)] {
            let txns = stream(&mut ycsb(YcsbConfig { hot_prob, remote_prob, ..Default::default() }), 20_000);
            let hot = share(&txns, |g| g.class == TxnClass::Hot);
            let distributed = share(&txns, |g| g.distributed);
            // 0.02 is over six standard deviations of a share over 20 000 draws.
            assert!((hot - hot_prob).abs() < 0.02, "hot share {hot} for hot_prob {hot_prob}");
            assert!((distributed - remote_prob).abs() < 0.02, "distributed share {distributed} for {remote_prob}");
        }
    }

    #[test]
    fn keys_are_distinct_and_write_share_matches_the_mix() {
        for mix in [YcsbMix::A, YcsbMix::B, YcsbMix::C] {
            let txns = stream(&mut ycsb(YcsbConfig { mix, ..Default::default() }), 20_000);
            let ops: Vec<&Op> = txns.iter().flat_map(|g| &g.txn.ops).collect();
            for g in &txns {
                let keys: BTreeSet<TupleKey> = g.txn.ops.iter().map(|op| op.key).collect();
                assert_eq!(keys.len(), 8, "8 distinct keys: {g:?}");
            }
            let writes = ops.iter().filter(|op| op.is_write()).count() as f64 / ops.len() as f64;
            assert!((writes - mix.write_fraction()).abs() < 0.01, "{mix:?}: write share {writes}");
            assert!(ops.iter().all(|op| matches!(op.kind, OpKind::Read | OpKind::Write) && op.data >= 0));
        }
    }

    #[test]
    fn the_prototype_decides_hot_per_transaction_and_remote_per_key() {
        let config = YcsbConfig::prototype(YcsbMix::A);
        let workload = ycsb(config.clone());
        let p = workload.partitioning();
        let txns = stream(&mut ycsb(config), 20_000);
        // Hot is all or nothing: a hot transaction's 8 keys are all hot, a cold one's none.
        for g in &txns {
            let hot_keys = g.txn.ops.iter().filter(|op| workload.is_hot(op.key)).count();
            let expected = if g.class == TxnClass::Hot { 8 } else { 0 };
            assert_eq!(hot_keys, expected, "{g:?}");
            let remote = g.txn.ops.iter().any(|op| p.node_of(op.key) != g.home);
            assert_eq!(g.distributed, remote, "distributed means a key off the home node: {g:?}");
        }
        let hot = share(&txns, |g| g.class == TxnClass::Hot);
        assert!((hot - 0.75).abs() < 0.02, "hot share {hot}");
        // Per key at 20%: 1 - 0.8^8 = 83.2% of transactions distributed, 1.6 remote keys each.
        // Hot transactions redraw duplicate keys among 50 rows, which shifts both a little.
        let distributed = share(&txns, |g| g.distributed);
        assert!((distributed - 0.832).abs() < 0.02, "distributed share {distributed}");
        let remote_keys = txns.iter().flat_map(|g| g.txn.ops.iter().map(move |op| (g.home, op.key)));
        let remote_keys = remote_keys.filter(|(home, key)| p.node_of(*key) != *home).count() as f64;
        let per_txn = remote_keys / txns.len() as f64;
        assert!((per_txn - 1.6).abs() < 0.05, "remote keys per transaction {per_txn}");
        // Range partitioning: node n owns rows n*1.25M.., and its first 50 are hot.
        assert_eq!(p.scheme, Scheme::Range);
        assert!(workload.is_hot(TupleKey::new(USERTABLE, 1_250_000 + 49)));
        assert!(!workload.is_hot(TupleKey::new(USERTABLE, 1_250_000 + 50)));
    }

    #[test]
    fn a_single_node_never_distributes() {
        let txns = stream(&mut ycsb(YcsbConfig { nodes: 1, remote_prob: 1.0, ..Default::default() }), 1_000);
        assert!(txns.iter().all(|g| !g.distributed));
    }

    #[test]
    fn mix_parses_case_insensitively_and_rejects_others() {
        assert_eq!("a".parse::<YcsbMix>(), Ok(YcsbMix::A));
        assert_eq!("B".parse::<YcsbMix>(), Ok(YcsbMix::B));
        assert_eq!("c".parse::<YcsbMix>(), Ok(YcsbMix::C));
        let err = "d".parse::<YcsbMix>().unwrap_err();
        assert_eq!(err.to_string(), "invalid mix = d: expected a, b or c");
    }

    #[test]
    fn bad_configs_name_the_field() {
        let bad = |config: YcsbConfig| Ycsb::new(config, 0).unwrap_err().field;
        let default = YcsbConfig::default;
        assert_eq!(bad(YcsbConfig { nodes: 0, ..default() }), "nodes");
        assert_eq!(bad(YcsbConfig { hot_prob: 1.5, ..default() }), "hot_prob");
        assert_eq!(bad(YcsbConfig { hot_prob: f64::NAN, ..default() }), "hot_prob");
        assert_eq!(bad(YcsbConfig { remote_prob: -0.1, ..default() }), "remote_prob");
        assert_eq!(bad(YcsbConfig { ops_per_txn: 0, ..default() }), "ops_per_txn");
        assert_eq!(bad(YcsbConfig { ops_per_txn: 1, ..default() }), "ops_per_txn");
        assert_eq!(bad(YcsbConfig { rows: 800, hot_per_node: 101, ..default() }), "hot_per_node");
        assert_eq!(bad(YcsbConfig { hot_per_node: 7, ..default() }), "hot_per_node");
        assert_eq!(bad(YcsbConfig { rows: 8 * 57, ..default() }), "rows");
        // The same sizes are fine where the limiting class never occurs.
        assert!(Ycsb::new(YcsbConfig { hot_per_node: 0, hot_prob: 0.0, ..default() }, 0).is_ok());
        assert!(Ycsb::new(YcsbConfig { rows: 8 * 50, hot_prob: 1.0, ..default() }, 0).is_ok());
        assert!(Ycsb::new(YcsbConfig { nodes: 1, ops_per_txn: 1, ..default() }, 0).is_ok());
    }

    proptest! {
        #[test]
        fn every_transaction_is_well_formed(
            seed: u64,
            nodes in 1u16..6,
            hot_per_node in 8u64..20,
            cold_per_node in 8u64..40,
            hot_prob in 0.0..=1.0,
            remote_prob in 0.0..=1.0,
            ops_per_txn in 2usize..=8,
            range in proptest::bool::ANY,
            per_key in proptest::bool::ANY,
        ) {
            let rows = u64::from(nodes) * (hot_per_node + cold_per_node);
            let partitioning = if range { Scheme::Range } else { Scheme::RoundRobin };
            let remote_rule = if per_key { RemoteRule::PerKey } else { RemoteRule::PerTransaction };
            let config = YcsbConfig {
                nodes, rows, hot_per_node, hot_prob, remote_prob, mix: YcsbMix::A, ops_per_txn, partitioning, remote_rule,
            };
            let mut workload = Ycsb::new(config, seed).unwrap();
            for g in stream(&mut workload, 200) {
                assert_well_formed(&workload, &g);
                prop_assert_eq!(g.txn.ops.len(), ops_per_txn);
                prop_assert!(g.txn.ops.iter().all(|op| op.key.row < rows));
            }
        }
    }
}
