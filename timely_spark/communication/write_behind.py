"""Write-behind: a connection's bulk frames written by a thread of their own.

A worker that writes a large message itself waits while the peer drains its socket, and
the peer, doing the same, waits for it: two processes exchanging bulk data take turns.
A :class:`WriteBehind` instead takes sealed frames into a queue bounded in bytes and
writes them from its own thread (the socket calls release the GIL), so that sealing and
writing overlap the worker's own work and its reading of what the peer sends.

* **Order**: frames leave in the order they were queued; the connection queues every
  frame, small ones included, while anything is queued or being written
  (:attr:`queued` is not 0), so frames stay in the order they were sealed.
* **Back-pressure**: :meth:`wait_room` holds the caller until the queue has room (a
  message larger than the bound waits for an empty queue), reading the peer -- and the
  other connections it is given -- meanwhile (``on_readable``), so two processes filling
  each other's queues never wait on each other.
* **Failure**: a write that fails, or that waits ``timeout`` seconds in which the peer
  took nothing and sent nothing (``heard()``), ends the thread; ``on_error`` is called
  once with the error (the connection fails the run naming the peer), :attr:`error`
  keeps it, and the next :meth:`wait_room` raises it.
* **Ending**: :meth:`close` lets the queue drain (bounded) or drops it, then joins the
  thread (bounded); nothing of the queue outlives the connection.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections import deque
from typing import Callable, Optional, Sequence

__all__ = ["WriteBehind", "WRITE_BEHIND_BYTES", "advance", "write_all"]

#: Bytes of sealed frames a connection may hold queued for its writer thread; a worker
#: that would queue more waits (reading meanwhile) until the thread has written enough.
WRITE_BEHIND_BYTES = 32 * 1024 * 1024

IOV_MAX = 1024                 # buffers one sendmsg may take (Linux's UIO_MAXIOV; more: EMSGSIZE)
WAIT_SLICE = 0.1               # seconds between checks of a stop or a failure while a wait goes on
JOIN_WAIT = 5.0                # seconds granted to the thread to end once it is told to


def advance(views: list, at: int, sent: int) -> int:
    """Past ``sent`` bytes written from ``views[at:]``: the index of the first view not
    wholly written (a view partly written is cut to what is left).

    >>> views = [memoryview(b"abc"), memoryview(b"de")]
    >>> advance(views, 0, 4), bytes(views[1])
    (1, b'e')
    """
    while sent:
        n = views[at].nbytes
        if sent >= n:
            sent -= n
            at += 1
        else:
            views[at] = views[at][sent:]
            sent = 0
    return at


def write_all(sock: socket.socket, views: list, at: int, blocked: Callable[[], None]) -> None:
    """Write ``views[at:]`` (byte views; cut as they are written) with non-blocking
    ``sendmsg`` calls; ``blocked()`` is called whenever the socket takes nothing, and
    returns once it may take more (or raises to give up)."""
    while at < len(views):
        try:
            sent = sock.sendmsg(views[at:at + IOV_MAX], (), socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            blocked()
            continue
        at = advance(views, at, sent)


class WriteBehind:
    """The writer thread of one socket and its queue (at most ``limit`` bytes).

    ``name``: the thread's; ``timeout``: seconds the peer may take nothing, and send
    nothing, before the write fails; ``heard()``: when the peer last sent anything
    (``time.monotonic``); ``on_error(exc)``: called from the thread when a write fails
    (not after :meth:`close`)."""

    def __init__(self, sock: socket.socket, name: str, timeout: float,
                 on_error: Callable[[BaseException], None], limit: int = WRITE_BEHIND_BYTES,
                 heard: Callable[[], float] = lambda: 0.0) -> None:
        self.limit = limit
        self._heard = heard              # when the peer last sent anything (time.monotonic)
        self.error: Optional[BaseException] = None
        self._sock = sock
        self._name = name
        self._timeout = timeout
        self._on_error = on_error
        self._items: deque[tuple[list, int]] = deque()
        #: Bytes queued or being written (0: idle; read without a call on every write of a step's bundle).
        self.queued = 0
        self._cond = threading.Condition()
        self._stop = False
        self._room_r, self._room_w = os.pipe()    # readable when the thread made room (for a waiting worker)
        os.set_blocking(self._room_r, False)
        os.set_blocking(self._room_w, False)
        self._thread: Optional[threading.Thread] = None

    def put(self, frames: list, nbytes: int) -> None:
        """Queue ``frames`` (bytes-like, ``nbytes`` in all) after what is queued; the caller
        made room first (:meth:`wait_room`) and keeps them unchanged until written."""
        with self._cond:
            if self.error is not None:
                raise OSError(str(self.error))
            if self._stop:
                raise OSError("the connection is closing")
            self._items.append((frames, nbytes))
            self.queued += nbytes
            self._cond.notify()
            if self._thread is None:          # started with the first frames it is given
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def wait_room(self, nbytes: int, on_readable: Callable[[], None], check: Callable[[], None],
                  readable: Callable[[], Sequence[int]] = tuple) -> None:
        """Return once ``nbytes`` more fit in the queue (or it is empty).  Meanwhile call
        ``on_readable()`` whenever the socket, or one of the descriptors ``readable()``
        names (the other connections' sockets still read, asked anew at each wake-up, so
        that one at its end of file is not waited on again), has something to read, and
        ``check()`` (which raises to give up) at least every :data:`WAIT_SLICE` seconds;
        the thread's error is raised as OSError."""
        waiter = None
        others: set[int] = set()
        while True:
            if self.error is not None:
                raise OSError(str(self.error))
            queued = self.queued
            if queued == 0 or queued + nbytes <= self.limit:
                return
            check()
            if waiter is None:
                waiter = select.poll()
                waiter.register(self._room_r, select.POLLIN)
                own = self._sock.fileno()
                waiter.register(own, select.POLLIN)
            live = set(readable())
            live.discard(own)
            live.discard(self._room_r)
            for fd in others - live:
                waiter.unregister(fd)
            for fd in live - others:
                waiter.register(fd, select.POLLIN)
            others = live
            read = False
            for fd, _ in waiter.poll(WAIT_SLICE * 1000.0):
                if fd == self._room_r:
                    try:
                        os.read(self._room_r, 4096)
                    except OSError:
                        pass
                    continue
                read = True
            if read:
                on_readable()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._items and not self._stop:
                    cond.wait()
                if self._stop:
                    return
                frames, nbytes = self._items[0]
            try:
                self._write(frames)
            except OSError as exc:
                with cond:
                    stopping = self._stop
                    self.error = exc
                    self._items.clear()
                    self.queued = 0
                    cond.notify_all()
                self._signal()
                if not stopping:
                    self._on_error(exc)
                return
            frames = []
            with cond:
                self._items.popleft()
                self.queued -= nbytes
                cond.notify_all()
            self._signal()

    def _signal(self) -> None:
        try:
            os.write(self._room_w, b"\x01")
        except OSError:                   # full (a wake-up is pending anyway) or closed
            pass

    def _write(self, frames: list) -> None:
        """Write every byte of ``frames``, waiting for the socket as needed."""
        waiter = select.poll()
        waiter.register(self._sock.fileno(), select.POLLOUT)

        def blocked() -> None:
            stuck = time.monotonic()
            while not waiter.poll(WAIT_SLICE * 1000.0):
                if self._stop:
                    raise OSError("the connection closed while writing")
                if time.monotonic() - max(stuck, self._heard()) > self._timeout:
                    raise OSError(f"the peer took nothing and sent nothing for {self._timeout} s")

        write_all(self._sock, [v for v in (memoryview(p).cast("B") for p in frames) if v.nbytes], 0, blocked)

    def close(self, drain: float = 0.0) -> None:
        """End the thread: first let it write what is queued for up to ``drain`` seconds,
        then drop the rest and join it (bounded).  Idempotent."""
        if self._thread is not None and drain > 0:
            deadline = time.monotonic() + drain
            with self._cond:
                while self.queued and self.error is None and time.monotonic() < deadline:
                    self._cond.wait(min(WAIT_SLICE, max(deadline - time.monotonic(), 0.0)))
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_WAIT)
        for fd in (self._room_r, self._room_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._room_r = self._room_w = -1

    def alive(self) -> bool:
        """Whether the writer thread is running."""
        return self._thread is not None and self._thread.is_alive()
