"""join: two streams of record batches joined on key columns, per time.

Both inputs are exchanged by the key columns, so matching rows meet on one worker.
A time's batches are kept on both sides until the time is complete at both inputs,
then joined with Arrow's hash join (``pyarrow.Table.join``).  A time with rows on one
side only still produces what the join type says (for example the unmatched rows of
a left join).  ``running=True`` joins two changelogs instead (:class:`RunningJoin`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Union, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import BuildError
from ...progress import sort_key
from ..lattice import coordinates, times_of_array
from ..trace import Trace
from .arrangement import load_arrangements, save_arrangements
from .batches import tables_of
from .changelog import DIFF, consolidate_table, with_int64_diffs
from .exchange_by import ExchangeBy, check_columns, key_list
from .key_hash import hash_columns
from .op_state import KEY_HASH, StateHooks
from .per_time import per_time
from .reduction import Reduction, emitted

if TYPE_CHECKING:
    from ..stream import Stream
    from .arranged import Arranged

__all__ = ["join", "RunningJoin", "JOIN_TYPES", "SCHEMA_COPIES"]

#: How many copies of a per-time join's remembered schemas a snapshot keeps (keyed 0..N-1,
#: so a restore into up to that many workers gives each one).
SCHEMA_COPIES = 256

#: The join types, as pyarrow names them.
JOIN_TYPES = {"inner": "inner", "left": "left outer", "left outer": "left outer", "semi": "left semi",
              "left semi": "left semi", "anti": "left anti", "left anti": "left anti",
              "right": "right outer", "right outer": "right outer", "outer": "full outer",
              "full outer": "full outer"}


def join(stream: Union["Stream", "Arranged"], other: Union["Stream", "Arranged"], keys: Union[str, Sequence[str]],
         join_type: str = "inner", name: str = "Join", running: bool = False) -> "Stream":
    """Join this stream's record batches with ``other``'s on ``keys``, per time, once
    the time is complete on both inputs.  ``join_type``: ``inner``, ``left``,
    ``semi``, ``anti``, ``right`` or ``outer``.  Non-key columns of ``other`` that
    clash with this stream's get the suffix ``_right``.

    ``running=True`` joins changelogs (see :mod:`.changelog`): the output is the
    changelog of the join of the two collections, for every ``join_type``.  Matched rows:
    a change on one side meets every change the other side had, diffs multiplied (the
    ``diff`` columns of the inputs become one, last; a side without ``diff`` counts +1
    per row); at ``Product`` times (inside ``iterate``/``iterative``) the output lands
    at the lattice join of the two changes' times.  Unmatched rows of outer joins have
    the other side's columns null: such a row is withdrawn when its key's first match
    appears and comes back when the last one goes; ``semi`` gives the left rows whose key
    has a match, ``anti`` those without one (left columns only).  Each side's changes are
    kept by key (:mod:`..trace`): a time costs in proportion to its changes and the rows
    of the keys they touch.  Null keys match nothing.  An unmatched row carries only its
    side's columns until the other side has had a row (its columns are unknown before).
    A withdrawal of a row a side does not hold is not detected by the matched part
    (``ts.collection`` of the output raises ChangelogError).  Snapshots keep the
    changes of both sides (and the unmatched rows emitted), keyed by the key columns'
    hash (they re-shard); a per-time join keeps the schemas it saw last on each side.
    Either side may be an arrangement (``stream.arrange(keys)``, by the same ``keys``;
    running joins only): the join then reads its index instead of keeping a copy of
    that side (:mod:`.arranged`).

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
    exchange: Any = ExchangeBy(keys, name)
    arranged = next((side for side in (stream, other) if hasattr(side, "shared_join")), None)
    if arranged is not None:                 # join against shared indexes (see .arranged)
        if not running:
            raise BuildError(f"operator {name!r}: an arrangement is joined with running=True (a changelog join)")
        running_join: RunningJoin
        running_join, stream, other = arranged.shared_join(stream, other, keys, how, name)
        exchange = None                      # (arranged: each row is on the worker its keys hash to)
    elif running:
        running_join = RunningJoin(keys, how, name, stream.scope.minimum)
    if running:
        logic: Any = running_join
        kept = StateHooks(lambda t: save_arrangements(running_join.stores, KEY_HASH),
                         lambda table: load_arrangements(running_join.stores, table, KEY_HASH), keyed=True)
        advance = running_join.advance
    else:
        per_time_join = _PerTimeJoin(keys, how, name, stream.scope.index)
        logic = per_time_join
        kept = StateHooks(lambda t: per_time_join.save(), per_time_join.restore, keyed=True)
        advance = None
    return per_time(cast("Stream", stream), logic, others=[cast("Stream", other)], exchange=exchange, name=name,
                    state=kept, advance=advance)


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


