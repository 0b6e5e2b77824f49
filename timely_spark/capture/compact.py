"""Compaction and retention of a Parquet event log: fewer, larger files; old times dropped.

A log written every second by every worker grows in many small files.
:func:`compact` rewrites, per worker, the longest run of its first files whose data is
all at *complete* times (the log's frontier has passed them) -- leaving out the
leading compacted files that hold at least a quarter of the rows of what follows them
(:data:`COMPACT_FANOUT`: tiers, as in a log-structured merge tree) -- into one file named
``part-<first>-<last>.parquet`` (it stands for parts ``first`` to ``last``): the files'
data rows in their order, then their progress updates consolidated (summed per time).
The file appears whole (written under a hidden name, then renamed); readers take it in
place of the files it replaces (:func:`~timely_spark.capture.parquet.part_files`), and
an index that had read those files starts over from the new listing (the frontier and
the rows of every complete time are the same).

So a compaction rewrites what is new since the last one (the small files after the
compacted ones), and merges compacted files only once the files after one of them hold
:data:`COMPACT_FANOUT` times its rows: a worker keeps a few compacted files per tier
(each tier about ``COMPACT_FANOUT + 1`` times the rows of the next), and a row is
rewritten about ``log(rows of the log) / log(COMPACT_FANOUT + 1)`` times over its life,
not at every compaction.

A time not yet complete is never in a compacted file, so the writer (which only appends
newer part files) runs on untouched.

``retain_before`` (a frontier every consumer has passed) also drops the data rows at
the times complete at it; their progress stays, so the frontier is unchanged.  It must
not pass the log's frontier: retention never drops an incomplete time
(``EventLogError`` otherwise).

**What a reader that is behind sees.**  The replaced files stay for ``grace`` seconds
(:data:`~timely_spark.capture.log_files.COMPACT_GRACE`) after the compacted file appears, so a
Spark read planned on them, or a ``ParquetEventReader`` in the middle of them, finishes
with the files it started on; after that they are removed by the next compaction.  A
reader that resumes from a frontier (``readStream``'s offsets, ``follow(since=)``) is
never affected: it reads the compacted file and takes only the times it has not had.  A
``ParquetEventReader`` that comes back after the grace period, from inside a compacted
range, fails with ``EventLogError`` naming the compacted file.  After retention, a
reader starting below ``retain_before`` sees those times complete and empty.

>>> import tempfile
>>> from timely_spark.capture import LogIndex, Messages, ParquetEventWriter, Progress
>>> path = tempfile.mkdtemp()
>>> w = ParquetEventWriter(path, flush_seconds=0.0)
>>> for t in range(5):
...     w.push(Messages(t, [{"x": t}])); w.push(Progress([(t, -1), (t + 1, 1)]))
>>> compact(path, min_files=2, grace=0.0)["compacted"], sorted(p.name for p in (Path(path) / "worker=0").glob("part-*"))
(5, ['part-000000-000004.parquet'])
>>> snap = LogIndex(path).snapshot()
>>> snap.frontier, sum(s.rows for s in snap.complete())
(Antichain([5]), 5)
"""

from __future__ import annotations

import json
import math
import os
import time as _time
import uuid
from pathlib import Path
from typing import Any, Optional

from ..errors import EventLogError, ParameterError
from ..progress import Antichain, timestamp
from .arrow_times import mask_at
from .log_files import COMPACT_GRACE
from .log_index import LogIndex, LogSnapshot, local_path
from .parquet import not_started, part_range, worker_dirs
from .part_file import DATA, PROGRESS, open_part, read_columns

__all__ = ["compact", "compact_due"]

#: Files of a worker (all at complete times) that make a compaction worth doing.
COMPACT_MIN_FILES = 16

#: A worker's compacted file is merged again only once the files after it hold this
#: many times its rows (data rows and progress updates): up to about this many
#: compacted files per tier, each tier this plus one times the rows of the next.
COMPACT_FANOUT = 4


