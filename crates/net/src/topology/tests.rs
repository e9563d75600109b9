//! Tests of the builders and the forwarding tables, including a comparison with the
//! breadth-first search the simulator's network used before this crate.

use super::*;
use proptest::prelude::*;
use Endpoint::{Host, Switch};

/// The simulator's former `Topology::next_hop`, kept verbatim as the reference the tables must
/// reproduce wherever hosts are leaves (it let hosts forward; the tables do not).
fn reference_next_hop(topology: &Topology, from: Endpoint, to: Endpoint) -> Option<Endpoint> {
    if from == to {
        return None;
    }
    let mut first: BTreeMap<Endpoint, Endpoint> = BTreeMap::new();
    let mut queue: VecDeque<Endpoint> = VecDeque::new();
    for (&(a, b), _) in topology.index.range((from, Endpoint::Host(0))..) {
        if a != from {
            break;
        }
        first.insert(b, b);
        queue.push_back(b);
    }
    while let Some(e) = queue.pop_front() {
        if e == to {
            return first.get(&e).copied();
        }
        let hop = first[&e];
        for (&(a, b), _) in topology.index.range((e, Endpoint::Host(0))..) {
            if a != e {
                break;
            }
            if b != from && !first.contains_key(&b) {
                first.insert(b, hop);
                queue.push_back(b);
            }
        }
    }
    None
}

/// Asserts that the tables agree with the reference search for every pair of endpoints, plus
/// one endpoint that does not exist.
fn assert_agrees_with_reference(topology: &Topology) {
    let mut endpoints: Vec<Endpoint> = topology.endpoints.iter().copied().collect();
    endpoints.push(Host(u16::MAX));
    for &from in &endpoints {
        for &to in &endpoints {
            assert_eq!(topology.next_hop(from, to), reference_next_hop(topology, from, to), "{from:?} -> {to:?}");
        }
    }
}

/// Asserts that `route` follows existing links and that each step is `next_hop`'s answer.
fn assert_route_is_made_of_links(topology: &Topology, from_host: u16, to_host: u16) {
    let route = topology.route(from_host, to_host);
    for step in route.windows(2) {
        assert!(topology.get_link(step[0], step[1]).is_some(), "no link {:?} -> {:?}", step[0], step[1]);
        assert_eq!(topology.next_hop(step[0], Host(to_host)), Some(step[1]));
    }
}

fn ten() -> LinkParams {
    LinkParams::ten_gbe()
}

fn hundred() -> LinkParams {
    LinkParams::hundred_gbe()
}

#[test]
fn rack_routes_go_through_the_switch() {
    let t = Topology::rack(3, &ten());
    assert_eq!(t.next_hop(Host(0), Host(2)), Some(Switch(0)));
    assert_eq!(t.next_hop(Switch(0), Host(2)), Some(Host(2)));
    assert_eq!(t.next_hop(Host(1), Host(1)), None);
    assert_eq!(t.next_hop(Host(0), Switch(0)), Some(Switch(0)));
    assert_eq!(t.route(0, 2), vec![Host(0), Switch(0), Host(2)]);
}

#[test]
fn rack_lays_out_links_as_before() {
    let t = Topology::rack(3, &ten());
    let links: Vec<(Endpoint, Endpoint)> = t.links.iter().map(|link| (link.from, link.to)).collect();
    assert_eq!(
        links,
        vec![
            (Host(0), Switch(0)),
            (Switch(0), Host(0)),
            (Host(1), Switch(0)),
            (Switch(0), Host(1)),
            (Host(2), Switch(0)),
            (Switch(0), Host(2)),
        ]
    );
    assert!(t.links.iter().all(|link| link.params == ten() && link.discipline == PortDiscipline::Fifo));
    assert_eq!(t.hosts(), vec![0, 1, 2]);
    assert_eq!(t.switches(), vec![0]);
    assert_eq!(t.hosts_of(0), vec![0, 1, 2]);
    assert_eq!(t.uplink_of(2), Some(0));
    assert_eq!(t.uplink_of(3), None);
    assert!(Topology::rack(0, &ten()).links.is_empty(), "an empty rack is still a rack");
}

#[test]
fn rack_forwarding_equals_the_former_search() {
    for hosts in [1, 2, 5, 16] {
        assert_agrees_with_reference(&Topology::rack(hosts, &ten()));
    }
}

