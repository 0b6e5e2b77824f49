"""Spark retries restore from the last committed snapshot: on local-cluster[2,1,1024] a
stateful job with a checkpoint loses one executor's Python worker to SIGKILL mid-run,
and ``max_attempts=2`` finishes with the result of a run without the kill, having
restored.  Runs in a fresh Python process (one SparkContext each)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .recovery_job import restored_time

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_sigkilled_worker_is_restored_from_the_last_snapshot_by_the_retry(tmp_path):
    marker = tmp_path / "killed"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", CONF=str(ROOT / "conf"),
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("recovery_job.py")),
                           str(tmp_path / "ckpt"), str(marker)], capture_output=True, text=True, timeout=360,
                          env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    t = restored_time(json.loads(done.stdout.strip().splitlines()[-1]))
    assert f"retrying: it resumes from the snapshot at time {t} committed in" in done.stderr
    assert 0 < t <= 8                                               # taken before the kill at epoch 7
