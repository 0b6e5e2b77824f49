"""Trace: the keyed, time-aware state every incremental changelog operator keeps.

A trace holds the changes ``(key, value, time, diff)`` a collection went through --
differential dataflow's *trace*.  The rows live in an :class:`~.operators.arrangement.Arrangement`
(Arrow tables sorted by key hash, newest last, merged as they grow, so a lookup by key
costs in proportion to the keys asked for), each with its time as integer coordinate
columns (:mod:`.lattice`) and its ``diff``.

Compaction: :meth:`Trace.advance` tells the trace that no query will ever ask about a
time that is not at or beyond its *frontier* (an antichain).  Times the future cannot
tell apart are then equal (:func:`.lattice.advance_by`), and every merge of levels sums
the diffs of equal (row, time) pairs and drops the zeros.  With totally ordered times and
the frontier at the time being processed, the whole history of a row folds into one
entry; with ``Product(outer, round)`` times the rounds stay apart while the outer times
fold -- what an iterative computation needs to replay its rounds in the next epoch.

Contract: for every time ``s`` at or beyond the frontier, :meth:`Trace.accumulate` at
``s`` is the sum of the diffs of the changes inserted at times ``<= s``.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from .lattice import advance_by, coordinate_array, coordinates, dimensions, less_equal_mask
from .operators.arrangement import Arrangement, conform_to
from .operators.changelog import DIFF, check_counts, consolidate_table, row_columns

__all__ = ["Trace"]


class Trace:
    """The changes of a changelog, found by ``keys``, with their times; compacted at the
    frontier it is given (see the module).

    ``like`` is a time of the scope (it fixes the shape of times: an int, or a
    ``Product``); ``name`` is the operator named in errors.

    >>> import pyarrow as pa
    >>> from timely_spark.progress import Product
    >>> trace = Trace(["k"], Product(0, 0))
    >>> trace.insert(pa.table({"k": ["a"], "v": [1], "diff": [1]}), Product(0, 1))
    >>> trace.insert(pa.table({"k": ["a"], "v": [1], "diff": [-1]}), Product(1, 0))
    >>> trace.accumulate(pa.table({"k": ["a"]}), Product(0, 5)).to_pylist()
    [{'k': 'a', 'v': 1, 'diff': 1}]
    >>> trace.accumulate(pa.table({"k": ["a"]}), Product(1, 5)).num_rows      # (0,1) and (1,0) <= (1,5)
    0
    >>> trace.advance([Product(1, 0)]); trace.compact()
    >>> sorted(trace.gather(pa.table({"k": ["a"]})).to_pylist(), key=str)    # (0,1) is now (1,1)
    [{'k': 'a', 'v': 1, '__t0': 1, '__t1': 0, 'diff': -1}, {'k': 'a', 'v': 1, '__t0': 1, '__t1': 1, 'diff': 1}]
    """

    def __init__(self, keys: Sequence[str], like: Any = 0, name: str = "Trace") -> None:
        self.keys = list(keys)
        self.like = like
        self.name = name
        self.dims = dimensions(like)
        self.time_columns = [f"__t{i}" for i in range(self.dims)]
        self.frontier = np.zeros((0, self.dims), np.int64)        # none yet: every time may be asked
        self.store = Arrangement(self.keys, self._compact, name)

    # ---- shape -------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        """How many entries the trace holds (a row may have several until merged)."""
        return self.store.rows

    @property
    def schema(self) -> Optional[pa.Schema]:
        """The schema of the entries (row columns, time columns, ``diff``), once some are."""
        return self.store.schema

    def row_columns(self) -> list[str]:
        """The columns of a row (all but the time columns and ``diff``), once some are."""
        schema = self.store.schema
        return [] if schema is None else [n for n in row_columns(schema) if n not in self.time_columns]

    def times(self, entries: pa.Table) -> np.ndarray:
        """The ``(n, dims)`` coordinates of the times of ``entries`` (from :meth:`gather`)."""
        if not entries.num_rows:
            return np.zeros((0, self.dims), np.int64)
        return np.column_stack([entries[c].to_numpy() for c in self.time_columns]).astype(np.int64, copy=False)

    def with_times(self, changes: pa.Table, times: Union[Any, np.ndarray]) -> pa.Table:
        """``changes`` (row columns and ``diff``) with time columns before ``diff``: one
        time for every row, or an ``(n, dims)`` array of coordinates."""
        n = changes.num_rows
        array = times if isinstance(times, np.ndarray) else np.tile(np.array(coordinates(times), np.int64), (n, 1))
        base = changes.drop_columns([DIFF])
        for i, c in enumerate(self.time_columns):
            base = base.append_column(c, pa.array(array[:, i], pa.int64()))
        return base.append_column(DIFF, changes[DIFF])

    # ---- changes in, frontier forward --------------------------------------------------
    def conform(self, changes: pa.Table, time: Any = None) -> pa.Table:
        """``changes`` (row columns and ``diff``) in the schema of the changes already
        kept; a ChangelogError naming the operator, ``time`` and both schemas if they
        cannot be (see :func:`~.operators.arrangement.conform_to`)."""
        schema = self.store.schema
        if schema is not None:
            schema = pa.schema([f for f in schema if f.name not in self.time_columns])
        return conform_to(changes, schema, self.name, time)

    def insert(self, changes: pa.Table, times: Union[Any, np.ndarray]) -> None:
        """Add ``changes`` (row columns and an int64 ``diff``) at ``times`` (one time, or
        an ``(n, dims)`` coordinate array).  Rows keep the first schema (see :meth:`conform`)."""
        if changes.num_rows:
            name = None if isinstance(times, np.ndarray) else times
            self.store.insert(self.with_times(self.conform(changes, name), times))

    def insert_entries(self, entries: pa.Table) -> None:
        """Add entries that already have time columns (as :meth:`gather` returns them)."""
        if entries.num_rows:
            self.store.insert(self.store.conform(entries))

    def advance(self, frontier: Iterable[Any]) -> None:
        """No time that is not at or beyond some element of ``frontier`` will be asked
        about: merges may fold such times together from now on."""
        self.frontier = coordinate_array(frontier, self.dims)

    def _compact(self, table: pa.Table) -> pa.Table:
        if len(self.frontier) and table.num_rows:
            times = np.column_stack([table[c].to_numpy() for c in self.time_columns]).astype(np.int64)
            moved = advance_by(times, self.frontier)
            for i, c in enumerate(self.time_columns):
                table = table.set_column(table.schema.get_field_index(c), c, pa.array(moved[:, i], pa.int64()))
        return consolidate_table(table, self.name)

    def compact(self) -> None:
        """Merge every level into one, advanced to the frontier (merges do this as they go)."""
        levels = self.store.levels
        if len(levels) > 1 or (levels and len(self.frontier)):
            merged = self._compact(pa.concat_tables([t for _, t in levels]))
            levels.clear()
            if merged.num_rows:
                self.store.insert(merged)

    # ---- queries ------------------------------------------------------------------------
    def gather(self, keys: pa.Table, hashes: Optional[np.ndarray] = None) -> Optional[pa.Table]:
        """Every entry (row columns, time columns, ``diff``) whose key hashes like a row of
        ``keys``; ``None`` if nothing was ever inserted (see
        :meth:`~.operators.arrangement.Arrangement.gather`)."""
        return self.store.gather(keys, hashes)

    def find(self, wanted: np.ndarray) -> tuple[Optional[pa.Table], np.ndarray]:
        """Every entry whose key hash is in ``wanted`` (sorted, distinct), and the key hash
        of each (see :meth:`~.operators.arrangement.Arrangement.find`)."""
        return self.store.find(wanted)

    def accumulate(self, keys: pa.Table, time: Any = None, hashes: Optional[np.ndarray] = None,
                   check: bool = False) -> Optional[pa.Table]:
        """The collection of the keys of ``keys`` at ``time`` (``None``: every time
        inserted): each row with the sum of its diffs at times ``<= time``, rows whose sum
        is 0 left out; ``None`` if nothing was ever inserted.  ``check``: a negative sum
        raises ChangelogError naming the operator, time and row."""
        entries = self.gather(keys, hashes)
        if entries is None:
            return None
        return self.fold(entries, time, check)

    def fold(self, entries: pa.Table, time: Any = None, check: bool = False) -> pa.Table:
        """Entries (as :meth:`gather` returns them) summed per row at ``time`` (see
        :meth:`accumulate`)."""
        folded = consolidate_table(self.upto(entries, time), self.name)
        if check:
            check_counts(folded, self.name, time)
        return folded

    def upto(self, entries: pa.Table, time: Any = None) -> pa.Table:
        """The entries at times ``<= time`` (``None``: all), without their time columns and
        not summed: row columns and ``diff``."""
        if time is not None and entries.num_rows:
            entries = entries.filter(pa.array(less_equal_mask(self.times(entries), coordinates(time))))
        return entries.drop_columns(self.time_columns)

    def positive(self, folded: pa.Table) -> pa.Table:
        """The rows of a folded collection, each repeated as many times as its count."""
        counts = folded[DIFF].to_numpy()
        if folded.num_rows and (counts == 1).all():
            return folded.drop_columns([DIFF])
        index = np.repeat(np.arange(folded.num_rows), np.maximum(counts, 0))
        return folded.drop_columns([DIFF]).take(pa.array(index))
