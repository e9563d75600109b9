//! SmallBank as P4DB runs it (seed 000, §7.2): bank accounts with a savings and a checking
//! balance, six transaction types, and a hot set of 5–15 accounts per node that 90% of the
//! transactions use.
//!
//! Each balance is one tuple: `sav(a) = TupleKey::new(SAVINGS, a)` and
//! `chk(a) = TupleKey::new(CHECKING, a)`, both on node `a % nodes`. The transactions, with their
//! share of the mix, are encoded as exactly these operations (the switch programs and the
//! balance check depend on the encoding):
//!
//! | type (share) | operations, in order (v in 1..=100) |
//! |---|---|
//! | Balance(a) 15% | Read sav(a); Read chk(a) |
//! | DepositChecking(a,v) 15% | Add chk(a) data=v |
//! | TransactSavings(a,±v) 15% | AddIfNonNegative sav(a) data=±v |
//! | Amalgamate(a,b) 15% | Write sav(a) 0 acc_out=Set; Write chk(a) 0 acc_out=Add; Add chk(b) 0 acc_in |
//! | WriteCheck(a,v) 15% | Read sav(a) acc_out=Set; WriteCheck chk(a) data=v acc_in |
//! | SendPayment(a,b,v) 25% | AddIfNonNegative chk(a) data=−v acc_out=Sub; Add chk(b) 0 acc_in |
//!
//! The accumulator carries the read-dependent part: Amalgamate moves both old balances of `a`
//! to `b`; SendPayment credits `b` with what was actually debited from `a` (nothing when `a`
//! cannot pay), so money is never created; WriteCheck charges a penalty of 1 when savings plus
//! checking do not cover the check.
//!
//! Amalgamate and SendPayment use two distinct accounts. Only they can be distributed: the
//! first account is on the home node and the second on another node. The one-account types are
//! always local, since "keys on the home node and at least one other node" needs two keys. (The
//! P4DB prototype instead decides remote per account, so it sometimes picks a single remote
//! account, which is a remote access rather than a multi-node transaction;
//! [`SmallBankConfig::prototype`] does that, with [`RemoteRule::PerKey`].)
//!
//! Money only enters or leaves the bank through deposits, savings transactions and checks.
//! [`external_flow`] recovers that amount from one executed transaction's outputs, so a test of
//! any engine can check conservation: after running transactions from balances loaded with
//! [`SmallBank::initial_balance`], the sum of all balances must equal the initial sum plus the
//! flows of the committed transactions (aborted ones contribute nothing).

use crate::partition::{KeySpace, RemoteRule, Scheme};
use crate::{ConfigError, GeneratedTxn, NodeId, Partitioning, TxnClass, Workload};
use pisadb_core::rng::{self, splitmix64, SeededRng};
use pisadb_core::{AccOut, Op, OpKind, SerialStore, TupleKey, Txn};
use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The table of savings balances.
pub const SAVINGS: u16 = 0;
/// The table of checking balances.
pub const CHECKING: u16 = 1;

/// The largest initial balance accepted: it leaves ample room below 2^31 for deposits, since
/// the switch keeps balances in 32-bit registers.
const INITIAL_BALANCE_LIMIT: i64 = 1_000_000_000;

/// The shape of a SmallBank run; [`Default`] is the paper's setup for 8 nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SmallBankConfig {
    /// The number of database nodes.
    pub nodes: u16,
    /// The number of accounts over all nodes (the paper: 1 million).
    pub accounts: u64,
    /// How many of its accounts each node contributes to the hot set (the paper: 5, 10, 15).
    pub hot_per_node: u64,
    /// The probability that a transaction is hot (the paper: 90%).
    pub hot_prob: f64,
    /// The probability that a two-account transaction is distributed, or that an account is
    /// remote, by `remote_rule`.
    pub remote_prob: f64,
    /// What `remote_prob` decides: PisaDB's per transaction, or the prototype's per account.
    #[serde(default)]
    pub remote_rule: RemoteRule,
    /// The smallest initial balance of a savings or checking tuple.
    pub initial_balance_min: i64,
    /// The largest initial balance of a savings or checking tuple.
    pub initial_balance_max: i64,
    /// How accounts are spread over the nodes.
    pub partitioning: Scheme,
}

