"""pipe: the batch-at-a-time operator that the stateless operators are made of."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..operator import OperatorBuilder

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["pipe"]


def pipe(stream: "Stream", name: str, fn: Callable[[Any, list], Optional[list]], pact: Any = None,
         broadcast: bool = False) -> "Stream":
    """An operator that turns each input batch into ``fn(time, batch)`` at the same
    time (None or an empty list: nothing).  ``pact`` routes the input (None: stays
    on this worker); ``broadcast`` marks the output as broadcast.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: pipe(s.to_stream([1, 2]), "Sum", lambda t, b: [sum(b)]).inspect(print))
    3
    """
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    out, result = b.new_output(broadcast=broadcast)
    take = inp.take                      # counts what it takes as consumed
    push = out.unstable_push

    def logic() -> None:
        for t, data in take():
            r = fn(t, data)
            if r:
                push(t, r)

    b.build(logic, initial_capabilities=False)
    return result
