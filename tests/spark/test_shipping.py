"""Shipping the package to executors whose Python does not have it, the two ways the
README shows, with spark-submit on local-cluster (separate executor JVMs and Pythons):

* ``--py-files timely_spark.zip`` for executors that have pyarrow, pandas and cloudpickle;
* ``--archives env.tar.gz#environment`` of a venv-pack'ed virtual environment, with
  ``spark.pyspark.python=./environment/bin/python``;

and, shipping nothing, the one clear error saying so."""

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = Path(sys.executable).with_name("spark-submit")

JOB = r"""
import json, os, sys
import timely_spark as ts

spark = ts.spark.get_session("shipping")
report = {}
try:
    for workers in (1, 2, 3):
        stats = {}
        got = ts.spark.run(spark, lambda w: [w.index, w.peers, os.getpid(), sys.executable], workers=workers,
                           stats=stats)
        report[workers] = {"results": got, "met": [t["met_through"] for t in stats["tasks"]]}
    spark.conf.set("spark.timely_spark.rendezvous", "allGather")
    stats = {}
    got = ts.spark.run(spark, lambda w: [w.index, w.peers, os.getpid(), sys.executable], workers=3, stats=stats)
    report["fallback"] = {"results": got, "met": [t["met_through"] for t in stats["tasks"]]}
    spark.conf.unset("spark.timely_spark.rendezvous")
except Exception as exc:
    report["run_error"] = [type(exc).__name__, str(exc)]
try:
    df = spark.range(10).repartition(2)
    report["transform"] = sorted(r["id"] for r in ts.spark.transform(df, lambda scope, s: s, "id long").collect())
except Exception as exc:
    report["transform_error"] = [type(exc).__name__, str(exc)]
print("REPORT " + json.dumps(report))
spark.stop()
"""


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A Python with pyspark's dependencies (pyarrow, pandas, cloudpickle) but not
    timely_spark: a venv whose path holds this one's site-packages as a plain
    directory (its .pth files, among them the editable install's, are not read)."""
    root = tmp_path_factory.mktemp("bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=60)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    check = subprocess.run([str(python), "-c", "import pyarrow, pandas, cloudpickle\nimport timely_spark"],
                           capture_output=True, text=True, cwd=root, env=_env())
    assert "No module named 'timely_spark'" in check.stderr        # the premise of these tests
    return str(python)


def _env():
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_DRIVER_PYTHON=sys.executable)
    for name in ("SPARK_CONF_DIR", "PYTHONPATH", "PYSPARK_PYTHON"):
        env.pop(name, None)
    return env


def submit(tmp_path, *args):
    job = tmp_path / "shipping_job.py"
    job.write_text(JOB)
    settings = {"spark.driver.host": "127.0.0.1", "spark.ui.enabled": "false",
                "spark.pyspark.driver.python": sys.executable}       # the driver runs this Python
    conf = [part for key, value in settings.items() for part in ("--conf", f"{key}={value}")]
    done = subprocess.run([str(SUBMIT), "--master", "local-cluster[2,2,1024]", *conf, *args, str(job)],
                          capture_output=True, text=True, timeout=400, env=_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("REPORT ")][-1]
    return json.loads(line[len("REPORT "):])


def assert_ran_on_separate_executors(report, executor_python):
    for workers in ("1", "2", "3", "fallback"):
        results = report[workers]["results"]
        count = 3 if workers == "fallback" else int(workers)
        assert [r[:2] for r in results] == [[i, count] for i in range(count)]
        assert all(executor_python(r[3]) for r in results)
    assert len({r[2] for r in report["3"]["results"]}) >= 2               # three workers, two executor processes
    assert report["3"]["met"] == ["driver"] * 3 and report["fallback"]["met"] == ["allGather"] * 3
    assert report["transform"] == list(range(10))


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_executors_without_the_package_give_one_clear_error(tmp_path, bare_python):
    report = submit(tmp_path, "--conf", f"spark.pyspark.python={bare_python}")
    for key in ("run_error", "transform_error"):
        kind, message = report[key]
        assert kind == "SparkSetupError"
        assert message.startswith("the executors cannot import timely_spark")
        assert bare_python in message and "Shipping the package to a cluster" in message


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_a_zip_through_py_files(tmp_path, bare_python):
    archive = tmp_path / "timely_spark.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in (ROOT / "timely_spark").rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path, path.relative_to(ROOT))
    report = submit(tmp_path, "--py-files", str(archive), "--conf", f"spark.pyspark.python={bare_python}")
    assert_ran_on_separate_executors(report, lambda executable: executable == bare_python)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_packed_virtual_environment_through_archives(tmp_path):
    venv = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["pyarrow", "pandas<3", "cloudpickle"], check=True, timeout=300)
    subprocess.run(pip + ["--no-deps", str(ROOT)], check=True, timeout=300)
    packed = tmp_path / "env.tar.gz"
    subprocess.run([str(Path(sys.executable).with_name("venv-pack")), "-p", str(venv), "-o", str(packed), "-q"],
                   check=True, timeout=300)
    report = submit(tmp_path, "--archives", f"{packed}#environment",
                    "--conf", "spark.pyspark.python=./environment/bin/python")
    assert_ran_on_separate_executors(report, lambda executable: "environment" in executable)


FAILING_JOB = """
import sys
sys.path.insert(0, {root!r})          # the driver runs this checkout's package; the executors have none
import timely_spark as ts
spark = ts.spark.get_session("shipping nothing")
ts.spark.run(spark, lambda w: w.index, workers=2)
"""


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_shipping_nothing_shows_the_error_first_not_a_java_trace(tmp_path, bare_python):
    """What a user sees of an uncaught SparkSetupError, submitted with the repository's
    settings (SPARK_CONF_DIR=conf, as the jobs are): no Java stack trace before the
    message, neither Spark's log of the failed task nor a Py4JJavaError as its cause."""
    job = tmp_path / "failing_job.py"
    job.write_text(FAILING_JOB.format(root=str(ROOT)))
    settings = ["--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.ui.enabled=false",
                "--conf", f"spark.pyspark.driver.python={sys.executable}",
                "--conf", f"spark.pyspark.python={bare_python}"]
    done = subprocess.run([str(SUBMIT), "--master", "local-cluster[2,2,1024]", *settings, str(job)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=400,
                          env=dict(_env(), SPARK_CONF_DIR=str(ROOT / "conf")), cwd=tmp_path)
    assert done.returncode != 0
    lines = done.stdout.splitlines()
    message = [i for i, line in enumerate(lines) if "SparkSetupError: the executors cannot import" in line]
    assert message, done.stdout[-3000:]
    before = lines[:message[0]]
    assert not [line for line in before if line.startswith("\tat ")], "\n".join(before)
    traceback = before[max(i for i, line in enumerate(before) if line.startswith("Traceback")):]
    assert len(traceback) <= 12, "\n".join(traceback)          # the job's line and ours, not Spark's error
