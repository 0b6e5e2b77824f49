"""Benchmark ts.graph against scipy, numpy, Python and DataFrame loops -- each method in
its own process, with its peak memory.

For each size m: a random graph (m edges, m/2 vertices, skewed in-degrees) written
once as Parquet (int64 ``src``, ``dst``) under ``--data``; then every method runs in a
process of its own (``--method``), which reads the Parquet file (untimed), runs, and
writes its result as Parquet (a Spark method collects it with ``toArrow`` up to
``--collect-up-to`` edges; above that Spark's executors write it, the timed action).
The parent samples the RSS of that process and every
process it started (Spark's JVM and its Python workers included) in a watcher thread
(psutil if installed, else /proc) and prints, per method: time, peak memory, peak
memory / the edge list's Arrow size (16 bytes an edge), the ratio to scipy, and the
growth from one size to the next.  Every result is checked against the reference in
the parent (components exactly, PageRank within 1e-9, shortest paths exactly).

Methods: connected components (ts.graph on 2 local threads and on Spark ``local[2]``
-- the Parquet scan, which the barrier tasks read themselves, and ``cc-spark-cached``: the
same DataFrame cached by Spark first, untimed, which Spark reads and spreads as Arrow, and
``cc-spark-cached-workers``: cached as ``repartition(2)``, one partition a worker, which the
barrier tasks read from the cache as it is --
scipy, numpy ``forest``; at most ``--skip-slow-above`` edges also Python union-find, the
DataFrame naive and large/small-star loops, string ids), PageRank x20 (ts.graph local
and Spark, scipy mat-vec loop; small sizes: the DataFrame join/groupBy loop, string
ids), shortest paths from one source (ts.graph local and Spark, scipy dijkstra; small
sizes: Python heapq Dijkstra, the DataFrame relaxation loop).  A Spark method runs in a
fresh session: its first run, then (up to ``--warm-up-to`` edges) a warm second run,
each with the phases of its time (``stats=``: stage start, rendezvous, input, compute,
output; total: the slowest task; before and after: the rest of the call, before the
barrier tasks started and after the last one ended; cpu: a task's Python CPU seconds).
``state-4-workers`` runs components and PageRank on 4 local threads and prints each
worker's peak state (rows kept, from the ``graph`` logging stream).

    python jobs/benchmarks/bench_graph.py --sizes 2000000,20000000,100000000 --data DIR
    python jobs/benchmarks/bench_graph.py --sizes 100000000 --only pagerank-spark,cc-spark --data DIR
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
ITERATIONS = 20
SAMPLE_EVERY = 0.1          # seconds between RSS samples
SLOW_ABOVE = 2_000_000      # default --skip-slow-above: the DataFrame loops and pure Python


# -- the graph -------------------------------------------------------------------------

def make_graph(m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """m random edges over m/2 vertices, in-degrees skewed (a Zipf part)."""
    rng = np.random.default_rng(seed)
    n = m // 2
    src = rng.integers(0, n, m)
    dst = (rng.zipf(1.8, m) * 7919 + rng.integers(0, n, m)) % n
    return src.astype(np.int64), dst.astype(np.int64)


def graph_file(data: Path, m: int, seed: int) -> Path:
    """The Parquet file of the graph of size m (written in slices of 10 M edges)."""
    path = data / f"edges-{m}-{seed}.parquet"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        src, dst = make_graph(m, seed)
        pq.write_table(pa.table({"src": src, "dst": dst}), tmp, row_group_size=1 << 20, compression="none")
        del src, dst
        tmp.rename(path)
    return path


# -- methods (each runs in its own process) --------------------------------------------

def scipy_graph(src, dst, transpose=False):
    """``(vertices, matrix)``: the distinct ids and a scipy CSR matrix with ``[u, v]`` for
    each edge u -> v (``[v, u]`` if ``transpose``)."""
    import scipy.sparse as sp

    m = len(src)
    vs, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    rows, cols = (inv[m:], inv[:m]) if transpose else (inv[:m], inv[m:])
    return vs, sp.csr_matrix((np.ones(m), (rows, cols)), shape=(len(vs), len(vs)))


def scipy_pagerank(src, dst, iterations=ITERATIONS, d=0.85):
    """PageRank of the definition in ts.graph.pagerank with a scipy CSR mat-vec per iteration."""
    vs, a = scipy_graph(src, dst, transpose=True)                          # a[v, u]: edges u -> v
    n = len(vs)
    out = np.asarray(a.sum(axis=0)).ravel()
    dangling = out == 0
    inv_out = np.divide(1.0, out, out=np.zeros(n), where=~dangling)
    r = np.full(n, 1.0 / n)
    for _ in range(iterations):
        r = (1 - d) / n + d * (a @ (r * inv_out) + r[dangling].sum() / n)
    return pa.table({"vertex": vs, "rank": r})


def as_strings(ids):
    """The string id of each integer id: ``17`` -> ``"user17@example.com"``."""
    import pyarrow.compute as pc

    return pc.binary_join_element_wise("user", pc.cast(ids, pa.string()), "@example.com", "")


def as_ints(strings):
    import pyarrow.compute as pc

    return pc.cast(pc.utf8_slice_codeunits(strings, 4, -12), pa.int64())


def _spark():
    import timely_spark as ts

    extra = {"spark.driver.memory": os.environ.get("BENCH_DRIVER_MEMORY", "4g")}
    return ts.spark.get_session("bench graph", master=os.environ.get("BENCH_MASTER", "local[2]"), extra=extra)


def _spark_edges(spark, path, strings=False):
    df = spark.read.parquet(str(path))
    if strings:
        from pyspark.sql import functions as F

        df = df.select(F.concat(F.lit("user"), F.col("src").cast("string"), F.lit("@example.com")).alias("src"),
                       F.concat(F.lit("user"), F.col("dst").cast("string"), F.lit("@example.com")).alias("dst"))
    return df


def _spark_runs(call, warm: bool) -> tuple:
    """``call(stats)`` -> Arrow result, timed on a fresh session (first) and warm."""
    first: dict = {}
    began = time.time()
    result, t_first = _timed(lambda: call(first))
    extra = {"first_seconds": t_first, "first_phases": _phases(first, t_first, began)}
    if not warm:
        return result, t_first, extra
    del result
    again: dict = {}
    began = time.time()
    result, t_warm = _timed(lambda: call(again))
    extra["phases"] = _phases(again, t_warm, began)
    return result, t_warm, extra


def _phases(stats: dict, seconds: float, began: float) -> dict:
    """The phases of the barrier tasks (the slowest task's each), the rest of the call
    -- ``before``: planning and the stages before the barrier stage (the input spread
    over the workers' partitions as Arrow, unless the tasks read the files themselves);
    ``after``: from the last task's Python end to the call's end (Spark taking the
    tasks' last output, the result's stage boundary, toArrow) -- and the most ``cpu``
    seconds a task's Python process used (on a busy machine: what the task cost)."""
    from timely_spark.spark.task_stats import breakdown

    tasks = stats.get("tasks", [])
    phases = breakdown(tasks)
    if not tasks:
        return {**phases, "other": seconds}
    submitted = min(t["started"] - (t.get("stage_start") or 0.0) for t in tasks)
    ended = max(t["started"] + t.get("total", 0.0) for t in tasks)
    phases["before"] = max(0.0, submitted - began)
    phases["after"] = max(0.0, began + seconds - ended)
    phases["cpu"] = max(t.get("cpu", 0.0) for t in tasks)
    phases["input_from"] = "/".join(sorted({t.get("input_from", "spark") for t in tasks}))
    return phases


def components(df, stats):
    """ts.graph.connected_components on Spark, its tasks' phases into ``stats``."""
    import timely_spark as ts

    return ts.graph.connected_components(df, workers=2, stats=stats)


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run_method(method: str, path: Path, source: int, warm: bool, collect: bool = True) -> dict:
    """Run ``method`` on the graph at ``path``; its result (Parquet) beside it.  A Spark
    method's result is collected with ``toArrow`` if ``collect``, else written as Parquet
    by Spark's executors (the timed action): tens of millions of rows never pass through
    the driver (see :func:`_spark_result`)."""
    import timely_spark as ts

    out = f"{path}.{method}.result.parquet"
    _clear(out)
    collect = collect or method.endswith("strings")

    def finish(df):
        return _spark_result(df, None if collect else out)

    table = None if method.endswith("spark") or "dataframe" in method else read_edges(path)
    extra: dict = {}

    def edges():
        return table["src"].to_numpy(), table["dst"].to_numpy()

    if method == "cc-local":
        cpu = time.process_time()
        result, t = _timed(lambda: ts.graph.connected_components(table, workers=2))
        extra["cpu"] = time.process_time() - cpu              # both worker threads' CPU seconds
    elif method == "cc-local-strings":
        text = pa.table({"src": as_strings(table["src"]), "dst": as_strings(table["dst"])})
        found, t = _timed(lambda: ts.graph.connected_components(text, workers=2))
        result = pa.table({"vertex": as_ints(found["vertex"]), "component": as_ints(found["component"])})
    elif method in ("cc-spark", "cc-spark-strings", "cc-spark-cached", "cc-spark-cached-workers"):
        spark = _spark()
        df = _spark_edges(spark, path, method.endswith("strings"))
        if method.endswith("workers"):                    # one cached partition a worker: read as it is
            df = df.repartition(2)
        if "cached" in method:                            # Spark's cache, filled untimed
            df = df.cache()
            df.count()
            extra["cached_partitions"] = df.rdd.getNumPartitions()
        result, t, runs = _spark_runs(lambda stats: finish(components(df, stats)), warm)
        extra.update(runs)
        if method.endswith("strings"):
            result = pa.table({"vertex": as_ints(result["vertex"]), "component": as_ints(result["component"])})
    elif method == "cc-scipy":
        from scipy.sparse.csgraph import connected_components as scc

        src, dst = edges()
        (vs, (_, labels)), t = _timed(lambda: (lambda g: (g[0], scc(g[1], directed=False)))(scipy_graph(src, dst)))
        result = pa.table({"vertex": vs, "label": labels})
    elif method == "cc-forest":
        (v, c), t = _timed(lambda: ts.graph.forest(*edges()))
        result = pa.table({"vertex": v, "component": c})
    elif method == "cc-union-find":
        src, dst = edges()
        ref, t = _timed(lambda: ts.graph.union_find(zip(src.tolist(), dst.tolist())))
        result = pa.table({"vertex": list(ref), "component": list(ref.values())})
    elif method in ("cc-dataframe-naive", "cc-dataframe-star"):
        spark = _spark()
        df = _spark_edges(spark, path).repartition(2).localCheckpoint()
        loop = cc_naive if method.endswith("naive") else cc_large_small_star
        (labels, rounds), t = _timed(lambda: (lambda r: (r[0].toArrow(), r[1]))(loop(spark, df)))
        result = labels.rename_columns(["vertex", "component"])
        extra["rounds"] = rounds
    elif method == "pagerank-local":
        result, t = _timed(lambda: ts.graph.pagerank(table, iterations=ITERATIONS, workers=2))
    elif method == "pagerank-local-strings":
        text = pa.table({"src": as_strings(table["src"]), "dst": as_strings(table["dst"])})
        found, t = _timed(lambda: ts.graph.pagerank(text, iterations=ITERATIONS, workers=2))
        result = pa.table({"vertex": as_ints(found["vertex"]), "rank": found["rank"]})
    elif method in ("pagerank-spark", "pagerank-spark-strings"):
        spark = _spark()
        df = _spark_edges(spark, path, method.endswith("strings"))
        result, t, extra = _spark_runs(
            lambda stats: finish(ts.graph.pagerank(df, iterations=ITERATIONS, workers=2, stats=stats)), warm)
        if method.endswith("strings"):
            result = pa.table({"vertex": as_ints(result["vertex"]), "rank": result["rank"]})
    elif method == "pagerank-scipy":
        result, t = _timed(lambda: scipy_pagerank(*edges()))
    elif method == "pagerank-dataframe":
        spark = _spark()
        df = _spark_edges(spark, path).repartition(2).localCheckpoint()
        result, t = _timed(lambda: pagerank_dataframe(spark, df).toArrow())
        result = result.rename_columns(["vertex", "rank"])
    elif method == "paths-local":
        result, t = _timed(lambda: ts.graph.shortest_paths(table, [source], workers=2))
    elif method == "paths-spark":
        spark = _spark()
        df = _spark_edges(spark, path)
        result, t, extra = _spark_runs(
            lambda stats: finish(ts.graph.shortest_paths(df, [source], workers=2, stats=stats)), warm)
    elif method == "paths-scipy":
        from scipy.sparse.csgraph import dijkstra

        def scipy_sp():
            vs, g = scipy_graph(*edges())
            dist = dijkstra(g, directed=True, indices=int(np.searchsorted(vs, source)), unweighted=True)
            reached = np.isfinite(dist)
            return pa.table({"vertex": vs[reached], "distance": dist[reached]})
        result, t = _timed(scipy_sp)
    elif method == "paths-python":
        src, dst = edges()
        ref, t = _timed(lambda: ts.graph.dijkstra_reference(src.tolist(), dst.tolist(), [source]))
        result = pa.table({"vertex": [v for v, _ in ref], "distance": list(ref.values())})
    elif method == "paths-dataframe":
        spark = _spark()
        df = _spark_edges(spark, path).repartition(2).localCheckpoint()
        (dist, rounds), t = _timed(lambda: (lambda r: (r[0].toArrow(), r[1]))(bfs_dataframe(spark, df, source)))
        result = dist.rename_columns(["vertex", "distance"])
        extra["rounds"] = rounds
    elif method == "state-4-workers":
        result, t, extra = None, *four_workers(table)
    else:
        raise SystemExit(f"unknown method {method!r}")
    if result is not None:
        pq.write_table(result, out)
    if method.endswith("spark"):
        extra["result_via"] = "toArrow" if collect else "Spark's Parquet writer"
    return {"seconds": t, **extra}


def read_edges(path: Path) -> pa.Table:
    """The edges at ``path`` as one contiguous chunk per column, read a row group at a
    time into numpy arrays (so ``to_numpy`` is zero-copy for every method, and the
    reader's buffers never hold the whole file besides the table: ``pq.read_table``
    pre-buffers the file, ~2x the table's size in RSS at 20 M edges)."""
    f = pq.ParquetFile(path, pre_buffer=False)
    schema = f.schema_arrow
    if not all(t == pa.int64() for t in schema.types):
        return pq.read_table(path, pre_buffer=False)
    columns = {name: np.empty(f.metadata.num_rows, np.int64) for name in schema.names}
    at = 0
    for i in range(f.num_row_groups):
        group = f.read_row_group(i)
        for name, values in columns.items():
            values[at:at + group.num_rows] = group.column(name).to_numpy()
        at += group.num_rows
    return pa.table(columns)


def _spark_result(df, out):
    """``df.toArrow()`` (``out`` None), or ``df`` written as Parquet to ``out`` by Spark
    (None back).  ``toArrow`` brings every row to the driver JVM as task results and then
    to Python: at 100 M edges (~50 M result rows, ~800 MB as Arrow) that overran a 4 GB
    driver, and an OutOfMemoryError in Spark's task-result-getter thread leaves the job
    waiting forever with no task running -- a user with a result that size writes it."""
    if out is None:
        return df.toArrow()
    df.write.mode("overwrite").parquet(out)
    return None


def _clear(out: str) -> None:
    """Remove an earlier result at ``out`` (a file from pyarrow or a directory from Spark)."""
    import shutil

    target = Path(out)
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()


def four_workers(table: pa.Table) -> tuple:
    """Components and PageRank on 4 local threads; each worker's peak state (rows kept),
    per operator, from the ``graph`` logging stream."""
    import timely_spark as ts
    from timely_spark.graph.pagerank import power_iteration

    table = table.combine_chunks()

    def work(worker):
        peak: dict = {}

        def seen(events):
            for e in events:
                if e.get("event") == "state":
                    peak[e["name"]] = max(peak.get(e["name"], 0), e["count"])
        worker.log_register().insert("graph", seen)
        n = table.num_rows
        lo, hi = n * worker.index // worker.peers, n * (worker.index + 1) // worker.peers
        mine = table.slice(lo, hi - lo)
        worker.dataflow(lambda s: ts.graph.snapshot_components(s.to_stream(mine)).probe())
        worker.dataflow(lambda s: power_iteration(s.to_stream(mine), ITERATIONS).probe())
        while worker.step():
            pass
        worker.log_register().flush()
        return peak

    peaks, t = _timed(lambda: ts.execute(work, threads=4))
    return t, {"peaks": peaks}


# -- the DataFrame loops -----------------------------------------------------------------

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


def pagerank_dataframe(spark, edges, iterations=ITERATIONS, d=0.85):
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


# -- the parent: processes, memory, checks, the table -----------------------------------

def tree_rss(pid: int) -> int:
    """Bytes resident in process ``pid`` and all its descendants."""
    try:
        import psutil
    except ImportError:
        return _proc_tree_rss(pid)
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def _proc_tree_rss(pid: int) -> int:
    children: dict = {}
    rss: dict = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * page
        except OSError:
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


def run_child(method: str, path: Path, source: int, warm: bool, timeout: float, collect: bool = True) -> dict:
    """Run one method in a process of its own; its outcome with ``peak_bytes``."""
    cmd = [sys.executable, __file__, "--method", method, "--graph", str(path), "--source", str(source)]
    if not warm:
        cmd.append("--no-warm")
    if not collect:
        cmd.append("--write-result")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    peak = [0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(proc.pid))
            done.wait(SAMPLE_EVERY)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return {"error": f"timed out after {timeout:.0f} s", "peak_bytes": peak[0]}
    finally:
        done.set()
        watcher.join()
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        lines = err.strip().splitlines()
        telling = [line for line in lines if "Error" in line or "Exception" in line][-3:] or lines[-5:]
        return {"error": f"exit {proc.returncode}: " + "\n".join(telling), "peak_bytes": peak[0]}
    return {**json.loads(lines[-1][7:]), "peak_bytes": peak[0]}


def check(method: str, path: Path, refs: dict) -> str:
    """'ok' if the method's result agrees with the reference, else what differs."""
    result_file = Path(f"{path}.{method}.result.parquet")
    if not result_file.exists():
        return "ok" if method.startswith("state") else "no result"
    got = pq.read_table(result_file)
    kind = method.split("-")[0]
    ref = refs.get(kind)
    if ref is None:
        refs[kind] = got
        return "reference"
    if kind == "cc":
        return _same_components(got, ref)
    key, value = ("vertex", "rank") if kind == "pagerank" else ("vertex", "distance")
    got, want = got.sort_by(key), ref.sort_by(key)
    if got[key] != want[key]:
        return "other vertices"
    diff = np.abs(got[value].to_numpy().astype(float) - want[value].to_numpy().astype(float)).max(initial=0)
    return "ok" if diff < 1e-9 else f"differs by {diff:.1e}"


def _same_components(got: pa.Table, ref: pa.Table) -> str:
    """The same partition of the vertices (labels may differ)."""
    got = got.sort_by("vertex")
    ref = ref.sort_by("vertex")
    if got["vertex"] != ref["vertex"]:
        return "other vertices"
    a = got.columns[1].to_numpy()
    b = ref.columns[1].to_numpy()
    pairs = np.unique(np.stack([a, b]), axis=1)     # a partition equal to ref's: a bijection of labels
    if len(np.unique(pairs[0])) == pairs.shape[1] == len(np.unique(pairs[1])):
        return "ok"
    return "other components"


METHODS = [  # (method, slow)
    ("cc-scipy", False), ("cc-local", False), ("cc-spark", False), ("cc-spark-cached", False),
    ("cc-spark-cached-workers", False), ("cc-forest", False),
    ("cc-local-strings", True), ("cc-spark-strings", True), ("cc-union-find", True),
    ("cc-dataframe-naive", True), ("cc-dataframe-star", True),
    ("pagerank-scipy", False), ("pagerank-local", False), ("pagerank-spark", False),
    ("pagerank-local-strings", True), ("pagerank-spark-strings", True), ("pagerank-dataframe", True),
    ("paths-scipy", False), ("paths-local", False), ("paths-spark", False),
    ("paths-python", True), ("paths-dataframe", True),
    ("state-4-workers", False),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200000,2000000", help="comma-separated edge counts")
    parser.add_argument("--skip-slow-above", type=int, default=SLOW_ABOVE,
                        help="skip the DataFrame loops, pure Python and string ids above this many edges")
    parser.add_argument("--warm-up-to", type=int, default=20_000_000,
                        help="run each Spark method a second (warm) time up to this many edges")
    parser.add_argument("--collect-up-to", type=int, default=20_000_000,
                        help="Spark methods collect their result with toArrow up to this many edges; "
                             "above it Spark writes the result as Parquet (the timed action)")
    parser.add_argument("--only", default="", help="comma-separated methods (default: all)")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "bench-graph"),
                        help="where the graphs' Parquet files go (default: a folder in the temporary directory)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a method may take")
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--graph", help=argparse.SUPPRESS)
    parser.add_argument("--source", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--no-warm", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--write-result", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.method:                                  # a child: one method
        outcome = run_method(args.method, Path(args.graph), args.source, not args.no_warm, not args.write_result)
        print("RESULT " + json.dumps(outcome), flush=True)
        return
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    only = {m for m in args.only.split(",") if m}
    previous: dict = {}
    disagree = 0
    for m in (int(s) for s in args.sizes.split(",")):
        path = graph_file(data, m, args.seed)
        source = int(pq.ParquetFile(path).read_row_group(0, columns=["src"])["src"][0].as_py())   # not the whole column
        arrow_bytes = 16 * m
        print(f"\n== {m:,} edges ({arrow_bytes / 2**20:,.0f} MB as Arrow), {path} ==", flush=True)
        refs: dict = {}
        times: dict = {}
        for method, slow in METHODS:
            if (only and method not in only) or (slow and m > args.skip_slow_above):
                continue
            outcome = run_child(method, path, source, m <= args.warm_up_to, args.timeout, m <= args.collect_up_to)
            peak = outcome["peak_bytes"]
            if "error" in outcome:
                print(f"{method:24} FAILED ({outcome['error']}); peak {peak / 2**20:,.0f} MB", flush=True)
                disagree += 1
                continue
            t = outcome["seconds"]
            times[method] = t
            verdict = check(method, path, refs)
            disagree += verdict not in ("ok", "reference")
            scipy = times.get(method.split("-")[0] + "-scipy")
            grown = previous.get(method)
            line = (f"{method:24} {t:8.2f} s  peak {peak / 2**20:8,.0f} MB = {peak / arrow_bytes:5.1f}x Arrow"
                    + (f"  {t / scipy:5.2f}x scipy" if scipy and not method.endswith("scipy") else "")
                    + (f"  {t / grown[1]:5.1f}x the time of {grown[0]:,} edges" if grown else "")
                    + f"  [{verdict}]")
            print(line, flush=True)
            if "cpu" in outcome:
                print(f"{'':24} cpu {outcome['cpu']:.2f} s (the process, all its threads)", flush=True)
            if "first_seconds" in outcome:
                print(f"{'':24} first run in a fresh session {outcome['first_seconds']:.2f} s"
                      + (f" (result via {outcome['result_via']})" if "result_via" in outcome else "") + "; phases "
                      + _phase_text(outcome["first_phases"]), flush=True)
            if "cached_partitions" in outcome:
                print(f"{'':24} cached in {outcome['cached_partitions']} partitions", flush=True)
            local = method.replace("spark", "local").replace("-cached", "").replace("-workers", "")
            if "phases" in outcome:
                print(f"{'':24} warm run phases " + _phase_text(outcome["phases"])
                      + (f"; warm Spark / local threads = {t / times[local]:.2f}" if local in times else ""),
                      flush=True)
            for worker, peaks in enumerate(outcome.get("peaks", [])):
                print(f"{'':24} worker {worker}: peak rows kept "
                      + ", ".join(f"{name} {rows:,}" for name, rows in sorted(peaks.items())), flush=True)
            if "rounds" in outcome:
                print(f"{'':24} {outcome['rounds']} rounds", flush=True)
            previous[method] = (m, t)
    print("\nall methods agree" if not disagree else f"\n{disagree} method(s) failed or disagree", flush=True)


def _phase_text(phases: dict) -> str:
    return ", ".join(f"{name} {value:.2f}" if not isinstance(value, str) else f"input from {value}"
                     for name, value in phases.items())


if __name__ == "__main__":
    main()
