"""The Spark jobs of jobs/examples, run as programs the way the guide shows them: exact results."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import timely_spark as ts

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = [                              # what jobs/examples/wordcount.py generates without --input
    "the quick brown fox jumps over the lazy dog",
    "a timely dataflow knows when an epoch is complete",
    "the dog sleeps and the fox runs away from the dog",
]


def env():
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
                SPARK_CONF_DIR=str(ROOT / "conf"), PYTHONPATH=str(ROOT))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_spark_submit_runs_the_wordcount_job_and_each_epoch_is_emitted_once_complete(tmp_path):
    submit = Path(sys.executable).with_name("spark-submit")
    out = tmp_path / "wc"
    done = subprocess.run([str(submit), str(ROOT / "jobs" / "examples" / "wordcount.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=240, env=env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "epoch 2: the 12, dog 8, and 4" in done.stdout
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 25
    for epoch, text in enumerate(SAMPLE):
        expected = Counter(w for line in [text] * (epoch + 2) for w in line.split())
        assert {r["word"]: r["count"] for r in rows if r["epoch"] == epoch} == dict(expected)
    # on each worker, every count of an epoch was emitted before any count of a later epoch
    for worker in (0, 1):
        times = [(r["epoch"], r["emitted"]) for r in rows if r["worker"] == worker]
        assert times
        for t1, at1 in times:
            assert all(at1 <= at2 for t2, at2 in times if t2 > t1)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stream_to_parquet_job_reports_complete_epochs_only(spark, tmp_path):
    out = tmp_path / "views"
    done = subprocess.run([sys.executable, str(ROOT / "jobs" / "examples" / "stream_to_parquet.py"), "--out", str(out),
                           "--epochs", "3", "--views", "50", "--open"],
                          capture_output=True, text=True, timeout=240, env=env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "epoch 0: 100 views" in done.stdout and "epoch 2" not in done.stdout
    everything = ts.spark.read_event_log(spark, out, complete_only=False)
    assert sorted(r["time"] for r in everything.select("time").distinct().collect()) == [0, 1, 2]
    ts.spark.read_event_log(spark, out).createOrReplaceTempView("views")
    rows = spark.sql("SELECT time AS epoch, count(*) AS views FROM views GROUP BY time ORDER BY time").collect()
    assert [(r["epoch"], r["views"]) for r in rows] == [(0, 100), (1, 100)]     # epoch 2 is still open


def run_graph_job(name, *args):
    done = subprocess.run([sys.executable, str(ROOT / "jobs" / "examples" / name), *args, "--master", "local[2]"],
                          capture_output=True, text=True, timeout=240, env=env())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pagerank_job_reads_parquet_and_writes_the_definitions_ranks(tmp_path):
    src = np.array([1, 2, 3, 3, 4, 5, 5, 6, 6, 6])
    dst = np.array([2, 3, 1, 4, 4, 1, 6, 1, 2, 7])          # 7 has no out-edges, 4 a self-loop
    pq.write_table(pa.table({"a": src, "b": dst}), tmp_path / "edges.parquet")
    out = tmp_path / "ranks"
    stdout = run_graph_job("pagerank.py", "--edges-path", str(tmp_path / "edges.parquet"), "--src", "a",
                           "--dst", "b", "--iterations", "30", "--out", str(out))
    assert stdout.startswith("7 vertices ranked, top vertex ")
    table = pq.read_table(out)
    got = dict(zip(table.column("vertex").to_pylist(), table.column("rank").to_pylist()))
    want = ts.graph.pagerank_reference(src, dst, 30)
    assert got.keys() == want.keys() and max(abs(got[v] - want[v]) for v in want) < 1e-9


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_shortest_paths_job_reads_csv_with_weights_and_writes_exact_distances(tmp_path):
    edges = [(0, 1, 4.0), (0, 2, 1.0), (2, 1, 2.0), (1, 3, 1.0), (3, 3, 0.0), (5, 6, 1.0), (2, 4, 7.5)]
    csv = tmp_path / "edges.csv"
    csv.write_text("src,dst,w\n" + "".join(f"{a},{b},{w}\n" for a, b, w in edges))
    out = tmp_path / "paths"
    stdout = run_graph_job("shortest_paths.py", "--edges-path", str(csv), "--weight", "w", "--sources", "0,5",
                           "--out", str(out))
    assert stdout.startswith("7 (vertex, source) pairs reached from 2 sources, farthest 8.5;")
    table = pq.read_table(out)
    got = {(v, s): d for v, s, d in zip(*(table.column(c).to_pylist() for c in ("vertex", "source", "distance")))}
    src, dst, w = zip(*edges)
    assert got == ts.graph.dijkstra_reference(src, dst, [0, 5], w)
    assert got[(1, 0)] == 3.0 and (6, 0) not in got           # through 2, and 6 is unreachable from 0


@pytest.mark.timeout(180)
def test_the_jobs_random_graph_does_not_depend_on_the_partitioning(spark):
    job = ts.graph
    graphs = [[(r.src, r.dst) for r in job.random_edges(spark, 1000, 4000, 7, partitions=p).collect()]
              for p in (1, 2, 3)]
    assert graphs[0] == graphs[1] == graphs[2]                # local[1], local[2], ... give the same edges
    src, dst = zip(*graphs[0])
    assert src[1:] != dst[:-1] and len(set(src)) > 950 and max(src + dst) < 1000 and min(src + dst) >= 0
    other = [(r.a, r.b) for r in job.random_edges(spark, 1000, 4000, 8, "a", "b").collect()]
    assert other != graphs[0]                                  # the seed chooses the graph
