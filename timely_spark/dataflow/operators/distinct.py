"""distinct: the set of a changelog's collection, itself as a changelog.

Each worker keeps the count of every row it has seen in an :class:`.arrangement.Arrangement`
keyed by the whole row (rows are exchanged by :class:`.consolidate.ByRow`); per
completed time it looks up only the rows that changed, and emits ``+1`` for a row
whose count went from 0 to positive and ``-1`` for one whose count returned to 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrangement import Arrangement, load_arrangements, save_arrangements
from .changelog import (
    DIFF,
    check_counts,
    consolidate_table,
    require_total_order,
    row_columns,
    with_diffs,
    with_int64_diffs,
)
from .consolidate import ByRow
from .group_by import tables_of
from .key_hash import hash_columns
from .op_state import KEY_HASH, StateHooks
from .per_time import per_time

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["distinct", "count_changes"]


def count_changes(state: Arrangement, delta: pa.Table, columns: list[str], operator: str,
                  time: Any) -> pa.Table:
    """For the consolidated changes ``delta`` (``columns`` + ``diff``): each changed row
    with its count before (``__old``) and after (``__new``), then ``delta`` added to
    ``state``.  A count that would go negative raises ChangelogError naming the row.

    >>> state = Arrangement(["x"], lambda t: t)
    >>> delta = pa.table({"x": ["a"], "diff": [2]})
    >>> count_changes(state, delta, ["x"], "Distinct", 0).to_pydict()
    {'x': ['a'], '__old': [0], '__new': [2]}
    >>> count_changes(state, delta, ["x"], "Distinct", 1).to_pydict()
    {'x': ['a'], '__old': [2], '__new': [4]}
    """
    old = state.gather(delta, hash_columns(delta, columns))
    zeros = pa.array(np.zeros(delta.num_rows, np.int64))
    parts = [delta.append_column("__old", zeros)]
    if old is not None and old.num_rows:
        parts.append(old.append_column("__old", old[DIFF]))
    both = pa.concat_tables(parts).group_by(columns, use_threads=False).aggregate(
        [(DIFF, "sum"), ("__old", "sum")])
    counts = both.select(columns).append_column("__old", both["__old_sum"]).append_column(
        "__new", both[f"{DIFF}_sum"])
    check_counts(counts.select(columns + ["__new"]), operator, time, "__new")
    state.insert(delta)
    return counts


def distinct(stream: "Stream", name: str = "Distinct") -> "Stream":
    """The changelog of the set of rows in this changelog's collection: ``+1`` when a
    row's count goes from 0 to positive, ``-1`` when it returns to 0, nothing otherwise.

    Contract: rows are all columns but ``diff`` (a batch without ``diff`` counts +1
    per row); output at each completed time, one batch per worker, with ``diff``
    last.  Cost per time: in proportion to the rows that changed (their counts are
    found in an arrangement, not by a scan).  A withdrawal that drives a row's count
    below 0 raises :class:`~timely_spark.errors.ChangelogError` naming the operator,
    the time and the row.  Times must be totally ordered (not inside ``iterative``).
    Snapshots keep the counts, keyed by the row's hash (they re-shard).

    >>> import pyarrow as pa, timely_spark as ts
    >>> def work(w):
    ...     out = []
    ...     def build(s):
    ...         inp, log = s.new_input()
    ...         log.distinct().inspect_time(lambda t, b: out.append((t, b.to_pylist())))
    ...         return inp
    ...     inp = w.dataflow(build)
    ...     inp.send_batch(pa.table({"x": ["a", "a"], "diff": [1, 1]})); inp.advance_to(1)
    ...     inp.send_batch(pa.table({"x": ["a"], "diff": [-1]})); inp.advance_to(2)
    ...     inp.send_batch(pa.table({"x": ["a"], "diff": [-1]})); inp.close()
    ...     while w.step(): pass
    ...     return out
    >>> ts.execute(work)[0]                    # time 1 changes the count, not the set
    [(0, [{'x': 'a', 'diff': 1}]), (2, [{'x': 'a', 'diff': -1}])]
    """
    require_total_order(stream.scope, name)
    state: list = []                   # the arrangement, made when the first batch shows the columns

    def compact(table: pa.Table) -> pa.Table:
        return consolidate_table(table, name)

    def logic(time: Any, batches: list) -> list:
        delta = consolidate_table(tables_of(with_int64_diffs(batches, name), name, time), name)
        if not state:
            state.append(Arrangement(row_columns(delta.schema), compact, name))
        delta = state[0].conform(delta, time)              # the columns in the state's order
        columns = state[0].keys
        counts = count_changes(state[0], delta, columns, name, time)
        old, new = counts["__old"], counts["__new"]
        up = pc.and_(pc.equal(old, 0), pc.greater(new, 0))
        down = pc.and_(pc.greater(old, 0), pc.equal(new, 0))
        changed = counts.filter(pc.or_(up, down))
        signs = np.where(pc.greater(changed["__new"], 0).to_numpy(zero_copy_only=False), 1, -1)
        return with_diffs(changed.select(columns), signs).to_batches()

    def save(t: Any) -> pa.Table:
        return save_arrangements(state, KEY_HASH)

    def restore(table: pa.Table) -> None:
        columns = [n[2:] for n in table.column_names if n.startswith("0:")]
        if columns:                    # the row columns, in the order the state kept them
            state.append(Arrangement(row_columns(pa.schema([table.schema.field(f"0:{c}").with_name(c)
                                                            for c in columns])), compact, name))
            load_arrangements(state, table, KEY_HASH)

    return per_time(stream, logic, exchange=ByRow(name), name=name, state=StateHooks(save, restore, keyed=True))
