//! Wall-clock time of Q20's normal plan in process, one thread, for the DuckDB anchor
//! (`systems/netaccel/scripts/duckdb_anchor.py`): `cargo run --release -p pisadb-olap --example
//! q20_wall -- 1` (the scale factor). Prints the median of 5 runs of pattern 1 (all of
//! `lineitem_FP` as one segment) and of the whole plan over 1 and 3 segments run one after
//! another, data generation excluded.

#![allow(clippy::disallowed_methods)] // a benchmark: it reads the wall clock on purpose

use pisadb_olap::q20::{pattern1, run_normal};
use pisadb_olap::tpch::{distribute, generate, Q20Params};
use std::time::Instant;

fn median_ms(mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

fn main() {
    let sf: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let t = Instant::now();
    let data = generate(sf, &Q20Params::validation()).expect("generates");
    println!("generated SF {sf} in {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let one = distribute(&data, 1);
    let three = distribute(&data, 3);
    let p1 = median_ms(|| {
        std::hint::black_box(pattern1(&data.part_fp, &data.lineitem_fp));
    });
    let q1 = median_ms(|| {
        std::hint::black_box(run_normal(&one, &data));
    });
    let q3 = median_ms(|| {
        std::hint::black_box(run_normal(&three, &data));
    });
    println!("pattern 1 (part_FP x lineitem_FP, group by, one thread): {p1:.2} ms");
    println!("Q20 normal plan, 1 segment, one thread: {q1:.2} ms");
    println!("Q20 normal plan, 3 segments run one after another, one thread: {q3:.2} ms");
}
