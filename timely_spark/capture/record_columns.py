"""A writer's records as the typed columns of its event log's files -- strictly.

The first records fix a log's layout (dicts of scalars, tuples of scalars, scalars,
Arrow record batches, or pickled) and its first file fixes each column's type.  The log
is the source of truth for replay and for Spark, so every later record must keep its
value as it is: a value of another type than its column's (``"007"`` in a column of
ints, ``True`` among ints, ``2`` among floats), a record of another shape (a tuple in a
log of dicts, a missing or extra field, a tuple of another length) or a record batch
with other column types is an :class:`~timely_spark.errors.EventLogError` naming the
column, the time and the value -- never a converted value, never a dropped field.
``None`` fits every column.

Checks are per distinct Python type of a column (``set(map(type, values))``) and per
distinct record length, not per value; only the error path looks for the offending value.

>>> columns = RecordColumns("log/worker=0", "dict")
>>> [name for name, _ in columns.build([{"n": 1}, {"n": None}], [0, 0])]
['n']
>>> columns.build([{"n": "007"}], [1])
Traceback (most recent call last):
...
timely_spark.errors.EventLogError: log/worker=0: column 'n' at time 1: '007' is a str, but the column holds int ...
"""

from __future__ import annotations

import numbers
import pickle
from typing import Any, Optional

import numpy as np

from ..errors import EventLogError

__all__ = ["RecordColumns", "layout_of", "pickle_refused"]

_SCALARS = (bool, int, float, str, bytes, type(None))
_KINDS = (("bool", bool), ("bool", np.bool_), ("int", int), ("float", float), ("str", str), ("bytes", bytes),
          ("int", numbers.Integral), ("float", numbers.Real))
_SCALAR_KINDS = {"bool", "int", "float", "str", "bytes"}
_SHAPES = {"dict": "dicts of scalars", "tuple": "tuples of scalars", "value": "scalars",
           "arrow": "pyarrow record batches"}


def layout_of(record: Any) -> str:
    """The layout a log whose first record is ``record`` takes.

    >>> layout_of({"a": 1}), layout_of((1, "x")), layout_of(2.5), layout_of([1, 2])
    ('dict', 'tuple', 'value', 'pickle')
    """
    if type(record).__name__ == "RecordBatch" and type(record).__module__.startswith("pyarrow"):
        return "arrow"
    if isinstance(record, dict) and record and all(isinstance(k, str) for k in record) \
            and all(isinstance(v, _SCALARS) for v in record.values()):
        return "dict"
    if isinstance(record, tuple) and record and all(isinstance(v, _SCALARS) for v in record):
        return "tuple"
    if isinstance(record, _SCALARS):
        return "value"
    return "pickle"


def _kind(type_: type) -> Optional[str]:
    """The kind of value a Python type holds: None for None, a scalar kind, or the type's name."""
    if type_ is type(None):
        return None
    for name, base in _KINDS:
        if issubclass(type_, base):
            return name
    return type_.__name__


def _a(kind: Optional[str]) -> str:
    return "None" if kind is None else f"a{'n' if kind[0] in 'aeiou' else ''} {kind}"


def pickle_refused(path: Any) -> EventLogError:
    """The error a reader raises for a log of pickled records when it was not told
    ``allow_pickle=True``: unpickling runs whatever code the file asks for, and anyone who
    can write the log's directory can write such a file.

    >>> print(pickle_refused("log/worker=0/part-000000.parquet"))  # doctest: +ELLIPSIS
    log/worker=0/part-000000.parquet: the log's records are pickled Python objects, and unpickling ...
    """
    return EventLogError(f"{path}: the log's records are pickled Python objects, and unpickling a file runs "
                         f"any code its writer put in it; read it with allow_pickle=True only if no one but "
                         f"your own runs can write this log's directory (see docs/security.md), or capture "
                         f"dicts, tuples, scalars or Arrow record batches, which need no pickle")


