"""On a real Spark standalone cluster -- a master and two workers in JVMs of their own,
started from the pip package's ``bin/spark-class`` by the test itself (loopback, free
ports, every process ended whatever happens) -- ``spark-submit --master spark://...`` of
the recovery job (``recovery_job.py``: a checkpoint, ``max_attempts=2``, worker 1's Python
process SIGKILLed mid-run) ends with the result of a run without the kill, having
restored the last snapshot."""

import json
import sys
from pathlib import Path

import pytest

from .recovery_job import restored_time
from .standalone import spark_env, standalone_cluster, submit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_spark_submit_to_a_standalone_cluster_restores_after_a_sigkill(tmp_path):
    marker = tmp_path / "killed"
    with standalone_cluster(tmp_path / "cluster", workers=2) as master:
        env = dict(spark_env(tmp_path / "cluster"), CONF=str(ROOT / "conf"), PYTHONPATH=str(ROOT))
        settings = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                    "spark.ui.enabled": "false", "spark.executor.cores": "1", "spark.cores.max": "2",
                    "spark.executor.memory": "512m", "spark.pyspark.python": sys.executable}
        conf = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
        code, out, err = submit(["--master", master, *conf, str(Path(__file__).with_name("recovery_job.py")),
                                 str(tmp_path / "ckpt"), str(marker)], env, 420)
    assert code == 0, err[-4000:]
    assert restored_time(json.loads(out.strip().splitlines()[-1])) > 0      # a snapshot restored
    assert master.startswith("spark://127.0.0.1:")
