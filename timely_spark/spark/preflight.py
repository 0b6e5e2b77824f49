"""Checks made on the driver before a barrier job is launched.

Barrier execution mode needs every task of the stage running at once.  When that
cannot be, Spark itself retries its slot check for minutes (or waits forever for
dynamic allocation); these checks say what is wrong at once instead.  Over Spark
Connect they read the session's configuration (see :mod:`.connect`).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import ParameterError, SparkSetupError
from ..runtime import check_count
from .connect import ConnectSession, conf_get, connect_session, connect_slots, is_connect

__all__ = ["SparkSetupError", "check_session", "task_slots", "check_free_slots", "holding_slots", "held_slots",
           "free_slots", "barrier_stage_slots", "RUN_RDD_NAME", "refuse_streaming"]

log = logging.getLogger(__name__)

#: What a streaming DataFrame goes through instead of a batch call.
STREAM_ROUTE = ("use ts.spark.stream(df, build, schema, checkpoint=DIR), which writes the stream to a timely event "
                "log (df.writeStream.format(\"timely\")), follows that log with a long-running ts.spark.run and "
                "gives the output as a streaming DataFrame (spark.readStream.format(\"timely\")); docs/streams.md "
                "walks through it")


def refuse_streaming(df: Any, call: str) -> None:
    """A :class:`~timely_spark.errors.ParameterError` naming ``call`` and the route a
    stream takes if ``df`` is a streaming DataFrame (Spark would raise its raw
    ``AnalysisException`` only later, when the batch job is planned).  Runs no Spark job.
    """
    if getattr(df, "isStreaming", False) is True:
        raise ParameterError(f"{call} takes a batch DataFrame, and this one is streaming (df.isStreaming): "
                             f"{STREAM_ROUTE}")


def _spark_context(spark: Any) -> Any:
    from pyspark import SparkContext

    if isinstance(spark, SparkContext):
        return spark
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect sessions have no SparkContext
        sc = None
    if sc is None:
        raise SparkSetupError(f"timely_spark needs a SparkSession (classic or Spark Connect) or a SparkContext, "
                              f"got {type(spark).__name__}")
    return sc


def _connect_slots(spark: Any) -> int:
    slots, where = connect_slots(spark)
    if slots is None:
        raise SparkSetupError(f"over Spark Connect the task slots cannot be told ({where}): pass workers=N "
                              "(Spark checks that N tasks can run at once when the job starts)")
    return slots


def _master(sc: Any) -> str:
    if is_connect(sc):
        return conf_get(sc, "spark.master", "?") or "?"
    return str(sc.getConf().get("spark.master", "?"))


def task_slots(sc: Any) -> int:
    """How many tasks of the default resource profile can run at once now (``sc``: a
    SparkContext, or a Spark Connect session: its configuration's slots, see
    :func:`.connect.master_slots`; SparkSetupError when it does not say)."""
    if is_connect(sc):
        return _connect_slots(sc)
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # older or unusual deployments: fall back to the parallelism
        cpus = int(sc.getConf().get("spark.task.cpus", "1"))
        return sc.defaultParallelism // max(cpus, 1)


def check_session(spark: Any, workers: int, wait: float = 60.0) -> Any:
    """Raise SparkSetupError unless ``workers`` barrier tasks can run on ``spark`` now
    (ParameterError if ``workers`` is not a whole number >= 1).

    Waits up to ``wait`` seconds for executors to register (a cluster that is still
    starting).  Returns the SparkContext -- or, over Spark Connect, which has none, a
    :class:`.connect.ConnectSession` (the session, its settings read once), whose slots
    come from its configuration (see :mod:`.connect`; where it does
    not say, Spark checks the slots when the job starts).
    """
    check_count("workers", workers)
    if is_connect(spark):
        return _check_connect(spark, workers)
    sc = _spark_context(spark)
    try:
        stopped = sc._jsc is None or sc._jsc.sc().isStopped()
    except Exception as exc:
        raise SparkSetupError(f"the Spark session is not usable: {exc}") from exc
    if stopped:
        raise SparkSetupError("the Spark session is stopped; create a new one (SparkSession.builder.getOrCreate())")
    conf = sc.getConf()
    if conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() == "true":
        raise SparkSetupError("barrier execution mode does not support dynamic allocation: "
                              "set spark.dynamicAllocation.enabled=false for timely jobs")
    master = conf.get("spark.master", "?")
    if master.startswith("local[") or master == "local":
        wait = 0.0   # local mode: the slots are what they are
    deadline = time.monotonic() + wait
    slots = task_slots(sc)
    while slots < workers and time.monotonic() < deadline:
        time.sleep(0.25)
        slots = task_slots(sc)
    if slots < workers:
        raise SparkSetupError(
            f"{workers} timely workers need {workers} task slots running at once, but the cluster "
            f"({master}) has {slots}: use workers <= {slots}, or more executors / cores")
    return sc


def _check_connect(spark: Any, workers: int) -> ConnectSession:
    try:
        stopped = bool(spark.is_stopped)
        if not stopped and not isinstance(spark, ConnectSession):
            spark = connect_session(spark)
    except Exception as exc:
        raise SparkSetupError(f"the Spark Connect session is not usable: {exc}") from exc
    if stopped:
        raise SparkSetupError("the Spark Connect session is stopped; create a new one "
                              "(SparkSession.builder.remote(...).getOrCreate())")
    if (conf_get(spark, "spark.dynamicAllocation.enabled", "false") or "").strip().lower() == "true":
        raise SparkSetupError("barrier execution mode does not support dynamic allocation: "
                              "set spark.dynamicAllocation.enabled=false for timely jobs")
    slots, where = connect_slots(spark)
    if slots is None:
        log.info("timely_spark: Spark checks the task slots of %d workers itself (%s)", workers, where)
    elif slots < workers:
        raise SparkSetupError(
            f"{workers} timely workers need {workers} task slots running at once, but the cluster "
            f"({where}) has {slots}: use workers <= {slots}, or more executors / cores")
    return spark


# ---- slots held by running barrier jobs --------------------------------------------------
# A barrier job holds its task slots for its whole life: a long-running timely job (one
# following a live log) holds them for hours.  Spark would make a second barrier job
# wait for slots that never come free, and starve a streaming query of the same
# application; so the driver counts the slots its running jobs hold, and a job that
# cannot get its slots fails at once.

_held_lock = threading.Lock()
_held: dict[str, int] = {}          # Spark application id -> slots held by running ts.spark.run jobs


#: The name of a ``ts.spark.run`` job's barrier RDD: its slots are counted by
#: :func:`holding_slots`, so :func:`barrier_stage_slots` leaves its stage out.
RUN_RDD_NAME = "timely_spark.run"


def _application(sc: Any) -> str:
    """The Spark application of a SparkContext or a Connect session (its slots are shared)."""
    return (conf_get(sc, "spark.app.id", "") or "") if is_connect(sc) else str(sc.applicationId)


def held_slots(sc: Any) -> int:
    """Task slots of ``sc`` held now by this driver's running timely jobs: its
    ``ts.spark.run`` jobs (from before their launch) and the running barrier stages
    of other jobs (``ts.spark.transform`` results being computed)."""
    with _held_lock:
        held = _held.get(_application(sc), 0)
    return held + barrier_stage_slots(sc)


def barrier_stage_slots(sc: Any) -> int:
    """Tasks of the barrier stages Spark's scheduler runs now, other than those of
    ``ts.spark.run`` jobs (their RDD is named :data:`RUN_RDD_NAME`): each holds a slot
    until its stage ends.  (Read from the driver's scheduler; 0 where it cannot be read,
    as over Spark Connect.)"""
    if is_connect(sc):
        return 0
    try:
        found = 0
        stages = sc._jsc.sc().dagScheduler().runningStages().toList()   # a copy: the scheduler changes the set
        while not stages.isEmpty():
            stage, stages = stages.head(), stages.tail()
            rdd = stage.rdd()
            if rdd.isBarrier() and rdd.name() != RUN_RDD_NAME:
                found += int(stage.numTasks())
        return found
    except Exception as exc:        # a deployment whose scheduler this cannot read: count what it can
        log.debug("barrier stages not counted: %s", exc)
        return 0


@contextmanager
def holding_slots(sc: Any, workers: int) -> Iterator[None]:
    """Count ``workers`` slots of ``sc`` as held while the block runs (a barrier job)."""
    app = _application(sc)
    with _held_lock:
        _held[app] = _held.get(app, 0) + workers
    try:
        yield
    finally:
        with _held_lock:
            _held[app] -= workers


def _streaming_queries(spark: Any) -> int:
    try:
        return len(spark.streams.active) if hasattr(spark, "streams") else 0
    except Exception:       # a session without streaming state
        return 0


def free_slots(spark: Any, sc: Any) -> int:
    """Task slots a new barrier job may take now: all of them, less those this driver's
    running timely jobs hold and one left for the active streaming queries of ``spark``
    (if any: their short micro-batch tasks take turns on it)."""
    return task_slots(sc) - held_slots(sc) - min(1, _streaming_queries(spark))


def check_free_slots(spark: Any, sc: Any, workers: int) -> None:
    """SparkSetupError, at once, unless ``workers`` barrier tasks can get slots now and
    leave one for the active streaming queries of session ``spark``: slots held by this
    driver's running timely jobs are not free (Spark would wait for them forever), and
    streaming queries with no slot left would stall while the timely job runs.  (Over
    Spark Connect with slots the configuration does not tell: not checked here.)"""
    if is_connect(sc) and connect_slots(sc)[0] is None:
        return
    slots, held, queries = task_slots(sc), held_slots(sc), _streaming_queries(spark)
    if workers + held + min(1, queries) > slots:
        parts = [f"{held} held by running timely jobs"] if held else []
        parts += [f"one for the session's {queries} active streaming queries"] if queries else []
        raise SparkSetupError(
            f"{workers} timely workers need {workers} free task slots, but of the {slots} task slots "
            f"({_master(sc)}) {' and '.join(parts)} must stay free: a barrier job holds "
            "its slots for its whole life. Use fewer workers, or more slots (more executors or cores; on one "
            "machine local[N] with N above the number of cores), or run the timely job in its own application")
