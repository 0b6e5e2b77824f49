"""Vertex ids of any Arrow type in the incremental graph stream forms.

The stream forms run on int64 ids.  Signed integer ids (int8 .. int64, uint8 .. uint32)
pass through unchanged.  Ids of any other type the batch forms take (strings, binaries,
uint64, dates, timestamps) become int64 ids that do not depend on the worker count:
62 bits of the id's hash (:func:`~timely_spark.dataflow.operators.key_hash.hash_array`),
computed where the edges are, vectorized, with no exchange.  Each distinct id is sent
once per time, with its int64 id, to the worker that owns the int64 id, which keeps the
pair in an :class:`~timely_spark.dataflow.operators.arrangement.Arrangement` keyed
by it -- the dictionary that turns the algorithm's output back into the original ids,
kept in snapshots keyed by the int64 id's hash (it re-shards like every other keyed
state).  Two ids with the same hash would be detected by their owner and raise
:class:`~timely_spark.graph.GraphInputError` naming both (the chance is about n**2 /
2**63 for n distinct ids).  The dictionary keeps every id it has seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...dataflow import ExchangeBy
from ...dataflow.operators.arrangement import Arrangement, load_arrangements, save_arrangements
from ...dataflow.operators.key_hash import hash_array
from ...dataflow.operators.op_state import KEY_HASH, StateHooks
from ..components_columnar import GraphInputError

if TYPE_CHECKING:
    from ...dataflow import Stream

__all__ = ["plain_ids", "hashed_ids", "encode_stream_ids", "decode_stream_ids", "id_dictionary", "smallest_labels",
           "local_sources", "decode_sources"]

ID = "_id"
VALUE = "_value"
_MASK = np.uint64((1 << 62) - 1)


def plain_ids(t: pa.DataType) -> bool:
    """Whether ids of type ``t`` go to the algorithms as they are (signed integers and
    the unsigned ones that fit int64).

    >>> plain_ids(pa.int32()), plain_ids(pa.uint64()), plain_ids(pa.string())
    (True, False, False)
    """
    return pa.types.is_integer(t) and not pa.types.is_uint64(t)


def hashed_ids(values: Any) -> np.ndarray:
    """The int64 id of each value: the value itself for :func:`plain_ids` types, else 62
    bits of its hash (non-negative, equal for equal values, the same on every worker).

    >>> hashed_ids(pa.array([5, 7])).tolist()
    [5, 7]
    >>> a = hashed_ids(pa.array(["x", "y", "x"]))
    >>> bool(a[0] == a[2]), bool(a[0] != a[1]), bool((a >= 0).all())
    (True, True, True)
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if plain_ids(t):
        return values.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if pa.types.is_fixed_size_binary(t):
        values = values.cast(pa.binary())
    return (hash_array(values) & _MASK).astype(np.int64)


