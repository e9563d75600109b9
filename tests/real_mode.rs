//! Real mode end to end: `pisadb cluster` starts a software switch and node processes on
//! loopback, and its end-of-run checks must pass: every node's store equals the one rebuilt
//! from its write-ahead log (nothing committed is lost), the switch's registers equal a rebuild
//! from all logs, and SmallBank's money is conserved. Crashes are real `kill -9`s.

use serde_json::Value;
use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Real-mode runs are processes timed by the wall clock: a dozen clusters at once on two cores
/// starve each other's timers (a refresh epoch that never comes round, a drain that stalls),
/// which tests nothing of the system. Each test holds this while it runs, so the binary's
/// tests run one cluster at a time whatever `--test-threads` says.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The guard of [`ONE_CLUSTER_AT_A_TIME`] (a test that failed while holding it does not poison
/// the others).
fn one_cluster_at_a_time() -> MutexGuard<'static, ()> {
    ONE_CLUSTER_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `pisadb cluster --json --data-dir DATA_DIR ARGS…` (`args` split at spaces), which must
/// succeed; its JSON report.
fn cluster_json(data_dir: &Path, args: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pisadb"))
        .args(["cluster", "--json", "--data-dir"])
        .arg(data_dir)
        .args(args.split_whitespace())
        .output()
        .expect("pisadb runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cluster failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// A small P4DB rack (3 nodes x 2 workers, 3000 rows, 2 s) with `extra` flags.
fn cluster(data_dir: &Path, extra: &[&str]) -> Value {
    cluster_json(data_dir, &format!("--nodes 3 --workers 2 --rows 3000 --seconds 2 {}", extra.join(" ")))
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
    let _one = one_cluster_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &[]);
    // 3 stores, the switch, the ledger, the invariants.
    assert_checks_pass(&v, 6);
    assert!(v["checks"][5]["check"].as_str().unwrap().starts_with("workload invariants over"), "{v}");
}

#[test]
fn a_switch_killed_mid_run_is_rebuilt_from_the_logs_and_money_is_still_conserved() {
    let _one = one_cluster_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &["--kill-switch", "0.8", "--down", "0.3"]);
    assert_checks_pass(&v, 6);
    assert!(v["checks"][5]["detail"] == "hold", "{v}");
}

#[test]
fn a_node_killed_mid_run_recovers_from_its_log_with_nothing_lost() {
    let _one = one_cluster_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &["--kill-node", "1@1.2", "--down", "0.3"]);
    assert_checks_pass(&v, 6);
    // Against the supervisor's ledger, which the kill did not touch: every acknowledged commit
    // is in the final state, and money is conserved over every commit, the killed node's too.
    assert!(v["checks"][4]["check"].as_str().unwrap().starts_with("ledger: every one of"), "{v}");
    assert_eq!(v["checks"][5]["detail"], "hold", "{v}");
    // Incarnation 1 unless the kill came before node 1 had logged its start (a slow machine
    // still planning the rack): then it rightly starts afresh as incarnation 0.
    assert!(v["nodes"][1]["incarnation"].as_u64().unwrap() <= 1, "{v}");
}

#[test]
fn garbage_datagrams_are_counted_and_dropped_and_the_run_still_checks_out() {
    let _one = one_cluster_at_a_time();
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
            let network = &cfg["network"];
            let addrs = network["switches"].as_array().unwrap().iter().chain(network["hosts"].as_array().unwrap());
            let targets: Vec<String> = addrs.map(|a| a.as_str().unwrap().to_string()).collect();
            let junk: Vec<u8> =
                (0..(round % 40)).map(|b| (b as u8).wrapping_mul(31).wrapping_add(round as u8)).collect();
            for t in &targets {
                let _ = socket.send_to(&junk, t);
            }
        }
    });
    let v = cluster(dir.path(), &[]);
    spammer.join().unwrap();
    assert_checks_pass(&v, 6);
    assert!(v["switch"]["unregistered"].as_u64().unwrap() > 0, "the switch saw the junk: {v}");
    let nodes_saw: u64 = v["nodes"].as_array().unwrap().iter().map(|n| n["not_from_switch"].as_u64().unwrap()).sum();
    assert!(nodes_saw > 0, "the nodes saw the junk: {v}");
}

