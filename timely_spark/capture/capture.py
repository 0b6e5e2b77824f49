"""capture_into: record everything a stream shows as events.

The capture operator observes its input's frontier and data.  On its first run it
subtracts one count of the minimum time -- the replay side assumes each captured
stream starts holding that capability, which lets any number of captured streams
be replayed together (each stream eventually reports that capability's removal).
Frontier changes are pushed as one :class:`Progress` event before the data
received in the same run, each batch as one :class:`Messages` event.

>>> import timely_spark as ts
>>> queue = ts.example(lambda s: s.to_stream([1, 2, 3]).capture())
>>> ts.capture.extract(queue)
[(0, [1, 2, 3])]
"""

from __future__ import annotations

from typing import Any

from ..dataflow.operator import OperatorBuilder
from ..progress import ChangeBatch
from .event import EventQueue, Messages, Progress

__all__ = ["capture_into", "capture"]


class _FrontierChanges:
    """Stands in for the operator's frontier: keeps the raw changes instead."""

    def __init__(self) -> None:
        self.changes = ChangeBatch()

    def update_iter(self, updates: Any) -> list:
        self.changes.extend(updates)
        return []


def capture_into(stream: Any, pusher: Any, name: str = "Capture") -> None:
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream)
    changes = _FrontierChanges()
    b.core.frontiers[0] = changes      # frontier changes land here (see OperatorCore.schedule)
    minimum = stream.scope._graph.min_time
    started = [False]

    def logic() -> None:
        if not started[0]:
            changes.changes.update(minimum, -1)
            started[0] = True
        updates = changes.changes.drain()
        if updates:
            pusher.push(Progress(updates))
        for t, data in inp.take():
            pusher.push(Messages(t, data))

    b.build(logic, notify=True, initial_capabilities=False)


def capture(stream: Any, name: str = "Capture") -> EventQueue:
    queue = EventQueue()
    capture_into(stream, queue, name)
    return queue
