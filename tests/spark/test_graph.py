"""ts.graph on Spark DataFrames (barrier workers, local[2])."""

import pytest

from timely_spark.graph import GraphInputError, connected_components, pagerank, pagerank_reference, union_find

from ..graph.graphs import awkward_graph


@pytest.mark.timeout(90)
def test_graph_algorithms_on_spark_agree_with_references(spark):
    table = awkward_graph(8)
    df = spark.createDataFrame(table.to_pandas()).withColumnRenamed("src", "a")
    components = connected_components(df, src="a")
    assert components.columns == ["vertex", "component"]
    got = {r.vertex: r.component for r in components.collect()}
    assert got == union_find(zip(table["src"].to_pylist(), table["dst"].to_pylist()))

    ranks = {r.vertex: r.rank for r in pagerank(df, src="a").collect()}
    ref = pagerank_reference(table["src"].to_numpy(), table["dst"].to_numpy())
    assert sorted(ranks) == sorted(ref) and max(abs(ranks[v] - ref[v]) for v in ref) < 1e-9

    with pytest.raises(GraphInputError, match="'nope'"):
        connected_components(df, src="nope")
