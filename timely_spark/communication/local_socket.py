"""A second way to a mesh listener on the same host: a Unix domain socket beside its TCP port.

Loopback TCP costs the kernel about twice what a Unix stream socket does for a small frame
(each ``sendmsg`` and ``recv`` runs the TCP stack on both ends), and an epoch of small
messages sends several.  So a mesh listener at ``host:port`` also listens on the Linux
*abstract* Unix socket named after that address (:func:`local_name`), and a process whose
peer has the same host as itself connects there first.  An abstract name belongs to the
network namespace, like the loopback TCP port it is named after: a process reaches it
exactly when it could reach that port.

Nothing else changes: the connection runs the same authentication handshake as over TCP
(a process that squats the name cannot prove the run's secret), its frames are sealed
the same way, and a connection that cannot be made or authenticated there is made over
TCP instead.  Elsewhere than Linux (no abstract names) there is no second way: TCP only.

>>> local_name("127.0.0.1", 5000) in (None, b"\\0timely_spark mesh 127.0.0.1:5000")
True
"""

from __future__ import annotations

import socket
import sys
from typing import Callable, Optional

__all__ = ["local_name", "bind_local", "connect_local"]

#: Connections the kernel queues for a local listener before ``accept()``.
LOCAL_BACKLOG = 64


def local_name(host: str, port: int) -> Optional[bytes]:
    """The abstract socket name of the mesh listener at ``host:port``, or None where
    abstract names do not exist (not Linux)."""
    if not sys.platform.startswith("linux") or not hasattr(socket, "AF_UNIX"):
        return None
    return f"\0timely_spark mesh {host}:{port}".encode()


def bind_local(host: str, port: int) -> Optional[socket.socket]:
    """A listening Unix socket beside the mesh listener at ``host:port``, or None if it
    cannot be had (not Linux, or the name is taken: then peers use TCP)."""
    def listen(sock: socket.socket, name: bytes) -> None:
        sock.bind(name)
        sock.listen(LOCAL_BACKLOG)

    return _local(host, port, listen)


def connect_local(host: str, port: int, timeout: float) -> Optional[socket.socket]:
    """A connection to the local socket of the mesh listener at ``host:port``, or None if
    there is none in this network namespace (the caller then uses TCP)."""
    def connect(sock: socket.socket, name: bytes) -> None:
        sock.settimeout(timeout)
        sock.connect(name)

    return _local(host, port, connect)


def _local(host: str, port: int, use: Callable[[socket.socket, bytes], None]) -> Optional[socket.socket]:
    """A Unix socket that ``use`` bound or connected to the local name of ``host:port``, or None."""
    name = local_name(host, port)
    if name is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        use(sock, name)
    except OSError:
        sock.close()
        return None
    return sock
