"""The protocol between a scope and each of its children (operators and subgraphs).

A child presents itself to its parent scope as one operator with ``inputs`` and
``outputs`` ports -- the hierarchical-scopes seed's view -- and the two talk
progress through the child's :class:`SharedProgress`:

* once, upward: :meth:`Operate.get_internal_summary` gives the path summaries from
  each input to each output and the initial capabilities at each output;
* at run time, downward: the parent adds changes to each input's frontier to
  ``shared_progress.frontiers`` (the seed's *push external progress*);
* at run time, upward: after :meth:`Operate.schedule` the parent drains the messages
  consumed at each input, produced at each output and the changes to capabilities
  held for each output *together* (the seed's *pull internal progress*), so that it
  never sees a consumption without the work it caused.

The seed's *set external summary* (paths from outputs back to inputs outside the
child) has no counterpart: no child here needs it.

>>> sp = SharedProgress(1, 1)
>>> sp.consumeds[0].update(3, 10); sp.produceds[0].update(3, 7)
>>> [b.drain() for b in sp.consumeds], [b.drain() for b in sp.produceds]
([[(3, 10)]], [[(3, 7)]])
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

    def schedule(self) -> bool:
        """Do some work; return True while the child is incomplete."""
        raise NotImplementedError
