"""The incremental graph stream forms' worker state as keyed Arrow tables, for snapshots.

``pagerank_stream`` and ``shortest_paths_stream`` shard their state by vertex id (edges by
``src``, a vertex's values on its owner), routed by the hash of the int64 id, so the
state is saved as rows keyed by that hash (``KEY_HASH``) and re-shards into another
worker count.  A few values are the same on every worker (PageRank's vertex count, the
epoch counter); they go in :data:`SCALAR_COPIES` rows keyed ``0 .. SCALAR_COPIES - 1``,
so every worker of a restore into up to that many workers gets a copy.

One table per state: a ``part`` column says what a row is; the other columns are
those of its part (null elsewhere).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..dataflow import KEY_HASH, hash_columns
from ..errors import RestoreError

__all__ = ["SCALAR_COPIES", "keyed_parts", "part_of", "scalars_of"]

#: How many copies of the worker-independent values a snapshot keeps (keys 0..N-1):
#: a restore into up to this many workers gives every worker one.
SCALAR_COPIES = 1024

_PART = "part"


def _id_hash(ids: np.ndarray) -> pa.Array:
    """The hash an int64 id column is routed by (``ExchangeBy([column])``)."""
    if not len(ids):
        return pa.array(np.zeros(0, np.uint64), pa.uint64())
    return pa.array(hash_columns(pa.table({"id": pa.array(ids, pa.int64())}), ["id"]), pa.uint64())


def keyed_parts(parts: dict, scalars: dict) -> pa.Table:
    """One keyed table of ``parts`` (``{part number: (id column name, {column: array})}``,
    each row keyed by its id's hash) and ``scalars`` (``{name: value}``, in
    :data:`SCALAR_COPIES` rows keyed 0..N-1, part -1).

    >>> t = keyed_parts({0: ("v", {"v": np.array([3]), "x": np.array([0.5])})}, {"n": 2.0})
    >>> scalars_of(t, "Op")["n"], part_of(t, 0)["x"].tolist()
    (2.0, [0.5])
    """
    tables = []
    for number, (id_column, columns) in parts.items():
        n = len(columns[id_column])
        table = pa.table({_PART: pa.array(np.full(n, number, np.int8)), KEY_HASH: _id_hash(columns[id_column]),
                          **{f"{number}:{c}": pa.array(v) for c, v in columns.items()}})
        tables.append(table)
    copies = np.arange(SCALAR_COPIES, dtype=np.uint64)
    tables.append(pa.table({_PART: pa.array(np.full(SCALAR_COPIES, -1, np.int8)), KEY_HASH: pa.array(copies),
                            **{f"s:{k}": pa.array(np.full(SCALAR_COPIES, v)) for k, v in scalars.items()}}))
    return pa.concat_tables(tables, promote_options="default").combine_chunks()


def part_of(table: pa.Table, number: int) -> dict:
    """The columns of part ``number`` (numpy arrays; empty if no row of it is here)."""
    prefix = f"{number}:"
    rows = table.filter(pc.equal(table.column(_PART), number))
    return {n[len(prefix):]: rows.column(n).to_numpy(zero_copy_only=False)
            for n in table.column_names if n.startswith(prefix)}


def scalars_of(table: pa.Table, operator: str) -> Optional[dict]:
    """The worker-independent values (None if the table is empty: a fresh state); a
    RestoreError naming ``operator`` if this worker got no copy of them."""
    if not table.num_rows:
        return None
    rows = table.filter(pc.equal(table.column(_PART), -1))
    if not rows.num_rows:
        raise RestoreError(f"operator {operator!r}: this restore has more workers than the {SCALAR_COPIES} "
                           f"the snapshot's shared values were copied for")
    return {n[2:]: rows.column(n)[0].as_py() for n in table.column_names if n.startswith("s:")}

