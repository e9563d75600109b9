//! Calibration of TransKV's host CPU costs (`src/costs.rs`), recorded in `CALIBRATION.md`.
//! Run: `cargo bench -p pisadb-transkv --bench costs`.
//!
//! - `fjall_get`, `fjall_put`: a real embedded LSM store (fjall 2, LevelDB's kind, as the
//!   paper's storage nodes ran LevelDB) on disk in a temporary directory, 200K keys of 16
//!   bytes with 48-byte values loaded; a point read of a random loaded key, and an insert
//!   (journal buffered, no fsync per write, as LevelDB's default). These stand for
//!   `STORE_TUPLE_NS`: what the storage node's store costs per key.
//! - `store_read`, `store_write`: the storage node's shim handles a one-op `Request` (decode,
//!   timestamp check in the engine's TSO, in-memory versions, encode the reply): the shim's
//!   own cost per datagram (`STORE_MESSAGE_NS`; its in-memory map stands in for the store,
//!   whose cost is charged separately).
//! - `controller_coordinate`: the controller takes a `Coordinate` and sends `Prepare`
//!   (`CONTROLLER_MESSAGE_NS`).
//! - `client_commit`: a client takes a `Committed` and starts its next transaction
//!   (`CLIENT_MESSAGE_NS`).

use criterion::{criterion_group, criterion_main, Criterion};
use pisadb_host::{Host, HostOutbox};
use pisadb_transkv::client::{ClientConfig, ClientHost, Path};
use pisadb_transkv::control::Controller;
use pisadb_transkv::layout::Hierarchy;
use pisadb_transkv::store::StorageNode;
use pisadb_transkv::wire::{value_of, Message, Op, Status};
use std::hint::black_box;
use std::sync::Arc;

const LOADED: u64 = 200_000;

fn key_bytes(k: u64) -> [u8; 16] {
    u128::from(k).to_be_bytes()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("transkv");

    let dir = std::env::temp_dir().join(format!("transkv-costs-{}", std::process::id()));
    let keyspace = fjall::Config::new(&dir).open().expect("open fjall");
    let items = keyspace.open_partition("items", fjall::PartitionCreateOptions::default()).expect("partition");
    for k in 0..LOADED {
        items.insert(key_bytes(k), value_of(u128::from(k), 0)).expect("load");
    }
    let mut x: u64 = 1;
    let mut next_key = move || {
        x = pisadb_core::rng::splitmix64(x);
        x % LOADED
    };
    group.bench_function("fjall_get", |b| b.iter(|| black_box(items.get(key_bytes(next_key())).expect("get"))));
    let mut version = 0u64;
    group.bench_function("fjall_put", |b| {
        b.iter(|| {
            version += 1;
            let k = version % LOADED;
            items.insert(key_bytes(k), value_of(u128::from(k), version)).expect("put");
        })
    });
    drop(items);
    drop(keyspace);
    let _ = std::fs::remove_dir_all(&dir);

    let mut node = StorageNode::new(3);
    let mut ts = 0u32;
    let mut request = |node: &mut StorageNode, write: bool| {
        ts += 4;
        let key = u128::from(ts % 1000);
        let op = if write { Op::write(key, value_of(key, u64::from(ts))) } else { Op::read(key) };
        let msg = Message { ts, status: Status::Request, client: 16, seq: 1, ops: vec![op] };
        let bytes = msg.datagram(16, 3);
        let mut out = HostOutbox::<StorageNode>::default();
        node.handle_datagram(0, &bytes, &mut out);
        black_box(out.sends.len())
    };
    group.bench_function("store_read", |b| b.iter(|| request(&mut node, false)));
    group.bench_function("store_write", |b| b.iter(|| request(&mut node, true)));

    let hierarchy = Arc::new(Hierarchy::new(1_000_000, 0).expect("hierarchy"));
    let mut controller = Controller::new(20, Arc::clone(&hierarchy));
    let mut cts = 0u32;
    group.bench_function("controller_coordinate", |b| {
        b.iter(|| {
            cts += 4;
            let msg = Message { ts: cts, status: Status::Coordinate, client: 16, seq: 1, ops: vec![Op::read(7)] };
            let mut out = HostOutbox::<Controller>::default();
            controller.handle_datagram(0, &msg.datagram(16, 20), &mut out);
            black_box(out.sends.len())
        })
    });

    let cfg = ClientConfig {
        address: 16,
        index: 0,
        path: Path::Coordinator,
        outstanding: 1,
        txns: u32::MAX,
        ops_per_txn: 1,
        write_ratio: 0.0,
        zipf: 0.99,
        seed: 1,
        resolve_ns: 1_000_000,
        hierarchy,
        hot_shift: (0, 0),
    };
    let mut client = ClientHost::new(cfg).expect("client");
    let mut out = HostOutbox::<ClientHost>::default();
    client.start(0, &mut out);
    let mut pending = Message::open(&out.sends[0].bytes).expect("request").1;
    let mut now = 0;
    group.bench_function("client_commit", |b| {
        b.iter(|| {
            now += 1_000;
            let mut done = pending.clone();
            done.status = Status::Committed;
            let mut out = HostOutbox::<ClientHost>::default();
            client.handle_datagram(now, &done.datagram(20, 16), &mut out);
            pending = Message::open(&out.sends[0].bytes).expect("next").1;
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
