"""Resuming a Parquet event log on a restored run: every epoch exactly once.

A run restored from a snapshot at time ``t`` (``worker.restored_time``) produces its
output again from ``t`` on, but the log it captures into may already hold more: the
crashed run went on after the snapshot.  Each capturing worker, when its writer is
restored (:meth:`~timely_spark.capture.ParquetEventWriter.restore`, which
``capture_into`` calls), brings its own ``worker=<i>`` directory to a *cut* ``C`` and
from then on writes only what lies beyond it:

* ``C`` is the join of the log's frontier ``F`` (the times readers already see as
  complete stay as they are) and ``t`` (the times before ``t`` are in the snapshot: the
  capture operator flushes its writer when a snapshot is taken, so their rows are all in
  the log, and the restored run does not produce them again).  Every worker computes the
  same ``C``: rewriting a directory leaves the meet of the workers' frontiers where it
  was, and no frontier can pass ``t`` before every worker has restored its writer.
* The worker's first part file holding a row at a time not complete at ``C``, or
  progress that takes its frontier past ``C``, and every file after it, are replaced
  by **one** new file (named for the range of parts it stands for, as compaction names
  its files, so it replaces them atomically: :func:`~.parquet.part_files`; no file is
  rewritten in place) holding their
  rows at times complete at ``C``, in order, and one progress update that sets the
  worker's frontier to ``C``.  The rows of incomplete epochs the crashed run wrote are
  gone with it; the replaced files stay for :data:`~timely_spark.capture.log_files.COMPACT_GRACE`
  seconds, so a read planned on them finishes, then the writer removes them.
* The restored writer drops the run's rows at times complete at ``C`` (the log has
  them) and writes its frontier as the join of ``C`` and the run's frontier.

So a reader of complete times -- ``spark.read``/``readStream.format("timely")``,
:func:`~.follow.follow` -- running across the failure sees every epoch once: an epoch
complete before the crash is never touched, and an incomplete one becomes complete only
with the restored run's rows.

A log captured by another number of workers than the restored run's cannot be resumed
(its files name their worker count, and each worker's stream continues where it was):
:class:`~timely_spark.errors.RestoreError` naming the log and both counts.

>>> import tempfile
>>> from timely_spark.capture import Messages, ParquetEventWriter, Progress, LogIndex
>>> path = tempfile.mkdtemp()
>>> w = ParquetEventWriter(path, flush_seconds=0.0)
>>> for t in range(3):                                      # epochs 0, 1, 2 complete ...
...     w.push(Messages(t, [t])); w.push(Progress([(t, -1), (t + 1, 1)]))
>>> w.push(Messages(3, [30])); w.flush()                    # ... and half of epoch 3: a crash
>>> point = resume_worker(path, 0, 1, 2, grace=0.0)         # restored at a snapshot of time 2
>>> point.cutoff, point.next_part, sorted(p.name for p in Path(path, "worker=0").glob("part-*"))[-2:]
(Antichain([3]), 5, ['part-000003-000004.parquet', 'part-000003.parquet'])
>>> sorted(s.rows for s in LogIndex(path).snapshot().scans())   # epoch 3's row is gone
[1, 1, 1]
"""

from __future__ import annotations

import json
import os
import time as _time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..errors import EventLogError, RestoreError
from ..progress import Antichain, MutableAntichain, timestamp
from .arrow_times import mask_at
from .log_files import COMPACT_GRACE, RESERVED, is_changelog, part_range, read_footer
from .log_index import LogIndex, local_path
from .part_file import DATA, PROGRESS, open_part, read_columns

__all__ = ["ResumePoint", "resume_worker", "join_frontiers", "remove_replaced", "written_under"]


@dataclass
class ResumePoint:
    """Where a restored writer of worker ``worker`` goes on: ``cutoff`` (the run's rows at
    times complete at it are in the log already), the worker's stream id, next part
    number and next event number, the log's time type, record layout and Arrow schema
    (None: no file of the log yet), whether it is a changelog, the counts of times its
    stream holds on disk (its frontier's, by time), and the files the rewrite
    replaced (to remove once ``grace`` seconds have passed, at ``remove_after``)."""

    cutoff: Antichain
    stream: Optional[str]
    next_part: int
    next_seq: int
    desc: Any
    layout: Optional[str]
    schema: Any
    changelog: bool
    counts: dict = field(default_factory=dict)
    replaced: list = field(default_factory=list)
    remove_after: float = 0.0


