//! The latch cost of the P4DB prototype's row locks, on this machine.
//!
//! The prototype's NO_WAIT row (`src/table/concurrency_control/no_wait.hpp`) guards its lock
//! state — the lock type and an owner count — with a `std::mutex` latch, taken on every lock
//! and every unlock, shared or exclusive, local or on behalf of a remote request. When several
//! threads of a node touch the same row (a hot tuple: 50 per node in YCSB), they contend on
//! that one latch word. This benchmark reproduces that: `N` threads each repeatedly take a
//! shared lock on one row and release it again (two latch acquisitions per round, as the
//! prototype's lock and unlock), all on the same `Mutex` + owner count.
//!
//! The figure is the time one thread spends per latch acquisition while the others contend
//! (a thread's elapsed time over its acquisitions; the slowest thread of a sample), which is
//! what the simulator charges a core for one acquisition (`CpuCosts::latch_ns`, see
//! `systems/p4db/src/node/calibration.rs` and `CALIBRATION.md`). On a 2-core VM only two
//! threads run at once: 1 thread is the uncontended latch, 2 threads the contended one this
//! machine can show; 4 and 8 threads oversubscribe the cores, so they measure the OS scheduler
//! (a preempted holder) more than the cache line, and are reported for that reason only.
//!
//! Run: `cargo bench -p pisadb-p4db --bench latch`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// How a row is locked, as the prototype's `lock_type`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LockType {
    /// Nobody holds it.
    Free,
    /// Shared by `owners` readers.
    Shared,
    /// Held for writing.
    Exclusive,
}

/// The lock state of one row behind its latch: the prototype's `lock_type` + `owner_cnt`.
struct RowLock {
    /// How it is locked.
    lock_type: LockType,
    /// How many transactions hold it.
    owners: u32,
}

/// One shared lock on `row` and its release: two latch acquisitions. Returns whether the lock
/// was granted (always, here: every thread only reads).
fn lock_and_unlock_shared(row: &Mutex<RowLock>) -> bool {
    let granted = {
        let mut r = row.lock().expect("latch");
        let compatible = r.lock_type != LockType::Exclusive;
        if compatible {
            r.owners += 1;
            r.lock_type = LockType::Shared;
        }
        compatible
    };
    if granted {
        let mut r = row.lock().expect("latch");
        r.owners -= 1;
        if r.owners == 0 {
            r.lock_type = LockType::Free;
        }
    }
    granted
}

/// `threads` threads each do `rounds` lock/unlock rounds on one row; the slowest thread's time.
#[allow(clippy::disallowed_methods)] // a benchmark times the real code with the wall clock
fn contend(threads: usize, rounds: u64) -> Duration {
    let row = Mutex::new(RowLock { lock_type: LockType::Free, owners: 0 });
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let t0 = Instant::now();
                    for _ in 0..rounds {
                        black_box(lock_and_unlock_shared(black_box(&row)));
                    }
                    t0.elapsed()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).max().unwrap_or_default()
    })
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("latch");
    group.sample_size(20).measurement_time(Duration::from_secs(4));
    for threads in [1usize, 2, 4, 8] {
        // Criterion's iteration = one latch acquisition of one thread (half a round).
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, &threads| {
            b.iter_custom(|iters| contend(threads, iters.div_ceil(2).max(1)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
