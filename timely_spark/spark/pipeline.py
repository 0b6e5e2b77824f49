"""``ts.spark.stream``: a streaming DataFrame in, a timely dataflow in the middle, a
streaming DataFrame out -- one call.

Behind the call, three parts run in one Spark application, all under one ``checkpoint``
directory:

* ``<checkpoint>/input``: the input query, ``df.writeStream.format("timely")`` (its own
  checkpoint in ``<checkpoint>/input-query``): **each micro-batch is one epoch** of this
  event log, exactly once (see :mod:`.sink`);
* ``<checkpoint>/state``: the snapshots of a long-running barrier job
  (:func:`~timely_spark.spark.run` with ``checkpoint=``, ``snapshot_every=``,
  ``max_attempts=``) whose workers follow the input log
  (:func:`timely_spark.capture.follow`), run ``build(scope, stream)`` on it and capture
  its output, checked against ``schema``, into
* ``<checkpoint>/output``: the output event log, which :attr:`StreamingPipeline.df`
  reads as a streaming DataFrame (``spark.readStream.format("timely")``: complete epochs
  only, each once, with ``time``, ``worker``, the schema's columns and, for a changelog,
  ``diff``).

:meth:`StreamingPipeline.stop` stops the input query and the barrier job (and the
queries started with :meth:`StreamingPipeline.start_output`); calling ``stream`` again
with the same ``checkpoint`` resumes: the input query from its checkpoint, the workers
from their last snapshot, the output log keeping every epoch it completed and
rewriting only the incomplete ones -- every epoch exactly once.
"""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from ..capture.compact import compact_due
from ..capture.epoch_log import EpochLog
from ..capture.follow import follow
from ..capture.log_files import not_started
from ..capture.log_index import LogIndex, local_path
from ..capture.owner_lock import OwnerLock
from ..capture.parquet import ParquetEventWriter
from ..errors import EventLogError, ParameterError, RunTimeout, SparkSetupError
from ..function_pickle import dumps_function, loads_function
from ..runtime import DEFAULT_PEER_TIMEOUT, POLL_INTERVAL, check_count, check_timeout
from .connect import is_connect
from .datasource import register
from .output_schema import SchemaMismatch, arrow_schema, conform
from .preflight import check_session, held_slots, task_slots
from .runner import run
from .sink import record_columns

__all__ = ["stream", "StreamingPipeline", "PIPELINE_SNAPSHOT_EVERY", "PIPELINE_STOP_WAIT", "PIPELINE_COMPACT_EVERY",
           "PIPELINE_POLL"]

#: Default seconds between the pipeline's snapshots: after a failure or a stop, the
#: workers resume from the last one and replay the input epochs since (the output log
#: keeps each epoch once).
PIPELINE_SNAPSHOT_EVERY = 5.0

#: Default part files a writer's share of the input or output log gathers before the log is
#: compacted (:func:`timely_spark.capture.compact`: a few files per tier instead of two an
#: epoch, so a pipeline that runs for days keeps its logs' file counts, and its readers'
#: listings and indexes, small).
PIPELINE_COMPACT_EVERY = 64

#: Default seconds between the workers' looks at the input log: an epoch waits half of it
#: on average between its commit and the workers (a look lists a compacted log's few
#: files: about 1% of a core at this rate).
PIPELINE_POLL = 0.02

#: Seconds between worker 0's looks at whether the output log is due for compaction.
OUTPUT_COMPACT_PERIOD = 1.0

#: Seconds :meth:`StreamingPipeline.stop` waits for each part to end (the barrier job
#: after its cancel, its tasks' hold on the output log).
PIPELINE_STOP_WAIT = 60.0

#: How long the workers wait for the input query's first epoch: as long as the
#: pipeline runs (:meth:`StreamingPipeline.stop` ends the wait); a year, to stay finite.
INPUT_START_WAIT = 365 * 24 * 3600.0

#: Names an event log keeps for itself: neither the input nor the output may have them.
LOG_COLUMNS = ("time", "worker", "seq", "kind")

#: What an input column ``diff`` is called inside the input log (the sink keeps
#: ``diff`` for itself); the workers' stream has it back as ``diff``.
DIFF_CARRIER = "__timely_diff"


def _refuse_batch(df: Any) -> None:
    if getattr(df, "isStreaming", None) is not True:
        raise ParameterError(
            f"ts.spark.stream takes a streaming DataFrame (spark.readStream...), and this "
            f"{'one is a batch DataFrame' if hasattr(df, 'isStreaming') else type(df).__name__ + ' is not one'}: "
            "for a batch DataFrame use ts.spark.transform(df, build, schema)")


