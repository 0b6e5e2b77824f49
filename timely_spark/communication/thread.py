"""Workers as threads of one process, joined by in-process queues.

>>> fabric = ThreadFabric(2)
>>> a, b = ThreadAllocator(0, fabric), ThreadAllocator(1, fabric)
>>> from timely_spark.communication.allocator import Inbox
>>> seen = []
>>> pa = a.allocate(7, Inbox(lambda: None)); inbox_b = Inbox(lambda: seen.append("woken"))
>>> pb = b.allocate(7, inbox_b)
>>> pa[1].push("hello"); b.receive()
True
>>> list(inbox_b.queue), seen
(['hello'], ['woken'])
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Optional

from ..errors import WorkerAborted, WorkerFailure
from .allocator import WAKE, Allocator, Inbox, LocalPusher, Mailbox, MailboxPusher

__all__ = ["ThreadFabric", "ThreadAllocator"]


class ThreadFabric:
    """What the threads of one process share: a mailbox per worker, and the
    first failure, which stops every worker.  ``wakeable``: the mailboxes are
    :class:`~.allocator.Mailbox` es, which wake a worker waiting on sockets too (the
    TCP mesh's workers do)."""

    def __init__(self, peers: int, offset: int = 0, wakeable: bool = False) -> None:
        self.peers = peers
        self.offset = offset  # global index of local worker 0 (processes x threads)
        self.mailboxes: list[queue.SimpleQueue] = [Mailbox() if wakeable else queue.SimpleQueue()
                                                   for _ in range(peers)]
        self.failure: Optional[tuple[int, BaseException]] = None
        self.failure_relayed = False      # the first failure came from a peer process
        self._lock = threading.Lock()

    def fail(self, worker: int, exc: BaseException, relayed: bool = False) -> bool:
        """Record the first failure and wake every worker; True if this one was first.
        A worker's own error replaces a :class:`WorkerFailure` (a lost or broken
        connection) recorded before it: that failure is what the error caused.
        ``relayed``: the failure was reported by a peer process (not to be reported back)."""
        with self._lock:
            first = self.failure is None
            caused = not first and isinstance(self.failure[1], WorkerFailure)  # type: ignore[index]
            if first or (caused and not isinstance(exc, (WorkerFailure, WorkerAborted))):
                self.failure = (worker, exc)
                self.failure_relayed = relayed
        for m in self.mailboxes:
            m.put(WAKE)
        return first

    def close(self) -> None:
        """Release what the mailboxes hold outside Python (a wakeable mailbox's eventfd);
        idempotent.  Called when the run is over."""
        for m in self.mailboxes:
            if isinstance(m, Mailbox):
                m.close()


class ThreadAllocator(Allocator):
    """Allocator for worker ``index`` of a :class:`ThreadFabric` (all workers local)."""

    def __init__(self, index: int, fabric: ThreadFabric) -> None:
        super().__init__(index, fabric.peers, fabric.mailboxes[index])
        self.fabric = fabric

    def pushers(self, channel: int, inbox: Inbox) -> list[Any]:
        """One pusher per worker: this worker's inbox, or another thread's mailbox."""
        return [
            LocalPusher(inbox) if j == self.index else MailboxPusher(self.fabric.mailboxes[j], channel)
            for j in range(self.peers)
        ]

    def check(self) -> None:
        """Raise WorkerAborted if another worker failed (checked at every receive)."""
        failure = self.fabric.failure
        if failure is not None and failure[0] != self.index:
            raise WorkerAborted(f"worker {failure[0]} failed")
