"""Reading planned event-log rows on Spark's executors, as whole Arrow batches.

The driver plans :class:`~timely_spark.capture.log_index.Scan`\\ s (a file and the times
to keep); :func:`partitions` packs them into Spark input partitions of about
:data:`ROWS_PER_PARTITION` rows (whole files, in order), and :func:`read_partition`
reads one on an executor: per file one Parquet read (of a regular file only, opened
without blocking), one vectorized filter (data rows
at the planned times), and Arrow record batches in the data source's schema -- no
Python call per row.
"""

from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql.datasource import InputPartition

from ..capture.arrow_times import mask_at
from ..capture.log_index import Scan
from ..capture.parquet import RESERVED, EventLogError
from ..capture.part_file import DATA, open_part, read_columns

__all__ = ["ROWS_PER_PARTITION", "FILES_PER_PARTITION", "BATCH_ROWS", "ScanPartition", "partitions", "read_partition",
           "arrow_schema"]

#: Rows per Spark input partition of an event-log read (whole files are never split).
ROWS_PER_PARTITION = 500_000

#: Part files per Spark input partition at most: a log of many small files is read by
#: several tasks at once.
FILES_PER_PARTITION = 1_000

#: Rows per Arrow record batch handed to Spark: small enough that the JVM converts one
#: batch while Python reads the next.
BATCH_ROWS = 65_536


class ScanPartition(InputPartition):
    """One Spark input partition: consecutive scans of part files."""

    def __init__(self, scans: list) -> None:
        self.scans = scans


def partitions(scans: list[Scan], rows_per_partition: int = ROWS_PER_PARTITION,
               files_per_partition: int = FILES_PER_PARTITION) -> list[ScanPartition]:
    """``scans`` packed, in order, into partitions of about ``rows_per_partition`` rows
    and at most ``files_per_partition`` files.

    >>> [len(p.scans) for p in partitions([Scan("a", 0, None, 3), Scan("b", 0, None, 3), Scan("c", 1, None, 5)], 6)]
    [2, 1]
    >>> [len(p.scans) for p in partitions([Scan(str(i), 0, None, 1) for i in range(5)], 100, 2)]
    [2, 2, 1]
    """
    out: list[ScanPartition] = []
    group: list[Scan] = []
    rows = 0
    for scan in scans:
        if group and (rows + scan.rows > rows_per_partition or len(group) >= files_per_partition):
            out.append(ScanPartition(group))
            group, rows = [], 0
        group.append(scan)
        rows += scan.rows
    if group:
        out.append(ScanPartition(group))
    return out


def arrow_schema(schema: Any) -> Any:
    """The Arrow schema PySpark expects from a Python data source of Spark schema ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _family(type_: Any) -> str:
    import pyarrow as pa

    for name, test in (("text", pa.types.is_string), ("text", pa.types.is_large_string), ("bytes", pa.types.is_binary),
                       ("bytes", pa.types.is_large_binary), ("boolean", pa.types.is_boolean),
                       ("integer", pa.types.is_integer), ("floating", pa.types.is_floating)):
        if test(type_):
            return name
    return str(type_)


def _times(times: Any) -> str:
    """``time 3`` or ``times 3..5``: the epochs a file's rows are at, for an error."""
    import pyarrow.compute as pc

    low, high = pc.min(times).as_py(), pc.max(times).as_py()
    return f"time {low!r}" if low == high else f"times {low!r}..{high!r}"


def _check_columns(path: str, data: Any, records: list, held: list) -> None:
    """EventLogError unless a part file's data rows ``data`` have every record column the
    read's schema names: the missing ones, the file's own, the times and what to do (a
    log's columns changed, or the stream was given a schema this log does not have);
    ``held`` is the file's record columns."""
    missing = [n for n in records if n not in data.column_names]
    if missing:
        raise EventLogError(f"{path}: no column {', '.join(map(repr, missing))} in its rows at {_times(data['time'])} "
                            f"(they have {', '.join(map(repr, held)) or 'no columns'}), but the read's schema names "
                            f"{'it' if len(missing) == 1 else 'them'}: the log's columns changed, or the read was "
                            "given a schema this log does not have; give it the log's own columns")


def _check_kinds(path: str, columns: list, target: Any) -> None:
    """EventLogError unless each column of a file keeps its kind of value in the schema
    ``target`` (a stream's given schema may widen ``int`` to ``long``, never turn text into
    numbers, numbers into text, or integers into floats); it names the column, the file
    and the times of its rows."""
    for column, field in zip(columns, target):
        have = _family(column.type)
        if have != _family(field.type) and have in ("text", "bytes", "boolean", "integer", "floating"):
            raise EventLogError(f"{path}: column {field.name!r} holds {column.type}, but the read's schema says "
                                f"{field.type} (its rows at {_times(columns[0])}): an event log's values are read as "
                                "they are (give the schema the log's own types)")


def read_partition(partition: ScanPartition, target: Any) -> Iterator[Any]:
    """The rows of ``partition`` as record batches of the Arrow schema ``target``
    (``time``, ``worker``, the records' columns); EventLogError naming a file that
    cannot be read."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    records = [f.name for f in target if f.name not in ("time", "worker")]
    pending: list = []                   # small files' rows, handed to Spark together
    rows = 0
    for scan in partition.scans:
        with open_part(scan.path) as part:
            held = [n for n in part.schema_arrow.names if n not in RESERVED]
            present = [n for n in records if n in part.schema_arrow.names]
            table = read_columns(scan.path, part, ["kind", "time", *present])
        keep = pc.equal(table["kind"], DATA)
        if scan.times is not None:
            keep = pc.and_(keep, mask_at(table["time"], pa.array(scan.times, table.schema.field("time").type)))
        data = table.filter(keep)
        if not data.num_rows:
            continue
        _check_columns(scan.path, data, records, held)
        columns = [data["time"], pa.array(np.full(data.num_rows, scan.worker, np.int64))]
        columns += [data[name] for name in records if name not in RESERVED or name == "diff"]   # a changelog's
        _check_kinds(scan.path, columns, target)
        try:
            pending.append(pa.Table.from_arrays(columns, names=target.names).cast(target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise EventLogError(f"{scan.path}: its values do not fit the read schema ({exc}); an event log's "
                                "values are read as they are (give the schema the log's own types)") from exc
        rows += data.num_rows
        if rows >= BATCH_ROWS:
            yield from _batches(pending)
            pending, rows = [], 0
    yield from _batches(pending)


def _batches(tables: list) -> Iterator[Any]:
    """The rows of ``tables`` as record batches of about :data:`BATCH_ROWS` rows (many
    small files' rows in one batch: Spark pays per batch)."""
    import pyarrow as pa

    if len(tables) > 1:
        tables = [pa.concat_tables(tables).combine_chunks()]
    for table in tables:
        yield from table.to_batches(BATCH_ROWS)
