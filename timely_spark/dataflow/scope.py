"""Scope: where a dataflow is built -- inputs, loops, regions and nested scopes."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, TypeVar

from ..progress import Product, advance
from .subgraph import Subgraph

__all__ = ["Scope"]

R = TypeVar("R")


def _outer(p: Any) -> Any:
    return p[0]


def _project(summary: Any) -> Any:
    return summary.outer


class Scope:
    """A (possibly nested) scope of a dataflow under construction.

    Times in a dataflow's top scope are ints by default; ``iterative`` nests a
    scope whose times are ``Product(outer_time, round)``.
    """

    def __init__(self, graph: Subgraph, parent: Optional["Scope"] = None) -> None:
        self._graph = graph
        self.parent = parent

    @property
    def name(self) -> str:
        return self._graph.name

    @property
    def index(self) -> int:
        """This worker's index."""
        return self._graph.worker.index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self._graph.peers

    @property
    def worker(self) -> Any:
        return self._graph.worker

    @property
    def minimum(self) -> Any:
        """The least time of this scope."""
        return self._graph.min_time

    def new_input(self, name: str = "Input") -> tuple[Any, Any]:
        """``(InputHandle, Stream)``: records sent through the handle appear on the stream."""
        from .input import new_input

        return new_input(self, name)

    def to_stream(self, iterable: Iterable[Any], name: str = "ToStream") -> Any:
        """A stream of the iterable's records at the minimum time (every worker sends
        all of them).

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([1, 2]).inspect(print))
        1
        2
        """
        from .input import to_stream

        return to_stream(self, iterable, name)

    def iterative(self, build: Callable[["Scope"], R], name: str = "Iterative") -> R:
        """Build a nested loop scope with ``build(inner_scope)``; inner times are
        ``Product(outer_time, round)``.

        >>> import timely_spark as ts
        >>> def build(scope):
        ...     def loop(inner):
        ...         handle, cycle = inner.feedback(1)
        ...         body = scope.to_stream([5]).enter(inner).concat(cycle).map(lambda x: x - 1)
        ...         again, out = body.branch(lambda x: x == 0)
        ...         again.connect_loop(handle)
        ...         return out.leave()
        ...     scope.iterative(loop).inspect_time(lambda t, x: print(t, x))
        >>> _ = ts.example(build)
        0 0
        """
        outer = self._graph
        inner = Subgraph(outer.worker, outer, name, Product(outer.min_time, 0),
                         to_inner=lambda t: Product(t, 0), to_outer=_outer, project=_project)
        scope = Scope(inner, self)
        result = build(scope)
        inner.finalize()
        return result

    def region(self, build: Callable[["Scope"], R], name: str = "Region") -> R:
        """Build a nested scope with the same times, seen from outside as one operator.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.region(lambda r: s.to_stream([1]).enter(r).map(lambda x: x + 1).leave()).inspect(print))
        2
        """
        outer = self._graph
        inner = Subgraph(outer.worker, outer, name, outer.min_time)
        scope = Scope(inner, self)
        result = build(scope)
        inner.finalize()
        return result

    def feedback(self, summary: Any = 1, name: str = "Feedback") -> tuple[Any, Any]:
        """``(handle, stream)``: what is connected to ``handle`` (``stream.connect_loop``)
        reappears on ``stream`` with its time advanced by ``summary``.  An int advances
        the innermost coordinate (the round in a loop scope) by that much.
        """
        from .operators.feedback import feedback

        if isinstance(summary, int):
            summary = advance(self._graph.min_time, summary)
        if not summary.advances():
            raise ValueError(f"feedback {name!r}: summary {summary!r} does not advance time, so the loop could not end")
        return feedback(self, summary, name)

    def concatenate(self, streams: Iterable[Any], name: str = "Concatenate") -> Any:
        """One stream with the records of all ``streams``.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.concatenate([s.to_stream([1]), s.to_stream([2])]).inspect(print))
        1
        2
        """
        from .operators.core import concatenate

        return concatenate(self, list(streams), name)

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, worker {self.index} of {self.peers})"
