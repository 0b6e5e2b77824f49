"""Connected components three ways in one SparkSession (local[2]), checked against each other.

(a) timely label propagation on 2 barrier workers (``ts.graph.connected_components``);
(b) the same label propagation the usual PySpark way: a DataFrame join + groupBy
    loop until no label changes;
(c) a single-threaded Python union-find on the driver.

Also prints how long the mesh set-up inside the barrier tasks takes: the address
swap (``allGather``) and the authenticated connections.

    python jobs/benchmarks/bench_connected_components.py [--vertices N] [--edges N]
"""

from __future__ import annotations

import argparse
import time

import timely_spark as ts
from timely_spark.graph import connected_components, union_find


def dataframe_label_propagation(edges_df) -> tuple[dict[int, int], int]:
    from pyspark.sql import functions as F

    both = edges_df.union(edges_df.select(F.col("dst").alias("src"), F.col("src").alias("dst"))).cache()
    labels = both.select(F.col("src").alias("v")).distinct().withColumn("label", F.col("v")).localCheckpoint()
    rounds = 0
    while True:
        rounds += 1
        proposals = both.join(labels, both.src == labels.v).select(both.dst.alias("v"), labels.label)
        new = labels.union(proposals).groupBy("v").agg(F.min("label").alias("label")).localCheckpoint()
        changed = (new.join(labels.withColumnRenamed("label", "old"), "v")
                   .where(F.col("label") != F.col("old")).count())
        labels = new
        if changed == 0:
            break
    result = {r["v"]: r["label"] for r in labels.collect()}
    both.unpersist()
    return result, rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vertices", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    spark = ts.spark.get_session("bench connected components", master="local[2]")
    edges_df = ts.graph.random_edges(spark, args.vertices, args.edges, args.seed).localCheckpoint()
    edges = [(r["src"], r["dst"]) for r in edges_df.collect()]
    def identity(df):
        return ts.spark.transform(df, lambda scope, batches: batches, "src long, dst long").count()

    identity(edges_df)                                          # warm up the Python (Arrow) workers
    start = time.perf_counter()
    identity(edges_df)
    t_floor = time.perf_counter() - start

    start = time.perf_counter()
    timely = {r["vertex"]: r["component"] for r in connected_components(edges_df, workers=2).collect()}
    t_timely = time.perf_counter() - start

    start = time.perf_counter()
    frame, rounds = dataframe_label_propagation(edges_df)
    t_frame = time.perf_counter() - start

    start = time.perf_counter()
    reference = union_find(edges)
    t_uf = time.perf_counter() - start

    assert timely == reference, "timely and union-find disagree"
    assert frame == reference, "the DataFrame loop and union-find disagree"
    stats: dict = {}
    ts.spark.run(spark, lambda w: None, workers=2, stats=stats)
    gather = max(t["gather_seconds"] for t in stats["tasks"])
    connect = max(t["connect_seconds"] for t in stats["tasks"])

    components = len(set(reference.values()))
    print(f"graph: {len(reference):,} vertices with edges, {args.edges:,} edges, {components:,} components")
    print(f"(a) timely, 2 barrier workers      {t_timely:8.2f} s")
    print(f"(b) DataFrame join+groupBy loop    {t_frame:8.2f} s   ({rounds} rounds)   "
          f"(b)/(a) = {t_frame / t_timely:.1f}")
    print(f"(c) Python union-find              {t_uf:8.2f} s   (a)/(c) = {t_timely / t_uf:.1f}")
    print(f"floor: the same barrier transform passing edges through unchanged {t_floor:.2f} s")
    print(f"mesh set-up in the barrier tasks: connect {connect * 1000:.1f} ms after the address swap; "
          f"allGather itself {gather * 1000:.0f} ms (Spark's barrier RPC, polled once a second)")
    spark.stop()


if __name__ == "__main__":
    main()
