"""One timely worker per Spark barrier task.

On the driver, :func:`task_config` makes the run's
:class:`~timely_spark.runtime.Config`, shipped whole in the task's closure.  Inside a
barrier task: bind a listener on the host Spark gave the task (port 0,
kept bound), learn every task's ``host:port`` -- through the driver's rendezvous
(:mod:`.rendezvous`) when the job has a ticket, else through
``BarrierTaskContext.allGather`` -- build the authenticated mesh with the secret the
driver shipped in the task's closure, run the worker, and close everything.  If the
worker fails, the error is also reported to the driver's rendezvous (as data), so that
the driver can raise it as it is (see :mod:`.job_errors`).
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Iterator, Optional

from ..communication.tcp import bind_listener
from ..errors import ReportedError, SparkJobError, type_name
from ..process import run_workers
from ..runtime import DEFAULT_PEER_TIMEOUT, Config
from ..state.key import resolve_key
from .rendezvous import Ticket, failure_marker, meet, report_failure

__all__ = ["task_config", "run_in_barrier_task", "reporting_failures"]


def task_config(timeout: Optional[float] = None, peer_timeout: float = DEFAULT_PEER_TIMEOUT,
                **settings: Any) -> Config:
    """The validated :class:`~timely_spark.runtime.Config` of a run in barrier tasks, made
    on the driver by ``ts.spark.run`` and ``ts.spark.transform`` and shipped to every
    task whole: ``timeout``, ``peer_timeout`` and any other Config field in
    ``settings`` (``checkpoint=``, ``snapshot_every=``...), with ``connect_timeout``
    (default :data:`~timely_spark.runtime.DEFAULT_CONNECT_TIMEOUT`) at least ``peer_timeout``:
    barrier tasks start as executors free up, so they may wait longer for each other
    than local processes; a relative ``checkpoint`` is made absolute here (an executor's
    working directory is not the driver's).  Each task fills in its own index, the
    worker count and the addresses (:func:`run_in_barrier_task`).

    >>> task_config(peer_timeout=90).connect_timeout
    90.0
    >>> task_config(timeout=-1)
    Traceback (most recent call last):
    ...
    timely_spark.errors.ParameterError: timeout must be a positive, finite number of seconds or None, got -1
    """
    config = Config(timeout=timeout, peer_timeout=peer_timeout, **settings).check()
    config.connect_timeout = max(config.peer_timeout, config.connect_timeout)
    if config.checkpoint is not None:    # executors run in other directories than the driver
        config.checkpoint = os.path.abspath(config.checkpoint)
    resolve_key(config)                  # the driver's key travels with the config
    return config


def run_in_barrier_task(fn: Callable[[Any], Any], config: Config, secret: bytes, *, stats: Optional[dict] = None,
                        ticket: Optional[Ticket] = None) -> tuple[int, Any]:
    """Run ``fn(worker)`` as this barrier task's worker of the run ``config`` describes
    (made by :func:`task_config`); return ``(index, result)``.

    The task's worker index, the worker count and every task's address go into a copy of
    ``config``, which goes down the one run path (:func:`timely_spark.process.run_workers`)
    to the worker (``worker.config``).  Raises the run's WorkerError / WorkerFailure.
    ``stats`` receives the time spent binding and swapping addresses
    (``gather_seconds``, and ``met_through``: ``driver`` or ``allGather``; through the
    driver, ``stage_attempt``: the stage attempt it met in, -1 if Spark's scheduler did
    not say) and connecting the mesh (``connect_seconds``).
    """
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    index = ctx.partitionId()
    infos = ctx.getTaskInfos()
    if index >= len(infos):
        raise SparkJobError(f"Spark ran barrier task {index} in a stage attempt of {len(infos)} task(s) (a re-run "
                            f"of part of a failed stage): a timely run needs all its workers at once; see the "
                            f"first attempt's error")
    host = infos[index].address.rsplit(":", 1)[0].strip("[]") or "127.0.0.1"
    start = time.perf_counter()
    listener = bind_listener(host, 0)
    port = listener.getsockname()[1]
    if ticket is not None:
        addresses, attempt = meet(ticket, ctx.stageId(), ctx.taskAttemptId(), index, len(infos), host, port)
        if stats is not None:
            stats["stage_attempt"] = attempt
    else:
        addresses = [tuple(json.loads(a)) for a in ctx.allGather(json.dumps([host, port]))]
    if stats is not None:
        stats["gather_seconds"] = time.perf_counter() - start
        stats["met_through"] = "driver" if ticket is not None else "allGather"
    mine = replace(config, threads=1, processes=len(addresses), process=index, addresses=list(addresses))
    results = run_workers(fn, mine, listener, secret, stats=stats)
    return index, results[0]


@contextmanager
def reporting_failures(ticket: Optional[Ticket]) -> Iterator[None]:
    """``with reporting_failures(ticket): ...`` in a barrier task -- an error leaving the
    block is reported to the driver's rendezvous (if the job has a ticket) and raised
    again as a :class:`~timely_spark.errors.ReportedError` whose text leads with the
    report's marker (by which the driver finds it in Spark's error) and repeats the
    error; without a ticket, raised as it is."""
    try:
        yield
    except Exception as exc:
        if ticket is None:
            raise
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        stage, task = ctx.stageId(), ctx.taskAttemptId()
        report_failure(ticket, stage, task, exc)
        raise ReportedError(f"{failure_marker(ticket, stage, task)}: {type_name(exc)}: {exc}") from exc
