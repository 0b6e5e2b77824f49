"""Benchmark ts.graph against DataFrame loops, numpy/scipy and Python, in one SparkSession.

For each size: a random graph (skewed in-degrees), then connected components
(ts.graph on Spark, naive DataFrame label propagation, large-star/small-star with
DataFrames, scipy on one core if importable, numpy ``ts.graph.forest`` on one core,
Python union-find) and PageRank, 20 iterations (ts.graph on Spark, a DataFrame
join/groupBy loop, a numpy mat-vec loop of the definition, scipy if importable).
Shortest paths (hop counts) from one source: ts.graph (Spark and local), a DataFrame relaxation loop,
scipy ``dijkstra`` if importable, Python heapq Dijkstra.
Each ts.graph method runs twice: on integer ids and on the same graph with string ids
(``"user<id>@example.com"``, mapped to dense ids inside the workers), ``string ids /
integer ids`` printed per algorithm.
Every method's result is checked equal (PageRank within 1e-9); prints times and ratios.
Every Spark method is timed up to its whole result on the driver as Arrow
(``DataFrame.toArrow()``), the same way for each.

    python jobs/bench_graph.py --sizes 200000,2000000 [--skip-slow-above 2000000]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import timely_spark as ts


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def make_graph(m: int, seed: int):
    rng = np.random.default_rng(seed)
    n = m // 2
    src = rng.integers(0, n, m)
    dst = (rng.zipf(1.8, m) * 7919 + rng.integers(0, n, m)) % n
    return src.astype(np.int64), dst.astype(np.int64)


def cc_naive(spark, edges):
    from pyspark.sql import functions as F

    both = edges.union(edges.select(F.col("dst").alias("src"), F.col("src").alias("dst"))).localCheckpoint()
    labels = both.select(F.col("src").alias("v")).distinct().select("v", F.col("v").alias("label")).localCheckpoint()
    rounds = 0
    while True:
        rounds += 1
        proposals = both.join(labels, both.src == labels.v).select(F.col("dst").alias("v"), "label")
        new = proposals.union(labels).groupBy("v").agg(F.min("label").alias("label")).localCheckpoint()
        changed = new.join(labels.withColumnRenamed("label", "old"), "v").where("label < old").count()
        labels = new
        if not changed:
            return labels, rounds


def cc_large_small_star(spark, edges):
    from pyspark.sql import functions as F

    e = edges.select(F.greatest("src", "dst").alias("src"), F.least("src", "dst").alias("dst")).distinct()
    e = e.localCheckpoint()
    rounds = 0
    while True:
        rounds += 1
        both = e.union(e.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
        m = both.groupBy("src").agg(F.least(F.min("dst"), F.col("src")).alias("m"))
        large = both.join(m, "src").where(F.col("dst") > F.col("src")).select(
            F.col("dst").alias("src"), F.col("m").alias("dst")).distinct()
        oriented = large.select(F.greatest("src", "dst").alias("src"), F.least("src", "dst").alias("dst"))
        oriented = oriented.where("src != dst")
        m2 = oriented.groupBy("src").agg(F.min("dst").alias("m"))
        small = oriented.join(m2, "src").select(F.col("dst").alias("src"), "m").union(
            m2.select("src", "m")).where("src != m").select(F.col("src"), F.col("m").alias("dst")).distinct()
        small = small.localCheckpoint()
        changed = small.exceptAll(e).count() + e.exceptAll(small).count()
        e = small
        if not changed:
            break
    labels = e.select(F.col("src").alias("v"), F.col("dst").alias("label")).union(
        e.select(F.col("dst").alias("v"), F.col("dst").alias("label"))).groupBy("v").agg(F.min("label").alias("label"))
    return labels, rounds


def pagerank_dataframe(spark, edges, iterations=20, d=0.85):
    from pyspark.sql import functions as F

    vertices = edges.select(F.col("src").alias("v")).union(edges.select(F.col("dst").alias("v"))).distinct()
    vertices = vertices.localCheckpoint()
    n = vertices.count()
    out = edges.groupBy("src").agg(F.count("*").alias("out")).localCheckpoint()
    ranks = vertices.select("v", F.lit(1.0 / n).alias("r")).localCheckpoint()
    for _ in range(iterations):
        with_out = ranks.join(out, ranks.v == out.src, "left")
        dangling = with_out.where(F.col("out").isNull()).agg(F.sum("r")).collect()[0][0] or 0.0
        contrib = edges.join(with_out.where(F.col("out").isNotNull()), "src").groupBy("dst").agg(
            F.sum(F.col("r") / F.col("out")).alias("c"))
        ranks = vertices.join(contrib, vertices.v == contrib.dst, "left").select(
            "v", ((1 - d) / n + d * (F.coalesce(F.col("c"), F.lit(0.0)) + dangling / n)).alias("r")).localCheckpoint()
    return ranks


def bfs_dataframe(spark, edges, source):
    from pyspark.sql import functions as F

    dist = spark.createDataFrame([(source, 0)], "v long, d long").localCheckpoint()
    frontier, rounds = dist, 0
    while True:
        rounds += 1
        reached = frontier.join(edges, frontier.v == edges.src).select(
            F.col("dst").alias("v"), (F.col("d") + 1).alias("d"))
        new = reached.distinct().join(dist, "v", "left_anti").localCheckpoint()
        if not new.count():
            return dist, rounds
        dist = dist.union(new).localCheckpoint()
        frontier = new


def scipy_graph(src, dst, transpose=False):
    """``(vertices, matrix)``: the distinct ids and a scipy CSR matrix with ``[u, v]`` for each
    edge u -> v (``[v, u]`` if ``transpose``)."""
    import scipy.sparse as sp

    m = len(src)
    vs, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    rows, cols = (inv[m:], inv[:m]) if transpose else (inv[:m], inv[m:])
    return vs, sp.csr_matrix((np.ones(m), (rows, cols)), shape=(len(vs), len(vs)))


def scipy_pagerank(src, dst, iterations, d=0.85):
    """PageRank of the definition in ts.graph.pagerank with a scipy CSR mat-vec per iteration."""
    vs, a = scipy_graph(src, dst, transpose=True)                          # a[v, u]: edges u -> v
    n = len(vs)
    out = np.asarray(a.sum(axis=0)).ravel()                                 # out-degrees of u
    dangling = out == 0
    inv_out = np.divide(1.0, out, out=np.zeros(n), where=~dangling)
    r = np.full(n, 1.0 / n)
    for _ in range(iterations):
        r = (1 - d) / n + d * (a @ (r * inv_out) + r[dangling].sum() / n)
    return vs, r


def to_dict(table, key, value):
    """A result delivered to the driver as a pyarrow.Table, as a dict (untimed)."""
    return dict(zip(table.column(key).to_pylist(), table.column(value).to_pylist()))


def paths(table) -> dict:
    """``{(vertex, source): distance}`` of a shortest-paths result."""
    columns = (table.column(c).to_pylist() for c in ("vertex", "source", "distance"))
    return {(v, s): d for v, s, d in zip(*columns)}


def as_strings(ids):
    """The string id of each integer id: ``17`` -> ``"user17@example.com"``."""
    import pyarrow.compute as pc

    return pc.binary_join_element_wise("user", pc.cast(ids, pa.string()), "@example.com", "")


def as_ints(strings):
    """The integer ids back from :func:`as_strings` (untimed checks)."""
    import pyarrow.compute as pc

    return pc.cast(pc.utf8_slice_codeunits(strings, 4, -12), pa.int64())


def check_string_components(rows, ref: dict) -> None:
    """``rows`` (string ids) has the components of ``ref`` (integer ids), each labelled by
    the smallest string id in it."""
    import pyarrow.compute as pc

    vertex = as_ints(rows.column("vertex"))
    label = as_ints(rows.column("component"))
    assert sorted(vertex.to_pylist()) == sorted(ref), "string-id components: other vertices"
    roots = pa.array([ref[v] for v in vertex.to_pylist()])
    assert pc.all(pc.equal(roots, pa.array([ref[v] for v in label.to_pylist()]))).as_py(), "wrong components"
    smallest = pa.table({"root": roots, "s": rows.column("vertex")}).group_by("root").aggregate([("s", "min")])
    want = dict(zip(smallest["root"].to_pylist(), smallest["s_min"].to_pylist()))
    assert [want[r] for r in roots.to_pylist()] == rows.column("component").to_pylist(), "not the smallest string"


def arrow_result(result):
    """Time a Spark method up to its result on the driver as Arrow (``toArrow``), the
    same way for every method: ``(DataFrame, rounds)`` or a DataFrame."""
    if isinstance(result, tuple):
        return result[0].toArrow(), result[1]
    return result.toArrow()


def bench(spark, m: int, seed: int, slow: bool, report) -> None:
    src, dst = make_graph(m, seed)
    table = pa.table({"src": src, "dst": dst})
    df = spark.createDataFrame(table.to_pandas()).repartition(2).localCheckpoint()
    df.count()
    text = pa.table({"src": as_strings(table["src"]), "dst": as_strings(table["dst"])})
    text_df = spark.createDataFrame(text.to_pandas()).repartition(2).localCheckpoint()
    text_df.count()
    print(f"\n== {m:,} edges, {len(ts.graph.sorted_unique(np.concatenate([src, dst]))):,} vertices ==")

    ref, t_uf = timed(lambda: ts.graph.union_find(zip(src.tolist(), dst.tolist())))
    cc_rows, t_ts = timed(lambda: arrow_result(ts.graph.connected_components(df, workers=2)))
    assert to_dict(cc_rows, "vertex", "component") == ref, "ts.graph CC disagrees"
    (v, c), t_np = timed(lambda: ts.graph.forest(src, dst))
    assert dict(zip(v.tolist(), c.tolist())) == ref
    local_cc, t_local = timed(lambda: ts.graph.connected_components(table, workers=2))
    assert to_dict(local_cc, "vertex", "component") == ref, "ts.graph CC (local) disagrees"
    text_cc, t_ts_text = timed(lambda: arrow_result(ts.graph.connected_components(text_df, workers=2)))
    check_string_components(text_cc, ref)
    text_local, t_local_text = timed(lambda: ts.graph.connected_components(text, workers=2))
    check_string_components(text_local, ref)
    rows = [("connected components", "ts.graph (Spark, 2 workers)", t_ts),
            ("connected components", "ts.graph (Spark, 2 workers), string ids", t_ts_text),
            ("connected components", "ts.graph (pyarrow.Table, 2 threads)", t_local),
            ("connected components", "ts.graph (pyarrow.Table, 2 threads), string ids", t_local_text),
            ("connected components", "numpy forest, 1 core", t_np),
            ("connected components", "Python union-find", t_uf)]
    try:
        from scipy.sparse.csgraph import connected_components as scc

        def scipy_cc():
            return scc(scipy_graph(src, dst)[1], directed=False)
        _, t_sc = timed(scipy_cc)
        rows.append(("connected components", "scipy, 1 core", t_sc))
    except ImportError:
        pass
    if slow:
        (labels, rounds), t_naive = timed(lambda: arrow_result(cc_naive(spark, df)))
        assert to_dict(labels, "v", "label") == ref, "naive loop disagrees"
        rows.append(("connected components", f"DataFrame naive loop ({rounds} rounds)", t_naive))
        (labels, rounds), t_star = timed(lambda: arrow_result(cc_large_small_star(spark, df)))
        got = to_dict(labels, "v", "label")
        assert got == ref, "large/small star disagrees"
        rows.append(("connected components", f"DataFrame large/small-star ({rounds} rounds)", t_star))

    pr_ref, t_pr_np = timed(lambda: ts.graph.pagerank_reference(src, dst, 20))
    pr_rows, t_pr_ts = timed(lambda: arrow_result(ts.graph.pagerank(df, iterations=20, workers=2)))
    got = to_dict(pr_rows, "vertex", "rank")
    assert got.keys() == pr_ref.keys() and max(abs(got[k] - pr_ref[k]) for k in pr_ref) < 1e-9
    local_pr, t_pr_local = timed(lambda: ts.graph.pagerank(table, iterations=20, workers=2))
    got = to_dict(local_pr, "vertex", "rank")
    assert max(abs(got[k] - pr_ref[k]) for k in pr_ref) < 1e-9, "ts.graph PageRank (local) disagrees"
    text_pr, t_pr_text = timed(lambda: arrow_result(ts.graph.pagerank(text_df, iterations=20, workers=2)))
    got = dict(zip(as_ints(text_pr["vertex"]).to_pylist(), text_pr["rank"].to_pylist()))
    assert got.keys() == pr_ref.keys() and max(abs(got[k] - pr_ref[k]) for k in pr_ref) < 1e-9, "string ids"
    text_pr_local, t_pr_local_text = timed(lambda: ts.graph.pagerank(text, iterations=20, workers=2))
    got = dict(zip(as_ints(text_pr_local["vertex"]).to_pylist(), text_pr_local["rank"].to_pylist()))
    assert max(abs(got[k] - pr_ref[k]) for k in pr_ref) < 1e-9, "ts.graph PageRank (local, string ids) disagrees"
    rows += [("PageRank x20", "ts.graph (Spark, 2 workers)", t_pr_ts),
             ("PageRank x20", "ts.graph (Spark, 2 workers), string ids", t_pr_text),
             ("PageRank x20", "ts.graph (pyarrow.Table, 2 threads)", t_pr_local),
             ("PageRank x20", "ts.graph (pyarrow.Table, 2 threads), string ids", t_pr_local_text),
             ("PageRank x20", "numpy mat-vec, 1 core", t_pr_np)]
    try:
        (vs, ranks), t_pr_sc = timed(lambda: scipy_pagerank(src, dst, 20))
        assert max(abs(r - pr_ref[v]) for v, r in zip(vs.tolist(), ranks.tolist())) < 1e-9, "scipy disagrees"
        rows.append(("PageRank x20", "scipy sparse mat-vec, 1 core", t_pr_sc))
    except ImportError:
        pass
    if slow:
        ranks, t_pr_df = timed(lambda: arrow_result(pagerank_dataframe(spark, df)))
        got = to_dict(ranks, "v", "r")
        assert max(abs(got[k] - pr_ref[k]) for k in pr_ref) < 1e-9, "DataFrame PageRank disagrees"
        rows.append(("PageRank x20", "DataFrame join/groupBy loop", t_pr_df))
    source = int(src[0])
    sp_ref, t_dj = timed(lambda: ts.graph.dijkstra_reference(src.tolist(), dst.tolist(), [source]))
    sp_rows, t_sp = timed(lambda: arrow_result(ts.graph.shortest_paths(df, [source], workers=2)))
    assert paths(sp_rows) == sp_ref, "ts.graph shortest paths disagree"
    local_sp, t_sp_local = timed(lambda: ts.graph.shortest_paths(table, [source], workers=2))
    assert paths(local_sp) == sp_ref, "ts.graph shortest paths (local) disagree"
    name = as_strings(pa.array([source])).to_pylist()
    text_sp, t_sp_text = timed(lambda: arrow_result(ts.graph.shortest_paths(text_df, name, workers=2)))
    assert paths(text_sp.set_column(0, "vertex", as_ints(text_sp["vertex"])).set_column(
        1, "source", as_ints(text_sp["source"]))) == sp_ref, "ts.graph shortest paths (string ids) disagree"
    text_sp_local, t_sp_local_text = timed(lambda: ts.graph.shortest_paths(text, name, workers=2))
    assert paths(text_sp_local.set_column(0, "vertex", as_ints(text_sp_local["vertex"])).set_column(
        1, "source", as_ints(text_sp_local["source"]))) == sp_ref, "shortest paths (local, string ids) disagree"
    rows += [("shortest paths, 1 src", "ts.graph (Spark, 2 workers)", t_sp),
             ("shortest paths, 1 src", "ts.graph (Spark, 2 workers), string ids", t_sp_text),
             ("shortest paths, 1 src", "ts.graph (pyarrow.Table, 2 threads)", t_sp_local),
             ("shortest paths, 1 src", "ts.graph (pyarrow.Table, 2 threads), string ids", t_sp_local_text),
             ("shortest paths, 1 src", "Python heapq Dijkstra", t_dj)]
    try:
        from scipy.sparse.csgraph import dijkstra

        def scipy_sp():
            vs, g = scipy_graph(src, dst)
            dist = dijkstra(g, directed=True, indices=int(np.searchsorted(vs, source)), unweighted=True)
            reached = np.isfinite(dist)
            return vs[reached], dist[reached].astype(np.int64)
        (vs, dist), t_sp_sc = timed(scipy_sp)
        assert {(v, source): d for v, d in zip(vs.tolist(), dist.tolist())} == sp_ref, "scipy dijkstra disagrees"
        rows.append(("shortest paths, 1 src", "scipy dijkstra, 1 core", t_sp_sc))
    except ImportError:
        pass
    if slow:
        (dist, rounds), t_bfs = timed(lambda: arrow_result(bfs_dataframe(spark, df, source)))
        assert {(v, source): d for v, d in to_dict(dist, "v", "d").items()} == sp_ref, "relaxation disagrees"
        rows.append(("shortest paths, 1 src", f"DataFrame relaxation loop ({rounds} rounds)", t_bfs))
    for algo, method, t in rows:
        base = next(x for a, mm, x in rows if a == algo and mm.startswith("ts.graph"))
        line = f"{algo:22} {method:50} {t:9.2f} s   this / ts.graph = {t / base:7.2f}"
        print(line)
        report.append((m, line))
    times = {(a, mm): t for a, mm, t in rows}
    for algo in dict.fromkeys(a for a, _, _ in rows):
        ratios = [f"{where} {times[(algo, method + ', string ids')] / times[(algo, method)]:.2f}"
                  for where, method in (("Spark", "ts.graph (Spark, 2 workers)"),
                                        ("pyarrow.Table", "ts.graph (pyarrow.Table, 2 threads)"))]
        line = f"{algo:22} string ids / integer ids: {', '.join(ratios)}"
        print(line)
        report.append((m, line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200000,2000000", help="comma-separated edge counts")
    parser.add_argument("--skip-slow-above", type=int, default=10**12,
                        help="skip the DataFrame loops above this many edges")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    conf_dir = os.environ.get("SPARK_CONF_DIR") or str(Path(__file__).resolve().parent.parent / "conf")
    spark = ts.spark.get_session("bench graph", master="local[2]", conf_dir=conf_dir)
    report: list = []
    warm = spark.createDataFrame([(1, 2)], "src long, dst long")     # start the Python workers, untimed
    ts.graph.connected_components(warm, workers=2).collect()
    for m in (int(s) for s in args.sizes.split(",")):
        bench(spark, m, args.seed, m <= args.skip_slow_above, report)
    print(f"\nall methods agree; {len(report)} timings")
    spark.stop()


if __name__ == "__main__":
    main()
