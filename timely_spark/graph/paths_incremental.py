"""Incremental shortest paths: a changelog of edges in, a changelog of distances out.

Each worker keeps the edges it owns by ``src`` as a sorted multiset of
``(src, dst, weight)`` rows (:class:`.sorted_rows.SortedRows`) and the distances of
the vertices it owns, sorted by ``(vertex, source)`` (new pairs go to a small side
level folded in now and then, so an insertion does not copy the whole state).  Per epoch, in the rounds of a
timely loop (epochs one at a time, :func:`.in_order.in_order`):

0. the edge owners apply the changes; for every edge whose last copy goes, they send
   its target's owner what the edge gave (``dist(src) + weight``) per source;
1. where that equals the target's distance (the edge was on a shortest path), the
   distance is dropped and the invalidation follows the target's out-edges held before
   the epoch the same way, round after round (only distances that may grow are
   touched; an edge added this epoch is relaxed later, not followed here); a source
   entering or leaving the graph is recomputed whole (broadcast);
2. once no worker invalidated anything in a round: the dropped distances are
   re-derived from the in-edges of valid vertices (one vectorized pass over each
   worker's edges, only in epochs with such withdrawals), re-seeded sources start
   over, and the new edges are relaxed from their ``src``'s known distances;
3. and on: improved distances are relaxed along their vertex's out-edges until
   nothing improves (as the batch form does).

Every improvement and every dropped distance is emitted (``-old``/``+new``), and the
epoch's rows are netted (``Stream.consolidate``), so an epoch emits only the
distances that differ from the previous epoch's.  The edge collection is a multiset
of rows: an edge ``(a, b, w2)`` added without withdrawing ``(a, b, w1)`` is a second,
parallel edge, and the lighter one counts (as in the batch form on those rows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..dataflow import DIFF
from ..progress import Product
from .broadcast import broadcast_keys
from .edge_input import diffs_at, source_vertices, weighted_edges, withdrawn_error
from .ids.stream import decode_sources, decode_stream_ids, encode_stream_ids, local_sources
from .in_order import rounds_in_order
from .key_index import expand_ranges
from .loop_rounds import as_product, stream_round
from .sorted_rows import SortedRows
from .stream_frames import is_frame, run_on_frame
from .stream_state import keyed_parts, part_of, scalars_of

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["shortest_paths_stream"]

PROPOSAL, CHECK, DEGREE, RESET, WAKE, INVALID, GONE, TICK = 0, 1, 2, 3, 4, 5, 6, 7
Triple = tuple[np.ndarray, np.ndarray, np.ndarray]


def _msgs(vertex: np.ndarray, source: np.ndarray, distance: np.ndarray, kind: int,
          aux: Optional[np.ndarray] = None) -> pa.RecordBatch:
    return pa.record_batch({"vertex": vertex.astype(np.int64, copy=False),
                            "source": source.astype(np.int64, copy=False),
                            "distance": np.asarray(distance, np.float64),
                            "kind": np.full(len(vertex), kind, np.int8),
                            "aux": np.zeros(len(vertex), np.int64) if aux is None else aux.astype(np.int64)})


def _rows(vertex: np.ndarray, source: np.ndarray, distance: np.ndarray, diff: int) -> pa.RecordBatch:
    return pa.record_batch({"vertex": vertex, "source": source, "distance": distance,
                            DIFF: np.full(len(vertex), diff, np.int64)})


def _best(v: np.ndarray, s: np.ndarray, d: np.ndarray) -> tuple:
    """The smallest ``d`` per ``(v, s)``, sorted by ``(v, s)``."""
    order = np.lexsort((d, s, v))
    v, s, d = v[order], s[order], d[order]
    first = np.ones(len(v), bool)
    first[1:] = (v[1:] != v[:-1]) | (s[1:] != s[:-1])
    return v[first], s[first], d[first]


class _Level:
    """Distances per ``(vertex, source)`` in one sorted store; tombstones (count 0) until compacted."""

    def __init__(self) -> None:
        self.keys = SortedRows([np.int64, np.int64])
        self.d = np.zeros(0)

    def __len__(self) -> int:
        return len(self.d)

    def of(self, vertices: np.ndarray) -> tuple:
        which, rows = self.keys.rows_of(vertices, live=True)
        return which, self.keys.cols[1][rows], self.d[rows]

    def lookup(self, v: np.ndarray, s: np.ndarray) -> tuple:
        """``(positions, found, distance)``: ``found`` also for tombstones, ``inf`` unless live."""
        pos, found = self.keys.find([v, s])
        out = np.full(len(v), np.inf)
        hit = np.flatnonzero(found)
        hit = hit[self.keys.count[pos[hit]] > 0]
        out[hit] = self.d[pos[hit]]
        return pos, found, out

    def set(self, pos: np.ndarray, d: np.ndarray) -> None:
        self.d[pos] = d
        self.keys.count[pos] = 1

    def insert(self, pos: np.ndarray, v: np.ndarray, s: np.ndarray, d: np.ndarray) -> None:
        """New pairs at their insertion positions (a copy of the level)."""
        self.keys.cols = [np.insert(self.keys.cols[0], pos, v), np.insert(self.keys.cols[1], pos, s)]
        self.keys.count = np.insert(self.keys.count, pos, 1)
        self.d = np.insert(self.d, pos, d)

    def clear(self, rows: np.ndarray) -> None:
        self.keys.count[rows] = 0
        self.d[rows] = np.inf
        self.keys.emptied += len(rows)

    def live(self) -> tuple:
        rows = np.flatnonzero(self.keys.count > 0)
        return self.keys.cols[0][rows], self.keys.cols[1][rows], self.d[rows]

    def compact(self) -> None:
        if self.keys.emptied * 4 <= len(self.d):
            return
        self.keys.emptied = 0
        dead = self.keys.count == 0
        if dead.sum() * 4 > len(dead):
            keep = ~dead
            self.keys.cols = [c[keep] for c in self.keys.cols]
            self.keys.count, self.d = self.keys.count[keep], self.d[keep]


class _Distances:
    """Best known distance per ``(vertex, source)`` owned here: a large sorted level and a
    small one that takes the new pairs, folded into the large one when it holds more
    than an eighth of it -- so inserting a pair copies O(1) rows amortized, not the
    whole state.  A pair lives in one level only."""

    def __init__(self) -> None:
        self.main, self.side = _Level(), _Level()

    def of(self, vertices: np.ndarray) -> tuple:
        """``(which, source, distance)`` of the known distances of ``vertices``."""
        parts = [self.main.of(vertices), self.side.of(vertices)]
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))

    def get(self, v: np.ndarray, s: np.ndarray) -> np.ndarray:
        """The distance of each ``(v, s)``, ``inf`` if unknown."""
        return np.minimum(self.main.lookup(v, s)[2], self.side.lookup(v, s)[2])

    def merge(self, v: np.ndarray, s: np.ndarray, d: np.ndarray, emit: list) -> Triple:
        """Take proposals; return the improved ``(vertex, source, distance)``."""
        v, s, d = _best(v, s, d)
        pos_m, found_m, old_m = self.main.lookup(v, s)
        pos_s, found_s, old_s = self.side.lookup(v, s)
        old = np.minimum(old_m, old_s)
        better = d < old
        if not better.any():
            return v[:0], s[:0], d[:0]
        was = better & np.isfinite(old)
        if was.any():
            emit.append(_rows(v[was], s[was], old[was], -1))
        emit.append(_rows(v[better], s[better], d[better], 1))
        in_main = better & found_m
        self.main.set(pos_m[in_main], d[in_main])
        in_side = better & ~found_m & found_s
        self.side.set(pos_s[in_side], d[in_side])
        fresh = better & ~found_m & ~found_s
        if fresh.any():
            self.side.insert(pos_s[fresh], v[fresh], s[fresh], d[fresh])
            if len(self.side) * 8 > len(self.main):
                self.fold()
        return v[better], s[better], d[better]

    def fold(self) -> None:
        """Move the side level's live pairs into the main one (one copy of it)."""
        v, s, d = self.side.live()
        self.side = _Level()
        if len(v):
            pos, _ = self.main.keys.find([v, s])
            self.main.insert(pos, v, s, d)

    def drop(self, sources: np.ndarray, emit: list) -> None:
        """Forget every distance from ``sources`` (emitting their withdrawal)."""
        for level in (self.main, self.side):
            gone = np.flatnonzero((level.keys.count > 0) & np.isin(level.keys.cols[1], sources))
            if len(gone):
                emit.append(_rows(level.keys.cols[0][gone], level.keys.cols[1][gone], level.d[gone], -1))
                level.clear(gone)

    def remove(self, v: np.ndarray, s: np.ndarray, emit: list) -> np.ndarray:
        """Forget the distances of the known pairs ``(v, s)`` (emitting their
        withdrawal); return those distances."""
        pos_m, _, d_m = self.main.lookup(v, s)
        pos_s, _, d_s = self.side.lookup(v, s)
        in_main = np.isfinite(d_m)
        d = np.where(in_main, d_m, d_s)
        emit.append(_rows(v, s, d, -1))
        self.main.clear(pos_m[in_main])
        self.side.clear(pos_s[~in_main])
        return d

    def compact(self) -> None:
        self.main.compact()
        self.side.compact()


