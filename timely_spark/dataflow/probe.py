"""Probes: watch a stream's frontier from outside the dataflow."""

from __future__ import annotations

from typing import Any

from ..progress import Antichain, MutableAntichain, sort_key
from .operator import OperatorBuilder

__all__ = ["ProbeHandle", "probe_with"]


class ProbeHandle:
    """The frontier of the probed stream(s): times that may still appear there.

    Until the dataflow first runs, the frontier conservatively holds the minimum time.
    """

    def __init__(self, name: str = "probe") -> None:
        self.name = name
        self._frontier = MutableAntichain()

    def less_than(self, t: Any) -> bool:
        """Whether a time strictly before ``t`` may still appear."""
        return self._frontier.less_than(t)

    def less_equal(self, t: Any) -> bool:
        """Whether ``t`` or an earlier time may still appear."""
        return self._frontier.less_equal(t)

    def done(self) -> bool:
        """Whether no time at all can appear any more."""
        return self._frontier.is_empty()

    @property
    def frontier(self) -> Antichain:
        return self._frontier.frontier()

    def __repr__(self) -> str:
        return f"ProbeHandle({self.frontier!r})"


def probe_with(stream: Any, handle: ProbeHandle) -> None:
    b = OperatorBuilder(stream.scope, "Probe")
    inp = b.new_input(stream)
    minimum = stream.scope._graph.min_time
    shared = handle._frontier
    shared.update_iter([(minimum, 1)])   # until the first run
    b.core.frontiers[0] = shared          # frontier changes land in the handle
    started = [False]

    logged = [None]
    worker = stream.scope._graph.worker

    def logic() -> None:
        inp.take()
        if not started[0]:
            started[0] = True
            shared.update_iter([(minimum, -1)])
        logger = worker._logger
        if logger is not None:
            now = shared.elements()
            if now != logged[0]:
                logged[0] = now
                logger.log("frontier", name=handle.name, detail=repr(sorted(now, key=sort_key)))

    b.build(logic, notify=True, initial_capabilities=False)
