#!/usr/bin/env python3
"""Condense the P4DB prototype's published measurements into one small table.

The prototype (github.com/DataManagementLab/p4db) publishes every run behind the paper's figures
in `figures/data/*.csv`: one row per node and run. Its plotting code (`figures/utils.R`,
`p4db_read`) sums `total_commits / (avg_duration / 1e6)` over the nodes of a run and plots the
best of the runs (usually three). This script does the same and also keeps the mean and the
standard deviation over the runs, so that `pisadb reproduce p4db` can put the prototype's own
measurement beside each of our points (`systems/p4db/paper/prototype_results.csv`).

Usage: scripts/prototype_results.py <checkout or bare git mirror of DataManagementLab/p4db>
Writes the table to standard output.
"""
import csv
import io
import os
import statistics
import subprocess
import sys
from collections import defaultdict

# The configuration columns a point is identified by (the plotting code's GROUP_BY_COLS).
KEYS = [
    "workload", "num_nodes", "num_txn_workers", "cc_scheme", "use_switch", "lm_on_switch",
    "switch_no_conflict", "ycsb_opti_test", "ycsb_write_prob", "ycsb_remote_prob",
    "ycsb_hot_prob", "ycsb_hot_size", "smallbank_hot_size", "smallbank_remote_prob",
    "tpcc_num_warehouses", "new_order_remote_prob", "switch_entries",
]
# The experiments behind the paper's throughput figures.
FILES = [
    "exp_a", "exp_b", "exp_c", "exp_d", "exp_e", "exp_f", "exp_g", "exp_h", "exp_i", "exp_j",
    "exp_k", "exp_l", "exp_ycsb_skew", "exp_ycsb_optis_slow", "exp_ycsb_optis_fast",
]


def read(repo, name):
    path = f"figures/data/{name}.csv"
    if os.path.isdir(os.path.join(repo, "figures")):
        with open(os.path.join(repo, path)) as f:
            return f.read()
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True, capture_output=True,
                          text=True).stdout


def main():
    repo = sys.argv[1]
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["experiment"] + KEYS + ["fast_recirculation", "runs", "commits_per_s_max", "commits_per_s_mean", "commits_per_s_sd",
                                          "abort_rate"])
    for name in FILES:
        rows = list(csv.DictReader(io.StringIO(read(repo, name))))
        runs = defaultdict(lambda: defaultdict(lambda: [0.0, 0, 0]))
        for r in rows:
            key = tuple(r.get(k, "") for k in KEYS)
            run = runs[key][r["run"]]
            run[0] += float(r["total_commits"]) / (float(r["avg_duration"]) / 1e6)
            run[1] += int(r["total_commits"])
            run[2] += int(r["total_aborts"])
        for key, by_run in runs.items():
            tps = [v[0] for v in by_run.values()]
            commits = sum(v[1] for v in by_run.values())
            aborts = sum(v[2] for v in by_run.values())
            sd = statistics.stdev(tps) if len(tps) > 1 else 0.0
            # Only the Fig. 15c ablation says which recirculation build ran (its file name).
            fast = {"exp_ycsb_optis_slow": "false", "exp_ycsb_optis_fast": "true"}.get(name, "")
            out.writerow([name] + list(key) + [fast, len(tps), f"{max(tps):.0f}", f"{statistics.mean(tps):.0f}",
                                               f"{sd:.0f}", f"{aborts / max(1, commits + aborts):.4f}"])


if __name__ == "__main__":
    main()
