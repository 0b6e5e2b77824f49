"""Per-time aggregation: accumulate (and count), aggregate by key, state_machine.

Each holds a capability per time with data and emits once that time is complete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from ...progress import sort_key
from ..channels import Exchange, Pipeline, stable_hash
from . import generic

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["count", "accumulate", "aggregate", "state_machine"]


def _key_route(key: Optional[Callable[[Any], int]]) -> Exchange:
    route = key or stable_hash
    return Exchange(lambda kv: route(kv[0]))


def _emit_complete(frontier: Any, held: dict, emit: Callable[[Any, Any, Any], None]) -> None:
    """Emit, earliest first, every held time the frontier has passed."""
    done = [t for t in held if not frontier.less_equal(t)]
    for t in sorted(done, key=sort_key):
        cap, state = held.pop(t)
        emit(cap, t, state)
        cap.drop()


def accumulate(stream: "Stream", init: Any, fold: Callable[[Any, list], Any], name: str = "Accumulate") -> "Stream":
    """Fold each time's batches on this worker into ``fold(acc, batch) -> acc``
    (starting from ``init``); emit the result once the time is complete.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([1, 2, 3]).accumulate(0, lambda a, b: a + sum(b)).inspect(print))
    6
    """
    def constructor(cap: Any, info: Any) -> Callable:
        cap.drop()
        held: dict[Any, list] = {}     # time -> [capability, acc]

        def logic(input: Any, output: Any) -> None:
            for icap, data in input:
                entry = held.get(icap.time)
                if entry is None:
                    entry = held[icap.time] = [icap.retain(), init]
                entry[1] = fold(entry[1], data)
            _emit_complete(input.frontier, held, lambda c, t, acc: output.session(c).give(acc))

        return logic

    return generic.unary_frontier(stream, Pipeline, name, constructor)


def count(stream: "Stream", name: str = "Count") -> "Stream":
    """The number of records at each time on this worker, once the time is complete.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream("abc").count().inspect(print))
    3
    """
    return accumulate(stream, 0, lambda acc, batch: acc + len(batch), name)


def aggregate(stream: "Stream", fold: Callable[[Any, Any, Any], Any], emit: Callable[[Any, Any], Any],
              key: Optional[Callable[[Any], int]] = None, name: str = "Aggregate") -> "Stream":
    """Group ``(key, value)`` records by key across workers: ``fold(key, value, acc)``
    (``acc`` starts as None) and, once the time is complete, ``emit(key, acc)``.
    ``key`` maps a key to an int that picks its worker (default: a stable hash).

    >>> import timely_spark as ts
    >>> def build(s):
    ...     words = s.to_stream(["a", "b", "a"]).map(lambda w: (w, 1))
    ...     words.aggregate(lambda k, v, acc: (acc or 0) + v, lambda k, acc: (k, acc)).inspect(print)
    >>> _ = ts.example(build)
    ('a', 2)
    ('b', 1)
    """
    def constructor(cap: Any, info: Any) -> Callable:
        cap.drop()
        held: dict[Any, list] = {}     # time -> [capability, {key: acc}]

        def logic(input: Any, output: Any) -> None:
            for icap, data in input:
                entry = held.get(icap.time)
                if entry is None:
                    entry = held[icap.time] = [icap.retain(), {}]
                aggs = entry[1]
                for k, v in data:
                    aggs[k] = fold(k, v, aggs.get(k))

            def out(c: Any, t: Any, aggs: dict) -> None:
                output.session(c).give_batch([emit(k, a) for k, a in aggs.items()])

            _emit_complete(input.frontier, held, out)

        return logic

    return generic.unary_frontier(stream, _key_route(key), name, constructor)


def state_machine(stream: "Stream", fold: Callable[[Any, Any, Any], tuple[Any, Iterable[Any]]],
                  key: Optional[Callable[[Any], int]] = None, name: str = "StateMachine") -> "Stream":
    """Per-key state across times: for each ``(key, value)``, in time order,
    ``fold(key, value, state) -> (new_state, outputs)`` (``state`` starts as None;
    a new state of None forgets the key).  Keys are exchanged like :func:`aggregate`.

    >>> import timely_spark as ts
    >>> def running_sum(k, v, state):
    ...     total = (state or 0) + v
    ...     return total, [(k, total)]
    >>> _ = ts.example(lambda s: s.to_stream([("x", 1), ("x", 2)]).state_machine(running_sum).inspect(print))
    ('x', 1)
    ('x', 3)
    """
    def constructor(cap: Any, info: Any) -> Callable:
        cap.drop()
        held: dict[Any, list] = {}     # time -> [capability, [records]]
        states: dict[Any, Any] = {}

        def logic(input: Any, output: Any) -> None:
            for icap, data in input:
                entry = held.get(icap.time)
                if entry is None:
                    entry = held[icap.time] = [icap.retain(), []]
                entry[1].extend(data)

            def run(c: Any, t: Any, records: list) -> None:
                session = output.session(c)
                for k, v in records:
                    new, outputs = fold(k, v, states.get(k))
                    if new is None:
                        states.pop(k, None)
                    else:
                        states[k] = new
                    session.give_batch(outputs)

            _emit_complete(input.frontier, held, run)

        return logic

    return generic.unary_frontier(stream, _key_route(key), name, constructor)
