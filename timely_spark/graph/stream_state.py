"""The incremental graph stream forms' worker state as keyed Arrow tables, for snapshots.

``pagerank_stream`` and ``shortest_paths_stream`` shard their state by vertex id (edges by
``src``, a vertex's values on its owner), routed by the hash of the int64 id, so the
state is saved as rows keyed by that hash (``KEY_HASH``) and re-shards into another
worker count.  A few values are the same on every worker (PageRank's vertex count, the
epoch counter); they go in :data:`SCALAR_COPIES` rows keyed ``0 .. SCALAR_COPIES - 1``,
so every worker of a restore into up to that many workers gets a copy.

One table per state, in the core's encoding of keyed state
(:func:`~timely_spark.dataflow.operators.arrangement.tag_parts`): a ``__part`` column says
what a row is; the other columns are those of its part (null elsewhere).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa

from ..dataflow import KEY_HASH, hash_columns
from ..dataflow.operators.arrangement import part_rows, tag_parts
from ..errors import RestoreError

__all__ = ["SCALAR_COPIES", "keyed_parts", "part_of", "scalars_of"]

#: How many copies of the worker-independent values a snapshot keeps (keys 0..N-1):
#: a restore into up to this many workers gives every worker one.
SCALAR_COPIES = 1024

#: The part number of the worker-independent values.
SCALARS = -1


def _id_hash(ids: np.ndarray) -> pa.Array:
    """The hash an int64 id column is routed by (``ExchangeBy([column])``)."""
    if not len(ids):
        return pa.array(np.zeros(0, np.uint64), pa.uint64())
    return pa.array(hash_columns(pa.table({"id": pa.array(ids, pa.int64())}), ["id"]), pa.uint64())


def keyed_parts(parts: dict, scalars: dict) -> pa.Table:
    """One keyed table (the core's :func:`~timely_spark.dataflow.operators.arrangement.tag_parts`)
    of ``parts`` (``{part number: (id column name, {column: array})}``, each row keyed by
    its id's hash) and ``scalars`` (``{name: value}``, in :data:`SCALAR_COPIES` rows keyed
    0..N-1, part :data:`SCALARS`).

    >>> t = keyed_parts({0: ("v", {"v": np.array([3]), "x": np.array([0.5])})}, {"n": 2.0})
    >>> scalars_of(t, "Op")["n"], part_of(t, 0)["x"].tolist()
    (2.0, [0.5])
    """
    tables = {number: pa.table({KEY_HASH: _id_hash(columns[id_column]), **{c: pa.array(v) for c, v in columns.items()}})
              for number, (id_column, columns) in parts.items()}
    copies = np.arange(SCALAR_COPIES, dtype=np.uint64)
    tables[SCALARS] = pa.table({KEY_HASH: pa.array(copies),
                                **{k: pa.array(np.full(SCALAR_COPIES, v)) for k, v in scalars.items()}})
    return tag_parts(tables, KEY_HASH).combine_chunks()


def part_of(table: pa.Table, number: int) -> dict:
    """The columns of part ``number`` (numpy arrays; empty if no row of it is here)."""
    rows = part_rows(table, number, KEY_HASH)
    if rows is None:
        return {}
    return {n: rows.column(n).to_numpy(zero_copy_only=False) for n in rows.column_names}


def scalars_of(table: pa.Table, operator: str) -> Optional[dict]:
    """The worker-independent values (None if the table is empty: a fresh state); a
    RestoreError naming ``operator`` if this worker got no copy of them."""
    if not table.num_rows:
        return None
    rows = part_rows(table, SCALARS, KEY_HASH)
    if rows is None or not rows.num_rows:
        raise RestoreError(f"operator {operator!r}: this restore has more workers than the {SCALAR_COPIES} "
                           f"the snapshot's shared values were copied for")
    return {n: rows.column(n)[0].as_py() for n in rows.column_names}
