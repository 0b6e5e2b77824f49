"""Benchmark recursion over changelogs: reachability and connected components through
``iterate``, kept current as the graph changes, against recomputing them from scratch.

A random directed graph of ``--edges`` edges over ``--edges / 2`` vertices (numpy, seeded)
is loaded in a first epoch, then ``--epochs`` small epochs of ``--changes`` changed edges
run through the same ``iterate`` dataflow on ``--threads`` worker threads: one run of
inserts only, one where ``--delete-share`` of each epoch withdraws edges of the graph.
Queries: reachability from ``--roots`` roots (join + distinct in the loop) and connected
components by min-label propagation (join + reduce(min) in the loop, edges both ways).

Per query and run it prints the first epoch, the median per small epoch, the rounds a
small epoch ran (median) and the rows it emitted (median), and side by side, in the same
run, the final graph computed from scratch through the same dataflow (one epoch) and by
the batch ``ts.graph`` algorithm (``shortest_paths`` from one new vertex with an edge to
each root; ``connected_components``) -- and checks that the incremental result equals both.  The machine may be loaded:
compare the ratios, not the absolute times.

    python jobs/benchmarks/bench_recursion.py                  # 1,000,000 edges
    python jobs/benchmarks/bench_recursion.py --edges 100000 --epochs 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import timely_spark as ts

LABELS = pa.schema([("node", pa.int64()), ("label", pa.int64())])


def smallest(rows: pa.Table, keys: list) -> pa.Table:
    return rows.group_by(keys).aggregate([("label", "min")]).rename_columns(["node", "label"])


def reach(edges: Any, roots: Any, seen: list) -> Any:
    """Reachability from ``roots``: the nodes of ``roots`` and the ends of edges from reached nodes."""
    links = edges.select(node="src", dst="dst", diff="diff")

    def body(nodes: Any, inner: Any) -> Any:
        nodes = nodes.inspect_time(lambda t, b: seen.append(t))
        step = nodes.join(links.enter(inner), "node", running=True).select(node="dst", diff="diff")
        return step.concat(roots.enter(inner)).distinct()
    return roots.iterate(body)


def components(edges: Any, roots: Any, seen: list) -> Any:
    """Each node's smallest reachable id, edges both ways (min-label propagation)."""
    both = edges.select(node="src", dst="dst", diff="diff").concat(edges.select(node="dst", dst="src", diff="diff"))
    labels = both.select(node="node", label="node", diff="diff").distinct()

    def body(current: Any, inner: Any) -> Any:
        current = current.inspect_time(lambda t, b: seen.append(t))
        offers = current.join(both.enter(inner), "node", running=True).select(node="dst", label="label", diff="diff")
        return offers.concat(labels.enter(inner)).group_by("node").reduce(smallest, LABELS)
    return labels.iterate(body)


QUERIES = {"reachability": reach, "components": components}


def run(query: str, epochs: list, roots: pa.Table, threads: int) -> tuple[list, list, list, pa.Table]:
    """Seconds, rounds and rows emitted per epoch, and the folded output at the end."""
    def work(worker: Any) -> Any:
        rounds: list = []
        emitted: list = []

        def build(scope: Any) -> Any:
            (edge_in, edges), (root_in, root_stream) = scope.new_input(), scope.new_input()
            out = QUERIES[query](edges, root_stream, rounds)
            out.inspect_time(lambda t, b: emitted.append((t, b)))
            probe = out.probe()
            return edge_in, root_in, probe

        edge_in, root_in, probe = worker.dataflow(build)
        seconds = []
        for epoch, table in enumerate(epochs):
            begin = time.perf_counter()
            mine = table.take(np.arange(worker.index, table.num_rows, worker.peers))
            if mine.num_rows:
                edge_in.send_batch(mine)
            if epoch == 0 and worker.index == 0:
                root_in.send_batch(roots)
            edge_in.advance_to(epoch + 1)
            root_in.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(epoch + 1))
            seconds.append(time.perf_counter() - begin)
        return seconds, rounds, emitted

    parts = ts.execute(work, threads=threads, timeout=24 * 3600)
    seconds = parts[0][0]
    rounds = [1 + max((t[1] for p in parts for t in p[1] if t[0] == e), default=-1) for e in range(len(epochs))]
    rows = [sum(b.num_rows for p in parts for t, b in p[2] if t == e) for e in range(len(epochs))]
    tables = [b for p in parts for _, b in p[2]]
    folded = ts.collection(pa.Table.from_batches(tables)) if tables else LABELS.empty_table()
    return seconds, rounds, rows, folded


