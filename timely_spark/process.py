"""One process's share of a run: its workers as threads, and for a multi-process run
the authenticated mesh to the other processes.

* :func:`run_threads` -- run ``fn(worker)`` on the given allocators, each in a thread,
  with an optional deadline for the whole run;
* :func:`run_workers` -- this process's workers of the run a
  :class:`~timely_spark.runtime.Config` describes: THE run path that ``ts.execute``
  (threads), its local child processes, processes started by hand
  (``execute_from_args``), ``ts.spark.run`` and ``ts.spark.transform`` all end in, so
  every setting the Config carries (timeouts, checkpointing, limits) reaches every
  worker (``worker.config``) without being unpacked on the way;
* :func:`run_process` -- the older keyword form of one process of a multi-process
  run (kept for callers; it builds the Config and calls :func:`run_workers`);
* :func:`raise_failure` -- raise a run's first failure as the caller should see it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Callable, Optional, Sequence

from .communication.thread import ThreadAllocator, ThreadFabric
from .dataflow.worker import Worker
from .errors import RunTimeout, WorkerAborted, WorkerError, WorkerFailure, operator_of, picklable
from .runtime import STOP_GRACE, Config

__all__ = ["run_threads", "run_workers", "run_process", "raise_failure"]


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

    Each worker gets ``config`` (``worker.config``; None: the defaults).
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


def run_workers(fn: Callable[[Worker], Any], config: Config, listener: Any = None, secret: bytes = b"",
                *, stats: Optional[dict] = None) -> list:
    """Run this process's workers of the run ``config`` describes; return their results
    in worker order.  Every way of running ends here, so what ``config`` carries
    (``timeout``, ``peer_timeout``, ``connect_timeout``, checkpointing...) reaches each
    worker as ``worker.config``.

    Without a ``listener``: ``config.threads`` workers as threads of this process, no
    mesh (``config.processes`` must be 1).  With one: process ``config.process`` of
    ``config.processes`` (``listener`` is its bound socket, ``config.addresses[process]``),
    joined to the others by the mesh authenticated with ``secret``; ``timeout`` bounds
    the whole run, connecting included.  ``config`` is validated first
    (:meth:`~timely_spark.runtime.Config.check`: a ``ParameterError``/``ValueError``
    naming the parameter).  Raises WorkerError, WorkerFailure or RunTimeout if the run
    fails anywhere.  ``stats``, if given, receives ``connect_seconds`` (building the
    mesh) and ``run_seconds``.

    >>> from timely_spark.runtime import Config
    >>> run_workers(lambda worker: (worker.index, worker.peers), Config(threads=2))
    [(0, 2), (1, 2)]
    """
    began = time.monotonic()
    config.check()
    if listener is None:
        if config.processes != 1:
            raise ValueError(f"{config.processes} processes need a listener (this process's bound socket)")
        fabric = ThreadFabric(config.threads)
        results = run_threads(fn, fabric, [ThreadAllocator(i, fabric) for i in range(config.threads)],
                              config.timeout, started=began, config=config)
        raise_failure(fabric)
        return results
    if config.process is None:
        raise ValueError(f"process must be an index in 0..{config.processes - 1}, got None")
    if len(config.addresses) < config.processes:
        raise ValueError(f"{config.processes} processes but only {len(config.addresses)} addresses")
    return _run_in_mesh(fn, config, listener, secret, began, stats)


def _run_in_mesh(fn: Callable[[Worker], Any], config: Config, listener: Any, secret: bytes, began: float,
                 stats: Optional[dict]) -> list:
    from .communication.tcp import Mesh, TcpAllocator

    process, processes, threads = config.process, config.processes, config.threads
    assert process is not None
    connect_timeout = config.connect_timeout
    if config.timeout is not None:
        connect_timeout = min(connect_timeout, config.timeout)
    fabric = ThreadFabric(threads, offset=process * threads, wakeable=True)
    mesh = Mesh(process, list(config.addresses)[:processes], listener, secret, fabric, threads,
                peer_timeout=config.peer_timeout, connect_timeout=connect_timeout)
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
        results = run_threads(fn, fabric, allocators, config.timeout, started=began, config=config)
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


#: A keyword of :func:`run_process` left out: the value of its ``config`` (or the default).
_FROM_CONFIG: Any = object()


def run_process(fn: Callable[[Worker], Any], process: int, processes: int, threads: int,
                addresses: Sequence[tuple[str, int]], listener: Any, secret: bytes,
                *, peer_timeout: float = _FROM_CONFIG, connect_timeout: float = _FROM_CONFIG,
                timeout: Optional[float] = _FROM_CONFIG, stats: Optional[dict] = None,
                config: Optional[Config] = None) -> list:
    """Run process ``process``'s workers of a multi-process run; return their results.

    The keyword form of :func:`run_workers` (which takes the whole run as one
    :class:`~timely_spark.runtime.Config`, checkpointing included): ``listener`` is
    this process's bound listening socket (``addresses[process]``); ``peer_timeout``:
    seconds of a peer's silence before it counts as failed; ``timeout``: a bound on the
    whole run, connecting included (None: no bound).  Raises WorkerError,
    WorkerFailure or RunTimeout if the run fails anywhere, and a ValueError naming a
    malformed parameter.  ``stats``, if given, receives ``connect_seconds`` (building
    the mesh) and ``run_seconds``.  ``config``, if given, supplies the run's other
    settings (checkpointing, and the timeouts not given here: ``peer_timeout``
    :data:`~timely_spark.runtime.DEFAULT_PEER_TIMEOUT`, ``connect_timeout``
    :data:`~timely_spark.runtime.DEFAULT_CONNECT_TIMEOUT` and ``timeout`` None without
    a ``config``); the layout given here replaces its own.
    """
    given: dict[str, Any] = {name: value for name, value in (("timeout", timeout), ("peer_timeout", peer_timeout),
                                             ("connect_timeout", connect_timeout)) if value is not _FROM_CONFIG}
    config = replace(config or Config(), threads=threads, processes=processes, process=process,
                     addresses=list(addresses), **given)
    return run_workers(fn, config, listener, secret, stats=stats)
