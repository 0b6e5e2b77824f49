"""The graph functions check their parameters once, naming the parameter as the caller wrote it."""

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.graph import GraphInputError, connected_components, pagerank, shortest_paths

EDGES = pa.table({"src": [1, 2], "dst": [2, 3]})


@pytest.mark.parametrize("call", [
    lambda **kw: connected_components(EDGES, **kw),
    lambda **kw: pagerank(EDGES, **kw),
    lambda **kw: shortest_paths(EDGES, [1], **kw),
])
@pytest.mark.parametrize("kwargs, match", [
    (dict(workers=0), r"^workers must be a whole number >= 1, got 0$"),
    (dict(workers=-1), r"^workers must be a whole number >= 1, got -1$"),
    (dict(workers="2"), r"^workers must be a whole number >= 1, got '2'$"),
    (dict(workers=True), r"^workers must be a whole number >= 1, got True$"),
    (dict(processes=0), r"^processes must be a whole number >= 1, got 0$"),
    (dict(timeout=-1), r"^timeout must be a positive, finite number of seconds or None, got -1$"),
])
def test_layout_parameters_are_named(call, kwargs, match):
    with pytest.raises(ts.ParameterError, match=match) as info:
        call(**kwargs)
    assert info.value.parameter == next(iter(kwargs))


@pytest.mark.parametrize("kwargs, match", [
    (dict(damping="0.5"), r"^damping must be a number in \[0, 1\], got '0.5'$"),
    (dict(damping=1.5), r"^damping must be a number in \[0, 1\], got 1.5$"),
    (dict(iterations=True), r"^iterations must be a whole number >= 1, got True$"),
    (dict(iterations=2.0), r"^iterations must be a whole number >= 1, got 2.0$"),
    (dict(tolerance=0), r"^tolerance must be a positive, finite number or None, got 0$"),
])
def test_pagerank_parameters_are_named(kwargs, match):
    with pytest.raises(ts.ParameterError, match=match):
        pagerank(EDGES, **kwargs)


@pytest.mark.parametrize("edges", [[(1, 2), (2, 3)], {"src": [1], "dst": [2]}, None])
def test_edges_of_another_kind_say_what_is_accepted(edges):
    with pytest.raises(GraphInputError, match=r"^edges must be a Spark DataFrame, a pyarrow.Table or a pandas "
                                              r"DataFrame, got \w+ \(for a list of \(src, dst\) pairs") as info:
        connected_components(edges)
    assert info.value.what == "edges"


@pytest.mark.parametrize("w", [float("inf"), float("nan"), -1.0])
def test_weights_that_are_not_finite_and_non_negative_are_refused(w):
    edges = pa.table({"src": [1, 2], "dst": [2, 3], "w": [1.0, w]})      # 3 would be "reached" at distance inf
    with pytest.raises(GraphInputError, match=r"weight column 'w' has 1 negative, NaN or infinite weights"):
        shortest_paths(edges, [1], "w", timeout=30)


def test_infinite_weight_inside_a_dataflow_is_refused_naming_the_column():
    from timely_spark.graph import shortest_paths_stream

    edges = pa.table({"src": [1, 2], "dst": [2, 3], "cost": [1.0, float("inf")]})
    with pytest.raises(ts.WorkerError, match=r"weight column 'cost' has 1 negative, NaN or infinite weights"):
        ts.execute(lambda w: w.dataflow(lambda s: shortest_paths_stream(s.to_stream(edges), [1], "cost")),
                   timeout=30)
