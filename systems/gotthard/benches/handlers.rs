//! Calibration of Gotthard's host CPU costs from the hosts' real handlers.
//!
//! The simulator charges the store [`pisadb_gotthard::store::STORE_REQUEST_NS`] per request
//! and a client [`pisadb_gotthard::client::CLIENT_REPLY_NS`] per reply; these benchmarks time
//! the handlers those constants stand for, whole (decode, execute, bookkeeping, encode), and
//! the medians go into `CALIBRATION.md`. Run: `cargo bench -p pisadb-gotthard --bench handlers`.
//!
//! - `store_read`, `store_increment`: the store handles a `[READ(x)]` request, or a
//!   `[VALUE(x, v), WRITE(x, v + 1)]` that commits, each under a new request id (so never a
//!   replay): decode, check, apply, record the version history, encode the reply.
//! - `client_reply`: a client handles the `OK` of its read and starts its next transaction:
//!   decode, refresh its cache, count the commit, draw the next template, encode the request.
//!
//! Each iteration patches the next request id (and values) into prepared bytes: a few byte
//! stores, negligible beside a handler.

use criterion::{criterion_group, criterion_main, Criterion};
use pisadb_gotthard::client::{ClientConfig, ClientHost, HOT_KEY};
use pisadb_gotthard::store::Store;
use pisadb_gotthard::wire::{Message, Op, Status, FLAG_REPLY};
use pisadb_host::{Host, HostOutbox};
use pisadb_wire::FRAME_BYTES;
use std::hint::black_box;

/// Where the request id sits in a datagram.
const REQUEST_AT: usize = FRAME_BYTES + 5;
/// Where the first op's value sits.
const FIRST_VALUE_AT: usize = FRAME_BYTES + 13 + 5;
/// Where the second op's value sits.
const SECOND_VALUE_AT: usize = FIRST_VALUE_AT + 9;

fn patch(bytes: &mut [u8], at: usize, word: [u8; 4]) {
    bytes[at..at + 4].copy_from_slice(&word);
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("gotthard");

    let mut store = Store::new(1);
    let mut read = Message::request(0, 0, vec![Op::read(HOT_KEY)]).datagram(0, 1);
    let mut id = 0u32;
    group.bench_function("store_read", |b| {
        b.iter(|| {
            id += 1;
            patch(&mut read, REQUEST_AT, id.to_be_bytes());
            let mut out = HostOutbox::<Store>::default();
            store.handle_datagram(0, black_box(&read), &mut out);
            black_box(out)
        })
    });

    let mut store = Store::new(1);
    let mut increment = Message::request(1, 0, vec![Op::value(HOT_KEY, 0), Op::write(HOT_KEY, 1)]).datagram(0, 1);
    let (mut id, mut value) = (0u32, 0i32);
    group.bench_function("store_increment", |b| {
        b.iter(|| {
            id += 1;
            patch(&mut increment, REQUEST_AT, id.to_be_bytes());
            patch(&mut increment, FIRST_VALUE_AT, value.to_be_bytes());
            patch(&mut increment, SECOND_VALUE_AT, (value + 1).to_be_bytes());
            value += 1;
            let mut out = HostOutbox::<Store>::default();
            store.handle_datagram(0, black_box(&increment), &mut out);
            black_box(out)
        })
    });

    // One client that only reads, so the next request is always `[READ(x)]` with the next id.
    let cfg = ClientConfig {
        address: 0,
        store: 1,
        clients: 1,
        write_share: 0.0,
        commits_per_client: u32::MAX,
        seed: 1,
        retransmit_ns: u64::MAX / 4,
    };
    let mut client = ClientHost::new(cfg);
    let mut out = HostOutbox::<ClientHost>::default();
    client.start(0, &mut out);
    let ok = |request: u32, ops: Vec<Op>| {
        Message { flags: FLAG_REPLY, client: 0, request, attempt: 0, status: Status::Ok, ops }.datagram(1, 0)
    };
    // The initial write's commit starts the first read (request 2).
    client.handle_datagram(1, &ok(1, vec![Op::updated(HOT_KEY, 0)]), &mut HostOutbox::<ClientHost>::default());
    let mut reply = ok(2, vec![Op::value(HOT_KEY, 0)]);
    let mut id = 1u32;
    group.bench_function("client_reply", |b| {
        b.iter(|| {
            id += 1;
            patch(&mut reply, REQUEST_AT, id.to_be_bytes());
            let mut out = HostOutbox::<ClientHost>::default();
            client.handle_datagram(2, black_box(&reply), &mut out);
            debug_assert_eq!(out.sends.len(), 1, "the next read was sent");
            black_box(out)
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    // No charts: criterion's plotters backend needs a system font this machine lacks.
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
