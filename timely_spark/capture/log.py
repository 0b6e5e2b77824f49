"""Engine events as a captured stream: feed a worker's "timely" log into any event
pusher -- an EventQueue, an EventWriter, or a ParquetEventWriter that Spark reads.

Times are milliseconds since the worker started; each batch of events becomes
messages at their times followed by the progress that moves the stream past them,
and the stream ends when the worker finishes.  The records leave out the ``worker``
field -- a captured stream is one worker's (a Parquet log's ``worker=<i>`` says which)
-- and the ``frontier`` field, whose times have no one type: ``detail`` has it as text.

>>> import timely_spark as ts
>>> from timely_spark.capture import EventQueue, capture_log, extract
>>> queue = EventQueue()
>>> def work(worker):
...     capture_log(worker, queue)
...     worker.dataflow(lambda s: s.to_stream([1]).map(lambda x: x))
>>> _ = ts.execute(work)
>>> events = [e for _, batch in extract(queue) for e in batch]
>>> sorted({e["event"] for e in events})[:3]
['channel', 'messages', 'operator']
"""

from __future__ import annotations

from typing import Any

from .event import Messages, Progress

__all__ = ["capture_log", "LogCapture"]


class LogCapture:
    """A logging handler that pushes events into ``pusher`` as a captured stream."""

    def __init__(self, pusher: Any) -> None:
        self.pusher = pusher
        self.time = 0          # the stream's frontier: nothing earlier will come
        self.closed = False

    def __call__(self, events: list) -> None:
        by_ms: dict[int, list] = {}
        for e in events:
            record = {k: v for k, v in e.items() if k not in ("worker", "frontier")}
            by_ms.setdefault(max(self.time, int(e["elapsed"] * 1000)), []).append(record)
        for t in sorted(by_ms):
            self.pusher.push(Messages(t, by_ms[t]))
        last = max(by_ms) + 1
        self.pusher.push(Progress([(self.time, -1), (last, 1)]))
        self.time = last

    def close(self) -> None:
        """End the captured stream (its last progress) and close the pusher if it can be closed."""
        if not self.closed:
            self.closed = True
            self.pusher.push(Progress([(self.time, -1)]))
            if hasattr(self.pusher, "close"):
                self.pusher.close()


def capture_log(worker: Any, pusher: Any) -> LogCapture:
    """Capture ``worker``'s engine events into ``pusher`` until the worker finishes."""
    handler = LogCapture(pusher)
    worker.log_register().insert("timely", handler)
    return handler
