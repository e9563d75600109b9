//! Gotthard's experiments: the paper's Fig. 2 and two sensitivity sweeps, each a set of
//! simulated racks run in parallel, written as CSV and SVG, and `pisadb reproduce gotthard`'s
//! report with our figures beside the paper's claims.
//!
//! - `fig2`: completion time against the share of write transactions {0, 5, 10, 15, 25, 35,
//!   50, 75, 100}% for the four switch modes, with N = 8 clients (the paper's figure) and also
//!   N = 2 and 4.
//! - `delay-split`: the one-way client–store delay (50 ms) split between the client–switch
//!   and switch–store links, 1% to 90% of it near the client, at 25% and 50% writes.
//! - `total-delay`: the one-way delay itself, from data-center microseconds to 100 ms, split
//!   20/80 as in the paper, at 25% writes.
//!
//! Every point is an independent seeded simulation ([`crate::rack::run`]), so the threads
//! change nothing but the wall time. The report's claims are computed from the results with
//! the thresholds it states; the paper's side is quoted from its text (seed 004, §Evaluation).

use crate::rack::{mode_of, run, RackConfig, RackFigures};
use pisadb_harness::{ExperimentName, ExperimentOptions};
use pisadb_report::{run_all, write_csv, write_svg, Panel, Series, Unit};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The experiments, as `pisadb sweep --system gotthard NAME` names them.
pub const EXPERIMENTS: &[ExperimentName] = &[
    ExperimentName {
        name: "fig2",
        summary: "Fig. 2: completion time against the share of writes, four switch modes, N = 8 (and 2, 4)",
    },
    ExperimentName {
        name: "delay-split",
        summary: "the 50 ms one-way delay split 1%..90% near the client, at 25% and 50% writes",
    },
    ExperimentName {
        name: "total-delay",
        summary: "the one-way delay from data-center microseconds to 100 ms, split 20/80, at 25% writes",
    },
];

/// The four variants, in the order the charts list them.
const VARIANTS: [&str; 4] = ["forward", "read-cache", "gotthard", "early-abort"];
/// The write shares of Fig. 2, in percent.
const WRITE_SHARES: [f64; 9] = [0.0, 5.0, 10.0, 15.0, 25.0, 35.0, 50.0, 75.0, 100.0];
/// The shares of the delay near the client, in percent.
const SPLITS: [f64; 9] = [1.0, 5.0, 10.0, 20.0, 35.0, 50.0, 65.0, 80.0, 90.0];
/// One-way client–store delays, in microseconds.
const TOTAL_DELAYS_US: [u64; 7] = [5, 25, 250, 2_500, 10_000, 50_000, 100_000];

/// One simulated point.
#[derive(Clone, Debug)]
struct Point {
    /// The chart panel.
    panel: String,
    /// The variant (the line).
    variant: &'static str,
    /// The x value as charted.
    x: f64,
    /// The rack.
    cfg: RackConfig,
}

/// An experiment's points and how to chart them.
#[derive(Clone, Debug)]
struct Plan {
    /// Its name.
    name: &'static str,
    /// The figure's title.
    title: String,
    /// The x axis.
    x_label: &'static str,
    /// The x axis's unit.
    x_unit: Unit,
    /// Whether the y axis is the completion time relative to forwarding (else in seconds).
    relative: bool,
    /// The points.
    points: Vec<Point>,
}

/// The paper's setup with `quick`'s shorter runs.
fn base(options: &ExperimentOptions) -> RackConfig {
    RackConfig {
        commits_per_client: if options.quick { 100 } else { 1000 },
        seed: options.seed,
        ..RackConfig::default()
    }
}

