"""``ts.spark.run``: run a worker function in N Spark barrier tasks."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional, Union

import cloudpickle

from ..errors import CheckpointError, RunTimeout, SparkJobError, TimelyError, most_telling, picklable
from ..function_pickle import dumps_function, loads_function
from ..runtime import DEFAULT_PEER_TIMEOUT, STOP_GRACE, Config, check_count, new_secret
from ..state.key import file_key
from ..state.manifest import list_manifests, load_manifest, manifest_path
from ..state.owner import owning_checkpoint
from .barrier import run_in_barrier_task, task_config
from .cancel import caller_job_group, cancelled_on_interrupt_or_deadline
from .connect import is_connect
from .job_errors import chained, spark_summary, timely_cause
from .job_errors import install as install_error_translation
from .preflight import RUN_RDD_NAME, check_free_slots, check_session, free_slots, holding_slots
from .rendezvous import Ticket, session_rendezvous
from .task_stats import stage_start_seconds, task_report

__all__ = ["run", "SparkJobError"]

log = logging.getLogger(__name__)

OUTCOME = "outcome"
"""The column of a task's pickled outcome, over Spark Connect."""


def _task_outcome(fn_bytes: bytes, config: Config, secret: bytes, ticket: Optional[Ticket]) -> bytes:
    """In a barrier task: run its worker; its ``(index, outcome, stats)``, pickled."""
    from pyspark import BarrierTaskContext

    started, start = time.time(), time.perf_counter()
    fn = loads_function(fn_bytes)
    stats: dict = {}
    ctx = BarrierTaskContext.get()
    index = ctx.partitionId()
    try:
        index, result = run_in_barrier_task(fn, config, secret, stats=stats, ticket=ticket)
        outcome = ("ok", result)
    except Exception as exc:  # after the mesh is up, every task reports instead of raising
        outcome = ("error", picklable(exc))
    stats.update(task_report(stats, index, ctx.stageId(), started, start))
    return cloudpickle.dumps((index, outcome, stats), protocol=5)


def _partition_fn(fn_bytes: bytes, config: Config, secret: bytes, ticket: Optional[Ticket]) -> Callable:
    def partition(_: Any) -> Any:
        yield _task_outcome(fn_bytes, config, secret, ticket)

    return partition


def _arrow_fn(fn_bytes: bytes, config: Config, secret: bytes, ticket: Optional[Ticket]) -> Callable:
    def func(batches: Any) -> Any:
        import pyarrow as pa

        for _ in batches:       # the task's one row
            pass
        yield pa.record_batch({OUTCOME: pa.array([_task_outcome(fn_bytes, config, secret, ticket)], pa.binary())})

    return func


def _barrier_collect(sc: Any, workers: int, fn_bytes: bytes, config: Config, secret: bytes,
                     ticket: Optional[Ticket]) -> list:
    """Run the barrier stage of ``workers`` tasks; their pickled outcomes.  Over Spark
    Connect (``sc`` the session), a ``mapInArrow(..., barrier=True)`` over a DataFrame of
    one row per task; on a classic session, an RDD's barrier stage (named :data:`RUN_RDD_NAME`)."""
    if is_connect(sc):
        from pyspark.sql.types import BinaryType, StructField, StructType

        # A StructType (not a DDL string) spares the round trip parsing it, and ``toArrow``
        # (the result's schema known) the one ``collect`` makes to read a setting.  (Giving the
        # range its schema with ``.to`` would spare ``mapInArrow`` asking for its columns, but
        # the server's extra projection cost as much: no faster, measured side by side.)
        frame = sc.range(0, workers, 1, workers)
        outcomes = frame.mapInArrow(_arrow_fn(fn_bytes, config, secret, ticket),
                                    StructType([StructField(OUTCOME, BinaryType())]), barrier=True).toArrow()
        return outcomes.column(OUTCOME).to_pylist()
    return (sc.parallelize(range(workers), workers).barrier()
            .mapPartitions(_partition_fn(fn_bytes, config, secret, ticket))
            .setName(RUN_RDD_NAME).collect())


def _describe(sc: Any, text: Optional[str]) -> None:
    if not is_connect(sc):      # Connect has no job descriptions (the job's tag shows in the UI)
        sc.setJobDescription(text)