def _join(a: Any, b: Any) -> Any:
    """The least time ``>=`` both ``a`` and ``b`` (componentwise for ``Product``)."""
    le = timestamp.order_of(a)
    if le(a, b):
        return b
    if le(b, a):
        return a
    if type(a) is timestamp.Product:
        return timestamp.Product(_join(a[0], b[0]), _join(a[1], b[1]))
    raise EventLogError(f"times {a!r} and {b!r} have no least upper bound: an event log of this time type cannot "
                        "be resumed")


def join_frontiers(a: Any, b: Any) -> Antichain:
    """The frontier of the times at or beyond both frontiers ``a`` and ``b`` (an empty
    one, where everything is complete, wins).

    >>> join_frontiers(Antichain([3]), Antichain([5])), join_frontiers(Antichain([3]), Antichain())
    (Antichain([5]), Antichain([]))
    """
    out = Antichain()
    for x in a:
        for y in b:
            out.insert(_join(x, y))
    return out


def _at_most(frontier: Any, cutoff: Antichain) -> bool:
    """Whether every time ``frontier`` (an antichain) still allows includes every time
    ``cutoff`` allows: the frontier has not passed ``cutoff`` anywhere."""
    return all(frontier.less_equal(c) for c in cutoff)


def written_under(path: Any) -> Optional[str]:
    """The checkpoint directory of the run that wrote the event log at ``path`` (its
    files' ``checkpoint`` metadata; None: none, or no file yet)."""
    root = Path(local_path(path))
    for folder in sorted(root.glob("worker=*")) if root.is_dir() else []:
        for p in sorted(folder.iterdir()):
            if part_range(p.name) is not None:
                value = read_footer(p)[0].get("checkpoint")
                return str(value) if value is not None else None
    return None


def resume_worker(path: Any, worker: int, peers: int, restored: Any, grace: float = COMPACT_GRACE) -> ResumePoint:
    """Bring worker ``worker``'s directory of the event log at ``path`` to the cut of a run
    of ``peers`` workers restored at time ``restored`` (see the module's docstring) and
    say where its writer goes on.  RestoreError if the log was captured by another number
    of workers; EventLogError naming a damaged or foreign file."""
    root = Path(local_path(path))
    folder = root / f"worker={worker}"
    desc = timestamp.describe(restored)
    started = root.is_dir() and any(p.name.startswith("worker=") and any(p.iterdir()) for p in root.iterdir()
                                    if p.is_dir())
    start = timestamp.minimum_described(desc)
    if not started:
        return ResumePoint(Antichain([restored]), None, 0, 0, desc, None, None, False, {start: 1})
    snap = LogIndex(root, desc).snapshot()
    if snap.peers and snap.peers != peers:
        raise RestoreError(f"{root}: the event log was captured by {snap.peers} workers, but the restored run has "
                           f"{peers}: a captured log resumes only into the same number of workers (re-sharding "
                           f"{snap.peers} -> {peers} is not supported); capture the rescaled run into a new path")
    cutoff = join_frontiers(snap.frontier, Antichain([restored]))
    mine = [p for p in snap.parts if p.worker == worker]
    if not mine:
        return ResumePoint(cutoff, None, 0, 0, snap.desc, None, snap.schema, False, {start: 1})
    counts = MutableAntichain([(start, 1)])
    first = None
    for i, part in enumerate(mine):
        if any(cutoff.less_equal(t) for t in part.times):
            first = i
            break
        before = dict(counts.counts())
        counts.update_iter(part.progress)
        if not _at_most(counts.frontier(), cutoff):
            first = i
            counts = MutableAntichain(list(before.items()))
            break
    last_meta, last_table = _read(mine[-1].path)
    point = ResumePoint(cutoff, str(last_meta["stream"]), _range(mine[-1].path)[1] + 1,
                        _next_seq(last_table), snap.desc, str(last_meta["records"]), snap.schema,
                        is_changelog(last_meta), dict(counts.counts()))
    if first is None:
        point.replaced, point.remove_after = _covered(folder, grace)
        return point
    point.counts = {t: 1 for t in cutoff}
    (folder / "_CLOSED").unlink(missing_ok=True)       # its stream goes on
    replaced = [Path(p.path) for p in mine[first:]]
    point.next_part = _rewrite(replaced, mine[first:], cutoff, counts) + 1
    point.replaced, point.remove_after = _covered(folder, grace)
    return point


