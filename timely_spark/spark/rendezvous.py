"""Where barrier tasks meet: a small authenticated rendezvous on the driver.

Spark's own ``BarrierTaskContext.allGather`` polls once a second, so every run paid
about a second before its first record moved.  Instead, each task connects to this
service on the driver, proves it knows its job's secret, and sends its listener's
``host:port``; once every task of the stage has registered, the driver answers each
with all of them, proving in turn that it knows the secret.  A task whose job fails
also reports the error here (authenticated the same way), so that the driver can
raise the package's own exception instead of Spark's (see :mod:`.job_errors`).

One service per driver process, started on first use (:func:`driver_rendezvous`);
each run or ``transform`` opens a :class:`Ticket` (a token, the secret, the service's
address) that travels to the tasks in their closure.  Over Spark Connect, or with
``spark.timely_spark.rendezvous=allGather``, tasks use ``allGather`` instead.

Protocol, one TCP connection per message (all waits bounded; nothing is acted on
before its MAC checks)::

    task   -> driver   MAGIC, token (16 bytes), task nonce (32)
    driver -> task     driver nonce (32), MAC(secret; "hello", token, both nonces)
    task   -> driver   length, JSON request, MAC(secret; "request", token, nonces, request)
    driver -> task     length, JSON answer,  MAC(secret; "answer", token, nonces, answer)

An unknown token or a wrong MAC closes the connection without an answer.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import os
import pickle
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Optional

import cloudpickle

from ..communication.tcp import bind_listener, handshake_mac, recv_exact
from ..errors import TimelyError, WorkerFailure, picklable
from ..runtime import DEFAULT_CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT, MAX_HANDSHAKES, POLL_INTERVAL, RETRY_BACKOFF

__all__ = ["Ticket", "DriverRendezvous", "RendezvousError", "driver_rendezvous", "session_rendezvous",
           "all_services", "meet", "report_failure", "RENDEZVOUS_CONF", "MAX_REQUEST", "REMEMBERED_FAILURES"]

log = logging.getLogger(__name__)

RENDEZVOUS_CONF = "spark.timely_spark.rendezvous"
"""Spark setting: ``driver`` (default) to meet through the driver, ``allGather`` when
executors cannot connect to the driver's Python process."""

MAX_REQUEST = 16 * 1024 * 1024
"""Largest request or answer (an address list, or a reported error with its traceback)."""

REMEMBERED_FAILURES = 256
"""How many reported task failures the driver keeps for :mod:`.job_errors` to claim."""

MAGIC = b"TSRDV001"
TOKEN = 16
NONCE = 32
_LEN = struct.Struct("<I")


class RendezvousError(TimelyError):
    """Tasks could not meet through the driver (unreachable, refused, or not all
    tasks registered in time)."""


@dataclass(frozen=True)
class Ticket:
    """What a task needs to meet its peers through the driver: the service's address,
    the job's token (not secret) and secret, and how long to wait for the others."""

    host: str
    port: int
    token: bytes
    secret: bytes
    wait: float = DEFAULT_CONNECT_TIMEOUT


def _send_message(sock: socket.socket, secret: bytes, label: bytes, token: bytes, nonces: bytes,
                  message: dict) -> None:
    body = json.dumps(message).encode()
    sock.sendall(_LEN.pack(len(body)) + body + handshake_mac(secret, label, token, nonces, body))


def _recv_message(sock: socket.socket, secret: bytes, label: bytes, token: bytes, nonces: bytes,
                  deadline: float) -> Optional[dict]:
    """The peer's message, or None if its MAC does not check."""
    (n,) = _LEN.unpack(recv_exact(sock, _LEN.size, deadline))
    if n > MAX_REQUEST:
        return None
    body = bytes(recv_exact(sock, n, deadline))
    mac = bytes(recv_exact(sock, 32, deadline))
    if not hmac.compare_digest(mac, handshake_mac(secret, label, token, nonces, body)):
        return None
    return json.loads(body)


class _Group:
    """The tasks of one stage of one job that have registered so far."""

    def __init__(self, workers: int, deadline: float) -> None:
        self.workers = workers
        self.deadline = deadline
        self.entries: dict[int, tuple[object, list]] = {}    # index -> (registration, [host, port])
        self.answer: Optional[list] = None
        self.taken = 0


