//! Pinned figures of small TransKV data centers (50K keys, 128 cached per switch, Zipf 0.99,
//! 25% writes, 8 in flight, 200 transactions per client host, seed 1): a refactor that moves a
//! trace hash or a figure has changed behaviour and must say why.

use pisadb_transkv::rack::{run_checked, RackConfig};

fn small() -> RackConfig {
    RackConfig {
        records: 50_000,
        cache_per_switch: 128,
        zipf: 0.99,
        write_ratio: 0.25,
        ops_per_txn: 1,
        outstanding: 8,
        txns_per_client: 200,
        seed: 1,
        resolve_us: 10_000,
        lease_us: 0,
        refresh_epoch_us: 0,
        hot_shift_at_us: 0,
        hot_shift_ranks: 0,
        controller_cores: 2,
        nic_ns: 1_000,
    }
}

#[test]
fn small_data_centers_are_pinned() {
    // (variant, trace hash, commits by a switch, switch aborts, node aborts, mean read µs)
    let pinned: [(&str, &str, u64, u64, u64, f64); 2] = PINNED;
    for (variant, hash, by_switch, aborts_switch, aborts_store, read_us) in pinned {
        let f = run_checked(variant, &small()).unwrap();
        assert_eq!(f.commits, 800, "{variant}");
        assert_eq!(f.trace_hash, hash, "{variant}: {f:?}");
        assert_eq!(
            (f.switch_answers, f.aborts_switch, f.aborts_store),
            (by_switch, aborts_switch, aborts_store),
            "{variant}"
        );
        assert!((f.read_latency.latency_us_mean - read_us).abs() < 1e-3, "{variant}: {f:?}");
    }
}

const PINNED: [(&str, &str, u64, u64, u64, f64); 2] =
    [("transkv", "4c2ffd182ea84d97", 401, 47, 0, 12.110), ("tranx-coor", "f99d820f71ead9fd", 0, 0, 31, 27.291)];
