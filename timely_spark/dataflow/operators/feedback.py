"""Feedback: the operator on every cycle, advancing each time by a path summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import BuildError
from ...progress import advance
from ..channels import Pipeline
from ..operator import OperatorBuilder
from ..ports import record_count

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["LoopHandle", "feedback", "connect_loop"]


class LoopHandle:
    """The input end of a feedback edge, made by ``scope.feedback``: connect it once
    with ``stream.connect_loop(handle)``.  ``summary`` is what it adds to each time."""

    def __init__(self, builder: OperatorBuilder, output: Any, summary: Any, name: str) -> None:
        self._builder = builder
        self._output = output
        self.summary = summary
        self.name = name
        self.connected = False

    def connect(self, stream: "Stream") -> None:
        """Feed ``stream`` into the feedback edge (see :func:`connect_loop`)."""
        if self.connected:
            raise BuildError(f"feedback {self.name!r} is already connected")
        b = self._builder
        inp = b.new_input(stream, Pipeline)
        b.set_summary(0, 0, [self.summary])
        q = inp.queue
        consumed = inp.consumed.update
        push = self._output.unstable_push
        results_in = self.summary.results_in

        def logic() -> None:
            while q:
                t, data = q.popleft()
                consumed(t, record_count(data))
                nt = results_in(t)
                if nt is not None:  # a bounded summary drops what passes its bound
                    push(nt, data)

        b.build(logic, initial_capabilities=False)
        self.connected = True


def feedback(scope: Any, summary: Any = 1, name: str = "Feedback") -> tuple[LoopHandle, "Stream"]:
    """``(handle, stream)``: what is connected to ``handle`` (``stream.connect_loop``)
    reappears on ``stream`` with its time advanced by ``summary``.  An int advances
    the innermost coordinate (the round in a loop scope) by that much; a summary that
    does not advance time raises BuildError (the loop could not end).

    >>> import timely_spark as ts
    >>> def build(scope):
    ...     def loop(inner):
    ...         handle, cycle = inner.feedback(1)
    ...         again, done = inner.concatenate([scope.to_stream([3]).enter(inner), cycle]) \\
    ...             .map(lambda x: x - 1).branch(lambda x: x <= 0)
    ...         again.connect_loop(handle)
    ...         return done.leave()
    ...     scope.iterative(loop).inspect(print)
    >>> _ = ts.example(build)
    0
    """
    if isinstance(summary, int):
        summary = advance(scope.minimum, summary)
    if not summary.advances():
        raise BuildError(f"feedback {name!r}: summary {summary!r} does not advance time, so the loop could not end")
    b = OperatorBuilder(scope, name)
    output, stream = b.new_output()
    handle = LoopHandle(b, output, summary, name)
    scope.subgraph.add_loop(handle)
    return handle, stream


def connect_loop(stream: "Stream", handle: LoopHandle) -> None:
    """Feed this stream back into the feedback ``handle`` made by ``scope.feedback``
    (once per handle; see :func:`feedback` for an example)."""
    handle.connect(stream)
