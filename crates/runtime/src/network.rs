//! The network of a real rack: every process's UDP address, which switch each host hangs off,
//! the trunks between switches, and the wires behind host ports.
//!
//! ## Shape and routes
//!
//! A [`Network`] is the real counterpart of a [`pisadb_net::Topology`]: switches `0..S`,
//! hosts `0..H`, each host attached to one switch, switches joined by trunks. A switch process
//! forwards what is not for its own hosts toward the neighbour on a shortest path; the
//! forwarding tables come from the topology ([`Network::topology`], [`Topology::next_hop`]),
//! so the simulated and the real network route alike. A single-switch rack
//! ([`Network::rack`]) has no trunks and no routes: every host is attached.
//!
//! ## Trust
//!
//! A switch process maps each sender's address to a port: one of its hosts' addresses to that
//! host's port, a neighbour's address to the trunk's port. Datagrams from any other address
//! are counted and dropped unread ([`Network::ingress_ports`]).

use crate::error::{Result, RuntimeError};
use crate::wire::{EgressQueues, PortWire};
use pisadb_net::{Endpoint, LinkParams, Topology};
use pisadb_switch::Port;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

/// Addresses, attachments, trunks and wires of a real rack (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// Each switch's UDP address, by switch id.
    pub switches: Vec<SocketAddr>,
    /// Each host's UDP address, by host id.
    pub hosts: Vec<SocketAddr>,
    /// The switch each host hangs off, by host id; empty: every host on switch 0.
    #[serde(default)]
    pub host_switch: Vec<u16>,
    /// Trunks between switches, each a wire both ways.
    #[serde(default)]
    pub trunks: Vec<(u16, u16)>,
    /// The wire behind each host's switch port (loss, delay), by host id; a host without an
    /// entry has a perfect wire.
    #[serde(default)]
    pub wire: Vec<PortWire>,
    /// Strict-priority egress queues in front of every switch port (host ports and trunks), if
    /// the system's program gives its datagrams classes; none: every port is a FIFO.
    #[serde(default)]
    pub egress: Option<EgressQueues>,
}

impl Network {
    /// One switch at `switch` with every host of `hosts` on it.
    pub fn rack(switch: SocketAddr, hosts: Vec<SocketAddr>) -> Self {
        Network { switches: vec![switch], hosts, ..Network::default() }
    }

    /// The shape of `topology` (its switches, hosts, host uplinks and switch-to-switch links)
    /// at the addresses given, by id.
    pub fn from_topology(topology: &Topology, switches: Vec<SocketAddr>, hosts: Vec<SocketAddr>) -> Result<Self> {
        let host_ids = topology.hosts();
        if host_ids != (0..hosts.len() as u16).collect::<Vec<_>>() {
            return Err(RuntimeError::bad_setting(
                "hosts",
                format!("{} addresses", hosts.len()),
                format!("one address per host of the topology ({} hosts, numbered from 0)", host_ids.len()),
            ));
        }
        let host_switch = host_ids.iter().map(|&h| topology.uplink_of(h).unwrap_or(0)).collect();
        let trunks: BTreeSet<(u16, u16)> = topology
            .links
            .iter()
            .filter_map(|l| match (l.from, l.to) {
                (Endpoint::Switch(a), Endpoint::Switch(b)) => Some((a.min(b), a.max(b))),
                _ => None,
            })
            .collect();
        let network = Network {
            switches,
            hosts,
            host_switch,
            trunks: trunks.into_iter().collect(),
            wire: Vec::new(),
            egress: None,
        };
        network.validate()?;
        Ok(network)
    }