def random_changes(rng: np.random.Generator, live: pa.Table, vertices: int, size: int, share: float) -> pa.Table:
    """``size`` changed edges: ``share`` of them withdrawals of distinct live edges, the rest new edges."""
    deletes = int(size * share)
    pick = rng.choice(live.num_rows, deletes, replace=False)
    gone = live.select(["src", "dst"]).take(pa.array(pick)).append_column(
        "diff", pa.array(np.full(deletes, -1, np.int64)))
    new = pa.table({"src": rng.integers(0, vertices, size - deletes), "dst": rng.integers(0, vertices, size - deletes),
                    "diff": np.ones(size - deletes, np.int64)})
    return pa.concat_tables([gone, new])


def batch(query: str, graph: pa.Table, roots: pa.Table, threads: int) -> tuple[float, set]:
    """Seconds and result of the batch ``ts.graph`` algorithm on ``graph``."""
    graph = graph.select(["src", "dst"])
    begin = time.perf_counter()
    if query == "reachability":
        # One source, not one per root: a new vertex with an edge to every root (a search from 100
        # sources would compute 100 distance columns where reachability needs one set).
        above = int(pc.max(pc.max_element_wise(graph["src"], graph["dst"])).as_py() or 0) + 1
        top = pa.table({"src": pa.array(np.full(len(roots), above), pa.int64()), "dst": roots["node"]})
        paths = ts.graph.shortest_paths(pa.concat_tables([graph, top.cast(graph.schema)]), [above], workers=threads)
        seconds = time.perf_counter() - begin
        result = set(paths["vertex"].to_pylist()) - {above}
        return seconds, {(v,) for v in result}
    labels = ts.graph.connected_components(graph, workers=threads)
    seconds = time.perf_counter() - begin
    return seconds, set(zip(labels.column(0).to_pylist(), labels.column(1).to_pylist()))


def bench(query: str, base: pa.Table, roots: pa.Table, args: argparse.Namespace, share: float) -> None:
    """One query, one kind of change: the row of the table."""
    rng = np.random.default_rng(args.seed + 1)
    vertices = args.edges // 2
    epochs = [with_ones(base)]
    live = base
    for _ in range(args.epochs):
        change = random_changes(rng, live, vertices, args.changes, share)
        epochs.append(change)
        live = ts.collection(pa.concat_tables([with_ones(live), change]))
    seconds, rounds, rows, folded = run(query, epochs, roots, args.threads)
    scratch, scratch_rounds, _, again = run(query, [with_ones(live)], roots, args.threads)
    batch_seconds, expected = batch(query, live, roots, args.threads)
    got = {tuple(r.values()) for r in folded.to_pylist()}
    assert got == {tuple(r.values()) for r in again.to_pylist()} == expected, \
        f"{query}: the incremental result differs from the computation from scratch"
    small = statistics.median(seconds[1:])
    kind = "inserts" if share == 0 else f"{share:.0%} deletions"
    print(f"| {query} | {kind} | {base.num_rows:,} | {seconds[0]:.2f} s ({rounds[0]} rounds) | {small * 1000:.0f} ms "
          f"({statistics.median(rounds[1:]):.0f} rounds) | {statistics.median(rows[1:]):.0f} | {scratch[0]:.2f} s "
          f"({scratch_rounds[0]} rounds) | {batch_seconds:.2f} s | {scratch[0] / small:.1f}x |", flush=True)


def with_ones(edges: pa.Table) -> pa.Table:
    """``edges`` (src, dst) as a changelog of insertions."""
    return edges.select(["src", "dst"]).append_column("diff", pa.array(np.ones(edges.num_rows, np.int64)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=20, help="small epochs after the load")
    parser.add_argument("--changes", type=int, default=100, help="changed edges per small epoch")
    parser.add_argument("--delete-share", type=float, default=0.1)
    parser.add_argument("--roots", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    vertices = args.edges // 2
    base = pa.table({"src": rng.integers(0, vertices, args.edges), "dst": rng.integers(0, vertices, args.edges)})
    roots = pa.table({"node": rng.choice(vertices, args.roots, replace=False).astype(np.int64),
                      "diff": np.ones(args.roots, np.int64)})
    print(f"{args.epochs} epochs of {args.changes} changed edges after a first epoch loading {args.edges:,} edges, "
          f"{args.threads} worker threads\n")
    print("| query | changes | edges | first epoch | per small epoch (median) | rows emitted per small epoch "
          "(median) | same dataflow from scratch | batch ts.graph | from scratch / small epoch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for query in args.queries.split(","):
        for share in (0.0, args.delete_share):
            bench(query, base, roots, args, share)


if __name__ == "__main__":
    main()
