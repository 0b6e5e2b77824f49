"""upsert: keyed records (a change feed) in, the changelog of the latest row per key out.

The input is exchanged by the key columns (:mod:`.exchange_by`), so each key lives on
one worker.  Each worker keeps the current row of its keys as a changelog in an
:class:`.arrangement.Arrangement` keyed by the key columns (each key's diffs sum to 1
or to nothing).  Per completed time: the winning record of each key (the greatest
``sequence_by``, else the last to arrive) is found with one sort and one hash
aggregation; the keys' current rows are looked up in the arrangement (not by a scan);
the old row is withdrawn (``-1``) and the new one added (``+1``) unless they are equal,
and a delete withdraws the old row only.  This is SCD type 1 (the shape of Spark's
``create_auto_cdc_flow``), in numpy and Arrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import BuildError, ChangelogError
from .arrangement import Arrangement, load_arrangements, save_arrangements
from .changelog import DIFF, consolidate_table, require_total_order, with_diffs
from .exchange_by import ExchangeBy, check_columns, key_list
from .group_by import tables_of
from .op_state import KEY_HASH, StateHooks
from .per_time import per_time

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["upsert", "latest_per_key"]

_RANK = "__rank"


def _key_text(row: dict, keys: Sequence[str]) -> str:
    return "{" + ", ".join(f"{k!r}: {row[k]!r}" for k in keys) + "}"


def latest_per_key(table: pa.Table, keys: list[str], sequence_by: Optional[str], operator: str,
                   time: Any = None) -> pa.Table:
    """The winning record of each key in ``table``: the one with the greatest
    ``sequence_by`` value (without ``sequence_by``: the last row).  Two records of one key
    with the same sequence value, a null sequence value or a null key raise
    :class:`~timely_spark.errors.ChangelogError` naming the operator, the time and the key.

    >>> import pyarrow as pa
    >>> t = pa.table({"k": ["a", "b", "a"], "seq": [2, 1, 1], "v": [10, 20, 30]})
    >>> latest_per_key(t, ["k"], "seq", "Upsert").sort_by("k").to_pydict()
    {'k': ['a', 'b'], 'seq': [2, 1], 'v': [10, 20]}
    >>> latest_per_key(t, ["k"], None, "Upsert").sort_by("k").to_pydict()
    {'k': ['a', 'b'], 'seq': [1, 1], 'v': [30, 20]}
    >>> latest_per_key(t.set_column(1, "seq", pa.array([1, 1, 1])), ["k"], "seq", "Upsert", 4)
    Traceback (most recent call last):
    timely_spark.errors.ChangelogError: operator 'Upsert' at time 4: key {'k': 'a'} has two records with \
