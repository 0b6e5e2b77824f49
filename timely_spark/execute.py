"""Running workers: ``execute`` (threads, and processes in a later layer) and ``example``."""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, TypeVar

from .communication.thread import ThreadAllocator, ThreadFabric
from .dataflow.scope import Scope
from .dataflow.worker import Worker
from .errors import WorkerAborted, WorkerError, operator_of

__all__ = ["execute", "example"]

R = TypeVar("R")


def _run_worker(fn: Callable[[Worker], Any], allocator: Any, fabric: ThreadFabric, results: list) -> None:
    worker = Worker(allocator)
    try:
        results[allocator.index - fabric.offset] = fn(worker)
        worker._finish()
    except WorkerAborted:
        pass
    except BaseException as exc:  # noqa: BLE001 -- reported to the caller
        fabric.fail(allocator.index, exc)


def execute(fn: Callable[[Worker], R], threads: int = 1, processes: int = 1) -> list[R]:
    """Run ``fn(worker)`` on ``threads`` workers and return their results in worker order.

    When ``fn`` returns, the worker closes its open inputs and runs its dataflows to
    completion.  An exception on any worker stops every worker and is raised here
    as :class:`~timely_spark.errors.WorkerError`, naming the worker and, where it
    came from one, the operator.

    >>> import timely_spark as ts
    >>> ts.execute(lambda worker: (worker.index, worker.peers), threads=3)
    [(0, 3), (1, 3), (2, 3)]
    """
    if threads < 1 or processes < 1:
        raise ValueError(f"need at least one thread and one process (got threads={threads}, processes={processes})")
    if processes > 1:
        raise NotImplementedError("several processes need the TCP mesh (timely_spark.communication.tcp)")
    fabric = ThreadFabric(threads)
    results: list[Any] = [None] * threads
    if threads == 1:
        _run_worker(fn, ThreadAllocator(0, fabric), fabric, results)
    else:
        pool = [
            threading.Thread(target=_run_worker, args=(fn, ThreadAllocator(i, fabric), fabric, results),
                             name=f"timely-worker-{i}", daemon=True)
            for i in range(threads)
        ]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    _raise_failure(fabric.failure)
    return results


def _raise_failure(failure: Optional[tuple[int, BaseException]]) -> None:
    if failure is not None:
        index, exc = failure
        if isinstance(exc, WorkerError):
            raise exc
        raise WorkerError(index, exc, operator_of(exc)) from exc


def example(build: Callable[[Scope], R], time: Any = 0) -> R:
    """Build a dataflow on one worker, run it to completion, and return what ``build`` returned.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda scope: scope.to_stream(range(3)).inspect(print))
    0
    1
    2
    """
    return execute(lambda worker: worker.dataflow(build, time=time))[0]
