"""On a real Spark standalone cluster -- a master and two workers in JVMs of their own,
started from the pip package's ``bin/spark-class`` by the test itself (loopback, free
ports, every process ended whatever happens) -- ``spark-submit --master spark://...`` of
the recovery job (``recovery_job.py``: a checkpoint, ``max_attempts=2``, worker 1's Python
process SIGKILLed mid-run) ends with the result of a run without the kill, having
restored the last snapshot."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .recovery_job import restored_time
from .standalone import SPARK_HOME, spark_env, standalone_cluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_spark_submit_to_a_standalone_cluster_restores_after_a_sigkill(tmp_path):
    marker = tmp_path / "killed"
    with standalone_cluster(tmp_path / "cluster", workers=2) as master:
        env = dict(spark_env(tmp_path / "cluster"), CONF=str(ROOT / "conf"), PYTHONPATH=str(ROOT))
        done = subprocess.run(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master,
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
             "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
             "--conf", "spark.executor.memory=512m", "--conf", f"spark.pyspark.python={sys.executable}",
             str(Path(__file__).with_name("recovery_job.py")), str(tmp_path / "ckpt"), str(marker)],
            capture_output=True, text=True, timeout=420, env=env, start_new_session=True)
    assert done.returncode == 0, done.stderr[-4000:]
    t = restored_time(json.loads(done.stdout.strip().splitlines()[-1]))
    assert f"retrying: it resumes from the snapshot at time {t} committed in" in done.stderr
    assert master.startswith("spark://127.0.0.1:")