#[test]
fn line_of_two_switches_routes_hop_by_hop() {
    let t = Topology::line(2, 2, &ten(), &hundred()).unwrap();
    assert_eq!(t.links.len(), 2 * (4 + 1), "four host wires and one trunk, both ways");
    assert_eq!(t.hosts_of(0), vec![0, 1]);
    assert_eq!(t.hosts_of(1), vec![2, 3]);
    assert_eq!(t.uplink_of(3), Some(1));
    assert_eq!(t.get_link(Switch(0), Switch(1)).unwrap().params, hundred());
    assert_eq!(t.get_link(Host(2), Switch(1)).unwrap().params, ten());
    // Across the trunk, one hop at a time.
    assert_eq!(t.next_hop(Host(0), Host(3)), Some(Switch(0)));
    assert_eq!(t.next_hop(Switch(0), Host(3)), Some(Switch(1)));
    assert_eq!(t.next_hop(Switch(1), Host(3)), Some(Host(3)));
    assert_eq!(t.route(0, 3), vec![Host(0), Switch(0), Switch(1), Host(3)]);
    assert_eq!(t.route(3, 0), vec![Host(3), Switch(1), Switch(0), Host(0)]);
    // Within a switch, the trunk is not used.
    assert_eq!(t.route(2, 3), vec![Host(2), Switch(1), Host(3)]);
    assert_eq!(t.route(1, 1), vec![Host(1)]);
}

#[test]
fn a_longer_line_crosses_every_switch_in_between() {
    let t = Topology::line(4, 1, &ten(), &ten()).unwrap();
    assert_eq!(t.route(0, 3), vec![Host(0), Switch(0), Switch(1), Switch(2), Switch(3), Host(3)]);
    assert_route_is_made_of_links(&t, 3, 0);
}

#[test]
fn core_and_tors_routes_through_the_core_only_between_racks() {
    let t = Topology::core_and_tors(3, 2, &ten(), &hundred()).unwrap();
    assert_eq!(t.links.len(), 2 * (3 + 6), "three uplinks and six host wires, both ways");
    assert_eq!(t.switches(), vec![0, 1, 2, 3]);
    assert_eq!(t.hosts_of(0), Vec::<u16>::new(), "no host on the core");
    assert_eq!(t.hosts_of(3), vec![4, 5]);
    assert_eq!(t.uplink_of(5), Some(3));
    assert_eq!(t.route(0, 5), vec![Host(0), Switch(1), Switch(0), Switch(3), Host(5)]);
    assert_eq!(t.route(0, 1), vec![Host(0), Switch(1), Host(1)]);
    assert_eq!(t.get_link(Switch(2), Switch(0)).unwrap().params, hundred());
    assert_route_is_made_of_links(&t, 5, 2);
}

#[test]
fn hierarchy_has_transkv_shape() {
    // TransKV: 2 aggregation switches, 4 ToRs, 4 storage nodes per ToR.
    let t = Topology::hierarchy(2, 2, 4, &ten(), &hundred(), &hundred()).unwrap();
    assert_eq!(t.links.len(), 2 * (2 + 4 + 16));
    assert_eq!(t.switches(), (0..=6).collect::<Vec<_>>());
    assert_eq!(t.hosts().len(), 16);
    assert_eq!(t.hosts_of(3), vec![0, 1, 2, 3]);
    assert_eq!(t.hosts_of(6), vec![12, 13, 14, 15]);
    assert!(t.get_link(Switch(4), Switch(1)).is_some(), "ToR 4 hangs off aggregation switch 1");
    assert!(t.get_link(Switch(5), Switch(2)).is_some(), "ToR 5 hangs off aggregation switch 2");
    assert_eq!(t.route(0, 15), vec![Host(0), Switch(3), Switch(1), Switch(0), Switch(2), Switch(6), Host(15)]);
    assert_eq!(t.route(0, 4), vec![Host(0), Switch(3), Switch(1), Switch(4), Host(4)], "same aggregation: no core");
    // Clients on the core, as in TransKV's testbed.
    let mut t = t;
    t.connect(Host(16), Switch(0), &ten());
    assert_eq!(t.route(16, 9), vec![Host(16), Switch(0), Switch(2), Switch(5), Host(9)]);
}

#[test]
fn builder_forwarding_equals_the_former_search() {
    assert_agrees_with_reference(&Topology::line(3, 2, &ten(), &ten()).unwrap());
    assert_agrees_with_reference(&Topology::core_and_tors(3, 2, &ten(), &ten()).unwrap());
    assert_agrees_with_reference(&Topology::hierarchy(2, 2, 2, &ten(), &ten(), &ten()).unwrap());
}

