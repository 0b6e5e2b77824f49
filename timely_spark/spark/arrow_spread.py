"""A transform's input spread over its workers as Arrow, not as rows.

A barrier stage cannot coalesce, so an input whose partitions are not the workers'
must be shuffled into them first.  Spark's own repartition shuffles rows: each row is
copied out of the input, hashed, serialized, compressed, written, read back,
deserialized, and then turned into Arrow for the barrier task's Python -- per row, in
the JVM, seconds for tens of millions of rows.  :func:`spread` converts the input to
Arrow once instead: an ordinary ``mapInArrow`` stage takes each input partition's
Arrow batches, joins them into chunks of about
:data:`~timely_spark.spark.arrow_spread.SPREAD_CHUNK_BYTES`, cuts each chunk into one
equal slice per worker and hands Spark each slice as one row holding it in Arrow's IPC
format; the shuffle then moves a few large rows of bytes to the worker each row names,
and :func:`received` reads the record batches back out of them in the barrier task.
The slices' buffers are compressed (:data:`~timely_spark.spark.arrow_spread.SPREAD_CODEC`):
everything Spark does to them on the way -- Arrow to rows, the shuffle's own
compression, its write and read, rows to Arrow again -- is per byte, and the ids of an
edge list shrink to about 0.6 of their size for ~1 GB/s of a spread task's time (a
worker decompresses several GB/s).  Every worker gets an equal share of every chunk,
whatever the input's partitions; the order of the rows is not kept (a repartition's is
not either).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from .stage_boundary import keys_to_own_partitions
from .task_input import chunked

__all__ = ["spread", "received", "SPREAD_SCHEMA"]

#: Bytes of an input partition's rows a :func:`spread` task joins before cutting them
#: into one slice per worker (each slice one row of the shuffle).
SPREAD_CHUNK_BYTES = 8 << 20

#: The shuffled rows: the key that sends the row to its worker, and the slice's bytes.
SPREAD_SCHEMA = "to int, arrow binary"

#: Arrow IPC buffer compression of the spread's slices (LZ4 frame: cheap both ways; a
#: pyarrow built without it sends them as they are).
SPREAD_CODEC = "lz4"


def slices(batches: Iterable[Any], workers: int, keys: list[int], first: int = 0,
           limit: int = SPREAD_CHUNK_BYTES) -> Iterator[Any]:
    """Record batches of ``(to, arrow)``: each chunk of ``batches`` (:func:`.task_input.chunked`)
    cut into ``workers`` consecutive slices as Arrow IPC streams (empty slices left out),
    slice ``i`` of chunk ``c`` keyed ``keys[(first + c + i) % workers]`` -- so that the
    rows a chunk cannot share evenly (and chunks of a row or two) go round the workers.

    >>> import pyarrow as pa
    >>> out = list(slices([pa.record_batch({"x": [1, 2, 3]})], 2, [7, 9]))
    >>> out[0]["to"].to_pylist()
    [7, 9]
    >>> [rb.to_pydict() for rb in received(out)]
    [{'x': [1]}, {'x': [2, 3]}]
    >>> [rb["to"].to_pylist() for rb in slices([pa.record_batch({"x": [1]})] * 3, 2, [7, 9], limit=1)]
    [[9], [7], [9]]
    """
    import numpy as np
    import pyarrow as pa

    options = pa.ipc.IpcWriteOptions(compression=SPREAD_CODEC if pa.Codec.is_available(SPREAD_CODEC) else None)
    for c, chunk in enumerate(chunked(batches, limit)):
        for rb in chunk:
            n = rb.num_rows
            cuts = [n * i // workers for i in range(workers + 1)]
            sink = pa.BufferOutputStream()
            ends, to = [0], []
            for i in range(workers):
                if cuts[i + 1] > cuts[i]:
                    with pa.ipc.new_stream(sink, rb.schema, options=options) as writer:
                        writer.write_batch(rb.slice(cuts[i], cuts[i + 1] - cuts[i]))
                    ends.append(sink.tell())
                    to.append(keys[(first + c + i) % workers])
            offsets = pa.py_buffer(np.asarray(ends, np.int32).tobytes())
            data = pa.Array.from_buffers(pa.binary(), len(to), [None, offsets, sink.getvalue()])
            yield pa.record_batch([pa.array(to, pa.int32()), data], names=["to", "arrow"])


def spread(df: Any, workers: int) -> Any:
    """``df`` as ``workers`` partitions of :data:`SPREAD_SCHEMA` rows: a ``mapInArrow``
    stage over ``df``'s partitions (:func:`slices`), then a shuffle by the key that sends
    each row to its worker (an int whose Spark hash lands on that partition, see
    :func:`.stage_boundary.keys_to_own_partitions`).  :func:`received` gives the rows
    back.  Lazy: runs no Spark job."""
    from pyspark.sql import functions as F

    keys = keys_to_own_partitions(workers)

    def cut(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        context = TaskContext.get()       # the input partition (a task's retry cuts the same way)
        return slices(batches, workers, keys, context.partitionId() if context is not None else 0)

    return df.mapInArrow(cut, SPREAD_SCHEMA).repartition(workers, F.col("to"))


def received(batches: Iterable[Any]) -> Iterator[Any]:
    """The record batches held by the ``arrow`` column of ``batches`` (rows of
    :func:`spread`), in order (their buffers decompressed)."""
    import pyarrow as pa

    for rb in batches:
        column = rb.column("arrow")
        for i in range(len(column)):
            yield from pa.ipc.open_stream(column[i].as_buffer())
