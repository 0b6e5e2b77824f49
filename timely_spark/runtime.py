"""Configuration and defaults shared by every way of running workers.

Local threads (:func:`timely_spark.execute`), local processes, processes started by
hand (:func:`timely_spark.execute_from_args`) and Spark barrier tasks
(:func:`timely_spark.spark.run`) all take their defaults from here, and validate
their parameters with :class:`Config`.  Each default is documented once, here.

This module imports nothing from the rest of the package but its errors, so every
layer may use it.
"""

from __future__ import annotations

import math
import os
import secrets
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .errors import ParameterError

__all__ = ["Config", "DEFAULT_PEER_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "HANDSHAKE_TIMEOUT", "MAX_HANDSHAKES",
           "MAX_FRAME", "STOP_GRACE", "HEARTBEATS_PER_PEER_TIMEOUT", "MIN_HEARTBEAT_INTERVAL",
           "RETRY_BACKOFF", "MAX_RETRY_BACKOFF", "LISTEN_BACKLOG", "THREAD_JOIN_WAIT", "CHILD_MESSAGE_WAIT",
           "CHILD_START_WAIT", "RUN_BACKSTOP_SLACK", "POLL_INTERVAL", "CHILD_EXIT_WAIT", "SECRET_ENV", "DEFAULT_PORT",
           "RENDEZVOUS_AUTH_TIMEOUT", "RENDEZVOUS_PENDING", "RENDEZVOUS_MAX_REQUEST", "TICKET_IDLE_TIMEOUT",
           "OUTPUT_BATCHES_IN_FLIGHT",
           "MAX_FRAMES_PER_KEY", "ENCRYPTION_ENV", "SEND_BATCH_BYTES", "encryption_enabled",
           "MISSING_WORKER_WAIT", "LOG_INDEX_CACHE_FILES",
           "new_secret", "check_timeout", "check_count", "check_port", "check_positive",
           "check_fraction"]

#: Seconds a peer process may stay silent (not even a heartbeat) before the run fails
#: with :class:`~timely_spark.errors.WorkerFailure` naming it (``peer_timeout=``).
#: Heartbeats go out every quarter of it.
DEFAULT_PEER_TIMEOUT = 30.0

#: Seconds to wait at the start of a run for every peer process to connect.
DEFAULT_CONNECT_TIMEOUT = 60.0

#: Seconds one connection may take for the whole authentication handshake.
HANDSHAKE_TIMEOUT = 10.0

#: Connections that may be in their handshake at once; more are refused at once.
MAX_HANDSHAKES = 16

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

#: The largest frame (bytes) the mesh sends or accepts; larger messages go as several
#: frames.  A peer announcing more is failed before anything is allocated.
MAX_FRAME = 256 * 1024 * 1024

#: Seconds the other workers get to notice a failure (or a run deadline) and stop,
#: before their processes are ended.
STOP_GRACE = 3.0

#: Heartbeats a process sends each peer per ``peer_timeout`` (so one lost or late
#: heartbeat never fails a run) ...
HEARTBEATS_PER_PEER_TIMEOUT = 4

#: ... but never more often than every this many seconds.
MIN_HEARTBEAT_INTERVAL = 0.05

#: Seconds of the first wait before retrying a refused connection or a failed
#: ``accept()`` (too many open files, aborted connection); it doubles on each retry ...
RETRY_BACKOFF = 0.01

#: ... up to this many seconds.
MAX_RETRY_BACKOFF = 1.0

#: Connections the kernel queues for a mesh listener before ``accept()``.
LISTEN_BACKLOG = 64

#: Seconds granted to each of the mesh's own threads (readers, acceptor, heartbeat)
#: to end when the mesh shuts down; they are daemon threads, so none can keep a
#: process alive.
THREAD_JOIN_WAIT = 5.0

#: Seconds the starting process waits for the rest of a message a worker process
#: has begun to send (its results or its error).
CHILD_MESSAGE_WAIT = 60.0

#: Seconds a worker process waits for its configuration from the starting process.
CHILD_START_WAIT = 120.0

#: Seconds the starting process adds to ``timeout`` + twice :data:`STOP_GRACE` before it
#: kills worker processes that have not reported their own deadline (a backstop: they
#: normally end themselves at ``timeout`` + :data:`STOP_GRACE`).
RUN_BACKSTOP_SLACK = 5.0

#: Seconds between checks while waiting on something that cannot wake us (a child
#: process, a listener, a peer that is not up yet).
POLL_INTERVAL = 0.2

