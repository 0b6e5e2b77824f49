"""Worker: one thread of control that builds dataflows and runs them.

Every worker runs the same program and builds the same dataflows in the same
order (channels are numbered in build order, so this is what lines them up).
"""

from __future__ import annotations

import heapq
import time
from typing import Any, Callable, Optional, TypeVar

from ..progress import minimum
from .scope import Scope
from .subgraph import Subgraph

__all__ = ["Worker"]


def _address(path: tuple) -> str:
    return ".".join(str(p) for p in path)

R = TypeVar("R")

PARK = 0.05  # seconds an idle worker waits for a message before returning from step()


class Worker:
    """A timely worker.

    * ``index``, ``peers`` -- this worker's index and the number of workers;
    * ``dataflow(build)`` -- build a dataflow; returns what ``build`` returned;
    * ``step()`` -- run what is ready (waiting briefly when nothing is);
      returns whether any dataflow is still incomplete;
    * ``step_while(cond)`` -- step while ``cond()`` holds;
    * ``timer`` -- ``time.monotonic()`` when the worker started.
    """

    def __init__(self, allocator: Any) -> None:
        self.allocator = allocator
        self.index: int = allocator.index
        self.peers: int = allocator.peers
        self.timer = time.monotonic()
        self._channels = 0
        self._dataflows: list[Subgraph] = []
        self._active: list[Subgraph] = []
        self._inputs: list[Any] = []
        self._closers: list[Any] = []     # closed when the worker function returns (sequencers)
        self._timers: list[tuple[float, int, Callable[[], None]]] = []   # (deadline, n, activate)
        self._built: list[Subgraph] = []           # every dataflow built here (for pictures)
        self._registry: Any = None
        self._logger: Any = None                   # the "timely" event logger, when registered
        self._operator_ids = 0

    def __repr__(self) -> str:
        return f"Worker({self.index} of {self.peers})"

    def log_register(self) -> Any:
        """This worker's logging registry (see :mod:`timely_spark.logging`)."""
        if self._registry is None:
            from ..logging import Registry

            self._registry = Registry(self)
        return self._registry

    def dataflow_graphs(self) -> list:
        """A description of every dataflow built on this worker (operators, ports,
        edges, nested scopes), renderable in a notebook."""
        from .graph import describe

        return [describe(g) for g in self._built]

    def _next_operator_id(self) -> int:
        self._operator_ids += 1
        return self._operator_ids - 1

    def elapsed(self) -> float:
        """Seconds since the worker started."""
        return time.monotonic() - self.timer

    # ---- building -------------------------------------------------------------------
    def _allocate(self, inbox: Any) -> list[Any]:
        channel = self._channels
        self._channels += 1
        return self.allocator.allocate(channel, inbox)

    def dataflow(self, build: Callable[[Scope], R], time: Any = 0, name: Optional[str] = None) -> R:
        """Build a dataflow whose top-scope times are like ``time`` (an int by default;
        a tuple, or ``()`` for a dataflow with a single time) and return ``build``'s result."""
        number = len(self._dataflows)
        graph = Subgraph(self, None, name or f"Dataflow{number}", minimum(time), path=(self._channels,))
        result = build(Scope(graph))
        graph.finalize()
        self._dataflows.append(graph)
        self._built.append(graph)
        return result

    def _activate_dataflow(self, graph: Subgraph) -> None:
        self._active.append(graph)

    def activate_after(self, activate: Callable[[], None], delay: float) -> None:
        """Call ``activate()`` (an operator's activator) once ``delay`` seconds have passed;
        until then the worker may park instead of spinning."""
        heapq.heappush(self._timers, (time.monotonic() + delay, len(self._timers), activate))

    # ---- running --------------------------------------------------------------------
    def step(self) -> bool:
        """Run every activated operator once; if nothing was ready, wait up to a short
        while for a message first.  Returns whether some dataflow is incomplete."""
        if self._inputs:
            for handle in self._inputs:
                if handle._buffer:
                    handle.flush()
        allocator = self.allocator
        allocator.receive()
        timers = self._timers
        if timers:
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                heapq.heappop(timers)[2]()
        if not self._active:
            if not self._dataflows:
                return False
            park = PARK if not timers else max(0.0, min(PARK, timers[0][0] - time.monotonic()))
            if park:
                allocator.receive(park)
        if self._active:
            active, self._active = self._active, []
            seen = set()
            for graph in active:
                if id(graph) in seen:
                    continue
                seen.add(id(graph))
                if not graph.schedule() and graph in self._dataflows:
                    self._dataflows.remove(graph)
                    if self._logger is not None:
                        self._logger.log("shutdown", address=_address(graph.path))
            allocator.release()
        if self._registry is not None:
            self._registry.flush()
        return bool(self._dataflows)

    def step_while(self, condition: Callable[[], bool], timeout: Optional[float] = None) -> None:
        """Step while ``condition()`` is true; ``timeout`` (seconds) bounds the wait and
        raises ``TimeoutError``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while condition():
            self.step()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.index}: condition still true after {timeout} s")

    def has_dataflows(self) -> bool:
        return bool(self._dataflows)

    def _finish(self) -> None:
        """What happens when the worker function returns: close this worker's inputs
        and run the dataflows to completion."""
        for handle in self._inputs + self._closers:
            handle.close()
        while self.step():
            pass
        if self._registry is not None:
            self._registry.close()
        self.allocator.close()
