"""``df.writeStream.format("timely")``: a Structured Streaming sink writing an event log.

    (df.writeStream.format("timely")
       .option("checkpointLocation", "/data/edges-ckpt")
       .start("/data/edges-log"))

**The epoch of a row is the id of the micro-batch that wrote it** (``batchId``, 0, 1,
2... as in the query's checkpoint): each micro-batch becomes one epoch -- one time --
of a Parquet event log of int times, in the layout ``spark.read.format("timely")``,
``spark.readStream.format("timely")`` and :func:`timely_spark.capture.follow` read
(one capturing stream, ``worker=0``; the columns are the DataFrame's, ``time`` is the
epoch).

Each task of a micro-batch writes its rows (Arrow, no Python call per row) as a staged
part file nobody reads; the driver's commit publishes them and then the epoch's
completion in one rename (see :mod:`timely_spark.capture.epoch_log`).  Exactly once, with
the query's checkpoint: a micro-batch Spark runs again after a failure or a restart
replaces what a failed commit left and never adds its epoch twice (an epoch complete
already is skipped, as Spark's file sink does); an aborted micro-batch leaves nothing
a reader sees.  The log's frontier is the first epoch not committed, so a downstream
reader knows when an epoch is whole.  One query writes one log: give each query its
own path (and keep its checkpoint with it); the first commit binds the log to its
query, and a batch of another query (or of the same query started again without its
checkpoint: its batch ids start over) fails with ``EventLogError``.  :func:`close_sink_log` closes the log
once the query has stopped: its readers then end.

Option ``compact_every`` (a number of files, default 0: off): after a commit, when the
log has that many part files since its last compaction, the driver compacts it
(:func:`timely_spark.capture.compact`: complete epochs into one file, safe for running
readers).

A column the log cannot hold (a type Arrow cannot carry, a name the log uses itself:
``seq``, ``kind``, ``time``, ``diff``, ``worker``) and a path that holds another kind of
log fail the query with ``EventLogError`` naming them.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Optional

from pyspark.sql.datasource import WriterCommitMessage

from ..capture.compact import compact_due
from ..capture.epoch_log import EpochLog, Staged
from ..capture.log_index import local_path
from ..errors import EventLogError

try:   # PySpark >= 4.1: executors get Arrow record batches
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _Base
    _ARROW = True
except ImportError:       # pragma: no cover -- PySpark 4.0: rows
    from pyspark.sql.datasource import DataSourceStreamWriter as _Base  # type: ignore[assignment]
    _ARROW = False

__all__ = ["TimelyStreamWriter", "StagedMessage", "close_sink_log", "compact_option", "record_columns",
           "BATCH_ID_PROPERTY", "QUERY_ID_PROPERTY"]

#: The Spark local property holding the id of the micro-batch a task belongs to.
BATCH_ID_PROPERTY = "streaming.sql.batchId"

#: The Spark local property holding the id of the streaming query a task belongs to
#: (kept across restarts from the query's checkpoint).
QUERY_ID_PROPERTY = "sql.streaming.queryId"


class StagedMessage(WriterCommitMessage):
    """A task's commit message: its staged file."""

    def __init__(self, staged: Staged) -> None:
        self.staged = staged


def record_columns(schema: Any, path: Any) -> Any:
    """The Arrow record columns of a Spark schema written to the log at ``path``;
    EventLogError naming the column Arrow (and so the log) cannot hold."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

    fields = []
    for field in schema.fields:
        try:
            arrow = to_arrow_type(field.dataType, timezone="UTC")
            from_arrow_type(arrow)
        except Exception as exc:
            raise EventLogError(f"{path}: column {field.name!r} of type {field.dataType.simpleString()} cannot be "
                                f"held by an event log ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                                "cast it or drop it before writeStream") from None
        fields.append(pa.field(field.name, arrow))
    return pa.schema(fields)


class TimelyStreamWriter(_Base):
    """The sink's writer: made on the driver (which checks the log and the columns),
    pickled to the executors for :meth:`write`."""

    def __init__(self, path: str, schema: Any, compact_every: int = 0) -> None:
        self.path = local_path(path)
        self.compact_every = compact_every
        self.records = record_columns(schema, self.path)
        EpochLog.create(self.path, self.records)         # fails on another log or other columns

    def write(self, iterator: Iterator[Any]) -> StagedMessage:
        """Stage this task's rows at the micro-batch's epoch (on an executor)."""
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        if ctx is None or batch_id is None:
            raise EventLogError(f"{self.path}: the timely sink runs in a streaming query only (no micro-batch id)")
        if _ARROW:
            batches = list(iterator)
        else:       # pragma: no cover
            batches = [pa.RecordBatch.from_pylist([r.asDict(recursive=True) for r in iterator])]
        table = pa.Table.from_batches(batches) if batches else self.records.empty_table()
        log = EpochLog.open(self.path)
        return StagedMessage(log.stage(int(batch_id), ctx.partitionId(), table, attempt=ctx.taskAttemptId(),
                                       query=ctx.getLocalProperty(QUERY_ID_PROPERTY)))

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        """Publish the micro-batch as epoch ``batchId`` (on the driver)."""
        EpochLog.open(self.path).commit(batchId, [_staged(m) for m in messages])
        if self.compact_every:
            compact_due(self.path, self.compact_every)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        """Drop the micro-batch's staged files: nothing of it is visible."""
        EpochLog.open(self.path).abort(batchId, [_staged(m) for m in messages])


def _staged(message: Any) -> Optional[Staged]:
    return message.staged if isinstance(message, StagedMessage) else None


def compact_option(options: Any) -> int:
    """The sink's ``compact_every`` option as a whole number >= 0; EventLogError naming it otherwise."""
    raw = str(options.get("compact_every", "0")).strip()
    if not raw.isdigit():
        raise EventLogError(f"option compact_every must be a whole number of files >= 0 (0: off), got {raw!r}")
    return int(raw)


def close_sink_log(path: Any) -> None:
    """Close the event log a ``writeStream.format("timely")`` query wrote at ``path``
    (after the query stopped): its frontier becomes empty, so its followers
    (:func:`timely_spark.capture.follow`) end and a ``readStream`` has read everything.
    Nothing can be written to it afterwards.  Idempotent.  (In a job:
    ``query.stop(); ts.spark.close_sink_log("/data/edges-log")``.)

    >>> import tempfile, pyarrow as pa
    >>> from timely_spark.capture import LogIndex
    >>> from timely_spark.capture.epoch_log import EpochLog
    >>> path = tempfile.mkdtemp() + "/edges-log"
    >>> _ = EpochLog.create(path, pa.schema([("src", pa.int64())]))     # what the sink makes
    >>> close_sink_log(path); LogIndex(path).snapshot().frontier
    Antichain([])
    """
    EpochLog.open(path).close()
