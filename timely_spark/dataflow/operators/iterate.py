"""iterate: the fixpoint of a loop body over a changelog, kept current as the input changes.

Differential dataflow's ``iterate``, built from the engine's loop scope: inside
``scope.iterative`` (times ``Product(outer, round)``) the body's input collection is the
entered input at round 0 plus, fed back one round later, the body's output minus the
input -- so the collection at round ``r + 1`` is the body applied to the collection at
round ``r``.  The body's output leaves the loop, summed over the rounds of each outer
time: the changelog of the fixpoint.  The traces of the changelog operators in the body
keep the rounds of earlier outer times apart, so a new outer time re-derives only what
its changes touch, round by round; the loop stops when a round changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ...errors import BuildError
from ...progress import Product
from .changelog import diffs, with_diffs
from .exchange_by import check_batch

if TYPE_CHECKING:
    from ..scope import Scope
    from ..stream import Stream

__all__ = ["iterate", "negate"]


def negate(stream: "Stream", name: str = "Negate") -> "Stream":
    """This changelog with every diff negated (a batch without ``diff`` gets -1s).

    >>> import pyarrow as pa, timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream(pa.table({"x": [1], "diff": [2]})).negate()
    ...                .inspect(lambda b: print(b.to_pylist())))
    [{'x': 1, 'diff': -2}]
    """
    def flip(batches: list) -> list:
        return [with_diffs(b, -diffs(b, name)) for b in (check_batch(x, name) for x in batches)]
    return stream.map_batches(flip, name=name)


def iterate(stream: "Stream", body: Callable[["Stream", "Scope"], "Stream"], name: str = "Iterate") -> "Stream":
    """The changelog of the fixpoint of ``body`` started from this changelog's collection.

    ``body(collection, scope)`` builds, inside a loop scope, the next approximation from
    ``collection`` (a changelog at ``Product(outer, round)`` times); other streams of the
    enclosing scope come in with ``.enter(scope)``.  The body may use ``consolidate``,
    ``distinct``, ``group_by(...).reduce``/``top_k``/``argmin``/``argmax``, running joins
    of every kind and row-wise operators (``select``, ``filter``, ``with_columns``,
    ``concat``): they are exact at ``Product`` times.  The output, at each completed
    outer time, is the change of the fixpoint (one consolidated changelog; nothing for an
    outer time whose input changes nothing).

    Contract: at every completed outer time the folded output equals ``X`` with
    ``X = body(X)`` reached from the input collection at that time by applying ``body``
    until nothing changes (the body must reach a fixpoint: a body that never stops
    changing never completes the time).  Deletions are exact, non-monotone bodies too.
    The rounds of an outer time stop as soon as one changes nothing; work per outer time
    follows the changes of the derivations, not the size of the fixpoint.  Nested
    ``iterate`` is refused with a BuildError.

    >>> import pyarrow as pa, pyarrow.compute as pc, timely_spark as ts
    >>> edges = pa.table({"node": [1, 2, 3], "dst": [2, 3, 1]})
    >>> def reach(s):
    ...     roots, links = s.to_stream(pa.table({"node": [1], "diff": [1]})), s.to_stream(edges)
    ...     def body(nodes, inner):
    ...         step = nodes.join(links.enter(inner), "node", running=True).select(node="dst", diff="diff")
    ...         return step.concat(roots.enter(inner)).distinct()
    ...     roots.iterate(body).inspect(lambda b: print(sorted(b.column("node").to_pylist())))
    >>> _ = ts.example(reach)
    [1, 2, 3]
    """
    if isinstance(stream.scope.minimum, Product):
        raise BuildError(f"operator {name!r}: iterate inside iterate is not supported; iterate over the "
                         "product of both loops' variables in one loop instead")

    def loop(scope: "Scope") -> "Stream":
        handle, cycle = scope.feedback(1)
        source = stream.enter(scope)
        result = body(source.concat(cycle), scope)
        result.concat(negate(source, f"{name}Negate")).consolidate(name=f"{name}Next").connect_loop(handle)
        return result.leave()

    return stream.scope.iterative(loop, name=name).consolidate(name=name)
