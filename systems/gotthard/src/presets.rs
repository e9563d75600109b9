//! Gotthard's presets: `pisadb` (the model's defaults) and `paper` (seed 004's experiment),
//! each value with where it comes from.
//!
//! The paper is a two-page poster: it states the workload (one data item, read-only and
//! read-write transactions in varying proportion, 1,000 transactions) and the switch modes,
//! not the testbed. Its authors' public code states the rest of the experiment
//! (`github.com/usi-systems/gotthard`, `ec2/scripts/vary_rw.py`, the script of the write-share
//! figure): 8 clients (`CLIENT_VALUES=[8]`) and a software switch that delays each datagram
//! 50 ms one way, 20% of it toward the clients (`DELTA=[0.2]`: `--client-delta 0.01`,
//! `--server-delta 0.04`). What neither states is *assumed*, with why, and swept.

use crate::costs::Costs;
use pisadb_harness::Preset;

/// Where the authors' experiment parameters are written.
const AUTHORS_SCRIPT: &str = "the authors' public code, usi-systems/gotthard ec2/scripts/vary_rw.py";

/// What every preset takes from the authors' script (the rack) and our benches (the costs),
/// each with its source.
fn with_authors_rack(preset: Preset) -> Preset {
    let c = Costs::MEASURED;
    let bench = |name: &str| format!("cargo bench -p pisadb-gotthard --bench handlers: {name}");
    preset
        .stated(
            "clients",
            8,
            &format!("{AUTHORS_SCRIPT}: CLIENT_VALUES=[8]; swept by `sweep --system gotthard clients`"),
        )
        .stated(
            "near_us",
            10_000,
            &format!(
                "{AUTHORS_SCRIPT}: --client-delta 0.05*0.2 s (one way, client-switch); swept by `sweep --system \
                 gotthard delay-split`"
            ),
        )
        .stated("far_us", 40_000, &format!("{AUTHORS_SCRIPT}: --server-delta 0.05*0.8 s (one way, switch-store)"))
        .measured("costs.store_request_ns", c.store_request_ns, &bench("gotthard/store_increment"))
        .measured("costs.store_read_ns", c.store_read_ns, &bench("gotthard/store_read"))
        .measured("costs.client_reply_ns", c.client_reply_ns, &bench("gotthard/client_reply"))
}

/// The presets, `pisadb` first (the default).
pub fn presets() -> Vec<Preset> {
    vec![
        with_authors_rack(Preset::new(
            "pisadb",
            "PisaDB's model of Gotthard: one client host, one switch, one store, WAN delays",
        ))
        .assumed("write_share", 0.25, "the share at which the paper states its headline (Gotthard halves the time)")
        .assumed("retransmit_us", 0, "0: three round trips or 1 ms, whichever is longer (no loss in the figures' runs)")
        .assumed(
            "jitter_us",
            0,
            "fixed delays: the model without latency variance (clients run in lockstep; `sweep --system gotthard jitter`)",
        ),
        with_authors_rack(Preset::new("paper", "seed 004's experiment: the poster's workload, its authors' script's rack"))
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
            .assumed(
                "jitter_us",
                1_000,
                "the authors' switch is a Python process delaying each datagram with time.sleep in a pool of 128 \
                 threads, so datagrams overtake and delays vary; by how much is not reported (1 ms assumed: sleep \
                 overshoot and thread scheduling); `sweep --system gotthard jitter` shows 0..5 ms",
            ),
    ]
}
