"""Benchmark the incremental (changelog) stream forms of ts.graph against their batch
forms recomputing from scratch.

For each size m: a random graph of m edges over m/2 vertices (``ts.graph.random_edges``
on a local Spark, brought to the driver as Arrow) is loaded in one epoch, then
``--epochs`` epochs of ``--changes`` changed edges each run through the stream form on
``--threads`` worker threads: one run of random inserts, one where ``--delete-share``
of each epoch withdraws edges of the graph (diff -1).  Per algorithm and run it prints
the first epoch's time, the median ms per small epoch, the rows emitted per small epoch
and per changed edge, the batch form on the final graph (from scratch, same threads)
and the ratio; then it checks that the folded changelog equals the batch result.

Algorithms are entries of ``ALGORITHMS``: a stream form (edge changelog stream in,
result changelog out), the batch form, and how to compare the two results --
``components``, ``pagerank_stream`` (tolerance 1e-9 and its default output tolerance;
compared in L1 against the bound its docstring states), ``pagerank_stream_every`` (the
same with ``output_tolerance=0``: every rank it changes re-emitted, beside it in the
same run) and ``shortest_paths_stream`` (hop counts from one source, the first edge's
``src``; exact).

    python jobs/benchmarks/bench_incremental.py                      # 2,000,000 edges
    python jobs/benchmarks/bench_incremental.py --sizes 2000000,20000000
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa

import timely_spark as ts
from timely_spark.graph.pagerank_incremental import PAGERANK_OUTPUT_TOLERANCE

TOLERANCE = 1e-9                                         # pagerank_stream's, and the batch form's
OUTPUT_TOLERANCE = PAGERANK_OUTPUT_TOLERANCE             # pagerank_stream's default
DAMPING = 0.85


@dataclass
class Entry:
    """One algorithm: ``stream(edges, base)`` builds the stream form over a changelog of
    edges (``base``: the graph loaded in the first epoch), ``batch(table, threads, base)``
    recomputes from scratch, ``keys`` are the result columns that identify a row (the
    folded changelog and the batch result are compared on them and ``value``: equal,
    or with ``l1`` set, within ``l1(vertices, sum of the folded values)`` summed over all
    rows)."""

    stream: Callable[[Any, pa.Table], Any]
    batch: Callable[[pa.Table, int, pa.Table], pa.Table]
    keys: list
    value: str
    l1: Optional[Callable[[int, float], float]] = None


def _source(base: pa.Table) -> list:
    return [int(base["src"][0].as_py())]


def _pagerank(output_tolerance: float) -> Entry:
    return Entry(
        stream=lambda edges, base: ts.graph.pagerank_stream(edges, tolerance=TOLERANCE, damping=DAMPING,
                                                            output_tolerance=output_tolerance),
        batch=lambda table, threads, base: ts.graph.pagerank(table, iterations=1000, damping=DAMPING,
                                                            tolerance=TOLERANCE, workers=threads),
        keys=["vertex"], value="rank",
        # pagerank_stream's documented bound, plus the batch form's own error at that tolerance
        l1=lambda n, total: output_tolerance * total + 2 * n * TOLERANCE / (1 - DAMPING) + n * TOLERANCE)


ALGORITHMS: dict[str, Entry] = {
    "components": Entry(stream=lambda edges, base: ts.graph.components(edges),
                        batch=lambda table, threads, base: ts.graph.connected_components(table, workers=threads),
                        keys=["vertex"], value="component"),
    "pagerank_stream": _pagerank(OUTPUT_TOLERANCE),
    "pagerank_stream_every": _pagerank(0.0),
    "shortest_paths_stream": Entry(
        stream=lambda edges, base: ts.graph.shortest_paths_stream(edges, _source(base)),
        batch=lambda table, threads, base: ts.graph.shortest_paths(table, _source(base), workers=threads),
        keys=["vertex", "source"], value="distance"),
}


def changes(rng: np.random.Generator, base: pa.Table, vertices: int, epochs: int, size: int, delete_share: float):
    """Per small epoch, a batch of ``size`` edge rows: inserts of random edges, and
    withdrawals of distinct rows of ``base`` (never one withdrawn twice)."""
    deletes = int(round(size * delete_share))
    withdrawn = rng.choice(base.num_rows, deletes * epochs, replace=False) if deletes else np.zeros(0, np.int64)
    out = []
    for e in range(epochs):
        n = size - deletes
        rows = base.take(withdrawn[e * deletes:(e + 1) * deletes])
        out.append(pa.record_batch({
            "src": np.concatenate([rng.integers(0, vertices, n), rows["src"].to_numpy()]),
            "dst": np.concatenate([rng.integers(0, vertices, n), rows["dst"].to_numpy()]),
            "diff": np.concatenate([np.ones(n, np.int64), -np.ones(deletes, np.int64)])}))
    return out


def run_stream(entry: Entry, base: pa.Table, epochs: list, threads: int) -> tuple[float, list, list, pa.Table]:
    """(first epoch s, per small epoch s, rows emitted per small epoch, all output)."""
    def work(worker):
        out: list = []

        def build(scope):
            inp, edges = scope.new_input()
            probe = entry.stream(edges, base).inspect_time(lambda t, rb: out.append((t, rb))).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        times = []
        for e, batch in enumerate([base.combine_chunks().to_batches()[0] if base.num_rows else None, *epochs]):
            start = time.perf_counter()
            if worker.index == 0 and batch is not None:
                inp.send(batch)
            inp.advance_to(e + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=3600)
            times.append(time.perf_counter() - start)
        inp.close()
        while worker.step():
            pass
        return times, out

    parts = ts.execute(work, threads=threads, timeout=7200)
    times = [max(p[0][i] for p in parts) for i in range(len(parts[0][0]))]
    rows = [0] * (len(epochs) + 1)
    batches = []
    for _, out in parts:
        for t, rb in out:
            rows[t] += rb.num_rows
            batches.append(rb)
    result = pa.Table.from_batches(batches) if batches else None
    return times[0], times[1:], rows[1:], result


def fold(table: pa.Table, keys: list, value: str) -> pa.Table:
    """The collection a changelog table describes (``ts.collection``), one row per key."""
    folded = ts.collection(table.select(keys + [value, "diff"]))
    if folded.select(keys).group_by(keys).aggregate([]).num_rows != folded.num_rows:
        raise AssertionError("the folded changelog holds a key more than once")
    return folded.sort_by([(k, "ascending") for k in keys])


def final_graph(base: pa.Table, epochs: list) -> pa.Table:
    """The edges the changelog leaves (each row as many times as its diffs sum to)."""
    log = pa.concat_tables([base.append_column("diff", pa.array(np.ones(base.num_rows, np.int64))),
                            *(pa.Table.from_batches([b]) for b in epochs)])
    summed = log.group_by(["src", "dst"]).aggregate([("diff", "sum")])
    counts = summed["diff_sum"].to_numpy()
    idx = np.repeat(np.arange(len(counts)), np.maximum(counts, 0))
    return summed.select(["src", "dst"]).take(idx)


def bench(name: str, entry: Entry, base: pa.Table, vertices: int, args: argparse.Namespace) -> None:
    for label, share in (("inserts", 0.0), (f"{args.delete_share:.0%} deletions", args.delete_share)):
        rng = np.random.default_rng(args.seed + 1)
        epochs = changes(rng, base, vertices, args.epochs, args.changes, share)
        first, small, rows, result = run_stream(entry, base, epochs, args.threads)
        graph = final_graph(base, epochs)
        scratch = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            expected = entry.batch(graph, args.threads, base)
            scratch.append(time.perf_counter() - start)
        got = fold(result, entry.keys, entry.value)
        expected = expected.sort_by([(k, "ascending") for k in entry.keys])
        if entry.l1 is not None:
            same = got.select(entry.keys).equals(expected.select(entry.keys).cast(got.select(entry.keys).schema))
            values = got[entry.value].to_numpy()
            same = same and (np.abs(values - expected[entry.value].to_numpy()).sum()
                             <= entry.l1(got.num_rows, float(values.sum())))
        else:
            same = got.equals(expected.select(got.column_names).cast(got.schema))
        if not same:
            raise AssertionError(f"{name} ({label}): the folded changelog differs from the batch form")
        ms = statistics.median(small) * 1000
        from_scratch = statistics.median(scratch) * 1000
        per_edge = statistics.median(rows) / args.changes
        print(f"| {name} | {base.num_rows:,} | {label} | {first:.2f} s | {ms:.1f} ms | "
              f"{statistics.median(rows):,.0f} ({per_edge:.2f}/edge, max {max(rows):,}) | "
              f"{from_scratch:.0f} ms | {from_scratch / ms:.0f}x |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000000", help="comma-separated edge counts")
    parser.add_argument("--epochs", type=int, default=20, help="small epochs after the load")
    parser.add_argument("--changes", type=int, default=1000, help="changed edges per small epoch")
    parser.add_argument("--delete-share", type=float, default=0.1, help="share of withdrawals in the second run")
    parser.add_argument("--threads", type=int, default=2, help="worker threads (stream and batch forms)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of the batch form (median)")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS), help="comma-separated names of ALGORITHMS")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    spark = ts.spark.get_session("bench incremental", master="local[2]")
    graphs = {}
    for m in (int(s) for s in args.sizes.split(",")):
        edges = ts.graph.random_edges(spark, vertices=m // 2, edges=m, seed=args.seed)
        graphs[m] = edges.toArrow().cast(pa.schema([("src", pa.int64()), ("dst", pa.int64())]))
    spark.stop()                                         # the timings below use no Spark
    print(f"{args.epochs} epochs of {args.changes:,} changed edges after one epoch loading the graph, "
          f"{args.threads} worker threads\n")
    print("| algorithm | edges | small epochs | first epoch | per small epoch (median) | rows emitted per epoch "
          "(median) | batch form from scratch | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for m, base in graphs.items():
        for name in args.algorithms.split(","):
            bench(name, ALGORITHMS[name], base, m // 2, args)
    print("\nevery run's folded changelog equals its batch form on the final graph")


if __name__ == "__main__":
    main()
