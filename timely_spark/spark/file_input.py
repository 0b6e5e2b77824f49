"""A plain Parquet scan read by ``ts.spark.transform``'s barrier tasks themselves.

``transform`` runs one worker per partition, and a barrier stage cannot coalesce, so
an input whose partitions are not the workers' is repartitioned: a full shuffle of
every row (written compressed, read back, turned into Arrow) before the first worker
starts -- for a graph's edges most of what Spark adds to the run.  When the input's
physical plan is nothing but a scan of local Parquet files (``file:`` paths), with
columns selected, renamed or widened (integers to wider integers or to double, float
to double), :func:`file_input` plans the read instead: the driver reads the files'
footers and gives each worker an equal range of the rows, and each barrier task reads
its rows with pyarrow (:meth:`FileInput.read`) -- the barrier stage runs over
``workers`` empty partitions, and no shuffle runs before it.

Anything else goes through Spark as before: a filter, a join, partition columns in
the directory layout, buckets, a cached or non-file DataFrame, other formats or
paths (``hdfs:``, ``s3a:``...), non-numeric columns, narrowing casts, a file whose
columns are not exactly (name and type) the scan's, more than
:data:`~timely_spark.spark.file_input.DIRECT_READ_MAX_FILES` files, Spark's
``ignoreCorruptFiles``/``ignoreMissingFiles`` or Parquet field ids turned on.  Over
Spark Connect there is no plan to look at, and Spark reads as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional
from urllib.parse import unquote, urlparse

from ..errors import SparkJobError
from .connect import is_connect

__all__ = ["FileInput", "file_input", "plain_parquet_scan", "row_ranges"]

#: Files a plain Parquet scan may have for ``ts.spark.transform`` to read them in its
#: barrier tasks (their footers are read on the driver to split the row groups among
#: the workers); a scan of more files goes through Spark and a shuffle as before.
DIRECT_READ_MAX_FILES = 1000

#: Spark's numeric types as Arrow's (what ``mapInArrow`` hands a task).
_ARROW = {"tinyint": "int8", "smallint": "int16", "int": "int32", "bigint": "int64", "float": "float32",
          "double": "float64"}
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_OFF = ("spark.sql.files.ignoreCorruptFiles", "spark.sql.files.ignoreMissingFiles",
        "spark.sql.parquet.fieldId.read.enabled")


def _widens(source: str, target: str) -> bool:
    """Whether Spark's cast from ``source`` to ``target`` (simple type names) keeps
    every value (or, to double, rounds it the way Arrow's cast does)."""
    if source == target:
        return True
    if source in _INTEGRAL and target in _INTEGRAL:
        return _INTEGRAL.index(source) < _INTEGRAL.index(target)
    return target == "double" and (source in _INTEGRAL or source == "float")


def _seq(scala: Any) -> list:
    return [scala.apply(i) for i in range(scala.size())]


def _name(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def plain_parquet_scan(df: Any) -> Optional[tuple[Any, list]]:
    """``(scan, columns)`` if ``df``'s physical plan is a plain Parquet scan (see the
    module's text) with only a projection of its columns above it, ``columns`` being
    ``(output name, file column, Spark type of the file column, Spark type out)``; else
    None.  Looks at the plan only (no file, no Spark job); None over Spark Connect."""
    if is_connect(df.sparkSession):
        return None
    try:
        plan = df._jdf.queryExecution().sparkPlan()
        project = None
        if _name(plan) == "ProjectExec":
            project, plan = plan, plan.child()
        if _name(plan) != "FileSourceScanExec":
            return None
        relation = plan.relation()
        if (_name(relation.fileFormat()) != "ParquetFileFormat" or relation.partitionSchema().size()
                or relation.bucketSpec().isDefined() or plan.bucketedScan() or plan.partitionFilters().size()
                or plan.dataFilters().size()):
            return None
        options, entries = {}, relation.options().iterator()
        while entries.hasNext():
            entry = entries.next()
            options[str(entry.productElement(0)).lower()] = str(entry.productElement(1)).lower()
        conf = df.sparkSession.conf
        for key in _OFF:
            if "true" in (str(conf.get(key, "false")).lower(), options.get(key.rsplit(".", 1)[1].lower())):
                return None
        scanned = {int(a.exprId().id()): (str(a.name()), str(a.dataType().simpleString())) for a in _seq(plan.output())}
        if project is None:
            return plan, [(name, name, typ, typ) for name, typ in scanned.values()]
        columns = []
        for expr in _seq(project.projectList()):
            name = None
            if _name(expr) == "Alias":
                name, expr = str(expr.name()), expr.child()
            target = str(expr.dataType().simpleString())
            while _name(expr) == "Cast":
                inner = expr.child()
                if not _widens(str(inner.dataType().simpleString()), str(expr.dataType().simpleString())):
                    return None
                expr = inner
            if _name(expr) != "AttributeReference" or int(expr.exprId().id()) not in scanned:
                return None
            column, typ = scanned[int(expr.exprId().id())]
            columns.append((name or column, column, typ, target))
        return plan, columns
    except Exception:       # Spark Connect, another Spark's plan classes: Spark reads, as before
        return None


def row_ranges(rows: int, workers: int) -> list[tuple[int, int]]:
    """Worker ``i``'s rows ``[lo, hi)`` of ``rows`` in all: equal shares, in order.

    >>> row_ranges(10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    return [(rows * i // workers, rows * (i + 1) // workers) for i in range(workers)]


@dataclass
class FileInput:
    """Where each worker's rows are: ``pieces[worker]`` lists ``(path, row group,
    first row, end row)`` (rows within the group), ``groups[path]`` the row count of
    each of the file's row groups (checked when read: a file changed since is an
    error, not other rows), and ``columns`` the ``(output name, file column, Arrow type
    out)`` of the record batches :meth:`read` yields."""

    pieces: list
    groups: dict
    columns: list

    def read(self, worker: int) -> Iterator[Any]:
        """Worker ``worker``'s rows as record batches, one per row group it reads."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        wanted = sorted({column for _, column, _ in self.columns})
        names = [name for name, _, _ in self.columns]
        opened: dict = {}
        for path, group, lo, hi in self.pieces[worker]:
            if path not in opened:
                opened.clear()
                opened[path] = f = pq.ParquetFile(path)
                now = [f.metadata.row_group(g).num_rows for g in range(f.metadata.num_row_groups)]
                if now != self.groups[path]:
                    raise SparkJobError(f"ts.spark.transform: {path} changed after the DataFrame was planned "
                                        f"(row groups of {self.groups[path][:5]} rows, now {now[:5]}): make the "
                                        f"DataFrame again to read the file as it is now")
            table = opened[path].read_row_group(group, columns=wanted, use_threads=False)
            if lo or hi < table.num_rows:
                table = table.slice(lo, hi - lo)
            arrays = [table.column(column).cast(typ, safe=False) for _, column, typ in self.columns]
            yield from pa.table(arrays, names=names).combine_chunks().to_batches()