fn plan(name: &str, options: &ExperimentOptions) -> Result<Plan, String> {
    let base = base(options);
    let mut points = Vec::new();
    let mut add = |panel: String, x: f64, cfg: RackConfig| {
        for variant in VARIANTS {
            points.push(Point { panel: panel.clone(), variant, x, cfg: cfg.clone() });
        }
    };
    let commits = base.commits_per_client;
    let (title, x_label, x_unit, relative) = match name {
        "fig2" => {
            for clients in [8, 4, 2] {
                for w in WRITE_SHARES {
                    add(format!("N = {clients}"), w, RackConfig { clients, write_share: w / 100.0, ..base.clone() });
                }
            }
            (
                format!("Gotthard Fig. 2: time to complete {commits} commits per client"),
                "write transactions",
                Unit::Percent,
                false,
            )
        }
        "delay-split" => {
            let total = base.near_us + base.far_us;
            for w in [25.0, 50.0] {
                for split in SPLITS {
                    let near_us = (total as f64 * split / 100.0).round() as u64;
                    let cfg = RackConfig { write_share: w / 100.0, near_us, far_us: total - near_us, ..base.clone() };
                    add(format!("{w:.0}% writes"), split, cfg);
                }
            }
            (
                "Gotthard: completion relative to forwarding, 50 ms one-way split between the links".into(),
                "share of the delay near the client",
                Unit::Percent,
                true,
            )
        }
        "total-delay" => {
            for total in TOTAL_DELAYS_US {
                let near_us = total / 5;
                let cfg = RackConfig { near_us, far_us: total - near_us, ..base.clone() };
                add("25% writes".into(), (total as f64 * 1e-6).log10(), cfg);
            }
            (
                "Gotthard: completion relative to forwarding against the one-way delay (split 20/80)".into(),
                "one-way delay, seconds (log scale)",
                Unit::Log10Count,
                true,
            )
        }
        other => {
            let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
            return Err(format!("no experiment `{other}`; accepted: {}", names.join(", ")));
        }
    };
    let name = EXPERIMENTS.iter().find(|e| e.name == name).map_or("", |e| e.name);
    Ok(Plan { name, title, x_label, x_unit, relative, points })
}

/// Runs every point of `plan` on `threads` threads; results in the plan's order.
fn run_plan(plan: &Plan, threads: usize) -> Result<Vec<RackFigures>, String> {
    let describe = |p: &Point| format!("{} {} x={}", p.panel, p.variant, p.x);
    run_all(&plan.points, threads, plan.name, describe, |p| {
        mode_of(p.variant)
            .and_then(|mode| run(mode, &p.cfg))
            .map_err(|e| format!("{}, {} {} x={}: {e}", plan.name, p.panel, p.variant, p.x))
    })
    .into_iter()
    .collect()
}

/// The completion time of forwarding at point `i`'s panel and x (the baseline).
fn forward_s(plan: &Plan, results: &[RackFigures], i: usize) -> f64 {
    let p = &plan.points[i];
    plan.points
        .iter()
        .position(|b| b.variant == "forward" && b.panel == p.panel && b.x == p.x)
        .map_or(f64::NAN, |b| results[b].completion_s)
}

const HEADER: [&str; 22] = [
    "experiment",
    "panel",
    "variant",
    "x",
    "clients",
    "write_share",
    "near_us",
    "far_us",
    "commits_per_client",
    "completion_s",
    "relative_to_forward",
    "commits",
    "aborts_store",
    "aborts_switch",
    "aborts_switch_optimistic",
    "retries",
    "retransmissions",
    "latency_us_mean",
    "latency_us_p50",
    "latency_us_p99",
    "events",
    "trace_hash",
];

