"""What ``ts.spark.transform`` gives back, as record batches of exactly its schema.

One rule at every depth -- a column, a list's elements, a struct's fields, a map's
keys and values: fields match by name (any order, none missing, none extra), and a
value is cast only to a type of its own kind where no value changes (int32 to
int64, 4.0 to 4, one time zone to another; never text to or from a number, a bool
to a number, a number to a time, nor a time without a zone to an instant or back).
A part that does not fit is a :class:`SchemaMismatch` naming its path: ``a``,
``a.b`` (a struct's field), ``a[]`` (a list's elements), ``a{key}`` / ``a{value}``
(a map's).

* :func:`arrow_schema` -- a transform's schema as Spark's StructType and as Arrow
  (``timestamp`` columns in the session's time zone);
* :func:`conform` -- a record batch fitted to the schema;
* :func:`rows_batch` -- Python rows (dicts, Rows, tuples) as such a batch.
"""

from __future__ import annotations

import reprlib
from typing import Any

from ..errors import SchemaMismatch

__all__ = ["SchemaMismatch", "arrow_schema", "conform", "rows_batch"]


class _Misfit(Exception):
    """A part of the output that does not fit (the message names its path)."""


def arrow_schema(df: Any, schema: Any) -> tuple[Any, Any]:
    """``(StructType, pyarrow.Schema)`` of ``schema`` (a StructType or a DDL string);
    Spark's ``timestamp`` is an instant, in Arrow a timestamp with the session's time
    zone, and ``timestamp_ntz`` a timestamp without one."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if not isinstance(schema, StructType):
        schema = df.sparkSession.createDataFrame([], schema).schema
    zone = df.sparkSession.conf.get("spark.sql.session.timeZone", None) or "UTC"
    return schema, to_arrow_schema(schema, timezone=zone)


def conform(rb: Any, schema: Any, worker: int) -> Any:
    """Record batch ``rb`` with exactly ``schema``: columns matched by name, cast where
    no value changes; else SchemaMismatch naming the worker and the column's path.

    >>> import pyarrow as pa
    >>> conform(pa.record_batch({"b": ["x"], "a": pa.array([7], pa.int32())}),
    ...         pa.schema([("a", pa.int64()), ("b", pa.string())]), 0).to_pylist()
    [{'a': 7, 'b': 'x'}]
    >>> try:
    ...     conform(pa.record_batch({"a": [["7"]]}), pa.schema([("a", pa.list_(pa.int64()))]), 1)
    ... except SchemaMismatch as e:
    ...     print(str(e).split(" (")[0])
    worker 1: column 'a[]' is string, which does not fit int64
    """
    import pyarrow as pa

    if rb.schema.equals(schema):
        return rb
    have, want = set(rb.schema.names), set(schema.names)
    if want - have:
        raise SchemaMismatch(f"worker {worker}: the output has no column(s) {sorted(want - have)} "
                             f"(it has {', '.join(rb.schema.names)})")
    if have - want:
        raise SchemaMismatch(f"worker {worker}: the output has column(s) {sorted(have - want)} that the schema "
                             f"({', '.join(schema.names)}) does not")
    try:
        arrays = [_fit(rb.column(field.name), field.type, field.name) for field in schema]
    except _Misfit as misfit:
        raise SchemaMismatch(f"worker {worker}: {misfit}") from misfit.__cause__
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_batch(records: list, schema: Any, worker: int) -> Any:
    """Row records (dicts, Spark Rows, tuples in the schema's column order) as a record
    batch of exactly ``schema``; every row gives every column, no more, and so does every
    struct inside (dicts, Rows or tuples); a map takes a dict or a list of pairs.

    >>> import pyarrow as pa
    >>> rows_batch([{"n": 1, "tags": {"x": 2}}, (None, None)],
    ...            pa.schema([("n", pa.int64()), ("tags", pa.map_(pa.string(), pa.int64()))]), 0).to_pylist()
    [{'n': 1, 'tags': [('x', 2)]}, {'n': None, 'tags': None}]
    """
    import pyarrow as pa

    names = schema.names
    want = set(names)
    dicts = []
    for r in records:
        if isinstance(r, dict) or hasattr(r, "asDict"):
            d = r if isinstance(r, dict) else r.asDict()
            if d.keys() != want:
                raise SchemaMismatch(f"worker {worker}: an output row {reprlib.repr(r)} lacks column(s) "
                                     f"{sorted(want - d.keys())} or has column(s) {sorted(d.keys() - want)} "
                                     f"that the schema ({', '.join(names)}) does not")
        else:
            if len(r) != len(names):
                raise SchemaMismatch(f"worker {worker}: an output row {reprlib.repr(r)} has {len(r)} value(s), "
                                     f"the schema ({', '.join(names)}) {len(names)}")
            d = dict(zip(names, r))
        dicts.append(d)
    try:
        arrays = [_from_python([d[f.name] for d in dicts], f.type, f.name) for f in schema]
    except _Misfit as misfit:
        raise SchemaMismatch(f"worker {worker}: {misfit}") from misfit.__cause__
    return conform(pa.RecordBatch.from_arrays(arrays, names=names), schema, worker)


# -- the rule: which types may become which --------------------------------------------

def _kind(t: Any) -> str:
    """The kind of a leaf type; values are cast only within their kind."""
    import pyarrow as pa

    types = pa.types
    if types.is_dictionary(t):
        return _kind(t.value_type)
    for kind, tests in (("number", (types.is_integer, types.is_floating, types.is_decimal)),
                        ("text", (types.is_string, types.is_large_string, types.is_string_view)),
                        ("binary", (types.is_binary, types.is_large_binary, types.is_fixed_size_binary,
                                    types.is_binary_view)),
                        ("bool", (types.is_boolean,)), ("date", (types.is_date,)), ("time", (types.is_time,)),
                        ("duration", (types.is_duration,)), ("interval", (types.is_interval,))):
        if any(test(t) for test in tests):
            return kind
    if types.is_timestamp(t):
        return "timestamp" if t.tz is None else "instant"
    return str(t)


def _is_list(t: Any) -> bool:
    import pyarrow as pa

    types = pa.types
    return bool(types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t)
                or types.is_list_view(t) or types.is_large_list_view(t))


def _field_difference(missing: set, extra: set) -> str:
    """What a struct lacks and has too many, in words."""
    return "; ".join(([f"no field(s) {sorted(missing)}"] if missing else [])
                     + ([f"extra field(s) {sorted(extra)}"] if extra else []))


def _why_not(have: Any, want: Any) -> str:
    kinds = {_kind(have), _kind(want)}
    if "text" in kinds:
        return "text is neither parsed into other types nor made from them"
    if kinds == {"timestamp", "instant"}:
        return ("a time without a time zone is not an instant, nor the reverse: give the values a zone "
                "(pyarrow.compute.assume_timezone, aware datetimes) for a timestamp column, or none for "
                "timestamp_ntz")
    return f"{_a(_kind(have))} does not become {_a(_kind(want))}"


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _check(have: Any, want: Any, path: str) -> None:
    """Raise _Misfit unless type ``have`` may be cast to ``want`` at every depth."""
    import pyarrow as pa

    types = pa.types
    if types.is_null(have):
        return
    if types.is_dictionary(have):
        return _check(have.value_type, want, path)
    if types.is_struct(want) and types.is_struct(have):
        got = {have.field(i).name: have.field(i).type for i in range(have.num_fields)}
        fields = [want.field(i) for i in range(want.num_fields)]
        missing, extra = {f.name for f in fields} - got.keys(), got.keys() - {f.name for f in fields}
        if missing or extra:
            raise _Misfit(f"column {path!r} is {have}, which does not fit {want} "
                          f"({_field_difference(missing, extra)})")
        for f in fields:
            _check(got[f.name], f.type, f"{path}.{f.name}")
    elif types.is_map(want) and types.is_map(have):
        _check(have.key_type, want.key_type, f"{path}{{key}}")
        _check(have.item_type, want.item_type, f"{path}{{value}}")
    elif _is_list(want) and _is_list(have):
        _check(have.value_type, want.value_type, f"{path}[]")
    elif types.is_nested(want) or types.is_nested(have):
        raise _Misfit(f"column {path!r} is {have}, which does not fit {want}")
    elif _kind(have) != _kind(want):
        raise _Misfit(f"column {path!r} is {have}, which does not fit {want} ({_why_not(have, want)})")


def _fit(column: Any, want: Any, path: str) -> Any:
    """``column`` cast to ``want``, or _Misfit naming the innermost part that does not fit."""
    import pyarrow as pa

    _check(column.type, want, path)
    if column.type.equals(want):
        return column
    try:
        return column.cast(want, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        for part, part_type, part_path in _parts(column, want, path):
            _fit(part, part_type, part_path)     # a part that does not fit names itself
        raise _Misfit(f"column {path!r} is {column.type}, which does not fit {want} ({exc})") from exc


def _parts(column: Any, want: Any, path: str) -> list:
    """The child arrays of a nested column, with the types and paths they must fit."""
    import pyarrow as pa

    types = pa.types
    if types.is_dictionary(column.type):
        return [(column.dictionary_decode(), want, path)]
    if types.is_struct(want):
        return [(column.field(f.name), f.type, f"{path}.{f.name}") for f in want]
    if types.is_map(want):
        return [(column.keys, want.key_type, f"{path}{{key}}"), (column.items, want.item_type, f"{path}{{value}}")]
    if _is_list(want):
        return [(column.flatten(), want.value_type, f"{path}[]")]
    return []


# -- Python values, guided by the schema -------------------------------------------------

def _from_python(values: list, want: Any, path: str) -> Any:
    """Python ``values`` as an Arrow array of the types they have (inferred), built
    along ``want`` where inference cannot tell (dicts as maps, structs' fields by name);
    :func:`_fit` then checks the types."""
    import pyarrow as pa

    types = pa.types
    try:
        if types.is_struct(want):
            fields = list(want)
            dicts = [None if v is None else _fields(v, fields, path) for v in values]
            children = [_from_python([None if d is None else d[f.name] for d in dicts], f.type, f"{path}.{f.name}")
                        for f in fields]
            return pa.StructArray.from_arrays(children, names=[f.name for f in fields], mask=_nulls(values))
        if types.is_map(want):
            pairs = [None if v is None else _pairs(v, path) for v in values]
            flat = [p for ps in pairs if ps is not None for p in ps]
            keys = _from_python([k for k, _ in flat], want.key_type, f"{path}{{key}}")
            items = _from_python([v for _, v in flat], want.item_type, f"{path}{{value}}")
            return pa.MapArray.from_arrays(_offsets(pairs), keys, items, mask=_nulls(values))
        if _is_list(want) and _needs_guide(want.value_type):
            lists = [None if v is None else _items(v, path) for v in values]
            child = _from_python([x for xs in lists if xs is not None for x in xs], want.value_type, f"{path}[]")
            return pa.ListArray.from_arrays(_offsets(lists), child, mask=_nulls(values))
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
        raise _Misfit(f"column {path!r} has values of mixed or unknown types ({exc})") from exc
    if types.is_timestamp(array.type):
        _same_awareness(values, path)
    return array


def _needs_guide(t: Any) -> bool:
    """Whether values of type ``t`` are built along it (not inferred): structs, maps,
    timestamps (checked for mixed time zones), and lists of those."""
    import pyarrow as pa

    if pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_timestamp(t):
        return True
    return _is_list(t) and _needs_guide(t.value_type)


def _nulls(values: list) -> Any:
    import pyarrow as pa

    return pa.array([v is None for v in values], pa.bool_())


def _offsets(lists: list) -> Any:
    import numpy as np
    import pyarrow as pa

    lengths = np.fromiter((0 if xs is None else len(xs) for xs in lists), np.int64, len(lists))
    return pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))


def _fields(value: Any, fields: list, path: str) -> dict:
    """A struct's value (a dict, a Row, or a tuple in field order) as a dict of exactly its fields."""
    names = [f.name for f in fields]
    if isinstance(value, dict) or hasattr(value, "asDict"):
        d = value if isinstance(value, dict) else value.asDict()
        if d.keys() != set(names):
            raise _Misfit(f"column {path!r} has a value {reprlib.repr(value)} that does not fit its fields "
                          f"({', '.join(names)}): {_field_difference(set(names) - d.keys(), d.keys() - set(names))}")
        return d
    if isinstance(value, (tuple, list)) and len(value) == len(names):
        return dict(zip(names, value))
    raise _Misfit(f"column {path!r} has a value {reprlib.repr(value)} that is not a struct of fields "
                  f"({', '.join(names)}): give a dict, a Row or a tuple of {len(names)}")


def _items(value: Any, path: str) -> list:
    """A list's value (a list or a tuple) as a list."""
    if not isinstance(value, (list, tuple)):
        raise _Misfit(f"column {path!r} has a value {reprlib.repr(value)} that is not a list")
    return list(value)


def _pairs(value: Any, path: str) -> list:
    """A map's value (a dict, or a list of ``(key, value)`` pairs) as a list of pairs."""
    if isinstance(value, dict):
        return list(value.items())
    try:
        pairs = [tuple(p) for p in value]
    except TypeError:
        pairs = [()]
    if any(len(p) != 2 for p in pairs):
        raise _Misfit(f"column {path!r} has a value {reprlib.repr(value)} that is not a map: give a dict "
                      f"or a list of (key, value) pairs")
    return pairs


def _same_awareness(values: list, path: str) -> None:
    """Datetimes with and without a time zone are never mixed in one column (pyarrow
    would read those without one as UTC)."""
    aware = {getattr(v, "tzinfo", None) is not None for v in values if v is not None}
    if len(aware) > 1:
        raise _Misfit(f"column {path!r} mixes datetimes with a time zone and without one")

