"""follow: a live Parquet event log as a stream -- its records at their times, as they
become complete, for any number of workers, until the log is closed.

Each worker of the dataflow polls the log (a :class:`~.log_index.LogIndex`: a listing
of its directories, new files read once) every ``poll`` seconds
(:data:`~timely_spark.capture.follow.FOLLOW_POLL_INTERVAL` by default; between polls the
worker sleeps on its channels, it never spins).  When the log's frontier moves from
``F`` to ``G``, every time complete at ``G`` and not at ``F`` is sent, then the stream's
frontier moves to ``G``: the stream's frontier is the log's, and never passes a time
the log has not completed (its rows are all in the files ``G`` was computed from).

**Shares.**  A time's rows, in the log's order (by writer, then file, then row), are
cut into ``peers`` contiguous shares; worker ``i`` sends share ``i``.  So any number of
writers feed any number of workers, each row goes to exactly one of them, and the
shares stay the same when the log is compacted (compaction keeps each time's rows in
order).  Exchange the stream by key for keyed work.

**Records.**  A log of Arrow records (a Structured Streaming sink's, or a capture of a
columnar stream) gives one ``pyarrow.RecordBatch`` per time and worker (the record
columns only); other layouts give their Python records (dicts, tuples, values).  A log
of pickled records is followed only with ``allow_pickle=True`` (unpickling runs code
the file names: allow it only for a log no one but your own runs can write).

**The end.**  A log is *closed* when its frontier is empty: every capturing writer's
stream ended (its last progress released its last time; ``ParquetEventWriter.close``,
:func:`timely_spark.spark.close_sink_log`).  The stream then ends too.

**Starting later.**  ``since`` (a frontier: an Antichain, a list of times or one time)
starts the stream there: only times not complete at ``since`` are sent.  On a run
restored from a snapshot at ``t`` (``worker.restored_time``), ``since`` defaults to ``t``:
the times before it are in the restored state.

**Snapshots.**  ``follow`` registers its source with the worker
(``worker.register_source``), so a snapshot at ``t`` can *pin* it: the stream keeps a
capability at ``t`` until the snapshot is committed, whatever the log does meanwhile
(:meth:`LogFollower.pin`).

Files appear whole (writers rename them into place; a hidden temporary file is never
read); a damaged or foreign part file fails the run with ``EventLogError`` naming it.

>>> import tempfile, timely_spark as ts
>>> from timely_spark.capture import Messages, ParquetEventWriter, Progress
>>> path = tempfile.mkdtemp()
>>> w = ParquetEventWriter(path, flush_seconds=0.0)
>>> w.push(Messages(0, [{"n": 1}])); w.push(Messages(1, [{"n": 2}])); w.push(Progress([(0, -1)]))
>>> w.close()
>>> _ = ts.example(lambda s: follow(path, s).inspect_time(lambda t, r: print(t, r)))
0 {'n': 1}
1 {'n': 2}
"""

from __future__ import annotations

import os
import time as _time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ..errors import EventLogError, ParameterError
from ..progress import Antichain, timestamp
from ..runtime import check_timeout
from .event import Messages, Progress
from .log_files import not_started
from .log_index import LogIndex, LogSnapshot, local_path
from .parquet import RESERVED
from .part_file import DATA, open_part, read_columns
from .record_columns import pickle_refused

#: Seconds between a follower's looks at a live event log (a directory listing; new
#: files are read once): a time completed in the log reaches the stream within about
#: this long.  Between looks the worker sleeps; it never spins.
FOLLOW_POLL_INTERVAL = 0.1

if TYPE_CHECKING:
    from ..dataflow.stream import Stream

__all__ = ["follow", "LogFollower", "FOLLOW_START_WAIT"]

#: Seconds ``follow`` waits for a log to start (its first part file) before it fails
#: naming the path (a typo, or a writer that never ran): a stream may start before the
#: job that writes its log, as ``spark.readStream`` may.
FOLLOW_START_WAIT = 600.0


