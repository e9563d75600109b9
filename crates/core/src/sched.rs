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
//! The queue orders small keys, 16 bytes each: the time, and the sequence number and the
//! event's slot packed in one word (sequence above, slot below, so comparing the words
//! compares sequences: they are unique). The events themselves wait in a slab, at the slot
//! their key names, and do not move while keys do (a system's events can be hundreds of bytes:
//! a switch's packet, a host's timer). A slot freed by a pop is reused by the next push, and
//! every vector keeps its capacity, so once the queue has reached its working size a push or a
//! pop allocates nothing.
//!
//! ## A radix queue, because time only moves forward
//!
//! A driver schedules events at or after the time of the last event it took, so the keys are
//! *monotone*, and a radix queue beats any comparison heap on them (Ahuja, Mehlhorn, Orlin and
//! Tarjan's radix heap). The queue remembers `last`, the time of the earliest pending key as of
//! its last refill. Bucket 0 holds the keys due exactly at `last`; bucket `b ≥ 1` the keys whose
//! time differs from `last` first in bit `b - 1` (so a key's bucket is `64 - (at ^
//! last).leading_zeros()`). A push is an append. A pop takes the front of bucket 0; when that is
//! empty, the lowest non-empty bucket `b` is emptied: `last` becomes its earliest time, and its
//! keys fall into buckets below `b` (they agree with the new `last` above bit `b - 1`), while
//! the keys of higher buckets stay where they are (the new `last` agrees with the old one above
//! bit `b - 1`). A key moves down at most 64 times and usually a few: a timeout a millisecond
//! away waits in a high bucket, untouched, while thousands of near events come and go in the
//! low ones, where a heap would sift past it on every pop. Each bucket also remembers its
//! earliest time, so the next event's time is known without moving anything.
//!
//! **Ties.** Every bucket lists its keys in sequence order: a push appends the largest sequence
//! so far, and a bucket is refilled only from a higher one while it is empty (all buckets below
//! the one emptied are empty), in that bucket's own order. So bucket 0, whose keys share one
//! time, pops in sequence order, and the order is exactly (time, sequence): the same as the
//! binary heap of whole events this replaced, event for event.
//!
//! **A push into the past** (a real-time driver whose clock reads earlier than a timer it took;
//! never the simulator) is still correct, only slow: the queue re-files every key around the new
//! `last`, in sequence order.

use crate::Nanos;

/// Bits of a key's second word that hold the slot; the sequence number takes the rest.
const SLOT_BITS: u32 = 24;
/// Pending events at most (slots are `SLOT_BITS` wide).
const SLOTS_MAX: usize = 1 << SLOT_BITS;
/// Bucket 0 (due at `last`) and one per bit of a time.
const BUCKETS: usize = 65;

/// Events of type `E` waiting for their time, earliest first, ties in scheduling order.
#[derive(Debug)]
pub struct Scheduler<E> {
    /// The time every key of bucket 0 has; no pending key is earlier.
    last: Nanos,
    /// Keys by bucket (see the module essay), each in sequence order.
    buckets: Vec<Vec<Key>>,
    /// Keys of bucket 0 already popped (bucket 0 is consumed from the front).
    head: usize,
    /// The earliest time in each bucket (meaningful only where the bucket is non-empty).
    earliest: [Nanos; BUCKETS],
    /// Bit `b` set when bucket `b` holds a key not yet popped.
    occupied: u128,
    /// Keys pending.
    len: usize,
    /// An empty vector with capacity, swapped in for a bucket being re-filed.
    spare: Vec<Key>,
    /// The events, at the slots their keys name; `None` where a slot is free.
    slab: Vec<Option<E>>,
    /// Free slots of the slab, the most recently freed last (reused first: warm in cache).
    free: Vec<u32>,
    /// The sequence number the next scheduled event gets.
    next_seq: u64,
}

/// When one pending event is due, its scheduling order and its slot: what the queue orders.
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

/// The bucket of a key due at `at` when bucket 0 is due at `last` (`at >= last`).
#[inline]
fn bucket_of(at: Nanos, last: Nanos) -> usize {
    (64 - (at ^ last).leading_zeros()) as usize
}

impl<E> Default for Scheduler<E> {
    fn default() -> Self {
        Scheduler {
            last: 0,
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            head: 0,
            earliest: [0; BUCKETS],
            occupied: 0,
            len: 0,
            spare: Vec::new(),
            slab: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
        }
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
        let key = Key { at, seq_slot: self.next_seq << SLOT_BITS | slot };
        if self.len == 0 {
            // Nothing pending: bucket 0 may start from this key's time.
            self.buckets[0].clear();
            self.head = 0;
            self.last = at;
        } else if at < self.last {
            self.refile_before(at);
        }
        self.file(key);
        self.len += 1;
    }

    /// Puts `key` (due no earlier than `last`) at the end of its bucket.
    #[inline]
    fn file(&mut self, key: Key) {
        let b = bucket_of(key.at, self.last);
        let bit = 1u128 << b;
        if self.occupied & bit == 0 || key.at < self.earliest[b] {
            self.earliest[b] = key.at;
        }
        self.occupied |= bit;
        self.buckets[b].push(key);
    }

