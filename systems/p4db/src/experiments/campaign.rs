//! What `pisadb sweep` and `pisadb reproduce` do for P4DB, reached through the harness's
//! [`System::own_sweep`](pisadb_harness::System::own_sweep) and
//! [`System::own_reproduce`](pisadb_harness::System::own_reproduce), so the binary names no system.
//!
//! The command line's options arrive as the harness's [`ExperimentOptions`]: P4DB's
//! `--cc`, `--layout`, `--fine-locks` and `--recirculation` are `--set` keys of its experiments
//! ([`super::EXPERIMENT_KEYS`]), read by [`super::choices_from_sets`]. P4DB's presets are
//! `pisadb` (the default) and `paper` (the prototype's testbed; `p4db-testbed` is its old name):
//! under `paper` a sweep writes to `<out>/p4db-testbed/`, as before. `reproduce p4db` runs its
//! three setups itself and takes no preset. Its runs are not sharded yet: the runner is still
//! P4DB's own ([`super::runner`]), and `--shard` is refused by name.

use super::reproduce::reproduce as reproduce_all;
use super::runner::{summary, write_outputs, Runner};
use super::{choices_from_sets, plan, Experiment, Options};
use crate::testbed;
use pisadb_harness::{ExperimentOptions, DEFAULT_PRESET};
use std::fmt::Write as _;

/// Whether `preset` is P4DB's testbed, or an error naming the presets it has.
fn testbed_preset(preset: &str) -> Result<bool, String> {
    match preset {
        DEFAULT_PRESET => Ok(false),
        "paper" | "p4db-testbed" => Ok(true),
        other => Err(format!("P4DB has no preset `{other}`; its presets: pisadb, paper (old name p4db-testbed)")),
    }
}

/// Refuses `--shard`, which P4DB's own runner does not slice yet.
fn refuse_shard(options: &ExperimentOptions) -> Result<(), String> {
    match options.shard {
        Some(_) => {
            Err("--shard: P4DB's experiments still run on their own runner, not the harness's, and are not sharded yet"
                .into())
        }
        None => Ok(()),
    }
}

/// Runs experiment `name` and writes `<out>/<name>.csv` and `.svg` (under `<out>/p4db-testbed/`
/// with the `paper` preset); returns what the terminal shows.
pub fn sweep(name: &str, options: &ExperimentOptions) -> Result<String, String> {
    let experiment = Experiment::from_name(name)?;
    refuse_shard(options)?;
    let testbed = testbed_preset(&options.preset)?;
    let (cc, switch) = choices_from_sets(&options.sets)?;
    let (mut out, threads) = (options.out.clone(), options.threads);
    let options =
        Options { quick: options.quick, seed: options.seed, seeds: options.seeds, cc, switch, testbed, as_run: false };
    let mut s = String::new();
    for warning in options.switch.warnings() {
        let _ = writeln!(s, "{warning}");
    }
    let plan = plan(experiment, &options);
    if testbed {
        if let Some(first) = plan.points.first() {
            let _ = writeln!(s, "{}", testbed::describe(&first.cfg));
        }
        out = out.join("p4db-testbed");
    }
    let results = Runner::new(threads, options.seeds).run(&plan)?;
    let (csv, svg) = write_outputs(&plan, &results, &out)?;
    s.push_str(&summary(&plan, &results));
    let losses: Vec<_> = results.iter().flat_map(|m| &m.runs).filter_map(|r| r.ideal).collect();
    if !losses.is_empty() {
        let dropped: u64 = losses.iter().map(|l| l.dropped_ops).sum();
        let truncated: u64 = losses.iter().map(|l| l.truncated_txns).sum();
        let _ = writeln!(
            s,
            "\nthe ideal layout did not execute {dropped} operations of {truncated} switch transactions over {} runs",
            losses.len()
        );
    }
    let _ = write!(s, "\nwrote {} and {}", csv.display(), svg.display());
    Ok(s)
}

/// Runs every experiment in P4DB's three setups and writes the report `<out>/p4db.md`;
/// returns the claims table and where the report went.
pub fn reproduce(options: &ExperimentOptions) -> Result<String, String> {
    refuse_shard(options)?;
    if options.preset != DEFAULT_PRESET {
        return Err("--preset: `reproduce p4db` runs its three setups (the testbed as run, faithful P4DB on the testbed, PisaDB's model) itself; give no preset".into());
    }
    let (cc, switch) = choices_from_sets(&options.sets)?;
    reproduce_all(options, cc, switch)
}
