"""A worker's output, handed to its Spark task while the worker runs.

``mapInArrow`` takes a task's output from an iterator.  The timely worker runs in a
thread of its own and hands each batch of output records to :meth:`OutputStream.put`;
the task's thread iterates :meth:`OutputStream.run` and passes them on to Spark as
they come.  At most ``limit`` batches wait between the two: a worker whose output is
not taken waits in ``put`` (the mesh's own threads keep answering its peers), so a
worker's memory holds those batches, not its whole output.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Iterator, Optional

from ..errors import WorkerFailure
from ..runtime import OUTPUT_BATCHES_IN_FLIGHT, POLL_INTERVAL

__all__ = ["OutputStream"]


class OutputStream:
    """Batches of records from a producer thread to the thread that iterates :meth:`run`.

    >>> out = OutputStream(limit=2)
    >>> def produce():
    ...     for i in range(5):
    ...         out.put([i, i])
    >>> [x for batches in out.run(produce) for batch in batches for x in batch]
    [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    """

    def __init__(self, limit: int = OUTPUT_BATCHES_IN_FLIGHT) -> None:
        self._limit = limit
        self._cond = threading.Condition()
        self._waiting: deque = deque()
        self._ended = False
        self._closed = False
        self._error: Optional[BaseException] = None

    def put(self, records: list) -> None:
        """(Producer.) Hand ``records`` on (an empty list is dropped); waits while ``limit``
        batches are not yet taken.  Raises WorkerFailure once the consumer has stopped
        (:meth:`close`)."""
        if not records:
            return
        with self._cond:
            while len(self._waiting) >= self._limit and not self._closed:
                self._cond.wait()
            if self._closed:
                raise WorkerFailure("the Spark task stopped taking this worker's output (it failed or was stopped)")
            self._waiting.append(records)
            self._cond.notify_all()

    def run(self, produce: Callable[[], object]) -> Iterator[list]:
        """(Consumer.) Run ``produce()`` in a daemon thread; yield lists of the batches it
        puts, as they come (all that wait at once); then raise its error, if it failed.
        The thread ends with ``produce`` -- bounded by the run's own ``timeout`` and
        ``peer_timeout`` -- or at its next ``put`` after :meth:`close`."""
        thread = threading.Thread(target=self._produce, args=(produce,), name="timely-transform-worker", daemon=True)
        thread.start()
        while True:
            with self._cond:
                while not self._waiting and not self._ended and thread.is_alive():
                    self._cond.wait(POLL_INTERVAL)
                taken, ended = list(self._waiting), self._ended
                self._waiting.clear()
                self._cond.notify_all()
            if taken:
                yield taken
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
