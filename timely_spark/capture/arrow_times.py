"""Vectorized work on an event log's ``time`` column (int64, or a struct for ``Product``
and tuple times): its distinct values with their row counts, and the rows at a set of
times -- one Arrow call per file, never a Python call per row.

>>> import pyarrow as pa
>>> product = pa.struct([("outer", pa.int64()), ("inner", pa.int64())])
>>> t = pa.table({"time": pa.array([{"outer": 0, "inner": 1}, {"outer": 0, "inner": 1},
...                                 {"outer": 1, "inner": 0}], product), "x": [1, 2, 3]})
>>> time_counts(t["time"])
([{'outer': 0, 'inner': 1}, {'outer': 1, 'inner': 0}], [2, 1])
>>> rows_at(t, pa.array([{"outer": 1, "inner": 0}], t["time"].type))["x"].to_pylist()
[3]
"""

from __future__ import annotations

from typing import Any

__all__ = ["time_counts", "rows_at", "mask_at", "leaves"]


def leaves(arr: Any, prefix: str = "__t") -> dict:
    """The scalar columns of a (possibly nested struct) time column, by name (``prefix``,
    then ``_<field index>`` per level)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_struct(arr.type):
        return {prefix: arr}
    out: dict = {}
    for i in range(arr.type.num_fields):
        out.update(leaves(pc.struct_field(arr, [i]), f"{prefix}_{i}"))
    return out


def _rebuild(table: Any, type_: Any, prefix: str = "__t") -> Any:
    """The struct column of ``type_`` from its leaf columns in ``table`` (inverse of :func:`leaves`)."""
    import pyarrow as pa

    if not pa.types.is_struct(type_):
        return table[prefix].combine_chunks()
    fields = [type_.field(i) for i in range(type_.num_fields)]
    return pa.StructArray.from_arrays([_rebuild(table, f.type, f"{prefix}_{i}") for i, f in enumerate(fields)],
                                      fields=fields)


def time_counts(column: Any) -> tuple[list, list]:
    """The distinct plain values of a time column and how many rows each has (Arrow has
    no ``value_counts`` for structs, so struct times group by their leaf fields)."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_struct(column.type):
        counted = column.value_counts()
        return counted.field(0).to_pylist(), counted.field(1).to_pylist()
    keys = leaves(column)
    grouped = pa.table(keys).group_by(list(keys), use_threads=False).aggregate([([], "count_all")])
    return _rebuild(grouped, column.type).to_pylist(), grouped["count_all"].to_pylist()


def mask_at(column: Any, times: Any) -> Any:
    """A boolean mask of the rows of ``column`` whose time is one of ``times`` (an Arrow
    array of the column's type)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_struct(column.type):
        return pc.is_in(column, value_set=times)
    keys = leaves(column)
    keyed = pa.table({**keys, "__row": pa.array(np.arange(len(column)))})   # Acero joins no struct payloads
    hits = keyed.join(pa.table(leaves(times)), list(keys), join_type="left semi")["__row"]
    mask = np.zeros(len(column), dtype=bool)
    mask[hits.to_numpy()] = True
    return pa.array(mask)


def rows_at(table: Any, times: Any) -> Any:
    """The rows of ``table`` whose ``time`` is one of ``times``, in the table's order."""
    return table.filter(mask_at(table["time"], times))