#[test]
fn the_switch_bench_answers_a_workload_load_through_the_switch_process_and_reports_the_model_beside_it() {
    let _one = one_cluster_at_a_time();
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
    let _one = one_cluster_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &["--loss", "0.02", "--delay-us", "100", "--jitter-us", "50"]);
    assert_checks_pass(&v, 6);
    assert_eq!(v["checks"][5]["detail"], "hold", "{v}");
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
    let _one = one_cluster_at_a_time();
    if !namespaces_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let v = cluster(dir.path(), &["--netns"]);
    assert_checks_pass(&v, 6);
    let names: Vec<&str> = v["netns"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(names.len(), 4, "the switch's namespace and one per node: {v}");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for name in names {
        assert!(!list.lines().any(|l| l.split_whitespace().next() == Some(name)), "{name} was removed: {list}");
    }
}

/// Two switch processes in a line, two host processes on each: every host pings every other,
/// so half the pings cross both switches. Each switch forwards what is not for its own hosts to
/// the other over the trunk between them, by the routes the network's topology derives, and
/// the frame (so the source) arrives as it was sent: every echo comes back from the host that
/// was pinged, and every ping reaches its peer with its origin as source.
#[test]
fn two_switch_processes_in_a_line_forward_hop_by_hop_and_keep_sources() {
    let _one = one_cluster_at_a_time();
    use pisadb_runtime::echo::{run_line, EchoSpec, LineOptions};
    let dir = tempfile::tempdir().unwrap();
    let opts = LineOptions {
        switches: 2,
        hosts_per_switch: 2,
        seconds: 1.0,
        spec: EchoSpec { window: 4, resend_ms: 50 },
        data_dir: dir.path().to_path_buf(),
        exe: env!("CARGO_BIN_EXE_pisadb").into(),
    };
    let r = run_line(&opts).expect("the echo rack runs");
    assert_eq!(r.network.host_switch, vec![0, 0, 1, 1], "hosts 0, 1 on switch 0; 2, 3 on switch 1");
    assert_eq!(r.network.trunks, vec![(0, 1)]);
    for h in &r.hosts {
        assert!(h.drained, "every ping answered: {h:?}");
        assert_eq!(h.stats.wrong_source, 0, "no source rewritten on any hop: {h:?}");
        assert_eq!(h.stats.malformed, 0, "{h:?}");
        let peers: Vec<u16> = h.stats.echoes_by_peer.keys().copied().collect();
        let expected: Vec<u16> = (0..4).filter(|&p| p != h.id).collect();
        assert_eq!(peers, expected, "echoes from every other host, near and far: {h:?}");
        assert!(h.stats.echoes_by_peer.values().all(|&n| n > 10), "{h:?}");
        let origins: Vec<u16> = h.stats.served_by_origin.keys().copied().collect();
        assert_eq!(origins, expected, "pings from every other host, with their sources: {h:?}");
    }
    // What crossed between the racks crossed the trunk, both ways, and nothing else did: each
    // switch sent over the trunk exactly the pings and echoes its hosts addressed to the far
    // ones (resends included), and the other switch forwarded them on to its hosts.
    let far = |from: std::ops::Range<u16>, to: std::ops::Range<u16>| -> u64 {
        let served: u64 = r.hosts[usize::from(to.start)..usize::from(to.end)]
            .iter()
            .map(|h| from.clone().map(|o| h.stats.served_by_origin.get(&o).copied().unwrap_or(0)).sum::<u64>())
            .sum();
        served
    };
    for (id, s) in r.switches.iter().enumerate() {
        assert_eq!(s.unregistered, 0, "{s:?}");
        assert!(s.rejected.is_empty() && s.dropped.is_empty(), "{s:?}");
        assert_eq!(s.trunks.len(), 1, "one trunk: {s:?}");
        let trunk = &s.trunks[0];
        assert_eq!(trunk.switch, 1 - id as u16);
        assert!(trunk.counts.sent > 0, "switch {id} forwarded to the other switch: {s:?}");
        assert_eq!(s.ports.len(), 2, "a port per own host: {s:?}");
        assert!(s.forwarded >= trunk.counts.sent, "{s:?}");
    }
    // Pings that crossed from rack 0 to rack 1 were served there; so at least that many
    // datagrams went over switch 0's trunk (echoes and resends come on top).
    assert!(r.switches[0].trunks[0].counts.sent >= far(0..2, 2..4), "{:?}", r.switches[0]);
    assert!(r.switches[1].trunks[0].counts.sent >= far(2..4, 0..2), "{:?}", r.switches[1]);
}

