//! The world's links: a datagram's way from a sender's port to the next host or switch.
//!
//! Every send goes through [`World::send_on_link`]: the fault plan draws the datagram's fate
//! first (lost, delayed, duplicated: [`World::network_fate`]), then a FIFO link computes the
//! arrival at once ([`pisadb_net::Link::carry`], no event), while a strict-priority link hands
//! the frame to its [`PriorityPort`] when it reaches it and the world wakes the port when a
//! frame is done ([`World::wake_port`]). What a switch sends is collected after each of its
//! steps ([`World::drain_switch`]) and put on the link toward its next hop the same way. The
//! parent module's essay, "Network and switches", says what the wire models.

use super::{Event, Hop, World};
use crate::faults::Target;
use crate::world::Observer;
use pisadb_core::rng::SeededRng;
use pisadb_core::Nanos;
use pisadb_host::Host;
use pisadb_net::{Endpoint, PriorityPort};
use pisadb_switch::{Port, SwitchDevice, Transmit};
use rand::Rng;

/// A frame reaching strict-priority link `link`'s port.
pub(super) struct PortEntry {
    /// The link.
    pub(super) link: usize,
    /// Where the frame goes once across.
    pub(super) hop: Hop,
    /// A reordering delay the fault plan drew, added to its arrival.
    pub(super) after_ns: Nanos,
    /// Its class (the world's classifier's, found as it was sent).
    pub(super) class: u8,
    /// The datagram.
    pub(super) bytes: Vec<u8>,
}

/// A frame inside a strict-priority port: where it goes and its delay after the link.
pub(super) type PortItem = (Hop, Nanos, Vec<u8>);

/// A strict-priority egress port and its pending wake-up.
pub(super) struct DrivenPort {
    /// The port's state machine.
    pub(super) port: PriorityPort<PortItem>,
    /// When a [`Event::PortWake`] is scheduled, if one is.
    pub(super) wake: Option<Nanos>,
    /// Frames the fault plan holds before the port (jitter without `reorder`, slow links) that
    /// have not entered it yet: (class, when the frame was ready, when it enters).
    pub(super) held: Vec<(u8, Nanos, Nanos)>,
}

impl DrivenPort {
    /// When a frame of `class`, ready at `ready` and held by the fault plan until `at`, enters
    /// the port: no earlier than any held frame of its class that was ready no later than it
    /// (sent, from now, `now`). A delay before the link keeps a class in order, as the FIFO
    /// wire does for every frame (`Link::carry`); each class is its own queue, so another
    /// class's held frames do not hold it. Without faults no frame is held and `at` comes back.
    pub(super) fn entry_time(&mut self, now: Nanos, class: u8, ready: Nanos, at: Nanos) -> Nanos {
        // A frame entering by now is in the port or enters before any frame sent from now on.
        self.held.retain(|&(_, _, enter)| enter > now);
        let floor = self.held.iter().filter(|&&(c, r, _)| c == class && r <= ready).map(|&(_, _, enter)| enter).max();
        let at = floor.map_or(at, |floor| floor.max(at));
        if at > ready {
            self.held.push((class, ready, at));
        }
        at
    }
}

impl<H: Host, S: SwitchDevice, O: Observer<H, S>> World<H, S, O> {
    /// The copies of a datagram that enter a link to or from `host` at `now`: none if lost,
    /// two if duplicated; each with its delay before the link (in order) and after it
    /// (overtaking, with `reorder`). Slow links are per host; a trunk between switches passes
    /// `None` and is only lossy, duplicating and jittery.
    pub(super) fn network_fate(&mut self, now: Nanos, host: Option<u16>) -> [Option<(Nanos, Nanos)>; 2] {
        let Some(f) = self.faults.as_mut() else { return [Some((0, 0)), None] };
        let slow = host.map_or(0, |h| f.plan.slow_ns(h, now));
        if !f.plan.network_faulty(now) {
            return [Some((slow, 0)), None];
        }
        if f.rng.random_bool(f.plan.loss) {
            f.stats.lost += 1;
            return [None, None];
        }
        let (jitter, reorder) = (f.plan.jitter_ns, f.plan.reorder);
        let delay = |rng: &mut SeededRng| {
            let j = rng.random_range(0..=jitter);
            if reorder {
                (slow, j)
            } else {
                (slow + j, 0)
            }
        };
        let first = Some(delay(&mut f.rng));
        let second = f.rng.random_bool(f.plan.duplicate).then(|| delay(&mut f.rng));
        if second.is_some() {
            f.stats.duplicated += 1;
        }
        [first, second]
    }

