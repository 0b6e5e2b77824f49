"""Connected components by label propagation in a timely loop, across Spark barrier workers.

Reads an edge list (Parquet or CSV with columns ``src``, ``dst``; or generates a
random graph), runs label propagation inside ``scope.iterative`` with one timely
worker per barrier task -- each vertex's label is the smallest vertex id in its
component -- and writes ``(vertex, component)`` as Parquet, then prints a summary.

    spark-submit jobs/connected_components.py --vertices 10000 --edges 20000 --out /tmp/cc
    python jobs/connected_components.py --edges-path edges.parquet --out /tmp/cc --workers 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import cloudpickle

import timely_spark as ts

if __name__ != "__main__":   # imported (by the benchmark, tests): executors cannot import jobs/
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

INF = float("inf")


def label_propagation(scope, edges):
    """``edges``: a stream of ``(a, b)`` in both directions.  Returns a stream of
    ``(vertex, smallest vertex id in its component)`` at the outer time, one per vertex.

    Each edge lives on the worker that owns its first vertex (``a % peers``).  Once
    all edges are in, each worker contracts its edges with a union-find; inside the
    timely loop, a component's label is the smallest id it has heard of, and
    whenever it drops, the new label goes to the component's vertices owned by other
    workers.  The loop ends when no label changes anywhere.
    """
    from timely_spark.dataflow.operator import OperatorBuilder
    from timely_spark.dataflow.ports import OutputHandle

    def loop(inner):
        handle, cycle = inner.feedback(1)
        links = edges.enter(inner)
        b = OperatorBuilder(inner, "Propagate")
        edge_in = b.new_input(links, lambda e: e[0])
        proposal_in = b.new_input(cycle, lambda p: p[0])
        ports = [b.new_output() for _ in range(2)]
        out_proposals, out_labels = (OutputHandle(port, b.core) for port, _ in ports)
        b.core.handles.extend([out_proposals, out_labels])
        cap = {"initial": b.initial_capability()}
        peers, index = inner.peers, inner.index
        parent: dict = {}
        label: dict = {}                  # root -> smallest id heard of
        members: dict = {}                # root -> vertices this worker owns
        boundary: dict = {}               # root -> vertices owned by other workers

        def find(x):
            return find_root(parent, x)

        def contract():
            for v in list(parent):
                find(v)
            for v in parent:
                r = parent[v]
                label[r] = min(label.get(r, v), v)
                (members if v % peers == index else boundary).setdefault(r, []).append(v)

        def send(held, roots):
            out_proposals.session(held).give_batch([(b, label[r]) for r in roots for b in boundary.get(r, ())])
            out_labels.session(held).give_batch([(v, label[r]) for r in roots for v in members.get(r, ())])

        def logic():
            for _, batch in edge_in:
                for a, c in batch:
                    ra, rc = find(a), find(c)
                    if ra != rc:                       # the smaller root wins
                        parent[max(ra, rc)] = min(ra, rc)
                    parent.setdefault(a, a)            # every vertex is known (roots point to themselves)
                    parent.setdefault(c, c)
            initial = cap["initial"]
            if initial is not None and edge_in.frontier.is_empty():   # every edge is in
                contract()
                send(initial, list(label))
                initial.drop()
                cap["initial"] = None
            if initial is None or edge_in.frontier.is_empty():
                for held, batch in proposal_in:
                    changed = set()
                    for v, l in batch:
                        r = find(v)
                        if l < label.get(r, l + 1):
                            label[r] = l
                            changed.add(r)
                    if changed:
                        send(held, changed)

        b.build(logic, notify=True)
        ports[0][1].connect_loop(handle)
        return ports[1][1].leave()

    def keep_min(acc, batch):
        for v, l in batch:
            if l < acc.get(v, INF):
                acc[v] = l
        return acc

    return scope.iterative(loop).accumulate({}, keep_min).flat_map(lambda labels: labels.items())


def find_root(parent: dict, x):
    """Union-find lookup with path compression (a vertex missing from ``parent`` is a root)."""
    root = x
    while parent.get(root, root) != root:
        root = parent[root]
    while parent.get(x, x) != root:
        parent[x], x = root, parent[x]
    return root


def union_find(edges) -> dict:
    """The plain reference: ``{vertex: smallest vertex id in its component}`` by union-find."""
    parent: dict = {}
    for a, b in edges:
        ra, rb = find_root(parent, a), find_root(parent, b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {v: find_root(parent, v) for e in edges for v in e}


def components(scope, batches):
    """The DataFrame bridge's dataflow: record batches of (src, dst) in, of
    (vertex, component) out."""
    import pyarrow as pa

    edges = batches.flat_map(lambda rb: zip(rb.column(0).to_pylist(), rb.column(1).to_pylist()))
    both = edges.flat_map(lambda e: (e, (e[1], e[0])))
    labels = label_propagation(scope, both)
    return labels.map_batches(lambda rows: [pa.record_batch(
        {"vertex": pa.array([v for v, _ in rows], pa.int64()),
         "component": pa.array([c for _, c in rows], pa.int64())})])


def connected_components(edges_df, workers: int):
    """``(vertex, component)`` for an edge DataFrame with columns ``src``, ``dst``."""
    from pyspark.sql import functions as F

    edges_df = edges_df.select(F.col("src").cast("long"), F.col("dst").cast("long")).repartition(workers)
    return ts.spark.transform(edges_df, components, "vertex long, component long")


def random_edges(spark, vertices: int, edges: int, seed: int):
    from pyspark.sql import functions as F

    return spark.range(edges).select(
        (F.rand(seed) * vertices).cast("long").alias("src"),
        (F.rand(seed + 1) * vertices).cast("long").alias("dst"))


def read_edges(spark, path: str):
    if path.endswith(".csv") or os.path.isfile(path) and not path.endswith(".parquet"):
        return spark.read.csv(path, header=True, inferSchema=True)
    return spark.read.parquet(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges-path", help="Parquet or CSV edge list with columns src, dst")
    parser.add_argument("--vertices", type=int, default=10_000, help="random graph: vertex ids 0..N-1")
    parser.add_argument("--edges", type=int, default=20_000, help="random graph: number of edges")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2, help="timely workers (barrier tasks)")
    parser.add_argument("--out", default="out/connected_components", help="Parquet output directory")
    parser.add_argument("--master", help="Spark master (default: conf/spark-defaults.conf, or spark-submit's)")
    args = parser.parse_args()

    conf_dir = os.environ.get("SPARK_CONF_DIR") or str(Path(__file__).resolve().parent.parent / "conf")
    spark = ts.spark.get_session("timely connected components", master=args.master, conf_dir=conf_dir)
    edges = read_edges(spark, args.edges_path) if args.edges_path else random_edges(
        spark, args.vertices, args.edges, args.seed)
    start = time.perf_counter()
    labels = connected_components(edges, args.workers)
    labels.write.mode("overwrite").parquet(args.out)
    elapsed = time.perf_counter() - start
    result = spark.read.parquet(args.out)
    sizes = result.groupBy("component").count()
    n_vertices = result.count()
    n_components = sizes.count()
    largest = sizes.agg({"count": "max"}).collect()[0][0]
    print(f"{n_vertices} vertices, {n_components} components, largest {largest} vertices; "
          f"{args.workers} timely workers, {elapsed:.1f} s; written to {args.out}")


if __name__ == "__main__":
    main()
