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

import json
import os
import threading
import time as _time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..errors import EventLogError
from ..progress import Antichain, MutableAntichain, timestamp
from .arrow_times import time_counts
from .log_files import missing_workers, worker_files
from .part_file import DATA, THREADED_READ_ROWS, check_meta, check_rows, open_part, read_batches

__all__ = ["LogIndex", "LogSnapshot", "PartSummary", "Scan", "local_path", "cached_part_files"]

#: Seconds a stream over an event log (``readStream.format("timely")`` with a schema)
#: waits for a capturing worker that has not made its ``worker=<i>`` directory yet
#: (its writer may start after the query; until it does, it holds the frontier back)
#: before the query fails with an ``EventLogError`` naming the worker.
MISSING_WORKER_WAIT = 600.0

#: Part files whose footer and summary (times, row counts, progress) one process keeps,
#: so that later reads of a log open only its new files (the least recently used are
#: forgotten first).
LOG_INDEX_CACHE_FILES = 200_000


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
    stat: tuple[int, ...]
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
    still appear (empty once every writer's stream ended), ``schema`` the files' Arrow
    schema."""

    def __init__(self, path: str, desc: Any, peers: int, parts: list, frontier: Antichain,
                 streams: dict, schema: Any = None) -> None:
        self.path, self.desc, self.peers = path, desc, peers
        self.schema = schema          # the Arrow schema of every part file (None: no file yet)
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


class _FileCache:
    """What reading a part file taught, per file and (size, modification time, inode):
    its metadata, schema and summary -- shared by every index of the process (a Spark
    planner makes a new one per action), at most :data:`LOG_INDEX_CACHE_FILES` files,
    and only files a listing of their directory still shows (:meth:`keep_only`): a
    follower of a log that compaction keeps small keeps its cache small."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: OrderedDict[str, tuple] = OrderedDict()
        self._by_dir: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, stat: tuple) -> Optional[tuple]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != stat:
                return None
            self._entries.move_to_end(key)
            return entry

    def put(self, key: str, entry: tuple) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            self._by_dir.setdefault(os.path.dirname(key), set()).add(key)
            while len(self._entries) > self.limit:
                self._drop(self._entries.popitem(last=False)[0])

    def _drop(self, key: str) -> None:
        directory = os.path.dirname(key)
        keys = self._by_dir.get(directory)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_dir[directory]

    def keep_only(self, directory: str, present: set[str]) -> None:
        """Forget the files of ``directory`` that are not in ``present`` (its listing now):
        compaction deleted them, or they were replaced."""
        with self._lock:
            keys = self._by_dir.get(directory)
            if not keys:
                return
            for key in keys - present:
                self._entries.pop(key, None)
            keys &= present
            if not keys:
                del self._by_dir[directory]

    def count(self, directory: str) -> int:
        with self._lock:
            return len(self._by_dir.get(directory, ()))


_FILES = _FileCache(LOG_INDEX_CACHE_FILES)


def cached_part_files(directory: Any) -> int:
    """How many part files of the worker directory ``directory`` (``<log>/worker=<i>``)
    this process keeps summaries of: at most those its last listing showed.

    >>> cached_part_files("/no/such/log/worker=0")
    0
    """
    return _FILES.count(os.path.normpath(local_path(directory)))


def _read(file: Path, stat: tuple) -> tuple:
    """``(stat, metadata, schema, summary)`` of a part file, from one open of it (a large
    file's ``kind``, ``time`` and ``diff`` columns in batches of
    :data:`~timely_spark.capture.part_file.READ_BATCH_ROWS` rows, so summarizing a large
    compacted file takes memory bounded by the batch, not by the file)."""
    try:
        with open_part(file) as part:
            schema = part.schema_arrow
            meta = check_meta(file, schema)
            pieces = []
            for table in read_batches(file, part, ["kind", "time", "diff"]):
                check_rows(file, table)
                pieces.append(_piece(table))
    except EventLogError as exc:
        if not os.path.lexists(file):
            raise _Gone(f"{file}: went away while the log was read") from exc
        raise
    return stat, meta, schema.remove_metadata(), _summarize(file, stat, meta, pieces)


