"""The graph stream forms over a streaming DataFrame of edge changes.

``ts.graph.components``, ``pagerank_stream`` and ``shortest_paths_stream`` take a timely
stream inside a dataflow; given a streaming Spark DataFrame instead (``df.isStreaming``:
``src``, ``dst``, an optional ``diff``, other columns ignored), each runs itself as the
``build`` of :func:`timely_spark.spark.stream` and returns the running pipeline, whose
``.df`` is the streaming DataFrame of result changes.  The output's id columns have the
type of the ``src`` column.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import GraphInputError, ParameterError

__all__ = ["is_frame", "run_on_frame"]

#: The batch form of each stream form, for a batch DataFrame.
BATCH_FORMS = {"ts.graph.components": "ts.graph.connected_components", "ts.graph.pagerank_stream": "ts.graph.pagerank",
               "ts.graph.shortest_paths_stream": "ts.graph.shortest_paths"}


def is_frame(edges: Any) -> bool:
    """Whether ``edges`` is a Spark DataFrame (not a timely stream)."""
    return hasattr(edges, "isStreaming")


def _type(df: Any, column: str, call: str) -> str:
    names = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    if column not in names:
        raise GraphInputError(f"{call}: the streaming DataFrame of edges has no column {column!r} "
                              f"(it has {', '.join(names)})")
    return names[column]


def run_on_frame(edges: Any, call: str, build: Callable[[Any, Any], Any], columns: Callable[[str], str],
                 src: str, dst: str, pipeline: dict) -> Any:
    """``ts.spark.stream(edges, build, schema, **pipeline)`` where ``schema`` is
    ``columns(type of src)`` (a DDL string); GraphInputError naming a missing column."""
    from ..spark.pipeline import stream

    if not is_frame(edges):
        raise ParameterError(f"{call}: {', '.join(sorted(pipeline))} are ts.spark.stream's settings, for a streaming "
                             f"DataFrame of edges; inside a dataflow pass the stream alone")
    if edges.isStreaming is not True:
        raise ParameterError(f"{call} takes a timely stream or a streaming DataFrame of edge changes, and this is a "
                             f"batch DataFrame: use {BATCH_FORMS[call]}(edges) for it")
    kind = _type(edges, src, call)
    _type(edges, dst, call)
    if "checkpoint" not in pipeline:
        raise GraphInputError(f"{call} on a streaming DataFrame runs as ts.spark.stream: pass checkpoint=DIR "
                              "(and any of its settings: workers=, snapshot_every=, ...)")
    return stream(edges, build, columns(kind), **pipeline)
