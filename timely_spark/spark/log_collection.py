"""Reading an event log as the collection its changes denote (``option("changelog", "consolidate")``).

The planned rows (complete times, see :mod:`.log_scan`) are split into ``buckets`` by
the hash of each row's record columns (:func:`timely_spark.dataflow.destinations`), so
equal rows -- wherever and whenever they were written -- land in one Spark input
partition.  Each partition reads every planned file, keeps its bucket's rows and folds
them with :func:`timely_spark.collection` (sum of diffs per row, each row repeated by its
count; a count below 0 raises ChangelogError naming the row).  Memory is split across
partitions; reading is not (every partition reads the planned files).
"""

from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql.datasource import InputPartition

from ..dataflow import destinations
from ..dataflow.collection import collection
from .log_scan import BATCH_ROWS, ScanPartition, read_partition

__all__ = ["BucketPartition", "bucket_partitions", "read_collection", "hashable"]


class BucketPartition(InputPartition):
    """The rows of ``scans`` whose record columns hash to ``bucket`` of ``buckets``, read in
    the Arrow schema ``source`` (``time``, ``worker``, the record columns and, for a
    changelog, ``diff``)."""

    def __init__(self, scans: list, bucket: int, buckets: int, source: Any) -> None:
        self.scans, self.bucket, self.buckets, self.source = scans, bucket, buckets, source


def hashable(schema: Any) -> bool:
    """Whether every column of the Arrow ``schema`` can be hashed into buckets (integers,
    floats, strings, binaries, booleans, dates and timestamps).

    >>> import pyarrow as pa
    >>> hashable(pa.schema([("k", pa.int64()), ("name", pa.string())]))
    True
    >>> hashable(pa.schema([("k", pa.int64()), ("tags", pa.list_(pa.string()))]))
    False
    """
    import pyarrow as pa

    kinds = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_large_string,
             pa.types.is_binary, pa.types.is_large_binary, pa.types.is_boolean, pa.types.is_temporal)
    return all(any(k(f.type) for k in kinds) for f in schema)


def bucket_partitions(scans: list, buckets: int, source: Any) -> list[BucketPartition]:
    """``buckets`` partitions (at least one) over the same ``scans``."""
    buckets = max(1, buckets)
    return [BucketPartition(scans, b, buckets, source) for b in range(buckets)]


def read_collection(partition: BucketPartition, target: Any) -> Iterator[Any]:
    """The collection of ``partition``'s bucket as record batches of the Arrow schema
    ``target`` (the record columns)."""
    import pyarrow as pa

    source = partition.source
    if not partition.scans:
        return
    columns = list(target.names)
    kept = []
    for batch in read_partition(ScanPartition(partition.scans), source):
        if partition.buckets > 1:
            mine = destinations(batch, columns, partition.buckets) == partition.bucket
            batch = batch.filter(pa.array(mine))
        if batch.num_rows:
            kept.append(batch)
    if not kept:
        return
    folded = collection(pa.Table.from_batches(kept, source), time="time", ignore=("worker",))
    yield from folded.select(columns).cast(target).to_batches(BATCH_ROWS)
