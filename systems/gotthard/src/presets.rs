//! Gotthard's presets: `pisadb` (the model's defaults) and `paper` (what seed 004 states of
//! its experiment), each value with where it comes from.
//!
//! The paper is a two-page abstract: it states the workload (one data item, read-only and
//! read-write transactions in varying proportion, 1,000 transactions) and the switch modes,
//! not the testbed's delays or client count. What it does not state is *assumed* here, with
//! why; the fidelity issue completes the rest.

use pisadb_harness::Preset;

/// The presets, `pisadb` first (the default).
pub fn presets() -> Vec<Preset> {
    vec![
        Preset::new("pisadb", "PisaDB's model of Gotthard: one client host, one switch, one store, WAN delays")
            .assumed("clients", 8, "the N = 8 panel of our Fig. 2; the paper does not say how many clients ran")
            .assumed("write_share", 0.25, "the share at which the paper states its headline (Gotthard halves the time)")
            .assumed(
                "near_us",
                10_000,
                "a 50 ms one-way client-store delay split 20/80: a WAN store, the switch near the clients",
            )
            .assumed("far_us", 40_000, "the other 80% of the 50 ms one-way delay")
            .assumed(
                "retransmit_us",
                0,
                "0: three round trips or 1 ms, whichever is longer (no loss in the figures' runs)",
            ),
        Preset::new("paper", "seed 004's experiment, as far as its text states it")
            .stated(
                "commits_per_client",
                1000,
                "seed 004, Fig. 2 caption and §Evaluation: time to complete 1,000 transactions",
            )
            .stated(
                "write_share",
                0.25,
                "seed 004, §Evaluation: 'at only 25% writes Gotthard already reduces the completion time by half'",
            )
            .assumed("clients", 8, "not stated; the N = 8 of our Fig. 2")
            .assumed("near_us", 10_000, "not stated; a 50 ms one-way delay split 20/80 (the switch near the clients)")
            .assumed("far_us", 40_000, "not stated; the other 80% of the 50 ms"),
    ]
}
