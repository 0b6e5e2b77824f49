"""Distributed contraction of a graph to its components: every round on every worker,
state and work split by vertex hash, nothing gathered on one worker.

The input is a stream of ``(vertex, root)`` record batches -- each worker's spanning
forest of the edges it holds, as stars: every vertex it has seen with the smallest
vertex of its local component (``root <= vertex``; a root is given with itself).  Two
loops, each round vectorized over sorted int64 arrays (no Python per vertex):

1. **Contraction** (:func:`contract`, min-label hooking on stars): each pair goes to the
   owner of its ``vertex`` (``ExchangeBy(["vertex"])``).  The owner of ``u`` takes the
   smallest root ``r*`` it received for ``u`` and records the pointer ``u -> r*`` (it
   leaves the loop); the other roots ``r`` of ``u`` are in ``u``'s component too, so the
   owner links each to ``r*``.  Those links, all the owner's vertices together, are
   contracted at once by :func:`~.spanning_forest.forest_of_batches` into stars again, which
   are the next round's pairs.  A round's pairs hold only roots of the previous round
   that had to be linked, so they shrink round after round; the loop ends when no
   link is left.  Pointers only go down (``r* <= u``), and each component's pointers
   form a tree whose root is its smallest vertex.
2. **Label resolution** (:func:`resolve`, pointer jumping): each owner keeps its
   vertices' smallest pointers (sorted arrays); every other round, each worker asks
   the owner of each distinct pointer target it still needs for that target's pointer
   (one request per worker and target, so a hub's owner answers at most one request
   per worker), and jumps to it; a target whose pointer is final (a root, or resolved)
   resolves its askers.  Depth halves at each jump.

What a worker holds at any round is the pairs routed to it (a hash share of the
round's pairs) and its share of the pointers.  Each operator reports the rows it
holds per time to the ``"graph"`` stream of the worker's logging registry
(:data:`~.state_log.GRAPH_LOG`), if a handler is registered: events ``state`` with ``name`` (the
operator), ``count`` (rows) and ``frontier`` (the time, as a 1-tuple).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import numpy as np
import pyarrow as pa

from ..dataflow import ExchangeBy, destinations
from .broadcast import broadcast_keys
from .compact import DIRECT_SPAN, distinct_ids, group_min, offsets
from .spanning_forest import CHUNK, forest_of_batches
from .state_log import log_state

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["hook", "hook_pairs", "sliced", "by_owner", "EXCHANGE_ROWS", "contract", "pointer_table", "resolve"]

def _column(batches: list, name: str) -> np.ndarray:
    parts = [rb.column(name).to_numpy() for rb in batches if rb.num_rows]
    if not parts:
        return np.zeros(0, np.int64)
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)).astype(np.int64, copy=False)


#: Rows of a batch sent through an exchange at a time (see :func:`sliced`).
EXCHANGE_ROWS = 1 << 20


def sliced(columns: dict) -> list:
    """A record batch of ``columns`` as zero-copy slices of at most :data:`EXCHANGE_ROWS`
    rows: an exchange then hashes, orders and copies a slice at a time, and its
    temporaries are a slice's, not the whole batch's.

    >>> [rb.num_rows for rb in sliced({"x": np.arange(3)})]
    [3]
    """
    rb = pa.record_batch(columns)
    return [rb.slice(at, EXCHANGE_ROWS) for at in range(0, rb.num_rows, EXCHANGE_ROWS)]


def by_owner(vertex: np.ndarray, root: np.ndarray, peers: int) -> list:
    """``(vertex, root)`` pairs as one record batch per worker that owns any of the
    vertices (by the hash ``ExchangeBy(["vertex"])`` routes by), each batch's rows all
    going to one worker: an exchange passes such a batch on whole, without a copy.

    >>> [rb.num_rows for rb in by_owner(np.arange(8), np.zeros(8, np.int64), 2)]
    [4, 4]
    """
    batch = pa.record_batch({"vertex": vertex, "root": root})
    if peers == 1 or not len(vertex):
        return [batch] if len(vertex) else []
    dest = destinations(batch, ["vertex"], peers)
    order = np.argsort(dest, kind="stable")
    counts = np.bincount(dest, minlength=peers)
    del dest
    ordered = pa.record_batch({"vertex": vertex[order], "root": root[order]})
    ends = np.cumsum(counts)
    return [ordered.slice(end - n, n) for n, end in zip(counts.tolist(), ends.tolist()) if n]


def _ids(rb: pa.RecordBatch, name: str) -> np.ndarray:
    return rb.column(name).to_numpy().astype(np.int64, copy=False)


def hook(u: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One contraction round on one owner: pairs ``(u, r)`` (``r`` a root known to be in
    ``u``'s component) in; ``(vertices, pointer)`` -- each distinct ``u`` with its smallest
    ``r`` -- and ``(next vertices, next roots)`` -- the stars contracting the links
    between each ``u``'s other roots and its smallest -- out.

    >>> p, q, v, w = hook(np.array([5, 5, 6, 7]), np.array([2, 3, 3, 7]))
    >>> p.tolist(), q.tolist(), v.tolist(), w.tolist()
    ([5, 6, 7], [2, 3, 7], [2, 3], [2, 2])
    """
    return hook_pairs([(u, r)])


