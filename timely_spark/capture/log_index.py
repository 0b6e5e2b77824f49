"""What a Parquet event log holds at one moment: its checked part files, the times each
file has data at, and the frontier the files' own progress proves -- the one reader that
Spark's batch and streaming reads (and ``read_event_log`` / ``event_log_frontier``) share.

A :class:`LogIndex` scans a log directory and remembers what it learnt: a part file is
read once (its ``kind``, ``time`` and ``diff`` columns), later scans only list the
directories and read the new files.  Each :meth:`LogIndex.snapshot` is a *consistent
cut*: the frontier is computed from exactly the files listed, so every row of a time
complete at that frontier is in those files (a worker writes a time's data before the
progress that completes it, and files never change once they appear).

A time ``t`` is complete at a frontier ``F`` when no element of ``F`` is ``<= t`` (in the
partial order of the log's time type); the rows that became complete between two
frontiers ``S`` and ``E`` (``E`` later) are those at times ``t`` with some element of ``S``
``<= t`` and none of ``E``: :meth:`LogSnapshot.scans` plans exactly those, per file.

>>> import tempfile
>>> from timely_spark.capture import Messages, ParquetEventWriter, Progress
>>> path = tempfile.mkdtemp()
>>> w = ParquetEventWriter(path, flush_seconds=0.0)
>>> w.push(Messages(0, [{"x": 1}])); w.push(Messages(1, [{"x": 2}])); w.push(Progress([(0, -1), (1, 1)]))
>>> snap = LogIndex(path).snapshot()
>>> snap.frontier, [(s.times, s.rows) for s in snap.complete()], [(s.times, s.rows) for s in snap.scans()]
(Antichain([1]), [([0], 1)], [(None, 2)])
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..progress import Antichain, MutableAntichain, timestamp
from .arrow_times import time_counts
from .parquet import EventLogError, log_files, read_meta

__all__ = ["LogIndex", "LogSnapshot", "PartSummary", "Scan", "local_path"]


def local_path(path: Any) -> str:
    """A log path as a local directory name (``file:`` URIs accepted)."""
    text = str(path)
    if text.startswith("file://"):
        return text[len("file://"):]
    if text.startswith("file:"):
        return text[len("file:"):]
    return text


@dataclass(frozen=True)
class PartSummary:
    """One part file: who wrote it, the distinct times of its data rows (as times and as
    plain Arrow values) with their row counts, and its progress updates in order."""

    path: str
    worker: int
    stream: str
    stat: tuple[int, int]
    times: list
    plain: list
    counts: list
    progress: list


@dataclass(frozen=True)
class Scan:
    """Rows to read from one part file: its data rows at the plain times ``times``
    (None: all of its data rows) -- ``rows`` of them.  Small and picklable: it is what
    travels to Spark's executors."""

    path: str
    worker: int
    times: Optional[list]
    rows: int


class LogSnapshot:
    """The checked part files of a log at one moment and the frontier they prove.

    ``desc`` is the time type's description, ``peers`` the number of capturing
    workers, ``streams`` each worker's writer identity, ``frontier`` the times that may
    still appear (empty once every writer's stream ended)."""

    def __init__(self, path: str, desc: Any, peers: int, parts: list, frontier: Antichain,
                 streams: dict) -> None:
        self.path, self.desc, self.peers = path, desc, peers
        self.parts: list[PartSummary] = parts
        self.frontier = frontier
        self.streams: dict[int, str] = streams

    def scans(self, since: Optional[Antichain] = None, upto: Optional[Antichain] = None) -> list[Scan]:
        """The data rows at times ``t`` that are not complete at ``since`` (some element
        ``<= t``; None: the start of the log, where nothing is complete) and complete at
        ``upto`` (no element ``<= t``; None: every row written so far), per file, in
        file order; files with no such row are left out."""
        out = []
        for part in self.parts:
            keep = [i for i, t in enumerate(part.times)
                    if (since is None or since.less_equal(t)) and (upto is None or not upto.less_equal(t))]
            if not keep:
                continue
            rows = sum(part.counts[i] for i in keep)
            times = None if len(keep) == len(part.times) else [part.plain[i] for i in keep]
            out.append(Scan(part.path, part.worker, times, rows))
        return out

    def complete(self) -> list[Scan]:
        """The data rows at times complete at this snapshot's frontier."""
        return self.scans(upto=self.frontier)


