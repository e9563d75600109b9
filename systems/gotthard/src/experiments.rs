//! Gotthard's experiments as data: the paper's Fig. 2 and four sensitivity sweeps, each a list
//! of points (a switch mode and a rack) that the harness's runner runs under N seeds and
//! writes as CSV, SVG and `pisadb reproduce gotthard`'s report ([`pisadb_harness::campaign`]).
//!
//! - `fig2`: completion time against the share of write transactions {0, 5, 10, 15, 25, 35,
//!   50, 75, 100}% for the four switch modes, with N = 8 clients (the authors' script for the
//!   figure, `ec2/scripts/vary_rw.py` in their public code) and also N = 2 and 4; the paper's
//!   claims are computed at each N.
//! - `clients`: N from 1 to 64 at 50% writes, the values of the authors' `vary_client.py`.
//! - `delay-split`: the one-way client–store delay (50 ms) split between the client–switch
//!   and switch–store links, 1% to 90% of it near the client, at 25% and 50% writes (the
//!   authors' `vary_delta.py` swept 0–80%).
//! - `total-delay`: the one-way delay itself, from data-center microseconds to 100 ms, split
//!   20/80 as in the authors' script, at 25% writes.
//! - `jitter`: latency variance, 0 to 5 ms added per hop, at 25% and 100% writes: what the
//!   fixed delays of the default model leave out (clients in lockstep; see `RESULTS.md`).
//!
//! Ratios are taken against forwarding (the `forward` mode) at the same panel and x. The
//! paper's claims (seed 004, §Evaluation) are data too (`fig2_claims`): the read cache's
//! "almost no benefit" above 15% writes and Gotthard halving the completion time at 25%.

use crate::rack::RackConfig;
use pisadb_harness::experiment::{Chart, Claim, Column, Experiment, Format, Holds, Measure, Point, Y};
use pisadb_harness::{ExperimentName, ExperimentOptions, Reproduction};
use pisadb_report::Unit;
use serde_json::Value;

/// The experiments, as `pisadb sweep --system gotthard NAME` names them.
pub const EXPERIMENTS: &[ExperimentName] = &[
    ExperimentName {
        name: "fig2",
        summary: "Fig. 2: completion time against the share of writes, four switch modes, N = 8 (and 2, 4)",
    },
    ExperimentName {
        name: "clients",
        summary: "N = 1..64 clients at 50% writes (the authors' vary_client.py), four switch modes",
    },
    ExperimentName {
        name: "delay-split",
        summary: "the 50 ms one-way delay split 1%..90% near the client, at 25% and 50% writes",
    },
    ExperimentName {
        name: "total-delay",
        summary: "the one-way delay from data-center microseconds to 100 ms, split 20/80, at 25% writes",
    },
    ExperimentName {
        name: "jitter",
        summary: "latency variance 0..5 ms per hop (datagrams may overtake), at 25% and 100% writes",
    },
];

/// The four variants, in the order the charts list them.
const VARIANTS: [&str; 4] = ["forward", "read-cache", "gotthard", "early-abort"];
/// The write shares of Fig. 2, in percent.
const WRITE_SHARES: [f64; 9] = [0.0, 5.0, 10.0, 15.0, 25.0, 35.0, 50.0, 75.0, 100.0];
/// The shares of the delay near the client, in percent.
const SPLITS: [f64; 9] = [1.0, 5.0, 10.0, 20.0, 35.0, 50.0, 65.0, 80.0, 90.0];
/// Client counts of the authors' `ec2/scripts/vary_client.py`.
const CLIENT_COUNTS: [u32; 10] = [1, 2, 4, 6, 8, 10, 12, 16, 32, 64];
/// The panels of Fig. 2: N clients.
const FIG2_CLIENTS: [u32; 3] = [8, 4, 2];
/// Per-hop latency variance, in microseconds.
const JITTERS_US: [u64; 6] = [0, 100, 500, 1_000, 2_000, 5_000];
/// One-way client–store delays, in microseconds.
const TOTAL_DELAYS_US: [u64; 7] = [5, 25, 250, 2_500, 10_000, 50_000, 100_000];

