"""Every Python example in the README runs."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_readme_has_examples_and_the_ci_command():
    assert len(BLOCKS) >= 3
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    command = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]' && ruff check . && "
               "mypy timely_spark && python -m pytest")
    assert command in README and command in ci
