"""One part file of a Parquet event log: opened without ever blocking, its footer read
and checked, its rows checked -- so that a damaged or crafted file is an
``EventLogError`` naming it and what is wrong, never a hang, a raw ``TypeError`` or a
silently wrong frontier.

Only regular files are read: :func:`open_part` opens without blocking (``O_NONBLOCK``:
a FIFO named like a part file does not wait for a writer) and refuses anything that is
not a regular file.  :func:`check_meta` checks a footer's ``timely`` metadata against the
file's own columns; :func:`check_rows` checks the ``kind``, ``time`` and ``diff``
columns (one vectorized Arrow pass each).

>>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
>>> path = tempfile.mkdtemp() + "/part-000000.parquet"
>>> pq.write_table(pa.table({"x": [1]}), path)
>>> with open_part(path) as part:
...     check_meta(path, part.schema_arrow)
Traceback (most recent call last):
...
timely_spark.errors.EventLogError: ...part-000000.parquet: not part of a timely_spark event log (no timely metadata)
"""

from __future__ import annotations

import json
import os
import stat
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from ..errors import EventLogError
from ..progress import timestamp

__all__ = ["FORMAT", "LAYOUTS", "DATA", "PROGRESS", "THREADED_READ_ROWS", "READ_BATCH_ROWS", "open_part",
           "read_columns", "read_batches", "check_meta", "check_rows"]

FORMAT = "timely_spark.event_log.v1"

#: The record layouts a log's metadata may name (``none``: no data row yet).
LAYOUTS = ("arrow", "dict", "tuple", "value", "pickle", "none")

#: The ``kind`` of a data row and of a progress row.
DATA, PROGRESS = 0, 1

#: Files of fewer rows are decoded on the calling thread: for a small file, Arrow's
#: thread pool costs several times the read itself (a log of many small files).
THREADED_READ_ROWS = 65_536

#: A file of more rows is read in batches of this many rows where a reader needs only
#: a pass over it (:func:`read_batches`): memory bounded by the batch, not the file.
READ_BATCH_ROWS = 65_536

#: Part files up to this many bytes are read whole into memory before parsing.
SMALL_FILE = 1 << 20

_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


