"""The incremental examples in jobs/examples run and check themselves against a
from-scratch reference at every epoch (each asserts it)."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "jobs" / "examples"


@pytest.mark.parametrize("name", ["reachability", "hierarchy_closure", "components", "top3", "last_24_hours"])
def test_an_incremental_example_matches_its_reference_at_every_epoch(name):
    done = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the example prints what it kept"
