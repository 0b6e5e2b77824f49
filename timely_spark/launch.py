"""Starting the processes of a local multi-process run, and the child's side of it.

The parent makes the run's secret, starts ``processes`` children with
``python -m timely_spark.child`` and talks to each over its stdin and a private
pipe (never over the mesh): it sends the run's :class:`~timely_spark.runtime.Config`
(whole, with the child's process index) and the cloudpickled worker function,
receives the address the child bound (port 0 on loopback), sends back everyone's
address (the child puts them in its Config and runs
:func:`timely_spark.process.run_workers`), and finally receives the child's results or its error.
Children print to the parent's stdout and stderr as usual.

Children never outlive the parent: each watches its stdin, and ends itself when the
parent's end of it closes (the parent exited, was killed, or is done); on Linux the
kernel also kills it when the parent dies (``PR_SET_PDEATHSIG``).  The parent
handles SIGTERM like Ctrl-C: it ends its children and raises KeyboardInterrupt.
A run ``timeout`` is enforced by the children themselves (each stops its workers and
reports :class:`~timely_spark.errors.RunTimeout`), and by the parent as a backstop.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import IO, Any, Callable, Iterator

import cloudpickle

from .errors import RunTimeout, WorkerFailure, most_telling
from .function_pickle import dumps_function, loads_function
from .runtime import POLL_INTERVAL, STOP_GRACE, Config, new_secret

__all__ = ["launch_local", "child_main", "ChildProcess", "read_message"]

#: Seconds the starting process waits for the rest of a message a worker process
#: has begun to send (its results or its error).
CHILD_MESSAGE_WAIT = 60.0

#: Seconds a worker process waits for its configuration from the starting process.
CHILD_START_WAIT = 120.0

#: Seconds the starting process adds to ``timeout`` + twice :data:`~timely_spark.runtime.STOP_GRACE` before it
#: kills worker processes that have not reported their own deadline (a backstop: they
#: normally end themselves at ``timeout`` + :data:`~timely_spark.runtime.STOP_GRACE`).
RUN_BACKSTOP_SLACK = 5.0

#: Seconds to wait for a worker process to exit after the run, before killing it.
CHILD_EXIT_WAIT = 10.0

_LEN = struct.Struct("<Q")
_PR_SET_PDEATHSIG = 1                 # prctl option (linux/prctl.h)


def _write(f: IO[bytes], obj: Any) -> None:
    data = cloudpickle.dumps(obj, protocol=5)
    f.write(_LEN.pack(len(data)) + data)
    f.flush()


def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    chunks, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no message from the child process in time")
        ready, _, _ = select.select([fd], [], [], min(left, POLL_INTERVAL))
        if not ready:
            continue
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError("the child process closed its pipe")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_message(fd: int, deadline: float) -> Any:
    """One message from pipe ``fd`` (a length, then a pickle), by ``deadline`` (monotonic);
    EOFError if the pipe closes first, TimeoutError past the deadline."""
    (n,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))


class ChildProcess:
    """A worker process of a local run: its ``proc``, the read end ``fd`` of its private
    pipe, ``send`` writes to its stdin."""

    def __init__(self, index: int) -> None:
        read_fd, write_fd = os.pipe()
        self.index = index
        self.fd = read_fd
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen([sys.executable, "-m", "timely_spark.child", str(write_fd), str(os.getpid())],
                                     stdin=subprocess.PIPE, pass_fds=(write_fd,), env=env)
        os.close(write_fd)

    def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        _write(self.proc.stdin, obj)

    def close(self, kill: bool) -> None:
        if kill and self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=CHILD_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        os.close(self.fd)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While the parent waits for its children, SIGTERM raises KeyboardInterrupt (as
    Ctrl-C does), so the children are ended too.  Only the main thread can do this."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def launch_local(fn: Callable, config: Config) -> list:
    """Run ``fn`` in ``config.processes`` local child processes joined by the mesh;
    return all workers' results in worker order.  Raises the run's failure."""
    with _sigterm_as_interrupt():
        return _launch(fn, config)


def _launch(fn: Callable, config: Config) -> list:
    secret = new_secret()
    fn_bytes = dumps_function(fn)
    children = [ChildProcess(p) for p in range(config.processes)]
    ok = False
    try:
        _start(children, config, secret, fn_bytes)
        backstop = (None if config.timeout is None
                    else time.monotonic() + config.timeout + 2 * STOP_GRACE + RUN_BACKSTOP_SLACK)
        results: list = []
        errors: list[BaseException] = []
        pending = {c.fd: c for c in children}
        outcome: dict[int, list] = {}
        limit = None
        while pending:
            ready, _, _ = select.select(list(pending), [], [], POLL_INTERVAL)
            for fd in ready:
                c = pending.pop(fd)
                try:
                    kind, value = read_message(fd, time.monotonic() + CHILD_MESSAGE_WAIT)
                except (EOFError, TimeoutError):
                    code = c.proc.wait(timeout=CHILD_EXIT_WAIT)
                    errors.append(WorkerFailure(f"process {c.index} exited with code {code} without a result"))
                    continue
                if kind == "result":
                    outcome[c.index] = value
                else:
                    errors.append(value)
            for fd, c in list(pending.items()):
                if c.proc.poll() is not None and not select.select([fd], [], [], 0)[0]:
                    pending.pop(fd)
                    errors.append(WorkerFailure(f"process {c.index} exited with code {c.proc.returncode} "
                                                "without a result"))
            if errors and limit is None:   # the others notice in the same window: a short grace
                limit = time.monotonic() + STOP_GRACE
            if limit is not None and time.monotonic() > limit:
                break
            if backstop is not None and time.monotonic() > backstop and pending:
                assert config.timeout is not None
                errors.append(RunTimeout(config.timeout, {
                    c.index * config.threads: f"process {c.index} did not answer in time; it was killed"
                    for c in pending.values()}))
                break
        if errors:
            raise most_telling(errors)
        for p in range(config.processes):
            results.extend(outcome[p])
        ok = True
        return results
    finally:
        for c in children:
            c.close(kill=not ok)


def _start(children: list[ChildProcess], config: Config, secret: bytes, fn_bytes: bytes) -> None:
    """Send each child its start, gather the addresses they bound and send them to all;
    a child that dies or stays silent meanwhile (its pipes closed, no address in time)
    is a WorkerFailure naming it and its exit code."""
    deadline = time.monotonic() + config.connect_timeout
    child = children[0]
    try:
        for child in children:
            child.send({"config": replace(config, process=child.index), "secret": secret, "fn": fn_bytes})
        addresses = []
        for child in children:
            kind, value = read_message(child.fd, deadline)
            if kind != "address":
                raise _child_error(child, value)
            addresses.append(value)
        for child in children:
            child.send(addresses)
    except (OSError, EOFError, TimeoutError) as exc:
        try:
            code: Any = child.proc.poll() if isinstance(exc, TimeoutError) else child.proc.wait(CHILD_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            code = None
        code = "none: still running" if code is None else code
        raise WorkerFailure(f"process {child.index} failed while the run started (exit code {code}): "
                            f"{type(exc).__name__}: {exc}") from exc


def _child_error(child: ChildProcess, value: Any) -> BaseException:
    return value if isinstance(value, BaseException) else WorkerFailure(f"process {child.index}: {value!r}")


def _watch_parent(fd: int) -> None:
    """End this child process once the parent's end of its stdin closes."""
    while True:
        try:
            if not os.read(fd, 4096):
                break
        except OSError:
            break
    os._exit(70)


