//! # pisadb-workload: the transactions PisaDB is measured on
//!
//! P4DB's evaluation (seed 000, §7.2) runs YCSB and SmallBank over a rack of nodes, with a small
//! *hot set* of tuples per node that most transactions touch. Whether a switch helps depends
//! almost entirely on that shape (how hot, how distributed), so this crate makes the shape
//! explicit and identical across workloads:
//!
//! - **Partitioning** ([`Partitioning`]): rows are spread round robin (row `r` on node
//!   `r % nodes`, the default) or in ranges ([`Scheme`]). Every table is partitioned by row, so
//!   one SmallBank account's two balances live together.
//! - **Hot set**: node `n` contributes its first `hot_per_node` rows (with round robin
//!   `{n + nodes·i : i < hot_per_node}`, together simply rows `0 .. nodes·hot_per_node`), which
//!   is what gets offloaded to the switch ([`Workload::hot_tuples`]).
//! - **Class** ([`TxnClass`]): with probability `hot_prob` a transaction is *hot* and takes
//!   every key from the hot set (the switch can run it alone); otherwise it is *cold* and takes
//!   none (the nodes run it with 2PL). Mixing the two inside one transaction is what TPC-C's
//!   *warm* transactions will add later.
//! - **Distribution**: with probability `remote_prob` a transaction is *distributed*: its keys
//!   come from its home node and at least one other node. Otherwise every key is the home
//!   node's. This is the knob of the paper's "varying distributed transactions" experiments.
//!
//! The P4DB prototype draws "remote" per key instead; we decide it per transaction by default
//! so that the fraction of distributed transactions is exactly the configured knob, and so that
//! "local" means what a reader expects (no network round trip to another node). The
//! prototype's rule is there too ([`RemoteRule::PerKey`]), with the prototype's whole setups in
//! [`YcsbConfig::prototype`], [`SmallBankConfig::prototype`] and [`TpccConfig::prototype`], so
//! that its figures can be reproduced as it measured them.
//!
//! A workload is a [`Workload`]: a deterministic generator that hands a worker on node `home`
//! its next transaction. Everything random comes from [`pisadb_core::rng::derive`] with a name
//! per stream, so a seed reproduces the stream exactly; [`Workload::hot_sample`] draws from its
//! own stream, so computing a data layout does not shift the transactions a run executes.
//!
//! Key popularity for workloads that draw keys by rank rather than from a hot set (YCSB as
//! TransKV and SwitchTx run it) is [`Popularity`]: Zipf or uniform ranks, scrambled onto keys
//! one-to-one ([`popularity`]).
//!
//! TPC-C ([`tpcc`]) is different in kind: its transactions mix hot and cold tuples (*warm*),
//! its rows are keyed by warehouse rather than drawn from a hot/cold split, and it inserts
//! rows. It shares the [`Workload`] interface and the seeding rules.
//!
//! Transactions are [`pisadb_core::Txn`]s: the same operations mean the same thing on a node and
//! in the switch. SmallBank's read-dependent writes use the transaction accumulator; their exact
//! encodings are documented in [`smallbank`] because the switch programs and the balance check
//! ([`external_flow`]) depend on them.
//!
//! See `docs/ARCHITECTURE.md` (the layers) for the page that explains it.

pub mod partition;
pub mod popularity;
pub mod smallbank;
pub mod tpcc;
pub mod ycsb;

pub use partition::{NodeId, Partitioning, RemoteRule, Scheme};
pub use popularity::{Popularity, Scramble};
pub use smallbank::{external_flow, SmallBank, SmallBankConfig, CHECKING, SAVINGS};
pub use tpcc::{Tpcc, TpccConfig};
pub use ycsb::{Ycsb, YcsbConfig, YcsbMix};

use pisadb_core::{Insert, SerialStore, TupleKey, Txn};
use serde::{Deserialize, Serialize};
use std::fmt::Display;

/// Whether a transaction runs on the switch or on the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnClass {
    /// Every key is in the hot set: the switch can execute the whole transaction.
    Hot,
    /// No key is in the hot set: the nodes execute it.
    Cold,
    /// Hot and cold keys together (TPC-C): the nodes lock and execute the cold part, then the
    /// switch runs the hot part as a sub-transaction (paper §6.2).
    Warm,
}

/// One generated transaction and what the generator knows about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedTxn {
    /// The operations to execute.
    pub txn: Txn,
    /// Whether all keys are hot, none is, or some are.
    pub class: TxnClass,
    /// Rows created at commit on the home node (TPC-C's orders, order lines, history).
    pub inserts: Vec<Insert>,
    /// Whether some key lives off the home node. Under PisaDB's rule the keys then span the
    /// home node and another; under the prototype's per-key rule every key may be remote.
    pub distributed: bool,
    /// The node whose worker issued the transaction (its coordinator).
    pub home: NodeId,
    /// The transaction type, for per-type statistics (e.g. "SendPayment", "ycsb").
    pub kind: &'static str,
}

/// A transaction generator with a hot set, partitioned over `partitioning().nodes` nodes.
pub trait Workload {
    /// The workload's name, e.g. "ycsb".
    fn name(&self) -> &'static str;

    /// How the workload's rows map to nodes.
    fn partitioning(&self) -> Partitioning;

    /// The tables and their number of rows (over all nodes), in table order.
    fn tables(&self) -> Vec<(u16, u64)>;

    /// The value `key` holds before any transaction runs.
    fn initial_value(&self, key: TupleKey) -> i64;

    /// Every hot tuple, in key order (what is offloaded to the switch).
    fn hot_tuples(&self) -> Vec<TupleKey>;

    /// Whether a key is in the hot set (O(1)).
    fn is_hot(&self, key: TupleKey) -> bool;

