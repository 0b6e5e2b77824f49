"""One process's share of a run: its workers as threads, and for a multi-process run
the authenticated mesh to the other processes.

* :func:`run_threads` -- run ``fn(worker)`` on the given allocators, each in a thread,
  with an optional deadline for the whole run;
* :func:`run_process` -- one process of a multi-process run (what local child
  processes, processes started by hand and Spark barrier tasks call);
* :func:`raise_failure` -- raise a run's first failure as the caller should see it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional, Sequence

from .communication.thread import ThreadFabric
from .dataflow.worker import Worker
from .errors import RunTimeout, WorkerAborted, WorkerError, WorkerFailure, operator_of, picklable
from .runtime import DEFAULT_CONNECT_TIMEOUT, DEFAULT_PEER_TIMEOUT, STOP_GRACE, Config, check_count, check_timeout

__all__ = ["run_threads", "run_process", "raise_failure"]


def _run_worker(fn: Callable[[Worker], Any], allocator: Any, fabric: ThreadFabric, results: list,
                incomplete: dict, config: Optional[Config] = None) -> None:
    worker = Worker(allocator, config)
    returned = False
    try:
        if worker.config.checkpoint is not None:
            from .state import attach

            attach(worker)
        results[allocator.index - fabric.offset] = fn(worker)
        returned = True
        worker.finish()
    except WorkerAborted:
        where = "running its dataflows to completion" if returned else "in the worker function"
        incomplete[worker.index] = f"{where}; dataflows: {', '.join(worker.incomplete_dataflows()) or 'none'}"
    except BaseException as exc:  # noqa: BLE001 -- reported to the caller
        fabric.fail(allocator.index, as_worker_error(allocator.index, exc))


def as_worker_error(index: int, exc: BaseException) -> BaseException:
    """``exc`` as the caller of a run sees it: a WorkerError naming worker ``index``
    (timely_spark's run-level errors pass as they are)."""
    if isinstance(exc, (WorkerError, WorkerFailure, RunTimeout)):
        return exc
    err = WorkerError(index, exc, operator_of(exc))
    err.__cause__ = exc
    return err


def run_threads(fn: Callable[[Worker], Any], fabric: ThreadFabric, allocators: list,
                timeout: Optional[float] = None, started: Optional[float] = None,
                config: Optional[Config] = None) -> list:
    """Run ``fn(worker)`` for each allocator and return the results in worker order.

    With a ``timeout`` (counted from ``started``, a ``time.monotonic()`` reading, by
    default now), once it passes every worker is stopped at its next step and the
    run's failure becomes a :class:`~timely_spark.errors.RunTimeout` naming what each
    unfinished worker was doing; a worker stuck in its own code (never stepping) is
    left behind as a daemon thread after a short grace.  ``config`` is the run's
    :class:`~timely_spark.runtime.Config`, given to every worker (``worker.config``).
    """
    results: list[Any] = [None] * len(allocators)
    incomplete: dict[int, str] = {}
    if len(allocators) == 1 and timeout is None:
        _run_worker(fn, allocators[0], fabric, results, incomplete, config)
        return results
    pool = [threading.Thread(target=_run_worker, args=(fn, a, fabric, results, incomplete, config),
                             name=f"timely-worker-{a.index}", daemon=True) for a in allocators]
    for t in pool:
        t.start()
    deadline = None if timeout is None else (time.monotonic() if started is None else started) + timeout
    for t in pool:
        t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in pool):
        assert timeout is not None
        fabric.fail(-1, RunTimeout(timeout, {}))          # every worker stops at its next step
        grace = time.monotonic() + STOP_GRACE
        for t in pool:
            t.join(max(0.0, grace - time.monotonic()))
        for a, t in zip(allocators, pool):
            if t.is_alive():
                incomplete[a.index] = "still in its own code (it never stepped again); left running"
    failure = fabric.failure
    if failure is not None and isinstance(failure[1], RunTimeout) and incomplete:
        # a deadline here or in a peer process: say what this process's workers were doing too
        fabric.failure = (-1, RunTimeout(failure[1].timeout, {**failure[1].incomplete, **incomplete}))
    return results


def raise_failure(fabric: ThreadFabric) -> None:
    """Raise the run's first failure, if any, as the caller should see it."""
    failure = fabric.failure
    if failure is not None:
        index, exc = failure
        raise as_worker_error(index, exc)


def run_process(fn: Callable[[Worker], Any], process: int, processes: int, threads: int,
                addresses: Sequence[tuple[str, int]], listener: Any, secret: bytes,
                *, peer_timeout: float = DEFAULT_PEER_TIMEOUT,
                connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, timeout: Optional[float] = None,
                stats: Optional[dict] = None, config: Optional[Config] = None) -> list:
    """Run process ``process``'s workers of a multi-process run; return their results.

    ``listener`` is this process's bound listening socket (``addresses[process]``).
    ``peer_timeout``: seconds of a peer's silence before it counts as failed;
    ``timeout``: a bound on the whole run, connecting included (None: no bound).
    Raises WorkerError, WorkerFailure or RunTimeout if the run fails anywhere, and a
    ValueError naming a malformed parameter.  ``stats``, if given, receives
    ``connect_seconds`` (building the mesh) and ``run_seconds``.  ``config``, if given,
    is the run's Config each worker sees (``worker.config``; checkpointing).
    """
    from .communication.tcp import Mesh, TcpAllocator

    began = time.monotonic()
    check_count("threads", threads)
    check_count("processes", processes)
    if isinstance(process, bool) or not isinstance(process, int) or not 0 <= process < processes:
        raise ValueError(f"process must be an index in 0..{processes - 1}, got {process!r}")
    if len(addresses) < processes:
        raise ValueError(f"{processes} processes but only {len(addresses)} addresses")
    peer_timeout = check_timeout("peer_timeout", peer_timeout, allow_none=False)  # type: ignore[assignment]
    connect_timeout = check_timeout("connect_timeout", connect_timeout, allow_none=False)  # type: ignore[assignment]
    timeout = check_timeout("timeout", timeout)
    if timeout is not None:
        connect_timeout = min(connect_timeout, timeout)
    fabric = ThreadFabric(threads, offset=process * threads, wakeable=True)
    mesh = Mesh(process, list(addresses)[:processes], listener, secret, fabric, threads, peer_timeout=peer_timeout,
                connect_timeout=connect_timeout)
    start = time.perf_counter()
    try:
        mesh.connect()
    except BaseException:
        mesh.shutdown(clean=False)
        fabric.close()
        raise
    connected = time.perf_counter()
    if stats is not None:
        stats["connect_seconds"] = connected - start
    peers = processes * threads
    allocators = [TcpAllocator(process * threads + t, fabric, mesh, peers) for t in range(threads)]
    clean = False
    try:
        results = run_threads(fn, fabric, allocators, timeout, started=began, config=config)
        if stats is not None:
            stats["run_seconds"] = time.perf_counter() - connected
        failure = fabric.failure
        if failure is not None and not fabric.failure_relayed:
            mesh.report_error(picklable(as_worker_error(*failure)))
        clean = failure is None
    finally:                            # the mesh's threads and sockets end with the run, however it ends
        mesh.shutdown(clean=clean)
        fabric.close()
    raise_failure(fabric)
    return results
