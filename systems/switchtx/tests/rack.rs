//! The rack end to end: every variant commits, passes the end-of-run checks, and is
//! deterministic.

use pisadb_switchtx::rack::{run, RackConfig, VARIANT_NAMES};

/// A small rack: 2 threads per server, a short window.
fn small() -> RackConfig {
    RackConfig { threads: 2, warmup_us: 50, measure_us: 200, ..RackConfig::default() }
}

#[test]
fn every_variant_commits_and_passes_the_checks() {
    for v in VARIANT_NAMES {
        let f = run(v, &small()).unwrap_or_else(|e| panic!("{v}: {e}"));
        eprintln!("{v}: {f:?}");
        assert!(f.commits > 0, "{v} committed nothing");
        assert!(f.checked_commits >= f.commits, "{v}");
    }
}
