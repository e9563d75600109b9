//! The explicit receive queues of hosts that sort their receive batches (the parent module's
//! essay, "Receive queues", says why and how): datagrams for a busy core wait in its `waiting`
//! list; when the core frees, the whole list becomes the next batch, stable-sorted by class,
//! handed over one handler at a time.

use super::{Event, World};
use crate::world::Observer;
use pisadb_core::Nanos;
use pisadb_host::{Host, Route};
use pisadb_switch::SwitchDevice;

/// The receive queue of one core of a host that sorts its batches (see "Receive queues").
#[derive(Debug, Default)]
pub(super) struct RxQueue {
    /// Datagrams that arrived since the current batch was taken, in arrival order, each with
    /// the class the host gave it: the next batch.
    pub(super) waiting: Vec<(u8, Vec<u8>)>,
    /// The batch being handled, sorted, next first.
    pub(super) batch: std::collections::VecDeque<Vec<u8>>,
    /// Whether an [`Event::CoreFree`] for this core is scheduled.
    pub(super) armed: bool,
}

impl RxQueue {
    /// Datagrams queued here, in the batch being handled and after it.
    pub(super) fn len(&self) -> usize {
        self.waiting.len() + self.batch.len()
    }
}

impl<H: Host, S: SwitchDevice, O: Observer<H, S>> World<H, S, O> {
    /// A datagram reaches a host that sorts its receive batches: handled at once if its core is
    /// free with nothing queued, else queued for the core's next batch.
    pub(super) fn enqueue(&mut self, now: Nanos, host: u16, bytes: Vec<u8>) {
        let h = usize::from(host);
        let core = match self.hosts[h].route(&bytes) {
            Route::Core(c) => usize::from(c),
            Route::AnyCore => {
                let (cores, rx) = (&self.cores[h], &self.rx[h]);
                (0..cores.len()).min_by_key(|&c| (cores[c].max(now), rx[c].len(), c)).unwrap_or(0)
            }
        };
        if self.cores[h][core] <= now && self.rx[h][core].len() == 0 {
            return self.handle_datagram_on(now, host, core, bytes);
        }
        let class = self.hosts[h].receive_class(&bytes);
        self.rx[h][core].waiting.push((class, bytes));
        self.arm_core(now, host, core);
    }

    /// Schedules an [`Event::CoreFree`] for `core` of `host` when it frees, unless one is.
    pub(super) fn arm_core(&mut self, now: Nanos, host: u16, core: usize) {
        let h = usize::from(host);
        let rx = &mut self.rx[h][core];
        if rx.armed || rx.len() == 0 {
            return;
        }
        rx.armed = true;
        let (at, epoch) = (self.cores[h][core].max(now), self.host_epoch[h]);
        self.schedule(at, Event::CoreFree { host, core: core as u16, epoch });
    }

    /// `core` of `host` may be free: hands over the next datagram of its batch, taking and
    /// sorting a new batch if the last one is done.
    pub(super) fn core_free(&mut self, now: Nanos, host: u16, core: usize, epoch: u32) {
        let h = usize::from(host);
        if self.host_down[h] || epoch != self.host_epoch[h] {
            return; // queued for an incarnation that crashed (its queues went with it)
        }
        self.rx[h][core].armed = false;
        if self.cores[h][core] > now {
            return self.arm_core(now, host, core); // a timer took the core first
        }
        let rx = &mut self.rx[h][core];
        if rx.batch.is_empty() {
            // Stable: arrival order within a class. Both lists keep their capacity.
            rx.waiting.sort_by_key(|&(class, _)| std::cmp::Reverse(class));
            rx.batch.extend(rx.waiting.drain(..).map(|(_, bytes)| bytes));
        }
        let Some(bytes) = rx.batch.pop_front() else { return };
        self.handle_datagram_on(now, host, core, bytes);
        self.arm_core(now, host, core);
    }
}