def _covered(folder: Path, grace: float) -> tuple[list, float]:
    """The part files of ``folder`` that a file standing for a range of parts replaces
    (this rewrite's or an earlier one's), and when their grace period ends."""
    spans = [(span, p) for p in folder.iterdir() for span in [part_range(p.name)] if span is not None]
    ranges = [(span, p) for span, p in spans if span[1] > span[0]]
    out, until = [], 0.0
    for span, p in spans:
        for (lo, hi), big in ranges:
            if big != p and lo <= span[0] and span[1] <= hi:
                out.append(p)
                until = max(until, big.stat().st_mtime + grace)
                break
    return out, until


def _range(path: str) -> tuple[int, int]:
    span = part_range(Path(path).name)
    assert span is not None
    return span


def _name(lo: int, hi: int) -> str:
    return f"part-{lo:06d}-{hi:06d}.parquet"


def _read(path: str) -> tuple[dict, Any]:
    with open_part(path) as part:
        meta = json.loads(part.schema_arrow.metadata[b"timely"])
        return meta, read_columns(path, part)


def _next_seq(table: Any) -> int:
    import pyarrow.compute as pc

    return int(pc.max(table["seq"]).as_py()) + 1 if table.num_rows else 0


def _rewrite(files: list, parts: list, cutoff: Antichain, counts: MutableAntichain) -> int:
    """Replace ``files`` (a worker's last part files, summarized in ``parts``) by one file:
    their data rows at times complete at ``cutoff``, then one progress event taking the
    worker's counts (``counts``, before the first of them) to ``cutoff``.  The file
    stands for a range of at least two part numbers (one more than there were, if need
    be), so no file is ever rewritten in place; returns the range's last number."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables, meta, seq = [], None, 0
    for path, part in zip(files, parts):
        file_meta, table = _read(str(path))
        meta = meta or file_meta
        seq = max(seq, _next_seq(table))
        table = table.replace_schema_metadata(None)
        keep = [plain for t, plain in zip(part.times, part.plain) if not cutoff.less_equal(t)]
        data = table.filter(pc.equal(table["kind"], DATA))
        tables.append(data.filter(mask_at(data["time"], pa.array(keep, data.schema.field("time").type)))
                      if keep else data.slice(0, 0))
    assert meta is not None
    schema = tables[0].schema
    change: dict = {}
    for t, c in counts.counts().items():
        change[t] = change.get(t, 0) - c
    for t in cutoff:
        change[t] = change.get(t, 0) + 1
    updates = [(t, d) for t, d in change.items() if d]
    n = len(updates)
    columns = {"seq": pa.array([seq] * n, pa.int64()), "kind": pa.array([PROGRESS] * n, pa.int8()),
               "time": pa.array([timestamp.to_plain(t) for t, _ in updates], schema.field("time").type),
               "diff": pa.array([d for _, d in updates], pa.int64())}
    progress = pa.Table.from_arrays([columns[f.name] if f.name in columns else pa.nulls(n, f.type)
                                     for f in schema], schema=schema)
    out = pa.concat_tables(tables + [progress])
    lo, hi = _range(str(files[0]))[0], _range(str(files[-1]))[1]
    hi = max(hi, lo + 1)
    while (Path(files[0]).parent / _name(lo, hi)).exists():     # a range file of an earlier restore: never rewritten
        hi += 1
    meta = {**meta, "part": lo, "through": hi}
    final = Path(files[0]).with_name(_name(lo, hi))
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    import pyarrow.parquet as pq

    pq.write_table(out.replace_schema_metadata({b"timely": json.dumps(meta).encode()}), tmp)
    os.replace(tmp, final)
    return hi


def remove_replaced(point: ResumePoint, now: Optional[float] = None) -> None:
    """Remove the files ``point``'s rewrite replaced, once their grace period is over."""
    if point.replaced and (now if now is not None else _time.time()) >= point.remove_after:
        for p in point.replaced:
            p.unlink(missing_ok=True)
        point.replaced = []


def record_fields(schema: Any) -> list:
    """The record columns of a log's Arrow schema (its own columns left out)."""
    return [f for f in schema if f.name not in RESERVED]
