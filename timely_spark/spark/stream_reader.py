"""``spark.readStream.format("timely")``: complete times of a live event log, each once.

Offsets are the log's frontier (:mod:`.offsets`).  ``latestOffset`` scans the log (a
:class:`~timely_spark.capture.log_index.LogIndex` kept for the query's life, so each
file is summarized once) and returns the frontier its files prove; a micro-batch from
offset ``S`` to ``E`` holds exactly the data rows at the times complete at ``E`` and not
at ``S``.  Every complete time is delivered once, never before it is complete (its rows
are all in the files the frontier was computed from), and a query restarted from its
checkpoint replans the same batches from the same offsets.  ``Trigger.AvailableNow``
reads up to the frontier when the query started.

Freshness: a time is in a micro-batch one trigger after its writer flushed the file
that completes it (``ParquetEventWriter(flush_seconds=...)``, 1 s by default).
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from ..capture.log_index import LogIndex, LogSnapshot
from ..capture.parquet import EventLogError
from ..progress import timestamp
from . import offsets
from .log_scan import arrow_schema, partitions, read_partition

__all__ = ["TimelyStreamReader"]


class TimelyStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of the ``"timely"`` data source (see the module's docstring)."""

    def __init__(self, path: str, schema: Any) -> None:
        from pyspark.sql.pandas.types import to_arrow_type

        if "time" not in schema.fieldNames():
            raise EventLogError(f"{path}: a stream over an event log needs a time column, got the schema {schema}")
        self.path = path
        self.schema = schema
        self.desc = timestamp.describe_arrow(to_arrow_type(schema["time"].dataType))
        self._index: Optional[LogIndex] = None     # made on first use, never pickled
        self._target: Optional[dict] = None        # Trigger.AvailableNow's last offset

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_index"] = None                     # executors read files, they do not scan the log
        return state

    def _snapshot(self) -> LogSnapshot:
        if self._index is None:
            self._index = LogIndex(self.path, self.desc)
        return self._index.snapshot()

    def _latest(self, previous: dict, snap: Optional[LogSnapshot] = None) -> dict:
        snap = snap if snap is not None else self._snapshot()
        return offsets.offset(previous, snap.desc, snap.frontier, snap.streams)

    def initialOffset(self) -> dict:
        """The log's start: nothing is complete, every complete time is still to come."""
        return offsets.initial(self.desc)

    def latestOffset(self, start: Optional[dict] = None, limit: Any = None) -> dict:
        """The log's frontier now (or, under ``Trigger.AvailableNow``, when the query
        started); ``start`` itself when no time became complete since."""
        start = start if start is not None else self.initialOffset()
        latest = self._target if self._target is not None else self._latest(start)
        offsets.check_follows(self.path, start, latest)
        return start if latest["frontier"] == start["frontier"] else latest

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the last offset of an ``availableNow`` query: the frontier at its start."""
        self._target = self._latest({})

    def partitions(self, start: dict, end: dict) -> list:
        """The rows at times complete at ``end`` and not at ``start``, in input partitions
        of whole files."""
        snap = self._snapshot()
        offsets.check_follows(self.path, end, self._latest(end, snap))
        return partitions(snap.scans(since=offsets.frontier(start), upto=offsets.frontier(end)))

    def read(self, partition: Any) -> Iterator[Any]:
        """The partition's rows, as Arrow record batches (on an executor)."""
        return read_partition(partition, arrow_schema(self.schema))

    def commit(self, end: dict) -> None:
        """Nothing to release: the log's files belong to its writers."""
