"""An edge list given as a Spark DataFrame, checked on the driver and shaped for the workers.

What the schema can tell is checked here, before any Spark job: a missing column, ids
that are not whole numbers, weights that are not numbers -- each a
:class:`~.components_columnar.GraphInputError` naming the column.  What only the data
can tell (null ids, negative weights) is checked by the workers and reaches the
driver as ``WorkerError`` whose ``cause`` is the ``GraphInputError``.
"""

from __future__ import annotations

from typing import Any, Optional

from .components_columnar import GraphInputError

__all__ = ["spark_edges"]


def spark_edges(edges: Any, src: str, dst: str, weight: Optional[str] = None) -> Any:
    """``edges`` as a DataFrame of ``src``, ``dst`` (long) and, if given, the ``weight``
    column under its own name (double); GraphInputError naming a missing column, an id
    column that is not of an integer type, or a weight column that is not numeric.
    Runs no Spark job.

        spark_edges(spark.createDataFrame([(1, 2)], "a int, b int"), "a", "b").columns   # ['src', 'dst']
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import ByteType, IntegerType, LongType, NumericType, ShortType

    types = {f.name: f.dataType for f in edges.schema.fields}
    for name in [src, dst] + ([weight] if weight else []):
        if name not in types:
            raise GraphInputError(f"no column {name!r} in the edges (columns: {', '.join(edges.columns)})", name)
    for name in (src, dst):
        if not isinstance(types[name], (ByteType, ShortType, IntegerType, LongType)):
            raise GraphInputError(f"vertex ids must be integers, but column {name!r} is "
                                  f"{types[name].simpleString()}", name)
    columns = [F.col(src).cast("long").alias("src"), F.col(dst).cast("long").alias("dst")]
    if weight:
        if not isinstance(types[weight], NumericType):
            raise GraphInputError(f"weights must be numbers, but column {weight!r} is "
                                  f"{types[weight].simpleString()}", weight)
        columns.append(F.col(weight).cast("double").alias(weight))
    return edges.select(*columns)
