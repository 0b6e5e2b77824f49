"""Shipping the package to executors whose Python does not have it: the guide's own
recipe lines, run on local-cluster (separate executor JVMs and Pythons), and, shipping
nothing, the one clear error saying so.  The recipes run the components job as a program
(``jobs/examples/connected_components.py``) on a graph whose components cross both workers.

The recipes are the ``bash`` block of the guide's "Shipping the package to a cluster" (docs/running.md),
run as written by bash in a copy of the repository (what a fresh clone holds), after
these replacements only, each of which must find its text (see ``GUIDE_REWRITES``):
the cluster's master URL becomes ``local-cluster[2,2,1024]``, the ``hdfs://`` paths
local ones, and the second recipe's elided job arguments (``...``) the first's.  The
environment plays the cluster's part: ``PYSPARK_PYTHON`` is a Python with pyarrow,
pandas and cloudpickle but not timely_spark (the executors'), and
``PYSPARK_DRIVER_PYTHON`` the user's own Python, which has it.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timely_spark.graph import union_find

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = Path(sys.executable).with_name("spark-submit")
_PATH = [100 + (37 * i) % 200 for i in range(200)]                # a path whose ids jump about
EDGES = ([(1, 2), (2, 3), (4, 5), (5, 6), (7, 7), (8, 9), (3, 11), (12, 4)]
         + list(zip(_PATH[:-1], _PATH[1:]))[::-1]                  # rows reversed: it crosses both workers
         + [(999, 500 + i) for i in range(60)])                    # a star, its hub the largest id

GUIDE_REWRITES = {
    "spark://host:7077": shlex.quote("local-cluster[2,2,1024]"),
    "hdfs:///graphs/edges.parquet": "edges.parquet",
    "hdfs:///out/cc": "out/cc",
    "jobs/examples/connected_components.py ...":
        "jobs/examples/connected_components.py --edges-path edges.parquet --out out/cc",
}

def guide_recipes():
    """The shipping section's bash block as recipes: each ``# N.`` comment starts one;
    its commands are the lines below it, backslash continuations joined."""
    guide = (ROOT / "docs" / "running.md").read_text()
    section = guide.split("## Shipping the package to a cluster", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(block) == 1, "the guide's shipping section has one bash block"
    recipes: list[list[str]] = []
    for line in block[0].replace("\\\n", " ").splitlines():
        if line.startswith("#"):
            recipes.append([])
        elif line.strip():
            recipes[-1].append(line)
    return recipes


def rewritten(script):
    for text, replacement in GUIDE_REWRITES.items():
        script = script.replace(text, replacement)
    return script


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
                           capture_output=True, text=True, cwd=root, env=cluster_env(str(python)))
    assert "No module named 'timely_spark'" in check.stderr        # the premise of these tests
    return str(python)


def cluster_env(executor_python):
    """A user's shell: their Python (with the package) first on PATH and as the driver's, the
    cluster's executor Python without it, nothing of this checkout on the path."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_DRIVER_PYTHON=sys.executable,
               PYSPARK_PYTHON=executor_python, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    for name in ("SPARK_CONF_DIR", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


def run_recipe(number, tmp_path, executor_python, timeout):
    """Runs the guide's recipe ``number`` in a fresh copy of the repository; returns the copy."""
    clone = tmp_path / "clone"
    for name in ("timely_spark", "jobs", "conf"):
        shutil.copytree(ROOT / name, clone / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, clone / name)
    pq.write_table(pa.table({"src": [a for a, _ in EDGES], "dst": [b for _, b in EDGES]}), clone / "edges.parquet")
    script = rewritten("\n".join(guide_recipes()[number - 1]))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                          timeout=timeout, env=cluster_env(executor_python), cwd=clone)
    assert done.returncode == 0, f"{script}\n{done.stderr[-3000:]}"
    assert "272 vertices, 6 components, largest 200 vertices" in done.stdout
    table = pq.read_table(clone / "out" / "cc")
    assert dict(zip(table.column("vertex").to_pylist(), table.column("component").to_pylist())) == union_find(EDGES)
    return clone


