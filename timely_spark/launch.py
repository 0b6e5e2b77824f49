"""Starting the processes of a local multi-process run, and the child's side of it.

The parent makes the run's secret, starts ``processes`` children with
``python -m timely_spark.launch`` and talks to each over its stdin and a private
pipe (never over the mesh): it sends the configuration and the cloudpickled worker
function, receives the address the child bound (port 0 on loopback), sends back
everyone's address, and finally receives the child's results or its error.
Children print to the parent's stdout and stderr as usual.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import time
from typing import Any, BinaryIO, Callable

import cloudpickle

from .errors import WorkerFailure, most_telling

__all__ = ["launch_local"]

_LEN = struct.Struct("<Q")


def _write(f: BinaryIO, obj: Any) -> None:
    data = cloudpickle.dumps(obj, protocol=5)
    f.write(_LEN.pack(len(data)) + data)
    f.flush()


def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    chunks, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no message from the child process in time")
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            continue
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError("the child process closed its pipe")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read(fd: int, deadline: float) -> Any:
    (n,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))


class _Child:
    def __init__(self, index: int) -> None:
        read_fd, write_fd = os.pipe()
        self.index = index
        self.fd = read_fd
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen([sys.executable, "-m", "timely_spark.launch", str(write_fd)],
                                     stdin=subprocess.PIPE, pass_fds=(write_fd,), env=env)
        os.close(write_fd)

    def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        _write(self.proc.stdin, obj)

    def close(self, kill: bool) -> None:
        if kill and self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        os.close(self.fd)


def launch_local(fn: Callable, config: Any) -> list:
    from .execute import new_secret

    secret = new_secret()
    fn_bytes = cloudpickle.dumps(fn, protocol=5)
    children = [_Child(p) for p in range(config.processes)]
    ok = False
    try:
        start_deadline = time.monotonic() + config.connect_timeout
        for c in children:
            c.send({"process": c.index, "processes": config.processes, "threads": config.threads,
                    "secret": secret, "fn": fn_bytes, "timeout": config.timeout,
                    "connect_timeout": config.connect_timeout})
        addresses = []
        for c in children:
            kind, value = _read(c.fd, start_deadline)
            if kind != "address":
                raise _child_error(c, value)
            addresses.append(value)
        for c in children:
            c.send(addresses)
        results: list = []
        errors: list[BaseException] = []
        pending = {c.fd: c for c in children}
        outcome: dict[int, list] = {}
        limit = None
        while pending:
            ready, _, _ = select.select(list(pending), [], [], 0.2)
            for fd in ready:
                c = pending.pop(fd)
                try:
                    kind, value = _read(fd, time.monotonic() + 60)
                except (EOFError, TimeoutError):
                    code = c.proc.wait(timeout=10)
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
                limit = time.monotonic() + 3
            if limit is not None and time.monotonic() > limit:
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


def _child_error(child: _Child, value: Any) -> BaseException:
    return value if isinstance(value, BaseException) else WorkerFailure(f"process {child.index}: {value!r}")


def _child_main(write_fd: int) -> None:
    from .communication.tcp import bind_listener
    from .execute import run_process

    out = os.fdopen(write_fd, "wb")
    stdin = sys.stdin.buffer
    config = _read(stdin.fileno(), time.monotonic() + 120)
    listener = bind_listener("127.0.0.1", 0)
    _write(out, ("address", listener.getsockname()[:2]))
    addresses = _read(stdin.fileno(), time.monotonic() + config["connect_timeout"] + 60)
    try:
        fn = cloudpickle.loads(config["fn"])
        results = run_process(fn, config["process"], config["processes"], config["threads"], addresses,
                              listener, config["secret"], peer_timeout=config["timeout"],
                              connect_timeout=config["connect_timeout"])
        message = ("result", results)
    except BaseException as exc:  # noqa: BLE001 -- sent to the parent
        message = ("error", exc)
    try:
        _write(out, message)
    except Exception as exc:  # results or error that cannot be pickled
        _write(out, ("error", WorkerFailure(f"process {config['process']}: cannot send back {message[0]}: {exc}")))
    out.close()


if __name__ == "__main__":
    _child_main(int(sys.argv[1]))
