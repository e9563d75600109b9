#!/usr/bin/env python3
"""Anchor outside the project: TPC-H Q20 at SF 1 on DuckDB, beside our executor on this machine.

Not part of CI. Needs `pip install duckdb tpchgen-cli` (tpchgen-cli is the same generator as
the `tpchgen` crate, so the data are identical). Usage:

    python3 systems/netaccel/scripts/duckdb_anchor.py [--sf 1] [--data /tmp/tpch-sf1]
    cargo run --release -p pisadb-olap --example q20_wall -- 1

It times (median of 5, data loaded into DuckDB tables first) the whole of Q20 with the
validation parameters, and pattern 1 over pre-filtered part_FP and lineitem_FP tables as the
paper's experiment has them, with 1 thread and with every core.
"""

import argparse
import os
import statistics
import subprocess
import time

import duckdb

Q20 = """
select s_name, s_address from supplier, nation
where s_suppkey in (
    select ps_suppkey from partsupp
    where ps_partkey in (select p_partkey from part where p_name like 'forest%')
      and ps_availqty > (
        select 0.5 * sum(l_quantity) from lineitem
        where l_partkey = ps_partkey and l_suppkey = ps_suppkey
          and l_shipdate >= date '1994-01-01' and l_shipdate < date '1994-01-01' + interval '1' year))
  and s_nationkey = n_nationkey and n_name = 'CANADA'
order by s_name
"""

PATTERN1 = """
select l_partkey, l_suppkey, sum(l_quantity) from part_fp join lineitem_fp on p_partkey = l_partkey
group by l_partkey, l_suppkey
"""


def median_ms(con, sql, runs=5):
    times = []
    rows = None
    for _ in range(runs):
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), len(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", default="1")
    ap.add_argument("--data", default="/tmp/tpch-sf1")
    args = ap.parse_args()
    tables = ["part", "partsupp", "lineitem", "supplier", "nation"]
    if not all(os.path.exists(os.path.join(args.data, f"{t}.parquet")) for t in tables):
        subprocess.run(["tpchgen-cli", "parquet", "-s", args.sf, "--tables", ",".join(tables), "--output-dir", args.data], check=True)
    con = duckdb.connect()
    for t in tables:
        con.execute(f"create table {t} as select * from read_parquet('{os.path.join(args.data, t)}.parquet')")
    con.execute("create table part_fp as select p_partkey from part where p_name like 'forest%'")
    con.execute(
        "create table lineitem_fp as select l_partkey, l_suppkey, l_quantity from lineitem "
        "where l_shipdate >= date '1994-01-01' and l_shipdate < date '1995-01-01'"
    )
    print(f"duckdb {duckdb.__version__}, SF {args.sf}, {os.cpu_count()} cores")
    for threads in [1, os.cpu_count()]:
        con.execute(f"set threads = {threads}")
        q, rows = median_ms(con, Q20)
        p, groups = median_ms(con, PATTERN1)
        print(f"threads {threads}: Q20 {q:.2f} ms ({rows} rows); pattern 1 {p:.2f} ms ({groups} groups)")


if __name__ == "__main__":
    main()
