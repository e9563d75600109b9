//! `pisadb reproduce p4db [--quick]`: every experiment of the P4DB paper's evaluation in three
//! setups ([`Setup`]: the prototype's testbed with its switch as the paper ran it, faithful
//! P4DB on that testbed, faithful P4DB on PisaDB's model), run as one list on the harness's
//! runner (a configuration two figures need runs once), each written to
//! `<out>/<setup>/<experiment>.csv` and `.svg`, and the report `<out>/p4db.md` with the
//! harness's claims table: per setup and claim, the paper's words and value, ours (mean ± sd
//! over the seeds), their ratio and whether the trend holds.
//!
//! An experiment of a setup is named `<setup>/<experiment>` ([`reproduction_names`]), which
//! is what puts its files in the setup's directory. The claims say what they compute
//! ([`Measure`]) and are computed from the runs, never typed in; the paper's side is quoted
//! from its text (seed 000, §7), its value given where the text gives a number. What the
//! prototype measured at the same points is in every CSV (`prototype_*` columns) and drawn
//! dashed in every chart of throughput and speedup.

use super::data::{experiment as data_experiment, plan_options};
use super::{Experiment, Options, Plan};
use pisadb_harness::experiment::{Claim, Holds, Measure, Reproduction};
use pisadb_harness::{ExperimentOptions, DEFAULT_PRESET};
use std::sync::OnceLock;

/// One column of the report: whose testbed the points model and which switch configuration
/// P4DB runs with.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// The results' subdirectory.
    pub dir: &'static str,
    /// How the claims table names it.
    pub title: &'static str,
    /// The prototype's testbed (P4DB's `paper` preset) rather than PisaDB's model.
    testbed: bool,
    /// The switch as the paper's runs had it (ideal layout, parity locks in Fig. 15c), or
    /// P4DB's own (declustered layout, stage locks).
    as_run: bool,
}

impl Setup {
    /// The report's three setups, in order.
    pub const ALL: [Setup; 3] = [
        Setup { dir: "testbed-as-run", title: "testbed, as the paper ran it", testbed: true, as_run: true },
        Setup { dir: "testbed-faithful", title: "faithful P4DB, testbed", testbed: true, as_run: false },
        Setup { dir: "pisadb", title: "faithful P4DB, PisaDB's model", testbed: false, as_run: false },
    ];

    /// `options` with this setup's testbed and switch.
    fn options(&self, options: &Options) -> Options {
        Options { testbed: self.testbed, as_run: self.as_run, ..*options }
    }
}

/// Every experiment of every setup, as `reproduce` names them: `<setup>/<experiment>`.
pub fn reproduction_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        Setup::ALL
            .iter()
            .flat_map(|s| Experiment::all().iter().map(move |e| format!("{}/{}", s.dir, e.name())))
            .collect()
    })
}

/// What `pisadb reproduce p4db` runs and the report's prose.
pub fn reproduction(options: &ExperimentOptions) -> Reproduction {
    Reproduction {
        title: "P4DB (seed 000) reproduced by PisaDB's simulator".into(),
        intro: format!(
            "`pisadb reproduce p4db{}`: {} experiments in {} setups. Every figure below is computed from the \
             simulated results in this directory; the paper's side is quoted from its text (§7). The CSVs and charts \
             also hold what the P4DB prototype published for the same configurations (DataManagementLab/p4db \
             `figures/data`, means over its runs; the paper's figures plot the best of three), with the switch the \
             paper used. The simulator's cost model is calibrated from benchmarks of PisaDB's own code and the \
             testbed's fitted latencies (`CALIBRATION.md`), not fitted to the paper's results.\n\n\
             The three setups (one directory each):\n\n\
             - **testbed, as the paper ran it** (`testbed-as-run/`; `--preset paper --layout ideal`): the \
             prototype's workloads, node engine, latencies and two FIFO recirculation ports, and the switch as the \
             prototype's runs had it: every hot transaction one pass without locks, the operations that did not fit \
             that pass NOT executed (`SWITCH_NO_CONFLICT`, an upper bound no register layout achieves), `idx % N` \
             for the random layout, and Fig. 15c's fine-grained step with the parity lock rule (not serializable).\n\
             - **faithful P4DB, testbed** (`testbed-faithful/`; `--preset paper`): the same testbed with P4DB as \
             the paper describes it: the declustered layout, multi-pass transactions under the pipeline lock halves \
             of the stages they touch.\n\
             - **faithful P4DB, PisaDB's model** (`pisadb/`; the default): PisaDB's engine, network and measured \
             costs, the declustered layout. The answer a user of PisaDB's engine gets.",
            if options.quick { " --quick" } else { "" },
            Experiment::all().len(),
            Setup::ALL.len()
        ),
        experiments: reproduction_names().iter().map(String::as_str).collect(),
        notes: String::new(),
    }
}

