"""Barrier.wait() round times: 2 processes, and 2 Spark barrier tasks, next to a raw
Python socket round trip between two processes measured in the same run.

    python jobs/benchmarks/bench_sync.py [--rounds N] [--no-spark]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench_mesh import raw_ping_pong  # beside this script

import timely_spark as ts


def barrier_times(rounds: int):
    def work(worker):
        barrier = ts.sync.Barrier(worker)
        for _ in range(10):            # warm up
            barrier.wait(timeout=60)
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            barrier.wait(timeout=60)
            times.append(time.perf_counter() - start)
        return times

    return work


def summary(label: str, times: list[float]) -> str:
    times = sorted(times)
    median = statistics.median(times)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return f"{label:<28} median {median * 1e6:8.1f} us   p99 {p99 * 1e6:8.1f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10_000)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()

    results = ts.execute(barrier_times(args.rounds), processes=2)
    print(summary("Barrier, 2 processes", results[0]))
    if not args.no_spark:
        spark = ts.spark.get_session("bench sync", master="local[2]")
        results = ts.spark.run(spark, barrier_times(args.rounds), workers=2)
        print(summary("Barrier, 2 Spark tasks", results[0]))
        spark.stop()
    raw = raw_ping_pong(min(args.rounds, 5000))
    print(f"{'raw Python socket round trip':<28} mean   {raw * 1e6:8.1f} us   "
          f"(target: Barrier median <= 200 us; Naiad reported about 750 us on 64 machines)")


if __name__ == "__main__":
    main()
