"""On a real Spark standalone cluster -- a master and two workers in JVMs of their own,
started from the pip package's ``bin/spark-class`` by the test itself (loopback, free
ports, every process ended whatever happens) -- ``spark-submit --master spark://...`` of
``jobs/examples/components_recovery.py`` (incremental components captured into a
Parquet log, a checkpoint, ``max_attempts=2``, the last worker's Python process
SIGKILLed mid-run) restores the last snapshot and leaves the log, row for row, that the
same job leaves without a kill on the test session's ``local[2]`` (its :func:`run`, with
the same arguments): every epoch's changes exactly once."""

import json
import sys
from pathlib import Path

import pytest

from ..example_jobs import example_job
from .standalone import spark_env, standalone_cluster, submit

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "examples" / "components_recovery.py"
KILL_AT = 6
SUBMIT_TIMEOUT = 300.0     # seconds a spark-submit of the job may take (its run: 180)


def run_job(master: str, env: dict, out: Path, *extra: str) -> dict:
    settings = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.pyspark.python": sys.executable}
    if master.startswith("spark://"):
        settings.update({"spark.executor.cores": "1", "spark.cores.max": "2", "spark.executor.memory": "512m"})
    conf = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
    code, stdout, stderr = submit(["--master", master, *conf, str(JOB), "--out", str(out), "--timeout", "180",
                                   *extra], env, SUBMIT_TIMEOUT)
    assert code == 0, f"{stdout[-2000:]}\n{stderr[-4000:]}"
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_spark_submit_to_a_standalone_cluster_restores_after_a_sigkill(spark, tmp_path):
    env = dict(spark_env(tmp_path / "cluster"), PYTHONPATH=str(ROOT))
    with standalone_cluster(tmp_path / "cluster", workers=2) as master:
        assert master.startswith("spark://127.0.0.1:")
        got = run_job(master, env, tmp_path / "cluster-out", "--checkpoint", str(tmp_path / "ckpt"),
                      "--snapshot-every", "5", "--max-attempts", "2", "--kill-at", str(KILL_AT))
    job = example_job("components_recovery")
    report = job.run(spark, job.parse(["--out", str(tmp_path / "local-out"), "--timeout", "180"]))
    want = json.loads(json.dumps(report))                           # as the submitted job prints it
    assert got["killed"] and got["attempts"] == 2                   # the kill happened; the retry finished
    restored = set(got["restored"])
    assert len(restored) == 1 and 0 < restored.pop() <= KILL_AT      # every worker restored one snapshot
    assert want["attempts"] == 1 and not want["killed"]
    assert got["rows"] == want["rows"]                              # the same log, every epoch's rows once
    assert got["components"] == want["components"] and got["vertices"] == want["vertices"] > 100