/// Writes `<out>/gotthard-<experiment>.csv` and `.svg`; returns their paths.
fn write_outputs(plan: &Plan, results: &[RackFigures], out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let rows: Vec<Vec<String>> = plan
        .points
        .iter()
        .zip(results)
        .enumerate()
        .map(|(i, (p, f))| {
            vec![
                plan.name.to_string(),
                p.panel.clone(),
                p.variant.to_string(),
                p.x.to_string(),
                p.cfg.clients.to_string(),
                p.cfg.write_share.to_string(),
                p.cfg.near_us.to_string(),
                p.cfg.far_us.to_string(),
                p.cfg.commits_per_client.to_string(),
                f.completion_s.to_string(),
                (f.completion_s / forward_s(plan, results, i)).to_string(),
                f.commits.to_string(),
                f.aborts_store.to_string(),
                f.aborts_switch.to_string(),
                f.aborts_switch_optimistic.to_string(),
                f.retries.to_string(),
                f.retransmissions.to_string(),
                f.latency.latency_us_mean.to_string(),
                f.latency.latency_us_p50.to_string(),
                f.latency.latency_us_p99.to_string(),
                f.events.to_string(),
                f.trace_hash.clone(),
            ]
        })
        .collect();
    let csv = out.join(format!("gotthard-{}.csv", plan.name));
    let svg = out.join(format!("gotthard-{}.svg", plan.name));
    write_csv(&csv, &HEADER, &rows).map_err(|e| e.to_string())?;
    let mut panels: Vec<Panel> = Vec::new();
    for (i, p) in plan.points.iter().enumerate() {
        let y =
            if plan.relative { results[i].completion_s / forward_s(plan, results, i) } else { results[i].completion_s };
        let panel = match panels.iter_mut().position(|q| q.title == p.panel) {
            Some(k) => &mut panels[k],
            None => {
                panels.push(Panel {
                    title: p.panel.clone(),
                    x_label: plan.x_label.into(),
                    x_unit: plan.x_unit,
                    y_label: if plan.relative { "completion / forward's".into() } else { "completion time".into() },
                    y_unit: if plan.relative { Unit::Ratio } else { Unit::Seconds },
                    series: Vec::new(),
                });
                panels.last_mut().expect("just pushed")
            }
        };
        match panel.series.iter_mut().find(|s| s.name == p.variant) {
            Some(s) => s.points.push((p.x, y)),
            None => panel.series.push(Series::new(p.variant, vec![(p.x, y)])),
        }
    }
    write_svg(&svg, &plan.title, panels.len().min(3), &panels).map_err(|e| e.to_string())?;
    Ok((csv, svg))
}

/// The result of `variant` at `panel`, `x`.
fn at<'a>(plan: &Plan, results: &'a [RackFigures], panel: &str, variant: &str, x: f64) -> Option<&'a RackFigures> {
    let i = plan.points.iter().position(|p| p.panel == panel && p.variant == variant && p.x == x)?;
    Some(&results[i])
}

/// "Almost no benefit": the read cache saves less than this share of forwarding's time.
const ALMOST_NO_BENEFIT: f64 = 0.10;
/// "Halves": Gotthard's completion at most this share of forwarding's.
const HALVES: f64 = 0.55;

/// The paper's two claims about Fig. 2, checked against ours: Markdown rows.
fn claims(plan: &Plan, r: &[RackFigures]) -> String {
    let mut s = String::from("| claim (paper, §Evaluation) | ours | holds? |\n|---|---|---|\n");
    let saving = |w: f64| {
        let (f, c) = (at(plan, r, "N = 8", "forward", w)?, at(plan, r, "N = 8", "read-cache", w)?);
        Some(1.0 - c.completion_s / f.completion_s)
    };
    let above: Vec<(f64, f64)> =
        WRITE_SHARES.iter().filter(|w| **w > 15.0).filter_map(|&w| Some((w, saving(w)?))).collect();
    let listed: Vec<String> = above.iter().map(|(w, v)| format!("{w:.0}%: {:.0}%", v * 100.0)).collect();
    let worst = above.iter().map(|(_, v)| *v).fold(f64::NEG_INFINITY, f64::max);
    let below: Vec<String> = WRITE_SHARES
        .iter()
        .filter(|w| **w <= 15.0)
        .filter_map(|&w| Some(format!("{w:.0}%: {:.0}%", saving(w)? * 100.0)))
        .collect();
    let _ = writeln!(
        s,
        "| above 15% writes the read cache gives almost no benefit (N = 8) | time the read cache saves over forwarding — above 15%: {}; at or below 15%: {} | {} (threshold: saves < {:.0}% at every share above 15%) |",
        listed.join(", "),
        below.join(", "),
        if worst < ALMOST_NO_BENEFIT { "yes" } else { "no" },
        ALMOST_NO_BENEFIT * 100.0
    );
    for clients in [8, 4, 2] {
        let panel = format!("N = {clients}");
        let (Some(f), Some(g), Some(c)) = (
            at(plan, r, &panel, "forward", 25.0),
            at(plan, r, &panel, "gotthard", 25.0),
            at(plan, r, &panel, "read-cache", 25.0),
        ) else {
            continue;
        };
        let share = g.completion_s / f.completion_s;
        let _ = writeln!(
            s,
            "| at 25% writes Gotthard halves the completion time ({}) | Gotthard {:.1} s, forwarding {:.1} s, read cache {:.1} s: {:.0}% of forwarding's time ({:.2}× faster) | {} (threshold: ≤ {:.0}%) |",
            if clients == 8 { "the paper's N = 8".to_string() } else { format!("N = {clients}, not in the paper") },
            g.completion_s,
            f.completion_s,
            c.completion_s,
            share * 100.0,
            1.0 / share,
            if share <= HALVES { "yes" } else { "no" },
            HALVES * 100.0
        );
    }
    s
}

