//! Gotthard's fault-injection cases: many short racks, each shaped and harmed by its seed,
//! each checked by the same oracles (`pisadb fuzz --system gotthard`).
//!
//! ## One seed, one case
//!
//! [`FuzzCase::from_seed`] derives everything from the seed: the switch's mode (all four), the
//! number of clients, the share of writes, the commits per client, data-center delays on both
//! links (so a case is milliseconds of simulated time), and a [`Faults`] plan of the shared
//! simulator: lossy, duplicating and reordering links, a slow link of the client host or of
//! the store, and crashes of the switch, which restarts with empty registers (its state is
//! soft) and its control plane's tables reinstalled ([`SwitchRestarts`]). The store and the client host do not crash: the paper's store
//! keeps its data in memory with no log, so a crashed store loses it by design, and that is
//! not what these cases ask. The plan heals part-way through; the run goes on until every
//! client has its commits. A failing seed replays exactly: the simulator reads no clock.
//!
//! ## The oracles
//!
//! The run must end (within [`MAX_EVENTS`]: a protocol that waits forever for a lost answer,
//! or livelocks, does not), and then [`crate::rack::RackObserver::check`] must hold: the
//! store's committed history is serializable (`pisadb_check`); no transaction committed twice
//! at the store or was counted twice by its client; the clients counted exactly the write
//! transactions the store committed, so no commit was lost or taken for an abort; the hot key
//! holds one increment per counted write; every client finished.

use crate::control::configure;
use crate::program::{Gotthard, Mode};
use crate::rack::{build, control_plane, figures, RackConfig, RackHost, RackWorld, CLIENT_HOST, STORE_HOST};
use pisadb_core::rng::{derive, SeededRng};
use pisadb_core::Nanos;
use pisadb_harness::FuzzReport;
use pisadb_sim::faults::Faults;
use pisadb_sim::swarm::{Crashes, FaultKind, Pick, SlowLinks, Spacing, Swarm, TargetPick, Tolerated};
use pisadb_sim::Restarts;
use pisadb_switch::{Switch, SwitchProfile};
use rand::Rng;
use serde::Serialize;

/// The step limit of a case.
pub const MAX_EVENTS: u64 = 5_000_000;

/// One seed's rack and faults.
#[derive(Clone, Debug)]
pub struct FuzzCase {
    /// The seed everything came from.
    pub seed: u64,
    /// The switch's mode.
    pub mode: Mode,
    /// The rack.
    pub config: RackConfig,
    /// What goes wrong.
    pub faults: Faults,
}

/// What one case did.
#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    /// The seed.
    pub seed: u64,
    /// A one-line description of the rack.
    pub rack: String,
    /// A one-line description of the faults.
    pub faults: String,
    /// Transactions the clients counted as committed.
    pub committed: u64,
    /// Aborts, all sources.
    pub aborts: u64,
    /// Attempts sent again after a timeout.
    pub retransmissions: u64,
    /// Requests the store answered from a remembered commit.
    pub store_replays: u64,
    /// Datagrams lost on a hop.
    pub lost: u64,
    /// Datagrams duplicated.
    pub duplicated: u64,
    /// Switch crashes.
    pub crashes: u64,
    /// Simulated time to the last client's last commit, µs.
    pub completion_us: f64,
    /// Events simulated.
    pub events: u64,
    /// The trace hash.
    pub trace_hash: String,
    /// The first oracle that failed, if any.
    pub failure: Option<String>,
}

/// Restarts a crashed switch with empty registers, its control plane's configuration
/// reinstalled before it takes traffic ([`crate::control`]); hosts do not crash in these cases.
#[derive(Debug)]
pub struct SwitchRestarts {
    /// The mode the switch runs in.
    pub mode: Mode,
}

impl Restarts<RackHost, Switch<Gotthard>> for SwitchRestarts {
    fn host(&mut self, id: u16, _log: &[crate::store::StoreRecord]) -> Result<RackHost, String> {
        Err(format!("host {id} crashed, but Gotthard's cases crash only the switch (real mode kills the store)"))
    }

    fn switch(
        &mut self,
        _id: u16,
        _logs: &[Vec<crate::store::StoreRecord>],
        _epoch: u16,
    ) -> Result<Switch<Gotthard>, String> {
        let mut switch = Switch::new(SwitchProfile::tofino1(), Gotthard::new()).map_err(|e| e.to_string())?;
        configure(&mut switch, &control_plane(self.mode))?;
        Ok(switch)
    }
}

/// The faults Gotthard's racks tolerate: every network fault and crashes of the switch (the
/// store keeps no log, so it is never crashed).
pub fn tolerated() -> Tolerated {
    use FaultKind::*;
    Tolerated::of(&[Loss, Duplication, Jitter, Reordering, SlowLink, SwitchCrash])
}

