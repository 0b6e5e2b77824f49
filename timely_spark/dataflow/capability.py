"""Capabilities: the right to send messages at a time (and later).

An operator may send at time ``t`` only while it holds a capability for a time
``<= t``.  Holding a capability keeps downstream frontiers at or before its time,
so dropping (or downgrading) capabilities is how an operator lets time advance.

* :class:`Capability` -- ``time``, ``delayed(t)`` (a new capability, ``t >= time``),
  ``downgrade(t)`` (in place), ``drop()``.  Dropped on garbage collection too,
  but explicit ``drop()`` is clearer.
* :class:`InputCapability` -- the capability that comes with a received batch,
  valid while that batch is being processed; ``retain()`` or ``delayed(t)`` keep one.
* :class:`CapabilitySet` -- a set of capabilities kept minimal.

Misuse (going backwards, using a dropped capability) raises
:class:`~timely_spark.errors.CapabilityError` at once, naming the operator.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from ..errors import CapabilityError
from ..progress import less_equal, sort_key

__all__ = ["Capability", "InputCapability", "CapabilitySet"]


class Capability:
    """The right to send at ``time`` (and later) on an operator's outputs.

    Operators get capabilities from the engine (the initial one, input capabilities,
    notifications); user code never constructs one.

    >>> import timely_spark as ts
    >>> def hold_then_release(cap, info):
    ...     later = cap.delayed(2)          # a second capability, for time 2
    ...     cap.drop()                      # the initial one (time 0) is given up
    ...     def logic(output):
    ...         output.session(later).give("at 2")
    ...         later.drop()
    ...     return logic
    >>> _ = ts.example(lambda s: ts.source(s, "Hold", hold_then_release).inspect_time(lambda t, x: print(t, x)))
    2 at 2
    """

    __slots__ = ("_time", "_op", "__weakref__")

    def __init__(self, time: Any, op: Any, counted: bool = True) -> None:
        """``op`` is the owning operator core; ``counted=False`` for a capability
        the progress protocol already counts (the initial one)."""
        self._time = time
        self._op = op
        if counted:
            op.capability_change(time, 1)

    def time_for(self, op: Any) -> Any:
        """This capability's time, if ``op`` may use it to send (it is live and ``op``
        owns it); raises :class:`~timely_spark.errors.CapabilityError` naming the operator."""
        if self._op is not op:
            if self._op is None:
                raise CapabilityError(
                    f"operator {op.name!r}: cannot use a dropped capability (time {self._time!r})")
            raise CapabilityError(
                f"operator {op.name!r}: cannot use a capability of operator {self._op.name!r}")
        return self._time

    @property
    def time(self) -> Any:
        """The time this capability allows sending at; CapabilityError once dropped."""
        if self._op is None:
            raise CapabilityError(f"capability at {self._time!r} was already dropped")
        return self._time

    @property
    def valid(self) -> bool:
        """Whether the capability is still held (not dropped)."""
        return self._op is not None

    def _check(self, t: Any, verb: str) -> Any:
        op = self._op
        if op is None:
            raise CapabilityError(f"cannot {verb}: the capability at {self._time!r} was already dropped")
        if not less_equal(self._time, t):
            raise CapabilityError(
                f"operator {op.name!r}: cannot {verb} the capability at {self._time!r} to {t!r}, "
                f"which is not later (capabilities only move forward in time)")
        return op

    def delayed(self, t: Any) -> "Capability":
        """A new capability for ``t``, which must be ``>=`` this one's time."""
        op = self._check(t, "delay")
        return Capability(t, op)

    def downgrade(self, t: Any) -> None:
        """Move this capability forward to ``t``."""
        op = self._op
        old = self._time                 # (int times, live: checked here, without _check's calls)
        if op is None or type(t) is not int or type(old) is not int or t < old:
            op = self._check(t, "downgrade")
        if t != old:
            op.capability_change(t, 1)
            op.capability_change(self._time, -1)
            self._time = t

    def drop(self) -> None:
        """Give the capability up (idempotent)."""
        op = self._op
        if op is not None:
            self._op = None
            op.capability_change(self._time, -1)

    def __del__(self) -> None:
        try:
            self.drop()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"Capability({self._time!r})" if self._op is not None else f"Capability({self._time!r}, dropped)"


