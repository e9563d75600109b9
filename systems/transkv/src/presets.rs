//! TransKV's presets: `pisadb` (the model's defaults) and `paper` (what seed 003 §V–VI states
//! of its setup and workloads), each value with where it comes from.
//!
//! The hosts' CPU costs are measured (`benches/costs.rs`, `CALIBRATION.md`) and live in
//! `crate::costs`; the controller's cores (`controller_cores`), the client window
//! (`outstanding`) and the NIC latency (`nic_ns`) are the model's assumptions, and settings.

use pisadb_harness::Preset;

/// The presets, `pisadb` first (the default).
pub fn presets() -> Vec<Preset> {
    vec![
        Preset::new("pisadb", "PisaDB's model of TransKV: 8 Tofino switches, 16 storage nodes, 4 client hosts")
            .stated("records", 10_000_000, "the 10M records the issue asked about; §VI does not give its key count")
            .stated("cache_per_switch", 65_536, "seed 003 §V: 64K cached keys per switch")
            .stated("ops_per_txn", 1, "seed 003 §VI: read and write transactions of single key-value operations")
            .assumed("outstanding", 16, "transactions each client host keeps in flight; §VI does not say")
            .assumed("zipf", 0.99, "the skewed workload's exponent when a figure does not name one (Fig. 10b)")
            .assumed("lease_us", 0, "0: four resolve times (a claim this old outlived every resolve of its client)")
            .assumed("refresh_epoch_us", 0, "0: no cache refresh; §VI's runs draw from one fixed popularity")
            .assumed(
                "controller_cores",
                2,
                "the coordinator's cores; Tranx-Coor's throughput is its message rate over four",
            )
            .assumed("nic_ns", 1_000, "1 µs per NIC crossing, a kernel-bypass 10 GbE NIC (crates/net: ASSUMED_NIC_NS)"),
        Preset::new("paper", "seed 003's setup, as far as §V–VI state it")
            .stated("cache_per_switch", 65_536, "seed 003 §V: 64K cached keys per switch")
            .stated("ops_per_txn", 1, "seed 003 §VI: transactions of single key-value operations")
            .stated("zipf", 0.99, "seed 003 §VI: skewed workloads with Zipf 0.95, 0.99, 1.2")
            .assumed("records", 10_000_000, "not stated (YCSB's basic database; keys of 16 bytes, values of 48)")
            .assumed("outstanding", 16, "not stated: the client library's window")
            .assumed("controller_cores", 1, "the paper's controller was one Python process (§V): one core")
            .assumed("nic_ns", 1_000, "not comparable: the paper's hosts and BMv2 switches were Mininet processes"),
    ]
}
