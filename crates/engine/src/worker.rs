//! Workers: the lanes that run a node's transactions, their attempt ids, retries and backoff.
//!
//! A node has a fixed set of workers (its cores), and each worker has one or more *lanes*: a
//! lane runs one transaction at a time, closed loop, from its first attempt until it commits.
//! A worker with one lane is P4DB's thread that runs one transaction after another; several
//! lanes per worker are a multi-programming level, where a core keeps a few
//! transactions in flight and works on whichever has news.
//!
//! - [`Workers`] holds each lane's attempt counter and current attempt (of the system's own type
//!   `A`), and hands out attempt ids in the layout of [`crate::id`]: a reply carrying an id
//!   finds its lane without any table, and an id is never reused (the counter only moves
//!   forward; the incarnation moves on after a crash).
//! - [`Job`] is what stays the same across a transaction's attempts: the transaction, its
//!   timestamp (fixed at the first attempt, so a retried transaction grows older and cannot
//!   starve under WAIT_DIE or timestamp ordering), when it first started (latency counts from
//!   there) and how many attempts it took.
//! - [`Backoff`] draws the random wait before a retry from a seeded generator, so that a seed
//!   reproduces a run. One generator per node (or per worker), drawn in abort order, is the
//!   determinism contract: the draws depend on nothing but the order of aborts. Two schedules:
//!   *uniform* (a wait in `0..=max`, P4DB's), and *doubling* (a wait that doubles with each
//!   failure in a row up to a cap, jittered in its upper half: for a system whose aborts are
//!   timeouts, where retrying at once adds load exactly when latency nears the timeout).
//!
//! A system that numbers its attempts in its own id layout (a switch program's slots) uses the
//! lanes' counters alone ([`Workers::next_attempt`]); after a restart that rebuilds lanes from
//! a log, [`Workers::skip_to`] moves a counter past every logged attempt, so no attempt number
//! is reused.

use crate::id::{IdError, Lanes, Slot, Timestamp, TxnId};
use pisadb_core::rng::SeededRng;
use pisadb_core::Nanos;
use rand::Rng;

/// What stays the same across the attempts of one transaction (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job<T> {
    /// The transaction.
    pub txn: T,
    /// Its timestamp, from its first attempt.
    pub ts: Timestamp,
    /// When its first attempt started.
    pub first_start_ns: Nanos,
    /// Attempts so far, the current one included.
    pub attempts: u32,
}

impl<T> Job<T> {
    /// A transaction whose first attempt starts at `now_ns` with timestamp `ts`.
    pub fn new(txn: T, ts: Timestamp, now_ns: Nanos) -> Self {
        Job { txn, ts, first_start_ns: now_ns, attempts: 1 }
    }

    /// The same transaction, for its next attempt.
    pub fn retry(self) -> Self {
        Job { attempts: self.attempts + 1, ..self }
    }

    /// Time since the first attempt started.
    pub fn age_ns(&self, now_ns: Nanos) -> Nanos {
        now_ns.saturating_sub(self.first_start_ns)
    }
}

/// The random wait before a retry (see the module documentation).
#[derive(Clone, Debug)]
pub struct Backoff {
    /// The node's generator.
    rng: SeededRng,
    /// How waits grow.
    schedule: Schedule,
}

/// How a [`Backoff`]'s waits are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Schedule {
    /// Uniformly in `0..=max_ns`, whatever came before.
    Uniform {
        /// The longest wait.
        max_ns: Nanos,
    },
    /// `base_ns` doubled per earlier failure in a row, at most `cap` × `base_ns`, times a
    /// jitter factor uniform in `[1/2, 1)`.
    Doubling {
        /// The ceiling after one failure.
        base_ns: Nanos,
        /// The most the ceiling grows to, in multiples of `base_ns`.
        cap: u64,
    },
}