/// A case's faults, drawn by the swarm in the order Gotthard's cases always drew them.
fn draw_faults(rng: &mut SeededRng, seed: u64) -> Faults {
    use FaultKind::*;
    let mut swarm = Swarm::new(rng, seed, tolerated());
    // A case commits in a few milliseconds of simulated time: the faults cover most of it.
    let heal_at_ns = swarm.heal(Pick::Range(1_000_000, 8_000_001));
    swarm.toggle(&[(Loss, 0.6), (Duplication, 0.5), (Jitter, 0.5), (SlowLink, 0.3)]);
    swarm.loss(Pick::Range(0.001, 0.1));
    swarm.duplicate(Pick::Range(0.001, 0.1));
    swarm.jitter(Pick::Range(1_000, 100_000));
    swarm.reorder(0.5);
    swarm.slow_links(&SlowLinks {
        count: Pick::Fixed(1),
        from_ns: Pick::Range(0, heal_at_ns / 2),
        node: Pick::Coin(0.5, CLIENT_HOST, STORE_HOST),
        length_ns: Pick::Fixed(1_000_000),
        extra_ns: Pick::Range(10_000, 500_000),
    });
    swarm.crashes(&Crashes {
        count: Pick::Range(0, 3),
        target: TargetPick::Switch(Pick::Fixed(0)),
        at_ns: Pick::Range(0, heal_at_ns),
        down_ns: Pick::Range(10_000, 2_000_000),
        // One crash at a time.
        spacing: Spacing::Disjoint,
    });
    swarm.finish()
}

impl FuzzCase {
    /// The case of `seed`.
    pub fn from_seed(seed: u64) -> FuzzCase {
        let mut rng = derive(seed, "gotthard-fuzz-case");
        let mode = [Mode::Forward, Mode::ReadCache, Mode::EarlyAbort, Mode::OptimisticAbort][rng.random_range(0..4)];
        let config = RackConfig {
            clients: rng.random_range(1..=6),
            write_share: [0.0, 0.1, 0.25, 0.5, 1.0][rng.random_range(0..5)],
            commits_per_client: rng.random_range(5..=30),
            near_us: rng.random_range(2..=50),
            far_us: rng.random_range(5..=200),
            seed,
            // The default: the larger of three round trips and 1 ms.
            retransmit_us: 0,
            // The fault plan draws its own jitter.
            jitter_us: 0,
            costs: crate::costs::Costs::MEASURED,
        };
        let faults = draw_faults(&mut rng, seed);
        FuzzCase { seed, mode, config, faults }
    }

    /// A one-line description of the rack.
    pub fn describe_rack(&self) -> String {
        let c = &self.config;
        format!(
            "{:?} {} clients {:.0}% writes {}+{} µs",
            self.mode,
            c.clients,
            c.write_share * 100.0,
            c.near_us,
            c.far_us
        )
    }
}

/// Runs `case` and every oracle on it.
pub fn run_case(case: &FuzzCase) -> CaseReport {
    let mut report = CaseReport {
        seed: case.seed,
        rack: case.describe_rack(),
        faults: case.faults.describe(),
        committed: 0,
        aborts: 0,
        retransmissions: 0,
        store_replays: 0,
        lost: 0,
        duplicated: 0,
        crashes: 0,
        completion_us: 0.0,
        events: 0,
        trace_hash: String::new(),
        failure: None,
    };
    let mut world: RackWorld = match build(case.mode, &case.config) {
        Ok(world) => world,
        Err(e) => {
            report.failure = Some(format!("build: {e}"));
            return report;
        }
    };
    world.inject(case.faults.clone(), Box::new(SwitchRestarts { mode: case.mode }));
    let ran = world.run(0, Nanos::MAX / 2, MAX_EVENTS);
    let f = figures(&world);
    let stats = world.fault_stats();
    report.committed = f.commits;
    report.aborts = f.aborts_store + f.aborts_switch + f.aborts_switch_optimistic;
    report.retransmissions = f.retransmissions;
    report.store_replays = f.store_replays;
    report.lost = stats.lost;
    report.duplicated = stats.duplicated;
    report.crashes = stats.switch_crashes + stats.node_crashes;
    report.completion_us = f.completion_s * 1e6;
    report.events = f.events;
    report.trace_hash = f.trace_hash.clone();
    report.failure = match ran {
        Err(e) => Some(format!("run: {e}")),
        Ok(()) => world.observer().check(case.config.clients, f.final_value).err(),
    };
    report
}

/// The case of `seed`, run and checked, for the harness.
pub fn fuzz_report(seed: u64) -> FuzzReport {
    let r = run_case(&FuzzCase::from_seed(seed));
    FuzzReport {
        seed,
        case: r.rack.clone(),
        faults: r.faults.clone(),
        committed: r.committed,
        lost: r.lost,
        duplicated: r.duplicated,
        crashes: r.crashes,
        detail: format!("{:>5} retransmits {:>5} aborts", r.retransmissions, r.aborts),
        failure: r.failure.clone(),
        report: serde_json::to_value(&r).unwrap_or(serde_json::Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handful_of_seeds_pass_every_oracle() {
        for seed in 1..=12 {
            let r = run_case(&FuzzCase::from_seed(seed));
            assert_eq!(r.failure, None, "seed {seed}: {r:?}");
        }
    }

    #[test]
    fn a_case_replays_identically() {
        let case = FuzzCase::from_seed(3);
        let (a, b) = (run_case(&case), run_case(&case));
        assert_eq!((a.trace_hash, a.events), (b.trace_hash, b.events));
    }

    #[test]
    fn faults_are_injected_and_survived() {
        // Over a few seeds the plans lose, duplicate and crash: the oracles must have had
        // something to check.
        let reports: Vec<CaseReport> = (1..=12).map(|s| run_case(&FuzzCase::from_seed(s))).collect();
        assert!(reports.iter().any(|r| r.lost > 0 && r.retransmissions > 0));
        assert!(reports.iter().any(|r| r.duplicated > 0));
        assert!(reports.iter().any(|r| r.crashes > 0));
    }
}
