//! TPC-C's NewOrder and Payment as P4DB runs them (seed 000, §7.2, §7.5): the two transactions
//! that make up ~90% of the standard mix and all of its contention, 50/50.
//!
//! ## Tables as columns
//!
//! PisaDB's tuples are single 64-bit values, so each TPC-C table becomes the columns the two
//! transactions use, one tuple table per column. The nine TPC-C tables map to:
//!
//! | TPC-C table | tuple tables | rows (`W` warehouses) |
//! |---|---|---|
//! | WAREHOUSE | [`W_YTD`], [`W_TAX`] | `w` |
//! | DISTRICT | [`D_YTD`], [`D_TAX`], [`D_NEXT_O_ID`] | `d·W + w` |
//! | CUSTOMER | [`C_BALANCE`], [`C_YTD_PAYMENT`], [`C_DISCOUNT`] | `(c·10 + d)·W + w` |
//! | ITEM | [`I_PRICE`], replicated on every node | `i·nodes + node` |
//! | STOCK | [`S_QUANTITY`], [`S_YTD`] | `i·W + w` |
//! | ORDER | [`ORDER`] (value: line count) | `(o·10 + d)·W + w` |
//! | NEW-ORDER | [`NEW_ORDER`] (value: customer) | as ORDER |
//! | ORDER-LINE | [`ORDER_LINE`] (value: item) | `((o·10 + d)·15 + l)·W + w` |
//! | HISTORY | [`HISTORY`] (value: amount) | `n·W + w`, `n` a per-node sequence |
//!
//! Every row id is `… ·W + w` (ITEM: `… ·nodes + node`), so with round-robin partitioning and
//! `W` a multiple of the node count, everything of warehouse `w` lives on node `w % nodes`, as
//! TPC-C's partitioning by warehouse wants. ORDER, NEW-ORDER, ORDER-LINE and HISTORY start
//! empty and grow by inserts at commit ([`pisadb_core::Insert`]): an order's rows are keyed by
//! the id that the district's `D_NEXT_O_ID` increment handed out, so a duplicate id would be a
//! duplicate key. (The standard's initial 3,000 orders per district are not loaded: neither
//! transaction reads them. Order ids start at [`FIRST_ORDER_ID`] as if they were.)
//!
//! ## The transactions
//!
//! A worker of node `n` picks a warehouse `w` of its node and a district `d`. Money is in whole
//! dollars, so the switch's 32-bit registers hold ~800,000 average payments per warehouse.
//!
//! - **NewOrder** (5–15 distinct items, NURand(8191); each from another warehouse with
//!   `remote_item_prob`; quantity 1–10): Read `W_TAX(w)`, Read `D_TAX(w,d)`, Add 1 to
//!   `D_NEXT_O_ID(w,d)` (its output is the order id), Read `C_DISCOUNT(w,d,c)`, then per line
//!   Read `I_PRICE` (the home node's replica), Restock `S_QUANTITY(sw,i)` by the quantity and Add
//!   it to `S_YTD(sw,i)`. Inserts the ORDER, NEW-ORDER and ORDER-LINE rows.
//! - **Payment** (1–5,000 dollars; the customer NURand(1023) of another warehouse with
//!   `remote_customer_prob`): Add the amount to `W_YTD(w)` and `D_YTD(w,d)`, subtract it from
//!   `C_BALANCE` and add it to `C_YTD_PAYMENT` of the customer. Inserts a HISTORY row.
//!
//! Left out: NewOrder's 1% user rollbacks, customer selection by last name, and the columns
//! neither transaction's outcome depends on (names, addresses, `S_DIST_xx`, order counts).
//!
//! ## The hot set, and why the transactions are warm
//!
//! The hot set is what P4DB offloads (§7.5): the written warehouse and district columns
//! (`W_YTD`, `D_YTD`, `D_NEXT_O_ID`) and the stock columns of the [`TpccConfig::hot_items`]
//! most ordered items of every warehouse. "Most ordered" is exact: NURand's distribution is
//! computed ([`item_weights`]), not sampled. Every transaction also touches cold tuples (the tax
//! rates, the customer), so all of them are *warm* (§6.2): the nodes run the cold part, the
//! switch the hot part. No operation feeds another through the accumulator, so the parts are
//! independent and need no offloaded cold tuples.
//!
//! ## Consistency
//!
//! [`crate::Workload::check_invariants`] checks the standard's consistency conditions that NewOrder and
//! Payment can break (clause 3.3.2: 1, 2, 3, 6, 8, 9 restricted to these two transactions)
//! on a database snapshot after a run.

