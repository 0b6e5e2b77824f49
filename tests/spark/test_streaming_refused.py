"""A streaming DataFrame passed where a batch one is needed (``ts.spark.transform``, the
graph batch forms) is refused at the call with the package's error naming the route a
stream takes -- not Spark's raw AnalysisException when the job is planned."""

import pytest

import timely_spark as ts
from timely_spark.errors import ParameterError


@pytest.mark.timeout(120)
def test_a_streaming_dataframe_is_refused_at_the_call_with_the_route(spark):
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    edges = stream.selectExpr("value AS src", "value + 1 AS dst")
    with pytest.raises(ParameterError, match=r"ts.spark.transform takes a batch DataFrame, and this one is "
                                             r"streaming.*ts.spark.stream\(df, build, schema, "
                                             r"checkpoint=DIR\).*writeStream.format\(\"timely\"\).*ts.spark.run"):
        ts.spark.transform(stream, lambda scope, batches: batches, "value long")
    for call in (ts.graph.connected_components, ts.graph.pagerank,
                 lambda e: ts.graph.shortest_paths(e, [1])):
        with pytest.raises(ParameterError,
                           match=r"batch forms.*streaming.*ts.spark.stream.*readStream.format\(\"timely\"\)"):
            call(edges)
    assert not spark.streams.active
