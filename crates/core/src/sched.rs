//! One event scheduler for every driver: the simulator, the switch's traffic manager, a node
//! process's timers and the load generator.
//!
//! Events are ordered by (time, sequence number), the sequence number being the order in which
//! they were scheduled. Ties in time therefore break the same way on every run, which is what
//! makes a seed reproduce a whole history (and its trace hash). The payload is never compared,
//! so it needs no `Ord` and two events with equal payloads never collapse.
//!
//! ## Layout
//!
//! The heap holds only small keys, 16 bytes each: the time, and the sequence number and the
//! event's slot packed in one word (sequence above, slot below, so comparing the words
//! compares sequences: they are unique). The events themselves wait in a slab, at the slot
//! their key names, and do not move while the heap sifts (a system's events can be hundreds of
//! bytes: a switch's packet, a host's timer). A slot freed by a pop is reused by the next
//! push, so once the queue has reached its working size a push or a pop allocates nothing.
//!
//! The heap is 4-ary: a node's four children are adjacent, 64 bytes, one cache line, so a pop
//! reads half as many lines as a binary heap's for the same depth, and the tree is half as
//! deep. The order is the keys' (time, sequence) order, so it is the same as the plain heap of
//! whole events this replaced, event for event.

use crate::Nanos;

/// Bits of a key's second word that hold the slot; the sequence number takes the rest.
const SLOT_BITS: u32 = 24;
/// Pending events at most (slots are `SLOT_BITS` wide).
const SLOTS_MAX: usize = 1 << SLOT_BITS;
/// Children per heap node.
const ARITY: usize = 4;

/// Events of type `E` waiting for their time, earliest first, ties in scheduling order.
#[derive(Debug)]
pub struct Scheduler<E> {
    /// Keys of the pending events: a 4-ary min-heap on (time, sequence).
    heap: Vec<Key>,
    /// The events, at the slots their keys name; `None` where a slot is free.
    slab: Vec<Option<E>>,
    /// Free slots of the slab, the most recently freed last (reused first: warm in cache).
    free: Vec<u32>,
    /// The sequence number the next scheduled event gets.
    next_seq: u64,
}

/// When one pending event is due, its scheduling order and its slot: what the heap orders.
/// Ordered as (time, sequence): the slot, in the low bits of a unique sequence, never decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    /// Its time.
    at: Nanos,
    /// Its sequence number (high bits) and its slot in the slab (low `SLOT_BITS` bits).
    seq_slot: u64,
}

impl Key {
    fn slot(self) -> usize {
        (self.seq_slot & (SLOTS_MAX as u64 - 1)) as usize
    }
}

impl<E> Default for Scheduler<E> {
    fn default() -> Self {
        Scheduler { heap: Vec::new(), slab: Vec::new(), free: Vec::new(), next_seq: 0 }
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
        assert!(self.next_seq < 1 << (64 - SLOT_BITS), "more than 2^40 events scheduled");
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot as usize] = Some(event);
                slot as u64
            }
            None => {
                assert!(self.slab.len() < SLOTS_MAX, "more than 2^24 events pending at once");
                self.slab.push(Some(event));
                (self.slab.len() - 1) as u64
            }
        };
        self.sift_up(Key { at, seq_slot: self.next_seq << SLOT_BITS | slot });
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.first().map(|k| k.at)
    }

    /// The earliest event and its time, left in place.
    pub fn peek(&self) -> Option<(Nanos, &E)> {
        let key = self.heap.first()?;
        Some((key.at, self.slab[key.slot()].as_ref().expect("a pending key names a full slot")))
    }

    /// The earliest event with its time.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        let last = self.heap.pop()?;
        let key = if self.heap.is_empty() { last } else { self.sift_down(last) };
        let slot = key.slot();
        let event = self.slab[slot].take().expect("a pending key names a full slot");
        self.free.push(slot as u32);
        Some((key.at, event))
    }

    /// Adds `key` at the end of the heap and moves it up to its place.
    fn sift_up(&mut self, key: Key) {
        let mut hole = self.heap.len();
        self.heap.push(key);
        while hole > 0 {
            let parent = (hole - 1) / ARITY;
            if self.heap[parent] <= key {
                break;
            }
            self.heap[hole] = self.heap[parent];
            hole = parent;
        }
        self.heap[hole] = key;
    }

    /// Takes the root out, puts `last` (the key taken off the end) in its place and moves it
    /// down to its place; returns the root.
    fn sift_down(&mut self, last: Key) -> Key {
        let root = self.heap[0];
        let len = self.heap.len();
        let mut hole = 0;
        loop {
            let first = hole * ARITY + 1;
            if first >= len {
                break;
            }
            let end = (first + ARITY).min(len);
            let mut child = first;
            for c in first + 1..end {
                if self.heap[c] < self.heap[child] {
                    child = c;
                }
            }
            if last <= self.heap[child] {
                break;
            }
            self.heap[hole] = self.heap[child];
            hole = child;
        }
        self.heap[hole] = last;
        root
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
        self.slab.clear();
        self.free.clear();
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

    #[test]
    fn slots_are_reused_and_interleaved_pushes_and_pops_keep_the_order() {
        let mut s = Scheduler::new();
        let mut expected = Vec::new();
        let mut got = Vec::new();
        for round in 0..50u64 {
            for i in 0..4u64 {
                let at = (round * 7 + i * 13) % 40 + round;
                s.push(at, (at, round, i));
            }
            if let Some((at, e)) = s.pop() {
                got.push((at, e));
            }
        }
        while let Some(x) = s.pop() {
            got.push(x);
        }
        // The slab never held more than the queue's peak (151: 49 rounds left 3 each, then 4).
        assert!(s.slab.len() <= 151, "slab grew to {}", s.slab.len());
        // Replay with a plain sort by (time, push order): what the scheduler must pop.
        let mut all = Vec::new();
        let mut pushed = 0u64;
        for round in 0..50u64 {
            for i in 0..4u64 {
                let at = (round * 7 + i * 13) % 40 + round;
                all.push((at, pushed, (at, round, i)));
                pushed += 1;
            }
        }
        // Pops interleave with pushes, so an event pops only once it is pushed: simulate that.
        let mut pending: Vec<(u64, u64, (u64, u64, u64))> = Vec::new();
        let mut it = all.into_iter();
        for _ in 0..50 {
            pending.extend(it.by_ref().take(4));
            pending.sort();
            let (at, _, e) = pending.remove(0);
            expected.push((at, e));
        }
        pending.sort();
        expected.extend(pending.into_iter().map(|(at, _, e)| (at, e)));
        assert_eq!(got, expected);
    }

    #[test]
    fn a_long_random_mix_of_pushes_and_pops_matches_a_sorted_reference() {
        // A reference ordered by (time, push order), against the 4-ary heap of packed keys.
        let mut reference = std::collections::BTreeMap::new();
        let mut s = Scheduler::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut pushed = 0u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            if x >> 62 != 0 {
                let at = (x >> 20) % 500; // many ties
                s.push(at, pushed);
                reference.insert((at, pushed), pushed);
                pushed += 1;
            } else {
                let expected = reference.pop_first().map(|((at, _), v)| (at, v));
                assert_eq!(s.pop(), expected);
            }
            assert_eq!(s.len(), reference.len());
            assert_eq!(s.peek_time(), reference.first_key_value().map(|(&(at, _), _)| at));
        }
        while let Some(((at, _), v)) = reference.pop_first() {
            assert_eq!(s.pop(), Some((at, v)));
        }
        assert_eq!(s.pop(), None);
    }
}
