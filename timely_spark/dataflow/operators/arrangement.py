"""Arrangement: keyed state of an incremental operator, found by key without a scan.

The state is a few Arrow tables ("levels"), each sorted by the 64-bit hash of its key
columns (:func:`.key_hash.hash_columns`), newest last.  :meth:`Arrangement.insert`
adds a time's changes as a new level and merges the newest levels while a level is
not at least twice the size of the next (so there are O(log n) levels and each row
is merged O(log n) times: amortized cost per change, not per state size) -- levels
under ``SMALL_LEVEL`` rows are merged in groups instead (see there); a merge
interleaves the levels' sorted hashes (no rehash of the rows, no full sort) and
``compact``\\ s the rows (e.g. sums the diffs of equal rows and drops zeros); a compaction
that keeps the rows' order (as :func:`.changelog.consolidate_table` does) leaves them
sorted, so only the key columns are hashed again.
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

__all__ = ["Arrangement", "ranges", "save_arrangements", "load_arrangements", "conform_to", "tag_parts", "part_rows"]

#: Levels under this many rows are not merged one by one as they come (a merge costs a
#: compaction, whose fixed cost dominates for a few rows): they pile up, newest last, and
#: are merged all at once when there are more than SMALL_LEVELS of them; a lookup looks
#: in each (one binary search).  A time that changes a few rows then costs a merge only
#: every SMALL_LEVELS times.
SMALL_LEVEL = 1024
SMALL_LEVELS = 8


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


def conform_to(table: pa.Table, schema: Optional[pa.Schema], name: str, time: object = None) -> pa.Table:
    """``table`` in ``schema`` (its columns in that order, cast safely to their types;
    unchanged if ``schema`` is ``None``); a :class:`~timely_spark.errors.ChangelogError`
    naming the operator ``name``, ``time`` and both schemas if it cannot be.

    >>> import pyarrow as pa
    >>> schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    >>> conform_to(pa.table({"v": [1], "k": ["a"]}), schema, "Op").column_names
    ['k', 'v']
    """
    if schema is None or table.schema.equals(schema):
        return table
    if sorted(table.column_names) == sorted(schema.names):
        try:
            return table.select(schema.names).cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pass
    where = f"operator {name!r}" + ("" if time is None else f" at time {time!r}")

    def show(s: pa.Schema) -> str:
        return ", ".join(f"{f.name}: {f.type}" for f in s)
    raise ChangelogError(f"{where}: rows ({show(table.schema)}) do not fit the state's schema "
                         f"({show(schema)}); a changelog keeps one schema across times")


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
        return conform_to(table, self.schema, self.name, time)

    @property
    def rows(self) -> int:
        """How many rows the levels hold (before compaction, a key may have several)."""
        return sum(t.num_rows for _, t in self.levels)

    def _level(self, table: pa.Table) -> tuple[np.ndarray, pa.Table]:
        table = table.combine_chunks()
        h = hash_columns(table, self.keys)
        if len(h) < 2 or (h[1:] >= h[:-1]).all():         # a compaction kept the merge's order
            return h, table
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
        small = 0                                   # the newest levels under SMALL_LEVEL rows
        while small < len(self.levels) and len(self.levels[-1 - small][0]) < SMALL_LEVEL:
            small += 1
        if small > SMALL_LEVELS:
            self._merge(small)
        while len(self.levels) > 1 and SMALL_LEVEL <= len(self.levels[-1][0]) and \
                len(self.levels[-2][0]) <= 2 * len(self.levels[-1][0]):
            self._merge(2)

    def _merge(self, n: int) -> None:
        """Merge the newest ``n`` levels into one: their rows sorted by hash (a merge of
        sorted runs), compacted."""
        levels = self.levels[-n:]
        del self.levels[-n:]
        order = np.argsort(np.concatenate([h for h, _ in levels]), kind="stable")
        rows = pa.concat_tables([t for _, t in levels]).combine_chunks().take(pa.array(order))
        merged = self.compact(rows)
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
        return self.find(np.unique(hashes))[0]

    def find(self, wanted: np.ndarray) -> tuple[Optional[pa.Table], np.ndarray]:
        """Every stored row whose key hash is in ``wanted`` (sorted, distinct uint64
        hashes), oldest level first, and the hash of each row found; ``None`` (and no
        hashes) if nothing was ever inserted."""
        if not self.levels:
            return None, np.zeros(0, np.uint64)
        parts, found_hashes = [], []
        for h, table in self.levels:
            lo = np.searchsorted(h, wanted, "left")
            hi = np.searchsorted(h, wanted, "right")
            found = hi > lo
            if found.any():
                index = ranges(lo[found], (hi - lo)[found])
                parts.append(table.take(pa.array(index)))
                found_hashes.append(h[index])
        if not parts:
            return self.levels[-1][1].schema.empty_table(), np.zeros(0, np.uint64)
        if len(parts) == 1:
            return parts[0], found_hashes[0]
        return pa.concat_tables(parts), np.concatenate(found_hashes)

    # ---- snapshots -------------------------------------------------------------------
    def save(self, key_hash: str) -> Optional[pa.Table]:
        """Every stored row (levels merged and compacted) with its key hash in a uint64
        column ``key_hash``: the hash the operator's exchange routes the row by, when the
        keys are the columns it is exchanged by.  ``None`` if nothing was ever inserted.

        >>> import pyarrow as pa
        >>> state = Arrangement(["k"], lambda t: t)
        >>> state.insert(pa.table({"k": ["a"], "v": [1]}))
        >>> state.save("_h").column_names
        ['k', 'v', '_h']
        """
        if self.schema is None:
            return None
        if not self.levels:
            rows = self.schema.empty_table()
            hashes = np.zeros(0, np.uint64)
        else:
            rows = pa.concat_tables([t for _, t in self.levels])
            if len(self.levels) > 1:
                rows = self.compact(rows)
            rows = rows.combine_chunks()
            hashes = hash_columns(rows, self.keys) if rows.num_rows else np.zeros(0, np.uint64)
        return rows.append_column(key_hash, pa.array(hashes, pa.uint64()))

    def load(self, table: pa.Table, key_hash: str) -> None:
        """Rebuild from what :meth:`save` returned (all columns but ``key_hash``); the
        arrangement must be empty.  Rows of several workers' saves may be mixed (a
        restore into another worker count): they are compacted into one level."""
        if self.levels or self.schema is not None:
            raise ValueError(f"operator {self.name!r}: load into an arrangement that holds rows")
        rows = table.drop_columns([key_hash]) if key_hash in table.column_names else table
        self.schema = rows.schema
        if rows.num_rows:
            merged = self.compact(rows)
            if merged.num_rows:
                self.levels.append(self._level(merged))


_PART = "__part"


def tag_parts(parts: dict, key_hash: str) -> pa.Table:
    """Several keyed tables (``{number: table}``, each with a uint64 ``key_hash`` column) as
    one keyed table -- the one encoding of an operator's state in a snapshot: part
    ``i``'s column ``c`` is named ``"i:c"``, a ``__part`` column says which part a row
    belongs to, ``key_hash`` is shared.  Undo with :func:`part_rows`.

    >>> import pyarrow as pa
    >>> table = tag_parts({0: pa.table({"_h": pa.array([7], pa.uint64()), "v": ["x"]})}, "_h")
    >>> table.column_names, part_rows(table, 0, "_h").to_pylist(), part_rows(table, 1, "_h")
    (['__part', '_h', '0:v'], [{'v': 'x'}], None)
    """
    tables = []
    for i, saved in parts.items():
        renamed = saved.rename_columns([n if n == key_hash else f"{i}:{n}" for n in saved.column_names])
        tables.append(renamed.add_column(0, _PART, pa.array(np.full(saved.num_rows, i, np.int16))))
    if not tables:
        return pa.table({_PART: pa.array([], pa.int16()), key_hash: pa.array([], pa.uint64())})
    first = [_PART, key_hash]
    merged = pa.concat_tables(tables, promote_options="default")
    return merged.select(first + [n for n in merged.column_names if n not in first])


def part_rows(table: pa.Table, number: int, key_hash: str) -> Optional[pa.Table]:
    """The rows of part ``number`` of a table :func:`tag_parts` made, in their own column
    names (without ``key_hash``); ``None`` if the table has no column of that part."""
    import pyarrow.compute as pc
    prefix = f"{number}:"
    names = [n for n in table.column_names if n.startswith(prefix)]
    if not names:
        return None
    rows = table.filter(pc.equal(table.column(_PART), number)).select(names)
    return rows.rename_columns([n[len(prefix):] for n in names])


def save_arrangements(parts: Sequence[Arrangement], key_hash: str) -> pa.Table:
    """The state of an operator's arrangements (all keyed by the columns its exchange
    routes by) as one keyed table (:func:`tag_parts`, part ``i`` the ``i``-th arrangement).

    >>> import pyarrow as pa
    >>> a, b = Arrangement(["k"], lambda t: t), Arrangement(["k"], lambda t: t)
    >>> a.insert(pa.table({"k": [1], "v": ["x"]})); b.insert(pa.table({"k": [2], "n": [5]}))
    >>> table = save_arrangements([a, b], "_h")
    >>> table.column_names
    ['__part', '_h', '0:k', '0:v', '1:k', '1:n']
    >>> c, d = Arrangement(["k"], lambda t: t), Arrangement(["k"], lambda t: t)
    >>> load_arrangements([c, d], table, "_h")
    >>> c.gather(pa.table({"k": [1]})).to_pylist(), d.rows
    ([{'k': 1, 'v': 'x'}], 1)
    """
    saved = {i: part.save(key_hash) for i, part in enumerate(parts)}
    return tag_parts({i: table for i, table in saved.items() if table is not None}, key_hash)


def load_arrangements(parts: Sequence[Arrangement], table: Optional[pa.Table], key_hash: str) -> None:
    """Rebuild ``parts`` from a table :func:`save_arrangements` made (``None``: nothing)."""
    if table is None:
        return
    for i, part in enumerate(parts):
        rows = part_rows(table, i, key_hash)
        if rows is not None:
            part.load(rows, key_hash)
