"""A collected result too large for the driver is the package's SparkMemoryError, saying
how large and what to do -- not a raw Py4JJavaError (or a driver that runs out of heap)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from timely_spark.errors import SparkMemoryError
from timely_spark.spark.job_errors import timely_cause

ROOT = Path(__file__).resolve().parents[2]

JOB = """
import sys
import timely_spark as ts

spark = ts.spark.get_session("result size", master="local[2]", extra={"spark.driver.maxResultSize": "1m"})
print("LIMIT", spark.sparkContext.getConf().get("spark.driver.maxResultSize"), flush=True)
out = ts.spark.transform(spark.range(0, 400_000, numPartitions=2), lambda scope, s: s, "id long")
for how in ("collect", "toArrow"):
    try:
        getattr(out, how)()
    except Exception as exc:
        print("RAISED", how, type(exc).__name__, str(exc).replace("\\n", " "), flush=True)
print("WRITTEN", out.write.parquet(sys.argv[1]) or spark.read.parquet(sys.argv[1]).count(), flush=True)
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_result_over_max_result_size_says_its_size_and_what_to_do(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(ROOT))
    env.pop("SPARK_CONF_DIR", None)
    done = subprocess.run([sys.executable, str(job), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=240, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "LIMIT 1m" in lines                                  # the user's explicit setting, kept
    raised = [line for line in lines if line.startswith("RAISED")]
    assert [line.split()[1:3] for line in raised] == [["collect", "SparkMemoryError"], ["toArrow", "SparkMemoryError"]]
    for line in raised:
        assert "larger than spark.driver.maxResultSize (1024.0 KiB): " in line and " KiB in the 2 task results" in line
        assert "df.write.parquet(path)" in line and "raise spark.driver.maxResultSize" in line
    assert "WRITTEN 400000" in lines                            # what the error advises works


def test_a_jvm_out_of_memory_is_the_packages_error_with_what_to_do():
    spark = RuntimeError("An error occurred while calling o91.collectAsArrowToPython.\n"
                         ": java.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.util.Arrays.copyOf")
    found = timely_cause(spark)
    assert isinstance(found, SparkMemoryError) and isinstance(found, MemoryError)
    assert str(found).startswith("Spark ran out of memory (java.lang.OutOfMemoryError: Java heap space): ")
    assert "df.write.parquet(path)" in str(found) and "raise spark.driver.memory" in str(found)
