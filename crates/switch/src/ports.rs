//! The ports of a switch and which one a datagram leaves by.
//!
//! A switch has three kinds of ports ([`Port`]): one per attached host, one per neighbour
//! switch (so that switches can form a network: a rack's leaf, a tree of switches as in
//! SwitchTx), and the CPU port toward the controller. [`Ports`] keeps them together with a
//! forwarding table `destination host -> egress port` that the driver fills from the topology
//! (the simulator's or the real runtime's; the switch computes no routes itself).
//!
//! The egress rule is one for all traffic, forwarded or emitted by a program: a datagram for
//! an attached host leaves by that host's port; one for any other host leaves by the port its
//! route names; with neither it has nowhere to go. With no routes set, this is exactly the
//! single-switch rule of before: attached hosts only.
//!
//! On ingress, only host ports check the frame's source against the port (a host may not
//! speak for another). A neighbour switch forwards what others sent, and the CPU port carries
//! what the controller injects, so both are trusted: the check happened at the network's edge.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// A port of a switch, by what is on its other side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Port {
    /// The port of attached host `id`.
    Host(u16),
    /// The port toward neighbour switch `id` (an id the driver chooses, unique among the
    /// switch's neighbours).
    Switch(u16),
    /// The CPU port: what leaves by it reaches the controller host
    /// ([`crate::Switch::set_controller`]); what arrives by it comes from the controller.
    ControlPlane,
}

/// A route the switch cannot use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum PortError {
    /// The route names a port the switch does not have, or the CPU port.
    #[error(
        "route to host {dst_host} names {port:?}, which is not a port of this switch \
         (accepted: Port::Host of an attached host or Port::Switch of a connected neighbour)"
    )]
    NoSuchPort {
        /// The destination host of the route.
        dst_host: u16,
        /// The port it named.
        port: Port,
    },
}

/// The ports of one switch and its forwarding table.
#[derive(Clone, Debug, Default)]
pub struct Ports {
    /// Attached hosts, each on its own port.
    hosts: BTreeSet<u16>,
    /// Neighbour switches, each on its own port.
    switches: BTreeSet<u16>,
    /// Egress port of hosts that are not attached.
    routes: BTreeMap<u16, Port>,
    /// The host behind the CPU port, if any.
    controller: Option<u16>,
}

impl Ports {
    /// Connects host `host` to a port.
    pub fn attach(&mut self, host: u16) {
        self.hosts.insert(host);
    }

    /// Connects neighbour switch `switch` to a port.
    pub fn connect_switch(&mut self, switch: u16) {
        self.switches.insert(switch);
    }

    /// Sets the egress port of traffic for `dst_host` (when it is not attached).
    pub fn set_route(&mut self, dst_host: u16, port: Port) -> Result<(), PortError> {
        if !self.exists(port) || port == Port::ControlPlane {
            return Err(PortError::NoSuchPort { dst_host, port });
        }
        self.routes.insert(dst_host, port);
        Ok(())
    }

    /// Forgets the route of `dst_host`; returns the port it named.
    pub fn clear_route(&mut self, dst_host: u16) -> Option<Port> {
        self.routes.remove(&dst_host)
    }

    /// Puts host `host` behind the CPU port.
    pub fn set_controller(&mut self, host: u16) {
        self.controller = Some(host);
    }

    /// The host behind the CPU port.
    pub fn controller(&self) -> Option<u16> {
        self.controller
    }

    /// Whether host `host` is attached.
    pub fn is_attached(&self, host: u16) -> bool {
        self.hosts.contains(&host)
    }

    /// Whether the switch has port `port` (the CPU port only once a controller is set).
    pub fn exists(&self, port: Port) -> bool {
        match port {
            Port::Host(h) => self.hosts.contains(&h),
            Port::Switch(s) => self.switches.contains(&s),
            Port::ControlPlane => self.controller.is_some(),
        }
    }

    /// The port traffic for host `dst` leaves by: its own if attached, else its route's.
    #[inline]
    pub fn egress(&self, dst: u16) -> Option<Port> {
        if self.hosts.contains(&dst) {
            return Some(Port::Host(dst));
        }
        self.routes.get(&dst).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attached_hosts_win_over_routes_and_unknown_hosts_have_no_egress() {
        let mut ports = Ports::default();
        ports.attach(1);
        ports.connect_switch(7);
        ports.set_route(2, Port::Switch(7)).unwrap();
        ports.set_route(1, Port::Switch(7)).unwrap();
        assert_eq!(ports.egress(1), Some(Port::Host(1)));
        assert_eq!(ports.egress(2), Some(Port::Switch(7)));
        assert_eq!(ports.egress(3), None);
        assert_eq!(ports.clear_route(2), Some(Port::Switch(7)));
        assert_eq!(ports.egress(2), None);
    }

    #[test]
    fn routes_must_name_an_existing_host_or_switch_port() {
        let mut ports = Ports::default();
        ports.set_controller(9);
        for port in [Port::Switch(3), Port::Host(4), Port::ControlPlane] {
            let err = ports.set_route(5, port).unwrap_err();
            assert_eq!(err, PortError::NoSuchPort { dst_host: 5, port });
            assert!(err.to_string().contains("accepted: Port::Host"), "{err}");
        }
    }
}