def _frontier(value: Any) -> Antichain:
    if isinstance(value, Antichain):
        return value
    if isinstance(value, (list, tuple, set)) and not hasattr(value, "_fields"):
        return Antichain(value)
    return Antichain([value])


def compact(path: Any, retain_before: Any = None, min_files: int = COMPACT_MIN_FILES,
            grace: float = COMPACT_GRACE) -> dict:
    """Compact the event log at ``path`` (see the module's docstring): per worker, its
    first files whose data is at complete times, after the compacted files a compaction
    leaves alone (:data:`COMPACT_FANOUT`), become one file, if there are at least
    ``min_files`` of them (or data to drop); ``retain_before`` (a frontier: an Antichain,
    a list of times or one time) drops the data at times complete at it; replaced files
    older than ``grace`` seconds are removed.  Safe while the writers and readers run;
    run one compaction of a log at a time.  Returns counts: ``compacted`` (files
    replaced now), ``dropped`` (data rows), ``removed`` (replaced files deleted).

    >>> import tempfile
    >>> compact(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    timely_spark.errors.EventLogError: ...: an empty directory: the event log has not started yet ...
    """
    if isinstance(min_files, bool) or not isinstance(min_files, int) or min_files < 1:
        raise ParameterError(f"compact: min_files must be a whole number >= 1, got {min_files!r}", "min_files")
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 <= grace < math.inf:
        raise ParameterError(f"compact: grace must be a finite number of seconds >= 0, got {grace!r}", "grace")
    root = Path(local_path(path))
    dirs = worker_dirs(root)
    counts = {"compacted": 0, "dropped": 0, "removed": 0}
    if not_started(root):
        return counts                      # no part file yet: nothing to compact
    snap = LogIndex(root).snapshot()
    retain = _frontier(retain_before) if retain_before is not None else None
    if retain is not None and not all(retain.less_equal(f) for f in snap.frontier):
        raise EventLogError(f"{root}: retain_before {retain.elements()} is past the log's frontier "
                            f"{snap.frontier.elements()}: times from there on are not complete, and retention "
                            "never drops an incomplete time")
    by_path = {part.path: part for part in snap.parts}
    for folder in dirs:
        files = [p for p in _accepted(folder, snap) if str(p) in by_path]
        run = []
        for p in files:
            part = by_path[str(p)]
            if any(snap.frontier.less_equal(t) for t in part.times):
                break
            run.append(part)
        run = _merged_tail(run, retain)
        drop = [] if retain is None else sorted({plain for part in run for t, plain in zip(part.times, part.plain)
                                                 if not retain.less_equal(t)}, key=str)
        if not run or (len(run) < min_files and not drop) or (len(run) == 1 and not drop):
            pass
        else:
            counts["dropped"] += _rewrite(folder, run, drop, snap)
            counts["compacted"] += len(run)
        counts["removed"] += _remove_replaced(folder, grace)
    return counts


def _merged_tail(run: list, retain: Optional[Antichain]) -> list:
    """The part of ``run`` (a worker's first files, at complete times) to rewrite: a
    leading compacted file stays as it is while the files after it hold fewer than
    :data:`COMPACT_FANOUT` times its rows and retention drops nothing from it.  Rows,
    not bytes: a small file's bytes are mostly its footer, which compaction does not
    copy, so bytes would rate a compacted file too small to keep."""
    weights = [sum(part.counts) + len(part.progress) for part in run]
    start = 0
    while start < len(run):
        part = run[start]
        first, last = part_range(Path(part.path).name) or (0, 0)
        keeps = retain is None or all(retain.less_equal(t) for t in part.times)
        if last > first and keeps and COMPACT_FANOUT * weights[start] >= sum(weights[start + 1:]):
            start += 1
        else:
            break
    return run[start:]


def _accepted(folder: Path, snap: LogSnapshot) -> list[Path]:
    """The worker's files the snapshot took, in order (compacted ones in place of what they replace)."""
    return [Path(part.path) for part in snap.parts if Path(part.path).parent == folder]


