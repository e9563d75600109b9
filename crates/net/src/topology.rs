//! Hosts, switches, the links between them, and the forwarding tables derived from them.
//!
//! ## Shape
//!
//! A [`Topology`] is a directed graph: hosts (database nodes, clients, stores) and switches,
//! joined by one-way [`Link`]s, each with its own [`LinkParams`] and port discipline. Links are
//! added per direction because the two directions of a wire are independent queues (and may
//! differ, as a WAN's asymmetric route would). The builders cover the papers' shapes and
//! number everything the same way every time:
//!
//! - [`Topology::rack`]: every host on switch 0 (P4DB's testbed);
//! - [`Topology::line`]: switches in a chain, each with its own hosts;
//! - [`Topology::core_and_tors`]: a core switch 0 over top-of-rack switches (SwitchTx's tree);
//! - [`Topology::hierarchy`]: core, aggregation and top-of-rack levels (TransKV's data center).
//!
//! Hosts are numbered consecutively switch by switch in switch order, so host ids say where a
//! host sits. Anything else (a second core, clients on the core, a WAN link between two racks)
//! is added with [`Topology::connect`] or [`Topology::add`].
//!
//! ## Forwarding
//!
//! Switches forward, hosts do not: a route may start and end at a host but never pass through
//! one (a multi-homed host is not a bridge). For every switch and every destination the table
//! holds the next hop on a shortest path (fewest links) and the path's length. Ties break
//! towards the lowest [`Endpoint`] (hosts before switches, then by number), which is exactly
//! what the former breadth-first search in endpoint order produced, so a rack's routes are
//! unchanged. The table is derived once, on the first lookup after the links last changed, by
//! a breadth-first search backwards from each destination; a lookup is then a `BTreeMap` probe,
//! `O(log n)`. It holds `switches × (hosts + switches)` entries, which is small for anything a
//! simulated data center needs. A host's next hop is its neighbour closest to the destination,
//! read off its uplink switches' tables.

use crate::error::{check_range, NetError};
use crate::link::{Link, LinkParams};
use crate::port::PortDiscipline;
use serde::{Deserialize, Serialize};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::OnceLock;

/// An end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Endpoint {
    /// A database node.
    Host(u16),
    /// A switch.
    Switch(u16),
}

impl Endpoint {
    /// Whether this endpoint forwards frames that are not its own.
    fn forwards(self) -> bool {
        matches!(self, Endpoint::Switch(_))
    }

    /// The host's number, if this is a host.
    fn host_id(self) -> Option<u16> {
        match self {
            Endpoint::Host(host) => Some(host),
            Endpoint::Switch(_) => None,
        }
    }

    /// The switch's number, if this is a switch.
    fn switch_id(self) -> Option<u16> {
        match self {
            Endpoint::Switch(switch) => Some(switch),
            Endpoint::Host(_) => None,
        }
    }
}

/// The most hosts a topology can number: host ids are `u16`.
const HOSTS_MAX: u64 = 1 << 16;
/// The most switches a topology can number: switch ids are `u16`.
const SWITCHES_MAX: u64 = 1 << 16;

/// Hosts, switches and the links between them.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    /// All links, in the order they were added. Read and update link state through it; add
    /// links with [`Topology::add`] or [`Topology::connect`], which keep the index.
    pub links: Vec<Link>,
    /// Index of the link `from → to` in `links`.
    index: BTreeMap<(Endpoint, Endpoint), usize>,
    /// Every endpoint with at least one link.
    endpoints: BTreeSet<Endpoint>,
    /// The forwarding tables, derived on first use after the links last changed.
    forwarding: OnceLock<Forwarding>,
}

/// A forwarding-table entry: where to send next and how far the destination then is.
#[derive(Clone, Copy, Debug)]
struct Hop {
    /// The neighbour to send to.
    next: Endpoint,
    /// Links from the switch to the destination on a shortest path.
    hops: u32,
}

/// Every switch's table, keyed by (switch, destination).
#[derive(Clone, Debug, Default)]
struct Forwarding {
    /// Next hop per (switch, destination), for every destination the switch can reach.
    table: BTreeMap<(u16, Endpoint), Hop>,
}

impl Topology {
    /// Every host `0..hosts` on switch 0, one link each way, added host→switch then
    /// switch→host per host. Infallible as before: every host count is valid, and `params` is
    /// taken as given (see [`LinkParams::check`]).
    pub fn rack(hosts: u16, params: &LinkParams) -> Self {
        let mut topology = Topology::default();
        for host in 0..hosts {
            topology.connect(Endpoint::Host(host), Endpoint::Switch(0), params);
        }
        topology
    }

