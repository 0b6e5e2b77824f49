"""``ts.spark.transform``: a DataFrame in, a timely dataflow in the middle, a DataFrame out.

Built on ``DataFrame.mapInArrow(func, schema, barrier=True)``, so it also works over
Spark Connect.  Each partition of the input is one worker: its Arrow record batches
(or, with ``rows=True``, its rows as dicts) enter the dataflow as an input stream at
time 0; the records of the stream that ``build`` returns leave as the rows of the
result, which must match ``schema``.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Iterator, Optional

from ..function_pickle import dumps_function, loads_function
from ..runtime import DEFAULT_PEER_TIMEOUT, Config, new_secret
from .arrow_spread import received, spread
from .barrier import reporting_failures, run_in_barrier_task, task_config
from .cached_input import cached_partitions
from .connect import connect_session, is_connect
from .file_input import FileInput, file_input
from .job_errors import install as install_error_translation
from .output_schema import SchemaMismatch, arrow_schema, conform, rows_batch
from .output_stream import OutputStream
from .packed_rows import pack, packable, packed_struct, unpack
from .preflight import check_session, refuse_streaming, task_slots
from .rendezvous import TICKET_IDLE_TIMEOUT, Ticket, report_stats, session_rendezvous, stage_canceller
from .stage_boundary import after_barrier
from .task_input import chunked
from .task_stats import TaskStats, task_report

__all__ = ["transform", "SchemaMismatch"]


def _to_batches(taken: list, schema: Any, rows: bool, worker: int) -> Iterator[Any]:
    """Batches of output records as record batches of exactly ``schema`` (see
    :mod:`.output_schema`); rows taken together become one record batch."""
    import pyarrow as pa

    if rows:
        yield rows_batch([r for records in taken for r in records], schema, worker)
        return
    for records in taken:
        for rb in records:
            if not isinstance(rb, pa.RecordBatch):
                raise SchemaMismatch(f"worker {worker}: ts.spark.transform's output stream must carry "
                                     f"pyarrow.RecordBatch records (or pass rows=True), got {type(rb).__name__}")
            yield conform(rb, schema, worker)


def _planned_partitions(df: Any) -> Optional[int]:
    """The partitions ``df``'s physical plan says it has when it ends in a shuffle by key
    (None otherwise, and over Spark Connect).  Runs no Spark job."""
    if is_connect(df.sparkSession):
        return None
    partitioning = df._jdf.queryExecution().sparkPlan().outputPartitioning()
    if partitioning.getClass().getSimpleName() != "HashPartitioning":
        return None     # only a shuffle by key ends a stage; a coalesce would share the barrier stage
    return int(partitioning.numPartitions()) or None


def _fit_to_slots(df: Any) -> tuple[Optional[int], Optional[FileInput], bool]:
    """How ``df`` meets the task slots: its partition count (None over Spark Connect)
    when its partitions fit in them, else the slots -- with the input read by that many
    tasks themselves when it is a plain Parquet scan (its :class:`.file_input.FileInput`),
    or else spread over them as Arrow (True: barrier stages cannot coalesce, see
    :mod:`.arrow_spread`), and a warning.  Runs no Spark job: the partition count comes
    from the physical plan (or, for a plan that does not know it, such as local data,
    from its RDD, which has no shuffle to run)."""
    if is_connect(df.sparkSession):  # no plan to read: Spark checks the slots itself
        check_session(df.sparkSession, 1)
        return None, None, False
    slots = task_slots(check_session(df.sparkSession, 1))
    planned = int(df._jdf.queryExecution().sparkPlan().outputPartitioning().numPartitions())
    partitions = planned or df.rdd.getNumPartitions()
    if partitions <= slots:
        return partitions, None, False
    direct = file_input(df, slots)
    how = "reading its files in" if direct is not None else "spreading it over"
    warnings.warn(f"ts.spark.transform: the input has {partitions} partitions but the cluster runs {slots} tasks at "
                  f"once; {how} {slots} timely workers (pass workers= to choose)", stacklevel=3)
    return slots, direct, direct is None


def _ticket(df: Any, secret: bytes, config: Config, on_stats: Optional[Callable[[dict], Any]],
            checked: Any = None) -> Optional[Ticket]:
    """A rendezvous ticket for the job's tasks (open while the result is used: it may run
    again later; closed after ``TICKET_IDLE_TIMEOUT`` seconds without use), and the
    driver's error translation installed -- or None where the tasks meet through
    ``allGather`` (over Spark Connect, when this client is not on the Spark driver's
    host: see :func:`.rendezvous.session_rendezvous`), and errors stay Spark's.
    ``on_stats`` takes the timings the job's tasks send (see :func:`_accumulator`).
    ``checked``: what :func:`.preflight.check_session` returned, if it ran (over Spark
    Connect, the session with its settings: no round trip to read them again)."""
    install_error_translation()
    spark = df.sparkSession
    if is_connect(spark):
        service = session_rendezvous(checked if is_connect(checked) else connect_session(spark))
    else:
        service = session_rendezvous(spark.sparkContext, spark.conf)
    if service is None:
        return None
    return service.open(secret, config.connect_timeout, idle=TICKET_IDLE_TIMEOUT, on_stats=on_stats,
                        cancel_stage=None if is_connect(spark) else stage_canceller(spark.sparkContext))


def _accumulator(df: Any, stats: Optional[dict]) -> Any:
    """A Spark accumulator merging the tasks' stats into ``stats`` (None without
    ``stats``, and over Spark Connect, which has no accumulators: there the tasks send
    their stats to the driver's rendezvous instead, see :func:`_on_stats`)."""
    if stats is None or is_connect(df.sparkSession):
        return None
    return df.sparkSession.sparkContext.accumulator(stats, TaskStats())