def hook_pairs(pairs: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`hook` of the pairs ``(u[i], r[i])`` of every ``(u, r)`` in ``pairs`` (int64
    arrays, e.g. record batches' columns), without concatenating them when the ids are
    dense: an addressing table of the range of ``u`` takes each vertex's smallest root.
    ``pairs`` is emptied: its arrays are let go before the links are contracted.

    >>> p, q, v, w = hook_pairs([(np.array([5, 5]), np.array([2, 3])), (np.array([6, 7]), np.array([3, 7]))])
    >>> p.tolist(), q.tolist(), v.tolist(), w.tolist()
    ([5, 6, 7], [2, 3, 7], [2, 3], [2, 2])
    """
    empty = np.zeros(0, np.int64)
    given, pairs = pairs, [(u, r) for u, r in pairs if len(u)]
    given.clear()
    if not pairs:
        return empty, empty, empty, empty
    rows = sum(len(u) for u, _ in pairs)
    lo = min(int(u.min()) for u, _ in pairs)
    span = max(int(u.max()) for u, _ in pairs) - lo + 1
    if span > DIRECT_SPAN * rows + 1024:          # sparse ids: sort
        u, r = np.concatenate([u for u, _ in pairs]), np.concatenate([r for _, r in pairs])
        vertices, smallest, _, at = group_min(u, r)
        links = _links([(r, smallest[at])])
        del u, r, at
    else:                                          # dense ids: an addressing table, no sort
        # the table holds each vertex's smallest root, as an int32 offset from the smallest
        # root when the roots' range allows (half the memory), else as itself
        r_lo = min(int(r.min()) for _, r in pairs)
        narrow = max(int(r.max()) for _, r in pairs) - r_lo < 2**31 - 2
        kind = np.int32 if narrow else np.int64
        table = np.full(span, np.iinfo(kind).max, kind)
        present = None if narrow else np.zeros(span, bool)
        for u, r in pairs:
            at = offsets(u, lo, span)
            np.minimum.at(table, at, offsets(r, r_lo, 2**31 - 2) if narrow else r)
            if present is not None:
                present[at] = True
        vertices = np.flatnonzero(table != np.iinfo(kind).max if present is None else present)
        del present
        smallest = table[vertices].astype(np.int64)
        if narrow:
            smallest += r_lo
        vertices += lo
        links = _links((r, _widened(table[offsets(u, lo, span)], r_lo if narrow else 0)) for u, r in pairs)
        del table
    del pairs
    if not links:
        return vertices, smallest, empty, empty
    nxt, roots = forest_of_batches(links)
    return vertices, smallest, nxt, roots


def _widened(values: np.ndarray, lo: int) -> np.ndarray:
    out = values.astype(np.int64)
    if lo:
        out += lo
    return out


def _links(pairs: Iterable) -> list:
    """Per ``(roots, the smallest root of each one's vertex)``, the pairs that differ: each
    links a root to its vertex's smallest (they are in one component)."""
    out = []
    for r, low in pairs:
        differ = r != low
        if differ.any():
            out.append((r[differ], low[differ]))
    return out


def contract(pairs: "Stream", name: str = "Contract") -> "Stream":
    """``(vertex, root)`` batches in (see the module docstring); ``(vertex, pointer)``
    batches out, at each completed outer time, each on the owner of its ``vertex``:
    every vertex at least once, with pointers ``<= vertex`` whose trees are the
    components, rooted at their smallest vertex (take each vertex's smallest pointer).

    >>> import pyarrow as pa, timely_spark as ts
    >>> forests = pa.table({"vertex": [1, 2, 3, 2, 3], "root": [1, 1, 3, 2, 2]})
    >>> _ = ts.example(lambda s: contract(s.to_stream(forests))
    ...                .inspect(lambda rb: print(sorted(zip(*rb.to_pydict().values())))))
    [(1, 1), (2, 1), (3, 2)]
    [(1, 1), (2, 1), (3, 1)]
    """
    def loop(inner: Any) -> Any:
        handle, cycle = inner.feedback(1)

        def step(time: Any, entered: list, again: list) -> list:
            pairs = [(_ids(rb, "vertex"), _ids(rb, "root")) for rb in entered + again if rb.num_rows]
            entered.clear()                # the batches live on in ``pairs`` only, let go by hook_pairs
            again.clear()
            log_state(inner, name, time, sum(len(u) for u, _ in pairs))
            vertices, pointer, nxt, roots = hook_pairs(pairs)
            del pairs
            out = [pa.record_batch({"vertex": vertices, "pointer": pointer})]
            if len(nxt):
                out.extend(sliced({"vertex": nxt, "root": roots}))
            return out

        out = pairs.enter(inner).per_time(step, others=(cycle,), exchange=ExchangeBy(["vertex"], name), name=name)
        out.flat_map(lambda rb: [rb] if "root" in rb.schema.names else [], name=f"{name}Again").connect_loop(handle)
        return out.flat_map(lambda rb: [] if "root" in rb.schema.names else [rb], name=f"{name}Out").leave()

    return pairs.scope.iterative(loop, name=name)


def pointer_table(pointers: "Stream", name: str = "Pointers") -> "Stream":
    """Per completed time, this worker's ``(vertex, pointer)`` rows reduced to one per
    vertex (the smallest pointer), sorted by vertex; no exchange (rows stay where
    :func:`contract` left them, on their vertex's owner)."""
    scope = pointers.scope

    def table(time: Any, batches: list) -> list:
        vertices, pointer = _merge_pointers([rb for rb in batches if rb.num_rows])
        log_state(scope, name, time, len(vertices))
        return [pa.record_batch({"vertex": vertices, "pointer": pointer})]

    return pointers.per_time(table, name=name)


def _merge_pointers(batches: list) -> tuple[np.ndarray, np.ndarray]:
    """One row per vertex, the smallest pointer, sorted.  The first round's batch holds
    every vertex once, sorted (and later rounds' vertices are among them): the others
    are folded into a copy of it by binary search, else everything is grouped."""
    if not batches:
        empty = np.zeros(0, np.int64)
        return empty, empty
    batches = sorted(batches, key=lambda rb: -rb.num_rows)
    base = batches[0].column("vertex").to_numpy()
    if not (base[1:] > base[:-1]).all():
        return group_min(_column(batches, "vertex"), _column(batches, "pointer"))[:2]
    if len(batches) == 1:
        return base, batches[0].column("pointer").to_numpy()
    u, p = _column(batches[1:], "vertex"), _column(batches[1:], "pointer")
    at = np.minimum(np.searchsorted(base, u), len(base) - 1)
    if not (base[at] == u).all():
        return group_min(_column(batches, "vertex"), _column(batches, "pointer"))[:2]
    pointer = batches[0].column("pointer").to_numpy().copy()
    np.minimum.at(pointer, at, p)
    return base, pointer


def resolve(table: "Stream", name: str = "Resolve") -> "Stream":
    """``(vertex, pointer)`` tables (one row per vertex, sorted, on the vertex's owner;
    pointer trees rooted at the component's smallest vertex) in; ``(vertex, component)``
    out, per completed outer time, on the same workers, by pointer jumping (see the
    module docstring).

    >>> import pyarrow as pa, timely_spark as ts
    >>> rows = pa.table({"vertex": [1, 2, 3, 4], "pointer": [1, 1, 2, 3]})
    >>> _ = ts.example(lambda s: resolve(s.to_stream(rows)).inspect(lambda rb: print(rb.to_pydict())))
    {'vertex': [1, 2, 3, 4], 'component': [1, 1, 1, 1]}
    """
    scope = table.scope
    me = scope.index
    keys = broadcast_keys(scope.peers)
    state: dict = {}                      # outer time -> [vertices, pointers, final, emitted]

    def loop(inner: Any) -> Any:
        handle, cycle = inner.feedback(1)

        def step(time: Any, mine: list, messages: list) -> list:
            outer = time[0]
            if mine:
                u, p = _column(mine, "vertex"), _column(mine, "pointer")
                p = p if p.flags.writeable else p.copy()
                state[outer] = [u, p, p == u, False]
            held = state.get(outer)
            if held is None:
                return []
            u, p, final, _ = held
            log_state(inner, name, time, len(u))
            out = []
            replies = [rb for rb in messages if "final" in rb.schema.names]
            requests = [rb for rb in messages if "asker" in rb.schema.names]
            if replies:
                target, pointer = _column(replies, "target"), _column(replies, "pointer")
                done = np.concatenate([rb.column("final").to_numpy(zero_copy_only=False) for rb in replies])
                order = np.argsort(target, kind="stable")
                target, pointer, done = target[order], pointer[order], done[order]
                del order
                for lo in range(0, len(p), CHUNK):         # a chunk at a time: small temporaries
                    open_ = np.flatnonzero(~final[lo:lo + CHUNK]) + lo
                    at = np.minimum(np.searchsorted(target, p[open_]), len(target) - 1)
                    hit = target[at] == p[open_]
                    open_, at = open_[hit], at[hit]
                    p[open_] = pointer[at]
                    final[open_] = done[at]
            if requests:
                target, asker = _column(requests, "vertex"), _column(requests, "asker")
                at = np.searchsorted(u, target)
                out.extend(sliced({"vertex": keys[asker], "target": target, "pointer": p[at], "final": final[at]}))
            if mine or replies:
                if final.all():
                    if not held[3]:
                        out.append(pa.record_batch({"vertex": u, "component": p}))
                        held[3] = True
                else:
                    targets = distinct_ids(p[~final])
                    out.extend(sliced({"vertex": targets, "asker": np.full(len(targets), me, np.int64)}))
            return out

        out = table.enter(inner).per_time(step, others=(cycle,), exchange=[None, ExchangeBy(["vertex"], name)],
                                          name=name)
        out.flat_map(lambda rb: [] if "component" in rb.schema.names else [rb],
                     name=f"{name}Again").connect_loop(handle)
        return out.flat_map(lambda rb: [rb] if "component" in rb.schema.names else [], name=f"{name}Out").leave()

    def done(time: Any, batches: list) -> list:
        state.pop(time, None)
        return batches

    return scope.iterative(loop, name=name).per_time(done, name=f"{name}Done")
