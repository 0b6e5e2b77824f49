"""The Spark jobs: exact results, and spark-submit as the README shows it."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import timely_spark as ts

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "jobs"))

from wordcount import SAMPLE, count_epochs, sample_input  # noqa: E402


def test_wordcount_counts_each_epoch_once_it_is_complete(spark, tmp_path):
    files = sorted(str(p) for p in sample_input(tmp_path / "texts").iterdir())
    parts = ts.spark.run(spark, count_epochs(files), workers=2)
    rows = [r for part in parts for r in part]
    for epoch, text in enumerate(SAMPLE):
        expected = Counter(w for line in [text] * (epoch + 2) for w in line.split())
        assert {w: n for t, w, n, _ in rows if t == epoch} == dict(expected)
    # on each worker, every count of an epoch was emitted before any count of a later epoch
    for part in parts:
        times = [(t, at) for t, w, n, at in part]
        for t1, at1 in times:
            assert all(at1 <= at2 for t2, at2 in times if t2 > t1)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_spark_submit_runs_the_wordcount_job(tmp_path):
    submit = Path(sys.executable).with_name("spark-submit")
    out = tmp_path / "wc"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SPARK_CONF_DIR=str(ROOT / "conf"))
    done = subprocess.run([str(submit), str(ROOT / "jobs" / "wordcount.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "epoch 2: the 12, dog 8, and 4" in done.stdout
    table = pq.read_table(out)
    assert table.num_rows == 25 and sorted(table.column_names) == ["count", "epoch", "word"]
