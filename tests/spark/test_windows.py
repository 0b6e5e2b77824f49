"""group_by_window on Spark through ts.spark.transform, exactly against Spark's own
groupBy(window(...)) and groupBy(session_window(...)) on the same DataFrame: null keys,
rows on window boundaries, stretches without rows (empty windows), two workers; the
window bounds leave as Spark ``timestamp`` columns."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import timely_spark as ts

SCHEMA = "window_start timestamp, window_end timestamp, k string, count_all long, v_sum long, v_mean double"
ORIGIN = datetime(2024, 3, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def events(spark):
    rng = np.random.default_rng(11)
    seconds = np.concatenate([rng.integers(0, 120, 150), rng.integers(300, 400, 150),   # nothing in [120, 300)
                              np.arange(0, 400, 10)])                                      # on the boundaries
    seconds = seconds + rng.choice([0, 0.25, 0.5], len(seconds))
    keys = rng.choice(np.array(["a", "b", "c", None], object), len(seconds))
    rows = [(ORIGIN + timedelta(seconds=float(s)), k, int(v))
            for s, k, v in zip(seconds, keys, rng.integers(0, 1000, len(seconds)))]
    return spark.createDataFrame(rows, "ts timestamp, k string, v long").repartition(2)


def rows_of(df):
    return sorted(((r.window_start, r.window_end, r.k, r.count_all, r.v_sum, round(r.v_mean, 9)) for r in df.collect()),
                  key=str)


@pytest.mark.parametrize("kind, params, spark_window", [
    ("tumbling", dict(every=timedelta(seconds=10)), "window(ts, '10 seconds')"),
    ("sliding", dict(every=timedelta(seconds=10), period=timedelta(seconds=30)),
     "window(ts, '30 seconds', '10 seconds')"),
    ("session", dict(gap=timedelta(seconds=4)), "session_window(ts, '4 seconds')"),
])
def test_windows_through_transform_equal_sparks_group_by_window(spark, events, kind, params, spark_window):
    from pyspark.sql import functions as F

    ours = ts.spark.transform(
        events, lambda scope, s: s.group_by_window("ts", keys="k", **params)
        .aggregate([([], "count_all"), ("v", "sum"), ("v", "mean")]), SCHEMA)
    theirs = events.groupBy(F.expr(spark_window).alias("w"), "k").agg(
        F.count("*").alias("count_all"), F.sum("v").alias("v_sum"), F.avg("v").alias("v_mean"))
    theirs = theirs.select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "k",
                           "count_all", "v_sum", "v_mean")
    expected = rows_of(theirs)
    assert len(expected) > 40 and any(r[2] is None for r in expected)
    assert rows_of(ours) == expected
