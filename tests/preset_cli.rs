//! `--preset p4db-testbed` as a user meets it: explained by `--help`, announced at the start of
//! a run, and the prototype engine's counts in the output.

use serde_json::Value;
use std::process::{Command, Output};

fn pisadb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pisadb")).args(args).output().expect("pisadb runs")
}

/// A tiny, quick rack.
const SMALL: [&str; 10] =
    ["--nodes", "2", "--workers", "2", "--measure-ms", "1", "--warmup-ms", "0", "--rows", "20000"];

#[test]
fn bench_help_explains_the_presets() {
    let out = pisadb(&["bench", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--preset") && help.contains("p4db-testbed"), "{help}");
    assert!(help.contains("prototype"), "{help}");
}

#[test]
fn a_testbed_run_says_what_the_preset_selected_and_counts_skipped_transactions() {
    let mut args = vec!["bench", "--preset", "p4db-testbed", "--variant", "no-switch"];
    args.extend(SMALL);
    let out = pisadb(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("preset p4db-testbed:") && first.contains("prototype engine"), "{text}");
    assert!(text.contains("skipped after an abort"), "{text}");

    args.push("--json");
    let out = pisadb(&args);
    let point: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(point["preset"], "paper", "the testbed is P4DB's `paper` preset: {point}");
    assert_eq!(point["settings"]["engine"], "prototype", "the settings in force: {point}");
    let counts = &point["prototype"];
    assert!(counts["started"].as_u64().unwrap() > 0, "{point}");
    assert_eq!(counts["txns_per_worker"], 500_000);
}

#[test]
fn the_default_preset_prints_no_preset_line_and_no_prototype_counts() {
    let mut args = vec!["bench", "--json"];
    args.extend(SMALL);
    let out = pisadb(&args);
    let point: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(point.get("prototype").is_none(), "{point}");
    assert_eq!(point["preset"], "pisadb");
}
