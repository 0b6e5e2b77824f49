"""Moving streams between a scope and a scope nested in it.

``enter`` converts each batch's time to the inner scope's (``Product(t, 0)`` for
a loop) on the sending worker and counts it, in the inner scope, as consumed at
the scope input; ``leave`` converts back.  Neither is an operator: both are
pushers on the producing stream's tee, so crossing a scope costs no scheduling.
"""

from __future__ import annotations

from typing import Any

from ...progress import Source, Target
from . import core

__all__ = ["enter", "leave"]


def enter(stream: Any, scope: Any) -> Any:
    from ..stream import Stream

    inner = scope._graph
    outer = stream.scope._graph
    if inner.parent is not outer:
        raise ValueError(
            f"enter: scope {scope.name!r} is not nested directly in the stream's scope {stream.scope.name!r}")
    if stream._broadcast:  # broadcast first, so that each worker enters what it received
        stream = core.pipe(stream, "Broadcasted", lambda t, data: data)
    i = inner.new_scope_input()
    outer.add_edge(stream._source, Target(inner.index, i))
    tee: list = []
    count = inner.ingress[i].update
    to_inner = inner.to_inner
    activate = inner._activate_self

    def ingress(t: Any, data: list) -> None:
        it = to_inner(t)
        count(it, len(data))
        for push in tee:
            push(it, data)
        activate()

    stream._tee.append(ingress)
    return Stream(scope, Source(0, i), tee)


def leave(stream: Any) -> Any:
    from ..stream import Stream

    scope = stream.scope
    inner = scope._graph
    if inner.parent is None or scope.parent is None:
        raise ValueError("leave: the stream is in a dataflow's top scope; there is nothing to leave to")
    if stream._broadcast:
        stream = core.pipe(stream, "Broadcasted", lambda t, data: data)
    o = inner.new_scope_output()
    inner.add_edge(stream._source, Target(0, o))
    tee: list = []
    to_outer = inner.to_outer

    def egress(t: Any, data: list) -> None:
        ot = to_outer(t)
        for push in tee:
            push(ot, data)

    stream._tee.append(egress)
    return Stream(scope.parent, Source(inner.index, o), tee)
