"""capture_into: record everything a stream shows as events.

The capture operator observes its input's frontier and data.  On its first run it
subtracts one count of the minimum time -- the replay side assumes each captured
stream starts holding that capability, which lets any number of captured streams
be replayed together (each stream eventually reports that capability's removal).
Frontier changes are pushed as one :class:`~.event.Progress` event before the data
received in the same run, each batch as one :class:`~.event.Messages` event.  When the
frontier becomes empty (the stream ended) the pusher is closed, if it can be (a
``ParquetEventWriter`` then flushes its tail and marks its log closed), however the
run is run and whether or not the worker function closes it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...progress import ChangeBatch
from ..operator import OperatorBuilder
from ..state_hook import KEY_HASH
from .event import EventQueue, Messages, Progress

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["capture_into", "capture"]


class _FrontierChanges:
    """Stands in for the input's frontier: keeps the raw changes instead."""

    def __init__(self) -> None:
        self.changes = ChangeBatch()

    def update_iter(self, updates: Any) -> list:
        self.changes.extend(updates)
        return []


def capture_into(stream: "Stream", pusher: Any, name: str = "Capture") -> None:
    """Record everything this stream shows -- data batches and frontier changes -- as
    events pushed into ``pusher`` (anything with ``push(event)``: an
    :class:`~.event.EventQueue`, an ``EventWriter``, a ``ParquetEventWriter``...).
    A pusher with a ``poll()`` method is also called on every run of the operator
    and may return seconds after which it wants to be polled again (a writer that
    flushes on a timer).  A pusher with a ``close()`` method is closed once the
    stream's frontier is empty.

    >>> import timely_spark as ts
    >>> queue = ts.capture.EventQueue()
    >>> ts.example(lambda s: s.to_stream([1, 2, 3]).capture_into(queue))
    >>> ts.capture.extract(queue)
    [(0, [1, 2, 3])]
    """
    b = OperatorBuilder(stream.scope, name)
    changes = _FrontierChanges()
    inp = b.new_input(stream, frontier=changes)
    minimum = stream.scope.minimum
    started = [False]
    armed = [False]           # a poll timer is outstanding
    poll = getattr(pusher, "poll", None)
    close = getattr(pusher, "close", None)
    held = ChangeBatch([(minimum, 1)])       # the stream's frontier, as the events pushed tell it
    worker = stream.scope.worker
    activate = b.info().activate

    def fire() -> None:
        armed[0] = False
        activate()

    def push_progress() -> None:
        if not started[0]:
            changes.changes.update(minimum, -1)
            started[0] = True
        updates = changes.changes.drain()
        if updates:
            pusher.push(Progress(updates))
            held.extend(updates)
            if close is not None and held.is_empty():
                close()                          # the stream ended: its log is complete

    def logic() -> None:
        push_progress()
        for t, data in inp.take():
            pusher.push(Messages(t, data))
        if poll is not None and not armed[0]:
            delay = poll()
            if delay is not None:
                armed[0] = True
                worker.activate_after(fire, delay)

    _recoverable(b, stream.scope, pusher, push_progress, minimum)
    b.build(logic, notify=True, initial_capabilities=False)


def _recoverable(b: OperatorBuilder, scope: Any, pusher: Any, push_progress: Any, minimum: Any) -> None:
    """Snapshots and restores: a snapshot at ``t`` flushes the pusher (its
    ``flush()``, if it has one) with every event before ``t`` pushed, so the log holds
    all of the times the snapshot covers; on a run with a checkpoint the pusher learns
    it and the restored time first (its ``recover(checkpoint, restored_time, minimum)``,
    if it has one: a ParquetEventWriter goes on with its log exactly once)."""
    keep_state = b.keep_state
    flush = getattr(pusher, "flush", None)

    def save(t: Any) -> Any:
        import pyarrow as pa

        push_progress()
        if flush is not None:
            flush()
        return pa.table({KEY_HASH: pa.array([], pa.uint64())})     # nothing: keyed, so any worker count

    keep_state(save, keyed=True)
    worker = scope.worker
    checkpoint = worker.config.checkpoint
    recover = getattr(pusher, "recover", None)
    if checkpoint is not None and recover is not None:
        recover(checkpoint, worker.restored_time_of(scope), minimum)


def capture(stream: "Stream", name: str = "Capture") -> EventQueue:
    """Capture into an in-process :class:`~.event.EventQueue`, returned.

    >>> import timely_spark as ts
    >>> ts.capture.extract(ts.example(lambda s: s.to_stream([2, 1]).capture()))
    [(0, [1, 2])]
    """
    queue = EventQueue()
    capture_into(stream, queue, name)
    return queue
