//! `sweep`, `reproduce` and `merge` for every system: the experiments a system describes as
//! data ([`crate::experiment`]), built from its settings under a preset, run by one
//! [`Runner`], written by [`crate::output`].
//!
//! A command builds all of its experiments first and runs their distinct runs as one list, so
//! a run shared by two figures is simulated once and `--shard K/N` slices one list
//! ([`crate::shard`]). A sharded command writes only its raw runs; [`merge`] rebuilds the same
//! experiments from the shards' manifest and writes what the unsharded command writes. Results
//! under a preset other than the default go to `<out>/<preset>/`, so a `paper` run does not
//! overwrite the model's.

use crate::experiment::{Experiment, Reproduction};
use crate::output::{claims_rows, points_table, write_experiment_csv, write_experiment_svg, CLAIMS_HEADER};
use crate::preset::{describe, preset_settings, DEFAULT_PRESET};
use crate::runner::Runner;
use crate::shard::{Manifest, RawRun, ShardFile};
use crate::{ExperimentOptions, HarnessError, Registry, System};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn run_error(system: &dyn System, why: impl Into<String>) -> HarnessError {
    HarnessError::Run { system: system.name().into(), why: why.into() }
}

/// The experiments `names` of `system` under `options` (preset applied to its settings).
fn build(system: &dyn System, names: &[&str], options: &ExperimentOptions) -> Result<Vec<Experiment>, HarnessError> {
    let (mut base, _) = preset_settings(system, &options.preset)?;
    let own_key = |set: &str| {
        let key = set.split_once('=').map_or(set, |(key, _)| key).trim().replace('-', "_");
        system.experiment_keys().contains(&key.as_str())
    };
    for set in options.sets.iter().filter(|s| !own_key(s)) {
        crate::apply_set(&mut base, set)?;
    }
    names.iter().map(|n| system.experiment(n, &base, options).map_err(|why| run_error(system, why))).collect()
}

/// Where a command's files go: `out`, or `out/<preset>` under another preset than the default.
fn out_dir(options: &ExperimentOptions) -> PathBuf {
    if options.preset == DEFAULT_PRESET {
        options.out.clone()
    } else {
        options.out.join(&options.preset)
    }
}

/// Runs experiment `name` of `system` and writes its files; returns a summary for the terminal.
pub fn sweep(system: &dyn System, name: &str, options: &ExperimentOptions) -> Result<String, HarnessError> {
    if !system.experiments().iter().any(|e| e.name == name) {
        let names: Vec<&str> = system.experiments().iter().map(|e| e.name).collect();
        return Err(run_error(system, format!("no experiment `{name}`; its experiments: {}", names.join(", "))));
    }
    campaign(system, "sweep", name, &[name], None, options)
}

/// Runs every experiment of `system`'s reproduction, writes the files and
/// `<out>/<system>.md`; returns a summary for the terminal.
pub fn reproduce(system: &dyn System, options: &ExperimentOptions) -> Result<String, HarnessError> {
    let reproduction = system.reproduction(options);
    let names = reproduction.experiments.clone();
    campaign(system, "reproduce", "", &names, Some(&reproduction), options)
}

fn campaign(
    system: &dyn System,
    command: &str,
    experiment: &str,
    names: &[&str],
    reproduction: Option<&Reproduction>,
    options: &ExperimentOptions,
) -> Result<String, HarnessError> {
    let (_, preset) = preset_settings(system, &options.preset)?;
    let chose = describe(system, &preset);
    eprint!("{chose}");
    let experiments = build(system, names, options)?;
    let mut runner = Runner::new(system, options.seeds, options.threads);
    let jobs = runner.jobs(&experiments)?;
    let label = format!("{} {}", system.name(), if experiment.is_empty() { command } else { experiment });
    let Some(shard) = options.shard else {
        runner.run(&label, &jobs)?;
        return write_all(system, &experiments, &runner, reproduction, options, &chose);
    };
    let mine = shard.slice(&jobs);
    runner.run(&format!("{label} (shard {}/{})", shard.k, shard.n), &mine)?;
    let manifest = Manifest {
        system: system.name().into(),
        command: command.into(),
        experiment: experiment.into(),
        quick: options.quick,
        seed: options.seed,
        seeds: options.seeds,
        preset: preset.name.into(),
        sets: options.sets.clone(),
        shard,
    };
    let runs = mine.iter().filter_map(|job| Some(RawRun { job: job.clone(), run: runner.result(job)?.clone() }));
    let file = ShardFile { manifest, runs: runs.collect() };
    let path = file.write(&out_dir(options)).map_err(|why| run_error(system, why))?;
    Ok(format!(
        "{chose}shard {}/{}: {} of {} runs, written to {}\nmerge the shards with `pisadb merge DIR...`",
        shard.k,
        shard.n,
        mine.len(),
        jobs.len(),
        path.display()
    ))
}

