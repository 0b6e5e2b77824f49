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


@pytest.mark.parametrize("schema,call,match", [
    ("src double, dst long", connected_components, r"vertex ids must be integers, but column 'src' is double"),
    ("src long, dst string", pagerank, r"vertex ids must be integers, but column 'dst' is string"),
])
def test_ids_that_are_not_integers_on_spark_are_refused_before_any_job(spark, schema, call, match):
    df = spark.createDataFrame([], schema)
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    with pytest.raises(GraphInputError, match=match):
        call(df)
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before


@pytest.mark.timeout(60)
def test_weights_on_spark_are_checked_under_the_users_column_name(spark):
    import timely_spark as ts
    from timely_spark.graph import shortest_paths

    with pytest.raises(GraphInputError, match=r"weights must be numbers, but column 'w' is string"):
        shortest_paths(spark.createDataFrame([(1, 2, "x")], "src long, dst long, w string"), [1], weight="w")
    df = spark.createDataFrame([(1, 2, 1.0), (2, 3, -0.5)], "src long, dst long, w double")
    with pytest.raises(ts.WorkerError, match=r"weight column 'w' has negative or NaN weights") as err:
        shortest_paths(df, [1], weight="w").collect()
    assert isinstance(err.value.cause, GraphInputError)
    got = shortest_paths(df.where("w >= 0"), [1], weight="w").collect()
    assert {(r.vertex, r.distance) for r in got} == {(1, 0.0), (2, 1.0)}
