#!/usr/bin/env bash
# A row-at-a-time executor's hash join, measured on this machine: the cost class of the
# paper's baseline (seed 002 §4: Greenplum, whose segments run PostgreSQL's executor), for
# NetAccel's `paper` preset (CALIBRATION.md, "NetAccel"). Never run in CI.
#
# What it does, on loopback only:
#   1. installs PostgreSQL from Debian if absent (`apt-get install -y postgresql`; run as root)
#      and starts the `main` cluster (listen_addresses stays Debian's default, localhost);
#   2. loads a hash-join workload of pattern 1's shape at the paper's scale (SF 100):
#      `part_fp(p_partkey int4)` with BUILD_KEYS distinct keys drawn from 1..20,000,000 (SF 100's
#      p_partkey range; about 1% of part passes Q20's p_name filter: 212.7k at SF 100 by our
#      generator, "about 217k" in issue 30) and two probe tables `lineitem_fp_<n>(l_partkey int4,
#      l_suppkey int4, l_quantity numeric(15,2))` of PROBE_SMALL and PROBE_LARGE rows, partkeys
#      uniform over the same range (so about 1% of probe rows match, as in Q20) -- a segment at
#      SF 100 holds about 30 M lineitem_FP rows; the per-row cost is what we want, and the build
#      side, not the probe table, decides the hash table's size;
#   3. runs, single worker (`max_parallel_workers_per_gather = 0`, `jit = off`, `work_mem` large
#      enough for one batch, `shared_buffers = 1GB` so the tables stay in the buffer pool), each
#      query REPS times under `EXPLAIN (ANALYZE, TIMING OFF)` and keeps the median of the
#      backend's CPU time (user + system, from `log_executor_stats`' getrusage figures): the
#      machine is shared with other builds (load averages of 9-12 on 2 cores were seen), so
#      elapsed time measures the queue for a core, not the executor; elapsed is printed too:
#        scan      SELECT count(*) FROM lineitem_fp_<n>
#        join      SELECT count(*) FROM lineitem_fp_<n> JOIN part_fp ON l_partkey = p_partkey
#        pattern1  SELECT l_partkey, l_suppkey, sum(l_quantity) FROM ... JOIN ... GROUP BY 1, 2
#        aggscan   SELECT count(*) FROM joined_fp      (AGG_ROWS joined rows of SF 100's shape)
#        aggregate SELECT l_partkey, l_suppkey, sum(l_quantity) FROM joined_fp GROUP BY 1, 2
#      and once `EXPLAIN (ANALYZE, FORMAT JSON)` of `join` on the large table (per-node times);
#   4. prints per probe row, as slopes of CPU time between the two probe sizes (the build and fixed costs
#      cancel): scan, join (scan + build-free probe), probe alone (join - scan), pattern 1; and
#      from the per-node plan the Hash Join node's own time per probe row (inflated by
#      EXPLAIN ANALYZE's per-row clock reads, shown as a cross-check only).
#
# Usage: systems/netaccel/scripts/postgres-hash-join.sh [OUT]
#   OUT defaults to systems/netaccel/calibration/postgres-hash-join.txt.
#   Environment: BUILD_KEYS (217000), PROBE_SMALL (2000000), PROBE_LARGE (6000000), REPS (5),
#   AGG_ROWS (300000: a segment's joined rows at SF 100, about 1% of its 30 M lineitem_FP rows).
set -euo pipefail

BUILD_KEYS=${BUILD_KEYS:-217000}
PROBE_SMALL=${PROBE_SMALL:-2000000}
PROBE_LARGE=${PROBE_LARGE:-6000000}
REPS=${REPS:-5}
AGG_ROWS=${AGG_ROWS:-300000}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE/../calibration/postgres-hash-join.txt}
DB=netaccel_calibration

if ! command -v pg_lsclusters >/dev/null; then
    apt-get install -y postgresql
fi
version=$(pg_lsclusters -h | awk '$2 == "main" { print $1; exit }')
[ -n "$version" ] || { echo "no PostgreSQL cluster named main (pg_lsclusters)" >&2; exit 1; }
pg_ctlcluster "$version" main start 2>/dev/null || true
psql_() { runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 "$@"; }
if [ "$(psql_ -d postgres -tAc 'SHOW shared_buffers')" != "1GB" ]; then
    psql_ -d postgres -c "ALTER SYSTEM SET shared_buffers = '1GB'"
    pg_ctlcluster "$version" main restart
fi
psql_ -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1 ||
    psql_ -d postgres -c "CREATE DATABASE $DB"

SESSION="SET max_parallel_workers_per_gather = 0; SET jit = off; SET work_mem = '1GB';"
STATS="SET log_executor_stats = on; SET client_min_messages = log;"

