"""The notebooks run clean from top to bottom — no errors, no Spark log lines or progress bars
in their outputs, the plots they promise drawn — and are committed without outputs."""

import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_three_notebooks():
    assert [p.name for p in NOTEBOOKS] == ["01_getting_started.ipynb", "02_progress_tracking.ipynb",
                                           "03_on_spark.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip outputs"


NOISE = re.compile(r"\[Stage \d+|log4j|Setting default log level|setLogLevel"     # banner, progress bars
                   r"|^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN)")              # Spark's INFO and WARN lines
PLOTS = {"02_progress_tracking": 2}     # notebook: the plots (image/png outputs) it draws


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_clean(path):
    nb = nbformat.read(path, as_version=4)
    # The kernel as in Jupyter: without pytest's variable, which turns off ipykernel's capture of
    # what subprocesses (Spark's JVM) write to the kernel's stdout and stderr.
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_CURRENT_TEST"}
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute(env=env)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert text   # the notebook printed something (its cells really ran)
    noise = sorted({line for line in text.splitlines() if NOISE.search(line)})
    assert not noise, f"{path.name} shows Spark's logging or progress bars: {noise[:5]}"
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == PLOTS.get(path.stem, 0), f"{path.name} drew {len(images)} plots"