/// The settings every point starts from: `base` (the preset's) with `quick`'s shorter runs.
pub fn base(base: &Value, options: &ExperimentOptions) -> Result<RackConfig, String> {
    let cfg: RackConfig = serde_json::from_value(base.clone()).map_err(|e| e.to_string())?;
    Ok(RackConfig { commits_per_client: if options.quick { 100 } else { 1000 }, seed: options.seed, ..cfg })
}

/// The CSV columns of every experiment.
fn columns() -> Vec<Column> {
    let mut columns: Vec<Column> = ["clients", "write_share", "near_us", "far_us", "jitter_us", "commits_per_client"]
        .map(Column::setting)
        .to_vec();
    columns.push(Column::figure("completion_s"));
    columns.push(Column::Ratio { header: "relative_to_forward", key: "completion_s", format: Format::Plain });
    columns.extend(
        [
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
        ]
        .map(Column::figure),
    );
    columns.push(Column::Text { header: "trace_hash", key: "trace_hash" });
    columns
}

/// Experiment `name` as data, from the preset's settings `base`.
pub fn experiment(name: &str, base: &Value, options: &ExperimentOptions) -> Result<Experiment, String> {
    let base = self::base(base, options)?;
    let commits = base.commits_per_client;
    let relative =
        Chart { y_label: "completion / forward's".into(), y_unit: Unit::Ratio, y: Y::Ratio { key: "completion_s" } };
    let mut e = match name {
        "fig2" => {
            let title = format!("Gotthard Fig. 2: time to complete {commits} commits per client");
            let mut e = Experiment::new("gotthard", "fig2", title, "write transactions", Unit::Percent);
            for clients in FIG2_CLIENTS {
                for w in WRITE_SHARES {
                    e.points.extend(points(
                        &format!("N = {clients}"),
                        w,
                        &RackConfig { clients, write_share: w / 100.0, ..base.clone() },
                    )?);
                }
            }
            e.charts = vec![Chart::figure("completion_s", 1.0, "completion time", Unit::Seconds)];
            e.claims = fig2_claims();
            e
        }
        "clients" => {
            let title = "Gotthard: completion relative to forwarding against N clients, 50% writes";
            let mut e = Experiment::new("gotthard", "clients", title, "clients (N)", Unit::Integer);
            for clients in CLIENT_COUNTS {
                let cfg = RackConfig { clients, write_share: 0.5, ..base.clone() };
                e.points.extend(points("50% writes", f64::from(clients), &cfg)?);
            }
            e.charts = vec![relative.clone(), Chart::figure("completion_s", 1.0, "completion time", Unit::Seconds)];
            e
        }
        "jitter" => {
            let title = "Gotthard: completion relative to forwarding against per-hop latency variance";
            let mut e = Experiment::new("gotthard", "jitter", title, "jitter per hop, up to", Unit::Seconds);
            for w in [25.0, 100.0] {
                for jitter_us in JITTERS_US {
                    let cfg = RackConfig { write_share: w / 100.0, jitter_us, ..base.clone() };
                    e.points.extend(points(&format!("{w:.0}% writes"), jitter_us as f64 * 1e-6, &cfg)?);
                }
            }
            e.charts = vec![
                relative.clone(),
                Chart::figure("latency_us_p99", 1e-6, "p99 latency", Unit::Seconds),
                Chart::figure("latency_us_mean", 1e-6, "mean latency", Unit::Seconds),
            ];
            e.notes = "With fixed delays the N clients run in lockstep: their attempts reach the store at the same \
                       nanosecond, ties go the same way every round, and under forwarding at 100% writes one client \
                       commits while the others abort, round after round, so a few transactions wait a very long \
                       time (p99 below the mean). Jitter breaks the ties as a real network does."
                .into();
            e
        }
        "delay-split" => {
            let title = "Gotthard: completion relative to forwarding, 50 ms one-way split between the links";
            let mut e =
                Experiment::new("gotthard", "delay-split", title, "share of the delay near the client", Unit::Percent);
            let total = base.near_us + base.far_us;
            for w in [25.0, 50.0] {
                for split in SPLITS {
                    let near_us = (total as f64 * split / 100.0).round() as u64;
                    let cfg = RackConfig { write_share: w / 100.0, near_us, far_us: total - near_us, ..base.clone() };
                    e.points.extend(points(&format!("{w:.0}% writes"), split, &cfg)?);
                }
            }
            e.charts = vec![relative];
            e
        }
        "total-delay" => {
            let title = "Gotthard: completion relative to forwarding against the one-way delay (split 20/80)";
            let mut e = Experiment::new(
                "gotthard",
                "total-delay",
                title,
                "one-way delay, seconds (log scale)",
                Unit::Log10Count,
            );
            for total in TOTAL_DELAYS_US {
                let near_us = total / 5;
                let cfg = RackConfig { near_us, far_us: total - near_us, ..base.clone() };
                let x = (total as f64 * 1e-6).log10();
                let named = points("25% writes", x, &cfg)?;
                e.points
                    .extend(named.into_iter().map(|p| p.x_name(pisadb_report::format_seconds(total as f64 * 1e-6))));
            }
            e.charts = vec![relative];
            e.notes = format!(
                "The hosts charge the CPU time measured for their handlers (the store {} per read, {} per other \
                 request; a client {} per reply; `CALIBRATION.md`).",
                pisadb_report::format_seconds(base.costs.store_read_ns as f64 * 1e-9),
                pisadb_report::format_seconds(base.costs.store_request_ns as f64 * 1e-9),
                pisadb_report::format_seconds(base.costs.client_reply_ns as f64 * 1e-9),
            );
            e
        }
        other => {
            let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
            return Err(format!("no experiment `{other}`; accepted: {}", names.join(", ")));
        }
    };
    e.columns = columns();
    e.baseline = Some("forward".into());
    Ok(e)
}