def _piece(table: Any) -> tuple[list, list, list, list]:
    """The plain data times of a checked batch of a part file's ``kind``, ``time`` and
    ``diff`` columns with their row counts, and its progress rows' plain times and
    diffs (numpy for a small batch of int times: Arrow's per-call cost would dominate)."""
    import numpy as np
    import pyarrow as pa

    kinds = table["kind"].to_numpy()
    is_data = kinds == DATA
    on_progress = np.flatnonzero(~is_data)
    if pa.types.is_integer(table["time"].type) and table.num_rows < THREADED_READ_ROWS:
        times = table["time"].to_numpy()
        distinct, how_many = np.unique(times[is_data], return_counts=True)
        plain, counts = distinct.tolist(), how_many.tolist()
        progress_times = times[on_progress].tolist()
    else:
        plain, counts = time_counts(table["time"].filter(pa.array(is_data)))
        progress_times = table["time"].take(pa.array(on_progress)).to_pylist()
    diffs = table["diff"].take(pa.array(on_progress)).to_pylist()        # the progress rows' only
    return plain, counts, progress_times, diffs


def _summarize(file: Path, stat: tuple, meta: dict, pieces: list) -> PartSummary:
    """A checked part file's summary from the pieces (:func:`_piece`) of its batches, in
    order: a time's row counts summed over the batches it has rows in."""
    if len(pieces) == 1:
        plain, counts, progress_times, diffs = pieces[0]
    else:
        totals: dict[Any, list] = {}            # a plain time's key -> [plain, rows], in first-seen order
        progress_times, diffs = [], []
        for piece_plain, piece_counts, piece_progress, piece_diffs in pieces:
            for t, n in zip(piece_plain, piece_counts):
                key = t if isinstance(t, int) else json.dumps(t, sort_keys=True)
                totals.setdefault(key, [t, 0])[1] += n
            progress_times += piece_progress
            diffs += piece_diffs
        plain, counts = [t for t, _ in totals.values()], [n for _, n in totals.values()]
    desc = meta["time"]
    updates = [(timestamp.from_plain(t, desc), int(d)) for t, d in zip(progress_times, diffs)]
    return PartSummary(str(file), int(meta["worker"]), str(meta["stream"]), stat,
                       [timestamp.from_plain(t, desc) for t in plain], plain, counts, updates)


