"""group_by(keys).aggregate(...): keyed aggregation of record batches, per time or running.

The input is exchanged by the key columns (:mod:`.exchange_by`), so each key is
aggregated on one worker.  The batches of a time are kept until the time is
complete, then aggregated with Arrow's hash aggregation
(``pyarrow.Table.group_by``): one output batch per worker and time, with the key
columns and one column per aggregate named ``<column>_<function>`` as pyarrow
names them.

``running=True`` reads the input as a changelog (an optional ``diff`` column: see
:mod:`.changelog`) and keeps the aggregates of its collection across times: for each
completed time it emits a changelog of the aggregates -- the old row of a key whose
aggregates changed with ``diff`` -1, the new one with +1; nothing for a key whose
aggregates did not change; only -1 for a key left with no rows (the streaming word
count, exact under withdrawals).  Running aggregates are sum, count, count_all, min,
max and mean.  Snapshots keep the running state keyed by the key columns' hash (it
re-shards into another worker count); a per-time aggregation keeps nothing across
times.  The state is kept in arrangements (:mod:`.arrangement`), so a time
costs in proportion to the keys it changes: per key the row count and per summed
column the sum and non-null count of its values; for min/max, the multiset of the
key's values (a withdrawn minimum is replaced by the next one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import AggregateOverflow, BuildError
from ...progress import kind_of
from .agg_spec import aggregate_table, checked_aggregate
from .agg_spec import aggregation_spec as _spec
from .agg_spec import output_name as _output_name
from .arrangement import Arrangement, load_arrangements, save_arrangements
from .batches import tables_of
from .changelog import DIFF, check_counts, consolidate_table, diffs, with_diffs, with_int64_diffs
from .exchange_by import ExchangeBy, check_columns, key_list
from .key_hash import hash_columns
from .op_state import KEY_HASH, StateHooks
from .per_time import per_time

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["GroupBy", "group_by", "tables_of"]

# how each running aggregate is kept: partial aggregates, and how partials combine
_PARTIALS = {"sum": [("sum", "sum")], "count": [("count", "sum")], "count_all": [("count_all", "sum")],
             "min": [("min", "min")], "max": [("max", "max")], "mean": [("sum", "sum"), ("count", "sum")]}


class GroupBy:
    """A stream grouped by key columns (``stream.group_by(keys)``): call :meth:`aggregate`,
    :meth:`reduce`, :meth:`top_k`, :meth:`argmin` or :meth:`argmax`.

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
        per time once it is complete -- or, with ``running=True``, the aggregates of the
        collection the input changelog denotes, across times, emitted as a changelog.

        Per time (``running=False``): one batch per worker and time, columns the keys
        and ``<column>_<function>``; a ``diff`` column is an ordinary column here.

        Running (``running=True``; sum, count, count_all, min, max, mean): input rows
        count ``diff`` times (+1 without a ``diff`` column; -1 withdraws a row).  At
        each completed time, for every key whose aggregates changed: its old row with
        ``diff`` -1 (if it had rows) and its new row with +1 (if it has rows left), so
        the output is a changelog (``ts.collection`` of it is the current aggregates).
        Aggregates are exact under withdrawals (min/max keep each key's values; float
        sums up to rounding).  A key's row count going below 0 -- or, for min/max, a
        value withdrawn more often than added -- raises
        :class:`~timely_spark.errors.ChangelogError` naming the operator, time and key;
        options of an aggregation (its third element) are ignored.  Inside ``iterate`` or
        ``iterative`` (``Product`` times) it is a :meth:`reduce` that aggregates the rows of
        each key that changed (exact at partially ordered times; a time costs in
        proportion to the rows of the keys it changes).

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
            if not kind_of(self.stream.scope.minimum).total:
                return self._reduce_aggregate(spec, operator)
        keys = self.keys
        columns = [c for c, *_ in spec if isinstance(c, str)]
        running_state = _Running(keys, spec, operator) if running else None
        finish = running_state if running_state is not None else _PerTime(keys, spec, operator)

        def logic(time: Any, batches: list) -> list:
            for batch in batches:
                check_columns(batch, keys + columns, operator)
            if running:                                 # with and without diff make one table
                batches = with_int64_diffs(batches, operator)
            return finish(tables_of(batches, operator, time), time).combine_chunks().to_batches()

        kept = None
        if running_state is not None:
            kept = StateHooks(lambda t: running_state.save(), running_state.restore, keyed=True)
        return per_time(self.stream, logic, exchange=ExchangeBy(keys, operator), name=operator, state=kept)

    def _reduce_aggregate(self, spec: list, operator: str) -> "Stream":
        """The running aggregate as a :meth:`reduce`: each changed key's rows aggregated."""
        keys = self.keys

        def aggregate(rows: pa.Table, keys: list) -> pa.Table:
            return aggregate_table(rows, keys, spec, operator)

        def schema(rows: pa.Schema) -> pa.Schema:
            return aggregate_table(rows.empty_table(), keys, spec, operator).schema
        return self.reduce(aggregate, schema, operator)

    def reduce(self, fn: Callable[[pa.Table, list], Any],
               schema: Union[pa.Schema, Callable[[pa.Schema], pa.Schema], None] = None,
               name: str = "Reduce") -> "Stream":
        """Keep ``fn`` of each key's rows current over this changelog: see
        :func:`.reduce.reduce` (``fn(rows, keys)`` is called once per completed time with
        the rows of every key that changed, and the output is the changelog of its result).

        >>> import pyarrow as pa, timely_spark as ts
        >>> log = pa.table({"k": ["a", "a", "b"], "v": [1, 2, 3]})
        >>> size = pa.schema([("k", pa.string()), ("n", pa.int64())])
        >>> count = lambda rows, keys: rows.group_by(keys).aggregate([([], "count_all")]).rename_columns(["k", "n"])
        >>> _ = ts.example(lambda s: s.to_stream(log).group_by("k").reduce(count, size)
        ...                .inspect(lambda b: print(sorted(b.to_pylist(), key=str))))
        [{'k': 'a', 'n': 2, 'diff': 1}, {'k': 'b', 'n': 1, 'diff': 1}]
        """
        from .reduce import reduce
        return reduce(self.stream, self.keys, fn, schema, name)

    def top_k(self, k: int, by: Union[str, Sequence[Any]], name: str = "TopK") -> "Stream":
        """The changelog of each key's first ``k`` rows in the order ``by`` (a column, or
        ``[(column, "ascending" | "descending"), ...]``; ties broken by the other
        columns): a :meth:`reduce` with :func:`.reduce.top_k_of`, exact under withdrawals
        (a withdrawn row of the top k is replaced by the next one).

        >>> import pyarrow as pa, timely_spark as ts
        >>> log = pa.table({"k": ["a", "a", "a", "b"], "v": [5, 9, 7, 1]})
        >>> _ = ts.example(lambda s: s.to_stream(log).group_by("k").top_k(2, [("v", "descending")])
        ...                .inspect(lambda b: print(sorted(b.to_pylist(), key=str))))
        [{'k': 'a', 'v': 7, 'diff': 1}, {'k': 'a', 'v': 9, 'diff': 1}, {'k': 'b', 'v': 1, 'diff': 1}]
        """
        from .reduce import top_k_of
        order = [(by, "ascending")] if isinstance(by, str) else [tuple(o) for o in by]
        return self.reduce(top_k_of(k, order), None, name)

    def argmin(self, column: str, name: str = "ArgMin") -> "Stream":
        """The changelog of each key's row with the least ``column`` (ties: the least by the
        other columns) -- ``top_k(1, [(column, "ascending")])``.

        >>> import pyarrow as pa, timely_spark as ts
        >>> log = pa.table({"k": ["a", "a"], "v": [5, 2], "who": ["x", "y"]})
        >>> _ = ts.example(lambda s: s.to_stream(log).group_by("k").argmin("v")
        ...                .inspect(lambda b: print(b.to_pylist())))
        [{'k': 'a', 'v': 2, 'who': 'y', 'diff': 1}]
        """
        return self.top_k(1, [(column, "ascending")], name)

    def argmax(self, column: str, name: str = "ArgMax") -> "Stream":
        """The changelog of each key's row with the greatest ``column`` (ties: the least by
        the other columns) -- ``top_k(1, [(column, "descending")])``.

        >>> import pyarrow as pa, timely_spark as ts
        >>> log = pa.table({"k": ["a", "a"], "v": [5, 2], "who": ["x", "y"]})
        >>> _ = ts.example(lambda s: s.to_stream(log).group_by("k").argmax("v")
        ...                .inspect(lambda b: print(b.to_pylist())))
        [{'k': 'a', 'v': 5, 'who': 'x', 'diff': 1}]
        """
        return self.top_k(1, [(column, "descending")], name)


