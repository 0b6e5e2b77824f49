"""PageRank in a timely loop, vectorized, with the ranks kept in the workers.

Edges live on the worker their ``src`` hashes to, each vertex's rank on the worker
its id hashes to (the same hash, so a vertex's out-edges and rank are together).
Each round a worker sends, per destination vertex, the summed contributions
``d * r(u)/out(u)`` of its edges (one row per distinct destination, to the owner, in
one batch per owner worked out once: :class:`.to_worker.ToWorker`; the vertex ids once,
before the rounds, then the sums alone, in the same order) and broadcasts the few
scalars everyone needs (vertex count, dangling mass, change).  A worker holds its
edges as 6 bytes each (an int32 source position, a uint16 offset in a block of
destinations), ordered for the cache (:data:`BLOCK_BITS`), per vertex its id, rank and
out-degree (int32), and per distinct destination of its edges one float64 sum (and
an int32 position per row it receives).  Indexing the edges needs one int64 key an
edge besides them, no other array as large (:meth:`_State.prepare`).
Definition (directed ``src -> dst``; N distinct vertices; r0 = 1/N)::

    r'(v) = (1 - d)/N + d * (sum_{u->v} r(u)/out(u) + D/N),  D = rank of vertices with no out-edge

Loop rounds of an outer time ``T``: 0 edges in, vertices announced to owners;
1 owners count vertices, destination ids go to their owners; 2 N known, first
contributions; 3.. one iteration each.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import pyarrow as pa

from ..dataflow import destinations
from ..progress import Product, less_equal
from ..runtime import check_count, check_fraction, check_positive
from .components_columnar import edge_arrays
from .loop_rounds import LoopRounds
from .pagerank_incremental import pagerank_stream
from .state_log import log_state
from .to_worker import TO, ToWorker
from .unique import sorted_unique

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["pagerank", "pagerank_stream", "pagerank_reference", "power_iteration"]

CONTRIB, EXISTS, COUNT, DANGLING, DELTA, IDS = 0, 1, 2, 3, 4, 5

#: The message column naming the worker that sent a row.
FROM = "from"

#: Edges are ordered by blocks of this many (log2) destination vertices, and by source
#: within a block: a round's gather of ranks by source and its sum by destination then
#: each stay within a cache-sized range (3x faster than random order at 10 M edges).
BLOCK_BITS = 16

#: A round reads a worker's edges in chunks of at most this many (of one destination block).
CHUNK = 1 << 16

#: The bits of the int64 keys :meth:`_State.prepare` sorts (non-negative, so signed order is theirs).
KEY_BITS = 63


def _msgs(vertex: Any, value: Any, kind: Any, to: Any, sender: Any) -> pa.RecordBatch:
    return pa.record_batch([vertex, value, kind, to, sender], names=["vertex", "value", "kind", TO, FROM])


def _column(values: np.ndarray, dtype: Any) -> pa.Array:
    return pa.array(np.ascontiguousarray(values, dtype=dtype))


#: Whole-edge-list passes of :meth:`_State.prepare` that would need a temporary as large as
#: the keys work on this many edges at a time instead (their temporaries stay this small).
PASS = 1 << 20


def _constant(n: int, value: int, typ: pa.DataType) -> pa.Array:
    """``n`` times ``value``, run-end encoded: a few bytes whatever ``n`` (the ``kind`` and
    ``from`` columns of the contributions, read only at their first row)."""
    return pa.RunEndEncodedArray.from_arrays(pa.array([n], pa.int32()), pa.array([value], typ))


def _first_of_runs(key: np.ndarray, shift: int) -> np.ndarray:
    """Where a run of equal ``key >> shift`` starts in the sorted ``key`` (a bool a key;
    the shifted keys are made :data:`PASS` at a time, never whole)."""
    first = np.empty(len(key), bool)
    if len(key):
        first[0] = True
    for lo in range(1, len(key), PASS):
        hi = min(lo + PASS, len(key))
        np.not_equal(key[lo:hi] >> shift, key[lo - 1:hi - 1] >> shift, out=first[lo:hi])
    return first


def _give_back() -> None:
    """Return the memory freed so far to the system: Arrow's pool, and the C heap's free
    pages (glibc keeps freed blocks below its mmap threshold -- which it raises to the
    size of the last large array freed -- in its arenas: after indexing the edges, over
    100 MB at 20 M edges).  Nothing where ``malloc_trim`` does not exist."""
    pa.default_memory_pool().release_unused()
    trim = _MALLOC_TRIM[0] if _MALLOC_TRIM else None
    if not _MALLOC_TRIM:
        try:
            trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            trim = None
        _MALLOC_TRIM.append(trim)
    if trim is not None:
        trim(0)


_MALLOC_TRIM: list = []


def _positions(n: int) -> Any:
    """The smallest integer type of positions among ``n`` things."""
    return np.int32 if n < 2**31 else np.int64


def _one(parts: list, dtype: Any) -> np.ndarray:
    """The concatenation of ``parts`` (no copy for one part)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([np.zeros(0, dtype)] + parts)


