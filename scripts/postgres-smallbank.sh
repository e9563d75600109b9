#!/usr/bin/env bash
# Durable real mode against what users run instead: hot SmallBank on PostgreSQL (pgbench) and on
# `pisadb cluster` (P4DB's rack as processes on loopback), interleaved, printed side by side.
# Issue 29, item 6. Never run in CI (it installs a database server and runs for minutes).
#
# The workload, the same on both sides (crates/workload/src/smallbank.rs):
#   - 100,000 accounts (ROWS), savings and checking balances drawn from 10,000..50,000;
#   - the six-transaction mix: Amalgamate 15, Balance 15, DepositChecking 15, SendPayment 25,
#     TransactSavings 15, WriteCheck 15 (SendPayment pays only what the payer has, WriteCheck
#     charges a penalty of 1 when the balances do not cover the cheque, as ours);
#   - 15 hot accounts per node over 4 nodes (60 hot accounts), 90% of transactions on them;
#     pisadb's default rack also makes 20% of two-account transactions distributed (meaningless
#     for one PostgreSQL server, which keeps every account).
#
# PostgreSQL side: PostgreSQL from Debian (15 on bookworm), loopback only, SERIALIZABLE
# (`default_transaction_isolation`), pgbench with one custom script per transaction type,
# weighted by the mix, CLIENTS clients on 2 pgbench threads, `--max-tries` so serialization
# failures are retried as pisadb's workers retry aborts; latency per transaction from pgbench's
# log (p50, p99 computed here). Durable: `synchronous_commit = on` (one WAL flush per commit,
# grouped by PostgreSQL's own group commit); not durable: `synchronous_commit = off`.
#
# pisadb side: `pisadb cluster --system p4db` (4 nodes x 4 workers, SmallBank, the rack's
# defaults) with its write-ahead logs (durable) and with `--no-log`; committed transactions per
# second and the nodes' p50 (mean) and p99 (worst node) from its `--json`.
#
# Each of PAIRS rounds runs the four configurations one after another (PostgreSQL durable, pisadb
# durable, PostgreSQL not durable, pisadb not durable), so a slow spell of the machine falls on
# both sides; the table shows every round and the medians.
#
# Usage: scripts/postgres-smallbank.sh [OUT]
#   OUT (default results/postgres-smallbank.txt) gets the table; progress goes to stderr.
#   Environment: PISADB (default target/release/pisadb, built if absent), SECONDS_EACH (10),
#   PAIRS (5), CLIENTS (16), ROWS (100000), PISADB_ARGS (extra `pisadb cluster` flags).
#   Run as root (it installs PostgreSQL and runs psql as the postgres user).
set -euo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$HERE/results/postgres-smallbank.txt}
PISADB=${PISADB:-$HERE/target/release/pisadb}
SECONDS_EACH=${SECONDS_EACH:-10}
PAIRS=${PAIRS:-5}
CLIENTS=${CLIENTS:-16}
ROWS=${ROWS:-100000}
PISADB_ARGS=${PISADB_ARGS:-}
HOT=60
DB=pisadb_smallbank
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"

[ -x "$PISADB" ] || (cd "$HERE" && cargo build --release --bin pisadb)
if ! command -v pg_lsclusters >/dev/null; then
    apt-get install -y postgresql
fi
version=$(pg_lsclusters -h | awk '$2 == "main" { print $1; exit }')
[ -n "$version" ] || { echo "no PostgreSQL cluster named main (pg_lsclusters)" >&2; exit 1; }
pg_ctlcluster "$version" main start 2>/dev/null || true
PGBENCH=/usr/lib/postgresql/$version/bin/pgbench
psql_() { runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 "$@"; }
psql_ -d postgres -c "ALTER SYSTEM SET max_connections = 100" -c "ALTER SYSTEM SET shared_buffers = '512MB'" >/dev/null
pg_ctlcluster "$version" main restart
psql_ -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1 ||
    psql_ -d postgres -c "CREATE DATABASE $DB"

echo "loading $ROWS accounts" >&2
psql_ -d "$DB" <<SQL
SELECT setseed(0.29);
DROP TABLE IF EXISTS savings, checking;
CREATE TABLE savings  (custid int PRIMARY KEY, bal bigint NOT NULL);
CREATE TABLE checking (custid int PRIMARY KEY, bal bigint NOT NULL);
INSERT INTO savings  SELECT i, 10000 + floor(random() * 40001)::bigint FROM generate_series(1, $ROWS) i;
INSERT INTO checking SELECT i, 10000 + floor(random() * 40001)::bigint FROM generate_series(1, $ROWS) i;
VACUUM ANALYZE savings, checking;
SQL