def _die_with_parent(parent: int) -> None:
    """On Linux, have the kernel kill this process when its parent dies (however it
    dies), and end at once if the parent ``parent`` is already gone."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):   # no prctl: the stdin watch still ends us
            pass
    if parent and os.getppid() != parent:    # the parent died before prctl took effect
        os._exit(70)


def child_main(write_fd: int, parent: int = 0) -> None:
    """A child's side of the run (``python -m timely_spark.child FD PARENT_PID``): read
    the config and the worker function from stdin, bind, report the address on pipe
    ``FD``, run, and report the results or the error."""
    _die_with_parent(parent)
    from .communication.tcp import bind_listener
    from .process import run_workers

    out = os.fdopen(write_fd, "wb")
    stdin = sys.stdin.buffer
    start = read_message(stdin.fileno(), time.monotonic() + CHILD_START_WAIT)
    config: Config = start["config"]
    listener = bind_listener("127.0.0.1", 0)
    _write(out, ("address", listener.getsockname()[:2]))
    addresses = read_message(stdin.fileno(), time.monotonic() + config.connect_timeout + CHILD_START_WAIT)
    threading.Thread(target=_watch_parent, args=(stdin.fileno(),), name="timely-parent-watch", daemon=True).start()
    message: tuple[str, Any]
    try:
        fn = loads_function(start["fn"])
        results = run_workers(fn, replace(config, addresses=addresses), listener, start["secret"])
        message = ("result", results)
    except BaseException as exc:  # noqa: BLE001 -- sent to the parent
        message = ("error", exc)
    try:
        _write(out, message)
    except Exception as exc:  # results or error that cannot be pickled
        _write(out, ("error", WorkerFailure(f"process {config.process}: cannot send back {message[0]}: {exc}")))
    out.close()


