"""The example jobs (``jobs/examples/NAME.py``) as modules, for tests that call their functions
in the test session: loaded from their files, not registered in ``sys.modules`` (so cloudpickle
ships their functions to Spark's workers by value)."""

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "jobs" / "examples"


def example_job(name: str) -> ModuleType:
    """``jobs/examples/<name>.py``, loaded."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job
