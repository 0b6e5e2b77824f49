"""ts.spark.get_session and register with a session that exists already: the "timely"
format registered once per session, silently; what could not be applied said."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.spark.datasource import registered

ROOT = Path(__file__).resolve().parents[2]


def test_an_active_session_with_another_master_is_returned_with_a_warning(spark):
    with pytest.warns(UserWarning, match=r"spark\.master=local\[2\]: spark\.master=local\[1\] not applied"):
        got = ts.spark.get_session("again", master="local[1]")
    assert got.sparkContext.master == "local[2]"
    with pytest.warns(UserWarning, match=r"spark\.executor\.memory=None: spark\.executor\.memory=3g not applied"):
        ts.spark.get_session("again", extra={"spark.executor.memory": "3g"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # what the session has already is no news
        same = ts.spark.get_session("again", master="local[2]", conf_dir=ROOT / "conf",
                                    extra={"spark.sql.shuffle.partitions": "4"})
    assert same.sparkContext.master == "local[2]"


def test_registered_asks_the_session(spark):
    assert registered(spark)                       # get_session registered it
    assert not registered(spark.newSession())      # a new session has data sources of its own


JOB = """
import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventWriter, Progress

writer = ParquetEventWriter({log!r}, 0, 1, flush_seconds=0.0)
writer.push(Messages(0, [{{"x": 1}}]))
writer.push(Progress([(0, -1)]))
writer.close()
spark = ts.spark.get_session("register once", master="local[1]", conf_dir={conf!r})
for _ in range(2):
    ts.spark.register(spark)
    print("ROWS", ts.spark.read_event_log(spark, {log!r}).count(), flush=True)
ts.spark.get_session("register once", master="local[1]", conf_dir={conf!r})
spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getLogger("probe").warn("PROBE")
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_the_format_is_registered_once_per_session_without_a_warning(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(JOB.format(log=str(tmp_path / "log"), conf=str(ROOT / "conf")))
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, timeout=150, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["ROWS", "1", "ROWS", "1"]
    assert "WARN probe: PROBE" in done.stderr                # Spark's warnings do reach this stderr
    assert "replaced a previously registered data source" not in done.stderr, done.stderr[-3000:]