def file_input(df: Any, workers: int) -> Optional[FileInput]:
    """How ``workers`` barrier tasks read ``df`` themselves, or None if Spark must read
    it (see the module's text).  Reads the files' footers (not their data); runs no
    Spark job.  ``ts.spark.transform`` uses it instead of repartitioning its input, and
    a caller that would repartition a DataFrame for ``transform`` can ask it first:

        edges = spark.read.parquet("edges.parquet")
        if ts.spark.file_input(edges, 2) is None:       # Spark must read it: shuffle by key
            edges = edges.repartition(2, "src")
    """
    found = plain_parquet_scan(df)
    if found is None:
        return None
    scan, columns = found
    if not columns or any(typ not in _ARROW or target not in _ARROW for _, _, typ, target in columns):
        return None
    try:
        files = [str(f) for f in scan.relation().location().inputFiles()]
    except Exception:
        return None
    if len(files) > DIRECT_READ_MAX_FILES or any(urlparse(f).scheme != "file" for f in files):
        return None
    paths = [unquote(urlparse(f).path) for f in files]
    groups = _footers(paths, {column: typ for _, column, typ, _ in columns})
    if groups is None:
        return None
    units = [(path, g, n) for path in paths for g, n in enumerate(groups[path]) if n]
    total = sum(n for _, _, n in units)
    pieces: list = []
    for lo, hi in row_ranges(total, workers):
        mine, start = [], 0
        for path, g, n in units:
            a, b = max(lo, start), min(hi, start + n)
            if a < b:
                mine.append((path, g, a - start, b - start))
            start += n
        pieces.append(mine)
    import pyarrow as pa

    out = [(name, column, pa.type_for_alias(_ARROW[target])) for name, column, _, target in columns]
    return FileInput(pieces, groups, out)


def _footers(paths: list, types: dict) -> Optional[dict]:
    """Each file's row counts per row group, or None if a file cannot be read or does
    not hold each column of ``types`` (file column -> Spark type) under exactly that
    name, as exactly that type."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    groups = {}
    for path in paths:
        try:
            meta = pq.read_metadata(path)
            schema = meta.schema.to_arrow_schema()
        except (OSError, pa.ArrowException):
            return None
        for column, typ in types.items():
            if schema.get_field_index(column) < 0 or schema.field(column).type != pa.type_for_alias(_ARROW[typ]):
                return None
        groups[path] = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    return groups
