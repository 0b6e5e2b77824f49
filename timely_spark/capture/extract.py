"""extract: a captured stream's data, grouped by time."""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from ..progress import sort_key
from .event import Messages

__all__ = ["extract"]


def extract(events: Iterable[Any], as_pandas: bool = False) -> list[tuple[Any, Any]]:
    """``[(time, records), ...]`` in time order, the records of each time sorted when
    they can be (else in arrival order).  For a columnar stream (records that are
    ``pyarrow.RecordBatch``) each time's records come as one ``pyarrow.Table`` in
    arrival order -- or, with ``as_pandas=True``, one pandas DataFrame.

    >>> from timely_spark.capture import Messages, Progress
    >>> extract([Messages(1, ["b"]), Progress([(0, 1)]), Messages(0, ["z"]), Messages(1, ["a"])])
    [(0, ['z']), (1, ['a', 'b'])]
    >>> import pyarrow as pa
    >>> extract([Messages(0, [pa.record_batch({"x": [1]}), pa.record_batch({"x": [2]})])], as_pandas=True)
    [(0,    x
    0  1
    1  2)]
    """
    by_time: dict[Any, list] = {}
    for event in events:
        if isinstance(event, Messages):
            by_time.setdefault(event.time, []).extend(event.data)
    out = []
    for t in sorted(by_time, key=sort_key):
        data = by_time[t]
        if data and isinstance(data[0], pa.RecordBatch):
            table = pa.Table.from_batches(data)
            out.append((t, table.to_pandas() if as_pandas else table))
            continue
        try:
            data = sorted(data)
        except TypeError:
            pass
        out.append((t, data))
    return out
