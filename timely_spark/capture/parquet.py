"""Event logs as Parquet datasets that Spark reads directly.

Layout: one directory per capturing worker, ``<path>/worker=<i>/``, holding
``part-<n>.parquet`` files written in order (each written to a hidden temporary
file, then renamed: a reader never sees half a file) and, once the writer is
closed, an empty ``_CLOSED`` file.

Each file's rows, in event order:

* ``seq`` (int64) -- the event's number in this worker's stream (rows of one event
  share it; files and rows are in ``seq`` order);
* ``kind`` (int8) -- 0 for a data record, 1 for a progress update;
* ``time`` -- int64 for int times, a struct for ``Product`` (``outer``, ``inner``) and
  tuple (``f0``, ``f1``...) times;
* ``diff`` (int64) -- the progress update's count; on data rows null, or, when the
  records are a changelog (record batches with a ``diff`` column, metadata
  ``"changelog": true``), the record's diff;
* the record: its fields as typed columns when records are dicts of scalars,
  tuples of scalars (``f0``...), scalars (``value``) or Arrow record batches;
  otherwise ``payload``, the pickled record.

The file metadata names the log format, the time type, the record layout, the
worker and the number of capturing workers, which is how readers check that a
file belongs to the log and that a time is complete.
"""

from __future__ import annotations

import json
import os
import pickle
import time as _time
import uuid
from pathlib import Path
from typing import Any, Optional

from ..errors import EventLogError
from ..progress import MutableAntichain, timestamp
from ..runtime import check_count
from .event import Messages, Progress
from .log_files import (
    COMPACT_GRACE,
    RESERVED,
    is_changelog,
    log_files,
    missing_workers,
    not_started,
    part_files,
    part_range,
    read_footer,
    read_meta,
    worker_dirs,
    worker_files,
)
from .owner_lock import OwnerLock
from .part_file import FORMAT, PROGRESS, check_meta, check_rows, column_changes, open_part, read_columns
from .record_columns import RecordColumns, layout_of, pickle_refused

__all__ = ["ParquetEventWriter", "ParquetEventReader", "EventLogError", "worker_dirs", "time_type", "part_files",
           "log_files", "worker_files", "missing_workers", "part_range", "not_started", "read_footer", "read_meta",
           "FORMAT", "is_changelog", "CAPTURE_COLUMNS_RETRY"]

#: Seconds between a capturing writer's looks for its log's record columns (in another
#: worker's file) while it holds progress back because it has not written a record yet.
CAPTURE_COLUMNS_RETRY = 0.5



# ---- times ---------------------------------------------------------------------------------
def time_type(t: Any) -> Any:
    """A JSON-able description of a timestamp's type (see :func:`timely_spark.progress.timestamp.describe`)."""
    try:
        return timestamp.describe(t)
    except TypeError:
        raise EventLogError(f"{t!r} is not a timestamp an event log can hold") from None


def _batch_rows(batches: list) -> int:
    """Rows of a list of record batches (anything else counts as one: it is refused when written)."""
    return sum(getattr(b, "num_rows", 1) for b in batches)