class InputCapability:
    """The capability that comes with a received batch, valid while it is processed.

    >>> import timely_spark as ts
    >>> def keep_last(cap, info):
    ...     cap.drop()
    ...     def logic(input, output):
    ...         for icap, batch in input:            # icap: valid inside this loop only
    ...             output.session(icap).give(batch[-1])
    ...     return logic
    >>> _ = ts.example(lambda s: s.to_stream([1, 2, 3]).unary(None, "Last", keep_last).inspect(print))
    3
    """

    __slots__ = ("_time", "_op", "_valid")

    def __init__(self, time: Any, op: Any) -> None:
        self._time = time
        self._op = op
        self._valid = True

    @property
    def time(self) -> Any:
        """The batch's time."""
        return self._time

    def invalidate(self) -> None:
        """End this capability's validity (the engine calls it when its batch is done)."""
        self._valid = False

    def time_for(self, op: Any) -> Any:
        """This capability's time, if it is still valid and ``op`` owns it."""
        if not self._valid:
            self._guard()
        if self._op is not op:
            raise CapabilityError(
                f"operator {op.name!r}: cannot use an input capability of operator {self._op.name!r}")
        return self._time

    def _guard(self) -> None:
        if not self._valid:
            raise CapabilityError(
                f"operator {self._op.name!r}: the input capability at {self._time!r} is no longer valid "
                "(it lasts while its batch is processed; retain() it to keep it)")

    def retain(self) -> Capability:
        """A capability for this batch's time that outlives the batch."""
        self._guard()
        return Capability(self._time, self._op)

    def delayed(self, t: Any) -> Capability:
        """A capability for ``t >= time``."""
        self._guard()
        if not less_equal(self._time, t):
            raise CapabilityError(
                f"operator {self._op.name!r}: cannot delay the input capability at {self._time!r} "
                f"to {t!r}, which is not later")
        return Capability(t, self._op)

    def __repr__(self) -> str:
        return f"InputCapability({self._time!r})"


class CapabilitySet:
    """Capabilities kept as a minimal set (an antichain of held times).

    >>> class Op:
    ...     name = "demo"
    ...     def capability_change(self, t, d): pass
    >>> caps = CapabilitySet([Capability(3, Op()), Capability(5, Op())])
    >>> [c.time for c in caps]
    [3]
    >>> caps.delayed(4).time
    4
    >>> caps.downgrade([7]); [c.time for c in caps]
    [7]
    """

    def __init__(self, capabilities: Any = ()) -> None:
        self._caps: list[Capability] = []
        for c in capabilities:
            self.insert(c)

    def insert(self, cap: Capability) -> None:
        """Add a capability, dropping it (or the held ones it makes redundant) to keep the set minimal."""
        t = cap.time
        for c in self._caps:
            if less_equal(c.time, t):
                cap.drop()
                return
        keep = []
        for c in self._caps:
            if less_equal(t, c.time):
                c.drop()
            else:
                keep.append(c)
        keep.append(cap)
        self._caps = keep

    def delayed(self, t: Any) -> Capability:
        """A new capability for ``t`` from a held one at or before ``t``; CapabilityError if none is."""
        for c in self._caps:
            if less_equal(c.time, t):
                return c.delayed(t)
        raise CapabilityError(f"no capability in the set is at or before {t!r}")

    def downgrade(self, frontier: Any) -> None:
        """Keep capabilities only for the elements of ``frontier`` (each must be
        at or after a held time); an empty frontier drops everything."""
        new = CapabilitySet()
        for t in frontier:
            new.insert(self.delayed(t))
        self.clear()
        self._caps = new._caps

    def first(self) -> Optional[Capability]:
        """The held capability with the least time (by sort key), or None."""
        return min(self._caps, key=lambda c: sort_key(c.time)) if self._caps else None

    def clear(self) -> None:
        """Drop every held capability."""
        for c in self._caps:
            c.drop()
        self._caps = []

    def __iter__(self) -> Iterator[Capability]:
        return iter(list(self._caps))

    def __len__(self) -> int:
        return len(self._caps)

    def __bool__(self) -> bool:
        return bool(self._caps)