def _inner(t: Any) -> int:
    return t.inner if isinstance(t, Product) else t[1]


def _small(values: np.ndarray, force: bool = False) -> tuple:
    """``(base, lo, back, bits)``: ``base - lo`` are ``values`` as non-negative ids of at
    most ``bits`` bits, ``back`` maps ids to values -- ``base`` is ``values`` (not copied)
    if their range fits in :data:`KEY_BITS` bits (and not ``force``), else their ranks
    among the distinct values (``lo`` 0)."""
    if not len(values):
        return values, 0, (lambda v: v), 0
    lo, hi = int(values.min()), int(values.max())
    if not force and (hi - lo).bit_length() <= KEY_BITS:
        return values, lo, (lambda v: v + lo), (hi - lo).bit_length()
    distinct, codes = np.unique(values, return_inverse=True)
    return codes.ravel().astype(np.int64), 0, (lambda v: distinct[v]), (len(distinct) - 1).bit_length()


class _State:
    """A worker's PageRank state at one outer time: its vertices and their ranks, and its
    edges as positions -- the source's among the vertices, the destination's among
    ``udst`` (the distinct destinations, grouped by the worker owning them).  A round
    works in buffers allocated once (a fresh large array costs its page faults)."""

    def __init__(self, damping: float, me: int) -> None:
        self.damping = damping
        self.me = me
        self.vertices = np.zeros(0, np.int64)       # owned, sorted
        self.rank: np.ndarray = np.zeros(0)
        self.iteration = 0
        self.done = False
        self.n = 0.0
        self.at: dict = {}                         # sender -> positions of the vertices it sends sums for

    def prepare(self, edges: list, announced: np.ndarray, peers: int, owned: bool = False) -> None:
        """Index this worker's edges ``[src, dst]`` (all sources owned here; ``announced``:
        the destinations other workers' edges have that this worker owns).  The arrays
        are taken out of ``edges``, so that (in a batch run, where nothing else holds them)
        each is freed as soon as it is used; if ``owned`` (nothing else holds them at
        all), a writable ``src`` that owns its memory becomes the keys (no new array).

        Three in-place sorts of one int64 key per edge and no permutation of the edges
        (an argsort, or a gather in random order, costs several times a sort): by
        ``(src, dst)`` for the sources and their out-degrees, by ``(dst, source
        position)`` for the destinations, and by ``(destination block, source position,
        destination position)`` for the order a round reads them in."""
        key, db, s_back, d_back = self._edge_keys(edges, announced, owned)
        m = len(key)
        key.sort()                                     # by (src, dst)
        at, runs = self._sources(key, db, s_back, announced, m)
        vb = max(len(self.vertices) - 1, 0).bit_length()
        key &= (1 << db) - 1                           # destination ids, in (src, dst) order
        key <<= vb
        key |= np.repeat(at, runs)                     # and each edge's source position
        del at, runs
        parts = self._destinations(key, vb, d_back, peers)
        owner = parts.pop()
        self._round_order(key, vb, parts, m)           # (which lets go of the other parts)
        del key
        bounds = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=peers))]).tolist()
        self.owners = [(w, lo, hi) for w, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])) if hi > lo]
        me = self.me
        self.columns = {w: (_constant(hi - lo, CONTRIB, pa.int8()), _column(np.full(hi - lo, w), np.uint16),
                            _constant(hi - lo, me, pa.uint16())) for w, lo, hi in self.owners}

    @staticmethod
    def _edge_keys(edges: list, announced: np.ndarray, owned: bool) -> tuple[np.ndarray, int, Callable, Callable]:
        """``(key, db, s_back, d_back)``: one int64 ``(src - lo) << db | (dst - lo)`` an
        edge (the arrays taken out of ``edges``), and how source and destination ids map back."""
        dst = edges.pop()
        src = edges.pop()
        m = len(src)
        vertex_bits = (m + len(announced)).bit_length()
        s_base, s_lo, s_back, sb = _small(src)
        d_base, d_lo, d_back, db = _small(dst)
        if sb + db > KEY_BITS or db + vertex_bits > KEY_BITS:     # ids too far apart to share a key
            s_base, s_lo, s_back, sb = _small(src, force=True)
            d_base, d_lo, d_back, db = _small(dst, force=True)
        if owned and s_base is src and src.dtype == np.int64 and src.flags.writeable and src.base is None:
            key = s_base                               # nobody else's: the keys are made in it
            key -= s_lo
        else:
            key = np.subtract(s_base, s_lo, dtype=np.int64)        # fresh: sorted in place
        del src, dst
        del s_base
        key <<= db
        key += d_base                                  # (src - lo) << db | (dst - lo), with no temporary
        key -= d_lo                                    # (int64 wraps around: the sum is right mod 2**64)
        del d_base
        return key, db, s_back, d_back

    def _sources(self, key: np.ndarray, db: int, s_back: Callable, announced: np.ndarray,
                 m: int) -> tuple[np.ndarray, np.ndarray]:
        """From the keys sorted by ``(src, dst)``: the vertices (sources and ``announced``),
        out-degrees and dangling vertices; ``(at, runs)``, each source's position and edge count."""
        first = _first_of_runs(key, db)
        usrc = s_back(key[first] >> db)
        runs = np.diff(np.append(np.flatnonzero(first), m))
        del first
        merged = np.concatenate([usrc, announced])     # fresh: sorted in place
        merged.sort()
        self.vertices = merged[_first_of_runs(merged, 0)]
        del merged
        at = np.searchsorted(self.vertices, usrc).astype(_positions(len(self.vertices)))
        del usrc
        out = np.zeros(len(self.vertices), _positions(m + 1))
        out[at] = runs
        self.dangling = np.flatnonzero(out == 0)
        out[self.dangling] = 1                         # (their r/out is never read)
        self.out: np.ndarray = out                     # out-degrees
        return at, runs

    def _destinations(self, key: np.ndarray, vb: int, d_back: Callable, peers: int) -> list:
        """From the keys ``(dst, source position)``: the distinct destinations ``udst``
        grouped by owner; ``[group, rename, owner]``: each edge's destination among them
        (before grouping), its position after, each destination's owner."""
        key.sort()                                     # by (dst, source position)
        first = _first_of_runs(key, vb)
        udst = d_back(key[first] >> vb)
        ints = _positions(len(udst))
        group = np.cumsum(first, dtype=ints)           # each edge's destination among udst, + 1
        group -= 1
        del first
        owner = np.concatenate([np.zeros(0, np.uint8)] + [    # hashed a pass at a time (the hashes are 8 bytes)
            destinations(pa.record_batch({"vertex": udst[lo:lo + PASS]}), ["vertex"], peers)
            for lo in range(0, len(udst), PASS)])
        by_owner = np.argsort(owner, kind="stable")
        self.udst = udst[by_owner]
        del udst
        rename = np.empty(len(by_owner), ints)
        rename[by_owner] = np.arange(len(by_owner), dtype=ints)
        del by_owner
        return [group, rename, owner]

    def _round_order(self, key: np.ndarray, vb: int, parts: list, m: int) -> None:
        """Re-key by ``(destination block, source position, destination)``, the order a round
        reads the edges in: the int32 source positions (in the keys' memory), the low bits
        of the destinations, the chunks.  ``parts``: ``[group, rename]``, taken out (and freed)."""
        rename = parts.pop()
        group = parts.pop()
        low = (1 << BLOCK_BITS) - 1
        key &= (1 << vb) - 1                           # source positions, in (dst, source) order
        for lo in range(0, m, PASS):                   # | destination block << vb, << BLOCK_BITS | low bits
            part = key[lo:lo + PASS]
            dst_pos = rename[group[lo:lo + PASS]].astype(np.int64)      # group ascends: rename read in order
            part |= (dst_pos >> BLOCK_BITS) << vb
            part <<= BLOCK_BITS
            part |= dst_pos & low
        del group, rename
        key.sort()                                     # by (destination block, source position, destination)
        starts = np.arange(-(-len(self.udst) >> BLOCK_BITS) + 1, dtype=np.int64) << (vb + BLOCK_BITS)
        blocks = np.diff(np.searchsorted(key, starts))          # the edges of each destination block
        self.low: np.ndarray = np.empty(m, np.uint16 if BLOCK_BITS <= 16 else np.uint32)
        narrow = vb < 32 and key.base is None and key.flags.writeable
        src_pos = key.view(np.int32) if narrow else key
        part = key[:0]
        for lo in range(0, m, PASS):                   # in order: the int32 positions of a pass are
            part = key[lo:lo + PASS]                   # written over keys already read
            self.low[lo:lo + PASS] = part & low
            src_pos[lo:lo + len(part)] = (part >> BLOCK_BITS) & ((1 << vb) - 1)
        del part, src_pos
        if narrow:                                     # the keys' memory shrunk to the positions
            key.resize((m + 1) // 2, refcheck=False)   # (nothing else views it)
            self.src_pos: np.ndarray = key.view(np.int32)[:m]
        else:
            self.src_pos = key
        del key
        self.chunks: list = []                         # (first edge, end, first destination, destinations)
        for b, (lo, hi) in enumerate(zip([0] + np.cumsum(blocks)[:-1].tolist(), np.cumsum(blocks).tolist())):
            base = b << BLOCK_BITS
            size = min(1 << BLOCK_BITS, len(self.udst) - base)
            self.chunks.extend((c, min(c + CHUNK, hi), base, size) for c in range(lo, hi, CHUNK))

    def start(self, n: float, keep: bool) -> None:
        """Ranks ``1/n`` (``n``: the vertex count of all workers), and the round's buffers;
        ``keep``: the ranks must outlive a round's contributions (to measure their change)."""
        self.n = n
        self.rank = np.full(len(self.vertices), 1.0 / n)
        self.x = np.empty(len(self.vertices)) if keep else self.rank
        self.w = np.empty(CHUNK)
        targets = self.owners[-1][2] if self.owners else 0     # the distinct destinations
        self.sums = np.empty(targets)

    def contributions(self) -> list:
        """One batch per owner: the summed ``d * r(u)/out(u)`` of the edges into its vertices.
        The first round's batches name the vertices; later rounds' send only the sums, in
        the same order (their ``vertex`` column is of the null type: no bytes).  Unless
        ``keep``, the ranks are overwritten (:meth:`advance` makes the next ones).

        A chunk of at most :data:`CHUNK` edges of one destination block at a time: the
        gathered contributions stay in the cache, and the block's sums too.  One buffer of
        sums: this worker's own batch is sent without a copy (it reads it before its next
        round writes the buffer again), another worker's is a copy (that worker may read
        it after this one has started its next round)."""
        np.divide(self.rank, self.out, out=self.x)
        self.x *= self.damping
        sums, x, w, src_pos, low = self.sums, self.x, self.w, self.src_pos, self.low
        filled = -1
        for lo, hi, base, size in self.chunks:
            part = w[:hi - lo]
            np.take(x, src_pos[lo:hi], out=part, mode="clip")          # "raise" would buffer
            block = np.bincount(low[lo:hi], weights=part, minlength=size)
            if base != filled:
                sums[base:base + size] = block
                filled = base
            else:
                sums[base:base + size] += block
        out = []
        for worker, lo, hi in self.owners:
            kind, to, sender = self.columns[worker]
            values = sums[lo:hi] if worker == self.me else sums[lo:hi].copy()
            out.append(_msgs(pa.nulls(hi - lo), pa.array(values), kind, to, sender))
        return out

    def ids(self) -> list:
        """One batch per owner: the destinations this worker will send sums for, in the
        order it sends them (before the rounds: the receivers keep where each sum goes
        before any round's buffers exist); they are let go here."""
        out = []
        for worker, lo, hi in self.owners:
            _, to, sender = self.columns[worker]
            out.append(_msgs(pa.array(self.udst[lo:hi]), _column(np.zeros(hi - lo), np.float64),
                             _column(np.full(hi - lo, IDS), np.int8), to, sender))
        self.udst = np.zeros(0, np.int64)              # (a view would keep the whole array)
        return out

    def locate(self, sender: int, vertex: np.ndarray) -> None:
        """Where the sums ``sender`` sends go: the positions of ``vertex`` among this worker's vertices."""
        self.at[sender] = np.searchsorted(self.vertices, vertex).astype(_positions(len(self.vertices)))

    def dangling_mass(self) -> float:
        """The rank of this worker's vertices that have no out-edge."""
        return float(self.rank.take(self.dangling).sum())

    def advance(self, parts: list, dangling: float, change: bool) -> float:
        """The next ranks from the contributions ``parts`` (``(sender, value)``, in the
        order of the sender's :meth:`ids`) and all workers' dangling mass;
        the L1 change if ``change`` (else 0; then the ranks need not have been kept)."""
        d, rank = self.damping, self.rank
        if change:
            np.copyto(self.x, rank)
        rank.fill((1 - d) / self.n + d * dangling / self.n)
        for sender, value in parts:
            np.add.at(rank, self.at[sender], value)        # a batch's vertices are distinct
        delta = 0.0
        if change:
            np.subtract(rank, self.x, out=self.x)
            np.abs(self.x, out=self.x)
            delta = float(self.x.sum())
        self.iteration += 1
        return delta

    def finish(self) -> None:
        """Drop everything but the vertices and their ranks."""
        self.done = True
        self.src_pos = self.low = self.w = self.x = np.zeros(0, np.int64)
        self.sums, self.out = np.zeros(0), np.zeros(0, np.int32)
        self.chunks = []
        self.at.clear()


def _check_parameters(iterations: Any, damping: Any, tolerance: Any) -> None:
    check_count("iterations", iterations)
    check_fraction("damping", damping)
    check_positive("tolerance", tolerance)


def power_iteration(edges: "Stream", iterations: int = 20, damping: float = 0.85,
                    tolerance: Optional[float] = None, src: str = "src", dst: str = "dst") -> "Stream":
    """Edge record batches in, ``(vertex, rank)`` record batches out: at each completed
    time, the PageRank of all edges seen so far, from scratch by power iteration (the
    batch form's engine; :func:`pagerank_stream` is the incremental form).

    Each worker keeps only its share: the edges whose ``src`` it owns (as positions,
    6 bytes an edge) and its vertices' ranks; nothing gathers the graph.  Once no
    more edges can come, the raw edges are dropped.  The rows a worker keeps (edges
    plus vertices) are reported to its logging registry's :data:`~.state_log.GRAPH_LOG` stream.

    >>> import pyarrow as pa, timely_spark as ts
    >>> table = pa.table({"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> _ = ts.example(lambda s: power_iteration(s.to_stream(table), iterations=3)
    ...                .inspect(lambda rb: print(rb["vertex"].to_pylist(), rb["rank"].to_numpy().round(4).tolist())))
    [1, 2, 3] [0.3333, 0.3333, 0.3333]
    """
    _check_parameters(iterations, damping, tolerance)
    name = "PageRank"

    def loop(inner: Any) -> Any:
        op = LoopRounds(inner, edges, src, ToWorker(name), name, ("messages", "ranks"))
        rounds = _PowerLoop(op, inner, name, iterations, damping, tolerance)
        return op.run(lambda batch: edge_arrays(batch, src, dst, name), rounds.step)

    return edges.scope.iterative(loop)


class _PowerLoop:
    """A worker's side of :func:`power_iteration`'s loop operator ``op`` (the rounds of
    an outer time are in the module docstring): :meth:`step` is called once per completed
    time."""

    def __init__(self, op: LoopRounds, inner: Any, name: str, iterations: int, damping: float,
                 tolerance: Optional[float]) -> None:
        self.op, self.inner, self.name = op, inner, name
        self.iterations, self.damping, self.tolerance = iterations, damping, tolerance
        self.peers = peers = inner.peers
        self.me = me = inner.index
        self.everyone = _column(np.arange(peers), np.uint16)
        self.no_vertex = _column(np.zeros(peers), np.int64)
        self.sender = _column(np.full(peers, me), np.uint16)
        self.states: dict = {}
        self.edge_pieces: list = []          # (outer time, src, dst) of the edges routed here
        self.vertex_pieces: list = []        # (outer time, destinations of others' edges owned here)

    def broadcast(self, value: float, kind: int, ids: bool = True) -> list:
        """One row to every worker (a ``vertex`` column of the null type unless ``ids``,
        like the contributions sent with it: one schema a round)."""
        peers = self.peers
        return [_msgs(self.no_vertex if ids else pa.nulls(peers), _column(np.full(peers, value), np.float64),
                      _column(np.full(peers, kind), np.int8), self.everyone, self.sender)]

    def contributions(self, st: _State, delta: Optional[float] = None) -> list:
        dangling = self.broadcast(st.dangling_mass(), DANGLING, False)     # before the ranks are overwritten
        changed = self.broadcast(delta, DELTA, False) if delta is not None else []
        return st.contributions() + dangling + changed

    def announce(self, targets: np.ndarray) -> list:
        """``targets`` (distinct destinations of this worker's edges) to their owners, one
        batch an owner (passed on whole)."""
        peers, me = self.peers, self.me
        owner = destinations(pa.record_batch({"vertex": targets}), ["vertex"], peers)
        targets = targets[np.argsort(owner, kind="stable")]
        bounds = np.cumsum(np.bincount(owner, minlength=peers)).tolist()
        return [_msgs(pa.array(targets[lo:hi]), _column(np.zeros(hi - lo), np.float64),
                      _column(np.full(hi - lo, EXISTS), np.int8), _column(np.full(hi - lo, w), np.uint16),
                      _column(np.full(hi - lo, me), np.uint16))
                for w, (lo, hi) in enumerate(zip([0] + bounds[:-1], bounds)) if hi > lo]

    def no_more_edges(self) -> bool:
        """No edges and no new outer time can reach this worker any more."""
        op = self.op
        return (op.edge_in.frontier.is_empty() and all(_inner(t) >= 2 for t in op.msg_in.frontier.elements())
                and all(_inner(t) >= 2 for t in op.pending))

    def step(self, t: Product, cap: Any, edge_parts: list, msg_parts: list) -> None:
        """Round ``t.inner`` of outer time ``t.outer``: 0 edges in, 1 index them, 2 start, 3.. iterate."""
        if t.inner == 0:                     # this worker's new edges of outer time `outer`
            self.edges_in(t.outer, cap, edge_parts)
            return
        kinds = [rb["kind"][0].as_py() if rb.num_rows else None for rb in msg_parts]
        small = [rb for rb, kd in zip(msg_parts, kinds) if kd is not None and kd not in (CONTRIB, EXISTS, IDS)]
        table = pa.Table.from_batches(small) if small else None
        kind = table["kind"].to_numpy() if table is not None else np.zeros(0, np.int8)
        value = table["value"].to_numpy() if table is not None else np.zeros(0)
        del small, table
        if t.inner == 1:                     # every (outer', 1) with outer' <= outer is processed by now
            self.index(t, cap, msg_parts, kinds)
            return
        st = self.states.get(t.outer)
        if st is None or st.done:
            return
        if t.inner == 2:
            for rb, kd in zip(msg_parts, kinds):
                if kd == IDS:
                    st.locate(rb[FROM][0].as_py(), rb["vertex"].to_numpy())
            msg_parts.clear()
            st.start(float(value[kind == COUNT].sum()), self.tolerance is not None)
            self.op.out_msgs.session(cap).give_batch(self.contributions(st))
            return
        self.iterate(st, t.inner, cap, msg_parts, kinds, kind, value)

    def edges_in(self, outer: Any, cap: Any, edge_parts: list) -> None:
        """Keep this worker's new edges; announce their destinations to their owners."""
        if not edge_parts:
            return
        columns: list = [[a for a, _ in edge_parts], [c for _, c in edge_parts]]
        edge_parts.clear()
        for i, parts in enumerate(columns):      # a column's exchanged arrays go back to
            columns[i] = _one(parts, np.int64)   # the system once it is copied, before the
            parts.clear()                        # next one is
            pa.default_memory_pool().release_unused()
        a, c = columns
        del columns
        self.edge_pieces.append((outer, a, c))
        self.op.out_msgs.session(cap).give_batch(self.announce(sorted_unique(c)) + self.broadcast(0.0, COUNT))

    def index(self, t: Product, cap: Any, msg_parts: list, kinds: list) -> None:
        """Round 1: the vertices announced to this worker; its edges of times ``<= t.outer`` indexed."""
        outer = t.outer
        exists = [rb["vertex"].to_numpy() for rb, kd in zip(msg_parts, kinds) if kd == EXISTS]
        msg_parts.clear()
        merged = np.concatenate([np.zeros(0, np.int64)] + exists)     # fresh: sorted in place
        exists.clear()                                                # (the messages go)
        merged.sort()
        self.vertex_pieces.append((outer, merged[_first_of_runs(merged, 0)]))
        del merged
        st = self.states[outer] = _State(self.damping, self.me)
        mine = [p for p in self.edge_pieces if less_equal(p[0], outer)]
        src_parts, dst_parts = [p[1] for p in mine], [p[2] for p in mine]
        announced = _one([p[1] for p in self.vertex_pieces if less_equal(p[0], outer)], np.int64)
        del mine
        owned = self.no_more_edges()
        if owned:                            # a batch run: the edges live on as positions only
            self.edge_pieces.clear()
            self.vertex_pieces.clear()
        edges_here = [_one(src_parts, np.int64), _one(dst_parts, np.int64)]
        del src_parts, dst_parts
        st.prepare(edges_here, announced, self.peers, owned)
        _give_back()
        log_state(self.inner, self.name, t, len(st.src_pos) + len(st.vertices))
        self.op.out_msgs.session(cap).give_batch(self.broadcast(float(len(st.vertices)), COUNT) + st.ids())

    def iterate(self, st: _State, k: int, cap: Any, msg_parts: list, kinds: list, kind: np.ndarray,
                value: np.ndarray) -> None:
        """Rounds 3..: the next ranks from the contributions; stop after ``iterations`` (or
        once the change is below ``tolerance``)."""
        tolerance = self.tolerance
        if tolerance is not None and k >= 4 and float(value[kind == DELTA].sum()) < tolerance:
            self.finish(st, cap)
            return
        parts = [(rb[FROM][0].as_py(), rb["value"].to_numpy()) for rb, kd in zip(msg_parts, kinds) if kd == CONTRIB]
        msg_parts.clear()                    # the senders' copies go once read, before this round's are made
        delta = st.advance(parts, float(value[kind == DANGLING].sum()), tolerance is not None)
        del parts
        if st.iteration >= self.iterations:
            self.finish(st, cap)
            return
        self.op.out_msgs.session(cap).give_batch(self.contributions(st, delta if tolerance is not None else None))

    def finish(self, st: _State, cap: Any) -> None:
        st.finish()
        if len(st.vertices):
            self.op.out_results.session(cap).give_batch([pa.record_batch({"vertex": st.vertices, "rank": st.rank})])


def pagerank(edges: Any, iterations: int = 20, damping: float = 0.85, tolerance: Optional[float] = None,
             src: str = "src", dst: str = "dst", workers: Optional[int] = None, processes: int = 1,
             timeout: Optional[float] = None, stats: Optional[dict] = None) -> Any:
    """``(vertex, rank)`` of every vertex of a directed edge list (definition in the module doc).

    Parallel edges count by multiplicity: an edge listed k times counts k times in its
    source's out-degree and in the share of rank its destination receives.  For the
    simple graph, drop duplicate ``(src, dst)`` rows first (``dropDuplicates`` on Spark,
    ``drop_duplicates`` in pandas, ``group_by([src, dst]).aggregate([])`` in pyarrow).

    A Spark DataFrame runs on ``workers`` barrier workers (default 2) and returns a
    DataFrame lazily; a ``pyarrow.Table`` / pandas DataFrame runs on ``workers`` local
    threads in each of ``processes`` processes and returns the same kind, sorted by vertex.
    Ids of any type :mod:`.front` takes (strings...) come back as they were given.
    Missing columns, null ids or ids of a type not taken raise
    :class:`~timely_spark.errors.GraphInputError` (on Spark, null ids come from the
    workers as ``WorkerError`` with it as ``cause``); ``iterations`` that is not a
    whole number >= 1, ``damping`` outside [0, 1], a ``tolerance`` that is not positive
    raise :class:`~timely_spark.errors.ParameterError` naming the parameter.  On Spark,
    ``stats`` (a dict) receives where each task's time went, as ``ts.spark.transform``'s.

    >>> import pyarrow as pa
    >>> r = pagerank(pa.table({"src": [1, 1, 2], "dst": [2, 3, 3]}))
    >>> r["vertex"].to_pylist(), round(sum(r["rank"].to_pylist()), 12)
    ([1, 2, 3], 1.0)
    """
    from .front import ID, Algorithm, run_graph

    _check_parameters(iterations, damping, tolerance)
    algorithm = Algorithm(lambda batches, a, b, seeds: power_iteration(batches, iterations, damping, tolerance, a, b),
                          [("vertex", ID), ("rank", pa.float64())])
    return run_graph(edges, algorithm, src, dst, workers, processes, timeout, stats=stats)


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
