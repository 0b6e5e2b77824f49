"""Stateless operators: one call per batch into C-level loops where possible.

None of these holds a capability: each output batch is sent at the time of the
input batch it came from, while that batch is held.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..channels import Exchange, Pipeline
from ..operator import OperatorBuilder

__all__ = ["pipe", "map", "flat_map", "filter", "map_batches", "inspect", "inspect_time",
           "inspect_batch", "exchange", "broadcast", "concatenate"]

_builtin_map = map
_builtin_filter = filter


def pipe(stream: Any, name: str, fn: Callable[[Any, list], Optional[list]], pact: Any = None,
         broadcast: bool = False) -> Any:
    """An operator that turns each input batch into ``fn(time, batch)`` (None or empty: nothing)."""
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    out, result = b.new_output(broadcast=broadcast)
    q = inp.queue
    consumed = inp.consumed.update
    push = out.push

    def logic() -> None:
        while q:
            t, data = q.popleft()
            consumed(t, len(data))
            r = fn(t, data)
            if r:
                push(t, r)

    b.build(logic, initial_capabilities=False)
    return result


def map(stream: Any, f: Callable[[Any], Any], name: str = "Map") -> Any:
    return pipe(stream, name, lambda t, data: list(_builtin_map(f, data)))


def flat_map(stream: Any, f: Callable[[Any], Any], name: str = "FlatMap") -> Any:
    return pipe(stream, name, lambda t, data: [y for x in data for y in f(x)])


def filter(stream: Any, predicate: Callable[[Any], bool], name: str = "Filter") -> Any:
    return pipe(stream, name, lambda t, data: list(_builtin_filter(predicate, data)))


def map_batches(stream: Any, f: Callable[[list], list], name: str = "MapBatches") -> Any:
    return pipe(stream, name, lambda t, data: f(data))


def inspect(stream: Any, f: Callable[[Any], Any], name: str = "Inspect") -> Any:
    def fn(t: Any, data: list) -> list:
        for x in data:
            f(x)
        return data

    return pipe(stream, name, fn)


def inspect_time(stream: Any, f: Callable[[Any, Any], Any], name: str = "InspectTime") -> Any:
    def fn(t: Any, data: list) -> list:
        for x in data:
            f(t, x)
        return data

    return pipe(stream, name, fn)


def inspect_batch(stream: Any, f: Callable[[Any, list], Any], name: str = "InspectBatch") -> Any:
    def fn(t: Any, data: list) -> list:
        f(t, data)
        return data

    return pipe(stream, name, fn)


def exchange(stream: Any, key: Callable[[Any], int], name: str = "Exchange") -> Any:
    return pipe(stream, name, lambda t, data: data, pact=Exchange(key))


def broadcast(stream: Any, name: str = "Broadcast") -> Any:
    return pipe(stream, name, lambda t, data: data, broadcast=True)


def concatenate(scope: Any, streams: list, name: str = "Concatenate") -> Any:
    b = OperatorBuilder(scope, name)
    inputs = [b.new_input(s, Pipeline) for s in streams]
    out, result = b.new_output()
    push = out.push

    def logic() -> None:
        for inp in inputs:
            for t, data in inp.take():
                push(t, data)

    b.build(logic, initial_capabilities=False)
    return result
