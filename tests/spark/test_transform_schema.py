"""transform's output must fit its schema exactly (by name, with safe casts); transform is
lazy, and sized to the task slots."""

import pyarrow as pa
import pytest

import timely_spark as ts


def output_of(batch):
    return lambda scope, s: s.map(lambda rb: batch)


def test_batches_of_another_layout_are_cast_and_reordered(spark):
    df = spark.createDataFrame([(1,)], "x long")
    batch = pa.record_batch({"b": pa.array(["x"]), "a": pa.array([7], pa.int32())})     # int32, other order
    rows = ts.spark.transform(df, output_of(batch), "a long, b string").collect()
    assert [tuple(r) for r in rows] == [(7, "x")]


@pytest.mark.parametrize("batch,match", [
    (pa.record_batch({"a": [1], "b": ["x"], "c": [2.5]}), r"worker \d: the output has column\(s\) \['c'\]"),
    (pa.record_batch({"a": [1]}), r"worker \d: the output has no column\(s\) \['b'\]"),
    (pa.record_batch({"a": [2**40], "b": ["x"]}), r"worker \d: column 'a' is int64, which does not fit int32"),
])
def test_a_missing_extra_or_unfitting_column_is_an_error_naming_it(spark, batch, match):
    df = spark.createDataFrame([(1,)], "x long")
    with pytest.raises(ts.spark.SchemaMismatch, match="^" + match) as err:    # the cause first, as itself
        ts.spark.transform(df, output_of(batch), "a int, b string").collect()
    assert err.value.__cause__ is not None         # Spark's own error stays reachable


def test_dict_rows_with_an_unknown_key_are_an_error(spark):
    df = spark.createDataFrame([(1,)], "x long")
    with pytest.raises(ts.spark.SchemaMismatch, match=r"^worker \d: output rows have column\(s\) \['wrong'\]"):
        ts.spark.transform(df, lambda scope, s: s.map(lambda r: {"wrong": 1}), "x long", rows=True).collect()


def test_transform_after_a_shuffle_with_200_partitions(spark):
    df = spark.range(1000).repartition(200, "id")
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    with pytest.warns(UserWarning, match="200 partitions"):
        counted = ts.spark.transform(df, lambda scope, s: s.map(lambda rb: pa.record_batch({"n": [rb.num_rows]})),
                                     "n long")
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before    # lazy: no job yet
    assert sum(r["n"] for r in counted.collect()) == 1000
    assert ts.spark.transform(df, lambda scope, s: s, "id long", workers=2).rdd.getNumPartitions() == 2
