"""The replicated bookkeeping of the distributed split search of incremental connected
components (:mod:`.component_labels`): which search groups met, which still grow,
and when each component's search is over.

After an epoch's deletions, a component ``L`` may fall apart, and every piece holds
an end of a deleted edge.  So a search starts from each end (a *group*, named by the
end's vertex id) and grows level by level on the vertices' owners; groups that meet
are the same piece.  Each round every worker broadcasts what it saw (meetings, new
vertices per group, which group reached ``L``'s own vertex), so every worker applies
the same rows to the same :class:`SplitSearch` and takes the same decisions without a
coordinator: the rows are proportional to the groups, not to the component.

A component's search is over when each of its *links* holds at most one class of groups
(groups that met) still growing -- a link being the classes joined by withdrawn edges (an edge
whose ends lie in two classes, or at a vertex that left the graph: a piece of its own),
transitively.  The component was connected with the withdrawn edges, and a piece holding a
growing class holds only growing classes (a closed class is a whole piece): withdrawn edges
joining two such pieces, directly or through closed pieces, would put two growing classes in
one link.  With at most one in each, the growing classes are all one piece.  So the closed
classes are the pieces that split off (each a whole component now, labelled by the smallest
vertex its groups visited: every worker knows it), the growing ones keep the rest and the
label -- and a search in a component that stays whole ends once each withdrawn edge's ends
met again, however far apart the edges are.  Only the classes of links with two or more
growing classes grow, smallest first within their link (:meth:`SplitSearch.choose`): the
others keep their frontier for a later round.  It *falls back* to a recompute of the
component when the search visits more than ``budget`` vertices, runs more than
``max_rounds`` rounds, or when ``L`` itself splits off or leaves (the rest would need a new
smallest id).
"""

from __future__ import annotations

import numpy as np

from .unique import sorted_unique

__all__ = ["GROW_WITHIN", "SplitSearch"]

#: The classes of a link that grow in a round: those at most this many times the size of its
#: smallest growing class.  1 grows the smallest side alone (fewest visits, most rounds), a large
#: factor every side at once (fewest rounds, most visits).
GROW_WITHIN = 2


def _smallest_joined(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per node ``0..n-1``, the smallest node joined to it by the pairs ``a[i]--b[i]``
    (transitively): hook each pair's larger root to the smaller, then jump pointers, until
    every pair has one root.  A table of ``n`` entries, not a sort of the ids: ``n`` is
    the search's groups (and withdrawn edges' other ends), a few hundred.

    >>> _smallest_joined(6, np.array([5, 3, 4]), np.array([2, 4, 1])).tolist()
    [0, 1, 2, 1, 1, 2]
    """
    label = np.arange(n, dtype=np.int64)
    la, lb = a, b
    while True:
        differ = la != lb
        if not differ.any():
            return label
        a, b, la, lb = a[differ], b[differ], la[differ], lb[differ]
        low = np.minimum(la, lb)
        np.minimum.at(label, la, low)
        np.minimum.at(label, lb, low)
        while True:                                    # pointer jumping: every entry at its root
            up = label[label]
            if np.array_equal(up, label):
                break
            label = up
        la, lb = label[a], label[b]


def _cut_nodes(gid: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The withdrawn edges ``a[i]--b[i]`` as pairs of nodes: a group's position for an end
    that seeds a group (``gid``, sorted), ``len(gid) + j`` for the ``j``-th other end (one
    that left the graph: a piece of its own); and the number of nodes."""
    ends = np.concatenate([a, b])
    at = np.minimum(np.searchsorted(gid, ends), max(len(gid) - 1, 0))
    group = (gid[at] == ends) if len(gid) else np.zeros(len(ends), bool)
    others = sorted_unique(ends[~group])
    node = np.where(group, at, len(gid) + np.searchsorted(others, ends))
    return node[:len(a)], node[len(a):], len(gid) + len(others)


