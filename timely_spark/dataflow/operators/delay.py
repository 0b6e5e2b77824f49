"""Operators that move records in time: delay, delay_total, reclock."""

from __future__ import annotations

import heapq
from typing import Any, Callable

from ...progress import less_equal, sort_key
from ..channels import Pipeline
from . import generic

__all__ = ["delay", "delay_total", "reclock"]


def delay(stream: Any, f: Callable[[Any, Any], Any], name: str = "Delay") -> Any:
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


def delay_total(stream: Any, f: Callable[[Any, Any], Any], name: str = "DelayTotal") -> Any:
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

    return generic.unary(stream, Pipeline, name, constructor, frontier=True)


def reclock(stream: Any, clock: Any, name: str = "Reclock") -> Any:
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
