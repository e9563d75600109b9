//! Calibration of SwitchTx's server CPU costs from the real handlers.
//!
//! The simulator charges a server, per handler, `handler_ns + item_ns × keys` plus
//! `stack_ns` per datagram received or sent, and `begin_ns` to start a transaction
//! ([`pisadb_switchtx::server::COSTS`]). These benchmarks time the handlers those figures
//! stand for, whole (decode, logic, encode of the answer): `read_1` and `read_8` (a primary
//! serves a read of 1 or 8 keys; their difference over 7 is the per-key cost), `prepare_lock`
//! (a write primary takes a `prepare` of one write and one read and locks), `validate` (a read
//! primary validates one key on the scattered `lock_ok`), `begin` (a client draws a YCSB-T
//! transaction and sends its 8 reads). Run: `cargo bench -p pisadb-switchtx --bench costs`.

use criterion::{criterion_group, criterion_main, Criterion};
use pisadb_host::{Host, HostOutbox};
use pisadb_switchtx::server::{key_of, Mpl, Server, ServerConfig, Workload, COSTS};
use pisadb_switchtx::tree::{Coordination, Layout};
use pisadb_switchtx::wire::{Control, Data, Item, MsgType, FLAG_DOWN};
use pisadb_wire::FRAME_BYTES;
use std::hint::black_box;

fn server() -> Server {
    Server::new(ServerConfig {
        id: 1,
        layout: Layout::paper(),
        threads: 24,
        coord: Coordination::Tree,
        priority: true,
        mpl: Mpl::Static(2),
        workload: Workload::default(),
        seed: 1,
        timeout_ns: 0,
        costs: COSTS,
        eris: false,
        durable: false,
        lease_ns: 0,
    })
}

/// Where a data message's attempt sits in a datagram.
const ATTEMPT_AT: usize = FRAME_BYTES + 5;

fn read(keys: u64) -> Vec<u8> {
    let mut d = Data::new(MsgType::Read, 7, 1, 1, 0);
    d.items = (0..keys).map(|r| Item { key: key_of(1, r, 3, 24), value: 0, version: 0, locked: false }).collect();
    d.datagram(0, 1)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("switchtx");
    let mut s = server();
    for (name, keys) in [("read_1", 1), ("read_8", 8)] {
        let bytes = read(keys);
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut out = HostOutbox::<Server>::default();
                s.handle_datagram(0, black_box(&bytes), &mut out);
                black_box(out)
            })
        });
    }
    let mut prepare = Data::new(MsgType::Prepare, 7, 1, 1, 99);
    prepare.coord = Coordination::Tree as u8;
    (prepare.wp, prepare.wb, prepare.rp) = (0b10, 0b100, 0b11);
    prepare.items = vec![
        Item { key: key_of(1, 5, 1, 24), value: 1, version: 0, locked: false },
        Item { key: key_of(1, 5, 1, 24), value: 0, version: 0, locked: false },
    ];
    prepare.writes = 1;
    let mut bytes = prepare.datagram(0, 1);
    let mut attempt = 1u32;
    g.bench_function("prepare_lock", |b| {
        b.iter(|| {
            attempt += 1;
            bytes[ATTEMPT_AT..ATTEMPT_AT + 4].copy_from_slice(&attempt.to_be_bytes());
            let mut out = HostOutbox::<Server>::default();
            s.handle_datagram(0, black_box(&bytes), &mut out);
            black_box(out)
        })
    });
    // The last prepare holds its lock: validate its read on the scattered lock_ok, repeatedly.
    let mut v = Control::new(MsgType::LockOk, 7, 1, attempt, 99);
    v.flags = FLAG_DOWN;
    v.client = 0;
    let v = v.datagram(0, 1);
    g.bench_function("validate", |b| {
        b.iter(|| {
            let mut out = HostOutbox::<Server>::default();
            s.handle_datagram(0, black_box(&v), &mut out);
            black_box(out)
        })
    });
    let mut s = server();
    g.bench_function("begin", |b| {
        b.iter(|| {
            let mut out = HostOutbox::<Server>::default();
            s.begin_one(0, &mut out);
            black_box(out)
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    // No charts: criterion's plotters backend needs a system font this machine lacks.
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
