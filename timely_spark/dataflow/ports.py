"""An operator's view of its inputs and outputs.

* :class:`InputPort` -- iterate it for ``(capability, records)`` batches; its
  ``frontier`` holds the times that may still arrive (for operators that asked
  to see frontiers).  Taking a batch counts it as consumed.
* :class:`OutputPort` -- ``push(time, records)``, counted as produced (raw;
  the engine's own operators use it with the time of the batch they hold).
* :class:`OutputHandle` -- the checked, buffered output user logic sees:
  ``session(cap).give(x)`` / ``.give_batch(xs)``; batches leave when the
  operator's logic returns.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterator, Optional

from ..errors import CapabilityError
from ..progress import ChangeBatch, MutableAntichain
from .capability import Capability, InputCapability

__all__ = ["InputPort", "OutputPort", "OutputHandle", "Session"]


class InputPort:
    __slots__ = ("queue", "consumed", "frontier", "_op")

    def __init__(self, queue: deque, consumed: ChangeBatch, frontier: MutableAntichain, op: Any) -> None:
        self.queue = queue
        self.consumed = consumed
        self.frontier = frontier
        self._op = op

    def __iter__(self) -> Iterator[tuple[InputCapability, list]]:
        q = self.queue
        update = self.consumed.update
        op = self._op
        while q:
            t, data = q.popleft()
            update(t, len(data))
            cap = InputCapability(t, op)
            try:
                yield cap, data
            finally:
                cap._valid = False

    def next(self) -> Optional[tuple[InputCapability, list]]:
        """The next batch, or None.  Its capability stays valid until the logic returns."""
        if not self.queue:
            return None
        t, data = self.queue.popleft()
        self.consumed.update(t, len(data))
        cap = InputCapability(t, self._op)
        self._op._issued.append(cap)
        return cap, data

    def for_each(self, fn: Any) -> None:
        """Call ``fn(capability, records)`` for every waiting batch."""
        for cap, data in self:
            fn(cap, data)

    def take(self) -> list[tuple[Any, list]]:
        """All waiting ``(time, records)`` batches, counted as consumed (no capabilities)."""
        q = self.queue
        update = self.consumed.update
        out = []
        while q:
            t, data = q.popleft()
            update(t, len(data))
            out.append((t, data))
        return out

    def __bool__(self) -> bool:
        return bool(self.queue)


class OutputPort:
    __slots__ = ("produced", "tee", "fanout")

    def __init__(self, produced: ChangeBatch, fanout: int = 1) -> None:
        self.produced = produced
        self.tee: list[Any] = []
        self.fanout = fanout

    def push(self, time: Any, data: list) -> None:
        n = len(data)
        if n:
            self.produced.update(time, n * self.fanout)
            for push in self.tee:
                push(time, data)


class Session:
    __slots__ = ("_buffer", "time")

    def __init__(self, buffer: list, time: Any) -> None:
        self._buffer = buffer
        self.time = time

    def give(self, record: Any) -> None:
        self._buffer.append(record)

    def give_batch(self, records: Any) -> None:
        self._buffer.extend(records)

    give_iterator = give_batch


class OutputHandle:
    """Buffered, capability-checked sending for user logic."""

    __slots__ = ("port", "_op", "_buffers")

    def __init__(self, port: OutputPort, op: Any) -> None:
        self.port = port
        self._op = op
        self._buffers: dict[Any, list] = {}

    def session(self, cap: Any) -> Session:
        """Send at ``cap.time``; ``cap`` must be a live capability of this operator."""
        if type(cap) is InputCapability:
            if not cap._valid:
                cap._guard()
        elif type(cap) is Capability:
            if cap._op is not self._op:
                if cap._op is None:
                    raise CapabilityError(
                        f"operator {self._op.name!r}: cannot send with a dropped capability (time {cap._time!r})")
                raise CapabilityError(
                    f"operator {self._op.name!r}: cannot send with a capability of operator {cap._op.name!r}")
        else:
            raise CapabilityError(
                f"operator {self._op.name!r}: session() needs a Capability or InputCapability, "
                f"not {type(cap).__name__} (sending at a time needs a capability for it)")
        t = cap._time
        buf = self._buffers.get(t)
        if buf is None:
            buf = self._buffers[t] = []
        return Session(buf, t)

    def give(self, cap: Any, record: Any) -> None:
        self.session(cap).give(record)

    def give_batch(self, cap: Any, records: Any) -> None:
        self.session(cap).give_batch(records)

    def flush(self) -> None:
        if self._buffers:
            buffers, self._buffers = self._buffers, {}
            for t, buf in buffers.items():
                self.port.push(t, buf)