class SplitSearch:
    """The groups of one epoch's split search and their classes, the same on every worker.

    >>> s = SplitSearch(np.array([4, 7]), np.array([1, 1]), np.zeros(0, np.int64), budget=100, max_rounds=10)
    >>> none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    >>> s.update(meet=(np.array([4]), np.array([7])), grew=(np.array([4]), np.array([1])), pend=none, holds=none,
    ...          lowest=(np.array([4]), np.array([2])))
    >>> decided, fallback, closed = s.decide()          # one class, growing: nothing splits
    >>> decided.tolist(), fallback.tolist(), closed.tolist()
    ([1], [], [])
    >>> s.lowest(np.array([4])).tolist()                 # the class of 4 and 7: its smallest vertex seen
    [2]
    """

    def __init__(self, seeds: np.ndarray, labels: np.ndarray, gone: np.ndarray, budget: int,
                 max_rounds: int, cuts: tuple = (np.zeros(0, np.int64), np.zeros(0, np.int64))) -> None:
        order = np.argsort(seeds, kind="stable")
        self.gid, self.glabel = seeds[order], labels[order]
        k = len(self.gid)
        self.parent = np.arange(k, dtype=np.int64)
        self.inflight = np.ones(k, np.int64)              # vertices expanded last round (seeds: themselves)
        self.frontier = np.zeros(k, np.int64)             # vertices visited, not yet expanded
        self.expanding = np.zeros(k, bool)                # the group's class expands its frontier this round
        self.visits = np.ones(k, np.int64)
        self.holds = self.gid == self.glabel              # the group reached the label's own vertex
        self.low = self.gid.copy()                        # the smallest vertex the group visited
        self.labels = sorted_unique(self.glabel)          # the components searching at first
        self.gli = np.searchsorted(self.labels, self.glabel)   # per group: its label's position
        self.opened = np.ones(len(self.labels), bool)     # per label: still searching
        self.open = self.labels                           # labels still searching
        self.searching = np.ones(k, bool)                 # ... per group: its label's
        self.left = np.isin(self.labels, gone)            # per label: its own vertex left the graph
        self.budget, self.max_rounds, self.rounds = budget, max_rounds, 0
        self.cut_a, self.cut_b, self.nodes = _cut_nodes(self.gid, *cuts)
        self.split = False                                # some piece split off (or will be recomputed)
        self.link = np.arange(k, dtype=np.int64)          # per group: its class's link (see _links)
        self.linked: object = None                        # ... of which parent (none yet)
        self.busy = np.ones(k, bool)                      # per class: another growing class shares its link

    def index(self, ids: np.ndarray) -> np.ndarray:
        """Group positions (in ``gid``, sorted) of group ids (all known)."""
        return np.searchsorted(self.gid, ids)

    def is_open(self, at: np.ndarray) -> np.ndarray:
        """Whether the groups at positions ``at`` belong to a component still searching."""
        return self.searching[at]

    def classes(self, at: np.ndarray) -> np.ndarray:
        """The class (the smallest met group's id) of the groups at positions ``at``."""
        return self.gid[self.parent[at]]

    def lowest(self, classes: np.ndarray) -> np.ndarray:
        """The smallest vertex visited in each class (by id)."""
        low = np.full(len(self.gid), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(low, self.parent, self.low)
        return low[self.index(classes)]

    def _links(self) -> np.ndarray:
        """Per group, its *link*: the classes joined by withdrawn edges (ends in two classes,
        or at a vertex that left), transitively -- named by a node's position."""
        k = len(self.gid)
        root = np.concatenate([self.parent, np.arange(k, self.nodes, dtype=np.int64)])
        return _smallest_joined(self.nodes, root[self.cut_a], root[self.cut_b])[self.parent]

    def update(self, meet: tuple, grew: tuple, pend: tuple, holds: tuple, lowest: tuple) -> None:
        """Apply one round's broadcast rows: meetings ``(group, group)``, new vertices
        expanded at once ``(group, count)`` and kept for later ``(group, count)``, groups
        that reached their label's vertex, and the smallest new vertex ``(group, vertex)``
        (each worker's)."""
        a, b = self.index(meet[0]), self.index(meet[1])
        if len(a):
            ra, rb = self.parent[a], self.parent[b]
            if (ra != rb).any():
                self.parent = _smallest_joined(len(self.parent), ra, rb)[self.parent]
        k = len(self.gid)
        expanded = np.bincount(self.index(grew[0]), weights=grew[1], minlength=k).astype(np.int64)
        kept = np.bincount(self.index(pend[0]), weights=pend[1], minlength=k).astype(np.int64)
        self.inflight = expanded + np.where(self.expanding, self.frontier, 0)
        self.frontier = np.where(self.expanding, 0, self.frontier) + kept
        self.visits += expanded + kept
        self.holds[self.index(holds[0])] = True
        np.minimum.at(self.low, self.index(lowest[0]), lowest[1])
        self.rounds += 1

    def choose(self) -> np.ndarray:
        """The classes that expand their frontier this round: per link (of :meth:`decide`)
        with two or more classes still growing (a frontier, or vertices expanded last round,
        whose neighbours arrive now), those whose size is at most :data:`GROW_WITHIN` (2) times
        the smallest such class's (the small sides grow first: a small piece closes, or runs
        into a big class, long before the big ones grow much).  A class that expanded last round may expand what
        it finds now: it does not wait a round for that to be counted as its frontier."""
        root = self.parent
        live = self.searching & (self.frontier + self.inflight > 0) & self.busy[root]
        if not live.any():
            self.expanding = np.zeros(len(self.gid), bool)
            return np.zeros(0, np.int64)
        k = len(root)
        classes = np.flatnonzero(np.bincount(root[live], minlength=k))     # sorted, distinct
        size = np.bincount(root, weights=self.visits, minlength=k)[classes]
        link = self.link[classes]
        smallest = np.full(self.nodes, np.inf)
        np.minimum.at(smallest, link, size)
        chosen = classes[size <= GROW_WITHIN * smallest[link]]
        mark = np.zeros(k, bool)
        mark[chosen] = True
        self.expanding = mark[root]
        return self.gid[chosen]

    def decide(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(decided labels, of them those to recompute, closed classes to split off)``;
        the decided labels stop searching: those whose every link has at most one growing
        class (see the module docstring)."""
        empty = np.zeros(0, np.int64)
        if not len(self.open):
            return empty, empty, empty
        root, k = self.parent, len(self.parent)
        live = self.searching
        rl = root[live]
        classes = np.flatnonzero(np.bincount(rl, minlength=k))            # sorted, distinct
        grows = np.bincount(rl, weights=(self.inflight + self.frontier)[live], minlength=k)[classes] > 0
        holds = np.bincount(rl, weights=self.holds[live], minlength=k)[classes] > 0
        opened = np.flatnonzero(self.opened)              # the open labels' positions (sorted)
        labels = self.labels[opened]
        li = np.searchsorted(opened, self.gli[classes])   # a class lies within one component
        n = len(labels)
        growing = np.bincount(li, weights=grows, minlength=n)
        visits = np.bincount(self.gli, weights=self.visits, minlength=len(self.labels))[opened]
        held_closed = np.bincount(li, weights=holds & ~grows, minlength=n) > 0
        if self.linked is not self.parent:                # (the links change only when classes meet)
            self.link, self.linked = self._links(), self.parent
        link = self.link[classes]
        busy = np.bincount(link, weights=grows, minlength=self.nodes)[link] >= 2   # per class: its link has 2 growing
        self.busy = np.zeros(k, bool)
        self.busy[classes[busy]] = True
        unsettled = np.bincount(li, weights=busy, minlength=n) > 0
        over = (visits > self.budget) | (self.rounds > self.max_rounds) | self.left[opened]
        decided = over | ~unsettled
        fallback = over | (decided & (growing >= 1) & held_closed)
        pieces = decided[li] & ~fallback[li] & ~grows
        if decided.any():
            self.opened[opened[decided]] = False
            self.open = labels[~decided]
            self.searching = self.opened[self.gli]
        self.split |= bool(fallback.any()) or bool(pieces.any())
        return labels[decided], labels[fallback], self.gid[classes[pieces]]