class RecordColumns:
    """The record columns of one writer's log: its ``layout``, and the columns' names,
    kinds and Arrow types once its first file with data fixed them.  ``where`` (the
    writer's directory) starts every error message."""

    def __init__(self, where: Any, layout: str) -> None:
        self.where, self.layout = where, layout
        self.fields: Optional[list] = None           # Arrow fields, fixed by the first file with data
        self._kinds: dict[str, Optional[str]] = {}   # each column's kind of value (None: only nulls so far)

    def nulls(self, n: int) -> list[tuple[str, Any]]:
        """``n`` null values of every record column (the record columns of progress rows)."""
        import pyarrow as pa

        return [(f.name, pa.nulls(n, f.type)) for f in self.fields or []]

    def build(self, records: list, times: list) -> list[tuple[str, Any]]:
        """``records`` (at ``times``, one per record) as ``(name, Arrow array)`` columns of
        the log's types; EventLogError naming the column, time and value that does not fit."""
        import pyarrow as pa

        if self.layout == "pickle":
            cols = [("payload", pa.array([pickle.dumps(r, protocol=5) for r in records], pa.binary()))]
        elif self.layout == "arrow":
            cols = self._arrow(records, times)
        else:
            cols = [(name, self._column(name, values, times)) for name, values in self._values(records, times)]
        if self.fields is None:
            self.fields = [pa.field(name, col.type) for name, col in cols]
        return cols

    def _misfit(self, records: list, times: list, fits: Any, what: Any) -> EventLogError:
        i = next(i for i, r in enumerate(records) if not fits(r))
        return EventLogError(f"{self.where}: record {records[i]!r} at time {times[i]!r} {what(records[i])}, but this "
                             f"log's records are {_SHAPES[self.layout]} (fixed by its first record)")

    def _values(self, records: list, times: list) -> list[tuple[str, list]]:
        """The records' values, column by column, once every record has the log's shape."""
        if self.layout == "value":
            return [("value", records)]
        base = dict if self.layout == "dict" else tuple
        if not all(issubclass(t, base) for t in set(map(type, records))):
            raise self._misfit(records, times, lambda r: isinstance(r, base), lambda r: f"is {_a(type(r).__name__)}")
        names = [f.name for f in self.fields] if self.fields is not None else None
        if base is tuple:
            width = len(names) if names is not None else len(records[0])
            if set(map(len, records)) != {width}:
                raise self._misfit(records, times, lambda r: len(r) == width,
                                   lambda r: f"has {len(r)} fields where the log's tuples have {width}")
            return list(zip(names or [f"f{i}" for i in range(width)], map(list, zip(*records))))
        names = names if names is not None else list(records[0])
        expected = set(names)
        try:                             # as many fields as the log's, all of them there: the same fields
            if set(map(len, records)) != {len(names)}:
                raise KeyError(names)
            return [(k, [r[k] for r in records]) for k in names]
        except KeyError:
            raise self._misfit(records, times, lambda r: set(r) == expected,
                               lambda r: f"has the fields {list(r)} where the log's records have {names}") from None

    def _column(self, name: str, values: list, times: list) -> Any:
        """One column's values as an Arrow array of its kind and type."""
        import pyarrow as pa

        kinds = {_kind(t) for t in set(map(type, values))} - {None}
        known = self._kinds.get(name)
        want = known or next((_kind(type(v)) for v in values if v is not None), None)
        if kinds - _SCALAR_KINDS or len(kinds) > 1 or (known and kinds and kinds != {known}):
            i = next(i for i, v in enumerate(values) if v is not None and _kind(type(v)) != want
                     or _kind(type(v)) not in _SCALAR_KINDS | {None})
            kind = _kind(type(values[i]))
            held = "scalar" if kind not in _SCALAR_KINDS else f"{want} values" + (
                " (fixed by the log's first file)" if known else "")
            raise EventLogError(f"{self.where}: column {name!r} at time {times[i]!r}: {values[i]!r} is {_a(kind)}, "
                                f"but the column holds {held}: an event log keeps every value as it is")
        type_ = next((f.type for f in self.fields if f.name == name), None) if self.fields is not None else None
        if type_ is not None and pa.types.is_null(type_) and kinds:
            i = next(i for i, v in enumerate(values) if v is not None)
            raise EventLogError(f"{self.where}: column {name!r} at time {times[i]!r}: {values[i]!r}, but the log's "
                                "first file held only None in this column, which fixed its type as null; give the "
                                "first records a value in every column")
        try:
            array = pa.array(values, type=type_)
        except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
            raise EventLogError(f"{self.where}: column {name!r} at times {times[0]!r}..{times[-1]!r}: "
                                f"{type(exc).__name__}: {exc}") from exc
        if known is None and want is not None:
            self._kinds[name] = want
        return array

    def _arrow(self, records: list, times: list) -> list[tuple[str, Any]]:
        """Record batches as columns, every batch of the log's column names and types."""
        import pyarrow as pa

        if not all(t is pa.RecordBatch for t in set(map(type, records))):
            raise self._misfit(records, times, lambda r: isinstance(r, pa.RecordBatch),
                               lambda r: f"is {_a(type(r).__name__)}")
        schema = pa.schema(self.fields) if self.fields is not None else records[0].schema.remove_metadata()
        known = self.fields is not None
        for batch, t in zip(records, times):
            if batch.schema.names != schema.names:
                raise EventLogError(f"{self.where}: a record batch at time {t!r} has the columns "
                                    f"{batch.schema.names}, but this log's record batches have {schema.names}")
            for field in batch.schema:
                held = schema.field(field.name).type
                if field.type != held:
                    raise EventLogError(f"{self.where}: column {field.name!r} at time {t!r} is {field.type}, but the "
                                        f"column holds {held}" + (" (fixed by the log's first file)" if known else "")
                                        + ": an event log keeps every value as it is")
        table = pa.Table.from_batches([pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in records],
                                      schema=schema)
        return [(name, table.column(name).combine_chunks()) for name in schema.names]