@contextmanager
def open_part(file: Any) -> Iterator[Any]:
    """``file`` as a ``pyarrow.parquet.ParquetFile``, closed on leaving; EventLogError
    naming it if it cannot be opened, is not a regular file, or is not Parquet.  The
    open never blocks, whatever the name points to."""
    import pyarrow.parquet as pq

    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise EventLogError(f"{file}: cannot be opened ({exc})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = next((name for test, name in _NOT_REGULAR if test(info.st_mode)), "not a regular file")
            raise EventLogError(f"{file}: named like a part file but {what}, not a regular file: only regular "
                                "files are read")
        if info.st_size > SMALL_FILE:
            handle = os.fdopen(fd, "rb")         # closes fd
        else:
            handle = _whole_file(fd, info.st_size)
            os.close(fd)
    except BaseException:
        os.close(fd)
        raise
    with handle:
        try:
            part = pq.ParquetFile(handle)
        except Exception as exc:
            raise EventLogError(f"{file}: not a readable Parquet file ({exc})") from exc
        yield part


def _whole_file(fd: int, size: int) -> Any:
    """A small file's bytes, read at once, as an Arrow buffer reader (parsing a
    footer from memory beats many small reads)."""
    import pyarrow as pa

    chunks = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return pa.BufferReader(b"".join(chunks))


def read_columns(file: Any, part: Any, columns: Optional[list] = None) -> Any:
    """``columns`` (None: all) of the open part file ``part`` as an Arrow table;
    EventLogError naming ``file`` if they cannot be read."""
    try:
        return part.read(columns=columns, use_threads=part.metadata.num_rows >= THREADED_READ_ROWS)
    except Exception as exc:
        raise EventLogError(f"{file}: cannot be read ({exc})") from exc


def read_batches(file: Any, part: Any, columns: list) -> Iterator[Any]:
    """``columns`` of the open part file ``part`` as Arrow tables of at most
    :data:`READ_BATCH_ROWS` rows each, in order (one table for a small file);
    EventLogError naming ``file`` if they cannot be read."""
    import pyarrow as pa

    if part.metadata.num_rows <= READ_BATCH_ROWS:
        yield read_columns(file, part, columns)
        return
    batches = part.iter_batches(batch_size=READ_BATCH_ROWS, columns=columns, use_threads=False)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:
            raise EventLogError(f"{file}: cannot be read ({exc})") from exc
        yield pa.Table.from_batches([batch])


def _whole(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def check_meta(file: Any, schema: Any) -> dict:
    """The ``timely`` metadata of a part file whose Arrow schema is ``schema``, checked:
    a JSON object of this log format, a worker index below a worker count >= 1, a known
    record layout, and a time type that is a timestamp type and the type of the file's
    ``time`` column (``seq``, ``kind``, ``diff`` typed as a writer writes them)."""
    import pyarrow as pa

    raw = (schema.metadata or {}).get(b"timely")
    if raw is None:
        raise EventLogError(f"{file}: not part of a timely_spark event log (no timely metadata)")
    try:
        meta = json.loads(raw)
    except RecursionError:
        raise EventLogError(f"{file}: its timely metadata is nested too deeply to be an event log's") from None
    except ValueError as exc:
        raise EventLogError(f"{file}: its timely metadata is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise EventLogError(f"{file}: its timely metadata is a JSON {type(meta).__name__}, not an object")
    if meta.get("format") != FORMAT:
        raise EventLogError(f"{file}: unknown event log format {meta.get('format')!r}")
    worker, peers = meta.get("worker"), meta.get("peers")
    if not (_whole(peers, 1) and _whole(worker, 0) and worker < peers):  # type: ignore[operator]
        raise EventLogError(f"{file}: its metadata names worker {worker!r} of {peers!r} workers (a worker index "
                            "0 <= worker < peers is needed)")
    if meta.get("records") not in LAYOUTS:
        raise EventLogError(f"{file}: unknown record layout {meta.get('records')!r} (one of {LAYOUTS})")
    if not isinstance(meta.get("stream"), str) or not _whole(meta.get("part"), 0):
        raise EventLogError(f"{file}: its metadata lacks the writer's stream id or the file's number")
    desc = meta.get("time")
    try:
        expected = timestamp.arrow_type(desc)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError):
        raise EventLogError(f"{file}: its metadata's time type {str(desc)[:200]!r} is not a timestamp type") from None
    columns = {"seq": pa.int64(), "kind": pa.int8(), "time": expected, "diff": pa.int64()}
    for name, type_ in columns.items():
        found = schema.field(name).type if name in schema.names else None
        if found != type_:
            need = f"but the metadata's time type {desc!r} needs {type_}" if name == "time" else f"not {type_}"
            raise EventLogError(f"{file}: column {name!r} is {found or 'missing'}, {need}")
    return meta


def check_rows(file: Any, table: Any) -> None:
    """EventLogError naming ``file`` unless its ``kind``, ``time`` and ``diff`` columns
    (in ``table``) are an event log's: kinds 0 (data) and 1 (progress) only, no null or
    negative time, and a count on every progress row (numpy over whole columns: cheap
    for the many small files of a log)."""
    import numpy as np

    from .arrow_times import leaves

    kind = table["kind"]
    if kind.null_count:
        raise EventLogError(f"{file}: {kind.null_count} rows without a kind (kind is null)")
    kinds = kind.to_numpy()
    if len(kinds) and (kinds.min() < DATA or kinds.max() > PROGRESS):
        bad = sorted(set(np.unique(kinds).tolist()) - {DATA, PROGRESS})
        raise EventLogError(f"{file}: rows of kind {bad} (0 is a data row, 1 a progress update)")
    if table["time"].null_count:
        raise EventLogError(f"{file}: {table['time'].null_count} rows without a time (time is null)")
    for name, leaf in leaves(table["time"], "time").items():
        if leaf.null_count:
            raise EventLogError(f"{file}: {leaf.null_count} rows without a time ({name} is null)")
        values = leaf.to_numpy()
        if len(values) and values.min() < 0:
            raise EventLogError(f"{file}: a negative time ({name} = {values.min()}): times start at 0")
    diff = table["diff"]
    if diff.null_count:
        missing = int(np.count_nonzero(np.isnan(diff.to_numpy().astype(float)[kinds == PROGRESS])))
        if missing:
            raise EventLogError(f"{file}: {missing} progress rows without a count (diff is null)")
