"""Where barrier tasks meet: a small authenticated rendezvous on the driver.

Spark's own ``BarrierTaskContext.allGather`` polls once a second, so every run paid
about a second before its first record moved.  Instead, each task connects to this
service on the driver, proves it knows its job's secret, and sends its listener's
``host:port``; once every task of the stage attempt has registered, the driver answers
each with all of them, proving in turn that it knows the secret.  A task whose job
fails also reports the error here (authenticated the same way, and as plain data:
nothing received is unpickled), so that the driver can raise the package's own
exception instead of Spark's (see :mod:`.job_errors`); and a task of a job opened with
``on_stats`` sends its timings here when it ends (:func:`report_stats`: ``transform``'s
``stats=`` over Spark Connect, which has no accumulators).

One service per driver process, started on first use (:func:`driver_rendezvous`);
each run or ``transform`` opens a :class:`Ticket` (a token, the secret, the service's
address, a public job id) that travels to the tasks in their closure.  Over Spark
Connect, or with ``spark.timely_spark.rendezvous=allGather``, tasks use ``allGather``.

Protocol, one TCP connection per message (all waits bounded; nothing is acted on
before its tag checks)::

    task   -> driver   MAGIC (naming the cipher), token (16 bytes), task nonce (32)
    driver -> task     "?" (no such job) | "!", its PREFIX (7: it speaks another version)
                       | "+", driver nonce (32), MAC(secret; "hello", token, both nonces)
    task   -> driver   length, sealed JSON request, tag
    driver -> task     length, sealed JSON answer, tag

Request and answer are sealed as the worker mesh seals its frames (see
:mod:`timely_spark.communication.aead`): encrypted and authenticated with AES-256-GCM
(ChaCha20-Poly1305 when the task's CPU lacks AES instructions), a key per direction
derived with HKDF from the job's secret and both nonces, the length as associated
data.  Addresses and error reports are thus confidential on the wire, always (the
``TIMELY_SPARK_ENCRYPTION`` switch does not apply to these few small messages).
A task greeting in another protocol version (another package version) is answered its
own ``PREFIX`` and raises a ``RendezvousError`` saying so; the driver warns of it (once
per greeting).  A wrong MAC or tag closes the connection without an answer; an
authenticated request off the protocol's shape (not UTF-8 text, not JSON, not an
object, an unknown ``kind``, a field missing or of the wrong JSON type) is answered
``{"malformed": what is wrong}``, which the task raises as a ``RendezvousError`` (the
driver logs it as a warning).  When answering a well-formed request raises on the
driver (a job's ``on_stats`` raising, say: any BaseException, SystemExit and
KeyboardInterrupt too, see ``DriverRendezvous._serve``), the driver logs the error as
a warning with its traceback and answers ``{"driver_error": its type and message}``
(the job's secret in no form), which the task raises at once as a ``RendezvousError``
naming the driver and the error, instead of connecting again
until its wait runs out.  Until its request has checked,
a connection has :data:`~timely_spark.spark.rendezvous.RENDEZVOUS_AUTH_TIMEOUT` seconds and at
most :data:`~timely_spark.spark.rendezvous.RENDEZVOUS_MAX_REQUEST` bytes; at most
:data:`~timely_spark.spark.rendezvous.RENDEZVOUS_PENDING` connections authenticate at once, and
one more drops the oldest of the source holding the most.  A task whose connection is
dropped before its answer connects again, within its wait; its error then says how the
last connection ended (closed, and before which part, or not answered in time).  A task
refuses, naming the driver, an answer announced over :data:`MAX_ANSWER` bytes (before
reading it) or whose tag does not check, and a request of its own over
``RENDEZVOUS_MAX_REQUEST`` (before connecting).
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import os
import random
import re
import socket
import struct
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..communication.aead import TAG, Opener, Sealer, derive_keys, greeting, mode
from ..communication.pending import PendingHandshakes
from ..communication.tcp import (
    HANDSHAKE_TIMEOUT,
    MAX_RETRY_BACKOFF,
    RETRY_BACKOFF,
    bind_listener,
    handshake_mac,
    recv_exact,
)
from ..errors import (
    RendezvousError,
    RunTimeout,
    SchemaMismatch,
    WorkerError,
    WorkerFailure,
    describe_error,
    most_telling,
    rebuild_error,
)
from ..runtime import DEFAULT_CONNECT_TIMEOUT, POLL_INTERVAL
from .connect import client_on_driver_host, conf_get, endpoint_host, is_connect

__all__ = ["Ticket", "DriverRendezvous", "RendezvousError", "driver_rendezvous", "session_rendezvous",
           "scheduler_attempts", "stage_canceller", "REPEATED_FAILURES", "meet", "report_failure", "report_stats",
           "failure_marker", "reported_failure",
           "RENDEZVOUS_CONF", "MAX_ANSWER", "REMEMBERED_FAILURES"]

#: Seconds a connection to the driver's rendezvous has to authenticate (send its hello
#: and its MAC-checked request) before the driver drops it; a task whose connection is
#: dropped connects again, within its wait.
RENDEZVOUS_AUTH_TIMEOUT = 2.0

#: Connections the driver's rendezvous lets authenticate at once (and its listen
#: backlog).  When one more arrives, the oldest connection of the source holding the
#: most is dropped, so idle connections cannot shut real tasks out.
RENDEZVOUS_PENDING = 512

#: The largest request (bytes) the driver's rendezvous reads before checking its MAC:
#: a registration takes well under 1 KiB; a task's failure report is cut to fit.
RENDEZVOUS_MAX_REQUEST = 16 * 1024

#: Seconds a ``transform`` result's rendezvous ticket stays open without being used (no
#: task registering or reporting); after that its tasks can no longer meet, and
#: running the result again needs a new ``transform``.
TICKET_IDLE_TIMEOUT = 3600.0

log = logging.getLogger(__name__)

RENDEZVOUS_CONF = "spark.timely_spark.rendezvous"
"""Spark setting: ``driver`` (default) to meet through the driver, ``allGather`` when
executors cannot connect to the driver's Python process."""