#[test]
fn builders_name_the_bad_field_and_the_accepted_range() {
    let out_of_range =
        |field: &'static str, value: u64, min: u64, max: u64| NetError::OutOfRange { field, value, min, max };
    assert_eq!(Topology::line(0, 1, &ten(), &ten()).unwrap_err(), out_of_range("switches", 0, 1, 65_535));
    assert_eq!(Topology::line(2, 0, &ten(), &ten()).unwrap_err(), out_of_range("hosts_per_switch", 0, 1, 32_768));
    assert_eq!(
        Topology::line(3, 30_000, &ten(), &ten()).unwrap_err(),
        out_of_range("hosts_per_switch", 30_000, 1, 21_845)
    );
    assert_eq!(Topology::core_and_tors(0, 1, &ten(), &ten()).unwrap_err(), out_of_range("tors", 0, 1, 65_535));
    assert_eq!(Topology::core_and_tors(4, 0, &ten(), &ten()).unwrap_err(), out_of_range("hosts_per_tor", 0, 1, 16_384));
    let hierarchy = |aggs, tors_per_agg, hosts_per_tor| {
        Topology::hierarchy(aggs, tors_per_agg, hosts_per_tor, &ten(), &ten(), &ten())
    };
    assert_eq!(hierarchy(0, 1, 1).unwrap_err(), out_of_range("aggs", 0, 1, 32_767));
    assert_eq!(hierarchy(40_000, 1, 1).unwrap_err(), out_of_range("aggs", 40_000, 1, 32_767));
    assert_eq!(hierarchy(1_000, 70, 1).unwrap_err(), out_of_range("tors_per_agg", 70, 1, 64));
    assert_eq!(hierarchy(2, 2, 20_000).unwrap_err(), out_of_range("hosts_per_tor", 20_000, 1, 16_384));
    // The largest accepted shapes number every switch and host within u16.
    assert!(Topology::core_and_tors(1, u16::MAX, &ten(), &ten()).is_ok());
    assert_eq!(Topology::line(1, u16::MAX, &ten(), &ten()).unwrap().hosts().last(), Some(&65_534));
    assert_eq!(Topology::line(2, 16_384, &ten(), &ten()).unwrap().hosts().len(), 32_768);
    let slow = LinkParams { gbps: 0.0, ..ten() };
    assert_eq!(
        Topology::line(2, 1, &ten(), &slow).unwrap_err(),
        NetError::BadLineRate { field: "trunk_link.gbps", gbps: 0.0 }
    );
    assert!(matches!(
        Topology::hierarchy(1, 1, 1, &ten(), &ten(), &slow),
        Err(NetError::BadLineRate { field: "agg_uplink.gbps", .. })
    ));
    let message = Topology::line(2, 0, &ten(), &ten()).unwrap_err().to_string();
    assert_eq!(message, "hosts_per_switch = 0 is out of range: accepted 1..=32768");
}

#[test]
fn ties_break_towards_the_lowest_endpoint_whatever_the_insertion_order() {
    // Two equal paths from switch 0 to host 1: through switch 1 or switch 2.
    let wires = [
        (Host(0), Switch(0)),
        (Switch(0), Switch(2)),
        (Switch(0), Switch(1)),
        (Switch(2), Switch(3)),
        (Switch(1), Switch(3)),
        (Switch(3), Host(1)),
    ];
    let mut forwards = Topology::default();
    let mut backwards = Topology::default();
    for &(a, b) in &wires {
        forwards.connect(a, b, &ten());
    }
    for &(a, b) in wires.iter().rev() {
        backwards.connect(b, a, &ten());
    }
    for t in [&forwards, &backwards] {
        assert_eq!(t.next_hop(Switch(0), Host(1)), Some(Switch(1)));
        assert_eq!(t.route(0, 1), vec![Host(0), Switch(0), Switch(1), Switch(3), Host(1)]);
        assert_eq!(t.route(1, 0), vec![Host(1), Switch(3), Switch(1), Switch(0), Host(0)]);
    }
}

#[test]
fn hosts_never_forward() {
    // Host 1 sits on both switches, which share no wire: it must not become a bridge.
    let mut t = Topology::default();
    t.connect(Host(0), Switch(0), &ten());
    t.connect(Host(1), Switch(0), &ten());
    t.connect(Host(1), Switch(1), &ten());
    t.connect(Host(2), Switch(1), &ten());
    assert_eq!(t.route(0, 2), Vec::<Endpoint>::new());
    assert_eq!(t.next_hop(Switch(0), Host(2)), None);
    assert_eq!(reference_next_hop(&t, Switch(0), Host(2)), Some(Host(1)), "the former search did use the host");
    // A multi-homed host itself reaches both sides, each through its own switch.
    assert_eq!(t.route(1, 0), vec![Host(1), Switch(0), Host(0)]);
    assert_eq!(t.route(1, 2), vec![Host(1), Switch(1), Host(2)]);
    assert_eq!(t.uplink_of(1), Some(0), "the lowest switch it has a link to");
}