impl Default for SmallBankConfig {
    fn default() -> Self {
        Self {
            nodes: 8,
            accounts: 1_000_000,
            hot_per_node: 15,
            hot_prob: 0.90,
            remote_prob: 0.20,
            initial_balance_min: 10_000,
            initial_balance_max: 50_000,
            partitioning: Scheme::RoundRobin,
            remote_rule: RemoteRule::PerTransaction,
        }
    }
}

impl SmallBankConfig {
    /// SmallBank as the P4DB prototype ran it for 8 nodes (`experiments/p4db_exp.py`,
    /// `exp_e`): a million accounts range-partitioned, 15 hot accounts per node, 90% of
    /// transactions hot, each account remote with probability 20%.
    pub fn prototype() -> Self {
        Self { partitioning: Scheme::Range, remote_rule: RemoteRule::PerKey, ..Self::default() }
    }
}

/// The six SmallBank transaction types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Amalgamate,
    Balance,
    DepositChecking,
    SendPayment,
    TransactSavings,
    WriteCheck,
}

/// The usual SmallBank mix, in percent of transactions.
const MIX: [(Kind, u32); 6] = [
    (Kind::Amalgamate, 15),
    (Kind::Balance, 15),
    (Kind::DepositChecking, 15),
    (Kind::SendPayment, 25),
    (Kind::TransactSavings, 15),
    (Kind::WriteCheck, 15),
];

impl Kind {
    /// The name reported in [`GeneratedTxn::kind`].
    fn name(self) -> &'static str {
        match self {
            Self::Amalgamate => "Amalgamate",
            Self::Balance => "Balance",
            Self::DepositChecking => "DepositChecking",
            Self::SendPayment => "SendPayment",
            Self::TransactSavings => "TransactSavings",
            Self::WriteCheck => "WriteCheck",
        }
    }

    /// How many distinct accounts the type uses.
    fn accounts(self) -> usize {
        match self {
            Self::Amalgamate | Self::SendPayment => 2,
            _ => 1,
        }
    }

    /// The operations on `accounts` (as many as [`Kind::accounts`]), drawing the amount.
    fn ops(self, rng: &mut SeededRng, accounts: &[u64]) -> Vec<Op> {
        let a = accounts[0];
        let amount = rng.random_range(1..=100);
        match self {
            Self::Balance => vec![Op::read(sav(a)), Op::read(chk(a))],
            Self::DepositChecking => vec![Op::new(chk(a), OpKind::Add, amount)],
            Self::TransactSavings => {
                let signed = if rng.random_bool(0.5) { amount } else { -amount };
                vec![Op::new(sav(a), OpKind::AddIfNonNegative, signed)]
            }
            Self::Amalgamate => vec![
                Op::write(sav(a), 0).with_acc_out(AccOut::Set),
                Op::write(chk(a), 0).with_acc_out(AccOut::Add),
                Op::new(chk(accounts[1]), OpKind::Add, 0).with_acc_in(),
            ],
            Self::WriteCheck => vec![
                Op::read(sav(a)).with_acc_out(AccOut::Set),
                Op::new(chk(a), OpKind::WriteCheck, amount).with_acc_in(),
            ],
            Self::SendPayment => vec![
                Op::new(chk(a), OpKind::AddIfNonNegative, -amount).with_acc_out(AccOut::Sub),
                Op::new(chk(accounts[1]), OpKind::Add, 0).with_acc_in(),
            ],
        }
    }
}

/// The savings tuple of `account`.
fn sav(account: u64) -> TupleKey {
    TupleKey::new(SAVINGS, account)
}

