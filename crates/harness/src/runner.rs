//! The runner: every point of a set of experiments under N seeds, each distinct run once.
//!
//! A point runs under seeds `s, s + 1, …, s + N − 1`, where `s` is its settings' `seed`. A
//! run is identified by its variant and its settings (seed included) serialized as JSON — the
//! keys of a `serde_json` object are sorted, so equal settings give equal keys — and a run two
//! experiments share (the same configuration in two figures) is simulated once. The runs are
//! listed in a fixed order (experiments, points, seeds, first occurrence), which is what lets
//! `--shard K/N` take every N-th of them ([`crate::shard`]) and a later merge fill in the rest.
//!
//! What the runs give back is kept as JSON ([`Run`]): the system's figures, with its event
//! count and trace hash, and the wall seconds the run took (the only figure that is not a
//! function of the seed). [`Measured`] gathers a point's runs; [`Stat`] is a mean with its
//! sample standard deviation, and a ratio to a baseline is the mean of the per-seed ratios to
//! the baseline run under the same seed (paired, so the noise both share cancels).

use crate::experiment::{at, number_at, Experiment};
use crate::pool::run_parallel;
use crate::{HarnessError, System};
use pisadb_report::Progress;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// What one simulated run gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The system's figures (a JSON object), with `events` and `trace_hash`.
    pub figures: Value,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
}

/// A mean and the sample standard deviation of a figure over a point's seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    /// The mean.
    pub mean: f64,
    /// The sample standard deviation (0 from one run).
    pub sd: f64,
}

impl Stat {
    /// The statistics of `values` (a NaN mean if there are none).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Stat {
        let values: Vec<f64> = values.into_iter().collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sd = if values.len() < 2 {
            0.0
        } else {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        };
        Stat { mean, sd }
    }

    /// Neither a mean nor a deviation.
    pub const NAN: Stat = Stat { mean: f64::NAN, sd: f64::NAN };

    /// Both scaled by `k`.
    pub fn scaled(self, k: f64) -> Stat {
        Stat { mean: self.mean * k, sd: self.sd * k }
    }
}

/// A point's runs, one per seed in seed order.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The runs (never empty).
    pub runs: Vec<Run>,
}

impl Measured {
    /// Figure `key` over the seeds (NaN where a run lacks it).
    pub fn stat(&self, key: &str) -> Stat {
        Stat::of(self.runs.iter().map(|r| number_at(&r.figures, key).unwrap_or(f64::NAN)))
    }

    /// The per-seed ratios of figure `key` to `base`'s, paired by seed.
    pub fn ratio(&self, base: &Measured, key: &str) -> Stat {
        let pairs = self.runs.iter().zip(&base.runs);
        Stat::of(pairs.map(|(r, b)| {
            number_at(&r.figures, key).unwrap_or(f64::NAN) / number_at(&b.figures, key).unwrap_or(f64::NAN)
        }))
    }

    /// Text figure `key` of every run, joined by spaces.
    pub fn text(&self, key: &str) -> String {
        let texts = self.runs.iter().map(|r| crate::experiment::cell(at(&r.figures, key)));
        texts.collect::<Vec<_>>().join(" ")
    }

    /// Figure `key` summed over the runs per wall-clock second they took together.
    pub fn per_wall_second(&self, key: &str) -> f64 {
        let total: f64 = self.runs.iter().map(|r| number_at(&r.figures, key).unwrap_or(f64::NAN)).sum();
        total / self.wall_s().max(1e-9)
    }

    /// Wall-clock seconds of all its runs.
    pub fn wall_s(&self) -> f64 {
        self.runs.iter().map(|r| r.wall_s).sum()
    }

    /// The runs' figures at seed index `k`.
    pub fn figures(&self, k: usize) -> &Value {
        &self.runs[k].figures
    }
}

/// One simulation to run: a point's variant and settings under one seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The variant.
    pub variant: String,
    /// The settings, seed set.
    pub settings: Value,
}

impl Job {
    /// The key runs are remembered by.
    pub fn key(&self) -> String {
        format!("{} {}", self.variant, self.settings)
    }
}

/// Runs points under `seeds` seeds on `threads` threads, remembering every run.
pub struct Runner<'a> {
    system: &'a dyn System,
    seeds: u32,
    threads: usize,
    done: BTreeMap<String, Run>,
}

impl<'a> Runner<'a> {
    /// A runner of `system`'s points.
    pub fn new(system: &'a dyn System, seeds: u32, threads: usize) -> Self {
        Runner { system, seeds: seeds.max(1), threads: threads.max(1), done: BTreeMap::new() }
    }

    /// Seeds per point.
    pub fn seeds(&self) -> u32 {
        self.seeds
    }