PEER_ERROR_GRACE = 1.0
"""Seconds a worker that cannot send to a peer waits for that peer's own error (sent
before it closed) to arrive, so that the run reports the cause, not the broken pipe."""

#: Seconds to wait for a worker process to exit after the run, before killing it.
CHILD_EXIT_WAIT = 10.0

#: Seconds a stream over an event log (``readStream.format("timely")`` with a schema)
#: waits for a capturing worker that has not made its ``worker=<i>`` directory yet
#: (its writer may start after the query; until it does, it holds the frontier back)
#: before the query fails with an ``EventLogError`` naming the worker.
MISSING_WORKER_WAIT = 600.0

#: Part files whose footer and summary (times, row counts, progress) one process keeps,
#: so that later reads of a log open only its new files (the least recently used are
#: forgotten first).
LOG_INDEX_CACHE_FILES = 200_000

#: The environment variable holding the shared secret of processes started by hand.
SECRET_ENV = "TIMELY_SPARK_SECRET"

#: Process ``p`` started by hand without a hostfile listens on ``127.0.0.1:DEFAULT_PORT + p``.
DEFAULT_PORT = 2101

#: Batches of a ``ts.spark.transform`` worker's output that may wait for its Spark task
#: to take them; the worker waits while this many do (so memory holds only these).
OUTPUT_BATCHES_IN_FLIGHT = 4

#: ``group_by_window``: a pane of open windows combines its record batches into one once
#: it holds this many (Arrow aggregates a few large chunks much faster than many small).
WINDOW_PANE_BATCHES = 32

# ---- encrypted wires (the mesh, TCP event streams, the driver rendezvous) ------------------------------------------

#: Frames one key may seal: each direction of a connection numbers its frames from 0,
#: and the number is the AEAD nonce (64 bits of a 96-bit nonce), so a nonce is never
#: reused.  A connection that reaches this many frames in a direction closes (the run
#: fails naming the peer) rather than wrap.  2**48 frames take nine years at a million
#: frames a second; tests lower it (``frame_limit=``) to see the closing.
MAX_FRAMES_PER_KEY = 2 ** 48

#: Environment variable that turns the encryption of the wires off for a trusted
#: network: ``TIMELY_SPARK_ENCRYPTION=off``.  Frames are then still authenticated (an
#: AEAD tag over header and payload, per-connection keys, numbered): only
#: confidentiality is given up.  Every process of a run must agree (a peer that does
#: not is refused in the handshake, saying so).  Any other value, or unset: encrypted.
ENCRYPTION_ENV = "TIMELY_SPARK_ENCRYPTION"

#: Frames a worker writes in one step are gathered (one system call, one wake-up of the
#: peer) until they hold this many bytes; larger messages go out at once.
SEND_BATCH_BYTES = 256 * 1024


def new_secret() -> bytes:
    """A fresh per-run secret (32 random bytes).

    >>> len(new_secret()), new_secret() != new_secret()
    (32, True)
    """
    return secrets.token_bytes(32)


def check_positive(name: str, value: Any, allow_none: bool = True, unit: str = "") -> Optional[float]:
    """``value`` as a float if it is a positive, finite number (or None when allowed); a
    :class:`~timely_spark.errors.ParameterError` naming the parameter otherwise.

    >>> check_positive("tolerance", 1e-9), check_positive("tolerance", None)
    (1e-09, None)
    >>> check_positive("tolerance", "0.1")
    Traceback (most recent call last):
    ...
    timely_spark.errors.ParameterError: tolerance must be a positive, finite number or None, got '0.1'
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ParameterError(f"{name} must be a positive, finite number{unit}{' or None' if allow_none else ''}, "
                             f"got {value!r}", name)
    return float(value)


def check_timeout(name: str, value: Any, allow_none: bool = True) -> Optional[float]:
    """``value`` as a float if it is a positive number of seconds (or None when allowed);
    a :class:`~timely_spark.errors.ParameterError` naming the parameter otherwise.

    >>> check_timeout("timeout", 5), check_timeout("timeout", None)
    (5.0, None)
    >>> check_timeout("peer_timeout", -1)
    Traceback (most recent call last):
    ...
    timely_spark.errors.ParameterError: peer_timeout must be a positive, finite number of seconds or None, got -1
    """
    return check_positive(name, value, allow_none, " of seconds")


def check_count(name: str, value: Any) -> int:
    """``value`` if it is an int >= 1 (not a bool, not a string); a
    :class:`~timely_spark.errors.ParameterError` naming the parameter otherwise.

    >>> check_count("processes", "2")
    Traceback (most recent call last):
    ...
    timely_spark.errors.ParameterError: processes must be a whole number >= 1, got '2'
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(f"{name} must be a whole number >= 1, got {value!r}", name)
    return value