def encode_stream_ids(edges: "Stream", src: str, dst: str, operator: str) -> tuple["Stream", "Stream"]:
    """The edges with ``src``/``dst`` as int64 ids (other columns kept), and the stream of
    ``(_id, _value)`` pairs of the ids that are not :func:`plain_ids` (distinct per batch).
    A null id or a batch whose id type differs from an earlier one raise GraphInputError."""
    seen: list = []

    def ids_of(rb: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
        for name in (src, dst):
            if name not in rb.schema.names:
                raise GraphInputError(f"{operator}: no column {name!r} in the edges (columns: "
                                      f"{', '.join(rb.schema.names)})", name)
            if rb.column(name).null_count:
                raise GraphInputError(f"{operator}: column {name!r} has {rb.column(name).null_count} null "
                                      "vertex ids", name)
        a, b = rb.column(src), rb.column(dst)
        if a.type != b.type:
            raise GraphInputError(f"{operator}: columns {src!r} ({a.type}) and {dst!r} ({b.type}) must hold ids "
                                  "of one type", src)
        if not seen:
            seen.append(a.type)
        elif seen[0] != a.type:
            raise GraphInputError(f"{operator}: vertex ids changed type from {seen[0]} to {a.type}; a stream "
                                  "keeps one id type", src)
        return a, b

    def encode(rb: pa.RecordBatch) -> pa.RecordBatch:
        a, b = ids_of(rb)
        if plain_ids(a.type):
            return rb
        rb = rb.set_column(rb.schema.get_field_index(src), src, pa.array(hashed_ids(a)))
        return rb.set_column(rb.schema.get_field_index(dst), dst, pa.array(hashed_ids(b)))

    def pairs(rb: pa.RecordBatch) -> list:
        a, b = ids_of(rb)
        if plain_ids(a.type) or not rb.num_rows:
            return []
        values = pc.unique(pa.concat_arrays([a, b]))
        return [pa.record_batch({ID: pa.array(hashed_ids(values)), VALUE: values})]

    return edges.map(encode, name=f"{operator}Ids"), edges.flat_map(pairs, name=f"{operator}IdPairs")


def id_dictionary(operator: str) -> Arrangement:
    """An empty dictionary of ``(_id, _value)`` pairs, keyed by ``_id`` (each pair kept once)."""
    return Arrangement([ID], lambda t: t.group_by([ID, VALUE], use_threads=False).aggregate([]), operator)


def _add_pairs(state: Arrangement, pairs: pa.Table, operator: str) -> None:
    pairs = pairs.group_by([ID, VALUE], use_threads=False).aggregate([])
    pairs = state.conform(pairs)
    old = state.gather(pairs)
    both = pairs if old is None or not old.num_rows else pa.concat_tables([old, pairs])
    both = both.group_by([ID, VALUE], use_threads=False).aggregate([])
    counted = both.group_by([ID], use_threads=False).aggregate([([], "count_all")])
    clash = counted.filter(pc.greater(counted["count_all"], 1))
    if clash.num_rows:
        two = both.filter(pc.is_in(both[ID], clash[ID].slice(0, 1)))[VALUE].to_pylist()
        raise GraphInputError(f"{operator}: vertex ids {two[0]!r} and {two[1]!r} have the same 62-bit hash, so "
                              "the stream form cannot tell them apart; map them to int64 ids first", ID)
    if old is not None and old.num_rows:
        pairs = pairs.join(old.select([ID]), ID, join_type="left anti")
    state.insert(pairs)


def decode_stream_ids(pairs: "Stream", results: "Stream", column: str, operator: str) -> "Stream":
    """``results`` with ``column`` (int64 ids) turned back into the original ids, on the
    owner of each id, which keeps the ``pairs`` it received (snapshots keep them, keyed).
    A worker that never received a pair passes its rows through (their ids are plain)."""
    name = f"{operator}IdDecode"
    state = [id_dictionary(name)]

    def logic(time: Any, pair_batches: list, batches: list) -> list:
        pair_batches = [b for b in pair_batches if b.num_rows]
        if pair_batches:
            _add_pairs(state[0], pa.Table.from_batches(pair_batches), name)
        batches = [b for b in batches if b.num_rows]
        if not batches or state[0].schema is None:
            return batches
        table = pa.Table.from_batches(batches)
        ids = table[column]
        found = state[0].gather(pa.table({ID: ids}))
        if found is None:                      # the schema is set: something was inserted
            found = state[0].schema.empty_table()
        at = pc.index_in(ids, value_set=found[ID])
        if at.null_count:
            raise GraphInputError(f"{name}: at time {time!r} a result names vertex id {ids.filter(pc.is_null(at))[0]} "
                                  "that no edge carried", column)
        values = found[VALUE].take(at)
        return table.set_column(table.schema.get_field_index(column), column, values).combine_chunks().to_batches()

    def restore(table: pa.Table) -> None:
        load_arrangements(state, table, KEY_HASH)

    return pairs.per_time(logic, others=[results], exchange=[ExchangeBy([ID], name), ExchangeBy([column], name)],
                          name=name, state=StateHooks(lambda t: save_arrangements(state, KEY_HASH), restore,
                                                      keyed=True))


def local_sources(sources: Any) -> tuple[list, Optional[tuple[np.ndarray, pa.Array]]]:
    """The shortest-path ``sources`` as int64 ids, and (for ids that are not plain) the
    int64 ids with the original values, to turn the output's ``source`` column back.

    >>> local_sources([3, 1])
    ([3, 1], None)
    >>> ids, (hashed, values) = local_sources(["a"])
    >>> values.to_pylist(), ids == hashed.tolist()
    (['a'], True)
    """
    try:
        values = sources if isinstance(sources, (pa.Array, pa.ChunkedArray)) else pa.array(list(sources))
    except (TypeError, pa.ArrowException):
        raise GraphInputError(f"sources must be a list of vertex ids of one type, got {sources!r}",
                              "sources") from None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if plain_ids(values.type) or pa.types.is_null(values.type):
        return values.to_pylist(), None
    ids = hashed_ids(values)
    return ids.tolist(), (ids, values)


def decode_sources(results: "Stream", mapping: Optional[tuple[np.ndarray, pa.Array]], column: str) -> "Stream":
    """``results`` with ``column`` (int64 ids of the sources) as the original source ids."""
    if mapping is None:
        return results
    ids, values = mapping
    known = pa.array(ids)

    def back(rb: pa.RecordBatch) -> pa.RecordBatch:
        at = pc.index_in(rb.column(column), value_set=known)
        return rb.set_column(rb.schema.get_field_index(column), column, values.take(at))

    return results.map(back)


def smallest_labels(changes: "Stream", operator: str) -> "Stream":
    """A changelog ``(vertex, component, diff)`` whose components are labelled by int64
    ids in; the same changelog with each component labelled by the smallest vertex id in
    it, in the id type's own order (a running min per label, joined back, consolidated).
    Batches of plain int64 ids pass through: their labels already are the smallest."""
    parts = changes.branch(lambda rb: pa.types.is_int64(rb.schema.field("vertex").type), name=f"{operator}Plain")
    decoded = parts.falses
    smallest = decoded.group_by("component").aggregate([("vertex", "min")], running=True,
                                                       name=f"{operator}Smallest")
    joined = decoded.join(smallest, "component", running=True, name=f"{operator}Label")
    labelled = joined.map(lambda rb: pa.record_batch({"vertex": rb.column("vertex"),
                                                      "component": rb.column("vertex_min"),
                                                      "diff": rb.column("diff")}))
    return parts.trues.concat(labelled.consolidate(name=f"{operator}Labels"))
