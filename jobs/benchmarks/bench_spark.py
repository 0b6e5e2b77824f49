"""Benchmark of timely_spark's Spark bridge, next to plain Spark in the same session.

1. Start-up: ``ts.spark.run`` of a trivial function on 2 barrier workers vs the same
   barrier stage without timely (median of N warm runs each): the difference is what
   a timely run costs before its first record moves (target: within 0.3 s).
2. Throughput: ROWS rows of (long, double) passed through unchanged by
   ``ts.spark.transform`` vs plain ``mapInArrow`` with an identity function, both
   written to Spark's ``noop`` sink (median of N runs): rows/s and the ratio
   (target: >= 0.8).

3. With ``--connect``: the same application served over Spark Connect too (its plugin,
   on a free loopback port), and side by side a trivial ``ts.spark.run`` and
   ``ts.graph.connected_components`` of EDGES random edges, over Connect and over the
   classic session (targets: a trivial run within 0.5 s over Connect, components over
   Connect within 1.5x of classic).

    spark-submit jobs/benchmarks/bench_spark.py [--rows N] [--runs N]
    python jobs/benchmarks/bench_spark.py --rows 10000000
    python jobs/benchmarks/bench_spark.py --connect [--edges 2000000]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from typing import Callable

import timely_spark as ts


def median_seconds(a: Callable[[], object], b: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median seconds of ``a`` and of ``b``, run alternately (so both see the same load)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for fn, spent in zip((a, b), times):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def connect_side_by_side(edges: int, runs: int) -> None:
    """A trivial run and components of ``edges`` random edges, over Connect and classic."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spark = ts.spark.get_session("bench_spark --connect", extra={
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port)})
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    remote = ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()

    def on(session: object, fn: Callable[[object], object]) -> Callable[[], object]:
        def call() -> object:      # PySpark's functions pick classic or Connect by this variable
            if ts.spark.is_connect(session):
                os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
            else:
                os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
            return fn(session)
        return call

    def trivial(session: object) -> object:
        return ts.spark.run(session, lambda worker: worker.index, workers=2)

    def components(session: object) -> object:
        frame = ts.graph.random_edges(session, vertices=edges // 2, edges=edges, seed=1)
        return ts.graph.connected_components(frame, workers=2).write.format("noop").mode("overwrite").save()

    for name, fn, target in (("trivial ts.spark.run", trivial, "Connect <= 0.5 s"),
                             (f"components, {edges:,} edges", components, "ratio <= 1.5")):
        on(remote, fn)(), on(spark, fn)()          # warm-up
        connect_s, classic_s = median_seconds(on(remote, fn), on(spark, fn), runs)
        print(f"{name:28s} Connect {connect_s:7.2f} s   classic {classic_s:7.2f} s   "
              f"ratio {connect_s / classic_s:4.2f} ({target})")
    remote.stop()
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows through the bridge (default 10,000,000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each, after a warm-up (default 5)")
    parser.add_argument("--connect", action="store_true",
                        help="compare Spark Connect with the classic session instead (a trivial run, components)")
    parser.add_argument("--edges", type=int, default=2_000_000, help="edges of --connect's components (2,000,000)")
    args = parser.parse_args(argv)
    if args.connect:
        connect_side_by_side(args.edges, args.runs)
        return
    spark = ts.spark.get_session("bench_spark")
    sc = spark.sparkContext

    def bare() -> object:
        return sc.parallelize(range(2), 2).barrier().mapPartitions(lambda it: [1]).collect()

    def timely() -> object:
        return ts.spark.run(spark, lambda worker: worker.index, workers=2)

    for warm in (bare, timely, bare, timely):
        warm()
    bare_s, timely_s = median_seconds(bare, timely, args.runs)
    print(f"start-up    bare barrier stage {bare_s * 1000:8.0f} ms   ts.spark.run {timely_s * 1000:8.0f} ms   "
          f"difference {(timely_s - bare_s) * 1000:6.0f} ms (target <= 300)")

    df = spark.range(args.rows, numPartitions=2).selectExpr("id", "cast(id as double) * 0.5 as x")

    def identity(batches):
        yield from batches

    def plain() -> object:
        return df.mapInArrow(identity, df.schema).write.format("noop").mode("overwrite").save()

    def bridged() -> object:
        return ts.spark.transform(df, lambda scope, s: s, df.schema).write.format("noop").mode("overwrite").save()

    for warm in (plain, bridged):
        warm()
    plain_s, bridged_s = median_seconds(plain, bridged, args.runs)
    print(f"throughput  mapInArrow {args.rows / plain_s / 1e6:6.2f} M rows/s   ts.spark.transform "
          f"{args.rows / bridged_s / 1e6:6.2f} M rows/s   ratio {plain_s / bridged_s:4.2f} (target >= 0.8)")
    spark.stop()


if __name__ == "__main__":
    main()