def check_fraction(name: str, value: Any) -> float:
    """``value`` as a float if it is a number in [0, 1]; a ParameterError naming the parameter otherwise.

    >>> check_fraction("damping", 0.85)
    0.85
    >>> check_fraction("damping", "0.5")
    Traceback (most recent call last):
    ...
    timely_spark.errors.ParameterError: damping must be a number in [0, 1], got '0.5'
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ParameterError(f"{name} must be a number in [0, 1], got {value!r}", name)
    return float(value)


def check_port(where: str, port: Any) -> int:
    """``port`` if it is a TCP port number (0..65535); a ValueError naming ``where`` otherwise."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"{where}: port must be in 0..65535, got {port!r}")
    return port


# ---- snapshots and recovery (issue 24) -------------------------------------------------------
#: Committed snapshots a checkpoint directory keeps (``snapshots_kept=``): older ones are
#: deleted once a newer one is committed.  More than one, so that a damaged newest
#: snapshot can fall back to the one before.
SNAPSHOTS_KEPT = 3

#: Seconds a worker waits for a snapshot's time to complete before it warns, naming the
#: operator that holds an earlier time (an operator that keeps a capability at a time
#: before ``t`` until its inputs pass ``t`` keeps every snapshot from completing).
SNAPSHOT_STALL = 60.0
__all__ += ["SNAPSHOTS_KEPT", "SNAPSHOT_STALL", "check_checkpointing"]


def check_checkpointing(config: Any) -> None:
    """Validate ``config.checkpoint``, ``config.snapshot_every`` and ``config.snapshots_kept``
    (normalizing them); a ParameterError naming the parameter otherwise.

    >>> check_checkpointing(Config(checkpoint=1))
    Traceback (most recent call last):
    ...
    timely_spark.errors.ParameterError: checkpoint must be a directory path (str or os.PathLike) or None, got 1
    """
    if config.checkpoint is not None:
        if isinstance(config.checkpoint, bytes) or not isinstance(config.checkpoint, (str, os.PathLike)) \
                or not os.fspath(config.checkpoint):
            raise ParameterError(f"checkpoint must be a directory path (str or os.PathLike) or None, "
                                 f"got {config.checkpoint!r}", "checkpoint")
        config.checkpoint = os.fspath(config.checkpoint)
    config.snapshot_every = check_timeout("snapshot_every", config.snapshot_every)
    if config.snapshot_every is not None and config.checkpoint is None:
        raise ParameterError("snapshot_every needs a checkpoint directory (checkpoint=DIR)", "snapshot_every")
    config.snapshots_kept = check_count("snapshots_kept", config.snapshots_kept)


@dataclass
class Config:
    """How a run is laid out, validated by :meth:`check`.

    ``threads`` workers per process, ``processes`` processes; ``process`` is this
    process's index when processes are started by hand (None: start them all here);
    ``addresses`` one ``(host, port)`` per process (from a hostfile);
    ``timeout`` bounds the whole run (None: no bound); ``peer_timeout`` is how long a
    peer may stay silent; ``connect_timeout`` how long to wait for all peers at the start.
    ``checkpoint`` is a directory for snapshots of operator state (None: none are
    taken); ``snapshot_every`` the seconds between snapshots (None: one only when the
    inputs close); ``snapshots_kept`` how many committed snapshots are kept;
    ``checkpoint_key`` the secret its files are authenticated under (None: filled where
    the run starts, see :mod:`timely_spark.state.key`).

    >>> Config(threads=2, processes=3).check().threads
    2
    >>> Config(threads=0).check()
    Traceback (most recent call last):
    ...
    timely_spark.errors.ParameterError: threads must be a whole number >= 1, got 0
    """

    threads: int = 1
    processes: int = 1
    process: Optional[int] = None
    addresses: list[tuple[str, int]] = field(default_factory=list)
    timeout: Optional[float] = None
    peer_timeout: float = DEFAULT_PEER_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    checkpoint: Optional[str] = None
    snapshot_every: Optional[float] = None
    snapshots_kept: int = SNAPSHOTS_KEPT
    checkpoint_key: Union[bytes, str, None] = field(default=None, repr=False)

    def check(self) -> "Config":
        """Raise a ValueError naming the first bad parameter; return the config."""
        check_count("threads", self.threads)
        check_count("processes", self.processes)
        self.timeout = check_timeout("timeout", self.timeout)
        self.peer_timeout = check_timeout("peer_timeout", self.peer_timeout, allow_none=False)  # type: ignore
        self.connect_timeout = check_timeout("connect_timeout", self.connect_timeout, allow_none=False)  # type: ignore
        if self.process is not None and (isinstance(self.process, bool) or not isinstance(self.process, int)
                                         or not 0 <= self.process < self.processes):
            raise ValueError(f"process index {self.process!r} is not in 0..{self.processes - 1}")
        if self.addresses and len(self.addresses) < self.processes:
            raise ValueError(f"{self.processes} processes but only {len(self.addresses)} addresses")
        for i, (host, port) in enumerate(self.addresses):
            check_port(f"address of process {i} ({host})", port)
        check_checkpointing(self)
        return self