echo "loading: $BUILD_KEYS build keys, probe tables of $PROBE_SMALL and $PROBE_LARGE rows" >&2
psql_ -d "$DB" <<SQL
SELECT setseed(0.30);
DROP TABLE IF EXISTS part_fp;
CREATE TABLE part_fp AS
  SELECT DISTINCT (1 + floor(random() * 20000000))::int4 AS p_partkey
  FROM generate_series(1, ($BUILD_KEYS * 1.01)::int) LIMIT $BUILD_KEYS;
DROP TABLE IF EXISTS lineitem_fp_$PROBE_SMALL, lineitem_fp_$PROBE_LARGE;
CREATE TABLE lineitem_fp_$PROBE_LARGE AS
  SELECT (1 + floor(random() * 20000000))::int4 AS l_partkey,
         (1 + floor(random() * 1000000))::int4 AS l_suppkey,
         (1 + floor(random() * 50))::numeric(15,2) AS l_quantity
  FROM generate_series(1, $PROBE_LARGE);
CREATE TABLE lineitem_fp_$PROBE_SMALL AS SELECT * FROM lineitem_fp_$PROBE_LARGE LIMIT $PROBE_SMALL;
-- The aggregation's input at SF 100's shape: AGG_ROWS joined rows, partkeys among part_fp's,
-- each with one of the four suppliers TPC-H gives a part (as dbgen's partsupp rule).
DROP TABLE IF EXISTS part_idx, joined_fp;
CREATE TABLE part_idx AS SELECT row_number() OVER () AS i, p_partkey FROM part_fp;
CREATE TABLE joined_fp AS
  WITH r AS (SELECT (1 + floor(random() * $BUILD_KEYS))::int8 AS i, floor(random() * 4)::int4 AS j,
                    (1 + floor(random() * 50))::numeric(15,2) AS q
             FROM generate_series(1, $AGG_ROWS))
  SELECT p.p_partkey AS l_partkey, ((p.p_partkey + r.j * 250000) % 1000000 + 1)::int4 AS l_suppkey,
         r.q AS l_quantity
  FROM r JOIN part_idx p USING (i);
VACUUM ANALYZE joined_fp;
VACUUM ANALYZE part_fp;
VACUUM ANALYZE lineitem_fp_$PROBE_SMALL;
VACUUM ANALYZE lineitem_fp_$PROBE_LARGE;
SQL

# Median CPU and elapsed time (ms) of REPS runs of query $1, after one warm-up run (which
# also brings the table into shared buffers): prints "cpu_ms elapsed_ms".
median_ms() {
    local q=$1 cpu=() wall=() stats
    psql_ -d "$DB" -c "$SESSION EXPLAIN (ANALYZE, TIMING OFF) $q" >/dev/null
    for _ in $(seq "$REPS"); do
        stats=$(psql_ -d "$DB" -c "$SESSION $STATS EXPLAIN (ANALYZE, TIMING OFF) $q" 2>&1 >/dev/null |
            awk '/s user, .* s system, .* s elapsed/ && !/total/ { print ($2 + $5) * 1000, $8 * 1000; exit }')
        cpu+=("${stats% *}")
        wall+=("${stats#* }")
    done
    local m=$(( (REPS + 1) / 2 ))
    echo "$(printf '%s\n' "${cpu[@]}" | sort -g | sed -n "${m}p") $(printf '%s\n' "${wall[@]}" | sort -g | sed -n "${m}p")"
}

declare -A ms
declare -A wall
for n in "$PROBE_SMALL" "$PROBE_LARGE"; do
    t=lineitem_fp_$n
    for q in scan join pattern1; do
        case $q in
            scan) sql="SELECT count(*) FROM $t" ;;
            join) sql="SELECT count(*) FROM $t JOIN part_fp ON l_partkey = p_partkey" ;;
            pattern1) sql="SELECT l_partkey, l_suppkey, sum(l_quantity) FROM $t JOIN part_fp ON l_partkey = p_partkey GROUP BY 1, 2" ;;
        esac
        read -r ms[$q,$n] wall[$q,$n] < <(median_ms "$sql")
    done
done
read -r ms[aggscan] wall[aggscan] < <(median_ms "SELECT count(*) FROM joined_fp")
read -r ms[aggregate] wall[aggregate] < <(median_ms "SELECT l_partkey, l_suppkey, sum(l_quantity) FROM joined_fp GROUP BY 1, 2")
groups=$(psql_ -d "$DB" -tA -c "SELECT count(*) FROM (SELECT DISTINCT l_partkey, l_suppkey FROM joined_fp) g")
plan=$(psql_ -d "$DB" -tA -c "$SESSION EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM lineitem_fp_$PROBE_LARGE JOIN part_fp ON l_partkey = p_partkey")
matched=$(psql_ -d "$DB" -tA -c "SELECT count(*) FROM lineitem_fp_$PROBE_LARGE JOIN part_fp ON l_partkey = p_partkey")