def _on_stats(stats: Optional[dict], accumulator: Any) -> Optional[Callable[[dict], Any]]:
    """Where the rendezvous puts the timings the tasks send it: ``stats["tasks"]`` when
    ``stats`` is wanted and no accumulator carries them (over Spark Connect)."""
    if stats is None or accumulator is not None:
        return None
    return stats.setdefault("tasks", []).append


def transform(df: Any, build: Callable[[Any, Any], Any], schema: Any, rows: bool = False,
              workers: Optional[int] = None, timeout: Optional[float] = None,
              peer_timeout: float = DEFAULT_PEER_TIMEOUT, stats: Optional[dict] = None) -> Any:
    """Run ``build(scope, stream) -> stream`` over ``df``, one timely worker per partition.

    ``stream`` carries the partition's ``pyarrow.RecordBatch`` es (``rows=True``: one
    dict per row); the returned stream's records -- record batches, or (with
    ``rows=True``) dicts, tuples or Rows -- become the result's rows, which must match
    ``schema`` (a StructType or a DDL string) by column name, with types that cast
    without changing a value; otherwise (or for records of any other kind) the job fails
    with ``SchemaMismatch`` naming the worker and the column.

    The result is an ordinary DataFrame: ``show``, ``first``, ``take``, ``limit``,
    ``coalesce``, ``union`` all work, because the barrier stage ends in a shuffle that
    keeps each worker's rows in its own partition (:mod:`.stage_boundary`); the rows
    cross it packed into arrays, a few hundred kilobytes a row, when the schema's fields
    are all nullable (:mod:`.packed_rows`).

    Lazy, like any DataFrame transformation: calling it runs no Spark job. With
    ``workers=N`` the input is spread over N partitions (N workers) unless its plan has N
    partitions already (e.g. ``df.repartition(N, key)``: no second shuffle), or it reads a
    *loaded* cache of exactly N partitions (``edges = df.repartition(N).cache();
    edges.count()``, or a projection or filter of it: :func:`.cached_input.cached_partitions`):
    then the barrier tasks read the cached partitions as they are, one a worker, with no
    stage before theirs. A cache not loaded yet (or not wholly), or of another partition
    count, is spread, and so is any cache over Spark Connect (which cannot look at it). By
    default the input's partitions are kept when they fit in the task slots (a cache's
    too), and spread over the slots otherwise. Spreading converts the input to Arrow once and shuffles it as Arrow, each
    worker an equal share of every input partition, not in order (see :mod:`.arrow_spread`).
    Instead of that shuffle, an input that is a plain scan of local Parquet files (columns
    selected, renamed or widened; ``file:`` paths) is read by the barrier tasks themselves,
    each an equal share of the rows, in file order (see :mod:`.file_input`); the result's
    plan then starts at a range of N rows, not at the scan. Spark's Arrow batches are joined
    into chunks of about ``INPUT_CHUNK_BYTES`` before the worker sees them. ``timeout``
    bounds each worker's run; ``peer_timeout`` is how long a worker may stay silent. Runs as
    ``mapInArrow(..., barrier=True)``, so it also works over Spark Connect.
    Before planning, ``SparkSetupError`` if the session cannot run ``workers`` barrier
    tasks at once, and ``ParameterError`` naming the route a stream takes if ``df`` is a
    streaming DataFrame.

    Errors surface in the action that runs the result (``collect``, ``write``...):
    a worker's error as ``WorkerError`` (worker, operator, original traceback), an
    output that does not fit ``schema`` as ``SchemaMismatch``, executors that cannot
    import the package as ``SparkSetupError`` -- each with Spark's error as its
    ``__cause__`` (``__context__`` for ``SparkSetupError``; over Spark Connect, Spark's
    error is not chained).  A bad ``workers`` is a ``ParameterError``.

    ``transform`` takes no ``checkpoint``: its whole input enters at one time (0), so no
    time completes before the input is all read and there is nothing to snapshot
    earlier; and its output is Spark's, handed to the next stage as it is made, which
    Spark recomputes from the input when it re-runs the stage.  A job that must resume
    after a failure runs with :func:`timely_spark.spark.run` (``checkpoint=``,
    ``max_attempts=``) over a followed log instead.

    Each worker's output leaves for Spark as it is made: at most
    ``OUTPUT_BATCHES_IN_FLIGHT`` of its output batches wait at once, so a worker holds a
    few batches, not its whole output.  ``stats`` (a dict) receives, when an action runs
    the result, ``stats["tasks"]``: per task, where its time went (stage start,
    rendezvous, input, compute, output) and the most output rows it held at once
    (``peak_rows_held``); see :mod:`.task_stats`.  Over Spark Connect the same, sent by
    the tasks to the driver's rendezvous (no accumulators there), with ``stage_start``
    None (Connect cannot tell when Spark submitted the stage); with no rendezvous to
    reach (tasks meeting through ``allGather``), ``stats`` stays empty.

        counts = ts.spark.transform(
            words_df,
            lambda scope, batches: batches.group_by("word").aggregate([([], "count_all")]),
            "word string, count_all long")
    """
    refuse_streaming(df, "ts.spark.transform")
    struct, out_schema = arrow_schema(df, schema)
    config = task_config(timeout=timeout, peer_timeout=peer_timeout)
    partitions: Optional[int] = workers
    direct: Optional[FileInput] = None
    spreading = False
    checked = None
    cached: Optional[int] = None                   # the partitions of a loaded cache df reads, if looked at
    if workers is not None:
        checked = check_session(df.sparkSession, workers)
        if _planned_partitions(df) != workers:     # a DataFrame partitioned already (by key) is kept
            cached = cached_partitions(df)         # so is a loaded cache of `workers` partitions: no shuffle
            if cached != workers:
                direct = file_input(df, workers)   # a plain Parquet scan: the tasks read it, no shuffle
                spreading = direct is None
    else:
        partitions, direct, spreading = _fit_to_slots(df)
        if partitions is not None and direct is None and not spreading:
            cached = cached_partitions(df)         # kept as they are: from a cache, for the stats
    from_cache = cached is not None and cached == partitions and direct is None and not spreading
    if spreading:
        assert partitions is not None
        df = spread(df, partitions)                # converted to Arrow once, shuffled as Arrow
    source = df if direct is None else df.sparkSession.range(0, partitions or 1, 1, partitions or 1)
    packed = packable(struct)
    build_bytes = dumps_function(build)
    secret = new_secret()
    accumulator = _accumulator(df, stats)
    on_stats = _on_stats(stats, accumulator)
    ticket = _ticket(df, secret, config, on_stats, checked)
    sends_stats = on_stats is not None and ticket is not None

    def func(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import BarrierTaskContext

        started, start = time.time(), time.perf_counter()
        user_build = loads_function(build_bytes)
        output = OutputStream()
        task: dict = {"input": 0.0, "cpu_from": time.process_time()}
        ctx = BarrierTaskContext.get()
        index = ctx.partitionId()

        def work(worker: Any) -> None:
            def dataflow(scope: Any) -> Any:
                inp, stream = scope.new_input("DataFrame")
                user_build(scope, stream).inspect_batch(lambda t, data: output.put(data))
                return inp

            inp = worker.dataflow(dataflow)
            reading = time.perf_counter()
            if from_cache:
                task["input_from"] = "cache"
            if direct is not None:
                task["input_from"] = "files"
                for _ in batches:       # the range's row: the task reads its files instead
                    pass
            inputs = direct.read(index) if direct is not None else received(batches) if spreading else batches
            for chunk in chunked(inputs):
                task["input"] += time.perf_counter() - reading
                inp.send_batch([r for rb in chunk for r in rb.to_pylist()] if rows else chunk)
                worker.step()
                reading = time.perf_counter()
            task["input"] += time.perf_counter() - reading
            inp.close()

        try:
            with reporting_failures(ticket):
                for taken in output.run(lambda: run_in_barrier_task(work, config, secret, stats=task,
                                                                     ticket=ticket)):
                    for rb in _to_batches(taken, out_schema, rows, index):
                        yield pack(rb) if packed else rb
        finally:
            output.close()      # after any failure was reported: the worker stops at its next output
        if accumulator is not None:
            accumulator.add({"tasks": [task_report(task, index, ctx.stageId(), started, start, output)]})
        elif sends_stats:
            assert ticket is not None
            report_stats(ticket, task_report(task, index, ctx.stageId(), started, start, output))

    if not packed:
        return after_barrier(source.mapInArrow(func, struct, barrier=True), partitions)
    return unpack(after_barrier(source.mapInArrow(func, packed_struct(struct), barrier=True), partitions), struct)
