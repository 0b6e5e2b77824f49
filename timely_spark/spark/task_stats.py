"""Where a Spark run's time goes, per barrier task: the ``stats=`` of ``ts.spark.run``
and ``ts.spark.transform``.

Each task reports (seconds, wall clock):

* ``stage_start`` -- from Spark submitting the barrier stage to the task's Python code
  starting (scheduling, launching or reusing a Python worker, unpickling the closure;
  a first run in a fresh session pays for starting Python workers and importing here);
* ``rendezvous`` -- binding, swapping addresses with the other tasks, connecting the mesh;
* ``input`` -- reading the task's input rows from Spark (``transform`` only);
* ``compute`` -- the worker's own run, less the input and the output waits;
* ``output`` -- passing output on to Spark (``transform``: waiting for Spark to take
  batches, and its tail after the worker ended; ``run``: 0, the result is returned);
* ``total`` -- the task, start to end (without ``stage_start``);

and ``worker``, ``stage`` and, for ``transform``, ``rows_out``, ``peak_rows_held`` (the
most output rows the task held at once: :class:`.output_stream.OutputStream`) and
``input_from`` (``spark``, or ``files`` when the task read a plain Parquet scan itself:
:mod:`.file_input`) and ``cpu``: the CPU seconds of the task's Python process (all its
threads) -- on a busy machine, what the task cost rather than how long it waited.

``transform`` is lazy: its tasks report through a Spark accumulator
(:class:`TaskStats`), so ``stats["tasks"]`` fills in when an action runs the result
(each action that runs it again adds its tasks).  Over Spark Connect there are no
accumulators: the tasks send their reports to the driver's rendezvous instead
(:func:`.rendezvous.report_stats`), and ``stage_start`` is None (Connect cannot read
Spark's stage times); where the tasks meet through ``allGather`` (a Connect server on
another machine), ``stats`` stays empty.
"""

from __future__ import annotations

from typing import Any, Optional

from .connect import is_connect

__all__ = ["TaskStats", "PHASES", "stage_start_seconds", "breakdown", "task_report"]

#: The phases of a task's time, in order.
PHASES = ("stage_start", "rendezvous", "input", "compute", "output")


def stage_start_seconds(sc: Any, stage: int, task_start: float) -> Optional[float]:
    """Seconds from Spark submitting ``stage`` to a task starting at ``task_start``
    (``time.time()`` on its executor), or None if Spark no longer knows the stage.
    (On a cluster the executor's clock may differ from the driver's; over Spark Connect,
    ``sc`` being the session, Spark's stage times cannot be read: None.)"""
    if is_connect(sc):
        return None
    try:
        info = sc._jsc.sc().statusTracker().getStageInfo(stage)
        if info.isEmpty():
            return None
        return max(0.0, task_start - info.get().submissionTime() / 1000.0)
    except Exception:       # a stage forgotten, a gateway gone: no figure rather than a failed job
        return None


class TaskStats:
    """The accumulator parameter merging tasks' stats into the caller's dict (its
    ``"tasks"`` list), adding ``stage_start`` on the driver as each task's report
    arrives.

    >>> stats = {}
    >>> TaskStats().addInPlace(stats, {"tasks": [{"worker": 0}]}) is stats, stats
    (True, {'tasks': [{'worker': 0}]})
    """

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value: dict, other: dict) -> dict:
        tasks = other.get("tasks", [])
        from pyspark import SparkContext, TaskContext

        timed = [t for t in tasks if t.get("stage_start") is None and "started" in t]
        if timed and TaskContext.get() is None:                     # on the driver
            sc = SparkContext.getOrCreate()
            for task in timed:
                task["stage_start"] = stage_start_seconds(sc, task["stage"], task["started"])
        value.setdefault("tasks", []).extend(tasks)
        return value


def breakdown(tasks: list) -> dict:
    """The phases of a run (:data:`PHASES` and ``total``): per phase, the largest over
    its tasks (the tasks run at once, so the slowest one is what the caller waits for).

    >>> breakdown([{"input": 1.0, "total": 3.0}, {"input": 2.0, "total": 2.5}])["input"]
    2.0
    """
    return {phase: max((t.get(phase) or 0.0 for t in tasks), default=0.0) for phase in PHASES + ("total",)}


def task_report(task: dict, worker: int, stage: int, started: float, start: float, output: Any = None) -> dict:
    """A task's report from what it measured: ``task`` (``run_in_barrier_task``'s stats,
    plus ``input`` seconds, ``input_from`` and ``cpu_from``, the process's CPU time at
    the start), its start (``time.time()`` and ``time.perf_counter()``),
    and its :class:`.output_stream.OutputStream` if it had one."""
    import time

    total = time.perf_counter() - start
    rendezvous = task.get("gather_seconds", 0.0) + task.get("connect_seconds", 0.0)
    run = task.get("run_seconds", 0.0)
    waited = output.wait_seconds if output is not None else 0.0
    tail = max(0.0, total - rendezvous - run) if output is not None else 0.0
    report = {"worker": worker, "stage": stage, "started": started, "stage_start": None,
              "rendezvous": rendezvous, "input": task.get("input", 0.0),
              "compute": max(0.0, run - task.get("input", 0.0) - waited), "output": waited + tail, "total": total}
    if output is not None:
        report.update(rows_out=output.rows, peak_rows_held=output.peak_rows,
                      input_from=task.get("input_from", "spark"))
    if "cpu_from" in task:
        report["cpu"] = time.process_time() - task["cpu_from"]
    return report
