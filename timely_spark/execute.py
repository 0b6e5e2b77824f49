"""Running workers: threads of one process, processes joined by the TCP mesh.

* :func:`execute` -- ``threads`` workers in each of ``processes`` local processes
  (worker ``process * threads + thread``), results in worker order;
* :func:`execute_from_args` -- timely's command line flags, for processes started by
  hand on one or several machines;
* :func:`run_process` -- one process's share of a run, given its bound listener,
  every process's address and the run's secret (what Spark tasks use);
* :func:`example` -- a one-worker dataflow run to completion.
"""

from __future__ import annotations

import argparse
import os
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, TypeVar

from .communication.thread import ThreadAllocator, ThreadFabric
from .dataflow.scope import Scope
from .dataflow.worker import Worker
from .errors import WorkerAborted, WorkerError, WorkerFailure, operator_of
from .runtime import DEFAULT_CONNECT_TIMEOUT, DEFAULT_PEER_TIMEOUT

__all__ = ["Config", "execute", "execute_from_args", "example", "run_process"]

R = TypeVar("R")

SECRET_ENV = "TIMELY_SPARK_SECRET"


@dataclass
class Config:
    """How a run is laid out.

    ``threads`` workers per process, ``processes`` processes; ``process`` is this
    process's index when processes are started by hand (None: start them all here);
    ``addresses`` one ``(host, port)`` per process (from a hostfile);
    ``timeout`` seconds of silence after which a peer counts as failed;
    ``connect_timeout`` seconds to wait for all peers at the start.
    """

    threads: int = 1
    processes: int = 1
    process: Optional[int] = None
    addresses: list[tuple[str, int]] = field(default_factory=list)
    timeout: float = 30.0
    connect_timeout: float = 60.0

    def check(self) -> None:
        if self.threads < 1 or self.processes < 1:
            raise ValueError(f"need at least one thread and one process (got threads={self.threads}, "
                             f"processes={self.processes})")
        if self.process is not None and not 0 <= self.process < self.processes:
            raise ValueError(f"process index {self.process} is not in 0..{self.processes - 1}")
        if self.addresses and len(self.addresses) < self.processes:
            raise ValueError(f"{self.processes} processes but only {len(self.addresses)} addresses")


def _run_worker(fn: Callable[[Worker], Any], allocator: Any, fabric: ThreadFabric, results: list) -> None:
    worker = Worker(allocator)
    try:
        results[allocator.index - fabric.offset] = fn(worker)
        worker.finish()
    except WorkerAborted:
        pass
    except BaseException as exc:  # noqa: BLE001 -- reported to the caller
        fabric.fail(allocator.index, _as_worker_error(allocator.index, exc))


def _as_worker_error(index: int, exc: BaseException) -> BaseException:
    if isinstance(exc, (WorkerError, WorkerFailure)):
        return exc
    err = WorkerError(index, exc, operator_of(exc))
    err.__cause__ = exc
    return err


def _run_threads(fn: Callable[[Worker], Any], fabric: ThreadFabric, allocators: list) -> list:
    results: list[Any] = [None] * len(allocators)
    if len(allocators) == 1:
        _run_worker(fn, allocators[0], fabric, results)
    else:
        pool = [threading.Thread(target=_run_worker, args=(fn, a, fabric, results),
                                 name=f"timely-worker-{a.index}", daemon=True) for a in allocators]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    return results


def _raise_failure(failure: Optional[tuple[int, BaseException]]) -> None:
    if failure is not None:
        index, exc = failure
        if isinstance(exc, (WorkerError, WorkerFailure)):
            raise exc
        raise WorkerError(index, exc, operator_of(exc)) from exc


def run_process(fn: Callable[[Worker], Any], process: int, processes: int, threads: int,
                addresses: Sequence[tuple[str, int]], listener: Any, secret: bytes,
                *, peer_timeout: float = DEFAULT_PEER_TIMEOUT,
                connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, timeout: Optional[float] = None,
                stats: Optional[dict] = None) -> list:
    """Run process ``process``'s workers of a multi-process run; return their results.

    ``listener`` is this process's bound listening socket (``addresses[process]``).
    ``peer_timeout``: seconds of a peer's silence before it counts as failed;
    ``timeout``: a bound on the whole run (None: no bound).
    Raises WorkerError / WorkerFailure if the run fails anywhere.  ``stats``, if
    given, receives ``connect_seconds`` (building the mesh) and ``run_seconds``.
    """
    import time as _time

    from .communication.tcp import Mesh, TcpAllocator

    fabric = ThreadFabric(threads, offset=process * threads)
    mesh = Mesh(process, list(addresses), listener, secret, fabric, threads, peer_timeout, connect_timeout)
    start = _time.perf_counter()
    try:
        mesh.connect()
    except BaseException:
        mesh.shutdown(clean=False)
        raise
    connected = _time.perf_counter()
    if stats is not None:
        stats["connect_seconds"] = connected - start
    peers = processes * threads
    allocators = [TcpAllocator(process * threads + t, fabric, mesh, peers) for t in range(threads)]
    results = _run_threads(fn, fabric, allocators)
    if stats is not None:
        stats["run_seconds"] = _time.perf_counter() - connected
    failure = fabric.failure
    if failure is not None and not getattr(failure[1], "_from_peer", False):
        mesh.report_error(_picklable(failure[1]))
    mesh.shutdown(clean=failure is None)
    _raise_failure(fabric.failure)
    return results


