"""group_by(keys).aggregate(...): keyed aggregation of record batches, per time or running.

The input is exchanged by the key columns (:mod:`.exchange_by`), so each key is
aggregated on one worker.  The batches of a time are kept until the time is
complete, then aggregated with Arrow's hash aggregation
(``pyarrow.Table.group_by``): one output batch per worker and time, with the key
columns and one column per aggregate named ``<column>_<function>`` as pyarrow
names them.

``running=True`` keeps totals across times instead: for each completed time it
emits the updated totals of the keys that occurred at that time (the streaming word
count).  Running totals need functions that combine (sum, count, count_all, min,
max, mean).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import BuildError
from ...progress import sort_key
from ..operator import OperatorBuilder
from .agg_spec import aggregation_spec as _spec
from .agg_spec import output_name as _output_name
from .exchange_by import ExchangeBy, check_batch, check_columns, key_list

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["GroupBy", "group_by", "tables_of"]

# how each running aggregate is kept: partial aggregates, and how partials combine
_PARTIALS = {"sum": [("sum", "sum")], "count": [("count", "sum")], "count_all": [("count_all", "sum")],
             "min": [("min", "min")], "max": [("max", "max")], "mean": [("sum", "sum"), ("count", "sum")]}


def tables_of(batches: list, operator: str, time: Any) -> pa.Table:
    """One table of a time's batches; a ValueError naming the operator and the time if
    their schemas differ.

    >>> import pyarrow as pa
    >>> tables_of([pa.record_batch({"x": [1]}), pa.record_batch({"x": [2]})], "Aggregate", 0).num_rows
    2
    """
    try:
        return pa.Table.from_batches(batches)
    except pa.ArrowInvalid as exc:
        schemas = sorted({str(b.schema).replace("\n", ", ") for b in batches})
        raise ValueError(f"operator {operator!r}: batches at time {time!r} have different schemas "
                         f"({' | '.join(schemas)}); this operator needs one schema") from exc


class GroupBy:
    """A stream grouped by key columns (``stream.group_by(keys)``): call :meth:`aggregate`.

    >>> import pyarrow as pa, timely_spark as ts
    >>> ts.example(lambda s: s.to_stream(pa.table({"k": [1]})).group_by(["k"]).keys)
    ['k']
    """

    def __init__(self, stream: "Stream", keys: list[str]) -> None:
        self.stream = stream
        self.keys = keys

    def aggregate(self, aggregations: Sequence[Any], running: bool = False,
                  name: Optional[str] = None) -> "Stream":
        """Aggregate ``[(column, function), ...]`` (pyarrow's functions: sum, count, min,
        max, mean, count_distinct, list, ...; ``([], "count_all")`` counts rows) per key,
        per time once it is complete -- or, with ``running=True``, totals across times,
        emitted for the keys seen at each completed time.

        >>> import pyarrow as pa, timely_spark as ts
        >>> table = pa.table({"key": ["a", "b", "a"], "value": [1, 2, 3]})
        >>> _ = ts.example(lambda s: s.to_stream(table).group_by("key").aggregate([("value", "sum")])
        ...                .inspect(lambda rb: print(sorted(zip(rb["key"].to_pylist(), rb["value_sum"].to_pylist())))))
        [('a', 4), ('b', 2)]
        """
        operator = name or ("RunningAggregate" if running else "Aggregate")
        spec = _spec(aggregations, operator)
        if running:
            bad = [fn for _, fn, *_ in spec if fn not in _PARTIALS]
            if bad:
                raise BuildError(f"operator {operator!r}: running totals support {', '.join(_PARTIALS)}, "
                                 f"not {', '.join(bad)}")
        keys = self.keys
        columns = [c for c, *_ in spec if isinstance(c, str)]
        b = OperatorBuilder(self.stream.scope, operator)
        inp = b.new_input(self.stream, ExchangeBy(keys, operator))
        out, result = b.new_output()
        b.initial_capability().drop()
        held: dict[Any, list] = {}          # time -> [capability, batches]
        finish = _Running(keys, spec, operator) if running else _PerTime(keys, spec, operator)

        def logic() -> None:
            for cap, data in inp:
                entry = held.get(cap.time)
                if entry is None:
                    entry = held[cap.time] = [cap.retain(), []]
                for record in data:
                    batch = check_batch(record, operator)
                    check_columns(batch, keys + columns, operator)
                    entry[1].append(batch)
            frontier = inp.frontier
            for t in sorted((t for t in held if not frontier.less_equal(t)), key=sort_key):
                cap, batches = held.pop(t)
                table = finish(tables_of(batches, operator, t), t)
                if table.num_rows:
                    out.session(cap).give_batch(table.combine_chunks().to_batches())
                cap.drop()

        b.build(logic, notify=True)
        return result


class _PerTime:
    def __init__(self, keys: list[str], spec: list, operator: str) -> None:
        self.keys, self.spec, self.operator = keys, spec, operator

    def __call__(self, table: pa.Table, time: Any) -> pa.Table:
        grouped = table.group_by(self.keys, use_threads=False).aggregate(self.spec)
        names = [_output_name(c, fn) for c, fn, *_ in self.spec]
        return grouped.select(self.keys + names)


class _Running:
    """Totals across times, as a table of partial aggregates per key."""

    def __init__(self, keys: list[str], spec: list, operator: str) -> None:
        self.keys, self.spec, self.operator = keys, spec, operator
        self.partial_spec: list[tuple[Any, str]] = []        # what one time contributes (each partial once)
        self.merge_spec: list[tuple[str, str]] = []          # how contributions combine
        self.partial_names: list[str] = []
        self.uses: list[list[str]] = []                      # per aggregate: the partials it is made of
        for column, fn, *_ in spec:
            names = []
            for part, merge in _PARTIALS[fn]:
                if (column, part) not in self.partial_spec:   # sum and mean of one column share its sum
                    self.partial_spec.append((column, part))
                    self.partial_names.append(f"__p{len(self.partial_names)}")
                    self.merge_spec.append((self.partial_names[-1], merge))
                names.append(self.partial_names[self.partial_spec.index((column, part))])
            self.uses.append(names)
        self.state: Optional[pa.Table] = None

    def __call__(self, table: pa.Table, time: Any) -> pa.Table:
        keys = self.keys
        partial = table.group_by(keys, use_threads=False).aggregate(self.partial_spec)
        partial = partial.select(keys + [_output_name(c, fn) for c, fn in self.partial_spec])
        partial = partial.rename_columns(keys + self.partial_names)
        partial = partial.append_column("__changed", pa.array(np.ones(partial.num_rows, np.int8)))
        if self.state is not None:
            old = self.state.append_column("__changed", pa.array(np.zeros(self.state.num_rows, np.int8)))
            both = pa.concat_tables([old, partial.cast(old.schema)])
        else:
            both = partial
        merged = both.group_by(keys, use_threads=False).aggregate(self.merge_spec + [("__changed", "max")])
        merged = merged.select(keys + [f"{n}_{m}" for n, m in self.merge_spec] + ["__changed_max"])
        merged = merged.rename_columns(keys + self.partial_names + ["__changed"])
        changed = merged.filter(pc.equal(merged["__changed"], 1))
        self.state = merged.drop_columns(["__changed"])
        return self._finals(changed)

    def _finals(self, changed: pa.Table) -> pa.Table:
        columns: dict[str, Any] = {k: changed[k] for k in self.keys}
        for (column, fn, *_), names in zip(self.spec, self.uses):
            parts = [changed[n] for n in names]
            if fn == "mean":
                columns[_output_name(column, fn)] = pc.divide(pc.cast(parts[0], pa.float64()), parts[1])
            else:
                columns[_output_name(column, fn)] = parts[0]
        return pa.table(columns)


def group_by(stream: "Stream", keys: Union[str, Sequence[str]]) -> GroupBy:
    """Group a stream of record batches by key columns; then :meth:`GroupBy.aggregate`.

    >>> import pyarrow as pa, timely_spark as ts
    >>> def work(w):
    ...     out = []
    ...     def build(s):
    ...         inp, words = s.new_input()
    ...         counts = words.group_by("word").aggregate([([], "count_all")], running=True)
    ...         counts.inspect_time(lambda t, rb: out.append((t, sorted(rb.to_pylist(), key=str))))
    ...         return inp
    ...     inp = w.dataflow(build)
    ...     inp.send_batch(pa.table({"word": ["a", "b", "a"]})); inp.advance_to(1)
    ...     inp.send_batch(pa.table({"word": ["b"]})); inp.close()
    ...     while w.step(): pass
    ...     return out
    >>> for t, rows in ts.execute(work)[0]: print(t, rows)
    0 [{'word': 'a', 'count_all': 2}, {'word': 'b', 'count_all': 1}]
    1 [{'word': 'b', 'count_all': 2}]
    """
    return GroupBy(stream, key_list(keys, "GroupBy"))
