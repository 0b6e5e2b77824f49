"""The graph functions' front door: what the caller passed, checked once, then run on
Spark barrier workers (a Spark DataFrame) or local workers (a pyarrow.Table or pandas
DataFrame).

Vertex ids may be of any Arrow scalar type that hashes and orders: integers of any
width (uint64 included), strings, binaries, dates and times (on Spark: integers,
strings, binaries, dates).  Signed integers (and unsigned ones up to 32 bits) run as
int64 directly; every other type is mapped to dense int64 ids inside the workers
(:mod:`.ids.dense`) and back, so the results carry the caller's ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..dataflow import ExchangeBy, OperatorBuilder, check_batch
from ..errors import ParameterError
from ..runtime import check_count, check_timeout
from .broadcast import broadcast_keys
from .components_columnar import GraphInputError
from .ids.dense import decode_owned, encode_ids, id_array, min_labels
from .unique import sorted_unique
from .weights import check_weights

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["Algorithm", "run_graph", "ID"]

#: A result column that holds vertex ids (of the caller's type).
ID = "id"

LOCAL_IDS = "integers, strings, binaries, dates, times or timestamps"


@dataclass
class Algorithm:
    """A graph function for :func:`run_graph`: ``run(edges, src, dst, seeds)`` builds it
    over a stream of int64 edge batches (``seeds(time)`` -> ``(vertices, labels)`` of
    the sources, for shortest paths); ``columns`` are its result's names and types
    (:data:`ID` for vertex ids), the first ``keys`` of them identifying a row."""

    run: Callable[..., "Stream"]
    columns: list
    keys: int = 1


def _kind(edges: Any) -> str:
    if type(edges).__module__.startswith("pyspark"):
        return "spark"
    if isinstance(edges, pa.Table):
        return "arrow"
    if type(edges).__module__.startswith("pandas") and type(edges).__name__ == "DataFrame":
        return "pandas"
    raise GraphInputError(f"edges must be a Spark DataFrame, a pyarrow.Table or a pandas DataFrame, got "
                          f"{type(edges).__name__} (for a list of (src, dst) pairs: "
                          f"pyarrow.table({{'src': [...], 'dst': [...]}}))", "edges")


def _accepted(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
                or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t))


def _runs_as_int64(t: pa.DataType) -> bool:
    return bool(pa.types.is_signed_integer(t) or pa.types.is_unsigned_integer(t) and t.bit_width <= 32)


def local_edges(edges: Any, src: str, dst: str, weight: Optional[str], pandas: bool) -> tuple[pa.Table, Any, bool]:
    """``(table, id type, encode)``: the edges as a pyarrow.Table of just the ``src``,
    ``dst`` (and ``weight``) columns, ids of one type (int64 if they run as int64); a
    GraphInputError naming a missing column, null ids, ids of a type not taken or of two types.

    >>> local_edges(pa.table({"a": ["x"], "b": ["y"]}), "a", "b", None, False)[1:]
    (DataType(string), True)
    """
    table = pa.Table.from_pandas(edges, preserve_index=False) if pandas else edges
    for name in [src, dst] + ([weight] if weight else []):
        if name not in table.column_names:
            raise GraphInputError(f"no column {name!r} in the edges (columns: {', '.join(table.column_names)})", name)
    columns = {}
    for name in (src, dst):
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if column.null_count:
            hint = (" (pandas stores None in an integer column as NaN, making it float64)" if pandas else "")
            raise GraphInputError(f"column {name!r} has {column.null_count} null vertex ids{hint}: drop or fill "
                                  f"those rows", name)
        if pa.types.is_null(column.type) and not len(column):
            column = column.cast(pa.int64())
        if not _accepted(column.type):
            hint = ": floating-point ids are not exact, cast them to integers" if pa.types.is_floating(
                column.type) else ""
            raise GraphInputError(f"vertex ids must be {LOCAL_IDS}, but column {name!r} is {column.type}{hint}",
                                  name)
        columns[name] = column
    a, b = columns[src], columns[dst]
    if _runs_as_int64(a.type) and _runs_as_int64(b.type):
        a, b, encode = a.cast(pa.int64()), b.cast(pa.int64()), False
    elif a.type != b.type:
        raise GraphInputError(f"columns {src!r} and {dst!r} hold ids of two types ({a.type}, {b.type}): give both "
                              f"one type", dst)
    else:
        encode = True
    names = [src, dst] + ([weight] if weight else [])
    arrays = [a, b] + ([_weights(table.column(weight), weight)] if weight else [])
    return pa.table(dict(zip(names, arrays))), a.type, encode


def _weights(column: Any, weight: str) -> Any:
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)) or column.null_count:
        raise GraphInputError(f"weight column {weight!r} must be numeric without nulls, got {column.type}"
                              f"{f' with {column.null_count} nulls' if column.null_count else ''}", weight)
    check_weights(column.to_numpy().astype(np.float64), weight)
    return column


def source_ids(sources: Any, id_type: Any) -> pa.Array:
    """The distinct ``sources`` as an array of ``id_type``; GraphInputError naming
    ``sources`` if they are not a list of such ids.

    >>> source_ids(["b", "a", "b"], pa.string()).to_pylist()
    ['b', 'a']
    """
    if isinstance(sources, (str, bytes)) or not hasattr(sources, "__iter__"):
        raise GraphInputError(f"sources must be a list of vertex ids, got {sources!r}", "sources")
    values = list(sources)
    try:
        return pc.unique(pa.array(values, type=id_type))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        raise GraphInputError(f"sources must be vertex ids of the edges' type ({id_type}), got {values[:10]!r}",
                              "sources") from None


def check_sources(edges: "Stream", src: str, dst: str, sources: pa.Array) -> None:
    """Inside the run: once all edges are in, GraphInputError (from worker 0) naming
    the ``sources`` that are no vertex of the edges."""
    scope = edges.scope
    to_first = broadcast_keys(scope.peers)[0]
    found_op = OperatorBuilder(scope, "SourcesFound")
    edge_in = found_op.new_input(edges)
    out, found = found_op.new_output("found")
    state: dict = {"held": found_op.initial_capability(), "found": np.zeros(len(sources), bool)}

    def found_logic() -> None:
        for _, data in edge_in:
            for rb in data:
                rb = check_batch(rb, "SourcesFound")
                if rb.num_rows:
                    ids = pa.concat_arrays([id_array(rb, src, "SourcesFound"), id_array(rb, dst, "SourcesFound")])
                    state["found"] |= pc.is_in(sources.cast(ids.type), value_set=ids).to_numpy(zero_copy_only=False)
        held = state["held"]
        if held is not None and edge_in.frontier.is_empty():
            out.session(held).give_batch([pa.record_batch({"to": np.full(len(sources), to_first),
                                                           "found": state["found"]})])
            held.drop()
            state["held"] = None

    found_op.build(found_logic, notify=True)
    check = OperatorBuilder(scope, "SourcesCheck")
    found_in = check.new_input(found, ExchangeBy(["to"], "SourcesCheck"))
    seen: list = []

    def check_logic() -> None:
        for _, data in found_in:
            seen.extend(data)
        if seen and found_in.frontier.is_empty():
            present = np.logical_or.reduce([rb.column("found").to_numpy(zero_copy_only=False) for rb in seen])
            seen.clear()
            if not present.all():
                missing = sources.filter(pa.array(~present)).to_pylist()
                raise GraphInputError(f"sources not in the graph: {missing[:10]}", "sources")

    check.build(check_logic, notify=True)


def _dataflow(batches: "Stream", src: str, dst: str, algorithm: Algorithm, encode: bool,
              sources: Optional[pa.Array], check: bool) -> "Stream":
    if check and sources is not None:
        check_sources(batches, src, dst, sources)
    empty = np.zeros(0, np.int64)
    if not encode:
        wanted = empty if sources is None else sorted_unique(sources.to_numpy(zero_copy_only=False).astype(np.int64))
        return algorithm.run(batches, src, dst, lambda t: (wanted, wanted))
    edges, codes = encode_ids(batches, src, dst, sources)
    labels = np.arange(0 if sources is None else len(sources), dtype=np.int64)

    def seeds(t: Any) -> tuple:
        dense = codes.extras.get(t)
        return (empty, empty) if dense is None else (dense, labels)

    result = decode_owned(algorithm.run(edges, src, dst, seeds), "vertex", codes)
    names = [name for name, _ in algorithm.columns]
    if "component" in names:
        result = min_labels(result)
    if "source" in names:
        assert sources is not None
        at = names.index("source")
        result = result.map(lambda rb: rb.set_column(at, "source", sources.take(rb.column(at))))
    return result


def run_graph(edges: Any, algorithm: Algorithm, src: str, dst: str, workers: Optional[int], processes: int,
              timeout: Optional[float], weight: Optional[str] = None, sources: Any = None,
              stats: Optional[dict] = None) -> Any:
    """Check the parameters and the edges, run ``algorithm`` on Spark barrier workers
    (a lazy DataFrame out) or local ones (the input's kind out, sorted), ids of the
    caller's type in the result.  ``stats`` (on Spark): as ``ts.spark.transform``'s."""
    kind = _kind(edges)
    if kind == "spark":
        workers = 2 if workers is None else check_count("workers", workers)
        if processes != 1:
            raise ParameterError(f"processes applies to local runs (a pyarrow.Table or pandas DataFrame); on Spark, "
                                 f"workers= is the number of barrier tasks: got processes={processes!r}", "processes")
        return _on_spark(edges, algorithm, src, dst, workers, check_timeout("timeout", timeout), weight, sources,
                         stats)
    workers = 1 if workers is None else check_count("workers", workers)
    processes = check_count("processes", processes)
    timeout = check_timeout("timeout", timeout)
    table, id_type, encode = local_edges(edges, src, dst, weight, kind == "pandas")
    source_array = None if sources is None else source_ids(sources, id_type)
    if source_array is not None and len(source_array):
        ids = pa.chunked_array(table.column(src).chunks + table.column(dst).chunks, id_type)
        missing = source_array.filter(pc.invert(pc.is_in(source_array, value_set=ids)))
        if len(missing):
            raise GraphInputError(f"sources not in the graph: {missing[:10].to_pylist()}", "sources")

    def build(scope: Any, batches: Any) -> Any:
        return _dataflow(batches, src, dst, algorithm, encode, source_array, False)

    schema = pa.schema([(name, id_type if isinstance(typ, str) else typ) for name, typ in algorithm.columns])
    from .local import run_local

    result = run_local(table, build, schema, workers, processes, timeout, algorithm.keys)
    return result.to_pandas() if kind == "pandas" else result


def _on_spark(edges: Any, algorithm: Algorithm, src: str, dst: str, workers: int, timeout: Optional[float],
              weight: Optional[str], sources: Any, stats: Optional[dict] = None) -> Any:
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import DoubleType, LongType, StructField, StructType

    from ..spark import transform
    from .spark_edges import spark_edges

    frame, id_type = spark_edges(edges, src, dst, weight)
    encode = not isinstance(id_type, LongType)
    source_array = None if sources is None else source_ids(sources, to_arrow_type(id_type))
    spark_types = {pa.int64(): LongType(), pa.float64(): DoubleType()}
    schema = StructType([StructField(name, id_type if isinstance(typ, str) else spark_types[typ])
                         for name, typ in algorithm.columns])

    names = [src, dst] + ([weight] if weight else [])

    def build(scope: Any, batches: Any) -> Any:
        named = batches.map(lambda rb: rb.rename_columns(names))          # the user's names, for errors
        return _dataflow(named, src, dst, algorithm, encode, source_array, True)

    return transform(frame, build, schema, workers=workers, timeout=timeout, stats=stats)
