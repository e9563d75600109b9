//! Q20 end to end: the normal plan over segments against the plain reference (small scale
//! factors, in `cargo test`), and against tpchgen's bundled answer at SF 1 (ignored: run with
//! `cargo test --release -p pisadb-olap -- --ignored`).

use pisadb_olap::q20::{bundled_sf1_answer, reference, reference_pattern1, run_normal, run_orig, trimmed};
use pisadb_olap::tpch::{distribute, generate, Q20Params};
use std::collections::BTreeMap;

#[test]
fn the_normal_plan_equals_the_reference_on_every_segment_count() {
    let data = generate(0.05, &Q20Params::validation()).expect("generates");
    let expected = reference(&data);
    assert!(!expected.is_empty(), "SF 0.05 has Canadian suppliers in the answer");
    for segments in [1, 3, 4] {
        let segs = distribute(&data, segments);
        assert_eq!(run_normal(&segs, &data), expected, "{segments} segments");
        assert_eq!(run_orig(&segs, &data), expected, "{segments} segments, Greenplum's own plan");
    }
}

#[test]
fn pattern_one_groups_equal_the_reference_groups() {
    let data = generate(0.02, &Q20Params::validation()).expect("generates");
    let segs = distribute(&data, 3);
    let part_all = pisadb_olap::ops::gather(&segs.iter().map(|s| s.part_fp.clone()).collect::<Vec<_>>());
    let mut got = BTreeMap::new();
    for s in &segs {
        let g = pisadb_olap::q20::pattern1(&part_all, &s.lineitem_fp);
        for i in 0..g.rows() {
            let r = g.row(i);
            assert!(got.insert((r[0], r[1]), r[2]).is_none(), "each group on one segment only");
        }
    }
    assert_eq!(got, reference_pattern1(&data));
}

#[test]
#[ignore = "generates SF 1 (6M lines): about 10 s in release"]
fn the_normal_plan_gives_the_bundled_sf1_answer() {
    let data = generate(1.0, &Q20Params::validation()).expect("generates");
    let bundled = bundled_sf1_answer();
    assert_eq!(bundled.len(), 186);
    let segs = distribute(&data, 3);
    assert_eq!(trimmed(&run_normal(&segs, &data)), bundled);
    assert_eq!(trimmed(&reference(&data)), bundled);
}
