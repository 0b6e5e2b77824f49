"""PageRank in a timely loop, vectorized, with the ranks kept in the workers.

Edges live on the worker their ``src`` hashes to, each vertex's rank on the worker
its id hashes to (the same hash, so a vertex's out-edges and rank are together).
Each round a worker sends, per destination vertex, the summed contributions
``r(u)/out(u)`` of its edges (one row per distinct destination, to the owner) and
broadcasts the few scalars everyone needs (vertex count, dangling mass, change).
Definition (directed ``src -> dst``; N distinct vertices; r0 = 1/N)::

    r'(v) = (1 - d)/N + d * (sum_{u->v} r(u)/out(u) + D/N),  D = rank of vertices with no out-edge

Loop rounds of an outer time ``T``: 0 edges in, vertices announced to owners;
1 owners count vertices; 2 N known, first contributions; 3.. one iteration each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pyarrow as pa

from ..dataflow import ExchangeBy, OperatorBuilder, check_batch
from ..progress import Product, less_equal, sort_key
from ..runtime import check_count, check_fraction, check_positive
from .broadcast import broadcast_keys
from .components_columnar import edge_arrays
from .pagerank_incremental import pagerank_stream
from .unique import sorted_unique

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["pagerank", "pagerank_stream", "pagerank_reference", "power_iteration"]

CONTRIB, EXISTS, COUNT, DANGLING, DELTA = 0, 1, 2, 3, 4


def _msgs(vertex: np.ndarray, value: np.ndarray, kind: int) -> pa.RecordBatch:
    return pa.record_batch({"vertex": vertex.astype(np.int64, copy=False),
                            "value": value.astype(np.float64, copy=False),
                            "kind": np.full(len(vertex), kind, np.int8)})


class _State:
    def __init__(self) -> None:
        self.src = np.zeros(0, np.int64)
        self.dst = np.zeros(0, np.int64)
        self.vertices = np.zeros(0, np.int64)       # owned, sorted
        self.rank: np.ndarray = np.zeros(0)
        self.iteration = 0
        self.done = False
        self.n = 0.0
        self.incoming: tuple = (np.zeros(0, np.int64), np.zeros(0, np.intp))   # last (vertices, positions)

    def prepare(self) -> None:
        self.udst, self.dst_inv = np.unique(self.dst, return_inverse=True)
        srcs, counts = np.unique(self.src, return_counts=True)
        self.src_pos = np.searchsorted(self.vertices, self.src)
        out = np.zeros(len(self.vertices))
        out[np.searchsorted(self.vertices, srcs)] = counts
        self.dangling = out == 0
        self.inv_out = np.divide(1.0, out, out=np.zeros_like(out), where=~self.dangling)

    def positions(self, vertex: np.ndarray) -> np.ndarray:
        """Where each incoming vertex id sits among this worker's vertices.  The same
        senders send the same ids every iteration, usually in the same order: then the
        last answer is reused (one O(n) comparison instead of an O(n log V) search)."""
        last_vertex, last_pos = self.incoming
        if len(vertex) == len(last_vertex) and np.array_equal(vertex, last_vertex):
            return last_pos
        pos = np.searchsorted(self.vertices, vertex)
        self.incoming = (vertex, pos)
        return pos


def _check_parameters(iterations: Any, damping: Any, tolerance: Any) -> None:
    check_count("iterations", iterations)
    check_fraction("damping", damping)
    check_positive("tolerance", tolerance)


def power_iteration(edges: "Stream", iterations: int = 20, damping: float = 0.85,
                    tolerance: Optional[float] = None, src: str = "src", dst: str = "dst") -> "Stream":
    """Edge record batches in, ``(vertex, rank)`` record batches out: at each completed
    time, the PageRank of all edges seen so far, from scratch by power iteration (the
    batch form's engine; :func:`pagerank_stream` is the incremental form).

    >>> import pyarrow as pa, timely_spark as ts
    >>> table = pa.table({"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> _ = ts.example(lambda s: power_iteration(s.to_stream(table), iterations=3)
    ...                .inspect(lambda rb: print(rb["vertex"].to_pylist(), rb["rank"].to_numpy().round(4).tolist())))
    [1, 2, 3] [0.3333, 0.3333, 0.3333]
    """
    _check_parameters(iterations, damping, tolerance)
    scope = edges.scope
    name = "PageRank"

    def loop(inner: Any) -> Any:
        handle, cycle = inner.feedback(1)
        b = OperatorBuilder(inner, name)
        edge_in = b.new_input(edges.enter(inner), ExchangeBy([src], name))
        msg_in = b.new_input(cycle, ExchangeBy(["vertex"], name))
        out_msgs, msgs = b.new_output("messages")
        out_ranks, ranks = b.new_output("ranks")
        b.initial_capability().drop()
        peers = inner.peers
        bkeys = broadcast_keys(peers)
        pending: dict = {}
        states: dict = {}
        edge_pieces: list = []               # (outer time, src, dst) of the edges routed here
        vertex_pieces: list = []             # (outer time, vertices) this worker owns

        def hold(cap: Any) -> list:
            entry = pending.get(cap.time)
            if entry is None:
                entry = pending[cap.time] = [cap.retain(), [], []]
            return entry

        def broadcast(cap: Any, value: float, kind: int) -> list:
            return [_msgs(bkeys, np.full(peers, value), kind)]

        def contributions(st: _State, cap: Any) -> list:
            w = (st.rank * st.inv_out)[st.src_pos]
            sums = np.bincount(st.dst_inv, weights=w, minlength=len(st.udst))
            return [_msgs(st.udst, sums, CONTRIB)] + broadcast(cap, float(st.rank[st.dangling].sum()), DANGLING)

        def step(t: Any, cap: Any, edge_parts: list, msg_parts: list) -> None:
            outer, k = t.outer, t.inner
            if k == 0:                       # this worker's new edges of outer time `outer`
                if edge_parts:
                    a = np.concatenate([a for a, _ in edge_parts])
                    c = np.concatenate([c for _, c in edge_parts])
                    edge_pieces.append((outer, a, c))
                    new = sorted_unique(np.concatenate([a, c]))
                    out_msgs.session(cap).give_batch([_msgs(new, np.zeros(len(new)), EXISTS)]
                                                     + broadcast(cap, 0.0, COUNT))
                return
            table = pa.Table.from_batches(msg_parts) if msg_parts else None
            kind = table["kind"].to_numpy() if table is not None else np.zeros(0, np.int8)
            vertex = table["vertex"].to_numpy() if table is not None else np.zeros(0, np.int64)
            value = table["value"].to_numpy() if table is not None else np.zeros(0)
            if k == 1:                       # every (outer', 1) with outer' <= outer is processed by now
                vertex_pieces.append((outer, sorted_unique(vertex[kind == EXISTS])))
                st = states[outer] = _State()
                mine = [p for p in edge_pieces if less_equal(p[0], outer)]
                st.src = np.concatenate([np.zeros(0, np.int64)] + [p[1] for p in mine])
                st.dst = np.concatenate([np.zeros(0, np.int64)] + [p[2] for p in mine])
                st.vertices = sorted_unique(np.concatenate(
                    [np.zeros(0, np.int64)] + [p[1] for p in vertex_pieces if less_equal(p[0], outer)]))
                st.prepare()
                out_msgs.session(cap).give_batch(broadcast(cap, float(len(st.vertices)), COUNT))
                return
            current = states.get(outer)
            if current is None or current.done:
                return
            st = current
            if k == 2:
                st.n = float(value[kind == COUNT].sum())
                st.rank = np.full(len(st.vertices), 1.0 / st.n)
                out_msgs.session(cap).give_batch(contributions(st, cap))
                return
            if tolerance is not None and k >= 4 and float(value[kind == DELTA].sum()) < tolerance:
                finish(st, cap)
                return
            c = kind == CONTRIB
            pos = st.positions(vertex[c])
            incoming = np.bincount(pos, weights=value[c], minlength=len(st.vertices))
            dangling = float(value[kind == DANGLING].sum())
            new_rank = (1 - damping) / st.n + damping * (incoming + dangling / st.n)
            delta = float(np.abs(new_rank - st.rank).sum())
            st.rank = new_rank
            st.iteration += 1
            if st.iteration >= iterations:
                finish(st, cap)
                return
            out_msgs.session(cap).give_batch(contributions(st, cap) + broadcast(cap, delta, DELTA))

        def finish(st: _State, cap: Any) -> None:
            st.done = True
            st.src = st.dst = np.zeros(0, np.int64)
            if len(st.vertices):
                out_ranks.session(cap).give_batch([pa.record_batch({"vertex": st.vertices, "rank": st.rank})])

        def logic() -> None:
            for cap, data in edge_in:
                entry = hold(cap)
                for record in data:
                    batch = check_batch(record, name)
                    if batch.num_rows:
                        entry[1].append(edge_arrays(batch, src, dst, name))
            for cap, data in msg_in:
                hold(cap)[2].extend(data)
            ef, mf = edge_in.frontier, msg_in.frontier
            for t in sorted((t for t in pending if not ef.less_equal(t) and not mf.less_equal(t)), key=sort_key):
                cap, edge_parts, msg_parts = pending.pop(t)
                step(t if isinstance(t, Product) else Product(*t), cap, edge_parts, msg_parts)
                cap.drop()

        b.build(logic, notify=True)
        msgs.connect_loop(handle)
        return ranks.leave()

    return scope.iterative(loop)


def pagerank(edges: Any, iterations: int = 20, damping: float = 0.85, tolerance: Optional[float] = None,
             src: str = "src", dst: str = "dst", workers: Optional[int] = None, processes: int = 1,
             timeout: Optional[float] = None) -> Any:
    """``(vertex, rank)`` of every vertex of a directed edge list (definition in the module doc).

    A Spark DataFrame runs on ``workers`` barrier workers (default 2) and returns a
    DataFrame lazily; a ``pyarrow.Table`` / pandas DataFrame runs on ``workers`` local
    threads in each of ``processes`` processes and returns the same kind, sorted by vertex.
    Ids of any type :mod:`.front` takes (strings...) come back as they were given.
    Missing columns, null ids or ids of a type not taken raise
    :class:`~timely_spark.errors.GraphInputError` (on Spark, null ids come from the
    workers as ``WorkerError`` with it as ``cause``); ``iterations`` that is not a
    whole number >= 1, ``damping`` outside [0, 1], a ``tolerance`` that is not positive
    raise :class:`~timely_spark.errors.ParameterError` naming the parameter.

    >>> import pyarrow as pa
    >>> r = pagerank(pa.table({"src": [1, 1, 2], "dst": [2, 3, 3]}))
    >>> r["vertex"].to_pylist(), round(sum(r["rank"].to_pylist()), 12)
    ([1, 2, 3], 1.0)
    """
    from .front import ID, Algorithm, run_graph

    _check_parameters(iterations, damping, tolerance)
    algorithm = Algorithm(lambda batches, a, b, seeds: power_iteration(batches, iterations, damping, tolerance, a, b),
                          [("vertex", ID), ("rank", pa.float64())])
    return run_graph(edges, algorithm, src, dst, workers, processes, timeout)


def pagerank_reference(src: np.ndarray, dst: np.ndarray, iterations: int = 20, damping: float = 0.85) -> dict:
    """The definition, in plain numpy on one core: ``{vertex: rank}``.

    >>> pagerank_reference(np.array([1, 2]), np.array([2, 1]), 5)
    {1: 0.5, 2: 0.5}
    """
    vertices, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n, m = len(vertices), len(src)
    s, d = inv[:m], inv[m:]
    out = np.bincount(s, minlength=n).astype(float)
    rank = np.full(n, 1.0 / n)
    for _ in range(iterations):
        incoming = np.bincount(d, weights=rank[s] / out[s], minlength=n)
        dangling = rank[out == 0].sum()
        rank = (1 - damping) / n + damping * (incoming + dangling / n)
    return dict(zip(vertices.tolist(), rank.tolist()))
