"""Checks made on the driver before a barrier job is launched.

Barrier execution mode needs every task of the stage running at once.  When that
cannot be, Spark itself retries its slot check for minutes (or waits forever for
dynamic allocation); these checks say what is wrong at once instead.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import SparkSetupError
from ..runtime import check_count

__all__ = ["SparkSetupError", "check_session", "task_slots"]


def _spark_context(spark: Any) -> Any:
    from pyspark import SparkContext

    if isinstance(spark, SparkContext):
        return spark
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect sessions have no SparkContext
        sc = None
    if sc is None:
        raise SparkSetupError("ts.spark.run needs a classic SparkSession (with a SparkContext); "
                              "over Spark Connect use ts.spark.transform on a DataFrame")
    return sc


def task_slots(sc: Any) -> int:
    """How many tasks of the default resource profile can run at once now."""
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
    starting).  Returns the SparkContext.  (Over Spark Connect there is none:
    ``transform`` then leaves the slot check to Spark.)
    """
    check_count("workers", workers)
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
