"""The allocator interface: numbered channels between worker indices.

Each worker owns one :class:`Allocator`.  ``allocate(channel, inbox)`` registers
where messages for ``channel`` land on this worker and returns one pusher per
worker (``pushers[j].push(payload)`` sends to worker ``j``).  Payloads sent by
one worker on one channel arrive at each other worker in the order sent (FIFO
per channel and peer), which progress tracking relies on.

Messages from other workers are staged in the worker's mailbox until
:meth:`Allocator.receive` moves them into their inboxes (and activates the
inbox's consumer); one a mailbox holds as a :class:`Counted` tells its source when
the worker took it (the TCP mesh reads a peer only so far ahead of its workers).
Messages for a channel this worker has not allocated yet wait until it does.  A
pusher to the worker itself delivers at once.

The layer knows nothing of dataflows: a payload is any Python object in one
process, and bytes on the wire (see the TCP allocator).
"""

from __future__ import annotations

import os
import queue
from collections import deque
from typing import Any, Callable, Iterator, Optional

__all__ = ["Allocator", "Counted", "Inbox", "LocalPusher", "MailboxPusher", "Mailbox", "WAKE"]

WAKE = object()  # put into a mailbox to wake a parked worker (e.g. on failure)


class Mailbox(queue.SimpleQueue):
    """A worker's mailbox that can wake the worker while it waits on sockets as well:
    while ``parked`` is set, :meth:`put` also signals :meth:`fileno` (an eventfd, or a
    pipe), which the waiting worker polls with its sockets.

    >>> m = Mailbox(); m.put("x"); m.get_nowait()
    'x'
    >>> m.close()
    """

    def __init__(self) -> None:
        super().__init__()
        self.parked = False
        if hasattr(os, "eventfd"):
            self._read_fd = self._write_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        else:                                          # pragma: no cover (not Linux)
            self._read_fd, self._write_fd = os.pipe()
            os.set_blocking(self._read_fd, False)
            os.set_blocking(self._write_fd, False)

    def put(self, item: Any, block: bool = True, timeout: Optional[float] = None) -> None:
        """Add a message; wake the worker if it waits on its sockets."""
        super().put(item)
        if self.parked:
            try:
                os.write(self._write_fd, b"\x01\0\0\0\0\0\0\0")
            except (BlockingIOError, OSError):        # already signalled (or closed at the end)
                pass

    def fileno(self) -> int:
        """The descriptor that becomes readable when a message arrives while parked."""
        return self._read_fd

    def clear_signal(self) -> None:
        """Consume the wake-up signal (after the worker woke)."""
        try:
            os.read(self._read_fd, 8 if self._read_fd == self._write_fd else 4096)
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        """Close the wake-up descriptors (idempotent)."""
        fds = {self._read_fd, self._write_fd} - {-1}
        self._read_fd = self._write_fd = -1            # first: a late put() must not write to a reused number
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


class Counted:
    """A message ``(channel, payload)`` in a mailbox that its ``source`` counts, ``nbytes``
    of it, as read ahead of its worker until the worker takes it: :meth:`Allocator.drain`
    then calls ``source.taken(nbytes)`` (the TCP mesh bounds what it reads ahead this way).
    It unpacks, indexes and compares as the pair it is; slotted, as a mesh may hold many
    of them read ahead (72 bytes each, not the 264 of a tuple with attributes).

    >>> class Source:
    ...     def taken(self, n): print("taken", n)
    >>> item = Counted(7, "x", Source(), 3)
    >>> item == (7, "x"), item[1], item
    (True, 'x', (7, 'x'))
    >>> item.release()
    taken 3
    """

    __slots__ = ("channel", "payload", "source", "nbytes")

    def __init__(self, channel: int, payload: Any, source: Any, nbytes: int) -> None:
        self.channel = channel
        self.payload = payload
        self.source = source
        self.nbytes = nbytes

    def __iter__(self) -> Iterator[Any]:
        return iter((self.channel, self.payload))

    def __getitem__(self, index: int) -> Any:
        return (self.channel, self.payload)[index]

    def __eq__(self, other: object) -> bool:
        return (self.channel, self.payload) == other

    __hash__ = None  # type: ignore[assignment]     # (mutable: compares by content)

    def __repr__(self) -> str:
        return repr((self.channel, self.payload))

    def release(self) -> None:
        """Tell the source that the worker took this message."""
        self.source.taken(self.nbytes)


