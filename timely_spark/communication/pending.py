"""Connections in their authentication handshake, bounded without locking anyone out.

A listener that closed every connection over its limit could be kept from its real peers
by a few idle connections.  :class:`PendingHandshakes` instead admits every new
connection and, past the limit, drops the oldest pending one of the source holding the
most: idle connections from one address push out each other, not a peer that connects
after them (and a dropped peer connects again).  A connection stops counting once it has
authenticated, so a live connection is never dropped.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from typing import Optional

__all__ = ["PendingHandshakes"]


class PendingHandshakes:
    """At most ``limit`` connections authenticating at once.

    >>> import socket
    >>> pending = PendingHandshakes(1)
    >>> a, b = socket.socketpair()
    >>> c, d = socket.socketpair()
    >>> pending.admit(a, "10.0.0.1"), pending.admit(c, "10.0.0.2")
    (None, '10.0.0.1')
    >>> pending.authenticated(a), pending.authenticated(c)
    (False, True)
    >>> for s in (a, b, c, d): s.close()
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pending: dict[socket.socket, tuple[str, float]] = {}   # (source, since)
        self._lock = threading.Lock()

    def admit(self, sock: socket.socket, source: str) -> Optional[str]:
        """Count ``sock`` (from ``source``) among the connections authenticating; when
        that makes more than ``limit``, shut the oldest of the source holding the most
        down (its handshake then ends) and return that source."""
        dropped = None
        with self._lock:
            if len(self._pending) >= self.limit:
                dropped = Counter(src for src, _ in self._pending.values()).most_common(1)[0][0]
                victim = min((s for s, (src, _) in self._pending.items() if src == dropped),
                             key=lambda s: self._pending[s][1])
                del self._pending[victim]
                try:
                    victim.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._pending[sock] = (source, time.monotonic())
        return dropped

    def authenticated(self, sock: socket.socket) -> bool:
        """Stop counting ``sock``; False if it was dropped meanwhile."""
        with self._lock:
            return self._pending.pop(sock, None) is not None
