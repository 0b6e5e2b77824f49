"""Feedback: the operator on every cycle, advancing each time by a path summary."""

from __future__ import annotations

from typing import Any

from ..channels import Pipeline
from ..operator import OperatorBuilder

__all__ = ["LoopHandle", "feedback"]


class LoopHandle:
    """The input end of a feedback edge: connect it once with ``stream.connect_loop(handle)``."""

    def __init__(self, builder: OperatorBuilder, port: Any, summary: Any, name: str) -> None:
        self._builder = builder
        self._port = port
        self.summary = summary
        self.name = name
        self.connected = False

    def connect(self, stream: Any) -> None:
        if self.connected:
            raise ValueError(f"feedback {self.name!r} is already connected")
        b = self._builder
        inp = b.new_input(stream, Pipeline)
        b.set_summary(0, 0, [self.summary])
        q = inp.queue
        consumed = inp.consumed.update
        push = self._port.push
        results_in = self.summary.results_in

        def logic() -> None:
            while q:
                t, data = q.popleft()
                consumed(t, len(data))
                nt = results_in(t)
                if nt is not None:  # a bounded summary drops what passes its bound
                    push(nt, data)

        b.build(logic, initial_capabilities=False)
        self.connected = True


def feedback(scope: Any, summary: Any, name: str = "Feedback") -> tuple[LoopHandle, Any]:
    b = OperatorBuilder(scope, name)
    port, stream = b.new_output()
    handle = LoopHandle(b, port, summary, name)
    scope._graph.loops.append(handle)
    return handle, stream
