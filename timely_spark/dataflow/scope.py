"""Scope: where a dataflow is built -- inputs, loops, regions and nested scopes."""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from ..progress import Product, Source
from .input import new_input, to_stream
from .operators.core import concatenate
from .operators.feedback import feedback
from .stream import Stream
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

    >>> import timely_spark as ts
    >>> ts.example(lambda scope: (scope.name, scope.index, scope.peers, scope.minimum))
    ('Dataflow0', 0, 1, 0)
    """

    new_input = new_input
    to_stream = to_stream
    concatenate = concatenate
    feedback = feedback

    def __init__(self, graph: Subgraph, parent: Optional["Scope"] = None) -> None:
        self._graph = graph
        self.parent = parent

    @property
    def subgraph(self) -> Subgraph:
        """The scope at run time (the engine's view: children, edges, progress)."""
        return self._graph

    def new_stream(self, source: Source, pushers: list, is_broadcast: bool = False) -> Stream:
        """A stream of this scope fed at ``source`` (operator builders make them)."""
        return Stream(self, source, pushers, is_broadcast)

    @property
    def name(self) -> str:
        """The scope's name (the dataflow's, or the nested scope's)."""
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
        """The worker building this scope."""
        return self._graph.worker

    @property
    def minimum(self) -> Any:
        """The least time of this scope."""
        return self._graph.min_time

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
        >>> _ = ts.example(lambda s: s.region(lambda r: s.to_stream([1]).enter(r).map(lambda x: x + 1).leave())
        ...                .inspect(print))
        2
        """
        outer = self._graph
        inner = Subgraph(outer.worker, outer, name, outer.min_time)
        scope = Scope(inner, self)
        result = build(scope)
        inner.finalize()
        return result

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, worker {self.index} of {self.peers})"
