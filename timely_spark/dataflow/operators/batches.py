"""Between row streams and columnar streams, and the sizes of record batches:
``rebatch``, ``to_records``, ``from_records``; and :func:`as_record_batches`, which
turns a ``pyarrow.Table``, a pandas DataFrame or a RecordBatch into record batches
(what ``scope.to_stream`` and ``InputHandle.send_batch`` do with them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import pyarrow as pa

from ...errors import BuildError
from .exchange_by import check_batch
from .pipe import pipe

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["as_record_batches", "is_table_like", "rebatch", "to_records", "from_records", "DEFAULT_MAX_ROWS",
           "tables_of"]

#: Rows per record batch when a table is split for a stream.
DEFAULT_MAX_ROWS = 65_536


def is_table_like(x: Any) -> bool:
    """Whether ``x`` is a pyarrow Table or RecordBatch, or a pandas DataFrame.

    >>> import pyarrow as pa
    >>> is_table_like(pa.table({"x": [1]})), is_table_like([1])
    (True, False)
    """
    return isinstance(x, (pa.Table, pa.RecordBatch)) or type(x).__module__.startswith("pandas")


def as_record_batches(x: Any, max_rows: int = DEFAULT_MAX_ROWS) -> list[pa.RecordBatch]:
    """The record batches of a pyarrow Table (at most ``max_rows`` each), a RecordBatch,
    or a pandas DataFrame (without its index).

    >>> import pyarrow as pa
    >>> [b.num_rows for b in as_record_batches(pa.table({"x": range(5)}), max_rows=2)]
    [2, 2, 1]
    """
    if isinstance(x, pa.RecordBatch):
        return [x] if x.num_rows else []
    if not isinstance(x, pa.Table):
        x = pa.Table.from_pandas(x, preserve_index=False)
    return [b for b in x.to_batches(max_chunksize=max_rows) if b.num_rows]


def rebatch(stream: "Stream", max_rows: int, name: str = "Rebatch") -> "Stream":
    """Split record batches larger than ``max_rows`` rows into zero-copy slices of at
    most ``max_rows``; smaller batches pass as they are, empty ones are dropped.

    >>> import pyarrow as pa, timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream(pa.table({"x": range(5)})).rebatch(2)
    ...                .inspect(lambda rb: print(rb.num_rows)))
    2
    2
    1
    """
    if not isinstance(max_rows, int) or max_rows < 1:
        raise BuildError(f"operator {name!r}: max_rows must be a positive int, got {max_rows!r}")

    def fn(t: Any, data: list) -> list:
        out = []
        for record in data:
            batch = check_batch(record, name)
            for start in range(0, batch.num_rows, max_rows):
                out.append(batch.slice(start, max_rows))
        return out

    return pipe(stream, name, fn)


def to_records(stream: "Stream", name: str = "ToRecords") -> "Stream":
    """A row stream: each row of each record batch as a dict ``{column: value}``.

    >>> import pyarrow as pa, timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream(pa.table({"x": [1, 2]})).to_records().inspect(print))
    {'x': 1}
    {'x': 2}
    """
    def fn(t: Any, data: list) -> list:
        return [row for record in data for row in check_batch(record, name).to_pylist()]

    return pipe(stream, name, fn)


def from_records(stream: "Stream", schema: Any, name: str = "FromRecords") -> "Stream":
    """A columnar stream: each batch of row records (dicts by column name, or tuples in
    the schema's order) as one RecordBatch of ``schema`` (a ``pyarrow.Schema``, or a
    list of ``(name, type)``).  A row that does not fit raises an error naming the operator.

    >>> import pyarrow as pa, timely_spark as ts
    >>> schema = pa.schema([("word", pa.string()), ("n", pa.int64())])
    >>> _ = ts.example(lambda s: s.to_stream([("a", 1), {"word": "b", "n": 2}]).from_records(schema)
    ...                .inspect(lambda rb: print(rb.to_pydict())))
    {'word': ['a', 'b'], 'n': [1, 2]}
    """
    schema = schema if isinstance(schema, pa.Schema) else pa.schema(schema)
    names = schema.names

    def fn(t: Any, data: list) -> Optional[list]:
        rows = [r if isinstance(r, dict) else dict(zip(names, r)) for r in data]
        try:
            return [pa.RecordBatch.from_pylist(rows, schema=schema)]
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise TypeError(f"operator {name!r}: records do not fit the schema {schema}: {exc}") from exc

    return pipe(stream, name, fn)


def tables_of(batches: list, operator: str, time: Any) -> pa.Table:
    """One table of a time's batches; a ValueError naming the operator and the time if
    their schemas differ.

    >>> import pyarrow as pa
    >>> tables_of([pa.record_batch({"x": [1]}), pa.record_batch({"x": [2]})], "Aggregate", 0).num_rows
    2
    """
    try:
        return pa.Table.from_batches(batches)
    except pa.ArrowInvalid as exc:
        schemas = sorted({str(b.schema).replace("\n", ", ") for b in batches})
        raise ValueError(f"operator {operator!r}: batches at time {time!r} have different schemas "
                         f"({' | '.join(schemas)}); this operator needs one schema") from exc
