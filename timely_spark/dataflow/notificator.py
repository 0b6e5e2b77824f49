"""Notificator: deliver each requested time once it is complete at every input.

``notify_at(cap)`` asks to be told when no message at a time ``<= cap.time`` can
still arrive at any of the operator's inputs; the notificator keeps the
capability until then, so the operator can still send at that time.
``for_each(fn)`` calls ``fn(cap)`` for every deliverable time -- each time once,
in an order consistent with the partial order -- and drops the capability after
``fn`` returns (``cap.delayed(t)`` inside ``fn`` keeps a later one).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

from ..errors import CapabilityError
from ..progress import MutableAntichain, sort_key
from .capability import Capability, InputCapability

__all__ = ["Notificator"]


class Notificator:
    def __init__(self, frontiers: list[MutableAntichain], op: Any) -> None:
        self._frontiers = frontiers
        self._op = op
        self._pending: list[Capability] = []

    def notify_at(self, cap: Any) -> None:
        """Request a notification at ``cap.time``.  An InputCapability is retained;
        a Capability is taken over (do not use it afterwards)."""
        if type(cap) is InputCapability:
            cap = cap.retain()
        elif type(cap) is not Capability or cap._op is not self._op:
            raise CapabilityError(
                f"operator {self._op.name!r}: notify_at needs a live capability of this operator, got {cap!r}")
        self._pending.append(cap)

    def _complete(self, t: Any) -> bool:
        for f in self._frontiers:
            if f.less_equal(t):
                return False
        return True

    def next(self) -> Optional[Capability]:
        """The earliest deliverable notification (its capability), or None."""
        best = None
        best_key = None
        for cap in self._pending:
            t = cap._time
            if self._complete(t):
                k = sort_key(t)
                if best is None or k < best_key:
                    best, best_key = cap, k
        if best is None:
            return None
        t = best._time
        keep = []
        for cap in self._pending:
            if cap is not best and cap._time == t:
                cap.drop()           # the same time is delivered once
            elif cap is not best:
                keep.append(cap)
        self._pending = keep
        return best

    def for_each(self, fn: Callable[[Capability], Any]) -> None:
        """Deliver every complete time, earliest first."""
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
        return any(self._complete(c._time) for c in self._pending)

    def pending(self) -> list[Any]:
        """Times with a notification requested and not yet delivered."""
        return sorted({c._time for c in self._pending}, key=sort_key)

    def __len__(self) -> int:
        return len(self._pending)