/// Writes every experiment's CSV and SVG (and the report of a reproduction); returns the
/// summary.
fn write_all(
    system: &dyn System,
    experiments: &[Experiment],
    runner: &Runner<'_>,
    reproduction: Option<&Reproduction>,
    options: &ExperimentOptions,
    chose: &str,
) -> Result<String, HarnessError> {
    let out = out_dir(options);
    let mut claims = String::new();
    let mut sections = String::new();
    let mut written = Vec::new();
    for e in experiments {
        let measured = runner.measured(e)?;
        let csv = write_experiment_csv(e, &measured, &out).map_err(|why| run_error(system, why))?;
        let svg = write_experiment_svg(e, &measured, &out).map_err(|why| run_error(system, why))?;
        claims.push_str(&claims_rows(e, &measured));
        let stem = &e.file_stem;
        let _ = writeln!(
            sections,
            "## {}\n\n![{stem}]({stem}.svg)\n\nEvery point: [`{stem}.csv`]({stem}.csv).\n\n{}",
            e.title,
            points_table(e, &measured)
        );
        if !e.notes.is_empty() {
            let _ = writeln!(sections, "{}\n", e.notes);
        }
        written.push((csv, svg));
    }
    let claims_table = if claims.is_empty() { String::new() } else { format!("{CLAIMS_HEADER}{claims}") };
    let files = written.iter().map(|(c, s)| format!("{} and {}", c.display(), s.display())).collect::<Vec<_>>();
    let seeds = runner.seeds();
    let Some(r) = reproduction else {
        return Ok(format!(
            "{chose}means over {seeds} seeds\n\n{sections}\n{claims_table}\nwrote {}",
            files.join(", ")
        ));
    };
    let mut report = format!("# {}\n\n{}\n\n", r.title, r.intro);
    let _ = writeln!(
        report,
        "Means over {seeds} seeds (`--seed {}`, `--seeds {seeds}`), ± one standard deviation; ratios are paired by \
         seed. Preset `{}`:\n\n```\n{chose}```\n",
        options.seed, options.preset
    );
    if !claims_table.is_empty() {
        let _ = writeln!(report, "## The paper's claims and ours\n\n{claims_table}");
    }
    report.push_str(&sections);
    if !r.notes.is_empty() {
        let _ = writeln!(report, "{}", r.notes);
    }
    let path = out.join(format!("{}.md", system.name()));
    std::fs::create_dir_all(&out).map_err(|e| run_error(system, format!("cannot create {}: {e}", out.display())))?;
    std::fs::write(&path, &report).map_err(|e| run_error(system, format!("cannot write {}: {e}", path.display())))?;
    Ok(format!("{claims_table}\nwrote {} and {} experiments' CSVs and charts", path.display(), written.len()))
}

/// Assembles the shard files at `paths` (files or directories) into what the unsharded
/// command writes, under `out`; returns its summary.
pub fn merge(registry: &Registry, paths: &[PathBuf], out: &Path, threads: usize) -> Result<String, String> {
    let files = ShardFile::read_all(paths)?;
    let manifest = ShardFile::check_complete(&files)?;
    let system = registry.get(&manifest.system).map_err(|e| e.to_string())?;
    let options = ExperimentOptions {
        quick: manifest.quick,
        seed: manifest.seed,
        seeds: manifest.seeds,
        threads,
        out: out.to_path_buf(),
        shard: None,
        preset: manifest.preset.clone(),
        sets: manifest.sets.clone(),
    };
    let (_, preset) = preset_settings(system, &options.preset).map_err(|e| e.to_string())?;
    let chose = describe(system, &preset);
    let (names, reproduction) = if manifest.command == "reproduce" {
        let r = system.reproduction(&options);
        (r.experiments.clone(), Some(r))
    } else {
        (vec![manifest.experiment.as_str()], None)
    };
    let experiments = build(system, &names, &options).map_err(|e| e.to_string())?;
    let mut runner = Runner::new(system, options.seeds, threads);
    for raw in files.iter().flat_map(|f| &f.runs) {
        runner.remember(&raw.job, raw.run.clone());
    }
    let summary = write_all(system, &experiments, &runner, reproduction.as_ref(), &options, &chose);
    summary.map_err(|e| format!("{e} (are the shards from this build of pisadb?)"))
}
