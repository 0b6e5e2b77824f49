"""PageRank of a directed edge list on Spark barrier workers (ts.graph.pagerank).

Reads Parquet or CSV with columns ``src``, ``dst`` (or generates a random graph),
writes ``(vertex, rank)`` as Parquet and prints a one-line summary.

    spark-submit jobs/examples/pagerank.py --edges-path edges.parquet --out /tmp/pr --iterations 20
    python jobs/examples/pagerank.py --vertices 10000 --edges 50000 --out /tmp/pr
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
    parser.add_argument("--vertices", type=int, default=10_000, help="random graph: vertex ids 0..N-1")
    parser.add_argument("--edges", type=int, default=20_000, help="random graph: number of edges")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--damping", type=float, default=0.85)
    parser.add_argument("--tolerance", type=float, help="stop when the L1 change drops below this")
    parser.add_argument("--workers", type=int, default=2, help="timely workers (barrier tasks)")
    parser.add_argument("--out", default="out/pagerank", help="Parquet output directory")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    args = parser.parse_args()

    spark = ts.spark.get_session("timely pagerank", master=args.master)
    if args.edges_path:
        path = args.edges_path
        csv = path.endswith(".csv")
        edges = spark.read.csv(path, header=True, inferSchema=True) if csv else spark.read.parquet(path)
    else:
        edges = ts.graph.random_edges(spark, args.vertices, args.edges, args.seed, args.src, args.dst)
    start = time.perf_counter()
    ranks = ts.graph.pagerank(edges, iterations=args.iterations, damping=args.damping, tolerance=args.tolerance,
                              src=args.src, dst=args.dst, workers=args.workers)
    ranks.write.mode("overwrite").parquet(args.out)
    elapsed = time.perf_counter() - start
    result = spark.read.parquet(args.out)
    top = result.orderBy(result["rank"].desc()).first()
    print(f"{result.count()} vertices ranked, top vertex {top.vertex if top else None} "
          f"({top.rank if top else 0:.6f}); {args.workers} timely workers, {elapsed:.1f} s; written to {args.out}")


if __name__ == "__main__":
    main()
