//! Per-tuple costs of NetAccel's host-side code paths, for the simulator's CPU model
//! (`src/calibration.rs`, CALIBRATION.md): the deparse operator (frame + tuple encoded into a
//! datagram), the receive operator (a drained group decoded and appended), the control
//! plane's work per overflow tuple, and a motion's encode + decode per row.
//!
//! `deparse_10k` allocates a datagram per tuple (as the simulator's sends are); `deparse_encode_10k`
//! encodes into one buffer allocated once, as a DPDK deparser fills its mbuf ring, and is the
//! figure the model uses.
//!
//! `cargo bench -p pisadb-netaccel --bench costs`; each case handles 10,000 tuples per
//! iteration, so the time per iteration divided by 10,000 is the per-tuple cost.

use criterion::{criterion_group, criterion_main, Criterion};
use pisadb_netaccel::offline::tuple_datagram;
use pisadb_netaccel::overflow::Overflow;
use pisadb_netaccel::wire::{Motion, Msg, Op, Stream};
use pisadb_wire::Frame;
use std::hint::black_box;

const N: u32 = 10_000;

fn costs(c: &mut Criterion) {
    let tuples: Vec<Msg> = (0..N).map(|i| Msg::new(Op::Inner, 0, 1 + i % 4000, 1 + i % 97, 1 + i % 50)).collect();
    let datagrams: Vec<Vec<u8>> = tuples.iter().map(tuple_datagram).collect();
    let mut g = c.benchmark_group("netaccel_costs");
    g.bench_function("deparse_10k", |b| {
        b.iter(|| tuples.iter().map(|m| tuple_datagram(black_box(m))).collect::<Vec<_>>())
    });
    // The deparse operator as a DPDK deparser runs it: every tuple encoded (frame and payload)
    // into a buffer allocated once (its mbuf ring), no allocation per datagram.
    g.bench_function("deparse_encode_10k", |b| {
        let mut ring: Vec<u8> =
            Vec::with_capacity(N as usize * (pisadb_wire::FRAME_BYTES + pisadb_netaccel::wire::MSG_BYTES));
        b.iter(|| {
            ring.clear();
            for m in &tuples {
                Frame { kind: pisadb_netaccel::wire::KIND, src: 1, dst: pisadb_wire::SWITCH_ID }.encode(&mut ring);
                black_box(m).encode(&mut ring);
            }
            ring.len()
        })
    });
    g.bench_function("receive_10k", |b| {
        b.iter(|| {
            let mut rows: Vec<u32> = Vec::with_capacity(3 * N as usize);
            for d in &datagrams {
                let (_, payload) = Frame::decode(black_box(d)).expect("frame");
                let m = Msg::decode(payload).expect("msg");
                rows.extend([m.a, m.b, m.c]);
            }
            rows
        })
    });
    let overflow: Vec<Msg> = tuples.iter().enumerate().map(|(i, m)| Msg { flags: [1, 2, 3][i % 3], ..*m }).collect();
    g.bench_function("control_plane_10k", |b| {
        b.iter(|| {
            let mut cp = Overflow::default();
            for d in &overflow {
                cp.take(black_box(d));
            }
            cp.groups().len()
        })
    });
    let values: Vec<u32> = (0..3 * N).collect();
    g.bench_function("motion_rows_10k", |b| {
        b.iter(|| {
            let mut n = 0;
            for m in Motion::batches(Stream::CpGroups, 1, 3, black_box(&values)) {
                let mut bytes = Vec::new();
                m.encode(&mut bytes);
                n += Motion::decode(&bytes).expect("motion").values.len();
            }
            n
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(std::time::Duration::from_secs(3)).warm_up_time(std::time::Duration::from_secs(1));
    targets = costs
}
criterion_main!(benches);
