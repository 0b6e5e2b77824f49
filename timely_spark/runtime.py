"""Configuration and defaults shared by every way of running workers.

Local threads (:func:`timely_spark.execute`), local processes, processes started by
hand (:func:`timely_spark.execute_from_args`) and Spark barrier tasks
(:func:`timely_spark.spark.run`) all take their defaults from here, and validate
their parameters with :class:`Config`.  Each default is documented once, here.
Constants of one subsystem (the mesh, the rendezvous, event logs, ...) live beside
its code, not here.

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

__all__ = ["Config", "DEFAULT_PEER_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "STOP_GRACE", "POLL_INTERVAL",
           "SECRET_ENV", "SNAPSHOTS_KEPT", "new_secret", "check_checkpointing", "check_count", "check_fraction",
           "check_port", "check_positive", "check_timeout"]

#: Seconds a peer process may stay silent (not even a heartbeat) before the run fails
#: with :class:`~timely_spark.errors.WorkerFailure` naming it (``peer_timeout=``).
#: Heartbeats go out every quarter of it.
DEFAULT_PEER_TIMEOUT = 30.0

#: Seconds to wait at the start of a run for every peer process to connect.
DEFAULT_CONNECT_TIMEOUT = 60.0

#: Seconds the other workers get to notice a failure (or a run deadline) and stop,
#: before their processes are ended.
STOP_GRACE = 3.0

#: Seconds between checks while waiting on something that cannot wake us (a child
#: process, a listener, a peer that is not up yet).
POLL_INTERVAL = 0.2

#: The environment variable holding the shared secret of processes started by hand.
SECRET_ENV = "TIMELY_SPARK_SECRET"


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

#: Committed snapshots a checkpoint directory keeps (``snapshots_kept=``): older ones are
#: deleted once a newer one is committed.  More than one, so that a damaged newest
#: snapshot can fall back to the one before.
SNAPSHOTS_KEPT = 3


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
