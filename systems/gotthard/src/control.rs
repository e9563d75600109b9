//! Gotthard's control plane: the switch's mode and the key → cell map, installed over the
//! platform's control channel.
//!
//! [`ControlPlane`] is the configuration: a mode and the keys the switch may cache. Its
//! [`ControlPlane::ops`] are the control operations that install it — the mode entry of
//! [`MODE_TABLE`], and per key one entry in every op slot's key map (the program looks a
//! table up once per pass, so each op slot has its own copy). Keys get cells one by one,
//! round-robin over the arrays (`i`-th key: array `i % ARRAYS + 1`, index `i / ARRAYS`), so no
//! two keys share a cell and consecutive keys sit in different arrays (stages).
//!
//! [`Controller`] is the host that sends those operations as `Control` frames to the switch
//! and waits for every acknowledgement. It resends what is unanswered every
//! [`RESEND_NS`] (the control channel crosses a link like any other and may lose a datagram),
//! and stops once everything is acknowledged, so a run still drains. A refused operation
//! (a table full, a value too wide) is reported as [`ControllerEvent::Refused`], never
//! retried.
//!
//! A restarted switch comes back empty, tables included; the control plane reinstalls its
//! configuration before the switch takes traffic again ([`configure`], which applies the same
//! operations directly, as a driver's start-up script does). Until the mode is installed the
//! program only forwards, which is always correct.

use crate::program::{
    cell_value, mode_code, Gotthard, Mode, ARRAYS, ARRAY_ENTRIES, KEY_MAP_ENTRIES, KEY_MAP_TABLE0, MODE_TABLE,
};
use crate::wire::MAX_OPS;
use pisadb_core::Nanos;
use pisadb_host::{Host, HostOutbox, Route, Send, TraceBytes, TraceHash};
use pisadb_switch::Switch;
use pisadb_wire::control::{ControlMessage, ControlOp, ControlStatus};
use pisadb_wire::{Frame, Kind, SWITCH_ID};
use std::collections::BTreeMap;

/// The controller resends unacknowledged operations this often.
pub const RESEND_NS: Nanos = 1_000_000;

/// The control plane's configuration of the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlPlane {
    /// The switch's mode.
    pub mode: Mode,
    /// The keys the switch may cache, in allocation order.
    pub keys: Vec<u32>,
}

impl ControlPlane {
    /// The cell the `i`-th key gets.
    pub fn placement(i: usize) -> (u8, u32) {
        let arrays = usize::from(ARRAYS);
        ((i % arrays) as u8 + 1, (i / arrays) as u32)
    }

    /// The control operations that install this configuration, or why it cannot be installed.
    pub fn ops(&self) -> Result<Vec<ControlOp>, String> {
        let capacity = (u64::from(ARRAYS) * u64::from(ARRAY_ENTRIES)).min(u64::from(KEY_MAP_ENTRIES));
        if self.keys.len() as u64 > capacity {
            return Err(format!("{} cacheable keys: the switch's key maps hold at most {capacity}", self.keys.len()));
        }
        let mut distinct = self.keys.clone();
        distinct.sort_unstable();
        if let Some(w) = distinct.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("key {} is listed twice: one key, one cell", w[0]));
        }
        let mut ops = vec![ControlOp::InsertEntry { table: MODE_TABLE, key: 0, value: mode_code(self.mode) }];
        for (i, key) in self.keys.iter().enumerate() {
            let (register, index) = Self::placement(i);
            for slot in 0..MAX_OPS as u8 {
                ops.push(ControlOp::InsertEntry {
                    table: KEY_MAP_TABLE0 + slot,
                    key: u64::from(*key),
                    value: cell_value(register, index),
                });
            }
        }
        Ok(ops)
    }
}

/// Installs `plane` on `switch` now (a restarted switch's start-up, or a test's setup).
pub fn configure(switch: &mut Switch<Gotthard>, plane: &ControlPlane) -> Result<(), String> {
    for op in plane.ops()? {
        let (status, _) = switch.apply_control(&op);
        if status != ControlStatus::Ok {
            return Err(format!("the switch refused {op:?}: {status:?}"));
        }
    }
    Ok(())
}

/// What the controller reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerEvent {
    /// Every operation was acknowledged.
    Installed,
    /// The switch refused an operation.
    Refused(ControlStatus),
    /// A datagram was not a control reply, with the reason.
    Rejected(&'static str),
}

/// The controller's timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resend;

impl TraceBytes for Resend {
    fn trace(&self, hash: &mut TraceHash) {
        hash.write(b"control resend");
    }
}

/// The controller host.
#[derive(Debug)]
pub struct Controller {
    /// This host's address.
    address: u16,
    /// Unacknowledged operations by request id.
    pending: BTreeMap<u32, ControlOp>,
    /// Whether a resend timer is pending.
    timer_armed: bool,
}

impl Controller {
    /// A controller at `address` that will install `plane`.
    pub fn new(address: u16, plane: &ControlPlane) -> Result<Self, String> {
        let pending = (1..).zip(plane.ops()?).collect();
        Ok(Controller { address, pending, timer_armed: false })
    }

    /// Operations not acknowledged yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn send_pending(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        for (&request_id, &op) in &self.pending {
            let mut bytes = Vec::new();
            Frame { kind: Kind::CONTROL, src: self.address, dst: SWITCH_ID }.encode(&mut bytes);
            ControlMessage::Request { request_id, op }.encode(&mut bytes);
            out.sends.push(Send { dst: SWITCH_ID, bytes });
        }
        if !self.pending.is_empty() && !self.timer_armed {
            self.timer_armed = true;
            out.timers.push((now + RESEND_NS, Resend));
        }
    }
}

