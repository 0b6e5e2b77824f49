"""Vertex ids of any Arrow scalar type as dense int64 ids inside the workers, and back.

The graph algorithms run on int64 ids.  For ids of another type (strings, binaries,
uint64, dates, timestamps...), :func:`encode_ids` gives every distinct id a dense int64
id, distributed and vectorized, in two exchanges:

1. each worker dictionary-encodes the ids of its edges (pyarrow, hashing) and sends
   each distinct id to its *owner*, the worker the id hashes to;
2. each owner dictionary-encodes what it received: the id at position ``i`` of its
   dictionary is ``i * peers + owner``.  It keeps the dictionary and replies to each
   sender with the dense ids of what it sent, by position;
3. each worker rewrites its edges with the dense ids.

The owner of a dense id ``d`` is ``d % peers``, so :func:`decode_owned` sends result
rows to it, which takes the original id back from its dictionary.  Dense ids do not
keep the ids' order: :func:`min_labels` gives each component the smallest original id
among its vertices (in Arrow's order of the type: byte order for strings).  Nothing
goes through the driver; per-row work is pyarrow and numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...dataflow import ExchangeBy, OperatorBuilder, check_batch
from ..broadcast import broadcast_keys
from ..components_columnar import GraphInputError

if TYPE_CHECKING:
    from ...dataflow import Stream

__all__ = ["Codes", "encode_ids", "decode_owned", "min_labels", "id_array"]


class Codes:
    """What one worker's encoding left for decoding, per time: the dictionary of the
    ids it owns (``owned``) and the dense ids of the extra values (``extras``)."""

    def __init__(self) -> None:
        self.owned: dict = {}
        self.extras: dict = {}


def _on_table(fn: Callable[[Any, pa.Table], list]) -> Callable[[Any, list], Optional[list]]:
    """``fn(time, table)`` as the logic of ``Stream.per_time``: the time's non-empty
    batches as one table; a time without rows is not passed to ``fn``."""
    def logic(time: Any, batches: list) -> Optional[list]:
        batches = [b for b in batches if b.num_rows]
        return fn(time, pa.Table.from_batches(batches)) if batches else None

    return logic


def id_array(table: Any, name: str, operator: str) -> pa.Array:
    """Column ``name`` of ``table`` as one array; GraphInputError naming it if it has nulls."""
    column = table.column(name)
    if column.null_count:
        raise GraphInputError(f"{operator}: column {name!r} has {column.null_count} null vertex ids", name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _words(values: pa.Array) -> np.ndarray:
    """For a string or binary array: per value, its length and its first, middle and last
    eight bytes (zero-masked past the value's end) mixed into one uint64 -- equal values,
    equal results; a few vectorized passes whatever the values' lengths."""
    if not (pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type)):
        values = values.cast(pa.large_binary())
    _, offsets_buffer, data_buffer = values.buffers()
    n = len(values)
    offsets = np.frombuffer(offsets_buffer, np.int64, n + 1, values.offset * 8)
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    padded = np.zeros(len(data) + 16, np.uint8)
    padded[:len(data)] = data
    windows = np.ndarray((len(padded) - 7,), "<u8", padded, 0, (1,))        # the 8 bytes starting at each byte
    start, length = offsets[:-1], np.diff(offsets)
    keep = np.where(length >= 8, np.uint64(2**64 - 1),
                    (np.uint64(1) << (8 * np.minimum(length, 7)).astype(np.uint64)) - np.uint64(1))
    h = length.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for at in (start, start + np.maximum(length - 8, 0) // 2, start + np.maximum(length - 8, 0)):
        h = (h ^ (windows[at] & keep)) * np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
    return h


def _route_key(values: pa.Array) -> np.ndarray:
    """An int64 per id, equal for equal ids, for :class:`ExchangeBy` to route them by
    (strings and binaries through :func:`_words`: hashing every byte costs more than
    the rest of the encoding)."""
    t = values.type
    if pa.types.is_fixed_size_binary(t):
        values, t = values.cast(pa.binary()), pa.binary()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _words(values).view(np.int64)
    width = t.bit_width
    raw = values.view({8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[width])
    return raw.to_numpy(zero_copy_only=False).astype(np.int64)


def encode_ids(edges: "Stream", src: str, dst: str, extras: Optional[pa.Array] = None) -> tuple["Stream", Codes]:
    """Edge record batches with ``src``/``dst`` of any hashable Arrow type in; the same
    edges with both columns as dense int64 ids out (other columns kept), per completed
    time, and the :class:`Codes` that decode them.  ``extras`` (of the ids' type) get
    dense ids too, on every worker that has edges: ``codes.extras[time]``.

    >>> import pyarrow as pa, timely_spark as ts
    >>> table = pa.table({"src": ["b", "a"], "dst": ["a", "c"]})
    >>> _ = ts.example(lambda s: encode_ids(s.to_stream(table), "src", "dst")[0]
    ...                .inspect(lambda rb: print(rb.to_pydict())))
    {'src': [0, 1], 'dst': [1, 2]}
    """
    scope = edges.scope
    peers, me = scope.peers, scope.index
    keys = broadcast_keys(peers)
    codes = Codes()
    local: dict = {}                                     # time -> (edges, positions, distinct count)

    def ask(t: Any, table: pa.Table) -> list:
        a, c = id_array(table, src, "IdRequests"), id_array(table, dst, "IdRequests")
        parts = [a, c] + ([extras.cast(a.type)] if extras is not None and len(extras) else [])
        encoded = pc.dictionary_encode(pa.concat_arrays(parts))
        values = encoded.dictionary
        local[t] = (table, encoded.indices.to_numpy().astype(np.int64), len(values))
        return [pa.record_batch({"key": _route_key(values), "value": values,
                                 "pos": np.arange(len(values), dtype=np.int64),
                                 "from": np.full(len(values), me, np.int64)})]

    def own(t: Any, table: pa.Table) -> list:
        encoded = pc.dictionary_encode(table["value"].combine_chunks())
        codes.owned[t] = encoded.dictionary
        dense = encoded.indices.to_numpy().astype(np.int64) * peers + me
        return [pa.record_batch({"to": keys[table["from"].to_numpy()], "pos": table["pos"].combine_chunks(),
                                 "dense": dense})]

    def rewrite(t: Any, answers: pa.Table) -> list:
        table, positions, distinct = local.pop(t)
        dense = np.empty(distinct, np.int64)
        dense[answers["pos"].to_numpy()] = answers["dense"].to_numpy()
        ids = dense[positions]
        m = table.num_rows
        codes.extras[t] = ids[2 * m:]
        table = table.set_column(table.schema.get_field_index(src), src, pa.array(ids[:m]))
        table = table.set_column(table.schema.get_field_index(dst), dst, pa.array(ids[m:2 * m]))
        return table.combine_chunks().to_batches()

    requests = edges.per_time(_on_table(ask), name="IdRequests")
    replies = requests.per_time(_on_table(own), exchange=ExchangeBy(["key"], "IdOwners"), name="IdOwners")
    return replies.per_time(_on_table(rewrite), exchange=ExchangeBy(["to"], "IdEncode"), name="IdEncode"), codes


def decode_owned(stream: "Stream", column: str, codes: Codes) -> "Stream":
    """Record batches whose ``column`` holds dense ids in; the same rows with the
    original ids out, each row decoded on (and moved to) the owner of its id.

    >>> import pyarrow as pa, timely_spark as ts
    >>> table = pa.table({"src": ["b", "a"], "dst": ["a", "c"]})
    >>> def build(s):
    ...     edges, codes = encode_ids(s.to_stream(table), "src", "dst")
    ...     vertices = edges.map(lambda rb: pa.record_batch({"vertex": rb["dst"]}))
    ...     return decode_owned(vertices, "vertex", codes).inspect(lambda rb: print(rb.to_pydict()))
    >>> _ = ts.example(build)
    {'vertex': ['a', 'c']}
    """
    scope = stream.scope
    peers = scope.peers
    keys = broadcast_keys(peers)
    routed = stream.map(lambda rb: rb.append_column("_owner", pa.array(keys[rb.column(column).to_numpy() % peers])))
    name = "IdDecode"
    b = OperatorBuilder(scope, name)
    inp = b.new_input(routed, ExchangeBy(["_owner"], name))
    out, result = b.new_output("decoded")

    def logic() -> None:
        for cap, data in inp:
            owned = codes.owned[cap.time]
            batches = []
            for rb in data:
                rb = check_batch(rb, name)
                at = rb.schema.get_field_index(column)
                values = owned.take(pa.array(rb.column(at).to_numpy() // peers))
                batches.append(rb.set_column(at, column, values).drop_columns(["_owner"]))
            out.session(cap).give_batch(batches)
        for t in [t for t in codes.owned if not inp.frontier.less_equal(t)]:
            del codes.owned[t]

    b.build(logic, notify=True, initial_capabilities=False)
    return result


def min_labels(stream: "Stream", vertex: str = "vertex", component: str = "component") -> "Stream":
    """``(vertex, component)`` batches with original vertex ids and any int64 component
    labels in; per completed time, the same rows with each component labelled by the
    smallest vertex id in it (Arrow's order of the id type).

    >>> import pyarrow as pa, timely_spark as ts
    >>> rows = pa.table({"vertex": ["b", "a", "c"], "component": [7, 7, 9]})
    >>> _ = ts.example(lambda s: min_labels(s.to_stream(rows)).inspect(lambda rb: print(rb.to_pydict())))
    {'vertex': ['b', 'a', 'c'], 'component': ['a', 'a', 'c']}
    """
    def label(t: Any, table: pa.Table) -> list:
        smallest = table.group_by(component).aggregate([(vertex, "min")])
        labels = smallest[f"{vertex}_min"].take(pc.index_in(table[component], value_set=smallest[component]))
        return pa.table({vertex: table[vertex], component: labels}).to_batches()

    return stream.per_time(_on_table(label), exchange=ExchangeBy([component], "MinLabel"), name="MinLabel")