MAX_ANSWER = 16 * 1024 * 1024
"""Largest answer (an address list) a task reads from the driver, which has already
proved the job's secret."""

OTHER_VERSIONS_LOGGED = 16
"""How many distinct greetings of another protocol version the driver warns of (once each)."""

#: Seconds the driver holds a task's report of a timeout for the other workers' (each says
#: what it was doing): below the task's wait for the answer (HANDSHAKE_TIMEOUT).
TIMEOUT_REPORTS_WAIT = 5.0

REMEMBERED_FAILURES = 256
"""How many reported task failures the driver keeps for :mod:`.job_errors` to claim."""

FAMILY = b"TSRDV"                      # every version's greeting starts so
#: The protocol's name and version, the start of a task's greeting.  04: the driver may
#: answer ``{"driver_error": ...}``, which a task speaking 03 would take for success.
PREFIX = FAMILY + b"04"
MAGIC = greeting(PREFIX, True)        # this process's greeting as a task (its last byte names the cipher)
TOKEN = 16
NONCE = 32
KNOWN, UNKNOWN, OTHER_VERSION = b"+", b"?", b"!"
_LEN = struct.Struct("<I")
_MARKER = re.compile(r"timely_spark job ([0-9a-f]{16}), stage (\d+), task (\d+)")


@dataclass(frozen=True)
class Ticket:
    """What a task needs to meet its peers through the driver: the service's address,
    the job's token (not secret) and secret, how long to wait for the others, and the
    job's public id (which names its failures in Spark's errors)."""

    host: str
    port: int
    token: bytes
    secret: bytes
    wait: float = DEFAULT_CONNECT_TIMEOUT
    job: str = ""


def message_keys(secret: bytes, token: bytes, nonces: bytes, magic: bytes) -> tuple[Sealer, Sealer]:
    """The sealers of a connection's two directions, ``(task -> driver, driver -> task)``,
    from the job's secret, its token, both nonces and the task's greeting."""
    cipher = (mode(magic) or ("", True))[0]
    up, down = derive_keys(secret, nonces, b"rendezvous " + token + magic, 2)
    return Sealer(up, cipher), Sealer(down, cipher)


def _send_message(sock: socket.socket, sealer: Sealer, message: dict) -> None:
    body = json.dumps(message).encode()
    header = _LEN.pack(len(body))
    sock.sendall(header + b"".join(bytes(p) for p in sealer.seal(header, [body])))


def _read(sock: socket.socket, n: int, deadline: float, part: str) -> bytearray:
    """Exactly ``n`` bytes of ``part`` (what they are, as "its hello"), by ``deadline``:
    EOFError or socket.timeout saying which part did not come, and how."""
    start = time.monotonic()
    try:
        return recv_exact(sock, n, deadline)
    except EOFError:
        raise EOFError(f"the connection closed before {part} came") from None
    except socket.timeout:
        raise socket.timeout(f"{part} did not come within {time.monotonic() - start:.1f} s") from None