    /// The job of `settings` under the `k`-th seed: its `seed` moved on by `k`.
    fn job(&self, variant: &str, settings: &Value, k: u32) -> Result<Job, HarnessError> {
        let mut settings = settings.clone();
        let seed = settings.get_mut("seed").ok_or_else(|| HarnessError::Run {
            system: self.system.name().into(),
            why: "its settings have no `seed`, which the runner moves on for each seed".into(),
        })?;
        let first = seed.as_u64().unwrap_or(0);
        *seed = Value::from(first.wrapping_add(u64::from(k)));
        Ok(Job { variant: variant.to_string(), settings })
    }

    /// Every distinct job of `experiments`, in order (experiments, points, seeds).
    pub fn jobs(&self, experiments: &[Experiment]) -> Result<Vec<Job>, HarnessError> {
        let mut seen = BTreeSet::new();
        let mut jobs = Vec::new();
        for e in experiments {
            for p in &e.points {
                for k in 0..self.seeds {
                    let job = self.job(&p.variant, &p.settings, k)?;
                    if seen.insert(job.key()) {
                        jobs.push(job);
                    }
                }
            }
        }
        Ok(jobs)
    }

    /// Runs `jobs` not run before; a failed run is an error naming it.
    pub fn run(&mut self, label: &str, jobs: &[Job]) -> Result<(), HarnessError> {
        let todo: Vec<&Job> = jobs.iter().filter(|j| !self.done.contains_key(&j.key())).collect();
        eprintln!(
            "{label}: {} simulations ({} already run) on {} threads",
            todo.len(),
            jobs.len() - todo.len(),
            self.threads
        );
        let progress = Progress::new(todo.len() as u64, label);
        let system = self.system;
        let results = run_parallel(
            &todo,
            self.threads,
            &progress,
            |job| run_one(system, job),
            |job, _| format!("{} seed {}", job.variant, job.settings.get("seed").unwrap_or(&Value::Null)),
        );
        progress.finish("done");
        for (job, result) in todo.iter().zip(results) {
            self.done.insert(job.key(), result?);
        }
        Ok(())
    }

    /// Remembers `run` as the result of `job` (a shard's run, read back).
    pub fn remember(&mut self, job: &Job, run: Run) {
        self.done.insert(job.key(), run);
    }

    /// The result of `job`, if it ran.
    pub fn result(&self, job: &Job) -> Option<&Run> {
        self.done.get(&job.key())
    }

    /// Every point of `e` with its runs; an error names a run that did not happen.
    pub fn measured(&self, e: &Experiment) -> Result<Vec<Measured>, HarnessError> {
        e.points
            .iter()
            .map(|p| {
                let runs = (0..self.seeds).map(|k| {
                    let job = self.job(&p.variant, &p.settings, k)?;
                    let mut run = self.done.get(&job.key()).cloned().ok_or_else(|| HarnessError::Run {
                        system: self.system.name().into(),
                        why: format!("{}: {} {} x={}: no run under seed index {k}", e.name, p.panel, p.series, p.x),
                    })?;
                    if let Some(derive) = e.derived_figures {
                        (derive.0)(&mut run.figures);
                    }
                    Ok(run)
                });
                Ok(Measured { runs: runs.collect::<Result<_, HarnessError>>()? })
            })
            .collect()
    }
}

/// Runs one job, measuring the wall clock (the simulator's own speed; nothing simulated reads
/// it).
fn run_one(system: &dyn System, job: &Job) -> Result<Run, HarnessError> {
    #[allow(clippy::disallowed_methods)] // the simulator's speed is a wall-clock figure
    let started = std::time::Instant::now();
    let report = system.run_point(&job.variant, &job.settings).map_err(|e| HarnessError::Run {
        system: system.name().into(),
        why: format!("{} with {}: {e}", job.variant, job.settings),
    })?;
    let wall_s = started.elapsed().as_secs_f64();
    let mut figures = report.figures;
    if let Value::Object(map) = &mut figures {
        map.entry("events").or_insert_with(|| Value::from(report.events));
        map.entry("trace_hash").or_insert_with(|| Value::from(report.trace_hash.clone()));
    }
    Ok(Run { figures, wall_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_is_the_mean_and_the_sample_deviation() {
        let s = Stat::of([1.0, 2.0, 3.0]);
        assert_eq!(s.mean, 2.0);
        assert_eq!(s.sd, 1.0);
        assert_eq!(Stat::of([5.0]).sd, 0.0);
        assert!(Stat::of([]).mean.is_nan());
    }

    #[test]
    fn ratios_pair_runs_by_seed() {
        let m = |v: &[f64]| Measured {
            runs: v.iter().map(|x| Run { figures: serde_json::json!({ "tps": x }), wall_s: 0.0 }).collect(),
        };
        // Paired: 2/1 and 6/3 are both 2, with no spread; unpaired means would not show that.
        let r = m(&[2.0, 6.0]).ratio(&m(&[1.0, 3.0]), "tps");
        assert_eq!((r.mean, r.sd), (2.0, 0.0));
    }
}
