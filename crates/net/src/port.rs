//! Egress ports with strict-priority classes and a finite buffer: [`PriorityPort`].
//!
//! ## Why a state machine
//!
//! A FIFO port is arithmetic ([`crate::Link::carry`]): a frame's start time is fixed the moment
//! it is queued. Under strict priority it is not: a low-class frame queued now starts only when
//! no higher-class frame is waiting as the wire frees, and that depends on frames that have not
//! arrived yet. So the port is a sans-IO state machine in the quinn style. The driver feeds it
//! frames with [`PriorityPort::push`] at the time they reach the port, asks
//! [`PriorityPort::poll_timeout`] when it next has something to hand over, and at that time
//! collects finished frames with [`PriorityPort::pop_arrival`]. Time is always passed in; the
//! port reads no clock and schedules nothing itself.
//!
//! ## Decisions are made once they can no longer change
//!
//! The wire chooses its next frame at a *decision instant* `d`: when it frees, or when a frame
//! reaches an idle wire. The choice is the head of the highest class among the frames that
//! reached the port at or before `d`. The port makes that choice only once the driver has shown
//! it a time strictly after `d` (a push or a pop with `now > d`): since calls come in
//! non-decreasing time, every frame that could compete at `d` is then known. Two things follow.
//! First, the outcome does not depend on the order of calls at one instant: a high-class frame
//! pushed at the very nanosecond the wire frees competes, whether the driver ran its wake-up
//! before or after the push. Second, a frame is handed over at the instant its last bit leaves
//! the wire, which is always after its decision instant, so the laziness never delays it.
//!
//! [`PriorityPort::poll_timeout`] answers with the end of the frame on the wire, or if the wire
//! is idle, with the end of the frame that *would* be chosen given what is queued now. A later
//! push may change that answer (a higher class arrives; the port is idle and a frame arrives),
//! so a driver re-polls after every push and pop and keeps its earliest pending wake-up. A
//! wake-up that finds nothing is harmless and rare, and never repeats at the same time: after
//! a pop at `now` returns `None`, the next timeout is later than `now`. The test module's
//! `drive` shows such a driver on [`pisadb_core::Scheduler`] and bounds its event count.
//!
//! ## Rules of the wire and the buffer
//!
//! - The frame on the wire is never preempted; a higher class waiting when the wire frees goes
//!   first; frames of one class leave in the order they came (FIFO within a class). Class
//!   numbers follow IEEE 802.1p: a larger class is more urgent.
//! - One buffer of `buffer_bytes` is shared by all classes. A frame occupies
//!   [`crate::buffered_bytes`] from its push until its last bit leaves the wire. The frame on
//!   the wire counts because a store-and-forward switch frees a packet's buffer cells only once
//!   the packet has been read out onto the wire; it also makes occupancy independent of
//!   whether the choice at a decision instant has been made yet (the chosen frame counts either
//!   way). A push that would exceed the buffer is refused (tail drop) and the item comes back
//!   in [`Dropped`], whatever its class: strict priority orders service, not admission.
//! - With one class the port is exactly the FIFO arithmetic of [`crate::Link::carry`] (a
//!   property test checks it), so switching a link's discipline changes only what it should.

use crate::error::{check_range, NetError};
use crate::link::{buffered_bytes, LinkParams};
use pisadb_core::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The most strict-priority classes a port can have: 802.1p has eight priorities, and Tofino's
/// traffic manager offers eight queues per port by default.
pub const MAX_CLASSES: u8 = 8;

/// How an egress port in front of a link orders and admits frames.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PortDiscipline {
    /// One queue, served in order, unbounded: the arithmetic of [`crate::Link::carry`].
    #[default]
    Fifo,
    /// Strict-priority classes sharing a finite buffer that tail-drops: a [`PriorityPort`].
    StrictPriority {
        /// Number of classes, `1..=MAX_CLASSES`; class `classes - 1` is the most urgent.
        classes: u8,
        /// Buffer shared by all classes, in [`crate::buffered_bytes`]; at least one
        /// minimum-size frame.
        buffer_bytes: u64,
    },
}

