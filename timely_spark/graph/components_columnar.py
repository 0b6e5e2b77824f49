"""Vectorized connected components of record-batch edge streams.

:func:`snapshot_components`, the batch form's dataflow, all per-row work in numpy:
each worker keeps the edges it was given as a spanning forest ``(vertex, local root)``
(at every completed time the new edges are folded into it by
:func:`~.spanning_forest.forest_of_batches`: a union-find table over dense ids, a chunk
of edges at a time, never concatenating the batches; sorting for sparse ids) -- a
combiner: it never sends the raw edges.  In the batch form (``once=True``) the forest
leaves a window of ids at a time, split by owner, and is not kept.  The forests then
go, pair by pair, to the owners of their vertices (by vertex hash), which contract them
in distributed rounds and resolve every vertex's label by distributed pointer jumping
(:mod:`.contraction`): no stage gathers the graph, or a worker's forest, on one
worker.  Times are cumulative: the result at time ``t`` covers all edges at times up
to ``t``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..dataflow import KEY_HASH, ExchangeBy, StateHooks, check_columns, hash_columns
from ..errors import GraphInputError
from .broadcast import broadcast_keys
from .contraction import by_owner, contract, pointer_table, resolve, sliced
from .spanning_forest import forest, forest_of_batches, forest_windows
from .state_log import log_state

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["GraphInputError", "forest", "snapshot_components", "edge_arrays"]


def edge_arrays(batch: pa.RecordBatch, src: str, dst: str, operator: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``src`` and ``dst`` columns as int64 numpy arrays; GraphInputError naming the
    column if it has nulls, is not of an integer type, or holds uint64 ids >= 2**63
    (the stream forms run on int64 ids; the front doors take ids of any type).

    >>> edge_arrays(pa.record_batch({"a": pa.array([2**63], pa.uint64()), "b": [1]}), "a", "b", "Op")
    Traceback (most recent call last):
    ...
    timely_spark.errors.GraphInputError: Op: column 'a' holds uint64 ids >= 2**63, which \
do not fit int64: pass ids of any type to ts.graph.connected_components, pagerank or shortest_paths
    """
    check_columns(batch, [src, dst], operator)
    out = []
    for name in (src, dst):
        column = batch.column(name)
        if column.null_count:
            raise GraphInputError(f"{operator}: column {name!r} has {column.null_count} null vertex ids", name)
        if not pa.types.is_integer(column.type):
            raise GraphInputError(f"{operator}: column {name!r} must hold integer vertex ids here, got "
                                  f"{column.type} (ts.graph.connected_components, pagerank and shortest_paths "
                                  f"take ids of any type)", name)
        values = column.to_numpy(zero_copy_only=False)
        if pa.types.is_uint64(column.type) and len(values) and values.max() >= 2**63:
            raise GraphInputError(f"{operator}: column {name!r} holds uint64 ids >= 2**63, which do not fit int64: "
                                  f"pass ids of any type to ts.graph.connected_components, pagerank or "
                                  f"shortest_paths", name)
        out.append(values.astype(np.int64, copy=False))
    return out[0], out[1]


def snapshot_components(edges: "Stream", src: str = "src", dst: str = "dst", once: bool = False) -> "Stream":
    """A stream of edge record batches in, record batches ``(vertex, component)`` out:
    at each completed time, every vertex of the edges seen so far (at that time or
    earlier) with the smallest vertex id of its component -- the whole result each
    time (the batch form :func:`~.connected_components.connected_components` runs it
    once; :func:`~.incremental_components.components` is the incremental stream form).
    Every worker sends its forest at every time any worker got edges, and the forests
    are in snapshots (keyed by vertex hash: they restore into any worker count).
    ``once``: the edges come at one time only (the batch form): each worker's forest is
    dropped once sent instead of kept for later times (a second time with edges then
    raises :class:`~timely_spark.errors.GraphInputError`).  A worker's forest is built
    from its batches without concatenating them (:func:`~.spanning_forest.forest_of_batches`).

    >>> import pyarrow as pa, timely_spark as ts
    >>> table = pa.table({"src": [1, 3, 5], "dst": [2, 2, 6]})
    >>> _ = ts.example(lambda s: snapshot_components(s.to_stream(table))
    ...                .inspect(lambda rb: print(rb.to_pydict())))
    {'vertex': [1, 2, 3, 5, 6], 'component': [1, 1, 1, 5, 5]}
    """
    scope = edges.scope
    state: dict = {"v": np.zeros(0, np.int64), "c": np.zeros(0, np.int64)}

    def local_forest(time: Any, batches: list, ticks: list) -> list:
        pairs = [edge_arrays(rb, src, dst, "LocalForest") for rb in batches if rb.num_rows]
        if once and state.get("sent") and pairs:
            raise GraphInputError(f"LocalForest: edges at a second time ({time!r}) in the one-time (batch) "
                                  f"form: snapshot_components(once=True) takes the edges at one time", "once")
        if once:                   # nothing kept: the forest goes out a window at a time, by owner
            # a time with edges on any worker ticks every worker: each is then past its one time,
            # also one given no edges (the others' forests are gone all the same)
            state["sent"] = state.get("sent") or bool(pairs) or any(rb.num_rows for rb in ticks)
            out = [rb for v, c in forest_windows(pairs) for rb in by_owner(v, c, scope.peers)]
            del pairs
            if out:
                log_state(scope, "LocalForest", time, sum(rb.num_rows for rb in out))
            return out
        v, c = forest_of_batches([(state["v"], state["c"]), *pairs])
        del pairs
        if not len(v):
            return []
        log_state(scope, "LocalForest", time, len(v))
        state["v"], state["c"] = v, c
        return sliced({"vertex": v, "root": c})

    def save(t: Any) -> pa.Table:
        # the forest's pairs are edges like any others: any share of them on any worker
        # gives the same components, so they are keyed by vertex hash and re-shard freely
        v = state["v"]
        key = hash_columns(pa.table({"vertex": pa.array(v, pa.int64())}), ["vertex"])
        return pa.table({KEY_HASH: pa.array(key, pa.uint64()), "vertex": pa.array(v, pa.int64()),
                         "root": pa.array(state["c"], pa.int64())})

    def restore(table: pa.Table) -> None:
        if table.num_rows:
            state["v"], state["c"] = forest(table.column("vertex").to_numpy(), table.column("root").to_numpy())

    # a time with edges on any worker reaches every worker's LocalForest (one tick row each),
    # so each sends its whole forest at that time -- also a worker given no edges then
    keys = broadcast_keys(scope.peers)
    ticks = edges.flat_map(lambda rb: [pa.record_batch({"vertex": keys})] if rb.num_rows else [],
                           name="LocalForestTicks")
    forests = edges.per_time(local_forest, others=(ticks,), exchange=[None, ExchangeBy(["vertex"], "LocalForest")],
                             name="LocalForest", state=StateHooks(save, restore, keyed=True))
    return resolve(pointer_table(contract(forests)))
