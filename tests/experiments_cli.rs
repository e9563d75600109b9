//! The experiment contract as a user meets it, the same for every system: seeds with `_sd`
//! columns, presets listed with their provenance, and a sweep sharded over several machines
//! and merged into what one machine would have written.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn pisadb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pisadb")).args(args).output().expect("pisadb runs")
}

fn ok(args: &[&str]) -> String {
    let out = pisadb(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CSV's rows without its wall-time column (the one figure that is not a function of the
/// seeds).
fn without_wall_time(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rows: Vec<Vec<String>> = text.lines().map(|l| l.split(',').map(str::to_string).collect()).collect();
    let wall = rows[0].iter().position(|h| h == "wall_s").expect("a wall_s column");
    rows.into_iter()
        .map(|mut r| {
            r.remove(wall);
            r
        })
        .collect()
}

const SWEEP: [&str; 10] =
    ["sweep", "--system", "gotthard", "total-delay", "--quick", "--seeds", "2", "--threads", "1", "--out"];

#[test]
fn a_sweep_run_as_three_shards_and_merged_gives_the_unsharded_csv_but_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, shards, merged) = (dir.path().join("whole"), dir.path().join("shards"), dir.path().join("merged"));
    let mut args = SWEEP.to_vec();
    args.push(whole.to_str().unwrap());
    ok(&args);
    for k in ["1/3", "2/3", "3/3"] {
        let mut args = SWEEP.to_vec();
        args.extend([shards.to_str().unwrap(), "--shard", k]);
        let text = ok(&args);
        assert!(text.contains(&format!("shard {k}")), "{text}");
    }
    assert!(!shards.join("gotthard-total-delay.csv").exists(), "a shard writes only its raw runs");
    // Two shards are not the whole command: merging refuses, naming what is missing.
    let two = pisadb(&[
        "merge",
        shards.join("shard-gotthard-1-of-3.json").to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(two.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&two.stderr).contains("shards 1..=3"), "{}", String::from_utf8_lossy(&two.stderr));
    ok(&["merge", shards.to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    let (a, b) = (whole.join("gotthard-total-delay.csv"), merged.join("gotthard-total-delay.csv"));
    assert_eq!(without_wall_time(&a), without_wall_time(&b));
    assert!(merged.join("gotthard-total-delay.svg").exists());
    // Two seeds: every figure has its deviation beside it, and the seeds differ.
    let rows = without_wall_time(&a);
    let sd = rows[0].iter().position(|h| h == "completion_s_sd").expect("an _sd column");
    assert!(rows[1..].iter().any(|r| r[sd] != "0"), "two seeds gave identical runs everywhere");
    let seeds = rows[0].iter().position(|h| h == "seeds").unwrap();
    assert!(rows[1..].iter().all(|r| r[seeds] == "2"));
}

#[test]
fn every_system_lists_pisadb_and_paper_presets_with_a_provenance_for_every_value() {
    for system in ["p4db", "gotthard", "netaccel", "switchtx", "transkv"] {
        let presets: Value = serde_json::from_str(&ok(&["systems", "--presets", system, "--json"])).unwrap();
        let presets = presets.as_array().unwrap();
        let names: Vec<&str> = presets.iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert!(names.starts_with(&["pisadb", "paper"]), "{system}: {names:?}");
        for p in presets {
            for v in p["values"].as_array().unwrap() {
                let kind = v["provenance"]["kind"].as_str().unwrap_or("");
                let source = v["provenance"]["source"].as_str().unwrap_or("");
                assert!(["measured", "stated", "assumed"].contains(&kind) && !source.is_empty(), "{system}: {v}");
            }
        }
    }
    let text = ok(&["systems", "--presets", "p4db"]);
    assert!(text.contains("(also: p4db-testbed)"), "{text}");
}

#[test]
fn a_preset_is_announced_and_an_unknown_one_is_refused_with_the_list() {
    let out =
        pisadb(&["bench", "--system", "gotthard", "--preset", "paper", "--set", "commits_per_client=5", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("preset `paper` of gotthard") && stderr.contains("stated: seed 004"), "{stderr}");
    let out = pisadb(&["bench", "--system", "gotthard", "--preset", "testbed"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no preset `testbed`; its presets: pisadb, paper"), "{stderr}");
}

#[test]
fn help_names_preset_seeds_and_shard() {
    for command in ["sweep", "reproduce"] {
        let help = ok(&[command, "--help"]);
        for flag in ["--preset", "--seeds", "--shard"] {
            assert!(help.contains(flag), "`{command} --help` does not name {flag}");
        }
    }
    let help = ok(&["fuzz", "--help"]);
    assert!(help.contains("--seeds") && help.contains("--shard"));
    for command in ["bench", "compare"] {
        assert!(ok(&[command, "--help"]).contains("--preset"));
    }
}

/// P4DB's experiments moved from the binary into its crate; the old command lines still run,
/// its flags arrive as `--set` keys, and a bad key or value is refused by name.
#[test]
fn p4db_sweeps_take_their_old_flags_as_set_keys_and_refuse_bad_ones_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let args = ["sweep", "tpcc-latency-breakdown", "--quick", "--seeds", "2", "--threads", "1", "--out", out];
    let stdout = ok(&[&args[..], &["--cc", "wait-die", "--layout", "random", "--recirculation", "fifo"]].concat());
    assert!(stdout.contains("means over 2 seeds"), "{stdout}");
    let csv = std::fs::read_to_string(dir.path().join("tpcc-latency-breakdown.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.contains(",committed_per_s_sd,") && header.contains(",speedup_sd,"), "{header}");
    assert!(dir.path().join("tpcc-latency-breakdown.svg").exists());

    let bad = pisadb(&[&args[..], &["--set", "fine_locks=halves"]].concat());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && stderr.contains("stages, parity, whole-pipeline"), "{stderr}");
    // A key that is no setting is refused with the settings' keys; a setting P4DB's plans set
    // themselves, with the keys its experiments take.
    let bad = pisadb(&[&args[..], &["--set", "warp=9"]].concat());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && stderr.contains("warp") && stderr.contains("workers"), "{stderr}");
    let bad = pisadb(&[&args[..], &["--set", "workers=4"]].concat());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && stderr.contains("cc, layout, fine_locks, recirculation"), "{stderr}");
}

/// CSV records without the wall-time columns (`wall_s`, `sim_txn_per_wall_s`), read by a CSV
/// reader: P4DB's series names hold commas.
fn records_without_wall_time(path: &Path) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_path(path).unwrap();
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    let kept: Vec<bool> = records[0].iter().map(|h| !h.split('_').any(|w| w == "wall")).collect();
    records.iter().map(|r| r.iter().zip(&kept).filter(|(_, k)| **k).map(|(c, _)| c.to_string()).collect()).collect()
}

#[test]
fn a_p4db_sweep_run_as_three_shards_and_merged_gives_the_unsharded_csv_but_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, shards, merged) = (dir.path().join("whole"), dir.path().join("shards"), dir.path().join("merged"));
    let sweep = ["sweep", "switch-optimizations", "--quick", "--seeds", "2", "--threads", "1", "--out"];
    ok(&[&sweep[..], &[whole.to_str().unwrap()]].concat());
    for k in ["1/3", "2/3", "3/3"] {
        let text = ok(&[&sweep[..], &[shards.to_str().unwrap(), "--shard", k]].concat());
        assert!(text.contains(&format!("shard {k}")), "{text}");
    }
    assert!(!shards.join("switch-optimizations.csv").exists(), "a shard writes only its raw runs");
    ok(&["merge", shards.to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    let (a, b) = (whole.join("switch-optimizations.csv"), merged.join("switch-optimizations.csv"));
    let rows = records_without_wall_time(&a);
    assert_eq!(rows, records_without_wall_time(&b));
    assert!(merged.join("switch-optimizations.svg").exists());
    // Two seeds, a deviation beside every figure, and the ablation's speedups over its first step.
    let column = |name: &str| rows[0].iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name}"));
    assert!(rows[1..].iter().all(|r| r[column("seeds")] == "2"));
    assert!(rows[1..].iter().any(|r| r[column("committed_per_s_sd")] != "0"));
    assert_eq!(rows[1][column("speedup")], "1.000", "the first step is the ablation's baseline");
    assert!(rows[1..].iter().all(|r| !r[column("prototype_committed_per_s")].is_empty()), "the prototype's values");
}