def follow(path: Any, scope: Any, since: Any = None, poll: float = FOLLOW_POLL_INTERVAL, time: Any = 0,
           name: str = "Follow", *, allow_pickle: bool = False, start_wait: float = FOLLOW_START_WAIT) -> "Stream":
    """A stream in ``scope`` of the records of the event log at ``path`` at their times,
    this worker's share of each time (see the module's docstring), sent once the log
    proves the time complete; it ends when the log is closed.  ``since``: start at this
    frontier.  ``poll``: seconds between looks at the log.  ``time``: an example of the
    log's time type (int by default), so a log not started yet can be followed.
    ``allow_pickle``: follow a log of pickled records (their files run code when read).
    ``start_wait``: seconds to wait for a log that has not started (no part file yet)
    before an :class:`EventLogError` naming the path; a path that is a file fails at once.

    >>> import tempfile, timely_spark as ts
    >>> from timely_spark.capture import ParquetEventWriter
    >>> path = tempfile.mkdtemp()
    >>> w = ParquetEventWriter(path)
    >>> ts.example(lambda s: s.to_stream([5, 6]).capture_into(w)); w.close()
    >>> def work(worker):
    ...     got = []
    ...     worker.dataflow(lambda s: follow(path, s).inspect(got.append))
    ...     return got
    >>> ts.execute(work, threads=2)          # 2 workers: one record each
    [[5], [6]]
    """
    from ..dataflow.operators.replay import replay_into

    if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0 < poll < float("inf"):
        raise ParameterError(f"follow: poll must be a positive number of seconds, got {poll!r}")
    worker = scope.worker
    of = getattr(worker, "restored_time_of", None)
    restored = of(scope) if of is not None else None
    if since is None and restored is not None:
        since = restored                 # a restored run: the times before it are in the snapshot
    source = LogFollower(path, scope.index, scope.peers, since=since, poll=poll, time=time,
                         allow_pickle=allow_pickle, start_wait=start_wait)
    register = getattr(worker, "register_source", None)
    if register is not None:
        register(source)                 # a snapshot may pin it (see LogFollower.pin)
    return replay_into([source], scope, name=name)


def _described(t: Any) -> Any:
    try:
        return timestamp.describe(t)
    except TypeError:
        return None


def _frontier(since: Any, desc: Any, path: str) -> Optional[Antichain]:
    """``since`` as a frontier of times described by ``desc``; ParameterError naming it if
    it holds something else."""
    if since is None:
        return None
    if isinstance(since, Antichain):
        times = since.elements()
    elif isinstance(since, (list, set)) or (isinstance(since, tuple) and desc != _described(since)):
        times = list(since)
    else:
        times = [since]
    wrong = [t for t in times if _described(t) != desc]
    if wrong:
        raise ParameterError(f"follow {path}: since must be a frontier of the log's times ({desc}): an "
                             f"Antichain, a list of times or one time; {wrong[0]!r} is not one", "since")
    return since if isinstance(since, Antichain) else Antichain(times)


