"""An operator's view of its inputs and outputs.

* :class:`InputPort` -- iterate it for ``(capability, records)`` batches, or
  ``take()`` the waiting ``(time, records)`` batches; its ``frontier`` holds the
  times that may still arrive (for operators built with ``notify=True``).  Taking a
  batch counts it as consumed.
* :class:`OutputHandle` -- capability-checked, buffered sending:
  ``session(cap).give(x)`` / ``.give_batch(xs)``; batches leave when the operator's
  logic returns.
* :class:`OutputPort` -- the raw end of an output, behind
  ``OutputHandle.unstable_push`` (for the engine's pass-through operators).

Both come from :class:`~timely_spark.dataflow.operator.OperatorBuilder`.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterator, Optional

import pyarrow as pa

from ..errors import CapabilityError
from ..progress import ChangeBatch, MutableAntichain
from .capability import Capability, InputCapability

__all__ = ["InputPort", "OutputPort", "OutputHandle", "Session", "record_count"]

_RecordBatch = pa.RecordBatch


def record_count(data: list) -> int:
    """How many records a batch holds, as progress tracking counts them: its length,
    or for a batch of Arrow record batches their rows (so that splitting record
    batches by key keeps the count).

    >>> import pyarrow as pa
    >>> record_count([1, 2, 3]), record_count([pa.record_batch({"x": [1, 2]}), pa.record_batch({"x": [3]})])
    (3, 3)
    """
    if data and type(data[0]) is _RecordBatch:
        return sum(b.num_rows for b in data)
    return len(data)


class InputPort:
    """The receiving end of one operator input.

    ``frontier`` is the input's frontier (kept up to date for operators built with
    ``notify=True``); ``queue`` holds the waiting ``(time, records)`` batches.

    >>> import timely_spark as ts
    >>> from timely_spark.dataflow import OperatorBuilder
    >>> def build(scope):
    ...     b = OperatorBuilder(scope, "Sizes")
    ...     inp = b.new_input(scope.to_stream(range(5)))
    ...     out, sizes = b.new_output()
    ...     def logic():
    ...         for cap, batch in inp:                 # a capability with each batch
    ...             out.session(cap).give(len(batch))
    ...     b.build(logic, initial_capabilities=False)
    ...     sizes.inspect(print)
    >>> ts.example(build)
    5
    """

    __slots__ = ("queue", "consumed", "frontier", "_op")

    def __init__(self, queue: deque, consumed: ChangeBatch, frontier: Any, op: Any) -> None:
        self.queue = queue
        self.consumed = consumed
        self.frontier: MutableAntichain = frontier
        self._op = op

    def __iter__(self) -> Iterator[tuple[InputCapability, list]]:
        """``(capability, records)`` for every waiting batch; each capability is valid
        until the next batch is taken (``retain()`` it to keep it)."""
        q = self.queue
        consumed = self.consumed
        op = self._op
        while q:
            t, data = q.popleft()
            n = sum(b.num_rows for b in data) if data and type(data[0]) is _RecordBatch else len(data)
            if n:                                # ChangeBatch.update, inline (one call less a batch)
                counts = consumed.counts
                counts[t] = counts.get(t, 0) + n
            cap = InputCapability(t, op)
            try:
                yield cap, data
            finally:
                cap.invalidate()

    def for_each(self, fn: Callable[[InputCapability, list], Any]) -> None:
        """Call ``fn(capability, records)`` for every waiting batch."""
        for cap, data in self:
            fn(cap, data)

    def take(self) -> list[tuple[Any, list]]:
        """All waiting ``(time, records)`` batches, counted as consumed (no capabilities)."""
        q = self.queue
        out = []
        if q:
            counts = self.consumed.counts        # ChangeBatch.update, inline (one call less a batch)
            while q:
                t, data = q.popleft()
                n = sum(b.num_rows for b in data) if data and type(data[0]) is _RecordBatch else len(data)
                if n:
                    counts[t] = counts[t] + n if t in counts else n   # (``in`` and a subscript: no get call)
                out.append((t, data))
        return out

    def __bool__(self) -> bool:
        return bool(self.queue)


class OutputPort:
    """The raw end of an output: ``push(time, records)`` counts and sends a batch,
    unchecked.  ``fanout`` is how many times each record is counted (the number of
    workers for a broadcast output)."""

    __slots__ = ("produced", "tee", "fanout")

    def __init__(self, produced: ChangeBatch, fanout: int = 1) -> None:
        self.produced = produced
        self.tee: list[Any] = []
        self.fanout = fanout

    def push(self, time: Any, data: list) -> None:
        """Count and send one batch (nothing for an empty one)."""
        if not data:
            return
        n = sum(b.num_rows for b in data) if type(data[0]) is _RecordBatch else len(data)   # record_count, inline
        if n:
            counts = self.produced.counts        # ChangeBatch.update, inline (one call less a batch)
            n *= self.fanout
            counts[time] = counts[time] + n if time in counts else n   # (no get call)
            for push in self.tee:
                push(time, data)


class Session:
    """Sending at one time: ``give(record)``, ``give_batch(records)``."""

    __slots__ = ("_buffer", "time")

    def __init__(self, buffer: list, time: Any) -> None:
        self._buffer = buffer
        self.time = time

    def give(self, record: Any) -> None:
        """Send one record."""
        self._buffer.append(record)

    def give_batch(self, records: Any) -> None:
        """Send every record of an iterable."""
        self._buffer.extend(records)

    give_iterator = give_batch


class OutputHandle:
    """Buffered, capability-checked sending for operator logic.

    ``session(cap)`` sends at ``cap.time``; ``cap`` must be a live capability (or an
    input capability still valid) of this operator, else
    :class:`~timely_spark.errors.CapabilityError` names the operator.  Buffered
    records leave when the logic returns.

    >>> import timely_spark as ts
    >>> def build(scope):
    ...     def constructor(cap, info):
    ...         def logic(output):
    ...             output.session(cap).give_batch(["a", "b"])
    ...             cap.drop()
    ...         return logic
    ...     ts.source(scope, "Letters", constructor).inspect(print)
    >>> ts.example(build)
    a
    b
    """

    __slots__ = ("name", "_port", "_op", "_buffers", "unstable_push")

    def __init__(self, port: OutputPort, op: Any, name: Optional[str] = None) -> None:
        self.name = name
        self._port = port
        self._op = op
        self._buffers: dict[Any, list] = {}
        # Send a batch at once, without a capability check (the port's own push: no extra call per batch).
        # Unstable, for the engine's pass-through operators: correct only at the time of an input batch the
        # operator is processing now (whose consumption keeps the time from completing).
        self.unstable_push: Callable[[Any, list], None] = port.push

    def session(self, cap: Any) -> Session:
        """A session sending at ``cap.time``."""
        kind = type(cap)
        if kind is not InputCapability and kind is not Capability:
            raise CapabilityError(
                f"operator {self._op.name!r}: session() needs a Capability or InputCapability, "
                f"not {kind.__name__} (sending at a time needs a capability for it)")
        t = cap.time_for(self._op)
        buffers = self._buffers
        buf = buffers.get(t)
        if buf is None:
            if not buffers:
                self._op.unflushed.append(self)     # flushed when the logic returns
            buf = buffers[t] = []
        return Session(buf, t)

    def give(self, cap: Any, record: Any) -> None:
        """Send one record at ``cap.time``."""
        self.session(cap).give(record)

    def give_batch(self, cap: Any, records: Any) -> None:
        """Send records at ``cap.time``."""
        self.session(cap).give_batch(records)

    def flush(self) -> None:
        """Send the buffered batches (the engine calls it when the logic returns)."""
        if self._buffers:
            buffers, self._buffers = self._buffers, {}
            for t, buf in buffers.items():
                self._port.push(t, buf)
