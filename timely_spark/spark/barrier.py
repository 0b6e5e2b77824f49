"""One timely worker per Spark barrier task.

Inside a barrier task: bind a listener on the host Spark gave the task (port 0,
kept bound), learn every task's ``host:port`` -- through the driver's rendezvous
(:mod:`.rendezvous`) when the job has a ticket, else through
``BarrierTaskContext.allGather`` -- build the authenticated mesh with the secret the
driver shipped in the task's closure, run the worker, and close everything.  If the
worker fails, the error is also reported to the driver's rendezvous (as data), so that
the driver can raise it as it is (see :mod:`.job_errors`).
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from ..communication.tcp import bind_listener
from ..errors import ReportedError, SparkJobError, type_name
from ..process import run_process
from ..runtime import DEFAULT_CONNECT_TIMEOUT, DEFAULT_PEER_TIMEOUT
from .rendezvous import Ticket, failure_marker, meet, report_failure

__all__ = ["run_in_barrier_task", "reporting_failures"]


def run_in_barrier_task(fn: Callable[[Any], Any], secret: bytes, peer_timeout: float = DEFAULT_PEER_TIMEOUT,
                        timeout: Optional[float] = None, stats: Optional[dict] = None,
                        ticket: Optional[Ticket] = None) -> tuple[int, Any]:
    """Run ``fn(worker)`` as this barrier task's worker; return ``(index, result)``.

    Raises the run's WorkerError / WorkerFailure.  ``stats`` receives the time spent
    binding and swapping addresses (``gather_seconds``, and ``met_through``: ``driver``
    or ``allGather``; through the driver, ``stage_attempt``: the stage attempt it met
    in, -1 if Spark's scheduler did not say) and connecting the mesh (``connect_seconds``).
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
    results = run_process(fn, index, len(addresses), 1, addresses, listener, secret,
                          peer_timeout=peer_timeout, connect_timeout=max(peer_timeout, DEFAULT_CONNECT_TIMEOUT),
                          timeout=timeout, stats=stats)
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
