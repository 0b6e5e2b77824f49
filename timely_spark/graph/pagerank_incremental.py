"""Incremental PageRank: a changelog of edges in, a changelog of ranks out.

The ranks ``x`` are kept in the workers with a *residual* ``r`` per vertex, so that
always (N vertices, ``out(u)`` counting duplicate edges, ``D`` the rank of the
vertices without out-edges)::

    r(v) = (1 - d)/N + d * (D/N + sum_{u->v} x(u)/out(u)) - x(v)

``r = 0`` is PageRank exactly (the definition of :mod:`.pagerank`, as a fixed point).
An epoch's edge changes only move residuals: the out-neighbours of a vertex whose
out-degree changed, and the uniform part ``(1 - d + d*D)/N`` when ``N`` or ``D`` change.
Then, round after round, every vertex whose residual exceeds ``tolerance`` *pushes*
it: ``x(v) += r(v)``, ``r(v) = 0``, and ``d * r(v) * c/out(v)`` goes to each out-edge's
target (``c`` copies of the edge), or to everyone through ``D`` if ``v`` has no
out-edge.  Only pushed vertices change rank, and only they are re-emitted; the work
follows the change and fades where it is smaller than the tolerance.

Error bound.  When an epoch's result is out, every vertex's own residual is within
``tolerance`` and the not yet distributed uniform part is within ``tolerance`` too,
so ``|r(v)| <= 2 * tolerance``.  Since ``x* - x = (I - d M)^-1 r`` with ``M``
column-stochastic, the emitted ranks satisfy::

    sum_v |x(v) - x*(v)| <= 2 * N * tolerance / (1 - d)

(and so does each vertex's error on its own).

Output contract.  A vertex's rank is re-emitted only when it entered or left the graph
or its rank ``x(v)`` moved by more than ``output_tolerance`` times the rank last
emitted for it (``shown(v)``); otherwise the earlier row stands.  So after every
completed epoch, for every vertex, ``|shown(v) - x(v)| <= output_tolerance * shown(v)``
and, with the bound above (``S`` the sum of the folded ranks)::

    |shown(v) - x*(v)| <= output_tolerance * shown(v) + 2 * N * tolerance / (1 - d)
    sum_v |shown(v) - x*(v)| <= output_tolerance * S + 2 * N * tolerance / (1 - d)

Measured on a random graph of 2 M edges (1 M vertices) with epochs of 1,000 changed
edges, the exact ranks of ~168 vertices per changed edge move by more than ``1e-9``
(a thousandth of the mean rank): a change really propagates that far, so emitting every
pushed vertex is ~290 rows per changed edge; a vertex moving by more than 10 % of its
rank is ~3 per changed edge.  A change of the uniform level (new vertices, a vertex
gaining or losing its last out-edge) moves every rank a little: it is re-emitted once
the ranks have drifted by ``output_tolerance`` (the graph grew by about that share).

State per worker, sharded by vertex
id like the batch form: the edges it owns by ``src`` as a sorted multiset
(:class:`.sorted_rows.SortedRows`) and its vertices' ``x``, ``r``, out-degree and
degree in arrays sorted by id; an update touches the rows it names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..dataflow import DIFF
from ..errors import ParameterError
from ..progress import Product
from ..runtime import check_fraction, check_positive
from .broadcast import broadcast_keys
from .components_columnar import edge_arrays
from .edge_input import diffs_at, withdrawn_error
from .ids.stream import decode_stream_ids, encode_stream_ids
from .in_order import rounds_in_order
from .loop_rounds import stream_round
from .sorted_rows import SortedRows
from .stream_frames import is_frame, run_on_frame
from .stream_state import keyed_parts, part_of, scalars_of
from .unique import sorted_unique

#: pagerank_stream's default tolerance: a vertex whose rank would move by more propagates.
PAGERANK_TOLERANCE = 1e-9

#: pagerank_stream's default output tolerance: a vertex is re-emitted once its rank moved
#: by more than this share of the rank last emitted for it.
PAGERANK_OUTPUT_TOLERANCE = 0.1

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["pagerank_stream", "check_stream_parameters"]

CONTRIB, DEGREE, COUNT, DANGLING, WAKE = 0, 1, 2, 3, 4


def _msgs(vertex: np.ndarray, value: np.ndarray, kind: int) -> pa.RecordBatch:
    return pa.record_batch({"vertex": vertex.astype(np.int64, copy=False),
                            "value": np.asarray(value, np.float64),
                            "kind": np.full(len(vertex), kind, np.int8)})


def _ranks(vertex: np.ndarray, rank: np.ndarray, diff: np.ndarray) -> pa.RecordBatch:
    return pa.record_batch({"vertex": vertex, "rank": rank, DIFF: diff.astype(np.int64, copy=False)})


class _Vertices:
    """This worker's vertices, sorted by id: rank ``x``, residual ``s`` (relative to
    the uniform level ``applied``), out-degree and degree (edges in + out)."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, np.int64)
        self.x = np.zeros(0)
        self.s = np.zeros(0)
        self.out = np.zeros(0, np.int64)
        self.deg = np.zeros(0, np.int64)
        self.mark = np.full(0, -1, np.int64)        # the last epoch (sequence number) that changed it
        self.shown = np.zeros(0)                    # the rank last emitted, NaN if none

    NAMES = ("ids", "x", "s", "out", "deg", "mark", "shown")

    def ensure(self, ids: np.ndarray) -> np.ndarray:
        """Positions of ``ids`` (sorted, distinct), creating absent ones (degree 0)."""
        pos = np.searchsorted(self.ids, ids)
        fresh = (pos == len(self.ids)) | (self.ids[np.minimum(pos, len(self.ids) - 1)] != ids) if len(
            self.ids) else np.ones(len(ids), bool)
        if fresh.any():
            at = pos[fresh]
            self.ids = np.insert(self.ids, at, ids[fresh])
            self.x, self.s = np.insert(self.x, at, 0.0), np.insert(self.s, at, 0.0)
            self.out, self.deg = np.insert(self.out, at, 0), np.insert(self.deg, at, 0)
            self.mark, self.shown = np.insert(self.mark, at, -1), np.insert(self.shown, at, np.nan)
            pos = np.searchsorted(self.ids, ids)
        return pos


