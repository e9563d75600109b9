//! Crashes and restarts under a fault plan: a crash takes a host or switch down and bumps its
//! epoch (events for the old incarnation are then dropped); a restart rebuilds it from the
//! logs the world kept as the hosts' disks, through the system's [`Restarts`].

use super::{connect, RxQueue, World};
use crate::faults::{FaultStats, Faults, Target};
use crate::world::{Observer, Restarts};
use pisadb_core::rng::SeededRng;
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox};
use pisadb_switch::SwitchDevice;

/// The fault plan in force and what it needs.
pub(super) struct FaultState<H: Host, S> {
    pub(super) plan: Faults,
    pub(super) rng: SeededRng,
    pub(super) restarts: Box<dyn Restarts<H, S>>,
    pub(super) stats: FaultStats,
    /// When progress is demanded from: the network has healed and every restart is done.
    pub(super) healthy_from: Nanos,
}

impl<H: Host, S: SwitchDevice, O: Observer<H, S>> World<H, S, O> {
    pub(super) fn count(&mut self, what: impl FnOnce(&mut FaultStats)) {
        if let Some(f) = self.faults.as_mut() {
            what(&mut f.stats);
        }
    }

    pub(super) fn crash(&mut self, target: Target) {
        match target {
            Target::Node(n) => {
                let i = usize::from(n);
                self.host_down[i] = true;
                self.host_epoch[i] += 1;
                // What waited in its receive queues was in its memory.
                self.rx[i].iter_mut().for_each(|q| *q = RxQueue::default());
                self.count(|s| s.node_crashes += 1);
            }
            Target::Switch(s) => {
                let slot = &mut self.switches[usize::from(s)];
                slot.down = true;
                slot.epoch += 1;
                slot.wake = None;
                self.count(|s| s.switch_crashes += 1);
            }
        }
    }

    pub(super) fn restart(&mut self, now: Nanos, target: Target) -> Result<(), String> {
        // Hosts fence off every switch rebuilt so far; with one switch, its crash count.
        let epoch = self.rebuilt_switch_epoch();
        let hosts = self.hosts.len() as u16;
        let Some(f) = self.faults.as_mut() else { return Err("no restart plan".into()) };
        match target {
            Target::Node(n) => {
                let i = usize::from(n);
                let mut host = f.restarts.host(n, &self.logs[i])?;
                if self.stopping {
                    host.stop();
                }
                host.fence_switch(epoch);
                let mut out = HostOutbox::<H>::default();
                host.start(now, &mut out);
                self.hosts[i] = host;
                self.cores[i].iter_mut().for_each(|c| *c = now);
                self.host_down[i] = false;
                self.apply(n, now, now, out);
            }
            Target::Switch(s) => {
                let mut device = f.restarts.switch(s, &self.logs, epoch)?;
                connect(&self.topology, s, hosts, &mut device).map_err(|e| e.to_string())?;
                // Its CPU port leads to the same controller as before the crash.
                if let Some(controller) = self.switches[usize::from(s)].device.controller() {
                    device.set_controller(controller);
                }
                // The control plane collected every log: each host has fenced off the crashed
                // switch, whose answers may still be on the wire (a host down now is fenced as
                // it restarts).
                for (host, down) in self.hosts.iter_mut().zip(&self.host_down) {
                    if !down {
                        host.fence_switch(epoch);
                    }
                }
                let slot = &mut self.switches[usize::from(s)];
                slot.device = device;
                slot.down = false;
            }
        }
        Ok(())
    }

    /// The epoch of the switches rebuilt after the latest crash: their crashes so far.
    pub(super) fn rebuilt_switch_epoch(&self) -> u16 {
        let crashes: u32 = self.switches.iter().map(|s| s.epoch).sum();
        u16::try_from(crashes).unwrap_or(u16::MAX)
    }

    /// Whether a crash of `target` planned in `[start, end)` cuts short what happens then.
    pub(super) fn crashes_within(&self, target: Target, start: Nanos, end: Nanos) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| f.plan.crashes.iter().any(|c| c.target == target && (start..end).contains(&c.at_ns)))
    }
}