impl Backoff {
    /// Waits drawn from `rng`, uniformly in `0..=max_ns`.
    pub fn new(rng: SeededRng, max_ns: Nanos) -> Self {
        Backoff { rng, schedule: Schedule::Uniform { max_ns } }
    }

    /// Waits that double with each failure in a row ([`Backoff::draw_after_ns`]): after `n`
    /// failures the ceiling is `base_ns` doubled `n - 1` times, at most `cap` × `base_ns`, and
    /// the wait is drawn uniformly from the ceiling's upper half, so the lanes that failed
    /// together do not retry together.
    pub fn doubling(rng: SeededRng, base_ns: Nanos, cap: u64) -> Self {
        Backoff { rng, schedule: Schedule::Doubling { base_ns, cap } }
    }

    /// The next wait (of a uniform backoff; a doubling one waits as after one failure).
    pub fn draw_ns(&mut self) -> Nanos {
        self.draw_after_ns(1)
    }

    /// The next wait after `failures_in_a_row` failures (this one included); a uniform
    /// backoff ignores the count.
    pub fn draw_after_ns(&mut self, failures_in_a_row: u32) -> Nanos {
        match self.schedule {
            Schedule::Uniform { max_ns } => self.rng.random_range(0..=max_ns),
            Schedule::Doubling { base_ns, cap } => {
                let doublings = failures_in_a_row.saturating_sub(1);
                let ceiling = base_ns.saturating_mul(1u64.checked_shl(doublings).unwrap_or(u64::MAX));
                let ceiling = ceiling.min(cap.saturating_mul(base_ns)).max(1);
                ceiling / 2 + self.rng.random_range(0..ceiling.div_ceil(2))
            }
        }
    }
}

/// One lane: its attempt counter and current attempt.
#[derive(Clone, Debug)]
struct Lane<A> {
    /// The last attempt number handed out.
    attempt: u32,
    /// The attempt running, if any.
    current: Option<A>,
}

/// The worker lanes of one node incarnation (see the module documentation).
#[derive(Clone, Debug)]
pub struct Workers<A> {
    /// The node.
    node: u16,
    /// Its incarnation.
    incarnation: u16,
    /// Workers.
    workers: u16,
    /// Lanes per worker.
    lanes: Lanes,
    /// Every lane, worker-major: lane `l` of worker `w` is at `w * lanes + l`.
    slots: Vec<Lane<A>>,
}

impl<A> Workers<A> {
    /// `workers` workers of `lanes` lanes each on `node` in `incarnation`, all idle; refused if
    /// the id layout cannot name them.
    pub fn new(node: u16, incarnation: u16, workers: u16, lanes: Lanes) -> Result<Self, IdError> {
        if workers == 0 || workers > TxnId::WORKERS {
            return Err(IdError::Workers { workers });
        }
        Slot::new(node, incarnation, workers - 1, lanes.get() - 1)?;
        let slots =
            (0..usize::from(workers) * usize::from(lanes.get())).map(|_| Lane { attempt: 0, current: None }).collect();
        Ok(Workers { node, incarnation, workers, lanes, slots })
    }

    /// Workers.
    pub fn workers(&self) -> u16 {
        self.workers
    }

    /// Lanes per worker.
    pub fn lanes(&self) -> Lanes {
        self.lanes
    }

    /// The slot of `lane` of `worker`.
    pub fn slot(&self, worker: u16, lane: u16) -> Slot {
        Slot::new(self.node, self.incarnation, worker, lane).expect("checked when the workers were made")
    }

    /// The id of the next attempt of `lane` of `worker` (the lane's counter moves on, wrapping).
    pub fn next_id(&mut self, worker: u16, lane: u16) -> TxnId {
        let slot = self.slot(worker, lane);
        let l = self.lane_mut(worker, lane);
        l.attempt = l.attempt.wrapping_add(1);
        slot.attempt(l.attempt)
    }