class _PageRank:
    """One worker's state and the logic of each loop round (see the module doc)."""

    def __init__(self, peers: int, tolerance: float, output_tolerance: float, damping: float, src: str, dst: str,
                 name: str) -> None:
        self.bkeys = broadcast_keys(peers)
        self.tol, self.d, self.src, self.dst, self.name = tolerance, damping, src, dst, name
        self.out_tol = output_tolerance
        self.edges = SortedRows([np.int64, np.int64])
        self.v = _Vertices()
        self.n = 0.0                 # vertices in the graph (all workers)
        self.dangling = 0.0          # D: rank of the vertices without out-edges (all workers)
        self.applied = 0.0           # the uniform level folded into this worker's residuals
        self.dirty: list = []        # ids whose residual moved since they were last checked
        self.seq: dict = {}          # outer time -> epoch sequence number
        self.next_seq = 0
        self.left = 0                # vertices that left the graph since the last compaction
        self.finalized = -1          # the last epoch emitted
        self.changed: dict = {}      # epoch -> [ids changed]
        self.saved: dict = {}        # epoch -> [(ids, values at its end)] overwritten by a later epoch
        self.targets: Any = None     # (distinct edge targets, each edge's index in them), per epoch

    def snapshot(self) -> pa.Table:
        """This worker's state, keyed (:mod:`.stream_state`), between epochs: the live
        edges by ``src``; per vertex its rank, residual (relative to the uniform level
        folded in: ``s - applied`` is the same on any worker), out-degree, degree, last
        emitted rank and whether it is due a check; the global count, dangling rank and
        epoch counter."""
        live = self.edges.count > 0
        v = self.v
        dirty = np.isin(v.ids, np.concatenate(self.dirty)) if self.dirty else np.zeros(len(v.ids), bool)
        return keyed_parts(
            {0: ("src", {"src": self.edges.cols[0][live], "dst": self.edges.cols[1][live],
                         "count": self.edges.count[live]}),
             1: ("ids", {"ids": v.ids, "x": v.x, "s": v.s - self.applied, "out": v.out, "deg": v.deg,
                         "shown": v.shown, "dirty": dirty})},
            {"n": self.n, "dangling": self.dangling, "applied": self.applied, "next_seq": self.next_seq})

    def restore(self, table: pa.Table) -> None:
        """Rebuild from :meth:`snapshot`'s rows (of one or more workers)."""
        scalars = scalars_of(table, self.name)
        if scalars is None:
            return
        self.n, self.dangling, self.applied = scalars["n"], scalars["dangling"], scalars["applied"]
        self.next_seq = int(scalars["next_seq"])
        self.finalized = self.next_seq - 1            # every epoch before the snapshot was emitted
        edges = part_of(table, 0)
        if len(edges.get("src", ())):
            self.edges.add([edges["src"].astype(np.int64), edges["dst"].astype(np.int64)],
                           edges["count"].astype(np.int64))
        rows = part_of(table, 1)
        if len(rows.get("ids", ())):
            order = np.argsort(rows["ids"], kind="stable")
            v = self.v
            v.ids = rows["ids"][order].astype(np.int64)
            v.x, v.s = rows["x"][order].astype(np.float64), rows["s"][order].astype(np.float64) + self.applied
            v.out, v.deg = rows["out"][order].astype(np.int64), rows["deg"][order].astype(np.int64)
            v.shown = rows["shown"][order].astype(np.float64)
            v.mark = np.full(len(order), -1, np.int64)
            dirty = rows["dirty"][order].astype(bool)
            self.dirty = [v.ids[dirty]] if dirty.any() else []
            self.left = int(np.count_nonzero(v.deg == 0))

    def uniform(self) -> float:
        return ((1 - self.d) + self.d * self.dangling) / self.n if self.n else 0.0

    def broadcast(self, value: float, kind: int) -> pa.RecordBatch:
        return _msgs(self.bkeys, np.full(len(self.bkeys), value), kind)

    def step(self, t: Any, edge_batches: list, msg_batches: list, _gate: list) -> list:
        return stream_round(t, edge_batches, msg_batches, self.new_edges, self.messages)

    def new_edges(self, outer: Any, batches: list, out: list) -> None:
        self.targets = None                           # the edges change here
        self.compact()
        self.edges_in(outer, batches, out)

    def messages(self, t: Product, table: pa.Table, out: list) -> None:
        kind = table["kind"].to_numpy()
        vertex = table["vertex"].to_numpy()
        value = table["value"].to_numpy()
        self.n += float(value[kind == COUNT].sum())
        self.dangling += float(value[kind == DANGLING].sum())
        seq = self.epoch(t.outer)
        if t.inner == 1:
            self.degrees(vertex[kind == DEGREE], value[kind == DEGREE], seq, out)
        self.contributions(vertex[kind == CONTRIB], value[kind == CONTRIB])
        if t.inner >= 2:
            self.push(seq, out)

    def compact(self) -> None:
        self.edges.compact()
        if self.left * 4 <= len(self.v.ids):          # vertices left since the last compaction
            return
        self.left = 0
        keep = (self.v.deg > 0) | (self.v.mark > self.finalized) | ~np.isnan(self.v.shown)
        if (~keep).sum() * 4 > len(keep):
            for name in _Vertices.NAMES:
                setattr(self.v, name, getattr(self.v, name)[keep])
        self.left = int(np.count_nonzero(self.v.deg == 0))

    def epoch(self, outer: Any) -> int:
        """This worker's sequence number of epoch ``outer`` (epochs come in order)."""
        seq = self.seq.get(outer)
        if seq is None:
            seq = self.seq[outer] = self.next_seq
            self.next_seq += 1
        return seq

    def value(self, pos: np.ndarray) -> np.ndarray:
        """The rank a vertex has in the result: NaN if it is not in the graph."""
        return np.where(self.v.deg[pos] > 0, self.v.x[pos], np.nan)

    def modify(self, pos: np.ndarray, seq: int, out: list) -> None:
        """Before epoch ``seq`` changes the rank or presence of the vertices at ``pos``:
        keep the value of an earlier epoch not yet emitted, note them as changed."""
        mark = self.v.mark[pos]
        older = (mark < seq) & (mark > self.finalized)
        for epoch in np.unique(mark[older]):
            at = pos[mark == epoch]
            self.saved.setdefault(int(epoch), []).append((self.v.ids[at], self.value(at)))
        fresh = pos[mark != seq]
        if len(fresh):
            self.changed.setdefault(seq, []).append(self.v.ids[fresh])
            self.v.mark[fresh] = seq
            out.append(pa.record_batch({"epoch": np.full(1, seq, np.int64)}))

    def emit(self, time: Any, ticks: list) -> list:
        """Outside the loop, once epoch ``time`` is complete: the ranks it changed by more
        than the output tolerance (or that entered or left), netted."""
        seq = int(ticks[0]["epoch"][0].as_py())
        self.finalized = seq
        self.seq.pop(time, None)
        ids = sorted_unique(np.concatenate(self.changed.pop(seq, [np.zeros(0, np.int64)])))
        pos = np.searchsorted(self.v.ids, ids)
        new = self.value(pos)
        for saved_ids, saved_values in self.saved.pop(seq, []):      # since changed by a later epoch
            new[np.searchsorted(ids, saved_ids)] = saved_values
        old = self.v.shown[pos]
        moved = np.isnan(old) | np.isnan(new) | (np.abs(new - old) > self.out_tol * np.abs(old))
        ids, pos, old, new = ids[moved], pos[moved], old[moved], new[moved]
        self.v.shown[pos] = new
        gone = ~np.isnan(old) & (np.isnan(new) | (old != new))
        came = ~np.isnan(new) & (np.isnan(old) | (old != new))
        return [_ranks(np.concatenate([ids[gone], ids[came]]), np.concatenate([old[gone], new[came]]),
                       np.concatenate([-np.ones(int(gone.sum())), np.ones(int(came.sum()))]))]

    def edges_in(self, time: Any, batches: list, out: list) -> None:
        """Round 0: apply the edge changes this worker owns (by ``src``)."""
        if not batches:
            return
        pairs = [edge_arrays(b, self.src, self.dst, self.name) for b in batches]
        a = np.concatenate([p[0] for p in pairs])
        c = np.concatenate([p[1] for p in pairs])
        diff = np.concatenate([diffs_at(b, self.name, time) for b in batches])
        keys, udiff, pos, found, old = self.edges.preview([a, c], diff)
        bad = np.flatnonzero(old + udiff < 0)
        if len(bad):
            i = bad[0]
            raise withdrawn_error(self.name, time, f"({self.src}={keys[0][i]}, {self.dst}={keys[1][i]})",
                                  int(old[i]), int(udiff[i]))
        self.edges.add(keys, udiff)
        if not len(udiff):
            return
        ends = np.concatenate(keys)
        ids, inverse = np.unique(ends, return_inverse=True)
        degree = np.bincount(inverse, weights=np.concatenate([udiff, udiff]), minlength=len(ids))
        out.append(_msgs(ids, degree, DEGREE))
        # out-degree changes of this worker's sources, and what they move downstream
        srcs, at = np.unique(keys[0], return_inverse=True)
        dout = np.bincount(at, weights=udiff, minlength=len(srcs)).astype(np.int64)
        pos_u = self.v.ensure(srcs)
        o_old = self.v.out[pos_u]
        o_new = o_old + dout
        self.v.out[pos_u] = o_new
        x_u = self.v.x[pos_u]
        d_dangling = float(x_u[(o_old == 0) & (o_new > 0)].sum() - x_u[(o_old > 0) & (o_new == 0)].sum())
        if d_dangling:
            out.append(self.broadcast(-d_dangling, DANGLING))
        moved = np.flatnonzero(x_u != 0)              # every source with a changed edge
        if len(moved):
            which, rows = self.edges.rows_of(srcs[moved])
            change = np.zeros(len(rows), np.int64)
            changed_pos, _ = self.edges.find(keys)
            hit = np.searchsorted(rows, changed_pos)
            ok = hit < len(rows)
            ok[ok] &= rows[hit[ok]] == changed_pos[ok]
            change[hit[ok]] = udiff[ok]
            c_new = self.edges.count[rows]
            c_old = c_new - change
            u = moved[which]
            with np.errstate(divide="ignore", invalid="ignore"):
                share_new = np.where(o_new[u] > 0, c_new / np.maximum(o_new[u], 1), 0.0)
                share_old = np.where(o_old[u] > 0, c_old / np.maximum(o_old[u], 1), 0.0)
            adjust = self.d * x_u[u] * (share_new - share_old)
            targets = self.edges.cols[1][rows]
            tid, tinv = np.unique(targets, return_inverse=True)
            out.append(_msgs(tid, np.bincount(tinv, weights=adjust, minlength=len(tid)), CONTRIB))

    def degrees(self, vertex: np.ndarray, value: np.ndarray, seq: int, out: list) -> None:
        """Round 1: vertices enter (rank 0, residual at the uniform level) or leave."""
        if len(vertex):
            ids, inverse = np.unique(vertex, return_inverse=True)
            delta = np.bincount(inverse, weights=value, minlength=len(ids)).astype(np.int64)
            pos = self.v.ensure(ids)
            before = self.v.deg[pos]
            after = before + delta
            born, gone = pos[(before == 0) & (after > 0)], pos[(before > 0) & (after == 0)]
            self.modify(np.concatenate([born, gone]), seq, out)
            self.left += len(gone)
            self.v.deg[pos] = after
            self.v.x[born] = 0.0
            self.v.s[born] = self.applied
            self.dirty.append(self.v.ids[born])
            if len(gone):
                lost = float(self.v.x[gone].sum())
                if lost:
                    out.append(self.broadcast(-lost, DANGLING))
                self.v.x[gone] = 0.0
                self.v.s[gone] = 0.0
            count = len(born) - len(gone)
        else:
            count = 0
        out.append(self.broadcast(float(count), COUNT))      # also wakes every worker for round 2

    def contributions(self, vertex: np.ndarray, value: np.ndarray) -> None:
        if len(vertex):
            ids, inverse = np.unique(vertex, return_inverse=True)
            pos = self.v.ensure(ids)
            self.v.s[pos] += np.bincount(inverse, weights=value, minlength=len(ids))
            self.dirty.append(ids)

    def push(self, seq: int, out: list) -> None:
        """Rounds 2..: push every vertex whose residual exceeds the tolerance."""
        level = self.uniform()
        if abs(level - self.applied) > self.tol:          # fold the uniform part in: a full pass
            alive = self.v.deg > 0
            self.v.s[alive] += level - self.applied
            self.applied = level
            candidates = np.flatnonzero(alive)
        elif self.dirty:
            ids = sorted_unique(np.concatenate(self.dirty))
            candidates = np.searchsorted(self.v.ids, ids)
            candidates = candidates[self.v.deg[candidates] > 0]
        else:
            candidates = np.zeros(0, np.intp)
        self.dirty = []
        sel = candidates[np.abs(self.v.s[candidates]) > self.tol]
        if not len(sel):
            return
        r = self.v.s[sel]
        ids = self.v.ids[sel]
        self.modify(sel, seq, out)
        self.v.x[sel] += r
        self.v.s[sel] = 0.0
        o = self.v.out[sel]
        dangling = o == 0
        if dangling.any():
            out.append(self.broadcast(float(r[dangling].sum()), DANGLING))
        spread = np.flatnonzero(~dangling)
        if len(spread):
            which, rows = self.edges.rows_of(ids[spread], live=True)
            share = self.d * r[spread][which] * self.edges.count[rows] / o[spread][which]
            out.append(self.summed(rows, share))

    def summed(self, rows: np.ndarray, share: np.ndarray) -> pa.RecordBatch:
        """CONTRIB messages: ``share`` summed per target of the edge ``rows``.  A push
        over many edges (the first epochs, a move of the uniform level) sums by the
        targets' ranks among all edge targets, computed once per epoch (the edges only
        change in round 0); a small one sorts just its own targets."""
        if len(rows) * 8 > len(self.edges):
            if self.targets is None:
                self.targets = np.unique(self.edges.cols[1], return_inverse=True)
            tid, tinv = self.targets
            sums = np.bincount(tinv[rows], weights=share, minlength=len(tid))
            hit = np.flatnonzero(sums)
            return _msgs(tid[hit], sums[hit], CONTRIB)
        tid, tinv = np.unique(self.edges.cols[1][rows], return_inverse=True)
        return _msgs(tid, np.bincount(tinv, weights=share, minlength=len(tid)), CONTRIB)