/// The checking tuple of `account`.
fn chk(account: u64) -> TupleKey {
    TupleKey::new(CHECKING, account)
}

/// The SmallBank generator: see the module doc.
#[derive(Clone, Debug)]
pub struct SmallBank {
    /// What a transaction looks like.
    shape: Shape,
    /// Mixed into every key's hash to make initial balances depend on the seed.
    balance_salt: u64,
    /// The smallest initial balance.
    initial_balance_min: i64,
    /// The largest initial balance.
    initial_balance_max: i64,
    /// The generator behind `next_txn`.
    rng: SeededRng,
}

/// Everything `generate` needs, apart from the generator it draws from.
#[derive(Clone, Debug)]
struct Shape {
    /// The accounts, their hot set and the transaction odds.
    space: KeySpace,
    /// Picks an index into [`MIX`] with the mix's weights.
    mix: WeightedIndex<u32>,
}

impl SmallBank {
    /// A generator for `config` whose stream and initial balances are fixed by `seed`.
    pub fn new(config: SmallBankConfig, seed: u64) -> Result<Self, ConfigError> {
        let space = KeySpace {
            partitioning: Partitioning::new(config.partitioning, config.nodes, config.accounts),
            rows: config.accounts,
            hot_per_node: config.hot_per_node,
            hot_prob: config.hot_prob,
            remote_prob: config.remote_prob,
            remote_rule: config.remote_rule,
        };
        // A local two-account transaction needs two distinct accounts on its home node.
        space.validate("accounts", 2)?;
        let (min, max) = (config.initial_balance_min, config.initial_balance_max);
        if !(0..=INITIAL_BALANCE_LIMIT).contains(&min) {
            let expected = format!("0..={INITIAL_BALANCE_LIMIT} (balances must fit the switch's 32-bit registers)");
            return Err(ConfigError::new("initial_balance_min", min, expected));
        }
        if !(min..=INITIAL_BALANCE_LIMIT).contains(&max) {
            let expected = format!("{min}..={INITIAL_BALANCE_LIMIT} (from initial_balance_min)");
            return Err(ConfigError::new("initial_balance_max", max, expected));
        }
        let mix = WeightedIndex::new(MIX.map(|(_, percent)| percent)).expect("the mix has positive weights");
        Ok(Self {
            shape: Shape { space, mix },
            balance_salt: rng::derive(seed, "smallbank/balances").random(),
            initial_balance_min: min,
            initial_balance_max: max,
            rng: rng::derive(seed, "smallbank"),
        })
    }

    /// The balance `key` starts with: uniform in the configured range, a pure function of the
    /// seed and the key, so every node loads its own partition without coordinating.
    pub fn initial_balance(&self, key: TupleKey) -> i64 {
        let hash = splitmix64(splitmix64(self.balance_salt ^ u64::from(key.table)) ^ key.row);
        // The range holds at most ~10^9 values, so the modulo bias is below 2^-33.
        let span = (self.initial_balance_max - self.initial_balance_min + 1) as u64;
        self.initial_balance_min + (hash % span) as i64
    }
}

impl Shape {
    /// A transaction of the given class from `home`, drawn from `rng`.
    fn generate(&self, rng: &mut SeededRng, home: NodeId, class: TxnClass) -> GeneratedTxn {
        let kind = MIX[self.mix.sample(rng)].0;
        let slots = kind.accounts();
        let (accounts, distributed) = match self.space.remote_rule {
            RemoteRule::PerTransaction => {
                let distributed = slots > 1 && self.space.draw_distributed(rng);
                let nodes = self.space.pick_nodes(rng, home, slots, distributed);
                (self.space.pick_distinct_rows(rng, &nodes, class), distributed)
            }
            RemoteRule::PerKey => self.space.pick_rows_per_key(rng, home, slots, class),
        };
        let txn = Txn::new(kind.ops(rng, &accounts));
        GeneratedTxn { txn, class, inserts: Vec::new(), distributed, home, kind: kind.name() }
    }
}

