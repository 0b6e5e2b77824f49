"""ts.spark.transform over a DataFrame held in Spark's cache: a loaded cache of as many
partitions as workers is read by the barrier tasks as it is (no stage before them);
a cache not loaded, or of another partition count, is spread as any other input."""

import pyarrow as pa
import pyspark.sql.functions as F
import pytest

import timely_spark as ts
from timely_spark.graph import connected_components, union_find
from timely_spark.spark.cached_input import cached_partitions
from timely_spark.spark.connect import is_connect


def _edges(spark, n=3000):
    return spark.range(0, n, 1, 3).selectExpr("id % 900 as src", "(id * 7919 + 13) % 900 as dst")


def _tagged(scope, batches):
    """Each input row with the worker that received it."""
    return batches.map(lambda rb: rb.append_column("worker", pa.array([scope.index] * rb.num_rows, pa.int64())))


def _before_the_cache(df):
    """The result's plan above the cached relation (whose own plan, shown below it, ran when it was loaded)."""
    return df._jdf.queryExecution().executedPlan().toString().split("InMemoryRelation")[0]


def test_a_loaded_cache_of_one_partition_a_worker_is_read_as_it_is(spark):
    edges = _edges(spark).repartition(2).withColumn("p", F.spark_partition_id()).cache()
    edges.count()
    assert cached_partitions(edges) == 2 and cached_partitions(edges.select("src", "dst")) == 2
    stats: dict = {}
    out = ts.spark.transform(edges, _tagged, "src long, dst long, p int, worker long", workers=2, stats=stats)
    above = _before_the_cache(out)
    assert above.count("Exchange") == 1 and above.count("MapInArrow") == 1     # only the stage boundary after
    rows = out.collect()
    assert sorted((r.src, r.dst) for r in rows) == sorted((r.src, r.dst) for r in _edges(spark).collect())
    assert all(r.worker == r.p for r in rows)            # worker i read cached partition i, nothing moved
    assert [t["input_from"] for t in stats["tasks"]] == ["cache", "cache"]
    edges.unpersist()


@pytest.mark.slow
def test_components_of_a_cached_dataframe_equal_the_uncached_ones(spark):
    plain = _edges(spark)
    edges = plain.repartition(2).cache()
    edges.count()
    stats: dict = {}
    cached = connected_components(edges, workers=2, stats=stats)
    assert _before_the_cache(cached).count("Exchange") == 1
    got = {r.vertex: r.component for r in cached.collect()}
    assert [t["input_from"] for t in stats["tasks"]] == ["cache", "cache"]
    assert got == {r.vertex: r.component for r in connected_components(plain, workers=2).collect()}
    want = union_find((r.src, r.dst) for r in plain.collect())
    assert got == want
    edges.unpersist()


@pytest.mark.slow
def test_a_cache_not_loaded_or_of_other_partitions_is_spread(spark):
    want = sorted(tuple(r) for r in _edges(spark).collect())
    not_loaded = _edges(spark).repartition(2).cache()
    three = _edges(spark).repartition(3).cache()
    three.count()
    assert cached_partitions(not_loaded) is None and cached_partitions(three) == 3
    for edges in (not_loaded, three):
        stats: dict = {}
        out = ts.spark.transform(edges, _tagged, "src long, dst long, worker long", workers=2, stats=stats)
        assert _before_the_cache(out).count("Exchange") == 2           # the spread's shuffle, then the boundary
        assert sorted(tuple(r)[:2] for r in out.collect()) == want
        assert [t["input_from"] for t in stats["tasks"]] == ["spark", "spark"]
        edges.unpersist()


def test_without_workers_a_loaded_cache_that_fits_is_read_as_it_is(spark):
    edges = _edges(spark).repartition(2).cache()
    edges.count()
    stats: dict = {}
    out = ts.spark.transform(edges, _tagged, "src long, dst long, worker long", stats=stats)
    assert _before_the_cache(out).count("Exchange") == 1
    assert sorted(tuple(r)[:2] for r in out.collect()) == sorted(tuple(r) for r in _edges(spark).collect())
    assert [t["input_from"] for t in stats["tasks"]] == ["cache", "cache"]
    edges.unpersist()


def test_over_any_session_a_cached_input_gives_the_same_rows(any_spark):
    """Over Spark Connect the cache cannot be looked at (no plan, no RDD): not known, so
    the input is spread, with the same rows."""
    edges = _edges(any_spark).repartition(2).cache()
    edges.count()
    connect = is_connect(any_spark)
    assert cached_partitions(edges) == (None if connect else 2)
    out = ts.spark.transform(edges, _tagged, "src long, dst long, worker long", workers=2)
    assert sorted(tuple(r)[:2] for r in out.collect()) == sorted(tuple(r) for r in _edges(any_spark).collect())
    edges.unpersist()