class LogFollower:
    """The event source behind :func:`follow` for worker ``index`` of ``peers``: ``next()``
    gives the next event, None until a poll finds more, StopIteration once the log is
    closed and everything was sent."""

    def __init__(self, path: Any, index: int, peers: int, since: Any = None, poll: float = FOLLOW_POLL_INTERVAL,
                 time: Any = 0, allow_pickle: bool = False, start_wait: float = FOLLOW_START_WAIT) -> None:
        self.path = local_path(path)
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise EventLogError(f"{self.path}: not an event log (a file, not a directory): follow reads the "
                                f"directory a ParquetEventWriter or the \"timely\" sink writes")
        check_timeout("follow: start_wait", start_wait, allow_none=False)
        self.allow_pickle, self.start_wait = allow_pickle, start_wait
        self._since: Optional[float] = _time.monotonic()    # when it began waiting for the log to start
        self.index, self.peers, self.poll = index, peers, poll
        try:
            self.desc = timestamp.describe(time)
        except TypeError:
            raise ParameterError(f"follow {self.path}: time must be an example of the log's times (an int, a "
                                 f"Product or a tuple of them), got {time!r}", "time") from None
        self._index = LogIndex(self.path, self.desc)
        start = Antichain([timestamp.minimum_described(self.desc)])
        self.frontier = _frontier(since, self.desc, self.path) or start
        self._pending: list[Any] = []
        if self.frontier != start:
            self._pending.append(Progress([(t, -1) for t in start] + [(t, 1) for t in self.frontier]))
        self._last = float("-inf")
        self._ended = False
        self._pinned: Any = None          # the time a snapshot pinned the stream at, if any
        self._final = start.elements()[0]     # the least time of the last frontier, once ended
        self._pins: list[Any] = []        # pin and unpin changes, sent before anything else

    # ---- a source a snapshot can pin (timely_spark.dataflow.state_hook.PinnableSource) --------------
    @property
    def time(self) -> Any:
        """The stream's current time: the least time not complete yet (once ended: the
        least time of its last frontier, from which on it sent nothing)."""
        elements = self.frontier.elements()
        return min(elements, key=timestamp.sort_key) if elements else self._final

    @property
    def resume_time(self) -> Any:
        """The time from which on the stream sends nothing more, once closed (else :attr:`time`)."""
        return self.time

    @property
    def closed(self) -> bool:
        """Whether the stream has ended (the log was closed and everything sent)."""
        return self._ended and not self._pending

    def pin(self, t: Any) -> None:
        """Hold a capability at ``t`` (at or after :attr:`time`) until :meth:`unpin`: the
        stream's frontier does not pass ``t`` meanwhile, though it goes on sending.
        Pinning again moves the pin to the new time."""
        updates = [(t, 1)] + ([(self._pinned, -1)] if self._pinned is not None else [])
        self._pinned = t
        self._pins.append(Progress(updates))

    def unpin(self) -> None:
        """Release the pin (idempotent)."""
        if self._pinned is not None:
            self._pins.append(Progress([(self._pinned, -1)]))
            self._pinned = None

    def next(self) -> Any:
        """The next event (see the class docstring)."""
        if self._pins:
            return self._pins.pop(0)
        if self._pending:
            return self._pending.pop(0)
        if self._ended:
            if self._pinned is not None:
                return None              # its pin still holds a capability: keep being polled
            raise StopIteration
        now = _time.monotonic()
        if now - self._last < self.poll:
            return None
        self._last = now
        if self._since is not None:
            if not_started(self.path):
                if now - self._since >= self.start_wait:
                    raise EventLogError(f"{self.path}: the event log has not started after {self.start_wait:g} s "
                                        f"(no part file): is the path right, and did its writer run? "
                                        f"(follow's start_wait=)")
                return None
            self._since = None
        closed = self._all_closed()          # looked at before the files: a closed writer wrote them all
        snap = self._index.snapshot()
        if snap.frontier == self.frontier:
            if closed and snap.frontier and len(closed) == snap.peers:
                raise EventLogError(f"{self.path}: every writer closed the log, but times from "
                                    f"{snap.frontier.elements()} on were never completed: the log ends incomplete")
            return None
        try:
            self._advance(snap)
        except _Vanished:              # compaction replaced a file under this look: look again
            self._last = float("-inf")
            return None
        return self._pending.pop(0) if self._pending else None

    def _all_closed(self) -> list:
        """The worker directories, if every one of them is closed (``_CLOSED``); else []."""
        root = Path(self.path)
        dirs = [p for p in root.iterdir() if p.name.startswith("worker=")] if root.is_dir() else []
        return dirs if dirs and all((d / "_CLOSED").exists() for d in dirs) else []

    def _advance(self, snap: LogSnapshot) -> None:
        old, new = self.frontier, snap.frontier
        if any(not old.less_equal(t) for t in new):
            raise EventLogError(f"{self.path}: the log's frontier went back from {old.elements()} to "
                                f"{new.elements()}: it was rewritten under its followers")
        for t, batch in self._shares(snap, old, new):
            self._pending.append(Messages(t, batch))
        self._pending.append(Progress([(t, -1) for t in old] + [(t, 1) for t in new]))
        if not new:
            self._final = self._after(snap, old)
            self._ended = True
        self.frontier = new

    def _after(self, snap: LogSnapshot, old: Antichain) -> Any:
        """The least time after every time of the log not complete at ``old`` (the log
        closed: the stream sends nothing from it on)."""
        sent = [t for part in snap.parts for t in part.times if old.less_equal(t)]
        if not sent:
            return min(old.elements(), key=timestamp.sort_key) if old else self._final
        latest = max(sent, key=timestamp.sort_key)
        later = timestamp.advance(latest).results_in(latest)
        return latest if later is None else later

    def _shares(self, snap: LogSnapshot, old: Antichain, new: Antichain) -> list:
        """``(time, records)`` of this worker's share of every time complete at ``new``
        and not at ``old``."""
        by_time: dict[Any, list] = {}      # time -> [(part, plain, rows)] in log order
        for part in snap.parts:
            for t, plain, rows in zip(part.times, part.plain, part.counts):
                if old.less_equal(t) and not new.less_equal(t):
                    by_time.setdefault(t, []).append((part.path, plain, rows))
        tables: dict[str, Any] = {}
        out = []
        for t, pieces in by_time.items():
            total = sum(rows for _, _, rows in pieces)
            lo, hi = total * self.index // self.peers, total * (self.index + 1) // self.peers
            if lo == hi:
                continue
            slices, at = [], 0
            for path, plain, rows in pieces:
                start, end = max(lo, at), min(hi, at + rows)
                if start < end:
                    slices.append(self._rows(tables, path, plain).slice(start - at, end - start))
                at += rows
            out.append((t, self._records(slices)))
        return out

    def _rows(self, tables: dict, path: str, plain: Any) -> Any:
        """The data rows of part file ``path`` at the plain time ``plain`` (record columns)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from .arrow_times import mask_at

        if path not in tables:
            try:
                with open_part(path) as part:
                    self._layout = _layout(path, part)
                    if self._layout == "pickle" and not self.allow_pickle:
                        raise pickle_refused(path)
                    table = read_columns(path, part)
            except EventLogError as exc:
                if not os.path.lexists(path):
                    raise _Vanished(str(exc)) from exc
                raise
            tables[path] = table.filter(pc.equal(table["kind"], DATA))
        table = tables[path]
        mask = mask_at(table["time"], pa.array([plain], table.schema.field("time").type))
        names = [n for n in table.column_names if n not in RESERVED]
        return table.filter(mask).select(names)

    def _records(self, slices: list) -> list:
        import pickle

        import pyarrow as pa

        table = pa.concat_tables(slices) if len(slices) > 1 else slices[0]
        layout = self._layout
        if layout == "arrow":
            return table.combine_chunks().to_batches()[:1] if table.num_rows else []
        if layout == "pickle":
            return [pickle.loads(b) for b in table["payload"].to_pylist()]
        if layout == "dict":
            return table.to_pylist()
        columns = [table[n].to_pylist() for n in table.column_names]
        if layout == "tuple":
            return list(zip(*columns))
        return columns[0]


class _Vanished(EventLogError):
    """A file of the snapshot went away before it was read (a compaction replaced it)."""


def _layout(path: str, part: Any) -> str:
    import json

    try:
        return str(json.loads(part.schema_arrow.metadata[b"timely"])["records"])
    except (KeyError, TypeError, ValueError) as exc:
        raise EventLogError(f"{path}: not part of a timely_spark event log ({exc})") from exc
