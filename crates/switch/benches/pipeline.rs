//! Throughput of the pipeline model on 8-instruction YCSB-style switch transactions.
//!
//! - `datagram_to_reply`: the whole path a simulated packet takes: frame decode, plan check,
//!   entry slot, the pass (lock check + 8 register actions), GID, reply encode.
//! - `pass_only`: just the 8 stateful actions of one pass through the register file.
//!
//! Run: `cargo bench -p pisadb-switch --bench pipeline`. Criterion prints time per element;
//! passes per second = 1e9 / (ns per pass).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pisadb_core::{Op, TupleKey, Txn};
use pisadb_switch::programs::p4db::{action_for, P4dbConfig, P4dbEngine};
use pisadb_switch::registers::{PassContext, RegisterFile};
use pisadb_switch::{Program, Switch, SwitchProfile};
use pisadb_wire::{Frame, Kind, SWITCH_ID};
use rand::{Rng, SeedableRng};

const BATCH: usize = 4096;

fn ycsb_txn(rng: &mut impl Rng, keys: u64) -> Txn {
    // 8 distinct keys, half writes; a key's array is fixed by the layout below.
    let mut rows: Vec<u64> = Vec::new();
    while rows.len() < 8 {
        let r = rng.random_range(0..keys);
        if !rows.contains(&r) {
            rows.push(r);
        }
    }
    Txn::new(
        rows.into_iter()
            .map(
                |r| {
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

fn bench(c: &mut Criterion) {
    let profile = SwitchProfile::tofino1();
    let cfg = P4dbConfig::for_profile(&profile);
    let engine = P4dbEngine::new(cfg.clone());
    let target = cfg.layout_target(&profile);
    // 400 hot keys over 20 arrays; keys r and r + 20k share an array, so most transactions
    // of 8 random keys are single-pass and some need two passes, as YCSB on the switch.
    let keys: Vec<TupleKey> = (0..400).map(|r| TupleKey::new(0, r)).collect();
    let layout = pisadb_layout::random(&keys, &target, 9);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let datagrams: Vec<Vec<u8>> = (0..BATCH as u64)
        .map(|i| {
            let (pkt, _) = engine.packet_for(&ycsb_txn(&mut rng, 400), &layout, i).unwrap();
            let mut bytes = Vec::new();
            Frame { kind: Kind::P4dbTxn, src: 0, dst: SWITCH_ID }.encode(&mut bytes);
            pkt.encode(&mut bytes);
            bytes
        })
        .collect();

    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("datagram_to_reply", |b| {
        b.iter_batched(
            || {
                let mut s = Switch::new(profile.clone(), engine.clone()).unwrap();
                s.attach(0);
                s
            },
            |mut switch| {
                let mut t = 0;
                for bytes in &datagrams {
                    t += 10;
                    switch.handle_datagram(t, 0, bytes);
                    while switch.poll_timeout().is_some_and(|at| at <= t) {
                        switch.handle_timeout(t);
                    }
                    while switch.poll_transmit().is_some() {}
                }
                switch
            },
            BatchSize::LargeInput,
        )
    });

    let spec = engine.spec();
    let mut registers = RegisterFile::new(&spec);
    let instrs: Vec<[(u8, u8, u32); 8]> = (0..BATCH)
        .map(|_| {
            let mut regs: Vec<u8> = (1..=20).collect();
            regs.sort_by_key(|_| rng.random::<u32>());
            let mut pass = [(0, 0, 0); 8];
            let mut chosen: Vec<u8> = regs[..8].to_vec();
            chosen.sort_unstable();
            for (slot, r) in pass.iter_mut().zip(chosen) {
                let kind = if rng.random_bool(0.5) { pisadb_core::OpKind::Write } else { pisadb_core::OpKind::Read };
                *slot = (r, action_for(kind), rng.random_range(0..32_768));
            }
            pass
        })
        .collect();
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