def test_the_guide_recipes_are_found_and_rewritten():
    recipes = guide_recipes()
    assert len(recipes) == 2 and all(recipes)
    script = "\n".join(line for recipe in recipes for line in recipe)
    for text in GUIDE_REWRITES:
        assert text in script, f"the guide's shipping recipes no longer hold {text!r}: update GUIDE_REWRITES"
    assert "hdfs:" not in rewritten(script) and "spark://" not in rewritten(script)


@pytest.mark.slow
@pytest.mark.timeout(800)
def test_the_guide_zip_recipe(tmp_path, bare_python):
    clone = run_recipe(2, tmp_path, bare_python, timeout=700)
    assert (clone / "timely_spark.zip").exists()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_guide_packed_environment_recipe(tmp_path, bare_python):
    """venv-pack'ed with pyspark and all (about 570 MB), unpacked by both executors: minutes."""
    clone = run_recipe(1, tmp_path, bare_python, timeout=1100)
    assert (clone / "env.tar.gz").exists()


FAILING_JOB = """
import json
import sys
sys.path.insert(0, {root!r})          # the driver runs this checkout's package; the executors have none
import timely_spark as ts
spark = ts.spark.get_session("shipping nothing")
report = {{}}
try:
    ts.spark.run(spark, lambda w: w.index, workers=2)
except Exception as exc:
    report["run_error"] = [type(exc).__name__, str(exc)]
try:
    ts.spark.transform(spark.range(10).repartition(2), lambda scope, s: s, "id long").collect()
except Exception as exc:
    report["transform_error"] = [type(exc).__name__, str(exc)]
print("REPORT " + json.dumps(report), flush=True)
ts.spark.run(spark, lambda w: w.index, workers=2)
"""


@pytest.mark.slow
@pytest.mark.timeout(800)
def test_executors_without_the_package_give_one_clear_error_shown_first_not_a_java_trace(tmp_path, bare_python):
    """Shipping nothing: ``run`` and ``transform`` each raise one SparkSetupError saying so; and
    what a user sees of it uncaught, submitted with the repository's settings
    (SPARK_CONF_DIR=conf, as the jobs are): no Java stack trace before the message, neither
    Spark's log of the failed task nor a Py4JJavaError as its cause.  One application for both."""
    job = tmp_path / "failing_job.py"
    job.write_text(FAILING_JOB.format(root=str(ROOT)))
    settings = ["--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.ui.enabled=false",
                "--conf", f"spark.pyspark.driver.python={sys.executable}"]   # the executors': PYSPARK_PYTHON
    done = subprocess.run([str(SUBMIT), "--master", "local-cluster[2,2,1024]", *settings, str(job)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=700,
                          env=dict(cluster_env(bare_python), SPARK_CONF_DIR=str(ROOT / "conf")), cwd=tmp_path)
    assert done.returncode != 0
    lines = done.stdout.splitlines()
    reports = [line for line in lines if line.startswith("REPORT ")]
    assert reports, done.stdout[-3000:]
    report = json.loads(reports[-1][len("REPORT "):])
    for key in ("run_error", "transform_error"):
        kind, message = report[key]
        assert kind == "SparkSetupError"
        assert message.startswith("the executors cannot import timely_spark")
        assert bare_python in message and "Shipping the package to a cluster" in message
    message = [i for i, line in enumerate(lines) if "SparkSetupError: the executors cannot import" in line]
    assert message, done.stdout[-3000:]
    before = lines[:message[0]]
    assert not [line for line in before if line.startswith("\tat ")], "\n".join(before)
    traceback = before[max(i for i, line in enumerate(before) if line.startswith("Traceback")):]
    # the job's frame and the package's own (through its attempts loop and PySpark's collect), not Spark's error
    assert not [line for line in traceback if "Py4JJavaError" in line or "org.apache" in line], "\n".join(traceback)
    assert len(traceback) <= 20, "\n".join(traceback)
