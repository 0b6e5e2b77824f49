"""Shortest paths from sources on Spark barrier workers (ts.graph.shortest_paths).

Reads Parquet or CSV with columns ``src``, ``dst`` (and optionally a weight column;
or generates a random graph), writes ``(vertex, source, distance)`` as Parquet and
prints a one-line summary.  Hop counts without ``--weight``.

    spark-submit jobs/examples/shortest_paths.py --edges-path edges.parquet --sources 0,42 --weight w --out /tmp/sp
    python jobs/examples/shortest_paths.py --vertices 10000 --edges 50000 --sources 0 --out /tmp/sp
"""

from __future__ import annotations

import argparse
import time

import timely_spark as ts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges-path", help="Parquet or CSV edge list with columns src, dst")
    parser.add_argument("--src", default="src")
    parser.add_argument("--dst", default="dst")
    parser.add_argument("--weight", help="non-negative weight column (default: hop counts)")
    parser.add_argument("--sources", default="0", help="comma-separated source vertex ids")
    parser.add_argument("--vertices", type=int, default=10_000, help="random graph: vertex ids 0..N-1")
    parser.add_argument("--edges", type=int, default=20_000, help="random graph: number of edges")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2, help="timely workers (barrier tasks)")
    parser.add_argument("--out", default="out/shortest_paths", help="Parquet output directory")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    args = parser.parse_args()

    spark = ts.spark.get_session("timely shortest paths", master=args.master)
    if args.edges_path:
        path = args.edges_path
        csv = path.endswith(".csv")
        edges = spark.read.csv(path, header=True, inferSchema=True) if csv else spark.read.parquet(path)
    else:
        edges = ts.graph.random_edges(spark, args.vertices, args.edges, args.seed, args.src, args.dst)
    sources = [int(s) for s in args.sources.split(",") if s.strip()]
    start = time.perf_counter()
    paths = ts.graph.shortest_paths(edges, sources, weight=args.weight, src=args.src, dst=args.dst,
                                    workers=args.workers)
    paths.write.mode("overwrite").parquet(args.out)
    elapsed = time.perf_counter() - start
    result = spark.read.parquet(args.out)
    far = result.agg({"distance": "max"}).collect()[0][0]
    print(f"{result.count()} (vertex, source) pairs reached from {len(sources)} sources, farthest {far}; "
          f"{args.workers} timely workers, {elapsed:.1f} s; written to {args.out}")


if __name__ == "__main__":
    main()
