"""Event-time windows: ``group_by_window`` next to pyarrow and Spark.

``--rows`` rows (default 10 M) over one hour of event time (timestamps in
microseconds, in random order), ``--keys`` keys (default 100 k), a float value;
1-minute tumbling and 5-minute windows sliding by 1 minute, count + mean per window
and key:

(a) throughput on 1 worker (the whole table at one logical time, windows closed when
    the input ends) next to pyarrow ``group_by`` on the whole table with a computed
    window column (for sliding windows, the table repeated once per window a row is in);
(b) on Spark ``local[2]``: ``ts.spark.transform`` next to Spark's batch
    ``groupBy(window(...))`` on the same cached DataFrame (both written to the ``noop``
    sink);
(c) streaming, 1 worker: epochs of 1 s (logical time = Unix second, ``epoch=1 s``,
    ``allowed_lateness=5 s``, each epoch's rows up to 5 s late in event time, the
    table's rate: rows/3600 per epoch), ``--stream-minutes`` of event time fed as fast
    as the worker keeps up; the delay from the ``advance_to`` that completes a window
    to its result leaving the operator, median over the windows.

    python jobs/benchmarks/bench_windows.py [--rows N] [--keys N] [--stream-minutes N] [--no-spark]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import timely_spark as ts

MINUTE_US = 60_000_000
HOUR_US = 60 * MINUTE_US
START_US = 1_700_000_000 * 1_000_000 // HOUR_US * HOUR_US      # an hour's start, in microseconds
AGGS = [("v", "count"), ("v", "mean")]
SHAPES = {"tumbling 1 min": dict(every=timedelta(minutes=1)),
          "sliding 5 min / 1 min": dict(every=timedelta(minutes=1), period=timedelta(minutes=5))}


#: Seconds a transform run may take before it fails with RunTimeout (a run that stalls never hangs the bench).
RUN_BOUND = 1800.0


def make_table(rows: int, keys: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts_us = START_US + rng.integers(0, HOUR_US, rows)
    return pa.table({"ts": pa.array(ts_us, pa.timestamp("us", "UTC")),
                     "key": pa.array(rng.integers(0, keys, rows)),
                     "v": pa.array(rng.random(rows))})


def pyarrow_windows(table: pa.Table, every_us: int, period_us: int) -> pa.Table:
    """The reference: a computed window column, one pyarrow group_by."""
    x = pc.cast(table["ts"], pa.int64())
    first = pc.multiply(pc.divide(x, every_us), every_us)        # floor: event times are positive
    parts = []
    for j in range(period_us // every_us):
        start = pc.subtract(first, j * every_us)
        parts.append(table.select(["key", "v"]).append_column("window_start", start))
    return pa.concat_tables(parts).group_by(["window_start", "key"], use_threads=False).aggregate(AGGS)


def timely_windows(table: pa.Table, shape: dict) -> int:
    """Rows of windows out of group_by_window on one worker."""
    def work(worker):
        out = [0]
        worker.dataflow(lambda s: s.to_stream(table).group_by_window("ts", keys="key", **shape).aggregate(AGGS)
                        .inspect(lambda rb: out.__setitem__(0, out[0] + rb.num_rows)))
        while worker.step():
            pass
        return out[0]

    return ts.execute(work)[0]


def timed(fn, repeats: int = 1) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def throughput(table: pa.Table) -> None:
    print(f"(a) 1 worker, {table.num_rows:,} rows: M rows/s (windows out)")
    for label, shape in SHAPES.items():
        every = int(shape["every"] / timedelta(microseconds=1))
        period = int(shape.get("period", shape["every"]) / timedelta(microseconds=1))
        t_pa, ref = timed(lambda: pyarrow_windows(table, every, period))
        t_ts, n = timed(lambda: timely_windows(table, shape))
        assert n == ref.num_rows, (n, ref.num_rows)
        print(f"  {label:22s} group_by_window {table.num_rows / t_ts / 1e6:6.2f}   pyarrow group_by "
              f"{table.num_rows / t_pa / 1e6:6.2f}   ratio {t_pa / t_ts:4.2f}x   ({n:,} windows x keys)")


def spark_figures(table: pa.Table) -> None:
    from pyspark.sql import functions as F

    spark = ts.spark.get_session("bench windows", master="local[2]")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    df = spark.createDataFrame(table.to_pandas()).repartition(2).cache()
    df.count()
    print(f"(b) Spark local[2], {table.num_rows:,} rows cached in 2 partitions: seconds (best of 2)")
    for label, shape in SHAPES.items():
        minutes = int(shape.get("period", shape["every"]).total_seconds() // 60)
        spark_window = F.window("ts", f"{minutes} minutes", "1 minute")

        def theirs():
            df.groupBy(spark_window, "key").agg(F.count("v"), F.avg("v")) \
                .write.format("noop").mode("overwrite").save()

        def ours(shape=shape):
            ts.spark.transform(df, lambda scope, s: s.group_by_window("ts", keys="key", **shape).aggregate(AGGS),
                               "window_start timestamp, window_end timestamp, key long, v_count long, v_mean double",
                               timeout=RUN_BOUND) \
                .write.format("noop").mode("overwrite").save()

        t_spark, _ = timed(theirs, 2)
        t_ours, _ = timed(ours, 2)
        print(f"  {label:22s} transform {t_ours:6.2f}   Spark groupBy(window) {t_spark:6.2f}   "
              f"ratio {t_spark / t_ours:4.2f}x")
    spark.stop()


def streaming_delay(keys: int, rows_per_second: int, minutes: int) -> None:
    print(f"(c) streaming, 1 worker, epochs of 1 s, {rows_per_second:,} rows per epoch, {minutes} minutes of "
          f"event time: delay from the completing advance_to to the window's result, ms")
    for label, shape in SHAPES.items():
        def work(worker, shape=shape):
            rng = np.random.default_rng(1)
            emitted: dict = {}

            def seen(rb):
                now = time.perf_counter()
                for start in pc.unique(rb["window_start"]).cast(pa.int64()).to_pylist():
                    emitted.setdefault(start, now)

            def build(s):
                inp, rows = s.new_input()
                rows.group_by_window("ts", keys="key", epoch=timedelta(seconds=1),
                                     allowed_lateness=timedelta(seconds=5), **shape).aggregate(AGGS).inspect(seen)
                return inp, rows.probe()

            first = START_US // 1_000_000
            inp, probe = worker.dataflow(build, time=first)
            advanced_at = {}
            for second in range(first, first + 60 * minutes):
                x = second * 1_000_000 + rng.integers(-5_000_000, 1_000_000, rows_per_second)
                inp.send_batch(pa.table({"ts": pa.array(x, pa.timestamp("us", "UTC")),
                                         "key": pa.array(rng.integers(0, keys, rows_per_second)),
                                         "v": pa.array(rng.random(rows_per_second))}))
                inp.advance_to(second + 1)
                advanced_at[second + 1] = time.perf_counter()
                worker.step_while(lambda: probe.less_than(second + 1))
            inp.close()
            while worker.step():
                pass
            period = int(shape.get("period", shape["every"]).total_seconds()) * 1_000_000
            delays = []
            for start, at in emitted.items():
                closing = (start + period) // 1_000_000 + 5      # the epoch whose start - 5 s reaches the end
                if closing in advanced_at:
                    delays.append((at - advanced_at[closing]) * 1000)
            return delays

        delays = ts.execute(work)[0]
        print(f"  {label:22s} median {statistics.median(delays):7.1f}   max {max(delays):7.1f}   "
              f"({len(delays)} windows)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--stream-minutes", type=int, default=20)
    parser.add_argument("--no-spark", action="store_true", help="skip (b)")
    args = parser.parse_args()
    table = make_table(args.rows, args.keys)
    throughput(table)
    if not args.no_spark:
        spark_figures(table)
    streaming_delay(args.keys, max(1, args.rows // 3600), args.stream_minutes)


if __name__ == "__main__":
    main()