class DriverRendezvous:
    """The driver's rendezvous service (one per driver process and host).

    ``open()`` a ticket per job and ``close()`` it when the job is done (``transform``
    keeps its tickets: its DataFrame may run again later).  ``failures()`` are the
    errors tasks reported, newest first.  Threads are daemons: they end with the
    driver.
    """

    def __init__(self, host: str, bind: Optional[str] = None) -> None:
        self.listener = bind_listener(bind or host, 0)
        self.host = host
        self.port = self.listener.getsockname()[1]
        self._secrets: dict[bytes, tuple[bytes, float]] = {}
        self._groups: dict[tuple[bytes, int], _Group] = {}
        self._failures: deque[tuple[bytes, BaseException]] = deque(maxlen=REMEMBERED_FAILURES)
        self._cond = threading.Condition()
        self._handshakes = threading.BoundedSemaphore(MAX_HANDSHAKES)
        threading.Thread(target=self._accept_loop, name="timely-rendezvous", daemon=True).start()

    # ---- the driver's side -------------------------------------------------------
    def open(self, secret: bytes, wait: float = DEFAULT_CONNECT_TIMEOUT) -> Ticket:
        """A new job's ticket: tasks showing it (and proving ``secret``) may meet here,
        each group waiting at most ``wait`` seconds for its last task."""
        token = os.urandom(TOKEN)
        with self._cond:
            self._secrets[token] = (secret, wait)
        return Ticket(self.host, self.port, token, secret, wait)

    def close(self, ticket: Ticket) -> None:
        """Forget a finished job: its tasks can no longer meet or report here."""
        with self._cond:
            self._secrets.pop(ticket.token, None)
            for key in [k for k in self._groups if k[0] == ticket.token]:
                del self._groups[key]
            self._cond.notify_all()

    def failures(self) -> list[tuple[bytes, BaseException]]:
        """``(job token, error)`` of the errors tasks reported (authenticated), newest first."""
        with self._cond:
            return list(reversed(self._failures))

    def claim(self, token: bytes) -> list[BaseException]:
        """Take (and forget) every error the tasks of job ``token`` reported."""
        with self._cond:
            taken = [exc for t, exc in self._failures if t == token]
            kept = [(t, exc) for t, exc in self._failures if t != token]
            self._failures.clear()
            self._failures.extend(kept)
            return taken

    # ---- serving ---------------------------------------------------------------
    def _accept_loop(self) -> None:
        backoff = RETRY_BACKOFF
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError as exc:
                log.warning("timely_spark rendezvous: accept failed (%s); retrying", exc)
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = RETRY_BACKOFF
            if not self._handshakes.acquire(blocking=False):
                sock.close()
                continue
            threading.Thread(target=self._serve, args=(sock,), name="timely-rendezvous-task", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        authenticated = False
        try:
            deadline = time.monotonic() + HANDSHAKE_TIMEOUT
            hello = bytes(recv_exact(sock, len(MAGIC) + TOKEN + NONCE, deadline))
            token, task_nonce = hello[len(MAGIC):len(MAGIC) + TOKEN], hello[len(MAGIC) + TOKEN:]
            with self._cond:
                known = self._secrets.get(token) if hello.startswith(MAGIC) else None
            if known is None:
                return
            secret, wait = known
            nonce = os.urandom(NONCE)
            nonces = task_nonce + nonce
            sock.sendall(nonce + handshake_mac(secret, b"hello", token, nonces))
            request = _recv_message(sock, secret, b"request", token, nonces, deadline)
            if request is None:
                return
            authenticated = True
            self._handshakes.release()
            answer = self._answer(token, request, wait)
            sock.settimeout(HANDSHAKE_TIMEOUT)
            _send_message(sock, secret, b"answer", token, nonces, answer)
        except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
            log.debug("timely_spark rendezvous: a connection ended (%s)", exc)
        finally:
            if not authenticated:
                self._handshakes.release()
            sock.close()

    def _answer(self, token: bytes, request: dict, wait: float) -> dict:
        if request["kind"] == "failed":
            try:
                failure = pickle.loads(base64.b64decode(request["error"]))   # authenticated above
            except Exception as exc:  # a class the driver cannot import: keep what can be said
                failure = WorkerFailure(f"a task failed with an error the driver cannot load ({exc!r})")
            with self._cond:
                self._failures.append((token, failure))
            return {"ok": True}
        return self._meet(token, int(request["stage"]), int(request["index"]), int(request["workers"]),
                          [str(request["host"]), int(request["port"])], wait)

    def _meet(self, token: bytes, stage: int, index: int, workers: int, address: list, wait: float) -> dict:
        me = object()
        key = (token, stage)
        with self._cond:
            group = self._groups.get(key)
            if group is None or group.answer is not None or group.workers != workers:
                group = self._groups[key] = _Group(workers, time.monotonic() + wait)
            group.entries[index] = (me, address)     # a retried task replaces its earlier attempt
            if len(group.entries) == workers and all(0 <= i < workers for i in group.entries):
                group.answer = [group.entries[i][1] for i in range(workers)]
                self._cond.notify_all()
            while group.answer is None:
                left = group.deadline - time.monotonic()
                if group.entries.get(index, (None,))[0] is not me:
                    return {"error": f"task {index} registered again (a newer attempt replaced this one)"}
                if left <= 0 or token not in self._secrets:
                    if self._groups.get(key) is group:
                        del self._groups[key]
                    missing = sorted(set(range(workers)) - set(group.entries))
                    return {"error": f"only {len(group.entries)} of {workers} tasks reached the driver's "
                                     f"rendezvous within {wait:g} s (missing: {missing})"}
                self._cond.wait(min(left, POLL_INTERVAL))
            group.taken += 1
            if group.taken == workers and self._groups.get(key) is group:
                del self._groups[key]
            return {"addresses": group.answer}


_services: dict[tuple[str, Optional[str]], DriverRendezvous] = {}
_services_lock = threading.Lock()


def driver_rendezvous(host: str, bind: Optional[str] = None) -> DriverRendezvous:
    """This driver process's rendezvous service, reached at ``host`` and listening on
    ``bind`` (default: ``host``); started on first use."""
    with _services_lock:
        service = _services.get((host, bind))
        if service is None:
            service = _services[(host, bind)] = DriverRendezvous(host, bind)
        return service


def session_rendezvous(sc: Any, runtime_conf: Any = None) -> Optional[DriverRendezvous]:
    """The rendezvous service for jobs of SparkContext ``sc`` -- None when
    ``spark.timely_spark.rendezvous`` is ``allGather`` (in the SparkContext's settings
    or ``runtime_conf``, a session's ``spark.conf``).  Listens where the driver's own
    RPC does (``spark.driver.bindAddress``, else ``spark.driver.host``).  (Over Spark
    Connect there is no SparkContext, and callers use ``allGather``.)"""
    conf = sc.getConf()
    mode = conf.get(RENDEZVOUS_CONF, "driver")
    if runtime_conf is not None:
        mode = runtime_conf.get(RENDEZVOUS_CONF, mode)
    if mode.strip().lower() == "allgather":
        return None
    if mode.strip().lower() != "driver":
        raise ValueError(f"{RENDEZVOUS_CONF} must be 'driver' or 'allGather', not {mode!r}")
    host = conf.get("spark.driver.host", None) or socket.gethostname()
    return driver_rendezvous(host, conf.get("spark.driver.bindAddress", None))


def all_services() -> list[DriverRendezvous]:
    """Every rendezvous service this driver process has started."""
    with _services_lock:
        return list(_services.values())


# ---- the task's side ------------------------------------------------------------
def _exchange(ticket: Ticket, request: dict, deadline: float) -> dict:
    """Send ``request`` to the driver and return its authenticated answer."""
    where = f"the driver's rendezvous at {ticket.host}:{ticket.port}"
    delay = RETRY_BACKOFF
    while True:
        try:
            sock = socket.create_connection((ticket.host, ticket.port),
                                            timeout=max(POLL_INTERVAL, min(HANDSHAKE_TIMEOUT,
                                                                           deadline - time.monotonic())))
            break
        except OSError as exc:
            if time.monotonic() + delay > deadline:
                raise RendezvousError(
                    f"cannot reach {where} ({exc}): executors must be able to connect to the driver; "
                    f"otherwise set {RENDEZVOUS_CONF}=allGather") from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    try:
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            nonce = os.urandom(NONCE)
            sock.settimeout(HANDSHAKE_TIMEOUT)
            sock.sendall(MAGIC + ticket.token + nonce)
            hello = bytes(recv_exact(sock, NONCE + 32, time.monotonic() + HANDSHAKE_TIMEOUT))
            nonces = nonce + hello[:NONCE]
            if not hmac.compare_digest(hello[NONCE:], handshake_mac(ticket.secret, b"hello", ticket.token, nonces)):
                raise RendezvousError(f"{where} did not prove it knows the job's secret")
            _send_message(sock, ticket.secret, b"request", ticket.token, nonces, request)
            answer = _recv_message(sock, ticket.secret, b"answer", ticket.token, nonces,
                                   max(deadline, time.monotonic()) + HANDSHAKE_TIMEOUT)
    except (OSError, EOFError) as exc:
        raise RendezvousError(f"{where} closed the connection without an answer ({exc!r}): it does not know "
                              f"this job (the driver restarted?) or the wait ran out") from exc
    if answer is None:
        raise RendezvousError(f"{where} answered without proving it knows the job's secret")
    return answer


def meet(ticket: Ticket, stage: int, index: int, workers: int, host: str, port: int) -> list[tuple[str, int]]:
    """Register this task's listener and return every task's ``(host, port)`` in task
    order, once all ``workers`` tasks of ``stage`` have registered (bounded by the
    ticket's wait; RendezvousError otherwise)."""
    answer = _exchange(ticket, {"kind": "meet", "stage": stage, "index": index, "workers": workers,
                                "host": host, "port": port}, time.monotonic() + ticket.wait)
    if "error" in answer:
        raise WorkerFailure(f"task {index}: {answer['error']}")
    return [(str(h), int(p)) for h, p in answer["addresses"]]


def report_failure(ticket: Ticket, exc: BaseException) -> None:
    """Tell the driver how this task failed (best effort, bounded)."""
    body = base64.b64encode(cloudpickle.dumps(picklable(exc), protocol=5)).decode()
    try:
        _exchange(ticket, {"kind": "failed", "error": body}, time.monotonic() + HANDSHAKE_TIMEOUT)
    except Exception as problem:  # the task fails anyway; Spark's error carries the text
        log.warning("timely_spark: could not report a failure to the driver (%s)", problem)