use crate::{ConfigError, GeneratedTxn, NodeId, Partitioning, TxnClass, Workload};
use pisadb_core::rng::{self, splitmix64, SeededRng};
use pisadb_core::{Insert, InsertRow, Op, OpKind, SerialStore, TupleKey, Txn};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// WAREHOUSE.W_YTD: payments received (hot).
pub const W_YTD: u16 = 0;
/// WAREHOUSE.W_TAX, in hundredths of a percent.
pub const W_TAX: u16 = 1;
/// DISTRICT.D_YTD: payments received (hot).
pub const D_YTD: u16 = 2;
/// DISTRICT.D_TAX, in hundredths of a percent.
pub const D_TAX: u16 = 3;
/// DISTRICT.D_NEXT_O_ID: the next order id (hot).
pub const D_NEXT_O_ID: u16 = 4;
/// CUSTOMER.C_BALANCE.
pub const C_BALANCE: u16 = 5;
/// CUSTOMER.C_YTD_PAYMENT.
pub const C_YTD_PAYMENT: u16 = 6;
/// CUSTOMER.C_DISCOUNT, in hundredths of a percent.
pub const C_DISCOUNT: u16 = 7;
/// ITEM.I_PRICE, replicated on every node.
pub const I_PRICE: u16 = 8;
/// STOCK.S_QUANTITY (hot for the most ordered items).
pub const S_QUANTITY: u16 = 9;
/// STOCK.S_YTD (hot for the most ordered items).
pub const S_YTD: u16 = 10;
/// ORDER, inserted by NewOrder; value: the line count.
pub const ORDER: u16 = 11;
/// NEW-ORDER, inserted by NewOrder; value: the customer.
pub const NEW_ORDER: u16 = 12;
/// ORDER-LINE, inserted by NewOrder; value: the item.
pub const ORDER_LINE: u16 = 13;
/// HISTORY, inserted by Payment; value: the amount.
pub const HISTORY: u16 = 14;

/// Districts per warehouse.
pub const DISTRICTS: u64 = 10;
/// The most lines an order has.
pub const MAX_LINES: u64 = 15;
/// The id of a district's first order (the standard loads 3,000 before the run).
pub const FIRST_ORDER_ID: i64 = 3001;
/// W_YTD's initial value, dollars.
pub const INITIAL_W_YTD: i64 = 300_000;
/// D_YTD's initial value, dollars (ten districts add up to W_YTD).
pub const INITIAL_D_YTD: i64 = 30_000;

/// The shape of a TPC-C run; [`Default`] is the paper's most contended setup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TpccConfig {
    /// The number of database nodes.
    pub nodes: u16,
    /// Warehouses, a multiple of `nodes` (the paper: 8, 16, 32).
    pub warehouses: u16,
    /// Items in the catalogue (the standard: 100,000).
    pub items: u64,
    /// Customers per district (the standard: 3,000).
    pub customers_per_district: u64,
    /// Stock of how many of the most ordered items is hot, per warehouse.
    pub hot_items: u64,
    /// The probability that an order line is supplied by another warehouse (standard: 1%).
    pub remote_item_prob: f64,
    /// The probability that a paying customer belongs to another warehouse (standard: 15%).
    pub remote_customer_prob: f64,
    /// The share of NewOrder in the mix; the rest is Payment (the paper: 50%).
    pub new_order_share: f64,
    /// The most lines a NewOrder has; it has at least 5 (the standard: 15).
    #[serde(default = "standard_max_lines")]
    pub max_lines: u64,
}

/// The standard's most lines per order (for configurations written before `max_lines`).
fn standard_max_lines() -> u64 {
    MAX_LINES
}

/// The fewest lines a NewOrder has.
pub const MIN_LINES: u64 = 5;

impl TpccConfig {
    /// TPC-C as the P4DB prototype ran it with `warehouses` warehouses on 8 nodes
    /// (`src/benchmarks/tpcc/` of DataManagementLab/p4db): 51% NewOrder, 5 to 10 lines,
    /// every order line and every payment remote with probability 20%, and the stock of the
    /// 409,600 / W most ordered items of each warehouse hot (what its ten 40,960-entry stock
    /// arrays hold: 51,200 items per warehouse at 8 warehouses).
    pub fn prototype(warehouses: u16) -> Self {
        Self {
            warehouses,
            hot_items: 409_600 / u64::from(warehouses.max(1)),
            remote_item_prob: 0.2,
            remote_customer_prob: 0.2,
            new_order_share: 0.51,
            max_lines: 10,
            ..Self::default()
        }
    }
}

impl Default for TpccConfig {
    fn default() -> Self {
        Self {
            nodes: 8,
            warehouses: 8,
            items: 100_000,
            customers_per_district: 3_000,
            hot_items: 16,
            remote_item_prob: 0.01,
            remote_customer_prob: 0.15,
            new_order_share: 0.5,
            max_lines: MAX_LINES,
        }
    }
}

/// TPC-C's non-uniform random number NURand(A, 1, n) − 1, in `0..n`, with run constant `c`.
fn nurand(rng: &mut SeededRng, a: u64, n: u64, c: u64) -> u64 {
    ((rng.random_range(0..=a) | rng.random_range(1..=n)) + c) % n
}

