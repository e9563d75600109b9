//! The one thread pool: independent jobs run side by side with one progress bar, their
//! results returned in the jobs' order.
//!
//! Sweeps, reproductions and fuzz campaigns are all lists of independent seeded simulations,
//! so running them on several threads changes nothing but the wall time. Each thread takes the
//! next job from a shared counter (a slow job does not hold up the others' threads) and puts
//! the result in the job's slot; the caller gets the slots in order, whatever order they
//! finished in. After each job the bar advances and shows what `done` says of it (the point
//! just measured, the failures so far); a caller that prints a line per job prints it from
//! `done` through [`Progress::println`], above the bar.

use pisadb_report::Progress;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs `run` on every item on `threads` threads (at least 1, at most one per item), advancing
/// `progress` after each with the text `done` gives; returns the results in the items' order.
pub fn run_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    progress: &Progress,
    run: impl Fn(&T) -> R + Sync,
    done: impl Fn(&T, &R) -> String + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let result = run(item);
                progress.inc(&done(item, &result));
                slots.lock().expect("no panics while holding")[i] = Some(result);
            });
        }
    });
    slots.into_inner().expect("threads joined").into_iter().map(|r| r.expect("every item ran")).collect()
}

/// The threads to use when none are asked for: one per core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_result_comes_back_in_the_items_order_on_several_threads() {
        let items: Vec<u64> = (0..50).collect();
        let progress = Progress::new(items.len() as u64, "test");
        // Later items finish sooner, so threads complete them out of order.
        let results = run_parallel(
            &items,
            4,
            &progress,
            |&i| {
                std::thread::sleep(std::time::Duration::from_micros(50 - i));
                i * i
            },
            |i, r| format!("{i}: {r}"),
        );
        assert_eq!(results, items.iter().map(|i| i * i).collect::<Vec<_>>());
        assert!(run_parallel(&[] as &[u64], 4, &progress, |&i| i, |_, _| String::new()).is_empty());
    }
}