class LogIndex:
    """An event log directory, scanned incrementally (see the module's docstring).

    ``desc`` (the time type, as :func:`timely_spark.progress.timestamp.describe` gives it)
    lets a snapshot of a log with no part files yet -- or no directory yet: a stream may
    start before the job -- say its frontier (the minimum time); without it such a log
    is an :class:`EventLogError`.  With ``desc``, a capturing worker whose ``worker=<i>``
    directory is not there yet holds the frontier back for up to ``missing_worker_wait``
    seconds (:data:`~timely_spark.capture.log_index.MISSING_WORKER_WAIT`) from when this index
    first missed it, then is an ``EventLogError`` naming it; without ``desc``, or once
    the index saw its directory, it is one at once.  A file that changes or goes away
    after it was read (the log was rewritten) starts the index over; a damaged, foreign
    or missing file raises ``EventLogError`` naming it (see :func:`timely_spark.capture.parquet.log_files` and
    :mod:`timely_spark.capture.part_file`), and so does progress that takes a worker's
    count of a time below zero.  Each part file is opened once per process (its footer
    and its ``kind``, ``time``, ``diff`` columns, in one pass), while its size and
    modification time stay the same.
    """

    def __init__(self, path: Any, desc: Any = None, missing_worker_wait: float = MISSING_WORKER_WAIT) -> None:
        self.path = local_path(path)
        self.desc = desc
        self.missing_worker_wait = missing_worker_wait
        self._missing_since: dict[int, float] = {}
        self._seen: set[int] = set()            # workers whose directory this index has seen
        self._stats: dict[str, tuple] = {}      # this snapshot's look at each file
        self._reset()

    def _reset(self) -> None:
        self._parts: dict[int, list[PartSummary]] = {}
        self._frontiers: dict[int, MutableAntichain] = {}
        self._schema: Any = None

    def _entry(self, file: Path) -> tuple:
        """``(stat, metadata, schema, summary)`` of a part file: from the process's cache
        while the file is unchanged, else read."""
        key = str(file)
        stat = self._stats.get(key)
        if stat is None:
            stat = self._stats[key] = _stat(file)
        entry = _FILES.get(key, stat)
        if entry is None:
            entry = _read(file, stat)
            _FILES.put(key, entry)
        return entry

    def _meta(self, file: Path) -> dict:
        return self._entry(file)[1]

    def snapshot(self) -> LogSnapshot:
        """The log as it is now: its checked part files, summarized, and their frontier.
        A file that goes away between the listing and its reading (compaction removed a
        replaced file) makes the index list again, a few times at most."""
        for attempt in range(_RELIST):
            try:
                return self._snapshot()
            except _Gone:
                if attempt == _RELIST - 1:
                    raise
                self._reset()
        raise AssertionError("unreachable")

    def _snapshot(self) -> LogSnapshot:
        if self.desc is not None and not _started(Path(self.path)):
            start = timestamp.minimum_described(self.desc)
            return LogSnapshot(self.path, self.desc, 0, [], Antichain([start]), {})
        self._stats = {}
        by_worker, peers, missing = worker_files(self.path, self._meta)
        for worker_files_ in by_worker.values():
            if worker_files_:
                _FILES.keep_only(os.path.dirname(str(worker_files_[0])), {str(f) for f in worker_files_})
        self._check_missing(peers, missing)
        self._seen.update(by_worker)
        files = [f for w in sorted(by_worker) for f in by_worker[w]]
        if not files and self.desc is None:
            raise EventLogError(f"{self.path}: the event log has no part files yet")
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
        for w, worker_files_ in sorted(by_worker.items()):
            known = self._parts.setdefault(w, [])
            for f in worker_files_[len(known):]:
                known.append(self._add(f, w, desc, peers, start))
        frontier = Antichain()
        for w in sorted(self._frontiers):
            for t in self._frontiers[w].elements():
                frontier.insert(t)
        if peers == 0:
            frontier.insert(start)
        parts = [p for w in sorted(self._parts) for p in self._parts[w]]
        streams = {w: ps[0].stream for w, ps in self._parts.items() if ps}
        return LogSnapshot(self.path, desc, peers, parts, frontier, streams, self._schema)

    def _add(self, file: Path, worker: int, desc: Any, peers: int, start: Any) -> PartSummary:
        """A new part file's summary, checked against the log, its progress applied."""
        _, meta, schema, part = self._entry(file)
        if meta["time"] != desc or int(meta["peers"]) != peers:
            raise EventLogError(f"{file}: times {meta['time']} of {meta['peers']} workers, where the log has "
                                f"times {desc} of {peers} workers")
        if self._schema is None:
            self._schema = schema
        elif not schema.equals(self._schema):
            raise EventLogError(f"{file}: its columns differ from the rest of the log ({schema} after "
                                f"{self._schema})")
        counts = self._frontiers.setdefault(worker, MutableAntichain([(start, 1)]))
        counts.update_iter(part.progress)
        below = [(t, c) for t, c in counts.counts().items() if c < 0]
        if below:
            raise EventLogError(f"{file}: its progress takes worker {worker}'s count of time {below[0][0]!r} to "
                                f"{below[0][1]}, below zero: the file's progress is damaged")
        return part

    def _check_missing(self, peers: int, missing: list) -> None:
        """EventLogError naming workers with no directory: at once without ``desc``, else
        once they were missing for ``missing_worker_wait`` seconds (they hold the frontier
        back until then)."""
        if not missing:
            self._missing_since.clear()
            return
        gone = [w for w in missing if w in self._seen]
        if self.desc is None or gone:
            raise missing_workers(self.path, peers, gone or missing, ": its directory went away" if gone else "")
        now = _time.monotonic()
        self._missing_since = {w: self._missing_since.get(w, now) for w in missing}
        overdue = [w for w in missing if now - self._missing_since[w] >= self.missing_worker_wait]
        if overdue:
            raise missing_workers(self.path, peers, overdue,
                                  f" after waiting {self.missing_worker_wait:g} s for their writers to start "
                                  "(MISSING_WORKER_WAIT)")

    def _still_valid(self, by_worker: dict) -> bool:
        """Whether every file read before is still there, unchanged, at its place."""
        for w, known in self._parts.items():
            files = by_worker.get(w, [])
            if len(files) < len(known):
                return False
            for part, f in zip(known, files):
                if part.path != str(f) or part.stat != self._stats.get(str(f)):
                    return False
        return True


def _started(root: Path) -> bool:
    """Whether a writer has made the log's directory and a ``worker=<i>`` directory in it."""
    return root.is_dir() and any(p.name.startswith("worker=") for p in root.iterdir())


class _Gone(EventLogError):
    """A part file went away between a listing and its reading."""


#: Listings a snapshot makes at most while files go away under it.
_RELIST = 5


def _stat(file: Path) -> tuple[int, ...]:
    try:
        st = os.stat(file)
    except FileNotFoundError as exc:
        raise _Gone(f"{file}: went away while the log was read ({exc})") from exc
    except OSError as exc:
        raise EventLogError(f"{file}: went away while the log was read ({exc})") from exc
    return st.st_size, st.st_mtime_ns, st.st_ino