    /// Switches `0..switches` in a chain (each joined to the next by `trunk_link` both ways),
    /// each with `hosts_per_switch` hosts on `host_link`; switch `s` holds hosts
    /// `s * hosts_per_switch ..` onwards. The shape of two racks joined by one trunk, or a
    /// chain of switches a transaction crosses.
    pub fn line(
        switches: u16,
        hosts_per_switch: u16,
        host_link: &LinkParams,
        trunk_link: &LinkParams,
    ) -> Result<Self, NetError> {
        check_range("switches", u64::from(switches), 1, SWITCHES_MAX - 1)?;
        check_range("hosts_per_switch", u64::from(hosts_per_switch), 1, HOSTS_MAX / u64::from(switches))?;
        host_link.check("host_link.gbps")?;
        trunk_link.check("trunk_link.gbps")?;
        let mut topology = Topology::default();
        let mut next_host = HostNumbers::default();
        for switch in 0..switches {
            topology.attach_hosts(switch, hosts_per_switch, host_link, &mut next_host);
            if switch + 1 < switches {
                topology.connect(Endpoint::Switch(switch), Endpoint::Switch(switch + 1), trunk_link);
            }
        }
        Ok(topology)
    }

    /// A core switch 0 over top-of-rack switches `1..=tors`, each joined to the core by
    /// `uplink` both ways and holding `hosts_per_tor` hosts on `host_link`, numbered ToR by
    /// ToR. SwitchTx's testbed (seed 001 §3.3 Figure 8 and §5.1): switch S0 over S1–S3,
    /// servers on the leaves.
    pub fn core_and_tors(
        tors: u16,
        hosts_per_tor: u16,
        host_link: &LinkParams,
        uplink: &LinkParams,
    ) -> Result<Self, NetError> {
        check_range("tors", u64::from(tors), 1, SWITCHES_MAX - 1)?;
        check_range("hosts_per_tor", u64::from(hosts_per_tor), 1, HOSTS_MAX / u64::from(tors))?;
        host_link.check("host_link.gbps")?;
        uplink.check("uplink.gbps")?;
        let mut topology = Topology::default();
        let mut next_host = HostNumbers::default();
        for tor in 1..=tors {
            topology.connect(Endpoint::Switch(tor), Endpoint::Switch(0), uplink);
            topology.attach_hosts(tor, hosts_per_tor, host_link, &mut next_host);
        }
        Ok(topology)
    }

    /// Three levels: core switch 0; aggregation switches `1..=aggs`, each joined to the core
    /// by `agg_uplink`; under aggregation switch `a` (0-based) the top-of-rack switches
    /// `1 + aggs + a * tors_per_agg ..` joined to it by `tor_uplink`; `hosts_per_tor` hosts on
    /// each ToR on `host_link`, numbered ToR by ToR. TransKV's shape (seed 003 §IV-B Figure
    /// 6(c) and §VI: core, aggregation and ToR levels; 2 aggregation switches, 4 ToRs of 4
    /// storage nodes). Its testbed had two core switches with the clients on them; here the
    /// core is one switch (a tree, so routes are unique) and clients hang off it with
    /// [`Topology::connect`].
    pub fn hierarchy(
        aggs: u16,
        tors_per_agg: u16,
        hosts_per_tor: u16,
        host_link: &LinkParams,
        tor_uplink: &LinkParams,
        agg_uplink: &LinkParams,
    ) -> Result<Self, NetError> {
        // The core, `aggs` aggregation switches and `aggs * tors_per_agg` ToRs share u16 ids.
        let switch_ids_left = SWITCHES_MAX - 1;
        check_range("aggs", u64::from(aggs), 1, switch_ids_left / 2)?;
        check_range("tors_per_agg", u64::from(tors_per_agg), 1, switch_ids_left / u64::from(aggs) - 1)?;
        let tors = u64::from(aggs) * u64::from(tors_per_agg);
        check_range("hosts_per_tor", u64::from(hosts_per_tor), 1, HOSTS_MAX / tors)?;
        host_link.check("host_link.gbps")?;
        tor_uplink.check("tor_uplink.gbps")?;
        agg_uplink.check("agg_uplink.gbps")?;
        let mut topology = Topology::default();
        let mut next_host = HostNumbers::default();
        for agg in 1..=aggs {
            topology.connect(Endpoint::Switch(agg), Endpoint::Switch(0), agg_uplink);
            for tor_of_agg in 0..tors_per_agg {
                let tor = 1 + u64::from(aggs) + u64::from(agg - 1) * u64::from(tors_per_agg) + u64::from(tor_of_agg);
                let tor = u16::try_from(tor).expect("the range checks keep switch ids within u16");
                topology.connect(Endpoint::Switch(tor), Endpoint::Switch(agg), tor_uplink);
                topology.attach_hosts(tor, hosts_per_tor, host_link, &mut next_host);
            }
        }
        Ok(topology)
    }

