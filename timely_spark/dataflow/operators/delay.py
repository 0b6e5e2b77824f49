"""Operators that move records in time: delay, delay_total, reclock."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Callable

from ...progress import less_equal, sort_key
from ..channels import Pipeline
from . import generic

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["delay", "delay_total", "reclock"]


def delay(stream: "Stream", f: Callable[[Any, Any], Any], name: str = "Delay") -> "Stream":
    """Move each record to time ``f(record, time)``, which must not be earlier than
    its time (else CapabilityError names the operator); records leave once their new
    time is complete, each new time's records in one batch.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([3, 1]).delay(lambda x, t: x).inspect_time(lambda t, x: print(t, x)))
    1 1
    3 3
    """
    elements: dict[Any, list] = {}

    def logic(input: Any, output: Any, notificator: Any) -> None:
        for cap, data in input:
            t = cap.time
            for x in data:
                nt = f(x, t)
                bucket = elements.get(nt)
                if bucket is None:
                    notificator.notify_at(cap.delayed(nt))
                    bucket = elements[nt] = []
                bucket.append(x)
        for cap in notificator:
            output.session(cap).give_batch(elements.pop(cap.time, ()))

    return generic.unary_notify(stream, Pipeline, name, [], logic)


def delay_total(stream: "Stream", f: Callable[[Any, Any], Any], name: str = "DelayTotal") -> "Stream":
    """:func:`delay` for totally ordered times (ints, tuples), with a heap instead of a
    notificator.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([5, 2]).delay_total(lambda x, t: x).inspect_time(lambda t, x: print(t, x)))
    2 2
    5 5
    """
    def constructor(cap: Any, info: Any) -> Callable:
        cap.drop()
        heap: list = []          # (time, seq, capability); a capability per distinct time
        buckets: dict[Any, list] = {}
        seq = [0]

        def logic(input: Any, output: Any) -> None:
            for icap, data in input:
                t = icap.time
                for x in data:
                    nt = f(x, t)
                    bucket = buckets.get(nt)
                    if bucket is None:
                        seq[0] += 1
                        heapq.heappush(heap, (sort_key(nt), seq[0], icap.delayed(nt)))
                        bucket = buckets[nt] = []
                    bucket.append(x)
            frontier = input.frontier
            while heap and not frontier.less_equal(heap[0][2].time):
                _, _, c = heapq.heappop(heap)
                output.session(c).give_batch(buckets.pop(c.time))
                c.drop()

        return logic

    return generic.unary_frontier(stream, Pipeline, name, constructor)


def reclock(stream: "Stream", clock: "Stream", name: str = "Reclock") -> "Stream":
    """Hold records until a record appears on ``clock`` at a time ``tc`` at or after
    theirs, then release them at ``tc``.

    >>> import timely_spark as ts
    >>> def build(s):
    ...     data = s.to_stream([1, 2]).delay(lambda x, t: x)
    ...     tick = s.to_stream([5]).delay(lambda x, t: x)
    ...     data.reclock(tick).inspect_time(lambda t, x: print(t, x))
    >>> _ = ts.example(build)
    5 1
    5 2
    """
    stash: list[tuple[Any, list]] = []

    def logic(data_in: Any, clock_in: Any, output: Any, notificator: Any) -> None:
        for cap, data in data_in:
            stash.append((cap.time, data))
        for cap, _ in clock_in:
            notificator.notify_at(cap)
        for cap in notificator:
            session = output.session(cap)
            keep = []
            for t, data in stash:
                if less_equal(t, cap.time):
                    session.give_batch(data)
                else:
                    keep.append((t, data))
            stash[:] = keep

    return generic.binary_notify(stream, clock, Pipeline, Pipeline, name, [], logic)
