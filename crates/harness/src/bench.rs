//! One simulated point as `pisadb bench` and `pisadb compare` run it, for any system.
//!
//! A point is a variant, a preset and `--set` overrides; what comes back is one schema for
//! every system ([`BenchPoint`]): the system, variant and preset, the settings in force, the
//! system's own figures, the events, the trace hash, and the simulator's speed (wall seconds
//! and events per wall second — the only wall clock a point reads, around the run, never in
//! it). Nothing of one system appears in another's point.
//!
//! **Flag aliases.** A system may give some of its `--set` keys a flag of their own, for the
//! scripts and pages that spelled them that way before the registry existed (P4DB's
//! `--workload`, `--nodes`, `--layout`, …): a [`FlagAlias`] says `--FLAG VALUE` is `--set
//! KEY=VALUE`. The command line offers every registered system's flags; [`flag_sets`] turns
//! the ones given into `--set`s, in the order of the system's table (so the order on the
//! command line does not matter), and refuses a flag the system does not take, naming the
//! systems that do. What a key means is the system's: [`System::settings`] reads it.
//!
//! **Tables.** A system formats its own points ([`System::bench_table`]); by default the
//! columns of each point's [`PointReport::row`] and the simulator's speed ([`rows_table`]).

use crate::{HarnessError, PointReport, System};
use serde::Serialize;
use serde_json::Value;

/// `--FLAG VALUE` as another spelling of `--set KEY=VALUE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FlagAlias {
    /// The flag, without its dashes (`fine-locks`).
    pub flag: &'static str,
    /// The `--set` key it stands for (`fine_locks`).
    pub key: &'static str,
    /// The values it accepts, as spelled on the command line; empty for a number.
    pub values: &'static [&'static str],
    /// What it sets, for `--help`.
    pub help: &'static str,
    /// Whether `sweep` and `reproduce` take it too (a choice every point of an experiment
    /// starts from), not only `bench` and `compare`.
    pub experiments: bool,
}

