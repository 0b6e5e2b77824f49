"""Sequencer: put elements proposed by any worker into one order, the same on every worker.

Built from a dataflow, as in the seed.  A source operator holds a capability at a
logical time; ``push(x)`` sends ``x`` to every worker at the source's current time
and moves the time on.  A worker that receives an element at time ``t`` moves its
own time past ``t``, so that ``t`` soon completes everywhere.  A sink releases the
elements of each completed time, sorted by ``(worker, sequence number)``; because
every worker sees every element and times complete in order, every worker releases
the same elements in the same order, each exactly once.

With a ``timer`` (a ``time.monotonic()`` start, like ``worker.timer``), times also
follow the clock (microseconds since ``timer``), so elements come out roughly in
the order they were pushed across workers.

>>> import timely_spark as ts
>>> def work(worker):
...     seq = ts.sync.Sequencer(worker)
...     seq.push(f"from {worker.index}")
...     got = [seq.wait_next(timeout=10) for _ in range(worker.peers)]
...     seq.close()
...     return got
>>> a, b = ts.execute(work, threads=2)
>>> a == b and sorted(a) == ["from 0", "from 1"]
True
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Iterator, Optional

__all__ = ["Sequencer"]


class Sequencer:
    """Atomic broadcast among the workers.  Create in the same order on every worker."""

    def __init__(self, worker: Any, timer: Optional[float] = None) -> None:
        self.worker = worker
        self._timer = timer
        self._send: deque = deque()
        self._recv: deque = deque()
        self._closed = False
        self._seen = [0]                    # the latest time received from anyone
        self._activate: Any = None
        worker.dataflow(self._build, name="Sequencer")
        worker.on_finish(self)

    # ---- the dataflow ----------------------------------------------------------------
    def _now(self, at_least: int) -> int:
        if self._timer is None:
            return at_least
        return max(at_least, int((time.monotonic() - self._timer) * 1e6))

    def _build(self, scope: Any) -> None:
        from ..dataflow.operators.generic import source

        index = scope.index
        counter = [0]

        def constructor(cap: Any, info: Any) -> Any:
            self._activate = info.activate
            held = [cap]

            def logic(output: Any) -> None:
                c = held[0]
                if c is None:
                    return
                if self._send:
                    batch = []
                    while self._send:
                        batch.append((index, counter[0], self._send.popleft()))
                        counter[0] += 1
                    output.session(c).give_batch(batch)
                    c.downgrade(self._now(c.time + 1))
                if self._seen[0] >= c.time:          # others are ahead: let their times complete
                    c.downgrade(self._now(self._seen[0] + 1))
                if self._closed:
                    c.drop()
                    held[0] = None

            return logic

        proposals = source(scope, "SequencerSource", constructor).broadcast()
        pending: dict[int, list] = {}      # time -> elements received at that time

        def release(input: Any) -> None:
            for cap, batch in input:
                pending.setdefault(cap.time, []).extend(batch)
                if cap.time > self._seen[0]:
                    self._seen[0] = cap.time
                    if self._activate is not None:
                        self._activate()
            done = sorted(t for t in pending if not input.frontier.less_equal(t))
            for t in done:
                for _, _, element in sorted(pending.pop(t), key=lambda e: (e[0], e[1])):
                    self._recv.append(element)

        proposals.sink(None, "SequencerSink", release)

    # ---- the API ---------------------------------------------------------------------
    def push(self, element: Any) -> None:
        """Propose ``element``; it will appear exactly once, on every worker."""
        if self._closed:
            raise ValueError("the sequencer is closed")
        self._send.append(element)
        if self._activate is not None:
            self._activate()

    def next(self) -> Any:
        """The next element in the common order, or None if none is ready yet
        (call ``worker.step()`` to make progress, or use ``wait_next``)."""
        return self._recv.popleft() if self._recv else None

    def wait_next(self, timeout: Optional[float] = None) -> Any:
        """Step the worker until the next element is ready, and return it."""
        self.worker.step_while(lambda: not self._recv, timeout=timeout)
        return self._recv.popleft()

    def __iter__(self) -> Iterator[Any]:
        """The elements ready now, in order."""
        while self._recv:
            yield self._recv.popleft()

    def close(self) -> None:
        """Stop proposing: release the capability so the dataflow can finish
        (idempotent; also done when the worker function returns)."""
        if not self._closed:
            self._closed = True
            if self._activate is not None:
                self._activate()

    def __enter__(self) -> "Sequencer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