class _Paths:
    """One worker's state and the logic of each loop round (see the module doc)."""

    def __init__(self, peers: int, me: int, sources: np.ndarray, weight: Optional[str], src: str, dst: str,
                 name: str) -> None:
        self.bkeys, self.me = broadcast_keys(peers), me
        self.sources = sources
        self.degree = np.zeros(len(sources), np.int64)     # of the sources this worker owns
        self.weight, self.src, self.dst, self.name = weight, src, dst, name
        self.edges = SortedRows([np.int64, np.int64, np.float64])
        self.dist = _Distances()
        self.inserted: tuple = ()
        self.fresh: Optional[np.ndarray] = None   # per edge row: added this epoch (None: none added)
        self.current: Any = None     # the epoch being computed
        self.phase = False           # still finding the distances a withdrawal invalidates
        self.resets: list = []       # sources to recompute, this epoch
        self.invalid: list = []      # (vertices, sources) invalidated this epoch, on every worker

    def snapshot(self) -> pa.Table:
        """This worker's state, keyed (:mod:`.stream_state`), between epochs: the live
        edges by ``src``, the known distances by vertex, the degrees of the sources it
        owns by source."""
        live = self.edges.count > 0
        parts = [self.dist.main.live(), self.dist.side.live()]
        v, s, d = (np.concatenate([p[i] for p in parts]) for i in range(3))
        owned = self.degree != 0
        return keyed_parts(
            {0: ("src", {"src": self.edges.cols[0][live], "dst": self.edges.cols[1][live],
                         "w": self.edges.cols[2][live], "count": self.edges.count[live]}),
             1: ("vertex", {"vertex": v, "source": s, "d": d}),
             2: ("source", {"source": self.sources[owned], "degree": self.degree[owned]})},
            {"version": 1})

    def restore(self, table: pa.Table) -> None:
        """Rebuild from :meth:`snapshot`'s rows (of one or more workers)."""
        if scalars_of(table, self.name) is None:
            return
        edges = part_of(table, 0)
        if len(edges.get("src", ())):
            self.edges.add([edges["src"].astype(np.int64), edges["dst"].astype(np.int64),
                            edges["w"].astype(np.float64)], edges["count"].astype(np.int64))
        dist = part_of(table, 1)
        if len(dist.get("vertex", ())):
            v, s = dist["vertex"].astype(np.int64), dist["source"].astype(np.int64)
            order = np.lexsort((s, v))
            main = self.dist.main
            main.keys.cols = [v[order], s[order]]
            main.keys.count = np.ones(len(order), np.int64)
            main.d = dist["d"][order].astype(np.float64)
        degrees = part_of(table, 2)
        if len(degrees.get("source", ())):
            at = np.searchsorted(self.sources, degrees["source"].astype(np.int64))
            np.add.at(self.degree, at, degrees["degree"].astype(np.int64))

    def broadcast(self, source: np.ndarray, aux: np.ndarray, kind: int, value: float = 0.0) -> pa.RecordBatch:
        b = len(self.bkeys)
        return _msgs(np.repeat(self.bkeys, len(source)), np.tile(source, b), np.full(b * len(source), value), kind,
                     np.tile(aux, b))

    def wake(self) -> pa.RecordBatch:
        me = self.bkeys[self.me:self.me + 1]
        return _msgs(me, me, np.zeros(1), WAKE)

    def step(self, t: Any, edge_batches: list, msg_batches: list, _gate: list) -> list:
        outer = as_product(t).outer
        if outer != self.current:
            self.current, self.phase, self.resets, self.invalid = outer, True, [], []
            self.fresh = None
        return stream_round(t, edge_batches, msg_batches, self.new_edges, self.messages)

    def new_edges(self, outer: Any, batches: list, out: list) -> None:
        self.dist.compact()
        self.edges.compact()
        self.edges_in(outer, batches, out)

    def messages(self, t: Product, table: pa.Table, out: list) -> None:
        kind = table["kind"].to_numpy()
        v, s, d, aux = (table[c].to_numpy() for c in ("vertex", "source", "distance", "aux"))
        proposals = [(v[kind == PROPOSAL], s[kind == PROPOSAL], d[kind == PROPOSAL])]
        if t.inner == 1:
            self.checks(v[kind == DEGREE], d[kind == DEGREE], out)
        if self.phase:
            self.resets.append(s[kind == RESET])
            self.invalid.append((aux[kind == GONE], s[kind == GONE]))
            found = self.invalidate(v[kind == CHECK], s[kind == CHECK], d[kind == CHECK], out)
            found += self.invalidate(v[kind == INVALID], s[kind == INVALID], d[kind == INVALID], out)
            if t.inner == 1 or d[kind == TICK].sum() > 0:
                out.append(self.broadcast(np.zeros(1, np.int64), np.zeros(1, np.int64), TICK, float(found)))
                return
            self.phase = False                            # nothing invalidated in the last round, anywhere
            proposals += self.restart(out)
        pv, ps, pd = (np.concatenate([p[i] for p in proposals]) for i in range(3))
        if len(pv):
            self.relax(*self.dist.merge(pv, ps, pd, out), out)

    def edges_in(self, time: Any, batches: list, out: list) -> None:
        """Round 0: apply this worker's edge changes; ask about withdrawn edges."""
        if not batches:
            return
        parts = [weighted_edges(b, self.src, self.dst, self.weight, self.name) for b in batches]
        a, c, w = (np.concatenate([p[i] for p in parts]) for i in range(3))
        diff = np.concatenate([diffs_at(b, self.name, time) for b in batches])
        keys, udiff, _, _, old = self.edges.preview([a, c, w], diff)
        new = old + udiff
        bad = np.flatnonzero(new < 0)
        if len(bad):
            i = bad[0]
            row = f"({self.src}={keys[0][i]}, {self.dst}={keys[1][i]}" + (
                f", {self.weight}={keys[2][i]})" if self.weight else ")")
            raise withdrawn_error(self.name, time, row, int(old[i]), int(udiff[i]))
        self.edges.add(keys, udiff)
        ends = np.concatenate([keys[0], keys[1]])
        mine = np.isin(ends, self.sources)
        if mine.any():
            out.append(_msgs(ends[mine], ends[mine], np.concatenate([udiff, udiff])[mine], DEGREE))
        added = (old == 0) & (new > 0)
        self.inserted = tuple(k[added] for k in keys) if added.any() else ()
        if self.inserted:                  # (rows stay put until the next epoch's compaction)
            self.fresh = np.zeros(len(self.edges), bool)
            self.fresh[self.edges.find(list(self.inserted))[0]] = True
        removed = np.flatnonzero((old > 0) & (new == 0))
        if len(removed):
            which, s, d = self.dist.of(keys[0][removed])
            if len(which):
                at = removed[which]
                out.append(_msgs(keys[1][at], s, d + keys[2][at], CHECK))
        out.append(self.wake())

    def checks(self, deg_v: np.ndarray, deg_d: np.ndarray, out: list) -> None:
        """Round 1: a source entering or leaving the graph is recomputed (broadcast)."""
        if len(deg_v):
            at = np.searchsorted(self.sources, deg_v)
            before = self.degree.copy()
            np.add.at(self.degree, at, deg_d.astype(np.int64))
            flipped = self.sources[(before > 0) != (self.degree > 0)]
            if len(flipped):
                out.append(self.broadcast(flipped, flipped, RESET))

    def invalidate(self, v: np.ndarray, s: np.ndarray, cand: np.ndarray, out: list) -> int:
        """Distances that relied on a withdrawn edge or an invalidated vertex (``cand``
        is what that support gave: equal to the distance, it was a shortest path) are
        dropped and the invalidation follows their out-edges; a source's own 0 stays."""
        if not len(v):
            return 0
        tight = (self.dist.get(v, s) == cand) & (v != s)
        if not tight.any():
            return 0
        v, s, _ = _best(v[tight], s[tight], cand[tight])
        d = self.dist.remove(v, s, out)
        out.append(self.broadcast(s, v, GONE))
        which, rows = self.edges.rows_of(v, live=True)
        if self.fresh is not None:
            # Only the edges held before this epoch: the old distances are shortest over
            # those, so the least candidate per target is its distance exactly when one is
            # tight; an edge added this epoch (not relaxed yet) may offer less and hide it.
            held = ~self.fresh[rows]
            which, rows = which[held], rows[held]
        if len(rows):
            pv, ps, pd = _best(self.edges.cols[1][rows], s[which], d[which] + self.edges.cols[2][rows])
            out.append(_msgs(pv, ps, pd, INVALID))
        return len(v)

    def restart(self, out: list) -> list:
        """When the invalidation is over: drop and re-seed the sources to recompute;
        re-derive the invalidated distances from the in-edges of valid vertices (one
        vectorized pass over this worker's edges); relax the new edges."""
        found: list = []
        reset = np.unique(np.concatenate([np.zeros(0, np.int64)] + self.resets))
        iv = np.concatenate([np.zeros(0, np.int64)] + [p[0] for p in self.invalid])
        is_ = np.concatenate([np.zeros(0, np.int64)] + [p[1] for p in self.invalid])
        keep = ~np.isin(is_, reset)
        if keep.any():
            iv, is_, _ = _best(iv[keep], is_[keep], np.zeros(int(keep.sum())))
            rows = np.flatnonzero(np.isin(self.edges.cols[1], iv) & (self.edges.count > 0))
            lo = np.searchsorted(iv, self.edges.cols[1][rows], "left")
            hi = np.searchsorted(iv, self.edges.cols[1][rows], "right")
            row = np.repeat(rows, hi - lo)
            pair = expand_ranges(lo, hi)
            d = self.dist.get(self.edges.cols[0][row], is_[pair]) + self.edges.cols[2][row]
            ok = np.isfinite(d)
            if ok.any():
                pv, ps, pd = _best(iv[pair][ok], is_[pair][ok], d[ok])
                out.append(_msgs(pv, ps, pd, PROPOSAL))
        if len(reset):
            self.dist.drop(reset, out)
            mine = reset[self.degree[np.searchsorted(self.sources, reset)] > 0]
            found.append((mine, mine, np.zeros(len(mine))))
        if self.inserted:
            a, c, w = self.inserted
            self.inserted = ()
            which, s, d = self.dist.of(a)
            keep = ~np.isin(s, reset)
            which, s, d = which[keep], s[keep], d[keep]
            if len(which):
                pv, ps, pd = _best(c[which], s, d + w[which])
                out.append(_msgs(pv, ps, pd, PROPOSAL))
        return found

    def relax(self, v: np.ndarray, s: np.ndarray, d: np.ndarray, out: list) -> None:
        if not len(v):
            return
        which, rows = self.edges.rows_of(v, live=True)
        if len(rows):
            pv, ps, pd = _best(self.edges.cols[1][rows], s[which], d[which] + self.edges.cols[2][rows])
            out.append(_msgs(pv, ps, pd, PROPOSAL))


