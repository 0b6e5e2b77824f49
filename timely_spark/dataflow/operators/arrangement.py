"""Arrangement: keyed state of an incremental operator, found by key without a scan.

The state is a few Arrow tables ("levels"), each sorted by the 64-bit hash of its key
columns (:func:`.key_hash.hash_columns`), newest last.  :meth:`Arrangement.insert`
adds a time's changes as a new level and merges the newest levels while a level is
not at least twice the size of the next (so there are O(log n) levels and each row
is merged O(log n) times: amortized cost per change, not per state size); a merge
``compact``\\ s the rows (e.g. sums the diffs of equal rows and drops zeros).
:meth:`Arrangement.gather` returns every stored row whose key hashes like one of the
given keys: a binary search per level and key (``numpy.searchsorted``) and one
``take`` -- cost in proportion to the keys asked for and the rows they hold.

The hash only locates rows: callers compare the key values themselves (group, join)
so two keys with the same hash never mix.  This is the shape of differential
dataflow's arrangements (a trace of sorted batches, merged as it grows), in numpy.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import pyarrow as pa

from ...errors import ChangelogError
from .key_hash import hash_columns

__all__ = ["Arrangement", "ranges"]


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lengths[i] - 1`` for every i, concatenated.

    >>> ranges(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(np.asarray(starts, np.int64) - offsets, lengths) + np.arange(total, dtype=np.int64)


class Arrangement:
    """Rows kept by the hash of ``keys``, for lookups by key at a cost that does not grow
    with the state.

    ``compact(table)`` merges the rows of two levels into fewer (it may drop rows
    that cancel out); it must keep the key columns.  The first rows inserted fix the
    schema: :meth:`conform` brings later rows to it (``name`` is the operator named
    when they cannot be).

    >>> import pyarrow as pa
    >>> state = Arrangement(["k"], lambda t: t)
    >>> state.insert(pa.table({"k": ["a", "b"], "v": [1, 2]}))
    >>> state.insert(pa.table({"k": ["a"], "v": [3]}))
    >>> sorted(state.gather(pa.table({"k": ["a"]})).column("v").to_pylist())
    [1, 3]
    >>> state.rows
    3
    """

    def __init__(self, keys: Sequence[str], compact: Callable[[pa.Table], pa.Table],
                 name: str = "Arrangement") -> None:
        self.keys = list(keys)
        self.compact = compact
        self.name = name
        self.schema: Optional[pa.Schema] = None                  # of the rows stored, once some are
        self.levels: list[tuple[np.ndarray, pa.Table]] = []      # (sorted hashes, rows in that order)

    def conform(self, table: pa.Table, time: object = None) -> pa.Table:
        """``table`` in the schema of the rows already stored (its columns in their order,
        cast safely to their types); a :class:`~timely_spark.errors.ChangelogError`
        naming the operator, ``time`` and both schemas if it cannot be.

        >>> import pyarrow as pa
        >>> state = Arrangement(["k"], lambda t: t, "Distinct")
        >>> state.insert(pa.table({"k": [1], "v": ["a"]}))
        >>> state.conform(pa.table({"v": ["b"], "k": pa.array([2], pa.int32())})).column_names
        ['k', 'v']
        >>> state.conform(pa.table({"k": [2]}), 3)
        Traceback (most recent call last):
        timely_spark.errors.ChangelogError: operator 'Distinct' at time 3: rows (k: int64) do not fit the \
state's schema (k: int64, v: string); a changelog keeps one schema across times
        """
        if self.schema is None or table.schema.equals(self.schema):
            return table
        if sorted(table.column_names) == sorted(self.schema.names):
            try:
                return table.select(self.schema.names).cast(self.schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
        where = f"operator {self.name!r}" + ("" if time is None else f" at time {time!r}")

        def show(schema: pa.Schema) -> str:
            return ", ".join(f"{f.name}: {f.type}" for f in schema)
        raise ChangelogError(f"{where}: rows ({show(table.schema)}) do not fit the state's schema "
                             f"({show(self.schema)}); a changelog keeps one schema across times")

    @property
    def rows(self) -> int:
        """How many rows the levels hold (before compaction, a key may have several)."""
        return sum(t.num_rows for _, t in self.levels)

    def _level(self, table: pa.Table) -> tuple[np.ndarray, pa.Table]:
        table = table.combine_chunks()
        h = hash_columns(table, self.keys)
        order = np.argsort(h, kind="stable")
        return h[order], table.take(pa.array(order))

    def insert(self, table: pa.Table) -> None:
        """Add ``table``'s rows (which have the key columns; see :meth:`conform`) as the
        newest level; merge levels as needed."""
        if not table.num_rows:
            return
        table = self.conform(table)
        if self.schema is None:
            self.schema = table.schema
        self.levels.append(self._level(table))
        while len(self.levels) > 1 and len(self.levels[-2][0]) <= 2 * len(self.levels[-1][0]):
            _, newer = self.levels.pop()
            _, older = self.levels.pop()
            merged = self.compact(pa.concat_tables([older, newer]))
            if merged.num_rows:
                self.levels.append(self._level(merged))

    def gather(self, keys: pa.Table, hashes: Optional[np.ndarray] = None) -> Optional[pa.Table]:
        """Every stored row whose key hashes like a row of ``keys`` (a table with the key
        columns; ``hashes`` its hashes if already computed), oldest level first; ``None``
        if nothing was ever inserted."""
        if not self.levels:
            return None
        if hashes is None:
            hashes = hash_columns(keys, self.keys)
        wanted = np.unique(hashes)
        parts = []
        for h, table in self.levels:
            lo = np.searchsorted(h, wanted, "left")
            hi = np.searchsorted(h, wanted, "right")
            found = hi > lo
            if found.any():
                parts.append(table.take(pa.array(ranges(lo[found], (hi - lo)[found]))))
        if not parts:
            return self.levels[-1][1].schema.empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]