class _PerTime:
    def __init__(self, keys: list[str], spec: list, operator: str) -> None:
        self.keys, self.spec, self.operator = keys, spec, operator

    def __call__(self, table: pa.Table, time: Any) -> pa.Table:
        return aggregate_table(table, self.keys, self.spec, self.operator, time)


class _Running:
    """Running aggregates of a changelog, kept in arrangements (see :mod:`.arrangement`).

    Per key: the number of rows (sum of diffs), and per summed/counted column the sum
    of ``value * diff`` and of ``diff`` over its non-null values (NaN, +inf and -inf counted
    apart, so they can be withdrawn); per min/max column the
    multiset of its values (value, count).  A time looks up only the keys it changes."""

    def __init__(self, keys: list[str], spec: list, operator: str) -> None:
        self.keys, self.spec, self.operator = keys, spec, operator
        self.sums = sorted({c for c, fn, *_ in spec if fn in ("sum", "mean", "count")})
        self.added = {c for c, fn, *_ in spec if fn in ("sum", "mean")}     # the others are only counted
        self.extremes = sorted({c for c, fn, *_ in spec if fn in ("min", "max")})
        # per summed column: the sum of its finite values, its non-null count, and the counts of
        # its NaN, +inf and -inf values (kept apart: a float sum cannot withdraw them)
        kinds = ("s", "c", "nan", "pinf", "ninf")
        self.accumulators = ["__n"] + [f"__{kind}{i}" for i in range(len(self.sums)) for kind in kinds]
        self.time: Any = None               # the time being folded in (named by an overflow)
        self.state = Arrangement(keys, self._compact_state, operator)
        self.values = [Arrangement(keys, self._compact_values, operator) for _ in self.extremes]

    def save(self) -> pa.Table:
        """The state (accumulators and min/max values) as one keyed table (snapshots)."""
        return save_arrangements([self.state, *self.values], KEY_HASH)

    def restore(self, table: pa.Table) -> None:
        """Rebuild the state from :meth:`save`'s tables (of one or more workers)."""
        load_arrangements([self.state, *self.values], table, KEY_HASH)

    def _describe(self, accumulator: str) -> str:
        """What an accumulator (or its ``__o`` old value) counts, for an overflow's message."""
        name = accumulator.removeprefix("__o")
        if name == "__n":
            return "the rows' diffs (the count of rows)"
        for kind, what in (("s", "column {!r}"), ("c", "the diffs of the non-null values of column {!r}"),
                           ("nan", "the diffs of the NaN values of column {!r}"),
                           ("pinf", "the diffs of the +inf values of column {!r}"),
                           ("ninf", "the diffs of the -inf values of column {!r}")):
            index = name.removeprefix(f"__{kind}")
            if index.isdigit():
                return what.format(self.sums[int(index)])
        return repr(accumulator)

    def _sum(self, table: pa.Table, aggregations: list) -> pa.Table:
        return checked_aggregate(table, self.keys, aggregations, self.operator, self.time, self._describe)

    def _compact_state(self, table: pa.Table) -> pa.Table:
        summed = self._sum(table, [(a, "sum") for a in self.accumulators])
        summed = summed.select(self.keys + [f"{a}_sum" for a in self.accumulators])
        summed = summed.rename_columns(self.keys + self.accumulators)
        zero = None                         # a key's rows cancel out only if every accumulator does
        for a in self.accumulators:
            z = pc.equal(summed[a], 0)
            zero = z if zero is None else pc.and_(zero, z)
        return summed.filter(pc.invert(zero))

    def _compact_values(self, table: pa.Table) -> pa.Table:
        return consolidate_table(table, self.operator)

    def _delta(self, table: pa.Table, d: np.ndarray, time: Any) -> pa.Table:
        """The time's changes to the accumulators, one row per key."""
        columns: dict[str, Any] = {k: table[k] for k in self.keys}
        diff = pa.array(d)
        columns["__n"] = diff
        for i, c in enumerate(self.sums):
            values = table[c]
            zeros = pa.array(np.zeros(table.num_rows, np.int64))
            for kind in ("nan", "pinf", "ninf"):
                columns[f"__{kind}{i}"] = zeros
            if c not in self.added:                         # count only: any type
                columns[f"__s{i}"] = zeros
            else:
                if pa.types.is_boolean(values.type) or pa.types.is_integer(values.type):
                    values = pc.cast(values, pa.int64())
                elif pa.types.is_floating(values.type):
                    values = pc.cast(values, pa.float64())
                    special = {"nan": pc.is_nan(values), "pinf": pc.equal(values, float("inf")),
                               "ninf": pc.equal(values, float("-inf"))}
                    for kind, where in special.items():
                        columns[f"__{kind}{i}"] = pc.if_else(pc.fill_null(where, False), diff, 0)
                    values = pc.if_else(pc.is_finite(values), values, 0.0)     # nulls stay null
                elif not pa.types.is_decimal(values.type):
                    raise TypeError(f"operator {self.operator!r} at time {time!r}: a running sum or mean of "
                                    f"column {c!r} needs numbers (integers, floats, booleans, decimals), "
                                    f"not {values.type}")
                columns[f"__s{i}"] = pc.fill_null(self._times_diffs(values, diff, c), 0)
            columns[f"__c{i}"] = pc.if_else(pc.is_valid(values), diff, 0)
        return self._compact_state(pa.table(columns))

    def _times_diffs(self, values: Any, diff: pa.Array, column: str) -> Any:
        """``values * diff``; for integers an AggregateOverflow naming the row whose
        product does not fit an int64."""
        if not pa.types.is_integer(values.type):
            return pc.multiply(values, diff)
        try:
            return pc.multiply_checked(values, diff)
        except pa.ArrowInvalid:
            products = np.abs(pc.cast(values, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
                              * diff.to_numpy().astype(np.float64))
            row = int(np.nanargmax(products))
            raise AggregateOverflow(f"operator {self.operator!r} at time {self.time!r}: value {values[row].as_py()} "
                                    f"of column {column!r} times its diff {diff[row].as_py()} is beyond int64 "
                                    f"(cast the column to float64 or a decimal to sum it)") from None

    def _key_types(self, table: pa.Table) -> pa.Table:
        """``table`` with its key columns cast to the state's key types (so a key hashes as
        the state does: a timestamp[s] key is found among timestamp[ms] ones)."""
        schema = self.state.schema
        if schema is None:
            return table
        for k in self.keys:
            want, i = schema.field(k).type, table.schema.get_field_index(k)
            if table.schema.field(i).type != want:
                try:
                    table = table.set_column(i, k, table[k].cast(want))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    pass                            # the delta's conform names the schemas
        return table

    def __call__(self, table: pa.Table, time: Any) -> pa.Table:
        keys = self.keys
        if not table.num_rows:
            return table.select(keys).slice(0, 0)
        table = self._key_types(table)
        self.time = time
        d = diffs(table, self.operator)
        delta = self.state.conform(self._delta(table, d, time), time)
        if not delta.num_rows and not self.extremes:
            return delta.select(keys)
        hashes = hash_columns(table, keys)             # every changed key (a delta may sum to 0)
        olds = self.accumulators
        parts = []
        old = self.state.gather(table, hashes)
        for piece, is_old in ((delta, False), (old, True)):
            if piece is None or not piece.num_rows:
                continue
            extra = {f"__o{a}": (piece[a] if is_old else pc.multiply(piece[a], 0)) for a in olds}
            for name, column in extra.items():
                piece = piece.append_column(name, column)
            parts.append(piece)
        # min/max: per key the multiset of values, before and after this time
        for j, c in enumerate(self.extremes):
            valid = pc.is_valid(table[c])
            changes = table.select(keys).append_column("__v", table[c]).append_column(DIFF, pa.array(d))
            changes = self.values[j].conform(consolidate_table(changes.filter(valid), self.operator), time)
            before = self.values[j].gather(table, hashes)
            counted = [changes.append_column("__old", pa.array(np.zeros(changes.num_rows, np.int64)))]
            if before is not None and before.num_rows:
                counted.append(before.append_column("__old", before[DIFF]))
            both = pa.concat_tables(counted).group_by(keys + ["__v"], use_threads=False).aggregate(
                [(DIFF, "sum"), ("__old", "sum")])
            check_counts(both.select(keys + ["__v", f"{DIFF}_sum"]).rename_columns(keys + [c, "count"]),
                         self.operator, time, "count")
            now, then = pc.greater(both[f"{DIFF}_sum"], 0), pc.greater(both["__old_sum"], 0)
            parts.append(pa.table({**{k: both[k] for k in keys},
                                   f"__new{j}": pc.if_else(now, both["__v"], None),
                                   f"__old{j}": pc.if_else(then, both["__v"], None)}))
            self.values[j].insert(changes)
        if not parts:
            return pa.table({k: table[k] for k in keys}).slice(0, 0)
        both = pa.concat_tables(parts, promote_options="default")
        aggregations = [(a, "sum") for a in self.accumulators] + [(f"__o{a}", "sum") for a in olds]
        for j, c in enumerate(self.extremes):
            for fn in ("min", "max"):
                aggregations += [(f"__new{j}", fn), (f"__old{j}", fn)]
        merged = self._sum(both, aggregations)
        self.state.insert(delta)
        n_new, n_old = merged["__n_sum"], merged["__o__n_sum"]
        check_counts(merged.select(keys).append_column("count", n_new), self.operator, time, "count")
        new = self._finals(merged, "", "__new")
        old = self._finals(merged, "__o", "__old")
        same = None
        for name in new.column_names[len(keys):]:
            a, b = new[name], old[name]
            equal = pc.fill_null(pc.equal(a, b), False)
            equal = pc.or_(equal, pc.and_(pc.is_null(a), pc.is_null(b)))
            if pa.types.is_floating(a.type):                # NaN is the same aggregate as NaN
                equal = pc.or_(equal, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
            same = equal if same is None else pc.and_(same, equal)
        had, has = pc.greater(n_old, 0), pc.greater(n_new, 0)
        if same is None:
            same = pc.equal(had, has)
        keep = pc.and_(had, has)
        unchanged = pc.and_(keep, same)
        withdraw = pc.and_(had, pc.invert(unchanged))
        add = pc.and_(has, pc.invert(unchanged))
        out = []
        for rows, sign in ((old.filter(withdraw), -1), (new.filter(add), 1)):
            if rows.num_rows:
                out.append(with_diffs(rows, np.full(rows.num_rows, sign, np.int64)))
        if not out:
            return with_diffs(new.slice(0, 0), np.zeros(0, np.int64))
        return pa.concat_tables(out)

    def _finals(self, merged: pa.Table, prefix: str, extreme: str) -> pa.Table:
        """The output aggregates from the accumulators named ``prefix`` + name."""
        columns: dict[str, Any] = {k: merged[k] for k in self.keys}
        for column, fn, *_ in self.spec:
            name = _output_name(column, fn)
            if fn == "count_all":
                columns[name] = merged[f"{prefix}__n_sum"]
            elif fn in ("min", "max"):
                j = self.extremes.index(column)
                columns[name] = merged[f"{extreme}{j}_{fn}"]
            else:
                i = self.sums.index(column)
                s, c = merged[f"{prefix}__s{i}_sum"], merged[f"{prefix}__c{i}_sum"]
                if pa.types.is_floating(s.type):
                    nan, pinf, ninf = (pc.greater(merged[f"{prefix}__{k}{i}_sum"], 0) for k in ("nan", "pinf", "ninf"))
                    s = pc.if_else(pc.or_(nan, pc.and_(pinf, ninf)), float("nan"),
                                   pc.if_else(pinf, float("inf"), pc.if_else(ninf, float("-inf"), s)))
                empty = pc.equal(c, 0)
                if fn == "count":
                    columns[name] = c
                elif fn == "sum":
                    columns[name] = pc.if_else(empty, None, s)
                else:
                    columns[name] = pc.if_else(empty, None, pc.divide(pc.cast(s, pa.float64()),
                                                                      pc.if_else(empty, 1, c)))
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
    0 [{'word': 'a', 'count_all': 2, 'diff': 1}, {'word': 'b', 'count_all': 1, 'diff': 1}]
    1 [{'word': 'b', 'count_all': 1, 'diff': -1}, {'word': 'b', 'count_all': 2, 'diff': 1}]
    """
    return GroupBy(stream, key_list(keys, "GroupBy"))
