//! What a SwitchTx client runs: YCSB-T (§5.1) or TPC-C NewOrder + Payment, and the draws of
//! each thread's transactions.
//!
//! [`Workload`] is the setting; [`Draws`] is a server's generator state: one seeded stream per
//! worker thread (so a thread's transactions do not depend on what the others drew), the
//! shared YCSB popularity over the records ([`Popularity`]: a Zipf rank, or a uniform one at
//! θ = 0), and with TPC-C one `pisadb_workload::tpcc` stream per thread over one database. A
//! record is its popularity rank, not scrambled: SwitchTx's keys are spread over servers by
//! the partitions a transaction draws, not by the record's place in the key space. A drawn
//! transaction is a list of (key, written) and whether it is a blind write.

use crate::keys::key_of;
use pisadb_workload::Popularity;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// The YCSB-T workload (§5.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Records per server table.
    pub records: u64,
    /// Columns per record (each column is a key).
    pub columns: u64,
    /// Zipf θ of the record.
    pub theta: f64,
    /// Keys per transaction.
    pub keys: u8,
    /// Servers a transaction spans (keys are dealt round-robin over that many distinct ones).
    pub partitions: u8,
    /// Chance that a key is written (read-modify-write); at least one key always is, except
    /// in read-only transactions.
    pub write_fraction: f64,
    /// Chance that a transaction is read-only (version copy, then validate and read).
    #[serde(default)]
    pub read_only_fraction: f64,
    /// Chance that a transaction is a blind write (every key written with a constant, nothing
    /// read: no execute and no validate phase).
    #[serde(default)]
    pub blind_fraction: f64,
    /// TPC-C instead of YCSB-T when non-zero: warehouses per server (NewOrder + Payment 50/50
    /// from `pisadb_workload::tpcc`; the YCSB fields above are then unused).
    #[serde(default)]
    pub tpcc_warehouses: u16,
    /// TPC-C: the chance that a NewOrder line comes from another warehouse (the paper: 1.0).
    #[serde(default = "all_remote")]
    pub remote_items: f64,
}

fn all_remote() -> f64 {
    1.0
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            records: 100_000,
            columns: 24,
            theta: 0.8,
            keys: 8,
            partitions: 8,
            write_fraction: 0.5,
            read_only_fraction: 0.0,
            blind_fraction: 0.0,
            tpcc_warehouses: 0,
            remote_items: 1.0,
        }
    }
}

/// The TPC-C generators of a server's threads (each its own stream over one database).
struct TpccStreams(Vec<Box<dyn pisadb_workload::Workload>>);

impl std::fmt::Debug for TpccStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TpccStreams({} threads)", self.0.len())
    }
}

/// A transaction as drawn: its keys (key, written) and whether it is a blind write.
pub type Drawn = (Vec<(u64, bool)>, bool);

/// One server's transaction generators (see the module documentation).
#[derive(Debug)]
pub struct Draws {
    /// The workload.
    workload: Workload,
    /// The server drawing (TPC-C's home warehouse's server).
    server: u8,
    /// Servers in the rack.
    servers: u8,
    /// Each thread's stream.
    rngs: Vec<ChaCha8Rng>,
    /// The record's popularity.
    popularity: Popularity,
    /// TPC-C's streams, if TPC-C.
    tpcc: Option<TpccStreams>,
}

impl Draws {
    /// The generators of server `server` of `servers` with `threads` threads; `workload`
    /// must have been checked (the server's settings check it).
    pub fn new(workload: &Workload, server: u8, servers: u8, threads: u16, seed: u64) -> Self {
        let w = workload;
        // Checked for YCSB-T; under TPC-C the fields are unused (any value stands).
        let popularity =
            Popularity::new(w.records, w.theta).unwrap_or_else(|_| Popularity::new(1, 0.0).expect("valid"));
        let stream = |t: u16| pisadb_core::rng::splitmix64(seed ^ (u64::from(server) << 32) ^ u64::from(t));
        let rngs = (0..threads).map(|t| rand::SeedableRng::seed_from_u64(stream(t))).collect();
        let tpcc = (w.tpcc_warehouses > 0).then(|| {
            let nodes = u16::from(servers);
            let config = pisadb_workload::tpcc::TpccConfig {
                nodes,
                warehouses: w.tpcc_warehouses * nodes,
                remote_item_prob: w.remote_items,
                ..pisadb_workload::tpcc::TpccConfig::default()
            };
            // `check` made sure the configuration is valid.
            let db = pisadb_workload::tpcc::Tpcc::new(config, seed).expect("a valid TPC-C configuration");
            TpccStreams((0..threads).map(|t| pisadb_workload::Workload::with_stream(&db, stream(t))).collect())
        });
        Draws { workload: workload.clone(), server, servers, rngs, popularity, tpcc }
    }

