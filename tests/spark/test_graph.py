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


@pytest.mark.timeout(60)
def test_shortest_paths_on_spark_match_dijkstra(spark):
    from timely_spark.graph import dijkstra_reference, shortest_paths

    table = awkward_graph(11)
    df = spark.createDataFrame(table.to_pandas())
    sources = [int(table["src"][0].as_py()), 30_000]
    got = {(r.vertex, r.source): r.distance for r in shortest_paths(df, sources).collect()}
    assert got == dijkstra_reference(table["src"].to_pylist(), table["dst"].to_pylist(), sources)
    with pytest.raises(GraphInputError, match="sources"):
        shortest_paths(df, [987654321])


@pytest.mark.timeout(60)
def test_null_ids_on_spark_raise_the_workers_error_naming_the_column(spark):
    import timely_spark as ts

    df = spark.createDataFrame([(1, 2), (None, 3)], "src long, dst long")
    with pytest.raises(ts.WorkerError, match=r"^worker \d, operator .*column 'src' has 1 null vertex ids"):
        connected_components(df, workers=2).collect()