    /// Adds the next `count` hosts to `switch`, a link each way (host→switch first).
    fn attach_hosts(&mut self, switch: u16, count: u16, params: &LinkParams, next_host: &mut HostNumbers) {
        for _ in 0..count {
            let host = next_host.take();
            self.connect(Endpoint::Host(host), Endpoint::Switch(switch), params);
        }
    }

    /// Adds a directed link. Adding a link that exists replaces its figures and resets its
    /// state and discipline in place (the link keeps its position in `links`).
    pub fn add(&mut self, from: Endpoint, to: Endpoint, params: LinkParams) {
        let link = Link::new(from, to, params);
        match self.index.get(&(from, to)) {
            Some(&position) => self.links[position] = link,
            None => {
                self.index.insert((from, to), self.links.len());
                self.links.push(link);
            }
        }
        self.endpoints.insert(from);
        self.endpoints.insert(to);
        self.forwarding = OnceLock::new();
    }

    /// Adds a wire both ways with the same figures: `a → b`, then `b → a`.
    pub fn connect(&mut self, a: Endpoint, b: Endpoint, params: &LinkParams) {
        self.add(a, b, params.clone());
        self.add(b, a, params.clone());
    }

    /// The link `from → to`, if there is one.
    pub fn link(&mut self, from: Endpoint, to: Endpoint) -> Option<&mut Link> {
        let position = *self.index.get(&(from, to))?;
        self.links.get_mut(position)
    }

    /// The link `from → to` for reading, if there is one.
    pub fn get_link(&self, from: Endpoint, to: Endpoint) -> Option<&Link> {
        self.links.get(*self.index.get(&(from, to))?)
    }

    /// The position of the link `from → to` in `links`, for drivers that keep per-link state
    /// (a [`crate::PriorityPort`] each) in a parallel vector.
    pub fn link_index(&self, from: Endpoint, to: Endpoint) -> Option<usize> {
        self.index.get(&(from, to)).copied()
    }

    /// Sets the egress discipline of the link `from → to` (links start FIFO).
    pub fn set_discipline(&mut self, from: Endpoint, to: Endpoint, discipline: PortDiscipline) -> Result<(), NetError> {
        discipline.check()?;
        let link = self.link(from, to).ok_or(NetError::NoSuchLink { from, to })?;
        link.discipline = discipline;
        Ok(())
    }

    /// Every host with a link, in order.
    pub fn hosts(&self) -> Vec<u16> {
        self.endpoints.iter().filter_map(|endpoint| endpoint.host_id()).collect()
    }

    /// Every switch with a link, in order.
    pub fn switches(&self) -> Vec<u16> {
        self.endpoints.iter().filter_map(|endpoint| endpoint.switch_id()).collect()
    }

    /// The hosts `switch` delivers to directly (has a link to), in order.
    pub fn hosts_of(&self, switch: u16) -> Vec<u16> {
        self.neighbours(Endpoint::Switch(switch)).filter_map(Endpoint::host_id).collect()
    }

    /// The switch `host` sends through: the lowest-numbered switch it has a link to.
    pub fn uplink_of(&self, host: u16) -> Option<u16> {
        self.neighbours(Endpoint::Host(host)).find_map(Endpoint::switch_id)
    }

