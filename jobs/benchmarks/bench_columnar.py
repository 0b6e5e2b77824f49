"""Columnar streams next to their peers, in the same run.

1. One worker, N rows (``key = i % 1000``, ``value``) in batches of 100,000:
   ``group_by("key").aggregate([("value", "sum")])`` -- rows/s, next to
   ``pyarrow.Table.group_by`` on the whole table (the compiled floor) and next to the
   same aggregation written with per-record Python operators.
2. ``exchange_by("key")`` across 2 processes on loopback: rows/s per worker.
3. With ``--spark``, in one SparkSession (local[2]): the DataFrame bridge passing
   batches through unchanged next to plain ``mapInArrow(identity, barrier=True)``, and a
   keyed count through the bridge next to the bridge identity, with Spark's own
   ``groupBy().count()`` for reference.

    python jobs/benchmarks/bench_columnar.py [--rows N] [--spark]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

import timely_spark as ts

BATCH = 100_000


def table_of(rows: int) -> pa.Table:
    i = np.arange(rows, dtype=np.int64)
    return pa.table({"key": i % 1000, "value": i})


def timely_group_by(table: pa.Table) -> tuple[float, int]:
    batches = table.to_batches(max_chunksize=BATCH)

    def work(worker):
        out = []

        def build(scope):
            inp, stream = scope.new_input()
            stream.group_by("key").aggregate([("value", "sum")]).inspect(out.append)
            return inp

        inp = worker.dataflow(build)
        start = time.perf_counter()
        inp.send_batch(batches)
        inp.close()
        while worker.step():
            pass
        return time.perf_counter() - start, sum(rb.num_rows for rb in out)

    return ts.execute(work)[0]


def per_record_group_by(table: pa.Table) -> float:
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    pairs = [list(zip(keys[i:i + BATCH], values[i:i + BATCH])) for i in range(0, len(keys), BATCH)]

    def work(worker):
        out = []

        def build(scope):
            inp, stream = scope.new_input()
            stream.aggregate(lambda k, v, acc: (acc or 0) + v, lambda k, acc: (k, acc)).inspect(out.append)
            return inp

        inp = worker.dataflow(build)
        start = time.perf_counter()
        for batch in pairs:
            inp.send_batch(batch)
        inp.close()
        while worker.step():
            pass
        return time.perf_counter() - start

    return ts.execute(work)[0]


def exchange_rate(rows: int) -> float:
    def work(worker):
        i = np.arange(rows, dtype=np.int64)
        batches = pa.table({"key": i * 7 + worker.index, "value": i}).to_batches(max_chunksize=BATCH)
        got = [0]

        def build(scope):
            inp, stream = scope.new_input()
            probe = stream.exchange_by("key").inspect(lambda rb: got.__setitem__(0, got[0] + rb.num_rows)).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        worker.step_while(lambda: probe.less_than(0), timeout=60)
        start = time.perf_counter()
        for b in batches:
            inp.send_batch([b])
            worker.step()
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=600)
        return got[0], time.perf_counter() - start

    results = ts.execute(work, processes=2)
    return min(n / seconds for n, seconds in results)


def spark_figures(rows: int) -> None:
    from pyspark.sql import functions as F

    spark = ts.spark.get_session("bench columnar", master="local[2]")
    df = spark.range(rows).select(F.col("id"), (F.col("id") % 1000).alias("key")).repartition(2).cache()
    df.count()

    def timed(fn, repeat: int = 3) -> float:
        fn()                                                   # warm
        return min(_time(fn) for _ in range(repeat))

    def plain():
        df.mapInArrow(lambda it: it, df.schema, barrier=True).write.format("noop").mode("overwrite").save()

    def bridge():
        ts.spark.transform(df, lambda scope, batches: batches, "id long, key long") \
            .write.format("noop").mode("overwrite").save()

    def keyed_count():
        ts.spark.transform(df, lambda scope, batches: batches.group_by("key").aggregate([([], "count_all")]),
                           "key long, count_all long").write.format("noop").mode("overwrite").save()

    def spark_count():
        df.groupBy("key").count().write.format("noop").mode("overwrite").save()

    t_plain, t_bridge, t_count, t_spark = timed(plain), timed(bridge), timed(keyed_count), timed(spark_count)
    print(f"Spark local[2], {rows:,} rows")
    print(f"  mapInArrow(identity, barrier=True)  {rows / t_plain / 1e6:8.1f} M rows/s")
    print(f"  bridge identity                     {rows / t_bridge / 1e6:8.1f} M rows/s   "
          f"bridge/mapInArrow = {t_plain / t_bridge:.2f}")
    print(f"  bridge keyed count (group_by)       {rows / t_count / 1e6:8.1f} M rows/s   "
          f"adds {100 * (t_count / t_bridge - 1):.0f}% to the bridge identity")
    print(f"  Spark groupBy().count()             {rows / t_spark / 1e6:8.1f} M rows/s")
    spark.stop()


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--per-record-rows", type=int, default=1_000_000,
                        help="rows for the per-record form (it is slow)")
    parser.add_argument("--exchange-rows", type=int, default=10_000_000, help="rows per worker")
    parser.add_argument("--spark", action="store_true", help="also the Spark bridge figures")
    args = parser.parse_args()

    table = table_of(args.rows)
    t_timely, groups = timely_group_by(table)
    start = time.perf_counter()
    whole = table.group_by("key").aggregate([("value", "sum")])
    t_arrow = time.perf_counter() - start
    assert groups == whole.num_rows == 1000
    t_record = per_record_group_by(table_of(args.per_record_rows))
    r_timely, r_arrow, r_record = args.rows / t_timely, args.rows / t_arrow, args.per_record_rows / t_record
    print(f"group_by(key).aggregate(sum), 1 worker, {args.rows:,} rows in batches of {BATCH:,}")
    print(f"  timely_spark columnar   {r_timely / 1e6:8.1f} M rows/s")
    print(f"  pyarrow whole table     {r_arrow / 1e6:8.1f} M rows/s   timely/pyarrow    = {r_timely / r_arrow:.2f}")
    print(f"  per-record operators    {r_record / 1e6:8.2f} M rows/s   timely/per-record = {r_timely / r_record:.0f}")
    rate = exchange_rate(args.exchange_rows)
    print(f"exchange_by(int64 key), 2 processes: {rate / 1e6:.1f} M rows/s per worker")
    if args.spark:
        spark_figures(args.rows)


if __name__ == "__main__":
    main()
