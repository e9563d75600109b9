//! The rack's switch: the pipeline model running the program the mode needs.

use crate::programs::lock_manager::LockManager;
use crate::programs::p4db::P4dbEngine;
use pisadb_core::Nanos;
use pisadb_switch::registers::RegisterFile;
use pisadb_switch::{Port, PortError, Switch, SwitchDevice, SwitchStats, Transmit};

/// A switch running P4DB's engine (P4DB and No-Switch modes: No-Switch only forwards) or the
/// lock manager (LM-Switch).
pub enum RackSwitch {
    /// The P4DB transaction engine.
    P4db(Switch<P4dbEngine>),
    /// The LM-Switch lock manager.
    LockManager(Switch<LockManager>),
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            RackSwitch::P4db($s) => $e,
            RackSwitch::LockManager($s) => $e,
        }
    };
}

impl SwitchDevice for RackSwitch {
    fn attach(&mut self, node: u16) {
        each!(self, s => s.attach(node))
    }
    fn handle_datagram(&mut self, now: Nanos, from: u16, bytes: &[u8]) {
        each!(self, s => s.handle_datagram(now, from, bytes))
    }
    fn handle_datagram_from(&mut self, now: Nanos, ingress: Port, bytes: &[u8]) {
        each!(self, s => s.handle_datagram_from(now, ingress, bytes))
    }
    fn connect_switch(&mut self, neighbour: u16) {
        each!(self, s => s.connect_switch(neighbour))
    }
    fn set_route(&mut self, dst_host: u16, port: Port) -> Result<(), PortError> {
        each!(self, s => s.set_route(dst_host, port))
    }
    fn set_controller(&mut self, host: u16) {
        each!(self, s => s.set_controller(host))
    }
    fn controller(&self) -> Option<u16> {
        each!(self, s => s.controller())
    }
    fn set_switch_id(&mut self, id: u16) {
        each!(self, s => s.set_switch_id(id))
    }
    fn handle_timeout(&mut self, now: Nanos) {
        each!(self, s => s.handle_timeout(now))
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        each!(self, s => s.poll_timeout())
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        each!(self, s => s.poll_transmit())
    }
    fn stats(&self) -> &SwitchStats {
        each!(self, s => s.stats())
    }
    fn registers(&self) -> &RegisterFile {
        each!(self, s => s.registers())
    }
}

impl RackSwitch {
    /// A register cell's low half.
    pub fn register_value(&self, register: u8, index: u32) -> Option<i64> {
        self.registers().read(register, index).ok().map(|(lo, _)| lo)
    }
}