def check_stream_parameters(tolerance: Any, damping: Any, output_tolerance: Any) -> None:
    """ParameterError naming ``tolerance`` (not > 0), ``damping`` (not in [0, 1)) or
    ``output_tolerance`` (not in [0, 1])."""
    check_positive("tolerance", tolerance, allow_none=False)
    check_fraction("output_tolerance", output_tolerance)
    check_fraction("damping", damping)
    if damping >= 1:
        raise ParameterError(f"damping must be in [0, 1) for pagerank_stream (at 1 the pushes need not end), "
                             f"got {damping!r}", "damping")


def pagerank_stream(edges: "Stream", tolerance: float = PAGERANK_TOLERANCE, damping: float = 0.85,
                    src: str = "src", dst: str = "dst", output_tolerance: float = PAGERANK_OUTPUT_TOLERANCE,
                    **pipeline: Any) -> "Stream":
    """A changelog of edges ``(src, dst, optional diff)`` in (ids of any type the batch
    form takes, one type per stream: see :mod:`.ids.stream`); a changelog of
    ``(vertex, rank, diff)`` out: at each completed time, ``-1`` rows for the ranks
    re-emitted or that left and ``+1`` rows for the new ones, nothing for the rest.

    Each time continues from the previous ranks (a warm start); only vertices whose
    rank moves by more than ``tolerance`` are updated and propagate, so the work
    follows the change.  A vertex is re-emitted only when it enters or leaves the
    graph or its rank moved by more than ``output_tolerance`` (a share, default 0.1)
    of the rank last emitted for it; ``output_tolerance=0`` emits every change.

    The contract, after every completed time, for the collection the output describes
    (its diffs summed: ``shown``) against the exact PageRank ``x*`` of the edge
    multiset so far (N vertices, ``S`` the sum of ``shown``; see the module doc)::

        |shown(v) - x*(v)| <= output_tolerance * shown(v) + 2 * N * tolerance / (1 - damping)
        sum_v |shown(v) - x*(v)| <= output_tolerance * S + 2 * N * tolerance / (1 - damping)

    so ``shown`` need not sum to 1.  A change a vertex's rank does not carry past
    the output tolerance costs no row: on a random graph of 2 M edges about 6 rows
    per changed edge at the default, ~290 with ``output_tolerance=0`` (a change
    really moves the ranks of ~170 vertices per changed edge by more than ``1e-9``).
    Duplicate edges count as often as they are held; a vertex whose last edge is
    withdrawn leaves.
    A ``diff`` that is not an integer, or a withdrawal of an edge not held, raises
    :class:`~timely_spark.errors.ChangelogError` naming the operator, time and edge.

    Given a streaming Spark DataFrame of edge changes instead, with ``checkpoint=DIR``
    and any other setting of :func:`timely_spark.spark.stream` as keywords, it runs as
    that pipeline and returns it: its ``.df`` streams the changes (``vertex``, ``rank``,
    ``diff``; see :mod:`.stream_frames`).

    >>> import pyarrow as pa, timely_spark as ts
    >>> def build(s):
    ...     inp, edges = s.new_input()
    ...     pagerank_stream(edges, tolerance=1e-12).inspect_time(
    ...         lambda t, rb: print(t, rb.sort_by("vertex")["vertex"].to_pylist(),
    ...                             rb.sort_by("vertex")["rank"].to_numpy().round(4).tolist(),
    ...                             rb.sort_by("vertex")["diff"].to_pylist()))
    ...     inp.send(pa.record_batch({"src": [1, 2], "dst": [2, 1]}))
    ...     inp.advance_to(1)
    ...     inp.send(pa.record_batch({"src": [1], "dst": [2], "diff": [-1]}))
    ...     inp.close()
    >>> _ = ts.example(build)
    0 [1, 2] [0.5, 0.5] [1, 1]
    1 [1, 1, 2, 2] [0.5, 0.6491, 0.5, 0.3509] [-1, 1, -1, 1]

    A new vertex beside a graph moves every rank by a hair (one vertex more shares the
    teleport): only the new vertices are emitted, every other rank stands within 10 %
    (with ``output_tolerance=0`` the 11 others are re-emitted too: 24 rows):

    >>> def grow(s):
    ...     inp, edges = s.new_input()
    ...     pagerank_stream(edges, tolerance=1e-12).inspect_time(
    ...         lambda t, rb: print(t, rb.num_rows, sorted(set(rb["vertex"].to_pylist()))[:3]))
    ...     inp.send(pa.record_batch({"src": list(range(10)), "dst": list(range(1, 11))}))
    ...     inp.advance_to(1)
    ...     inp.send(pa.record_batch({"src": [20], "dst": [21]}))
    ...     inp.close()
    >>> _ = ts.example(grow)
    0 11 [0, 1, 2]
    1 2 [20, 21]
    """
    if is_frame(edges) or pipeline:
        return run_on_frame(edges, "ts.graph.pagerank_stream",
                            lambda scope, s: pagerank_stream(s, tolerance, damping, src, dst, output_tolerance),
                            lambda t: f"vertex {t}, rank double, diff long", src, dst, pipeline)
    check_stream_parameters(tolerance, damping, output_tolerance)
    name = "PageRankStream"
    state: list = []

    def make(inner: Any) -> _PageRank:
        state.append(_PageRank(inner.peers, tolerance, output_tolerance, damping, src, dst, name))
        return state[0]

    edges, pairs = encode_stream_ids(edges, src, dst, name)
    ticks = rounds_in_order(edges, make, src, name)
    ranks = ticks.per_time(lambda t, batches: state[0].emit(t, batches), name=f"{name}Emit")
    return decode_stream_ids(pairs, ranks, "vertex", name)

