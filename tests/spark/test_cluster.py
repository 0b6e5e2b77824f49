"""On local-cluster[2,1,1024]: two executor JVMs, so the timely workers live in
separate executor processes.  Runs in a fresh Python process (one SparkContext each)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from timely_spark.graph import union_find as components

ROOT = Path(__file__).resolve().parents[2]

RUN = r"""
import json, os, timely_spark as ts
spark = ts.spark.get_session("cluster test", master="local-cluster[2,1,1024]", conf_dir=os.environ["CONF"])
def work(worker):
    got = []
    worker.dataflow(lambda s: s.to_stream(range(20) if s.index == 0 else []).exchange(lambda x: x).inspect(got.append))
    return [worker.index, os.getpid(), got]   # filled as the dataflow runs
print(json.dumps(ts.spark.run(spark, work, workers=2)))
spark.stop()
"""


def env():
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", CONF=str(ROOT / "conf"),
                PYTHONPATH=str(ROOT))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_run_on_separate_executors():
    done = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=240, env=env())
    assert done.returncode == 0, done.stderr[-3000:]
    (w0, pid0, got0), (w1, pid1, got1) = json.loads(done.stdout.strip().splitlines()[-1])
    assert (w0, w1) == (0, 1) and pid0 != pid1          # two executor processes
    assert sorted(got0) == list(range(0, 20, 2)) and sorted(got1) == list(range(1, 20, 2))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_connected_components_job_on_separate_executors(tmp_path):
    edges = [(1, 2), (2, 3), (4, 5), (5, 6), (7, 7), (8, 9), (3, 11), (12, 4)]
    path = [100 + (37 * i) % 200 for i in range(200)]             # a path whose ids jump about
    edges += list(zip(path[:-1], path[1:]))[::-1]                 # rows reversed: it crosses both workers
    edges += [(999, 500 + i) for i in range(60)]                  # a star, its hub the largest id
    csv = tmp_path / "edges.csv"
    csv.write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in edges))
    out = tmp_path / "cc"
    done = subprocess.run([sys.executable, str(ROOT / "jobs" / "connected_components.py"), "--edges-path", str(csv),
                           "--out", str(out), "--master", "local-cluster[2,1,1024]"],
                          capture_output=True, text=True, timeout=240, env=env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "272 vertices, 6 components, largest 200 vertices" in done.stdout
    table = pq.read_table(out)
    assert dict(zip(table.column("vertex").to_pylist(), table.column("component").to_pylist())) == components(edges)
