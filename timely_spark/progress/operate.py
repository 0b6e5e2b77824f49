"""The protocol between a scope and each of its children (operators and subgraphs).

A child presents itself to its parent scope as one operator with ``inputs``
and ``outputs`` ports, and talks progress through four methods -- those of the
hierarchical-scopes seed:

* :meth:`Operate.get_internal_summary` -- upward, once: the path summaries from
  each input to each output, and the initial capabilities at each output;
* :meth:`Operate.set_external_summary` -- downward, once: the summaries from
  each output back to each input through the rest of the graph;
* :meth:`Operate.push_external_progress` -- downward, at run time: changes to
  the frontier at each input (the outside world's progress, projected);
* :meth:`Operate.pull_internal_progress` -- upward, at run time: messages
  consumed at each input, messages produced at each output and changes to the
  capabilities held internally at each output, *together*, so that the parent
  never sees a consumption without the work it caused.

The parent and child exchange these through a :class:`SharedProgress`.

>>> sp = SharedProgress(1, 1)
>>> sp.consumeds[0].update(3, 10); sp.produceds[0].update(3, 7)
>>> class Map(Operate):
...     name, inputs, outputs = "map", 1, 1
...     def __init__(self): self.shared_progress = sp
>>> m = Map()
>>> consumed, internal, produced = [], [], []
>>> m.pull_internal_progress(internal, consumed, produced)
False
>>> consumed, internal, produced
([[(3, 10)]], [[]], [[(3, 7)]])
"""

from __future__ import annotations

from typing import Any

from .antichain import Antichain
from .change_batch import ChangeBatch

__all__ = ["Operate", "SharedProgress"]


class SharedProgress:
    """Progress information passed between a child and its scope.

    ``frontiers[i]`` -- changes to input ``i``'s frontier (parent -> child);
    ``consumeds[i]`` -- messages consumed at input ``i`` (child -> parent);
    ``internals[o]`` -- changes to capabilities held for output ``o`` (child -> parent);
    ``produceds[o]`` -- messages produced at output ``o`` (child -> parent).
    """

    __slots__ = ("frontiers", "consumeds", "internals", "produceds")

    def __init__(self, inputs: int, outputs: int) -> None:
        self.frontiers = [ChangeBatch() for _ in range(inputs)]
        self.consumeds = [ChangeBatch() for _ in range(inputs)]
        self.internals = [ChangeBatch() for _ in range(outputs)]
        self.produceds = [ChangeBatch() for _ in range(outputs)]


class Operate:
    """What a scope needs of each child.  Subclasses set ``name``, ``inputs``,
    ``outputs`` and ``shared_progress``; operators in the engine and nested
    subgraphs both implement it.

    ``local`` is True for a child whose progress statements concern only this
    worker and must be broadcast to every worker by the parent; a subgraph that
    already exchanges its own progress is not local, and its statements apply
    directly.  ``notify`` says whether the child wants to be scheduled when its
    input frontiers change.
    """

    name: str = "operator"
    inputs: int = 0
    outputs: int = 0
    local: bool = True
    notify: bool = True
    shared_progress: SharedProgress

    def get_internal_summary(self) -> tuple[list[list[Antichain]], list[list[tuple[Any, int]]]]:
        """Summaries ``[input][output]`` and initial capability counts per output.

        The default is identity summaries (from a minimum ``time`` attribute) and
        no initial capabilities: the engine's operators override it.
        """
        raise NotImplementedError

    def set_external_summary(self, summaries: list[list[Antichain]]) -> None:
        """Summaries ``[output][input]`` through the world outside this child."""

    def push_external_progress(self, external: list[list[tuple[Any, int]]]) -> None:
        """Changes to each input's frontier, as seen from outside."""
        for batch, changes in zip(self.shared_progress.frontiers, external):
            batch.extend(changes)

    def pull_internal_progress(
        self,
        internal: list[list[tuple[Any, int]]],
        consumed: list[list[tuple[Any, int]]],
        produced: list[list[tuple[Any, int]]],
    ) -> bool:
        """Append this child's consumed, internal and produced changes (drained
        together); return True when it has work outstanding that no capability
        shows."""
        sp = self.shared_progress
        consumed.extend(b.drain() for b in sp.consumeds)
        internal.extend(b.drain() for b in sp.internals)
        produced.extend(b.drain() for b in sp.produceds)
        return False

    def schedule(self) -> bool:
        """Do some work; return True while the child is incomplete."""
        raise NotImplementedError
