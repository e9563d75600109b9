//! Throughput of the pipeline model on 8-instruction YCSB-style switch transactions over a
//! YCSB hot set (400 keys: 50 per node on 8 nodes) on Tofino 1's P4DB data arrays.
//!
//! - `pass_only`: the pipeline model itself: one pass = 8 stateful actions through the
//!   register file with the per-pass rule checks, plus the GID stamp.
//! - `single_pass_datagram`: the whole path of a single-pass transaction in the simulator:
//!   frame decode, plan check, entry slot, the pass (lock check + 8 actions), reply encode.
//! - `ycsb_mixed`: 8 distinct random hot keys per transaction under a random layout, so many
//!   transactions need several passes, wait for the pipeline locks and recirculate; elements
//!   are *passes* (first and recirculated), counted by the switch.
//!
//! Run: `cargo bench -p pisadb-switch --bench pipeline`. Criterion prints elements per second.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pisadb_core::{Op, TupleKey, Txn};
use pisadb_p4db::programs::p4db::{action_for, P4dbConfig, P4dbEngine};
use pisadb_p4db_layout::Layout;
use pisadb_switch::registers::{PassContext, RegisterFile};
use pisadb_switch::{Program, Switch, SwitchProfile};
use pisadb_wire::{Frame, SWITCH_ID};
use rand::{Rng, SeedableRng};

const BATCH: usize = 4096;
const HOT_KEYS: u64 = 400;

/// An 8-operation transaction, half writes, on `rows`.
fn txn_on(rng: &mut impl Rng, rows: &[u64]) -> Txn {
    Txn::new(
        rows.iter()
            .map(
                |&r| {
                    if rng.random_bool(0.5) {
                        Op::write(TupleKey::new(0, r), 7)
                    } else {
                        Op::read(TupleKey::new(0, r))
                    }
                },
            )
            .collect(),
    )
}

/// 8 distinct random hot keys.
fn random_rows(rng: &mut impl Rng) -> Vec<u64> {
    let mut rows: Vec<u64> = Vec::new();
    while rows.len() < 8 {
        let r = rng.random_range(0..HOT_KEYS);
        if !rows.contains(&r) {
            rows.push(r);
        }
    }
    rows
}

/// 8 hot keys in 8 distinct arrays: a single-pass transaction under `layout`.
fn single_pass_rows(rng: &mut impl Rng, layout: &Layout) -> Vec<u64> {
    let mut rows: Vec<u64> = Vec::new();
    let mut registers: Vec<u8> = Vec::new();
    while rows.len() < 8 {
        let r = rng.random_range(0..HOT_KEYS);
        let register = layout.get(TupleKey::new(0, r)).unwrap().register;
        if !registers.contains(&register) {
            registers.push(register);
            rows.push(r);
        }
    }
    rows
}

fn datagrams(engine: &P4dbEngine, layout: &Layout, txns: impl Iterator<Item = Txn>) -> Vec<Vec<u8>> {
    txns.enumerate()
        .map(|(i, txn)| {
            let (pkt, _) = engine.packet_for(&txn, layout, i as u64).unwrap();
            let mut bytes = Vec::new();
            Frame { kind: pisadb_p4db::wire::TXN_KIND, src: 0, dst: SWITCH_ID }.encode(&mut bytes);
            pkt.encode(&mut bytes);
            bytes
        })
        .collect()
}

/// Feeds `datagrams` one per `gap_ns` and runs the switch until it is idle; returns its passes.
fn run(switch: &mut Switch<P4dbEngine>, datagrams: &[Vec<u8>], gap_ns: u64) -> u64 {
    let mut t = 0;
    for bytes in datagrams {
        t += gap_ns;
        switch.handle_datagram(t, 0, bytes);
        while switch.poll_timeout().is_some_and(|at| at <= t) {
            switch.handle_timeout(t);
        }
        while switch.poll_transmit().is_some() {}
    }
    while let Some(at) = switch.poll_timeout() {
        switch.handle_timeout(at);
        while switch.poll_transmit().is_some() {}
    }
    switch.stats().passes
}

fn bench(c: &mut Criterion) {
    let profile = SwitchProfile::tofino1();
    let cfg = P4dbConfig::for_profile(&profile);
    let engine = P4dbEngine::new(cfg.clone());
    let target = cfg.layout_target(&profile);
    let keys: Vec<TupleKey> = (0..HOT_KEYS).map(|r| TupleKey::new(0, r)).collect();
    let layout = pisadb_p4db_layout::random(&keys, &target, 9);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let new_switch = || {
        let mut s = Switch::new(profile.clone(), engine.clone()).unwrap();
        s.attach(0);
        s
    };

    let mut group = c.benchmark_group("pipeline");
    let single: Vec<Vec<u8>> = {
        let txns: Vec<Txn> = (0..BATCH)
            .map(|_| {
                let rows = single_pass_rows(&mut rng, &layout);
                txn_on(&mut rng, &rows)
            })
            .collect();
        datagrams(&engine, &layout, txns.into_iter())
    };
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("single_pass_datagram", |b| {
        b.iter_batched_ref(new_switch, |switch| run(switch, &single, 1), BatchSize::LargeInput)
    });

    let mixed: Vec<Vec<u8>> = {
        let txns: Vec<Txn> = (0..BATCH)
            .map(|_| {
                let rows = random_rows(&mut rng);
                txn_on(&mut rng, &rows)
            })
            .collect();
        datagrams(&engine, &layout, txns.into_iter())
    };
    // Packets arrive every 10 ns: the rate of 8 nodes x 10 GbE of small packets, roughly.
    let passes = run(&mut new_switch(), &mixed, 10);
    eprintln!("ycsb_mixed: {BATCH} transactions take {passes} passes");
    group.throughput(Throughput::Elements(passes));
    group.bench_function("ycsb_mixed", |b| {
        b.iter_batched_ref(new_switch, |switch| run(switch, &mixed, 10), BatchSize::LargeInput)
    });

    let spec = engine.spec();
    let mut registers = RegisterFile::new(&spec);
    // The same kind of single-pass transactions as above, as (register, action, index) lists.
    let instrs: Vec<[(u8, u8, u32); 8]> = (0..BATCH)
        .map(|_| {
            let mut places: Vec<_> = single_pass_rows(&mut rng, &layout)
                .into_iter()
                .map(|r| layout.get(TupleKey::new(0, r)).unwrap())
                .collect();
            places.sort_by_key(|p| p.stage);
            let mut pass = [(0, 0, 0); 8];
            for (slot, p) in pass.iter_mut().zip(places) {
                let kind = if rng.random_bool(0.5) { pisadb_core::OpKind::Write } else { pisadb_core::OpKind::Read };
                *slot = (p.register, action_for(kind), p.index);
            }
            pass
        })
        .collect();
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("pass_only", |b| {
        let mut gid = 0;
        b.iter(|| {
            let mut sum = 0i64;
            for pass in &instrs {
                let mut ctx = PassContext::new(&mut registers, &mut gid);
                for &(register, action, index) in pass {
                    sum = sum.wrapping_add(ctx.execute(register, action, index, 7, 0).unwrap());
                }
                ctx.stamp_gid();
            }
            sum
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
