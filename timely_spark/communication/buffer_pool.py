"""Large buffers used again once nothing refers to them any more.

A fresh buffer of megabytes costs more to fault in (the kernel zeroes every page on
first touch) than sealing, sending or opening it takes.  A connection's large frames
are therefore sealed into, and read into, buffers of a :class:`BufferPool`: a buffer
goes back into use only when nothing outside the pool refers to it (no frame waiting to
be written, no Arrow array or payload made from it), which the pool sees from its
reference count, so a payload that keeps its frame's memory is never overwritten.  The
pool keeps at most ``limit`` bytes of buffers; to keep a new one it drops free buffers
(oldest first), and when every buffer it keeps is in use the new one is not kept (it
lives as long as whoever uses it, as a buffer of no pool would).

>>> pool = BufferPool(1 << 20)
>>> a = pool.take(1000)
>>> b = pool.take(1000)                # ``a`` is in use: another buffer
>>> a.obj is b.obj
False
>>> del a
>>> pool.take(500).obj is not b.obj    # the first is free again: taken again, not allocated
True
>>> pool.held
2000
"""

from __future__ import annotations

import sys
from typing import Any

import numpy

__all__ = ["BufferPool"]

_FREE = 3          # references to a free buffer as the pool counts them: its list, the loop, getrefcount's argument


class BufferPool:
    """Writable buffers of at least a size, reused when free, at most ``limit`` bytes kept.

    Use from one thread at a time (a connection's sending lock, or its reading lock);
    buffers are released from any thread by dropping every reference to them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._arrays: list[Any] = []       # oldest first
        self.held = 0                      # bytes of the buffers kept
        self.allocated = 0                 # buffers allocated (not taken again)

    def take(self, n: int) -> memoryview:
        """A writable view of ``n`` bytes (not zeroed) that nobody else uses."""
        best = None
        for arr in self._arrays:
            if arr.nbytes >= n and sys.getrefcount(arr) == _FREE and (best is None or arr.nbytes < best.nbytes):
                best = arr
        if best is None:
            best = numpy.empty(n, numpy.uint8)
            self.allocated += 1
            if n <= self.limit:
                kept = []
                for arr in self._arrays:                # make room by dropping free buffers (too small), oldest first
                    if self.held + n > self.limit and sys.getrefcount(arr) == _FREE:
                        self.held -= arr.nbytes
                    else:
                        kept.append(arr)
                self._arrays = kept
                if self.held + n <= self.limit:         # else every kept buffer is in use: this one is not kept
                    self._arrays.append(best)
                    self.held += n
        return memoryview(best)[:n]        # type: ignore[arg-type]
