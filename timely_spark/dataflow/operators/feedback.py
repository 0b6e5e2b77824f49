"""Feedback: the operator on every cycle, advancing each time by a path summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import BuildError
from ...progress import advance
from ..channels import Pipeline
from ..operator import OperatorBuilder

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["LoopHandle", "feedback", "connect_loop"]


class LoopHandle:
    """The input end of a feedback edge, made by ``scope.feedback``: connect it once
    with ``stream.connect_loop(handle)``.  ``summary`` is what it adds to each time.

    >>> import timely_spark as ts
    >>> def build(s):
    ...     handle, cycle = s.feedback(2)
    ...     s.to_stream([1]).concat(cycle).filter(lambda x: x < 3).map(lambda x: x + 1).connect_loop(handle)
    ...     return handle.summary.results_in(0), handle.connected     # the summary adds 2 to a time
    >>> ts.example(build)
    (2, True)
    """

    def __init__(self, builder: OperatorBuilder, output: Any, summary: Any, name: str) -> None:
        self._builder = builder
        self._output = output
        self.summary = summary
        self.name = name
        self.connected = False

    def connect(self, stream: "Stream") -> None:
        """Feed ``stream`` into the feedback edge (see :func:`connect_loop`); a second
        connection raises BuildError.

        >>> import timely_spark as ts
        >>> def build(s):
        ...     handle, cycle = s.feedback(1)
        ...     handle.connect(cycle.filter(lambda x: False))
        ...     try:
        ...         handle.connect(cycle)
        ...     except ts.BuildError as e:
        ...         return str(e)
        >>> ts.example(build)
        "feedback 'Feedback' is already connected"
        """
        if self.connected:
            raise BuildError(f"feedback {self.name!r} is already connected")
        b = self._builder
        inp = b.new_input(stream, Pipeline)
        b.set_summary(0, 0, [self.summary])
        take = inp.take                  # counts what it takes as consumed
        push = self._output.unstable_push
        results_in = self.summary.results_in

        def logic() -> None:
            for t, data in take():
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
    (once per handle; see also :func:`feedback`).  Each record comes back with its
    time advanced by the handle's summary.

    >>> import timely_spark as ts
    >>> def build(s):
    ...     handle, cycle = s.feedback(1)
    ...     s.to_stream([3]).concat(cycle).inspect_time(lambda t, x: print(t, x)) \\
    ...         .map(lambda x: x - 1).filter(lambda x: x > 0).connect_loop(handle)
    >>> _ = ts.example(build)
    0 3
    1 2
    2 1
    """
    handle.connect(stream)
