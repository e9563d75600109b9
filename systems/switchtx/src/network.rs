//! The network a rack runs on, as settings: the NIC's latency and the spread of each hop's
//! delay (`network.nic_ns`, `network.jitter_ns`, `network.reorder`).
//!
//! The simulator's links ([`pisadb_net::LinkParams`]) charge a fixed NIC latency at each end
//! of a host's link; every figure the default `pisadb` preset runs with is the shared 100 GbE
//! link's (an assumed 1 µs per end) and a network without variance, so that SwitchTx's pinned
//! figures do not move. The `paper` preset names an RDMA-class NIC instead
//! ([`crate::presets`]), and a delay per hop drawn uniformly from `0..=jitter_ns`, which may
//! let a later datagram overtake an earlier one (`reorder`): the paper's network "may have
//! problems such as packet loss and out-of-order issues" (§3.5) and its Fig. 11 blames the
//! P99's growth on "network quality fluctuations" (§5.3.1).
//!
//! The variance is not a second mechanism: it is the simulator's fault plan
//! ([`pisadb_sim::Faults`], the one every system's fuzzing uses) with only its jitter set, no
//! loss and no duplication, healed when the measured window closes (the drain that follows is
//! not measured and ends faster on a quiet network). Its draws come from a generator seeded
//! from the run's seed, so one seed still gives one trace hash. A fault plan a point already
//! carries (the failover experiment's crash) keeps its crashes and gains the jitter.

use pisadb_core::Nanos;
use pisadb_net::LinkParams;
use pisadb_sim::Faults;
use serde::{Deserialize, Serialize};

/// The network's figures a run may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// NIC and stack latency at each end of a host's link, per direction (ns).
    #[serde(default = "default_nic_ns")]
    pub nic_ns: Nanos,
    /// Each hop's extra delay is drawn uniformly from `0..=jitter_ns` (0: none).
    #[serde(default)]
    pub jitter_ns: Nanos,
    /// Whether the jitter may reorder a link's datagrams (else they queue behind a delayed one).
    #[serde(default)]
    pub reorder: bool,
}

fn default_nic_ns() -> Nanos {
    LinkParams::hundred_gbe().nic_ns
}

impl Default for Network {
    fn default() -> Self {
        Network { nic_ns: default_nic_ns(), jitter_ns: 0, reorder: false }
    }
}

impl Network {
    /// Whether this is the shared 100 GbE link without variance (a run's settings leave it
    /// out then, so settings written before it was a setting read and print the same).
    pub fn is_default(&self) -> bool {
        *self == Network::default()
    }

    /// The links' figures: 100 GbE with this NIC latency.
    pub fn link(&self) -> LinkParams {
        LinkParams { nic_ns: self.nic_ns, ..LinkParams::hundred_gbe() }
    }

    /// The fault plan of a run: `faults` (or none) with this network's jitter until
    /// `window_end_ns`; `faults` unchanged when there is no jitter.
    pub fn with_jitter(&self, faults: Option<Faults>, seed: u64, window_end_ns: Nanos) -> Option<Faults> {
        if self.jitter_ns == 0 {
            return faults;
        }
        let mut plan =
            faults.unwrap_or(Faults { seed: pisadb_core::rng::splitmix64(seed ^ JITTER_STREAM), ..Faults::default() });
        plan.jitter_ns = self.jitter_ns;
        plan.reorder = self.reorder;
        plan.heal_at_ns = plan.heal_at_ns.max(window_end_ns);
        Some(plan)
    }
}

/// Separates the jitter's generator from the run's other streams seeded from the same seed.
const JITTER_STREAM: u64 = 0x6a69_7474_6572; // "jitter"

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_jitter_leaves_the_plan_alone_and_jitter_joins_one() {
        let quiet = Network::default();
        assert!(quiet.is_default());
        assert_eq!(quiet.with_jitter(None, 1, 10), None, "the default runs inject nothing");
        let noisy = Network { nic_ns: 300, jitter_ns: 500, reorder: true };
        let plan = noisy.with_jitter(None, 1, 10_000).unwrap();
        assert_eq!((plan.jitter_ns, plan.reorder, plan.heal_at_ns, plan.loss), (500, true, 10_000, 0.0));
        assert!(plan.network_faulty(9_999) && !plan.network_faulty(10_000), "healed when the window closes");
        let crash = Faults { seed: 7, crashes: Vec::new(), heal_at_ns: 0, ..Faults::default() };
        let both = noisy.with_jitter(Some(crash), 1, 10_000).unwrap();
        assert_eq!((both.seed, both.jitter_ns), (7, 500), "a point's own plan keeps its seed and gains the jitter");
        assert_eq!(noisy.link().nic_ns, 300);
        assert_eq!(noisy.link().gbps, 100.0);
    }
}
