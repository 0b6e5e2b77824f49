"""join: two streams of record batches joined on key columns, per time.

Both inputs are exchanged by the key columns, so matching rows meet on one worker.
A time's batches are kept on both sides until the time is complete at both inputs,
then joined with Arrow's hash join (``pyarrow.Table.join``).  A time with rows on one
side only still produces what the join type says (for example the unmatched rows of
a left join).  ``running=True`` joins two changelogs instead (:class:`_RunningJoin`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import BuildError
from .arrangement import Arrangement, load_arrangements, save_arrangements
from .changelog import DIFF, consolidate_table, require_total_order, with_int64_diffs
from .exchange_by import ExchangeBy, check_columns, key_list
from .group_by import tables_of
from .op_state import KEY_HASH, StateHooks
from .per_time import per_time

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["join", "JOIN_TYPES", "SCHEMA_COPIES"]

#: How many copies of a per-time join's remembered schemas a snapshot keeps (keyed 0..N-1,
#: so a restore into up to that many workers gives each one).
SCHEMA_COPIES = 256

#: The join types, as pyarrow names them.
JOIN_TYPES = {"inner": "inner", "left": "left outer", "left outer": "left outer", "semi": "left semi",
              "left semi": "left semi", "anti": "left anti", "left anti": "left anti",
              "right": "right outer", "right outer": "right outer", "outer": "full outer",
              "full outer": "full outer"}


def join(stream: "Stream", other: "Stream", keys: Union[str, Sequence[str]], join_type: str = "inner",
         name: str = "Join", running: bool = False) -> "Stream":
    """Join this stream's record batches with ``other``'s on ``keys``, per time, once
    the time is complete on both inputs.  ``join_type``: ``inner``, ``left``,
    ``semi``, ``anti``, ``right`` or ``outer``.  Non-key columns of ``other`` that
    clash with this stream's get the suffix ``_right``.

    ``running=True`` joins changelogs (see :mod:`.changelog`): the output is the
    changelog of the inner join of the two collections -- at each completed time, a
    change on one side joins the other side's collection as it is at that time, and
    diffs multiply (the ``diff`` columns of the inputs become one, last; a side
    without ``diff`` counts +1 per row).  Each side's state is kept by key
    (:mod:`.arrangement`): a time costs in proportion to its changes and the rows of
    the keys they touch.  Running joins are inner only (any other ``join_type``
    raises BuildError); null keys match nothing; a withdrawal of a row a side does
    not hold is not detected here (the output then withdraws join rows it never
    added -- ``ts.collection`` of it raises ChangelogError); running needs totally
    ordered times (not inside ``iterative``: BuildError).  Snapshots keep both sides'
    collections of a running join, keyed by the key columns' hash (they re-shard); a
    per-time join keeps the schemas it saw last on each side.

    >>> import pyarrow as pa, timely_spark as ts
    >>> users = pa.table({"id": [1, 2], "name": ["ann", "bob"]})
    >>> clicks = pa.table({"id": [1, 1, 3], "page": ["home", "cart", "help"]})
    >>> _ = ts.example(lambda s: s.to_stream(clicks).join(s.to_stream(users), "id")
    ...                .inspect(lambda rb: print(sorted(rb.to_pylist(), key=str))))
    [{'id': 1, 'page': 'cart', 'name': 'ann'}, {'id': 1, 'page': 'home', 'name': 'ann'}]
    >>> def work(w):
    ...     out = []
    ...     def build(s):
    ...         (left, ls), (right, rs) = s.new_input(), s.new_input()
    ...         ls.join(rs, "id", running=True).inspect_time(lambda t, b: out.append((t, b.to_pylist())))
    ...         return left, right
    ...     left, right = w.dataflow(build)
    ...     left.send_batch(clicks); right.send_batch(users)
    ...     for i in (left, right): i.advance_to(1)
    ...     right.send_batch(pa.table({"id": [1], "name": ["ann"], "diff": [-1]}))   # ann leaves
    ...     for i in (left, right): i.close()
    ...     while w.step(): pass
    ...     return [(t, sorted(rows, key=str)) for t, rows in out]
    >>> for t, rows in ts.execute(work)[0]: print(t, rows)
    0 [{'id': 1, 'page': 'cart', 'name': 'ann', 'diff': 1}, {'id': 1, 'page': 'home', 'name': 'ann', 'diff': 1}]
    1 [{'id': 1, 'page': 'cart', 'name': 'ann', 'diff': -1}, {'id': 1, 'page': 'home', 'name': 'ann', 'diff': -1}]
    """
    keys = key_list(keys, name)
    how = JOIN_TYPES.get(join_type)
    if how is None:
        raise BuildError(f"operator {name!r}: join_type {join_type!r} is not one of {', '.join(JOIN_TYPES)}")
    if running:
        if how != "inner":
            raise BuildError(f"operator {name!r}: a running join (of changelogs) is inner only, not "
                             f"{join_type!r}: an unmatched row's output would change with the other side's "
                             "state (join the changelogs, then add the unmatched rows from an anti-join of "
                             "their collections per time if needed)")
        require_total_order(stream.scope, name)
        running_join = _RunningJoin(keys, name)
        logic: Any = running_join
        kept = StateHooks(lambda t: save_arrangements(running_join.states, KEY_HASH),
                         lambda table: load_arrangements(running_join.states, table, KEY_HASH), keyed=True)
    else:
        per_time_join = _PerTimeJoin(keys, how, name, stream.scope.index)
        logic = per_time_join
        kept = StateHooks(lambda t: per_time_join.save(), per_time_join.restore, keyed=True)
    exchange = ExchangeBy(keys, name)
    return per_time(stream, logic, others=[other], exchange=exchange, name=name, state=kept)


class _PerTimeJoin:
    """A time's batches of both sides joined with each other only."""

    def __init__(self, keys: list[str], how: str, name: str, index: int = 0) -> None:
        self.keys, self.how, self.name, self.index = keys, how, name, index
        self.schemas: list[Any] = [None, None]          # per side: the schema seen last

    def save(self) -> pa.Table:
        """The schemas seen last on each side (what a time with rows on one side only
        joins with), in ``SCHEMA_COPIES`` rows keyed 0.. so that every worker of a
        restore gets them."""
        blobs = [None if sc is None else sc.serialize().to_pybytes() for sc in self.schemas]
        n = SCHEMA_COPIES
        return pa.table({KEY_HASH: pa.array(np.arange(n, dtype=np.uint64)),
                         "worker": pa.array(np.full(n, self.index, np.int64)),
                         "left": pa.array([blobs[0]] * n, pa.binary()), "right": pa.array([blobs[1]] * n, pa.binary())})

    def restore(self, table: pa.Table) -> None:
        """Take back the schemas :meth:`save` kept: this worker's own (same worker
        index), else (a worker new in a restore into more workers) the first found per
        side -- so such a worker may add a side's columns where none were before."""
        rows = table.to_pylist()
        own = [r for r in rows if r["worker"] == self.index]
        for side, column in enumerate(("left", "right")):
            found = [r[column] for r in own] if own else [r[column] for r in rows if r[column] is not None]
            if found and found[0] is not None:
                self.schemas[side] = pa.ipc.read_schema(pa.py_buffer(found[0]))

    def _table(self, batches: list, side: int, t: Any) -> Any:
        for batch in batches:
            check_columns(batch, self.keys, self.name)
        if batches:
            self.schemas[side] = batches[-1].schema
            return tables_of(batches, self.name, t)
        return None if self.schemas[side] is None else self.schemas[side].empty_table()

    def __call__(self, t: Any, lefts: list, rights: list) -> Any:
        how = self.how
        lt, rt = self._table(lefts, 0, t), self._table(rights, 1, t)
        if lt is not None and rt is not None:
            joined = lt.join(rt, self.keys, join_type=how, right_suffix="_right", use_threads=False)
        elif lt is not None and how in ("left outer", "full outer", "left anti"):
            joined = lt          # the right side has never shown its columns
        elif rt is not None and how in ("right outer", "full outer"):
            joined = rt
        else:
            return None
        return joined.combine_chunks().to_batches()