class ParquetEventWriter:
    """Push events into ``<path>/worker=<worker>/`` as Parquet files.

    Data is buffered and written as a new file when a progress event arrives and
    ``flush_seconds`` have passed since the last file, when ``max_rows`` rows are
    buffered, and at ``close()``.  A crashed writer loses only its unflushed tail.

    Every file of a log has the same columns, which the first record shows; a writer
    that has no record yet writes its progress in the columns of another worker's
    file of the log, or those of ``schema`` (the Arrow schema of the record batches it
    would capture, a ``diff`` column for a changelog), so that a worker that gets no
    data never holds the log's frontier back (see :meth:`flush`).

    A worker directory belongs to one open writer at a time: a second one (another run
    writing the same log) is an :class:`EventLogError` naming the directory and the run
    holding it (:class:`~.owner_lock.OwnerLock`; the hold ends at :meth:`close` or with
    the holder's process).

    A run restored from a checkpoint goes on with the log its crashed attempt wrote,
    every epoch exactly once (:meth:`restore`, :meth:`recover`; ``capture_into`` calls
    them): a log already at ``path`` is otherwise an error at the first write.

    >>> import tempfile, timely_spark as ts
    >>> from timely_spark.capture import ParquetEventWriter, ParquetEventReader, extract
    >>> path = tempfile.mkdtemp()
    >>> w = ParquetEventWriter(path)
    >>> ts.example(lambda s: s.to_stream([{"word": "a", "n": 1}]).capture_into(w)); w.close()
    >>> extract(iter(ParquetEventReader(path)))
    [(0, [{'word': 'a', 'n': 1}])]
    """

    def __init__(self, path: Any, worker: int = 0, peers: int = 1, flush_seconds: float = 1.0,
                 max_rows: int = 1_000_000, schema: Any = None) -> None:
        check_count("peers", peers)
        if isinstance(worker, bool) or not isinstance(worker, int) or not 0 <= worker < peers:
            raise ValueError(f"worker must be this writer's worker index, 0 <= worker < peers ({peers}), got "
                             f"{worker!r}")
        if isinstance(flush_seconds, bool) or not isinstance(flush_seconds, (int, float)) \
                or not 0 <= flush_seconds < float("inf"):
            raise ValueError(f"flush_seconds must be a finite number of seconds >= 0, got {flush_seconds!r}")
        check_count("max_rows", max_rows)
        self.root = Path(path)
        self.dir = self.root / f"worker={worker}"
        self.dir.mkdir(parents=True, exist_ok=True)
        # one writer (one run) at a time in a worker directory, until close (or its process ends)
        self._owner_lock = OwnerLock(self.dir, f"worker {worker}'s directory of the event log", EventLogError)
        # a log here already: an error at the first write, unless a restored run resumes it (restore)
        self._existing = any(part_range(p.name) for p in self.dir.iterdir()) or (self.dir / "_CLOSED").exists()
        self.worker, self.peers = worker, peers
        self.flush_seconds, self.max_rows = flush_seconds, max_rows
        self._events: list[Any] = []
        self._rows = 0
        self._seq = 0
        self._part = 0
        self._last_flush = _time.monotonic()
        self._time_desc: Any = None
        self._columns: Optional[RecordColumns] = None    # the records' layout and column types, once seen
        self._schema: Any = None
        self._changelog = False                  # records are record batches with a diff column
        self.stream_id = uuid.uuid4().hex        # every file of this writer says it is this stream's
        self.closed = False
        # the log's record columns before this writer's first record: (layout, Arrow fields, changelog)
        self._known: Optional[tuple[str, list, bool]] = _given_columns(self.dir, schema) if schema is not None \
            else None
        self.checkpoint: Optional[str] = None    # the run's checkpoint directory, named in the files (recover)
        self._resumed: Any = None                # a restored run's ResumePoint (see restore)
        self._run: Any = None                    # the restored run's own frontier (a MutableAntichain)
        self._written: dict = {}                 # the counts this restored writer's stream holds
        self._owner = ""                         # who wrote an existing log that is refused (recover)

    @property
    def _layout(self) -> Optional[str]:
        return self._columns.layout if self._columns is not None else None

    def push(self, event: Any) -> None:
        """Buffer one event; flush when a progress event comes ``flush_seconds`` after the last file, or ``max_rows``
        rows wait.
        """
        if self.closed:
            raise EventLogError(f"{self.dir}: the writer is closed")
        if self._existing:
            self._refuse()
        if self._resumed is not None:
            event = self._past_cut(event)
            if event is None:
                return
        self._events.append((self._seq, event))
        self._seq += 1
        if type(event) is Messages:
            self._rows += len(event.data) if self._layout != "arrow" else _batch_rows(event.data)
        else:
            self._rows += len(event.updates)
            if _time.monotonic() - self._last_flush >= self.flush_seconds:
                self.flush()
                return
        if self._rows >= self.max_rows:
            self.flush()

    def poll(self) -> Optional[float]:
        """Flush if buffered events have waited ``flush_seconds``; return the seconds
        until the next flush is due (None: nothing waits).  The capture operator calls
        it on every run and again after that delay, so a completed time becomes
        readable within ``flush_seconds`` even when the stream goes idle."""
        if not self._events:
            return None
        wait = self.flush_seconds - (_time.monotonic() - self._last_flush)
        if wait > 0:
            return wait
        self.flush()
        if not self._events:
            return None
        # progress held back (the log's columns are not known yet): look again later, never spin
        return max(self.flush_seconds, CAPTURE_COLUMNS_RETRY)

    def flush(self, closing: bool = False) -> None:
        """Write what is buffered as one new file (atomically).  Every file of a log has
        the same columns: until this writer's first record shows them, progress is
        written with the columns given as ``schema`` or found in another worker's file
        of the log, and otherwise waits in the buffer (looked at again every
        :data:`~timely_spark.capture.parquet.CAPTURE_COLUMNS_RETRY` seconds), except when
        closing.  So a worker that never gets a record still moves the log's frontier
        once some worker wrote one.  A record that does not fit the log (see
        :mod:`.record_columns`) raises EventLogError naming it."""
        if self._existing:
            self._refuse()
        if self._resumed is not None and self._resumed.replaced:
            from .resume import remove_replaced

            remove_replaced(self._resumed)
        if not self._events:
            return
        if self._layout is None and not any(type(e) is Messages and e.data for _, e in self._events):
            if self._known is None:
                self._known = _sibling_columns(self.root, self.worker)
            if self._known is None and not closing:
                return
        events, self._events, self._rows = self._events, [], 0
        self._write_atomically(self._table(*self._rows_of(events)))

    def _time(self, t: Any) -> Any:
        """``t`` as a plain value, checked to be of the log's time type (fixed by the first time)."""
        desc = time_type(t)
        if self._time_desc is None:
            self._time_desc = desc
        elif desc != self._time_desc:
            raise EventLogError(f"{self.dir}: time {t!r} is of type {desc}, but this log's times are "
                                f"{self._time_desc} (fixed by its first time)")
        return timestamp.to_plain(t)

    def _rows_of(self, events: list) -> tuple[dict[str, list], list, list, dict[str, list]]:
        """The events as rows: data rows (seq, time), their records with each record's
        time, and progress rows (seq, time, diff).  Fixes the log's time type and record
        layout on first sight."""
        data: dict[str, list] = {"seq": [], "time": []}
        progress: dict[str, list] = {"seq": [], "time": [], "diff": []}
        records: list[Any] = []
        record_times: list[Any] = []
        for seq, event in events:
            if type(event) is Messages:
                plain = self._time(event.time)
                if event.data and self._columns is None:
                    self._columns = RecordColumns(self.dir, layout_of(event.data[0]))
                n = _batch_rows(event.data) if self._layout == "arrow" else len(event.data)
                records.extend(event.data)
                record_times.extend([event.time] * len(event.data))
                data["seq"].extend([seq] * n)
                data["time"].extend([plain] * n)
            else:
                for t, d in event.updates:
                    progress["seq"].append(seq)
                    progress["time"].append(self._time(t))
                    progress["diff"].append(d)
        return data, records, record_times, progress

    def _table(self, data: dict[str, list], records: list, record_times: list, progress: dict[str, list]) -> Any:
        """One table of data rows then progress rows, in event order, with the log's
        columns and metadata (record columns null on progress rows)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n_data, n_progress = len(data["seq"]), len(progress["seq"])
        columns: dict[str, Any] = {
            "seq": pa.array(data["seq"] + progress["seq"], pa.int64()),
            "kind": pa.array([0] * n_data + [PROGRESS] * n_progress, pa.int8()),
            "time": pa.array(data["time"] + progress["time"], timestamp.arrow_type(self._time_desc or "int")),
            "diff": pa.array([None] * n_data + progress["diff"], pa.int64()),
        }
        if self._columns is None and self._known is not None:     # progress only, in the log's known columns
            for field in self._known[1]:
                columns[field.name] = pa.nulls(n_data + n_progress, field.type)
        if self._columns is not None:
            built = self._columns.build(records, record_times) if records else self._columns.nulls(0)
            for name, col in built:
                if name == "diff" and self._layout == "arrow":      # a changelog: the data rows' diffs
                    columns["diff"] = pa.concat_arrays([_changelog_diffs(self.dir, col), columns["diff"][n_data:]])
                    self._changelog = True
                    continue
                if name in RESERVED:
                    raise EventLogError(f"{self.dir}: record field {name!r} clashes with the event log's columns "
                                        f"{RESERVED}")
                columns[name] = pa.concat_arrays([col, pa.nulls(n_progress, col.type)]) if n_progress else col
        table = pa.table(columns)
        if n_progress and n_data:   # interleave data and progress rows in event order (stable)
            table = table.take(pc.sort_indices(table, [("seq", "ascending")]))
        if self._schema is None:
            self._schema = table.schema
        elif not table.schema.equals(self._schema):     # RecordColumns keeps every file's columns the same
            raise EventLogError(f"{self.dir}: records changed shape: {table.schema} after {self._schema}")
        known = self._known if self._columns is None else None
        meta = {"format": FORMAT, "time": self._time_desc or "int",
                "records": self._layout or (known[0] if known else "none"),
                "worker": self.worker, "peers": self.peers, "stream": self.stream_id, "part": self._part}
        if self._changelog or (known and known[2]):
            meta["changelog"] = True
        if self.checkpoint is not None:
            meta["checkpoint"] = self.checkpoint
        return table.replace_schema_metadata({b"timely": json.dumps(meta).encode()})

    def _write_atomically(self, table: Any) -> None:
        """Write the next part file under a hidden temporary name, then rename it: a
        reader sees the whole file or none of it."""
        import pyarrow.parquet as pq

        name = f"part-{self._part:06d}.parquet"
        tmp = self.dir / f".{name}.tmp"
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, self.dir / name)
        except OSError as exc:          # a full disk, a lost mount: name the file, leave no temporary behind
            tmp.unlink(missing_ok=True)
            raise EventLogError(f"{self.dir / name}: cannot write the part file ({type(exc).__name__}: "
                                f"{exc}); nothing of it was published") from exc
        self._part += 1
        self._last_flush = _time.monotonic()

    # ---- a restored run (see timely_spark.capture.resume) ------------------------------------
    def recover(self, checkpoint: str, restored_time: Any, minimum: Any = 0) -> None:
        """What ``capture_into`` calls on a run with a ``checkpoint`` directory, before the
        first event: the writer's files name the checkpoint; on a restored run
        (``restored_time`` not None) it restores there (:meth:`restore`), and on a fresh start of
        a run whose earlier attempt wrote this log under the same checkpoint (it died
        before its first snapshot) it restores at ``minimum`` (the start): either way
        every epoch is in the log once.  A log written otherwise (without a checkpoint, or
        under another one) is refused, as always -- on a restored run too: its rows are
        another run's, and cutting them to the snapshot would drop this run's output."""
        from .resume import written_under

        self.checkpoint = os.path.abspath(checkpoint)
        if not not_started(self.root):
            owner = written_under(self.root)
            if owner != self.checkpoint:          # another run's log: refused at the first write
                self._existing = True
                self._owner = ("written without a checkpoint" if owner is None else
                               f"written under the checkpoint {owner}, not {self.checkpoint}")
                return
        if restored_time is not None:
            self.restore(restored_time)
        elif self._existing and written_under(self.root) == self.checkpoint:
            self.restore(minimum)

    def restore(self, restored_time: Any, grace: float = COMPACT_GRACE) -> None:
        """Go on with the log a crashed run of the same dataflow wrote, for a run restored
        from a snapshot at ``restored_time`` (``worker.restored_time``; ``capture_into``
        calls this when it is built): this worker's directory is brought to the cut of
        :mod:`~timely_spark.capture.resume` (epochs the log completed are kept, rows of
        incomplete ones removed), and from then on the run's rows at times the log has
        complete are dropped, never written twice.  RestoreError naming the log and both
        worker counts if it was captured by another number of workers.  Call it before
        the first event.  The files the cut replaced are removed ``grace`` seconds
        after it (:data:`~timely_spark.capture.log_files.COMPACT_GRACE`), at a flush: a read
        planned on them finishes first."""
        from .resume import resume_worker

        if self._seq:
            raise EventLogError(f"{self.dir}: restore() after events were pushed; it goes first")
        point = resume_worker(self.root, self.worker, self.peers, restored_time, grace)
        self._existing = False
        self._resumed = point
        if point.stream is not None:
            self.stream_id = point.stream
        self._part, self._seq = point.next_part, point.next_seq
        self._time_desc = point.desc
        if point.schema is not None and point.layout not in (None, "none"):
            fields = [f for f in point.schema if f.name not in RESERVED]
            self._known = (point.layout, fields, point.changelog)
            if point.stream is not None:
                self._schema = point.schema
                self._changelog = point.changelog
                if point.layout != "arrow" or not point.changelog:
                    self._columns = RecordColumns(self.dir, point.layout)
                    self._columns.fields = fields
        start = timestamp.minimum_described(point.desc)
        self._run = MutableAntichain([(start, 1)])
        self._written = dict(point.counts)
        self._move_frontier()

    def _past_cut(self, event: Any) -> Any:
        """A restored writer's view of ``event``: data at times complete at the cut dropped
        (None), progress as the change of the join of the cut and the run's frontier."""
        if type(event) is Messages:
            return event if self._resumed.cutoff.less_equal(event.time) else None
        self._run.update_iter(event.updates)
        return self._move_frontier(push=False)

    def _move_frontier(self, push: bool = True) -> Any:
        """The progress taking this writer's stream to the join of the cut and the run's
        frontier (None: no change); buffered at once with ``push``."""
        from .resume import join_frontiers

        target = {t: 1 for t in join_frontiers(self._resumed.cutoff, self._run.frontier())}
        change = {t: -c for t, c in self._written.items()}
        for t, c in target.items():
            change[t] = change.get(t, 0) + c
        updates = [(t, d) for t, d in change.items() if d]
        self._written = target
        if not updates:
            return None
        if push:
            self._events.append((self._seq, Progress(updates)))
            self._seq += 1
            self._rows += len(updates)
            return None
        return Progress(updates)

    def _refuse(self) -> None:
        owner = f" ({self._owner})" if self._owner else ""
        raise EventLogError(f"{self.dir}: already holds an event log{owner}; write a new one elsewhere (a run "
                            "restored from a checkpoint goes on with the log it wrote: see "
                            "ParquetEventWriter.restore)")

    def close(self) -> None:
        """Flush and mark the log complete (idempotent)."""
        if not self.closed:
            if self._existing:
                self._refuse()
            self.flush(closing=True)
            self.closed = True
            (self.dir / "_CLOSED").touch()
            self._owner_lock.release()


