//! `--shard K/N`: when one machine is too small, N machines each run the K-th of N slices of
//! a sweep, a reproduction or a fuzz campaign, and `pisadb merge` assembles the results.
//!
//! The slices are deterministic: the runner lists a command's distinct runs in a fixed order
//! ([`crate::runner::Runner::jobs`]) and shard K takes those whose index is K − 1 modulo N, so
//! the shards together hold every run once, whatever machine runs which. A shard writes its
//! raw runs and a [`Manifest`] — the system, the command and every option the runs depend on
//! — to `<out>/shard-<system>-<K>-of-<N>.json`. Merging reads any number of such files (or
//! directories holding them), checks they are the N shards of one command, and writes the
//! CSVs, charts and report exactly as the unsharded command would: the same runs give the same
//! figures, and only the wall-time column tells them apart. That needs every float read back
//! exactly as it was written, which `serde_json`'s default number parser does not promise: a
//! shard file writes each non-integer number as `{"f64": "<shortest exact text>"}` and reads
//! it back with Rust's correctly rounded parser ([`exact`], [`inexact`]).

use crate::runner::{Job, Run};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The K-th of N slices (K from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which slice, 1..=N.
    pub k: u32,
    /// How many slices.
    pub n: u32,
}

impl Shard {
    /// Reads `K/N` (1 ≤ K ≤ N), with an error that says what is accepted.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard `{text}`: expected K/N with 1 <= K <= N (e.g. 2/3: the second of three slices)");
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let (k, n): (u32, u32) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if k == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }

    /// Whether the item at `index` of the ordered list belongs to this slice.
    pub fn holds(self, index: usize) -> bool {
        index % self.n as usize == (self.k - 1) as usize
    }

    /// The items of `all` in this slice, in order.
    pub fn slice<T: Clone>(self, all: &[T]) -> Vec<T> {
        all.iter().enumerate().filter(|(i, _)| self.holds(*i)).map(|(_, t)| t.clone()).collect()
    }
}

/// What a shard's runs belong to: enough to rebuild the command's experiments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The system.
    pub system: String,
    /// `sweep` or `reproduce`.
    pub command: String,
    /// The experiment of a sweep (empty for a reproduction).
    pub experiment: String,
    /// `--quick`.
    pub quick: bool,
    /// `--seed`.
    pub seed: u64,
    /// `--seeds`.
    pub seeds: u32,
    /// `--preset`.
    pub preset: String,
    /// The `--set` overrides (none in shard files written before they were recorded).
    #[serde(default)]
    pub sets: Vec<String>,
    /// Which slice this file holds.
    pub shard: Shard,
}

impl Manifest {
    /// The same manifest for the whole command, ignoring which slice.
    pub fn command_key(&self) -> Manifest {
        Manifest { shard: Shard { k: 1, n: self.shard.n }, ..self.clone() }
    }
}

/// One run of a shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawRun {
    /// What ran.
    pub job: Job,
    /// What it gave.
    pub run: Run,
}

/// A shard's file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardFile {
    /// What it belongs to.
    pub manifest: Manifest,
    /// Its runs.
    pub runs: Vec<RawRun>,
}

/// The key a float is written under in a shard file.
const FLOAT_KEY: &str = "f64";

/// `value` with every non-integer number written as `{"f64": text}`, text being Rust's
/// shortest representation that reads back to the same `f64`.
pub fn exact(value: &Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => {
            let mut map = serde_json::Map::new();
            map.insert(FLOAT_KEY.into(), Value::String(n.as_f64().unwrap_or(f64::NAN).to_string()));
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(exact).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), exact(v))).collect()),
        other => other.clone(),
    }
}

/// The inverse of [`exact`].
pub fn inexact(value: &Value) -> Value {
    match value {
        Value::Object(map) if map.len() == 1 => match map.get(FLOAT_KEY).and_then(Value::as_str) {
            Some(text) => {
                text.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number)
            }
            None => Value::Object(map.iter().map(|(k, v)| (k.clone(), inexact(v))).collect()),
        },
        Value::Array(items) => Value::Array(items.iter().map(inexact).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), inexact(v))).collect()),
        other => other.clone(),
    }
}

impl RawRun {
    /// The run with its settings and figures written exactly ([`exact`]).
    fn exact(&self) -> RawRun {
        let job = Job { variant: self.job.variant.clone(), settings: exact(&self.job.settings) };
        RawRun { job, run: Run { figures: exact(&self.run.figures), wall_s: self.run.wall_s } }
    }

    /// The inverse of [`RawRun::exact`].
    fn inexact(&self) -> RawRun {
        let job = Job { variant: self.job.variant.clone(), settings: inexact(&self.job.settings) };
        RawRun { job, run: Run { figures: inexact(&self.run.figures), wall_s: self.run.wall_s } }
    }
}

