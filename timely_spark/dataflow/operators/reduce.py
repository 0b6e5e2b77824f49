"""reduce: a user's function of each key's rows, kept current over a changelog.

Rows are exchanged by the key columns.  Each worker keeps two traces (:mod:`..trace`):
the input collection and the output it emitted.  When a time is complete it folds the
time's changes into the input trace, gathers the current rows of every key that
changed (one table: a single call of the user's function for all of them, vectorized),
and emits the difference between what the function returns for those keys and what
the output trace holds for them -- so the output is the changelog of ``fn`` applied to
the collection, exact under withdrawals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union, cast

import numpy as np
import pyarrow as pa

from ...errors import BuildError, ChangelogError
from ..trace import Trace
from .arrangement import load_arrangements, save_arrangements
from .batches import tables_of
from .changelog import DIFF, consolidate_table, with_int64_diffs
from .exchange_by import ExchangeBy, check_columns
from .key_hash import hash_columns
from .op_state import KEY_HASH, StateHooks
from .per_time import per_time
from .reduction import Reduction, emitted

if TYPE_CHECKING:
    from ..stream import Stream
    from .arranged import Arranged

__all__ = ["reduce", "top_k_of"]

Reducer = Callable[[pa.Table, list], Any]
#: The output schema of a reduce: given, the input's (``None``), or a function of the input's.
Schema = Union[pa.Schema, Callable[[pa.Schema], pa.Schema], None]


def reduce(stream: Union["Stream", "Arranged"], keys: list[str], fn: Reducer, schema: Schema = None,
           name: str = "Reduce") -> "Stream":
    """The changelog of ``fn`` applied, key by key, to this changelog's collection.

    ``fn(rows, keys)`` gets one ``pyarrow.Table``: the current rows (all columns but
    ``diff``; a row held n times appears n times) of every key that changed at a
    completed time, and the list of key columns to split them by; it returns the output
    rows of those keys (a ``pyarrow.Table``, ``RecordBatch`` or pandas DataFrame), with
    the key columns, in ``schema`` (``None``: the input's columns; a function: the
    schema it gives for the input's schema).  Keys left with no
    rows are not passed; their output is withdrawn.  ``fn`` must be a function of each
    key's rows (deterministic, keys independent).

    Output: at each completed time, for the keys that changed, the rows ``fn`` no longer
    returns with ``diff`` -1 and the new ones with +1 (``diff`` last); nothing for a key
    whose output is unchanged.  Bad input raises
    :class:`~timely_spark.errors.ChangelogError` naming the operator, the time, the key
    and the row: a row withdrawn more often than added, output rows of a key ``fn`` was
    not given, output that does not fit ``schema``.  Exact at ``Product`` times too
    (inside ``iterate``/``iterative``): a key is re-examined at the lattice joins of its
    change times (:mod:`.reduction`).  Snapshots keep both traces, keyed by the key
    columns' hash (they re-shard into another worker count).  ``stream`` may be an
    arrangement by ``keys`` (``stream.arrange(keys)``): the reduction then reads its
    shared index instead of keeping its own copy of the input (:mod:`.arranged`).

    >>> import pyarrow as pa, pyarrow.compute as pc, timely_spark as ts
    >>> def widest(rows, keys):                    # per key: the row with the largest value
    ...     return rows.group_by(keys).aggregate([("v", "max")]).rename_columns(keys + ["v"])
    >>> def work(w):
    ...     out = []
    ...     def build(s):
    ...         inp, log = s.new_input()
    ...         log.group_by("k").reduce(widest, pa.schema([("k", pa.string()), ("v", pa.int64())])) \\
    ...            .inspect_time(lambda t, b: out.append((t, b.to_pylist())))
    ...         return inp
    ...     inp = w.dataflow(build)
    ...     inp.send_batch(pa.table({"k": ["a", "a"], "v": [1, 5]})); inp.advance_to(1)
    ...     inp.send_batch(pa.table({"k": ["a"], "v": [5], "diff": [-1]})); inp.close()
    ...     while w.step(): pass
    ...     return out
    >>> for t, rows in ts.execute(work)[0]: print(t, sorted(rows, key=lambda r: r["diff"]))
    0 [{'k': 'a', 'v': 5, 'diff': 1}]
    1 [{'k': 'a', 'v': 5, 'diff': -1}, {'k': 'a', 'v': 1, 'diff': 1}]
    """
    if isinstance(schema, pa.Schema):
        missing = [k for k in keys if k not in schema.names]
        if missing or DIFF in schema.names:
            raise BuildError(f"operator {name!r}: the output schema must have the key columns {keys} "
                             f"(missing {missing}) and no {DIFF!r} column; it is {schema}")
    arranged = stream.shared_by(keys, name) if hasattr(stream, "shared_by") else None   # (see .arranged)
    state = _Reduce(keys, fn, schema, name, stream.scope.minimum, arranged)
    stores = state.stores
    kept = StateHooks(lambda t: save_arrangements(stores, KEY_HASH),
                      lambda table: load_arrangements(stores, table, KEY_HASH), keyed=True)
    if arranged is not None:                 # read the shared index: already by key, nothing to insert
        return per_time(arranged.stream, state, name=name, state=kept, advance=state.advance)
    return per_time(cast("Stream", stream), state, exchange=ExchangeBy(keys, name), name=name, state=kept,
                    advance=state.advance)


class _Reduce:
    """The state and the per-time step of :func:`reduce`."""

    def __init__(self, keys: list[str], fn: Reducer, schema: Schema, name: str, like: Any,
                 arranged: Optional["Arranged"] = None) -> None:
        self.keys, self.fn, self.schema, self.name = keys, fn, schema, name
        self.arranged = arranged                 # the shared index read, if any (else an own trace)
        self.reader = arranged.reader(self) if arranged is not None else -1
        self.input = arranged.trace if arranged is not None else Trace(keys, like, name)
        self.reduction = Reduction(keys, like, name, self._apply)

    @property
    def stores(self) -> list:
        """The arrangements a snapshot keeps: the input's unless shared, and the output."""
        own = [] if self.arranged is not None else [self.input.store]
        return own + [self.reduction.output.store]

    def __call__(self, time: Any, batches: list) -> Any:
        for batch in batches:
            check_columns(batch, self.keys, self.name)
        delta = None
        if batches:
            delta = consolidate_table(tables_of(with_int64_diffs(batches, self.name), self.name, time), self.name)
            if self.arranged is None:
                self.input.insert(delta, time)
        out, wake = self.reduction.step(time, [self.input], delta)
        return emitted(time, out, wake)

    def _apply(self, folded: list, time: Any) -> Optional[pa.Table]:
        rows = self.input.positive(folded[0])
        return self.call(rows, time) if rows.num_rows else None

    def advance(self, frontier: list) -> None:
        """Compact both traces to ``frontier`` (a shared input: tell its arrangement)."""
        if self.arranged is not None:
            self.arranged.advance(self.reader, frontier)
        else:
            self.input.advance(frontier)
        self.reduction.advance(frontier)

    def call(self, rows: pa.Table, time: Any) -> pa.Table:
        """``fn``'s output for ``rows``, checked: in the schema, only keys it was given."""
        produced = self.fn(rows, list(self.keys))
        schema = self.schema if isinstance(self.schema, pa.Schema) else \
            rows.schema if self.schema is None else self.schema(rows.schema)
        if isinstance(produced, pa.RecordBatch):
            produced = pa.Table.from_batches([produced])
        elif not isinstance(produced, pa.Table):
            try:
                produced = pa.Table.from_pandas(produced, schema=schema, preserve_index=False)
            except Exception as exc:                 # noqa: BLE001 -- any frame that does not convert
                raise ChangelogError(f"operator {self.name!r} at time {time!r}: the reduce function returned "
                                     f"{type(produced).__name__}, not a table in the schema {schema}: {exc}") \
                    from None
        if not produced.schema.equals(schema):
            produced = self._conform(produced, schema, time)
        given = np.unique(hash_columns(rows, self.keys))
        made = hash_columns(produced, self.keys) if produced.num_rows else np.zeros(0, np.uint64)
        stray = ~np.isin(made, given, kind="sort")     # (uint64 hashes: numpy 2.0's table kind overflows)
        if stray.any():
            row = produced.slice(int(np.argmax(stray)), 1).to_pylist()[0]
            key = {k: row[k] for k in self.keys}
            raise ChangelogError(f"operator {self.name!r} at time {time!r}: the reduce function returned a row for "
                                 f"key {key}, which it was not given (it gets the keys that changed): row {row}")
        return produced

    def _conform(self, produced: pa.Table, schema: pa.Schema, time: Any) -> pa.Table:
        if sorted(produced.column_names) == sorted(schema.names):
            try:
                return produced.select(schema.names).cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
        row = produced.slice(0, 1).to_pylist()[0] if produced.num_rows else {}
        key = {k: row.get(k) for k in self.keys}

        def show(s: pa.Schema) -> str:
            return ", ".join(f"{f.name}: {f.type}" for f in s)
        raise ChangelogError(f"operator {self.name!r} at time {time!r}: the reduce function returned rows "
                             f"({show(produced.schema)}) that do not fit the schema ({show(schema)}); "
                             f"first: key {key}, row {row}")


def top_k_of(k: int, by: Sequence[tuple[str, str]]) -> Reducer:
    """A reduce function keeping each key's first ``k`` rows in the order ``by``
    (``[(column, "ascending" | "descending"), ...]``; ties broken by the other columns,
    so the choice is deterministic).  Vectorized: one sort, one pass of numpy.

    >>> import pyarrow as pa
    >>> rows = pa.table({"k": ["a", "b", "a", "a"], "v": [3, 1, 2, 9]})
    >>> top_k_of(2, [("v", "descending")])(rows, ["k"]).to_pylist()
    [{'k': 'a', 'v': 9}, {'k': 'a', 'v': 3}, {'k': 'b', 'v': 1}]
    """
    if k < 1:
        from ...errors import ParameterError
        raise ParameterError(f"top_k needs k >= 1, not {k}", "k")

    def fn(rows: pa.Table, keys: list) -> pa.Table:
        named = {c for c, _ in by}
        order = [(c, "ascending") for c in keys] + list(by) + \
            [(c, "ascending") for c in rows.column_names if c not in named and c not in keys]
        ordered = rows.sort_by(order)
        n = ordered.num_rows
        if not n:
            return ordered
        h = hash_columns(ordered, keys)
        index = np.arange(n)
        starts = np.maximum.accumulate(np.where(np.r_[True, h[1:] != h[:-1]], index, 0))
        return ordered.filter(pa.array(index - starts < k))
    return fn
