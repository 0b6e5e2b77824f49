"""Incremental connected components: a changelog of edges in, the changelog of
``(vertex, component)`` out, work per time proportional to the change.

Where the state lives, in two stages, both sharded (nothing is gathered on one worker):

* :class:`EdgeCounts`, by edge: each undirected edge ``(min, max)`` goes to the worker
  its pair hashes to (``ExchangeBy(["_lo", "_hi"])``), which keeps the multiplicity of
  every directed row (so a withdrawal of a row never added is caught there, naming the
  operator, time and row) -- an undirected edge's being the sum of its two directions' --
  and passes on only the edges
  that appear (count 0 -> >0) or vanish (>0 -> 0), as one incidence per endpoint;
* :class:`~.component_labels.ComponentLabels`, by vertex (``ExchangeBy(["vertex"])``):
  each worker holds its vertices' labels, their adjacency and an inverse index from
  label to members; every epoch the change is contracted by all workers together in a
  loop of rounds (min-label hooking and pointer jumping, :mod:`.contraction`), epochs
  strictly in order.  See :mod:`.component_labels` for the rounds and their costs.

Costs per time, for k changed edges, every part split by hash over the workers: the
edge counts O(k log m); insertions a distributed contraction over the inserted edges
and their endpoints' labels plus the relabelled vertices (O(k) rows, a few loop
rounds); deletions a search from the deleted edges' ends, level by level, until at
most one side still grows (the closed sides are the pieces that split off), with the
whole component recomputed, still distributed, when the search outgrows its budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..dataflow import DIFF, KEY_HASH, ExchangeBy, StateHooks, check_batch, hash_columns
from . import component_labels
from .component_labels import label_changes
from .components_columnar import edge_arrays
from .edge_input import edge_changes, withdrawn_error
from .ids.positions import DenseIds
from .ids.stream import decode_stream_ids, encode_stream_ids, smallest_labels
from .key_index import KeyIndex
from .state_log import log_state
from .stream_frames import is_frame, run_on_frame

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["components", "EdgeCounts"]

SHIFT = np.int64(32)
LOW = np.int64((1 << 32) - 1)


def _pack(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (u << SHIFT) | v


def _sums(at: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sums of ``values`` by group ``at`` (``0..n-1``): ``bincount`` (float
    weights) while every partial sum is exact in a float64, else ``np.add.at``."""
    if not len(values) or float(np.abs(values.astype(np.float64)).sum()) < 2.0 ** 52:
        return np.bincount(at, weights=values, minlength=n).astype(np.int64)
    out = np.zeros(n, np.int64)
    np.add.at(out, at, values)
    return out


