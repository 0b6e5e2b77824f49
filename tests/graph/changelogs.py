"""Random edge changelogs with the awkward moves, and a runner for stream forms.

:func:`random_changelog` makes epochs of ``(src, dst[, weight], diff)`` rows that
are valid (never withdraw what is not held): random inserts and deletes, duplicates,
self-loops, a long path broken in the middle, a star losing its hub, an empty epoch
and an epoch whose changes cancel.  :func:`run_epochs` feeds them to a stream form on
local workers (each worker sends a slice of each epoch) and returns its output rows
per time.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import timely_spark as ts

EMPTY_EPOCH, CANCEL_EPOCH = 9, 10


def random_changelog(seed: int, epochs: int = 20, n: int = 25, weights: bool = False) -> list:
    """``epochs`` pyarrow tables of edge changes (see the module doc)."""
    rng = np.random.default_rng(seed)
    held: Counter = Counter()
    out = []

    def weight() -> float:
        return float(rng.integers(1, 4))

    for epoch in range(epochs):
        rows: list = []                                       # (src, dst, weight, diff)
        if epoch == 0:
            rows += [(100 + i, 101 + i, 1.0, 1) for i in range(12)]          # a long path
            rows += [(200, 201 + i, 1.0, 1) for i in range(8)]               # a star
            rows += [(1, 100, 1.0, 1), (0, 200, 2.0, 1), (0, 1, 1.0, 1), (3, 3, 1.0, 1)]
        elif epoch == 4:
            rows += [(106, 107, 1.0, -1)] * held[(106, 107, 1.0)]             # the path broken
        elif epoch == 6:
            rows += [(200, 201 + i, 1.0, -1) for i in range(8) for _ in range(held[(200, 201 + i, 1.0)])]
        elif epoch == EMPTY_EPOCH:
            pass
        elif epoch == CANCEL_EPOCH:
            rows += [(7, 8, 1.0, 1), (7, 8, 1.0, -1)]
        else:
            for _ in range(int(rng.integers(1, 6))):
                a, b = int(rng.integers(0, n)), int(rng.integers(0, n))
                rows.append((a, a if rng.random() < 0.15 else b, weight(), 1))
            if held and rng.random() < 0.4:                                # a duplicate
                edge = list(held)[int(rng.integers(0, len(held)))]
                rows.append((*edge, 1))
            live = [e for e, c in held.items() if c > 0]
            for _ in range(int(rng.integers(0, 3))):
                if live:
                    edge = live.pop(int(rng.integers(0, len(live))))
                    rows.append((*edge, -1))
        for a, b, w, d in rows:
            held[(a, b, w)] += d
            assert held[(a, b, w)] >= 0
        columns: dict = {"src": np.array([r[0] for r in rows], np.int64),
                         "dst": np.array([r[1] for r in rows], np.int64)}
        if weights:
            columns["weight"] = np.array([r[2] for r in rows], np.float64)
        columns["diff"] = np.array([r[3] for r in rows], np.int64)
        out.append(pa.table(columns))
    return out


def collection(epochs: list, upto: int, columns: list) -> pa.Table:
    """The edge multiset after epochs ``0..upto`` (``ts.collection``): one row per copy."""
    return ts.collection(pa.concat_tables([t.select(columns + ["diff"]) for t in epochs[:upto + 1]]))


def fold(changes: pa.Table, keys: list) -> dict:
    """A changelog of results folded (``ts.collection``) into ``{key tuple: value tuple}``
    (values: the other columns); a row held other than once, or a key twice, fails."""
    folded = ts.collection(changes, counts=True)
    assert all(c == 1 for c in folded["count"].to_pylist()), folded.filter(pc.not_equal(folded["count"], 1))
    names = [c for c in folded.column_names if c != "count"]
    result: dict = {}
    for row in folded.select(names).to_pylist():
        key = tuple(row[k] for k in keys)
        assert key not in result, key
        result[key] = tuple(row[c] for c in names if c not in keys)
    return result


def fold_upto(out: dict, upto: int, keys: list) -> dict:
    """:func:`fold` of the output of :func:`run_epochs` at all times ``<= upto``."""
    changes = [table for t, table in out.items() if t <= upto]
    return fold(pa.concat_tables(changes), keys) if changes else {}


def edge_table(rows: list) -> pa.Table:
    """``(src, dst, diff)`` tuples as an int64 edge changelog table."""
    return pa.table({name: pa.array([r[i] for r in rows], pa.int64()) for i, name in enumerate(["src", "dst", "diff"])})


def send_share(inp: Any, worker: Any, table: pa.Table) -> None:
    """Send ``worker``'s even slice of ``table`` on ``inp``."""
    n = table.num_rows
    lo, hi = n * worker.index // worker.peers, n * (worker.index + 1) // worker.peers
    for rb in table.slice(lo, hi - lo).to_batches():
        inp.send(rb)


def _work(worker: Any, epochs: list, build: Callable) -> list:
    seen: list = []

    def dataflow(scope: Any) -> Any:
        inp, edges = scope.new_input()
        build(edges).inspect_time(lambda t, rb: seen.append((t, rb)))
        return inp

    feed(worker, worker.dataflow(dataflow), epochs)
    return seen


def feed(worker: Any, inp: Any, epochs: list) -> None:
    """Send this worker's share of each epoch's table at its time, close the input and
    step ``worker`` until its dataflows are done."""
    for epoch, table in enumerate(epochs):
        send_share(inp, worker, table)
        inp.advance_to(epoch + 1)
    inp.close()
    while worker.step():
        pass


def run_epochs(epochs: list, build: Callable, threads: int = 1, processes: int = 1) -> dict:
    """``{time: table of output rows}`` of ``build(edge stream)`` fed ``epochs``."""
    import functools

    per_time: dict = {}
    for part in ts.execute(functools.partial(_work, epochs=epochs, build=build), threads=threads,
                           processes=processes, timeout=120):
        for t, rb in part:
            per_time.setdefault(t, []).append(rb)
    return {t: pa.Table.from_batches(batches) for t, batches in per_time.items()}


LAYOUTS = [dict(threads=1), dict(threads=2), dict(threads=1, processes=2)]