/// The four modes at one panel and x.
fn points(panel: &str, x: f64, cfg: &RackConfig) -> Result<Vec<Point>, String> {
    let settings = serde_json::to_value(cfg).map_err(|e| e.to_string())?;
    Ok(VARIANTS.iter().map(|v| Point::new(panel, v, x, settings.clone())).collect())
}

/// The paper's claims about Fig. 2 (§Evaluation), at each N of the figure: the poster states
/// no N, and the authors' script ran N = 8, so every N is asked.
fn fig2_claims() -> Vec<Claim> {
    let mut claims = Vec::new();
    for clients in FIG2_CLIENTS {
        let panel = format!("N = {clients}");
        let ratio = |series: &str, x: f64| Measure::Ratio {
            panel: panel.clone(),
            series: series.into(),
            over: "forward".into(),
            x,
            key: "completion_s",
        };
        claims.push(Claim {
            words: format!(
                "N = {clients}: at only 25% writes Gotthard reduces the completion time by half: its time over forwarding's"
            ),
            source: "Fig. 2, §Evaluation".into(),
            paper: Some(0.5),
            ours: ratio("gotthard", 25.0),
            holds: Holds::Below(0.55),
            reason: None,
        }
        .because(
            "the switch shortens only attempts that abort (a 20 ms switch round trip instead of the 100 ms one to \
             the store), and with fewer clients fewer attempts conflict, so there is less to save",
        ));
        claims.extend(WRITE_SHARES.iter().filter(|w| **w > 15.0).map(|&w| Claim {
            words: format!(
                "N = {clients}: above 15% writes the read cache gives almost no benefit: its completion time over forwarding's at {w:.0}% (no figure; \"almost none\": saves < 10%)"
            ),
            source: "Fig. 2, §Evaluation".into(),
            paper: None,
            ours: ratio("read-cache", w),
            holds: Holds::Above(0.9),
            reason: None,
        }
        .because(
            "with fewer clients fewer writers race a cached value, so more cached reads are current and each saves \
             the 80 ms between switch and store; the paper's words hold at its N (8 in the authors' script)",
        )));
    }
    claims
}