def _first_line(exc: Optional[BaseException]) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def resumes_from(checkpoint: Optional[str], key: Union[bytes, str, None] = None) -> str:
    """Where a new attempt of a run with ``checkpoint`` (its ``checkpoint_key``: ``key``)
    starts, for the retry's log line:
    the time of the newest snapshot committed there (the workers restore it, or fall
    back to an older one if it is damaged), or the beginning.

    >>> resumes_from(None)
    'it starts from the beginning (no checkpoint)'
    """
    if checkpoint is None:
        return "it starts from the beginning (no checkpoint)"
    seqs = list_manifests(checkpoint)
    if not seqs:
        return f"it starts from the beginning (no snapshot committed in {checkpoint} yet)"
    try:
        t = load_manifest(manifest_path(checkpoint, seqs[-1]), file_key(key))["time"]
    except CheckpointError:
        return f"it resumes from the last usable snapshot committed in {checkpoint}"
    return f"it resumes from the snapshot at time {t!r} committed in {checkpoint}"


def run(spark: Any, fn: Callable[[Any], Any], workers: Optional[int] = None, max_attempts: int = 1,
        timeout: Optional[float] = None, peer_timeout: float = DEFAULT_PEER_TIMEOUT,
        stats: Optional[dict] = None, checkpoint: Optional[str] = None,
        snapshot_every: Optional[float] = None) -> list:
    """Run ``fn(worker)`` in ``workers`` Spark barrier tasks (default: all free task slots, see below)
    and return the results in worker order.

    Each task binds a listener on its host, learns the others' addresses through the
    driver's rendezvous (or ``allGather``, see :mod:`.rendezvous`), builds the
    authenticated mesh (secret made here, shipped in the task closure) and runs one
    worker.  Before launching, a clear ``SparkSetupError`` when the
    session is stopped, dynamic allocation is on, or there are fewer task slots than
    workers.  An error in a worker is raised here as ``WorkerError`` (worker index,
    operator, original traceback).  Spark does not retry a failed barrier stage;
    ``max_attempts`` retries the whole run from here.  ``stats`` (a dict) receives
    per-task timings under ``"tasks"``: where each task's time went (``stage_start``,
    ``rendezvous``, ``compute``, ``total``; see :mod:`.task_stats`).

    ``timeout`` bounds each attempt: the workers stop and this raises
    :class:`~timely_spark.errors.RunTimeout` naming what was incomplete (the barrier
    job is cancelled if the tasks do not end by themselves).  ``peer_timeout`` is how
    long a task may stay silent before the others fail.  Ctrl-C (KeyboardInterrupt)
    cancels the barrier job, and so does cancelling the caller's job group (set with
    ``sc.setJobGroup`` before the call; ``SparkJobError`` saying so): a long-running job
    (one following a live log, :func:`timely_spark.capture.follow`) is stopped that way
    from another thread.  ``SparkJobError`` is raised only when Spark itself
    failed the job (an executor died...), its message leading with the cause;
    ``SparkSetupError`` if the executors cannot import timely_spark.

    ``checkpoint`` (a directory) turns on snapshots of the workers' operator state, one
    every ``snapshot_every`` seconds (None: one when the inputs close), and every
    attempt starts from the last snapshot committed there (``worker.restored_time``
    says its time; None on a fresh start): with ``max_attempts`` a retry after a task
    or executor failure resumes from it instead of from nothing, and so does a job
    submitted again with the same ``checkpoint``.  Every executor and the driver must
    read and write the same ``DIR`` (a relative path is made absolute on the driver):
    a shared filesystem mounted at the same path
    everywhere (NFS, a cluster file system, a FUSE mount of object storage), never an
    executor-local directory such as ``/tmp`` on a real cluster (``local`` and
    ``local-cluster`` masters share the machine's disk, so any local path works there).
    ``stats["failures"]`` lists each failed attempt (``attempt``, ``noticed``: the
    wall-clock time, ``time.time()``, when the driver learnt of it, ``error``).

    Over Spark Connect (``spark`` a Connect session) the same, through what Connect
    offers (see :mod:`.connect`): the barrier stage is a ``mapInArrow(..., barrier=True)``
    over a DataFrame of one row per task, the slot check reads the session's
    configuration, Ctrl-C and ``timeout`` interrupt the job's tag (and a caller that
    tagged its operations with ``spark.addTag`` stops it with ``spark.interruptTag``),
    and ``stats`` has no ``stage_start``.

        results = ts.spark.run(spark, lambda worker: worker.index, workers=2)   # [0, 1]
    """
    check_count("max_attempts", max_attempts)
    config = task_config(timeout=timeout, peer_timeout=peer_timeout, checkpoint=checkpoint,
                         snapshot_every=snapshot_every)
    sc = check_session(spark, 1 if workers is None else workers)
    if workers is None:
        workers = max(1, free_slots(spark, sc))
        check_session(spark, workers)
    check_free_slots(spark, sc, workers)
    fn_bytes = dumps_function(fn)
    install_error_translation()
    service = session_rendezvous(sc, None if is_connect(sc) else getattr(spark, "conf", None))
    with owning_checkpoint(config):               # every attempt: a retry is this run, another job is not
        return _attempts(sc, fn_bytes, config, workers, max_attempts, service, stats)


