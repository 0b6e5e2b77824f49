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

A component's search is over when at most one class of groups (groups that met) is
still growing: the closed classes are the pieces that split off (each a whole
component now), the growing one keeps the rest and the label.  It *falls back* to a
recompute of the component when the search visits more than ``budget`` vertices, runs
more than ``max_rounds`` rounds, or when ``L`` itself splits off or leaves (the rest
would need a new smallest id).
"""

from __future__ import annotations

import numpy as np

from .spanning_forest import forest

__all__ = ["SplitSearch"]


def _grouped_any(keys: np.ndarray, flags: np.ndarray, uniq: np.ndarray) -> np.ndarray:
    at = np.searchsorted(uniq, keys)
    out = np.zeros(len(uniq), bool)
    out[at[flags]] = True
    return out


class SplitSearch:
    """The groups of one epoch's split search and their classes, the same on every worker.

    >>> s = SplitSearch(np.array([4, 7]), np.array([1, 1]), np.zeros(0, np.int64), budget=100, max_rounds=10)
    >>> s.update(meet=(np.array([4]), np.array([7])), grew=(np.array([4]), np.array([1])),
    ...          holds=(np.zeros(0, np.int64), np.zeros(0, np.int64)))
    >>> decided, fallback, closed = s.decide()          # one class, growing: nothing splits
    >>> decided.tolist(), fallback.tolist(), closed.tolist()
    ([1], [], [])
    """

    def __init__(self, seeds: np.ndarray, labels: np.ndarray, gone: np.ndarray, budget: int,
                 max_rounds: int) -> None:
        order = np.argsort(seeds, kind="stable")
        self.gid, self.glabel = seeds[order], labels[order]
        k = len(self.gid)
        self.parent = np.arange(k, dtype=np.int64)
        self.grew = np.ones(k, np.int64)                  # new vertices in the last round (seeds: themselves)
        self.visits = np.ones(k, np.int64)
        self.holds = self.gid == self.glabel              # the group reached the label's own vertex
        self.open = np.unique(self.glabel)                # labels still searching
        self.gone = np.unique(gone)                       # labels whose own vertex left the graph
        self.budget, self.max_rounds, self.rounds = budget, max_rounds, 0

    def index(self, ids: np.ndarray) -> np.ndarray:
        """Group positions of group ids (all known)."""
        return np.searchsorted(self.gid, ids)

    def is_open(self, ids: np.ndarray) -> np.ndarray:
        """Whether the groups ``ids`` belong to a component still searching."""
        label = self.glabel[self.index(ids)]
        at = np.minimum(np.searchsorted(self.open, label), max(len(self.open) - 1, 0))
        return (self.open[at] == label) if len(self.open) else np.zeros(len(ids), bool)

    def classes(self, ids: np.ndarray) -> np.ndarray:
        """The class (the smallest met group's id) of each group id."""
        return self.gid[self.parent[self.index(ids)]]

    def update(self, meet: tuple, grew: tuple, holds: tuple) -> None:
        """Apply one round's broadcast rows: meetings ``(group, group)``, new vertices
        ``(group, count)``, and groups that reached their label's vertex."""
        a, b = self.index(meet[0]), self.index(meet[1])
        if len(a):
            ra, rb = self.parent[a], self.parent[b]
            differ = ra != rb
            if differ.any():
                v, r = forest(ra[differ], rb[differ])
                root = np.arange(len(self.parent), dtype=np.int64)
                root[v] = r
                self.parent = root[self.parent]
        self.grew = np.bincount(self.index(grew[0]), weights=grew[1], minlength=len(self.gid)).astype(np.int64)
        self.visits += self.grew
        self.holds[self.index(holds[0])] = True
        self.rounds += 1

    def decide(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(decided labels, of them those to recompute, closed classes to split off)``;
        the decided labels stop searching."""
        empty = np.zeros(0, np.int64)
        if not len(self.open):
            return empty, empty, empty
        root = self.parent
        live = np.isin(self.glabel, self.open)
        classes = np.unique(root[live])
        at = np.searchsorted(classes, root[live])
        grows = np.bincount(at, weights=self.grew[live], minlength=len(classes)) > 0
        holds = _grouped_any(root[live], self.holds[live], classes)
        label = self.glabel[classes]                      # a class lies within one component
        labels = self.open
        li = np.searchsorted(labels, label)
        growing = np.bincount(li, weights=grows, minlength=len(labels))
        visits = np.bincount(np.searchsorted(labels, self.glabel[live]), weights=self.visits[live],
                             minlength=len(labels))
        held_closed = np.bincount(li, weights=holds & ~grows, minlength=len(labels)) > 0
        over = (visits > self.budget) | (self.rounds > self.max_rounds) | np.isin(labels, self.gone)
        decided = over | (growing <= 1)
        fallback = over | (decided & (growing == 1) & held_closed)
        pieces = decided[li] & ~fallback[li] & ~grows
        self.open = labels[~decided]
        return labels[decided], labels[fallback], self.gid[classes[pieces]]
