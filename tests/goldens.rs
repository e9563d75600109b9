//! Goldens: the figures a refactor must not move.
//!
//! Each test runs a pinned configuration and compares what it produces with a file under
//! `tests/goldens/`: the whole result of the run (every figure `bench --json` prints except
//! wall time) including the trace hash, which folds every event the simulator processed. A
//! refactor that moves one of these is a bug until it is explained; a deliberate change of
//! behaviour re-blesses the files with `PISADB_BLESS=1 cargo test --test goldens` and says why
//! in its commit.
//!
//! Pinned here: the default YCSB-A run (`cargo run --release`) under each system, small racks
//! of SmallBank and TPC-C under each system and both concurrency controls, and the reports of
//! fault-injection seeds (the first 24 and the ones the long campaigns found). The CSVs of
//! `reproduce p4db --quick` take minutes in a debug build, so their digests are checked by an
//! ignored test: `cargo test --release --test goldens -- --ignored`.

use pisadb_p4db::fuzz::{run_case, FuzzCase};
use pisadb_p4db::node::{Cc, Mode};
use pisadb_p4db::{run, RunConfig, WorkloadSpec};
use pisadb_workload::{SmallBankConfig, TpccConfig};
use serde_json::Value;
use std::path::{Path, PathBuf};

const SYSTEMS: [Mode; 3] = [Mode::P4db, Mode::NoSwitch, Mode::LmSwitch];

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goldens").join(format!("{name}.json"))
}

/// Compares `actual` with the golden file `name`, or writes it under `PISADB_BLESS=1`.
fn check_golden(name: &str, actual: &Value) {
    let path = golden_path(name);
    let pretty = serde_json::to_string_pretty(actual).expect("JSON") + "\n";
    if std::env::var_os("PISADB_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, pretty).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (bless it with PISADB_BLESS=1 if it is new)", path.display()));
    // Compared as text: every figure is printed in its shortest exact form, and reading floats
    // back could round their last digit.
    if expected != pretty {
        let parse = |text: &str| serde_json::from_str::<Value>(text).expect("golden is JSON");
        let diff = differences(&parse(&expected), &parse(&pretty), String::new());
        panic!("{name} moved from its golden ({}):\n{}", path.display(), diff.join("\n"));
    }
}

/// The paths where two JSON values differ, with both sides.
fn differences(expected: &Value, actual: &Value, at: String) -> Vec<String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let keys: std::collections::BTreeSet<&String> = e.keys().chain(a.keys()).collect();
            keys.into_iter()
                .flat_map(|k| differences(&e[k.as_str()], a.get(k).unwrap_or(&Value::Null), format!("{at}.{k}")))
                .collect()
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            e.iter().zip(a).enumerate().flat_map(|(i, (e, a))| differences(e, a, format!("{at}[{i}]"))).collect()
        }
        _ if expected == actual => Vec::new(),
        _ => vec![format!("  {at}: golden {expected}, now {actual}")],
    }
}

fn run_point(cfg: &RunConfig) -> Value {
    let out = run(cfg).unwrap_or_else(|e| panic!("{} {:?}: {e}", cfg.workload.name(), cfg.mode));
    serde_json::to_value(&out.result).expect("result serializes")
}

#[test]
fn the_default_ycsb_a_run_is_pinned_for_every_system() {
    let mut results = serde_json::Map::new();
    for mode in SYSTEMS {
        results.insert(mode.name().to_string(), run_point(&RunConfig { mode, ..RunConfig::ycsb_default() }));
    }
    let results = Value::Object(results);
    // The README's table, and the hashes the platform issue quotes.
    for (mode, hash, per_s) in [
        ("p4db", "497d84f6e3a8bf75", 4_082_300.0),
        ("no-switch", "f49f548f4cd0832a", 1_219_200.0),
        ("lm-switch", "8294aa5b13e69f4c", 1_611_900.0),
    ] {
        assert_eq!(results[mode]["trace_hash"], hash, "{mode}'s trace hash moved");
        assert_eq!(results[mode]["committed_per_s"], per_s, "{mode}'s commits/s moved");
    }
    check_golden("ycsb-a-default", &results);
}

/// A small, quick rack for the other workloads.
fn small_rack(workload: WorkloadSpec, mode: Mode, cc: Cc) -> RunConfig {
    RunConfig {
        nodes: 4,
        workers: 4,
        mode,
        cc,
        workload,
        warmup_ns: 100_000,
        measure_ns: 1_000_000,
        layout_sample: 2_000,
        ..RunConfig::ycsb_default()
    }
}

fn small_racks(workload: WorkloadSpec) -> Value {
    let mut results = serde_json::Map::new();
    for mode in SYSTEMS {
        for cc in [Cc::NoWait, Cc::WaitDie] {
            let key = format!("{} {}", mode.name(), cc.name());
            results.insert(key, run_point(&small_rack(workload.clone(), mode, cc)));
        }
    }
    Value::Object(results)
}

