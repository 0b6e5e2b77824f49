"""Reachability: compiled path summaries, and pointstamp tracking over them.

:class:`Builder` collects nodes (with their internal summaries) and edges, and
compiles for every location the minimal antichain of path summaries to every
target.  :class:`Tracker` accumulates ``(location, time, diff)`` pointstamp
updates and derives, at every target, the frontier of times that could still
arrive there: the minimal ``s(t)`` over positive pointstamps ``(l, t)`` and
summaries ``s`` from ``l`` to the target (the *could-result-in* order).

>>> from timely_spark.progress import Add, Antichain
>>> b = Builder(0)
>>> b.add_node(0, 0, 1, [])                        # an input
>>> b.add_node(1, 1, 1, [[Antichain([Add(0)])]])   # a map
>>> b.add_edge(Source(0, 0), Target(1, 0))
>>> tracker = b.build()
>>> tracker.update_source(Source(0, 0), 0, 1)      # the input holds a capability at 0
>>> tracker.propagate_all()
>>> tracker.frontier(Target(1, 0)), tracker.drain_pushed()
(Antichain([0]), [(Target(node=1, port=0), 0, 1)])
>>> tracker.update_source(Source(0, 0), 0, -1); tracker.update_source(Source(0, 0), 3, 1)
>>> tracker.propagate_all()
>>> tracker.drain_pushed()
[(Target(node=1, port=0), 0, -1), (Target(node=1, port=0), 3, 1)]
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from ..errors import CycleError
from .antichain import Antichain, MutableAntichain
from .location import Location, Source, Target
from .timestamp import identity

__all__ = ["Builder", "Tracker", "CycleError"]


class Builder:
    """Collects a scope's graph and compiles it into a :class:`Tracker`.

    ``time`` is any timestamp of the scope (its minimum is fine): it tells the
    builder which identity summary edges carry.
    """

    def __init__(self, time: Any = 0) -> None:
        self.identity = identity(time)
        self.nodes: dict[int, tuple[int, int, list[list[Antichain]]]] = {}
        self.names: dict[int, str] = {}
        self.edges: list[tuple[Source, Target]] = []

    def add_node(
        self, node: int, inputs: int, outputs: int, summary: Sequence[Sequence[Iterable[Any]]], name: str = ""
    ) -> None:
        """Declare ``node`` with ``summary[input][output]``, the summaries from input to output.

        An empty antichain means that input cannot reach that output.
        """
        if len(summary) != inputs or any(len(row) != outputs for row in summary):
            raise ValueError(f"node {node} ({name or '?'}): summary must be {inputs} x {outputs}")
        self.nodes[node] = (inputs, outputs, [[Antichain(a) for a in row] for row in summary])
        self.names[node] = name

    def add_edge(self, source: Source, target: Target) -> None:
        """Connect an output port to an input port."""
        self.edges.append((source, target))

    def _describe(self, loc: Location) -> str:
        name = self.names.get(loc.node)
        kind = "output" if isinstance(loc, Source) else "input"
        label = f"{name}[{loc.node}]" if name else f"node {loc.node}"
        return f"{label} {kind} {loc.port}"

    def _check_cycles(self) -> None:
        """Refuse any cycle made only of steps that need not advance the time."""
        succ: dict[Location, list[Location]] = {}
        for s, t in self.edges:
            succ.setdefault(s, []).append(t)
        for node, (ins, outs, summary) in self.nodes.items():
            for i in range(ins):
                for o in range(outs):
                    if any(not s.advances() for s in summary[i][o]):
                        succ.setdefault(Target(node, i), []).append(Source(node, o))
        color: dict[Location, int] = {}
        for root in list(succ):
            if root in color:
                continue
            stack: list[tuple[Location, int]] = [(root, 0)]
            path: list[Location] = [root]
            color[root] = 1
            while stack:
                loc, k = stack[-1]
                nexts = succ.get(loc, [])
                if k < len(nexts):
                    stack[-1] = (loc, k + 1)
                    nxt = nexts[k]
                    c = color.get(nxt, 0)
                    if c == 1:
                        cycle = path[path.index(nxt):] + [nxt]
                        raise CycleError([self._describe(x) for x in cycle])
                    if c == 0:
                        color[nxt] = 1
                        stack.append((nxt, 0))
                        path.append(nxt)
                else:
                    color[loc] = 2
                    stack.pop()
                    path.pop()

    def summaries(self) -> dict[Location, dict[Target, Antichain]]:
        """For every location, the minimal path summaries to each target it reaches."""
        self._check_cycles()
        ident = self.identity
        out_edges: dict[Source, list[Target]] = {}
        for s, t in self.edges:
            out_edges.setdefault(s, []).append(t)
        for s, t in self.edges:
            for loc, ports in ((s, 1), (t, 0)):
                node = self.nodes.get(loc.node)
                if node is None or not 0 <= loc.port < node[ports]:  # type: ignore[operator]
                    raise ValueError(f"edge {s} -> {t}: {loc} is not a declared port")
        sources = [Source(n, o) for n, (_, outs, _) in self.nodes.items() for o in range(outs)]
        targets = [Target(n, i) for n, (ins, _, _) in self.nodes.items() for i in range(ins)]

        # Sources first: a fixpoint over (source, target, summary) discoveries.
        from_source: dict[Location, dict[Target, Antichain]] = {}
        for s in sources:
            reach: dict[Target, Antichain] = {}
            work = []
            for t in out_edges.get(s, ()):
                if reach.setdefault(t, Antichain()).insert(ident):
                    work.append((t, ident))
            while work:
                t, summ = work.pop()
                node = self.nodes.get(t.node)
                if node is None:
                    continue
                _, outs, internal = node
                for o in range(outs):
                    for a in internal[t.port][o]:
                        s2 = summ.followed_by(a)
                        if s2 is None:
                            continue
                        for t2 in out_edges.get(Source(t.node, o), ()):
                            if reach.setdefault(t2, Antichain()).insert(s2):
                                work.append((t2, s2))
            from_source[s] = reach

        result = dict(from_source)
        for t in targets:
            reach = {t: Antichain([ident])}
            _, outs, internal = self.nodes[t.node]
            for o in range(outs):
                for a in internal[t.port][o]:
                    for t2, summs in from_source[Source(t.node, o)].items():
                        for s in summs:
                            s2 = a.followed_by(s)
                            if s2 is not None:
                                reach.setdefault(t2, Antichain()).insert(s2)
            result[t] = reach
        return result

    def build(self, observed: Optional[Iterable[Target]] = None, scope_boundary: bool = False) -> "Tracker":
        """Compile the graph.  ``observed`` limits frontier upkeep to those targets
        (default: every target).  With ``scope_boundary``, node 0 is a scope's boundary:
        the frontier at its targets (the scope outputs) reflects only work inside the
        scope, not the frontier at its sources (the scope inputs) -- the parent scope
        accounts for input-to-output paths itself, through the scope's summary."""
        return Tracker(self, None if observed is None else set(observed), scope_boundary)