/// How often NURand(a, 1, n) − 1 with constant `c` draws each value in `0..n`, counted exactly
/// over all `(a + 1)·n` equally likely pairs of its two uniform draws. `a + 1` must be a power
/// of two (TPC-C's 255, 1023, 8191 are).
///
/// With `x = r1 | r2`, `r1` in `0..=a`: for a given `r2`, the low bits of `x` cover `r2`'s low
/// bits and the high bits are `r2`'s; a value `x` with low part `l` is produced by every `r2`
/// whose high part is `x`'s and low part `s ⊆ l`, each with `2^popcount(s)` choices of `r1`.
/// Summed over all `s ⊆ l` that is `3^popcount(l)` when every such `r2` is in `1..=n`; the
/// edge blocks are counted subset by subset.
pub fn item_weights(a: u64, n: u64, c: u64) -> Vec<u64> {
    assert!((a + 1).is_power_of_two() && n > 0, "NURand({a}, 1, {n})");
    let mut weights = vec![0u64; n as usize];
    for x in 0..=(n | a) {
        let (high, low) = (x & !a, x & a);
        let full = high >= 1 && high + a <= n;
        let count = if full {
            3u64.pow(low.count_ones())
        } else {
            // Subsets of `low` whose r2 = high | s lies in 1..=n.
            let mut count = 0;
            let mut s = low;
            loop {
                let r2 = high | s;
                if (1..=n).contains(&r2) {
                    count += 1 << s.count_ones();
                }
                if s == 0 {
                    break;
                }
                s = (s - 1) & low;
            }
            count
        };
        weights[((x + c) % n) as usize] += count;
    }
    weights
}

/// The two transaction types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    NewOrder,
    Payment,
}

/// The TPC-C generator: see the module doc.
#[derive(Clone, Debug)]
pub struct Tpcc {
    /// The database and how transactions are drawn.
    model: Model,
    /// The generator behind `next_txn`.
    rng: SeededRng,
}

/// Everything about the database and its transactions, apart from the generator they are
/// drawn from.
#[derive(Clone, Debug)]
struct Model {
    config: TpccConfig,
    /// Warehouses, as a row-count factor.
    w: u64,
    /// NURand's run constant for item ids.
    c_item: u64,
    /// NURand's run constant for customer ids.
    c_customer: u64,
    /// Whether item `i`'s stock is hot, by item.
    hot_item: Vec<bool>,
    /// The hot items in increasing order.
    hot_items: Vec<u64>,
    /// Mixed into hashes to make initial tax rates, discounts, prices and stock levels depend
    /// on the seed.
    salt: u64,
}

impl Tpcc {
    /// A generator for `config` whose data and stream are fixed by `seed`.
    pub fn new(config: TpccConfig, seed: u64) -> Result<Self, ConfigError> {
        let (nodes, warehouses) = (config.nodes, config.warehouses);
        if nodes == 0 {
            return Err(ConfigError::new("nodes", 0, "at least 1"));
        }
        if warehouses == 0 || warehouses % nodes != 0 {
            let expected = format!("a positive multiple of the {nodes} nodes (every node holds whole warehouses)");
            return Err(ConfigError::new("warehouses", warehouses, expected));
        }
        if !(MIN_LINES..=MAX_LINES).contains(&config.max_lines) {
            return Err(ConfigError::new("max_lines", config.max_lines, format!("{MIN_LINES}..={MAX_LINES}")));
        }
        if config.items < MAX_LINES {
            return Err(ConfigError::new("items", config.items, format!("at least {MAX_LINES} (an order's lines)")));
        }
        if config.customers_per_district == 0 {
            return Err(ConfigError::new("customers_per_district", 0, "at least 1"));
        }
        if config.hot_items > config.items {
            return Err(ConfigError::new("hot_items", config.hot_items, format!("at most items = {}", config.items)));
        }
        for (field, p) in [
            ("remote_item_prob", config.remote_item_prob),
            ("remote_customer_prob", config.remote_customer_prob),
            ("new_order_share", config.new_order_share),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(ConfigError::new(field, p, "a probability in 0..=1"));
            }
        }
        let mut constants = rng::derive(seed, "tpcc/constants");
        let c_item = constants.random_range(0..=8191);
        let c_customer = constants.random_range(0..=1023);
        let weights = item_weights(8191, config.items, c_item);
        let mut by_weight: Vec<u64> = (0..config.items).collect();
        // Most ordered first; ties by item id, so the choice is a function of the seed.
        by_weight.sort_by_key(|&i| (std::cmp::Reverse(weights[i as usize]), i));
        let mut hot_items: Vec<u64> = by_weight[..config.hot_items as usize].to_vec();
        hot_items.sort_unstable();
        let mut hot_item = vec![false; config.items as usize];
        for &i in &hot_items {
            hot_item[i as usize] = true;
        }
        let model = Model {
            w: u64::from(warehouses),
            config,
            c_item,
            c_customer,
            hot_item,
            hot_items,
            salt: rng::derive(seed, "tpcc/data").random(),
        };
        Ok(Self { model, rng: rng::derive(seed, "tpcc") })
    }

    /// The configuration.
    pub fn config(&self) -> &TpccConfig {
        &self.model.config
    }

    /// The items whose stock is hot, in increasing order.
    pub fn hot_items(&self) -> &[u64] {
        &self.model.hot_items
    }
}

