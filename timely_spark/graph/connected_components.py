"""Connected components by label propagation in a timely loop.

Each edge lives on the worker that owns its first vertex (``a % peers``).  Once all
edges are in, each worker contracts its edges with a union-find; inside the timely
loop a component's label is the smallest id it has heard of, and whenever it drops
the new label goes to the component's vertices owned by other workers.  The loop
ends when no label changes anywhere: only boundary labels cross the mesh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..dataflow import OperatorBuilder
from .components_columnar import snapshot_components
from .union_find import find_root

if TYPE_CHECKING:
    from ..dataflow import Scope, Stream

__all__ = ["label_propagation", "connected_components"]

INF = float("inf")


def label_propagation(scope: "Scope", edges: "Stream") -> "Stream":
    """``edges``: a stream of ``(a, b)`` pairs (undirected: both directions are used).
    Returns a stream of ``(vertex, smallest vertex id in its component)`` at the
    edges' time, one record per vertex, once the edges' time is complete.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: label_propagation(s, s.to_stream([(1, 2), (3, 2), (5, 6)]))
    ...                .inspect_batch(lambda t, rows: print(sorted(rows))))
    [(1, 1), (2, 1), (3, 1), (5, 5), (6, 5)]
    """
    both = edges.flat_map(lambda e: (e, (e[1], e[0])), name="BothWays")

    def loop(inner: Any) -> Any:
        handle, cycle = inner.feedback(1)
        b = OperatorBuilder(inner, "Propagate")
        edge_in = b.new_input(both.enter(inner), lambda e: e[0])
        proposal_in = b.new_input(cycle, lambda p: p[0])
        out_proposals, proposals = b.new_output("proposals")
        out_labels, labels = b.new_output("labels")
        held: dict[str, Any] = {"initial": b.initial_capability()}
        peers, index = inner.peers, inner.index
        parent: dict = {}
        label: dict = {}                  # root -> smallest id heard of
        members: dict = {}                # root -> vertices this worker owns
        boundary: dict = {}               # root -> vertices owned by other workers

        def contract() -> None:
            for v in list(parent):
                find_root(parent, v)
            for v in parent:
                r = parent[v]
                label[r] = min(label.get(r, v), v)
                (members if v % peers == index else boundary).setdefault(r, []).append(v)

        def send(cap: Any, roots: Any) -> None:
            out_proposals.session(cap).give_batch([(w, label[r]) for r in roots for w in boundary.get(r, ())])
            out_labels.session(cap).give_batch([(v, label[r]) for r in roots for v in members.get(r, ())])

        def logic() -> None:
            for _, batch in edge_in:
                for a, c in batch:
                    ra, rc = find_root(parent, a), find_root(parent, c)
                    if ra != rc:                       # the smaller root wins
                        parent[max(ra, rc)] = min(ra, rc)
                    parent.setdefault(a, a)            # every vertex is known (roots point to themselves)
                    parent.setdefault(c, c)
            initial = held["initial"]
            if initial is not None and edge_in.frontier.is_empty():   # every edge is in
                contract()
                send(initial, list(label))
                initial.drop()
                held["initial"] = None
            if held["initial"] is None:
                for cap, batch in proposal_in:
                    changed = set()
                    for v, proposed in batch:
                        r = find_root(parent, v)
                        if proposed < label.get(r, proposed + 1):
                            label[r] = proposed
                            changed.add(r)
                    if changed:
                        send(cap, changed)

        b.build(logic, notify=True)
        proposals.connect_loop(handle)
        return labels.leave()

    def keep_min(acc: dict, batch: list) -> dict:
        for v, lab in batch:
            if lab < acc.get(v, INF):
                acc[v] = lab
        return acc

    return scope.iterative(loop).accumulate({}, keep_min).flat_map(lambda labels: labels.items())


def connected_components(edges: Any, src: str = "src", dst: str = "dst", workers: Optional[int] = None,
                         processes: int = 1, timeout: Optional[float] = None, stats: Optional[dict] = None) -> Any:
    """``(vertex, component)`` for every vertex of an edge list, ``component`` being the
    smallest vertex id in the vertex's component (vectorized: see :mod:`.components_columnar`).

    ``edges`` is a Spark DataFrame (run on ``workers`` barrier workers, default 2;
    returns a DataFrame lazily), or a ``pyarrow.Table`` / pandas DataFrame (run on
    ``workers`` local worker threads, default 1, in each of ``processes`` processes;
    returns the same kind, sorted by vertex).  Ids may be integers of any width,
    strings, binaries, dates (see :mod:`.front`): the result holds the caller's ids,
    and "smallest" is the order of their type (byte order for strings).  Missing
    columns, null ids or ids of a type not taken raise
    :class:`~timely_spark.errors.GraphInputError`, a bad ``workers``/``processes``/``timeout``
    :class:`~timely_spark.errors.ParameterError` (on Spark, null ids come from the
    workers as ``WorkerError`` with the GraphInputError as ``cause``); no edges give an
    empty result.  ``timeout`` bounds the run (:class:`~timely_spark.errors.RunTimeout`).
    ``stats`` (a dict; on Spark) receives where each task's time went, as
    ``ts.spark.transform``'s.

    >>> import pyarrow as pa
    >>> connected_components(pa.table({"src": [1, 3, 5], "dst": [2, 2, 6]})).to_pydict()
    {'vertex': [1, 2, 3, 5, 6], 'component': [1, 1, 1, 5, 5]}
    >>> connected_components(pa.table({"src": ["bo", "cy"], "dst": ["al", "di"]})).to_pydict()
    {'vertex': ['al', 'bo', 'cy', 'di'], 'component': ['al', 'al', 'cy', 'cy']}
    """
    from .front import ID, Algorithm, run_graph

    algorithm = Algorithm(lambda batches, a, b, seeds: snapshot_components(batches, a, b, once=True),
                          [("vertex", ID), ("component", ID)])
    return run_graph(edges, algorithm, src, dst, workers, processes, timeout, stats=stats)