class Inbox:
    """Where one channel's messages land on this worker, and whom to wake."""

    __slots__ = ("queue", "activate")

    def __init__(self, activate: Callable[[], None]) -> None:
        self.queue: deque = deque()
        self.activate = activate


class LocalPusher:
    """Delivers to an inbox of the same worker, at once."""

    __slots__ = ("_inbox",)

    def __init__(self, inbox: Inbox) -> None:
        self._inbox = inbox

    def push(self, payload: Any) -> None:
        """Deliver a message to this worker's own inbox (no copy, no serialization)."""
        self._inbox.queue.append(payload)
        self._inbox.activate()

    def pair_pusher(self) -> Callable[[Any, Any], None]:
        """``push(time, data)``: :meth:`push` of the pair ``(time, data)`` as one call (a pipeline's hot path)."""
        append = self._inbox.queue.append
        activate = self._inbox.activate

        def push(time: Any, data: Any) -> None:
            append((time, data))
            activate()

        return push


class MailboxPusher:
    """Delivers to another worker of this process through its mailbox."""

    __slots__ = ("_put", "_channel")

    def __init__(self, mailbox: "queue.SimpleQueue", channel: int) -> None:
        self._put = mailbox.put
        self._channel = channel

    def push(self, payload: Any) -> None:
        """Put a message into another local worker's mailbox, tagged with the channel."""
        self._put((self._channel, payload))


class Allocator:
    """Base class: mailbox draining and channel registration; subclasses make pushers."""

    index: int
    peers: int

    def __init__(self, index: int, peers: int, mailbox: "queue.SimpleQueue") -> None:
        self.index = index
        self.peers = peers
        self.mailbox = mailbox
        #: The inbox of each channel allocated here (read-only for others: a reader in this worker's
        #: thread may put a message for an allocated channel straight into it, as :meth:`deliver` does).
        self.inboxes: dict[int, Inbox] = {}
        self._early: dict[int, list[Any]] = {}

    # -- subclasses ---------------------------------------------------------------
    def pushers(self, channel: int, inbox: Inbox) -> list[Any]:
        """One pusher per worker for ``channel`` (index ``self.index`` is local)."""
        raise NotImplementedError

    def check(self) -> None:
        """Raise if the run has failed elsewhere (called on every receive)."""

    def release(self) -> None:
        """Flush anything buffered for other workers (called after each step)."""

    def close(self) -> None:
        """Release resources once the worker is done."""

    # -- shared -------------------------------------------------------------------
    def allocate(self, channel: int, inbox: Inbox) -> list[Any]:
        """The pushers of ``channel`` (one per worker); what arrives for this worker lands in ``inbox``."""
        if channel in self.inboxes:
            raise ValueError(f"channel {channel} allocated twice on worker {self.index}")
        self.inboxes[channel] = inbox
        early = self._early.pop(channel, None)
        if early:
            inbox.queue.extend(early)
            inbox.activate()
        return self.pushers(channel, inbox)

    def deliver(self, channel: int, payload: Any) -> None:
        """Put a message that arrived for this worker on ``channel`` into its inbox (and wake
        the inbox's consumer).  Only this worker's own thread may call it."""
        inbox = self.inboxes.get(channel)
        if inbox is None:
            self._early.setdefault(channel, []).append(payload)
        else:
            inbox.queue.append(payload)
            inbox.activate()

    def drain(self) -> bool:
        """Move what waits in the mailbox into the inboxes; whether anything did."""
        get = self.mailbox.get_nowait
        empty = self.mailbox.empty
        got = False
        while not empty():              # (no exception at the end: this runs at every step)
            try:
                item = get()
            except queue.Empty:         # another consumer took it (not in this package)
                break
            if type(item) is Counted:   # (its source counts it until now)
                self.deliver(item.channel, item.payload)
                item.release()
            elif item is not WAKE:      # (a wake-up signal only: nothing to deliver)
                self.deliver(*item)
            got = True
        return got

    def receive(self, timeout: Optional[float] = None) -> bool:
        """Move arrived messages into their inboxes; with a ``timeout``, first wait
        up to that long for one.  Returns whether anything arrived."""
        self.check()
        if timeout:
            try:
                item = self.mailbox.get(timeout=timeout)
            except queue.Empty:
                return False
            if type(item) is Counted:
                self.deliver(item.channel, item.payload)
                item.release()
            elif item is not WAKE:
                self.deliver(*item)
            self.check()
            self.drain()
            return True
        return self.drain()
