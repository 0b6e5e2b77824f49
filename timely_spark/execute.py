"""Running workers: threads of one process, processes joined by the TCP mesh.

* :func:`execute` -- ``threads`` workers in each of ``processes`` local processes
  (worker ``process * threads + thread``), results in worker order;
* :func:`execute_from_args` -- timely's command line flags, for processes started by
  hand on one or several machines;
* :func:`example` -- a one-worker dataflow run to completion.

All three build one :class:`~timely_spark.runtime.Config` and hand it to
:func:`execute_config`; one process's share of a run is
:func:`timely_spark.process.run_workers` (the path Spark's barrier tasks take too); the
local processes are started by :mod:`timely_spark.launch`; defaults and validation live
in :mod:`timely_spark.runtime`.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import replace
from typing import Any, Callable, Optional, Sequence, TypeVar

from .dataflow.scope import Scope
from .dataflow.worker import Worker
from .errors import ParameterError
from .launch import launch_local
from .process import run_process, run_workers
from .runtime import DEFAULT_PEER_TIMEOUT, SECRET_ENV, Config, check_port
from .state.key import resolve_key
from .state.owner import owning_checkpoint

__all__ = ["Config", "execute", "execute_config", "execute_from_args", "example", "parse_args", "run_process"]

#: Process ``p`` started by hand without a hostfile listens on ``127.0.0.1:DEFAULT_PORT + p``.
DEFAULT_PORT = 2101

R = TypeVar("R")


def execute(fn: Callable[[Worker], R], threads: int = 1, processes: int = 1, timeout: Optional[float] = None,
            peer_timeout: float = DEFAULT_PEER_TIMEOUT, checkpoint: Optional[str] = None,
            snapshot_every: Optional[float] = None) -> list[R]:
    """Run ``fn(worker)`` on ``threads`` workers in each of ``processes`` local processes
    and return their results in worker order (worker ``process * threads + thread``).

    When ``fn`` returns, the worker closes its open inputs and runs its dataflows to
    completion.  An exception on any worker stops every worker and is raised here
    as :class:`~timely_spark.errors.WorkerError`, naming the worker and, where it
    came from one, the operator, with the original traceback.  ``timeout`` bounds the
    whole run: past it every worker stops and :class:`~timely_spark.errors.RunTimeout`
    (a ``TimeoutError``) says what was still incomplete.  With processes, a peer that
    dies or stays silent for ``peer_timeout`` seconds raises
    :class:`~timely_spark.errors.WorkerFailure`.  ``fn`` travels to other processes
    with cloudpickle, so lambdas and closures from a notebook work.

    ``checkpoint`` (a directory) turns on snapshots of operator state: one every
    ``snapshot_every`` seconds and one when the inputs close; a run started with a
    checkpoint that holds a committed snapshot restores it first
    (``worker.restored_time``; see :mod:`timely_spark.state`).

    >>> import timely_spark as ts
    >>> ts.execute(lambda worker: (worker.index, worker.peers), threads=3)
    [(0, 3), (1, 3), (2, 3)]
    """
    return execute_config(fn, Config(threads=threads, processes=processes, timeout=timeout,
                                     peer_timeout=peer_timeout, checkpoint=checkpoint,
                                     snapshot_every=snapshot_every))


def execute_config(fn: Callable[[Worker], R], config: Config) -> list[R]:
    """Run ``fn(worker)`` on the workers ``config`` lays out and return the results of this
    process's workers in worker order: all of them when ``config.process`` is None
    (``config.processes`` > 1 start as local child processes), else those of process
    ``config.process``, started by hand, which binds ``config.addresses[process]``
    (default ``127.0.0.1:DEFAULT_PORT + process``) and takes the run's secret from
    ``$TIMELY_SPARK_SECRET``.  :func:`execute` and :func:`execute_from_args` are its
    keyword and command-line forms; every worker gets ``config`` as ``worker.config``.

    >>> execute_config(lambda worker: (worker.index, worker.config.threads), Config(threads=2))
    [(0, 2), (1, 2)]
    """
    config.check()
    resolve_key(config)
    with owning_checkpoint(config):
        return _execute(fn, config)


def _execute(fn: Callable[[Worker], R], config: Config) -> list[R]:
    if config.processes == 1:
        return run_workers(fn, config)
    if config.process is None:
        return launch_local(fn, config)
    secret = os.environ.get(SECRET_ENV, "")
    if not secret:
        raise ValueError(f"processes started by hand need a shared secret in ${SECRET_ENV} "
                         f"(e.g. export {SECRET_ENV}=$(python -c 'import secrets; print(secrets.token_hex(16))'))")
    from .communication.tcp import bind_listener

    process: int = config.process
    if not config.addresses:
        config = replace(config, addresses=[("127.0.0.1", DEFAULT_PORT + i) for i in range(config.processes)])
    host, port = config.addresses[process]
    return run_workers(fn, config, bind_listener(host, port), secret.encode())


def parse_args(argv: Sequence[str]) -> tuple[Config, list[str]]:
    """Timely's flags: ``-w/--threads``, ``-n/--processes``, ``-p/--process``, ``-h/--hostfile``
    (one ``host:port`` per line), ``--timeout`` (seconds for the whole run),
    ``--peer-timeout`` (seconds of a peer's silence), ``--checkpoint DIR`` (snapshots
    of the workers' state go there, and a run restores from the last one committed
    there) and ``--snapshot-every SECONDS`` (how often; without it, a snapshot only
    when the inputs close).  Returns the config and the arguments left over.  A bad
    value raises :class:`~timely_spark.errors.ParameterError` naming the flag.

    >>> config, rest = parse_args(["-w", "2", "--timeout", "60", "--my-flag"])
    >>> config.threads, config.timeout, rest
    (2, 60.0, ['--my-flag'])
    >>> config, _ = parse_args(["--checkpoint", "/mnt/shared/ckpt", "--snapshot-every", "5"])
    >>> config.checkpoint, config.snapshot_every
    ('/mnt/shared/ckpt', 5.0)
    >>> parse_args(["--snapshot-every", "soon"])
    Traceback (most recent call last):
    ...
    timely_spark.errors.ParameterError: --snapshot-every must be a positive number of seconds, got 'soon'
    """
    parser = argparse.ArgumentParser(add_help=False, prog="timely")
    for flags in _FLAGS:
        parser.add_argument(*flags, default=None)
    args, rest = parser.parse_known_args(list(argv))
    threads = _flag(args.threads, "-w/--threads", _count, 1)
    processes = _flag(args.processes, "-n/--processes", _count, 1)
    process = _flag(args.process, "-p/--process", _index, None)
    timeout = _flag(args.timeout, "--timeout", _seconds, None)
    peer_timeout = _flag(args.peer_timeout, "--peer-timeout", _seconds, DEFAULT_PEER_TIMEOUT)
    checkpoint = _flag(args.checkpoint, "--checkpoint", _directory, None)
    snapshot_every = _flag(args.snapshot_every, "--snapshot-every", _seconds, None)
    if process is not None and not 0 <= process < processes:
        raise ValueError(f"-p/--process: process index {process} is not in 0..{processes - 1} (-n {processes})")
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
                addresses.append((host.strip("[]"), check_port(f"{args.hostfile}, line {n}", int(port))))
        if len(addresses) < processes:
            raise ValueError(f"{args.hostfile}: {processes} processes (-n) but {len(addresses)} host:port lines")
    config = Config(threads=threads, processes=processes, process=process, addresses=addresses, timeout=timeout,
                    peer_timeout=peer_timeout, checkpoint=checkpoint, snapshot_every=snapshot_every)
    try:
        return config.check(), rest
    except ParameterError as exc:     # say it by the flag the user wrote
        flag = _FLAG_OF.get(exc.parameter)
        if flag is None:
            raise
        text = re.sub(rf"(?<![-\w]){exc.parameter}\b(?!=)", flag, str(exc))
        for field, its_flag in _FLAG_OF.items():      # "(checkpoint=DIR)" -> "(--checkpoint DIR)"
            text = re.sub(rf"(?<![-\w]){field}=", its_flag + " ", text)
        raise ParameterError(text, flag) from None


_FLAGS = [("-w", "--threads"), ("-n", "--processes"), ("-p", "--process"), ("-h", "--hostfile"), ("--timeout",),
          ("--peer-timeout",), ("--checkpoint",), ("--snapshot-every",)]

#: The flag of each Config field that has one.
_FLAG_OF = {flags[-1][2:].replace("-", "_"): flags[-1] for flags in _FLAGS}


def _directory(text: str) -> str:
    if not text.strip():
        raise ValueError(text)
    return text


def _index(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(text)
    return value


_WHAT: dict[Callable[[str], Any], str] = {_index: "a whole number >= 0", _count: "a whole number >= 1",
                                          _directory: "a directory path"}


def _flag(text: Optional[str], flag: str, convert: Callable[[str], Any], default: Any) -> Any:
    """A flag's value converted, its default if absent, or a ValueError naming the flag."""
    if text is None:
        return default
    try:
        return convert(text)
    except ValueError:
        what = _WHAT.get(convert, "a positive number of seconds")
        raise ParameterError(f"{flag} must be {what}, got {text!r}", flag) from None