class LogIndex:
    """An event log directory, scanned incrementally (see the module's docstring).

    ``desc`` (the time type, as :func:`timely_spark.progress.timestamp.describe` gives it)
    lets a snapshot of a log with no part files yet -- or no directory yet: a stream may
    start before the job -- say its frontier (the minimum time); without it such a log
    is an :class:`EventLogError`.  A file that changes or goes
    away after it was read (the log was rewritten) starts the index over; a damaged,
    foreign or missing file raises ``EventLogError`` naming it (see
    :func:`timely_spark.capture.parquet.log_files`).
    """

    def __init__(self, path: Any, desc: Any = None) -> None:
        self.path = local_path(path)
        self.desc = desc
        self._metas: dict[str, tuple[tuple[int, int], dict]] = {}
        self._reset()

    def _reset(self) -> None:
        self._parts: dict[int, list[PartSummary]] = {}
        self._frontiers: dict[int, MutableAntichain] = {}

    def _meta(self, file: Path) -> dict:
        """A part file's metadata, read once per (size, modification time)."""
        key = str(file)
        stat = _stat(file)
        cached = self._metas.get(key)
        if cached is None or cached[0] != stat:
            cached = (stat, read_meta(file))
            self._metas[key] = cached
        return cached[1]

    def snapshot(self) -> LogSnapshot:
        """The log as it is now: its checked part files, summarized, and their frontier."""
        if self.desc is not None and not _started(Path(self.path)):
            start = timestamp.minimum_described(self.desc)
            return LogSnapshot(self.path, self.desc, 0, [], Antichain([start]), {})
        files = log_files(self.path, self._meta)
        if not files and self.desc is None:
            raise EventLogError(f"{self.path}: the event log has no part files yet")
        by_worker: dict[int, list[Path]] = {}
        for f in files:
            by_worker.setdefault(int(self._meta(f)["worker"]), []).append(f)
        if not self._still_valid(by_worker):
            self._reset()
        first = self._meta(files[0]) if files else None
        desc = first["time"] if first is not None else self.desc
        if self.desc is not None and first is not None and desc != self.desc:
            raise EventLogError(f"{files[0]}: times are {desc}, expected {self.desc}")
        peers = int(first["peers"]) if first is not None else 0
        start = timestamp.minimum_described(desc)
        for w in range(peers):
            self._frontiers.setdefault(w, MutableAntichain([(start, 1)]))
        for w, worker_files in sorted(by_worker.items()):
            known = self._parts.setdefault(w, [])
            for f in worker_files[len(known):]:
                part = self._summarize(f, desc, peers)
                known.append(part)
                self._frontiers.setdefault(w, MutableAntichain([(start, 1)])).update_iter(part.progress)
        frontier = Antichain()
        for w in sorted(self._frontiers):
            for t in self._frontiers[w].elements():
                frontier.insert(t)
        if peers == 0:
            frontier.insert(start)
        parts = [p for w in sorted(self._parts) for p in self._parts[w]]
        streams = {w: ps[0].stream for w, ps in self._parts.items() if ps}
        return LogSnapshot(self.path, desc, peers, parts, frontier, streams)

    def _still_valid(self, by_worker: dict) -> bool:
        """Whether every file read before is still there, unchanged, at its place."""
        for w, known in self._parts.items():
            files = by_worker.get(w, [])
            if len(files) < len(known):
                return False
            for part, f in zip(known, files):
                if part.path != str(f) or part.stat != _stat(f):
                    return False
        return True

    def _summarize(self, file: Path, desc: Any, peers: int) -> PartSummary:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        meta = self._meta(file)
        if meta["time"] != desc or int(meta["peers"]) != peers:
            raise EventLogError(f"{file}: times {meta['time']} of {meta['peers']} workers, where the log has "
                                f"times {desc} of {peers} workers")
        try:
            table = pq.read_table(file, columns=["kind", "time", "diff"])
        except Exception as exc:
            raise EventLogError(f"{file}: cannot be read ({exc})") from exc
        is_data = pc.equal(table["kind"], 0)
        plain, counts = time_counts(table["time"].filter(is_data))
        progress = table.filter(pc.invert(is_data))
        updates = [(timestamp.from_plain(t, desc), int(d))
                   for t, d in zip(progress["time"].to_pylist(), progress["diff"].to_pylist())]
        return PartSummary(str(file), int(meta["worker"]), str(meta.get("stream")), _stat(file),
                           [timestamp.from_plain(t, desc) for t in plain], plain, counts, updates)


def _started(root: Path) -> bool:
    """Whether a writer has made the log's directory and a ``worker=<i>`` directory in it."""
    return root.is_dir() and any(p.name.startswith("worker=") for p in root.iterdir())


def _stat(file: Path) -> tuple[int, int]:
    try:
        st = os.stat(file)
    except OSError as exc:
        raise EventLogError(f"{file}: went away while the log was read ({exc})") from exc
    return st.st_size, st.st_mtime_ns
