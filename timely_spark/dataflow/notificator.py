"""Notificator: deliver each requested time once it is complete at every input.

``notify_at(cap)`` asks to be told when no message at a time ``<= cap.time`` can
still arrive at any of the operator's inputs; the notificator keeps the
capability until then, so the operator can still send at that time.
``for_each(fn)`` calls ``fn(cap)`` for every deliverable time -- each time once,
in an order consistent with the partial order -- and drops the capability after
``fn`` returns (``cap.delayed(t)`` inside ``fn`` keeps a later one).

Costs: requests wait in a heap ordered by a linear extension of the partial order
(``sort_key``), one capability per distinct time.  Taking the next deliverable
time pops from the heap: O(log n) for totally ordered times; with partially
ordered times (``Product``) a blocked earliest request makes it look past that
one to the others, which is what a partial order needs.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Iterator, Optional

from ..errors import CapabilityError
from ..progress import kind_of, sort_key
from .capability import Capability, InputCapability

__all__ = ["Notificator"]


class Notificator:
    """Notifications for one operator, over the frontiers of its inputs.

    The notify operators (``unary_notify``, ``binary_notify``, Naiad vertices) make
    one and hand it to the logic.

    >>> import timely_spark as ts
    >>> def logic(input, output, notificator):
    ...     for cap, batch in input:
    ...         notificator.notify_at(cap.delayed(cap.time + 1))    # a later time
    ...         notificator.notify_at(cap)
    ...     for cap in notificator:                                  # earliest first
    ...         output.session(cap).give(cap.time)
    >>> _ = ts.example(lambda s: s.to_stream("a").unary_notify(None, "Twice", [], logic).inspect(print))
    0
    1
    """

    def __init__(self, frontiers: list[Any], op: Any) -> None:
        self._frontiers = frontiers
        self._op = op
        self._heap: list[tuple[Any, int, Any]] = []     # (sort key, seq, time)
        self._caps: dict[Any, Capability] = {}          # one capability per requested time
        self._seq = 0

    def notify_at(self, cap: Any) -> None:
        """Request a notification at ``cap.time``.  An InputCapability is retained;
        a Capability is taken over (do not use it afterwards).  A capability of
        another operator, or a dropped one, raises CapabilityError."""
        if type(cap) is InputCapability:
            cap.time_for(self._op)
            cap = cap.retain()
        elif type(cap) is Capability:
            cap.time_for(self._op)
        else:
            raise CapabilityError(
                f"operator {self._op.name!r}: notify_at needs a live capability of this operator, got {cap!r}")
        t = cap.time
        if t in self._caps:
            cap.drop()                   # the same time is delivered once
            return
        self._caps[t] = cap
        self._seq += 1
        heapq.heappush(self._heap, (sort_key(t), self._seq, t))

    def _complete(self, t: Any) -> bool:
        for f in self._frontiers:
            if f.less_equal(t):
                return False
        return True

    def _find(self, take: bool) -> Optional[Any]:
        """The earliest deliverable time (removed from the heap if ``take``), or None."""
        heap = self._heap
        if not heap:
            return None
        t = heap[0][2]
        if self._complete(t):
            if take:
                heapq.heappop(heap)
            return t
        if kind_of(t).total:
            return None                  # totally ordered: nothing later is complete either
        blocked = []
        found = None
        while heap:
            entry = heapq.heappop(heap)
            if self._complete(entry[2]):
                found = entry
                break
            blocked.append(entry)
        for entry in blocked:
            heapq.heappush(heap, entry)
        if found is not None and not take:
            heapq.heappush(heap, found)
        return None if found is None else found[2]

    def next(self) -> Optional[Capability]:
        """The earliest deliverable notification (its capability), or None."""
        t = self._find(take=True)
        return None if t is None else self._caps.pop(t)

    def for_each(self, fn: Callable[[Capability], Any]) -> None:
        """Deliver every complete time, earliest first, dropping each capability after
        ``fn(capability)`` returns."""
        while True:
            cap = self.next()
            if cap is None:
                return
            try:
                fn(cap)
            finally:
                cap.drop()

    def __iter__(self) -> Iterator[Capability]:
        """Iterate deliverable notifications; each capability is dropped when the
        next one is taken."""
        while True:
            cap = self.next()
            if cap is None:
                return
            try:
                yield cap
            finally:
                cap.drop()

    def has_deliverable(self) -> bool:
        """Whether some requested time is complete now."""
        return self._find(take=False) is not None

    def pending(self) -> list[Any]:
        """Times with a notification requested and not yet delivered, earliest first."""
        return sorted(self._caps, key=sort_key)

    def __len__(self) -> int:
        return len(self._caps)
