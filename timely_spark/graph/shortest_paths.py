"""Shortest paths from a few sources, vectorized, in a timely loop.

Edges live on the worker their ``src`` hashes to; the best known distance of each
``(vertex, source)`` lives on the worker the vertex hashes to (the same hash), so
relaxing a vertex's out-edges is local.  Each round an owner merges the proposals
it received (one row per ``(vertex, source)``, already reduced to the minimum), and
only the improved ones are relaxed and sent on: the loop ends when nothing improves.
Improvements also leave the loop, where a per-time minimum gives the result.
Loop rounds of an outer time ``T``: 0 new edges in (a restart is broadcast);
1 every worker seeds the sources found in its edges so far; 2.. relaxation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..dataflow import ExchangeBy
from ..progress import Product, less_equal
from .broadcast import broadcast_keys
from .components_columnar import GraphInputError
from .edge_input import weighted_edges
from .loop_rounds import LoopRounds
from .paths_incremental import shortest_paths_stream

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["shortest_paths", "shortest_paths_stream", "dijkstra_reference", "paths_from_seeds"]

PROPOSAL, RESTART = 0, 1


def _msgs(vertex: np.ndarray, source: np.ndarray, distance: np.ndarray, kind: int) -> pa.RecordBatch:
    return pa.record_batch({"vertex": vertex.astype(np.int64, copy=False),
                            "source": source.astype(np.int64, copy=False),
                            "distance": distance.astype(np.float64, copy=False),
                            "kind": np.full(len(vertex), kind, np.int8)})


def _min_per_key(v: np.ndarray, s: np.ndarray, d: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Indices of the best row per (v, s): smallest d, ties won by rows with new == 0."""
    order = np.lexsort((new, d, s, v))
    vs, ss = v[order], s[order]
    first = np.ones(len(order), bool)
    first[1:] = (vs[1:] != vs[:-1]) | (ss[1:] != ss[:-1])
    return order[first]


