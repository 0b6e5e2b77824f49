"""Per-time aggregation: accumulate (and count), aggregate by key, state_machine."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ...progress import sort_key
from ..channels import Exchange, Pipeline, stable_hash
from . import generic

__all__ = ["accumulate", "aggregate", "state_machine"]


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


def accumulate(stream: Any, init: Any, fold: Callable[[Any, list], Any], name: str = "Accumulate") -> Any:
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

    return generic.unary(stream, Pipeline, name, constructor, frontier=True)


def aggregate(stream: Any, fold: Callable[[Any, Any, Any], Any], emit: Callable[[Any, Any], Any],
              key: Optional[Callable[[Any], int]] = None, name: str = "Aggregate") -> Any:
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

    return generic.unary(stream, _key_route(key), name, constructor, frontier=True)


def state_machine(stream: Any, fold: Callable[[Any, Any, Any], Any], key: Optional[Callable[[Any], int]] = None,
                  name: str = "StateMachine") -> Any:
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

    return generic.unary(stream, _key_route(key), name, constructor, frontier=True)
