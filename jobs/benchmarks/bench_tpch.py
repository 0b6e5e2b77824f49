"""TPC-H views kept current under refresh: timely next to Spark and DuckDB recomputing.

Tables from ``tpchgen-cli`` at ``--sf`` as Parquet; ``--refreshes`` refreshes, each RF1
(new orders with their lineitems) and RF2 (deleted orders with theirs), 0.1% of the
orders each, as changelogs.  Per query (Q1, Q3, Q5, Q6, Q10, Q12, Q14): timely's first
load and median seconds per refresh on ``--workers`` local threads, the rows the view
emitted per refresh (median); side by side, in the same run, Spark ``local[2]`` running
the query's SQL from scratch on the refreshed tables (base Parquet union the inserted
rows, minus the deleted orders; median over the first ``--spark-refreshes``) and DuckDB
doing the same (median over every refresh).  Memory: the process's peak RSS after each
query's view (the workers are threads of one process), divided by the workers.

    python jobs/benchmarks/bench_tpch.py [--sf 1] [--refreshes 20] [--workers 2] [--queries q1,q3,...]
                                         [--spark-refreshes 3] [--no-spark]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timely_spark.workloads import tpch
from timely_spark.workloads.tpch_run import run_view
from timely_spark.workloads.tpch_sql import SQL, duckdb_answer, refreshed


def spark_recompute(spark, directory: str, refreshes: list, upto: int, query: str) -> float:
    """Seconds for Spark to answer ``query`` on the tables after ``upto`` refreshes."""
    import pyarrow as pa

    for name, columns in tpch.COLUMNS.items():
        frame = spark.read.parquet(f"{directory}/{name}.parquet").select(*columns)
        if name in tpch.DYNAMIC and upto:
            key = columns[0]
            log = pa.concat_tables([r[name] for r in refreshes[:upto]]).to_pandas()
            added = spark.createDataFrame(log[log["diff"] == 1].drop(columns="diff"))
            gone = spark.createDataFrame(log[log["diff"] == -1][[key]])
            frame = frame.unionByName(added, allowMissingColumns=False).join(gone, key, "left_anti")
        frame.createOrReplaceTempView(name)
    start = time.perf_counter()
    spark.sql(SQL[query]).collect()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--refreshes", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--queries", default=",".join(tpch.TPCH_QUERIES))
    parser.add_argument("--spark-refreshes", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="tpch-")
    cli = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    subprocess.run([cli, "parquet", "-s", str(args.sf), "--output-dir", directory, "-q"], check=True)
    tables = tpch.read_tables(directory)
    refreshes = tpch.refreshes(tables, args.refreshes)
    spark = None
    if not args.no_spark:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        import timely_spark as ts

        spark = ts.spark.get_session("bench tpch", master="local[2]")
    print(f"TPC-H SF {args.sf}: {len(tables['lineitem']):,} lineitems, {len(tables['orders']):,} orders; "
          f"{args.refreshes} refreshes of {refreshes[0]['orders'].num_rows:,} order changes "
          f"({refreshes[0]['lineitem'].num_rows:,} lineitem changes); timely on {args.workers} workers; "
          "seconds; machine loaded by other work")
    print(f"{'query':5} {'first load':>10} {'refresh':>9} {'rows/refresh':>12} {'spark':>8} {'duckdb':>8} "
          f"{'spark/ts':>9} {'duckdb/ts':>9} {'MB/worker':>9}")
    try:
        for q in args.queries.split(","):
            view = run_view(q, tables, refreshes, workers=args.workers)
            mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / args.workers
            per_refresh = statistics.median(view.seconds[1:])
            duck = []
            for r in range(1, args.refreshes + 1):
                current = refreshed(tables, refreshes, r)
                start = time.perf_counter()
                duckdb_answer(q, current)
                duck.append(time.perf_counter() - start)
            duck_s = statistics.median(duck)
            spark_s = float("nan")
            if spark is not None:
                spark_s = statistics.median(spark_recompute(spark, directory, refreshes, r, q)
                                            for r in range(1, min(args.spark_refreshes, args.refreshes) + 1))
            print(f"{q:5} {view.seconds[0]:10.2f} {per_refresh:9.4f} {statistics.median(view.rows[1:]):12,.0f} "
                  f"{spark_s:8.3f} {duck_s:8.4f} {spark_s / per_refresh:9.1f} {duck_s / per_refresh:9.2f} "
                  f"{mb:9.0f}", flush=True)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
