"""Incremental connected components: a changelog of edges in, the changelog of
``(vertex, component)`` out, work per time proportional to the change.

Where the state lives, in two stages:

* :class:`EdgeCounts`, sharded: each undirected edge ``(min, max)`` goes to the worker
  its pair hashes to (``ExchangeBy``), which keeps the multiplicity of every directed
  row (so a withdrawal of a row never added is caught there, naming the operator, time
  and row) and of the undirected edge, and passes on only the edges that appear
  (count 0 -> >0) or vanish (>0 -> 0): consolidating and checking the changelog --
  and the counts of every edge ever seen -- are split evenly over the workers.
* :class:`ComponentIndex`, on one worker (worker 0): the present undirected edges'
  adjacency and the component structure below.  This part still gathers: all
  appearing and vanishing edges go to worker 0, whose memory grows with the present
  edges and vertices.  (Issue 25 asks for it distributed too: label state sharded by
  vertex hash, with a per-epoch distributed contraction of the changed region --
  :mod:`.contraction` does that contraction for the batch form.)

The component index, all numpy arrays over dense vertex ids (``0..n-1`` in order of first sight):

* ``ids``: vertex id -> dense id (a :class:`~.key_index.KeyIndex`), ``vid``: back;
* ``adjacent``: each present undirected edge under both ``(u, v)`` and ``(v, u)``,
  so the edges of a set of vertices are a range scan, never a scan of the graph;
* ``comp`` (vertex -> component slot, -1 when the vertex has no edge), ``deg``
  (present undirected edges per vertex), and per slot ``size``, ``low`` (the smallest
  vertex id: the component's label) and ``members`` (O(log n) arrays per component,
  the newer ones no larger than half the older, merged like a binary counter;
  implicit for singletons).  A slot is the dense id of one of its members.

One time, in order:

1. (:class:`EdgeCounts`, on the edge's owner) consolidate the rows per directed edge,
   update the counts (a count below zero is a :class:`~timely_spark.errors.ChangelogError`
   naming the operator, time and row), and find the undirected edges that appear
   (count 0 -> >0) or vanish (>0 -> 0);
2. deletions: drop vanished edges from ``adjacent``; each component holding one is
   recomputed from its remaining edges (its members' adjacency ranges, then
   :func:`~.components_columnar.forest`); vertices left without edges leave;
3. insertions: the slots joined by appearing edges are merged by
   :func:`~.components_columnar.forest` over slot pairs; in each merged group the
   largest slot survives and only the members of the others are relabelled
   (smaller into larger: O(n log n) relabels over any sequence of insertions);
4. emit ``-1 (v, old label)`` / ``+1 (v, new label)`` for exactly the vertices whose
   membership or label changed: the members of components that lost their smallest
   id, vertices that joined or left.

Costs per time, for k changed edges: insertions O(k log n) plus the relabelled
members; deletions O(size + edges of each component holding a deleted edge), which is
the whole graph when the deletion lands in a giant component (still no slower than
recomputing from scratch).  What would bring deletions down: keep a spanning forest
and, for a deleted forest edge, search for a replacement edge from the smaller side
(bidirectional search, or Holm-de Lichtenberg-Thorup levels for polylog amortized);
a deleted non-forest edge then costs O(log n).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..dataflow import DIFF, KEY_HASH, Exchange, ExchangeBy, StateHooks, check_batch, hash_columns
from ..errors import GraphInputError
from .components_columnar import edge_arrays, forest
from .edge_input import edge_changes, withdrawn_error
from .key_index import KeyIndex
from .state_log import log_state
from .unique import sorted_unique

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["components", "ComponentIndex", "EdgeCounts"]

SHIFT = np.int64(32)
LOW = np.int64((1 << 32) - 1)
#: Dense vertex ids are packed two to an int64 edge key, so one index holds fewer.
MAX_VERTICES = 1 << 31
#: Components larger than this are split by searching from the deleted edges' ends
#: (:meth:`ComponentIndex._split`); smaller ones are recomputed from their edges.
SEARCH_ABOVE = 64


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
    """The multiplicity of each directed edge row (the changelog's collection) and of
    each undirected edge, for the edges routed to one worker: :meth:`update` takes one
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
        self.ids = KeyIndex()
        self.vid = np.zeros(0, np.int64)
        self.n = 0
        self.counts = KeyIndex(empty=0)
        self.undirected = KeyIndex(empty=0)

    def __len__(self) -> int:
        return len(self.ids) + len(self.counts) + len(self.undirected)

    def saved(self) -> pa.Table:
        """The counts as keyed rows ``(KEY_HASH, src, dst, count)``, one per directed edge
        row held (count > 0), each keyed by the hash ``components`` routes its edge by
        (``ExchangeBy(["_lo", "_hi"])``), so a snapshot re-shards into any worker count.

        >>> counts = EdgeCounts("Components")
        >>> _ = counts.update(0, np.array([1, 2, 5]), np.array([2, 1, 4]), np.array([2, 1, 1]))
        >>> EdgeCounts.restored("Components", counts.saved()).saved().drop_columns([KEY_HASH]).to_pydict()
        {'src': [1, 2, 5], 'dst': [2, 1, 4], 'count': [2, 1, 1]}
        """
        keys = np.concatenate([np.zeros(0, np.int64), *self.counts.keys])      # a key lives in one level
        count = np.concatenate([np.zeros(0, np.int64), *self.counts.values])
        held = count > 0
        keys, count = keys[held], count[held]
        src, dst = self.vid[keys >> SHIFT], self.vid[keys & LOW]
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
        return counts

    def _dense(self, ids: np.ndarray) -> np.ndarray:
        uniq, inverse = np.unique(ids, return_inverse=True)
        dense, found = self.ids.get(uniq, -1)
        fresh = uniq[~found]
        if len(fresh):
            start, self.n = self.n, self.n + len(fresh)
            if self.n > MAX_VERTICES:
                raise GraphInputError(f"{self.operator}: more than {MAX_VERTICES} distinct vertices on one worker",
                                      "src")
            if self.n > len(self.vid):
                cap = max(self.n, 2 * len(self.vid), 1024)
                self.vid = np.concatenate([self.vid, np.zeros(cap - len(self.vid), np.int64)])
            new = np.arange(start, self.n, dtype=np.int64)
            self.ids.set(fresh, new)
            self.vid[new] = fresh
            dense[~found] = new
        return dense[inverse.reshape(-1)]

    def update(self, time: Any, src: np.ndarray, dst: np.ndarray, diff: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lo, hi, appeared)``: the undirected edges ``lo <= hi`` whose presence changed."""
        if not len(src):
            empty = np.zeros(0, np.int64)
            return empty, empty, np.zeros(0, bool)
        m = len(src)
        dense = self._dense(np.concatenate([src, dst]))
        keys, at = np.unique(_pack(dense[:m], dense[m:]), return_inverse=True)
        delta = _sums(at.reshape(-1), diff, len(keys))
        keys, delta = keys[delta != 0], delta[delta != 0]
        old, _ = self.counts.get(keys)
        new = old + delta
        if (new < 0).any():
            bad = int(np.flatnonzero(new < 0)[0])
            u, v = self.vid[keys[bad] >> SHIFT], self.vid[keys[bad] & LOW]
            raise withdrawn_error(self.operator, time, f"(src={u}, dst={v})", int(old[bad]), int(delta[bad]))
        self.counts.set(keys, new)
        da, db = keys >> SHIFT, keys & LOW
        a, b = self.vid[da], self.vid[db]
        swap = a > b
        dlo, dhi = np.where(swap, db, da), np.where(swap, da, db)
        pairs, at = np.unique(_pack(dlo, dhi), return_inverse=True)
        at = at.reshape(-1)
        udelta = _sums(at, delta, len(pairs))
        uold, _ = self.undirected.get(pairs)
        unew = uold + udelta
        self.undirected.set(pairs, unew)
        changed = (uold > 0) != (unew > 0)
        lo, hi = self.vid[pairs >> SHIFT], self.vid[pairs & LOW]
        return lo[changed], hi[changed], (unew > 0)[changed]


class ComponentIndex:
    """The state of incremental connected components on one worker (see the module
    docstring); :meth:`update` takes one time's edge changes and returns the changes
    of the result.  Components larger than ``search_above`` vertices are split by a
    search from the deleted edges' ends, smaller ones recomputed.

    >>> index = ComponentIndex("Components")
    >>> v, c, d = index.update(0, np.array([1, 3]), np.array([2, 2]), np.array([1, 1]))
    >>> sorted(zip(v.tolist(), c.tolist(), d.tolist()))
    [(1, 1, 1), (2, 1, 1), (3, 1, 1)]
    >>> v, c, d = index.update(1, np.array([1]), np.array([2]), np.array([-1]))
    >>> sorted(zip(v.tolist(), c.tolist(), d.tolist()))
    [(1, 1, -1), (2, 1, -1), (2, 2, 1), (3, 1, -1), (3, 2, 1)]
    """

    def __init__(self, operator: str, search_above: int = SEARCH_ABOVE) -> None:
        self.operator = operator
        self.search_above = search_above
        self.ids = KeyIndex()
        self.edges = EdgeCounts(operator)
        self.adjacent = KeyIndex(empty=0)
        self.n = 0
        self.vid = np.zeros(0, np.int64)
        self.comp = np.zeros(0, np.int64)
        self.deg = np.zeros(0, np.int64)
        self.size = np.zeros(0, np.int64)
        self.low = np.zeros(0, np.int64)
        self.mark = np.zeros(0, np.int64)                   # scratch of the split search, -1 between uses
        self.members: dict[int, list[np.ndarray]] = {}     # slots of size > 1 only
        self._cand: list[np.ndarray] = []
        self._alive: list[np.ndarray] = []
        self._label: list[np.ndarray] = []

    # -- snapshots: the members lists are rebuilt from the labels, so the pickle is arrays -------------

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["members"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        slots = self.comp[:self.n]
        big = np.flatnonzero(self.size > 1)
        vertices = np.flatnonzero(np.isin(slots, big)) if len(big) else np.zeros(0, np.int64)
        vertices = vertices[np.argsort(slots[vertices], kind="stable")].astype(np.int64)
        owner = slots[vertices]
        cut = np.flatnonzero(np.concatenate([[True], owner[1:] != owner[:-1]])) if len(owner) else owner
        self.members = {head: [piece] for head, piece in zip(owner[cut].tolist(), np.split(vertices, cut[1:]))} \
            if len(owner) else {}

    # -- dense ids ------------------------------------------------------------------

    def _dense(self, ids: np.ndarray) -> np.ndarray:
        uniq, inverse = np.unique(ids, return_inverse=True)
        dense, found = self.ids.get(uniq, -1)
        fresh = uniq[~found]
        if len(fresh):
            start, self.n = self.n, self.n + len(fresh)
            if self.n > MAX_VERTICES:
                raise GraphInputError(f"{self.operator}: more than {MAX_VERTICES} distinct vertices on one worker",
                                      "src")
            if self.n > len(self.vid):
                cap = max(self.n, 2 * len(self.vid), 1024)
                self.vid, self.comp, self.deg, self.size, self.low = (
                    np.concatenate([a, np.full(cap - len(a), fill, np.int64)])
                    for a, fill in ((self.vid, 0), (self.comp, -1), (self.deg, 0), (self.size, 0), (self.low, 0)))
                self.mark = np.concatenate([self.mark, np.full(cap - len(self.mark), -1, np.int64)])
            new = np.arange(start, self.n, dtype=np.int64)
            self.ids.set(fresh, new)
            self.vid[new] = fresh
            dense[~found] = new
        return dense[inverse.reshape(-1)]

    # -- members and labels ---------------------------------------------------------

    def _members(self, slots: np.ndarray, pop: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(members, their slot)`` of ``slots`` (distinct); ``pop`` forgets their arrays."""
        big = self.size[slots] > 1
        parts, owners = [slots[~big]], [slots[~big]]
        for s in slots[big].tolist():
            chunks = self.members.pop(s) if pop else self.members[s]
            joined = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
            joined = joined[self.comp[joined] == s]          # split-off vertices stay until compaction
            if len(chunks) > 1:
                joined = sorted_unique(joined)                    # ... and may come back: once each
            if not pop:
                self.members[s] = [joined]
            parts.append(joined)
            owners.append(np.full(len(joined), s, np.int64))
        return np.concatenate(parts), np.concatenate(owners)

    def _remember(self, vertices: np.ndarray) -> None:
        """Note the result rows of ``vertices`` before they change (the first note wins)."""
        slot = self.comp[vertices]
        alive = slot >= 0
        self._cand.append(vertices)
        self._alive.append(alive)
        self._label.append(np.where(alive, self.low[np.maximum(slot, 0)], 0))

    def _changes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self._cand:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty
        cand, first = np.unique(np.concatenate(self._cand), return_index=True)
        was, before = np.concatenate(self._alive)[first], np.concatenate(self._label)[first]
        self._cand, self._alive, self._label = [], [], []
        slot = self.comp[cand]
        now = slot >= 0
        after = np.where(now, self.low[np.maximum(slot, 0)], 0)
        moved = (was != now) | (before != after)
        out, into = was & moved, now & moved
        vertex = np.concatenate([self.vid[cand[out]], self.vid[cand[into]]])
        label = np.concatenate([before[out], after[into]])
        diff = np.concatenate([np.full(int(out.sum()), -1, np.int64), np.ones(int(into.sum()), np.int64)])
        return vertex, label, diff

    # -- one time ---------------------------------------------------------------------

    def update(self, time: Any, src: np.ndarray, dst: np.ndarray, diff: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Apply one time's edge rows (``diff`` per row); ``(vertex, component, diff)``
        of the result's changes."""
        return self.apply(*self.edges.update(time, src, dst, diff))

    def apply(self, lo: np.ndarray, hi: np.ndarray, appeared: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Apply one time's changes of the undirected edge set (``lo--hi`` appears where
        ``appeared``, vanishes elsewhere; each edge at most once, as
        :meth:`EdgeCounts.update` gives them); ``(vertex, component, diff)`` of the
        result's changes."""
        if not len(lo):
            return self._changes()
        m = len(lo)
        dense = self._dense(np.concatenate([lo, hi]))
        a, b = dense[:m], dense[m:]
        gone = ~appeared
        if gone.any():
            self._delete(a[gone], b[gone])
        if appeared.any():
            self._insert(a[appeared], b[appeared])
        return self._changes()

    def _delete(self, lo: np.ndarray, hi: np.ndarray) -> None:
        keys = sorted_unique(np.concatenate([_pack(lo, hi), _pack(hi, lo)]))
        self.adjacent.set(keys, np.zeros(len(keys), np.int64))
        self.deg[:self.n] -= np.bincount(np.concatenate([lo, hi[hi != lo]]), minlength=self.n)
        owner = self.comp[lo]
        slots = sorted_unique(owner)
        searched = slots[self.size[slots] > self.search_above]
        redo = [slots[self.size[slots] <= self.search_above]]
        for s in searched.tolist():
            mine = owner == s
            if not self._split(s, sorted_unique(np.concatenate([lo[mine], hi[mine]]))):
                redo.append(np.array([s], np.int64))
        self._recompute(np.concatenate(redo))

    def _split(self, slot: int, ends: np.ndarray) -> bool:
        """Split component ``slot`` after deletions whose endpoints are ``ends``: every
        piece it falls into holds one of them, so grow a search from each (level by
        level, the searches uniting when they meet) until at most one is still growing:
        the others are the pieces that split off, the growing one keeps the slot.
        False (nothing changed) when the searches visit more than a quarter of the
        component, or the slot's own vertex splits off or leaves: recompute it instead."""
        seeds = ends[self.deg[ends] > 0]
        gone = ends[self.deg[ends] == 0]
        groups = np.arange(len(seeds), dtype=np.int64)
        mark = self.mark
        mark[seeds] = groups
        visited, frontier, count = [seeds], seeds, len(seeds)
        budget = max(int(self.size[slot]) // 4, 1)
        while True:
            growing = sorted_unique(groups[mark[frontier]])
            if len(growing) <= 1 or count > budget:
                break
            start = frontier << SHIFT
            keys = self.adjacent.scan(start, start + (np.int64(1) << SHIFT))
            u, w = keys >> SHIFT, keys & LOW
            gu, mw = groups[mark[u]], mark[w]
            met = mw >= 0
            left, right = [gu[met]], [groups[mw[met]]]
            frontier = np.zeros(0, np.int64)
            if not met.all():
                reached, by = w[~met], gu[~met]
                mark[reached] = by                           # one claim per vertex wins ...
                left.append(by)
                right.append(mark[reached])                  # ... and the others unite with it
                fresh = sorted_unique(reached)
                frontier = fresh
                visited.append(fresh)
                count += len(fresh)
            a, b = np.concatenate(left), np.concatenate(right)
            if (a != b).any():
                v, r = forest(a[a != b], b[a != b])
                relabel = np.arange(len(groups), dtype=np.int64)
                relabel[v] = r
                groups = relabel[groups]
        found = np.concatenate(visited)
        label = groups[mark[found]]
        mark[found] = -1
        if count > budget and len(growing) > 1:
            return False
        split = ~np.isin(label, growing)
        pieces, label = found[split], label[split]
        if len(growing) and (np.any(pieces == slot) or np.any(gone == slot)):
            return False
        self._remember(np.concatenate([pieces, gone]))
        self.comp[gone] = -1
        leaving = np.concatenate([self.vid[pieces], self.vid[gone]])
        if len(growing):
            self.comp[pieces] = -1
            self.size[slot] -= len(leaving)
            if self.low[slot] in leaving:                   # the label goes: every member's changes
                rest = self._members(np.array([slot]), pop=False)[0]
                self._remember(rest)
                self.low[slot] = self.vid[rest].min()
            if self.size[slot] == 1:
                self.members.pop(slot, None)
        else:
            self.size[slot] = 0
            self.members.pop(slot, None)
        self._assign(pieces, label)
        return True

    def _recompute(self, slots: np.ndarray) -> None:
        """Recompute components ``slots`` from their remaining edges."""
        if not len(slots):
            return
        vertices, _ = self._members(slots, pop=True)
        self._remember(vertices)
        self.comp[vertices] = -1
        self.size[slots] = 0
        start = vertices << SHIFT
        keys = self.adjacent.scan(start, start + (np.int64(1) << SHIFT))
        u, v = keys >> SHIFT, keys & LOW
        keep = u <= v
        verts, roots = forest(u[keep], v[keep])
        self._assign(verts, roots)

    def _assign(self, verts: np.ndarray, group: np.ndarray) -> None:
        """Make each group of ``verts`` (by ``group``) a component, slot its smallest dense id."""
        if not len(verts):
            return
        order = np.lexsort((verts, group))
        verts, group = verts[order], group[order]
        starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
        heads = verts[starts]
        sizes = np.diff(np.append(starts, len(verts)))
        self.comp[verts] = np.repeat(heads, sizes)
        self.size[heads] = sizes
        self.low[heads] = np.minimum.reduceat(self.vid[verts], starts)
        for head, s, k in zip(heads[sizes > 1].tolist(), starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
            self.members[head] = [verts[s:s + k]]

    def _insert(self, lo: np.ndarray, hi: np.ndarray) -> None:
        keys = sorted_unique(np.concatenate([_pack(lo, hi), _pack(hi, lo)]))
        self.adjacent.set(keys, np.ones(len(keys), np.int64))
        self.deg[:self.n] += np.bincount(np.concatenate([lo, hi[hi != lo]]), minlength=self.n)
        touched = sorted_unique(np.concatenate([lo, hi]))
        fresh = touched[self.comp[touched] < 0]
        if len(fresh):                                   # vertices (re)joining: singletons
            self._remember(fresh)
            self.comp[fresh] = fresh
            self.size[fresh] = 1
            self.low[fresh] = self.vid[fresh]
        a, b = self.comp[lo], self.comp[hi]
        differ = a != b
        if not differ.any():
            return
        slots, group = forest(a[differ], b[differ])      # slots to merge, by group
        order = np.lexsort((-self.size[slots], group))
        slots, group = slots[order], group[order]
        first = np.concatenate([[True], group[1:] != group[:-1]])
        starts = np.flatnonzero(first)
        survivor = slots[starts]
        new_low = np.minimum.reduceat(self.low[slots], starts)
        new_size = np.add.reduceat(self.size[slots], starts)
        lowered = new_low < self.low[survivor]
        if lowered.any():                                # every member's label changes
            self._remember(self._members(survivor[lowered], pop=False)[0])
        others = slots[~first]
        into = np.repeat(survivor, np.diff(np.append(starts, len(slots))) - 1)
        moved, owner = self._members(others, pop=True)
        self._remember(moved)
        by_slot = np.argsort(others)
        target = into[by_slot[np.searchsorted(others[by_slot], owner)]]
        self.comp[moved] = target
        self.size[survivor] = new_size
        self.low[survivor] = new_low
        order = np.argsort(target, kind="stable")
        moved, target = moved[order], target[order]
        cut = np.flatnonzero(np.concatenate([[True], target[1:] != target[:-1]]))
        for head, piece in zip(target[cut].tolist(), np.split(moved, cut[1:])):
            chunks = self.members.setdefault(head, [np.array([head], np.int64)])
            chunks.append(piece)
            while len(chunks) > 1 and 2 * len(chunks[-1]) >= len(chunks[-2]):
                merged = np.concatenate([chunks.pop(-2), chunks.pop()])     # a binary counter: each
                chunks.append(sorted_unique(merged[self.comp[merged] == head]))  # member merged O(log n) times


def components(edges: "Stream", src: str = "src", dst: str = "dst") -> "Stream":
    """Incremental connected components: a changelog of edges in, the changelog of the
    result out.

    Input: record batches of int64 edges ``(src, dst)`` with an optional integer
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
    edge hash, the component index on worker 0).

    A missing column or non-integer ids raise :class:`~timely_spark.errors.GraphInputError`;
    a non-integer ``diff``, or the withdrawal of an edge the graph does not hold,
    :class:`~timely_spark.errors.ChangelogError` naming the operator, time and row.

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
    name = "Components"
    scope = edges.scope
    tallies = [EdgeCounts(name)]
    kept = [ComponentIndex(name)]

    def keyed(rb: pa.RecordBatch) -> pa.RecordBatch:
        a, b = edge_arrays(check_batch(rb, name), src, dst, name)
        return rb.append_column("_lo", pa.array(np.minimum(a, b))).append_column("_hi", pa.array(np.maximum(a, b)))

    def count(time: Any, batches: list) -> list:
        a, b, d = edge_changes(time, batches, src, dst, name)
        counts = tallies[0]
        lo, hi, appeared = counts.update(time, a, b, d)
        log_state(scope, f"{name}Edges", time, len(counts))
        if not len(lo):
            return []
        return [pa.record_batch({"lo": lo, "hi": hi, "appeared": appeared})]

    def logic(time: Any, batches: list) -> list:
        parts = [rb for rb in batches if rb.num_rows]
        lo = np.concatenate([rb.column("lo").to_numpy() for rb in parts])
        hi = np.concatenate([rb.column("hi").to_numpy() for rb in parts])
        appeared = np.concatenate([rb.column("appeared").to_numpy(zero_copy_only=False) for rb in parts])
        index = kept[0]
        vertex, label, diff = index.apply(lo, hi, appeared)
        log_state(scope, name, time, len(index.adjacent) + index.n)
        if not len(vertex):
            return []
        return [pa.record_batch({"vertex": vertex, "component": label, DIFF: diff})]

    # snapshots: each worker's edge counts (keyed rows by edge hash: re-sharded at any worker count),
    # and worker 0's index (pickled in one keyed row that goes back to worker 0 at any worker count)
    changes = edges.map(keyed, name=f"{name}Keys").per_time(
        count, exchange=ExchangeBy(["_lo", "_hi"], f"{name}Edges"), name=f"{name}Edges",
        state=StateHooks(lambda t: tallies[0].saved(),
                         lambda table: tallies.__setitem__(0, EdgeCounts.restored(f"{name}Edges", table)),
                         keyed=True))
    owner = scope.index == 0
    return changes.per_time(logic, exchange=Exchange(lambda batch: 0), name=name,
                            state=StateHooks(lambda t: _saved_index(kept[0], owner),
                                             lambda table: _restore_index(kept, table), keyed=True))


def _saved_index(index: ComponentIndex, owner: bool) -> pa.Table:
    """A snapshot of the components' index: worker 0's, pickled, in one row of key hash 0
    (so it goes back to worker 0 whatever the number of workers)."""
    import pickle

    rows = [pickle.dumps(index, protocol=5)] if owner else []
    return pa.table({KEY_HASH: pa.array([0] * len(rows), pa.uint64()), "index": pa.array(rows, pa.binary())})


def _restore_index(kept: list, table: pa.Table) -> None:
    import pickle

    if table.num_rows:
        kept[0] = pickle.loads(table["index"][0].as_py())
