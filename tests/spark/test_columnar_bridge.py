"""The DataFrame bridge with columnar operators: a keyed aggregation, exact rows against
Spark's own groupBy."""

import pytest

import timely_spark as ts


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_keyed_aggregation_through_the_bridge_matches_spark_group_by(spark):
    from pyspark.sql import functions as F

    df = spark.range(20_000).select(
        F.when(F.col("id") % 97 == 0, F.lit(None)).otherwise(F.concat(F.lit("k"), (F.col("id") % 37).cast("string")))
        .alias("key"), (F.col("id") % 5).alias("part"), F.col("id").alias("value")).repartition(2)

    def build(scope, batches):
        return batches.group_by(["key", "part"]).aggregate([("value", "sum"), ([], "count_all")])

    got = ts.spark.transform(df, build, "key string, part long, value_sum long, count_all long")
    expect = df.groupBy("key", "part").agg(F.sum("value").alias("value_sum"), F.count("*").alias("count_all"))
    assert sorted(got.collect(), key=str) == sorted(expect.collect(), key=str)
    assert got.count() == 37 * 5 + 5