def _column_names(schema: Any) -> list:
    return [f.name for f in schema.fields]


def _check_names(names: list, what: str) -> None:
    clash = [n for n in names if n in LOG_COLUMNS]
    if clash:
        raise ParameterError(f"ts.spark.stream: the {what} has column(s) {clash}, names the event logs between the "
                             f"pipeline's parts keep for themselves ({', '.join(LOG_COLUMNS)}): rename them")


def _output_struct(struct: Any) -> Any:
    """The output stream's Spark schema: ``time``, ``worker``, the records' columns and
    ``diff`` last (for a changelog), as the ``"timely"`` reader gives them."""
    from pyspark.sql.types import LongType, StructField, StructType

    records = [f for f in struct.fields if f.name != "diff"]
    diff = [StructField("diff", LongType(), True)] if "diff" in _column_names(struct) else []
    return StructType([StructField("time", LongType(), True), StructField("worker", LongType(), True),
                       *records, *diff])


def _worker_function(input_log: str, output_log: str, build_bytes: bytes, out_schema: Any, carried: bool,
                     poll: float, compact_every: int) -> Callable[[Any], None]:
    """What each barrier task runs: follow the input log, ``build`` on it, capture the
    output (conformed to ``out_schema``) into the output log (worker 0 compacting it when
    a writer has ``compact_every`` new files), until the job is stopped (or the input log
    closed)."""
    def work(worker: Any) -> None:
        import pyarrow as pa

        user_build = loads_function(build_bytes)
        writer = ParquetEventWriter(output_log, worker=worker.index, peers=worker.peers, flush_seconds=0.0,
                                    schema=out_schema)

        def renamed(batches: list) -> list:
            return [pa.RecordBatch.from_arrays(rb.columns, names=["diff" if n == DIFF_CARRIER else n
                                                                  for n in rb.schema.names]) for rb in batches]

        def checked(batches: list) -> list:
            for rb in batches:
                if not isinstance(rb, pa.RecordBatch):
                    raise SchemaMismatch(f"worker {worker.index}: ts.spark.stream's build must return a stream of "
                                         f"pyarrow.RecordBatch records, got {type(rb).__name__}")
            return [conform(rb, out_schema, worker.index) for rb in batches]

        def dataflow(scope: Any) -> Any:
            records = follow(input_log, scope, poll=poll, start_wait=INPUT_START_WAIT)
            if carried:
                records = records.map_batches(renamed, name="InputDiff")
            out = user_build(scope, records).map_batches(checked, name="OutputSchema")
            out.capture_into(writer)
            return out.probe()

        probe = worker.dataflow(dataflow)
        due = [time.monotonic() + OUTPUT_COMPACT_PERIOD]

        def running() -> bool:
            if worker.index == 0 and time.monotonic() >= due[0]:
                compact_due(output_log, compact_every)
                due[0] = time.monotonic() + OUTPUT_COMPACT_PERIOD
            return not probe.done()

        worker.step_while(running)
        writer.close()

    return work


def _last_epoch(index: LogIndex, path: str) -> tuple[Optional[int], int]:
    """The last complete epoch of a log (None: none yet) and its rows at complete epochs."""
    try:
        snap = index.snapshot()
    except EventLogError:
        if not_started(path):
            return None, 0
        raise
    rows = sum(s.rows for s in snap.complete())
    if not snap.frontier.elements():        # closed: every epoch written is complete
        times = [t for part in snap.parts for t in part.times]
        return (max(times) if times else None), rows
    first = min(snap.frontier.elements())
    return (first - 1 if first > 0 else None), rows


def _committed_at(progress: dict) -> Optional[float]:
    """When a micro-batch's epoch was committed: its trigger's start plus its duration."""
    try:
        start = datetime.datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
        seconds = start.replace(tzinfo=datetime.timezone.utc).timestamp()
        return seconds + progress["durationMs"].get("triggerExecution", 0) / 1000.0
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