    /// The next attempt number of `lane` of `worker` (the lane's counter moves on, wrapping),
    /// for a system that builds its ids in its own layout.
    pub fn next_attempt(&mut self, worker: u16, lane: u16) -> u32 {
        let l = self.lane_mut(worker, lane);
        l.attempt = l.attempt.wrapping_add(1);
        l.attempt
    }

    /// Moves the counter of `lane` of `worker` to at least `attempt` (a restart replaying its
    /// log: the next attempt is numbered above every logged one). Lanes outside the workers
    /// are ignored (a log from another configuration).
    pub fn skip_to(&mut self, worker: u16, lane: u16, attempt: u32) {
        if worker < self.workers && lane < self.lanes.get() {
            let l = self.lane_mut(worker, lane);
            l.attempt = l.attempt.max(attempt);
        }
    }

    /// The worker and lane an id of this node names, if it names one of them (any
    /// incarnation: whether the attempt is still current is the caller's question).
    pub fn lane_of(&self, id: TxnId) -> Option<(u16, u16)> {
        let here = id.node() == self.node && id.worker() < self.workers && id.lane() < self.lanes.get();
        here.then(|| (id.worker(), id.lane()))
    }

    /// The attempt `lane` of `worker` runs.
    pub fn current(&self, worker: u16, lane: u16) -> Option<&A> {
        self.slots[self.index(worker, lane)].current.as_ref()
    }

    /// The attempt `lane` of `worker` runs, to change it.
    pub fn current_mut(&mut self, worker: u16, lane: u16) -> Option<&mut A> {
        self.lane_mut(worker, lane).current.as_mut()
    }

    /// Makes `attempt` the one `lane` of `worker` runs.
    pub fn run(&mut self, worker: u16, lane: u16, attempt: A) {
        self.lane_mut(worker, lane).current = Some(attempt);
    }

    /// Takes the attempt `lane` of `worker` runs, leaving the lane idle.
    pub fn take(&mut self, worker: u16, lane: u16) -> Option<A> {
        self.lane_mut(worker, lane).current.take()
    }

    /// Whether no lane runs anything.
    pub fn all_idle(&self) -> bool {
        self.slots.iter().all(|l| l.current.is_none())
    }

