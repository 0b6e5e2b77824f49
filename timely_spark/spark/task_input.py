"""A transform task's input, joined into chunks before its worker sees it.

Spark hands ``mapInArrow`` its input in record batches of
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by default): a worker
that stepped its dataflow once per such batch would pay every operator's per-batch
cost (and, for the graph functions, a broadcast tick) hundreds of times per million
rows.  :func:`chunked` joins consecutive batches into one of about
:data:`~timely_spark.spark.task_input.INPUT_CHUNK_BYTES` (one copy of the rows, a chunk at a
time: the worker holds one chunk more than before, never its whole input).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

__all__ = ["chunked", "joined"]

#: Bytes of Spark's Arrow input batches (10,000 rows each by default) a transform task
#: joins into one before handing it to its worker: a step per few megabytes, not per
#: small batch.
INPUT_CHUNK_BYTES = 16 << 20


def joined(batches: list) -> list:
    """``batches`` (record batches of one schema) as one record batch, in a list (as
    Arrow's batches of one table if their columns cannot be one chunk: over 2 GB of
    strings).

    >>> import pyarrow as pa
    >>> rb = pa.record_batch({"x": [1, 2]})
    >>> [b.to_pydict() for b in joined([rb, rb])]
    [{'x': [1, 2, 1, 2]}]
    """
    import pyarrow as pa

    if len(batches) == 1:
        return batches
    concat = getattr(pa, "concat_batches", None)          # pyarrow 19 and later
    if concat is not None:
        try:
            return [concat(batches)]
        except pa.ArrowInvalid:                           # offsets overflow: keep them apart
            return batches
    return pa.Table.from_batches(batches).combine_chunks().to_batches()


def chunked(batches: Iterable[Any], limit: int = INPUT_CHUNK_BYTES) -> Iterator[list]:
    """Lists of record batches to send together: the non-empty batches of ``batches``,
    consecutive ones joined into one (:func:`joined`) until they hold ``limit`` bytes
    (a batch that large alone passes as it is).  The order of the rows is kept.

    >>> import pyarrow as pa
    >>> small = [pa.record_batch({"x": [i]}) for i in range(5)]
    >>> [[rb.num_rows for rb in chunk] for chunk in chunked(small, limit=16)]
    [[2], [2], [1]]
    >>> [x for chunk in chunked(small) for rb in chunk for x in rb.column(0).to_pylist()]
    [0, 1, 2, 3, 4]
    """
    pending: list = []
    held = 0
    for rb in batches:
        if not rb.num_rows:
            continue
        pending.append(rb)
        held += rb.nbytes
        if held >= limit:
            yield joined(pending)
            pending, held = [], 0
    if pending:
        yield joined(pending)
