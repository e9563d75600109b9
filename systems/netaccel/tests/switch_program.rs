//! The switch program on the switch model alone: its layout passes the load checks, the
//! tempting one-array group-by does not, and for random shapes and data the switch's groups
//! and the control plane's are disjoint and together equal the reference; the drain emits
//! every switch group exactly once, to its segment, and leaves every array clear.

use pisadb_netaccel::layout::{tempting_one_array_group_by, Layout};
use pisadb_netaccel::offline::{run, segment_host};
use pisadb_olap::keytable::pack2;
use pisadb_olap::ops::segment_of;
use pisadb_switch::{LoadError, SwitchProfile};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn every_split_up_to_five_positions_fits_a_tofino1_pipe_at_sf100() {
    let profile = SwitchProfile::tofino1();
    for j in 1..=5u8 {
        for g in 1..=(5 - j).max(1) {
            let layout = Layout::for_scale_factor(100.0, j, g, 3);
            assert_eq!(layout.spec().check(&profile), Ok(()), "{j}x{g}");
        }
    }
    let too_long = Layout::for_scale_factor(100.0, 2, 5, 3);
    assert!(matches!(too_long.spec().check(&profile), Err(LoadError::NoSuchStage { .. })), "2x5 needs 13 stages");
}

#[test]
fn the_one_array_group_by_needing_three_comparisons_is_refused() {
    let err = tempting_one_array_group_by(65_536).check(&SwitchProfile::tofino1()).unwrap_err();
    match err {
        LoadError::BadAction { why, .. } => assert!(why.contains("3 comparisons"), "{why}"),
        other => panic!("expected a refused action, got {other}"),
    }
}

/// Pattern 1 computed plainly.
fn reference(outer: &[(u16, u32)], inner: &[(u16, u32, u32, u32)]) -> BTreeMap<(u32, u32), i64> {
    let keys: BTreeSet<u32> = outer.iter().map(|o| o.1).collect();
    let mut sums = BTreeMap::new();
    for &(_, pk, sk, q) in inner.iter().filter(|i| keys.contains(&i.1)) {
        *sums.entry((pk, sk)).or_insert(0) += i64::from(q);
    }
    sums
}

/// Outer tuples (segment, key).
type Outer = Vec<(u16, u32)>;
/// Inner tuples (segment, partkey, suppkey, quantity).
type Inner = Vec<(u16, u32, u32, u32)>;