impl PortDiscipline {
    /// Checks the class count and the buffer size.
    pub fn check(&self) -> Result<(), NetError> {
        match *self {
            PortDiscipline::Fifo => Ok(()),
            PortDiscipline::StrictPriority { classes, buffer_bytes } => {
                check_range("classes", u64::from(classes), 1, u64::from(MAX_CLASSES))?;
                check_range("buffer_bytes", buffer_bytes, buffered_bytes(0), u64::MAX)
            }
        }
    }
}

/// What one class of a port has done since the port was built.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCounters {
    /// Frames accepted into the buffer.
    pub enqueued_frames: u64,
    /// Frames handed to the far end by [`PriorityPort::pop_arrival`].
    pub sent_frames: u64,
    /// Frames refused because the buffer was full (tail drop).
    pub dropped_frames: u64,
    /// Buffered bytes ([`crate::buffered_bytes`]) of the frames sent.
    pub sent_bytes: u64,
    /// Buffered bytes of the frames dropped.
    pub dropped_bytes: u64,
    /// The most buffer this class held at once, its frame on the wire included.
    pub peak_occupancy_bytes: u64,
}

/// A frame the port refused because the shared buffer was full; the item comes back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped<T> {
    /// The class it was pushed in.
    pub class: u8,
    /// Its payload size as pushed.
    pub payload_bytes: usize,
    /// The buffer's occupancy that left no room for it.
    pub occupancy_bytes: u64,
    /// The driver's item, returned so it can be counted, traced or retried.
    pub item: T,
}

/// A frame that has left the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival<T> {
    /// When its last bit reaches the far end of the link (end of serialization plus
    /// propagation; the receiving NIC's latency is the driver's to add, as with `carry`).
    pub arrival_at_ns: Nanos,
    /// The class it travelled in.
    pub class: u8,
    /// Its payload size as pushed.
    pub payload_bytes: usize,
    /// The driver's item.
    pub item: T,
}

/// A frame waiting in its class's queue.
#[derive(Debug)]
struct Waiting<T> {
    /// When it reached the port (the `now` of its push).
    ready_at_ns: Nanos,
    /// Its payload size as pushed.
    payload_bytes: usize,
    /// What it occupies in the buffer.
    frame_bytes: u64,
    /// The driver's item.
    item: T,
}

/// A frame that has been given the wire.
#[derive(Debug)]
struct Sent<T> {
    /// When its last bit leaves the port.
    finish_at_ns: Nanos,
    /// Its class.
    class: u8,
    /// The frame as it waited.
    frame: Waiting<T>,
}

/// A strict-priority egress port with a finite shared buffer: see the module essay.
#[derive(Debug)]
pub struct PriorityPort<T> {
    /// The wire behind the port.
    params: LinkParams,
    /// Capacity of the shared buffer, in buffered bytes.
    buffer_bytes: u64,
    /// One FIFO per class, indexed by class (larger = more urgent).
    queues: Vec<VecDeque<Waiting<T>>>,
    /// The frame being serialized, if its last bit has not left by `clock_ns`.
    on_wire: Option<Sent<T>>,
    /// Frames whose last bit has left, oldest first, not yet collected by `pop_arrival`.
    finished: VecDeque<Sent<T>>,
    /// When the wire finishes the last frame it was given (0 before the first).
    wire_free_at_ns: Nanos,
    /// The latest time a call has shown the port; calls may not go back before it.
    clock_ns: Nanos,
    /// Buffer held per class at `clock_ns` (waiting frames plus the one on the wire).
    occupancy_by_class_bytes: Vec<u64>,
    /// Sum of `occupancy_by_class_bytes`.
    occupancy_bytes: u64,
    /// The most buffer held at once, all classes together.
    peak_occupancy_bytes: u64,
    /// Counters per class, indexed by class.
    counters: Vec<ClassCounters>,
}