impl Workload for SmallBank {
    fn name(&self) -> &'static str {
        "smallbank"
    }

    fn partitioning(&self) -> Partitioning {
        self.shape.space.partitioning
    }

    fn tables(&self) -> Vec<(u16, u64)> {
        vec![(SAVINGS, self.shape.space.rows), (CHECKING, self.shape.space.rows)]
    }

    fn initial_value(&self, key: TupleKey) -> i64 {
        self.initial_balance(key)
    }

    fn hot_tuples(&self) -> Vec<TupleKey> {
        // Key order is table first, so all hot savings tuples come before the checking ones.
        let hot = || self.shape.space.hot_rows();
        hot().map(sav).chain(hot().map(chk)).collect()
    }

    fn is_hot(&self, key: TupleKey) -> bool {
        matches!(key.table, SAVINGS | CHECKING) && self.shape.space.is_hot_row(key.row)
    }

    fn next_txn(&mut self, home: NodeId) -> GeneratedTxn {
        assert!(home < self.shape.space.partitioning.nodes, "home {home} is not a node");
        let class = self.shape.space.draw_class(&mut self.rng);
        self.shape.generate(&mut self.rng, home, class)
    }

    fn hot_sample(&self, n: usize, seed: u64) -> Vec<Txn> {
        let mut rng = rng::derive(seed, "smallbank/hot_sample");
        let homes = (0..self.shape.space.partitioning.nodes).cycle().take(n);
        homes.map(|home| self.shape.generate(&mut rng, home, TxnClass::Hot).txn).collect()
    }

    fn with_stream(&self, stream_seed: u64) -> Box<dyn Workload> {
        Box::new(Self { rng: rng::derive(stream_seed, "smallbank"), ..self.clone() })
    }

    /// Conservation of money: the balances sum to their initial sum plus the committed
    /// transactions' [`external_flow`].
    fn check_invariants(&self, db: &SerialStore, committed: &[(&GeneratedTxn, &[i64])]) -> Result<(), String> {
        let initial: i64 = self
            .tables()
            .iter()
            .flat_map(|&(t, rows)| (0..rows).map(move |r| TupleKey::new(t, r)))
            .map(|k| self.initial_balance(k))
            .sum();
        let now: i64 = db.iter().filter(|(k, _)| matches!(k.table, SAVINGS | CHECKING)).map(|(_, v)| v).sum();
        let flow: i64 = committed.iter().map(|(g, outputs)| external_flow(&g.txn, outputs)).sum();
        if now == initial + flow {
            Ok(())
        } else {
            Err(format!(
                "the balances sum to {now}, but started at {initial} and the committed transactions moved {flow} in or out (off by {})",
                now - initial - flow
            ))
        }
    }
}