fn data() -> impl Strategy<Value = (Layout, Outer, Inner)> {
    (1u8..=4, 1u8..=3, 1u32..=24, 1u32..=24, 1u16..=3).prop_flat_map(|(j, g, js, gs, segs)| {
        let layout = Layout { join_positions: j, group_positions: g, join_slots: js, group_slots: gs, segments: segs };
        let outer = proptest::collection::btree_set(1u32..=80, 0..50)
            .prop_flat_map(move |keys| {
                let n = keys.len();
                (Just(keys), proptest::collection::vec(0..segs, n))
            })
            .prop_map(|(keys, segs)| segs.into_iter().zip(keys).collect::<Vec<_>>());
        let inner = proptest::collection::vec((0..segs, 1u32..=90, 1u32..=6, 1u32..=50), 0..300);
        (Just(layout), outer, inner)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn switch_and_control_plane_together_equal_the_reference((layout, outer, inner) in data()) {
        let out = run(layout, &outer, &inner, None).expect("runs");
        prop_assert!(out.go && out.drained && out.control_plane_done && !out.loss);
        let mut switch_groups = BTreeMap::new();
        for &(pk, sk, sum, dst) in &out.switch_groups {
            prop_assert!(switch_groups.insert((pk, sk), sum).is_none(), "group ({pk}, {sk}) drained twice");
            let owner = segment_of(pack2(i64::from(pk), i64::from(sk)), usize::from(layout.segments));
            prop_assert_eq!(dst, segment_host(owner as u16), "a group goes to the segment that owns it");
        }
        let mut union = switch_groups.clone();
        for &(pk, sk, sum) in out.control_plane.groups() {
            prop_assert!(union.insert((pk, sk), sum).is_none(), "group ({pk}, {sk}) in both switch and control plane");
        }
        prop_assert_eq!(union, reference(&outer, &inner));
        let spec = layout.spec();
        for array in &spec.arrays {
            for i in 0..array.entries {
                prop_assert_eq!(out.switch.registers().read(array.id, i), Ok((0, 0)), "{} not clear at {}", array.name, i);
            }
        }
    }
}

#[test]
fn a_lost_tuple_is_reported_at_the_barrier() {
    let layout = Layout { join_positions: 2, group_positions: 2, join_slots: 8, group_slots: 8, segments: 2 };
    let outer = [(0, 1), (1, 2)];
    let inner = [(0, 1, 1, 5), (1, 2, 2, 7), (1, 1, 3, 1)];
    assert!(!run(layout, &outer, &inner, None).expect("runs").loss);
    let lossy = run(layout, &outer, &inner, Some(1)).expect("runs");
    assert!(lossy.loss && lossy.control_plane_done, "the control plane is told its input lost a tuple");
}

#[test]
fn small_tables_overflow_all_three_ways_and_the_answer_is_still_exact() {
    let layout = Layout { join_positions: 1, group_positions: 1, join_slots: 4, group_slots: 3, segments: 3 };
    let outer: Vec<(u16, u32)> = (1..=20u32).map(|k| ((k % 3) as u16, k)).collect();
    let inner: Vec<(u16, u32, u32, u32)> =
        (0..400u32).map(|i| ((i % 3) as u16, 1 + (i * 7) % 30, 1 + i % 4, 1 + i % 9)).collect();
    let out = run(layout, &outer, &inner, None).expect("runs");
    let [i, ii, iii] = out.control_plane.received;
    assert!(i > 0 && ii > 0 && iii > 0, "overflow (i) {i}, (ii) {ii}, (iii) {iii}");
    assert!(!out.switch_groups.is_empty());
    let mut union: BTreeMap<(u32, u32), i64> = out.switch_groups.iter().map(|g| ((g.0, g.1), g.2)).collect();
    union.extend(out.control_plane.groups().iter().map(|g| ((g.0, g.1), g.2)));
    assert_eq!(union, reference(&outer, &inner));
}

/// Probe tuples (segment, partkey, suppkey, availqty) of the reloaded pattern.
type Probe = Vec<(u16, u32, u32, u32)>;

fn reloaded() -> impl Strategy<Value = (Layout, Outer, Inner, Probe)> {
    data().prop_flat_map(|(layout, outer, inner)| {
        let segs = layout.segments;
        let probe = proptest::collection::vec((0..segs, 1u32..=90, 1u32..=6, 1u32..=120), 0..200);
        (Just(layout), Just(outer), Just(inner), probe)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn the_reloaded_pattern_passes_exactly_the_rows_above_half_their_groups_sum(
        (layout, outer, inner, probe) in reloaded()
    ) {
        let out = pisadb_netaccel::offline::run_reloaded(layout, &outer, &inner, &probe).expect("runs");
        prop_assert!(out.drained && out.control_plane_done && !out.loss);
        prop_assert!(out.switch_groups.is_empty(), "reloaded groups are consumed in the switch, not drained");
        let sums = reference(&outer, &inner);
        let mut expected: Vec<(u32, u32, u32)> = probe
            .iter()
            .filter(|p| sums.get(&(p.1, p.2)).is_some_and(|&sum| 2 * i64::from(p.3) > sum))
            .map(|p| (p.1, p.2, p.3))
            .collect();
        let mut got: Vec<(u32, u32, u32)> = Vec::new();
        for &(pk, sk, avail, dst) in &out.switch_passing {
            let owner = segment_of(u64::from(sk), usize::from(layout.segments));
            prop_assert_eq!(dst, segment_host(owner as u16), "a passing row goes to its suppkey's segment");
            got.push((pk, sk, avail));
        }
        got.extend(out.control_plane.passing().iter().copied());
        expected.sort_unstable();
        got.sort_unstable();
        prop_assert_eq!(got, expected);
        for array in &layout.spec().arrays {
            for i in 0..array.entries {
                prop_assert_eq!(out.switch.registers().read(array.id, i), Ok((0, 0)), "{} not clear at {}", array.name, i);
            }
        }
    }
}