# ---- changelogs (issue 22) ------------------------------------------------------------------
#: Default of the ``"timely"`` data source's ``changelog`` option: ``"changes"`` reads a
#: log's change rows as they are (with ``diff`` when the log is a changelog);
#: ``"consolidate"`` reads the collection they denote as of the log's frontier.
CHANGELOG_READ = "changes"

#: The values the ``changelog`` read option takes.
CHANGELOG_READS = ("changes", "consolidate")

__all__ += ["CHANGELOG_READ", "CHANGELOG_READS"]

# incremental graph algorithms (ts.graph.pagerank_stream)
#: pagerank_stream's default tolerance: a vertex whose rank would move by more propagates.
PAGERANK_TOLERANCE = 1e-9

# ---- following live event logs (ts.capture.follow) -------------------------------------
#: Seconds between a follower's looks at a live event log (a directory listing; new
#: files are read once): a time completed in the log reaches the stream within about
#: this long.  Between looks the worker sleeps; it never spins.
FOLLOW_POLL_INTERVAL = 0.1
__all__ += ["FOLLOW_POLL_INTERVAL"]

# ---- compaction of event logs (ts.capture.compact) ---------------------------------------
#: Seconds the files a compacted file replaces are kept after it appears, so that reads
#: planned on them (a Spark job's tasks, a reader in the middle of them) can finish.
COMPACT_GRACE = 60.0

#: Files of a worker (all at complete times) that make a compaction worth doing.
COMPACT_MIN_FILES = 16
__all__ += ["COMPACT_GRACE", "COMPACT_MIN_FILES"]

# ---- capturing writers that have no record yet (ParquetEventWriter) ----------------------
#: Seconds between a capturing writer's looks for its log's record columns (in another
#: worker's file) while it holds progress back because it has not written a record yet.
CAPTURE_COLUMNS_RETRY = 0.5
__all__ += ["CAPTURE_COLUMNS_RETRY"]

def encryption_enabled() -> bool:
    """Whether this process encrypts its wires: True unless ``$TIMELY_SPARK_ENCRYPTION``
    is ``off`` (or ``0``, ``false``, ``no``); authentication stays either way.

    >>> import os
    >>> os.environ.pop(ENCRYPTION_ENV, None) and None
    >>> encryption_enabled()
    True
    """
    return os.environ.get(ENCRYPTION_ENV, "on").strip().lower() not in ("off", "0", "false", "no")

# ---- review of the encrypted wires (issue 26) ---------------------------------------------
#: Bytes an event frame over a socket may announce (``EventWriter``/``EventReader``): the
#: reader refuses a larger announcement before buffering any of it (it comes before the
#: tag can be checked), and the writer refuses to send such an event.
MAX_EVENT_FRAME = 1 << 30
__all__ += ["MAX_EVENT_FRAME"]

# ---- ts.spark.transform's input (issue 25: Spark's fixed and per-edge costs) -----------------
#: Bytes of Spark's Arrow input batches (10,000 rows each by default) a transform task
#: joins into one before handing it to its worker: a step per few megabytes, not per
#: small batch.
INPUT_CHUNK_BYTES = 16 << 20

#: Files a plain Parquet scan may have for ``ts.spark.transform`` to read them in its
#: barrier tasks (their footers are read on the driver to split the row groups among
#: the workers); a scan of more files goes through Spark and a shuffle as before.
DIRECT_READ_MAX_FILES = 1000
__all__ += ["INPUT_CHUNK_BYTES", "DIRECT_READ_MAX_FILES"]

#: Bytes of a ``ts.spark.transform`` worker's output rows packed into one row of arrays
#: for the shuffle after the barrier stage (Spark's cost there is per row: see
#: :mod:`timely_spark.spark.packed_rows`).
PACKED_ROW_BYTES = 256 * 1024
__all__ += ["PACKED_ROW_BYTES"]