    /// Every running attempt with its worker and lane, in worker then lane order.
    pub fn running(&self) -> impl Iterator<Item = (u16, u16, &A)> + '_ {
        let lanes = usize::from(self.lanes.get());
        self.slots.iter().enumerate().filter_map(move |(i, l)| {
            let a = l.current.as_ref()?;
            Some(((i / lanes) as u16, (i % lanes) as u16, a))
        })
    }

    fn index(&self, worker: u16, lane: u16) -> usize {
        debug_assert!(worker < self.workers && lane < self.lanes.get(), "worker {worker} lane {lane}");
        usize::from(worker) * usize::from(self.lanes.get()) + usize::from(lane)
    }

    fn lane_mut(&mut self, worker: u16, lane: u16) -> &mut Lane<A> {
        let i = self.index(worker, lane);
        &mut self.slots[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_core::rng;
    use std::collections::BTreeSet;

    #[test]
    fn attempt_ids_are_distinct_across_lanes_and_attempts_and_name_their_lane() {
        let mut w: Workers<()> = Workers::new(3, 2, 4, Lanes::new(3).unwrap()).unwrap();
        let mut ids = BTreeSet::new();
        for worker in 0..4 {
            for lane in 0..3 {
                for _ in 0..5 {
                    let id = w.next_id(worker, lane);
                    assert_eq!(w.lane_of(id), Some((worker, lane)));
                    assert_eq!((id.node(), id.incarnation()), (3, 2));
                    assert!(ids.insert(id));
                }
            }
        }
        assert_eq!(ids.len(), 60);
        let elsewhere = Slot::new(4, 2, 0, 0).unwrap().attempt(1);
        assert_eq!(w.lane_of(elsewhere), None);
    }

    #[test]
    fn one_lane_ids_are_the_classic_worker_ids() {
        let mut w: Workers<()> = Workers::new(1, 0, 2, Lanes::ONE).unwrap();
        w.next_id(1, 0);
        assert_eq!(w.next_id(1, 0).bits(), (1 << 48) | (1 << 32) | 2);
    }

    #[test]
    fn lanes_run_and_finish_their_own_attempts() {
        let mut w: Workers<&str> = Workers::new(0, 0, 2, Lanes::new(2).unwrap()).unwrap();
        assert!(w.all_idle());
        w.run(1, 1, "b");
        w.run(0, 1, "a");
        assert_eq!(w.running().collect::<Vec<_>>(), vec![(0, 1, &"a"), (1, 1, &"b")]);
        assert_eq!(w.take(0, 1), Some("a"));
        assert_eq!(w.current(1, 1), Some(&"b"));
        assert!(!w.all_idle());
    }

    #[test]
    fn workers_the_layout_cannot_name_are_refused() {
        assert_eq!(Workers::<()>::new(0, 0, 65, Lanes::ONE).unwrap_err(), IdError::Workers { workers: 65 });
        assert_eq!(Workers::<()>::new(0, 0, 0, Lanes::ONE).unwrap_err(), IdError::Workers { workers: 0 });
        assert_eq!(Workers::<()>::new(1024, 0, 1, Lanes::ONE).unwrap_err(), IdError::Node { node: 1024 });
    }

    #[test]
    fn a_retry_keeps_the_timestamp_and_first_start() {
        let job = Job::new("t", 42, 1_000).retry().retry();
        assert_eq!((job.ts, job.first_start_ns, job.attempts), (42, 1_000, 3));
        assert_eq!(job.age_ns(1_500), 500);
    }

    #[test]
    fn attempt_numbers_count_on_and_skip_past_a_logged_one() {
        let mut w: Workers<()> = Workers::new(0, 0, 2, Lanes::new(2).unwrap()).unwrap();
        assert_eq!((w.next_attempt(1, 1), w.next_attempt(1, 1), w.next_attempt(0, 1)), (1, 2, 1));
        w.skip_to(1, 1, 7);
        w.skip_to(1, 1, 3);
        w.skip_to(5, 0, 99);
        assert_eq!(w.next_attempt(1, 1), 8, "past the logged attempt, never back");
        assert_eq!(w.next_id(1, 1).attempt(), 9, "ids count on the same counter");
    }

    #[test]
    fn a_doubling_backoff_doubles_per_failure_in_a_row_within_its_jitter_and_caps() {
        let t: Nanos = 20_000_000;
        let mut b = Backoff::doubling(rng::derive(7, "lane"), t, 8);
        for k in 1..=8u32 {
            let ceiling = (t * (1 << (k - 1))).min(8 * t);
            for _ in 0..200 {
                let w = b.draw_after_ns(k);
                assert!((ceiling / 2..ceiling).contains(&w), "{k} in a row: {w} not in [{}, {ceiling})", ceiling / 2);
            }
        }
        assert!(b.draw_after_ns(u32::MAX) < 8 * t, "capped however many");
        let draws = |seed| {
            let mut b = Backoff::doubling(rng::derive(seed, "lane"), t, 8);
            (1..6).map(|k| b.draw_after_ns(k)).collect::<Vec<_>>()
        };
        assert_eq!(draws(3), draws(3), "a seed replays its waits");
        assert_ne!(draws(3), draws(4), "lanes seeded apart draw apart");
    }

    #[test]
    fn backoff_is_seeded_and_bounded() {
        let draws = |seed| {
            let mut b = Backoff::new(rng::derive(seed, "node/0"), 1_000);
            (0..100).map(|_| b.draw_ns()).collect::<Vec<_>>()
        };
        assert_eq!(draws(1), draws(1));
        assert_ne!(draws(1), draws(2));
        assert!(draws(3).iter().all(|&d| d <= 1_000));
        assert_eq!(Backoff::new(rng::derive(1, "x"), 0).draw_ns(), 0);
    }
}
