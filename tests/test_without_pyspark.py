"""The engine needs no PySpark: ``import timely_spark`` and ``ts.execute`` (threads and
processes) work in a Python where importing pyspark fails, and with PySpark installed
the package's import does not load ``pyspark.sql`` until ``ts.spark`` is used."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Put first on PYTHONPATH, so that every process of the run (the worker processes too)
# finds no pyspark, as in a Python where it is not installed.
BLOCKER = '''
import sys

class NoPySpark:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "py4j"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoPySpark())
'''

ENGINE = '''
import sys
import timely_spark as ts

def work(worker):
    seen = []
    def build(scope):
        inp, stream = scope.new_input()
        return inp, stream.exchange(lambda x: x).inspect(seen.append).probe()
    inp, probe = worker.dataflow(build)
    if worker.index == 0:
        inp.send_batch(range(8))
    inp.advance_to(1)
    worker.step_while(lambda: probe.less_than(inp.time), timeout=30)
    return sorted(seen)

expected = [[0, 2, 4, 6], [1, 3, 5, 7]]
assert ts.execute(work, threads=2, timeout=60) == expected
assert ts.execute(work, processes=2, timeout=60) == expected
assert not [m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j")]
try:
    ts.spark
except ImportError as exc:
    print("SPARK:", exc)
print("ENGINE OK")
'''


def _python(code, tmp_path, blocked):
    path = [str(ROOT)]
    if blocked:
        (tmp_path / "sitecustomize.py").write_text(BLOCKER)
        path.insert(0, str(tmp_path))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                          env=env, cwd=tmp_path)


def test_the_engine_runs_where_pyspark_cannot_be_imported(tmp_path):
    check = _python("import pyspark", tmp_path, blocked=True)
    assert "No module named 'pyspark'" in check.stderr                  # the premise
    done = _python(ENGINE, tmp_path, blocked=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ENGINE OK" in done.stdout
    assert "pip install pyspark" in done.stdout                         # ts.spark says what is missing


def test_importing_the_package_does_not_import_pyspark_sql(tmp_path):
    code = ("import sys\nimport timely_spark as ts\nprint('before', 'pyspark.sql' in sys.modules)\n"
            "ts.spark.run\nprint('after', 'pyspark.sql' in sys.modules)\n")
    done = _python(code, tmp_path, blocked=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["before", "False", "after", "True"]   # ts.spark still works, on first use