def _rewrite(folder: Path, run: list, drop: list, snap: LogSnapshot) -> int:
    """Write the compacted file for the files ``run`` (data rows at plain times ``drop``
    left out); returns how many data rows were dropped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables, meta = [], None
    for part in run:
        with open_part(part.path) as handle:
            if meta is None:
                meta = json.loads(handle.schema_arrow.metadata[b"timely"])
            tables.append(read_columns(part.path, handle))
    table = pa.concat_tables([t.replace_schema_metadata(None) for t in tables])
    is_data = pc.equal(table["kind"], DATA)
    data = table.filter(is_data)
    before = data.num_rows
    if drop:
        time_type = table.schema.field("time").type
        data = data.filter(pc.invert(mask_at(data["time"], pa.array(drop, time_type))))
    progress = table.filter(pc.invert(is_data))
    consolidated: dict[str, list] = {}
    for plain, diff in zip(progress["time"].to_pylist(), progress["diff"].to_pylist()):
        key = json.dumps(plain, sort_keys=True)
        entry = consolidated.setdefault(key, [plain, 0])
        entry[1] += diff
    updates = [(plain, d) for plain, d in consolidated.values() if d != 0]
    last_seq = int(pc.max(table["seq"]).as_py()) if table.num_rows else 0
    n = len(updates)
    columns = {"seq": pa.array([last_seq] * n, pa.int64()), "kind": pa.array([PROGRESS] * n, pa.int8()),
               "time": pa.array([u[0] for u in updates], table.schema.field("time").type),
               "diff": pa.array([u[1] for u in updates], pa.int64())}
    for f in table.schema:
        if f.name not in columns:
            columns[f.name] = pa.nulls(n, f.type)
    rows = pa.Table.from_arrays([columns[f.name] for f in table.schema], schema=table.schema)
    out = pa.concat_tables([data, rows])
    first, _ = part_range(Path(run[0].path).name) or (0, 0)
    _, last = part_range(Path(run[-1].path).name) or (0, 0)
    assert meta is not None
    meta = {**meta, "part": first, "through": last}
    _check_desc(meta, snap)
    _write(folder / f"part-{first:06d}-{last:06d}.parquet", out.replace_schema_metadata(
        {b"timely": json.dumps(meta).encode()}))
    return before - data.num_rows


def _check_desc(meta: dict, snap: LogSnapshot) -> None:
    if meta.get("time") != snap.desc:
        raise EventLogError(f"{snap.path}: times {meta.get('time')} where the log has {snap.desc}")
    timestamp.minimum_described(snap.desc)


def _write(final: Path, table: Any) -> None:
    import pyarrow.parquet as pq

    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, final)


def _remove_replaced(folder: Path, grace: float) -> int:
    """Delete files a compacted file replaced ``grace`` seconds ago or more (counted from
    the oldest compacted file that covers them: later compactions, which cover them
    again, do not put their removal off)."""
    spans = []
    for p in folder.iterdir():
        span = part_range(p.name)
        if span is not None:
            spans.append((span, p))
    covering = [(span, p, _mtime(p)) for span, p in spans if span[1] > span[0]]
    removed = 0
    now = _time.time()
    for span, p in spans:
        since = min((made for (first, last), big, made in covering
                     if big != p and first <= span[0] and span[1] <= last), default=None)
        if since is not None and now - since >= grace:
            p.unlink(missing_ok=True)
            removed += 1
    return removed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return math.inf               # gone: it covers nothing any more


def compact_due(path: Any, every: int) -> Optional[dict]:
    """Compact ``path`` if a worker has ``every`` or more part files after its last
    compacted one (a writer's ``compact_every`` option); None if not due."""
    root = Path(local_path(path))
    for folder in worker_dirs(root):
        spans = [s for s in (part_range(p.name) for p in folder.iterdir()) if s is not None]
        done = max((last for first, last in spans if last > first), default=-1)
        if sum(1 for first, last in spans if first > done) >= every:
            return compact(root, min_files=every)
    return None