impl<T> PriorityPort<T> {
    /// An empty port with `classes` strict-priority classes sharing `buffer_bytes` of buffer in
    /// front of a wire with `params`; rejects settings [`PortDiscipline::check`] or
    /// [`LinkParams::check`] would reject.
    pub fn new(params: LinkParams, classes: u8, buffer_bytes: u64) -> Result<Self, NetError> {
        params.check("params.gbps")?;
        PortDiscipline::StrictPriority { classes, buffer_bytes }.check()?;
        Ok(Self::new_checked_config(params, classes, buffer_bytes))
    }

    /// [`PriorityPort::new`] for settings already validated (by `Topology::set_discipline`).
    pub(crate) fn new_checked_config(params: LinkParams, classes: u8, buffer_bytes: u64) -> Self {
        let classes = usize::from(classes);
        PriorityPort {
            params,
            buffer_bytes,
            queues: (0..classes).map(|_| VecDeque::new()).collect(),
            on_wire: None,
            finished: VecDeque::new(),
            wire_free_at_ns: 0,
            clock_ns: 0,
            occupancy_by_class_bytes: vec![0; classes],
            occupancy_bytes: 0,
            peak_occupancy_bytes: 0,
            counters: vec![ClassCounters::default(); classes],
        }
    }

    /// A frame of `payload_bytes` in `class` reaches the port at `now`: it is queued, or
    /// refused if the shared buffer cannot hold it (tail drop), and then the item comes back.
    /// The driver re-polls [`PriorityPort::poll_timeout`] afterwards: the new frame may be the
    /// next to go.
    ///
    /// # Panics
    /// If `class` is not below the port's class count, or `now` is earlier than a previous
    /// call's: both are driver bugs that would silently corrupt the port's history.
    pub fn push(&mut self, now: Nanos, class: u8, payload_bytes: usize, item: T) -> Result<(), Dropped<T>> {
        assert!(usize::from(class) < self.queues.len(), "class {class} on a port with {} classes", self.queues.len());
        self.advance_to(now);
        let frame_bytes = buffered_bytes(payload_bytes);
        let class_index = usize::from(class);
        if self.occupancy_bytes.saturating_add(frame_bytes) > self.buffer_bytes {
            let counters = &mut self.counters[class_index];
            counters.dropped_frames += 1;
            counters.dropped_bytes += frame_bytes;
            return Err(Dropped { class, payload_bytes, occupancy_bytes: self.occupancy_bytes, item });
        }
        self.queues[class_index].push_back(Waiting { ready_at_ns: now, payload_bytes, frame_bytes, item });
        self.occupancy_bytes += frame_bytes;
        self.occupancy_by_class_bytes[class_index] += frame_bytes;
        self.peak_occupancy_bytes = self.peak_occupancy_bytes.max(self.occupancy_bytes);
        let counters = &mut self.counters[class_index];
        counters.enqueued_frames += 1;
        counters.peak_occupancy_bytes = counters.peak_occupancy_bytes.max(self.occupancy_by_class_bytes[class_index]);
        Ok(())
    }

