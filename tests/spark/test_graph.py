"""ts.graph on Spark DataFrames (barrier workers, local[2])."""

import pytest

from timely_spark.graph import GraphInputError, connected_components, pagerank, pagerank_reference, union_find

from ..graph.graphs import awkward_graph


@pytest.mark.timeout(90)
def test_graph_algorithms_on_spark_agree_with_references(any_spark):
    table = awkward_graph(8)
    df = any_spark.createDataFrame(table.to_pandas()).withColumnRenamed("src", "a")
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
def test_shortest_paths_on_spark_match_dijkstra(any_spark):
    from timely_spark.graph import dijkstra_reference, shortest_paths

    table = awkward_graph(11)
    df = any_spark.createDataFrame(table.to_pandas())
    sources = [int(table["src"][0].as_py()), 30_000]
    got = {(r.vertex, r.source): r.distance for r in shortest_paths(df, sources).collect()}
    assert got == dijkstra_reference(table["src"].to_pylist(), table["dst"].to_pylist(), sources)
    with pytest.raises(GraphInputError, match=r"sources must be vertex ids of the edges' type \(int64\)"):
        shortest_paths(df, ["x"])


@pytest.mark.timeout(60)
@pytest.mark.slow
def test_null_ids_on_spark_raise_the_workers_error_naming_the_column(any_spark):
    import timely_spark as ts

    df = any_spark.createDataFrame([(1, 2), (None, 3)], "src long, dst long")
    with pytest.raises(ts.WorkerError, match=r"^worker \d, operator .*column 'src' has 1 null vertex ids"):
        connected_components(df, workers=2).collect()


@pytest.mark.parametrize("schema,call,match", [
    ("src double, dst long", connected_components,
     r"vertex ids must be integers, strings, binaries or dates, but column 'src' is double"),
    ("src long, dst array<long>", pagerank,
     r"vertex ids must be integers, strings, binaries or dates, but column 'dst' is array<bigint>"),
])
def test_ids_of_a_type_not_taken_on_spark_are_refused_before_any_job(spark, schema, call, match):
    df = spark.createDataFrame([], schema)
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    with pytest.raises(GraphInputError, match=match):
        call(df)
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before


@pytest.mark.timeout(60)
@pytest.mark.slow
def test_weights_on_spark_are_checked_under_the_users_column_name(spark):
    import timely_spark as ts
    from timely_spark.graph import shortest_paths

    with pytest.raises(GraphInputError, match=r"weights must be numbers, but column 'w' is string"):
        shortest_paths(spark.createDataFrame([(1, 2, "x")], "src long, dst long, w string"), [1], weight="w")
    df = spark.createDataFrame([(1, 2, 1.0), (2, 3, -0.5)], "src long, dst long, w double")
    with pytest.raises(ts.WorkerError, match=r"weight column 'w' has 1 negative, NaN or infinite weights") as err:
        shortest_paths(df, [1], weight="w").collect()
    assert isinstance(err.value.cause, GraphInputError)
    got = shortest_paths(df.where("w >= 0"), [1], weight="w").collect()
    assert {(r.vertex, r.distance) for r in got} == {(1, 0.0), (2, 1.0)}


def _collected(df, *columns):
    return [tuple(r[c] for c in columns) for r in df.collect()]


@pytest.mark.timeout(240)
def test_string_ids_on_spark_match_the_integer_results(spark):
    import pyarrow as pa
    import pyarrow.compute as pc

    from timely_spark.graph import dijkstra_reference, shortest_paths

    from ..graph.test_ids import as_strings, expected_components, relabelled

    table = awkward_graph(14)
    converted, mapping = relabelled(table, as_strings)
    df = spark.createDataFrame(converted.to_pandas()).withColumnRenamed("src", "from.id")   # a dotted name
    components = connected_components(df, src="from.id", workers=2)
    assert [f.dataType.simpleString() for f in components.schema.fields] == ["string", "string"]
    assert dict(_collected(components, "vertex", "component")) == expected_components(table, mapping)

    ranks = dict(_collected(pagerank(df, src="from.id"), "vertex", "rank"))
    ref = pagerank_reference(table["src"].to_numpy(), table["dst"].to_numpy())
    assert sorted(ranks) == sorted(mapping[v] for v in ref)
    assert max(abs(ranks[mapping[v]] - r) for v, r in ref.items()) < 1e-12

    src, dst = table["src"].to_pylist(), table["dst"].to_pylist()
    sources = [src[0], 30_000]
    got = {(v, s): d for v, s, d in _collected(shortest_paths(df, [mapping[s] for s in sources], src="from.id"),
                                               "vertex", "source", "distance")}
    want = dijkstra_reference(src, dst, sources)
    assert got == {(mapping[v], mapping[s]): d for (v, s), d in want.items()}
    assert pc.all(pa.array([isinstance(v, str) for v, _ in got])).as_py()


@pytest.mark.timeout(120)
def test_dotted_column_names_on_spark(spark):
    from timely_spark.graph import shortest_paths

    df = spark.createDataFrame([(1, 2, 1.5), (2, 3, 2.0)], "`a.src` long, `a.dst` long, `w.x` double")
    assert sorted(_collected(connected_components(df, src="a.src", dst="a.dst"), "vertex", "component")) == [
        (1, 1), (2, 1), (3, 1)]
    paths = shortest_paths(df, [1], weight="w.x", src="a.src", dst="a.dst")
    assert sorted(_collected(paths, "vertex", "distance")) == [(1, 0.0), (2, 1.5), (3, 3.5)]


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_shortest_paths_on_spark_checks_sources_in_the_run_not_at_the_call(spark):
    import timely_spark as ts
    from timely_spark.graph import shortest_paths

    df = spark.createDataFrame([("a", "b"), ("b", "c")], "src string, dst string")
    tracker = spark.sparkContext.statusTracker()
    before = tracker.getJobIdsForGroup()
    lazy = shortest_paths(df, ["a", "nowhere"])
    assert tracker.getJobIdsForGroup() == before                  # calling it ran no Spark job
    with pytest.raises(ts.WorkerError, match=r"sources not in the graph: \['nowhere'\]") as err:
        lazy.collect()
    assert isinstance(err.value.cause, GraphInputError) and err.value.cause.what == "sources"
    assert sorted(_collected(shortest_paths(df, ["a"]), "vertex", "distance")) == [("a", 0), ("b", 1), ("c", 2)]


def test_spark_parameters_and_ids_are_checked_at_the_call(spark):
    import timely_spark as ts

    df = spark.createDataFrame([(1, 2)], "src long, dst long")
    with pytest.raises(ts.ParameterError, match=r"^workers must be a whole number >= 1, got 0$"):
        connected_components(df, workers=0)
    with pytest.raises(ts.ParameterError, match=r"^processes applies to local runs"):
        connected_components(df, processes=2)
    with pytest.raises(ts.ParameterError, match=r"^workers must be a whole number >= 1, got '2'$"):
        ts.spark.run(spark, lambda w: w.index, workers="2")
    with pytest.raises(ts.ParameterError, match=r"^max_attempts must be a whole number >= 1, got '2'$"):
        ts.spark.run(spark, lambda w: w.index, max_attempts="2")
    with pytest.raises(GraphInputError, match=r"columns 'src' and 'dst' hold ids of two types \(string, bigint\)"):
        connected_components(spark.createDataFrame([("a", 2)], "src string, dst long"))
