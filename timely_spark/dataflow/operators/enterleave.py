"""Moving streams between a scope and a scope nested in it.

``enter`` converts each batch's time to the inner scope's (``Product(t, 0)`` for
a loop) on the sending worker and counts it, in the inner scope, as consumed at
the scope input; ``leave`` converts back.  Neither is an operator: both are
pushers on the producing stream, so crossing a scope costs no scheduling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import BuildError
from ...progress import Source, Target
from ..ports import record_count
from .pipe import pipe

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["enter", "leave"]


def enter(stream: "Stream", scope: Any) -> "Stream":
    """Bring this stream into ``scope``, a scope nested directly in the stream's scope
    (times become the inner scope's: ``Product(t, 0)`` in a loop).

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.iterative(lambda i: s.to_stream([1]).enter(i)
    ...                .inspect_time(lambda t, x: print(t, x)).leave()))
    Product(0, 0) 1
    """
    inner = scope.subgraph
    outer = stream.scope.subgraph
    if inner.parent is not outer:
        raise BuildError(
            f"enter: scope {scope.name!r} is not nested directly in the stream's scope {stream.scope.name!r}")
    if stream.is_broadcast:  # broadcast first, so that each worker enters what it received
        stream = pipe(stream, "Broadcasted", lambda t, data: data)
    i = inner.new_scope_input()
    outer.add_edge(stream.source, Target(inner.index, i))
    pushers: list = []
    to_inner = inner.to_inner
    count = inner.count_entered
    activate = inner.activate

    def ingress(t: Any, data: list) -> None:
        it = to_inner(t)
        count(i, it, record_count(data))
        for push in pushers:
            push(it, data)
        activate()

    stream.connect(ingress)
    return scope.new_stream(Source(0, i), pushers)


def leave(stream: "Stream") -> "Stream":
    """Take this stream out of its nested scope into the parent scope (times become
    the parent's: the loop round is dropped).

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.region(lambda r: s.to_stream([1]).enter(r).leave())
    ...                .inspect_time(lambda t, x: print(t, x)))
    0 1
    """
    scope = stream.scope
    inner = scope.subgraph
    if inner.parent is None or scope.parent is None:
        raise BuildError("leave: the stream is in a dataflow's top scope; there is nothing to leave to")
    if stream.is_broadcast:
        stream = pipe(stream, "Broadcasted", lambda t, data: data)
    o = inner.new_scope_output()
    inner.add_edge(stream.source, Target(0, o))
    pushers: list = []
    to_outer = inner.to_outer

    def egress(t: Any, data: list) -> None:
        ot = to_outer(t)
        for push in pushers:
            push(ot, data)

    stream.connect(egress)
    return scope.parent.new_stream(Source(inner.index, o), pushers)
