"""The DataFrame bridge (mapInArrow, barrier): Arrow batches and plain rows, both directions."""

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import timely_spark as ts
from timely_spark.graph import union_find as components


def test_record_batches_in_and_out(spark):
    df = spark.createDataFrame([(i, i % 3) for i in range(20)], "id long, g long").repartition(2)

    def build(scope, batches):
        return batches.map(lambda rb: pa.record_batch(
            {"id": rb.column("id"), "square": pc.multiply(rb.column("id"), rb.column("id"))}))

    out = ts.spark.transform(df, build, "id long, square long")
    assert sorted(tuple(r) for r in out.collect()) == [(i, i * i) for i in range(20)]


def test_plain_rows_in_and_out_with_exchange_and_aggregation(spark):
    words = "a b a c b a".split()
    df = spark.createDataFrame([(w,) for w in words], "word string").repartition(2)

    def build(scope, rows):
        return (rows.map(lambda r: (r["word"], 1))
                .aggregate(lambda w, one, n: (n or 0) + one, lambda w, n: (w, n)))

    out = ts.spark.transform(df, build, "word string, n long", rows=True)
    assert sorted(tuple(r) for r in out.collect()) == [("a", 3), ("b", 2), ("c", 1)]


def test_connected_components_through_the_bridge(spark):
    edges = [(1, 2), (2, 3), (4, 5), (6, 6), (7, 8), (8, 9), (9, 7), (3, 10)]
    df = spark.createDataFrame(edges, "src long, dst long")
    got = {r["vertex"]: r["component"] for r in ts.graph.connected_components(df, workers=2).collect()}
    assert got == components(edges)


def test_worker_errors_in_the_bridge_name_the_worker(spark):
    df = spark.createDataFrame([(i,) for i in range(4)], "x long").repartition(2)

    def build(scope, rows):
        return rows.map(lambda r: {"x": 1 // (scope.index - 1)})

    with pytest.raises(ts.WorkerError, match="^worker 1, operator 'Map' failed: ZeroDivisionError") as err:
        ts.spark.transform(df, build, "x long", rows=True).collect()
    assert err.value.worker == 1 and "1 // (scope.index - 1)" in str(err.value)    # the original traceback


def test_wrong_output_records_are_a_clear_error(spark):
    df = spark.createDataFrame([(1,)], "x long")
    with pytest.raises(TypeError, match="^ts.spark.transform: the output stream must carry pyarrow.RecordBatch"):
        ts.spark.transform(df, lambda scope, s: s.map(lambda rb: "nope"), "x long").collect()