# The accounts of one transaction: both hot (1..HOT) with probability 90%, else any; b != a.
pick='\set hot random(1, 100)
\if :hot <= 90
\set a random(1, '$HOT')
\set b random(1, '$((HOT - 1))')
\else
\set a random(1, '$ROWS')
\set b random(1, '$((ROWS - 1))')
\endif
\if :b >= :a
\set b :b + 1
\endif
\set v random(1, 100)'
cat >"$WORK/balance.sql" <<SQL
$pick
BEGIN;
SELECT bal FROM savings WHERE custid = :a;
SELECT bal FROM checking WHERE custid = :a;
END;
SQL
cat >"$WORK/deposit.sql" <<SQL
$pick
UPDATE checking SET bal = bal + :v WHERE custid = :a;
SQL
cat >"$WORK/transact.sql" <<SQL
$pick
\set sign random(0, 1)
UPDATE savings SET bal = bal + (2 * :sign - 1) * :v WHERE custid = :a AND bal + (2 * :sign - 1) * :v >= 0;
SQL
cat >"$WORK/amalgamate.sql" <<SQL
$pick
BEGIN;
SELECT s.bal + c.bal AS moved FROM savings s JOIN checking c USING (custid) WHERE custid = :a \gset
UPDATE savings SET bal = 0 WHERE custid = :a;
UPDATE checking SET bal = 0 WHERE custid = :a;
UPDATE checking SET bal = bal + :moved WHERE custid = :b;
END;
SQL
cat >"$WORK/writecheck.sql" <<SQL
$pick
BEGIN;
SELECT s.bal + c.bal AS total FROM savings s JOIN checking c USING (custid) WHERE custid = :a \gset
UPDATE checking SET bal = bal - :v - CASE WHEN :total < :v THEN 1 ELSE 0 END WHERE custid = :a;
END;
SQL
cat >"$WORK/sendpayment.sql" <<SQL
$pick
WITH paid AS (UPDATE checking SET bal = bal - :v WHERE custid = :a AND bal >= :v RETURNING :v AS v)
UPDATE checking SET bal = bal + (SELECT coalesce(sum(v), 0) FROM paid) WHERE custid = :b;
SQL

# One pgbench run: prints "txn/s p50_ms p99_ms".
pg_run() {
    local sync=$1 logdir="$WORK/log-$RANDOM"
    mkdir -m 777 "$logdir"
    (cd "$logdir" && PGOPTIONS="-c default_transaction_isolation=serializable -c synchronous_commit=$sync" \
        runuser -u postgres -- "$PGBENCH" -n -c "$CLIENTS" -j 2 -T "$SECONDS_EACH" --max-tries=100 -l \
        -f "$WORK/amalgamate.sql@15" -f "$WORK/balance.sql@15" -f "$WORK/deposit.sql@15" \
        -f "$WORK/sendpayment.sql@25" -f "$WORK/transact.sql@15" -f "$WORK/writecheck.sql@15" "$DB" \
        >"$logdir/out.txt" 2>&1) || { cat "$logdir/out.txt" >&2; exit 1; }
    python3 - "$logdir" <<'PY'
import glob, re, sys
d = sys.argv[1]
out = open(f"{d}/out.txt").read()
tps = float(re.search(r"tps = ([0-9.]+)", out).group(1))
lat = sorted(int(line.split()[2]) for f in glob.glob(f"{d}/pgbench_log.*") for line in open(f) if line.strip())
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] / 1000
print(f"{tps:.0f} {q(0.50):.2f} {q(0.99):.2f}")
PY
}

# One pisadb cluster run: prints "txn/s p50_ms p99_ms".
pisadb_run() {
    # shellcheck disable=SC2086 # PISADB_ARGS is a list of flags.
    "$PISADB" cluster --system p4db --seconds "$SECONDS_EACH" --json "$@" $PISADB_ARGS 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
def find(v, key):
    if isinstance(v, dict):
        if key in v: yield v[key]
        for x in v.values(): yield from find(x, key)
    elif isinstance(v, list):
        for x in v: yield from find(x, key)
rate = next(find(r, "committed_per_s"))
p50 = list(find(r, "latency_us_p50")); p99 = list(find(r, "latency_us_p99"))
print(f"{rate:.0f} {sum(p50) / len(p50) / 1000:.2f} {max(p99) / 1000:.2f}")'
}

mkdir -p "$(dirname "$OUT")"
{
    echo "# hot SmallBank, PostgreSQL $version (pgbench, SERIALIZABLE, $CLIENTS clients) vs pisadb cluster (P4DB, 4x4), $SECONDS_EACH s each"
    echo "# $(date -u +%FT%TZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), pisadb $(git -C "$HERE" rev-parse --short HEAD)"
    printf '%-6s %-16s %9s %9s %9s\n' round config "txn/s" "p50 ms" "p99 ms"
} | tee "$OUT"
for round in $(seq 1 "$PAIRS"); do
    for config in pg-durable pisadb-durable pg-no-durability pisadb-no-log; do
        echo "round $round: $config" >&2
        case $config in
            pg-durable) row=$(pg_run on) ;;
            pisadb-durable) row=$(pisadb_run) ;;
            pg-no-durability) row=$(pg_run off) ;;
            pisadb-no-log) row=$(pisadb_run --no-log) ;;
        esac
        # shellcheck disable=SC2086 # row is three numbers.
        printf '%-6s %-16s %9s %9s %9s\n' "$round" "$config" $row | tee -a "$OUT"
    done
done
python3 - "$OUT" <<'PY' | tee -a "$OUT"
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l[:1].isdigit()]
by = {}
for r in rows:
    by.setdefault(r[1], []).append([float(x) for x in r[2:]])
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in by.items()}
print("\nmedians        txn/s    p50 ms    p99 ms")
for k, (t, p50, p99) in med.items():
    print(f"{k:<16} {t:8.0f} {p50:9.2f} {p99:9.2f}")
for ours, theirs in [("pisadb-durable", "pg-durable"), ("pisadb-no-log", "pg-no-durability")]:
    if ours in med and theirs in med:
        print(f"{ours} / {theirs}: {med[ours][0] / med[theirs][0]:.2f}x throughput")
PY
