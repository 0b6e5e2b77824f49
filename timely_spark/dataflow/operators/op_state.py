"""How the built-in operators keep their state through ``OperatorBuilder.keep_state``.

A snapshot at time ``t`` asks each operator for its state *for the times before t*
(see :meth:`~timely_spark.dataflow.operator.OperatorBuilder.keep_state`).  The pieces the
built-in operators share live here:

* :class:`StateHooks` -- a ``(save, restore, keyed)`` triple that operators built on
  :func:`~.per_time.per_time`, ``unary_notify`` and ``binary_notify`` pass through
  (``state=``), so they declare their state once;
* :func:`before` -- whether a time is one of "the times before t" (not ``>= t``);
* :func:`keyed_entries` / :func:`entries_of` -- state of row operators exchanged by a
  Python key function, one pickled entry per row, with the route value ``key(k)`` as
  the row's key hash (a worker is ``route % peers`` there, as for ``Exchange``), so it
  re-shards into another worker count;
* :func:`pickled_times` / :func:`times_of` -- logical times as a column: int64 for
  integer times (no pickle), else dictionary-encoded binary (one pickle per distinct
  time, not per row).

Pickled entries and times are read only from files whose HMAC under the checkpoint
key was checked first (:mod:`timely_spark.state.store`).

State of columnar operators is an Arrow table with the key hash their exchange
routes by (:meth:`.arrangement.Arrangement.save`).
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Iterable, NamedTuple, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import RestoreError
from ...progress import Product, less_equal
from ..state_hook import KEY_HASH

__all__ = ["StateHooks", "before", "keyed_entries", "entries_of", "pickled_times", "time_codes", "times_of",
           "route_array",
           "KEY_HASH"]

_ENTRY = "entry"
_PEERS = "peers"            # present when the route values did not fit: the worker count the state is for


class StateHooks(NamedTuple):
    """State an operator built on a shared operator (``per_time``, ``unary_notify``,
    ``binary_notify``) declares once: ``save(t)`` returns its state for the times before
    ``t`` (a ``pyarrow.Table`` with a ``KEY_HASH`` column when ``keyed``, else any
    picklable value); ``restore(value)`` rebuilds it from what ``save`` returned, as the
    operator is built.

    >>> kept = StateHooks(lambda t: {"seen": t}, print)
    >>> kept.restore(kept.save(3))
    {'seen': 3}
    >>> kept.keyed
    False
    """

    save: Callable[[Any], Any]
    restore: Callable[[Any], Any]
    keyed: bool = False


def before(time: Any, t: Any) -> bool:
    """Whether ``time`` is one of the times before the snapshot time ``t`` (not ``>= t``):
    what a snapshot at ``t`` saves; input at a time ``>= t`` is sent again after a restore.

    A time of a nested scope (``Product(outer, inner)``) is compared by its outer time
    when ``t`` is a time of the dataflow's top scope.

    >>> before(2, 3), before(3, 3), before(4, 3), before(Product(2, 7), 3)
    (True, False, False, True)
    """
    while isinstance(time, Product) and not isinstance(t, Product):
        time = time[0]
    return not less_equal(t, time)


def route_array(routes: Iterable[int], peers: int) -> tuple[pa.Array, bool]:
    """Route values (``key(k)``, the ints an ``Exchange`` routes by: worker ``route %
    peers``) as the uint64 key-hash column, and whether they all fit (ints in [0, 2**64)).
    If one does not, every row gets ``route % peers`` instead: right for this worker
    count only.

    >>> column, fits = route_array([0, 7], 2)
    >>> column.to_pylist(), fits
    ([0, 7], True)
    >>> route_array([-3, 2**70], 2)[0].to_pylist()
    [1, 0]
    """
    values = list(routes)
    try:
        return pa.array(np.array(values, dtype=np.uint64) if values else np.zeros(0, np.uint64), pa.uint64()), True
    except (OverflowError, ValueError, TypeError):
        return pa.array([int(r) % peers for r in values], pa.uint64()), False


def keyed_entries(routes: Iterable[int], entries: Iterable[Any], peers: int) -> pa.Table:
    """A keyed state table: one row per entry, ``KEY_HASH`` its route value, ``entry``
    the entry pickled.  Route values that do not fit a uint64 tie the table to ``peers``
    workers (:func:`entries_of` then refuses another count).

    >>> table = keyed_entries([5, 6], [("a", 1), ("b", 2)], 2)
    >>> table.column_names, entries_of(table, "Aggregate", 2)
    (['_key_hash', 'entry'], [('a', 1), ('b', 2)])
    """
    blobs = [pickle.dumps(e, protocol=5) for e in entries]
    column, fits = route_array(routes, peers)
    table = pa.table({KEY_HASH: column, _ENTRY: pa.array(blobs, pa.binary())})
    if not fits:
        table = table.append_column(_PEERS, pa.array(np.full(len(blobs), peers, np.int64)))
    return table


def entries_of(table: Optional[pa.Table], operator: str, peers: int) -> list:
    """The entries of a table :func:`keyed_entries` made (none for ``None``); a
    RestoreError naming ``operator`` if its route values tie it to another worker count.

    >>> try:
    ...     entries_of(keyed_entries([-1], ["x"], 2), "Aggregate", 3)
    ... except RestoreError as exc:
    ...     print(str(exc)[:75])
    operator 'Aggregate': its key function gave route values outside [0, 2**64)
    """
    if table is None or not table.num_rows:
        return []
    if _PEERS in table.column_names:
        saved = set(table.column(_PEERS).to_pylist())
        if saved != {peers}:
            raise RestoreError(
                f"operator {operator!r}: its key function gave route values outside [0, 2**64) (e.g. negative "
                f"ints), so its state was stored for {min(saved)} workers and cannot be re-sharded into {peers} "
                f"(restore into {min(saved)} workers, or make the key function return such ints, e.g. "
                f"ts.stable_hash)")
    return [pickle.loads(b) for b in table.column(_ENTRY).to_pylist()]


def _int_times(distinct: list) -> bool:
    return all(type(t) is int for t in distinct) and (not distinct or -2**63 <= min(distinct) <= max(distinct) < 2**63)


def pickled_times(times: np.ndarray, distinct: list) -> pa.Array:
    """A column of logical times: ``times`` indexes into ``distinct``; an int64 column when
    every time is an int (Arrow alone, no pickle), else each distinct time pickled once.

    >>> pickled_times(np.array([1, 0, 1]), [3, 5]).type
    DataType(int64)
    >>> times_of(pickled_times(np.array([1, 0, 1]), [3, 5]))
    [5, 3, 5]
    >>> times_of(pickled_times(np.array([0]), [Product(1, 2)]))
    [Product(1, 2)]
    """
    codes = np.asarray(times, np.int64)
    if _int_times(distinct):
        values = np.asarray(distinct, np.int64) if distinct else np.zeros(0, np.int64)
        return pa.array(values[codes] if len(codes) else np.zeros(0, np.int64), pa.int64())
    dictionary = pa.array([pickle.dumps(t, protocol=5) for t in distinct], pa.binary())
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32), pa.int32()), dictionary)


def time_codes(column: Any) -> tuple[list, np.ndarray]:
    """The distinct logical times of a column :func:`pickled_times` made (of one or more
    saves: equal times are merged) and, per row, the index of its time among them.

    >>> times, codes = time_codes(pickled_times(np.array([1, 0, 1]), [3, 5]))
    >>> times, codes.tolist()
    ([5, 3], [0, 1, 0])
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], pa.binary())
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)       # decode: saves of several workers differ
    encoded = pc.dictionary_encode(column)
    if pa.types.is_integer(column.type):
        times = encoded.dictionary.to_pylist()
    else:
        times = [pickle.loads(b) for b in encoded.dictionary.to_pylist()]
    return times, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def times_of(column: Any) -> list:
    """The logical times of a column :func:`pickled_times` made, one per row.

    >>> times_of(pickled_times(np.array([1, 0, 1]), [3, 5]))
    [5, 3, 5]
    """
    times, codes = time_codes(column)
    return [times[i] for i in codes.tolist()]
