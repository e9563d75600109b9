//! P4DB's switch-side flags as a user meets them: `--layout ideal` is reported as the upper bound
//! it is, with what it did not execute, and `--fine-locks parity` as the non-serializable
//! measurement it is, by `bench` and `compare`, in tables and beside JSON.

use std::process::{Command, Output};

const SMALL: [&str; 8] = ["--nodes", "2", "--workers", "2", "--measure-ms", "1", "--warmup-ms", "0"];

fn pisadb(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_pisadb")).args(args).args(SMALL).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn parity_fine_locks_are_reported_as_not_serializable_by_bench_and_compare() {
    for command in ["bench", "compare"] {
        let (stdout, _) = text(&pisadb(&[command, "--fine-locks", "parity", "--recirculation", "fifo"]));
        assert!(stdout.contains("not a serializable protocol"), "{command}: {stdout}");
        assert!(stdout.contains("Parity locks, TwoPortFifo recirculation"), "{command}: {stdout}");
    }
    let (stdout, stderr) = text(&pisadb(&["bench", "--fine-locks", "parity", "--json"]));
    assert!(stderr.contains("not a serializable protocol"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("stdout stays one JSON object");
    assert_eq!(json["settings"]["p4db"]["fine_locks"], "parity", "the flag is in the settings in force: {json}");
    let (stdout, _) = text(&pisadb(&["bench"]));
    assert!(!stdout.contains("serializable"), "no warning for the default: {stdout}");
}

#[test]
fn the_ideal_layout_is_printed_as_an_upper_bound_with_what_it_did_not_execute() {
    let (stdout, _) = text(&pisadb(&["bench", "--layout", "ideal"]));
    assert!(stdout.contains("upper bound that no register layout achieves"), "{stdout}");
    assert!(stdout.contains("the ideal layout did not execute"), "{stdout}");
    let (stdout, _) = text(&pisadb(&["bench", "--layout", "ideal", "--json"]));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(json["ideal"]["dropped_ops"].as_u64().is_some(), "{json}");
    assert_eq!(json["recirculations"], 0);
    let (stdout, _) = text(&pisadb(&["bench", "--layout", "random", "--json"]));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(json.get("ideal").is_none(), "only the ideal layout drops operations: {json}");
}