impl Model {
    fn is_hot(&self, key: TupleKey) -> bool {
        match key.table {
            W_YTD => key.row < self.w,
            D_YTD | D_NEXT_O_ID => key.row < self.w * DISTRICTS,
            S_QUANTITY | S_YTD => self.hot_item.get((key.row / self.w) as usize).copied().unwrap_or(false),
            _ => false,
        }
    }

    fn nodes(&self) -> u64 {
        u64::from(self.config.nodes)
    }

    fn district(&self, w: u64, d: u64) -> u64 {
        d * self.w + w
    }

    fn customer(&self, w: u64, d: u64, c: u64) -> u64 {
        (c * DISTRICTS + d) * self.w + w
    }

    fn stock(&self, w: u64, item: u64) -> u64 {
        item * self.w + w
    }

    /// A uniform warehouse other than `w`.
    fn other_warehouse(&self, rng: &mut SeededRng, w: u64) -> u64 {
        let other = rng.random_range(0..self.w - 1);
        if other >= w {
            other + 1
        } else {
            other
        }
    }

    /// A uniform value in `lo..=hi` fixed by the seed and `(table, id)`.
    fn hashed(&self, table: u16, id: u64, lo: i64, hi: i64) -> i64 {
        let hash = splitmix64(splitmix64(self.salt ^ u64::from(table)) ^ id);
        lo + (hash % (hi - lo + 1) as u64) as i64
    }

    /// A transaction from `home`, drawn from `rng`.
    fn generate(&self, rng: &mut SeededRng, home: NodeId) -> GeneratedTxn {
        let nodes = self.nodes();
        let w = u64::from(home) + nodes * rng.random_range(0..self.w / nodes);
        let d = rng.random_range(0..DISTRICTS);
        let kind = if rng.random_bool(self.config.new_order_share) { Kind::NewOrder } else { Kind::Payment };
        let (ops, inserts) = match kind {
            Kind::NewOrder => self.new_order(rng, home, w, d),
            Kind::Payment => self.payment(rng, w, d),
        };
        let hot = ops.iter().filter(|op| self.is_hot(op.key)).count();
        let class = match hot {
            0 => TxnClass::Cold,
            h if h == ops.len() => TxnClass::Hot,
            _ => TxnClass::Warm,
        };
        let p = Partitioning::round_robin(self.config.nodes);
        let distributed = ops.iter().any(|op| p.node_of(op.key) != home);
        let name = match kind {
            Kind::NewOrder => "NewOrder",
            Kind::Payment => "Payment",
        };
        GeneratedTxn { txn: Txn::new(ops), class, inserts, distributed, home, kind: name }
    }

    fn new_order(&self, rng: &mut SeededRng, home: NodeId, w: u64, d: u64) -> (Vec<Op>, Vec<Insert>) {
        let c = nurand(rng, 1023, self.config.customers_per_district, self.c_customer);
        let lines = rng.random_range(MIN_LINES..=self.config.max_lines);
        let mut items: Vec<u64> = Vec::with_capacity(lines as usize);
        while (items.len() as u64) < lines {
            let item = nurand(rng, 8191, self.config.items, self.c_item);
            if !items.contains(&item) {
                items.push(item);
            }
        }
        const ORDER_ID_OP: usize = 2;
        let mut ops = vec![
            Op::read(TupleKey::new(W_TAX, w)),
            Op::read(TupleKey::new(D_TAX, self.district(w, d))),
            Op::new(TupleKey::new(D_NEXT_O_ID, self.district(w, d)), OpKind::Add, 1),
            Op::read(TupleKey::new(C_DISCOUNT, self.customer(w, d, c))),
        ];
        let mut inserts = Vec::with_capacity(2 + items.len());
        let order_row =
            InsertRow::FromOutput { op: ORDER_ID_OP, base: self.district(w, d), stride: DISTRICTS * self.w };
        inserts.push(Insert { table: ORDER, row: order_row, value: lines as i64 });
        inserts.push(Insert { table: NEW_ORDER, row: order_row, value: c as i64 });
        for (line, &item) in items.iter().enumerate() {
            let supplier = if self.w > 1 && rng.random_bool(self.config.remote_item_prob) {
                self.other_warehouse(rng, w)
            } else {
                w
            };
            let quantity = rng.random_range(1..=10);
            ops.push(Op::read(TupleKey::new(I_PRICE, item * self.nodes() + u64::from(home))));
            ops.push(Op::new(TupleKey::new(S_QUANTITY, self.stock(supplier, item)), OpKind::Restock, quantity));
            ops.push(Op::new(TupleKey::new(S_YTD, self.stock(supplier, item)), OpKind::Add, quantity));
            let base = (d * MAX_LINES + line as u64) * self.w + w;
            let row = InsertRow::FromOutput { op: ORDER_ID_OP, base, stride: DISTRICTS * MAX_LINES * self.w };
            inserts.push(Insert { table: ORDER_LINE, row, value: item as i64 });
        }
        (ops, inserts)
    }

