"""Barrier: wait until every worker has reached the same round -- built from a dataflow.

An input whose time is the round number, and a probe: ``wait()`` advances the input
to the next round and steps the worker until the probe shows that every worker has
advanced too.  While it waits, the worker keeps running all its other dataflows.

>>> import timely_spark as ts
>>> def work(worker):
...     barrier = ts.sync.Barrier(worker)
...     for _ in range(3):
...         barrier.wait(timeout=10)
...     return barrier.round
>>> ts.execute(work, threads=2)
[3, 3]
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["Barrier"]


class Barrier:
    """A reusable barrier over all workers.  Every worker must create its barriers in
    the same order (each is a dataflow)."""

    def __init__(self, worker: Any) -> None:
        def build(scope: Any) -> Any:
            inp, stream = scope.new_input("Barrier")
            return inp, stream.probe()

        self.worker = worker
        self.round = 0
        self._input, self._probe = worker.dataflow(build, name="Barrier")

    def wait(self, timeout: Optional[float] = None) -> None:
        """Return once every worker has called ``wait()`` as often as this one has."""
        self.round += 1
        self._input.advance_to(self.round)
        self.worker.step_while(lambda: self._probe.less_than(self.round), timeout=timeout)

    def close(self) -> None:
        """Leave the barrier for good (other workers' waits no longer wait for this one)."""
        self._input.close()