#[test]
fn a_gotthard_rack_on_loopback_with_port_delays_and_loss_passes_the_simulators_oracles() {
    let _one = one_cluster_at_a_time();
    // Clients, store and controller as processes, the switch process playing the links'
    // delays (1 ms + 4 ms one way) with 3% loss: the switch aborts optimistically, clients
    // retransmit what is lost, and nothing commits or counts twice.
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system gotthard --seconds 1.5 --loss 0.03 --set near_us=1000 --set far_us=4000 --set clients=4 --set write_share=0.5");
    assert_eq!(v["failure"], Value::Null, "{v}");
    let f = &v["figures"];
    assert!(f["commits"].as_u64().unwrap() > 20, "{f}");
    assert!(f["aborts_switch_optimistic"].as_u64().unwrap() > 0, "the switch aborted: {f}");
    assert_eq!(v["final_value"].as_u64(), f["write_commits"].as_u64(), "one increment per counted write");
}

/// NetAccel at SF 0.01, one tuple per 20 µs per segment.
const NETACCEL_SMALL: &str = "--system netaccel --tuple-gap-ns 20000 --set sf=0.01";

/// `pisadb cluster --system netaccel` at [`NETACCEL_SMALL`] with `extra`, success or not.
#[test]
fn a_gotthard_store_killed_mid_run_restarts_from_its_log_and_every_write_its_clients_counted_is_in_the_final_value() {
    let _one = one_cluster_at_a_time();
    // The store logs every commit before it answers and is killed (`kill -9`) mid-run; it
    // comes back from its log. The proof is against the clients, which are never killed:
    // every write they counted must be among the store's commits (rebuilt from its log across
    // both lives), and the hot key (each write increments it) must equal the counted writes.
    let dir = tempfile::tempdir().unwrap();
    let v =
        cluster_json(dir.path(), "--system gotthard --seconds 2 --kill-node 1@0.8 --down 0.3 --set write_share=0.5");
    assert_eq!(v["failure"], Value::Null, "{}", v["failure"]);
    assert_eq!(v["crashes"][0][0], serde_json::json!({"Host": 1}), "the store was killed: {}", v["crashes"]);
    let writes = v["figures"]["write_commits"].as_u64().unwrap();
    assert!(writes > 5, "writes committed: {}", v["figures"]);
    assert_eq!(v["final_value"].as_u64().unwrap(), writes, "every counted write is in the final value");
    let log: Vec<pisadb_gotthard::store::StoreRecord> =
        pisadb_runtime::wal_file::read_dir_log(&dir.path().join("host-1")).unwrap();
    let logged_writes = log.iter().filter(|r| !r.writes().is_empty()).count() as u64;
    assert!(logged_writes > writes, "the log holds every counted write and the initial one: {logged_writes}");
    // Refused: kills of a process that holds no log of its own.
    let e = refused("--system gotthard --kill-node 0@0.5");
    assert!(e.contains("the store, host 1"), "{e}");
}

fn netaccel_cluster(dir: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pisadb"))
        .args(["cluster", "--json", "--data-dir"])
        .arg(dir)
        .args(NETACCEL_SMALL.split_whitespace())
        .args(extra)
        .output()
        .expect("pisadb runs")
}

#[test]
fn a_netaccel_rack_on_loopback_streams_real_tuples_through_the_switch_and_answers_q20() {
    let _one = one_cluster_at_a_time();
    // Segments, master and control plane as processes; every part_FP and lineitem_FP tuple a
    // datagram through the switch process, the overflow out of its CPU port to the control
    // plane's process, the groups drained back, then pattern 2 reloaded: Q20's rows must
    // equal the plain reference, and the run ends by itself once the master has them.
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), &format!("{NETACCEL_SMALL} --variant accelerated --set query=q20"));
    assert_eq!(v["failure"], Value::Null, "{v}");
    assert_eq!(v["answer_ok"], true);
    assert!(v["answer_rows"].as_u64().unwrap() > 0, "Q20 has rows at SF 0.01: {}", v["answer_rows"]);
    let tuples: u64 = v["tuples"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).sum();
    assert!(v["switch"]["datagrams_in"].as_u64().unwrap() >= tuples, "every tuple crossed the switch process");
    let overflow: u64 = v["overflow"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).sum();
    assert!(overflow > 0, "the 2x2 split overflows to the control-plane process");
}