/// What the report explains from the model, below the tables.
const REPORT_NOTES: &str = "**Where the N and the delays come from.** The poster states the workload, not the rack. \
The authors' public code does (`github.com/usi-systems/gotthard`, `ec2/scripts/vary_rw.py`, the script of the \
write-share figure): 8 clients and a software switch delaying each datagram 50 ms one way, 20% toward the clients. \
The claims are computed at N = 8, 4 and 2, and `clients` sweeps N as the authors' `vary_client.py` did: the headline \
holds at the authors' N and weakens as N falls, because only attempts that abort are shortened.\n\n\
**Why forwarding's p99 can sit below its mean** (100% writes, fixed delays). The client whose write commits learns \
the new value first, from its own reply; its next attempt reaches the store a few nanoseconds before the retries of \
the clients that aborted, which carry the same value learned later, so it commits again: the capture effect of \
optimistic concurrency control on one hot key. With fixed delays nothing ever breaks the tie, so clients finish one \
after another: 99% of commits take one round trip and each client's first transaction waits for every client before \
it, which carries the mean. With latency variance (`jitter`) the winner changes from round to round and the long \
waits spread over many transactions (p99 of seconds), while completion and the claims move by a few percent.\n\n\
**Why the store never aborts under Gotthard.** Every request passes the one switch, which has logged every earlier \
write; an attempt it forwards carries a value it learned from that write's abort reply, so it trails that write by \
at least a client-switch round trip (20 ms) and reaches the store after it. Only a switch-store link that reordered \
by more than that (or a second switch) would let the store see a stale attempt; the `jitter` sweep's 5 ms does not.";

/// What `pisadb reproduce gotthard` runs and says.
pub fn reproduction(base: &Value, options: &ExperimentOptions) -> Reproduction {
    let b = self::base(base, options).unwrap_or_default();
    let readable = |s: f64| pisadb_report::format_seconds(s);
    Reproduction {
        title: "Gotthard (seed 004) reproduced by PisaDB's simulator".into(),
        intro: format!(
            "`pisadb reproduce gotthard{}`. Simulated and deterministic: one client host with N closed-loop clients — \
             one switch — one store, one hot key, think time 0, {} commits per client; the one-way client–store delay \
             is {} split {} near the client / {} near the store unless a sweep varies it. Completion is when the last \
             client finished; aborts are split by who answered them (the store; the switch against a committed value; \
             the switch against an optimistically logged value); retries are attempts beyond the first of committed \
             transactions; latency is per committed transaction, from its first attempt. Every figure below is \
             computed from the runs in this directory; the paper's side is quoted from its text.",
            if options.quick { " --quick" } else { "" },
            b.commits_per_client,
            readable((b.near_us + b.far_us) as f64 * 1e-6),
            readable(b.near_us as f64 * 1e-6),
            readable(b.far_us as f64 * 1e-6),
        ),
        experiments: EXPERIMENTS.iter().map(|e| e.name).collect(),
        notes: REPORT_NOTES.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ExperimentOptions {
        ExperimentOptions::new(true, 1, "unused")
    }

    fn defaults() -> Value {
        serde_json::to_value(RackConfig::default()).unwrap()
    }

    fn cfg(p: &Point) -> RackConfig {
        serde_json::from_value(p.settings.clone()).unwrap()
    }

    #[test]
    fn experiments_cover_the_papers_axes_and_unknown_names_list_the_known() {
        let fig2 = experiment("fig2", &defaults(), &options()).unwrap();
        assert_eq!(fig2.points.len(), 3 * WRITE_SHARES.len() * VARIANTS.len());
        assert!(fig2.points.iter().all(|p| cfg(p).near_us == 10_000 && cfg(p).far_us == 40_000));
        let split = experiment("delay-split", &defaults(), &options()).unwrap();
        assert!(split.points.iter().all(|p| cfg(p).near_us + cfg(p).far_us == 50_000));
        let err = experiment("fig3", &defaults(), &options()).unwrap_err();
        assert!(err.contains("accepted: fig2, clients, delay-split, total-delay, jitter"), "{err}");
    }

    #[test]
    fn every_claim_names_points_of_its_experiment() {
        let fig2 = experiment("fig2", &defaults(), &options()).unwrap();
        for claim in &fig2.claims {
            let Measure::Ratio { panel, series, over, x, .. } = &claim.ours else { panic!("ratios only") };
            assert!(fig2.find(panel, series, *x).is_some() && fig2.find(panel, over, *x).is_some(), "{claim:?}");
        }
    }
}