class EdgeCounts:
    """The multiplicity of each directed edge row (the changelog's collection), and so of
    each undirected edge (its two directions'), for the edges routed to one worker: :meth:`update` takes one
    time's rows and returns the undirected edges that appear (count 0 -> >0) or vanish
    (>0 -> 0), as the caller's vertex ids.  A withdrawal of a row never added raises
    :class:`~timely_spark.errors.ChangelogError` naming the operator, time and row.

    >>> counts = EdgeCounts("Components")
    >>> lo, hi, appeared = counts.update(0, np.array([1, 2]), np.array([2, 1]), np.array([1, 1]))
    >>> lo.tolist(), hi.tolist(), appeared.tolist()
    ([1], [2], [True])
    >>> counts.update(1, np.array([2]), np.array([1]), np.array([-1]))[0].tolist()   # one copy left
    []
    """

    def __init__(self, operator: str) -> None:
        self.operator = operator
        self.ids = DenseIds(operator)
        self.counts = KeyIndex(empty=0)
        self.compact_at = 0                               # ids that trigger a rebuild (and COMPACT_AT)

    def __len__(self) -> int:
        return len(self.ids) + len(self.counts)

    def saved(self) -> pa.Table:
        """The counts as keyed rows ``(KEY_HASH, src, dst, count)``, one per directed edge
        row held (count > 0), each keyed by the hash ``components`` routes its edge by
        (``ExchangeBy(["_lo", "_hi"])``), so a snapshot re-shards into any worker count.

        >>> counts = EdgeCounts("Components")
        >>> _ = counts.update(0, np.array([1, 2, 5]), np.array([2, 1, 4]), np.array([2, 1, 1]))
        >>> EdgeCounts.restored("Components", counts.saved()).saved().drop_columns([KEY_HASH]).to_pydict()
        {'src': [1, 2, 5], 'dst': [2, 1, 4], 'count': [2, 1, 1]}
        """
        keys, count = self.counts.present()
        src, dst = self.ids.vid[keys >> SHIFT], self.ids.vid[keys & LOW]
        route = pa.table({"_lo": pa.array(np.minimum(src, dst)), "_hi": pa.array(np.maximum(src, dst))})
        return pa.table({KEY_HASH: pa.array(hash_columns(route, ["_lo", "_hi"]), pa.uint64()),
                         "src": pa.array(src, pa.int64()), "dst": pa.array(dst, pa.int64()),
                         "count": pa.array(count.astype(np.int64), pa.int64())})

    @classmethod
    def restored(cls, operator: str, table: pa.Table) -> "EdgeCounts":
        """Counts rebuilt from rows :meth:`saved` gave (any worker's share of them)."""
        counts = cls(operator)
        if table.num_rows:
            counts.update("restore", *(table.column(c).to_numpy() for c in ("src", "dst", "count")))
        counts.compact_at = 2 * counts.ids.n
        return counts

    def _compact(self) -> None:
        """Rebuild from the rows held (:meth:`saved`), dropping the ids of vertices with no
        edge left and the zero counts -- if at least half the ids are dead (counted: both
        ends of the rows held).  Checked again once as many new ids came as are in use."""
        keys = self.counts.present()[0]
        used = self.ids.in_use(keys >> SHIFT, keys & LOW)
        if 2 * used <= self.ids.n:
            fresh = EdgeCounts.restored(self.operator, self.saved())
            self.ids = fresh.ids
            self.counts = fresh.counts
        self.compact_at = self.ids.n + used

    def update(self, time: Any, src: np.ndarray, dst: np.ndarray, diff: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lo, hi, appeared)``: the undirected edges ``lo <= hi`` whose presence changed."""
        if not len(src):
            empty = np.zeros(0, np.int64)
            return empty, empty, np.zeros(0, bool)
        if self.ids.n >= max(self.compact_at, component_labels.COMPACT_AT):
            self._compact()
        m = len(src)
        dense = self.ids.dense(np.concatenate([src, dst]))
        keys, at = np.unique(_pack(dense[:m], dense[m:]), return_inverse=True)
        delta = _sums(at.reshape(-1), diff, len(keys))
        keys, delta = keys[delta != 0], delta[delta != 0]
        da, db = keys >> SHIFT, keys & LOW
        old, other = self.counts.add_peek(keys, delta, (db << SHIFT) | da)    # (the run fails on a bad row: no
        other[da == db] = 0                               # state is kept); the other direction's, before
        new = old + delta
        if (new < 0).any():
            bad = int(np.flatnonzero(new < 0)[0])
            u, v = self.ids.vid[keys[bad] >> SHIFT], self.ids.vid[keys[bad] & LOW]
            raise withdrawn_error(self.operator, time, f"(src={u}, dst={v})", int(old[bad]), int(delta[bad]))
        a, b = self.ids.vid[da], self.ids.vid[db]
        swap = a > b
        dlo, dhi = np.where(swap, db, da), np.where(swap, da, db)
        pairs, at = np.unique(_pack(dlo, dhi), return_inverse=True)
        at = at.reshape(-1)
        udelta = _sums(at, delta, len(pairs))
        uold = np.zeros(len(pairs), np.int64)
        uold[at] = old + other                            # (both directions of a pair give the same)
        unew = uold + udelta
        changed = (uold > 0) != (unew > 0)
        lo, hi = self.ids.vid[pairs >> SHIFT], self.ids.vid[pairs & LOW]
        return lo[changed], hi[changed], (unew > 0)[changed]


def components(edges: "Stream", src: str = "src", dst: str = "dst", **pipeline: Any) -> "Stream":
    """Incremental connected components: a changelog of edges in, the changelog of the
    result out.

    Input: record batches of edges ``(src, dst)`` with an optional integer
    ``diff`` column (``+1`` adds one copy of the edge, ``-1`` withdraws one; none
    means ``+1``; other columns are ignored).  Edges are undirected; the graph at time t holds the edges whose
    copies, summed over all times <= t, are positive.  Output: at each completed time,
    record batches ``(vertex, component, diff)`` holding only what changed: ``-1`` for
    a vertex's old row, ``+1`` for its new one, ``component`` being the smallest
    vertex id in the vertex's component (as :func:`connected_components`).  An edge
    inside a component, or a time that changes nothing, emits nothing; a vertex whose
    last edge is withdrawn leaves the result (``-1`` only).  Summing the output's
    diffs per ``(vertex, component)`` up to time t gives the components of the graph
    at time t.  Work per time is proportional to the change (see the module
    docstring for the costs, and for where the state lives: the edge counts sharded by
    edge hash, the labels and adjacency by vertex hash).

    Vertex ids may be of any type the batch forms take (integers, strings, binaries,
    uint64, dates, timestamps; one type per stream): ids that are not signed integers
    are mapped to int64 ids inside the workers (:mod:`.ids.stream`, kept in snapshots)
    and back, the component being the smallest id in the type's own order.

    A missing column or ids of two types raise :class:`~timely_spark.errors.GraphInputError`;
    a non-integer ``diff``, or the withdrawal of an edge the graph does not hold,
    :class:`~timely_spark.errors.ChangelogError` naming the operator, time and row.

    Given a streaming Spark DataFrame of edge changes instead, with ``checkpoint=DIR``
    and any other setting of :func:`timely_spark.spark.stream` as keywords, it runs as
    that pipeline and returns it: its ``.df`` streams the changes (``vertex``, ``component``,
    ``diff``; see :mod:`.stream_frames`).

    >>> import pyarrow as pa, timely_spark as ts
    >>> def build(scope):
    ...     inp, edges = scope.new_input()
    ...     components(edges).inspect_time(lambda t, rb: print(t, sorted(zip(*rb.to_pydict().values()))))
    ...     inp.send(pa.record_batch({"src": [1, 3, 5], "dst": [2, 2, 6]}))
    ...     inp.advance_to(1)
    ...     inp.send(pa.record_batch({"src": [1, 2], "dst": [3, 6], "diff": [1, 1]}))  # 1-3: inside
    ...     inp.advance_to(2)
    ...     inp.send(pa.record_batch({"src": [5], "dst": [6], "diff": [-1]}))
    ...     inp.close()
    >>> _ = ts.example(build)
    0 [(1, 1, 1), (2, 1, 1), (3, 1, 1), (5, 5, 1), (6, 5, 1)]
    1 [(5, 1, 1), (5, 5, -1), (6, 1, 1), (6, 5, -1)]
    2 [(5, 1, -1)]
    """
    if is_frame(edges) or pipeline:
        return run_on_frame(edges, "ts.graph.components", lambda scope, s: components(s, src, dst),
                            lambda t: f"vertex {t}, component {t}, diff long", src, dst, pipeline)
    name = "Components"
    scope = edges.scope
    tallies = [EdgeCounts(name)]
    edges, pairs = encode_stream_ids(edges, src, dst, name)

    def keyed(rb: pa.RecordBatch) -> pa.RecordBatch:
        a, b = edge_arrays(check_batch(rb, name), src, dst, name)
        rb = rb.select([src, dst, *([DIFF] if DIFF in rb.schema.names else [])])   # other columns stay here
        return rb.append_column("_lo", pa.array(np.minimum(a, b))).append_column("_hi", pa.array(np.maximum(a, b)))

    def count(time: Any, batches: list) -> list:
        a, b, d = edge_changes(time, batches, src, dst, name)
        counts = tallies[0]
        lo, hi, appeared = counts.update(time, a, b, d)
        log_state(scope, f"{name}Edges", time, len(counts))
        if not len(lo):
            return []
        loop = lo != hi                                   # a self-loop is one incidence
        return [pa.record_batch({"vertex": np.concatenate([lo, hi[loop]]), "other": np.concatenate([hi, lo[loop]]),
                                 "appeared": np.concatenate([appeared, appeared[loop]])})]

    # snapshots: each worker's edge counts, keyed by edge hash, and its labels (in the loop), keyed
    # by vertex hash: both re-shard at any worker count
    changes = edges.map(keyed, name=f"{name}Keys").per_time(
        count, exchange=ExchangeBy(["_lo", "_hi"], f"{name}Edges"), name=f"{name}Edges",
        state=StateHooks(lambda t: tallies[0].saved(),
                         lambda table: tallies.__setitem__(0, EdgeCounts.restored(f"{name}Edges", table)),
                         keyed=True))
    return smallest_labels(decode_stream_ids(pairs, label_changes(changes, name), "vertex", name), name)