#[test]
fn forwarding_follows_links_added_after_a_lookup() {
    let mut t = Topology::line(3, 1, &ten(), &ten()).unwrap();
    assert_eq!(t.route(0, 2).len(), 5);
    t.connect(Switch(0), Switch(2), &LinkParams::wan(5));
    assert_eq!(t.route(0, 2), vec![Host(0), Switch(0), Switch(2), Host(2)], "the new shortcut has fewer links");
    // Re-adding a link replaces it in place.
    let links = t.links.len();
    t.add(Switch(0), Switch(2), ten());
    assert_eq!(t.links.len(), links);
    assert_eq!(t.get_link(Switch(0), Switch(2)).unwrap().params, ten());
    assert_eq!(t.link_index(Switch(0), Switch(2)).map(|i| t.links[i].to), Some(Switch(2)));
}

#[test]
fn one_way_links_route_one_way() {
    let mut t = Topology::default();
    t.connect(Host(0), Switch(0), &ten());
    t.connect(Host(1), Switch(1), &ten());
    t.add(Switch(0), Switch(1), ten());
    assert_eq!(t.route(0, 1), vec![Host(0), Switch(0), Switch(1), Host(1)]);
    assert_eq!(t.route(1, 0), Vec::<Endpoint>::new(), "no wire back from switch 1");
}

#[test]
fn disciplines_are_set_per_link_and_validated() {
    let mut t = Topology::rack(2, &ten());
    let strict = PortDiscipline::StrictPriority { classes: 2, buffer_bytes: 10_000 };
    t.set_discipline(Switch(0), Host(1), strict.clone()).unwrap();
    assert_eq!(t.get_link(Switch(0), Host(1)).unwrap().discipline(), &strict);
    assert_eq!(t.get_link(Host(1), Switch(0)).unwrap().discipline(), &PortDiscipline::Fifo, "per direction");
    let port = t.get_link(Switch(0), Host(1)).unwrap().priority_port::<u32>().unwrap();
    assert_eq!((port.classes(), port.buffer_bytes()), (2, 10_000));
    assert!(t.get_link(Switch(0), Host(0)).unwrap().priority_port::<u32>().is_none());
    assert_eq!(
        t.set_discipline(Host(0), Host(1), PortDiscipline::Fifo),
        Err(NetError::NoSuchLink { from: Host(0), to: Host(1) })
    );
    let too_many = PortDiscipline::StrictPriority { classes: 9, buffer_bytes: 10_000 };
    assert!(matches!(
        t.set_discipline(Switch(0), Host(0), too_many),
        Err(NetError::OutOfRange { field: "classes", .. })
    ));
    assert_eq!(
        t.get_link(Switch(0), Host(0)).unwrap().discipline(),
        &PortDiscipline::Fifo,
        "a refused setting changes nothing"
    );
}

/// A random network whose hosts are leaves: `switches` switches with random one-way or two-way
/// wires between them, and hosts each on one random switch.
fn leafy_network() -> impl Strategy<Value = Topology> {
    (1..7u16).prop_flat_map(|switches| {
        let wires = prop::collection::vec((0..switches, 0..switches, any::<bool>()), 0..14);
        let hosts = prop::collection::vec(0..switches, 1..8);
        (wires, hosts).prop_map(|(wires, hosts)| {
            let mut t = Topology::default();
            for (a, b, both_ways) in wires {
                if a == b {
                    continue;
                }
                t.add(Switch(a), Switch(b), LinkParams::ten_gbe());
                if both_ways {
                    t.add(Switch(b), Switch(a), LinkParams::ten_gbe());
                }
            }
            for (host, switch) in hosts.into_iter().enumerate() {
                let host = u16::try_from(host).unwrap();
                t.connect(Host(host), Switch(switch), &LinkParams::ten_gbe());
            }
            t
        })
    })
}

proptest! {
    #[test]
    fn tables_reproduce_the_former_search_where_hosts_are_leaves(t in leafy_network()) {
        assert_agrees_with_reference(&t);
        for from in t.hosts() {
            for to in t.hosts() {
                assert_route_is_made_of_links(&t, from, to);
            }
        }
    }
}