    /// The next transaction issued by a worker on node `home`; panics if `home` is not a node.
    fn next_txn(&mut self, home: NodeId) -> GeneratedTxn;

    /// A sample of `n` hot transactions issued from homes round-robin over the nodes, for the
    /// data layout. It draws from its own generator derived from `seed`, so it does not disturb
    /// `next_txn`'s stream.
    fn hot_sample(&self, n: usize, seed: u64) -> Vec<Txn>;

    /// The same database (tables, initial values, hot set) with an independent stream of
    /// transactions fixed by `stream_seed`: what each node of a rack runs, so that every node
    /// loads its partition from the same data and issues its own transactions.
    fn with_stream(&self, stream_seed: u64) -> Box<dyn Workload>;

    /// Checks the workload's invariants on `db`, a snapshot of the whole database after the
    /// `committed` transactions (with their outputs) ran from the initial values, in any
    /// serializable order. Aborted transactions must have left no trace. The error says which
    /// invariant broke and where. YCSB has none to check and always passes.
    fn check_invariants(&self, db: &SerialStore, committed: &[(&GeneratedTxn, &[i64])]) -> Result<(), String>;
}

/// A configuration value a workload cannot run with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field} = {value}: expected {expected}")]
pub struct ConfigError {
    /// The name of the offending config field, as spelled in the config struct.
    pub field: &'static str,
    /// The rejected value, rendered for the message.
    pub value: String,
    /// What the field accepts.
    pub expected: String,
}

impl ConfigError {
    fn new(field: &'static str, value: impl Display, expected: impl Into<String>) -> Self {
        Self { field, value: value.to_string(), expected: expected.into() }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// `n` transactions from `workload`, issued from homes round robin over its nodes.
    pub(crate) fn stream(workload: &mut dyn Workload, n: usize) -> Vec<GeneratedTxn> {
        let homes = (0..workload.partitioning().nodes).cycle().take(n);
        homes.map(|home| workload.next_txn(home)).collect()
    }

    /// Asserts what every generated transaction promises: its class matches its keys, and it is
    /// distributed exactly when a key is off the home node (and then, under the per-transaction
    /// rule, the keys span the home node and another node).
    pub(crate) fn assert_well_formed(workload: &dyn Workload, g: &GeneratedTxn) {
        let hot = g.txn.ops.iter().filter(|op| workload.is_hot(op.key)).count();
        match g.class {
            TxnClass::Hot => assert_eq!(hot, g.txn.ops.len(), "a hot txn has a cold key: {g:?}"),
            TxnClass::Cold => assert_eq!(hot, 0, "a cold txn has a hot key: {g:?}"),
            TxnClass::Warm => assert!(hot > 0 && hot < g.txn.ops.len(), "a warm txn is all hot or all cold: {g:?}"),
        }
        let partitioning = workload.partitioning();
        let nodes: BTreeSet<NodeId> = g.txn.ops.iter().map(|op| partitioning.node_of(op.key)).collect();
        if g.distributed {
            assert!(nodes.iter().any(|&n| n != g.home), "distributed txn on {nodes:?}: {g:?}");
        } else {
            assert_eq!(nodes, BTreeSet::from([g.home]), "local txn off its home: {g:?}");
        }
    }

    fn workloads(seed: u64) -> Vec<Box<dyn Workload>> {
        vec![
            Box::new(Ycsb::new(YcsbConfig::default(), seed).unwrap()),
            Box::new(SmallBank::new(SmallBankConfig::default(), seed).unwrap()),
            Box::new(Tpcc::new(TpccConfig::default(), seed).unwrap()),
        ]
    }

    #[test]
    fn same_seed_gives_the_same_stream_and_different_seeds_differ() {
        for ((mut a, mut b), mut c) in workloads(7).into_iter().zip(workloads(7)).zip(workloads(8)) {
            let first = stream(a.as_mut(), 500);
            assert_eq!(first, stream(b.as_mut(), 500), "{}", a.name());
            assert_ne!(first, stream(c.as_mut(), 500), "{}", a.name());
        }
    }

    #[test]
    fn hot_sample_returns_only_hot_transactions_and_leaves_the_stream_alone() {
        for (mut sampled, mut untouched) in workloads(3).into_iter().zip(workloads(3)) {
            let sample = sampled.hot_sample(1_000, 11);
            assert_eq!(sample.len(), 1_000);
            assert!(sample.iter().flat_map(|txn| &txn.ops).all(|op| sampled.is_hot(op.key)));
            assert_eq!(sample, sampled.hot_sample(1_000, 11), "{}: the sample is seeded", sampled.name());
            assert_eq!(stream(sampled.as_mut(), 200), stream(untouched.as_mut(), 200), "{}", sampled.name());
        }
    }

    #[test]
    fn hot_tuples_are_sorted_and_exactly_the_hot_keys() {
        for workload in workloads(1) {
            let hot = workload.hot_tuples();
            assert!(hot.windows(2).all(|w| w[0] < w[1]), "{}: not in key order", workload.name());
            assert!(hot.iter().all(|&key| workload.is_hot(key)));
            // No hot key of any table is missing from the list.
            let all_keys =
                workload.tables().into_iter().flat_map(|(t, rows)| (0..rows).map(move |r| TupleKey::new(t, r)));
            assert_eq!(all_keys.filter(|&key| workload.is_hot(key)).count(), hot.len(), "{}", workload.name());
        }
    }

    #[test]
    fn config_errors_name_the_field_and_what_it_accepts() {
        let err = ConfigError::new("hot_prob", 1.5, "a probability in 0..=1");
        assert_eq!(err.to_string(), "invalid hot_prob = 1.5: expected a probability in 0..=1");
    }
}