sequence 1; a key's updates within one time need distinct 'seq' values
    """
    where = f"operator {operator!r}" + ("" if time is None else f" at time {time!r}")
    for k in keys:
        if table.column(k).null_count:
            raise ChangelogError(f"{where}: key column {k!r} holds null(s); every record needs its key")
    n = table.num_rows
    if sequence_by is not None:
        seq = table.column(sequence_by)
        if seq.null_count:
            row = table.filter(pc.is_null(seq)).slice(0, 1).to_pylist()[0]
            raise ChangelogError(f"{where}: key {_key_text(row, keys)} has a record with a null "
                                 f"{sequence_by!r}; every record needs its sequence value")
        order = pc.sort_indices(table.append_column("__pos", pa.array(np.arange(n, dtype=np.int64))),
                                [(sequence_by, "ascending"), ("__pos", "ascending")])
        table = table.take(order)
        counted = table.group_by(keys + [sequence_by], use_threads=False).aggregate([([], "count_all")])
        twice = counted.filter(pc.greater(counted["count_all"], 1))
        if twice.num_rows:
            row = twice.slice(0, 1).to_pylist()[0]
            raise ChangelogError(f"{where}: key {_key_text(row, keys)} has two records with sequence "
                                 f"{row[sequence_by]!r}; a key's updates within one time need distinct "
                                 f"{sequence_by!r} values")
    ranked = table.select(keys).append_column(_RANK, pa.array(np.arange(n, dtype=np.int64)))
    last = ranked.group_by(keys, use_threads=False).aggregate([(_RANK, "max")])
    return table.take(last[f"{_RANK}_max"])


def upsert(stream: "Stream", keys: Union[str, Sequence[str]], sequence_by: Optional[str] = None,
           delete: Optional[str] = None, name: str = "Upsert") -> "Stream":
    """The changelog of the latest record per key of a change feed (SCD type 1: the
    meaning of Spark's ``create_auto_cdc_flow`` with ``stored_as_scd_type=1``).

    Contract: input rows are records (no ``diff`` column) with the ``keys`` columns;
    every other column is a value.  At each completed time, for every key with records
    at that time, the winning record is the one with the greatest ``sequence_by`` value
    (two records of one key at one time with equal sequence values, or a null one, raise
    :class:`~timely_spark.errors.ChangelogError` naming the key); without
    ``sequence_by``, the last record of the key to arrive (deterministic when one
    worker sends a key's records, e.g. one input).  A record at a later time always
    wins over the state (times are the order of arrival).  The winner replaces the
    key's row: the old row is withdrawn (``diff`` -1) and the new one added (+1);
    nothing if they are equal.  ``delete`` names a boolean column: a winner with
    ``True`` there withdraws the key's row (nothing if it has none); the column is
    not in the output.  Output: the input's columns (but ``delete``) and ``diff``
    last, one batch per worker and time, a changelog whose collection is one row per
    live key.  Null keys, or a nested column (list, struct, map), raise
    ChangelogError.  Times must be totally ordered.  Cost per time: in proportion to
    its records and the keys they touch (keys are looked up in an arrangement, not
    scanned).  Snapshots keep each key's row, keyed by the key
    columns' hash (they re-shard into another worker count).

    >>> import pyarrow as pa, timely_spark as ts
    >>> def work(w):
    ...     out = []
    ...     def build(s):
    ...         inp, feed = s.new_input()
    ...         view = feed.upsert("id", sequence_by="seq", delete="deleted")
    ...         view.inspect_time(lambda t, b: out.append((t, sorted(b.to_pylist(), key=str))))
    ...         return inp
    ...     inp = w.dataflow(build)
    ...     inp.send_batch(pa.table({"id": [1, 2, 1], "seq": [1, 1, 2], "name": ["a", "b", "c"],
    ...                              "deleted": [False, False, False]})); inp.advance_to(1)
    ...     inp.send_batch(pa.table({"id": [2], "seq": [3], "name": ["b"], "deleted": [True]})); inp.close()
    ...     while w.step(): pass
    ...     return out
    >>> for t, rows in ts.execute(work)[0]: print(t, rows)
    0 [{'id': 1, 'seq': 2, 'name': 'c', 'diff': 1}, {'id': 2, 'seq': 1, 'name': 'b', 'diff': 1}]
    1 [{'id': 2, 'seq': 1, 'name': 'b', 'diff': -1}]
    """
    keys = key_list(keys, name)
    for column, what in ((sequence_by, "sequence_by"), (delete, "delete")):
        if column is not None and (not isinstance(column, str) or column in keys):
            raise BuildError(f"operator {name!r}: {what} must name a column that is not a key, got {column!r}")
    require_total_order(stream.scope, name)
    state: list = []                   # the arrangement, made when the first batch shows the columns

    def compact(table: pa.Table) -> pa.Table:
        return consolidate_table(table, name)

    def logic(time: Any, batches: list) -> list:
        for batch in batches:
            check_columns(batch, keys + [c for c in (sequence_by, delete) if c is not None], name)
            if DIFF in batch.schema.names:
                raise ChangelogError(f"operator {name!r} at time {time!r}: its input is records (a change feed), "
                                     f"not a changelog: drop or rename the {DIFF!r} column")
            nested = [f.name for f in batch.schema if pa.types.is_nested(f.type)]
            if nested:
                raise ChangelogError(f"operator {name!r} at time {time!r}: column {nested[0]!r} is nested "
                                     f"({batch.schema.field(nested[0]).type}); a row is compared by its values, so "
                                     "upsert takes flat columns (e.g. serialize it with to_json first)")
        records = latest_per_key(tables_of(batches, name, time), keys, sequence_by, name, time)
        gone = np.zeros(records.num_rows, bool)
        if delete is not None:
            flags = records.column(delete)
            if not pa.types.is_boolean(flags.type):
                raise ChangelogError(f"operator {name!r} at time {time!r}: the delete column {delete!r} must be "
                                     f"boolean, not {flags.type}")
            gone = pc.fill_null(flags, False).to_numpy(zero_copy_only=False).astype(bool)
            records = records.drop_columns([delete])
        new = with_diffs(records, np.ones(records.num_rows, np.int64))
        if not state:
            state.append(Arrangement(keys, compact, name))
        new = state[0].conform(new, time)
        old = state[0].gather(new.select(keys))
        changes = new.filter(pa.array(~gone))                 # one row per key: nothing to consolidate
        if old is not None and old.num_rows:
            old = consolidate_table(old, name).join(new.select(keys), keys, join_type="left semi")
            if old.num_rows:                                   # equal old and new rows cancel
                withdrawn = with_diffs(old, np.negative(old.column(DIFF).to_numpy()))
                changes = consolidate_table(pa.concat_tables([withdrawn, changes]), name)
        state[0].insert(changes)
        return changes.combine_chunks().to_batches()

    def save(t: Any) -> pa.Table:
        return save_arrangements(state, KEY_HASH)

    def restore(table: pa.Table) -> None:
        columns = [n[2:] for n in table.column_names if n.startswith("0:")]
        if columns:
            state.append(Arrangement(keys, compact, name))
            load_arrangements(state, table, KEY_HASH)

    return per_time(stream, logic, exchange=ExchangeBy(keys, name), name=name,
                    state=StateHooks(save, restore, keyed=True))