impl ShardFile {
    /// Its file name under the output directory.
    pub fn file_name(manifest: &Manifest) -> String {
        format!("shard-{}-{}-of-{}.json", manifest.system, manifest.shard.k, manifest.shard.n)
    }

    /// Writes it under `out`; returns the path.
    pub fn write(&self, out: &Path) -> Result<PathBuf, String> {
        std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
        let path = out.join(Self::file_name(&self.manifest));
        let written =
            ShardFile { manifest: self.manifest.clone(), runs: self.runs.iter().map(RawRun::exact).collect() };
        let text = serde_json::to_string(&written).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }

    /// Reads every shard file at `paths`: files, or directories whose `shard-*.json` files are
    /// read (in name order).
    pub fn read_all(paths: &[PathBuf]) -> Result<Vec<ShardFile>, String> {
        let mut files = Vec::new();
        for path in paths {
            if path.is_dir() {
                let entries = std::fs::read_dir(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let mut names: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                        name.starts_with("shard-") && name.ends_with(".json")
                    })
                    .collect();
                names.sort();
                files.extend(names);
            } else {
                files.push(path.clone());
            }
        }
        if files.is_empty() {
            return Err(format!(
                "no shard files (shard-*.json) in {}",
                paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ));
        }
        files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
                let file: ShardFile =
                    serde_json::from_str(&text).map_err(|e| format!("{} is not a shard file: {e}", f.display()))?;
                Ok(ShardFile { manifest: file.manifest, runs: file.runs.iter().map(RawRun::inexact).collect() })
            })
            .collect()
    }

    /// Checks `files` are the N shards of one command, each once; returns its manifest.
    pub fn check_complete(files: &[ShardFile]) -> Result<Manifest, String> {
        let first = files.first().ok_or("no shard files")?.manifest.command_key();
        if let Some(other) = files.iter().find(|f| f.manifest.command_key() != first) {
            return Err(format!(
                "the shard files belong to different commands: {first:?} and {:?}",
                other.manifest.command_key()
            ));
        }
        let mut have: Vec<u32> = files.iter().map(|f| f.manifest.shard.k).collect();
        have.sort_unstable();
        let want: Vec<u32> = (1..=first.shard.n).collect();
        if have != want {
            return Err(format!("merging needs shards 1..={} of the command once each; got {have:?}", first.shard.n));
        }
        Ok(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_split_a_list_into_disjoint_covering_slices() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { k: 2, n: 3 }));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0"] {
            let err = Shard::parse(bad).unwrap_err();
            assert!(err.contains("expected K/N"), "{err}");
        }
        let all: Vec<u32> = (0..10).collect();
        let mut union: Vec<u32> = (1..=3).flat_map(|k| Shard { k, n: 3 }.slice(&all)).collect();
        union.sort_unstable();
        assert_eq!(union, all);
        assert_eq!(Shard { k: 1, n: 3 }.slice(&all), [0, 3, 6, 9]);
    }

    #[test]
    fn floats_survive_a_shard_file_exactly() {
        // A sum that serde_json's default parser reads back one unit in the last place off.
        let awkward: [f64; 5] = [0.1 + 0.2, 1.0704834400000003, 0.010126211048329614, 1e-300, 123.0];
        let v = serde_json::json!({ "xs": awkward, "n": 7, "s": "f64", "o": { "f64": 1 } });
        let text = serde_json::to_string(&exact(&v)).unwrap();
        let back = inexact(&serde_json::from_str::<Value>(&text).unwrap());
        assert_eq!(back, v);
        let xs: Vec<f64> = back["xs"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert!(xs.iter().zip(awkward).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn a_merge_needs_every_shard_of_one_command_once() {
        let manifest = |k, n| Manifest {
            system: "toy".into(),
            command: "sweep".into(),
            experiment: "fig1".into(),
            quick: true,
            seed: 1,
            seeds: 2,
            preset: "pisadb".into(),
            sets: vec![],
            shard: Shard { k, n },
        };
        let file = |k, n| ShardFile { manifest: manifest(k, n), runs: vec![] };
        assert!(ShardFile::check_complete(&[file(2, 2), file(1, 2)]).is_ok());
        let err = ShardFile::check_complete(&[file(1, 3), file(3, 3)]).unwrap_err();
        assert!(err.contains("shards 1..=3"), "{err}");
        let mut other = file(2, 2);
        other.manifest.seed = 9;
        assert!(ShardFile::check_complete(&[file(1, 2), other]).unwrap_err().contains("different commands"));
    }
}
