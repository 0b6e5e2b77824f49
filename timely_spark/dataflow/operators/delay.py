"""Operators that move records in time: delay, delay_total, reclock.

Snapshots at ``t`` keep the records each holds because of input at times before ``t``
(for ``delay``, records it must still send at times ``>= t``: their capabilities are
re-created from the initial capability on a restore) and not the records that came at
``t`` or later (the restored run sends them again); so each keeps, per held record, the
time it came at.  ``delay`` and ``delay_total`` store each group of held records with
the index of the worker holding it as its key hash: restored into the same worker
count, every record stays on its worker; into another, worker ``i``'s records go to
worker ``i % workers`` (the inputs are not exchanged, so any worker may send them).
``reclock`` keeps its state per worker (its clock decides where records are released):
restored into the same worker count only.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Callable

from ...progress import less_equal, sort_key
from ..channels import Pipeline
from ..operator import OperatorBuilder
from . import generic
from .op_state import StateHooks, before, entries_of, keyed_entries

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
    elements: dict[Any, list] = {}     # new time -> [(time it came at, [records])]

    def logic(input: Any, output: Any, notificator: Any) -> None:
        for cap, data in input:
            _arrive(data, cap.time, f, elements, lambda nt: notificator.notify_at(cap.delayed(nt)))
        for cap in notificator:
            output.session(cap).give_batch([x for _, xs in elements.pop(cap.time, ()) for x in xs])

    index, peers = stream.scope.index, stream.scope.peers

    def save(t: Any) -> Any:
        return _saved(elements, t, index, peers)

    def restore(table: Any) -> list:
        for nt, at, xs in entries_of(table, name, peers):
            elements.setdefault(nt, []).append((at, xs))
        return list(elements)          # the times to be notified at again

    return generic.unary_notify(stream, Pipeline, name, [], logic, state=StateHooks(save, restore, keyed=True))


def delay_total(stream: "Stream", f: Callable[[Any, Any], Any], name: str = "DelayTotal") -> "Stream":
    """:func:`delay` for totally ordered times (ints, tuples), with a heap instead of a
    notificator.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([5, 2]).delay_total(lambda x, t: x).inspect_time(lambda t, x: print(t, x)))
    2 2
    5 5
    """
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, Pipeline)
    out, result = b.new_output()
    heap: list = []          # (time, seq, capability); a capability per distinct time
    buckets: dict[Any, list] = {}        # new time -> [(time it came at, [records])]
    seq = [0]

    def hold(nt: Any, cap: Any) -> None:
        seq[0] += 1
        heapq.heappush(heap, (sort_key(nt), seq[0], cap.delayed(nt)))

    index, peers = stream.scope.index, stream.scope.peers

    def save(t: Any) -> Any:
        return _saved(buckets, t, index, peers)

    initial = b.initial_capability()
    for nt, at, xs in entries_of(b.keep_state(save, keyed=True), name, peers):
        if nt not in buckets:
            hold(nt, initial)
            buckets[nt] = []
        buckets[nt].append((at, xs))
    initial.drop()

    def logic() -> None:
        for icap, data in inp:
            _arrive(data, icap.time, f, buckets, lambda nt: hold(nt, icap))
        frontier = inp.frontier
        while heap and not frontier.less_equal(heap[0][2].time):
            _, _, c = heapq.heappop(heap)
            out.session(c).give_batch([x for _, xs in buckets.pop(c.time) for x in xs])
            c.drop()

    b.build(logic, notify=True)
    return result


def _arrive(data: Any, t: Any, f: Callable[[Any, Any], Any], buckets: dict, hold: Callable[[Any], None]) -> None:
    """File one batch of records that came at ``t`` under their new times ``f(x, t)``:
    ``buckets[nt]`` gets ``(t, records)``; ``hold(nt)`` is called once for each new time
    not held yet (the caller keeps a capability or a notification for it)."""
    arrived: dict[Any, list] = {}
    for x in data:
        nt = f(x, t)
        bucket = arrived.get(nt)
        if bucket is None:
            bucket = arrived[nt] = []
            if nt not in buckets:
                hold(nt)
                buckets[nt] = []
        bucket.append(x)
    for nt, xs in arrived.items():
        buckets[nt].append((t, xs))


def _saved(buckets: dict, t: Any, index: int, peers: int) -> Any:
    """The held records that came before ``t``, keyed by this worker's index."""
    held = [(nt, at, xs) for nt, groups in buckets.items() for at, xs in groups if before(at, t)]
    return keyed_entries([index] * len(held), held, peers)


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
    stash: list[tuple[Any, list]] = []     # (time, records) not yet released

    def save(t: Any) -> list:
        return [(time, data) for time, data in stash if before(time, t)]

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

    return generic.binary_notify(stream, clock, Pipeline, Pipeline, name, [], logic,
                                 state=StateHooks(save, stash.extend))
