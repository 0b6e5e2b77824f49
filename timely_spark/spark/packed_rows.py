"""A transform's output rows packed into arrays while they cross the stage boundary.

The shuffle after the barrier stage (:mod:`.stage_boundary`) costs Spark per row: each
row is copied, serialized, compressed, written, read back and deserialized -- for
ten million rows of two longs, seconds, more than the rows take to compute.  So the
barrier tasks hand Spark each output batch as a few *packed* rows: every column
becomes an array column, each packed row holding the next run of rows (about
:data:`~timely_spark.spark.packed_rows.PACKED_ROW_BYTES` of them; zero-copy on the Python side:
a list array over the column), and after the shuffle :func:`unpack` turns them back
into the rows -- in order, in the same partition, of the same types as the schema
(when all its fields are nullable: :func:`packable`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["packable", "packed_struct", "pack", "unpack"]

#: Bytes of a ``ts.spark.transform`` worker's output rows packed into one row of arrays
#: for the shuffle after the barrier stage (Spark's cost there is per row: see
#: :mod:`timely_spark.spark.packed_rows`).
PACKED_ROW_BYTES = 256 * 1024


def packed_struct(struct: Any) -> Any:
    """The Spark schema of packed rows: each field of ``struct`` as an array of its type
    (elements nullable as the field).

    >>> from pyspark.sql.types import StructType, StructField, LongType
    >>> packed_struct(StructType([StructField("x", LongType(), False)])).simpleString()
    'struct<x:array<bigint>>'
    """
    from pyspark.sql.types import ArrayType, StructField, StructType

    return StructType([StructField(f.name, ArrayType(f.dataType, f.nullable), False) for f in struct.fields])


def pack(rb: Any, row_bytes: int = PACKED_ROW_BYTES) -> Any:
    """Record batch ``rb`` as packed rows: each column a list array whose entries are
    consecutive runs of about ``row_bytes`` bytes of rows (at least one row each).

    >>> import pyarrow as pa
    >>> packed = pack(pa.record_batch({"x": [1, 2, 3], "s": ["a", None, "c"]}), row_bytes=32)
    >>> packed.num_rows, packed.to_pydict()
    (2, {'x': [[1, 2], [3]], 's': [['a', None], ['c']]})
    """
    import numpy as np
    import pyarrow as pa

    n = rb.num_rows
    per = max(1, row_bytes * n // max(1, rb.nbytes)) if n else 1
    offsets = pa.array(np.append(np.arange(0, n, per, dtype=np.int32), np.int32(n)))
    arrays = [pa.ListArray.from_arrays(offsets, column) for column in rb.columns]
    fields = [pa.field(f.name, pa.list_(pa.field("element", f.type, f.nullable)), False) for f in rb.schema]
    return pa.RecordBatch.from_arrays([a.cast(f.type) for a, f in zip(arrays, fields)], schema=pa.schema(fields))


def _ref(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def packable(struct: Any) -> bool:
    """Whether rows of ``struct`` cross the boundary packed: when every field is nullable
    (an element taken back out of an array is nullable to Spark, so a non-nullable
    field would come back nullable; such rows cross one by one, as they are).

    >>> from pyspark.sql.types import StructType, StructField, LongType
    >>> packable(StructType([StructField("x", LongType())]))
    True
    >>> packable(StructType([StructField("x", LongType(), False)]))
    False
    """
    return all(f.nullable for f in struct.fields) and bool(struct.fields)


def unpack(df: Any, struct: Any) -> Any:
    """The rows of ``struct`` (:func:`packable`) back from ``df``'s packed rows, in order
    and partition: one ``posexplode``, and an element lookup per other column."""
    from pyspark.sql import functions as F

    names = [f.name for f in struct.fields]
    at = "_at"
    while at in names:
        at += "_"
    first, rest = names[0], names[1:]
    exploded = df.select(F.posexplode(_ref(first)).alias(at, first), *[_ref(n) for n in rest])
    return exploded.select(*[_ref(first) if n == first else _ref(n)[F.col(at)].alias(n) for n in names])