    /// Puts `bytes`, which left its sender at `left`, on link `index` at `ready` (plus each
    /// copy's fault delays), toward `hop`: a FIFO link computes the arrival at once, a
    /// strict-priority one takes the frame into its port when it gets there. A delay before
    /// the link keeps order either way: on the FIFO wire, every frame queues behind it; into a
    /// strict-priority port, a frame of its class waits for it ([`DrivenPort::entry_time`]).
    pub(super) fn send_on_link(
        &mut self,
        index: usize,
        hop: Hop,
        (left, ready): (Nanos, Nanos),
        bytes: Vec<u8>,
        fault_host: Option<u16>,
    ) {
        let fates = self.network_fate(left, fault_host);
        let [first, copy] = fates;
        if self.ports.get(index).is_some_and(Option::is_some) {
            let class = (self.classify)(&bytes);
            let now = self.now;
            let enter = |world: &mut Self, (before, after): (Nanos, Nanos), bytes| {
                let Some(Some(driven)) = world.ports.get_mut(index) else { return };
                let at = driven.entry_time(now, class, ready, ready + before);
                let entry = PortEntry { link: index, hop, after_ns: after, class, bytes };
                world.schedule(at, Event::EnterPort(entry));
            };
            if let Some(c) = copy {
                enter(self, c, bytes.clone());
            }
            if let Some(f) = first {
                enter(self, f, bytes);
            }
            return;
        }
        let link = &mut self.topology.links[index];
        let nic_ns = if matches!(hop, Hop::Host(_)) { link.params.nic_ns } else { 0 };
        let arrive = |link: &mut pisadb_net::Link, (before, after): (Nanos, Nanos)| {
            link.carry(ready + before, bytes.len()) + after + nic_ns
        };
        // The first copy takes the wire first, as the pinned traces have it.
        let first_at = first.map(|c| arrive(link, c));
        let copy_at = copy.map(|c| arrive(link, c));
        if let Some(at) = copy_at {
            self.arrive(at, hop, bytes.clone());
        }
        if let Some(at) = first_at {
            self.arrive(at, hop, bytes);
        }
    }

    pub(super) fn arrive(&mut self, at: Nanos, hop: Hop, bytes: Vec<u8>) {
        self.schedule(at, arrival(hop, bytes));
    }

    pub(super) fn enter_port(&mut self, now: Nanos, link: usize, hop: Hop, after_ns: Nanos, class: u8, bytes: Vec<u8>) {
        let Some(Some(driven)) = self.ports.get_mut(link) else { return };
        let len = bytes.len();
        // A refused frame is counted by the port itself (tail drop).
        let _ = driven.port.push(now, class, len, (hop, after_ns, bytes));
        self.arm_port(now, link);
    }

    pub(super) fn wake_port(&mut self, now: Nanos, link: usize) {
        let Some(Some(driven)) = self.ports.get_mut(link) else { return };
        driven.wake = None;
        let nic_ns = self.topology.links[link].params.nic_ns;
        // Scheduled as they are collected (the port and the scheduler are apart: no buffer).
        while let Some(a) = driven.port.pop_arrival(now) {
            let (hop, after_ns, bytes) = a.item;
            let nic = if matches!(hop, Hop::Host(_)) { nic_ns } else { 0 };
            self.events.push(a.arrival_at_ns + after_ns + nic, arrival(hop, bytes));
        }
        self.arm_port(now, link);
    }

    /// Schedules link `link`'s port to wake when it next needs to, unless it already will.
    pub(super) fn arm_port(&mut self, now: Nanos, link: usize) {
        let Some(Some(driven)) = self.ports.get_mut(link) else { return };
        let Some(at) = driven.port.poll_timeout() else { return };
        // The port decides an instant only once time has passed it.
        let at = at.max(now) + 1;
        if driven.wake.is_none_or(|w| at < w) {
            driven.wake = Some(at);
            self.schedule(at, Event::PortWake { link: link as u32 });
        }
    }

    pub(super) fn drain_switch(&mut self, now: Nanos, switch: u16) {
        while let Some(Transmit { at_ns, dst, bytes, port }) = self.switches[usize::from(switch)].device.poll_transmit()
        {
            if self.crashes_within(Target::Switch(switch), now, at_ns) {
                self.count(|s| s.cut_short += 1);
                continue; // still inside the switch when it crashed
            }
            let fault_host = match port {
                Port::Switch(_) => None,
                // The CPU port is the controller's own link.
                Port::Host(_) | Port::ControlPlane => Some(dst),
            };
            let (link, hop) = match port {
                Port::Switch(next) => (
                    self.topology.link_index(Endpoint::Switch(switch), Endpoint::Switch(next)),
                    Hop::Switch { switch: next, ingress: Port::Switch(switch) },
                ),
                Port::Host(_) | Port::ControlPlane => {
                    (self.downlinks[usize::from(switch)].get(usize::from(dst)).copied().flatten(), Hop::Host(dst))
                }
            };
            match link {
                Some(link) => self.send_on_link(link, hop, (at_ns, at_ns), bytes, fault_host),
                // No wire there: the datagram is lost, as it always was (the fault plan still
                // draws its fate first, so seeds replay).
                None => {
                    self.network_fate(at_ns, fault_host);
                }
            }
        }
        let slot = &mut self.switches[usize::from(switch)];
        if let Some(at) = slot.device.poll_timeout() {
            let at = at.max(now);
            if slot.wake.is_none_or(|w| at < w) {
                slot.wake = Some(at);
                let epoch = slot.epoch;
                self.schedule(at, Event::SwitchWake { switch, epoch });
            }
        }
    }
}

/// The event of `bytes` reaching `hop` once across a link.
fn arrival<T>(hop: Hop, bytes: Vec<u8>) -> Event<T> {
    match hop {
        Hop::Host(host) => Event::Deliver { host, bytes },
        Hop::Switch { switch, ingress } => Event::AtSwitch { switch, ingress, bytes },
    }
}