    /// Where `from` has links to, in endpoint order.
    fn neighbours(&self, from: Endpoint) -> impl Iterator<Item = Endpoint> + '_ {
        // `Host(0)` is the least endpoint, so the range starts at `from`'s first link.
        self.index.range((from, Endpoint::Host(0))..).take_while(move |(&(a, _), _)| a == from).map(|(&(_, to), _)| to)
    }

    /// The next hop from `from` towards `to` on a shortest path (ties to the lowest endpoint);
    /// `None` if `from == to` or `to` is unreachable. A switch reads its table; a host picks
    /// its neighbour closest to `to`.
    pub fn next_hop(&self, from: Endpoint, to: Endpoint) -> Option<Endpoint> {
        if from == to {
            return None;
        }
        let forwarding = self.forwarding();
        match from {
            Endpoint::Switch(switch) => forwarding.table.get(&(switch, to)).map(|hop| hop.next),
            Endpoint::Host(_) => {
                let mut best: Option<(u32, Endpoint)> = None;
                for neighbour in self.neighbours(from) {
                    let hops_after = match neighbour {
                        _ if neighbour == to => Some(0),
                        Endpoint::Switch(switch) => forwarding.table.get(&(switch, to)).map(|hop| hop.hops),
                        Endpoint::Host(_) => None,
                    };
                    match (hops_after, best) {
                        (Some(hops), Some((best_hops, _))) if hops >= best_hops => {}
                        (Some(hops), _) => best = Some((hops, neighbour)),
                        (None, _) => {}
                    }
                }
                best.map(|(_, neighbour)| neighbour)
            }
        }
    }

    /// The endpoints a frame from `from_host` visits on its way to `to_host`, both ends
    /// included, following [`Topology::next_hop`]; empty if `to_host` is unreachable, just
    /// the host if the two are the same.
    pub fn route(&self, from_host: u16, to_host: u16) -> Vec<Endpoint> {
        let destination = Endpoint::Host(to_host);
        let mut path = vec![Endpoint::Host(from_host)];
        let mut at = path[0];
        while at != destination {
            let Some(next) = self.next_hop(at, destination) else { return Vec::new() };
            // Each hop is one link closer on a shortest path, so a route visits every endpoint
            // at most once; a longer one would be a forwarding loop.
            assert!(path.len() <= self.endpoints.len(), "forwarding loop from host {from_host} to host {to_host}");
            path.push(next);
            at = next;
        }
        path
    }

    /// The forwarding tables, derived now if the links changed since they were last needed.
    fn forwarding(&self) -> &Forwarding {
        self.forwarding.get_or_init(|| Forwarding::derive(&self.index, &self.endpoints))
    }
}

impl Forwarding {
    /// Every switch's next hop to every destination it can reach (see the module essay).
    fn derive(index: &BTreeMap<(Endpoint, Endpoint), usize>, endpoints: &BTreeSet<Endpoint>) -> Self {
        let mut senders_to: BTreeMap<Endpoint, Vec<Endpoint>> = BTreeMap::new();
        for &(from, to) in index.keys() {
            senders_to.entry(to).or_default().push(from);
        }
        let mut table = BTreeMap::new();
        for &destination in endpoints {
            let hops_to = hops_to(destination, &senders_to);
            for (&sender, &hops) in &hops_to {
                let Endpoint::Switch(switch) = sender else { continue };
                if hops == 0 {
                    continue;
                }
                // The lowest neighbour one link closer that can carry the frame on: the
                // destination itself or a switch (keys iterate in endpoint order).
                let next = index
                    .range((sender, Endpoint::Host(0))..)
                    .map(|(&(from, to), _)| (from, to))
                    .take_while(|&(from, _)| from == sender)
                    .map(|(_, to)| to)
                    .find(|&to| (to == destination || to.forwards()) && hops_to.get(&to) == Some(&(hops - 1)))
                    .expect("the search reached this switch through a neighbour one link closer");
                table.insert((switch, destination), Hop { next, hops });
            }
        }
        Forwarding { table }
    }
}

/// Links from every endpoint that can reach `destination` to it, by breadth-first search over
/// reversed links; only the destination and switches pass the search on, because hosts do not
/// forward.
fn hops_to(destination: Endpoint, senders_to: &BTreeMap<Endpoint, Vec<Endpoint>>) -> BTreeMap<Endpoint, u32> {
    let mut hops = BTreeMap::from([(destination, 0)]);
    let mut frontier = VecDeque::from([destination]);
    while let Some(endpoint) = frontier.pop_front() {
        if endpoint != destination && !endpoint.forwards() {
            continue;
        }
        let hops_here = hops[&endpoint];
        for &sender in senders_to.get(&endpoint).into_iter().flatten() {
            if let Entry::Vacant(unseen) = hops.entry(sender) {
                unseen.insert(hops_here + 1);
                frontier.push_back(sender);
            }
        }
    }
    hops
}

/// Hands out host ids in order; the builders' range checks keep them within `u16`.
#[derive(Default)]
struct HostNumbers {
    /// The id the next host gets.
    next: u32,
}

impl HostNumbers {
    /// The next host id.
    fn take(&mut self) -> u16 {
        let host = u16::try_from(self.next).expect("builders check that host ids fit in u16");
        self.next += 1;
        host
    }
}

#[cfg(test)]
mod tests;
