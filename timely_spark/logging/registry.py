"""The per-worker logging registry: handlers for named event streams.

``worker.log_register()`` returns this worker's :class:`Registry`;
``registry.insert("timely", handler)`` makes the engine record its events, which
are handed to ``handler(events)`` in batches (after each worker step, and when the
worker finishes).  With no handler the engine records nothing.

>>> import timely_spark as ts
>>> def work(worker):
...     seen = []
...     worker.log_register().insert("timely", seen.extend)
...     worker.dataflow(lambda s: s.to_stream([1, 2]).map(lambda x: x))
...     return seen
>>> kinds = {e["event"] for e in ts.execute(work)[0]}
>>> sorted(kinds & {"operator", "channel", "schedule", "messages", "progress", "shutdown"})
['channel', 'messages', 'operator', 'progress', 'schedule', 'shutdown']
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from .events import event

__all__ = ["Registry", "Logger"]


class Logger:
    """Buffers events for one stream and hands them to its handler in batches."""

    def __init__(self, handler: Callable[[list], Any], worker: int, start: float) -> None:
        self.handler = handler
        self.worker = worker
        self.start = start
        self.buffer: list[dict] = []

    def log(self, kind: str, **fields: Any) -> None:
        """Record one event of ``kind`` with the given fields (see :mod:`.events`)."""
        self.buffer.append(event(time.monotonic() - self.start, self.worker, kind, **fields))

    def flush(self) -> None:
        """Hand the buffered events to the handler as one batch."""
        if self.buffer:
            batch, self.buffer = self.buffer, []
            self.handler(batch)


class Registry:
    """A worker's logging registry: named event streams and their handlers."""
    def __init__(self, worker: Any) -> None:
        self._worker = worker
        self.loggers: dict[str, Logger] = {}

    def insert(self, name: str, handler: Callable[[list], Any]) -> None:
        """Send stream ``name``'s events to ``handler`` (a function of a list of events).
        The engine's own stream is ``"timely"``."""
        self.loggers[name] = Logger(handler, self._worker.index, self._worker.timer)
        if name == "timely":
            self._worker.set_logger(self.loggers[name])

    def remove(self, name: str) -> None:
        """Stop stream ``name`` (flushing what it buffered)."""
        logger = self.loggers.pop(name, None)
        if logger is not None:
            logger.flush()
            if name == "timely":
                self._worker.set_logger(None)

    def get(self, name: str) -> Optional[Logger]:
        """The logger of stream ``name``, or None."""
        return self.loggers.get(name)

    def flush(self) -> None:
        """Hand every stream's buffered events to its handler."""
        for logger in self.loggers.values():
            logger.flush()

    def close(self) -> None:
        """Flush, then close the handlers that can be closed (the worker has finished)."""
        self.flush()
        for logger in self.loggers.values():
            close = getattr(logger.handler, "close", None)
            if close is not None:
                close()
