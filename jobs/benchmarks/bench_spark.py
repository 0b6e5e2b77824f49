"""Benchmark of timely_spark's Spark bridge, next to plain Spark in the same session.

1. Start-up: ``ts.spark.run`` of a trivial function on 2 barrier workers vs the same
   barrier stage without timely (median of N warm runs each): the difference is what
   a timely run costs before its first record moves (target: within 0.3 s).
2. Throughput: ROWS rows of (long, double) passed through unchanged by
   ``ts.spark.transform`` vs plain ``mapInArrow`` with an identity function, both
   written to Spark's ``noop`` sink (median of N runs): rows/s and the ratio
   (target: >= 0.8).

    spark-submit jobs/benchmarks/bench_spark.py [--rows N] [--runs N]
    python jobs/benchmarks/bench_spark.py --rows 10000000
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows through the bridge (default 10,000,000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each, after a warm-up (default 5)")
    args = parser.parse_args(argv)
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
