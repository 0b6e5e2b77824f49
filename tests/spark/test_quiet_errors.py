"""A failing action prints its error, not hundreds of lines before it: the package's
defaults in a fresh ``get_session``, ``ts.spark.quiet`` on a session with logging of its
own, and a user's explicit settings winning over the defaults.  Each in a subprocess
(a fresh JVM), counting the lines of stderr."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MOST_LINES = 20

JOB = """
import sys
import timely_spark as ts

spark = ts.spark.get_session("quiet errors", master="local[2]", conf_dir={conf_dir!r})
for key in ("spark.ui.enabled", "spark.ui.showConsoleProgress", "spark.sql.shuffle.partitions",
            "spark.driver.maxResultSize"):
    print("SETTING", key, spark.conf.get(key), flush=True)


def a_transform_fails(df):
    ts.spark.transform(df, lambda scope, rows: rows.map(lambda r: {{"x": 1 // (scope.index - 1)}}),
                       "x long", rows=True).collect()


def a_task_fails(df):           # plain Spark: its task's error logged by the executor and the scheduler
    df.rdd.map(lambda r: 1 // (r["x"] - 1)).collect()


def fail(label, action):
    df = spark.createDataFrame([(i,) for i in range(4)], "x long").repartition(2)
    print("BEGIN", label, file=sys.stderr, flush=True)
    try:
        action(df)
    except Exception as exc:
        print("RAISED", label, type(exc).__name__, "at org.apache.spark" in str(exc.__cause__), file=sys.stderr,
              flush=True)


fail("first", a_transform_fails)
if {quiet!r}:
    fail("task", a_task_fails)
    ts.spark.quiet(spark)
    fail("quieted", a_transform_fails)
    fail("quieted-task", a_task_fails)
spark.stop()
"""


def _run(tmp_path, conf_dir=None, quiet=False):
    job = tmp_path / "job.py"
    job.write_text(JOB.format(conf_dir=conf_dir, quiet=quiet))
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(ROOT))
    env.pop("SPARK_CONF_DIR", None)
    done = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    settings = {line.split()[1]: line.split()[2] for line in done.stdout.splitlines() if line.startswith("SETTING")}
    return settings, done.stderr.splitlines()


def _lines_before_the_error(stderr, label, transform=True):
    begin = stderr.index(f"BEGIN {label}")
    raised = next(i for i, line in enumerate(stderr) if line.split()[:2] == ["RAISED", label])
    if transform:
        assert stderr[raised].split()[2:] == ["WorkerError", "True"], stderr[raised]    # the Java detail kept
    return raised - begin - 1


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_failing_transform_in_a_fresh_session_prints_few_lines_before_its_error(tmp_path):
    settings, stderr = _run(tmp_path)
    assert _lines_before_the_error(stderr, "first") <= MOST_LINES, "\n".join(stderr)
    assert settings == {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                        "spark.sql.shuffle.partitions": "2",                   # the task slots of local[2]
                        "spark.driver.maxResultSize": "170m"}                  # a sixth of the 1 GiB driver
    assert not any("log4j" in line or "INFO" in line for line in stderr), "\n".join(stderr)   # no banners


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_explicit_settings_and_logging_win_and_quiet_makes_them_quiet(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions 7\nspark.ui.showConsoleProgress true\n")
    (conf / "log4j2.properties").write_text(
        "rootLogger.level = warn\nrootLogger.appenderRef.stdout.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\nappender.console.target = SYSTEM_ERR\n")
    settings, stderr = _run(tmp_path, conf_dir=str(conf), quiet=True)
    assert settings["spark.sql.shuffle.partitions"] == "7" and settings["spark.ui.showConsoleProgress"] == "true"
    assert settings["spark.ui.enabled"] == "false"                             # what they did not set: the default
    # their logging: Spark's every trace (a transform's own failure may print none: the driver cancels
    # its stage at the worker's report, and the kill can reach the task before its error)
    assert _lines_before_the_error(stderr, "first") >= 0
    assert _lines_before_the_error(stderr, "task", transform=False) > 3 * MOST_LINES
    assert _lines_before_the_error(stderr, "quieted") <= MOST_LINES, "\n".join(stderr)
    assert _lines_before_the_error(stderr, "quieted-task", transform=False) <= MOST_LINES, "\n".join(stderr)
