"""Nexmark q0-q8: timely workers next to Spark on the same events, in the same run.

Per query: events/s per core for timely on 1 and 2 local worker threads (the workers
generate the events as they go: the generator's cost is counted) and for Spark
``local[2]``; the latency from an event's arrival to the result that includes it
(timely: an epoch of ``--batch`` events from its send to the probe passing it, at most
2 epochs in flight; Spark Structured Streaming: a micro-batch of one file of each kind,
``triggerExecution``); and the ratio of timely's events/s per core on 2 workers to
Feldera's published per-core figures (q0 6.97 M/s, q4 4.23 M/s, q7 3.14 M/s on 16
cores).  Spark runs q0-q3 as Structured Streaming (files read as a stream, ``noop``
sink) and q4-q8 as batch queries over all events (Structured Streaming does not chain
these stateful operators), so its latency there is the whole recompute.  The
generator's own rate is printed first.

    python jobs/benchmarks/bench_nexmark.py [--events N] [--queries q0,q1,...] [--batch N] [--no-spark]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from timely_spark.workloads import nexmark
from timely_spark.workloads.nexmark_queries import QUERIES
from timely_spark.workloads.nexmark_run import generator_rate, run_query
from timely_spark.workloads.nexmark_spark import STREAMING, run_spark

FELDERA_PER_CORE = {"q0": 6.97e6 / 16, "q4": 4.23e6 / 16, "q7": 3.14e6 / 16}   # events/s, 16 cores
SPARK_CORES = 2


def latency_text(seconds: list) -> str:
    if not seconds:
        return "-"
    ms = np.array(seconds) * 1000
    return f"{np.median(ms):.0f}/{np.percentile(ms, 95):.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--batch", type=int, default=100_000, help="events per epoch / per file")
    parser.add_argument("--rate", type=float, default=10_000.0, help="events per second of event time")
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()
    queries = args.queries.split(",")
    unknown = [q for q in queries if q not in QUERIES]
    if unknown:
        parser.error(f"unknown queries {unknown}; choose from {', '.join(QUERIES)}")
    print(f"generator: {generator_rate(min(args.events, 1_000_000)) / 1e6:.2f} M events/s on one thread")
    spark, directory = None, None
    if not args.no_spark:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        import timely_spark as ts

        spark = ts.spark.get_session("bench nexmark", master=f"local[{SPARK_CORES}]")
        directory = tempfile.mkdtemp(prefix="nexmark-")
        nexmark.write_parquet(directory, args.events, args.batch, rate=args.rate)
        warm = tempfile.mkdtemp(prefix="nexmark-warm-")
        nexmark.write_parquet(warm, 20_000, 10_000, rate=args.rate)
        for q in ("q0", "q4"):                                  # the JVM's first queries are slow
            run_spark(spark, q, warm, collect=False)
    print(f"{args.events:,} events, epochs/files of {args.batch:,}; events/s per core (M); "
          "latency median/p95 ms; machine loaded by other work")
    header = (f"{'query':5} {'timely 1w':>10} {'timely 2w':>10} {'spark':>8} {'2w/spark':>9} {'vs Feldera':>10} "
              f"{'lat 1w':>11} {'lat 2w':>11} {'lat spark':>11} {'rows':>9}")
    print(header)
    try:
        for q in queries:
            one = run_query(q, args.events, args.batch, workers=1, rate=args.rate, collect=False)
            two = run_query(q, args.events, args.batch, workers=2, rate=args.rate, collect=False)
            rate1, rate2 = args.events / one.seconds, args.events / two.seconds / 2
            spark_rate, spark_lat = float("nan"), "-"
            if spark is not None:
                _, seconds, micro = run_spark(spark, q, directory, collect=False)
                spark_rate = args.events / seconds / SPARK_CORES
                spark_lat = latency_text(micro) if q in STREAMING else f"{seconds * 1000:.0f} (all)"
            feldera = f"{rate2 / FELDERA_PER_CORE[q]:.3f}" if q in FELDERA_PER_CORE else "-"
            print(f"{q:5} {rate1 / 1e6:10.3f} {rate2 / 1e6:10.3f} {spark_rate / 1e6:8.3f} {rate2 / spark_rate:9.2f} "
                  f"{feldera:>10} {latency_text(list(one.latencies)):>11} {latency_text(list(two.latencies)):>11} "
                  f"{spark_lat:>11} {two.rows:9,}", flush=True)
    finally:
        if spark is not None:
            spark.stop()


if __name__ == "__main__":
    main()