class _Round:
    """Per outer time: the edges so far (sorted by src) and the best distances so far."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> None:
        order = np.argsort(src, kind="stable")
        self.src, self.dst, self.weight = src[order], dst[order], weight[order]
        self.v = np.zeros(0, np.int64)
        self.s = np.zeros(0, np.int64)
        self.d = np.zeros(0)

    def merge(self, v: np.ndarray, s: np.ndarray, d: np.ndarray) -> tuple:
        """Take the proposals; return the improved (vertex, source, distance)."""
        new = np.concatenate([np.zeros(len(self.v), np.int8), np.ones(len(v), np.int8)])
        av, as_, ad = np.concatenate([self.v, v]), np.concatenate([self.s, s]), np.concatenate([self.d, d])
        keep = _min_per_key(av, as_, ad, new)
        self.v, self.s, self.d = av[keep], as_[keep], ad[keep]
        improved = keep[new[keep] == 1]
        return av[improved], as_[improved], ad[improved]

    def relax(self, v: np.ndarray, s: np.ndarray, d: np.ndarray) -> tuple:
        lo = np.searchsorted(self.src, v, "left")
        hi = np.searchsorted(self.src, v, "right")
        counts = hi - lo
        rows = np.repeat(np.arange(len(v)), counts)
        starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
        edge = starts + np.arange(len(rows))
        pv, ps, pd = self.dst[edge], s[rows], d[rows] + self.weight[edge]
        keep = _min_per_key(pv, ps, pd, np.zeros(len(pv), np.int8))
        return pv[keep], ps[keep], pd[keep]


def paths_from_seeds(edges: "Stream", seeds: Callable[[Any], tuple], weight: Optional[str] = None,
                     src: str = "src", dst: str = "dst") -> "Stream":
    """Edge record batches in; ``(vertex, source, distance)`` record batches out: at
    each completed time, for the edges seen so far, recomputed from scratch (the batch
    form's engine; :func:`shortest_paths_stream` is the incremental form), with the
    sources given per outer time by ``seeds(time)`` -> ``(vertices, labels)``: each
    source vertex and the int64 label its paths carry in the ``source`` column.

    >>> import numpy as np, pyarrow as pa, timely_spark as ts
    >>> table = pa.table({"src": [1, 2, 3], "dst": [2, 3, 4]})
    >>> two = np.array([2])
    >>> _ = ts.example(lambda s: paths_from_seeds(s.to_stream(table), lambda t: (two, two))
    ...                .inspect(lambda rb: print(rb.sort_by("vertex").to_pydict())))
    {'vertex': [2, 3, 4], 'source': [2, 2, 2], 'distance': [0, 1, 2]}
    """
    scope = edges.scope
    name = "ShortestPaths"

    def loop(inner: Any) -> Any:
        op = LoopRounds(inner, edges, src, ExchangeBy(["vertex"], name), name, ("proposals", "improvements"))
        peers = inner.peers
        bkeys = broadcast_keys(peers)
        pieces: list = []                     # (outer time, src, dst, weight) routed here
        rounds: dict = {}

        def step(t: Product, cap: Any, edge_parts: list, msg_parts: list) -> None:
            outer, k = t.outer, t.inner
            if k == 0:
                if edge_parts:
                    pieces.append((outer, *(np.concatenate([p[i] for p in edge_parts]) for i in range(3))))
                    op.out_msgs.session(cap).give_batch([_msgs(bkeys, bkeys, np.zeros(peers), RESTART)])
                return
            if k == 1:
                rounds[outer] = _seed(pieces, outer, seeds, op.out_msgs, cap)
                return
            state = rounds.get(outer)
            if state is None or not msg_parts:
                return
            table = pa.Table.from_batches(msg_parts)
            v, s, d = (table[c].to_numpy() for c in ("vertex", "source", "distance"))
            better = state.merge(v, s, d)
            if len(better[0]):
                op.out_results.session(cap).give_batch([pa.record_batch(
                    {"vertex": better[0], "source": better[1], "distance": better[2]})])
                proposals = state.relax(*better)
                if len(proposals[0]):
                    pv, ps, pd = proposals
                    op.out_msgs.session(cap).give_batch([_msgs(pv, ps, pd, PROPOSAL)])

        def forget(mf: Any) -> None:
            for outer in [o for o in rounds if _done(mf, o)]:
                del rounds[outer]

        return op.run(lambda batch: weighted_edges(batch, src, dst, weight, name), step, forget)

    best = scope_min(scope.iterative(loop))
    if weight is None:
        return best.map(lambda rb: rb.set_column(2, "distance", rb.column(2).cast(pa.int64())))
    return best


def _seed(pieces: list, outer: Any, seeds: Callable[[Any], tuple], out: Any, cap: Any) -> _Round:
    """The round state of outer time ``outer`` (the edges of ``pieces`` at times ``<=`` it);
    the sources among its vertices sent as proposals at distance 0."""
    mine = [p for p in pieces if less_equal(p[0], outer)]
    empty = np.zeros(0, np.int64)
    a = np.concatenate([empty] + [p[1] for p in mine])
    c = np.concatenate([empty] + [p[2] for p in mine])
    w = np.concatenate([np.zeros(0)] + [p[3] for p in mine])
    vertices, labels = seeds(outer)
    present = np.isin(vertices, np.concatenate([a, c]))
    if present.any():
        out.session(cap).give_batch([_msgs(vertices[present], labels[present], np.zeros(int(present.sum())), PROPOSAL)])
    return _Round(a, c, w)


def _done(frontier: Any, outer: Any) -> bool:
    return not any(less_equal(e.outer, outer) for e in frontier.elements())


def scope_min(stream: "Stream") -> "Stream":
    """Per time, the minimum distance per (vertex, source)."""
    return stream.group_by(["vertex", "source"]).aggregate([("distance", "min")], name="BestDistance").map(
        lambda rb: rb.rename_columns(["vertex", "source", "distance"]))


def shortest_paths(edges: Any, sources: Sequence[Any], weight: Optional[str] = None, src: str = "src",
                   dst: str = "dst", workers: Optional[int] = None, processes: int = 1,
                   timeout: Optional[float] = None, stats: Optional[dict] = None) -> Any:
    """``(vertex, source, distance)`` for each source and each vertex it reaches along
    directed edges: hop counts when ``weight`` is None, else minimum sums of the
    non-negative, finite ``weight`` column.  Ids of any type :mod:`.front` takes
    (strings...; ``sources`` of the same type) come back as given.  A source that is
    not a vertex of the graph, a negative or infinite weight, a missing column raise
    :class:`~timely_spark.errors.GraphInputError` (on Spark, what only the data shows --
    null ids, bad weights, missing sources -- comes from the workers when the result
    runs, as ``WorkerError`` with the GraphInputError as ``cause``).

    Spark DataFrame in: ``workers`` barrier workers (default 2), a DataFrame out, lazily
    (calling this runs no Spark job); ``pyarrow.Table`` / pandas in: local threads x
    ``processes``, the same kind out, sorted by vertex, source.  On Spark, ``stats`` (a
    dict) receives where each task's time went, as ``ts.spark.transform``'s.

    >>> import pyarrow as pa
    >>> shortest_paths(pa.table({"src": [1, 2, 1], "dst": [2, 3, 3], "w": [1.0, 1.0, 5.0]}), [1], "w").to_pydict()
    {'vertex': [1, 2, 3], 'source': [1, 1, 1], 'distance': [0.0, 1.0, 2.0]}
    """
    from .front import ID, Algorithm, run_graph

    if weight is not None and weight in (src, dst):
        raise GraphInputError(f"the weight column cannot be an id column ({weight!r})", weight)
    kind = pa.int64() if weight is None else pa.float64()
    algorithm = Algorithm(lambda batches, a, b, seeds: paths_from_seeds(batches, seeds, weight, a, b),
                          [("vertex", ID), ("source", ID), ("distance", kind)], keys=2)
    return run_graph(edges, algorithm, src, dst, workers, processes, timeout, weight, sources, stats)


def dijkstra_reference(src: Sequence[int], dst: Sequence[int], sources: Sequence[int],
                       weight: Optional[Sequence[float]] = None) -> dict:
    """``{(vertex, source): distance}`` by Dijkstra with heapq, one source at a time.

    >>> dijkstra_reference([1, 2], [2, 3], [1])
    {(1, 1): 0, (2, 1): 1, (3, 1): 2}
    """
    import heapq

    adj: dict = {}
    for i, (a, c) in enumerate(zip(src, dst)):
        adj.setdefault(a, []).append((c, 1 if weight is None else weight[i]))
    result: dict = {}
    for s in sources:
        dist = {s: 0 if weight is None else 0.0}
        heap = [(dist[s], s)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            for v, w in adj.get(u, ()):
                if d + w < dist.get(v, float("inf")):
                    dist[v] = d + w
                    heapq.heappush(heap, (d + w, v))
        result.update({(v, s): d for v, d in dist.items()})
    return result
