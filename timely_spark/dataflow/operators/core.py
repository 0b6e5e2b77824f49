"""Stateless operators: one call per batch into C-level loops where possible.

None of these holds a capability: each output batch is sent at the time of the
input batch it came from, while that batch is held.  The per-record operators are
thin wrappers over :func:`~.pipe.pipe`, the batch-at-a-time one.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, Callable, Iterable, Union

import pyarrow.compute as pc

from ..channels import Exchange, Pipeline
from ..operator import OperatorBuilder
from . import columns
from .pipe import pipe

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["map", "flat_map", "filter", "map_batches", "inspect", "inspect_time",
           "inspect_batch", "exchange", "broadcast", "concat", "concatenate"]


def map(stream: "Stream", f: Callable[[Any], Any], name: str = "Map") -> "Stream":
    """Apply ``f`` to every record; the result is sent at the record's time.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([1, 2]).map(str).inspect(print))
    1
    2
    """
    return pipe(stream, name, lambda t, data: list(builtins.map(f, data)))


def flat_map(stream: "Stream", f: Callable[[Any], Iterable[Any]], name: str = "FlatMap") -> "Stream":
    """Replace every record with the records of the iterable ``f(record)``.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([2, 3]).flat_map(range).inspect(print))
    0
    1
    0
    1
    2
    """
    return pipe(stream, name, lambda t, data: [y for x in data for y in f(x)])


def filter(stream: "Stream", predicate: Union[Callable[[Any], bool], pc.Expression], name: str = "Filter") -> "Stream":
    """Keep the records for which ``predicate(record)`` is true.  Given a
    ``pyarrow.compute`` expression instead, keep the rows of each record batch for which
    it is true (:func:`~.columns.filter_rows`).

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream(range(6)).filter(lambda x: x % 3 == 0).inspect(print))
    0
    3
    """
    if isinstance(predicate, pc.Expression):
        return columns.filter_rows(stream, predicate, name)
    return pipe(stream, name, lambda t, data: list(builtins.filter(predicate, data)))


def map_batches(stream: "Stream", f: Callable[[list], list], name: str = "MapBatches") -> "Stream":
    """Replace every batch with the list ``f(batch)`` (one call per batch, not per
    record; ``f`` must not mutate its argument).

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([3, 1, 2]).map_batches(sorted).inspect(print))
    1
    2
    3
    """
    return pipe(stream, name, lambda t, data: f(data))


def inspect(stream: "Stream", f: Callable[[Any], Any], name: str = "Inspect") -> "Stream":
    """Call ``f(record)`` for every record and pass the stream on unchanged.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream("ab").inspect(print))
    a
    b
    """
    def fn(t: Any, data: list) -> list:
        for x in data:
            f(x)
        return data

    return pipe(stream, name, fn)


def inspect_time(stream: "Stream", f: Callable[[Any, Any], Any], name: str = "InspectTime") -> "Stream":
    """Call ``f(time, record)`` for every record and pass the stream on unchanged.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream("ab").inspect_time(lambda t, x: print(t, x)))
    0 a
    0 b
    """
    def fn(t: Any, data: list) -> list:
        for x in data:
            f(t, x)
        return data

    return pipe(stream, name, fn)


def inspect_batch(stream: "Stream", f: Callable[[Any, list], Any], name: str = "InspectBatch") -> "Stream":
    """Call ``f(time, batch)`` for every batch and pass the stream on unchanged.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream(range(3)).inspect_batch(lambda t, xs: print(t, xs)))
    0 [0, 1, 2]
    """
    def fn(t: Any, data: list) -> list:
        f(t, data)
        return data

    return pipe(stream, name, fn)


def exchange(stream: "Stream", key: Callable[[Any], int], name: str = "Exchange") -> "Stream":
    """Send every record to worker ``key(record) % peers``; ``key`` must give the same
    int for the same record on every worker (:func:`~..channels.stable_hash` does).

    >>> import timely_spark as ts
    >>> def work(w):
    ...     w.dataflow(lambda s: s.to_stream(range(4)).exchange(lambda x: x)
    ...                .inspect(lambda x: w.index == x % 2 or print("misrouted")))
    >>> ts.execute(work, threads=2)
    [None, None]
    """
    return pipe(stream, name, lambda t, data: data, pact=Exchange(key))


def broadcast(stream: "Stream", name: str = "Broadcast") -> "Stream":
    """Send every record to every worker.

    >>> import timely_spark as ts
    >>> def work(w):
    ...     seen = []
    ...     w.dataflow(lambda s: s.to_stream([w.index]).broadcast().inspect(seen.append))
    ...     w.step_while(lambda: len(seen) < 2, timeout=10)
    ...     return sorted(seen)
    >>> ts.execute(work, threads=2)
    [[0, 1], [0, 1]]
    """
    return pipe(stream, name, lambda t, data: data, broadcast=True)


def concatenate(scope: Any, streams: Iterable["Stream"], name: str = "Concatenate") -> "Stream":
    """One stream with the records of all ``streams`` (all of ``scope``).

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.concatenate([s.to_stream([1]), s.to_stream([2])]).inspect(print))
    1
    2
    """
    b = OperatorBuilder(scope, name)
    inputs = [(inp.queue, inp.take) for inp in (b.new_input(s, Pipeline) for s in streams)]
    out, result = b.new_output()
    push = out.unstable_push

    def logic() -> None:
        for q, take in inputs:
            if q:                        # (an empty input costs no call)
                for t, data in take():
                    push(t, data)

    b.build(logic, initial_capabilities=False)
    return result


def concat(stream: "Stream", other: "Stream", name: str = "Concat") -> "Stream":
    """Merge with ``other`` (of the same scope): :func:`concatenate` of the two.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([1]).concat(s.to_stream([2])).inspect(print))
    1
    2
    """
    return concatenate(stream.scope, [stream, other], name)
