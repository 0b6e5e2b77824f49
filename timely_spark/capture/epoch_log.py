"""An event log written one whole epoch at a time, by many tasks, committed by one
driver: the storage side of the Structured Streaming sink (``format("timely")``).

Layout (a log of one capturing stream, ``peers = 1``, int times -- the epochs)::

    <path>/worker=0/part-<n>.parquet     the log, as every reader reads it
    <path>/_sink/state.json              the writer's state: stream id, frontier, next part number
    <path>/_sink/staging/epoch=<e>/...   files of an epoch not committed yet (no reader looks here)

Writing epoch ``e`` is two steps:

1. :meth:`EpochLog.stage` (on an executor, once per task): the task's rows at time ``e``
   go to a *staged* part file, already numbered ``base + task index`` where ``base`` is
   the log's next part number (every task of an epoch writes one file, maybe of no
   rows, so the numbers have no gap);
2. :meth:`EpochLog.commit` (on the driver, once every task staged): any file left in
   the log past its last complete epoch (by a commit that failed halfway) is removed,
   the staged files are renamed into ``worker=0/``, and then one progress file moves
   the log's frontier from ``e`` to ``e + 1``.  That last rename is the commit point:
   before it no reader of complete times (``format("timely")``, ``readStream``,
   :func:`~timely_spark.capture.follow`) sees a row of ``e``; after it they see all of
   them.  The state file is written after it (a crash in between is repaired from the
   log on the next commit).

Exactly once: committing an epoch the log has completed already does nothing (its
staged files are dropped: Spark re-runs a batch after a restart with the same rows),
and a commit that failed halfway is redone from the start, so an epoch is never in the
log twice.  :meth:`EpochLog.abort` drops staged files: nothing of the epoch is seen.
Epochs must grow, but may skip (the skipped epochs are complete and empty).

:meth:`EpochLog.close` closes the log: a last progress file takes the frontier to the
empty antichain (no time can still come; ``follow`` ends, ``readStream`` has read all)
and ``worker=0/_CLOSED`` is written.  Nothing can be committed after it.

>>> import tempfile, pyarrow as pa
>>> from timely_spark.capture import LogIndex
>>> path = tempfile.mkdtemp() + "/log"
>>> log = EpochLog.create(path, pa.schema([("x", pa.int64())]))
>>> staged = [log.stage(0, task, pa.table({"x": [task]})) for task in range(2)]
>>> log.commit(0, staged)
>>> snap = LogIndex(path).snapshot()
>>> snap.frontier, sum(s.rows for s in snap.complete())
(Antichain([1]), 2)
>>> log.close(); LogIndex(path).snapshot().frontier
Antichain([])
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from ..errors import EventLogError
from .epoch_files import data_table, part_name, progress_table, record_schema, write_part
from .log_index import local_path

__all__ = ["EpochLog", "Staged", "SINK_DIR"]

#: The directory of an epoch log's writer state, inside the log.
SINK_DIR = "_sink"

_PART = re.compile(r"^part-(\d{6,})\.parquet$")


@dataclass(frozen=True)
class Staged:
    """One task's staged file of an epoch: picklable, sent from the executor to the driver."""

    epoch: int
    task: int
    base: int
    file: Optional[str]     # None: the epoch was complete already, nothing staged
    rows: int
    query: Optional[str] = None     # the id of the streaming query that staged it (None: not known)


