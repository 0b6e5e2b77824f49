"""The Spark jobs, run as programs the way the README shows them: exact results."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import timely_spark as ts

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = [                              # what jobs/wordcount.py generates without --input
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
    done = subprocess.run([str(submit), str(ROOT / "jobs" / "wordcount.py"), "--out", str(out)],
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
    done = subprocess.run([sys.executable, str(ROOT / "jobs" / "stream_to_parquet.py"), "--out", str(out),
                           "--epochs", "3", "--views", "50", "--open"],
                          capture_output=True, text=True, timeout=240, env=env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "epoch 0: 100 views" in done.stdout and "epoch 2" not in done.stdout
    everything = ts.spark.read_event_log(spark, out, complete_only=False)
    assert sorted(r["time"] for r in everything.select("time").distinct().collect()) == [0, 1, 2]
    ts.spark.read_event_log(spark, out).createOrReplaceTempView("views")
    rows = spark.sql("SELECT time AS epoch, count(*) AS views FROM views GROUP BY time ORDER BY time").collect()
    assert [(r["epoch"], r["views"]) for r in rows] == [(0, 100), (1, 100)]     # epoch 2 is still open
