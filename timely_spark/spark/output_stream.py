"""A worker's output, handed to its Spark task while the worker runs.

``mapInArrow`` takes a task's output from an iterator.  The timely worker runs in a
thread of its own and hands each batch of output records to :meth:`OutputStream.put`;
the task's thread iterates :meth:`OutputStream.run` and passes them on to Spark as
they come.  At most ``limit`` batches wait between the two: a worker whose output is
not taken waits in ``put`` (the mesh's own threads keep answering its peers), so a
worker's memory holds those batches, not its whole output.  :attr:`OutputStream.peak_rows`
counts the most rows that ever waited at once (put and not yet passed on to Spark):
``ts.spark.transform(..., stats=)`` reports it per worker.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable, Iterator, Optional

from ..errors import WorkerFailure
from ..runtime import POLL_INTERVAL

__all__ = ["OutputStream"]

#: Batches of a ``ts.spark.transform`` worker's output that may wait for its Spark task
#: to take them; the worker waits while this many do (so memory holds only these).
OUTPUT_BATCHES_IN_FLIGHT = 4


class OutputStream:
    """Batches of records from a producer thread to the thread that iterates :meth:`run`.

    >>> out = OutputStream(limit=2)
    >>> def produce():
    ...     for i in range(5):
    ...         out.put([i, i])
    >>> [x for batches in out.run(produce) for batch in batches for x in batch]
    [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    >>> out.peak_rows <= 2 * 2, out.rows, out.wait_seconds >= 0
    (True, 10, True)
    """

    def __init__(self, limit: int = OUTPUT_BATCHES_IN_FLIGHT) -> None:
        self._limit = limit
        self._cond = threading.Condition()
        self._waiting: deque = deque()
        self._ended = False
        self._closed = False
        self._error: Optional[BaseException] = None
        self._held = 0
        self.peak_rows = 0          #: the most rows waiting at once (put, not yet passed on)
        self.rows = 0               #: rows put in all
        self.wait_seconds = 0.0     #: time the producer waited in ``put`` for the consumer

    @staticmethod
    def count(records: list) -> int:
        """Rows in a list of records: a record batch's rows, else one per record."""
        return sum(getattr(r, "num_rows", 1) for r in records)

    def put(self, records: list) -> None:
        """(Producer.) Hand ``records`` on (an empty list is dropped); waits while ``limit``
        batches are not yet taken.  Record batches take a place each (a list of rows
        one).  Raises WorkerFailure once the consumer has stopped (:meth:`close`)."""
        if len(records) > 1 and all(hasattr(r, "num_rows") for r in records):
            for record in records:
                self._put([record])
        elif records:
            self._put(records)

    def _put(self, records: list) -> None:
        rows = self.count(records)
        with self._cond:
            if len(self._waiting) >= self._limit and not self._closed:
                start = time.perf_counter()
                while len(self._waiting) >= self._limit and not self._closed:
                    self._cond.wait()
                self.wait_seconds += time.perf_counter() - start
            if self._closed:
                raise WorkerFailure("the Spark task stopped taking this worker's output (it failed or was stopped)")
            self._waiting.append(records)
            self._held += rows
            self.rows += rows
            self.peak_rows = max(self.peak_rows, self._held)
            self._cond.notify_all()

    def run(self, produce: Callable[[], object]) -> Iterator[list]:
        """(Consumer.) Run ``produce()`` in a daemon thread; yield the batches it puts (as
        one-element lists), as they come; then raise its error, if it failed.  A batch
        keeps its place among the ``limit`` until the consumer asks for the next one (it
        has been passed on), so at most ``limit`` batches are ever held.
        The thread ends with ``produce`` -- bounded by the run's own ``timeout`` and
        ``peer_timeout`` -- or at its next ``put`` after :meth:`close`."""
        thread = threading.Thread(target=self._produce, args=(produce,), name="timely-transform-worker", daemon=True)
        thread.start()
        while True:
            with self._cond:
                while not self._waiting and not self._ended and thread.is_alive():
                    self._cond.wait(POLL_INTERVAL)
                taken, ended = ([self._waiting[0]] if self._waiting else []), self._ended
            if taken:
                yield taken
                with self._cond:            # passed on to Spark: no longer held here
                    self._waiting.popleft()
                    self._held -= self.count(taken[0])
                    self._cond.notify_all()
            elif ended or not thread.is_alive():
                break
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """(Consumer.) Stop taking output: the producer's next ``put`` raises."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _produce(self, produce: Callable[[], object]) -> None:
        error: Optional[BaseException] = None
        try:
            produce()
        except BaseException as exc:  # noqa: BLE001 -- raised again in the consumer's thread
            error = exc
        with self._cond:
            self._ended, self._error = True, error
            self._cond.notify_all()