slope() { # ns per probe row between the two sizes, of ms[$1] minus ms[$2] (if given)
    awk -v a1="${ms[$1,$PROBE_LARGE]}" -v a0="${ms[$1,$PROBE_SMALL]}" \
        -v b1="${2:+${ms[$2,$PROBE_LARGE]}}" -v b0="${2:+${ms[$2,$PROBE_SMALL]}}" \
        -v n1="$PROBE_LARGE" -v n0="$PROBE_SMALL" \
        'BEGIN { printf "%.1f", ((a1 - a0) - (b1 - b0)) * 1e6 / (n1 - n0) }'
}

mkdir -p "$(dirname "$OUT")"
{
    echo "# PostgreSQL hash join per probe row (systems/netaccel/scripts/postgres-hash-join.sh)"
    echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "postgresql: $(psql_ -d "$DB" -tA -c 'SHOW server_version')"
    echo "machine: $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), $(nproc) cores, L2 $(lscpu | awk -F: '/L2 cache/ { gsub(/^ +/, "", $2); print $2 }'), L3 $(lscpu | awk -F: '/L3 cache/ { gsub(/^ +/, "", $2); print $2 }'), shared with other builds"
    echo "session: $SESSION"
    echo "build_keys: $BUILD_KEYS (part_fp, int4, drawn from 1..20000000)"
    echo "probe_rows: $PROBE_SMALL and $PROBE_LARGE (lineitem_fp, int4 int4 numeric(15,2)); matched in the large one: $matched"
    echo "shared_buffers: $(psql_ -d "$DB" -tAc 'SHOW shared_buffers'); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "reps: $REPS (median of the backend's CPU time, user + system, under EXPLAIN (ANALYZE, TIMING OFF), after one warm-up)"
    echo
    echo "| query | CPU ms at $PROBE_SMALL | CPU ms at $PROBE_LARGE | elapsed ms at $PROBE_SMALL | elapsed ms at $PROBE_LARGE |"
    echo "|---|---|---|---|---|"
    for q in scan join pattern1; do
        echo "| $q | ${ms[$q,$PROBE_SMALL]} | ${ms[$q,$PROBE_LARGE]} | ${wall[$q,$PROBE_SMALL]} | ${wall[$q,$PROBE_LARGE]} |"
    done
    echo
    echo "scan_ns_per_row: $(slope scan)"
    echo "join_ns_per_probe_row: $(slope join)   (seq scan + hash probe: the normal plan's per-row join cost)"
    echo "probe_ns_per_row: $(slope join scan)   (join minus scan: the hash probe alone)"
    echo "pattern1_ns_per_probe_row: $(slope pattern1)   (scan + probe + aggregation of the ~1% matched)"
    echo "aggregate_ns_per_joined_row: $(awk -v a="${ms[aggregate]}" -v s="${ms[aggscan]}" -v n="$AGG_ROWS" 'BEGIN { printf "%.1f", (a - s) * 1e6 / n }')   (HashAggregate of $AGG_ROWS joined rows into $groups groups, minus their scan: ${ms[aggregate]} - ${ms[aggscan]} CPU ms; elapsed ${wall[aggregate]} - ${wall[aggscan]} ms)"
    echo
    echo "per-node elapsed times of the join on $PROBE_LARGE rows (EXPLAIN ANALYZE with timing; elapsed, so"
    echo "inflated by the shared machine's queue and the per-row clock reads: a cross-check only):"
    python3 - "$plan" <<'PY'
import json, sys
plan = json.loads(sys.argv[1])[0]
def walk(node, depth=0):
    kids = node.get("Plans", [])
    own = node["Actual Total Time"] - sum(k["Actual Total Time"] for k in kids)
    rows = node["Actual Rows"]
    print(f"  {'  ' * depth}{node['Node Type']}: {node['Actual Total Time']:.1f} ms total, {own:.1f} ms own, {rows} rows")
    if node["Node Type"] == "Hash Join":
        probe = next(k for k in kids if k["Node Type"] != "Hash")
        print(f"  {'  ' * depth}  -> own time per probe row: {own * 1e6 / probe['Actual Rows']:.1f} ns")
    for k in kids:
        walk(k, depth + 1)
walk(plan["Plan"])
print(f"  execution time: {plan['Execution Time']:.1f} ms")
PY
} | tee "$OUT"