    /// A push earlier than `last`: files every pending key again around `at`, in sequence
    /// order (rare: see the module essay).
    #[cold]
    fn refile_before(&mut self, at: Nanos) {
        let head = std::mem::take(&mut self.head);
        let mut keys: Vec<Key> = Vec::with_capacity(self.len);
        for (b, bucket) in self.buckets.iter_mut().enumerate() {
            let from = if b == 0 { head } else { 0 };
            keys.extend(bucket.drain(..).skip(from));
        }
        keys.sort_unstable_by_key(|k| k.seq_slot);
        self.occupied = 0;
        self.last = at;
        for key in keys {
            self.file(key);
        }
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Nanos> {
        if self.len == 0 {
            return None;
        }
        let b = self.occupied.trailing_zeros() as usize;
        Some(if b == 0 { self.last } else { self.earliest[b] })
    }

    /// The earliest event and its time, left in place.
    pub fn peek(&self) -> Option<(Nanos, &E)> {
        if self.len == 0 {
            return None;
        }
        let b = self.occupied.trailing_zeros() as usize;
        let key = if b == 0 {
            self.buckets[0][self.head]
        } else {
            // The bucket is in sequence order: its first key at its earliest time.
            let at = self.earliest[b];
            *self.buckets[b].iter().find(|k| k.at == at).expect("a bucket holds its earliest key")
        };
        Some((key.at, self.slab[key.slot()].as_ref().expect("a pending key names a full slot")))
    }

    /// The earliest event with its time.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        if self.len == 0 {
            return None;
        }
        if self.occupied & 1 == 0 {
            self.refill();
        }
        let key = self.buckets[0][self.head];
        self.head += 1;
        if self.head == self.buckets[0].len() {
            self.buckets[0].clear();
            self.head = 0;
            self.occupied &= !1;
        }
        self.len -= 1;
        let slot = key.slot();
        let event = self.slab[slot].take().expect("a pending key names a full slot");
        self.free.push(slot as u32);
        Some((key.at, event))
    }

    /// Bucket 0 is empty: empties the lowest non-empty bucket into the ones below it, around
    /// its earliest time (the new `last`).
    fn refill(&mut self) {
        let b = self.occupied.trailing_zeros() as usize;
        debug_assert!(b > 0 && b < BUCKETS, "refill with keys pending and bucket 0 empty");
        self.last = self.earliest[b];
        self.occupied &= !(1u128 << b);
        let mut keys = std::mem::replace(&mut self.buckets[b], std::mem::take(&mut self.spare));
        for &key in &keys {
            self.file(key);
        }
        keys.clear();
        self.spare = keys;
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
        self.len
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops every waiting event (the sequence keeps counting, so order stays total).
    pub fn clear(&mut self) {
        self.buckets.iter_mut().for_each(Vec::clear);
        self.head = 0;
        self.occupied = 0;
        self.len = 0;
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
        // A reference ordered by (time, push order), against the radix queue of packed keys.
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

    #[test]
    fn a_long_monotone_mix_of_near_and_far_events_matches_a_sorted_reference() {
        // The simulator's shape: pushes at or after the last pop, most near, some a long way
        // off (timeouts), many ties; the radix queue's fast path, against a sorted reference.
        let mut reference = std::collections::BTreeMap::new();
        let mut s = Scheduler::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut now = 0;
        let mut pushed = 0u64;
        for _ in 0..50_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            if x >> 62 != 0 || reference.is_empty() {
                let ahead = match (x >> 20) % 8 {
                    0 => 0,
                    1..=5 => (x >> 30) % 2_000,
                    6 => (x >> 30) % 1_000_000,
                    _ => (1 << 40) | ((x >> 30) % 1000),
                };
                s.push(now + ahead, pushed);
                reference.insert((now + ahead, pushed), pushed);
                pushed += 1;
            } else {
                let expected = reference.pop_first().map(|((at, _), v)| (at, v));
                let got = s.pop();
                assert_eq!(got, expected);
                now = got.map_or(now, |(at, _)| at);
            }
            assert_eq!(s.len(), reference.len());
            assert_eq!(s.peek_time(), reference.first_key_value().map(|(&(at, _), _)| at));
            assert_eq!(s.peek().map(|(at, &v)| (at, v)), reference.first_key_value().map(|(&(at, _), &v)| (at, v)));
        }
        while let Some(((at, _), v)) = reference.pop_first() {
            assert_eq!(s.pop(), Some((at, v)));
        }
        assert_eq!(s.pop(), None);
    }

    #[test]
    fn a_push_into_the_past_still_pops_in_time_then_scheduling_order() {
        let mut s = Scheduler::new();
        s.push(100, "a at 100");
        s.push(1_000, "b at 1000");
        s.push(100, "c at 100");
        assert_eq!(s.pop(), Some((100, "a at 100")));
        // Earlier than the time just taken: a real-time driver's late timer.
        s.push(50, "d at 50");
        s.push(1_000, "e at 1000");
        s.push(50, "f at 50");
        let order: Vec<_> = std::iter::from_fn(|| s.pop()).collect();
        assert_eq!(
            order,
            vec![(50, "d at 50"), (50, "f at 50"), (100, "c at 100"), (1_000, "b at 1000"), (1_000, "e at 1000")]
        );
    }
}