def _attempts(sc: Any, fn_bytes: bytes, config: Config, workers: int, max_attempts: int, service: Any,
              stats: Optional[dict]) -> list:
    """Run the barrier job up to ``max_attempts`` times (see :func:`run`)."""
    failure: Optional[BaseException] = None
    for attempt in range(1, max_attempts + 1):
        secret = new_secret()
        ticket = None if service is None else service.open(secret, config.connect_timeout)
        _describe(sc, f"timely_spark.run: {workers} workers (attempt {attempt} of {max_attempts})")
        backstop = None if config.timeout is None else config.timeout + 2 * STOP_GRACE + 10
        try:
            with holding_slots(sc, workers), cancelled_on_interrupt_or_deadline(sc, backstop) as expired:
                rows = _barrier_collect(sc, workers, fn_bytes, config, secret, ticket)
        except Exception as exc:  # the stage failed; Spark will not retry it
            if expired.is_set():
                assert config.timeout is not None
                failure = RunTimeout(config.timeout, {w: "the barrier task did not end; the job was cancelled"
                                               for w in range(workers)})
                failure.__cause__ = exc
            elif isinstance(exc, TimelyError):   # translated already (see job_errors)
                failure = exc
            elif "cancel" in str(exc).lower() and caller_job_group(sc) is not None:   # or Connect's "CANCELED"
                how = "job tags" if is_connect(sc) else "Spark job group"
                failure = chained(SparkJobError(f"the timely job was cancelled with its {how} "
                                                f"{caller_job_group(sc)!r}; its workers were stopped"), exc)
                break       # the caller stopped it: no retry
            else:
                failed = SparkJobError(f"the barrier job failed: {spark_summary(exc)}")
                failure = chained(timely_cause(exc) or failed, exc)
        else:
            decoded = sorted((cloudpickle.loads(r) for r in rows), key=lambda r: r[0])
            errors = [outcome[1] for _, outcome, _ in decoded if outcome[0] == "error"]
            if not errors:
                if stats is not None:
                    stats["tasks"] = [s for _, _, s in decoded]
                    for task in stats["tasks"]:
                        task["stage_start"] = stage_start_seconds(sc, task["stage"], task["started"])
                    stats["attempts"] = attempt
                return [outcome[1] for _, outcome, _ in decoded]
            failure = most_telling(errors)
        finally:
            _describe(sc, None)
            if ticket is not None:
                assert service is not None
                service.close(ticket)
        if stats is not None:     # when the driver learnt of the failure (jobs/benchmarks/bench_recovery.py)
            stats.setdefault("failures", []).append({"attempt": attempt, "noticed": time.time(),
                                                     "error": _first_line(failure)})
        if attempt < max_attempts:
            log.warning("timely_spark.run: attempt %d of %d failed (%s); retrying: %s", attempt, max_attempts,
                        _first_line(failure), resumes_from(config.checkpoint, config.checkpoint_key))
    assert failure is not None
    raise failure