class _TooLong(Exception):
    """A message announced more bytes than its reader takes (none of them were read)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes announced, over the cap of {limit}")
        self.size, self.limit = size, limit


class _Unproven(Exception):
    """A message's tag did not check: its sender does not know the job's secret."""


class _NotJSON(ValueError):
    """An authenticated message that is not UTF-8 JSON; the message says what is wrong."""


def _recv_message(sock: socket.socket, opener: Opener, deadline: float, limit: int, what: str) -> Any:
    """The peer's ``what`` (``"request"`` or ``"answer"``), authenticated JSON of any kind
    (its reader checks the shape): _TooLong when it announces more than ``limit`` bytes
    (nothing more is read), _Unproven when its tag does not check; EOFError or
    socket.timeout (see :func:`_read`) when the connection ends or ``deadline`` passes first."""
    header = bytes(_read(sock, _LEN.size, deadline, f"the length of its {what}"))
    (n,) = _LEN.unpack(header)
    if n > limit:
        raise _TooLong(n, limit)
    body = opener.open(header, memoryview(_read(sock, n + TAG, deadline, f"all of its {n}-byte {what}")))
    if body is None:
        raise _Unproven(f"the tag of its {n}-byte {what} does not check")
    return _json(bytes(body))


def _json(body: bytes) -> Any:
    """The JSON value of an authenticated ``body``; _NotJSON saying what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _NotJSON(f"{len(body)} bytes that are not UTF-8 text (byte {exc.start}: "
                       f"{body[exc.start:exc.start + 1]!r}, {exc.reason})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _NotJSON(f"{len(body)} bytes of text that are not JSON ({exc})") from None
    except RecursionError:
        raise _NotJSON(f"{len(body)} bytes of JSON nested deeper than this Python parses") from None


def _opener(sealer: Sealer) -> Opener:
    return Opener(sealer.key, sealer.cipher)


@dataclass
class _Job:
    secret: bytes
    wait: float
    id: str
    idle: Optional[float]          # closed after this many seconds unused (None: when closed)
    used: float                    # monotonic time of the last authenticated message
    on_stats: Optional[Callable[[dict], Any]] = None     # takes a task's timings (plain data)
    cancel_stage: Optional[Callable[[int, str], None]] = None    # ends a stage that would fail again

    def expired(self, now: float) -> bool:
        return self.idle is not None and now - self.used > self.idle


def scheduler_attempts(sc: Any) -> Callable[[int, int], Optional[int]]:
    """``attempt_of(stage, task)``: the attempt of ``stage`` that running task ``task``
    (its ``taskAttemptId()``) belongs to, asked of SparkContext ``sc``'s task scheduler
    (PySpark tells a task its stage but not the stage's attempt); None if unknown."""
    def attempt_of(stage: int, task: int) -> Optional[int]:
        try:       # the scheduler's Scala maps: their Long task ids equal py4j's Integers
            by_stage = sc._jsc.sc().taskScheduler().taskSetsByStageIdAndAttempt().get(stage)
            if by_stage.isEmpty():
                return None
            attempts = by_stage.get()
            keys = attempts.keysIterator()
            while keys.hasNext():
                attempt = keys.next()
                if attempts.apply(attempt).taskInfos().contains(task):
                    return int(attempt)
            return None
        except Exception as exc:  # another scheduler, or Spark's internals changed
            log.debug("timely_spark rendezvous: cannot ask Spark for task %d's stage attempt (%s)", task, exc)
            return None

    return attempt_of


def stage_canceller(sc: Any) -> Callable[[int, str], None]:
    """``cancel(stage, reason)``: cancel ``stage`` of SparkContext ``sc`` (and the jobs
    using it), Spark's error then ending ``Job N cancelled because <reason>``."""
    def cancel(stage: int, reason: str) -> None:
        try:
            sc._jsc.sc().cancelStage(stage, reason)
        except Exception as exc:  # a stopped context: Spark's own retries then end the stage
            log.debug("timely_spark rendezvous: cannot cancel stage %d (%s)", stage, exc)

    return cancel


#: Reported failures a re-run of the stage would repeat: a worker's own error (user code
#: raised), an output that does not fit its schema, a run past its ``timeout`` (each
#: re-run would take the timeout again).  The driver cancels the stage at the first one,
#: sparing Spark's three re-runs (seconds each; a partial one is refused) -- at a timeout,
#: once every task of the stage attempt reported its own (the earlier reports' answers
#: held until then, up to TIMEOUT_REPORTS_WAIT), so the error names what each worker was
#: doing.  Only a stage the job's tasks met in is cancelled.  Where it cannot
#: cancel (over Spark Connect), the tasks of the stage's re-runs are refused as they
#: register, so the user's code is not run again.  A peer's death (WorkerFailure) is not
#: one: Spark re-runs the stage after an executor loss.
REPEATED_FAILURES = (WorkerError, SchemaMismatch, RunTimeout)


#: The stage attempt of a task Spark's scheduler could not place (before any task it could).
_UNKNOWN = -1


class _Group:
    """The tasks of one attempt of one stage of one job that have registered so far."""

    def __init__(self, workers: int, deadline: float) -> None:
        self.workers = workers
        self.deadline = deadline
        self.entries: dict[int, tuple[object, list]] = {}    # index -> (registration, [host, port])
        self.answer: Optional[list] = None
        self.superseded: Optional[int] = None      # the stage attempt that replaced this one


class DriverRendezvous:
    """The driver's rendezvous service (one per driver process and host).

    ``open()`` a ticket per job and ``close()`` it when the job is done; a ticket
    opened with ``idle=`` (a ``transform``'s, whose result may run again later) also
    closes after that many seconds without use.  Failures tasks reported are claimed
    with :meth:`claim`.  ``attempt_of(stage, task)`` tells which attempt of a stage a
    task belongs to (:func:`scheduler_attempts`; None when unknown), so that only
    tasks of one stage attempt meet.  Threads are daemons: they end with the driver.
    """

    attempt_of: Callable[[int, int], Optional[int]] = staticmethod(lambda stage, task: None)

    def __init__(self, host: str, bind: Optional[str] = None) -> None:
        self.listener = bind_listener(bind or host, 0)
        self.listener.listen(RENDEZVOUS_PENDING)
        self.host = host
        self.port = self.listener.getsockname()[1]
        self._jobs: dict[bytes, _Job] = {}
        self._groups: dict[tuple[bytes, int, int], _Group] = {}
        self._attempts: dict[tuple[bytes, int], int] = {}        # (token, stage) -> newest attempt
        self._failures: deque[tuple[tuple[str, int, int], int, BaseException]] = deque(maxlen=REMEMBERED_FAILURES)
        self._ended: deque[tuple[str, int, int]] = deque(maxlen=REMEMBERED_FAILURES)   # stage attempts ended
        self._cond = threading.Condition()
        self._pending = PendingHandshakes(RENDEZVOUS_PENDING)      # not yet authenticated
        self._versions_logged: set[bytes] = set()        # greetings of another version already warned of
        self._versions_lock = threading.Lock()
        threading.Thread(target=self._accept_loop, name="timely-rendezvous", daemon=True).start()

    # ---- the driver's side -------------------------------------------------------
    def open(self, secret: bytes, wait: float = DEFAULT_CONNECT_TIMEOUT, idle: Optional[float] = None,
             on_stats: Optional[Callable[[dict], Any]] = None,
             cancel_stage: Optional[Callable[[int, str], None]] = None) -> Ticket:
        """A new job's ticket: tasks showing it (and proving ``secret``) may meet here,
        each group waiting at most ``wait`` seconds for its last task.  With ``idle``,
        the ticket closes by itself after that many seconds without a task using it.
        ``on_stats(report)`` is called with each timing report a task of the job sends
        (:func:`report_stats`; a dict of plain values).  ``cancel_stage(stage, reason)``
        (:func:`stage_canceller`) ends a stage whose task reported one of
        :data:`REPEATED_FAILURES`, at once: its reason names the report
        (:func:`failure_marker`), by which :mod:`.job_errors` still finds it."""
        token = os.urandom(TOKEN)
        job = os.urandom(8).hex()
        now = time.monotonic()
        with self._cond:
            for old in [t for t, j in self._jobs.items() if j.expired(now)]:
                self._forget(old)
            self._jobs[token] = _Job(secret, wait, job, idle, now, on_stats, cancel_stage)
        return Ticket(self.host, self.port, token, secret, wait, job)

    def close(self, ticket: Ticket) -> None:
        """Forget a finished job: its tasks can no longer meet or report here."""
        with self._cond:
            self._forget(ticket.token)

    def _forget(self, token: bytes) -> None:
        job = self._jobs.pop(token, None)
        for group in [k for k in self._groups if k[0] == token]:
            del self._groups[group]
        for stage in [k for k in self._attempts if k[0] == token]:
            del self._attempts[stage]
        if job is not None:
            kept = [f for f in self._failures if f[0][0] != job.id]
            self._failures.clear()
            self._failures.extend(kept)
        self._cond.notify_all()

    def _job(self, token: bytes) -> Optional[_Job]:
        with self._cond:
            job = self._jobs.get(token)
            if job is not None and job.expired(time.monotonic()):
                self._forget(token)
                return None
            return job

    def claim(self, job: str, stage: int, task: int) -> list[BaseException]:
        """Take (and forget) every error the tasks of ``stage`` reported for job ``job``
        (a ticket's ``job``), in the order they arrived -- those of every attempt of the
        stage, so that when Spark re-ran a failed barrier stage and shows a later
        attempt's error (a task re-run alone cannot meet its peers), the first attempt's
        cause comes first; [] if task ``task`` reported none."""
        with self._cond:
            if not any(key[:2] == (job, stage) and tid == task for key, tid, _ in self._failures):
                return []
            keys = {key for key, _, _ in self._failures if key[:2] == (job, stage)}
            taken = [exc for key, _, exc in self._failures if key in keys]
            kept = [f for f in self._failures if f[0] not in keys]
            self._failures.clear()
            self._failures.extend(kept)
            return taken

    # ---- serving ---------------------------------------------------------------
    def _accept_loop(self) -> None:
        backoff = RETRY_BACKOFF
        while True:
            try:
                sock, source = self.listener.accept()
            except OSError as exc:
                log.warning("timely_spark rendezvous: accept failed (%s); retrying", exc)
                time.sleep(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF)
                continue
            backoff = RETRY_BACKOFF
            self._pending.admit(sock, str(source[0]))
            threading.Thread(target=self._serve, args=(sock, f"{source[0]}:{source[1]}"),
                             name="timely-rendezvous-task", daemon=True).start()

    def _serve(self, sock: socket.socket, source: str) -> None:
        """Serve one connection, in a thread of its own.  Whatever answering its request
        raises on the driver -- any BaseException, SystemExit and KeyboardInterrupt included
        (a job's ``on_stats`` calling ``sys.exit``, say) -- is logged and answered
        ``{"driver_error": ...}``, so the task is told at once, and goes no further: in
        this thread ``threading`` would drop a SystemExit without a word, and nothing would
        act on a KeyboardInterrupt (Python delivers a real Ctrl-C to the main thread)."""
        try:
            deadline = time.monotonic() + RENDEZVOUS_AUTH_TIMEOUT
            hello = bytes(recv_exact(sock, len(MAGIC) + TOKEN + NONCE, deadline))
            magic = hello[:len(MAGIC)]
            if not magic.startswith(PREFIX) or mode(magic) is None or not mode(magic)[1]:   # type: ignore[index]
                self._other_version(magic[:len(PREFIX)], source)    # (logged before the task can know)
                sock.sendall(OTHER_VERSION + PREFIX)      # so that the task can say so (nothing secret)
                return
            token, task_nonce = hello[len(MAGIC):len(MAGIC) + TOKEN], hello[len(MAGIC) + TOKEN:]
            job = self._job(token)
            if job is None:
                sock.sendall(UNKNOWN)
                return
            nonce = os.urandom(NONCE)
            nonces = task_nonce + nonce
            sock.sendall(KNOWN + nonce + handshake_mac(job.secret, b"hello", token, nonces))
            up, down = message_keys(job.secret, token, nonces, magic)
            unreadable: Optional[str] = None
            try:
                request = _recv_message(sock, _opener(up), deadline, RENDEZVOUS_MAX_REQUEST, "request")
            except _TooLong as exc:
                log.debug("timely_spark rendezvous: refused %s's request of %d bytes (over RENDEZVOUS_MAX_REQUEST, "
                          "%d)", source, exc.size, exc.limit)
                return
            except _Unproven as exc:
                log.debug("timely_spark rendezvous: refused %s's request: %s (not the job's secret)", source, exc)
                return
            except _NotJSON as exc:       # authenticated (its tag checked), yet not JSON: told so below
                request, unreadable = None, str(exc)
            if not self._pending.authenticated(sock):
                return
            with self._cond:
                job.used = time.monotonic()
            wrong = unreadable if unreadable is not None else _malformed(request)
            if wrong is not None:       # authenticated, yet off the protocol: told so, not left to time out
                log.warning("timely_spark rendezvous: %s sent a malformed request: %s", source, wrong)
                answer: dict = {"malformed": wrong}
            else:
                try:
                    answer = self._answer(token, job, request)
                except BaseException as exc:     # the driver's own failure (an on_stats raising, say): told
                    log.warning("timely_spark rendezvous: answering %s's %r request failed:\n%s", source,
                                request["kind"], _without_secret("".join(traceback.format_exception(
                                    type(exc), exc, exc.__traceback__)), job.secret))
                    answer = {"driver_error": _driver_error(exc, job.secret)}
            sock.settimeout(HANDSHAKE_TIMEOUT)
            _send_message(sock, down, answer)
        except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
            log.debug("timely_spark rendezvous: the connection from %s ended (%s)", source, exc)
        finally:
            self._pending.authenticated(sock)
            sock.close()

    def _other_version(self, theirs: bytes, source: str) -> None:
        """Warn, once per greeting (of at most OTHER_VERSIONS_LOGGED; the greeting is not
        authenticated, so anyone can send one), that a task speaks another protocol version;
        a greeting not of this protocol's family (not starting ``TSRDV``) is logged at debug
        level only: a port scan, not a task."""
        if not theirs.startswith(FAMILY):
            log.debug("timely_spark rendezvous: %s greeted with %r, not a rendezvous greeting", source, theirs)
            return
        with self._versions_lock:
            if theirs in self._versions_logged or len(self._versions_logged) >= OTHER_VERSIONS_LOGGED:
                return
            self._versions_logged.add(theirs)
        log.warning("timely_spark rendezvous: %s greeted with %r, not this driver's %r: a task of another "
                    "timely_spark version (told so; the driver and the executors must run the same version)",
                    source, theirs, PREFIX)

    def _answer(self, token: bytes, job: _Job, request: dict) -> dict:
        if request["kind"] == "stats":
            report = request["report"]
            if job.on_stats is None or not isinstance(report, dict):
                return {"error": "this job takes no timing reports"}
            job.on_stats(report)            # plain data (JSON): nothing is unpickled
            return {"ok": True}
        stage, task = int(request["stage"]), int(request["task"])
        known = self.attempt_of(stage, task)
        with self._cond:             # Spark did not say: the stage's newest attempt (-1 if none is known yet)
            attempt = known if known is not None else self._attempts.get((token, stage), _UNKNOWN)
        if request["kind"] == "failed":
            failure = rebuild_error(request["error"])        # plain data: nothing is unpickled
            key = (job.id, stage, attempt)
            with self._cond:
                self._failures.append((key, task, failure))
                group = self._groups.get((token, stage, attempt))    # None: no task of this job met in it
                reported = sum(k == key for k, _, _ in self._failures)
            if group is None or not isinstance(failure, REPEATED_FAILURES):   # (no other job's stage is ended)
                return {"ok": True}
            if isinstance(failure, RunTimeout) and reported < group.workers and \
                    self._wait_ended(key, TIMEOUT_REPORTS_WAIT):
                return {"ok": True}            # the last worker's report ended it
            self._end_stage(job, key, task, failure)
            return {"ok": True}
        index, workers = int(request["index"]), int(request["workers"])
        if not 0 <= index < workers:
            return {"error": f"task index {index} is not in 0..{workers - 1}"}
        refused = self._failed_already(job.id, stage)
        if refused is not None:
            return {"error": refused}
        return self._meet(token, job.wait, stage, attempt, index, workers,
                          [str(request["host"]), int(request["port"])])

    def _end_stage(self, job: _Job, key: tuple[str, int, int], task: int, failure: BaseException) -> None:
        """Cancel the stage attempt ``key`` (where the driver can), whose task ``task``
        reported ``failure`` (one of :data:`REPEATED_FAILURES`), and answer the reports
        held by :meth:`_wait_ended`."""
        if job.cancel_stage is not None:
            job.cancel_stage(key[1], f"{_marker(job.id, key[1], task)} failed: {type(failure).__name__} "
                                     "(Spark does not re-run the stage: it would fail the same way)")
        with self._cond:
            if key not in self._ended:        # (each worker's error ends the attempt: remembered once)
                self._ended.append(key)
            self._cond.notify_all()

    def _wait_ended(self, key: tuple[str, int, int], seconds: float) -> bool:
        """Hold a task's report of a timeout up to ``seconds`` until the stage attempt
        ``key`` was ended (:meth:`_end_stage`, at its last worker's report); whether it
        was.  The task waits for its answer, so it does not end first: a failed task
        would fail the attempt, and Spark would start the next one before the cancel."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while key not in self._ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, POLL_INTERVAL))
        return True

    def _failed_already(self, job: str, stage: int) -> Optional[str]:
        """Why a task of ``stage`` may not meet: an attempt of the stage already failed
        with one of :data:`REPEATED_FAILURES`, so a re-run would fail the same way (its
        tasks are refused at once, and the user's code does not run again; where the
        driver cannot cancel the stage -- over Spark Connect -- Spark's re-runs of it then
        end in moments); None when it may."""
        with self._cond:
            for (failed_job, failed_stage, _), task, failure in self._failures:
                if failed_job == job and failed_stage == stage and isinstance(failure, REPEATED_FAILURES):
                    first = (str(failure).splitlines() or [""])[0]
                    return (f"stage {stage} is not run again: task attempt {task} failed with {type(failure).__name__}"
                            f" ({first}), and a re-run would fail the same way")
        return None

    def _meet(self, token: bytes, wait: float, stage: int, attempt: int, index: int, workers: int,
              address: list) -> dict:
        me = object()
        key = (token, stage, attempt)
        with self._cond:
            newest = self._attempts.get((token, stage), attempt)
            if newest == _UNKNOWN and attempt != _UNKNOWN:   # tasks Spark could not place join this attempt
                unknown = self._groups.pop((token, stage, _UNKNOWN), None)
                if unknown is not None and key not in self._groups:
                    self._groups[key] = unknown
                newest = attempt
            if attempt < newest:
                return {"error": f"stage {stage} attempt {attempt} was superseded by attempt {newest}"}
            if attempt > newest:       # Spark retried the stage: no task may meet an earlier attempt's
                for old in [k for k in self._groups if k[:2] == (token, stage) and k[2] < attempt]:
                    self._groups.pop(old).superseded = attempt
                self._cond.notify_all()
            self._attempts[(token, stage)] = attempt
            group = self._groups.get(key)
            if (group is not None and group.answer is not None and index in group.entries
                    and group.entries[index][1] == address):
                return {"addresses": group.answer, "attempt": attempt}     # its answer was lost: again
            if group is None or group.answer is not None or group.workers != workers:
                group = self._groups[key] = _Group(workers, time.monotonic() + wait)
            group.entries[index] = (me, address)     # a retried task replaces its earlier registration
            if len(group.entries) == workers:
                group.answer = [group.entries[i][1] for i in range(workers)]
                self._cond.notify_all()
            while group.answer is None:
                left = group.deadline - time.monotonic()
                if group.superseded is not None:
                    return {"error": f"stage {stage} attempt {attempt} was superseded by attempt "
                                     f"{group.superseded}"}
                if group.entries.get(index, (None,))[0] is not me:
                    return {"error": f"task {index} registered again (a newer connection replaced this one)"}
                if left <= 0 or token not in self._jobs:
                    if self._groups.get(key) is group:
                        del self._groups[key]
                    missing = sorted(set(range(workers)) - set(group.entries))
                    return {"error": f"only {len(group.entries)} of {workers} tasks reached the driver's "
                                     f"rendezvous within {wait:g} s (missing: {missing})"}
                self._cond.wait(min(left, POLL_INTERVAL))
            return {"addresses": group.answer, "attempt": attempt}     # kept (to answer again) until closed


#: The fields of each kind of request and the JSON type each must have (beyond "kind").
_FIELDS: dict[str, dict[str, type]] = {
    "meet": {"stage": int, "task": int, "index": int, "workers": int, "host": str, "port": int},
    "failed": {"stage": int, "task": int, "error": object},
    "stats": {"report": dict},
}


def _malformed(request: Any) -> Optional[str]:
    """What is wrong with an authenticated request (None: it has the protocol's shape):
    not an object, no or an unknown ``kind``, a field missing or of the wrong JSON type."""
    if type(request) is not dict:
        return f"a JSON {_json_kind(request)}, not an object"
    kind = request.get("kind")
    if type(kind) is not str or kind not in _FIELDS:
        return f"its 'kind' is {kind!r:.40}, not one of {sorted(_FIELDS)}"
    for name, wanted in _FIELDS[kind].items():
        if name not in request:
            return f"a {kind!r} request without {name!r}"
        value = request[name]
        if wanted is not object and type(value) is not wanted:      # (a boolean is not an integer here)
            return (f"a {kind!r} request whose {name!r} is a JSON {_json_kind(value)} ({value!r:.40}), "
                    f"not {_WANTED[wanted]}")
    return None


_WANTED = {int: "an integer", str: "a string", dict: "an object"}

#: The most characters of the driver's own error an answer carries to a task.
DRIVER_ERROR_CHARS = 1000


def _driver_error(exc: BaseException, secret: bytes) -> str:
    """What a task is told when answering its request raised ``exc`` on the driver: its
    type and message, cut to DRIVER_ERROR_CHARS, the job's ``secret`` in no form."""
    try:
        text = f"{type(exc).__qualname__}: {exc}"
    except Exception:            # its __str__ raised too
        text = f"{type(exc).__qualname__} (its message cannot be shown)"
    text = _without_secret(text, secret)
    return text if len(text) <= DRIVER_ERROR_CHARS else text[:DRIVER_ERROR_CHARS - 3] + "..."


def _without_secret(text: str, secret: bytes) -> str:
    """``text`` with the job's ``secret`` -- as its repr (whole or inside another's), hex,
    base64 or Latin-1 text -- replaced by ``<secret>``.  (Forms under 8 characters are
    left: a real secret is 32 random bytes, and short ones would garble the text.)"""
    forms = {repr(secret), repr(secret)[2:-1], secret.hex(), secret.hex().upper(), secret.decode("latin-1"),
             base64.b64encode(secret).decode(), base64.urlsafe_b64encode(secret).decode()}
    forms |= {f.rstrip("=") for f in forms}
    for form in sorted(forms, key=len, reverse=True):
        if len(form) >= 8:
            text = text.replace(form, "<secret>")
    return text


def _json_kind(value: Any) -> str:
    return "object" if type(value) is dict else _JSON_KINDS.get(type(value), type(value).__name__)


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
    Connect, ``sc`` is the session: its service runs in this client process, which the
    executors reach only when it runs on the Spark driver's host (a local Connect
    server, see :func:`.connect.client_on_driver_host`); otherwise None: ``allGather``.)"""
    if is_connect(sc):
        return _client_rendezvous(sc)
    conf = sc.getConf()
    mode = conf.get(RENDEZVOUS_CONF, "driver")
    if runtime_conf is not None:
        mode = runtime_conf.get(RENDEZVOUS_CONF, mode)
    if not _through_driver(mode):
        return None
    host = conf.get("spark.driver.host", None) or socket.gethostname()
    service = driver_rendezvous(host, conf.get("spark.driver.bindAddress", None))
    service.attempt_of = scheduler_attempts(sc)      # type: ignore[method-assign]
    return service


def _through_driver(mode: str) -> bool:
    if mode.strip().lower() == "allgather":
        return False
    if mode.strip().lower() != "driver":
        raise ValueError(f"{RENDEZVOUS_CONF} must be 'driver' or 'allGather', not {mode!r}")
    return True


def _client_rendezvous(spark: Any) -> Optional[DriverRendezvous]:
    host = conf_get(spark, "spark.driver.host")
    if (not _through_driver(conf_get(spark, RENDEZVOUS_CONF, "driver") or "driver")
            or not client_on_driver_host(host, endpoint_host(spark))):
        return None
    assert host is not None
    return driver_rendezvous(host, conf_get(spark, "spark.driver.bindAddress"))


def failure_marker(ticket: Ticket, stage: int, task: int) -> str:
    """The text by which a task's error in Spark's error names the report it sent
    (``task``: its ``taskAttemptId()``)."""
    return _marker(ticket.job, stage, task)


def _marker(job: str, stage: int, task: int) -> str:
    return f"timely_spark job {job}, stage {stage}, task {task}"


def reported_failure(text: str) -> Optional[BaseException]:
    """The most telling error the tasks of the stage attempt reported whose marker
    (:func:`failure_marker`) Spark's error ``text`` shows -- claimed, so returned once;
    None when the text names none, or that task reported nothing."""
    with _services_lock:
        services = list(_services.values())
    for match in _MARKER.finditer(text):
        job, stage, task = match.group(1), int(match.group(2)), int(match.group(3))
        for service in services:
            taken = service.claim(job, stage, task)
            if taken:
                return most_telling(taken)
    return None


# ---- the task's side ------------------------------------------------------------
#: What an authenticated answer off the protocol's shape most likely means.
_SAME_VERSION = "does the driver run the same timely_spark version as the executors?"
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _where(ticket: Ticket) -> str:
    return f"the driver's rendezvous at {ticket.host}:{ticket.port}"


class _Dropped(Exception):
    """The connection ended, or its wait passed, before the driver answered (busy, or
    the network); the message says which (``timed_out``: the wait passed)."""

    def __init__(self, what: str, timed_out: bool) -> None:
        super().__init__(what)
        self.timed_out = timed_out


def _exchange_once(ticket: Ticket, request: dict, deadline: float, where: str) -> dict:
    sock = socket.create_connection((ticket.host, ticket.port),      # OSError: not reached (yet)
                                    timeout=max(POLL_INTERVAL, min(HANDSHAKE_TIMEOUT, deadline - time.monotonic())))
    try:
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            nonce = os.urandom(NONCE)
            sock.sendall(MAGIC + ticket.token + nonce)
            hello_deadline = time.monotonic() + HANDSHAKE_TIMEOUT
            status = bytes(_read(sock, 1, hello_deadline, "its hello"))
            if status == UNKNOWN:
                raise RendezvousError(
                    f"{where} does not know this job: the job has ended, or its ticket closed (a transform result "
                    f"unused for {TICKET_IDLE_TIMEOUT:g} s: call transform again), or the driver restarted")
            if status == OTHER_VERSION:
                theirs = bytes(_read(sock, len(PREFIX), hello_deadline, "the name of its protocol"))
                raise RendezvousError(
                    f"{where} speaks another version of the rendezvous protocol ({theirs!r}; this task sends "
                    f"{MAGIC!r}): the driver and the executors must run the same timely_spark version")
            if status != KNOWN:
                raise RendezvousError(f"{where} does not speak the rendezvous protocol (answered {status!r})")
            hello = bytes(_read(sock, NONCE + 32, hello_deadline, "all of its hello"))
            nonces = nonce + hello[:NONCE]
            if not hmac.compare_digest(hello[NONCE:], handshake_mac(ticket.secret, b"hello", ticket.token, nonces)):
                raise RendezvousError(f"{where} did not prove it knows the job's secret")
            up, down = message_keys(ticket.secret, ticket.token, nonces, MAGIC)
            _send_message(sock, up, request)
            answer = _recv_message(sock, _opener(down), max(deadline, time.monotonic()) + HANDSHAKE_TIMEOUT,
                                   MAX_ANSWER, "answer")
    except _TooLong as exc:
        raise RendezvousError(f"{where} announced an answer of {exc.size} bytes, over this task's cap of "
                              f"{exc.limit} bytes (rendezvous.MAX_ANSWER); none of it was read") from None
    except _Unproven:
        raise RendezvousError(f"{where} answered without proving it knows the job's secret") from None
    except ValueError as exc:      # authenticated, yet not the protocol's JSON: another version of the package
        raise RendezvousError(f"{where} answered with a message that is not JSON ({exc}): {_SAME_VERSION}") from None
    except socket.timeout as exc:
        raise _Dropped(str(exc), True) from exc
    except EOFError as exc:
        raise _Dropped(str(exc), False) from exc
    except OSError as exc:
        raise _Dropped(f"the connection failed: {exc!r}", False) from exc
    if not isinstance(answer, dict):
        raise RendezvousError(f"{where} answered with a JSON {_JSON_KINDS.get(type(answer), type(answer).__name__)}, "
                              f"not an object: {_SAME_VERSION}")
    if "malformed" in answer:
        raise RendezvousError(f"{where} refused this task's request as malformed: {answer['malformed']} "
                              f"({_SAME_VERSION})")
    if "driver_error" in answer:
        raise RendezvousError(f"{where} failed while answering this task's {request.get('kind')!r} request: "
                              f"{answer['driver_error']!s:.{DRIVER_ERROR_CHARS}} (the driver's log has its traceback)")
    return answer


def _exchange(ticket: Ticket, request: dict, deadline: float) -> dict:
    """Send ``request`` to the driver and return its authenticated answer, connecting
    again (with backoff) while the driver cannot be reached or drops the connection
    before answering, until ``deadline``.  A request over the driver's
    RENDEZVOUS_MAX_REQUEST is refused here, before any connection: the driver would
    close each connection without a word."""
    where = _where(ticket)
    size = len(json.dumps(request).encode())
    if size > RENDEZVOUS_MAX_REQUEST:
        raise RendezvousError(f"this task's {request.get('kind')!r} request to {where} is {size} bytes, over the "
                              f"driver's cap of {RENDEZVOUS_MAX_REQUEST} bytes (RENDEZVOUS_MAX_REQUEST)")
    delay = RETRY_BACKOFF
    start = time.monotonic()
    dropped, unreachable, last = 0, None, None
    while True:
        try:
            return _exchange_once(ticket, request, deadline, where)
        except _Dropped as exc:
            dropped += 1
            last = exc
        except OSError as exc:
            unreachable = exc
        if time.monotonic() + delay > deadline:
            waited = time.monotonic() - start
            if last is not None:
                why = ("" if last.timed_out else
                       " (the driver was busy with other connections, or the network dropped them)")
                raise RendezvousError(
                    f"{where} did not answer this task: {dropped} connection(s) in {waited:.1f} s ended without "
                    f"an answer{why}; the last: {last}")
            raise RendezvousError(
                f"cannot reach {where} ({unreachable}): executors must be able to connect to the driver; "
                f"otherwise set {RENDEZVOUS_CONF}=allGather") from unreachable
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, MAX_RETRY_BACKOFF)


def meet(ticket: Ticket, stage: int, task: int, index: int, workers: int, host: str,
         port: int) -> tuple[list[tuple[str, int]], int]:
    """Register this task's listener; once all ``workers`` tasks of its stage attempt
    have registered, return every task's ``(host, port)`` in task order, and the stage
    attempt (-1 if the driver could not tell; bounded by the ticket's wait; RendezvousError or WorkerFailure otherwise).
    ``task`` is the task's ``taskAttemptId()``, by which the driver knows its stage
    attempt: a retried stage never sees an earlier attempt's addresses."""
    answer = _exchange(ticket, {"kind": "meet", "stage": stage, "task": task, "index": index,
                                "workers": workers, "host": host, "port": port}, time.monotonic() + ticket.wait)
    if "error" in answer:
        raise WorkerFailure(f"task {index}: {answer['error']}")
    return _meeting(answer, workers, _where(ticket))


def _meeting(answer: dict, workers: int, where: str) -> tuple[list[tuple[str, int]], int]:
    """The addresses and the stage attempt of the driver's answer to a meet request
    (from :func:`_exchange`: authenticated, a dict), checked: RendezvousError naming what
    is missing or of the wrong shape."""
    for key in ("addresses", "attempt"):
        if key not in answer:
            raise RendezvousError(f"{where} answered without {key!r} (its keys: {sorted(answer)[:8]}): {_SAME_VERSION}")
    addresses, attempt = answer["addresses"], answer["attempt"]
    if not (type(addresses) is list and len(addresses) == workers
            and all(type(a) is list and len(a) == 2 and type(a[0]) is str and type(a[1]) is int for a in addresses)):
        raise RendezvousError(f"{where} answered with 'addresses' that are not a list of {workers} [host, port] pairs "
                              f"({addresses!r:.60}): {_SAME_VERSION}")
    if type(attempt) is not int:
        raise RendezvousError(f"{where} answered with an 'attempt' that is not an int ({attempt!r:.40}): "
                              f"{_SAME_VERSION}")
    return [(h, p) for h, p in addresses], attempt


def report_failure(ticket: Ticket, stage: int, task: int, exc: BaseException) -> None:
    """Tell the driver how task ``task`` (its ``taskAttemptId()``) of ``stage`` failed,
    as plain data (:func:`~timely_spark.errors.describe_error`, cut to fit the driver's
    bound); best effort, bounded."""
    chars = RENDEZVOUS_MAX_REQUEST // 2
    while True:
        request = {"kind": "failed", "stage": stage, "task": task, "error": describe_error(exc, chars)}
        if len(json.dumps(request).encode()) <= RENDEZVOUS_MAX_REQUEST or chars < 16:
            break
        chars //= 2
    try:
        _exchange(ticket, request, time.monotonic() + HANDSHAKE_TIMEOUT)
    except Exception as problem:  # the task fails anyway; Spark's error carries the text
        log.warning("timely_spark: could not report a failure to the driver (%s)", problem)


def report_stats(ticket: Ticket, report: dict) -> None:
    """Send task ``report`` (its timings: :func:`.task_stats.task_report`, plain values)
    to the driver, whose ticket passes it to its ``on_stats``; best effort, bounded."""
    try:
        answer = _exchange(ticket, {"kind": "stats", "report": report}, time.monotonic() + HANDSHAKE_TIMEOUT)
    except Exception as problem:  # timings only: the task's work is done
        log.warning("timely_spark: could not send a task's timings to the driver (%s)", problem)
        return
    if "error" in answer:
        log.warning("timely_spark: the driver refused a task's timings (%s)", answer["error"])
