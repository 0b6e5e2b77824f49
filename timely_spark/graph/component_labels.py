"""The component labels of the incremental connected components, sharded by vertex:
each worker keeps the vertices it owns (``hash(vertex) % workers``, the routing of
``ExchangeBy(["vertex"])``), and every epoch's change is contracted by all workers
together (:mod:`.contraction`); nothing is gathered on one worker.

State per worker, numpy arrays over dense ids (``0..n-1`` in order of first sight, in
a :class:`~.key_index.KeyIndex`: the vertices it owns, their neighbours and their labels):

* ``label`` (dense id -> the component, the smallest vertex id in it; ``ABSENT`` when
  the vertex is not in the graph or not owned here);
* ``adjacent``: each present undirected edge ``v--w`` as the key ``(v, w)`` at the
  owner of ``v`` (an edge is held twice, once per endpoint's owner): the edges of a
  set of vertices are a range scan;
* ``by_label``: ``(label, v)`` per owned vertex in the graph, so the members of a
  component a worker holds are a range scan too.

The dense ids are never reused: once they reached :data:`COMPACT_AT` and as many new ids
came as the state used at the last check, an epoch starts by counting the ids its state
refers to and rebuilding it from its live rows if at least half are dead (vertices that
left), so the state follows the graph, not every vertex ever seen (the edge counts do the
same).

One epoch, as rounds of a loop (epochs strictly in order, :func:`~.in_order.in_order`);
the edges that appear or vanish come in as incidences ``(vertex, other, appeared)``,
one at each endpoint's owner:

0. the owner drops the vanished edges from ``adjacent`` (the appearing ones wait for
   the contraction); an end of a vanished edge left without edges leaves the result,
   the others seed a *split search* (:mod:`.split_search`), broadcast with their label
   (and each withdrawn edge, which links its ends' searches);
1. .. the split search, a level per round for the smallest classes of groups (the
   others wait): owners mark the vertices their neighbours' groups reach and expand
   them; every worker broadcasts its round's meetings and growth and applies
   everyone's to the same union-find over the groups, with each group's smallest
   vertex so far.  A component whose search is over relabels the pieces that split off
   in the round that finds them closed (each its smallest vertex, which every worker
   knows) -- or, past the budget, is *recomputed* below; the contraction's edges follow
   in that same round;
2. then every worker builds the edges of a contraction: the remaining edges of its
   members of the recomputed components (range scans of ``by_label`` and
   ``adjacent``; members left without edges leave), the inserted edges at its other
   vertices, and ``(v, label(v))`` for each such vertex already in the graph (the label
   stands for its whole component); their local spanning forest as stars goes to
   :func:`~.contraction.contract` and :func:`~.contraction.resolve` (nested loops:
   min-label hooking by vertex owner, then pointer jumping), whose ``(vertex,
   component)`` rows come back on each vertex's owner -- or, in an epoch of at most
   :data:`REPLICATE_BELOW` inserted incidences and nothing to recompute, the edges go
   to every worker, which contracts them all and keeps its own vertices' rows (one
   round; the edges leave in round 0 -- used in round 1 when no worker withdrew an edge,
   else kept by every worker and used in the round the search ends in, unless a piece
   split off or is recomputed: then they are built again from the new labels);
3. each owner relabels the vertices it got a result for; a label vertex ``L`` (not
   recomputed) whose component changed broadcasts ``L -> L'``;
4. every worker relabels its members of each broadcast ``L`` (a ``by_label`` scan).
   (A small epoch's contraction, on every worker, gives every worker every ``L -> L'``:
   3 and 4 are one round: an epoch of a few insertions takes rounds 0 and 1.)

Every vertex whose label changes emits ``-1 (v, old)`` and ``+1 (v, new)``; an epoch's
rows are netted per ``(vertex, component)`` (a piece split off and merged again in one
epoch emits nothing).

Costs per epoch with k changed edges, all of it spread over the workers by vertex
hash: insertions cost a contraction over O(k) rows (a few nested rounds) plus the
relabelled vertices; a deletion costs a search around its ends -- in a component that
stays whole, until the searches from its two ends meet (a few levels in a random
graph); when a piece splits off, about the size of the smaller pieces -- and at worst
(past :data:`SEARCH_BUDGET` vertices or :data:`SEARCH_ROUNDS` rounds, e.g. a long path
cut in the middle) the recompute of the whole component from its members' edges.
The broadcasts carry rows per search group and per merged label: proportional to the
change, on every worker.  A round costs a progress exchange among all workers, so an
epoch of a few changes costs some milliseconds however small it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..dataflow import DIFF, ExchangeBy, StateHooks, destinations
from ..errors import GraphInputError
from ..progress import Product
from .broadcast import broadcast_keys
from .compact import group_min
from .contraction import contract, pointer_table, resolve
from .ids.positions import DenseIds
from .in_order import in_order
from .key_index import KeyIndex
from .spanning_forest import forest
from .split_search import SplitSearch
from .state_log import log_state, log_visits
from .stream_state import keyed_parts, part_of, scalars_of
from .unique import sorted_unique

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["ComponentLabels", "LoopRoute", "label_changes"]

SHIFT = np.int64(32)
LOW = np.int64((1 << 32) - 1)
#: The column of a broadcast naming each row's worker.
TO = "to"
#: The label of a vertex not in the graph (or not owned by this worker).
ABSENT = np.iinfo(np.int64).min
#: Kinds of the loop's messages: a wake-up; a merged label (old -> new); a search's seed, an
#: end left without edges, a visit, a meeting of two groups, new vertices of a group, a group
#: that reached its label's vertex, the smallest of a group's new vertices, new vertices of a
#: group kept for a later round, a worker's edges of a small contraction; a withdrawn edge.
WAKE, MERGED, SEED, GONE, VISIT, MEET, GREW, HOLDS, LOWEST, PEND, STARS, CUT = range(12)
#: A split search stops and its component is recomputed past this many visited vertices, or
#: a quarter of the graph's vertices if that is more ...
SEARCH_BUDGET = 1 << 16
#: ... or this many rounds.
SEARCH_ROUNDS = 48
#: An epoch with at most this many inserted incidences (two per edge, all workers) and no
#: component to recompute contracts by broadcasting each worker's stars to every worker
#: (one round, rows proportional to the change) instead of the nested contraction loops.
REPLICATE_BELOW = 4096
#: The dense id tables (of this module and of the edge counts) are checked once they hold twice as
#: many ids as at the last check, and at least this many: rebuilt from the vertices still in the
#: graph if at least half the ids are dead.
COMPACT_AT = 1 << 16


def _columns(batches: list, names: tuple) -> list:
    """The columns ``names`` of ``batches`` (non-empty), each as one numpy array: one
    concatenation in Arrow, not a conversion per batch (a round brings many small ones)."""
    if not batches:
        return [np.zeros(0, np.int64) for _ in names]
    if len(batches) == 1:
        return [batches[0].column(name).to_numpy(zero_copy_only=False) for name in names]
    schema = batches[0].schema
    if all(rb.schema.equals(schema) for rb in batches):         # (the usual case: no select a batch)
        table = pa.Table.from_batches(batches)
    else:
        table = pa.Table.from_batches([rb.select(list(names)) for rb in batches])
    return [table.column(name).to_numpy() for name in names]


class LoopRoute(ExchangeBy):
    """The loop's rows to the owner of their ``vertex`` (as ``ExchangeBy(["vertex"])``),
    but a broadcast (a batch with a ``to`` column: each worker's copy, in worker order)
    is cut into its workers' slices: no hash, sort or copy.

    >>> parts = LoopRoute("Labels").split(pa.record_batch({"vertex": [-1, -2], "a": [7, 7], TO: [0, 1]}), 2)
    >>> [(w, rb.column("a").to_pylist()) for w, rb in parts]
    [(0, [7]), (1, [7])]

    A batch of visits with a ``to`` column goes whole to the worker it names (the sender
    knows each vertex's owner: no hash, sort or copy either).

    >>> [(w, rb.num_rows) for w, rb in LoopRoute("Labels").split(
    ...     pa.record_batch({"vertex": [5, 9], "group": [0, 0], "source": [1, 1], TO: np.int32([1, 1])}), 2)]
    [(1, 2)]
    """

    def __init__(self, operator: str) -> None:
        super().__init__(["vertex"], operator)

    def split(self, batch: pa.RecordBatch, peers: int) -> Iterable[tuple[int, pa.RecordBatch]]:
        names = batch.schema.names
        if TO not in names:
            return super().split(batch, peers)
        if "source" in names:                          # visits, all for one worker (ComponentLabels._visits)
            return [(int(batch.column(TO)[0].as_py()), batch)]
        n = batch.num_rows // peers
        return [(w, batch.slice(w * n, n)) for w in range(peers)]


class ComponentLabels:
    """One worker's share of the component labels and the logic of each round of an
    epoch (see the module docstring); :meth:`step` is the loop's ``per_time`` logic.
    Its state, between epochs, as :meth:`snapshot` rows: labels and adjacency by vertex.

    >>> import timely_spark as ts
    >>> def build(s):
    ...     labels = ComponentLabels(s, "Labels")
    ...     labels.restore(keyed_parts({0: ("vertex", {"vertex": np.array([1, 2]), "label": np.array([1, 1])}),
    ...                                 1: ("v", {"v": np.array([1, 2]), "w": np.array([2, 1])})}, {"epochs": 0}))
    ...     saved = part_of(labels.snapshot(), 0)
    ...     print(saved["vertex"].tolist(), saved["label"].tolist(), len(part_of(labels.snapshot(), 1)["v"]))
    >>> _ = ts.example(build)
    [1, 2] [1, 1] 2
    """

    def __init__(self, scope: Any, name: str) -> None:
        self.scope = scope
        self.name = name
        self.keys = broadcast_keys(scope.peers)
        self.ids = DenseIds(name)
        self.label = np.zeros(0, np.int64)
        self.adjacent = KeyIndex(empty=0)
        self.by_label = KeyIndex(empty=0)
        self.mark = np.zeros(0, np.int64)                                  # the search group, ABSENT if none
        # (its id in round 0, which sends the seeds; its position in the SplitSearch's groups after)
        self.came = np.zeros(0, np.int64)                                  # ... the vertex a visit came from
        self.owner = np.zeros(0, np.int32)                                  # the worker owning the vertex
        self.inserted = (np.zeros(0, np.int64), np.zeros(0, np.int64))     # this epoch's, dense
        self.recomputed = np.zeros(0, np.int64)                            # this epoch's labels, sorted
        self.redone = self.recomputed                                      # ... once the contraction began
        self.search: Any = None                                            # this epoch's SplitSearch
        self.guess: Optional[tuple] = None                                 # ... round 0's stars, kept meanwhile
        self.sending: list = []                                            # this round's broadcast rows
        self.seen: list = []                                               # this epoch's visited vertices
        self.waiting = np.zeros(0, np.int64)                               # ... not yet expanded
        self.waiting_group = np.zeros(0, np.int64)                         # ... their groups' positions
        self.insertions = -1                                               # this epoch's, all workers
        self.arrived = [0, 0]                                              # this round's visits, new vertices
        self.held = 0                                                      # owned vertices in the graph
        self.compact_at = COMPACT_AT                                       # dense ids that trigger a rebuild

    def __len__(self) -> int:
        return len(self.adjacent) + len(self.by_label) + self.n

    # -- dense ids ------------------------------------------------------------------

    def _dense(self, ids: np.ndarray) -> np.ndarray:
        known = self.n
        dense = self.ids.dense(ids)
        cap = len(self.ids.vid)
        if cap > len(self.label):                            # the per-vertex arrays grow with the ids
            self.label = np.concatenate([self.label, np.full(cap - len(self.label), ABSENT, np.int64)])
            self.mark = np.concatenate([self.mark, np.full(cap - len(self.mark), ABSENT, np.int64)])
            self.came = np.concatenate([self.came, np.full(cap - len(self.came), ABSENT, np.int64)])
            self.owner = np.concatenate([self.owner, np.zeros(cap - len(self.owner), np.int32)])
        if self.n > known:                                   # the new ids' owners: the loop's routing, once an id
            fresh = pa.record_batch({"vertex": self.vid[known:self.n]})
            self.owner[known:self.n] = destinations(fresh, ["vertex"], len(self.keys))
        return dense

    @property
    def vid(self) -> np.ndarray:
        """The vertex id of each dense position."""
        return self.ids.vid

    @property
    def n(self) -> int:
        """How many dense positions are in use."""
        return self.ids.n

    def _relabel(self, dv: np.ndarray, new: np.ndarray, out: list) -> None:
        """Give the owned vertices ``dv`` (dense, distinct) the labels ``new`` (``ABSENT``:
        they leave); keep ``by_label`` and emit the changes of those that differ."""
        old = self.label[dv]
        moved = old != new
        dv, old, new = dv[moved], old[moved], new[moved]
        if not len(dv):
            return
        was, now = old != ABSENT, new != ABSENT
        if was.any():
            self.by_label.set((self._dense(old[was]) << SHIFT) | dv[was], np.zeros(int(was.sum()), np.int64))
        if now.any():
            self.by_label.set((self._dense(new[now]) << SHIFT) | dv[now], np.ones(int(now.sum()), np.int64),
                              new=True)                                   # (each v was under its old label)
        self.label[dv] = new
        self.held += int(np.count_nonzero(now & ~was)) - int(np.count_nonzero(was & ~now))
        v = self.vid[dv]
        out.append(pa.record_batch({
            "vertex": np.concatenate([v[was], v[now]]), "component": np.concatenate([old[was], new[now]]),
            DIFF: np.concatenate([np.full(int(was.sum()), -1, np.int64), np.ones(int(now.sum()), np.int64)])}))

    def _broadcast(self, kind: int, a: np.ndarray, b: np.ndarray) -> None:
        """Rows ``(a, b)`` of ``kind`` for every worker, sent at the end of the round (:meth:`_send`)."""
        if len(a):
            self.sending.append((kind, a, b))

    def _send(self, out: list) -> None:
        """The round's broadcast rows as one batch: a copy per worker, in worker order
        (``to``), which :class:`LoopRoute` slices without hashing."""
        parts, self.sending = self.sending, []
        if not parts:
            return
        peers, n = len(self.keys), sum(len(a) for _, a, _ in parts)
        kind = np.repeat(np.array([k for k, _, _ in parts], np.int8), [len(a) for _, a, _ in parts])
        a, b = np.concatenate([a for _, a, _ in parts]), np.concatenate([b for _, _, b in parts])
        out.append(pa.record_batch({"vertex": np.repeat(self.keys, n), "kind": np.tile(kind, peers),
                                    "a": np.tile(a, peers), "b": np.tile(b, peers),
                                    TO: np.repeat(np.arange(peers, dtype=np.int64), n)}))

    # -- the rounds -----------------------------------------------------------------

    def step(self, time: Any, entered: list, messages: list, _gate: list) -> list:
        """One round of one epoch on this worker: what it sends around the loop (batches
        with ``kind``), to the contraction (``vertex, root``) and out (``diff``)."""
        time = time if isinstance(time, Product) else Product(*time)
        out: list = []
        if time.inner == 0:
            self.edges_in([rb for rb in entered if rb.num_rows], out)
        control: list = []                                  # broadcasts (kind, vertex, a, b)
        visits: list = []                                   # the search's visits (vertex, group, source)
        found: list = []                                    # the contraction's (vertex, component)
        for rb in messages:
            if rb.num_rows:
                names = rb.schema.names
                (control if "kind" in names else visits if "source" in names else found).append(rb)
        if found:
            vertex, component = _columns(found, ("vertex", "component"))
            self.results(vertex, component, out)
        if control or visits:
            kind, vertex, a, b = _columns(control, ("kind", "vertex", "a", "b"))
            order = np.argsort(kind, kind="stable")           # the rows of each kind, a slice each
            vertex, a, b = vertex[order], a[order], b[order]
            at = np.searchsorted(kind[order], np.arange(CUT + 2)).tolist()
            merged, stars = slice(at[MERGED], at[MERGED + 1]), slice(at[STARS], at[STARS + 1])
            if at[MERGED + 1] > at[MERGED]:
                self.merge(a[merged], b[merged], out)
            if at[STARS + 1] > at[STARS] and time.inner == 1:     # round 0's guess (see edges_in)
                wake = slice(at[WAKE], at[WAKE + 1])
                if at[GONE + 1] > at[SEED] or int(b[wake].sum()) > REPLICATE_BELOW:
                    if int(b[wake].sum()) <= REPLICATE_BELOW:     # withdrawn: good if the search splits nothing
                        self.guess = (a[stars], b[stars])
                    stars = slice(0, 0)                           # something was withdrawn, or too much came
                else:
                    self._end_search()                            # (none began)
                    self.redone, self.insertions = np.zeros(0, np.int64), -1
                    self.inserted = (np.zeros(0, np.int64), np.zeros(0, np.int64))
                    self.replicated(a[stars], b[stars], out)
                    self._send(out)
                    log_state(self.scope, self.name, time, len(self))
                    return out
            if stars.stop > stars.start:
                self.replicated(a[stars], b[stars], out)
            if visits or len(kind) > (at[MERGED + 1] - at[MERGED]) + (at[STARS + 1] - at[STARS]):
                rows = {k: (vertex[at[k]:at[k + 1]], a[at[k]:at[k + 1]], b[at[k]:at[k + 1]]) for k in range(CUT + 1)}
                rows[VISIT] = tuple(_columns(visits, ("vertex", "group", "source")))
                self.search_round(rows, out)
        self._send(out)
        log_state(self.scope, self.name, time, len(self))
        if self.arrived[0]:
            log_visits(self.scope, self.name, time, *self.arrived)
            self.arrived = [0, 0]
        return out

    def edges_in(self, batches: list, out: list) -> None:
        """Round 0: the incidences of appearing and vanishing edges at this owner.  The
        deletions apply now, the insertions once the split search is over; the ends of
        the deleted edges seed the search (or leave, with no edge left)."""
        if not batches:
            return
        if self.n >= max(self.compact_at, COMPACT_AT):
            self._compact()
        v, w, appeared = _columns(batches, ("vertex", "other", "appeared"))
        if (v == ABSENT).any():
            raise GraphInputError(f"{self.name}: vertex id {ABSENT} is reserved (it marks a vertex not in the graph)",
                                  "src")
        appeared = appeared.astype(bool)
        dv, dw = self._dense(np.concatenate([v, w])).reshape(2, -1)
        keys = (dv << SHIFT) | dw
        gone = ~appeared
        self.adjacent.set(keys[gone], np.zeros(int(gone.sum()), np.int64))
        self.inserted = (dv[appeared], dw[appeared])
        ends = sorted_unique(dv[gone])
        labels = self.label[ends]
        near = self.adjacent.with_prefix(ends)
        has = np.isin(ends, near >> SHIFT)
        seeds, left = ends[has], ends[~has]
        self._relabel(left, np.full(len(left), ABSENT, np.int64), out)
        self.mark[seeds] = self.vid[seeds]
        self.came[seeds] = ABSENT
        self.seen = [seeds]
        ka, kb = near >> SHIFT, near & LOW
        if len(ka):
            self._visits(kb, self.vid[kb], self.vid[ka], self.vid[ka], out)
        self._broadcast(SEED, self.vid[seeds], labels[has])
        self._broadcast(GONE, self.vid[left], labels[~has])
        cut_v, cut_w = self.vid[dv[gone]], self.vid[dw[gone]]
        once = cut_v < cut_w                            # each withdrawn edge once (its other end's owner has it too)
        self._broadcast(CUT, cut_v[once], cut_w[once])
        self._broadcast(WAKE, np.full(1, self.held, np.int64), np.full(1, len(self.inserted[0]), np.int64))
        if len(self.inserted[0]) <= REPLICATE_BELOW:
            edges = self._edges(self.inserted)          # a guess: nothing withdrawn anywhere, or the search
            # relabels nothing (see step and search_round)
            if edges is not None:
                self._broadcast(STARS, *edges)

    def _compact(self) -> None:
        """Between epochs: rebuild the state from the vertices in the graph, their labels and
        edges (:meth:`snapshot`), dropping the dense ids of vertices that left and the
        absent keys -- if at least half the ids are dead (counted: the owned vertices, the
        labels and both ends of the edges held).  Checked again once as many new ids came
        as are in use: amortized O(1) per id, and the ids stay within about three times
        those in use."""
        owned = np.flatnonzero(self.label[:self.n] != ABSENT)
        edges, labelled = self.adjacent.present()[0], self.by_label.present()[0]
        used = self.ids.in_use(owned, edges >> SHIFT, edges & LOW, labelled >> SHIFT)
        if 2 * used <= self.n:
            table = self.snapshot()
            self.ids = DenseIds(self.name)
            self.label, self.mark, self.came = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
            self.owner = np.zeros(0, np.int32)
            self.adjacent, self.by_label, self.held = KeyIndex(empty=0), KeyIndex(empty=0), 0
            self.restore(table)
        self.compact_at = self.n + used

    def _visits(self, dw: np.ndarray, target: np.ndarray, group: np.ndarray, source: np.ndarray, out: list) -> None:
        """Visits of ``group`` from ``source`` to ``target`` (dense ``dw``), for the targets' owners:
        batches of their own (no ``kind``), which :meth:`step` takes whole, not sorted among the
        broadcasts -- one per owner, named in its ``to`` column (:class:`LoopRoute` sends it whole)."""
        owner = self.owner[dw]
        peers = len(self.keys)
        counts = np.bincount(owner, minlength=peers)
        if peers > 1 and int(counts.max()) < len(dw):
            order = np.argsort(owner, kind="stable")
            target, group, source, owner = target[order], group[order], source[order], owner[order]
        start = 0
        for worker, n in enumerate(counts.tolist()):
            if n:
                rows = slice(start, start + n)
                out.append(pa.record_batch({"vertex": target[rows], "group": group[rows], "source": source[rows],
                                            TO: owner[rows]}))
                start += n

    def search_round(self, rows: dict, out: list) -> None:
        """Rounds 1..: the split search (see :mod:`.split_search`), then the contraction."""
        if self.insertions < 0:                             # the epoch's first: round 0's wake-ups
            self.insertions = int(rows[WAKE][2].sum())
        if len(rows[SEED][0]) or len(rows[GONE][0]):
            held = rows[WAKE][1]                            # the senders' vertices: the graph's, estimated
            vertices = int(held.sum()) * len(self.keys) // max(len(held), 1)
            self.search = SplitSearch(rows[SEED][1], rows[SEED][2], rows[GONE][2][rows[GONE][1] == rows[GONE][2]],
                                      max(SEARCH_BUDGET, vertices // 4), SEARCH_ROUNDS, (rows[CUT][1], rows[CUT][2]))
            # from now on a group is its position among the search's groups: the seeds' marks and
            # round 0's visits name it by its id
            if self.seen and len(self.seen[0]):
                self.mark[self.seen[0]] = self.search.index(self.mark[self.seen[0]])
            visit = rows[VISIT]
            rows[VISIT] = (visit[0], self.search.index(visit[1]), visit[2])
        elif self.search is not None:
            self.search.update((rows[MEET][1], rows[MEET][2]), (rows[GREW][1], rows[GREW][2]),
                               (rows[PEND][1], rows[PEND][2]), (rows[HOLDS][1], rows[HOLDS][2]),
                               (rows[LOWEST][1], rows[LOWEST][2]))
        search = self.search
        if search is not None:
            _, fallback, closed = search.decide()
            self.recomputed = np.union1d(self.recomputed, fallback)
            if len(closed):
                self._split_off(closed, search.lowest(closed), out)
            search.choose()
            self._visit(rows[VISIT][0], rows[VISIT][1], rows[VISIT][2], out)
            if len(search.open):
                self._broadcast(WAKE, np.zeros(1, np.int64), np.zeros(1, np.int64))
                return
        split = search is not None and search.split
        self._end_search()
        guess, self.guess = self.guess, None
        if guess is not None and not split:
            # nothing split off or recomputed: the labels round 0's stars hold are the labels now,
            # so their contraction is this epoch's (a round earlier than building the stars now)
            self.redone, self.insertions = np.zeros(0, np.int64), -1
            self.inserted = (np.zeros(0, np.int64), np.zeros(0, np.int64))
            self.replicated(guess[0], guess[1], out)
            return
        self.contraction_edges(out)

    def _end_search(self) -> None:
        """The search is over: unmark its vertices; the inserted edges join ``adjacent``."""
        self.search = None
        seen = np.concatenate(self.seen) if self.seen else np.zeros(0, np.int64)
        self.mark[seen] = ABSENT
        self.seen, self.waiting, self.waiting_group = [], np.zeros(0, np.int64), np.zeros(0, np.int64)
        dv, dw = self.inserted
        if len(dv):
            self.adjacent.set((dv << SHIFT) | dw, np.ones(len(dv), np.int64), new=True)   # (edges that appeared)

    def _seen_classes(self) -> tuple[np.ndarray, np.ndarray]:
        """This worker's visited vertices of this epoch and their classes."""
        seen = np.concatenate(self.seen) if self.seen else np.zeros(0, np.int64)
        return seen, self.search.classes(self.mark[seen])

    def _split_off(self, classes: np.ndarray, smallest: np.ndarray, out: list) -> None:
        """Relabel this worker's vertices of the pieces that split off, the closed ``classes``
        (sorted): each piece's ``smallest`` vertex (every worker knows it: :meth:`_visit`
        broadcasts the smallest new vertex of each group)."""
        seen, cls = self._seen_classes()
        at = np.minimum(np.searchsorted(classes, cls), len(classes) - 1)
        hit = classes[at] == cls
        self._relabel(seen[hit], smallest[at[hit]], out)

    def _visit(self, target: np.ndarray, group: np.ndarray, source: np.ndarray, out: list) -> None:
        """The visits of groups ``group`` (positions) arriving at this owner's vertices (from
        ``source``): mark the new ones, note meetings; expand the vertices of the classes chosen
        to expand (new or waiting), keep the others waiting; broadcast what the round saw.  An
        expanded vertex visits its neighbours but the one it was first reached from (whose
        meeting with it, if their groups differ, was noted when it arrived)."""
        search = self.search
        keep = search.is_open(group) if len(group) else np.zeros(0, bool)
        dv = self._dense(target[keep]) if keep.any() else np.zeros(0, np.int64)
        group, source = group[keep], source[keep]
        expand = np.zeros(0, np.int64)
        if len(self.waiting):
            go = search.expanding[self.waiting_group]
            expand, self.waiting, self.waiting_group = self.waiting[go], self.waiting[~go], self.waiting_group[~go]
        self.arrived[0] += len(dv)
        fresh_v = self._arrive(dv, group, source) if len(dv) else np.zeros(0, np.int64)
        if len(fresh_v):
            expand = np.concatenate([expand, fresh_v]) if len(expand) else fresh_v
        if not len(expand):
            return
        near = self.adjacent.with_prefix(expand)
        dv, dw = near >> SHIFT, near & LOW
        target = self.vid[dw]
        onward = target != self.came[dv]
        dv, dw, target = dv[onward], dw[onward], target[onward]
        if len(dv):
            self._visits(dw, target, self.mark[dv], self.vid[dv], out)

    def _arrive(self, dv: np.ndarray, group: np.ndarray, source: np.ndarray) -> np.ndarray:
        """Visits of groups ``group`` (positions) from ``source`` arriving at this owner's
        vertices ``dv`` (dense): the new vertices join the smallest group visiting them; meetings and the
        new vertices' counts, smallest ids and reaching the label are broadcast; the new
        vertices of the classes expanding now are returned, the others wait."""
        search = self.search
        now = self.mark[dv]                                    # one gather (cache-cold reads); the
        fresh = now == ABSENT                                  # fresh rows are read again once marked
        fresh_v = np.zeros(0, np.int64)
        if fresh.any():                 # each new vertex joins the smallest group visiting it: one sort
            self.came[dv[fresh]] = source[fresh]
            runs = np.sort((dv[fresh] << SHIFT) | group[fresh])
            start = np.empty(len(runs), bool)
            start[0] = True
            np.not_equal(runs[1:] >> SHIFT, runs[:-1] >> SHIFT, out=start[1:])
            fresh_v, group_at = runs[start] >> SHIFT, runs[start] & LOW
            self.mark[fresh_v] = group_at
            self.seen.append(fresh_v)
            self.arrived[1] += len(fresh_v)
            fresh_id = self.vid[fresh_v]
            holds = search.gid[group_at[self.label[fresh_v] == fresh_id]]
            if len(holds):
                self._broadcast(HOLDS, holds, holds)
            # per group (by position) and part: its smallest new vertex, how many it has
            go = search.expanding[group_at]
            at, lowest, counts, _ = group_min((group_at << 1) | ~go, fresh_id)
            gid, grew = search.gid[at >> 1], (at & 1) == 0
            self._broadcast(LOWEST, gid, lowest)
            self._broadcast(GREW, gid[grew], counts[grew])
            self._broadcast(PEND, gid[~grew], counts[~grew])
            if not go.all():
                self.waiting = np.concatenate([self.waiting, fresh_v[~go]])
                self.waiting_group = np.concatenate([self.waiting_group, group_at[~go]])
                fresh_v = fresh_v[go]
            now[fresh] = self.mark[dv[fresh]]
        differ = now != group
        if differ.any():                # as pairs of classes not yet joined (the union-find's roots), each once
            root = search.parent
            ra, rb = root[group[differ]], root[now[differ]]
            k = np.int64(len(root))
            pairs = sorted_unique((np.minimum(ra, rb) * k + np.maximum(ra, rb))[ra != rb])
            if len(pairs):
                self._broadcast(MEET, search.gid[pairs // k], search.gid[pairs % k])
        return fresh_v

    def contraction_edges(self, out: list) -> None:
        """The round after the search: this worker's edges of the epoch's contraction, as stars."""
        recomputed, self.recomputed = self.recomputed, np.zeros(0, np.int64)     # this epoch's, used once
        self.redone = recomputed
        members = np.zeros(0, np.int64)
        if len(recomputed):
            dl, found = self.ids.get(recomputed, -1)
            dl = dl[found]
            if len(dl):
                members = self.by_label.with_prefix(dl) & LOW
        a, b = [], []
        if len(members):
            keys = self.adjacent.with_prefix(members)
            ka, kb = keys >> SHIFT, keys & LOW
            isolated = members[~np.isin(members, ka)]
            self._relabel(isolated, np.full(len(isolated), ABSENT, np.int64), out)
            a.append(self.vid[ka])
            b.append(self.vid[kb])
        inserted, self.inserted = self.inserted, (np.zeros(0, np.int64), np.zeros(0, np.int64))
        small = self.insertions <= REPLICATE_BELOW and not len(recomputed)      # the same on every worker
        self.insertions = -1
        edges = self._edges(inserted, recomputed, a, b)
        if edges is None:
            return
        if small:                              # a few thousand rows: every worker contracts them all
            self._broadcast(STARS, *edges)
            return
        vertices, roots = forest(*edges)
        if len(vertices):
            out.append(pa.record_batch({"vertex": vertices, "root": roots}))

    def _edges(self, inserted: tuple, recomputed: Optional[np.ndarray] = None, a: Sequence = (),
               b: Sequence = ()) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """This worker's edges of the contraction (None if none): ``a[i]--b[i]`` (lists of
        arrays), the ``inserted`` edges (dense; each once, at the owner of its smaller end) and
        ``(v, label(v))`` for each of their ends already in the graph (the label stands for its
        component) -- but those in a ``recomputed`` component."""
        parts_a, parts_b = list(a), list(b)
        dv, dw = inserted
        if len(dv):
            own = self.label[dv]
            keep = ((own == ABSENT) | ~np.isin(own, recomputed) if recomputed is not None and len(recomputed)
                    else np.ones(len(dv), bool))
            once = keep & (self.vid[dv] <= self.vid[dw])           # the other end's owner has it too
            parts_a.append(self.vid[dv[once]])
            parts_b.append(self.vid[dw[once]])
            touched = dv[keep]
            held = sorted_unique(touched[self.label[touched] != ABSENT])
            parts_a.append(self.vid[held])
            parts_b.append(self.label[held])
        if not parts_a:
            return None
        edges = np.concatenate(parts_a), np.concatenate(parts_b)
        return edges if len(edges[0]) else None

    def replicated(self, a: np.ndarray, b: np.ndarray, out: list) -> None:
        """A small epoch's contraction: every worker's edges ``a[i]--b[i]`` on every worker,
        contracted here; the vertices this worker owns among them, and its members of each
        label that merged (every worker knows them all: no MERGED round), relabelled at once.
        The labels that may merge are the ``b <= a`` ends: each end in the graph sends
        ``(v, label(v))``, the label the smallest of its component, and an inserted edge
        ``(v, w)`` comes as ``v <= w`` (:meth:`_edges`) -- so only those are scanned for members."""
        vertices, component = forest(a, b)
        mine = destinations(pa.record_batch({"vertex": vertices}), ["vertex"], len(self.keys)) == self.scope.index
        labels = sorted_unique(b[b <= a])
        now = component[np.searchsorted(vertices, labels)]
        moved = now != labels
        dl, found = self.ids.get(labels[moved], -1)
        dl, new = dl[found], now[moved][found]
        members = self.by_label.with_prefix(dl) if len(dl) else np.zeros(0, np.int64)
        order = np.argsort(dl)
        dv = np.concatenate([self._dense(vertices[mine]), members & LOW])
        # (an owned vertex among the edges is a member of its label: both say the same component)
        dv, first = np.unique(dv, return_index=True)
        label = np.concatenate([component[mine], new[order][np.searchsorted(dl[order], members >> SHIFT)]])
        self._relabel(dv, label[first], out)

    def results(self, vertex: np.ndarray, component: np.ndarray, out: list) -> None:
        """Round 2: the contraction's components of the vertices this worker owns; broadcast
        the labels that merged."""
        dv = self._dense(vertex)
        old = self.label[dv]
        merged = (old == vertex) & (component != vertex) & ~np.isin(vertex, self.redone)
        self._relabel(dv, component, out)
        if merged.any():
            self._broadcast(MERGED, vertex[merged], component[merged])

    def merge(self, old: np.ndarray, new: np.ndarray, out: list) -> None:
        """Round 3: this worker's members of each merged label ``old`` get ``new``."""
        dl, found = self.ids.get(old, -1)
        dl, new = dl[found], new[found]
        if not len(dl):
            return
        keys = self.by_label.with_prefix(dl)
        order = np.argsort(dl)
        at = np.searchsorted(dl[order], keys >> SHIFT)
        self._relabel(keys & LOW, new[order][at], out)

    # -- snapshots --------------------------------------------------------------------

    def snapshot(self) -> pa.Table:
        """This worker's state between epochs as keyed rows (:mod:`.stream_state`): the
        labels of its vertices and its adjacency rows, each keyed by the hash of the
        vertex it belongs to (the routing of ``ExchangeBy(["vertex"])``), so a snapshot
        re-shards into any worker count."""
        owned = np.flatnonzero(self.label[:self.n] != ABSENT)
        keys = self.adjacent.present()[0]
        return keyed_parts({0: ("vertex", {"vertex": self.vid[owned], "label": self.label[owned]}),
                            1: ("v", {"v": self.vid[keys >> SHIFT], "w": self.vid[keys & LOW]})}, {"epochs": 0})

    def restore(self, table: pa.Table) -> None:
        """Rebuild from :meth:`snapshot`'s rows (of one or more workers)."""
        if scalars_of(table, self.name) is None:
            return
        edges = part_of(table, 1)
        if len(edges.get("v", ())):
            v, w = edges["v"].astype(np.int64), edges["w"].astype(np.int64)
            dv, dw = self._dense(np.concatenate([v, w])).reshape(2, -1)
            keys = sorted_unique((dv << SHIFT) | dw)
            self.adjacent.set(keys, np.ones(len(keys), np.int64))
        rows = part_of(table, 0)
        if len(rows.get("vertex", ())):
            dv = self._dense(rows["vertex"].astype(np.int64))
            self._relabel(dv, rows["label"].astype(np.int64), [])
        self.compact_at = 2 * self.n


def label_changes(incidences: "Stream", name: str) -> "Stream":
    """The changelog ``(vertex, component, diff)`` of the components of an undirected
    edge set, from the incidences ``(vertex, other, appeared)`` of the edges that
    appear or vanish at each time (each edge at most once per time, once at each
    endpoint; a self-loop once): the loop of the module docstring.

    >>> import timely_spark as ts
    >>> def build(s):
    ...     inp, incidences = s.new_input()
    ...     label_changes(incidences, "Labels").inspect_time(
    ...         lambda t, rb: print(t, sorted(zip(*rb.to_pydict().values()))))
    ...     inp.send(pa.record_batch({"vertex": [1, 2, 2, 3], "other": [2, 1, 3, 2], "appeared": [True] * 4}))
    ...     inp.advance_to(1)
    ...     inp.send(pa.record_batch({"vertex": [1, 2], "other": [2, 1], "appeared": [False] * 2}))
    ...     inp.close()
    >>> _ = ts.example(build)
    0 [(1, 1, 1), (2, 1, 1), (3, 1, 1)]
    1 [(1, 1, -1), (2, 1, -1), (2, 2, 1), (3, 1, -1), (3, 2, 1)]
    """
    def loop(inner: Any) -> Any:
        handle, cycle = inner.feedback(1)
        entered = incidences.enter(inner)
        gate = in_order(entered, cycle, f"{name}Order")
        labels = ComponentLabels(inner, name)
        kept = StateHooks(lambda t: labels.snapshot(), labels.restore, keyed=True)
        out = entered.per_time(labels.step, others=(cycle, gate),
                               exchange=[ExchangeBy(["vertex"], name), LoopRoute(name), None],
                               name=name, state=kept)
        pairs, again, changes = out.partition(3, _part, name=f"{name}Parts")   # one operator a round, not three
        found = resolve(pointer_table(contract(pairs, f"{name}Contract"), f"{name}Pointers"), f"{name}Resolve")
        again.concat(found).connect_loop(handle)
        return changes.leave()

    return incidences.scope.iterative(loop, name=name).per_time(_net, name=f"{name}Net")


def _part(rb: pa.RecordBatch) -> int:
    """Where a batch of :meth:`ComponentLabels.step` goes: 0 the contraction (``root``), 2 out
    (``diff``), 1 around the loop (broadcasts, with ``kind``, and visits)."""
    names = rb.schema.names
    return 0 if "root" in names else 2 if DIFF in names else 1


def _net(time: Any, batches: list) -> list:
    """One time's changes netted per ``(vertex, component)`` (a vertex changed twice in
    an epoch, by a split and a merge, may come back to its label): only the rows that
    remain.  A single batch (one relabelling) holds each vertex once and passes as is."""
    batches = [rb for rb in batches if rb.num_rows]
    if len(batches) <= 1:
        return batches
    table = pa.Table.from_batches(batches).group_by(["vertex", "component"], use_threads=False).aggregate(
        [(DIFF, "sum")])                                # (a few rows: Arrow's thread pool costs more than it saves)
    diff = table.column(f"{DIFF}_sum").to_numpy()
    keep = np.flatnonzero(diff != 0)
    if not len(keep):
        return []
    return [pa.record_batch({"vertex": table.column("vertex").to_numpy()[keep],
                             "component": table.column("component").to_numpy()[keep], DIFF: diff[keep]})]
