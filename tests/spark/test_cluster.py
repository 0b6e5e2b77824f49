"""On local-cluster[2,1,1024]: two executor JVMs, so the timely workers live in
separate executor processes.  One application in a fresh Python process (``CLUSTER``, started
once for the module) for a run across the executors and the graph algorithms.  (The
components job as a program runs on local-cluster in ``test_shipping.py``, shipped as the
guide says.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timely_spark.graph import union_find as components

from .standalone import end_group

ROOT = Path(__file__).resolve().parents[2]

#: Each test's bound (pytest-timeout's, which counts a fixture's setup: the module's
#: application runs inside whichever test asks for it first).
TEST_TIMEOUT = 340
#: What a test does beyond its Spark program (the graph built and written, the process
#: group ended, the answers checked) may take this much of TEST_TIMEOUT: the program's own
#: bound is the rest (280 s), so that a program that hangs fails with its stage named, not
#: with pytest-timeout's stack dump.  (The shared application takes about 40-50 s on an
#: idle 2-core host, and was seen taking 114 s on a loaded one.)
MARGIN = 60
PROGRAM_TIMEOUT = TEST_TIMEOUT - MARGIN


def env():
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", CONF=str(ROOT / "conf"),
                PYTHONPATH=str(ROOT))


def run_program(args: list, what: str) -> tuple[int, str, str]:
    """``python ARGS`` (``what`` names it) in a process group of its own -- its JVMs too
    (PySpark's Python worker daemons start groups of their own, and end with their JVM's
    stdin) -- ended whatever happens: ``(return code, stdout, stderr)``.  Past
    PROGRAM_TIMEOUT it fails the test naming the last ``stage: ...`` line the program
    printed to stderr (the stage that did not end)."""
    proc = subprocess.Popen([sys.executable, *args], env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        try:
            out, err = proc.communicate(timeout=PROGRAM_TIMEOUT)
        except subprocess.TimeoutExpired:
            end_group(proc)
            try:
                out, err = proc.communicate(timeout=MARGIN / 2)
            except subprocess.TimeoutExpired:      # (its pipes held open still: the stage is unknown)
                err = ""
        else:
            return proc.returncode, out, err
    finally:
        end_group(proc)
    stages = [line[len("stage: "):] for line in err.splitlines() if line.startswith("stage: ")]
    where = f"in stage {stages[-1]!r}" if stages else "(it names no stages)"
    pytest.fail(f"{what} did not finish within {PROGRAM_TIMEOUT} s (of the test's {TEST_TIMEOUT} s): timed out "
                f"{where}; its last stderr:\n{err[-3000:]}")


CLUSTER = r"""
import json, os, sys, timely_spark as ts
def stage(name):                                             # names the stage a timeout stopped
    print("stage: " + name, file=sys.stderr, flush=True)
stage("the local-cluster session")
spark = ts.spark.get_session("cluster test", master="local-cluster[2,1,1024]", conf_dir=os.environ["CONF"])
def work(worker):
    got = []
    worker.dataflow(lambda s: s.to_stream(range(20) if s.index == 0 else []).exchange(lambda x: x).inspect(got.append))
    return [worker.index, os.getpid(), got]   # filled as the dataflow runs
stage("ts.spark.run across the executors")
out = {"run": ts.spark.run(spark, work, workers=2)}
files = spark.read.parquet(sys.argv[1])                      # a plain Parquet scan: the tasks read the file
rows = spark.createDataFrame(files.toPandas())               # local rows: shuffled into the workers' partitions
for name, df in (("files", files), ("rows", rows)):
    stage(f"the graph algorithms from {name}")
    out[name] = {
        "components": [[r.vertex, r.component] for r in ts.graph.connected_components(df, workers=2).collect()],
        "ranks": [[r.vertex, r.rank] for r in ts.graph.pagerank(df, workers=2).collect()],
        "paths": [[r.vertex, r.source, r.distance]
                  for r in ts.graph.shortest_paths(df, json.loads(sys.argv[2]), workers=2).collect()]}
print(json.dumps(out))
stage("spark.stop")
spark.stop()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local-cluster application's answers: the run across the executors, and the graph
    algorithms on a graph built to cross them (a giant random part, a long path with shuffled
    ids, a star whose hub has the largest id, tiny pairs, self-loops and duplicates), read
    both from Parquet files (the barrier tasks read them) and from rows Spark shuffles."""
    from ..graph.graphs import awkward_graph

    table = awkward_graph(5)
    table = pa.concat_tables([table, pa.table({"src": pa.array([40_000] * 30, pa.int64()),
                                               "dst": pa.array(range(100, 130), pa.int64())})])
    path = tmp_path_factory.mktemp("cluster") / "edges.parquet"
    pq.write_table(table, path, row_group_size=300)          # several row groups, split between the tasks
    sources = [table["src"][0].as_py(), 30_000]
    code, stdout, stderr = run_program(["-c", CLUSTER, str(path), json.dumps(sources)], "the cluster application")
    assert code == 0, stderr[-3000:]
    return table, sources, json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(TEST_TIMEOUT)
def test_run_on_separate_executors(cluster):
    (w0, pid0, got0), (w1, pid1, got1) = cluster[2]["run"]
    assert (w0, w1) == (0, 1) and pid0 != pid1          # two executor processes
    assert sorted(got0) == list(range(0, 20, 2)) and sorted(got1) == list(range(1, 20, 2))


@pytest.mark.slow
@pytest.mark.timeout(TEST_TIMEOUT)
def test_graph_algorithms_on_separate_executors_agree_with_references(cluster):
    """connected_components, pagerank and shortest_paths with their workers in two executor
    JVMs (the ``cluster`` fixture's graph), from Parquet files and from shuffled rows."""
    from timely_spark.graph import dijkstra_reference, pagerank_reference

    table, sources, got = cluster
    src, dst = table["src"].to_pylist(), table["dst"].to_pylist()
    ranks = pagerank_reference(table["src"].to_numpy(), table["dst"].to_numpy())
    for name in ("files", "rows"):
        assert dict(map(tuple, got[name]["components"])) == components(zip(src, dst)), name
        mine = dict(map(tuple, got[name]["ranks"]))
        assert sorted(mine) == sorted(ranks) and max(abs(mine[v] - ranks[v]) for v in ranks) < 1e-9, name
        assert {(v, s): d for v, s, d in got[name]["paths"]} == dijkstra_reference(src, dst, sources), name