#[test]
fn small_smallbank_racks_are_pinned() {
    let workload = WorkloadSpec::SmallBank(SmallBankConfig {
        nodes: 4,
        accounts: 40_000,
        hot_per_node: 10,
        ..SmallBankConfig::default()
    });
    check_golden("smallbank-small", &small_racks(workload));
}

#[test]
fn small_tpcc_racks_are_pinned() {
    let workload = WorkloadSpec::Tpcc(TpccConfig {
        nodes: 4,
        warehouses: 4,
        items: 5_000,
        customers_per_district: 300,
        hot_items: 64,
        ..TpccConfig::default()
    });
    check_golden("tpcc-small", &small_racks(workload));
}

#[test]
fn fuzz_seed_reports_are_pinned() {
    let seeds: Vec<u64> = (1..=24).chain([1092, 2891, 27081, 31480]).collect();
    let reports: Vec<Value> = seeds
        .iter()
        .map(|&seed| serde_json::to_value(run_case(&FuzzCase::from_seed(seed))).expect("report serializes"))
        .collect();
    for r in &reports {
        assert!(r["failure"].is_null(), "seed {} fails: {}", r["seed"], r["failure"]);
    }
    check_golden("fuzz-seeds", &Value::Array(reports));
}

/// Whether a CSV column holds a wall-clock figure (`sim_txn_per_wall_s`, `wall_s`, …),
/// which no two runs share.
fn is_wall_time(header: &str) -> bool {
    header.split('_').any(|word| word == "wall")
}

/// FNV-1a, 64 bit, over the CSV's cells without its wall-time columns ([`is_wall_time`]),
/// dropped by name wherever they stand (P4DB's prototype columns follow its wall-time figure).
/// The cells are read by a CSV reader (quoted fields may hold commas) and hashed with a unit
/// separator between cells and a newline after each record.
fn csv_digest(text: &str) -> String {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(text.as_bytes());
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("the CSV parses")).collect();
    let kept: Vec<bool> = records.first().map_or_else(Vec::new, |h| h.iter().map(|c| !is_wall_time(c)).collect());
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for record in &records {
        for (cell, _) in record.iter().zip(&kept).filter(|(_, &keep)| keep) {
            eat(cell.as_bytes());
            eat(b"\x1f");
        }
        eat(b"\n");
    }
    format!("{h:016x}")
}

#[test]
#[ignore = "minutes in a debug build: cargo test --release --test goldens -- --ignored"]
fn reproduce_p4db_quick_csvs_are_pinned() {
    let dir = std::env::temp_dir().join(format!("pisadb-goldens-{}", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pisadb"))
        .args(["reproduce", "p4db", "--quick", "--out"])
        .arg(&dir)
        .output()
        .expect("pisadb runs");
    assert!(out.status.success(), "reproduce failed: {}", String::from_utf8_lossy(&out.stderr));
    // One subdirectory per setup (the report's columns), one CSV per experiment in each.
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .flat_map(|setup| std::fs::read_dir(setup).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .collect();
    names.sort();
    let digests: serde_json::Map<String, Value> = names
        .iter()
        .map(|p| {
            let name = p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned();
            (name, Value::String(csv_digest(&std::fs::read_to_string(p).unwrap())))
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    check_golden("reproduce-p4db-quick", &Value::Object(digests));
}

#[test]
fn the_csv_digest_ignores_only_the_wall_time_columns() {
    // The wall-time column in the middle, as P4DB's prototype columns follow it.
    let a = "x,y,sim_txn_per_wall_s,prototype\n\"1,5\",2,100.5,7\n";
    let b = "x,y,sim_txn_per_wall_s,prototype\n\"1,5\",2,977.0,7\n";
    let c = "x,y,sim_txn_per_wall_s,prototype\n\"1,5\",3,100.5,7\n";
    let d = "x,y,sim_txn_per_wall_s,prototype\n\"1,5\",2,100.5,8\n";
    let e = "x,y,sim_txn_per_wall_s,prototype\n1,\"5,2\",100.5,7\n";
    assert_eq!(csv_digest(a), csv_digest(b));
    assert_ne!(csv_digest(a), csv_digest(c));
    assert_ne!(csv_digest(a), csv_digest(d), "a cell after the wall-time column counts");
    assert_ne!(csv_digest(a), csv_digest(e), "cells are told apart, not run together");
    // The runner's `wall_s`, too; a column merely ending in "wall" text is kept.
    assert_eq!(csv_digest("x,wall_s\n1,0.5\n"), csv_digest("x,wall_s\n1,9\n"));
    assert_ne!(csv_digest("x,walls\n1,0.5\n"), csv_digest("x,walls\n1,9\n"));
}