def _given_columns(where: Path, schema: Any) -> tuple[str, list, bool]:
    """The log's columns from a writer's ``schema`` argument (the Arrow schema of its
    record batches; a ``diff`` column makes it a changelog)."""
    import pyarrow as pa

    if not isinstance(schema, pa.Schema):
        raise ValueError(f"{where}: schema must be the pyarrow.Schema of the record batches to be captured, "
                         f"got {type(schema).__name__}")
    for name in schema.names:
        if name in RESERVED and name != "diff":
            raise EventLogError(f"{where}: record field {name!r} clashes with the event log's columns {RESERVED}")
    return "arrow", [f for f in schema.remove_metadata() if f.name != "diff"], "diff" in schema.names


def _sibling_columns(root: Path, worker: int) -> Optional[tuple[str, list, bool]]:
    """The record columns (layout, Arrow fields, changelog) of the log at ``root`` as
    another worker's first file with records shows them; None if there is none yet."""
    try:
        dirs = sorted(p for p in root.iterdir() if p.name.startswith("worker=") and p.name != f"worker={worker}")
    except OSError:
        return None
    for folder in dirs:
        try:
            first = min((p for p in folder.iterdir() if part_range(p.name)), default=None,
                        key=lambda p: part_range(p.name) or (0, 0))
            if first is None:
                continue
            meta, schema = read_footer(first)
        except (OSError, EventLogError):          # went away (compacted) or damaged: its readers say so
            continue
        if meta["records"] != "none":
            fields = [f for f in schema if f.name not in RESERVED]
            return str(meta["records"]), fields, is_changelog(meta)
    return None