/// A duration of `s` seconds in the largest readable unit.
fn readable(s: f64) -> String {
    pisadb_report::format_seconds(s)
}

/// One Markdown table of every point of `plan`: completion, aborts by source, retries, latency.
fn detail_table(plan: &Plan, r: &[RackFigures]) -> String {
    let mut s = String::from(
        "| panel | x | variant | completion | vs forward | aborts store / switch / switch-optimistic | retries | retransmits | mean | p99 |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (i, (p, f)) in plan.points.iter().zip(r).enumerate() {
        let x = match plan.x_unit {
            Unit::Log10Count => readable(10f64.powf(p.x)),
            _ => format!("{}%", p.x),
        };
        let _ = writeln!(
            s,
            "| {} | {x} | {} | {} | {:.2}× | {} / {} / {} | {} | {} | {} | {} |",
            p.panel,
            p.variant,
            readable(f.completion_s),
            f.completion_s / forward_s(plan, r, i),
            f.aborts_store,
            f.aborts_switch,
            f.aborts_switch_optimistic,
            f.retries,
            f.retransmissions,
            readable(f.latency.latency_us_mean / 1e6),
            readable(f.latency.latency_us_p99 / 1e6),
        );
    }
    s
}

/// Gotthard's completion relative to forwarding's at each x of `panel`: "x: ratio" items.
fn gotthard_vs_forward(plan: &Plan, r: &[RackFigures], panel: &str) -> String {
    let mut items = Vec::new();
    for (i, p) in plan.points.iter().enumerate() {
        if p.panel == panel && p.variant == "gotthard" {
            let x = match plan.x_unit {
                Unit::Log10Count => readable(10f64.powf(p.x)),
                _ => format!("{}%", p.x),
            };
            items.push(format!("{x}: {:.2}×", r[i].completion_s / forward_s(plan, r, i)));
        }
    }
    items.join(", ")
}

/// Runs one experiment, writes its files, and returns a summary.
pub fn sweep(name: &str, options: &ExperimentOptions) -> Result<String, String> {
    let plan = plan(name, options)?;
    let results = run_plan(&plan, options.threads)?;
    let (csv, svg) = write_outputs(&plan, &results, &options.out)?;
    let mut s = detail_table(&plan, &results);
    if plan.name == "fig2" {
        s.push('\n');
        s.push_str(&claims(&plan, &results));
    }
    let _ = write!(s, "\nwrote {} and {}", csv.display(), svg.display());
    Ok(s)
}

/// Runs every experiment, writes their files and `<out>/gotthard.md`; returns a summary.
pub fn reproduce(options: &ExperimentOptions) -> Result<String, String> {
    let mut done = Vec::new();
    let mut files = Vec::new();
    for e in EXPERIMENTS {
        let plan = plan(e.name, options)?;
        let results = run_plan(&plan, options.threads)?;
        files.push(write_outputs(&plan, &results, &options.out)?);
        done.push((plan, results));
    }
    let report = report(&done, options);
    let path = options.out.join("gotthard.md");
    std::fs::create_dir_all(&options.out).map_err(|e| format!("cannot create {}: {e}", options.out.display()))?;
    std::fs::write(&path, &report).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let fig2 = &done[0];
    Ok(format!(
        "{}\nwrote {} and {} experiments' CSVs and charts",
        claims(&fig2.0, &fig2.1),
        path.display(),
        files.len()
    ))
}