def _picklable(exc: BaseException) -> BaseException:
    import pickle

    try:
        pickle.dumps(exc, protocol=5)
        return exc
    except Exception:
        return WorkerFailure(f"{type(exc).__name__}: {exc}")


def execute(fn: Callable[[Worker], R], threads: int = 1, processes: int = 1, timeout: float = 30.0) -> list[R]:
    """Run ``fn(worker)`` on ``threads`` workers in each of ``processes`` local processes
    and return their results in worker order (worker ``process * threads + thread``).

    When ``fn`` returns, the worker closes its open inputs and runs its dataflows to
    completion.  An exception on any worker stops every worker and is raised here
    as :class:`~timely_spark.errors.WorkerError`, naming the worker and, where it
    came from one, the operator, with the original traceback.  With processes, a
    peer that dies or stays silent for ``timeout`` seconds raises
    :class:`~timely_spark.errors.WorkerFailure`.  ``fn`` travels to other processes
    with cloudpickle, so lambdas and closures from a notebook work.

    >>> import timely_spark as ts
    >>> ts.execute(lambda worker: (worker.index, worker.peers), threads=3)
    [(0, 3), (1, 3), (2, 3)]
    """
    config = Config(threads=threads, processes=processes, timeout=timeout)
    config.check()
    if processes > 1:
        from .launch import launch_local

        return launch_local(fn, config)
    fabric = ThreadFabric(threads)
    results = _run_threads(fn, fabric, [ThreadAllocator(i, fabric) for i in range(threads)])
    _raise_failure(fabric.failure)
    return results


def parse_args(argv: Sequence[str]) -> tuple[Config, list[str]]:
    """Timely's flags: ``-w/--threads``, ``-n/--processes``, ``-p/--process``, ``-h/--hostfile``
    (one ``host:port`` per line).  Returns the config and the arguments left over."""
    parser = argparse.ArgumentParser(add_help=False, prog="timely")
    parser.add_argument("-w", "--threads", type=int, default=1)
    parser.add_argument("-n", "--processes", type=int, default=1)
    parser.add_argument("-p", "--process", type=int, default=None)
    parser.add_argument("-h", "--hostfile", default=None)
    parser.add_argument("--timeout", type=float, default=30.0)
    args, rest = parser.parse_known_args(list(argv))
    addresses: list[tuple[str, int]] = []
    if args.hostfile:
        with open(args.hostfile) as f:
            for n, line in enumerate(f, start=1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                host, sep, port = line.rpartition(":")
                if not sep or not port.isdigit():
                    raise ValueError(f"{args.hostfile}, line {n}: expected host:port, got {line!r}")
                addresses.append((host.strip("[]"), int(port)))
    elif args.process is not None and args.processes > 1:
        addresses = [("127.0.0.1", 2101 + i) for i in range(args.processes)]
    config = Config(threads=args.threads, processes=args.processes, process=args.process,
                    addresses=addresses, timeout=args.timeout)
    config.check()
    return config, rest


def execute_from_args(fn: Callable[[Worker], R], argv: Sequence[str]) -> list[R]:
    """Run ``fn`` as timely's ``execute_from_args`` does, from command-line flags.

    ``-w N`` threads per process; ``-n P`` processes; ``-p I`` this process's index
    (each of the ``P`` processes is started by hand with its own ``-p``); ``-h FILE``
    a hostfile with one ``host:port`` per process (default ``127.0.0.1:2101+I``).
    Processes started by hand share the run's secret through the environment
    variable ``TIMELY_SPARK_SECRET``.  Without ``-p``, all ``P`` processes start here.
    Returns the results of this process's workers (all of them without ``-p``).
    """
    config, _ = parse_args(argv)
    if config.processes == 1 or config.process is None:
        return execute(fn, threads=config.threads, processes=config.processes, timeout=config.timeout)
    secret = os.environ.get(SECRET_ENV, "")
    if not secret:
        raise ValueError(f"processes started by hand need a shared secret in ${SECRET_ENV} "
                         f"(e.g. export {SECRET_ENV}=$(python -c 'import secrets; print(secrets.token_hex(16))'))")
    from .communication.tcp import bind_listener

    host, port = config.addresses[config.process]
    listener = bind_listener(host, port)
    return run_process(fn, config.process, config.processes, config.threads, config.addresses, listener,
                       secret.encode(), peer_timeout=config.timeout, connect_timeout=config.connect_timeout)


def new_secret() -> bytes:
    """A fresh per-run secret."""
    return secrets.token_bytes(32)


def example(build: Callable[[Scope], R], time: Any = 0) -> R:
    """Build a dataflow on one worker, run it to completion, and return what ``build`` returned.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda scope: scope.to_stream(range(3)).inspect(print))
    0
    1
    2
    """
    return execute(lambda worker: worker.dataflow(build, time=time))[0]