/// Experiment `name` of P4DB as data: `<experiment>` (a sweep, under the preset asked for) or
/// `<setup>/<experiment>` (one of `reproduce`'s, under its setup; no preset may be given).
pub fn experiment(name: &str, options: &ExperimentOptions) -> Result<pisadb_harness::Experiment, String> {
    let Some((dir, experiment)) = name.split_once('/') else {
        let e = Experiment::from_name(name)?;
        return Ok(data_experiment(e, &plan_options(options)?, e.name().to_string(), |p| claims(p, None)));
    };
    if options.preset != DEFAULT_PRESET {
        return Err("--preset: `reproduce p4db` runs its three setups (the testbed as run, faithful P4DB on the \
                    testbed, PisaDB's model) itself; give no preset"
            .into());
    }
    let setup = Setup::ALL.iter().find(|s| s.dir == dir).ok_or_else(|| {
        let dirs: Vec<&str> = Setup::ALL.iter().map(|s| s.dir).collect();
        format!("no P4DB setup `{dir}`; its setups: {}", dirs.join(", "))
    })?;
    let e = Experiment::from_name(experiment)?;
    let options = setup.options(&plan_options(options)?);
    Ok(data_experiment(e, &options, name.to_string(), |p| claims(p, Some(setup.title))))
}

/// The largest x of a panel (e.g. the most workers swept).
fn last_x(plan: &Plan, panel: &str) -> f64 {
    plan.points.iter().filter(|p| p.panel == panel).map(|p| p.x).fold(f64::NAN, f64::max)
}

fn first_x(plan: &Plan, panel: &str) -> f64 {
    plan.points.iter().filter(|p| p.panel == panel).map(|p| p.x).fold(f64::NAN, f64::min)
}

fn distinct_panels(plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in &plan.points {
        if !out.contains(&p.panel) {
            out.push(p.panel.clone());
        }
    }
    out
}

/// The speedup of `series` at `panel`, `x` over its baseline, in committed transactions per
/// second.
fn speedup(panel: &str, series: &str, x: f64) -> Measure {
    Measure::Speedup { panel: panel.into(), series: series.into(), x, key: "committed_per_s" }
}

