//! P4DB's points as `pisadb bench` and `pisadb compare` print them: speedups against
//! No-Switch, hot and cold commits, switch passes and recirculations, the simulator's
//! transactions per wall second; below, what the `ideal` layout did not execute and what became
//! of the transactions the prototype's engine began. Only P4DB's table has these columns: the
//! harness gives every other system its own rows ([`pisadb_harness::bench::rows_table`]).

use crate::run::RunResult;
use pisadb_harness::BenchPoint;
use std::fmt::Write as _;

/// P4DB's figures of `point` (the event count and trace hash, printed beside the figures, put
/// back where its result holds them).
fn result(point: &BenchPoint) -> Option<RunResult> {
    let mut figures = point.figures.clone();
    let map = figures.as_object_mut()?;
    map.insert("events".into(), point.events.into());
    map.insert("trace_hash".into(), point.trace_hash.clone().into());
    serde_json::from_value(figures).ok()
}

/// The table of `points`, P4DB's every one.
pub fn bench_table(points: &[BenchPoint]) -> String {
    let Some(results) = points.iter().map(result).collect::<Option<Vec<RunResult>>>() else {
        return pisadb_harness::bench::rows_table(points);
    };
    let mut s = String::new();
    let base = points.iter().zip(&results).find(|(p, _)| p.variant == "no-switch").map(|(_, r)| r.committed_per_s);
    let _ = writeln!(
        s,
        "{:<10} {:>12} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11}",
        "system", "commits/s", "speedup", "aborts", "hot", "cold", "p50 us", "p99 us", "passes", "recircs", "sim txn/s"
    );
    for (p, r) in points.iter().zip(&results) {
        let speedup = base.map_or("-".to_string(), |b| format!("{:.2}x", r.committed_per_s / b));
        let sim_txn_per_wall_s = (r.hot_committed + r.cold_committed) as f64 / p.wall_s.max(1e-9);
        let _ = writeln!(
            s,
            "{:<10} {:>12.0} {:>8} {:>6.1}% {:>9} {:>9} {:>9.1} {:>9.1} {:>10} {:>10} {:>11.0}",
            p.variant,
            r.committed_per_s,
            speedup,
            r.abort_rate * 100.0,
            r.hot_committed,
            r.cold_committed,
            r.latency.latency_us_p50,
            r.latency.latency_us_p99,
            r.switch_passes,
            r.recirculations,
            sim_txn_per_wall_s
        );
    }
    for (p, r) in points.iter().zip(&results) {
        if let Some(loss) = r.ideal {
            let _ = writeln!(
                s,
                "{}: the ideal layout did not execute {} operations of {} switch transactions ({} switch transactions committed)",
                p.variant, loss.dropped_ops, loss.truncated_txns, r.switch_committed
            );
        }
    }
    // Under the prototype's engine: what became of the transactions begun in the window.
    for (p, r) in points.iter().zip(&results) {
        let Some(c) = r.prototype else { continue };
        let _ = writeln!(
            s,
            "{:<10} prototype engine: {} transactions begun in the window, {} committed, {} skipped after an abort \
             (never retried); {} workers ran out of their {} pre-generated transactions (the run ends at the \
             window's end)",
            p.variant,
            c.started,
            r.hot_committed + r.cold_committed,
            c.skipped,
            c.workers_done,
            c.txns_per_worker
        );
    }
    s
}
