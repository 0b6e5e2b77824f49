"""A second way to a mesh listener on the same host: a Unix domain socket beside its TCP port.

Loopback TCP costs the kernel about twice what a Unix stream socket does for a small frame
(each ``sendmsg`` and ``recv`` runs the TCP stack on both ends), and an epoch of small
messages sends several.  So a mesh listener at ``host:port`` also listens on a Linux
*abstract* Unix socket, and a process whose peer has the same host as itself connects
there first.  An abstract name belongs to the network namespace, like the loopback TCP
port: a process reaches it exactly when it could reach that port.

The name is derived from the run's secret and the address (:func:`local_name`), so no
one without the secret can know it before the mesh binds it (and once bound it cannot be
taken): nobody can sit on it first, to stall the run or relay its connections.  Each end
also checks that the other runs as the same user (``SO_PEERCRED``).  Nothing else
changes: the connection runs the same authentication handshake as over TCP, its frames
are sealed the same way, and a connection that cannot be made or authenticated there is
made over TCP instead.  Elsewhere than Linux (no abstract names) there is no second way:
TCP only.

>>> name = local_name(b"secret", "127.0.0.1", 5000)
>>> name is None or (name.startswith(b"\\0timely_spark mesh ") and b"5000" not in name)
True
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct
import sys
from typing import Callable, Optional

__all__ = ["local_name", "bind_local", "connect_local", "same_user"]

#: Connections the kernel queues for a local listener before ``accept()``.
LOCAL_BACKLOG = 64


def local_name(secret: bytes, host: str, port: int) -> Optional[bytes]:
    """The abstract socket name of the mesh listener at ``host:port`` of the run whose
    secret is ``secret`` (a keyed hash of the address: unknown to anyone without the
    secret, and of a fixed length whatever the host), or None where abstract names do not
    exist (not Linux)."""
    if not sys.platform.startswith("linux") or not hasattr(socket, "AF_UNIX"):
        return None
    tag = hmac.new(secret, f"local socket {host}:{port}".encode(), hashlib.sha256).hexdigest()[:32]
    return b"\0timely_spark mesh " + tag.encode()


def bind_local(secret: bytes, host: str, port: int) -> Optional[socket.socket]:
    """A listening Unix socket beside the mesh listener at ``host:port``, or None if it
    cannot be had (not Linux, or the name is taken: then peers use TCP)."""
    def listen(sock: socket.socket, name: bytes) -> None:
        sock.bind(name)
        sock.listen(LOCAL_BACKLOG)

    return _local(secret, host, port, listen)


def connect_local(secret: bytes, host: str, port: int, timeout: float) -> Optional[socket.socket]:
    """A connection to the local socket of the mesh listener at ``host:port``, or None if
    there is none in this network namespace, or it is held by another user (the caller
    then uses TCP)."""
    def connect(sock: socket.socket, name: bytes) -> None:
        sock.settimeout(timeout)
        sock.connect(name)
        if not same_user(sock):
            raise OSError("the local socket is held by another user")

    return _local(secret, host, port, connect)


def same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of the Unix socket ``sock`` runs as this
    process's user (``SO_PEERCRED``; True where the kernel cannot say)."""
    peercred = getattr(socket, "SO_PEERCRED", None)
    if peercred is None:
        return True
    _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, peercred, struct.calcsize("3i")))
    return uid == os.getuid()


def _local(secret: bytes, host: str, port: int,
           use: Callable[[socket.socket, bytes], None]) -> Optional[socket.socket]:
    """A Unix socket that ``use`` bound or connected to the local name of ``host:port``, or None."""
    name = local_name(secret, host, port)
    if name is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        use(sock, name)
    except OSError:
        sock.close()
        return None
    return sock