/// The `--set`s that the flags `given` (flag, value) stand for on `system`, in the order of
/// its table; a flag it has no alias for is refused, naming the systems of `all` that take it.
pub fn flag_sets(
    all: &[&'static dyn System],
    system: &dyn System,
    given: &[(&str, String)],
) -> Result<Vec<String>, HarnessError> {
    let aliases = system.flag_aliases();
    if let Some((flag, _)) = given.iter().find(|(flag, _)| !aliases.iter().any(|a| a.flag == *flag)) {
        let with = all.iter().filter(|s| s.flag_aliases().iter().any(|a| a.flag == *flag));
        return Err(HarnessError::Unsupported {
            system: system.name().to_string(),
            what: format!("flag --{flag}"),
            with: with.map(|s| s.name().to_string()).collect(),
        });
    }
    let sets = aliases.iter().filter_map(|a| {
        let (_, value) = given.iter().find(|(flag, _)| *flag == a.flag)?;
        Some(format!("{}={value}", a.key))
    });
    Ok(sets.collect())
}

/// One simulated point, timed: what `bench --json` prints, for every system alike.
#[derive(Clone, Debug, Serialize)]
pub struct BenchPoint {
    /// The system.
    pub system: &'static str,
    /// The variant that ran.
    pub variant: String,
    /// The variant again, under the name it had since the first release.
    pub mode: String,
    /// The preset the settings started from (its name, not an alias).
    pub preset: String,
    /// The settings in force: the preset's, then the flags' and `--set`s' overrides.
    pub settings: Value,
    /// The figures, as the system names them.
    #[serde(flatten)]
    pub figures: Value,
    /// Simulated events the run processed.
    pub events: u64,
    /// The hash of the run's event trace (equal seeds, equal hashes).
    pub trace_hash: String,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// Simulated events per wall-clock second (the simulator's speed).
    pub events_per_wall_s: f64,
    /// The `--set` overrides given (the flags' are in `settings`).
    pub sets: Vec<String>,
    /// The table row the system gives the point.
    #[serde(skip)]
    pub row: Vec<(String, String)>,
}

/// Runs `variant` of `system` with `settings` (from [`System::settings`]) and times it.
pub fn run_point(
    system: &dyn System,
    variant: &str,
    preset: &str,
    settings: Value,
    sets: &[String],
) -> Result<BenchPoint, HarnessError> {
    system.variant(variant)?;
    let preset = crate::preset::find_preset(system, preset)?.name.to_string();
    #[allow(clippy::disallowed_methods)] // the simulator's own speed is a wall-clock figure
    let started = std::time::Instant::now();
    let PointReport { system: name, variant, mut figures, row, events, trace_hash } =
        system.run_point(variant, &settings).map_err(|e| match e {
            HarnessError::Run { system, why } if !sets.is_empty() => {
                HarnessError::Run { system, why: format!("{why} (with --set {})", sets.join(" --set ")) }
            }
            other => other,
        })?;
    let wall_s = started.elapsed().as_secs_f64();
    if let Value::Object(map) = &mut figures {
        // Printed once, beside the figures.
        map.remove("events");
        map.remove("trace_hash");
    }
    Ok(BenchPoint {
        system: name,
        mode: variant.clone(),
        variant,
        preset,
        settings,
        figures,
        events,
        trace_hash,
        wall_s,
        events_per_wall_s: events as f64 / wall_s.max(1e-9),
        sets: sets.to_vec(),
        row,
    })
}

/// Any system's points as a table: the columns its rows name, then the simulator's speed in
/// events per wall second (a system may commit no transactions).
pub fn rows_table(points: &[BenchPoint]) -> String {
    let Some(first) = points.first() else { return String::new() };
    let width = |i: usize| {
        let cells = points.iter().map(|p| p.row.get(i).map_or(0, |c| c.1.len()));
        cells.chain([first.row[i].0.len()]).max().unwrap_or(0)
    };
    let widths: Vec<usize> = (0..first.row.len()).map(width).collect();
    let header: Vec<String> = first.row.iter().zip(&widths).map(|((h, _), w)| format!("{h:>w$}")).collect();
    let mut table = format!("{} {:>12}\n", header.join(" "), "sim events/s");
    for p in points {
        let cells: Vec<String> = p.row.iter().zip(&widths).map(|((_, c), w)| format!("{c:>w$}")).collect();
        table += &format!("{} {:>12}\n", cells.join(" "), pisadb_report::format_si(p.events_per_wall_s));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Variant;

    /// A system with two flags, or none.
    struct Flagged(&'static str, &'static [FlagAlias]);

    static VARIANTS: [Variant; 1] = [Variant { name: "only", summary: "the one" }];
    static FLAGS: [FlagAlias; 2] = [
        FlagAlias { flag: "nodes", key: "rack.nodes", values: &[], help: "", experiments: false },
        FlagAlias { flag: "mode", key: "mode", values: &["fast", "slow"], help: "", experiments: true },
    ];
    static WITH: Flagged = Flagged("with", &FLAGS);
    static WITHOUT: Flagged = Flagged("without", &[]);

    impl System for Flagged {
        fn name(&self) -> &'static str {
            self.0
        }
        fn paper(&self) -> &'static str {
            "none"
        }
        fn summary(&self) -> &'static str {
            "a toy with flags"
        }
        fn variants(&self) -> &'static [Variant] {
            &VARIANTS
        }
        fn default_settings(&self) -> Value {
            serde_json::json!({ "rack": { "nodes": 2 }, "mode": "slow" })
        }
        fn run_point(&self, variant: &str, settings: &Value) -> Result<PointReport, HarnessError> {
            Ok(PointReport {
                system: self.0,
                variant: variant.to_string(),
                figures: serde_json::json!({ "commits": 3, "events": 9, "trace_hash": "h" }),
                row: vec![("nodes".into(), settings["rack"]["nodes"].to_string())],
                events: 9,
                trace_hash: "h".into(),
            })
        }
        fn wire_kinds(&self) -> &'static [pisadb_wire::Kind] {
            &[]
        }
        fn flag_aliases(&self) -> &'static [FlagAlias] {
            self.1
        }
    }

    #[test]
    fn flags_become_sets_in_the_systems_order_and_a_system_without_one_names_those_with_it() {
        let all: [&'static dyn System; 2] = [&WITHOUT, &WITH];
        let given = [("mode", "fast".to_string()), ("nodes", "4".to_string())];
        assert_eq!(flag_sets(&all, &WITH, &given).unwrap(), ["rack.nodes=4", "mode=fast"]);
        let err = flag_sets(&all, &WITHOUT, &given[1..]).unwrap_err().to_string();
        assert_eq!(err, "system `without` has no flag --nodes (systems with flag --nodes: with)");
    }

    #[test]
    fn a_point_carries_its_settings_and_figures_once_and_the_default_table_its_rows() {
        let settings = WITH.settings("pisadb", &["rack.nodes=4".to_string()]).unwrap();
        let point = run_point(&WITH, "only", "pisadb", settings, &[]).unwrap();
        let json = serde_json::to_value(&point).unwrap();
        assert_eq!((json["settings"]["rack"]["nodes"].as_u64(), json["commits"].as_u64()), (Some(4), Some(3)));
        assert_eq!((json["events"].as_u64(), json["trace_hash"].as_str()), (Some(9), Some("h")));
        let table = WITH.bench_table(&[point]);
        assert!(table.starts_with("nodes sim events/s\n    4 "), "{table}");
        assert!(WITH.settings("lab", &[]).unwrap_err().to_string().contains("no preset `lab`; its presets: pisadb"));
    }
}