    fn payment(&self, rng: &mut SeededRng, w: u64, d: u64) -> (Vec<Op>, Vec<Insert>) {
        let (cw, cd) = if self.w > 1 && rng.random_bool(self.config.remote_customer_prob) {
            (self.other_warehouse(rng, w), rng.random_range(0..DISTRICTS))
        } else {
            (w, d)
        };
        let c = nurand(rng, 1023, self.config.customers_per_district, self.c_customer);
        let amount = rng.random_range(1..=5_000);
        let customer = self.customer(cw, cd, c);
        let ops = vec![
            Op::new(TupleKey::new(W_YTD, w), OpKind::Add, amount),
            Op::new(TupleKey::new(D_YTD, self.district(w, d)), OpKind::Add, amount),
            Op::new(TupleKey::new(C_BALANCE, customer), OpKind::Add, -amount),
            Op::new(TupleKey::new(C_YTD_PAYMENT, customer), OpKind::Add, amount),
        ];
        let history = Insert { table: HISTORY, row: InsertRow::Sequence { base: w, stride: self.w }, value: amount };
        (ops, vec![history])
    }

    /// Checks TPC-C's consistency conditions (clause 3.3.2) that NewOrder and Payment can
    /// break, on `db`, a snapshot of the whole database after running `committed` (each
    /// committed transaction with its outputs) from the initial values:
    ///
    /// 1. `W_YTD = Σ D_YTD` over the warehouse's districts;
    /// 2. and 3. a district's orders and new-orders are exactly ids `FIRST_ORDER_ID ..
    ///    D_NEXT_O_ID` (no gap, none twice), so `D_NEXT_O_ID − 1` is the largest;
    /// 6. every order has as many order lines as its line count;
    /// 8. and 9. `W_YTD` and `D_YTD` grew by exactly the warehouse's (district's) payments
    ///    in HISTORY;
    ///
    /// plus what the committed list pins down: as many orders and history rows as committed
    /// NewOrders and Payments, and the stock's year-to-date quantities grew by exactly the
    /// committed order lines' quantities.
    fn check_consistency(&self, db: &SerialStore, committed: &[(&GeneratedTxn, &[i64])]) -> Result<(), String> {
        let w_count = self.w;
        let mut table: BTreeMap<u16, Vec<(u64, i64)>> = BTreeMap::new();
        for (key, value) in db.iter() {
            table.entry(key.table).or_default().push((key.row, value));
        }
        let rows = |t: u16| table.get(&t).map(Vec::as_slice).unwrap_or(&[]);
        let value = |t: u16, row: u64| db.get(TupleKey::new(t, row));
        // Payments: history rows of warehouse w are n·W + w; the history does not record the
        // district, so district YTDs are checked against W_YTD and the committed Payments.
        let mut paid_w = vec![0i64; w_count as usize];
        for &(row, amount) in rows(HISTORY) {
            paid_w[(row % w_count) as usize] += amount;
        }
        let mut paid_d: BTreeMap<u64, i64> = BTreeMap::new();
        for op in committed.iter().flat_map(|(g, _)| &g.txn.ops).filter(|op| op.key.table == D_YTD) {
            *paid_d.entry(op.key.row).or_default() += op.data;
        }
        for w in 0..w_count {
            let ytd = value(W_YTD, w);
            let districts: i64 = (0..DISTRICTS).map(|d| value(D_YTD, self.district(w, d))).sum();
            if ytd != districts {
                return Err(format!("warehouse {w}: W_YTD {ytd} != sum of D_YTD {districts} (condition 1)"));
            }
            if ytd != INITIAL_W_YTD + paid_w[w as usize] {
                let paid = paid_w[w as usize];
                return Err(format!("warehouse {w}: W_YTD {ytd} != {INITIAL_W_YTD} + history {paid} (condition 8)"));
            }
            for d in 0..DISTRICTS {
                let row = self.district(w, d);
                let (ytd, paid) = (value(D_YTD, row), paid_d.get(&row).copied().unwrap_or(0));
                if ytd != INITIAL_D_YTD + paid {
                    return Err(format!(
                        "warehouse {w} district {d}: D_YTD {ytd} != {INITIAL_D_YTD} + committed payments {paid} (condition 9)"
                    ));
                }
            }
        }
        // Orders by district, with their ids; order rows are (o·10 + d)·W + w.
        let order_ids = |t: u16| {
            let mut ids: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
            for &(row, _) in rows(t) {
                ids.entry(row % (DISTRICTS * w_count)).or_default().push(row / (DISTRICTS * w_count));
            }
            ids
        };
        let (orders, new_orders) = (order_ids(ORDER), order_ids(NEW_ORDER));
        for w in 0..w_count {
            for d in 0..DISTRICTS {
                let row = self.district(w, d);
                let next = value(D_NEXT_O_ID, row);
                let expected: Vec<u64> = (FIRST_ORDER_ID as u64..next.max(FIRST_ORDER_ID) as u64).collect();
                for (name, ids) in [("ORDER", &orders), ("NEW-ORDER", &new_orders)] {
                    let got = ids.get(&row).map(Vec::as_slice).unwrap_or(&[]);
                    if got != expected.as_slice() {
                        return Err(format!(
                            "warehouse {w} district {d}: D_NEXT_O_ID is {next} but {name} holds ids {} (conditions 2, 3)",
                            summarize(got)
                        ));
                    }
                }
            }
        }
        // Order lines: ((o·10 + d)·15 + l)·W + w, counted per order.
        let mut lines: BTreeMap<u64, i64> = BTreeMap::new();
        for &(row, _) in rows(ORDER_LINE) {
            let (w, rest) = (row % w_count, row / w_count);
            *lines.entry((rest / MAX_LINES) * w_count + w).or_default() += 1;
        }
        for &(row, count) in rows(ORDER) {
            let got = lines.remove(&row).unwrap_or(0);
            if got != count {
                return Err(format!("order row {row}: {got} order lines for a line count of {count} (condition 6)"));
            }
        }
        if let Some((row, n)) = lines.into_iter().next() {
            return Err(format!("{n} order lines of order row {row}, which does not exist (condition 6)"));
        }
        // What the committed transactions pin down.
        let count = |kind: &str| committed.iter().filter(|(g, _)| g.kind == kind).count();
        for (t, name, kind) in [(ORDER, "ORDER", "NewOrder"), (HISTORY, "HISTORY", "Payment")] {
            if rows(t).len() != count(kind) {
                return Err(format!("{} {name} rows for {} committed {kind} transactions", rows(t).len(), count(kind)));
            }
        }
        let ordered: i64 =
            committed.iter().flat_map(|(g, _)| &g.txn.ops).filter(|op| op.key.table == S_YTD).map(|op| op.data).sum();
        let stock_ytd: i64 = rows(S_YTD).iter().map(|&(_, v)| v).sum();
        if stock_ytd != ordered {
            return Err(format!("S_YTD sums to {stock_ytd} but committed order lines ordered {ordered}"));
        }
        Ok(())
    }
}