class Tracker:
    """Pointstamp counts at every location, and the frontiers they imply at targets.

    Updates may be applied in any order and counts may go transiently negative;
    :meth:`propagate_all` folds pending updates in and records the frontier
    changes, which :meth:`drain_pushed` hands out.
    """

    def __init__(self, builder: Builder, observed: Optional[set[Target]] = None,
                 scope_boundary: bool = False) -> None:
        compiled = builder.summaries()
        self.summaries = compiled
        ident = builder.identity
        locations: list[Location] = list(compiled)
        self._index: dict[Location, int] = {loc: i for i, loc in enumerate(locations)}
        self.locations = locations
        self._targets = [loc for loc in locations if isinstance(loc, Target) and (observed is None or loc in observed)]
        self._implications: dict[Target, MutableAntichain] = {t: MutableAntichain() for t in self._targets}
        # per observed target, by its number k: the target and its frontier (propagation keys by k:
        # an int hashes in C, a Target in Python)
        self._observed: list[tuple[Target, MutableAntichain]] = list(self._implications.items())
        number = {t: k for k, (t, _) in enumerate(self._observed)}
        # per location id: [(k, [summary or None for identity])]
        self._reach: list[list[tuple[int, list[Any]]]] = []
        for loc in locations:
            row = []
            for t, summs in compiled[loc].items():
                if scope_boundary and loc.node == 0 and t.node == 0:
                    continue
                if t in number:
                    row.append((number[t], [None if s == ident else s for s in summs]))
            self._reach.append(row)
        self._pointstamps = [MutableAntichain() for _ in locations]
        self._held = [p.unstable_counts() for p in self._pointstamps]   # their live counts (tracking_anything)
        self._pending: dict[int, list[tuple[Any, int]]] = {}
        self._pushed: list[tuple[Target, Any, int]] = []

    # ---- updates -------------------------------------------------------------------
    def location_id(self, loc: Location) -> int:
        """The dense id of a location (for the ``*_id`` methods)."""
        try:
            return self._index[loc]
        except KeyError:
            raise KeyError(f"{loc} is not a location of this graph") from None

    def update(self, loc: Location, time: Any, diff: int) -> None:
        """Record a pointstamp change at a location (applied at the next propagation)."""
        self.update_id(self.location_id(loc), time, diff)

    update_source = update
    update_target = update

    def update_id(self, loc_id: int, time: Any, diff: int) -> None:
        """Like :meth:`update`, by location id."""
        pending = self._pending
        if loc_id in pending:
            pending[loc_id].append((time, diff))
        else:
            pending[loc_id] = [(time, diff)]

    def update_ids(self, updates: Iterable[tuple[int, Any, int]]) -> None:
        """Like :meth:`update_id` for every ``(location id, time, diff)`` of ``updates``
        (one call for a whole progress batch)."""
        pending = self._pending
        for loc_id, time, diff in updates:   # (``in`` and a subscript, not pending.get: no call per update)
            if loc_id in pending:
                pending[loc_id].append((time, diff))
            else:
                pending[loc_id] = [(time, diff)]

    # ---- propagation ---------------------------------------------------------------
    def propagate_all(self) -> None:
        """Apply the recorded changes and update the frontiers of the observed targets; what changed is kept for
        :meth:`drain_pushed`.
        """
        if self._pending:
            self._pushed = self.propagate()

    def propagate(self) -> list[tuple[Target, Any, int]]:
        """:meth:`propagate_all` then :meth:`drain_pushed`, in one call: a scope propagates at
        every run, and most runs of a quiet dataflow have nothing pending (then nothing is
        done and an empty list returned).  (The work is done here, in one frame: a scope's
        run propagates several times.)

        >>> b = Builder(0)
        >>> b.add_node(0, 0, 1, []); b.add_node(1, 1, 0, [[]])
        >>> b.add_edge(Source(0, 0), Target(1, 0))
        >>> tracker = b.build()
        >>> tracker.propagate()
        []
        >>> tracker.update_source(Source(0, 0), 2, 1)
        >>> tracker.propagate(), tracker.propagate()
        ([(Target(node=1, port=0), 2, 1)], [])
        """
        pending = self._pending
        pushed = self._pushed
        if not pending:
            if not pushed:
                return []
            self._pushed = []
            return pushed
        self._pending = {}
        self._pushed = []
        implied: dict[int, list[tuple[Any, int]]] = {}
        reach = self._reach
        pointstamps = self._pointstamps
        for loc_id in pending:           # (keys and a subscript: no dict.items call; the keys are ints)
            changes = pointstamps[loc_id].update_iter(pending[loc_id])
            if not changes:
                continue
            for k, summs in reach[loc_id]:
                if k in implied:
                    lst = implied[k]
                else:
                    lst = implied[k] = []
                for t, d in changes:
                    for s in summs:
                        if s is None:
                            lst.append((t, d))
                        else:
                            t2 = s.results_in(t)
                            if t2 is not None:
                                lst.append((t2, d))
        observed = self._observed
        for k in implied:
            target, implications = observed[k]
            for t, d in implications.update_iter(implied[k]):
                pushed.append((target, t, d))
        return pushed

    def drain_pushed(self) -> list[tuple[Target, Any, int]]:
        """The frontier changes ``(target, time, diff)`` since the last call."""
        pushed, self._pushed = self._pushed, []
        return pushed

    # ---- queries -------------------------------------------------------------------
    def frontier(self, target: Target) -> Antichain:
        """Times that may still arrive at ``target`` (as of the last propagation)."""
        return self._implications[target].frontier()

    def pointstamps(self, loc: Location) -> dict[Any, int]:
        """The accumulated counts at ``loc`` (as of the last propagation)."""
        return self._pointstamps[self.location_id(loc)].counts()

    def tracking_anything(self) -> bool:
        """Whether any location holds a non-zero count (pending updates included)."""
        if self._pending:
            return True
        for counts in self._held:        # (each location's live counts: no call per location)
            if counts:
                return True
        return False

    def pointstamp_times(self) -> list[Any]:
        """The distinct times with a positive count at some location (as of the last
        propagation): the capabilities held and the messages in flight."""
        times: list[Any] = []
        for p in self._pointstamps:
            for t in p.elements():
                if t not in times:
                    times.append(t)
        return times