    /// Says which part of the network is wrong, if one is: every id in range, addresses
    /// unique, every host reachable from every switch.
    pub fn validate(&self) -> Result<()> {
        let switches = self.switches.len();
        if switches == 0 || switches > usize::from(u16::MAX) {
            return Err(RuntimeError::bad_setting("network.switches", switches, "1..=65535 switch addresses"));
        }
        if self.hosts.len() > usize::from(u16::MAX) {
            return Err(RuntimeError::bad_setting("network.hosts", self.hosts.len(), "at most 65535 host addresses"));
        }
        if !self.host_switch.is_empty() && self.host_switch.len() != self.hosts.len() {
            return Err(RuntimeError::bad_setting(
                "network.host_switch",
                format!("{} entries", self.host_switch.len()),
                format!("none (all on switch 0) or one per host ({})", self.hosts.len()),
            ));
        }
        if let Some(&s) = self.host_switch.iter().find(|&&s| usize::from(s) >= switches) {
            return Err(RuntimeError::bad_setting("network.host_switch", s, format!("a switch id in 0..{switches}")));
        }
        if let Some(&(a, b)) = self.trunks.iter().find(|&&(a, b)| a == b || usize::from(a.max(b)) >= switches) {
            return Err(RuntimeError::bad_setting(
                "network.trunks",
                format!("({a}, {b})"),
                format!("two different switch ids in 0..{switches}"),
            ));
        }
        if self.wire.len() > self.hosts.len() {
            return Err(RuntimeError::bad_setting(
                "network.wire",
                format!("settings for {} ports", self.wire.len()),
                format!("at most one per host ({})", self.hosts.len()),
            ));
        }
        if let Some(queues) = &self.egress {
            queues.validate()?;
        }
        for (port, w) in self.wire.iter().enumerate() {
            w.validate().map_err(|e| match e {
                RuntimeError::BadSetting { setting, value, accepted } => {
                    RuntimeError::BadSetting { setting: format!("wire of port {port}: {setting}"), value, accepted }
                }
                other => other,
            })?;
        }
        let mut seen = BTreeSet::new();
        if let Some(dup) = self.switches.iter().chain(&self.hosts).find(|a| !seen.insert(**a)) {
            return Err(RuntimeError::bad_setting("network address", dup, "every switch and host at its own address"));
        }
        for switch in 0..switches as u16 {
            let reachable = self.hosts_of(switch).len() + self.routes_of(switch).len();
            if reachable != self.hosts.len() {
                return Err(RuntimeError::bad_setting(
                    "network.trunks",
                    format!("{:?}", self.trunks),
                    format!(
                        "trunks that let switch {switch} reach all {} hosts (it reaches {reachable})",
                        self.hosts.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The switch host `host` hangs off.
    pub fn switch_of(&self, host: u16) -> u16 {
        self.host_switch.get(usize::from(host)).copied().unwrap_or(0)
    }

    /// The hosts attached to `switch`, in order.
    pub fn hosts_of(&self, switch: u16) -> Vec<u16> {
        (0..self.hosts.len() as u16).filter(|&h| self.switch_of(h) == switch).collect()
    }

    /// The switches joined to `switch` by a trunk, in order.
    pub fn neighbours_of(&self, switch: u16) -> Vec<u16> {
        let set: BTreeSet<u16> = self
            .trunks
            .iter()
            .filter_map(|&(a, b)| (a == switch).then_some(b).or((b == switch).then_some(a)))
            .collect();
        set.into_iter().collect()
    }

    /// The shape as a [`Topology`] (link figures are nominal: the real wires time themselves).
    pub fn topology(&self) -> Topology {
        let link = LinkParams::ten_gbe();
        let mut topology = Topology::default();
        for host in 0..self.hosts.len() as u16 {
            topology.connect(Endpoint::Host(host), Endpoint::Switch(self.switch_of(host)), &link);
        }
        for &(a, b) in &self.trunks {
            topology.connect(Endpoint::Switch(a), Endpoint::Switch(b), &link);
        }
        topology
    }

    /// `switch`'s forwarding table for the hosts it does not hold: `(host, trunk port)` on a
    /// shortest path, in host order.
    pub fn routes_of(&self, switch: u16) -> Vec<(u16, Port)> {
        if self.trunks.is_empty() {
            return Vec::new();
        }
        let topology = self.topology();
        (0..self.hosts.len() as u16)
            .filter(|&h| self.switch_of(h) != switch)
            .filter_map(|h| match topology.next_hop(Endpoint::Switch(switch), Endpoint::Host(h)) {
                Some(Endpoint::Switch(next)) => Some((h, Port::Switch(next))),
                _ => None,
            })
            .collect()
    }

    /// Which port of `switch` each trusted sender's address arrives by: its hosts' and its
    /// neighbours'.
    pub fn ingress_ports(&self, switch: u16) -> BTreeMap<SocketAddr, Port> {
        let hosts = self.hosts_of(switch).into_iter().map(|h| (self.hosts[usize::from(h)], Port::Host(h)));
        let trunks = self.neighbours_of(switch).into_iter().map(|s| (self.switches[usize::from(s)], Port::Switch(s)));
        hosts.chain(trunks).collect()
    }

    /// Where a datagram leaving `port` goes: the host's or the neighbour switch's address (the
    /// CPU port's host for [`Port::ControlPlane`], given as `controller`).
    pub fn port_addr(&self, port: Port, controller: Option<u16>) -> Option<SocketAddr> {
        match port {
            Port::Host(h) => self.hosts.get(usize::from(h)).copied(),
            Port::Switch(s) => self.switches.get(usize::from(s)).copied(),
            Port::ControlPlane => controller.and_then(|h| self.hosts.get(usize::from(h)).copied()),
        }
    }

    /// The address of the switch host `host` sends everything to.
    pub fn uplink_addr(&self, host: u16) -> SocketAddr {
        self.switches[usize::from(self.switch_of(host))]
    }

    /// The wire behind host `host`'s switch port.
    pub fn wire_of(&self, host: u16) -> PortWire {
        self.wire.get(usize::from(host)).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(first_port: u16, n: u16) -> Vec<SocketAddr> {
        (0..n).map(|i| SocketAddr::from(([127, 0, 0, 1], first_port + i))).collect()
    }

    #[test]
    fn a_rack_attaches_every_host_and_needs_no_routes() {
        let net = Network::rack(addrs(9000, 1)[0], addrs(9100, 3));
        net.validate().unwrap();
        assert_eq!(net.hosts_of(0), vec![0, 1, 2]);
        assert!(net.routes_of(0).is_empty());
        assert_eq!(net.ingress_ports(0).len(), 3);
    }

    #[test]
    fn a_line_of_switches_routes_far_hosts_through_the_next_switch() {
        let link = LinkParams::ten_gbe();
        let topology = Topology::line(3, 2, &link, &link).unwrap();
        let net = Network::from_topology(&topology, addrs(9000, 3), addrs(9100, 6)).unwrap();
        assert_eq!(net.trunks, vec![(0, 1), (1, 2)]);
        assert_eq!(net.hosts_of(1), vec![2, 3]);
        assert_eq!(net.neighbours_of(1), vec![0, 2]);
        let routes = net.routes_of(0);
        assert_eq!(routes, (2..6).map(|h| (h, Port::Switch(1))).collect::<Vec<_>>());
        let middle = net.routes_of(1);
        assert_eq!(middle[0], (0, Port::Switch(0)));
        assert_eq!(middle[3], (5, Port::Switch(2)));
        assert_eq!(net.ingress_ports(1).get(&net.switches[2]), Some(&Port::Switch(2)));
        assert_eq!(net.uplink_addr(4), net.switches[2]);
    }

    #[test]
    fn a_bad_network_is_refused_with_the_field_named() {
        let mut net = Network::rack(addrs(9000, 1)[0], addrs(9100, 2));
        net.host_switch = vec![0, 3];
        assert!(net.validate().unwrap_err().to_string().contains("network.host_switch 3"), "names the field");
        net.switches = addrs(9000, 4);
        let err = net.validate().unwrap_err().to_string();
        assert!(err.contains("network.trunks") && err.contains("reach all 2 hosts"), "{err}");
        net.trunks = vec![(0, 3), (1, 1)];
        assert!(net.validate().unwrap_err().to_string().contains("(1, 1)"));
        let mut dup = Network::rack(addrs(9000, 1)[0], addrs(9000, 1));
        assert!(dup.validate().unwrap_err().to_string().contains("its own address"));
        dup.hosts = addrs(9100, 1);
        dup.wire = vec![PortWire { loss: 2.0, ..PortWire::default() }];
        let err = dup.validate().unwrap_err().to_string();
        assert!(err.contains("wire of port 0: loss 2"), "{err}");
    }
}
