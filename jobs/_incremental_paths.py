"""Benchmark entries for pagerank_stream and shortest_paths_stream (to fold into
jobs/bench_incremental.py): a random graph loaded in one epoch, then small epochs of
changed edges; the median time per small epoch and the rows emitted, next to the
batch form recomputing from scratch on the final graph.

    python jobs/_incremental_paths.py --edges 2000000 --epochs 20 --changes 1000

Measured on the 2-core machine (shared), 2 worker threads:

    algorithm                        deletions  first epoch  median epoch  rows/epoch  from scratch  speed-up
    pagerank_stream (tol 1e-9)              0%       10.67s       143.9ms     279,247         2.00s     13.9x
    shortest_paths_stream (1 src)           0%        1.58s        64.4ms       5,257         1.12s     17.4x
    pagerank_stream (tol 1e-9)             10%        7.52s       137.1ms     278,015         2.06s     15.1x
    shortest_paths_stream (1 src)          10%        2.76s       109.5ms       6,161         2.40s     21.9x
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa

import timely_spark as ts

TOLERANCE = 1e-9


def make_graph(m: int, seed: int) -> tuple:
    """The random graph of jobs/bench_graph.py: m edges over m/2 vertices, skewed targets."""
    rng = np.random.default_rng(seed)
    n = m // 2
    src = rng.integers(0, n, m)
    dst = (rng.zipf(1.8, m) * 7919 + rng.integers(0, n, m)) % n
    return src.astype(np.int64), dst.astype(np.int64)


def changelog(m: int, epochs: int, changes: int, deletions: float, seed: int) -> tuple:
    """``(first epoch table, [small epoch tables], final edge table)``: each small
    epoch inserts ``changes * (1 - deletions)`` random edges and withdraws the rest
    from the edges held."""
    src, dst = make_graph(m, seed)
    rng = np.random.default_rng(seed + 1)
    n = m // 2
    held_src, held_dst = list(src), list(dst)
    alive = np.ones(m + epochs * changes, bool)
    small = []
    for _ in range(epochs):
        k_del = int(round(changes * deletions))
        k_ins = changes - k_del
        a, b = rng.integers(0, n, k_ins), rng.integers(0, n, k_ins)
        candidates = np.flatnonzero(alive[:len(held_src)])
        gone = rng.choice(candidates, k_del, replace=False) if k_del else np.zeros(0, np.int64)
        alive[gone] = False
        hs, hd = np.asarray(held_src), np.asarray(held_dst)
        small.append(pa.table({"src": np.concatenate([a, hs[gone]]).astype(np.int64),
                               "dst": np.concatenate([b, hd[gone]]).astype(np.int64),
                               "diff": np.concatenate([np.ones(k_ins), -np.ones(k_del)]).astype(np.int64)}))
        held_src += list(a)
        held_dst += list(b)
    keep = alive[:len(held_src)]
    final = pa.table({"src": np.asarray(held_src, np.int64)[keep], "dst": np.asarray(held_dst, np.int64)[keep]})
    return pa.table({"src": src, "dst": dst}), small, final


def _work(worker: Any, first: pa.Table, small: list, build: Callable) -> list:
    rows: list = []

    def dataflow(scope: Any) -> Any:
        inp, edges = scope.new_input()
        out = build(edges)
        out.inspect_time(lambda t, rb: rows.append((t, rb.num_rows)))
        return inp, out.probe()

    inp, probe = worker.dataflow(dataflow)
    timings = []
    for epoch, table in enumerate([first] + small):
        n = table.num_rows
        lo, hi = n * worker.index // worker.peers, n * (worker.index + 1) // worker.peers
        start = time.perf_counter()
        for rb in table.slice(lo, hi - lo).to_batches():
            inp.send(rb)
        inp.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(inp.time))
        timings.append(time.perf_counter() - start)
    inp.close()
    while worker.step():
        pass
    return [("time", timings), ("rows", rows)]


def run_stream(first: pa.Table, small: list, build: Callable, threads: int = 2) -> tuple:
    """``(seconds per epoch, rows emitted per epoch)`` of ``build`` on ``threads`` workers."""
    parts = ts.execute(functools.partial(_work, first=first, small=small, build=build), threads=threads,
                       timeout=3600)
    seconds = np.max([dict(p)["time"] for p in parts], axis=0)
    rows = np.zeros(len(small) + 1, np.int64)
    for p in parts:
        for t, n in dict(p)["rows"]:
            rows[t] += n
    return seconds, rows


def bench_pagerank(m: int, epochs: int, changes: int, deletions: float, seed: int = 1) -> dict:
    first, small, final = changelog(m, epochs, changes, deletions, seed)
    seconds, rows = run_stream(first, small, lambda e: ts.graph.pagerank_stream(e, tolerance=TOLERANCE))
    start = time.perf_counter()
    ts.graph.pagerank(final, iterations=1000, tolerance=TOLERANCE, workers=2)
    scratch = time.perf_counter() - start
    return {"algorithm": "pagerank_stream (tol 1e-9)", "first": seconds[0],
            "median": statistics.median(seconds[1:]), "rows": int(np.median(rows[1:])), "scratch": scratch}


def bench_shortest_paths(m: int, epochs: int, changes: int, deletions: float, seed: int = 1) -> dict:
    first, small, final = changelog(m, epochs, changes, deletions, seed)
    source = int(first["src"][0].as_py())
    seconds, rows = run_stream(first, small, lambda e: ts.graph.shortest_paths_stream(e, [source]))
    start = time.perf_counter()
    ts.graph.shortest_paths(final, [source], workers=2)
    scratch = time.perf_counter() - start
    return {"algorithm": "shortest_paths_stream (1 src)", "first": seconds[0],
            "median": statistics.median(seconds[1:]), "rows": int(np.median(rows[1:])), "scratch": scratch}


ENTRIES = [bench_pagerank, bench_shortest_paths]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", type=int, default=2_000_000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--deletions", default="0,0.1", help="comma-separated fractions of withdrawn edges")
    parser.add_argument("--only", default="", help="run only the entries whose name contains this")
    args = parser.parse_args()
    print(f"{'algorithm':32} {'deletions':>9} {'first epoch':>12} {'median epoch':>13} {'rows/epoch':>11} "
          f"{'from scratch':>13} {'speed-up':>9}")
    for fraction in (float(f) for f in args.deletions.split(",")):
        for entry in [e for e in ENTRIES if args.only in e.__name__]:
            r = entry(args.edges, args.epochs, args.changes, fraction)
            print(f"{r['algorithm']:32} {fraction:9.0%} {r['first']:11.2f}s {r['median'] * 1e3:11.1f}ms "
                  f"{r['rows']:11,} {r['scratch']:12.2f}s {r['scratch'] / r['median']:8.1f}x", flush=True)


if __name__ == "__main__":
    main()
