//! A switch as its drivers see it, whatever program it runs.
//!
//! The simulator and the real runtime move datagrams in and out of switches and ask when each
//! next needs to run; they never look inside a program. [`SwitchDevice`] is that view. Every
//! [`Switch<P>`] is one, and a system whose racks use several programs (a transaction engine
//! in one mode, a lock manager in another) wraps them in its own enum that forwards to the one
//! it holds, so the driver stays generic and dispatch stays static.

use crate::pipeline::{Switch, SwitchStats, Transmit};
use crate::ports::{Port, PortError};
use crate::program::Program;
use crate::registers::RegisterFile;
use pisadb_core::Nanos;

/// The driver's view of a switch.
pub trait SwitchDevice {
    /// Connects host `host` to a port of this switch.
    fn attach(&mut self, host: u16);
    /// A datagram from host `from` arrives at `now`.
    fn handle_datagram(&mut self, now: Nanos, from: u16, bytes: &[u8]);
    /// A datagram arrives at `now` through port `ingress` (a host, a neighbour switch, the CPU).
    fn handle_datagram_from(&mut self, now: Nanos, ingress: Port, bytes: &[u8]);
    /// Connects a port toward neighbour switch `neighbour`.
    fn connect_switch(&mut self, neighbour: u16);
    /// Sends traffic for `dst_host` (not attached here) out of `port`.
    fn set_route(&mut self, dst_host: u16, port: Port) -> Result<(), PortError>;
    /// Puts host `host` behind the CPU port: the controller.
    fn set_controller(&mut self, host: u16);
    /// Gives the switch its id among the network's switches (control requests addressed to
    /// it by id are its own: `pisadb_wire::control::switch_address`).
    fn set_switch_id(&mut self, id: u16);
    /// The host behind the CPU port, if one is set.
    fn controller(&self) -> Option<u16>;
    /// Runs everything due at or before `now`.
    fn handle_timeout(&mut self, now: Nanos);
    /// When the switch next needs [`SwitchDevice::handle_timeout`], if ever.
    fn poll_timeout(&self) -> Option<Nanos>;
    /// The next datagram leaving the switch.
    fn poll_transmit(&mut self) -> Option<Transmit>;
    /// What the switch has done so far.
    fn stats(&self) -> &SwitchStats;
    /// The register memory, as the control plane reads it.
    fn registers(&self) -> &RegisterFile;
}

impl<P: Program> SwitchDevice for Switch<P> {
    fn attach(&mut self, host: u16) {
        Switch::attach(self, host)
    }
    fn handle_datagram(&mut self, now: Nanos, from: u16, bytes: &[u8]) {
        Switch::handle_datagram(self, now, from, bytes)
    }
    fn handle_datagram_from(&mut self, now: Nanos, ingress: Port, bytes: &[u8]) {
        Switch::handle_datagram_from(self, now, ingress, bytes)
    }
    fn connect_switch(&mut self, neighbour: u16) {
        Switch::connect_switch(self, neighbour)
    }
    fn set_route(&mut self, dst_host: u16, port: Port) -> Result<(), PortError> {
        Switch::set_route(self, dst_host, port)
    }
    fn set_controller(&mut self, host: u16) {
        Switch::set_controller(self, host)
    }
    fn controller(&self) -> Option<u16> {
        Switch::controller(self)
    }
    fn set_switch_id(&mut self, id: u16) {
        Switch::set_switch_id(self, id)
    }
    fn handle_timeout(&mut self, now: Nanos) {
        Switch::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        Switch::poll_timeout(self)
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        Switch::poll_transmit(self)
    }
    fn stats(&self) -> &SwitchStats {
        Switch::stats(self)
    }
    fn registers(&self) -> &RegisterFile {
        Switch::registers(self)
    }
}

/// Runs a switch on its own, as tests and benchmarks do: each `(time, from_host, datagram)` of
/// `arrivals` (sorted here by time) enters at its time, timeouts run in between, and after the
/// last arrival the switch runs until idle. Returns every datagram it transmitted, in order, or
/// an error if it was still busy after `max_wakeups` wake-ups (a livelock: every pending event
/// either emits, drops or recirculates, and a recirculating packet must eventually finish).
pub fn run_alone<S: SwitchDevice>(
    switch: &mut S,
    mut arrivals: Vec<(Nanos, u16, Vec<u8>)>,
    max_wakeups: u64,
) -> Result<Vec<Transmit>, String> {
    arrivals.sort_by_key(|a| a.0);
    let mut out = Vec::new();
    for (at, from, bytes) in arrivals {
        while let Some(t) = switch.poll_timeout().filter(|&t| t <= at) {
            switch.handle_timeout(t);
        }
        switch.handle_datagram(at, from, &bytes);
        out.extend(std::iter::from_fn(|| switch.poll_transmit()));
    }
    for _ in 0..max_wakeups {
        let Some(t) = switch.poll_timeout() else { return Ok(out) };
        switch.handle_timeout(t);
        out.extend(std::iter::from_fn(|| switch.poll_transmit()));
    }
    match switch.poll_timeout() {
        None => Ok(out),
        Some(t) => Err(format!("the switch was still busy after {max_wakeups} wake-ups (next at {t} ns): livelock")),
    }
}