def _changelog_diffs(where: Any, column: Any) -> Any:
    """A changelog's ``diff`` column as the log's int64 diffs; ChangelogError unless integers
    without nulls."""
    import pyarrow as pa

    from ..errors import ChangelogError

    if not pa.types.is_integer(column.type) or column.null_count:
        raise ChangelogError(f"{where}: a captured changelog's 'diff' column must be integers without nulls, "
                             f"got {column.type} with {column.null_count} null(s)")
    return column.cast(pa.int64())


class ParquetEventReader:
    """Events from one worker's directory of a Parquet event log (``<path>/worker=<i>``,
    or ``path`` itself with ``worker=None``), in order.

    ``next()`` returns the next event, None when the writer has not written more yet,
    and raises StopIteration once every file is read and the writer closed the log.
    Hidden temporary files (a writer's unfinished or crashed tail) are ignored.
    ``time`` (an example timestamp) makes a mismatched time type an error.
    A log of pickled records (records that are not dicts, tuples, scalars or record
    batches) is read only with ``allow_pickle=True``: unpickling runs code the file
    names, so allow it only for a log no one but your own runs can write; otherwise
    its first file is an :class:`EventLogError` naming it, before anything is unpickled.
    """

    def __init__(self, path: Any, worker: Optional[int] = 0, time: Any = None, *, allow_pickle: bool = False) -> None:
        root = Path(path)
        self.dir = root / f"worker={worker}" if worker is not None else root
        if not self.dir.is_dir():
            if root.is_dir() and worker is not None:
                worker_dirs(root)   # raises "not an event log" when it is not one
            raise EventLogError(f"{self.dir}: no such event log directory")
        self._expected_time = time_type(time) if time is not None else None
        self._allow_pickle = allow_pickle
        self._meta: Optional[dict] = None
        self._metas: dict[str, dict] = {}
        self._schema: Any = None
        self._next_part = 0
        self._pending: list[Any] = []

    def _part_files(self) -> list[Path]:
        return part_files(self.dir, self._file_meta)

    def _file_meta(self, file: Path) -> dict:
        """A part file's metadata, read once (part files never change)."""
        key = str(file)
        if key not in self._metas:
            self._metas[key] = read_meta(file)
        return self._metas[key]

    def _load(self, file: Path) -> None:
        with open_part(file) as part:
            meta = check_meta(file, part.schema_arrow)
            if meta["records"] == "pickle" and not self._allow_pickle:
                raise pickle_refused(file)
            if self._meta is None:
                if self._expected_time is not None and meta["time"] != self._expected_time:
                    raise EventLogError(f"{file}: times are {meta['time']}, expected {self._expected_time}")
                self._meta = meta
            elif (meta["time"], meta["worker"], meta["peers"]) != (self._meta["time"], self._meta["worker"],
                                                                    self._meta["peers"]):
                raise EventLogError(f"{file}: belongs to another stream ({meta} after {self._meta})")
            table = read_columns(file, part)
        check_rows(file, table)
        schema = table.schema.remove_metadata()
        if self._schema is None:
            self._schema = schema
        elif not schema.equals(self._schema):
            raise EventLogError(f"{file}: its columns differ from the rest of the stream: "
                                f"{column_changes(self._schema, schema)}")
        self._pending.extend(self._events(table, meta))

    def _events(self, table: Any, meta: dict) -> list[Any]:

        desc, layout = meta["time"], meta["records"]
        seqs = table.column("seq").to_pylist()
        kinds = table.column("kind").to_pylist()
        times = table.column("time").to_pylist()
        diffs = table.column("diff").to_pylist()
        names = [n for n in table.column_names if n not in RESERVED]
        if layout == "arrow":
            data_cols: Any = None
        elif layout == "pickle":
            data_cols = [table.column("payload").to_pylist()]
        else:
            data_cols = [table.column(n).to_pylist() for n in names]
        events: list[Any] = []
        i, n = 0, table.num_rows
        while i < n:
            j = i
            while j < n and seqs[j] == seqs[i] and kinds[j] == kinds[i]:
                j += 1
            if kinds[i] == PROGRESS:
                events.append(Progress([(timestamp.from_plain(times[k], desc), diffs[k]) for k in range(i, j)]))
            else:
                t = timestamp.from_plain(times[i], desc)
                if layout == "arrow":
                    rows = table.slice(i, j - i)
                    kept = names + (["diff"] if is_changelog(meta) else [])
                    records = rows.select(kept).combine_chunks().to_batches()
                elif layout == "pickle":
                    records = [pickle.loads(b) for b in data_cols[0][i:j]]
                elif layout == "dict":
                    records = [dict(zip(names, vals)) for vals in zip(*(c[i:j] for c in data_cols))]
                elif layout == "tuple":
                    records = [tuple(vals) for vals in zip(*(c[i:j] for c in data_cols))]
                else:
                    records = list(data_cols[0][i:j])
                events.append(Messages(t, records))
            i = j
        return events

    def next(self) -> Any:
        """The next event, None when no more has been written yet, StopIteration once the log is closed and read."""
        while not self._pending:
            file = self._next_file()
            if file is not None:
                self._load(file)
                continue
            if (self.dir / "_CLOSED").exists():
                if self._next_file(peek=True) is not None:
                    continue
                raise StopIteration
            return None
        return self._pending.pop(0)

    def _next_file(self, peek: bool = False) -> Optional[Path]:
        """The file holding the next part number, if it is there yet.  A reader behind a
        compaction reads the replaced files while they are kept; once they are gone it
        cannot go on (EventLogError naming the compacted file)."""
        n = self._next_part
        for p in self._part_files():
            first, last = part_range(p.name) or (-1, -1)
            if first == n:
                if not peek:
                    self._next_part = last + 1
                return p
            if first < n <= last:
                old = self.dir / f"part-{n:06d}.parquet"
                if old.is_file():
                    if not peek:
                        self._next_part = n + 1
                    return old
                raise EventLogError(f"{p}: compacted (parts {first} to {last}) after this reader had read up to part "
                                    f"{n - 1}, and the replaced files are gone: read the log again from the start")
        return None

    def __iter__(self) -> Any:
        """Every event written so far (stops at the end of what exists)."""
        while True:
            try:
                event = self.next()
            except StopIteration:
                return
            if event is None:
                return
            yield event