class RunningJoin:
    """The changelog of a join of two changelogs' collections (see :func:`join`): each
    side's changes in a :class:`~..trace.Trace` by key.  The matched rows are bilinear: a
    change at ``t`` meets every change the other side's trace holds, at the lattice join
    of the two times, diffs multiplied.  The unmatched rows (outer joins) and semi/anti
    joins are functions of each key's two collections, kept by a :class:`.reduction.Reduction`."""

    def __init__(self, keys: list[str], how: str, name: str, like: Any) -> None:
        self.keys, self.how, self.name, self.like = keys, how, name, like
        self.sides = [Trace(keys, like, name), Trace(keys, like, name)]
        self.matched = how in ("inner", "left outer", "right outer", "full outer")
        self.parts: dict[str, Reduction] = {}
        if how in ("left outer", "full outer", "left anti"):
            self.parts["left"] = Reduction(keys, like, name, self._unmatched_left)
        if how in ("right outer", "full outer"):
            self.parts["right"] = Reduction(keys, like, name, self._unmatched_right)
        if how == "left semi":
            self.parts["semi"] = Reduction(keys, like, name, self._matched_left)

    @property
    def stores(self) -> list:
        """The arrangements a snapshot keeps: both sides, then the kept unmatched rows."""
        return [t.store for t in self.sides] + [r.output.store for r in self.parts.values()]

    def advance(self, frontier: list) -> None:
        """Compact every trace to ``frontier``."""
        for trace in self.sides:
            trace.advance(frontier)
        for part in self.parts.values():
            part.advance(frontier)

    def _changes(self, batches: list, t: Any, side: int) -> Optional[pa.Table]:
        if not batches:
            return None
        for batch in batches:
            check_columns(batch, self.keys, self.name)
        delta = consolidate_table(tables_of(with_int64_diffs(batches, self.name), self.name, t), self.name)
        return self.sides[side].conform(delta, t) if delta.num_rows else None

    def insert(self, t: Any, dl: Optional[pa.Table], dr: Optional[pa.Table]) -> None:
        """Add the changes at ``t`` to the two sides' traces."""
        for trace, delta in zip(self.sides, (dl, dr)):
            if delta is not None:
                trace.insert(delta, t)

    # ---- matched rows: bilinear, at the lattice join of the two times -------------------
    def _pairs(self, left: pa.Table, right: pa.Table, t: Any) -> Optional[tuple[pa.Table, np.ndarray]]:
        times = self.sides[0].time_columns

        def renamed(table: pa.Table, mark: str) -> pa.Table:
            return table.rename_columns([f"__d{mark}" if n == DIFF else (f"__{mark}{n}" if n in times else n)
                                         for n in table.column_names])
        joined = renamed(left, "l").join(renamed(right, "r"), self.keys, join_type="inner",
                                         right_suffix="_right", use_threads=False)
        if not joined.num_rows:
            return None
        at = np.tile(np.array(coordinates(t), np.int64), (joined.num_rows, 1))
        for mark in ("l", "r"):
            if f"__{mark}{times[0]}" in joined.column_names:
                at = np.maximum(at, np.column_stack([joined[f"__{mark}{c}"].to_numpy() for c in times]))
        product = pc.multiply(joined["__dl"], joined["__dr"])
        extra = [n for n in joined.column_names if n.startswith(("__l__t", "__r__t")) or n in ("__dl", "__dr")]
        return joined.drop_columns(extra).append_column(DIFF, product), at

    def _matched(self, t: Any, dl: Optional[pa.Table], dr: Optional[pa.Table]) -> dict:
        left, right = self.sides
        found: list = []
        if dl is not None:
            other = right.gather(dl)                          # every change the right side had
            for piece in (other, dr):
                if piece is not None and piece.num_rows:
                    found.append(self._pairs(dl, piece, t))
        if dr is not None:
            mine = left.gather(dr)
            if mine is not None and mine.num_rows:
                found.append(self._pairs(mine, dr, t))
        found = [f for f in found if f is not None]
        if not found:
            return {}
        rows = pa.concat_tables([f[0] for f in found], promote_options="default")
        at = np.concatenate([f[1] for f in found])
        here = np.array(coordinates(t), np.int64)
        if (at == here).all():
            return {t: [rows]}
        distinct, which = np.unique(at, axis=0, return_inverse=True)
        which = which.reshape(-1)
        return {when: [rows.filter(pa.array(which == i))] for i, when in enumerate(times_of_array(distinct, self.like))}

    # ---- unmatched rows, semi and anti: functions of each key's two collections ----------
    def _has_match(self, rows: pa.Table, others: pa.Table) -> np.ndarray:
        """Per row of ``rows``: whether its key (no null in it) has rows in ``others``."""
        if not rows.num_rows:
            return np.zeros(0, bool)
        present = others.filter(pc.greater(others[DIFF], 0)) if others.num_rows else others
        if not present.num_rows:
            return np.zeros(rows.num_rows, bool)
        match = np.isin(hash_columns(rows, self.keys), hash_columns(present, self.keys), kind="sort")   # uint64 hashes
        for k in self.keys:
            match &= rows[k].is_valid().to_numpy(zero_copy_only=False)
        return match

    def _unmatched_left(self, folded: list, t: Any) -> pa.Table:
        left, right = folded
        return left.filter(pa.array(~self._has_match(left, right)))

    def _unmatched_right(self, folded: list, t: Any) -> pa.Table:
        left, right = folded
        return right.filter(pa.array(~self._has_match(right, left)))

    def _matched_left(self, folded: list, t: Any) -> pa.Table:
        left, right = folded
        return left.filter(pa.array(self._has_match(left, right)))

    def _padded(self, rows: pa.Table, side: str) -> pa.Table:
        """Unmatched rows of one side in the columns of the matched rows, the other side's
        columns null (only this side's columns while the other has shown none)."""
        schemas = [self.sides[0].schema, self.sides[1].schema]
        if schemas[0] is None or schemas[1] is None:
            return rows
        times = set(self.sides[0].time_columns) | {DIFF}
        lefts = [f for f in schemas[0] if f.name not in times]
        rights = [f for f in schemas[1] if f.name not in times and f.name not in self.keys]
        left_names = {f.name for f in lefts}
        n = rows.num_rows
        columns: dict[str, Any] = {}
        for f in lefts:
            present = side == "left" or f.name in self.keys
            columns[f.name] = rows[f.name].cast(f.type) if present else pa.nulls(n, f.type)
        for f in rights:
            name = f"{f.name}_right" if f.name in left_names else f.name
            columns[name] = rows[f.name] if side == "right" else pa.nulls(n, f.type)
        columns[DIFF] = rows[DIFF]
        return pa.table(columns)

    def __call__(self, t: Any, lefts: list, rights: list) -> Any:
        dl, dr = self._changes(lefts, t, 0), self._changes(rights, t, 1)
        later = self._matched(t, dl, dr) if self.matched else {}
        self.insert(t, dl, dr)
        changed = np.concatenate([np.zeros(0, np.uint64)] +
                                 [hash_columns(d, self.keys) for d in (dl, dr) if d is not None])
        wake: set = set()
        for kind, part in self.parts.items():
            out, times = part.step(t, self.sides, changed, check=False)
            wake.update(times)
            if out is not None:
                if kind in ("left", "right") and self.how != "left anti":
                    out = self._padded(out, kind)
                later.setdefault(t, []).append(out)
        out = None
        if t in later:
            out = consolidate_table(pa.concat_tables(later.pop(t), promote_options="default"), self.name)
        return emitted(t, out, sorted(wake, key=sort_key),
                       {when: consolidate_table(pa.concat_tables(ts, promote_options="default"), self.name)
                        .combine_chunks().to_batches() for when, ts in later.items()})
