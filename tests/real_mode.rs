//! Real mode end to end: `pisadb cluster` starts a software switch and node processes on
//! loopback, and its end-of-run checks must pass: every node's store equals the one rebuilt
//! from its write-ahead log (nothing committed is lost), the switch's registers equal a rebuild
//! from all logs, and SmallBank's money is conserved. Crashes are real `kill -9`s.

use serde_json::Value;
use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;

fn cluster(data_dir: &Path, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pisadb"))
        .args(["cluster", "--json", "--nodes", "3", "--workers", "2", "--rows", "3000", "--seconds", "2"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .output()
        .expect("pisadb runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cluster failed: {}\n{stderr}", String::from_utf8_lossy(&out.stdout));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn assert_checks_pass(v: &Value, expected: usize) {
    let checks = v["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), expected, "{checks:?}");
    for c in checks {
        assert_eq!(c["ok"], true, "{c}");
    }
    assert!(v["committed_per_s"].as_f64().unwrap() > 0.0, "something committed");
}

#[test]
fn a_smallbank_run_conserves_money_and_its_logs_rebuild_every_store_and_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &[]);
    // 3 stores, the switch, the invariants.
    assert_checks_pass(&v, 5);
    assert!(v["checks"][4]["check"].as_str().unwrap().starts_with("workload invariants over"), "{v}");
}

#[test]
fn a_switch_killed_mid_run_is_rebuilt_from_the_logs_and_money_is_still_conserved() {
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &["--kill-switch", "0.8", "--down", "0.3"]);
    assert_checks_pass(&v, 5);
    assert!(v["checks"][4]["detail"] == "hold", "{v}");
}

#[test]
fn a_node_killed_mid_run_recovers_from_its_log_with_nothing_lost() {
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &["--kill-node", "1@1.2", "--down", "0.3"]);
    assert_checks_pass(&v, 5);
    // Incarnation 1 unless the kill came before node 1 had logged its start (a slow machine
    // still planning the rack): then it rightly starts afresh as incarnation 0.
    assert!(v["nodes"][1]["incarnation"].as_u64().unwrap() <= 1, "{v}");
}

#[test]
fn garbage_datagrams_are_counted_and_dropped_and_the_run_still_checks_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let spammer = std::thread::spawn(move || {
        // From the moment the supervisor writes its config until the switch reports, send junk
        // to every process of the rack, from an address none of them knows.
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut round = 0u32;
        while !path.join("switch.json").exists() && round < 6_000 {
            round += 1;
            std::thread::sleep(std::time::Duration::from_millis(10));
            let Ok(text) = std::fs::read_to_string(path.join("rack.json")) else { continue };
            let Ok(cfg) = serde_json::from_str::<Value>(&text) else { continue };
            let mut targets = vec![cfg["switch"].as_str().unwrap().to_string()];
            targets.extend(cfg["nodes"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()));
            let junk: Vec<u8> =
                (0..(round % 40)).map(|b| (b as u8).wrapping_mul(31).wrapping_add(round as u8)).collect();
            for t in &targets {
                let _ = socket.send_to(&junk, t);
            }
        }
    });
    let v = cluster(dir.path(), &[]);
    spammer.join().unwrap();
    assert_checks_pass(&v, 5);
    assert!(v["switch"]["unregistered"].as_u64().unwrap() > 0, "the switch saw the junk: {v}");
    let nodes_saw: u64 = v["nodes"].as_array().unwrap().iter().map(|n| n["not_from_switch"].as_u64().unwrap()).sum();
    assert!(nodes_saw > 0, "the nodes saw the junk: {v}");
}

#[test]
fn the_switch_bench_answers_a_workload_load_through_the_switch_process_and_reports_the_model_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pisadb"))
        .args(["switch-bench", "--json", "--senders", "2", "--window", "4", "--rows", "2000", "--seconds", "0.5"])
        .args(["--model-ms", "2", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("pisadb runs");
    assert!(out.status.success(), "switch-bench failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (measured, model) = (&v["measured"], &v["model"]);
    assert!(measured["switch_txn_per_s"].as_f64().unwrap() > 0.0, "the switch process answered: {v}");
    assert!(model["switch_txn_per_s"].as_f64().unwrap() > 0.0, "the model answered: {v}");
    // The switch's own counters saw the load: every datagram the generator got back left the
    // switch, and the pipeline ran at least one pass per switch transaction.
    let s = &v["switch"];
    assert!(s["passes"].as_u64().unwrap() >= s["emitted"].as_u64().unwrap(), "{s}");
    assert_eq!(s["unregistered"], 0, "the generator sends from the registered node addresses only: {s}");
    assert!(v["ceilings"]["pipeline_passes_per_s"].as_f64().unwrap() > 1e9, "one pass per clock: {v}");
}

#[test]
fn a_smallbank_run_with_2_percent_loss_and_jitter_on_every_port_still_passes_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &["--loss", "0.02", "--delay-us", "100", "--jitter-us", "50"]);
    assert_checks_pass(&v, 5);
    assert_eq!(v["checks"][4]["detail"], "hold", "{v}");
    let ports = v["switch"]["ports"].as_array().expect("per-port wire counters");
    assert_eq!(ports.len(), 3, "one wire per node: {v}");
    let lost: u64 = ports.iter().map(|p| p["lost"].as_u64().unwrap()).sum();
    let delayed: u64 = ports.iter().map(|p| p["delayed"].as_u64().unwrap()).sum();
    assert!(lost > 0, "the wires lost datagrams: {v}");
    assert!(delayed > 0, "the wires delayed datagrams: {v}");
    // Lost datagrams were made good by the protocols: switch resends or peer timeouts.
    let recovered: u64 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["switch_resends"].as_u64().unwrap() + n["peer_timeouts"].as_u64().unwrap())
        .sum();
    assert!(recovered > 0, "some loss was recovered from: {v}");
}

/// Whether this machine can run a rack in network namespaces; says why not if it cannot.
fn namespaces_available() -> bool {
    let probe = format!("pisadb-{}-probe", std::process::id());
    let ok = Command::new("ip").args(["netns", "add", &probe]).output().is_ok_and(|o| o.status.success());
    if ok {
        let _ = Command::new("ip").args(["netns", "del", &probe]).output();
    } else {
        eprintln!("skipped: `ip netns add` failed (network namespaces need root and iproute2)");
    }
    ok
}

#[test]
fn a_rack_across_network_namespaces_passes_every_check_and_leaves_no_namespace_behind() {
    if !namespaces_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &["--netns"]);
    assert_checks_pass(&v, 5);
    let names: Vec<&str> = v["netns"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(names.len(), 4, "the switch's namespace and one per node: {v}");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for name in names {
        assert!(!list.lines().any(|l| l.split_whitespace().next() == Some(name)), "{name} was removed: {list}");
    }
}
