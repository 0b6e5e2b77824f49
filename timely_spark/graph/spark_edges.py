"""An edge list given as a Spark DataFrame, checked on the driver and shaped for the workers.

What the schema can tell is checked here, before any Spark job: a missing column, ids
of a type the graph functions do not take, weights that are not numbers -- each a
:class:`~timely_spark.errors.GraphInputError` naming the column.  What only the data
can tell (null ids, negative or infinite weights, sources not in the graph) is checked
by the workers and reaches the driver as ``WorkerError`` whose ``cause`` is the
``GraphInputError``.
"""

from __future__ import annotations

from typing import Any, Optional

from .components_columnar import GraphInputError

__all__ = ["spark_edges", "quoted"]

SPARK_IDS = "integers, strings, binaries or dates"


def quoted(name: str) -> str:
    """``name`` as a Spark column reference that means exactly that column (dots and
    backticks included).

    >>> quoted("a.b"), quoted("x`y")
    ('`a.b`', '`x``y`')
    """
    return "`" + name.replace("`", "``") + "`"


def spark_edges(edges: Any, src: str, dst: str, weight: Optional[str] = None) -> tuple[Any, Any]:
    """``(DataFrame, id type)``: ``edges`` with just the ``src``, ``dst`` and (if given)
    ``weight`` columns, renamed ``src``, ``dst``, ``weight`` (PySpark's ``mapInArrow``
    cannot take dotted names; the workers give the user's names back) -- integer ids as
    long, other ids (strings, binaries, dates) as they are, the weight as double -- and
    the Spark type of the ids.  GraphInputError naming a missing column, ids of another type or of two
    types, or weights that are not numbers.  Runs no Spark job.

        spark_edges(spark.createDataFrame([(1, 2)], "a int, b int"), "a", "b")[0].columns   # ['src', 'dst']
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, DateType, IntegralType, LongType, NumericType, StringType

    from ..spark.preflight import refuse_streaming

    refuse_streaming(edges, "ts.graph's batch forms (connected_components, pagerank, shortest_paths)")

    types = {f.name: f.dataType for f in edges.schema.fields}
    for name in [src, dst] + ([weight] if weight else []):
        if name not in types:
            raise GraphInputError(f"no column {name!r} in the edges (columns: {', '.join(edges.columns)})", name)
    for name in (src, dst):
        if not isinstance(types[name], (IntegralType, StringType, BinaryType, DateType)):
            raise GraphInputError(f"vertex ids must be {SPARK_IDS}, but column {name!r} is "
                                  f"{types[name].simpleString()}", name)
    integral = all(isinstance(types[n], IntegralType) for n in (src, dst))
    if not integral and types[src] != types[dst]:
        raise GraphInputError(f"columns {src!r} and {dst!r} hold ids of two types ({types[src].simpleString()}, "
                              f"{types[dst].simpleString()}): give both one type", dst)
    id_type = LongType() if integral else types[src]
    columns = [F.col(quoted(n)).cast(id_type).alias(a) for n, a in ((src, "src"), (dst, "dst"))]
    if weight:
        if not isinstance(types[weight], NumericType):
            raise GraphInputError(f"weights must be numbers, but column {weight!r} is "
                                  f"{types[weight].simpleString()}", weight)
        columns.append(F.col(quoted(weight)).cast("double").alias("weight"))
    return edges.select(*columns), id_type
