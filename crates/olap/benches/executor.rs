//! Per-row costs of the executor's operators, for the simulator's segment CPU model
//! (CALIBRATION.md, `systems/netaccel/src/calibration.rs`).
//!
//! Each benchmark runs one operator over SF 0.1's Q20 data on one segment's share (3 segments)
//! and reports time per call; divided by the rows the operator touched, it is the per-row cost.
//! `cargo bench -p pisadb-olap --bench executor` prints the rows of every case first.

use criterion::{criterion_group, criterion_main, Criterion};
use pisadb_olap::ops::{gather, hash_aggregate, hash_join, redistribute};
use pisadb_olap::q20::{pattern1, pattern2_local};
use pisadb_olap::tpch::{distribute, generate, Q20Params};
use std::hint::black_box;

fn executor(c: &mut Criterion) {
    let data = generate(0.1, &Q20Params::validation()).expect("generates");
    let segs = distribute(&data, 3);
    let part_all = gather(&segs.iter().map(|s| s.part_fp.clone()).collect::<Vec<_>>());
    let seg = &segs[0];
    let joined = hash_join(&part_all, &["p_partkey"], &seg.lineitem_fp, &["l_partkey"], &[]);
    let groups = pattern1(&part_all, &seg.lineitem_fp);
    println!(
        "rows: part_FP {} (build), lineitem_FP on segment 0 {} (probe), joined {}, groups {}, partsupp {}",
        part_all.rows(),
        seg.lineitem_fp.rows(),
        joined.rows(),
        groups.rows(),
        seg.partsupp.rows()
    );
    let mut g = c.benchmark_group("executor");
    g.bench_function("join_probe_lineitem", |b| {
        b.iter(|| hash_join(black_box(&part_all), &["p_partkey"], black_box(&seg.lineitem_fp), &["l_partkey"], &[]))
    });
    g.bench_function("aggregate_joined", |b| {
        b.iter(|| hash_aggregate(black_box(&joined), &["l_partkey", "l_suppkey"], &["l_quantity"]))
    });
    g.bench_function("pattern2_partsupp", |b| b.iter(|| pattern2_local(black_box(&groups), black_box(&seg.partsupp))));
    g.bench_function("redistribute_lineitem", |b| {
        b.iter(|| redistribute(black_box(&seg.lineitem_fp), &["l_partkey", "l_suppkey"], 3))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(std::time::Duration::from_secs(3)).warm_up_time(std::time::Duration::from_secs(1));
    targets = executor
}
criterion_main!(benches);