/// A short rendering of a sorted id list: its length, first and last ids, and the first gap.
fn summarize(ids: &[u64]) -> String {
    match (ids.first(), ids.last()) {
        (Some(first), Some(last)) => {
            let gap = ids.windows(2).find(|w| w[1] != w[0] + 1).map(|w| format!(", first gap after {}", w[0]));
            format!("{} ids {first}..={last}{}", ids.len(), gap.unwrap_or_default())
        }
        _ => "none".into(),
    }
}

impl Workload for Tpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::round_robin(self.model.config.nodes)
    }

    fn tables(&self) -> Vec<(u16, u64)> {
        let m = &self.model;
        let customers = m.w * DISTRICTS * m.config.customers_per_district;
        let stock = m.w * m.config.items;
        vec![
            (W_YTD, m.w),
            (W_TAX, m.w),
            (D_YTD, m.w * DISTRICTS),
            (D_TAX, m.w * DISTRICTS),
            (D_NEXT_O_ID, m.w * DISTRICTS),
            (C_BALANCE, customers),
            (C_YTD_PAYMENT, customers),
            (C_DISCOUNT, customers),
            (I_PRICE, m.config.items * m.nodes()),
            (S_QUANTITY, stock),
            (S_YTD, stock),
            (ORDER, 0),
            (NEW_ORDER, 0),
            (ORDER_LINE, 0),
            (HISTORY, 0),
        ]
    }

    fn initial_value(&self, key: TupleKey) -> i64 {
        let m = &self.model;
        match key.table {
            W_YTD => INITIAL_W_YTD,
            D_YTD => INITIAL_D_YTD,
            D_NEXT_O_ID => FIRST_ORDER_ID,
            W_TAX | D_TAX => m.hashed(key.table, key.row, 0, 2_000),
            C_BALANCE => -10,
            C_YTD_PAYMENT => 10,
            C_DISCOUNT => m.hashed(key.table, key.row, 0, 5_000),
            // Every replica of an item has the item's price.
            I_PRICE => m.hashed(key.table, key.row / m.nodes(), 1, 100),
            S_QUANTITY => m.hashed(key.table, key.row, 10, 100),
            _ => 0,
        }
    }

    fn hot_tuples(&self) -> Vec<TupleKey> {
        let w = self.model.w;
        let mut hot: Vec<TupleKey> = (0..w).map(|row| TupleKey::new(W_YTD, row)).collect();
        for table in [D_YTD, D_NEXT_O_ID] {
            hot.extend((0..w * DISTRICTS).map(|row| TupleKey::new(table, row)));
        }
        for table in [S_QUANTITY, S_YTD] {
            let rows = self.model.hot_items.iter().flat_map(|&i| (0..w).map(move |wh| i * w + wh));
            hot.extend(rows.map(|row| TupleKey::new(table, row)));
        }
        hot
    }

    fn is_hot(&self, key: TupleKey) -> bool {
        self.model.is_hot(key)
    }

    fn next_txn(&mut self, home: NodeId) -> GeneratedTxn {
        assert!(home < self.model.config.nodes, "home {home} is not a node");
        self.model.generate(&mut self.rng, home)
    }

    fn hot_sample(&self, n: usize, seed: u64) -> Vec<Txn> {
        let mut rng = rng::derive(seed, "tpcc/hot_sample");
        let homes = (0..self.model.config.nodes).cycle().take(n);
        homes
            .map(|home| {
                let g = self.model.generate(&mut rng, home);
                Txn::new(g.txn.ops.into_iter().filter(|op| self.model.is_hot(op.key)).collect())
            })
            .collect()
    }

    fn with_stream(&self, stream_seed: u64) -> Box<dyn Workload> {
        Box::new(Self { model: self.model.clone(), rng: rng::derive(stream_seed, "tpcc") })
    }

    fn check_invariants(&self, db: &SerialStore, committed: &[(&GeneratedTxn, &[i64])]) -> Result<(), String> {
        self.model.check_consistency(db, committed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_well_formed, stream};
    use proptest::prelude::*;

    fn small(nodes: u16, warehouses: u16) -> TpccConfig {
        TpccConfig { nodes, warehouses, items: 500, customers_per_district: 30, hot_items: 8, ..TpccConfig::default() }
    }

    /// Runs `n` transactions serially from the initial database, applying inserts as a node
    /// does, and returns the database with the committed list.
    fn serial_run(workload: &mut Tpcc, n: usize) -> (SerialStore, Vec<(GeneratedTxn, Vec<i64>)>) {
        let mut db = SerialStore::default();
        for (table, rows) in workload.tables() {
            for row in 0..rows {
                let key = TupleKey::new(table, row);
                db.set(key, workload.initial_value(key));
            }
        }
        let mut sequence = vec![0u64; usize::from(workload.model.config.nodes)];
        let mut committed = Vec::new();
        for g in stream(workload, n) {
            let outputs = g.txn.execute_serial(&mut db);
            for insert in &g.inserts {
                let key = insert.key(&outputs, sequence[usize::from(g.home)]).expect("a key");
                if matches!(insert.row, InsertRow::Sequence { .. }) {
                    sequence[usize::from(g.home)] += 1;
                }
                assert_eq!(db.get(key), 0, "{key:?} inserted twice");
                db.set(key, insert.value);
            }
            committed.push((g, outputs));
        }
        (db, committed)
    }

    fn as_refs(committed: &[(GeneratedTxn, Vec<i64>)]) -> Vec<(&GeneratedTxn, &[i64])> {
        committed.iter().map(|(g, o)| (g, o.as_slice())).collect()
    }

    #[test]
    fn nurand_weights_count_every_pair_of_draws_once() {
        for (a, n) in [(255, 1000), (1023, 3000), (8191, 100_000), (7, 5), (1023, 30)] {
            let weights = item_weights(a, n, 17 % n);
            assert_eq!(weights.iter().sum::<u64>(), (a + 1) * n, "NURand({a}, 1, {n})");
        }
        // Against brute force on a small case.
        let (a, n, c) = (15, 40, 7);
        let mut brute = vec![0u64; n as usize];
        for r1 in 0..=a {
            for r2 in 1..=n {
                brute[(((r1 | r2) + c) % n) as usize] += 1;
            }
        }
        assert_eq!(item_weights(a, n, c), brute);
    }

    #[test]
    fn the_hot_items_are_the_most_likely_nurand_draws() {
        let t = Tpcc::new(TpccConfig::default(), 3).unwrap();
        let mut rng = rng::derive(1, "test");
        let draws = 400_000;
        let hot_lines =
            (0..draws).filter(|_| t.model.hot_item[nurand(&mut rng, 8191, 100_000, t.model.c_item) as usize]).count();
        // 16 of 100,000 items: uniform would give 0.016%; NURand's top items get ~2.5%.
        let share = hot_lines as f64 / draws as f64;
        assert!(share > 0.02, "hot items drew {share:.4} of the lines");
    }

    #[test]
    fn every_row_of_a_warehouse_lives_on_its_node() {
        let mut t =
            Tpcc::new(TpccConfig { remote_item_prob: 0.0, remote_customer_prob: 0.0, ..small(4, 8) }, 5).unwrap();
        let p = t.partitioning();
        for g in stream(&mut t, 400) {
            assert!(!g.distributed);
            let w = g.txn.ops[0].key.row % 8;
            assert_eq!(w % 4, u64::from(g.home));
            for (i, insert) in g.inserts.iter().enumerate() {
                let key = insert.key(&[0, 0, 3001, 0], 7).unwrap();
                assert_eq!(p.node_of(key), g.home, "insert {i} of {g:?}");
            }
        }
    }

    #[test]
    fn transactions_are_warm_and_their_hot_part_fits_one_switch_packet() {
        let mut t = Tpcc::new(TpccConfig::default(), 9).unwrap();
        let txns = stream(&mut t, 2_000);
        for g in &txns {
            assert_eq!(g.class, TxnClass::Warm, "{g:?}");
            assert_well_formed(&t, g);
            let hot = g.txn.ops.iter().filter(|op| t.is_hot(op.key)).count();
            assert!(hot <= 1 + 2 * MAX_LINES as usize, "{hot} hot operations");
        }
        let new_orders = txns.iter().filter(|g| g.kind == "NewOrder").count() as f64 / txns.len() as f64;
        assert!((new_orders - 0.5).abs() < 0.05, "NewOrder share {new_orders}");
        let sample = t.hot_sample(200, 1);
        assert!(sample.iter().all(|txn| !txn.ops.is_empty() && txn.ops.iter().all(|op| t.is_hot(op.key))));
    }

    #[test]
    fn remote_probabilities_shape_the_distributed_share() {
        let cfg = TpccConfig { remote_item_prob: 0.0, remote_customer_prob: 1.0, ..small(8, 8) };
        let mut t = Tpcc::new(cfg, 2).unwrap();
        for g in stream(&mut t, 500) {
            assert_eq!(g.distributed, g.kind == "Payment", "{g:?}");
        }
    }

    #[test]
    fn the_prototype_orders_5_to_10_lines_each_remote_at_20_percent() {
        let config = TpccConfig::prototype(8);
        assert_eq!(config.hot_items, 51_200);
        let mut t = Tpcc::new(config, 4).unwrap();
        let txns = stream(&mut t, 8_000);
        let (mut lines, mut remote_lines, mut payments, mut remote_payments) = (0, 0, 0, 0);
        for g in &txns {
            assert_eq!(g.class, TxnClass::Warm, "{g:?}");
            let home_w = g.txn.ops[0].key.row % 8;
            if g.kind == "NewOrder" {
                // W_TAX, D_TAX, D_NEXT_O_ID, C_DISCOUNT, then I_PRICE, S_QUANTITY, S_YTD per line.
                let n = (g.txn.ops.len() - 4) / 3;
                assert!((5..=10).contains(&n), "{n} lines");
                lines += n;
                let stock = g.txn.ops.iter().filter(|op| op.key.table == S_QUANTITY);
                remote_lines += stock.filter(|op| op.key.row % 8 != home_w).count();
            } else {
                payments += 1;
                let customer = g.txn.ops.iter().find(|op| op.key.table == C_BALANCE).unwrap();
                remote_payments += usize::from(customer.key.row % 8 != home_w);
            }
        }
        let new_orders = 1.0 - payments as f64 / txns.len() as f64;
        assert!((new_orders - 0.51).abs() < 0.02, "NewOrder share {new_orders}");
        let per_line = remote_lines as f64 / lines as f64;
        let per_payment = remote_payments as f64 / payments as f64;
        assert!((per_line - 0.2).abs() < 0.01, "remote share of lines {per_line}");
        assert!((per_payment - 0.2).abs() < 0.02, "remote share of payments {per_payment}");
    }

    #[test]
    fn bad_configs_name_the_field() {
        let bad = |config: TpccConfig| Tpcc::new(config, 0).unwrap_err().field;
        assert_eq!(bad(TpccConfig { max_lines: 4, ..TpccConfig::default() }), "max_lines");
        assert_eq!(bad(TpccConfig { max_lines: 16, ..TpccConfig::default() }), "max_lines");
        let d = TpccConfig::default;
        assert_eq!(bad(TpccConfig { warehouses: 12, ..d() }), "warehouses");
        assert_eq!(bad(TpccConfig { warehouses: 0, ..d() }), "warehouses");
        assert_eq!(bad(TpccConfig { nodes: 0, ..d() }), "nodes");
        assert_eq!(bad(TpccConfig { items: 10, ..d() }), "items");
        assert_eq!(bad(TpccConfig { hot_items: 200_000, ..d() }), "hot_items");
        assert_eq!(bad(TpccConfig { remote_item_prob: 1.5, ..d() }), "remote_item_prob");
    }

    #[test]
    fn consistency_check_catches_a_lost_payment_and_a_skipped_order_id() {
        let mut t = Tpcc::new(small(2, 4), 4).unwrap();
        let (db, committed) = serial_run(&mut t, 300);
        t.check_invariants(&db, &as_refs(&committed)).unwrap();
        let mut lost_payment = db.clone();
        let w_ytd = TupleKey::new(W_YTD, 1);
        lost_payment.set(w_ytd, db.get(w_ytd) - 5);
        assert!(t.check_invariants(&lost_payment, &as_refs(&committed)).unwrap_err().contains("condition 1"));
        let mut skipped = db.clone();
        let next = TupleKey::new(D_NEXT_O_ID, 3);
        skipped.set(next, db.get(next) + 1);
        assert!(t.check_invariants(&skipped, &as_refs(&committed)).unwrap_err().contains("conditions 2, 3"));
        assert!(t.check_invariants(&db, &as_refs(&committed[1..])).is_err(), "a committed txn unaccounted for");
    }

    proptest! {
        #[test]
        fn serial_execution_keeps_tpcc_consistent(seed: u64, nodes in 1u16..4, per_node in 1u16..3, remote in 0.0..=1.0) {
            let cfg = TpccConfig { remote_item_prob: remote, remote_customer_prob: remote, ..small(nodes, nodes * per_node) };
            let mut t = Tpcc::new(cfg, seed).unwrap();
            let (db, committed) = serial_run(&mut t, 150);
            for (g, _) in &committed {
                assert_well_formed(&t, g);
            }
            prop_assert_eq!(t.check_invariants(&db, &as_refs(&committed)), Ok(()));
        }
    }
}
