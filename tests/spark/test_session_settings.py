"""ts.spark.get_session never overrides what spark-submit was given, and adds the package's quiet defaults."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

JOB = """
import timely_spark as ts
spark = ts.spark.get_session("settings", conf_dir="{conf}")
print("MASTER", spark.sparkContext.master)
print("PARTITIONS", spark.conf.get("spark.sql.shuffle.partitions"))
print("ARROW", spark.conf.get("spark.sql.execution.arrow.pyspark.enabled"))
print("UI", spark.conf.get("spark.ui.enabled"))
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_spark_submit_master_and_conf_win_over_the_conf_file(tmp_path):
    job = tmp_path / "settings_job.py"
    job.write_text(JOB.format(conf=ROOT / "conf"))        # the conf file says local[2] and 4 partitions
    submit = Path(sys.executable).with_name("spark-submit")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("SPARK_CONF_DIR", None)
    done = subprocess.run([str(submit), "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=7",
                           "--conf", "spark.driver.host=127.0.0.1", str(job)],
                          capture_output=True, text=True, timeout=150, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ")[0].isupper())
    assert lines["MASTER"] == "local[1]"
    assert lines["PARTITIONS"] == "7"
    assert lines["ARROW"] == "true"                      # what nobody set comes from the conf file
    assert lines["UI"] == "false"                        # ... or from the package's defaults
    assert " INFO " not in done.stderr, done.stderr[-3000:]   # the package's logging: no INFO banners