def execute_from_args(fn: Callable[[Worker], R], argv: Sequence[str]) -> list[R]:
    """Run ``fn`` as timely's ``execute_from_args`` does, from command-line flags.

    ``-w N`` threads per process; ``-n P`` processes; ``-p I`` this process's index
    (each of the ``P`` processes is started by hand with its own ``-p``); ``-h FILE``
    a hostfile with one ``host:port`` per process (default ``127.0.0.1:2101+I``);
    ``--timeout S`` bounds the run, ``--peer-timeout S`` a peer's silence;
    ``--checkpoint DIR`` and ``--snapshot-every S`` snapshot the workers' state (a
    directory every process can write and read; a restarted run restores from it).
    Processes started by hand share the run's secret through the environment
    variable ``TIMELY_SPARK_SECRET``.  Without ``-p``, all ``P`` processes start here.
    Returns the results of this process's workers (all of them without ``-p``).
    """
    config, _ = parse_args(argv)
    return execute_config(fn, config)


def example(build: Callable[[Scope], R], time: Any = 0) -> R:
    """Build a dataflow on one worker, run it to completion, and return what ``build`` returned.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda scope: scope.to_stream(range(3)).inspect(print))
    0
    1
    2
    """
    return execute(lambda worker: worker.dataflow(build, time=time))[0]