/// The headline claims of one experiment's plan, their words prefixed with the setup's title.
pub fn claims(plan: &Plan, setup: Option<&str>) -> Vec<Claim> {
    let claim = |figure: &str, words: String, paper: Option<f64>, ours: Measure, holds: Holds| Claim {
        words: setup.map_or(words.clone(), |s| format!("[{s}] {words}")),
        source: format!("Fig. {figure}"),
        paper,
        ours,
        holds,
        reason: None,
    };
    let faster = Holds::Above(1.0);
    let ratio = Holds::SameSideOf(1.0);
    match plan.experiment {
        Experiment::YcsbWorkers => {
            let mut out = Vec::new();
            for (mix, paper) in [("YCSB-A", Some(5.0)), ("YCSB-B", None), ("YCSB-C", None)] {
                let x = last_x(plan, mix);
                let words = format!("{mix}: P4DB over No-Switch, {x} workers (paper: up to 5x, A highest)");
                out.push(claim(
                    "11 (upper)",
                    words,
                    paper,
                    speedup(mix, "P4DB", x),
                    if paper.is_some() { ratio } else { faster },
                ));
            }
            let x = last_x(plan, "YCSB-A");
            out.push(claim(
                "11 (upper)",
                format!("YCSB-A: LM-Switch over No-Switch, {x} workers (paper: no significant speedup)"),
                None,
                speedup("YCSB-A", "LM-Switch", x),
                Holds::Within(0.8, 1.25),
            ));
            out
        }
        Experiment::YcsbRemote => {
            let (lo, hi) = (first_x(plan, "YCSB-A"), last_x(plan, "YCSB-A"));
            vec![
                claim(
                    "11 (lower)",
                    format!("YCSB-A: P4DB over No-Switch, {hi}% remote (paper: more than 6x)"),
                    Some(6.0),
                    speedup("YCSB-A", "P4DB", hi),
                    ratio,
                ),
                claim(
                    "11 (lower)",
                    format!("YCSB-A: P4DB over No-Switch, {lo}% remote (paper: still a significant speedup)"),
                    None,
                    speedup("YCSB-A", "P4DB", lo),
                    faster,
                ),
            ]
        }
        Experiment::YcsbBreakdown => {
            let x = last_x(plan, "YCSB-A");
            vec![claim(
                "12",
                format!("YCSB-A: P4DB's hot throughput over No-Switch's, {x} workers (paper: the gain comes from hot transactions)"),
                None,
                Measure::ratio("YCSB-A", "P4DB", "No-Switch", x, "hot_committed_per_s"),
                faster,
            )]
        }
        Experiment::YcsbHot => {
            let x = last_x(plan, "YCSB-A");
            vec![claim(
                "15a/b",
                format!("YCSB-A: P4DB over No-Switch at {x}% hot (paper: more than 50x at 100% hot)"),
                Some(50.0),
                speedup("YCSB-A", "P4DB", x),
                ratio,
            )]
        }
        Experiment::SmallbankWorkers => distinct_panels(plan)
            .iter()
            .enumerate()
            .map(|(k, panel)| {
                let x = last_x(plan, panel);
                let (paper, words) = if k == 0 {
                    (3.0, "up to 3x (5 hot accounts per node)")
                } else {
                    (2.0, "up to 2x as the hot set grows")
                };
                let what = format!("SmallBank, {panel}: P4DB over No-Switch, {x} workers (paper: {words})");
                claim("13 (upper)", what, Some(paper), speedup(panel, "P4DB", x), ratio)
            })
            .collect(),
        Experiment::SmallbankRemote => {
            let panel = distinct_panels(plan).into_iter().next().unwrap_or_default();
            let x = last_x(plan, &panel);
            vec![claim(
                "13 (lower)",
                format!("SmallBank, {panel}: P4DB over No-Switch, {x}% remote (paper: a speedup similar to YCSB's)"),
                None,
                speedup(&panel, "P4DB", x),
                faster,
            )]
        }
        Experiment::TpccWorkers => distinct_panels(plan)
            .into_iter()
            .map(|panel| {
                let x = last_x(plan, &panel);
                let (paper, words) = if panel.starts_with("8 ") {
                    (Some(2.0), "more than 2x (8 warehouses, 20 workers)")
                } else if panel.starts_with("32 ") {
                    (Some(1.3), "1.3x (32 warehouses)")
                } else {
                    (None, "between the two")
                };
                let what = format!("TPC-C, {panel}: P4DB over No-Switch, {x} workers (paper: {words})");
                claim(
                    "14 (upper)",
                    what,
                    paper,
                    speedup(&panel, "P4DB", x),
                    if paper.is_some() { ratio } else { faster },
                )
            })
            .collect(),
        Experiment::TpccRemote => {
            let panel = distinct_panels(plan).into_iter().next().unwrap_or_default();
            let x = last_x(plan, &panel);
            vec![claim(
                "14 (lower)",
                format!("TPC-C, {panel}: P4DB over No-Switch at {x}% remote (paper: up to 2.5x across remote probabilities)"),
                Some(2.5),
                speedup(&panel, "P4DB", x),
                ratio,
            )]
        }
        Experiment::SwitchOptimizations => {
            let step = |x| speedup("hot YCSB-A", "P4DB", x);
            vec![
                claim("15c", "+ fast recirculation, over no optimization".into(), Some(1.66), step(2.0), ratio),
                claim("15c", "+ fine-grained locks, over no optimization".into(), Some(2.6), step(3.0), ratio),
                claim(
                    "15c",
                    "+ the best layout (declustered; ideal as the paper ran it), over no optimization".into(),
                    Some(3.26),
                    step(4.0),
                    ratio,
                ),
            ]
        }
        Experiment::Layout => distinct_panels(plan)
            .into_iter()
            .map(|panel| {
                let x = last_x(plan, &panel);
                let best = plan
                    .points
                    .iter()
                    .find(|p| p.panel == panel && p.series != "random layout")
                    .map_or_else(String::new, |p| p.series.clone());
                let (words, holds) = match panel.as_str() {
                    "SmallBank" => ("the largest gain of the three", faster),
                    "TPC-C" => {
                        ("almost no effect: warm transactions are limited by their cold part", Holds::Within(0.9, 1.1))
                    }
                    _ => ("a gain, smaller than SmallBank's", faster),
                };
                let what = format!("{panel}: P4DB's layout over the random one, {x} workers (paper: {words})");
                claim("16", what, None, speedup(&panel, &best, x), holds)
            })
            .collect(),
        Experiment::HotOverflow => {
            let x = last_x(plan, "YCSB-A");
            let series = plan
                .points
                .iter()
                .find(|p| p.series.starts_with("P4DB, 4 B"))
                .map(|p| p.series.clone())
                .unwrap_or_default();
            vec![claim(
                "17",
                format!(
                    "YCSB-A, hot set of {:.0} tuples, {series}: committed txn/s (paper: about 3 M, degrading gracefully)",
                    10f64.powf(x)
                ),
                Some(3e6),
                Measure::Value { panel: "YCSB-A".into(), series, x, key: "committed_per_s" },
                Holds::Within(1.5e6, 6e6),
            )]
        }
        Experiment::TpccLatencyBreakdown => vec![claim(
            "18a",
            "lock + read latency, P4DB over No-Switch (paper: less time in lock acquisition and remote access)".into(),
            None,
            Measure::ratio("8 warehouses", "P4DB", "No-Switch", 20.0, "latency_breakdown.lock_read_us"),
            Holds::Below(1.0),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_claim_of_every_setup_names_points_its_experiment_has() {
        let options = ExperimentOptions::new(true, 1, "unused");
        for name in reproduction_names() {
            let e = experiment(name, &options).unwrap();
            assert!(e.file_stem.starts_with(name.split('/').next().unwrap()), "{name}: {}", e.file_stem);
            for c in &e.claims {
                let (Measure::Value { panel, series, x, .. }
                | Measure::Speedup { panel, series, x, .. }
                | Measure::Ratio { panel, series, x, .. }) = &c.ours;
                let point = e.find(panel, series, *x);
                assert!(point.is_some(), "{name}: {} names no point", c.words);
                match &c.ours {
                    Measure::Ratio { over, .. } => assert!(e.find(panel, over, *x).is_some(), "{name}: {}", c.words),
                    Measure::Speedup { .. } => assert!(point.and_then(|i| e.baseline_of(i)).is_some(), "{}", c.words),
                    Measure::Value { .. } => {}
                }
            }
        }
    }

    #[test]
    fn reproduce_refuses_a_preset_and_sweep_refuses_an_unknown_one() {
        let mut options = ExperimentOptions::new(true, 1, "unused");
        options.preset = "paper".into();
        assert!(experiment("pisadb/layout", &options).unwrap_err().contains("give no preset"));
        assert!(experiment("layout", &options).is_ok());
        options.preset = "lab".into();
        assert!(experiment("layout", &options).unwrap_err().contains("pisadb, paper"));
    }
}
