"""The files of a Parquet event log: its ``worker=<i>`` directories, each worker's part
files in order (checked to be its own, compacted files in place of what they replace),
and each file's checked footer -- what every reader and the writers share (see
:mod:`.parquet` for the layout).

>>> part_range("part-000003.parquet"), part_range("part-000000-000004.parquet"), part_range("x.parquet")
((3, 3), (0, 4), None)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Optional

from ..errors import EventLogError
from .part_file import check_meta, open_part

__all__ = ["RESERVED", "worker_dirs", "not_started", "read_footer", "read_meta", "is_changelog", "part_range",
           "part_files", "worker_files", "missing_workers", "log_files"]

#: Seconds the files a compacted file replaces are kept after it appears, so that reads
#: planned on them (a Spark job's tasks, a reader in the middle of them) can finish.
COMPACT_GRACE = 60.0

#: The event log's own columns (a record field may not take these names).
RESERVED = ("seq", "kind", "time", "diff", "worker")
_PART = re.compile(r"^part-(\d{6,})(?:-(\d{6,}))?\.parquet$")     # part-<n>, or part-<first>-<last> (compacted)
_WORKER = re.compile(r"^worker=(\d+)$")


def worker_dirs(path: Any) -> list[Path]:
    """The ``worker=<i>`` directories of an event log, by worker index; EventLogError if
    there is no directory, an empty one (the log has not started) or one that is not a log."""
    root = Path(path)
    if not root.is_dir():
        raise EventLogError(f"{root}: no such directory")
    found = []
    entries = list(root.iterdir())
    for p in entries:
        m = _WORKER.match(p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    if not entries:
        raise EventLogError(f"{root}: an empty directory: the event log has not started yet (no worker=<i> "
                            "directory)")
    if not found and {p.name for p in entries} == {"_sink"}:      # epoch_log.SINK_DIR (importing it would cycle)
        raise EventLogError(f"{root}: the timely sink has committed no micro-batch here yet: nothing to read "
                            "before its streaming query's first commit")
    if not found:
        raise EventLogError(f"{root}: not a timely_spark event log (not an event log: no worker=<i> directories)")
    return [p for _, p in sorted(found)]


def not_started(path: Any) -> bool:
    """Whether ``path`` is an event log that has not started: no directory yet, an empty
    one, or ``worker=<i>`` directories without a part file yet."""
    root = Path(path)
    entries = list(root.iterdir()) if root.is_dir() else []
    dirs = [p for p in entries if _WORKER.match(p.name) and p.is_dir()]
    return not entries or bool(dirs) and not any(_PART.match(f.name) for d in dirs for f in d.iterdir())


def read_footer(file: Any) -> tuple[dict, Any]:
    """The checked timely metadata of one part file (format, time type, record layout,
    worker, peers: see :func:`.part_file.check_meta`) and its Arrow schema (without
    metadata); EventLogError naming the file and what is wrong."""
    with open_part(file) as part:
        schema = part.schema_arrow
    return check_meta(file, schema), schema.remove_metadata()



def is_changelog(meta: dict) -> bool:
    """Whether a part file (its metadata ``meta``) holds a changelog: record batches whose
    ``diff`` column is stored in the log's ``diff`` column on data rows."""
    return bool(meta.get("changelog"))


def read_meta(file: Any) -> dict:
    """The checked timely metadata of one part file (see :func:`read_footer`)."""
    return read_footer(file)[0]


def part_range(name: str) -> Optional[tuple[int, int]]:
    """``(first, last)`` part numbers a file named ``name`` holds (``part-<n>.parquet``:
    ``(n, n)``; a compacted ``part-<first>-<last>.parquet``: the range), None if the name
    is not a part file's."""
    m = _PART.match(name)
    if not m:
        return None
    first = int(m.group(1))
    return first, int(m.group(2)) if m.group(2) is not None else first


def part_files(worker_dir: Path, meta: Callable[[Path], dict] = read_meta) -> list[Path]:
    """The part files of one worker's stream, in order, checked to be its own: each
    names this worker, the same stream (writer) as the first, and its own number, with
    no number missing.  Files not named like part files (another tool's, a writer's
    hidden temporary file) are ignored; a part file that is not this stream's raises
    EventLogError naming it.  ``meta`` reads a file's metadata (a caching reader may
    stand in for :func:`read_meta`).

    A compacted file ``part-<first>-<last>.parquet`` stands for parts ``first`` to
    ``last``: the files it replaces, while they are still there (compaction removes them
    after a grace period, see :mod:`.compact`), are left out."""
    numbered = []
    for p in worker_dir.iterdir():
        span = part_range(p.name)
        if span is not None and span[1] >= span[0]:
            numbered.append((span[0], -span[1], p))
    numbered.sort()
    stream = None
    expected_worker = int(worker_dir.name.split("=", 1)[1]) if worker_dir.name.startswith("worker=") else None
    out = []
    expected = 0
    for n, minus_last, p in numbered:
        last = -minus_last
        if n < expected:
            if last >= expected:
                raise EventLogError(f"{p}: holds parts {n} to {last}, overlapping another compacted file of "
                                    f"{worker_dir} (up to part {expected - 1})")
            continue                       # replaced by a compacted file
        info = meta(p)
        if expected_worker is not None and info.get("worker") != expected_worker:
            raise EventLogError(f"{p}: written by worker {info.get('worker')}, not by worker {expected_worker}")
        if stream is None:
            stream = info.get("stream")
        elif info.get("stream") != stream:
            raise EventLogError(f"{p}: a part file of another event log (stream {info.get('stream')}, "
                                f"not {stream})")
        if n != expected or info.get("part", n) != n or info.get("through", last) != last:
            raise EventLogError(f"{p}: part {n} where part {expected} was expected: the stream of {worker_dir} is "
                                "missing a file")
        out.append(p)
        expected = last + 1
    return out


def worker_files(path: Any, meta: Callable[[Path], dict] = read_meta) -> tuple[dict[int, list[Path]], int, list]:
    """The checked part files of a log by worker (see :func:`part_files`), its number of
    workers (from its first file; without files, the number of ``worker=<i>``
    directories) and the workers with no directory yet."""
    dirs = worker_dirs(path)
    by_worker = {int(d.name.split("=", 1)[1]): part_files(d, meta) for d in dirs}
    first = next((fs[0] for fs in by_worker.values() if fs), None)
    peers = int(meta(first)["peers"]) if first is not None else len(dirs)
    return by_worker, peers, [w for w in range(peers) if w not in by_worker]


def missing_workers(path: Any, peers: int, missing: list, why: str = "") -> EventLogError:
    """The error naming the workers of a log with no ``worker=<i>`` directory."""
    return EventLogError(f"{Path(path)}: the log has {peers} workers but no directory for worker(s) {missing} "
                         f"({', '.join(f'worker={w}' for w in missing)}){why}")


def log_files(path: Any, meta: Callable[[Path], dict] = read_meta) -> list[Path]:
    """Every part file of a log, checked (see :func:`part_files`), for all the workers
    that captured it; EventLogError naming a worker whose directory is missing."""
    by_worker, peers, missing = worker_files(path, meta)
    if missing:
        raise missing_workers(path, peers, missing)
    return [f for w in sorted(by_worker) for f in by_worker[w]]
