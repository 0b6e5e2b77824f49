"""Preflight errors that need their own SparkSession: run in a fresh Python process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import timely_spark as ts
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.driver.host", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.dynamicAllocation.enabled", "true")
         .config("spark.shuffle.service.enabled", "true").getOrCreate())
try:
    ts.spark.run(spark, lambda w: None, workers=1)
except ts.spark.SparkSetupError as e:
    print("DYNAMIC:", e)
spark.stop()
try:
    ts.spark.run(spark, lambda w: None, workers=1)
except ts.spark.SparkSetupError as e:
    print("STOPPED:", e)
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dynamic_allocation_and_a_stopped_session_are_refused():
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DYNAMIC: barrier execution mode does not support dynamic allocation" in done.stdout
    assert "STOPPED: the Spark session is stopped" in done.stdout
