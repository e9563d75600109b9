//! Calibration of the simulator's CPU cost model from the node's real code paths.
//!
//! Each benchmark times one code path the simulator charges a named cost for
//! ([`pisadb_p4db::node::CpuCosts`]); the medians go into `systems/p4db/src/node/calibration.rs` and
//! `CALIBRATION.md`. Run: `cargo bench -p pisadb-p4db --bench costs`.
//!
//! - `lock_acquire_release`: one exclusive acquire and its release in the lock table, over a
//!   table with many locked tuples (the hot path of 2PL): `lock_ns` = half of it.
//! - `tuple_read_write`: one read and one write of a tuple in storage: `tuple_ns` = half.
//! - `message_encode_decode`: an 8-entry `LockRead` encoded and decoded (a typical request):
//!   `message_ns` = half (one side does one of the two).
//! - `txn_begin`: drawing a YCSB transaction and classifying its keys against the hot-set
//!   index: `txn_begin_ns`.

use criterion::{criterion_group, criterion_main, Criterion};
use pisadb_core::TupleKey;
use pisadb_engine::id::TxnId;
use pisadb_engine::locks::LockTable;
use pisadb_engine::store::{Store, Tuple};
use pisadb_wire::node::{LockMode, NodeMsg, OnConflict};
use pisadb_workload::{Workload, Ycsb, YcsbConfig};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let ycsb = Ycsb::new(YcsbConfig::default(), 1).unwrap();
    let mut group = c.benchmark_group("costs");

    let mut locks = LockTable::default();
    for r in 0..10_000u64 {
        locks.acquire(TupleKey::new(0, r * 7), TxnId::from_bits(r), r, LockMode::Shared, OnConflict::Deny);
    }
    let mut i = 0u64;
    group.bench_function("lock_acquire_release", |b| {
        b.iter(|| {
            i = (i + 1) % 50_000;
            let key = TupleKey::new(0, i * 3 + 1);
            black_box(locks.acquire(key, TxnId::from_bits(1 << 40), 1 << 40, LockMode::Exclusive, OnConflict::Deny));
            black_box(locks.release(key, TxnId::from_bits(1 << 40)));
        })
    });

    let mut store = Store::load(0, &ycsb);
    let mut j = 0u64;
    group.bench_function("tuple_read_write", |b| {
        b.iter(|| {
            j = (j + 8 * 7919) % 1_000_000;
            let key = TupleKey::new(0, j);
            let t = store.get(key).unwrap_or_default();
            black_box(store.set(key, Tuple { value: t.value + 1, version: 9 }));
        })
    });

    let msg = NodeMsg::LockRead {
        txn: 42,
        ts: 7,
        on_conflict: OnConflict::WaitDie,
        entries: (0..8).map(|r| (TupleKey::new(0, r * 8), LockMode::Exclusive)).collect(),
    };
    let mut buf = Vec::with_capacity(256);
    group.bench_function("message_encode_decode", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&msg).encode(&mut buf);
            black_box(NodeMsg::decode(&buf).unwrap())
        })
    });

    let hot = ycsb.hot_tuples();
    let layout = {
        let mut l = pisadb_p4db_layout::Layout::default();
        for (i, &k) in hot.iter().enumerate() {
            l.insert(k, pisadb_p4db_layout::Placement { stage: 1, register: 1, index: i as u32 });
        }
        l
    };
    let mut gen = Ycsb::new(YcsbConfig::default(), 2).unwrap();
    let mut home = 0u16;
    group.bench_function("txn_begin", |b| {
        b.iter(|| {
            home = (home + 1) % 8;
            let t = gen.next_txn(home);
            black_box(t.txn.ops.iter().all(|op| layout.contains(op.key)))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
