//! One event scheduler for every driver: the simulator, the switch's traffic manager, a node
//! process's timers and the load generator.
//!
//! Events are ordered by (time, sequence number), the sequence number being the order in which
//! they were scheduled. Ties in time therefore break the same way on every run, which is what
//! makes a seed reproduce a whole history (and its trace hash). The payload is never compared,
//! so it needs no `Ord` and two events with equal payloads never collapse.

use crate::Nanos;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Events of type `E` waiting for their time, earliest first, ties in scheduling order.
#[derive(Debug)]
pub struct Scheduler<E> {
    /// Pending events; `Reverse` turns the max-heap into a min-heap on (time, sequence).
    heap: BinaryHeap<Reverse<Entry<E>>>,
    /// The sequence number the next scheduled event gets.
    next_seq: u64,
}

#[derive(Debug)]
struct Entry<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<E> Default for Scheduler<E> {
    fn default() -> Self {
        Scheduler { heap: BinaryHeap::new(), next_seq: 0 }
    }
}

impl<E> Scheduler<E> {
    /// An empty scheduler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at `at`, after every event already scheduled for the same time.
    pub fn push(&mut self, at: Nanos, event: E) {
        self.next_seq += 1;
        self.heap.push(Reverse(Entry { at, seq: self.next_seq, event }));
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// The earliest event and its time, left in place.
    pub fn peek(&self) -> Option<(Nanos, &E)> {
        self.heap.peek().map(|Reverse(e)| (e.at, &e.event))
    }

    /// The earliest event with its time.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|Reverse(e)| (e.at, e.event))
    }

    /// The earliest event if it is due by `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, E)> {
        if self.peek_time()? <= now {
            self.pop()
        } else {
            None
        }
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Drops every waiting event (the sequence keeps counting, so order stays total).
    pub fn clear(&mut self) {
        self.heap.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_time_first_and_ties_in_scheduling_order() {
        let mut s = Scheduler::new();
        s.push(20, "late");
        s.push(10, "first at 10");
        s.push(10, "second at 10");
        s.push(5, "earliest");
        let order: Vec<_> = std::iter::from_fn(|| s.pop()).collect();
        assert_eq!(order, vec![(5, "earliest"), (10, "first at 10"), (10, "second at 10"), (20, "late")]);
    }

    #[test]
    fn pop_due_leaves_future_events() {
        let mut s = Scheduler::new();
        s.push(10, 1);
        s.push(30, 2);
        assert_eq!(s.pop_due(20), Some((10, 1)));
        assert_eq!(s.pop_due(20), None);
        assert_eq!(s.len(), 1);
        assert_eq!(s.peek_time(), Some(30));
    }

    #[test]
    fn equal_payloads_are_kept_apart() {
        let mut s = Scheduler::new();
        s.push(1, ());
        s.push(1, ());
        assert_eq!(s.len(), 2);
        s.clear();
        assert!(s.is_empty());
    }
}