class _RunningJoin:
    """The changelog of the inner join of two changelogs' collections: each side's
    state in an arrangement by key; a time's changes on one side join the other side's
    state as of the time before plus the other side's changes at this time."""

    def __init__(self, keys: list[str], name: str) -> None:
        self.keys, self.name = keys, name
        self.states = [Arrangement(keys, self._compact, name), Arrangement(keys, self._compact, name)]

    def _compact(self, table: pa.Table) -> pa.Table:
        return consolidate_table(table, self.name)

    def _changes(self, batches: list, t: Any, side: int) -> Optional[pa.Table]:
        if not batches:
            return None
        for batch in batches:
            check_columns(batch, self.keys, self.name)
        delta = consolidate_table(tables_of(with_int64_diffs(batches, self.name), self.name, t), self.name)
        return self.states[side].conform(delta, t) if delta.num_rows else None

    def _join(self, left: pa.Table, right: pa.Table) -> pa.Table:
        lt = left.rename_columns([("__dl" if n == DIFF else n) for n in left.column_names])
        rt = right.rename_columns([("__dr" if n == DIFF else n) for n in right.column_names])
        joined = lt.join(rt, self.keys, join_type="inner", right_suffix="_right", use_threads=False)
        product = pc.multiply(joined["__dl"], joined["__dr"])
        return joined.drop_columns(["__dl", "__dr"]).append_column(DIFF, product)

    def __call__(self, t: Any, lefts: list, rights: list) -> Any:
        dl, dr = self._changes(lefts, t, 0), self._changes(rights, t, 1)
        left, right = self.states
        parts = []
        if dl is not None:
            other = right.gather(dl)                          # the right collection before t
            pieces = [p for p in (other, dr) if p is not None and p.num_rows]
            if pieces:
                parts.append(self._join(dl, pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]))
        if dr is not None:
            mine = left.gather(dr)                           # the left collection before t
            if mine is not None and mine.num_rows:
                parts.append(self._join(mine, dr))
        if dl is not None:
            left.insert(dl)
        if dr is not None:
            right.insert(dr)
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return None
        return consolidate_table(pa.concat_tables(parts), self.name).combine_chunks().to_batches()
