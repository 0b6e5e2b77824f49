"""Connected components (vectorized, ts.graph.connected_components) across Spark barrier workers.

Reads an edge list (Parquet or CSV with columns ``src``, ``dst``; or generates a
random graph), runs :func:`timely_spark.graph.connected_components` (numpy forests
per barrier worker, merged on one; each vertex's label is the smallest vertex id in
its component) and writes ``(vertex, component)`` as Parquet, then prints a summary.

    spark-submit jobs/examples/connected_components.py --vertices 10000 --edges 20000 --out /tmp/cc
    python jobs/examples/connected_components.py --edges-path edges.parquet --out /tmp/cc --workers 2
"""

from __future__ import annotations

import argparse
import os
import time

import timely_spark as ts


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
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    args = parser.parse_args()

    spark = ts.spark.get_session("timely connected components", master=args.master)
    edges = read_edges(spark, args.edges_path) if args.edges_path else ts.graph.random_edges(
        spark, args.vertices, args.edges, args.seed)
    start = time.perf_counter()
    labels = ts.graph.connected_components(edges, workers=args.workers)
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