#[test]
fn a_netaccel_switch_killed_mid_query_fails_the_query_saying_so_never_with_a_wrong_answer() {
    let _one = one_cluster_at_a_time();
    // The switch holds the join's and the group-by's state in its registers; killed (`kill
    // -9`) mid-query and restarted empty, it has lost part of the query. The run must end in a
    // clear failure naming the kill, or with the reference's answer: never a wrong one.
    let dir = tempfile::tempdir().unwrap();
    let out = netaccel_cluster(
        dir.path(),
        &["--variant", "accelerated", "--set", "query=q20", "--kill-switch", "0.3", "--down", "0.2", "--seconds", "1"],
    );
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["crashes"][0][0], serde_json::json!({"Switch": 0}), "the switch was killed: {v}");
    match v["failure"].as_str() {
        Some(why) => {
            assert!(!out.status.success() && why.starts_with("Switch(0) was killed at 0.3 s: "), "{why}");
        }
        None => assert_eq!(v["answer_ok"], true, "no failure, so the answer must be the reference's: {v}"),
    }
}

#[test]
fn a_netaccel_rack_runs_the_normal_plan_and_refuses_orig_without_q20() {
    let _one = one_cluster_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = netaccel_cluster(dir.path(), &["--variant", "normal"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", out));
    assert_eq!((v["failure"].clone(), v["answer_ok"].clone()), (Value::Null, Value::Bool(true)), "{v}");
    assert!(v["groups"].as_u64().unwrap() > 0);

    let out = netaccel_cluster(dir.path(), &["--variant", "orig"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("query=q20"), "{stderr}");
}

#[test]
fn a_transkv_data_center_on_loopback_with_a_storage_node_killed_passes_the_simulators_checks() {
    let _one = one_cluster_at_a_time();
    // 8 switch processes in Fig. 6(c)'s tree, 16 storage nodes over fjall on disk, 4 client
    // hosts and the controller; storage node 3 is killed with `kill -9` mid-run and comes back
    // from its write-ahead log over its fjall directory. The history must be serializable in
    // timestamp order, every cached value equal its node's, and every write node 3 committed
    // must be in its store on disk afterwards.
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system transkv --seconds 2 --kill-node 3@0.7 --down 0.3 --set records=20000 --set cache_per_switch=64 --set write_ratio=0.5 --set txns_per_client=1000000");
    assert_eq!(v["failure"], Value::Null, "{}", v["failure"]);
    assert_eq!(v["killed"][0][0], 3, "node 3 was killed");
    let commits = v["commits"].as_array().unwrap();
    assert!(commits[1].as_u64().unwrap() > 50, "writes committed: {commits:?}");
    assert!(commits[2].as_u64().unwrap() > 0, "switches answered some: {commits:?}");
    assert!(v["checked"].as_u64().unwrap() > 100, "the history check saw the run");
    assert_eq!(v["cached_compared"][0], 8 * 64, "every cached key held a value and was compared");
    // Node 3's store on disk holds, per key, its last committed write (TSO installs a key's
    // writes in timestamp order).
    let node = &v["hosts"][3];
    let mut last: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for (ts, writes) in node["ledger"]["store_commits"].as_object().unwrap() {
        let ts: u64 = ts.parse().unwrap();
        for w in writes.as_array().unwrap() {
            let key = w[0].as_u64().unwrap();
            let e = last.entry(key).or_insert(0);
            *e = (*e).max(ts);
        }
    }
    assert!(!last.is_empty(), "node 3 committed writes");
    let store = pisadb_transkv::real::FjallStore::open(&dir.path().join("host-3").join("store")).unwrap();
    for (&key, &ts) in &last {
        let version = store.version(key);
        assert_eq!(version, ts, "key {key} on disk");
    }
}

#[test]
fn a_transkv_data_center_on_loopback_refreshes_its_cache_as_the_hot_set_moves_and_its_controller_is_killed() {
    let _one = one_cluster_at_a_time();
    // The controller refreshes the cache every 20 ms over the control channel (every switch
    // by id, hop by hop) while the clients' hot set moves at 0.7 s, and is killed (`kill -9`)
    // at 1 s: it comes back from its write-ahead log with its placement and finishes or undoes
    // any move under way. The end-of-run checks add the simulator's refresh checks: no epoch
    // left under way or failed, every switch's table exactly the controller's placement,
    // published, and the nodes handing exactly the placed keys. (It was flaky while a restored
    // controller numbered its epochs from 1 again and was handed stale miss reports: see
    // `Refresher::start_recovery`.)
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system transkv --seconds 2 --kill-node 20@1.0 --down 0.3 --set records=20000 --set cache_per_switch=16 --set write_ratio=0.25 --set txns_per_client=1000000 --set refresh_epoch_us=20000 --set hot_shift_at_us=700000 --set hot_shift_ranks=5000");
    assert_eq!(v["failure"], Value::Null, "{}", v["failure"]);
    assert_eq!(v["killed"][0][0], 20, "the controller was killed");
    let refresh = &v["hosts"][20]["refresh"];
    assert_eq!(refresh["idle"], true, "{refresh}");
    // The keys cached at the end are not the setup fill's: the refresh followed the hot set.
    let setup = pisadb_transkv::layout::Hierarchy::new(20_000, 16).unwrap();
    let placed: std::collections::BTreeSet<u64> =
        refresh["placement"].as_array().unwrap().iter().map(|p| p[0].as_u64().unwrap()).collect();
    assert!(placed.iter().any(|k| !setup.cached.contains_key(k)), "the refresh moved keys: {refresh}");
    assert!(v["cached_compared"][0].as_u64().unwrap() > 0, "cached values were compared");
}

#[test]
fn a_transkv_log_controller_killed_on_loopback_comes_back_with_its_transaction_log() {
    let _one = one_cluster_at_a_time();
    // Variant transkv-log: the switches copy every transaction they accept to the controller
    // and the nodes every commit; the controller writes each copy to its write-ahead log. It
    // is killed with `kill -9` mid-run and must come back with the transaction log rebuilt
    // from that file, and the run must pass the simulator's checks.
    use pisadb_transkv::control::Controller;
    use pisadb_transkv::layout::{Hierarchy, CONTROLLER};
    use pisadb_transkv::store::NodeRecord;
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system transkv --variant transkv-log --seconds 2 --kill-node 20@0.7 --down 0.3 --set records=20000 --set cache_per_switch=64 --set write_ratio=0.5 --set txns_per_client=1000000");
    assert_eq!(v["failure"], Value::Null, "{}", v["failure"]);
    assert_eq!(v["killed"][0][0], u64::from(CONTROLLER), "the controller was killed");
    assert!(v["commits"][1].as_u64().unwrap() > 50, "writes committed: {}", v["commits"]);
    let controller = &v["hosts"][usize::from(CONTROLLER)];
    assert_eq!(controller["id"], u64::from(CONTROLLER));
    let (restored, at_end) = (controller["txn_log"][0].as_u64().unwrap(), controller["txn_log"][1].as_u64().unwrap());
    assert!(restored > 0, "it came back with the transactions logged before the kill");
    assert!(at_end > restored, "and logged more after: {restored} then {at_end}");
    // Its log file holds only its own records and rebuilds the log it ended with.
    let records: Vec<NodeRecord> =
        pisadb_runtime::wal_file::read_dir_log(&dir.path().join(format!("host-{CONTROLLER}"))).unwrap();
    let own: Vec<_> = records
        .iter()
        .map(|r| match r {
            NodeRecord::Controller(c) => c.clone(),
            other => panic!("a node's record in the controller's log: {other:?}"),
        })
        .collect();
    let hierarchy = std::sync::Arc::new(Hierarchy::new(20_000, 64).unwrap());
    assert_eq!(Controller::restore(CONTROLLER, hierarchy, &own).logged() as u64, at_end);
}

#[test]
fn a_switchtx_rack_of_eight_server_and_four_switch_processes_commits_and_passes_the_simulators_checks() {
    let _one = one_cluster_at_a_time();
    // Eight servers (2 threads each) on three ToR processes under an S0 process, the tree
    // gathering and scattering every phase across the processes: the merged history must be
    // serializable, every backup equal to its primary, no lock left, every server drained.
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system switchtx --variant tree-gas --seconds 1.5");
    assert_eq!(v["failure"], Value::Null, "{}", v["figures"]);
    let f = &v["figures"];
    assert!(f["commits"].as_u64().unwrap() > 50, "{f}");
    assert!(f["checked_commits"].as_u64().unwrap() >= f["commits"].as_u64().unwrap(), "drained ones too: {f}");
    assert!(f["switch_gathered"].as_u64().unwrap() > 0, "the switches gathered: {f}");
    let switches = v["switches"].as_array().unwrap();
    assert_eq!(switches.len(), 4, "S0 and three ToRs");
    // S0 has a trunk to each ToR; a cross-rack transaction's messages crossed them.
    let s0_trunks = switches[0]["trunks"].as_array().unwrap();
    assert_eq!(s0_trunks.len(), 3, "{}", switches[0]);
    assert!(s0_trunks.iter().all(|t| t["sent"].as_u64().unwrap() > 0), "{}", switches[0]);
    let hosts = v["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 8);
    assert!(hosts.iter().all(|h| h["drained"] == true && h["commits"].as_u64().unwrap() > 0), "every server committed");
}

#[test]
fn a_switchtx_rack_with_semantic_priority_sends_every_class_through_the_switch_processes_egress_queues() {
    let _one = one_cluster_at_a_time();
    // `reorder`: every port of the four switch processes has three strict-priority classes
    // (the switch model's port), and the servers sort each batch they drain by class. Each
    // ToR's host ports must have carried both urgent (lock_ok, replicate_ok, …) and
    // low-class traffic (reads, commit_ok) through its queues, and the run pass the checks.
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system switchtx --variant reorder --seconds 1.5");
    assert_eq!(v["failure"], Value::Null, "{}", v["figures"]);
    assert!(v["figures"]["commits"].as_u64().unwrap() > 50, "{}", v["figures"]);
    let switches = v["switches"].as_array().unwrap();
    for tor in &switches[1..] {
        for port in tor["ports"].as_array().unwrap() {
            let classes = port["classes"].as_array().unwrap_or_else(|| panic!("no egress queues: {port}"));
            assert_eq!(classes.len(), 3, "{port}");
            let sent = |c: usize| classes[c]["sent_frames"].as_u64().unwrap();
            assert!(sent(0) > 0 && sent(2) > 0, "low and high classes both crossed: {port}");
            let through_queues: u64 = (0..3).map(sent).sum();
            assert_eq!(
                port["sent"].as_u64().unwrap(),
                through_queues,
                "all the port sent went through its queues: {port}"
            );
        }
    }
}

#[test]
fn a_switchtx_rack_losing_2_percent_of_what_the_tors_send_recovers_by_timeouts_and_still_passes_the_checks() {
    let _one = one_cluster_at_a_time();
    // Every ToR loses 2% of what it sends to its servers (control and data messages alike):
    // clients that hear no outcome time out and query the participants, which decide each
    // transaction committed or aborted; nothing committed may be lost or half-installed. (With
    // a 20 ms timeout and the other tests' processes beside it, a run can collapse into
    // timeouts and their queries: fixed timeouts have no backoff. The default 100 ms holds.)
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system switchtx --seconds 1.5 --loss 0.02");
    assert_eq!(v["failure"], Value::Null, "{}: {}", v["failure"], v["figures"]);
    assert!(v["wire"][0].as_u64().unwrap() > 0, "the wires lost datagrams: {}", v["wire"]);
    let f = &v["figures"];
    assert!(f["timeouts"].as_u64().unwrap() > 0, "losses were recovered from by timeouts: {f}");
    assert!(f["commits"].as_u64().unwrap() > 20, "{f}");
}

#[test]
fn a_switchtx_core_switch_killed_mid_run_comes_back_with_zeroed_registers_and_the_checks_still_pass() {
    let _one = one_cluster_at_a_time();
    // S0 is `kill -9`ed 0.8 s in and restarted 0.3 s later with zeroed registers (§3.5): what
    // it was gathering is gone, later messages of those transactions fail the tag check, their
    // clients time out and resolve them with the participants, and the run goes on.
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system switchtx --variant tree-gas --seconds 2 --kill-switch 0.8 --down 0.3");
    assert_eq!(v["failure"], Value::Null, "{}", v["figures"]);
    assert_eq!(v["crashes"].as_array().unwrap().len(), 1, "S0 was killed and restarted: {}", v["crashes"]);
    let f = &v["figures"];
    assert!(f["timeouts"].as_u64().unwrap() > 0, "clients in flight at the kill timed out: {f}");
    assert!(f["commits"].as_u64().unwrap() > 50, "{f}");
}

#[test]
fn a_switchtx_server_killed_mid_run_restarts_from_its_log_and_no_commit_is_lost() {
    let _one = one_cluster_at_a_time();
    // Server 4 is `kill -9`ed 0.8 s in and restarted 0.3 s later: every server logs (the kill
    // turns `durable` on), the restarted one replays its `wal.log` (its shard, its backup of
    // shard 3, the locks and redo records of transactions in flight) and its clients resolve
    // the attempts they had logged. The ledger of every server is read from its whole log, so
    // the checks cover the killed life too: the history serializable, every backup equal to
    // its primary, no lock left, and every commit a client counted in the final state.
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--system switchtx --variant tree-gas --seconds 2 --kill-node 4@0.8 --down 0.3");
    assert_eq!(v["failure"], Value::Null, "{}", v["figures"]);
    assert_eq!(v["crashes"].as_array().unwrap().len(), 1, "server 4 was killed and restarted: {}", v["crashes"]);
    let log = dir.path().join("host-4").join("wal.log");
    assert!(std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) > 0, "server 4 logged to {}", log.display());
    let f = &v["figures"];
    assert!(f["timeouts"].as_u64().unwrap() > 0, "clients waiting on server 4 timed out: {f}");
    assert!(f["commits"].as_u64().unwrap() > 20, "{f}");
    assert!(f["checked_commits"].as_u64().unwrap() >= f["commits"].as_u64().unwrap(), "{f}");
    // Against the supervisor's ledger, which the kill did not touch: every commit acknowledged
    // to a client, the killed server's clients' too, is in the final state.
    assert!(v["acknowledged"].as_u64().unwrap() >= f["commits"].as_u64().unwrap(), "{v}");
    let killed = &v["hosts"].as_array().unwrap()[4];
    assert!(killed["ledger"]["installed"].as_object().is_some_and(|m| !m.is_empty()), "server 4 installed writes");
}

/// `pisadb cluster ARGS…` (`args` split at spaces) with a data directory that must not be
/// created: the run is refused before anything starts. Its error message.
fn refused(args: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_pisadb"))
        .args(["cluster", "--data-dir"])
        .arg(&data)
        .args(args.split_whitespace())
        .output()
        .expect("pisadb runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{args}: accepted: {}", String::from_utf8_lossy(&out.stdout));
    assert!(!data.exists(), "{args}: refused only after the rack was set up: {stderr}");
    stderr
}

#[test]
fn flags_a_system_cannot_honour_are_refused_by_name_with_the_systems_that_take_them() {
    let _one = one_cluster_at_a_time();
    let e = refused("--system gotthard --kill-switch 0.3 --kill-node 1@0.5 --mode lm-switch --nodes 7");
    assert!(
        e.contains("--kill-switch: gotthard cannot honour it; the systems that take it: p4db, netaccel, switchtx"),
        "{e}"
    );
    let e = refused("--system gotthard --mode lm-switch");
    assert!(e.contains("--mode: gotthard cannot honour it; the systems that take it: p4db"), "{e}");
    let e = refused("--system transkv --loss 0.1");
    assert!(e.contains("--loss: transkv cannot honour it; the systems that take it: p4db, gotthard, switchtx"), "{e}");
    let e = refused("--system netaccel --no-log");
    assert!(e.contains("--no-log: netaccel cannot honour it; the systems that take it: p4db"), "{e}");
    let e = refused("--system gotthard --tuple-gap-ns 5000");
    assert!(e.contains("--tuple-gap-ns: gotthard cannot honour it; the systems that take it: netaccel"), "{e}");
    let e = refused("--system p4db --set clients=3");
    assert!(e.contains("no setting `clients`; accepted here:") && e.contains("nodes"), "{e}");
    let e = refused("--preset paper");
    assert!(e.contains("--preset: p4db cannot honour it; the systems that take it: gotthard, netaccel"), "{e}");
}

#[test]
fn a_preset_in_real_mode_prints_what_it_chose_and_one_real_mode_cannot_hold_is_refused_naming_the_value() {
    let _one = one_cluster_at_a_time();
    // SwitchTx's paper preset sets the simulator's CPU charges, which a real rack spends for
    // real and has no setting for: refused before anything starts, naming the value.
    let e = refused("--system switchtx --preset paper");
    assert!(e.contains("--preset paper: a value it sets cannot hold in real mode: `--set costs."), "{e}");
    let e = refused("--system gotthard --preset nope");
    assert!(e.contains("no preset `nope`; its presets: pisadb, paper"), "{e}");
    // Gotthard's paper preset holds: the run says what it chose and runs it (its 8 clients, 25%
    // writes); --set still edits it.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pisadb"))
        .args(["cluster", "--system", "gotthard", "--preset", "paper", "--set", "near_us=500", "--set", "far_us=500"])
        .args(["--seconds", "0.5", "--data-dir"])
        .arg(dir.path().join("run"))
        .output()
        .expect("pisadb runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("preset `paper` of gotthard"), "{stdout}");
    assert!(stdout.contains("8 clients, 25% writes"), "{stdout}");
    assert!(
        stdout.contains("port delays 1000 µs (clients) and 1000 µs (store)"),
        "the --set edits the preset: {stdout}"
    );
}

#[test]
fn kills_outside_the_run_no_clients_and_racks_too_large_are_refused_before_anything_starts() {
    let _one = one_cluster_at_a_time();
    let e = refused("--kill-switch 99 --seconds 0.5");
    assert!(e.contains("--kill-switch 0@99: at 99 s, not within the run"), "{e}");
    let e = refused("--system transkv --seconds 1 --kill-node 3@1.5");
    assert!(e.contains("--kill-node 3@1.5"), "{e}");
    let e = refused("--system transkv --seconds 1 --kill-node 30@0.5");
    assert!(e.contains("the rack has 21 of them"), "{e}");
    let e = refused("--system gotthard --set clients=0");
    assert!(e.contains("--set clients=0: expected 1..=1024"), "{e}");
    let e = refused("--system gotthard --set clients=100000");
    assert!(e.contains("--set clients=100000: expected 1..=1024"), "{e}");
    let e = refused("--variant lm-switch --mode p4db");
    assert!(e.contains("--mode"), "{e}");
}

#[test]
fn p4db_takes_its_rack_by_set_and_its_old_flags_as_aliases_of_those_settings() {
    let _one = one_cluster_at_a_time();
    // By --set, and by the old flags (aliases of the same keys, and --mode of --variant).
    let dir = tempfile::tempdir().unwrap();
    let by_set = "--set nodes=2 --set workers=2 --set rows=2000 --set workload=ycsb-a --variant lm-switch";
    let v = cluster_json(dir.path(), &format!("{by_set} --seconds 1"));
    assert_eq!(v["nodes"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!((v["mode"].as_str(), v["workload"].as_str()), (Some("lm-switch"), Some("YcsbA")), "{v}");
    assert!(v["checks"].as_array().is_some_and(|c| c.iter().all(|c| c["ok"] == true)), "{v}");
    let dir = tempfile::tempdir().unwrap();
    let v = cluster_json(dir.path(), "--nodes 2 --workers=2 --rows 2000 --workload a --mode lm-switch --seconds 1");
    assert_eq!(v["nodes"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!((v["mode"].as_str(), v["workload"].as_str()), (Some("lm-switch"), Some("YcsbA")), "{v}");
    // A value out of range is refused naming the setting, whichever way it was given.
    let e = refused("--nodes 0");
    assert!(e.contains("--set nodes=0: expected 1..=64"), "{e}");
    let e = refused("--set cc=wait");
    assert!(e.contains("no-wait") && e.contains("wait-die"), "{e}");
}

#[test]
fn cluster_help_lists_the_shared_vocabulary_only() {
    let out = Command::new(env!("CARGO_BIN_EXE_pisadb")).args(["cluster", "--help"]).output().expect("pisadb runs");
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--system", "--variant", "--preset", "--set", "--seconds", "--loss", "--port-wire", "--kill-node"] {
        assert!(help.contains(flag), "{flag} missing: {help}");
    }
    for flag in ["--nodes", "--workers", "--mode", "--cc", "--no-verify", "--tuple-gap-ns", "--alias-of"] {
        assert!(!help.contains(flag), "{flag} listed: {help}");
    }
}
