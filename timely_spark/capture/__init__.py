"""Capture and replay: streams as event logs, and event logs as streams.

``stream.capture_into(pusher)`` / ``stream.capture()`` record data and frontier
changes; ``replay_into(sources, scope)`` rebuilds a stream from any number of them;
``extract(events)`` groups data by time.  ``EventWriter`` / ``EventReader`` carry
events over sockets and files; ``ParquetEventWriter`` / ``ParquetEventReader``
keep them as Parquet datasets that Spark reads.
"""

from ..dataflow.operators.event import Event, EventQueue, Messages, Progress, as_source
from ..dataflow.operators.replay import replay_into
from .compact import compact
from .extract import extract
from .follow import LogFollower, follow
from .log import LogCapture, capture_log
from .log_index import LogIndex, LogSnapshot
from .parquet import EventLogError, ParquetEventReader, ParquetEventWriter, worker_dirs
from .stream_io import EventReader, EventStreamError, EventWriter

__all__ = [
    # capture and replay
    "Event", "EventQueue", "Messages", "Progress", "as_source", "extract", "replay_into",
    # event streams over sockets and files
    "EventReader", "EventStreamError", "EventWriter",
    # Parquet event logs: writing, reading, following, compacting
    "EventLogError", "LogFollower", "LogIndex", "LogSnapshot", "ParquetEventReader", "ParquetEventWriter", "compact",
    "follow", "worker_dirs",
    # the engine's own events as a captured stream
    "LogCapture", "capture_log",
]