    /// Thread `thread`'s next transaction.
    pub fn draw(&mut self, thread: u16) -> Drawn {
        if let Some(tpcc) = self.tpcc.as_mut() {
            return (draw_tpcc(tpcc.0[usize::from(thread)].as_mut(), self.server), false);
        }
        let w = &self.workload;
        let rng = &mut self.rngs[usize::from(thread)];
        let mut servers: Vec<u8> = (0..self.servers).collect();
        for i in 0..usize::from(w.partitions) {
            let j = rng.random_range(i..servers.len());
            servers.swap(i, j);
        }
        let mut keys: Vec<(u64, bool)> = Vec::with_capacity(usize::from(w.keys));
        while keys.len() < usize::from(w.keys) {
            let server = servers[keys.len() % usize::from(w.partitions)];
            let record = self.popularity.rank(rng);
            let key = key_of(server, record, rng.random_range(0..w.columns), w.columns);
            if keys.iter().all(|&(k, _)| k != key) {
                keys.push((key, rng.random_bool(w.write_fraction)));
            }
        }
        let read_only = w.read_only_fraction > 0.0 && rng.random_bool(w.read_only_fraction);
        let blind = !read_only && w.blind_fraction > 0.0 && rng.random_bool(w.blind_fraction);
        if read_only {
            keys.iter_mut().for_each(|k| k.1 = false);
        } else if blind {
            keys.iter_mut().for_each(|k| k.1 = true);
        } else if keys.iter().all(|&(_, wr)| !wr) {
            keys[0].1 = true;
        }
        (keys, blind)
    }
}

/// A TPC-C transaction's keys: each distinct tuple once, written if any operation writes it,
/// on the server its warehouse lives on (`table << 32 | row` within the server). Inserts are
/// left out (fresh rows: they conflict with nothing) and values follow this crate's
/// read-modify-write rule, not TPC-C's arithmetic: the conflicts are TPC-C's, the invariants
/// are not checked.
fn draw_tpcc(gen: &mut dyn pisadb_workload::Workload, home: u8) -> Vec<(u64, bool)> {
    let parts = gen.partitioning();
    let txn = gen.next_txn(u16::from(home));
    let mut keys: Vec<(u64, bool)> = Vec::with_capacity(txn.txn.ops.len());
    for op in &txn.txn.ops {
        let server = parts.node_of(op.key) as u8;
        let key = (u64::from(server) << 40) | (u64::from(op.key.table) << 32) | (op.key.row & 0xffff_ffff);
        let writes = op.kind != pisadb_core::OpKind::Read;
        match keys.iter_mut().find(|k| k.0 == key) {
            Some(k) => k.1 |= writes,
            None => keys.push((key, writes)),
        }
    }
    // NewOrder touches at most 4 + 15 × 3 = 49 distinct tuples.
    keys.truncate(crate::wire::MAX_KEYS);
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_draws_replay_and_write_at_least_one_key() {
        let w = Workload { keys: 4, partitions: 2, write_fraction: 0.0, ..Workload::default() };
        let mut a = Draws::new(&w, 1, 8, 2, 9);
        let mut b = Draws::new(&w, 1, 8, 2, 9);
        let (keys, blind) = a.draw(1);
        assert_eq!((keys.clone(), blind), b.draw(1), "a seed replays");
        assert_eq!(keys.len(), 4);
        assert!(keys.iter().any(|k| k.1), "a read-write transaction writes something");
        let servers: std::collections::BTreeSet<u8> = keys.iter().map(|k| crate::keys::shard_of(k.0)).collect();
        assert_eq!(servers.len(), 2, "dealt over two partitions");
    }
}