fn report(done: &[(Plan, Vec<RackFigures>)], options: &ExperimentOptions) -> String {
    let mut s = String::new();
    let quick = if options.quick { " --quick" } else { "" };
    let base = base(options);
    let _ = writeln!(s, "# Gotthard (seed 004) reproduced by PisaDB's simulator\n");
    let _ = writeln!(
        s,
        "`pisadb reproduce gotthard{quick} --seed {}`. Simulated and deterministic: one client host with N \
         closed-loop clients — one switch — one store, one hot key, think time 0, {} commits per client; the \
         one-way client–store delay is {} split {} near the client / {} near the store unless a sweep varies it. \
         Completion is when the last client finished; aborts are split by who answered them (the store; the \
         switch against a committed value; the switch against an optimistically logged value); retries are \
         attempts beyond the first of committed transactions; latency is per committed transaction, from its \
         first attempt. Every figure below is computed from the runs in this directory; the paper's side is \
         quoted from its text.\n",
        options.seed,
        base.commits_per_client,
        readable((base.near_us + base.far_us) as f64 * 1e-6),
        readable(base.near_us as f64 * 1e-6),
        readable(base.far_us as f64 * 1e-6),
    );
    for (plan, r) in done {
        match plan.name {
            "fig2" => {
                let _ = writeln!(s, "## Fig. 2: completion time against the share of writes\n");
                let _ = writeln!(s, "{}", claims(plan, r));
                let _ = writeln!(s, "Chart: [`gotthard-fig2.svg`](gotthard-fig2.svg); every point: [`gotthard-fig2.csv`](gotthard-fig2.csv).\n");
                let _ = writeln!(s, "{}", detail_table(plan, r));
            }
            "delay-split" => {
                let _ = writeln!(s, "## Sensitivity: where the switch sits (the 50 ms split)\n");
                for panel in ["25% writes", "50% writes"] {
                    let _ = writeln!(s, "- Gotthard's completion relative to forwarding's, {panel}, by share of the delay near the client: {}", gotthard_vs_forward(plan, r, panel));
                }
                let _ = writeln!(s, "\nChart: [`gotthard-delay-split.svg`](gotthard-delay-split.svg).\n");
                let _ = writeln!(s, "{}", detail_table(plan, r));
            }
            _ => {
                let _ = writeln!(s, "## Sensitivity: the total delay, down to a data center\n");
                let _ = writeln!(
                    s,
                    "- Gotthard's completion relative to forwarding's at 25% writes, by one-way delay: {}\n\n\
                     The hosts charge the CPU time measured for their handlers (the store {} per read, {} per \
                     other request; a client {} per reply; `CALIBRATION.md`).\n",
                    gotthard_vs_forward(plan, r, "25% writes"),
                    readable(crate::store::STORE_READ_NS as f64 * 1e-9),
                    readable(crate::store::STORE_REQUEST_NS as f64 * 1e-9),
                    readable(crate::client::CLIENT_REPLY_NS as f64 * 1e-9),
                );
                let _ = writeln!(s, "Chart: [`gotthard-total-delay.svg`](gotthard-total-delay.svg).\n");
                let _ = writeln!(s, "{}", detail_table(plan, r));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ExperimentOptions {
        ExperimentOptions { quick: true, seed: 1, threads: 1, out: PathBuf::from("unused") }
    }

    #[test]
    fn plans_cover_the_papers_axes_and_unknown_names_list_the_known() {
        let fig2 = plan("fig2", &options()).unwrap();
        assert_eq!(fig2.points.len(), 3 * WRITE_SHARES.len() * VARIANTS.len());
        assert!(fig2.points.iter().all(|p| p.cfg.near_us == 10_000 && p.cfg.far_us == 40_000));
        let split = plan("delay-split", &options()).unwrap();
        assert!(split.points.iter().all(|p| p.cfg.near_us + p.cfg.far_us == 50_000));
        let err = plan("fig3", &options()).unwrap_err();
        assert!(err.contains("accepted: fig2, delay-split, total-delay"), "{err}");
    }

    #[test]
    fn claims_are_computed_from_the_results() {
        // A tiny Fig. 2: 4 commits per client, only N = 8 at 15% and 25% writes.
        let mut plan = plan("fig2", &options()).unwrap();
        plan.points.retain(|p| p.panel == "N = 8" && (p.x == 15.0 || p.x == 25.0));
        for p in &mut plan.points {
            p.cfg.commits_per_client = 4;
        }
        let results = run_plan(&plan, 1).unwrap();
        let text = claims(&plan, &results);
        let g = at(&plan, &results, "N = 8", "gotthard", 25.0).unwrap();
        assert!(text.contains(&format!("Gotthard {:.1} s", g.completion_s)), "{text}");
        assert!(text.contains("above 15%: 25%:"), "{text}");
    }
}
