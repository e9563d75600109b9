//! The registry as a user meets it: `pisadb systems`, `--system`, `--variant` (and its old
//! name `--mode`), `--set`, and the errors that name what is accepted.

use serde_json::Value;
use std::process::{Command, Output};

fn pisadb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pisadb")).args(args).output().expect("pisadb runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A tiny, quick rack.
const SMALL: [&str; 8] = ["--nodes", "2", "--workers", "2", "--measure-ms", "1", "--warmup-ms", "0"];

#[test]
fn systems_lists_p4db_with_its_variants() {
    let out = pisadb(&["systems", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let systems: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let p4db = systems.as_array().and_then(|s| s.iter().find(|s| s["name"] == "p4db")).expect("p4db is listed");
    let variants: Vec<&str> =
        p4db["variants"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(variants, ["p4db", "no-switch", "lm-switch"]);
}

#[test]
fn unknown_systems_and_variants_are_refused_naming_the_known_ones() {
    let out = pisadb(&["bench", "--system", "gothard"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown system `gothard`; known systems: p4db"), "{}", stderr(&out));
    let out = pisadb(&["bench", "--variant", "netlock"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("its variants: p4db, no-switch, lm-switch"), "{}", stderr(&out));
}

#[test]
fn mode_is_the_variant_flag_under_its_old_name_and_set_edits_settings() {
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "--json"];
        args.extend_from_slice(&SMALL);
        args.extend_from_slice(extra);
        let out = pisadb(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<Value>(&out.stdout).expect("JSON")
    };
    let by_mode = run(&["--mode", "no-switch"]);
    let by_variant = run(&["--variant", "no-switch"]);
    assert_eq!(by_mode["mode"], "no-switch");
    assert_eq!(by_mode["trace_hash"], by_variant["trace_hash"], "the same run");
    assert_eq!(by_mode["system"], "p4db");
    let edited = run(&["--variant", "no-switch", "--set", "backoff_max_ns=1000"]);
    assert_ne!(edited["trace_hash"], by_mode["trace_hash"], "--set changed the run");
    assert_eq!(edited["sets"][0], "backoff_max_ns=1000");
}

#[test]
fn bad_settings_are_refused_naming_the_key_and_what_it_takes() {
    let out = pisadb(&["bench", "--set", "wrkers=3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no setting `wrkers`; accepted here:"), "{}", stderr(&out));
    let out = pisadb(&["bench", "--set", "workers=many"]);
    assert!(stderr(&out).contains("`workers` takes a number, not `many`"), "{}", stderr(&out));
    let out = pisadb(&["bench", "--set", "cc=Optimistic"]);
    assert!(stderr(&out).contains("expected `NoWait` or `WaitDie`"), "{}", stderr(&out));
}

#[test]
fn fuzz_runs_any_system_with_fault_injection_cases() {
    let out = pisadb(&["fuzz", "--system", "gotthard", "--seeds", "3", "--threads", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("3 seeds (1..=3): 0 failed"), "{stdout}");
    let out = pisadb(&["fuzz", "--system", "gotthard", "--seeds", "2", "--threads", "1", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["cases"].as_array().map(Vec::len), Some(2));
    assert!(json["cases"][0]["trace_hash"].is_string(), "{json}");
}

#[test]
fn sweep_runs_another_systems_own_experiment_and_refuses_unknown_ones_with_the_list() {
    let out_dir = std::env::temp_dir().join(format!("pisadb-gotthard-sweep-{}", std::process::id()));
    let out = pisadb(
        &["sweep", "--system", "gotthard", "total-delay", "--quick", "--threads", "1", "--out"]
            .into_iter()
            .chain([out_dir.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out_dir.join("gotthard-total-delay.csv").exists() && out_dir.join("gotthard-total-delay.svg").exists());
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = pisadb(&["sweep", "--system", "gotthard", "ycsb-workers"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("its experiments: fig2, clients, delay-split, total-delay, jitter"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sweep_finds_another_systems_experiment_and_asks_which_when_two_share_a_name() {
    // `fig10` is both SwitchTx's and TransKV's: the error names both and the flag to choose.
    let out = pisadb(&["sweep", "fig10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`fig10` is an experiment of switchtx and transkv"), "{}", stderr(&out));
    // `fig2` is Gotthard's alone: it runs without --system.
    let dir = tempfile::tempdir().unwrap();
    let out = pisadb(&["sweep", "fig2", "--quick", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.path().join("gotthard-fig2.csv").exists());
}

#[test]
fn a_systems_flags_are_aliases_of_its_set_keys_and_other_systems_refuse_them() {
    let run = |args: &[&str]| {
        let out = pisadb(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice::<Value>(&out.stdout).expect("JSON")
    };
    let mut by_flag = vec!["bench", "--json", "--workload", "smallbank", "--remote", "50"];
    by_flag.extend_from_slice(&SMALL);
    let by_set = [
        "bench",
        "--json",
        "--set",
        "remote=50",
        "--set",
        "workload=smallbank",
        "--set",
        "nodes=2",
        "--set",
        "workers=2",
        "--set",
        "measure_ms=1",
        "--set",
        "warmup_ms=0",
    ];
    let (by_flag, by_set) = (run(&by_flag), run(&by_set));
    assert_eq!(by_flag["settings"], by_set["settings"], "the same settings, in any order");
    assert_eq!(by_flag["trace_hash"], by_set["trace_hash"], "the same run");
    assert!(by_flag["settings"]["workload"]["SmallBank"].is_object(), "{by_flag}");

    let out = pisadb(&["bench", "--system", "netaccel", "--layout", "ideal"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("system `netaccel` has no flag --layout (systems with flag --layout: p4db)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bench_json_of_another_system_holds_its_own_settings_and_nothing_of_p4db() {
    let out = pisadb(&["bench", "--system", "netaccel", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let point: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for key in ["system", "variant", "preset", "settings", "events", "wall_s", "events_per_wall_s", "trace_hash"] {
        assert!(point.get(key).is_some(), "{key} missing: {point}");
    }
    assert_eq!((point["system"].as_str(), point["preset"].as_str()), (Some("netaccel"), Some("pisadb")));
    for p4db in ["inputs", "sim_txn_per_wall_s", "hot_committed"] {
        assert!(point.get(p4db).is_none(), "{p4db} is P4DB's: {point}");
    }
    assert!(point["settings"]["segments"].is_number(), "NetAccel's own settings: {point}");
}