class StreamingPipeline:
    """A running :func:`stream` pipeline: its output as a streaming DataFrame
    (:attr:`df`), its progress (:attr:`last_progress`), and :meth:`stop`.  A context
    manager: leaving the block stops it."""

    def __init__(self, spark: Any, checkpoint: Path, output_struct: Any, input_query: Any, workers: int,
                 job: dict) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self.workers = workers
        self.input_log, self.output_log = str(checkpoint / "input"), str(checkpoint / "output")
        self.input_query = input_query
        self.output_queries: list = []
        self._struct = output_struct
        self._indexes = (LogIndex(self.input_log), LogIndex(self.output_log))
        self._group = f"timely_spark-stream-{uuid.uuid4().hex}"
        self._stopping = threading.Event()
        self._error: Optional[BaseException] = None
        self._job: Optional[threading.Thread] = None
        self._reported = -1
        self._start_job(**job)

    # ---- the parts --------------------------------------------------------------------
    def _start_job(self, fn: Callable, max_attempts: int, snapshot_every: float, peer_timeout: float) -> None:
        def job() -> None:
            tag = self._tag(self._group)
            try:
                run(self.spark, fn, workers=self.workers, max_attempts=max_attempts, peer_timeout=peer_timeout,
                    checkpoint=str(self.checkpoint / "state"), snapshot_every=snapshot_every)
                if not self._stopping.is_set():
                    self._error = EventLogError(f"{self.input_log}: the input log was closed; the pipeline ended")
            except BaseException as exc:  # noqa: BLE001 -- reported by the caller's thread
                if not self._stopping.is_set():
                    self._error = exc
            finally:
                tag()

        self._job = threading.Thread(target=job, name="timely_spark stream job", daemon=True)
        self._job.start()

    def _tag(self, group: str) -> Callable[[], None]:
        """This thread's Spark jobs in ``group`` (Connect: tagged), cancelled by :meth:`stop`;
        returns what undoes it."""
        if is_connect(self.spark):
            self.spark.addTag(group)
            return lambda: self.spark.removeTag(group)
        sc = self.spark.sparkContext
        sc.setJobGroup(group, "timely_spark stream: the barrier job following the input", interruptOnCancel=True)
        return lambda: sc.setLocalProperty("spark.jobGroup.id", None)

    def _cancel(self) -> None:
        if is_connect(self.spark):
            self.spark.interruptTag(self._group)
        else:
            self.spark.sparkContext.cancelJobGroup(self._group)

    # ---- the output -------------------------------------------------------------------
    @property
    def df(self) -> Any:
        """The output as a streaming DataFrame: ``time`` (the epoch), ``worker``, the
        schema's columns (``diff`` last for a changelog), each complete epoch once."""
        return self.spark.readStream.format("timely").schema(self._struct).load(self.output_log)

    def start_output(self, writer: Any, *args: Any, **kwargs: Any) -> Any:
        """``writer.start(*args, **kwargs)`` (``writer``: ``pipeline.df.writeStream...``),
        a query that :meth:`stop` stops too; the StreamingQuery."""
        query = writer.start(*args, **kwargs)
        self.output_queries.append(query)
        return query

    # ---- progress ---------------------------------------------------------------------
    def exception(self) -> Optional[BaseException]:
        """Why the pipeline failed (the barrier job's error, or the input query's), or None."""
        if self._error is not None:
            return self._error
        if not self._stopping.is_set() and not self.input_query.isActive:
            error = self.input_query.exception()
            if error is not None:
                return error
            return EventLogError(f"{self.input_log}: the input query stopped; the pipeline has no more input")
        return None

    @property
    def is_active(self) -> bool:
        """Whether every part runs (not stopped, not failed)."""
        return not self._stopping.is_set() and self.exception() is None

    @property
    def last_progress(self) -> dict:
        """What the pipeline has done, as ``StreamingQuery.lastProgress`` tells a query's:
        ``epoch_in`` (the last epoch complete in the input log; None: none yet),
        ``epoch_out`` (the last complete in the output), ``rows_in`` and ``rows_out`` (their
        rows at complete epochs), ``lag_epochs`` (epochs in, not yet out) and
        ``lag_seconds`` (since the oldest of them was committed), ``workers``, ``active``."""
        epoch_in, rows_in = _last_epoch(self._indexes[0], self.input_log)
        epoch_out, rows_out = _last_epoch(self._indexes[1], self.output_log)
        behind = (-1 if epoch_in is None else epoch_in) - (-1 if epoch_out is None else epoch_out)
        lag = 0.0
        if behind > 0:
            first = 0 if epoch_out is None else epoch_out + 1
            committed = [_committed_at(p) for p in self._recent() if p.get("batchId", -1) >= first]
            known = [c for c in committed if c is not None]
            lag = max(0.0, time.time() - min(known)) if known else 0.0
        return {"epoch_in": epoch_in, "epoch_out": epoch_out, "rows_in": rows_in, "rows_out": rows_out,
                "lag_epochs": max(0, behind), "lag_seconds": round(lag, 3), "workers": self.workers,
                "active": self.is_active}

    progress = last_progress

    def _recent(self) -> list:
        try:
            return list(self.input_query.recentProgress)
        except Exception:  # a stopped session
            return []

    def __repr__(self) -> str:
        p = self.last_progress
        return (f"<StreamingPipeline {self.checkpoint}: epoch {p['epoch_in']} in, {p['epoch_out']} out, "
                f"{p['rows_in']} rows in, {p['rows_out']} out, lag {p['lag_epochs']} epochs "
                f"({p['lag_seconds']} s){'' if p['active'] else ', stopped'}>")

    def await_epoch(self, epoch: int, timeout: float = 600.0,
                    report: Optional[Callable[[str], Any]] = None) -> dict:
        """Wait until output epoch ``epoch`` is complete; its :attr:`last_progress`.
        ``report`` (e.g. ``print``) gets a progress line (``epoch N: ...``, N the newest
        complete output epoch) whenever the output moves on.
        Raises the pipeline's error if it failed, and ``RunTimeout`` after ``timeout`` s."""
        check_timeout("timeout", timeout, allow_none=False)
        deadline = time.monotonic() + timeout
        while True:
            error = self.exception()
            if error is not None:
                raise error
            progress = self.last_progress
            done = progress["epoch_out"]
            if report is not None and done is not None and done > self._reported:
                report(f"epoch {done}: {progress['rows_in']} rows in, {progress['rows_out']} rows out, "
                       f"lag {progress['lag_epochs']} epochs ({progress['lag_seconds']:.1f} s)")
                self._reported = done
            if done is not None and done >= epoch:
                return progress
            if self._stopping.is_set():
                raise ParameterError(f"await_epoch({epoch}): the pipeline was stopped at output epoch {done}")
            if time.monotonic() > deadline:
                raise RunTimeout(timeout, {"pipeline": f"output epoch {epoch} not complete (last: {done}; "
                                                      f"input: {progress['epoch_in']})"})
            time.sleep(POLL_INTERVAL)

    # ---- the end ----------------------------------------------------------------------
    def stop(self, timeout: float = PIPELINE_STOP_WAIT) -> None:
        """Stop the output queries started with :meth:`start_output`, the input query and
        the barrier job (cancelled; its tasks' hold on the output log released), each
        wait bounded by ``timeout`` seconds.  Idempotent.  Started again with the same
        ``checkpoint``, the pipeline resumes where its parts stopped, each epoch once."""
        self._stopping.set()
        for query in [*self.output_queries, self.input_query]:
            try:
                query.stop()
            except Exception:  # a query that failed: its error is the pipeline's
                pass
        if self._job is not None and self._job.is_alive():
            deadline = time.monotonic() + timeout
            while self._job.is_alive() and time.monotonic() < deadline:
                self._cancel()
                self._job.join(min(1.0, max(0.0, deadline - time.monotonic())))
            if self._job.is_alive():
                raise RunTimeout(timeout, {"pipeline": "the barrier job did not end after its cancel"})
        self._released(timeout)

    def _released(self, timeout: float) -> None:
        """Wait until the cancelled tasks' processes let go of the output log's worker
        directories (so a pipeline started again can write them)."""
        deadline = time.monotonic() + timeout
        for w in range(self.workers):
            directory = Path(self.output_log) / f"worker={w}"
            while directory.is_dir():
                try:
                    OwnerLock(directory, "the output log", EventLogError).release()
                    break
                except EventLogError:
                    if time.monotonic() > deadline:
                        raise RunTimeout(timeout, {w: "its task still holds the output log"}) from None
                    time.sleep(POLL_INTERVAL)

    def __enter__(self) -> "StreamingPipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _workers(spark: Any, workers: Optional[int]) -> int:
    """The workers of the pipeline; SparkSetupError unless they and one slot for the
    streaming queries' tasks fit in the session's free task slots."""
    sc = check_session(spark, 1 if workers is None else workers)
    slots, held = task_slots(sc), held_slots(sc)
    free = slots - held
    chosen = workers if workers is not None else max(1, free - 1)
    if chosen + 1 > free:
        busy = f", {held} of them held by running timely jobs" if held else ""
        raise SparkSetupError(
            f"ts.spark.stream needs {chosen + 1} task slots running at once -- {chosen} for the timely workers "
            f"(a barrier job holds its slots for its whole life) and 1 that the streaming queries' tasks (the "
            f"input query, the queries reading the output) take turns on -- but the session has {slots}{busy}: "
            f"use fewer workers, or more slots (on one machine local[N] with N above the cores)")
    return chosen