    /// When [`PriorityPort::pop_arrival`] will next have a frame to hand over, given the frames
    /// pushed so far: the end of the frame on the wire, or of the frame the wire would choose
    /// next. `None` when the port is empty. May be at or before the last call's `now` (a
    /// frame is ready to collect now).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if let Some(sent) = self.finished.front().or(self.on_wire.as_ref()) {
            return Some(sent.finish_at_ns);
        }
        let (decision_at_ns, class_index) = self.next_decision()?;
        let head = self.queues[class_index].front()?;
        Some(decision_at_ns + self.params.serialization_ns(head.payload_bytes))
    }

    /// The next frame whose last bit has left the wire by `now`, with when it reaches the far
    /// end; `None` if there is none yet. Call it until it returns `None`, then re-poll.
    ///
    /// # Panics
    /// If `now` is earlier than a previous call's.
    pub fn pop_arrival(&mut self, now: Nanos) -> Option<Arrival<T>> {
        self.advance_to(now);
        let sent = self.finished.pop_front()?;
        let counters = &mut self.counters[usize::from(sent.class)];
        counters.sent_frames += 1;
        counters.sent_bytes += sent.frame.frame_bytes;
        Some(Arrival {
            arrival_at_ns: sent.finish_at_ns + self.params.propagation_ns,
            class: sent.class,
            payload_bytes: sent.frame.payload_bytes,
            item: sent.frame.item,
        })
    }

    /// Buffer held at the latest time shown to the port, the frame on the wire included.
    pub fn occupancy_bytes(&self) -> u64 {
        self.occupancy_bytes
    }

    /// The most buffer held at once since the port was built, all classes together.
    pub fn peak_occupancy_bytes(&self) -> u64 {
        self.peak_occupancy_bytes
    }

    /// The shared buffer's capacity.
    pub fn buffer_bytes(&self) -> u64 {
        self.buffer_bytes
    }

    /// Number of classes.
    pub fn classes(&self) -> u8 {
        // The constructor took the count as a u8, so this cannot truncate.
        self.queues.len() as u8
    }

    /// Counters per class, indexed by class.
    pub fn counters(&self) -> &[ClassCounters] {
        &self.counters
    }

    /// Whether every pushed frame has been collected (nothing waits, serializes or is ready).
    pub fn is_empty(&self) -> bool {
        self.on_wire.is_none() && self.finished.is_empty() && self.queues.iter().all(VecDeque::is_empty)
    }

    /// Plays the wire forward to `now`: retires frames whose last bit left by `now` and makes
    /// every decision at an instant strictly before `now` (the module essay says why not at
    /// `now`). Each turn of the loop retires or starts one frame, so it runs at most twice per
    /// queued frame.
    fn advance_to(&mut self, now: Nanos) {
        assert!(now >= self.clock_ns, "time went back: {now} ns after {} ns", self.clock_ns);
        self.clock_ns = now;
        loop {
            if let Some(sent) = self.on_wire.take() {
                if sent.finish_at_ns > now {
                    self.on_wire = Some(sent);
                    return;
                }
                self.occupancy_bytes -= sent.frame.frame_bytes;
                self.occupancy_by_class_bytes[usize::from(sent.class)] -= sent.frame.frame_bytes;
                self.finished.push_back(sent);
            }
            match self.next_decision() {
                Some((decision_at_ns, class_index)) if decision_at_ns < now => self.start(decision_at_ns, class_index),
                _ => return,
            }
        }
    }

    /// Puts the head of `class_index` on the idle wire at `start_at_ns`.
    fn start(&mut self, start_at_ns: Nanos, class_index: usize) {
        let Some(frame) = self.queues[class_index].pop_front() else {
            unreachable!("next_decision names a class with a waiting frame")
        };
        let finish_at_ns = start_at_ns + self.params.serialization_ns(frame.payload_bytes);
        self.wire_free_at_ns = finish_at_ns;
        // Class indices come from a u8 class count.
        self.on_wire = Some(Sent { finish_at_ns, class: class_index as u8, frame });
    }

    /// With the wire idle, the next decision instant and the class it serves: the wire frees
    /// (or the first waiting frame arrives, if later), and the most urgent class with a frame
    /// there by then goes. `None` if nothing waits.
    fn next_decision(&self) -> Option<(Nanos, usize)> {
        let earliest_ready_ns = self.queues.iter().filter_map(|queue| queue.front()).map(|w| w.ready_at_ns).min()?;
        let decision_at_ns = self.wire_free_at_ns.max(earliest_ready_ns);
        let class_index = (0..self.queues.len())
            .rev()
            .find(|&class| self.queues[class].front().is_some_and(|w| w.ready_at_ns <= decision_at_ns))?;
        Some((decision_at_ns, class_index))
    }
}

#[cfg(test)]
mod tests;