impl Host for Controller {
    type Timer = Resend;
    type Log = ();
    type Event = ControllerEvent;

    fn cores(&self) -> u16 {
        1
    }

    fn start(&mut self, now: Nanos, out: &mut HostOutbox<Self>) {
        self.send_pending(now, out);
    }

    fn route(&self, _bytes: &[u8]) -> Route {
        Route::Core(0)
    }

    fn timer_core(&self, _timer: &Resend) -> u16 {
        0
    }

    fn handle_datagram(&mut self, _now: Nanos, bytes: &[u8], out: &mut HostOutbox<Self>) {
        let reply = Frame::decode(bytes).and_then(|(frame, payload)| match frame.kind {
            Kind::CONTROL => ControlMessage::decode(payload),
            other => Err(pisadb_wire::DecodeError::WrongKind(other)),
        });
        match reply {
            Ok(ControlMessage::Reply { request_id, status, .. }) => {
                if self.pending.remove(&request_id).is_none() {
                    return; // a duplicate acknowledgement
                }
                if status != ControlStatus::Ok {
                    out.events.push(ControllerEvent::Refused(status));
                }
                if self.pending.is_empty() {
                    out.events.push(ControllerEvent::Installed);
                }
            }
            Ok(ControlMessage::Request { .. }) => out.events.push(ControllerEvent::Rejected("request_to_controller")),
            Err(e) => out.events.push(ControllerEvent::Rejected(e.reason())),
        }
    }

    fn handle_timer(&mut self, now: Nanos, _timer: Resend, out: &mut HostOutbox<Self>) {
        self.timer_armed = false;
        self.send_pending(now, out);
    }

    fn stop(&mut self) {}

    fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_switch::SwitchProfile;

    #[test]
    fn keys_get_distinct_cells_round_robin_over_the_arrays_in_every_op_slot() {
        let plane = ControlPlane { mode: Mode::OptimisticAbort, keys: vec![7, 3, 12] };
        let ops = plane.ops().unwrap();
        assert_eq!(ops.len(), 1 + 3 * MAX_OPS);
        assert_eq!(ops[0], ControlOp::InsertEntry { table: MODE_TABLE, key: 0, value: 3 });
        assert_eq!(ControlPlane::placement(0), (1, 0));
        assert_eq!(ControlPlane::placement(8), (1, 1), "the ninth key: the first array again, next index");
        assert!(ops.contains(&ControlOp::InsertEntry { table: KEY_MAP_TABLE0 + 9, key: 12, value: cell_value(3, 0) }));
        let err = ControlPlane { mode: Mode::Forward, keys: vec![1, 1] }.ops().unwrap_err();
        assert!(err.contains("key 1 is listed twice"), "{err}");
        let many = ControlPlane { mode: Mode::Forward, keys: (0..=KEY_MAP_ENTRIES).collect() };
        assert!(many.ops().unwrap_err().contains("at most 4096"));
    }

    #[test]
    fn configure_installs_the_plane_on_a_switch() {
        let mut switch = Switch::new(SwitchProfile::tofino1(), Gotthard::new()).unwrap();
        configure(&mut switch, &ControlPlane { mode: Mode::ReadCache, keys: vec![5] }).unwrap();
        assert_eq!(switch.tables().get(MODE_TABLE, 0), Ok(Some(mode_code(Mode::ReadCache))));
        assert_eq!(switch.tables().get(KEY_MAP_TABLE0 + 4, 5), Ok(Some(cell_value(1, 0))));
    }

    #[test]
    fn the_controller_resends_until_every_operation_is_acknowledged() {
        let plane = ControlPlane { mode: Mode::EarlyAbort, keys: vec![1] };
        let mut controller = Controller::new(2, &plane).unwrap();
        let mut out = HostOutbox::<Controller>::default();
        controller.start(0, &mut out);
        assert_eq!(out.sends.len(), 1 + MAX_OPS);
        assert_eq!(out.timers, vec![(RESEND_NS, Resend)]);
        let mut switch = Switch::new(SwitchProfile::tofino1(), Gotthard::new()).unwrap();
        // Only the first request is answered; the timer resends the rest.
        let answer = |bytes: &[u8], switch: &mut Switch<Gotthard>| {
            let (_, payload) = Frame::decode(bytes).unwrap();
            let ControlMessage::Request { request_id, op } = ControlMessage::decode(payload).unwrap() else {
                panic!("a request")
            };
            let (status, result) = switch.apply_control(&op);
            let mut reply = Vec::new();
            Frame { kind: Kind::CONTROL, src: SWITCH_ID, dst: 2 }.encode(&mut reply);
            ControlMessage::Reply { request_id, op, status, result }.encode(&mut reply);
            reply
        };
        let first = answer(&out.sends[0].bytes, &mut switch);
        let mut next = HostOutbox::<Controller>::default();
        controller.handle_datagram(1, &first, &mut next);
        controller.handle_datagram(2, &first, &mut next);
        assert_eq!(controller.pending(), MAX_OPS, "a duplicate acknowledgement counts once");
        controller.handle_timer(RESEND_NS, Resend, &mut next);
        assert_eq!(next.sends.len(), MAX_OPS);
        for send in std::mem::take(&mut next.sends) {
            let reply = answer(&send.bytes, &mut switch);
            controller.handle_datagram(3, &reply, &mut next);
        }
        assert!(controller.is_idle());
        assert_eq!(next.events, vec![ControllerEvent::Installed]);
        next.timers.clear();
        controller.handle_timer(2 * RESEND_NS, Resend, &mut next);
        assert!(next.sends.is_empty() && next.timers.is_empty(), "nothing left to send, no new timer");
    }
}
