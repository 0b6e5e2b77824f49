"""Ctrl-C on the driver during a long ts.spark.run cancels the barrier job promptly and
leaves no Python worker behind.  The driver is a real subprocess sent a real SIGINT."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DRIVER = r"""
import os, sys, time
import timely_spark as ts

spark = ts.spark.get_session("interrupt", master="local[2]", conf_dir=sys.argv[2])
folder = sys.argv[1]

def work(worker):
    with open(os.path.join(folder, f"{worker.index}.pid"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)                       # a worker busy for ten minutes

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False

try:
    ts.spark.run(spark, work, workers=2)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 30
    pids = [int(open(os.path.join(folder, f"{i}.pid")).read()) for i in range(2)]
    while (tracker.getActiveJobsIds() or any(alive(p) for p in pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    print("ACTIVE_JOBS", list(tracker.getActiveJobsIds()), flush=True)
    print("WORKERS_ALIVE", [p for p in pids if alive(p)], flush=True)
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_ctrl_c_cancels_the_barrier_job_and_its_workers(tmp_path):
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path), str(ROOT / "conf")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"{i}.pid").exists() for i in range(2)):
            assert proc.poll() is None and time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.2)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert "INTERRUPTED" in out, err[-3000:]
    assert "ACTIVE_JOBS []" in out and "WORKERS_ALIVE []" in out, out + err[-3000:]
    for i in range(2):
        pid = int((tmp_path / f"{i}.pid").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
