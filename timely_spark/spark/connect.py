"""Spark Connect sessions: what ``ts.spark`` asks of a session, through what Connect offers.

A Spark Connect session (``pyspark.sql.connect``, ``SparkSession.builder.remote(...)``)
has no SparkContext, no JVM gateway and no RDDs: the client sends plans to a server
that runs them.  What ``ts.spark`` needs of a session comes from what Connect has:

* the task slots from the session's configuration (:func:`master_slots`): ``spark.master``
  (``local[N]``, ``local-cluster[N,C,M]``), ``spark.executor.instances``,
  ``spark.executor.cores``, ``spark.cores.max`` and ``spark.task.cpus``.  Connect cannot
  tell how many executors have registered, nor which barrier stages run now: where the
  configuration does not say (``local[*]`` on a server elsewhere, a cluster manager
  without ``spark.executor.instances`` or ``spark.cores.max``), Spark checks the slots
  itself when the job starts;
* cancellation through job tags (``spark.addTag``, ``spark.interruptTag``);
* a barrier stage over a DataFrame of one row per task
  (``mapInArrow(..., barrier=True)``) instead of an RDD;
* the driver's rendezvous (:mod:`.rendezvous`) lives in this Python process, which over
  Connect is the client, not the Spark driver: executors can reach it when the Spark
  driver's host is this machine (:func:`client_on_driver_host`: a local Connect
  server -- a loopback ``spark.driver.host`` names the Connect server's machine, which
  is this one only when the client dialled a loopback or own address); otherwise tasks
  meet through ``BarrierTaskContext.allGather``;
* errors: the Connect client's exceptions are translated like classic ones
  (:func:`install_error_translation`).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from dataclasses import dataclass
from typing import Any, Callable, Optional

__all__ = ["ConnectSession", "connect_session", "is_connect", "conf_get", "master_slots", "connect_slots",
           "client_on_driver_host", "endpoint_host", "install_error_translation"]

log = logging.getLogger(__name__)

_LOCAL = re.compile(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?$")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]$")


@dataclass(frozen=True)
class ConnectSession:
    """A Spark Connect session with its settings, read once (one round trip to the
    server instead of one a setting); anything else is asked of the session itself."""

    spark: Any
    settings: dict

    def __getattr__(self, name: str) -> Any:
        return getattr(self.spark, name)


def connect_session(spark: Any) -> ConnectSession:
    """Connect session ``spark`` and its settings now (those set in the session or the
    Spark application: ``spark.conf.getAll``)."""
    return ConnectSession(spark, {str(k): str(v) for k, v in spark.conf.getAll.items()})


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` (a session, or a DataFrame's session) is a Spark Connect session."""
    return isinstance(spark, ConnectSession) or type(spark).__module__.startswith("pyspark.sql.connect")


def conf_get(spark: Any, key: str, default: Optional[str] = None) -> Optional[str]:
    """Setting ``key`` of session ``spark`` (runtime, else the Spark application's), or ``default``."""
    if isinstance(spark, ConnectSession):
        return spark.settings.get(key, default)
    try:
        value = spark.conf.get(key, default)
    except Exception:  # a setting the server will not tell
        return default
    return default if value is None else str(value)


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(str(value).strip()) if value is not None else None
    except ValueError:
        return None


def master_slots(master: str, conf: Callable[[str], Optional[str]]) -> tuple[Optional[int], str]:
    """``(slots, why)``: how many tasks can run at once by the configuration alone
    (``conf(key)`` reads a setting), or ``(None, why it cannot tell)``.

    >>> master_slots("local[3]", lambda key: None)
    (3, 'local[3]')
    >>> master_slots("local-cluster[2,2,1024]", {"spark.task.cpus": "2"}.get)
    (2, 'local-cluster[2,2,1024]')
    >>> master_slots("spark://127.0.0.1:7077", {"spark.cores.max": "4"}.get)
    (4, 'spark://127.0.0.1:7077 with spark.cores.max=4')
    >>> master_slots("yarn", lambda key: None)[0] is None
    True
    """
    cpus = max(1, _int(conf("spark.task.cpus")) or 1)
    master = master.strip()
    local = _LOCAL.match(master)
    if local:
        n = local.group(1) or "1"
        if n == "*":
            return None, f"{master} counts the cores of the Spark driver's machine, which a Connect client cannot see"
        return int(n) // cpus, master
    cluster = _LOCAL_CLUSTER.match(master)
    if cluster:
        return int(cluster.group(1)) * int(cluster.group(2)) // cpus, master
    instances, cores = _int(conf("spark.executor.instances")), _int(conf("spark.executor.cores"))
    if instances is not None and cores is not None:
        return instances * cores // cpus, f"{master} with {instances} executors of {cores} cores"
    cores_max = _int(conf("spark.cores.max"))
    if cores_max is not None:
        return cores_max // cpus, f"{master} with spark.cores.max={cores_max}"
    return None, (f"{master}: the configuration sets neither spark.executor.instances and spark.executor.cores nor "
                  "spark.cores.max, and a Connect client cannot see the executors that registered")


def connect_slots(spark: Any) -> tuple[Optional[int], str]:
    """:func:`master_slots` of Connect session ``spark``."""
    return master_slots(conf_get(spark, "spark.master", "?") or "?", lambda key: conf_get(spark, key))


def endpoint_host(spark: Any) -> Optional[str]:
    """The host the Connect client of session ``spark`` dials (``sc://HOST:PORT``; no round
    trip), or None if it does not say."""
    try:
        return str(spark.client.host)
    except Exception:       # a client without the property
        return None


def _own_addresses() -> set[str]:
    names = {socket.gethostname(), socket.getfqdn()}
    found = set()
    for name in names:
        try:
            found |= {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
        except OSError:
            continue
    return found | names


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def client_on_driver_host(host: Optional[str], endpoint: Optional[str] = None) -> bool:
    """Whether the Spark driver's ``host`` (``spark.driver.host``) is this machine, so
    that executors, which reach the driver's host, reach this Python process too.
    A loopback ``host`` is the machine of the Connect server (``endpoint``: the host the
    client dials, None when unknown), so it is this one only when ``endpoint`` is.

    >>> client_on_driver_host("127.0.0.1"), client_on_driver_host("localhost", endpoint="127.0.0.1")
    (True, True)
    >>> client_on_driver_host("127.0.0.1", endpoint="203.0.113.7")    # a local[N] server on another machine
    False
    """
    if not host:
        return False
    if _loopback(host):
        return endpoint is None or _loopback(endpoint) or endpoint in _own_addresses()
    return host in _own_addresses()


def install_error_translation(translate: Callable[[BaseException], Optional[BaseException]]) -> None:
    """Make the Connect client raise ``translate(error)`` instead of its ``error`` when
    that is not None (idempotent; nothing without the Connect client installed).  The
    client builds its exceptions with ``convert_exception``, wrapped here."""
    try:
        from pyspark.sql.connect.client import core
    except ImportError:      # no Spark Connect client here (pip install 'timely_spark[connect]')
        return
    current = core.convert_exception
    if getattr(current, "timely_spark_translating", False):
        return

    def convert_exception(*args: Any, **kwargs: Any) -> BaseException:
        error = current(*args, **kwargs)
        return translate(error) or error

    convert_exception.timely_spark_translating = True  # type: ignore[attr-defined]
    core.convert_exception = convert_exception  # type: ignore[assignment]