/// How much money an executed SmallBank transaction moved into (+) or out of (−) the bank,
/// recovered from `outputs`, the operation outputs its execution returned.
///
/// This is the change it made to the sum of the tuples it touched, replayed op by op: every
/// operation but AddIfNonNegative outputs its tuple's old value, from which [`Op::apply`] gives
/// the new one; AddIfNonNegative outputs the delta it applied. For SmallBank that is +v for a
/// deposit, the applied amount (or 0) for a savings transaction, −v or −(v+1) for a check, and 0
/// for the transfers. Use it to check conservation as the module doc describes: sum it over the
/// committed transactions only.
pub fn external_flow(txn: &Txn, outputs: &[i64]) -> i64 {
    assert_eq!(txn.ops.len(), outputs.len(), "one output per operation");
    let mut acc = 0;
    let mut flow = 0;
    for (op, &out) in txn.ops.iter().zip(outputs) {
        if op.kind == OpKind::AddIfNonNegative {
            // Its output is the delta it applied, not the old value; replayed as a read of that
            // output, it folds the same value into the accumulator as the real operation did.
            flow += out;
            acc = Op { kind: OpKind::Read, ..*op }.apply(out, acc).acc;
        } else {
            // Its output is the old value, so replaying it from there gives the new one.
            let outcome = op.apply(out, acc);
            flow += outcome.new - out;
            acc = outcome.acc;
        }
    }
    flow
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_well_formed, stream};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn small_bank(config: SmallBankConfig) -> SmallBank {
        SmallBank::new(config, 42).unwrap()
    }

    fn is_two_account(g: &GeneratedTxn) -> bool {
        matches!(g.kind, "Amalgamate" | "SendPayment")
    }

    /// Asserts that `g`'s operations are exactly the encoding of its type in the module doc.
    fn assert_encoding(g: &GeneratedTxn) {
        let ops = g.txn.ops.as_slice();
        // The first operation names account a; amounts and b are read back and range-checked.
        let a = ops[0].key.row;
        let amount_ok = |v: i64| (1..=100).contains(&v);
        match g.kind {
            "Balance" => assert_eq!(ops, [Op::read(sav(a)), Op::read(chk(a))]),
            "DepositChecking" => {
                let v = ops[0].data;
                assert_eq!(ops, [Op::new(chk(a), OpKind::Add, v)]);
                assert!(amount_ok(v));
            }
            "TransactSavings" => {
                let v = ops[0].data;
                assert_eq!(ops, [Op::new(sav(a), OpKind::AddIfNonNegative, v)]);
                assert!(amount_ok(v.abs()));
            }
            "Amalgamate" => {
                let b = ops[2].key.row;
                let expected = [
                    Op::write(sav(a), 0).with_acc_out(AccOut::Set),
                    Op::write(chk(a), 0).with_acc_out(AccOut::Add),
                    Op::new(chk(b), OpKind::Add, 0).with_acc_in(),
                ];
                assert_eq!(ops, expected);
                assert_ne!(a, b);
            }
            "WriteCheck" => {
                let v = ops[1].data;
                let expected =
                    [Op::read(sav(a)).with_acc_out(AccOut::Set), Op::new(chk(a), OpKind::WriteCheck, v).with_acc_in()];
                assert_eq!(ops, expected);
                assert!(amount_ok(v));
            }
            "SendPayment" => {
                let (v, b) = (-ops[0].data, ops[1].key.row);
                assert_eq!(ops, send_payment(a, b, v));
                assert!(amount_ok(v));
                assert_ne!(a, b);
            }
            other => panic!("unknown kind {other}"),
        }
    }

    fn send_payment(a: u64, b: u64, v: i64) -> [Op; 2] {
        [
            Op::new(chk(a), OpKind::AddIfNonNegative, -v).with_acc_out(AccOut::Sub),
            Op::new(chk(b), OpKind::Add, 0).with_acc_in(),
        ]
    }

    #[test]
    fn mix_proportions_match_the_usual_smallbank_mix() {
        let txns = stream(&mut small_bank(SmallBankConfig::default()), 20_000);
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for g in &txns {
            *counts.entry(g.kind).or_default() += 1;
        }
        for (kind, percent) in MIX {
            let share = counts[kind.name()] as f64 / txns.len() as f64;
            assert!((share - f64::from(percent) / 100.0).abs() < 0.02, "{kind:?}: {share}");
        }
        assert_eq!(counts.len(), MIX.len());
    }

    #[test]
    fn hot_and_remote_proportions_match_the_config() {
        for (hot_prob, remote_prob) in [(0.9, 0.2), (0.0, 1.0), (1.0, 0.0), (0.3, 0.6)] {
            let config = SmallBankConfig { hot_prob, remote_prob, ..Default::default() };
            let txns = stream(&mut small_bank(config), 20_000);
            let hot = txns.iter().filter(|g| g.class == TxnClass::Hot).count() as f64 / 20_000.0;
            let two: Vec<&GeneratedTxn> = txns.iter().filter(|g| is_two_account(g)).collect();
            let distributed = two.iter().filter(|g| g.distributed).count() as f64 / two.len() as f64;
            // Tolerances are over five standard deviations (8 000 two-account draws).
            assert!((hot - hot_prob).abs() < 0.02, "hot share {hot} for hot_prob {hot_prob}");
            assert!((distributed - remote_prob).abs() < 0.03, "distributed share {distributed} for {remote_prob}");
            assert!(txns.iter().filter(|g| !is_two_account(g)).all(|g| !g.distributed));
        }
    }

    #[test]
    fn the_prototype_decides_remote_per_account() {
        let workload = small_bank(SmallBankConfig::prototype());
        let p = workload.partitioning();
        let txns = stream(&mut small_bank(SmallBankConfig::prototype()), 40_000);
        // The share of transactions with an account off the home node: 1 - 0.8^accounts.
        for (accounts, expected) in [(1, 0.2), (2, 0.36)] {
            let of_kind: Vec<&GeneratedTxn> =
                txns.iter().filter(|g| usize::from(is_two_account(g)) + 1 == accounts).collect();
            let off_home = of_kind.iter().filter(|g| g.distributed).count() as f64 / of_kind.len() as f64;
            assert!((off_home - expected).abs() < 0.02, "{accounts} accounts: {off_home} off home");
        }
        for g in &txns {
            let remote = g.txn.ops.iter().any(|op| p.node_of(op.key) != g.home);
            assert_eq!(g.distributed, remote, "{g:?}");
            assert_well_formed(&workload, g);
        }
    }

    #[test]
    fn external_flow_counts_deposits_savings_and_checks_but_not_transfers() {
        let mut store = SerialStore::default();
        let set = |store: &mut SerialStore, a: u64, savings: i64, checking: i64| {
            store.set(sav(a), savings);
            store.set(chk(a), checking);
        };
        set(&mut store, 1, 30, 20);
        set(&mut store, 2, 5, 5);
        let mut run = |ops: Vec<Op>| {
            let txn = Txn::new(ops);
            let outputs = txn.execute_serial(&mut store);
            external_flow(&txn, &outputs)
        };
        assert_eq!(run(vec![Op::new(chk(1), OpKind::Add, 7)]), 7, "deposit");
        assert_eq!(run(vec![Op::new(sav(1), OpKind::AddIfNonNegative, -10)]), -10, "withdrawal");
        assert_eq!(run(vec![Op::new(sav(1), OpKind::AddIfNonNegative, -100)]), 0, "refused withdrawal");
        let check =
            |v| vec![Op::read(sav(2)).with_acc_out(AccOut::Set), Op::new(chk(2), OpKind::WriteCheck, v).with_acc_in()];
        assert_eq!(run(check(10)), -10, "covered check: 5 + 5 >= 10");
        assert_eq!(run(check(10)), -11, "overdrawn check: 5 + (-5) < 10 costs a penalty");
        assert_eq!(run(send_payment(1, 2, 20).to_vec()), 0, "payment");
        assert_eq!(run(send_payment(1, 2, 100).to_vec()), 0, "refused payment");
        let amalgamate = vec![
            Op::write(sav(1), 0).with_acc_out(AccOut::Set),
            Op::write(chk(1), 0).with_acc_out(AccOut::Add),
            Op::new(chk(2), OpKind::Add, 0).with_acc_in(),
        ];
        assert_eq!(run(amalgamate), 0, "amalgamate");
        // Account 2's checking was -16 + 20 = 4 after the payment; it receives account 1's 20 + 7.
        assert_eq!((store.get(sav(1)), store.get(chk(1)), store.get(chk(2))), (0, 0, 4 + 27));
    }

    #[test]
    fn initial_balances_are_in_range_and_depend_only_on_seed_and_key() {
        let a = small_bank(SmallBankConfig::default());
        let b = small_bank(SmallBankConfig::default());
        let c = SmallBank::new(SmallBankConfig::default(), 43).unwrap();
        let keys: Vec<TupleKey> = (0..1_000).flat_map(|r| [sav(r), chk(r)]).collect();
        let balances: Vec<i64> = keys.iter().map(|&k| a.initial_balance(k)).collect();
        assert!(balances.iter().all(|b| (10_000..=50_000).contains(b)));
        assert_eq!(balances, keys.iter().map(|&k| b.initial_balance(k)).collect::<Vec<_>>());
        assert_ne!(balances, keys.iter().map(|&k| c.initial_balance(k)).collect::<Vec<_>>());
        assert_ne!(a.initial_balance(sav(5)), a.initial_balance(chk(5)));
    }

    #[test]
    fn bad_configs_name_the_field() {
        let bad = |config: SmallBankConfig| SmallBank::new(config, 0).unwrap_err().field;
        let default = SmallBankConfig::default;
        assert_eq!(bad(SmallBankConfig { nodes: 0, ..default() }), "nodes");
        assert_eq!(bad(SmallBankConfig { hot_prob: -1.0, ..default() }), "hot_prob");
        assert_eq!(bad(SmallBankConfig { remote_prob: 2.0, ..default() }), "remote_prob");
        assert_eq!(bad(SmallBankConfig { accounts: 80, ..default() }), "hot_per_node");
        assert_eq!(bad(SmallBankConfig { hot_per_node: 1, ..default() }), "hot_per_node");
        assert_eq!(bad(SmallBankConfig { accounts: 8 * 16, ..default() }), "accounts");
        assert_eq!(bad(SmallBankConfig { initial_balance_min: -1, ..default() }), "initial_balance_min");
        assert_eq!(bad(SmallBankConfig { initial_balance_max: 9_999, ..default() }), "initial_balance_max");
        assert_eq!(
            bad(SmallBankConfig { initial_balance_max: i64::from(i32::MAX), ..default() }),
            "initial_balance_max"
        );
    }

    proptest! {
        #[test]
        fn every_transaction_is_well_formed_and_encoded_as_documented(
            seed: u64,
            nodes in 1u16..6,
            hot_per_node in 2u64..16,
            cold_per_node in 2u64..20,
            hot_prob in 0.0..=1.0,
            remote_prob in 0.0..=1.0,
            per_key in proptest::bool::ANY,
        ) {
            let accounts = u64::from(nodes) * (hot_per_node + cold_per_node);
            let remote_rule = if per_key { RemoteRule::PerKey } else { RemoteRule::PerTransaction };
            let config = SmallBankConfig {
                nodes, accounts, hot_per_node, hot_prob, remote_prob, remote_rule, ..Default::default()
            };
            let mut workload = SmallBank::new(config, seed).unwrap();
            for g in stream(&mut workload, 200) {
                assert_well_formed(&workload, &g);
                assert_encoding(&g);
                prop_assert!(g.txn.ops.iter().all(|op| op.key.row < accounts));
            }
        }

        #[test]
        fn serial_execution_conserves_money_up_to_external_flow(
            seed: u64,
            nodes in 1u16..5,
            hot_prob in 0.0..=1.0,
        ) {
            let accounts = u64::from(nodes) * 40;
            // Balances this small make refused payments and overdraft penalties common.
            let config = SmallBankConfig {
                nodes,
                accounts,
                hot_per_node: 5,
                hot_prob,
                initial_balance_min: 0,
                initial_balance_max: 150,
                ..Default::default()
            };
            let mut workload = SmallBank::new(config, seed).unwrap();
            let mut store = SerialStore::default();
            for key in (0..accounts).flat_map(|a| [sav(a), chk(a)]) {
                store.set(key, workload.initial_balance(key));
            }
            let total = |store: &SerialStore| store.iter().map(|(_, balance)| balance).sum::<i64>();
            let before = total(&store);
            let mut flow = 0;
            for g in stream(&mut workload, 500) {
                let outputs = g.txn.execute_serial(&mut store);
                flow += external_flow(&g.txn, &outputs);
            }
            prop_assert_eq!(total(&store), before + flow);
        }
    }
}