def shortest_paths_stream(edges: "Stream", sources: Sequence[int], weight: Optional[str] = None,
                          src: str = "src", dst: str = "dst", **pipeline: Any) -> "Stream":
    """A changelog of edges ``(src, dst[, weight], optional diff)`` in (ids of any type the
    batch form takes, one type per stream: see :mod:`.ids.stream`; ``sources`` a list or
    pyarrow array of ids of that type); a changelog
    of ``(vertex, source, distance, diff)`` out: at each completed time, the distances
    that changed, appeared or went (``-1`` for the old row, ``+1`` for the new), from
    each source in the graph to each vertex it reaches -- hop counts (int64) when
    ``weight`` is None, else minimum sums of the non-negative ``weight`` column.

    Inserted edges are relaxed from their ``src`` only; a withdrawn edge that some
    shortest path used invalidates the distances that relied on it (following
    shortest-path edges) and only those are re-derived, exactly; a source entering
    or leaving the graph is recomputed.  The edges are a multiset of rows
    (a changed weight without withdrawing the old row is a parallel edge: the lighter
    one counts).  A ``diff`` that is not an integer, or a withdrawal of an edge not
    held, raises :class:`~timely_spark.errors.ChangelogError` naming the operator, the
    time and the edge.

    Given a streaming Spark DataFrame of edge changes instead, with ``checkpoint=DIR``
    and any other setting of :func:`timely_spark.spark.stream` as keywords, it runs as
    that pipeline and returns it: its ``.df`` streams the changes (``vertex``, ``source``, ``distance``,
    ``diff``; see :mod:`.stream_frames`).

    >>> import pyarrow as pa, timely_spark as ts
    >>> def build(s):
    ...     inp, edges = s.new_input()
    ...     shortest_paths_stream(edges, [1]).inspect_time(lambda t, rb: print(t, rb.sort_by("vertex").to_pydict()))
    ...     inp.send(pa.record_batch({"src": [1, 2], "dst": [2, 3]}))
    ...     inp.advance_to(1)
    ...     inp.send(pa.record_batch({"src": [1], "dst": [3], "diff": [1]}))
    ...     inp.close()
    >>> _ = ts.example(build)
    0 {'vertex': [1, 2, 3], 'source': [1, 1, 1], 'distance': [0, 1, 2], 'diff': [1, 1, 1]}
    1 {'vertex': [3, 3], 'source': [1, 1], 'distance': [2, 1], 'diff': [-1, 1]}
    """
    if is_frame(edges) or pipeline:
        return run_on_frame(edges, "ts.graph.shortest_paths_stream",
                            lambda scope, s: shortest_paths_stream(s, sources, weight, src, dst),
                            lambda t: f"vertex {t}, source {t}, distance {'long' if weight is None else 'double'}, "
                                      "diff long", src, dst, pipeline)
    name = "ShortestPathsStream"
    ids, originals = local_sources(sources)
    wanted = source_vertices(ids)
    edges, pairs = encode_stream_ids(edges, src, dst, name)

    def make(inner: Any) -> _Paths:
        return _Paths(inner.peers, inner.index, wanted, weight, src, dst, name)

    result = rounds_in_order(edges, make, src, name).consolidate(name=f"{name}Changes")
    if weight is None:
        result = result.map(lambda rb: rb.set_column(2, "distance", rb.column(2).cast(pa.int64())))
    return decode_sources(decode_stream_ids(pairs, result, "vertex", name), originals, "source")

