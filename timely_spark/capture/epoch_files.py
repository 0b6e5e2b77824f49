"""Part files of an event log built from whole Arrow tables: what a writer that is
not a capturing timely worker (the Structured Streaming sink, compaction) writes.

The files are the ones :class:`~timely_spark.capture.ParquetEventWriter` writes (same
columns, same ``timely`` metadata, see :mod:`.parquet`), with the ``arrow`` record
layout; every record column is nullable (progress rows hold nulls there).  A file is
written under a hidden temporary name in its final directory and renamed into place,
so a reader sees all of it or none of it.

>>> import tempfile, pyarrow as pa
>>> from timely_spark.capture import LogIndex
>>> path = tempfile.mkdtemp()
>>> records = record_schema(pa.schema([("x", pa.int64())]))
>>> meta = dict(worker=0, peers=1, stream="s")
>>> _ = write_part(f"{path}/worker=0", 0, data_table(pa.table({"x": [1, 2]}), 0, records), **meta)
>>> _ = write_part(f"{path}/worker=0", 1, progress_table([(0, -1), (1, 1)], records), **meta)
>>> LogIndex(path).snapshot().frontier
Antichain([1])
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from ..errors import EventLogError
from .parquet import RESERVED
from .part_file import DATA, FORMAT, PROGRESS

__all__ = ["RESERVED", "record_schema", "log_schema", "data_table", "progress_table", "write_part", "part_name"]



def part_name(number: int) -> str:
    """The file name of part ``number`` of a worker's stream."""
    return f"part-{number:06d}.parquet"


def record_schema(schema: Any, where: Any = "the records") -> Any:
    """``schema`` (Arrow) as a log's record columns: every field nullable, no metadata;
    EventLogError naming a column that clashes with the log's own columns or appears twice."""
    import pyarrow as pa

    names = list(schema.names)
    for name in names:
        if name in RESERVED:
            raise EventLogError(f"{where}: column {name!r} clashes with the event log's own columns {RESERVED} "
                                "(rename it, e.g. .withColumnRenamed)")
        if names.count(name) > 1:
            raise EventLogError(f"{where}: column {name!r} appears twice; an event log's columns have distinct names")
    return pa.schema([pa.field(f.name, f.type, nullable=True) for f in schema])


def log_schema(records: Any) -> Any:
    """The Arrow schema of a part file whose record columns are ``records`` (int times)."""
    import pyarrow as pa

    base = [pa.field("seq", pa.int64()), pa.field("kind", pa.int8()), pa.field("time", pa.int64()),
            pa.field("diff", pa.int64())]
    return pa.schema(base + list(records))


def data_table(table: Any, time: int, records: Any, seq: int = 0) -> Any:
    """Data rows of the log at int ``time`` holding ``table``'s rows (cast to the record
    schema ``records``; one event: every row has sequence number ``seq``)."""
    import pyarrow as pa

    n = table.num_rows
    try:
        body = table.select(records.names).cast(records)
    except (pa.ArrowException, KeyError, ValueError) as exc:
        raise EventLogError(f"rows at time {time}: their columns {table.schema.names} do not fit the log's "
                            f"{records.names} ({exc})") from exc
    head = {"seq": pa.array([seq] * n, pa.int64()),
            "kind": pa.array([DATA] * n, pa.int8()),
            "time": pa.array([time] * n, pa.int64()),
            "diff": pa.nulls(n, pa.int64())}
    columns = list(head.values()) + [body.column(i).combine_chunks() for i in range(body.num_columns)]
    return pa.Table.from_arrays(columns, schema=log_schema(records))


def progress_table(updates: list, records: Any, seq: int = 0) -> Any:
    """One progress event (``(int time, diff)`` updates) as the log's rows."""
    import pyarrow as pa

    n = len(updates)
    columns = [pa.array([seq] * n, pa.int64()), pa.array([PROGRESS] * n, pa.int8()),
               pa.array([t for t, _ in updates], pa.int64()), pa.array([d for _, d in updates], pa.int64())]
    columns += [pa.nulls(n, f.type) for f in records]
    return pa.Table.from_arrays(columns, schema=log_schema(records))


def write_part(directory: Any, number: int, table: Any, worker: int, peers: int, stream: str,
               extra: Any = None) -> Path:
    """Write ``table`` as part ``number`` of worker ``worker``'s stream ``stream`` in
    ``directory`` (made if missing), atomically; returns the file's path.  ``extra``
    (a dict) is added to the file's ``timely`` metadata."""
    import pyarrow.parquet as pq

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"format": FORMAT, "time": "int", "records": "arrow", "worker": worker, "peers": peers,
            "stream": stream, "part": number, **(extra or {})}
    final = folder / part_name(number)
    tmp = folder / f".{part_name(number)}.{uuid.uuid4().hex}.tmp"
    pq.write_table(table.replace_schema_metadata({b"timely": json.dumps(meta).encode()}), tmp)
    os.replace(tmp, final)
    return final