class EpochLog:
    """A log written by epochs (see the module's docstring).  ``open`` it where it
    exists, ``create`` it (or open it) where a sink starts."""

    def __init__(self, path: Any, records: Any, state: dict) -> None:
        self.path = Path(local_path(path))
        self.records = records            # the record columns (Arrow schema)
        self.state = state

    # ---- opening -------------------------------------------------------------------
    @classmethod
    def create(cls, path: Any, records: Any) -> "EpochLog":
        """The epoch log at ``path`` with record columns ``records`` (an Arrow schema), made
        if ``path`` is missing or empty; EventLogError naming the path if it holds
        something else (a log a timely job captured, another directory), or naming the
        column if the records differ from the log's or cannot be in one."""
        root = Path(local_path(path))
        records = record_schema(records, root)
        state_file = root / SINK_DIR / "state.json"
        if not state_file.exists():
            entries = [p.name for p in root.iterdir()] if root.is_dir() else []
            if any(name.startswith("worker=") for name in entries):
                raise EventLogError(f"{root}: holds an event log that a timely job captured, not one a "
                                    "Structured Streaming sink writes; write the stream to a new path")
            if [n for n in entries if n != SINK_DIR]:
                raise EventLogError(f"{root}: not an event log (holds {sorted(entries)[:5]}); write the stream to "
                                    "a new or empty directory")
            (root / "worker=0").mkdir(parents=True, exist_ok=True)
            state = {"stream": uuid.uuid4().hex, "frontier": 0, "parts": 0, "closed": False,
                     "records": records.serialize().to_pybytes().hex()}
            _write_json(state_file, state)
        log = cls.open(root)
        if not log.records.equals(records):
            have = {f.name: str(f.type) for f in log.records}
            want = {f.name: str(f.type) for f in records}
            diff = sorted(set(have.items()) ^ set(want.items()))
            raise EventLogError(f"{root}: the stream's columns {want} differ from the log's {have} (first "
                                f"difference: column {diff[0][0]!r}); write the stream to a new path")
        return log

    @classmethod
    def open(cls, path: Any) -> "EpochLog":
        """The epoch log at ``path``; EventLogError naming it if it is not one."""
        import pyarrow as pa

        root = Path(local_path(path))
        state_file = root / SINK_DIR / "state.json"
        try:
            state = json.loads(state_file.read_text())
            records = pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(state["records"])))
        except FileNotFoundError:
            raise EventLogError(f"{root}: not an event log written by a Structured Streaming sink (no "
                                f"{SINK_DIR}/state.json)") from None
        except (ValueError, KeyError, TypeError, pa.ArrowException) as exc:
            raise EventLogError(f"{state_file}: damaged ({exc})") from exc
        return cls(root, records, state)

    @property
    def worker_dir(self) -> Path:
        return self.path / "worker=0"

    @property
    def frontier(self) -> int:
        """The first epoch not complete yet (every earlier one is)."""
        return int(self.state["frontier"])

    @property
    def closed(self) -> bool:
        return bool(self.state.get("closed"))

    def _staging(self, epoch: int) -> Path:
        return self.path / SINK_DIR / "staging" / f"epoch={epoch}"

    # ---- writing -------------------------------------------------------------------
    def stage(self, epoch: int, task: int, table: Any, attempt: Any = None, query: Optional[str] = None) -> Staged:
        """Stage task ``task``'s rows ``table`` (Arrow) at time ``epoch`` (on an executor)
        for streaming query ``query`` (its id; None: not known); nothing is visible until
        :meth:`commit`.  An epoch complete already stages nothing."""
        self._check_open()
        if epoch < self.frontier:
            return Staged(epoch, task, int(self.state["parts"]), None, table.num_rows, query)
        base = int(self.state["parts"])
        folder = self._staging(epoch) / f"task={task}-{attempt if attempt is not None else uuid.uuid4().hex}"
        file = write_part(folder, base + task, data_table(table, epoch, self.records, seq=2 * epoch),
                          worker=0, peers=1, stream=self.state["stream"])
        return Staged(epoch, task, base, str(file), table.num_rows, query)

    def commit(self, epoch: int, staged: list) -> None:
        """Publish epoch ``epoch`` from every task's :class:`Staged` file, atomically (see the
        module's docstring); an epoch complete already is left as it is.  The first
        commit binds the log to the streaming query that staged it: one from another
        query (two queries on one path, or a query started afresh without its
        checkpoint, whose batch ids start over) is an EventLogError naming both, never
        skipped as if its epochs were written already.  Commits (and :meth:`close`) of
        one log take turns (a lock file in ``_sink``)."""
        with _locked(self.path / SINK_DIR / "lock"):
            self._reload()
            self._commit(epoch, staged)

    def _commit(self, epoch: int, staged: list) -> None:
        self._check_open()
        self._repair()
        self._check_query(epoch, staged)
        if epoch < self.frontier:
            self._drop_staging(epoch)
            return
        missing = [i for i, s in enumerate(staged) if s is None]
        if missing:
            raise EventLogError(f"{self.path}: epoch {epoch}: tasks {missing} sent no staged file")
        staged = sorted(staged, key=lambda s: s.task)
        base = int(self.state["parts"])
        if [s.task for s in staged] != list(range(len(staged))) or any(s.base != base or s.file is None
                                                                       for s in staged):
            raise EventLogError(f"{self.path}: epoch {epoch}: the staged files do not follow the log's part "
                                f"{base} (tasks {[s.task for s in staged]}, bases {sorted({s.base for s in staged})})"
                                ": was the log written by two queries at once?")
        self._drop_tail(base)
        for s in staged:
            os.replace(str(s.file), self.worker_dir / part_name(base + s.task))
        end = base + len(staged)
        write_part(self.worker_dir, end, progress_table([(self.frontier, -1), (epoch + 1, 1)], self.records,
                                                        seq=2 * epoch + 1),
                   worker=0, peers=1, stream=self.state["stream"])
        self._save(frontier=epoch + 1, parts=end + 1)
        self._drop_staging(epoch)

    def abort(self, epoch: int, staged: list) -> None:
        """Drop epoch ``epoch``'s staged files: nothing of it becomes visible."""
        for s in staged:
            if s is not None and s.file is not None:
                Path(s.file).unlink(missing_ok=True)
        self._drop_staging(epoch)

    def close(self) -> None:
        """Close the log: its frontier becomes empty (no epoch can still come) and
        ``worker=0/_CLOSED`` is written.  Idempotent."""
        with _locked(self.path / SINK_DIR / "lock"):
            self._reload()
            self._close()

    def _close(self) -> None:
        if self.closed:
            return
        self._repair()
        base = int(self.state["parts"])
        self._drop_tail(base)
        write_part(self.worker_dir, base, progress_table([(self.frontier, -1)], self.records,
                                                         seq=2 * self.frontier + 1),
                   worker=0, peers=1, stream=self.state["stream"])
        self._save(parts=base + 1, closed=True)
        (self.worker_dir / "_CLOSED").touch()

    # ---- helpers -------------------------------------------------------------------
    def _reload(self) -> None:
        self.state = EpochLog.open(self.path).state

    def _check_query(self, epoch: int, staged: list) -> None:
        """Bind the log to the query of ``staged`` on its first commit; EventLogError if
        another query wrote it."""
        queries = {s.query for s in staged if s is not None and s.query is not None}
        if not queries:
            return
        bound = self.state.get("query")
        if len(queries) > 1 or (bound is not None and bound not in queries):
            raise EventLogError(f"{self.path}: epoch {epoch} comes from streaming query {sorted(queries)[0]}, but "
                                f"this log is written by query {bound or sorted(queries)[1]}: one query writes one "
                                "log (two queries on one path, or a query restarted without its checkpoint, whose "
                                "batch ids start over); write to a new path")
        if bound is None:
            self._save(query=queries.pop())

    def _check_open(self) -> None:
        if self.closed:
            raise EventLogError(f"{self.path}: the event log is closed (ts.spark.close_sink_log); nothing more can "
                                "be written to it")

    def _numbered(self) -> list[tuple[int, Path]]:
        """The log's part files (regular files only), by number."""
        found = []
        for p in self.worker_dir.iterdir():
            m = _PART.match(p.name)
            if m and p.is_file():
                found.append((int(m.group(1)), p))
        return sorted(found)

    def _drop_tail(self, base: int) -> None:
        """Remove part files numbered ``base`` or more: a failed commit's, never complete."""
        for n, p in self._numbered():
            if n >= base:
                p.unlink()

    def _repair(self) -> None:
        """Catch the state up with the log after a commit that failed between its
        progress file and its state file: the log is the truth."""
        from .log_index import LogIndex

        numbered = self._numbered()
        if not numbered or numbered[-1][0] < int(self.state["parts"]):
            return
        from .parquet import part_range

        snap = LogIndex(self.path).snapshot()
        ends = [(part_range(Path(part.path).name) or (0, 0))[1] for part in snap.parts if part.progress]
        front = snap.frontier.elements()
        if not ends:
            return
        last = ends[-1]
        frontier = int(front[0]) if front else self.frontier
        if last + 1 > int(self.state["parts"]):
            self._save(frontier=frontier, parts=last + 1, closed=not front)

    def _save(self, **changes: Any) -> None:
        self.state = {**self.state, **changes}
        _write_json(self.path / SINK_DIR / "state.json", self.state)

    def _drop_staging(self, epoch: int) -> None:
        shutil.rmtree(self._staging(epoch), ignore_errors=True)


@contextmanager
def _locked(file: Path) -> Iterator[None]:
    """An exclusive lock on ``file`` (made if missing) for the block: the writers of one
    log on this machine take turns (``fcntl.flock``; where it is missing, no lock)."""
    try:
        import fcntl
    except ImportError:         # pragma: no cover -- not POSIX
        yield
        return
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _write_json(file: Path, value: dict) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, file)
