"""An input spread over the workers as Arrow (``ts.spark.transform`` with more partitions than workers)."""

import datetime
import decimal

import pyarrow as pa

import timely_spark as ts

SCHEMA = ("id long, name string, score double, at timestamp, price decimal(12,2), tags array<string>, "
          "point struct<x:int,y:int>")


def _rows(n):
    at = datetime.datetime(2024, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
    return [(i, None if i % 7 == 0 else f"name-{i}", i / 3, at + datetime.timedelta(seconds=i),
             decimal.Decimal(i) / 4, [f"t{i % 3}"] * (i % 3), None if i % 5 == 0 else {"x": i, "y": -i})
            for i in range(n)]


def _tagged(scope, batches):
    """Each input row with the worker that received it."""
    return batches.map(lambda rb: rb.append_column("worker", pa.array([scope.index] * rb.num_rows, pa.int64())))


def test_every_row_reaches_one_worker_unchanged_and_the_workers_share_them_evenly(any_spark):
    rows = _rows(1000)
    df = any_spark.createDataFrame(rows, SCHEMA).repartition(5)          # 5 partitions for 2 workers
    out = ts.spark.transform(df, _tagged, SCHEMA + ", worker long", workers=2).collect()
    got = sorted((tuple(r)[:-1] for r in out), key=lambda r: r[0])
    assert [r[0] for r in got] == list(range(1000))                      # each row once
    want = any_spark.createDataFrame(rows, SCHEMA).collect()             # the same values as Spark hands them
    assert got == sorted((tuple(r) for r in want), key=lambda r: r[0])
    counts = [sum(r["worker"] == w for r in out) for w in (0, 1)]
    assert max(counts) - min(counts) <= 5        # an equal slice of each partition's rows, give or take one


def test_partitions_of_single_rows_go_round_the_workers(spark):
    df = spark.range(0, 6, 1, 6)                                         # a row in each of 6 partitions
    out = ts.spark.transform(df, _tagged, "id long, worker long", workers=2).collect()
    assert sorted(r["id"] for r in out) == list(range(6))
    assert sorted(sum(r["worker"] == w for r in out) for w in (0, 1)) == [3, 3]


def test_the_slices_cross_spark_compressed_and_come_back_whole():
    from timely_spark.spark.arrow_spread import received, slices

    ids = pa.array(range(100_000), pa.int64())                           # small ints: mostly zero bytes
    rb = pa.record_batch({"src": ids, "dst": ids, "name": pa.array([f"v{i % 10}" for i in range(100_000)])})
    out = list(slices([rb], 2, [0, 1]))
    sent = sum(b["arrow"].nbytes for b in out)
    assert sent < rb.nbytes * 3 / 4                                      # what the shuffle moves
    assert pa.Table.from_batches(list(received(out))).equals(pa.Table.from_batches([rb]))