def stream(df: Any, build: Callable[[Any, Any], Any], schema: Any, checkpoint: Any,
           workers: Optional[int] = None, snapshot_every: float = PIPELINE_SNAPSHOT_EVERY, max_attempts: int = 3,
           trigger: Optional[dict] = None, peer_timeout: float = DEFAULT_PEER_TIMEOUT,
           poll: float = PIPELINE_POLL, compact_every: int = PIPELINE_COMPACT_EVERY) -> StreamingPipeline:
    """Run ``build(scope, stream) -> stream`` over the streaming DataFrame ``df``; the
    running pipeline (a :class:`StreamingPipeline`), whose :attr:`~StreamingPipeline.df`
    is the output as a streaming DataFrame.

    **A micro-batch is an epoch**: the records ``df`` gives in micro-batch ``n`` enter
    the dataflow at time ``n`` (Arrow record batches of ``df``'s columns, each worker a
    share; a ``diff`` column is kept: a changelog in); the returned stream's record
    batches must fit ``schema`` (a StructType or DDL string, by column name, as
    ``ts.spark.transform``'s; include ``diff long`` when it is a changelog); they leave
    at their times, each complete epoch once, as the rows of ``pipeline.df``: ``time``,
    ``worker``, the schema's columns, ``diff`` last.  An output that does not fit is a
    ``SchemaMismatch`` naming the worker and the column (from
    :meth:`~StreamingPipeline.await_epoch` or :meth:`~StreamingPipeline.exception`).

    The parts (see the module's docstring) live under ``checkpoint``, a directory the
    driver and every executor see at the same path.  The workers snapshot their state
    every ``snapshot_every`` seconds; a failed barrier job is retried up to
    ``max_attempts`` times from its last snapshot.  Called again with the same
    ``checkpoint`` (after :meth:`~StreamingPipeline.stop`, or a driver that died), it
    resumes: every epoch exactly once in the output.  ``trigger``: the input query's
    ``writeStream.trigger(**trigger)`` (e.g. ``{"processingTime": "1 second"}``).  ``poll``:
    seconds between the workers' looks at the input log.  Both logs are compacted as they
    grow (``compact_every`` part files of a writer: see :func:`timely_spark.capture.compact`).

    Before anything starts: ``ParameterError`` if ``df`` is a batch DataFrame (use
    :func:`ts.spark.transform <timely_spark.spark.transform>`) or a column of ``df`` or
    ``schema`` is named ``time``, ``worker``, ``seq`` or ``kind``; ``EventLogError`` naming
    the column if ``df``'s columns differ from those the input log under ``checkpoint``
    holds (a stream whose schema changed: start it on a new checkpoint); ``SparkSetupError``
    unless the session has ``workers`` + 1 free task slots (the workers hold theirs for
    the pipeline's life; the streaming queries' tasks take turns on one more).  By
    default ``workers`` is the free slots less one.

        with ts.spark.stream(spark.readStream.json(src, schema=...),
                             lambda scope, s: s.group_by("word").aggregate([([], "count_all")], running=True),
                             "word string, count_all long, diff long", checkpoint="/data/wc") as pipeline:
            query = pipeline.start_output(pipeline.df.writeStream.format("console"))
            pipeline.await_epoch(10, report=print)
    """
    _refuse_batch(df)
    if checkpoint is None:
        raise ParameterError("ts.spark.stream needs checkpoint=DIR: where its input log, snapshots and output log "
                             "live (the same directory resumes the pipeline)")
    check_count("max_attempts", max_attempts)
    check_timeout("snapshot_every", snapshot_every, allow_none=False)
    check_timeout("poll", poll, allow_none=False)
    check_count("compact_every", compact_every)
    columns = list(df.columns)
    _check_names(columns, "input DataFrame")
    struct, out_schema = arrow_schema(df, schema)
    _check_names(_column_names(struct), "output schema")
    workers = _workers(df.sparkSession, workers)
    root = Path(local_path(str(checkpoint))).absolute()
    root.mkdir(parents=True, exist_ok=True)
    spark = df.sparkSession
    register(spark)
    carried = "diff" in columns
    source = df.withColumnRenamed("diff", DIFF_CARRIER) if carried else df
    EpochLog.create(root / "input", record_columns(source.schema, root / "input"))   # a changed input: refused now
    writer = (source.writeStream.format("timely").option("checkpointLocation", str(root / "input-query"))
              .option("compact_every", str(compact_every)))
    if trigger:
        writer = writer.trigger(**trigger)
    fn = _worker_function(str(root / "input"), str(root / "output"), dumps_function(build), out_schema, carried, poll,
                          compact_every)
    query = writer.start(str(root / "input"))
    try:
        return StreamingPipeline(spark, root, _output_struct(struct), query, workers, job={
            "fn": fn, "max_attempts": max_attempts, "snapshot_every": snapshot_every, "peer_timeout": peer_timeout})
    except BaseException:
        query.stop()
        raise

